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
//! - a pod object does not come back once deleted: a pod present after the gap was not gone.
//!
//! For those states (and only those), a gap the member's evidence bridges does not make
//! its verdict undecidable. Anything without such evidence (phase, taints, replica counts)
//! keeps every gap. The one blind spot is a condition that flips twice within the same
//! second as its previous transition (the API keeps whole seconds), which node and pod
//! readiness, driven by probes and grace periods of seconds, do not do.

use super::index::History;
use super::members::{Series, state_at};
use super::series::Gap;
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
        _ => false,
    }
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

    fn pod(terminating: bool) -> PodState {
        PodState {
            phase: "Running".to_string(),
            ready: true,
            ready_since: at(0),
            terminating,
            node: Some("n".to_string()),
            restarts: 0,
            owner: None,
            created: at(0),
            unreachable_toleration_secs: Some(300),
            tolerates_unreachable_forever: false,
        }
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
}
