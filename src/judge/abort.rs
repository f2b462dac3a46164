//! Abort conditions over the timeline: has the cluster been hurt more than the experiment
//! planned?
//!
//! Pure, like the rest of the judge: the experiment's conditions, the resolved targets, the
//! cluster's timers and the [`TimelineIndex`] the runner keeps, asked at a moment. Each
//! condition looks only at the last stretch of its subject's history (how long its bad
//! state has held), so a check costs one step per node, workload, probe or query, however
//! long the run has been. The scheduler asks on every tick and ends the run on the first
//! condition that trips; `rehearse` does the same over a recorded run.
//!
//! When a bad state counts:
//! - a node that is not a target counts from the moment it left Ready (or was deleted)
//!   after the experiment started; a node already NotReady at the start, or never Ready,
//!   is the cluster's state before the run, not something the run did;
//! - a workload short of Ready pods, a probe Down, the API unreachable and a query on its
//!   bad side (or without data) count from the start at the earliest: a cluster already
//!   in that state when the experiment starts is not hurt further, and the run stops once
//!   the condition's hold has passed.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::experiment::model::{AbortCondition, AbortKind, AbortSpec, ClusterTimers};
use crate::timeline::{ConditionStatus, NodeState, format_offset_ms};

use super::index::{History, TimelineIndex};
use super::states::node_label;

/// An abort condition that tripped: what the reports and the timeline say about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tripped {
    /// The condition, as reports name it.
    pub condition: String,
    /// The offset at which it tripped: its bad state began (or the experiment started)
    /// and its hold passed.
    pub at_ms: i64,
    /// What was seen: the subject, its state or value, and since when.
    pub value: String,
}

/// What the abort conditions say at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AbortCheck {
    /// The condition that tripped first, if one did.
    pub tripped: Option<Tripped>,
    /// The earliest moment a condition whose bad state already holds would trip if
    /// nothing changes: the runner must look again then.
    pub wake_at_ms: Option<i64>,
}

/// A bad state that holds now: since when, and in words.
struct Bad {
    since_ms: i64,
    value: String,
}

/// Checks every abort condition of `spec` at `now_ms` over the timeline filed in `index`.
/// `start_ms` is where the experiment started.
pub fn check_aborts(
    spec: &AbortSpec,
    targets: &BTreeMap<String, Vec<String>>,
    timers: &ClusterTimers,
    index: &TimelineIndex,
    start_ms: i64,
    now_ms: i64,
) -> AbortCheck {
    let targeted: BTreeSet<&str> = targets.values().flatten().map(String::as_str).collect();
    let mut out = AbortCheck::default();
    for condition in &spec.conditions {
        let hold_ms = hold_ms(condition, timers);
        for bad in bad_states(condition, &targeted, index, start_ms) {
            let at_ms = bad.since_ms.max(start_ms) + hold_ms;
            if at_ms <= now_ms {
                let earlier = out.tripped.as_ref().is_none_or(|t| at_ms < t.at_ms);
                if earlier {
                    out.tripped = Some(Tripped {
                        condition: condition.name.clone(),
                        at_ms,
                        value: bad.value,
                    });
                }
            } else {
                out.wake_at_ms = Some(out.wake_at_ms.map_or(at_ms, |w| w.min(at_ms)));
            }
        }
    }
    out
}

/// The condition's hold in ms (validation refuses `toleration` there, so it resolves).
fn hold_ms(condition: &AbortCondition, timers: &ClusterTimers) -> i64 {
    let hold = condition
        .hold
        .resolve(&timers.bound_context(None))
        .unwrap_or_default();
    i64::try_from(hold.as_millis()).unwrap_or(i64::MAX)
}

/// Every subject of `condition` whose bad state holds at the end of the timeline.
fn bad_states(
    condition: &AbortCondition,
    targeted: &BTreeSet<&str>,
    index: &TimelineIndex,
    start_ms: i64,
) -> Vec<Bad> {
    match &condition.kind {
        AbortKind::NodeNotReady => index
            .nodes_not_ready()
            .filter(|(name, _)| !targeted.contains(name.as_str()))
            .filter_map(|(name, history)| node_left_ready(name, history, start_ms))
            .collect(),
        AbortKind::PodsNotReady {
            workload,
            more_than,
        } => {
            let short = |s: &Option<crate::timeline::WorkloadState>| match s {
                Some(s) => s.desired - s.ready > i32::try_from(*more_than).unwrap_or(i32::MAX),
                None => true,
            };
            let Some(history) = index.workload_history(workload) else {
                return Vec::new();
            };
            streak(history, short)
                .map(|(since_ms, state)| Bad {
                    since_ms,
                    value: match state {
                        Some(s) => format!(
                            "{workload}: {} of {} pod(s) not Ready since {}",
                            s.desired - s.ready,
                            s.desired,
                            format_offset_ms(since_ms - start_ms)
                        ),
                        None => format!(
                            "{workload} deleted at {}",
                            format_offset_ms(since_ms - start_ms)
                        ),
                    },
                })
                .into_iter()
                .collect()
        }
        AbortKind::ProbeDown { probe } => index
            .probe_history(probe)
            .and_then(|h| streak(h, |up| *up != Some(true)))
            .map(|(since_ms, _)| Bad {
                since_ms,
                value: format!(
                    "probe {probe} Down since {}",
                    format_offset_ms(since_ms - start_ms)
                ),
            })
            .into_iter()
            .collect(),
        AbortKind::ApiUnreachable => streak(index.api_history(), |up| *up != Some(true))
            .map(|(since_ms, _)| Bad {
                since_ms,
                value: format!(
                    "no answer from any API endpoint since {}",
                    format_offset_ms(since_ms - start_ms)
                ),
            })
            .into_iter()
            .collect(),
        AbortKind::Query { threshold, .. } => {
            let crossed = |answer: &Option<(Option<f64>, String)>| match answer {
                Some((Some(v), _)) => threshold.crossed(*v),
                Some((None, _)) | None => true,
            };
            index
                .query_history(&condition.name)
                .and_then(|h| streak(h, crossed))
                .map(|(since_ms, answer)| Bad {
                    since_ms,
                    value: match answer {
                        Some((Some(v), detail)) => format!(
                            "{v} ({threshold}) since {}: {detail}",
                            format_offset_ms(since_ms - start_ms)
                        ),
                        Some((None, _)) | None => format!(
                            "no data since {} (counted as tripped): {}",
                            format_offset_ms(since_ms - start_ms),
                            detail_of(answer.as_ref())
                        ),
                    },
                })
                .into_iter()
                .collect()
        }
    }
}

fn detail_of(answer: Option<&(Option<f64>, String)>) -> &str {
    answer.map_or("no answer", |(_, d)| d.as_str())
}

/// The bad streak at the end of `history`: when it began and the state it ends in, when
/// the last state is bad.
fn streak<S>(history: &History<S>, bad: impl Fn(&Option<S>) -> bool) -> Option<(i64, &Option<S>)> {
    let (_, last) = history.last()?;
    if !bad(last) {
        return None;
    }
    let first_bad = history
        .iter()
        .rposition(|(_, s)| !bad(s))
        .map_or(0, |good| good + 1);
    Some((history[first_bad].0, last))
}

/// A node that left Ready (or was deleted) after the start and has not come back.
fn node_left_ready(name: &str, history: &History<NodeState>, start_ms: i64) -> Option<Bad> {
    let ready =
        |s: &Option<NodeState>| s.as_ref().is_some_and(|s| s.ready == ConditionStatus::True);
    let (_, last) = history.last()?;
    if ready(last) {
        return None;
    }
    // The last Ready state, and the change right after it: when the node left Ready.
    let was_ready = history.iter().rposition(|(_, s)| ready(s))?;
    let since_ms = history[was_ready + 1].0;
    if since_ms < start_ms {
        return None;
    }
    let left = &history[was_ready + 1].1;
    let value = match left {
        Some(_) => format!(
            "node {name} left Ready at {}: {}",
            format_offset_ms(since_ms - start_ms),
            node_label(left.as_ref())
        ),
        None => format!(
            "node {name} was deleted at {}",
            format_offset_ms(since_ms - start_ms)
        ),
    };
    Some(Bad { since_ms, value })
}

#[cfg(test)]
mod tests;
