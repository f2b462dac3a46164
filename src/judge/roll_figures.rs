//! Recovery figures of a rolling step, node by node: a roll of three workers is three
//! faults, and the run's [`super::Figures`] (measured from the first fault only) say
//! nothing of the second and third. Each node's stages are measured from its own step's
//! issue, and the probes' availability over the whole roll, so a report shows which node
//! was slow and `compare` which stage got slower.

use serde::{Deserialize, Serialize};

use crate::experiment::model::{Experiment, Step};
use crate::experiment::roll::roll_member;
use crate::timeline::{ConditionStatus, WorkloadState};

use super::index::{History, TimelineIndex};

/// One rolling step of the run, as its expansion went: its nodes in roll order, and what
/// the probes saw while it went on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollFigures {
    /// The rolling step's name as written (`roll reboots`).
    pub roll: String,
    /// How long a node may take to be Ready again after its step, ms (the roll's
    /// `timeout`, as its expansion gave it to every node's step after the first); `None`
    /// for a roll of one node, whose only step keeps the step's own timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
    /// Each node, in the order the roll took them.
    pub nodes: Vec<RollNode>,
    /// Offset on the timeline the roll's window starts at: its first node's issue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_ms: Option<i64>,
    /// Offset the roll's window ends at: the last of its nodes' Ready again and workloads
    /// available again, or where observation ended when one of them was not observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<i64>,
    /// Each probe of the experiment over the roll's window, in the experiment's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeAvailability>,
}

/// One node of a roll: when its step was issued and, from that issue, each stage of its
/// recovery; `None` = not observed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollNode {
    /// The node.
    pub node: String,
    /// Its step (`roll reboots (lab-worker-1)`).
    pub step: String,
    /// Offset on the timeline at which its step was issued; `None`: never issued.
    pub issued_ms: Option<i64>,
    /// To the node seen cordoned (unschedulable), as a drain does first; `None` for an
    /// action that does not cordon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained_ms: Option<i64>,
    /// To the node reporting Ready other than True, before the next node's step.
    pub not_ready_ms: Option<i64>,
    /// To the node Ready again after that.
    pub ready_again_ms: Option<i64>,
    /// To every workload degraded at its step or becoming degraded before the next node's
    /// step available again (one the node before left degraded counts here too).
    pub workloads_available_ms: Option<i64>,
    /// The node was never seen other than Ready between its step and the next node's (a
    /// reboot quicker than the grace period), and was seen Ready then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stayed_ready: bool,
    /// How long after its step the node was watched for its own part of the roll: to the
    /// next node's step, or to where observation ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watched_ms: Option<i64>,
}

/// A probe over a roll's window: how long it was down, from outages that began in it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeAvailability {
    /// The probe.
    pub probe: String,
    /// Every outage that began in the window (or was under way at its start), summed up
    /// to where each ended (or observation ended), ms.
    pub downtime_ms: i64,
    /// The longest of them, ms.
    pub longest_ms: i64,
    /// How many.
    pub outages: u32,
    /// The probe was still down when observation ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub down_at_end: bool,
    /// The tries that failed in those outages; for one still under way when observation
    /// ended, only its first (the probe records a count at its changes): a floor then.
    /// `None` when the record's probe entries carry no count (written before they did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_requests: Option<u64>,
}

impl RollNode {
    /// The stages as `(key, label, value)`, in the order they unfold; `compare` names a
    /// stage by its key, reports by its label.
    pub fn stages(&self) -> [(&'static str, &'static str, Option<i64>); 4] {
        [
            ("drained", "drained", self.drained_ms),
            ("node_not_ready", "NotReady", self.not_ready_ms),
            ("node_ready_again", "Ready again", self.ready_again_ms),
            (
                "workloads_available",
                "workloads available",
                self.workloads_available_ms,
            ),
        ]
    }

    /// Whether the node came back within `timeout_ms` of its step: seen Ready again in
    /// time, or never seen down while watched. `None` when its step was never issued, or
    /// when it was not back yet where observation ended, before the timeout ran out.
    pub fn back_in_time(&self, timeout_ms: Option<i64>) -> Option<bool> {
        self.issued_ms?;
        match self.ready_again_ms {
            Some(back) => Some(timeout_ms.is_none_or(|t| back <= t)),
            None if self.stayed_ready => Some(true),
            None => {
                let watched = self.watched_ms.unwrap_or(0);
                timeout_ms.is_some_and(|t| watched >= t).then_some(false)
            }
        }
    }
}

/// Groups an expanded experiment's steps by roll: `(roll, [(node, step)])` in step order,
/// each node with its first step (a batch's nodes share theirs; a sequence's later actions
/// are measured from its first).
fn rolls_of(exp: &Experiment) -> Vec<(&str, Vec<(&str, &Step)>)> {
    let mut rolls: Vec<(&str, Vec<(&str, &Step)>)> = Vec::new();
    for step in &exp.steps {
        let Some((roll, nodes)) = roll_member(step) else {
            continue;
        };
        let at = match rolls.iter().position(|(r, _)| *r == roll) {
            Some(at) => at,
            None => {
                rolls.push((roll, Vec::new()));
                rolls.len() - 1
            }
        };
        let members = &mut rolls[at].1;
        for node in nodes {
            if !members.iter().any(|(n, _)| *n == node) {
                members.push((node, step));
            }
        }
    }
    rolls
}

/// The figures of every roll of an expanded experiment (a record's), over the timeline
/// filed in `index`; empty without rolls. Observation is taken to end at the index's
/// last entry, as the run's final judgement and a re-render of a record see it.
pub fn roll_figures_of(exp: &Experiment, index: &TimelineIndex) -> Vec<RollFigures> {
    let end = index.end_ms();
    rolls_of(exp)
        .into_iter()
        .map(|(roll, members)| {
            let issued: Vec<Option<i64>> = members
                .iter()
                .map(|(_, s)| index.step_issued_ms(&s.name))
                .collect();
            let nodes: Vec<RollNode> = members
                .iter()
                .enumerate()
                .map(|(i, (node, step))| {
                    // A node's window closes at the next batch's issue (a node of its own
                    // batch is issued with it).
                    let next = issued[i + 1..]
                        .iter()
                        .flatten()
                        .copied()
                        .filter(|t| issued[i].is_none_or(|own| *t > own))
                        .min();
                    node_figures(index, node, &step.name, issued[i], next.unwrap_or(end))
                })
                .collect();
            let from = issued.iter().flatten().copied().min();
            let until = from.map(|_| window_end(&nodes, end));
            RollFigures {
                roll: roll.to_string(),
                timeout_ms: members
                    .get(1)
                    .map(|(_, s)| i64::try_from(s.timeout.as_millis()).unwrap_or(i64::MAX)),
                nodes,
                from_ms: from,
                until_ms: until,
                probes: match (from, until) {
                    (Some(from), Some(until)) => exp
                        .probes
                        .iter()
                        .map(|p| {
                            let counts = index.probe_failed(&p.name);
                            let history = index.probe_history(&p.name);
                            availability(&p.name, history, counts, (from, until), end)
                        })
                        .collect(),
                    _ => Vec::new(),
                },
            }
        })
        .collect()
}

/// [`roll_figures_of`] over a whole timeline.
pub fn roll_figures(exp: &Experiment, timeline: &crate::timeline::Timeline) -> Vec<RollFigures> {
    roll_figures_of(exp, &TimelineIndex::of(timeline))
}

/// One node's figures, from its step's issue `t0` to `close` (the next node's issue, or
/// the end of observation).
fn node_figures(
    index: &TimelineIndex,
    node: &str,
    step: &str,
    t0: Option<i64>,
    close: i64,
) -> RollNode {
    let mut out = RollNode {
        node: node.to_string(),
        step: step.to_string(),
        issued_ms: t0,
        ..RollNode::default()
    };
    let Some(t0) = t0 else { return out };
    out.watched_ms = Some((close - t0).max(0));
    let h = index.node(node);
    let in_window = |at: i64| at >= t0 && at <= close;
    out.drained_ms = h
        .iter()
        .find(|(at, s)| in_window(*at) && s.as_ref().is_some_and(|s| s.unschedulable))
        .map(|(at, _)| at - t0);
    let down = h.iter().find(|(at, s)| {
        in_window(*at) && s.as_ref().is_some_and(|s| s.ready != ConditionStatus::True)
    });
    match down {
        Some((down_at, _)) => {
            out.not_ready_ms = Some(down_at - t0);
            out.ready_again_ms = h
                .iter()
                .find(|(at, s)| {
                    at > down_at && s.as_ref().is_some_and(|s| s.ready == ConditionStatus::True)
                })
                .map(|(at, _)| at - t0);
        }
        None => {
            out.stayed_ready = close > t0
                && super::members::state_at(&h, close)
                    .is_some_and(|s| s.ready == ConditionStatus::True);
        }
    }
    out.workloads_available_ms = workloads_back(index, t0, close).map(|at| at - t0);
    out
}

/// The moment every workload degraded in `[t0, close]` (or degraded at `t0`) was
/// available again; `None` when none degraded or one never recovered.
fn workloads_back(index: &TimelineIndex, t0: i64, close: i64) -> Option<i64> {
    let mut latest: Option<i64> = None;
    for (_, history) in index.all_workloads() {
        let ok = |s: &Option<WorkloadState>| s.as_ref().is_some_and(WorkloadState::is_available);
        let degraded_at_t0 = history
            .iter()
            .take_while(|(at, _)| *at <= t0)
            .last()
            .is_some_and(|(_, s)| !ok(s));
        let down = if degraded_at_t0 {
            Some(t0)
        } else {
            history
                .iter()
                .find(|(at, s)| *at > t0 && *at <= close && !ok(s))
                .map(|(at, _)| *at)
        };
        let Some(down) = down else { continue };
        let (back, _) = history.iter().find(|(at, s)| *at > down && ok(s))?;
        latest = Some(latest.map_or(*back, |l| l.max(*back)));
    }
    latest
}

/// Where a roll's window ends: the last of its issued nodes' Ready again and workloads
/// available again; `end` (where observation ended) when one was not observed.
fn window_end(nodes: &[RollNode], end: i64) -> i64 {
    let mut last = i64::MIN;
    for n in nodes {
        let Some(t0) = n.issued_ms else { continue };
        let back = match n.ready_again_ms {
            Some(ms) => t0 + ms,
            None if n.stayed_ready => t0,
            None => return end,
        };
        let workloads = n.workloads_available_ms.map_or(t0, |ms| t0 + ms);
        last = last.max(back).max(workloads);
    }
    if last == i64::MIN { end } else { last.min(end) }
}

/// A probe's outages that began in `[from, until]` or were under way at `from`, each
/// counted from `from` at the earliest to its end (or `end`, where observation ended).
fn availability(
    probe: &str,
    history: Option<&History<bool>>,
    counts: Option<&[(i64, u64)]>,
    (from, until): (i64, i64),
    end: i64,
) -> ProbeAvailability {
    let mut out = ProbeAvailability {
        probe: probe.to_string(),
        failed_requests: counts.map(|_| 0),
        ..ProbeAvailability::default()
    };
    let Some(history) = history else { return out };
    let mut down_since: Option<i64> = None;
    // The count of failed tries at the probe's change at (or last before) `t`.
    let count_at = |t: i64| {
        let c = counts?;
        let i = c.partition_point(|(at, _)| *at <= t);
        i.checked_sub(1).map(|i| c[i].1)
    };
    let close = |out: &mut ProbeAvailability, began: i64, ended: i64| {
        let failed = count_at(ended)
            .zip(count_at(began))
            .map(|(e, b)| e.saturating_sub(b) + 1);
        let began = began.max(from);
        if began > until {
            return;
        }
        let length = (ended - began).max(0);
        out.downtime_ms += length;
        out.longest_ms = out.longest_ms.max(length);
        out.outages += 1;
        out.failed_requests = out.failed_requests.zip(failed).map(|(a, b)| a + b);
    };
    for (at, up) in history.iter().filter(|(at, _)| *at <= end) {
        match (up, down_since) {
            (Some(false), None) => down_since = Some(*at),
            (Some(true), Some(began)) => {
                if *at > from {
                    close(&mut out, began, *at);
                }
                down_since = None;
            }
            _ => {}
        }
    }
    if let Some(began) = down_since {
        close(&mut out, began, end);
        out.down_at_end = began <= until;
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;
