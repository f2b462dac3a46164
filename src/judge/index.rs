//! What the judge reads from a timeline, kept up to date entry by entry.
//!
//! A judgement needs, per expectation, the history of a few objects (the victim node, the
//! pods of one workload), when each step was issued, and the observation gaps. Scanning the
//! whole timeline for them on every tick makes a run's cost grow with the square of its
//! length; this index files each entry once, as it arrives, under the object it is about,
//! so a tick costs what its expectations' members cost, however long the run has been.
//!
//! Entries may arrive slightly out of order (a step stamped before an observation that
//! landed first); [`TimelineIndex::insert`] files them exactly where
//! [`Timeline::insert`](crate::timeline::Timeline::insert) puts them, so an index fed entry
//! by entry judges exactly as the index built from the finished timeline
//! ([`TimelineIndex::of`]); `tests/local/judge_incremental.rs` checks it tick by tick.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::experiment::model::WorkloadRef;
use crate::timeline::{
    Entry, Event, GAP_RELISTED, GapPhase, NodeState, PodId, PodState, RunPhase, StepPhase,
    Timeline, WorkloadState,
};

use super::truth::Gap;

/// Observed states of one object: `(offset, state)`, `None` = the object was gone.
pub(super) type History<S> = Vec<(i64, Option<S>)>;

/// The timeline filed by object, for the judge: histories of nodes, pods, workloads and
/// probes, when each step was issued, the observation gaps, and how far it reaches.
///
/// The runner keeps one beside its timeline and inserts every entry into both, so each
/// tick of a live judgement starts from what is already filed.
#[derive(Debug, Clone, Default)]
pub struct TimelineIndex {
    /// Each step's first issue: its offset, and the arrival of its entry (which orders
    /// entries of equal offsets, as on the timeline).
    steps: HashMap<String, (i64, usize)>,
    nodes: HashMap<String, History<NodeState>>,
    /// Nodes whose latest state is not Ready (or gone): all that a node abort condition
    /// needs to look at on each tick, rather than every node of a 5,000-node cluster.
    not_ready: BTreeSet<String>,
    workloads: HashMap<WorkloadRef, History<WorkloadState>>,
    probes: HashMap<String, History<bool>>,
    /// Each probe's count of failed tries at its changes, where the record has them.
    probe_failed: HashMap<String, Vec<(i64, u64)>>,
    /// Every pod's identity and history, in order of first sight; `slots` finds a pod.
    pods: Vec<(Arc<PodId>, History<Arc<PodState>>)>,
    slots: HashMap<Arc<PodId>, usize>,
    /// Pods that ever had each workload as owner, in [`PodId`] order.
    owned: HashMap<WorkloadRef, BTreeMap<Arc<PodId>, usize>>,
    /// Pods that were ever on a node while owned by a workload: who can be an existing pod
    /// of the workload `on` that node.
    owned_on: HashMap<(WorkloadRef, String), Vec<usize>>,
    /// Per workload, its pods by the offset they were first seen: who can be a
    /// replacement (first seen after `since`) without looking at the others.
    first_seen: HashMap<WorkloadRef, BTreeSet<(i64, usize)>>,
    /// The workloads each pod slot was ever owned by (nearly always one).
    owners: Vec<Vec<WorkloadRef>>,
    /// Gap entries in timeline order: `(offset, source, phase, reason)`.
    gap_entries: Vec<(i64, String, GapPhase, String)>,
    /// faultline's health check of the API server: answered or not.
    api: History<bool>,
    /// Each abort query's answers: the deciding value (`None`: no data) and what was said.
    queries: HashMap<String, History<(Option<f64>, String)>>,
    /// Faults that did not take effect or were undone behind faultline's back, in order.
    fault_problems: Vec<FaultProblem>,
    /// The observer said it had every first list (`run`/`observer-ready`).
    observer_ready: bool,
    /// The experiment's `at: 0s`, once it started (`run`/`started`).
    zero_ms: Option<i64>,
    last_ms: Option<i64>,
    len: usize,
}

impl TimelineIndex {
    /// An empty index, for a run that has not observed anything yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The index of a finished (or recorded) timeline.
    pub fn of(timeline: &Timeline) -> Self {
        let mut index = Self::new();
        for entry in &timeline.entries {
            index.insert(entry);
        }
        index
    }

    /// Files one entry, where [`Timeline::insert`] places it: after every entry with the
    /// same or an earlier offset.
    pub fn insert(&mut self, entry: &Entry) {
        let at = entry.offset_ms;
        self.len += 1;
        self.last_ms = Some(self.last_ms.map_or(at, |m| m.max(at)));
        match &entry.event {
            Event::Node { name, after, .. } => {
                let h = self.nodes.entry(name.clone()).or_default();
                insert_sorted(h, at, after.clone());
                let ready = h.last().is_some_and(|(_, s)| {
                    s.as_ref()
                        .is_some_and(|s| s.ready == crate::timeline::ConditionStatus::True)
                });
                if ready {
                    self.not_ready.remove(name);
                } else if !self.not_ready.contains(name) {
                    self.not_ready.insert(name.clone());
                }
            }
            Event::Pod { pod, after, .. } => self.insert_pod(pod, at, after.as_ref()),
            Event::Workload {
                workload, after, ..
            } => {
                let h = self.workloads.entry(workload.clone()).or_default();
                insert_sorted(h, at, *after);
            }
            Event::Probe {
                name, up, failed, ..
            } => {
                let h = self.probes.entry(name.clone()).or_default();
                insert_sorted(h, at, Some(*up));
                if let Some(n) = failed {
                    let c = self.probe_failed.entry(name.clone()).or_default();
                    let i = c.partition_point(|(t, _)| *t <= at);
                    c.insert(i, (at, *n));
                }
            }
            Event::Api { up, .. } => insert_sorted(&mut self.api, at, Some(*up)),
            Event::Query {
                name,
                value,
                detail,
            } => {
                let h = self.queries.entry(name.clone()).or_default();
                insert_sorted(h, at, Some((*value, detail.clone())));
            }
            Event::Step {
                step,
                node,
                phase:
                    phase @ (StepPhase::NotConfirmed { evidence } | StepPhase::Reverted { evidence }),
                ..
            } => self.fault_problems.push(FaultProblem {
                at_ms: at,
                step: step.clone(),
                node: node.clone(),
                evidence: evidence.clone(),
                reverted: matches!(phase, StepPhase::Reverted { .. }),
            }),
            Event::Step {
                step,
                phase: StepPhase::Issued,
                ..
            } => {
                // The first issue in timeline order: the earliest offset, and of equal
                // offsets the one that arrived first.
                let arrival = self.len;
                match self.steps.get_mut(step) {
                    Some((issued, _)) if *issued <= at => {}
                    Some(issued) => *issued = (at, arrival),
                    None => {
                        self.steps.insert(step.clone(), (at, arrival));
                    }
                }
            }
            Event::Run {
                phase: RunPhase::ObserverReady { .. },
            } => self.observer_ready = true,
            Event::Run {
                phase: RunPhase::Started { zero_ms },
            } => self.zero_ms = Some(zero_ms.unwrap_or(at)),
            Event::Gap {
                source,
                phase,
                reason,
            } => {
                let pos = self
                    .gap_entries
                    .iter()
                    .rposition(|(t, ..)| *t <= at)
                    .map_or(0, |p| p + 1);
                self.gap_entries
                    .insert(pos, (at, source.clone(), *phase, reason.clone()));
            }
            _ => {}
        }
    }

    fn insert_pod(&mut self, pod: &Arc<PodId>, at: i64, after: Option<&Arc<PodState>>) {
        let slot = match self.slots.get(pod) {
            Some(&slot) => slot,
            None => {
                let slot = self.pods.len();
                self.pods.push((pod.clone(), Vec::new()));
                self.owners.push(Vec::new());
                self.slots.insert(pod.clone(), slot);
                slot
            }
        };
        let first_before = self.pods[slot].1.first().map(|(t, _)| *t);
        insert_sorted(&mut self.pods[slot].1, at, after.cloned());
        let first_now = self.pods[slot].1[0].0;
        // An entry that arrived late may have become the pod's first sight.
        if let Some(before) = first_before.filter(|b| *b != first_now) {
            for owner in &self.owners[slot] {
                if let Some(set) = self.first_seen.get_mut(owner) {
                    set.remove(&(before, slot));
                    set.insert((first_now, slot));
                }
            }
        }
        let Some(owner) = after.and_then(|s| s.owner.as_ref()) else {
            return;
        };
        if !self.owners[slot].contains(owner) {
            self.owners[slot].push(owner.clone());
            self.owned
                .entry(owner.clone())
                .or_default()
                .insert(self.pods[slot].0.clone(), slot);
            self.first_seen
                .entry(owner.clone())
                .or_default()
                .insert((first_now, slot));
        }
        if let Some(node) = after.and_then(|s| s.node.as_ref()) {
            let on = self
                .owned_on
                .entry((owner.clone(), node.clone()))
                .or_default();
            if !on.contains(&slot) {
                on.push(slot);
            }
        }
    }

    /// How many entries were filed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was filed yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offset of the last entry, as [`Timeline::end_ms`] says it.
    pub fn end_ms(&self) -> i64 {
        self.last_ms.unwrap_or(0)
    }

    /// Offset at which the named step was issued, as [`Timeline::step_issued_ms`] says it.
    pub fn step_issued_ms(&self, step: &str) -> Option<i64> {
        self.steps.get(step).map(|(at, _)| *at)
    }

    /// Of the named steps, the one issued first, in timeline order (of two issued at the
    /// same offset, the one whose entry came first), with its offset.
    pub(crate) fn first_issued<'s>(
        &self,
        steps: impl IntoIterator<Item = &'s str>,
    ) -> Option<(&'s str, i64)> {
        steps
            .into_iter()
            .filter_map(|step| Some((step, *self.steps.get(step)?)))
            .min_by_key(|(_, issued)| *issued)
            .map(|(step, (at, _))| (step, at))
    }

    /// Every node whose latest state is not Ready (or that is gone), with its history, in
    /// name order.
    pub(super) fn nodes_not_ready(&self) -> impl Iterator<Item = (&String, &History<NodeState>)> {
        self.not_ready
            .iter()
            .filter_map(|name| Some((name, self.nodes.get(name)?)))
    }

    /// Every workload ever seen, with its history.
    pub(super) fn all_workloads(
        &self,
    ) -> impl Iterator<Item = (&WorkloadRef, &History<WorkloadState>)> {
        self.workloads.iter()
    }

    /// The history of one workload, without copying.
    pub(super) fn workload_history(&self, w: &WorkloadRef) -> Option<&History<WorkloadState>> {
        self.workloads.get(w)
    }

    /// The results of one probe, without copying.
    pub(super) fn probe_history(&self, name: &str) -> Option<&History<bool>> {
        self.probes.get(name)
    }

    /// One probe's counts of failed tries at its changes, in time order; `None` when the
    /// record's probe entries carry no count.
    pub(super) fn probe_failed(&self, name: &str) -> Option<&[(i64, u64)]> {
        self.probe_failed.get(name).map(Vec::as_slice)
    }

    /// faultline's API health checks.
    pub(super) fn api_history(&self) -> &History<bool> {
        &self.api
    }

    /// One abort query's answers.
    pub(super) fn query_history(&self, name: &str) -> Option<&History<(Option<f64>, String)>> {
        self.queries.get(name)
    }

    /// The first fault that did not take effect or was undone behind faultline's back.
    pub fn fault_problem(&self) -> Option<&FaultProblem> {
        self.fault_problems.iter().min_by_key(|p| p.at_ms)
    }

    /// The observed history of one node (empty if never seen).
    pub(super) fn node(&self, name: &str) -> History<NodeState> {
        self.nodes.get(name).cloned().unwrap_or_default()
    }

    /// The observed history of one workload.
    pub(super) fn workload(&self, w: &WorkloadRef) -> History<WorkloadState> {
        self.workloads.get(w).cloned().unwrap_or_default()
    }

    /// The recorded results of one probe.
    pub(super) fn probe(&self, name: &str) -> History<bool> {
        self.probes.get(name).cloned().unwrap_or_default()
    }

    /// Every pod that was ever owned by `w`, with its history, in [`PodId`] order.
    pub(super) fn pods_of<'a>(
        &'a self,
        w: &WorkloadRef,
    ) -> impl Iterator<Item = (&'a PodId, &'a History<Arc<PodState>>)> + 'a {
        self.owned
            .get(w)
            .into_iter()
            .flat_map(|m| m.values())
            .map(|&slot| (&*self.pods[slot].0, &self.pods[slot].1))
    }

    /// Pods of `w` that were ever on one of `nodes` while owned by it (a superset of its
    /// pods on them at any moment), in [`PodId`] order.
    pub(super) fn pods_of_on<'a>(
        &'a self,
        w: &WorkloadRef,
        nodes: &[String],
    ) -> Vec<(&'a PodId, &'a History<Arc<PodState>>)> {
        let mut slots: Vec<usize> = nodes
            .iter()
            .filter_map(|n| self.owned_on.get(&(w.clone(), n.clone())))
            .flatten()
            .copied()
            .collect();
        slots.sort_unstable();
        slots.dedup();
        self.in_pod_order(slots)
    }

    /// Pods of `w` first seen after `t0`, in [`PodId`] order.
    pub(super) fn pods_of_first_seen_after<'a>(
        &'a self,
        w: &WorkloadRef,
        t0: i64,
    ) -> Vec<(&'a PodId, &'a History<Arc<PodState>>)> {
        let slots = self
            .first_seen
            .get(w)
            .map(|set| {
                set.range((t0.saturating_add(1), 0)..)
                    .map(|&(_, slot)| slot)
                    .collect()
            })
            .unwrap_or_default();
        self.in_pod_order(slots)
    }

    fn in_pod_order(&self, slots: Vec<usize>) -> Vec<(&PodId, &History<Arc<PodState>>)> {
        let mut out: Vec<_> = slots
            .into_iter()
            .map(|slot| (&*self.pods[slot].0, &self.pods[slot].1))
            .collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// Time zero of the judge's messages: the experiment's `at: 0s` once it started
    /// ([`Timeline::zero_ms`]), the timeline's own zero before.
    pub(crate) fn zero_ms(&self) -> i64 {
        self.zero_ms.unwrap_or(0)
    }

    /// The observer said it had every first list (`run`/`observer-ready`).
    pub(crate) fn observer_ready(&self) -> bool {
        self.observer_ready
    }

    /// Each gap entry's source and phase, in timeline order.
    pub(crate) fn gap_phases(&self) -> impl Iterator<Item = (&str, GapPhase)> {
        self.gap_entries
            .iter()
            .map(|(_, source, phase, _)| (source.as_str(), *phase))
    }

    /// Whether the node was ever seen.
    pub(crate) fn has_node(&self, name: &str) -> bool {
        self.nodes.contains_key(name)
    }

    /// Whether the pod was ever seen.
    pub(crate) fn has_pod(&self, pod: &PodId) -> bool {
        self.slots.contains_key(pod)
    }

    /// Whether node `name` was seen turning Ready at or after `since_ms`: a state with
    /// Ready True that follows one without it, or with another Ready transition time (a
    /// reboot quicker than the grace period is never seen NotReady, but its kubelet posts
    /// Ready anew). The run-time interlock counts a rebooted or powered-on node as back
    /// only then, not when its command returned.
    pub(crate) fn node_ready_anew_since(&self, name: &str, since_ms: i64) -> bool {
        let Some(history) = self.nodes.get(name) else {
            return false;
        };
        let ready = |s: &Option<NodeState>| {
            s.as_ref()
                .filter(|s| s.ready == crate::timeline::ConditionStatus::True)
                .map(|s| s.ready_since)
        };
        history.iter().enumerate().any(|(i, (at, state))| {
            *at >= since_ms
                && ready(state).is_some_and(|since| {
                    i == 0
                        || ready(&history[i - 1].1)
                            .is_none_or(|before| since.is_some() && before != since)
                })
        })
    }

    /// Node `name` as last observed: `None` if it was never seen, `Some(None)` if it was
    /// last seen gone. A fault's proof reads it once a second, so it is a lookup, not a scan.
    pub(crate) fn last_node(&self, name: &str) -> Option<Option<&NodeState>> {
        Some(self.nodes.get(name)?.last()?.1.as_ref())
    }

    /// Every node as last observed, without the ones last seen gone.
    pub(crate) fn last_nodes(&self) -> impl Iterator<Item = (&String, &NodeState)> {
        self.nodes
            .iter()
            .filter_map(|(name, h)| Some((name, h.last()?.1.as_ref()?)))
    }

    /// Every pod as last observed, without the ones last seen gone.
    pub(crate) fn last_pods(&self) -> impl Iterator<Item = (&PodId, &PodState)> {
        self.pods
            .iter()
            .filter_map(|(pod, h)| Some((&**pod, h.last()?.1.as_deref()?)))
    }

    /// Every pod's history, in order of first sight.
    pub(super) fn pods(&self) -> impl Iterator<Item = &History<Arc<PodState>>> {
        self.pods.iter().map(|(_, h)| h)
    }

    /// All gaps, paired Began→Ended per source; a gap still open ends at `end`.
    ///
    /// Gaps apply to every subject regardless of their `source`: a conservative choice,
    /// since the observer's source names are not a contract and a silent verdict is worse
    /// than an undecidable one.
    pub(super) fn gaps(&self, end: i64) -> Vec<Gap> {
        let mut open: Vec<(&str, i64, &str)> = Vec::new();
        let mut done = Vec::new();
        for (at, source, phase, reason) in &self.gap_entries {
            match phase {
                GapPhase::Began => open.push((source, *at, reason)),
                GapPhase::Ended => {
                    if let Some(i) = open.iter().position(|(s, _, _)| s == source) {
                        let (s, began, why) = open.remove(i);
                        done.push(Gap {
                            began,
                            ended: *at,
                            closed: reason == GAP_RELISTED,
                            reason: format!("{s} {why}"),
                        });
                    }
                }
            }
        }
        done.extend(open.into_iter().map(|(s, began, why)| Gap {
            began,
            ended: end,
            closed: false,
            reason: format!("{s} {why}"),
        }));
        done.sort_by_key(|g| g.began);
        done
    }
}

/// A fault that did not take effect, or was undone by something other than faultline: the
/// run stops on it with a step error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultProblem {
    /// When it was found.
    pub at_ms: i64,
    /// The step that injected the fault.
    pub step: String,
    /// The node it was on.
    pub node: Option<String>,
    /// What was checked and what it said.
    pub evidence: String,
    /// It took effect, then was undone (rather than never taking effect).
    pub reverted: bool,
}

/// Inserts `(at, state)` after every change at or before `at`: appends, in the usual case.
fn insert_sorted<S>(history: &mut History<S>, at: i64, state: Option<S>) {
    let pos = history
        .iter()
        .rposition(|(t, _)| *t <= at)
        .map_or(0, |p| p + 1);
    history.insert(pos, (at, state));
}

#[cfg(test)]
mod ready_anew_tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::timeline::ConditionStatus;

    fn seen(at_ms: i64, ready: ConditionStatus, since: Option<i64>) -> Entry {
        Entry {
            offset_ms: at_ms,
            wall: Utc::now(),
            event: Event::Node {
                name: "a".into(),
                before: None,
                after: Some(NodeState {
                    ready,
                    ready_since: since.and_then(|s| DateTime::<Utc>::from_timestamp(s, 0)),
                    taints: Vec::new(),
                    unschedulable: false,
                    zone: None,
                    shutting_down: false,
                }),
            },
        }
    }

    fn index(entries: &[Entry]) -> TimelineIndex {
        let mut index = TimelineIndex::new();
        for e in entries {
            index.insert(e);
        }
        index
    }

    #[test]
    fn a_node_is_ready_anew_after_not_ready_or_with_a_new_transition_only() {
        let t = ConditionStatus::True;
        // Ready all along: another change of the node (a taint) is not a return.
        let same = index(&[seen(0, t, Some(0)), seen(20_000, t, Some(0))]);
        assert!(!same.node_ready_anew_since("a", 10_000));
        // Unknown, then Ready: back from the Ready on.
        let back = index(&[
            seen(0, t, Some(0)),
            seen(15_000, ConditionStatus::Unknown, Some(15)),
            seen(50_000, t, Some(50)),
        ]);
        assert!(back.node_ready_anew_since("a", 10_000));
        assert!(!back.node_ready_anew_since("a", 60_000));
        // A reboot quicker than the grace period: Ready all along, posted anew.
        let quick = index(&[seen(0, t, Some(0)), seen(30_000, t, Some(30))]);
        assert!(quick.node_ready_anew_since("a", 10_000));
        // The Ready before the fault does not count; a node never seen is not back.
        assert!(!quick.node_ready_anew_since("a", 31_000));
        assert!(!quick.node_ready_anew_since("b", 0));
    }
}
