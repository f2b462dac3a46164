//! Who an expectation is about: the nodes of a target, one workload, or a generation of
//! pods, each with its state history replayed from the timeline.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::index::{History, TimelineIndex};
use crate::experiment::model::{PodGeneration, PodSubject, Subject};
use crate::timeline::{NodeState, PodId, PodState, WorkloadState};

/// The state history of one member, by kind.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Series {
    /// A node.
    Node(History<NodeState>),
    /// A pod.
    Pod(History<Arc<PodState>>),
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

/// Resolves the subject's members with `t0` as the `since` moment.
pub(super) fn members(
    subject: &Subject,
    targets: &BTreeMap<String, Vec<String>>,
    index: &TimelineIndex,
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
                    series: Series::Node(index.node(n)),
                })
                .collect())
        }
        Subject::Workload(w) => Ok(vec![Member {
            name: w.to_string(),
            pod: None,
            series: Series::Workload(index.workload(w)),
        }]),
        Subject::Pods(p) => pod_members(p, targets, index, t0),
        Subject::Probe { name } => Ok(vec![Member {
            name: name.clone(),
            pod: None,
            series: Series::Probe(index.probe(name)),
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

/// The state in force at `t` (`None` when unseen or gone).
pub(super) fn state_at<S>(history: &History<S>, t: i64) -> Option<&S> {
    let after = history.partition_point(|(at, _)| *at <= t);
    after.checked_sub(1).and_then(|i| history[i].1.as_ref())
}

/// The last state the object had while it existed.
pub(super) fn last_known<S>(history: &History<S>) -> Option<&S> {
    history.iter().rev().find_map(|(_, s)| s.as_ref())
}

/// The first node a pod was ever bound to.
pub(super) fn first_node(history: &History<Arc<PodState>>) -> Option<&str> {
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
    index: &TimelineIndex,
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
    // Only pods the workload ever owned can match either generation's owner test; the
    // index narrows that further to who can match at all, in the same order.
    let candidates: Vec<_> = match (p.generation, on) {
        (PodGeneration::Existing, Some(nodes)) => index.pods_of_on(&p.workload, nodes),
        (PodGeneration::Existing, None) => index.pods_of(&p.workload).collect(),
        (PodGeneration::Replacements, _) => index.pods_of_first_seen_after(&p.workload, t0),
    };
    let mut out = Vec::new();
    for (id, history) in candidates {
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

/// Why a member's bound has no value: the member is then judged an error with this note.
#[derive(Debug, thiserror::Error)]
pub(super) enum UnboundError {
    /// The pod tolerates `unreachable` forever, so `toleration` is no duration.
    #[error(
        "{member} tolerates `node.kubernetes.io/unreachable` forever, so a bound using `toleration` has no value"
    )]
    ToleratesForever {
        /// The member.
        member: String,
    },
    /// The bound could not be resolved with the cluster's timers.
    #[error("{member}: bound `{bound}`: {reason}")]
    Unresolved {
        /// The member.
        member: String,
        /// The bound as written.
        bound: String,
        /// Why it could not be resolved.
        reason: crate::experiment::model::BoundError,
    },
}

/// The toleration a pod member's `toleration` bounds resolve with.
///
/// `Ok(None)` for non-pod members; `Err` when the pod tolerates `unreachable` forever.
pub(super) fn member_toleration(
    member: &Member,
    t0: i64,
    default: Duration,
) -> Result<Option<Duration>, UnboundError> {
    let Series::Pod(history) = &member.series else {
        return Ok(None);
    };
    let state = state_at(history, t0)
        .or_else(|| last_known(history))
        .map(Arc::as_ref);
    match state {
        Some(s) if s.tolerates_unreachable_forever => Err(UnboundError::ToleratesForever {
            member: member.name.clone(),
        }),
        Some(PodState {
            unreachable_toleration_secs: Some(secs),
            ..
        }) => Ok(Some(Duration::from_secs((*secs).max(0) as u64))),
        _ => Ok(Some(default)),
    }
}
