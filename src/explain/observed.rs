//! When the run saw each transition the model predicts: the first entry, after the
//! outage began and up to the subject's cut, that shows it.

use std::collections::BTreeSet;
use std::time::Duration;

use super::inputs::at;
use crate::experiment::model::WorkloadRef;
use crate::failure_model::Transition;
use crate::timeline::{ConditionStatus, Entry, Event, NodeState, PodState};

/// The unreachable taint the controller evicts with.
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

fn tainted(state: &NodeState) -> bool {
    state
        .taints
        .iter()
        .any(|t| t.key == UNREACHABLE && t.effect == "NoExecute")
}

/// Whether the entry shows `node` making `transition`.
fn node_shows(e: &Entry, node: &str, transition: Transition) -> bool {
    let Event::Node {
        name,
        before,
        after: Some(after),
    } = &e.event
    else {
        return false;
    };
    if name != node {
        return false;
    }
    let was = |test: &dyn Fn(&NodeState) -> bool| before.as_ref().is_some_and(test);
    match transition {
        Transition::NodeUnknown => {
            after.ready == ConditionStatus::Unknown
                && !was(&|b| b.ready == ConditionStatus::Unknown)
        }
        Transition::NodeTainted => tainted(after) && !was(&tainted),
        Transition::NodeReady => {
            after.ready == ConditionStatus::True && !was(&|b| b.ready == ConditionStatus::True)
        }
        _ => false,
    }
}

/// Whether the entry shows the pod `ns/name` making `transition`. A pod removed outright
/// (force-deleted before anything marked it) is never seen Terminating: its going counts.
fn pod_shows(e: &Entry, subject: &str, transition: Transition) -> bool {
    let Event::Pod { pod, before, after } = &e.event else {
        return false;
    };
    if format!("{}/{}", pod.namespace, pod.name) != subject {
        return false;
    }
    let was = |test: &dyn Fn(&PodState) -> bool| before.as_deref().is_some_and(test);
    match (transition, after) {
        (Transition::PodNotReady, Some(after)) => !after.ready && was(&|b| b.ready),
        (Transition::PodTerminating, Some(after)) => after.terminating && !was(&|b| b.terminating),
        (Transition::PodTerminating, None) => before.as_ref().is_some_and(|b| !b.terminating),
        (Transition::PodRestarted, Some(after)) => was(&|b| after.restarts > b.restarts),
        _ => false,
    }
}

/// The first offset in `[from, cut]` at which the node or pod `subject` makes
/// `transition` (not [`Transition::PodReplaced`]: see [`Replacements`]).
pub(super) fn first(
    entries: &[Entry],
    subject: &str,
    transition: Transition,
    from: Duration,
    cut: Duration,
) -> Option<Duration> {
    // Entries are in offset order: start at `from` without reading what comes before.
    // What was listed before the run began (negative offsets) never counts, even for an
    // outage issued at the very start.
    let start = entries.partition_point(|e| e.offset_ms < 0 || at(e.offset_ms) < from);
    entries[start..]
        .iter()
        .map(|e| (at(e.offset_ms), e))
        .take_while(|(t, _)| *t <= cut)
        .find(|(_, e)| node_shows(e, subject, transition) || pod_shows(e, subject, transition))
        .map(|(t, _)| t)
}

/// New pods of each workload, handed out one per evicted pod in the order they appeared:
/// a workload that lost two pods on the node is replaced by its next two new pods.
pub(super) struct Replacements<'a> {
    entries: &'a [Entry],
    taken: BTreeSet<String>,
}

impl<'a> Replacements<'a> {
    pub(super) fn new(entries: &'a [Entry]) -> Self {
        Replacements {
            entries,
            taken: BTreeSet::new(),
        }
    }

    /// The first pod of `workload` created in `[since, cut]` not handed out yet, and
    /// when it was first seen.
    pub(super) fn next(
        &mut self,
        workload: &WorkloadRef,
        since: Duration,
        cut: Duration,
    ) -> Option<Duration> {
        let found = self
            .entries
            .iter()
            .skip_while(|e| e.offset_ms < 0)
            .map(|e| (at(e.offset_ms), e))
            .skip_while(|(t, _)| *t < since)
            .take_while(|(t, _)| *t <= cut)
            .find_map(|(t, e)| match &e.event {
                Event::Pod {
                    pod,
                    before: None,
                    after: Some(after),
                } if after.owner.as_ref() == Some(workload) && !self.taken.contains(&pod.uid) => {
                    Some((t, pod.uid.clone()))
                }
                _ => None,
            });
        found.map(|(t, uid)| {
            self.taken.insert(uid);
            t
        })
    }
}
