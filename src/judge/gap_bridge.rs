//! Observation gaps a member's own record bridges.
//!
//! While the observer is blind (a watch broke, faultline moved to another API endpoint),
//! a `never` or `stays` cannot in general be decided: the state may have flipped and
//! flipped back unseen. But some states leave evidence that survives the gap, read from
//! the relist that ends it:
//! - a node's Ready condition carries `lastTransitionTime`, set anew by the kubelet from the
//!   Node it reads back: the same Ready status with the same transition time before and
//!   after the gap means the condition did not change in it (a pod's Ready condition does
//!   not qualify: after the node controller marks it not Ready, the kubelet writes back its
//!   own cached status, old transition time included);
//! - `deletionTimestamp` is never unset: a pod not terminating after the gap was not
//!   terminating in it, and one terminating before still was;
//! - a pod object does not come back once deleted: a pod present after the gap was not gone;
//! - a pod's terminal phases (`Failed`, `Succeeded`) are never left: the same terminal-ness
//!   before and after the gap means it did not change in it;
//! - a pod leaves `Running` other than for a terminal phase only when the kubelet recreates
//!   its sandbox (phase back to `Pending`), and every container it starts again then counts
//!   a restart: the same pod `Running` before and after with the same restart count was
//!   `Running` throughout.
//!
//! For those states (and only those), a gap the member's evidence bridges does not make
//! its verdict undecidable. Anything without such evidence (`Pending`, taints, replica
//! counts) keeps every gap. The one blind spot is a condition that flips twice within the same
//! second as its previous transition (the API keeps whole seconds), which node and pod
//! readiness, driven by probes and grace periods of seconds, do not do.

use super::index::History;
use super::members::{Series, state_at};
use super::truth::Gap;
use crate::experiment::model::{NodeStateMatch, PodStateMatch, StateMatch};

/// The gaps that still hide `state` for a member with this `series`.
pub(super) fn unbridged(gaps: &[Gap], series: &Series, state: &StateMatch) -> Vec<Gap> {
    gaps.iter()
        .filter(|g| !bridged(g, series, state))
        .cloned()
        .collect()
}

fn bridged(gap: &Gap, series: &Series, state: &StateMatch) -> bool {
    if !gap.closed {
        return false;
    }
    match (series, state) {
        (Series::Node(h), StateMatch::Node(s)) if readiness(s) => same(h, gap, |b, a| {
            b.ready == a.ready && b.ready_since.is_some() && b.ready_since == a.ready_since
        }),
        (Series::Pod(h), StateMatch::Pod(PodStateMatch::Terminating)) => {
            same(h, gap, |b, a| b.terminating == a.terminating)
        }
        (Series::Pod(h), StateMatch::Pod(PodStateMatch::Gone)) => same(h, gap, |_, _| true),
        (Series::Pod(h), StateMatch::Pod(PodStateMatch::Running)) => same(h, gap, |b, a| {
            b.phase == a.phase && b.restarts == a.restarts && b.terminating == a.terminating
        }),
        (Series::Pod(h), StateMatch::Pod(PodStateMatch::Failed)) => same(h, gap, |b, a| {
            (b.phase == "Failed") == (a.phase == "Failed")
        }),
        (Series::Pod(h), StateMatch::Pod(PodStateMatch::Terminated)) => {
            same(h, gap, |b, a| terminal(b) == terminal(a))
        }
        _ => false,
    }
}

/// A pod in a phase it can never leave.
fn terminal(p: &crate::timeline::PodState) -> bool {
    matches!(p.phase.as_str(), "Failed" | "Succeeded")
}

/// Node states decided by the Ready condition alone.
fn readiness(s: &NodeStateMatch) -> bool {
    matches!(
        s,
        NodeStateMatch::Ready
            | NodeStateMatch::NotReady
            | NodeStateMatch::Unknown
            | NodeStateMatch::ReadyFalse
    )
}

/// The member existed right before the gap and right after it (after the relist that
/// ended it), and `unchanged(before, after)` holds.
fn same<S>(history: &History<S>, gap: &Gap, unchanged: impl Fn(&S, &S) -> bool) -> bool {
    match (state_at(history, gap.began), state_at(history, gap.ended)) {
        (Some(before), Some(after)) => unchanged(before, after),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{ConditionStatus, NodeState, PodState};
    use chrono::{DateTime, Utc};
    use std::sync::Arc;

    fn at(secs: i64) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0)
    }

    fn node(ready: ConditionStatus, since: Option<DateTime<Utc>>) -> NodeState {
        NodeState {
            ready,
            ready_since: since,
            taints: Vec::new(),
            unschedulable: false,
            zone: None,
            shutting_down: false,
        }
    }

    fn pod(terminating: bool) -> Arc<PodState> {
        in_phase("Running", 0, terminating)
    }

    fn in_phase(phase: &str, restarts: i32, terminating: bool) -> Arc<PodState> {
        Arc::new(PodState {
            phase: phase.to_string(),
            ready: true,
            ready_since: at(0),
            terminating,
            node: Some("n".to_string()),
            restarts,
            owner: None,
            created: at(0),
            unreachable_toleration_secs: Some(300),
            tolerates_unreachable_forever: false,
        })
    }

    fn gap(closed: bool) -> Gap {
        Gap {
            began: 10_000,
            ended: 14_000,
            closed,
            reason: "nodes: endpoint left".to_string(),
        }
    }

    const NOT_READY: StateMatch = StateMatch::Node(NodeStateMatch::NotReady);

    #[test]
    fn a_ready_condition_with_the_same_transition_time_bridges_the_gap() {
        let h = Series::Node(vec![(0, Some(node(ConditionStatus::True, at(-60))))]);
        assert!(unbridged(&[gap(true)], &h, &NOT_READY).is_empty());
    }

    #[test]
    fn a_new_transition_time_after_the_gap_keeps_it() {
        // Ready before and after, but it transitioned in between (NotReady and back).
        let h = Series::Node(vec![
            (0, Some(node(ConditionStatus::True, at(-60)))),
            (14_000, Some(node(ConditionStatus::True, at(12)))),
        ]);
        assert_eq!(unbridged(&[gap(true)], &h, &NOT_READY).len(), 1);
    }

    #[test]
    fn no_evidence_or_no_relist_keeps_the_gap() {
        let without_time = Series::Node(vec![(0, Some(node(ConditionStatus::True, None)))]);
        assert_eq!(unbridged(&[gap(true)], &without_time, &NOT_READY).len(), 1);
        let with_time = Series::Node(vec![(0, Some(node(ConditionStatus::True, at(-60))))]);
        assert_eq!(
            unbridged(&[gap(false)], &with_time, &NOT_READY).len(),
            1,
            "a gap never closed was never relisted"
        );
        let tainted = StateMatch::Node(NodeStateMatch::Tainted {
            key: "k".to_string(),
            effect: None,
        });
        assert_eq!(
            unbridged(&[gap(true)], &with_time, &tainted).len(),
            1,
            "taints carry no evidence"
        );
    }

    #[test]
    fn pod_readiness_is_never_bridged() {
        // The kubelet writes its cached Ready condition back after the node controller
        // marked the pod not Ready: the same transition time proves nothing for pods.
        let steady = Series::Pod(vec![(0, Some(pod(false)))]);
        let not_ready = StateMatch::Pod(PodStateMatch::NotReady);
        assert_eq!(unbridged(&[gap(true)], &steady, &not_ready).len(), 1);
    }

    #[test]
    fn deletion_is_one_way_so_terminating_is_bridged_by_the_state_after() {
        let terminating = StateMatch::Pod(PodStateMatch::Terminating);
        let steady = Series::Pod(vec![(0, Some(pod(false)))]);
        assert!(unbridged(&[gap(true)], &steady, &terminating).is_empty());
        let deleted_in_gap = Series::Pod(vec![(0, Some(pod(false))), (14_000, None)]);
        assert_eq!(
            unbridged(&[gap(true)], &deleted_in_gap, &terminating).len(),
            1
        );
        let began_terminating = Series::Pod(vec![(0, Some(pod(false))), (14_000, Some(pod(true)))]);
        assert_eq!(
            unbridged(&[gap(true)], &began_terminating, &terminating).len(),
            1
        );
    }

    #[test]
    fn the_same_pod_running_with_the_same_restarts_bridges_the_gap() {
        let running = StateMatch::Pod(PodStateMatch::Running);
        let steady = Series::Pod(vec![(0, Some(pod(false)))]);
        assert!(unbridged(&[gap(true)], &steady, &running).is_empty());
        // Its sandbox was recreated in the gap: Pending, containers started again.
        let restarted = Series::Pod(vec![
            (0, Some(in_phase("Running", 0, false))),
            (14_000, Some(in_phase("Running", 1, false))),
        ]);
        assert_eq!(unbridged(&[gap(true)], &restarted, &running).len(), 1);
        let pending_after = Series::Pod(vec![
            (0, Some(in_phase("Running", 0, false))),
            (14_000, Some(in_phase("Pending", 0, false))),
        ]);
        assert_eq!(unbridged(&[gap(true)], &pending_after, &running).len(), 1);
        let deleted_in_gap = Series::Pod(vec![(0, Some(pod(false))), (14_000, None)]);
        assert_eq!(unbridged(&[gap(true)], &deleted_in_gap, &running).len(), 1);
        assert_eq!(
            unbridged(&[gap(false)], &steady, &running).len(),
            1,
            "a gap never closed was never relisted"
        );
        let pending = StateMatch::Pod(PodStateMatch::Pending);
        let waiting = Series::Pod(vec![(0, Some(in_phase("Pending", 0, false)))]);
        assert_eq!(
            unbridged(&[gap(true)], &waiting, &pending).len(),
            1,
            "Pending carries no evidence"
        );
    }

    #[test]
    fn terminal_phases_are_one_way_so_they_are_bridged_by_the_state_after() {
        let failed = StateMatch::Pod(PodStateMatch::Failed);
        let terminated = StateMatch::Pod(PodStateMatch::Terminated);
        let stays_failed = Series::Pod(vec![(0, Some(in_phase("Failed", 0, false)))]);
        assert!(unbridged(&[gap(true)], &stays_failed, &failed).is_empty());
        assert!(unbridged(&[gap(true)], &stays_failed, &terminated).is_empty());
        let running = Series::Pod(vec![(0, Some(pod(false)))]);
        assert!(unbridged(&[gap(true)], &running, &failed).is_empty());
        let failed_in_gap = Series::Pod(vec![
            (0, Some(pod(false))),
            (14_000, Some(in_phase("Failed", 0, false))),
        ]);
        assert_eq!(unbridged(&[gap(true)], &failed_in_gap, &failed).len(), 1);
        assert_eq!(
            unbridged(&[gap(true)], &failed_in_gap, &terminated).len(),
            1
        );
    }
}
