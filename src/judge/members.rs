//! Who an expectation is about: the nodes of a target, one workload, or a generation of
//! pods, each with its state history replayed from the timeline.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::experiment::model::{PodGeneration, PodSubject, Subject, WorkloadRef};
use crate::timeline::{Event, NodeState, PodId, PodState, Timeline, WorkloadState};

/// Observed states of one object: `(offset, state)`, `None` = the object was gone.
pub(super) type History<S> = Vec<(i64, Option<S>)>;

/// The state history of one member, by kind.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Series {
    /// A node.
    Node(History<NodeState>),
    /// A pod.
    Pod(History<PodState>),
    /// A workload.
    Workload(History<WorkloadState>),
    /// A probe: `Some(true)` = Up.
    Probe(History<bool>),
}

/// One thing an expectation quantifies over.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Member {
    /// Name used in messages (node name, pod name, `ns/kind/name`).
    pub name: String,
    /// The pod's identity, for pod members.
    pub pod: Option<PodId>,
    /// Its states over time.
    pub series: Series,
}

/// Why the members of a subject could not be determined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum MemberError {
    /// The subject names a target the run did not resolve.
    #[error("target `{0}` was not resolved to any nodes in this run")]
    UnknownTarget(String),
}

/// Every pod's history, computed once per judgement and shared by all expectations.
pub(super) type PodHistories = BTreeMap<PodId, History<PodState>>;

/// Resolves the subject's members with `t0` as the `since` moment.
pub(super) fn members(
    subject: &Subject,
    targets: &BTreeMap<String, Vec<String>>,
    timeline: &Timeline,
    pods: &PodHistories,
    t0: i64,
) -> Result<Vec<Member>, MemberError> {
    match subject {
        Subject::Node { target } => {
            let nodes = target_nodes(targets, target)?;
            Ok(nodes
                .iter()
                .map(|n| Member {
                    name: n.clone(),
                    pod: None,
                    series: Series::Node(node_history(timeline, n)),
                })
                .collect())
        }
        Subject::Workload(w) => Ok(vec![Member {
            name: w.to_string(),
            pod: None,
            series: Series::Workload(workload_history(timeline, w)),
        }]),
        Subject::Pods(p) => pod_members(p, targets, pods, t0),
        Subject::Probe { name } => Ok(vec![Member {
            name: name.clone(),
            pod: None,
            series: Series::Probe(probe_history(timeline, name)),
        }]),
    }
}

fn target_nodes<'a>(
    targets: &'a BTreeMap<String, Vec<String>>,
    target: &str,
) -> Result<&'a Vec<String>, MemberError> {
    targets
        .get(target)
        .ok_or_else(|| MemberError::UnknownTarget(target.to_string()))
}

/// The observed history of one node.
pub(super) fn node_history(timeline: &Timeline, name: &str) -> History<NodeState> {
    timeline
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Node { name: n, after, .. } if n == name => Some((e.offset_ms, after.clone())),
            _ => None,
        })
        .collect()
}

/// The observed history of one workload.
pub(super) fn workload_history(timeline: &Timeline, w: &WorkloadRef) -> History<WorkloadState> {
    timeline
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Workload {
                workload, after, ..
            } if workload == w => Some((e.offset_ms, *after)),
            _ => None,
        })
        .collect()
}

/// The recorded results of one probe (only changes are on the timeline).
pub(super) fn probe_history(timeline: &Timeline, name: &str) -> History<bool> {
    timeline
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Probe { name: n, up, .. } if n == name => Some((e.offset_ms, Some(*up))),
            _ => None,
        })
        .collect()
}

/// Every pod's history, keyed by identity, in timeline order.
pub(super) fn pod_histories(timeline: &Timeline) -> PodHistories {
    let mut all: BTreeMap<PodId, History<PodState>> = BTreeMap::new();
    for e in &timeline.entries {
        if let Event::Pod { pod, after, .. } = &e.event {
            all.entry(pod.clone())
                .or_default()
                .push((e.offset_ms, after.clone()));
        }
    }
    all
}

/// The state in force at `t` (`None` when unseen or gone).
pub(super) fn state_at<S>(history: &History<S>, t: i64) -> Option<&S> {
    history
        .iter()
        .take_while(|(at, _)| *at <= t)
        .last()
        .and_then(|(_, s)| s.as_ref())
}

/// The last state the object had while it existed.
pub(super) fn last_known<S>(history: &History<S>) -> Option<&S> {
    history.iter().rev().find_map(|(_, s)| s.as_ref())
}

/// The first node a pod was ever bound to.
pub(super) fn first_node(history: &History<PodState>) -> Option<&str> {
    history
        .iter()
        .find_map(|(_, s)| s.as_ref().and_then(|s| s.node.as_deref()))
}

/// Pods of the subject's generation, filtered by `on` / `not_on`.
///
/// Existing pods are filtered by their node at `t0`. A replacement is filtered by the first
/// node it was ever bound to; a replacement never scheduled has no node, so it fails an
/// `on` filter and passes a `not_on` filter: an unschedulable replacement is exactly what
/// an expectation about replacements elsewhere must see (and fail on), not silently drop.
fn pod_members(
    p: &PodSubject,
    targets: &BTreeMap<String, Vec<String>>,
    pods: &PodHistories,
    t0: i64,
) -> Result<Vec<Member>, MemberError> {
    let on =
        p.on.as_deref()
            .map(|t| target_nodes(targets, t))
            .transpose()?;
    let not_on = p
        .not_on
        .as_deref()
        .map(|t| target_nodes(targets, t))
        .transpose()?;
    let placed = |node: Option<&str>| {
        let on_ok = on.is_none_or(|ns| node.is_some_and(|n| ns.iter().any(|x| x == n)));
        let not_on_ok = not_on.is_none_or(|ns| !node.is_some_and(|n| ns.iter().any(|x| x == n)));
        on_ok && not_on_ok
    };
    let mut out = Vec::new();
    for (id, history) in pods {
        let chosen = match p.generation {
            PodGeneration::Existing => state_at(history, t0).is_some_and(|s| {
                s.owner.as_ref() == Some(&p.workload) && placed(s.node.as_deref())
            }),
            PodGeneration::Replacements => {
                let first_seen = history.first().map(|(at, _)| *at).unwrap_or(i64::MIN);
                first_seen > t0
                    && last_known(history).is_some_and(|s| s.owner.as_ref() == Some(&p.workload))
                    && placed(first_node(history))
            }
        };
        if chosen {
            out.push(Member {
                name: id.name.clone(),
                pod: Some(id.clone()),
                series: Series::Pod(history.clone()),
            });
        }
    }
    Ok(out)
}

/// The toleration a pod member's `toleration` bounds resolve with.
///
/// `Ok(None)` for non-pod members; `Err` when the pod tolerates `unreachable` forever.
pub(super) fn member_toleration(
    member: &Member,
    t0: i64,
    default: Duration,
) -> Result<Option<Duration>, String> {
    let Series::Pod(history) = &member.series else {
        return Ok(None);
    };
    let state = state_at(history, t0).or_else(|| last_known(history));
    match state {
        Some(s) if s.tolerates_unreachable_forever => Err(format!(
            "{} tolerates `node.kubernetes.io/unreachable` forever, so a bound using `toleration` has no value",
            member.name
        )),
        Some(PodState {
            unreachable_toleration_secs: Some(secs),
            ..
        }) => Ok(Some(Duration::from_secs((*secs).max(0) as u64))),
        _ => Ok(Some(default)),
    }
}
