//! What was expected, placed on the picture: each expectation's window (from when it
//! starts to be judged to its bound) on the lane of each of its subjects, with a marker
//! where its verdict was observed or decided. A reader sees "NotReady within 30 s" as a
//! band on the node's lane and the moment it happened inside (or outside) it.

use std::collections::HashMap;
use std::time::Duration;

use super::lanes::{Lane, LaneOf};
use crate::experiment::model::{Bound, Check, Expectation, PodGeneration, Subject, Until, Window};
use crate::judge::{MemberResult, Outcome, Verdict};
use crate::record::RunRecord;
use crate::timeline::{Event, PodState};

/// One expectation drawn on one lane.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Mark {
    /// The expectation's name.
    pub(super) name: String,
    /// Its verdict.
    pub(super) outcome: Outcome,
    /// How this lane's member fared, which its marker shows: the verdict's outcome, except
    /// that a member of a failed `becomes` seen inside its window held (with `count: all`
    /// another member failed it).
    pub(super) member_outcome: Outcome,
    /// Where it is judged, as record offsets (`None` when its bound has no value here).
    pub(super) window: Option<(i64, i64)>,
    /// The window in words, relative to its `since` step (`within grace + 10s = 30s of
    /// \`stop kubelet\``).
    pub(super) window_text: String,
    /// Where its verdict is marked, as a record offset, and whether that is when it was
    /// observed (a transition) rather than when it was decided (a hold that ended).
    pub(super) marker: Option<(i64, Seen)>,
    /// What the verdict says about this lane's object (or the verdict's message).
    pub(super) message: String,
}

/// How the time of a verdict marker is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    /// The decisive transition was observed then.
    Observed,
    /// Nothing happened to decide it: it was decided when its window closed.
    Decided,
}

/// The marks to draw on each lane, by lane index: each decided (or pending) expectation
/// on the lanes of its members, or of its subject when it has no member. Skipped
/// expectations and those whose `since` step never ran have no time on the picture.
pub(super) fn marks(record: &RunRecord, lanes: &[Lane<'_>], end: i64) -> Vec<Vec<Mark>> {
    let mut out: Vec<Vec<Mark>> = lanes.iter().map(|_| Vec::new()).collect();
    let observed_end = record
        .observed_until_ms
        .unwrap_or_else(|| record.timeline.end_ms())
        .min(end);
    // Found once, not per member: at 30,000 pods an expectation has 30,000 members.
    let index = LaneIndex::of(lanes);
    let mut announced: HashMap<&str, i64> = HashMap::new();
    for e in &record.timeline.entries {
        if let Event::Verdict { name, .. } = &e.event {
            announced.entry(name.as_str()).or_insert(e.offset_ms);
        }
    }
    for v in &record.verdicts {
        if matches!(v.outcome, Outcome::Skipped | Outcome::Error) {
            continue;
        }
        let Some(e) = record.expectation_of(v) else {
            continue;
        };
        let Some(t0) = record.timeline.step_issued_ms(&e.since) else {
            continue;
        };
        let until_step_ms = match &e.check {
            Check::Stays {
                until: Until::Step(step),
                ..
            }
            | Check::Never {
                until: Until::Step(step),
                ..
            } => record.timeline.step_issued_ms(step),
            _ => None,
        };
        let on = Placed {
            record,
            expectation: e,
            verdict: v,
            t0,
            observed_end,
            until_step_ms,
            announced_at: announced.get(v.name.as_str()).copied(),
        };
        for (lane, member) in subject_lanes(e, v, t0, &index) {
            out[lane].push(on.mark(&lanes[lane], member));
        }
    }
    out
}

/// Where each object's lane is, by what it shows.
struct LaneIndex<'l> {
    nodes: HashMap<&'l str, usize>,
    /// Pods by name: every lane of that name (a StatefulSet reuses names) with when it
    /// was first seen, in order.
    pods: HashMap<&'l str, Vec<(usize, i64)>>,
    workloads: HashMap<&'l str, usize>,
    probes: HashMap<&'l str, usize>,
}

impl<'l> LaneIndex<'l> {
    fn of(lanes: &'l [Lane<'_>]) -> Self {
        let mut index = LaneIndex {
            nodes: HashMap::new(),
            pods: HashMap::new(),
            workloads: HashMap::new(),
            probes: HashMap::new(),
        };
        for (i, lane) in lanes.iter().enumerate() {
            match &lane.of {
                LaneOf::Node(name) => {
                    index.nodes.insert(name, i);
                }
                LaneOf::Pod { id, first_seen, .. } => index
                    .pods
                    .entry(id.name.as_str())
                    .or_default()
                    .push((i, *first_seen)),
                LaneOf::Workload(name) => {
                    index.workloads.insert(name.as_str(), i);
                }
                LaneOf::Probe(name) => {
                    index.probes.insert(name.as_str(), i);
                }
                LaneOf::Other => {}
            }
        }
        index
    }
}

/// One expectation with what it is judged against.
struct Placed<'a> {
    record: &'a RunRecord,
    expectation: &'a Expectation,
    verdict: &'a Verdict,
    t0: i64,
    observed_end: i64,
    /// When the step a `stays`/`never` holds until was issued.
    until_step_ms: Option<i64>,
    /// When the run announced this verdict, if it did while it went on.
    announced_at: Option<i64>,
}

impl Placed<'_> {
    /// The mark of this expectation on `lane`, for its member there (if any).
    fn mark(&self, lane: &Lane<'_>, member: Option<&MemberResult>) -> Mark {
        let toleration = match &lane.of {
            LaneOf::Pod { states, .. } => pod_toleration(states, self.t0),
            _ => None,
        };
        let ctx = self.record.cluster.timers.bound_context(Some(
            toleration.unwrap_or(self.record.cluster.timers.default_unreachable_toleration),
        ));
        let resolve = |b: &Bound| b.resolve(&ctx).ok().map(|d| d.as_millis() as i64);
        let t0 = self.t0;
        let since = &self.expectation.since;
        let bound_text = |b: &Bound| match resolve(b) {
            Some(ms) => {
                let written = b.to_string();
                let value = crate::timeline::format_secs(Duration::from_millis(ms as u64));
                if written == value {
                    value
                } else {
                    format!("{written} = {value}")
                }
            }
            None => b.to_string(),
        };
        let to_end = (t0, self.observed_end);
        let (window, window_text) = match &self.expectation.check {
            Check::Becomes { window, .. } => match window {
                Window::Eventually => (Some(to_end), format!("any time after `{since}`")),
                Window::Within(b) => (
                    resolve(b).map(|ms| (t0, t0 + ms)),
                    format!("within {} of `{since}`", bound_text(b)),
                ),
                Window::After(b) => (
                    resolve(b).map(|ms| (t0 + ms, self.observed_end.max(t0 + ms))),
                    format!("no earlier than {} after `{since}`", bound_text(b)),
                ),
                Window::Between(a, b) => (
                    resolve(a).zip(resolve(b)).map(|(a, b)| (t0 + a, t0 + b)),
                    format!(
                        "between {} and {} after `{since}`",
                        bound_text(a),
                        bound_text(b)
                    ),
                ),
            },
            Check::Stays { until, .. } | Check::Never { until, .. } => match until {
                Until::Step(step) => (
                    Some((t0, self.until_step_ms.unwrap_or(self.observed_end))),
                    format!("from `{since}` until `{step}`"),
                ),
                Until::For(b) => (
                    resolve(b).map(|ms| (t0, t0 + ms)),
                    format!("for {} after `{since}`", bound_text(b)),
                ),
                Until::End => (
                    Some(to_end),
                    format!("from `{since}` until observation ended"),
                ),
            },
            Check::Restarts { .. } | Check::Replaced { .. } | Check::DownFor { .. } => (
                Some(to_end),
                format!("from `{since}` until observation ended"),
            ),
        };
        let window_end = window.map_or(self.observed_end, |(_, end)| end);
        let holds = matches!(
            self.expectation.check,
            Check::Stays { .. } | Check::Never { .. }
        );
        let marker = match (self.verdict.outcome, member.and_then(|m| m.at_ms)) {
            (Outcome::Pending, _) => None,
            // A hold that held was decided when it ended, whatever moment its member notes.
            (Outcome::Passed, _) if holds => Some((window_end, Seen::Decided)),
            (_, Some(at)) => Some((t0 + at, Seen::Observed)),
            (_, None) => Some((
                self.announced_at.unwrap_or(window_end).min(window_end),
                Seen::Decided,
            )),
        };
        let member_at = member.and_then(|m| m.at_ms).map(|at| t0 + at);
        let held_here = matches!(self.expectation.check, Check::Becomes { .. })
            && matches!(
                (window, member_at),
                (Some((from, to)), Some(at)) if (from..=to).contains(&at)
            );
        let member_outcome = match self.verdict.outcome {
            Outcome::Failed if held_here => Outcome::Passed,
            o => o,
        };
        Mark {
            name: self.verdict.name.clone(),
            outcome: self.verdict.outcome,
            member_outcome,
            window,
            window_text,
            marker,
            message: member.map_or_else(
                || crate::report::text::verdict_message(self.record, self.verdict),
                |m| m.note.clone(),
            ),
        }
    }
}

/// The unreachable toleration a pod's `toleration` bounds resolve with: its own, as it
/// was at `t0` (or first seen); `None` when it has none (the cluster default applies).
fn pod_toleration(states: &[(i64, Option<&PodState>)], t0: i64) -> Option<Duration> {
    let at_t0 = states
        .iter()
        .take_while(|(at, _)| *at <= t0)
        .last()
        .and_then(|(_, s)| *s);
    let state = at_t0.or_else(|| states.iter().find_map(|(_, s)| *s))?;
    state
        .unreachable_toleration_secs
        .map(|secs| Duration::from_secs(secs.max(0) as u64))
}

/// The lanes an expectation is drawn on, each with its member there: a node subject on
/// its nodes' lanes, a pod subject on each member pod's lane (of the generation it is
/// about, when a name was reused), a workload or probe on its own lane. A pod subject
/// with no member is drawn on its workload's lane, so a failure for want of members still
/// shows.
fn subject_lanes<'v>(
    e: &Expectation,
    v: &'v Verdict,
    t0: i64,
    index: &LaneIndex<'_>,
) -> Vec<(usize, Option<&'v MemberResult>)> {
    match &e.subject {
        Subject::Node { .. } => v
            .members
            .iter()
            .filter_map(|m| index.nodes.get(m.member.as_str()).map(|i| (*i, Some(m))))
            .collect(),
        Subject::Pods(pods) if v.members.is_empty() => index
            .workloads
            .get(pods.workload.to_string().as_str())
            .map(|i| vec![(*i, None)])
            .unwrap_or_default(),
        Subject::Pods(pods) => v
            .members
            .iter()
            .filter_map(|m| {
                let named = index.pods.get(m.member.as_str())?;
                Some((pod_lane(named, pods.generation, t0), Some(m)))
            })
            .collect(),
        Subject::Workload(w) => index
            .workloads
            .get(w.to_string().as_str())
            .map(|i| vec![(*i, v.members.first())])
            .unwrap_or_default(),
        Subject::Probe { name } => index
            .probes
            .get(name.as_str())
            .map(|i| vec![(*i, v.members.first())])
            .unwrap_or_default(),
    }
}

/// Of the lanes of pods by one name (`(lane, first seen)`, in order, never empty), the one
/// of `generation` at `t0`: the pod that existed at `t0` for existing pods, the first one
/// seen after it for replacements; the first by that name when neither fits.
fn pod_lane(named: &[(usize, i64)], generation: PodGeneration, t0: i64) -> usize {
    let fits = match generation {
        PodGeneration::Existing => named.iter().rev().find(|(_, seen)| *seen <= t0),
        PodGeneration::Replacements => named.iter().find(|(_, seen)| *seen > t0),
    };
    fits.or(named.first()).map_or(0, |(i, _)| *i)
}
