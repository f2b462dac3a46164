//! State names as written in experiments (`NotReady`, `Terminating`, `{tainted: key}`) and
//! which kind of subject each belongs to.
//!
//! States are spelled as kubectl shows them; a wrong case or a state of another subject
//! kind (a node that "becomes Terminating") is a mistake worth a precise message.

use super::model::{
    NodeStateMatch, PodStateMatch, ProbeStateMatch, StateMatch, WorkloadStateMatch,
};
use super::raw::RawState;
use super::suggest::closest;

/// Which kind of thing a subject is; decides which states it can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SubjectKind {
    /// A node target.
    Node,
    /// A set of pods.
    Pods,
    /// A workload.
    Workload,
    /// A probe.
    Probe,
}

impl SubjectKind {
    fn noun(self) -> &'static str {
        match self {
            SubjectKind::Node => "node",
            SubjectKind::Pods => "pod",
            SubjectKind::Workload => "workload",
            SubjectKind::Probe => "probe",
        }
    }

    fn names(self) -> &'static [&'static str] {
        match self {
            SubjectKind::Node => &[
                "Ready",
                "NotReady",
                "Unknown",
                "ReadyFalse",
                "ShuttingDown",
                "Unschedulable",
                "Gone",
            ],
            SubjectKind::Pods => &[
                "Pending",
                "Running",
                "Ready",
                "NotReady",
                "Terminating",
                "Failed",
                "Terminated",
                "Gone",
            ],
            SubjectKind::Workload => &["Available", "Degraded", "Ready"],
            SubjectKind::Probe => &["Up", "Down"],
        }
    }
}

/// Valid taint effects, as Kubernetes spells them.
pub(super) const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Why a state was refused, with a fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StateIssue {
    /// What is wrong.
    pub message: String,
    /// What to write instead.
    pub hint: Option<String>,
}

/// Interprets a written state for a subject of the given kind.
pub(super) fn parse_state(raw: &RawState, kind: SubjectKind) -> Result<StateMatch, StateIssue> {
    match raw {
        RawState::Tainted(spec) => {
            if kind != SubjectKind::Node {
                return Err(StateIssue {
                    message: format!("`tainted` is a node state, not a {} state", kind.noun()),
                    hint: Some(list_hint(kind)),
                });
            }
            let (key, effect) = match spec.split_once(':') {
                Some((k, e)) => (k, Some(e)),
                None => (spec.as_str(), None),
            };
            if key.is_empty() {
                return Err(StateIssue {
                    message: "`tainted` needs a taint key".into(),
                    hint: Some("write {tainted: \"node.kubernetes.io/unreachable\"}".into()),
                });
            }
            if let Some(e) = effect
                && !TAINT_EFFECTS.contains(&e)
            {
                return Err(effect_issue(e));
            }
            Ok(StateMatch::Node(NodeStateMatch::Tainted {
                key: key.to_owned(),
                effect: effect.map(str::to_owned),
            }))
        }
        RawState::Name(name) => {
            if let Some(state) = lookup(name, kind) {
                return Ok(state);
            }
            for other in [
                SubjectKind::Node,
                SubjectKind::Pods,
                SubjectKind::Workload,
                SubjectKind::Probe,
            ] {
                if other != kind && other.names().contains(&name.as_str()) {
                    return Err(StateIssue {
                        message: format!(
                            "`{name}` is a {} state, not a {} state",
                            other.noun(),
                            kind.noun()
                        ),
                        hint: Some(list_hint(kind)),
                    });
                }
            }
            Err(StateIssue {
                message: format!("unknown {} state `{name}`", kind.noun()),
                hint: Some(match closest(name, kind.names()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => list_hint(kind),
                }),
            })
        }
    }
}

/// The message for a taint effect Kubernetes does not know.
pub(super) fn effect_issue(effect: &str) -> StateIssue {
    StateIssue {
        message: format!("unknown taint effect `{effect}`"),
        hint: Some(match closest(effect, &TAINT_EFFECTS) {
            Some(s) => format!("did you mean `{s}`?"),
            None => "effects are NoSchedule, PreferNoSchedule, NoExecute".into(),
        }),
    }
}

fn list_hint(kind: SubjectKind) -> String {
    let mut list = kind.names().join(", ");
    if kind == SubjectKind::Node {
        list.push_str(", {tainted: \"key[:Effect]\"}");
    }
    format!("{} states are: {list}", kind.noun())
}

fn lookup(name: &str, kind: SubjectKind) -> Option<StateMatch> {
    Some(match kind {
        SubjectKind::Node => StateMatch::Node(match name {
            "Ready" => NodeStateMatch::Ready,
            "NotReady" => NodeStateMatch::NotReady,
            "Unknown" => NodeStateMatch::Unknown,
            "ReadyFalse" => NodeStateMatch::ReadyFalse,
            "ShuttingDown" => NodeStateMatch::ShuttingDown,
            "Unschedulable" => NodeStateMatch::Unschedulable,
            "Gone" => NodeStateMatch::Gone,
            _ => return None,
        }),
        SubjectKind::Pods => StateMatch::Pod(match name {
            "Pending" => PodStateMatch::Pending,
            "Running" => PodStateMatch::Running,
            "Ready" => PodStateMatch::Ready,
            "NotReady" => PodStateMatch::NotReady,
            "Terminating" => PodStateMatch::Terminating,
            "Failed" => PodStateMatch::Failed,
            "Terminated" => PodStateMatch::Terminated,
            "Gone" => PodStateMatch::Gone,
            _ => return None,
        }),
        SubjectKind::Workload => StateMatch::Workload(match name {
            "Available" => WorkloadStateMatch::Available,
            "Degraded" => WorkloadStateMatch::Degraded,
            "Ready" => WorkloadStateMatch::Ready,
            _ => return None,
        }),
        SubjectKind::Probe => StateMatch::Probe(match name {
            "Up" => ProbeStateMatch::Up,
            "Down" => ProbeStateMatch::Down,
            _ => return None,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> RawState {
        RawState::Name(s.into())
    }

    #[test]
    fn every_listed_name_parses_for_its_kind() {
        for kind in [
            SubjectKind::Node,
            SubjectKind::Pods,
            SubjectKind::Workload,
            SubjectKind::Probe,
        ] {
            for n in kind.names() {
                assert!(parse_state(&name(n), kind).is_ok(), "{n}");
            }
        }
    }

    #[test]
    fn wrong_kind_wrong_case_and_taints() {
        let e = parse_state(&name("Terminating"), SubjectKind::Node).unwrap_err();
        assert_eq!(e.message, "`Terminating` is a pod state, not a node state");
        let e = parse_state(&name("notready"), SubjectKind::Node).unwrap_err();
        assert_eq!(e.message, "unknown node state `notready`");
        assert_eq!(e.hint.as_deref(), Some("did you mean `NotReady`?"));
        assert_eq!(
            parse_state(
                &RawState::Tainted("a/b:NoExecute".into()),
                SubjectKind::Node
            ),
            Ok(StateMatch::Node(NodeStateMatch::Tainted {
                key: "a/b".into(),
                effect: Some("NoExecute".into())
            }))
        );
        assert!(parse_state(&RawState::Tainted("a:NoRun".into()), SubjectKind::Node).is_err());
        assert!(parse_state(&RawState::Tainted("a".into()), SubjectKind::Pods).is_err());
    }
}
