//! State predicates and their names: turns a member's history into a [`Truth`] series for
//! one `StateMatch`, and names states and windows the way messages print them.

use crate::experiment::model::{
    NodeStateMatch, PodStateMatch, ProbeStateMatch, StateMatch, WorkloadStateMatch,
};
use crate::timeline::{ConditionStatus, NodeState, PodState, WorkloadState};
use std::sync::Arc;

use super::index::History;
use super::members::Series;
use super::truth::{Point, Truth};

/// The expectation names a state of another kind than its subject (e.g. a pod state for a node).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("state {state} does not apply to a {kind} subject")]
pub(super) struct KindMismatch {
    /// The state as written.
    pub state: String,
    /// The subject's kind.
    pub kind: &'static str,
}

/// The truth series of `state` over `series`.
pub(super) fn truth(series: &Series, state: &StateMatch) -> Result<Truth, KindMismatch> {
    match (series, state) {
        (Series::Node(h), StateMatch::Node(m)) => Ok(reduce(h, |s| node_holds(m, s), node_label)),
        (Series::Pod(h), StateMatch::Pod(m)) => Ok(reduce(
            h,
            |s| pod_holds(*m, s.map(Arc::as_ref)),
            |s| pod_label(s.map(Arc::as_ref)),
        )),
        (Series::Workload(h), StateMatch::Workload(m)) => {
            Ok(reduce(h, |s| workload_holds(*m, s), workload_label))
        }
        (Series::Probe(h), StateMatch::Probe(m)) => Ok(reduce(
            h,
            |s| s.is_some_and(|up| *up == (*m == ProbeStateMatch::Up)),
            probe_label,
        )),
        (series, state) => Err(KindMismatch {
            state: state_name(state),
            kind: match series {
                Series::Node(_) => "node",
                Series::Pod(_) => "pod",
                Series::Workload(_) => "workload",
                Series::Probe(_) => "probe",
            },
        }),
    }
}

fn reduce<S>(
    history: &History<S>,
    holds: impl Fn(Option<&S>) -> bool,
    label: impl Fn(Option<&S>) -> String,
) -> Truth {
    Truth {
        points: history
            .iter()
            .map(|(at, s)| Point {
                at: *at,
                holds: holds(s.as_ref()),
                label: label(s.as_ref()),
            })
            .collect(),
    }
}

fn node_holds(m: &NodeStateMatch, s: Option<&NodeState>) -> bool {
    let Some(s) = s else {
        return *m == NodeStateMatch::Gone;
    };
    match m {
        NodeStateMatch::Ready => s.ready == ConditionStatus::True,
        NodeStateMatch::NotReady => s.ready != ConditionStatus::True,
        NodeStateMatch::Unknown => s.ready == ConditionStatus::Unknown,
        NodeStateMatch::ReadyFalse => s.ready == ConditionStatus::False,
        NodeStateMatch::ShuttingDown => s.shutting_down,
        NodeStateMatch::Tainted { key, effect } => s
            .taints
            .iter()
            .any(|t| &t.key == key && effect.as_ref().is_none_or(|e| e == &t.effect)),
        NodeStateMatch::Unschedulable => s.unschedulable,
        NodeStateMatch::Gone => false,
    }
}

fn pod_holds(m: PodStateMatch, s: Option<&PodState>) -> bool {
    let Some(s) = s else {
        return m == PodStateMatch::Gone;
    };
    match m {
        PodStateMatch::Pending => s.phase == "Pending",
        PodStateMatch::Running => s.phase == "Running",
        PodStateMatch::Ready => s.ready && !s.terminating,
        PodStateMatch::NotReady => !s.ready,
        PodStateMatch::Terminating => s.terminating,
        PodStateMatch::Failed => s.phase == "Failed",
        PodStateMatch::Terminated => matches!(s.phase.as_str(), "Failed" | "Succeeded"),
        PodStateMatch::Gone => false,
    }
}

fn workload_holds(m: WorkloadStateMatch, s: Option<&WorkloadState>) -> bool {
    let Some(s) = s else { return false };
    match m {
        WorkloadStateMatch::Available => s.is_available(),
        WorkloadStateMatch::Degraded => !s.is_available(),
        WorkloadStateMatch::Ready => s.is_ready(),
    }
}

/// A node state as a short label: `Ready True`, `Ready Unknown, tainted unreachable:NoExecute`.
pub fn node_label(s: Option<&NodeState>) -> String {
    let Some(s) = s else {
        return "gone".to_string();
    };
    let mut out = format!("Ready {:?}", s.ready);
    if s.shutting_down {
        out.push_str(" (shutting down)");
    }
    if !s.taints.is_empty() {
        let taints: Vec<String> = s
            .taints
            .iter()
            .map(|t| format!("{}:{}", short_taint(&t.key), t.effect))
            .collect();
        out.push_str(&format!(", tainted {}", taints.join(",")));
    }
    if s.unschedulable {
        out.push_str(", unschedulable");
    }
    out
}

/// `node.kubernetes.io/unreachable` → `unreachable`, other keys unchanged.
pub(super) fn short_taint(key: &str) -> &str {
    key.strip_prefix("node.kubernetes.io/").unwrap_or(key)
}

/// A pod state as a short label: `Running, Ready on lab-worker-2`.
pub fn pod_label(s: Option<&PodState>) -> String {
    let Some(s) = s else {
        return "gone".to_string();
    };
    let mut out = s.phase.clone();
    out.push_str(if s.ready { ", Ready" } else { ", not Ready" });
    if s.terminating {
        out.push_str(", Terminating");
    }
    if let Some(n) = &s.node {
        out.push_str(&format!(" on {n}"));
    }
    out
}

/// A workload state as `available/desired available`.
pub fn workload_label(s: Option<&WorkloadState>) -> String {
    match s {
        Some(s) => format!("{}/{} available, {} ready", s.available, s.desired, s.ready),
        None => "gone".to_string(),
    }
}

/// A probe result as a label: `Up`, `Down`.
pub fn probe_label(s: Option<&bool>) -> String {
    match s {
        Some(true) => "Up".to_string(),
        Some(false) => "Down".to_string(),
        None => "no result".to_string(),
    }
}

/// The name of a state as an experiment writes it, e.g. `Terminating`, `Tainted(unreachable:NoExecute)`.
pub fn state_name(state: &StateMatch) -> String {
    match state {
        StateMatch::Node(m) => match m {
            NodeStateMatch::Ready => "Ready".into(),
            NodeStateMatch::NotReady => "NotReady".into(),
            NodeStateMatch::Unknown => "Unknown".into(),
            NodeStateMatch::ReadyFalse => "ReadyFalse".into(),
            NodeStateMatch::ShuttingDown => "ShuttingDown".into(),
            NodeStateMatch::Tainted { key, effect } => match effect {
                Some(e) => format!("Tainted({}:{e})", short_taint(key)),
                None => format!("Tainted({})", short_taint(key)),
            },
            NodeStateMatch::Unschedulable => "Unschedulable".into(),
            NodeStateMatch::Gone => "Gone".into(),
        },
        StateMatch::Pod(m) => format!("{m:?}"),
        StateMatch::Workload(m) => format!("{m:?}"),
        StateMatch::Probe(m) => format!("{m:?}"),
    }
}

/// Milliseconds as seconds with one decimal: `94.2s`.
pub(super) fn secs(ms: i64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// A relative offset: `+94.2s`.
pub(super) fn rel(ms: i64) -> String {
    crate::timeline::format_offset_ms(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str) -> PodState {
        PodState {
            phase: phase.into(),
            ready: false,
            ready_since: None,
            terminating: false,
            node: Some("w1".into()),
            restarts: 0,
            owner: None,
            created: None,
            unreachable_toleration_secs: None,
            tolerates_unreachable_forever: false,
        }
    }

    #[test]
    fn failed_is_the_phase_a_kubelet_writes_when_it_ends_a_pod_itself() {
        assert!(pod_holds(PodStateMatch::Failed, Some(&pod("Failed"))));
        for phase in ["Running", "Pending", "Succeeded"] {
            assert!(
                !pod_holds(PodStateMatch::Failed, Some(&pod(phase))),
                "{phase}"
            );
        }
        assert!(
            !pod_holds(PodStateMatch::Failed, None),
            "a pod that is gone is not Failed"
        );
    }

    #[test]
    fn terminated_is_either_terminal_phase() {
        // A graceful node shutdown leaves pods Failed, or Succeeded when every container
        // exits 0 on SIGTERM (the pause containers of the kind run did).
        for phase in ["Failed", "Succeeded"] {
            assert!(pod_holds(PodStateMatch::Terminated, Some(&pod(phase))));
        }
        for phase in ["Running", "Pending", "Unknown"] {
            assert!(!pod_holds(PodStateMatch::Terminated, Some(&pod(phase))));
        }
        assert!(!pod_holds(PodStateMatch::Terminated, None));
    }
}
