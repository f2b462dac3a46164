//! The timeline: every observed state change and every step, in order, with both a
//! wall-clock timestamp and a monotonic offset from the run's time zero.
//!
//! It is the one contract between the observer (which appends), the runner (which
//! appends steps), the judge (which reads) and the reporters (which render). States are
//! reduced to what the judge can ask about, so metadata churn never becomes an entry.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::experiment::model::{WorkloadKind, WorkloadRef};

/// All entries of one run, ordered by `offset_ms`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Wall-clock time of offset zero.
    pub zero: Option<DateTime<Utc>>,
    /// Entries in the order they were recorded (non-decreasing offset).
    pub entries: Vec<Entry>,
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Milliseconds since time zero, from a monotonic clock (negative before zero, e.g. setup).
    pub offset_ms: i64,
    /// Wall-clock time, millisecond precision.
    pub wall: DateTime<Utc>,
    /// What happened.
    pub event: Event,
}

/// The kinds of thing a timeline records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Event {
    /// A node's reduced state changed (`None` = object absent).
    Node {
        /// Node name.
        name: String,
        /// State before (None: did not exist / first seen).
        before: Option<NodeState>,
        /// State after (None: deleted).
        after: Option<NodeState>,
    },
    /// A pod's reduced state changed.
    ///
    /// The states are shared, not copied: the observer's last known state, this entry's
    /// `after`, the next entry's `before` and the judge's history of the pod are one
    /// allocation, and so is the pod's identity. At 150,000 pods, two inline states made
    /// every entry of every kind about 440 bytes, and five copies of each identity (three
    /// strings each) were another 100 MB; shared, they are pointers.
    Pod {
        /// Which pod (shared, like its states, with the observer and the judge).
        pod: Arc<PodId>,
        /// State before.
        before: Option<Arc<PodState>>,
        /// State after.
        after: Option<Arc<PodState>>,
    },
    /// A workload's replica counts changed.
    Workload {
        /// Which workload.
        workload: WorkloadRef,
        /// Counts before.
        before: Option<WorkloadState>,
        /// Counts after.
        after: Option<WorkloadState>,
    },
    /// A step's progress.
    Step {
        /// Step name from the experiment.
        step: String,
        /// Action name, e.g. `kubelet-stop`.
        action: String,
        /// Node acted on, if any.
        node: Option<String>,
        /// Where the step is.
        phase: StepPhase,
    },
    /// The observer could not see part of the cluster for a while; transitions inside the gap
    /// were recovered by diffing a relist and their times are only known to lie in the gap.
    Gap {
        /// Which watch or poll lost sight (e.g. `pods`).
        source: String,
        /// Began or ended.
        phase: GapPhase,
        /// Why (the watch error).
        reason: String,
    },
    /// A probe's result changed (the first result of each probe is always recorded).
    Probe {
        /// Probe name from the experiment.
        name: String,
        /// Whether the try succeeded.
        up: bool,
        /// Why: exit status, HTTP status or the error (sanitized, short).
        detail: String,
        /// How many of the probe's tries had failed so far, this one included: the
        /// failed requests of an outage are the count at the try that ended it less the
        /// count at the one that began it, plus one. `None` in records written before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<u64>,
    },
    /// A milestone of the run itself.
    Run {
        /// Which one, with its details beside `type` (`{"type":"run","phase":"ended",…}`).
        #[serde(flatten)]
        phase: RunPhase,
    },
    /// What a step not issued yet waits for, each time that changes: its due time once
    /// known, another step, or a condition with its deadline.
    Schedule {
        /// Step name.
        step: String,
        /// What it waits for, in words.
        wait: String,
        /// The offset it is due at, once that is known.
        due_ms: Option<i64>,
    },
    /// A fault step is due but waits for the run-time interlock: with its nodes, more would
    /// be down than the experiment's `safety.maxNodesDown` allows, or half or more of the
    /// control plane. Recorded when it starts waiting and each time the nodes it waits on
    /// change; it goes once they are back, or the run stops at `deadline_ms`.
    Interlock {
        /// Step name.
        step: String,
        /// The nodes counted down now (the step's own included), each with why.
        down: Vec<DownNode>,
        /// What it waits for, in words: the rule it would break.
        rule: String,
        /// The offset at which the run stops if it still does not fit.
        deadline_ms: i64,
    },
    /// The run moved to another API endpoint (failover); the gap next to it is explained.
    Endpoint {
        /// The endpoint left.
        from: String,
        /// The endpoint now in use.
        to: String,
        /// Why the first was left.
        reason: String,
    },
    /// An expectation was decided while the run went on. Only an early stop changes a
    /// verdict afterwards (what is still open becomes an error).
    Verdict {
        /// The expectation.
        name: String,
        /// The outcome, written as the reports write it (`PASS`, `FAIL`, `UNDECIDABLE`,
        /// `SKIP`, `ERROR`).
        #[serde(with = "crate::outcome::as_word")]
        outcome: crate::outcome::Outcome,
        /// Why.
        message: String,
    },
    /// faultline's health check of the API server (`/readyz`, through every endpoint it
    /// knows) changed its answer; the first answer is always recorded. Watched only when
    /// an `apiUnreachable` abort condition is on.
    Api {
        /// The API answered.
        up: bool,
        /// Why: the answer or the error (short).
        detail: String,
    },
    /// A Prometheus query of an abort condition answered something other than last time
    /// (the first answer is always recorded).
    Query {
        /// The abort condition asking it.
        name: String,
        /// The value that decides (the largest series for `above`, the smallest for
        /// `below`); `None` when there was no data (no series, an error, Prometheus
        /// unreachable), which trips the condition.
        value: Option<f64>,
        /// What was answered, in words (the series, or why there was no data).
        detail: String,
    },
    /// An abort condition tripped: the run stops and every fault is undone at once.
    Abort {
        /// The condition, as reports name it.
        condition: String,
        /// What was seen, and since when.
        value: String,
    },
    /// The cluster after the last undo compared with its state before the first fault
    /// (nodes Ready and schedulable, taints, workloads at their replicas, no pod stuck
    /// Terminating, kubelets active), after waiting for it to settle.
    Restored {
        /// Nothing differs.
        ok: bool,
        /// What differs, one line each.
        differences: Vec<String>,
        /// How long faultline waited for the cluster to settle, ms.
        waited_ms: u64,
    },
    /// Free-form note from the runner (teardown, address problems, undo details).
    Note {
        /// The note.
        message: String,
    },
}

/// Milestones of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "kebab-case")]
pub enum RunPhase {
    /// Every source of the observer has completed its first list: the cluster's state
    /// before the run is on the timeline. The runner starts the experiment after it.
    ObserverReady {
        /// How many sources (watches or poll loops) the observer has.
        sources: u32,
    },
    /// The observer synced: the experiment starts here (its `at: 0s`, time zero of every
    /// report), or at `zero_ms` when its first steps needed a head start.
    Started {
        /// The offset of the experiment's `at: 0s` when it is not this entry's own: a
        /// step due sooner than its nodes take to be armed moves it later. Absent from
        /// records written before it existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zero_ms: Option<i64>,
    },
    /// Observation ended; what follows (undo, teardown) is recorded, not judged.
    ObservationEnded {
        /// Why it ended: its planned end, every expectation decided, or an early stop.
        reason: String,
        /// It ended before its plan did.
        early: bool,
    },
    /// The run is over: faults undone, teardown done, verdicts final.
    Ended {
        /// How it ended, as the reports write it (`passed`, `failed`, `error`,
        /// `interrupted`).
        outcome: String,
        /// The exit code `faultline run` gives for it.
        exit_code: i32,
    },
}

/// Progress of a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "kebab-case")]
pub enum StepPhase {
    /// The fault was written to the journal before it was injected, and, where the node
    /// can undo it by itself, a self-restore was armed there.
    Armed {
        /// Its id in the fault journal.
        journal_id: String,
        /// A self-restore was armed on the node.
        self_restore: bool,
        /// Only the node's own timer can end this fault, this many seconds after it was
        /// armed: the fault cuts the node off from where faultline could ask (a partition
        /// through the API, or a kubelet stop on a node without an undo watcher), so
        /// neither Ctrl-C nor the safety net can end it sooner.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ends_by_timer_in_secs: Option<u64>,
    },
    /// The action was started.
    Issued,
    /// The action completed.
    Finished {
        /// Exit status of the command, if it was one.
        exit_status: Option<i32>,
        /// Output of the command (sanitized, truncated).
        output: String,
    },
    /// The action failed; the run treats this as an error.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// The fault was seen to take effect on the node (or its object): the evidence.
    Confirmed {
        /// What was checked and what it said.
        evidence: String,
    },
    /// The fault did not take effect within its bound: a step error.
    NotConfirmed {
        /// What was checked and what it said.
        evidence: String,
    },
    /// The fault took effect, then something other than faultline undid it before its
    /// planned end: a step error.
    Reverted {
        /// What was checked and what it said.
        evidence: String,
    },
    /// The action was an undo done by faultline's safety net (not a planned step).
    Undo {
        /// Whether the undo succeeded.
        ok: bool,
        /// Details.
        detail: String,
    },
}

/// The `reason` of a gap's `Ended` entry when a full relist ended it: the states right after
/// it are then the cluster's, which is what lets the judge compare them with those before.
pub const GAP_RELISTED: &str = "relisted";

/// Start or end of an observation gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GapPhase {
    /// Sight lost.
    Began,
    /// Sight regained (after relist and diff).
    Ended,
}

/// Identity of a pod: name plus UID, since a StatefulSet pod keeps its name across replacement.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodId {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID; differs between a pod and its same-named replacement.
    pub uid: String,
}

/// Status of a node condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown` (or the condition is missing).
    Unknown,
}

/// A node the run-time interlock counts as down, and why: so that a step kept waiting, or
/// a run stopped, says which nodes are down and what took them down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DownNode {
    /// Node name.
    pub node: String,
    /// Why it counts: "seen unreachable, Ready=Unknown", "reboot `r1` issued at +0.0s,
    /// not seen back since", "this step's".
    pub why: String,
}

impl DownNode {
    /// Why a due step's own nodes are among those counted down, so that a reader can tell
    /// them from the nodes it waits on.
    pub const OWN: &str = "this step's";
}

/// What the judge can ask of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    /// The Ready condition.
    pub ready: ConditionStatus,
    /// The Ready condition's `lastTransitionTime` (server clock, whole seconds). The same
    /// value before and after an observation gap shows the condition did not change in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_since: Option<DateTime<Utc>>,
    /// Taints as `key:effect`.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// The node's zone as the node lifecycle controller groups nodes (region and zone
    /// labels, `region/zone`); `None` when unlabelled. The node failure model needs it: a
    /// zone's share of nodes down decides whether evictions go on, slow down or stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The kubelet reports a graceful node shutdown under way: Ready False with the message
    /// `node is shutting down`, posted from the moment logind announces the shutdown until
    /// the kubelet dies. Tells an OS shutdown the kubelet handles from a node that just
    /// stopped answering.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shutting_down: bool,
}

/// A taint, without its value and time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Taint {
    /// Key, e.g. `node.kubernetes.io/unreachable`.
    pub key: String,
    /// Effect, e.g. `NoExecute`.
    pub effect: String,
}

/// What the judge can ask of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodState {
    /// `status.phase` (Pending, Running, Succeeded, Failed, Unknown).
    pub phase: String,
    /// Ready condition is True.
    pub ready: bool,
    /// The Ready condition's `lastTransitionTime`, as for nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_since: Option<DateTime<Utc>>,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// `spec.nodeName`, once scheduled.
    pub node: Option<String>,
    /// Sum of container restart counts.
    pub restarts: i32,
    /// The workload that owns it (Deployment resolved through its ReplicaSet).
    pub owner: Option<WorkloadRef>,
    /// `metadata.creationTimestamp`.
    pub created: Option<DateTime<Utc>>,
    /// `tolerationSeconds` of its `node.kubernetes.io/unreachable:NoExecute` toleration:
    /// `Some(n)` bounded, `None` when it has no such toleration or tolerates forever
    /// (see `tolerates_unreachable_forever`).
    pub unreachable_toleration_secs: Option<i64>,
    /// The pod tolerates `unreachable` with no time limit (DaemonSet pods do).
    pub tolerates_unreachable_forever: bool,
}

#[cfg(test)]
impl PodState {
    /// A Running, Ready pod on `node` and nothing else known: what tests start from.
    pub(crate) fn running_on(node: Option<&str>) -> PodState {
        PodState {
            phase: "Running".into(),
            ready: true,
            ready_since: None,
            terminating: false,
            node: node.map(str::to_string),
            restarts: 0,
            owner: None,
            created: None,
            unreachable_toleration_secs: None,
            tolerates_unreachable_forever: false,
        }
    }
}

/// Replica counts of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadState {
    /// Desired replicas (DaemonSet: desiredNumberScheduled).
    pub desired: i32,
    /// Ready replicas (DaemonSet: numberReady).
    pub ready: i32,
    /// Available replicas (DaemonSet: numberAvailable).
    pub available: i32,
}

impl Timeline {
    /// The offset of the experiment's `at: 0s`, time zero of every report: where its
    /// `run`/`started` entry puts it; `None` on a timeline without one (the experiment
    /// never started).
    pub fn zero_ms(&self) -> Option<i64> {
        self.entries.iter().find_map(|e| match &e.event {
            Event::Run {
                phase: RunPhase::Started { zero_ms },
            } => Some(zero_ms.unwrap_or(e.offset_ms)),
            _ => None,
        })
    }

    /// An empty timeline whose time zero is `zero`.
    pub fn new(zero: DateTime<Utc>) -> Self {
        Timeline {
            zero: Some(zero),
            entries: Vec::new(),
        }
    }

    /// Offset at which the named step was issued, if it was.
    pub fn step_issued_ms(&self, step: &str) -> Option<i64> {
        self.entries.iter().find_map(|e| match &e.event {
            Event::Step {
                step: s,
                phase: StepPhase::Issued,
                ..
            } if s == step => Some(e.offset_ms),
            _ => None,
        })
    }

    /// The timeline as it stood at `offset_ms`: entries up to and including that offset.
    /// Verdicts are judged on the observation window only, never on what undo and
    /// teardown do afterwards (teardown deletes pods, which is no eviction).
    pub fn until(&self, offset_ms: i64) -> Timeline {
        Timeline {
            zero: self.zero,
            entries: self
                .entries
                .iter()
                .take_while(|e| e.offset_ms <= offset_ms)
                .cloned()
                .collect(),
        }
    }

    /// Inserts an entry stamped elsewhere, after every entry with the same or an earlier
    /// offset, so entries stay in offset order and equal offsets keep their arrival order.
    pub fn insert(&mut self, entry: Entry) {
        let pos = self
            .entries
            .iter()
            .rposition(|e| e.offset_ms <= entry.offset_ms)
            .map_or(0, |p| p + 1);
        self.entries.insert(pos, entry);
    }

    /// Offset of the last entry (how far observation reached).
    pub fn end_ms(&self) -> i64 {
        self.entries.last().map(|e| e.offset_ms).unwrap_or(0)
    }
}

impl WorkloadState {
    /// The workload has every replica it wants available (more during a rolling update's
    /// surge). The one rule the judge (`Available`, `Degraded`), the recovery figures and
    /// the reports use; setup's wait is stricter on purpose (`cluster::manifests`: the
    /// rollout is complete, every replica updated and available), since the fault must
    /// not land in the middle of a rollout.
    pub fn is_available(&self) -> bool {
        self.available >= self.desired
    }

    /// Every replica it wants is Ready.
    pub fn is_ready(&self) -> bool {
        self.ready >= self.desired
    }
}

impl WorkloadKind {
    /// The lower-case name used in `kind/name` references, e.g. `deployment`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "deployment",
            WorkloadKind::StatefulSet => "statefulset",
            WorkloadKind::DaemonSet => "daemonset",
        }
    }
}

impl std::fmt::Display for WorkloadRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.kind.as_str(), self.name)
    }
}

/// Durations are written as experiments write them (`94.2s`, `30s`); the one definition
/// lives with the experiment model, whose bounds print that way.
pub use crate::experiment::model::format_secs;

/// What a step that waits for its time says it waits for (`due at +30.0s`), on the
/// timeline's `schedule` entries and in the live view, whoever set the time.
pub fn due_at(ms: i64) -> String {
    format!("due at {}", format_offset_ms(ms))
}

/// Formats a signed millisecond offset as seconds, e.g. `+94.2s` or `-3.0s`.
pub fn format_offset_ms(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "+" };
    format!("{sign}{:.1}s", (ms.unsigned_abs() as f64) / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn until_keeps_entries_up_to_and_including_the_offset() {
        let mut t = Timeline::new(Utc::now());
        for ms in [0, 10, 20, 20, 30] {
            t.entries.push(Entry {
                offset_ms: ms,
                wall: Utc::now(),
                event: Event::Note {
                    message: ms.to_string(),
                },
            });
        }
        let cut = t.until(20);
        assert_eq!(cut.entries.len(), 4);
        assert_eq!(cut.end_ms(), 20);
        assert_eq!(cut.zero, t.zero);
        assert!(t.until(-1).entries.is_empty());
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// At 150,000 pods the timeline holds a few hundred thousand entries; each byte of an
    /// entry is then a few hundred kilobytes. Pod states are shared (`Arc`), so no variant
    /// holds a state inline; this fails when one starts to.
    #[test]
    fn an_entry_holds_no_pod_state_inline() {
        let entry = std::mem::size_of::<Entry>();
        let state = std::mem::size_of::<PodState>();
        eprintln!(
            "Entry {entry} B, Event {} B, PodState {state} B",
            std::mem::size_of::<Event>()
        );
        assert!(
            entry < state + 32,
            "an entry is {entry} B, a pod state {state} B"
        );
        // 176 B today (a node's two states are the largest variant); 440 B with pod
        // states inline.
        assert!(entry <= 176, "an entry is {entry} B");
    }
}
