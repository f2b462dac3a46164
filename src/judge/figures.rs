//! Recovery figures: how long each stage of the cluster's reaction took after the first
//! fault, so a run answers "what is our platform recovery budget?" in numbers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::experiment::fault;
use crate::experiment::model::Experiment;
use crate::timeline::{ConditionStatus, Timeline, WorkloadState};

use super::index::TimelineIndex;
use super::members::{first_node, state_at};

/// The taint the node lifecycle controller puts on a node it stopped hearing from.
pub(crate) const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// Milliseconds from the first fault step to each stage of the reaction; `None` = not observed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Figures {
    /// The step the figures are measured from (the first fault step that ran).
    pub fault_step: Option<String>,
    /// To the first target node reporting Ready other than True.
    pub node_not_ready_ms: Option<i64>,
    /// To the first target node carrying the `unreachable` taint.
    pub unreachable_taint_ms: Option<i64>,
    /// To the first pod on a target node becoming Terminating.
    pub first_eviction_ms: Option<i64>,
    /// To the first pod created after the fault being bound to a node outside the targets.
    pub replacement_scheduled_ms: Option<i64>,
    /// To the first such replacement being Ready.
    pub replacement_ready_ms: Option<i64>,
    /// To every workload that became degraded being available again.
    pub workloads_available_ms: Option<i64>,
    /// To every target node that went NotReady being Ready again.
    pub node_ready_again_ms: Option<i64>,
}

impl Figures {
    /// Each figure's key (its field name without `_ms`, as `compare --tolerance` names it)
    /// and its label in reports, in the order the reaction unfolds; [`Figures::values`]
    /// gives the values in the same order.
    pub const KEYS: [(&'static str, &'static str); 7] = [
        ("node_not_ready", "node NotReady"),
        ("unreachable_taint", "unreachable taint"),
        ("first_eviction", "first eviction"),
        ("replacement_scheduled", "replacement scheduled"),
        ("replacement_ready", "replacement Ready"),
        ("workloads_available", "workloads available again"),
        ("node_ready_again", "node Ready again"),
    ];

    /// The values, in the order of [`Figures::KEYS`].
    pub fn values(&self) -> [Option<i64>; 7] {
        [
            self.node_not_ready_ms,
            self.unreachable_taint_ms,
            self.first_eviction_ms,
            self.replacement_scheduled_ms,
            self.replacement_ready_ms,
            self.workloads_available_ms,
            self.node_ready_again_ms,
        ]
    }

    /// The figures as `(label, value)` rows, in the order the reaction unfolds; for reporters.
    pub fn rows(&self) -> Vec<(&'static str, Option<i64>)> {
        Self::KEYS
            .iter()
            .zip(self.values())
            .map(|((_, label), value)| (*label, value))
            .collect()
    }
}

/// Computes the recovery figures of a run.
///
/// The nodes considered are those of the fault step's target (all targets' nodes when the
/// step has none).
pub fn figures(
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
    timeline: &Timeline,
) -> Figures {
    figures_of(exp, targets, &TimelineIndex::of(timeline))
}

/// [`figures`] over a timeline already filed in an index: what a run computes at its end,
/// on the index it judged with, instead of filing its timeline once more.
pub fn figures_of(
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
    index: &TimelineIndex,
) -> Figures {
    // The first fault step issued, in timeline order.
    let faults = || exp.steps.iter().filter(|s| !fault::info(&s.action).repairs);
    let Some((first, t0)) = index.first_issued(faults().map(|s| s.name.as_str())) else {
        return Figures::default();
    };
    let Some(step) = faults().find(|s| s.name == first) else {
        return Figures::default();
    };
    let nodes: Vec<String> = match step.target.as_ref().and_then(|t| targets.get(t)) {
        Some(n) => n.clone(),
        None => targets.values().flatten().cloned().collect(),
    };
    let on_target = |n: Option<&str>| n.is_some_and(|n| nodes.iter().any(|x| x == n));
    let rel = |at: i64| at - t0;

    let mut node_not_ready = None;
    let mut taint = None;
    let mut ready_again: Option<i64> = None;
    let mut all_back = true;
    for n in &nodes {
        let h = index.node(n);
        let down = h.iter().find(|(at, s)| {
            *at >= t0 && s.as_ref().is_some_and(|s| s.ready != ConditionStatus::True)
        });
        if let Some((down_at, _)) = down {
            node_not_ready = min(node_not_ready, rel(*down_at));
            let up = h.iter().find(|(at, s)| {
                at > down_at && s.as_ref().is_some_and(|s| s.ready == ConditionStatus::True)
            });
            match up {
                Some((at, _)) => ready_again = Some(ready_again.unwrap_or(i64::MIN).max(rel(*at))),
                None => all_back = false,
            }
        }
        if let Some((at, _)) = h.iter().find(|(at, s)| {
            *at >= t0
                && s.as_ref()
                    .is_some_and(|s| s.taints.iter().any(|t| t.key == UNREACHABLE_TAINT))
        }) {
            taint = min(taint, rel(*at));
        }
    }

    let mut eviction = None;
    let mut scheduled = None;
    let mut replacement_ready = None;
    for h in index.pods() {
        let first_seen = h.first().map(|(at, _)| *at).unwrap_or(i64::MIN);
        let was_terminating = state_at(h, t0).is_some_and(|s| s.terminating);
        if !was_terminating
            && let Some((at, _)) = h.iter().find(|(at, s)| {
                *at >= t0
                    && s.as_ref()
                        .is_some_and(|s| s.terminating && on_target(s.node.as_deref()))
            })
        {
            eviction = min(eviction, rel(*at));
        }
        if first_seen > t0 && !on_target(first_node(h)) {
            if let Some((at, _)) = h
                .iter()
                .find(|(_, s)| s.as_ref().is_some_and(|s| s.node.is_some()))
            {
                scheduled = min(scheduled, rel(*at));
            }
            if let Some((at, _)) = h
                .iter()
                .find(|(_, s)| s.as_ref().is_some_and(|s| s.ready && !s.terminating))
            {
                replacement_ready = min(replacement_ready, rel(*at));
            }
        }
    }

    Figures {
        fault_step: Some(step.name.clone()),
        node_not_ready_ms: node_not_ready,
        unreachable_taint_ms: taint,
        first_eviction_ms: eviction,
        replacement_scheduled_ms: scheduled,
        replacement_ready_ms: replacement_ready,
        workloads_available_ms: workloads_back(index, t0).map(rel),
        node_ready_again_ms: if all_back { ready_again } else { None },
    }
}

fn min(current: Option<i64>, candidate: i64) -> Option<i64> {
    Some(current.map_or(candidate, |c| c.min(candidate)))
}

/// The moment every workload degraded after `t0` was available again; `None` when none
/// degraded or one never recovered.
fn workloads_back(index: &TimelineIndex, t0: i64) -> Option<i64> {
    let workloads = index.all_workloads().map(|(_, history)| {
        history
            .iter()
            .map(|(at, after)| (*at, after.as_ref().is_some_and(WorkloadState::is_available)))
            .collect::<Vec<_>>()
    });
    let mut latest: Option<i64> = None;
    for changes in workloads {
        let degraded_at_t0 = changes
            .iter()
            .take_while(|(at, _)| *at <= t0)
            .last()
            .is_some_and(|(_, ok)| !ok);
        let degraded = if degraded_at_t0 {
            Some(t0)
        } else {
            changes
                .iter()
                .find(|(at, ok)| *at > t0 && !ok)
                .map(|(at, _)| *at)
        };
        let Some(down) = degraded else { continue };
        let back = changes.iter().find(|(at, ok)| *at > down && *ok)?;
        latest = Some(latest.map_or(back.0, |l| l.max(back.0)));
    }
    latest
}
