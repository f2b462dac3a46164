//! A rehearsal: the real scheduler and judge run over the timeline of a recorded run with a
//! virtual clock: no cluster, no SSH.
//!
//! What the cluster did is taken from the record as it was observed (nodes, pods,
//! workloads, probes, gaps); the steps are the experiment's, issued when the scheduler says
//! so, each taking as long as the step of the same name took in the record (no time for a
//! step the record does not have). So someone writing an experiment can try new steps and
//! expectations against last week's real run before touching a cluster. The cluster in the
//! record does not react to the rehearsed steps: a step moved in time does not move what
//! the cluster did.

use std::collections::BTreeMap;

use crate::experiment::model::Experiment;
use crate::judge::{TimelineIndex, Verdict};
use crate::record::RunRecord;
use crate::timeline::{Entry, Event, StepPhase, Timeline};

use super::faults::action_name;
use super::schedule::{self, End, Plan, Scheduler};

/// Why a rehearsal cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RehearseError {
    /// The experiment names a target the recorded run did not resolve.
    #[error(
        "the experiment uses target `{target}`, which the record does not have (it has {known})"
    )]
    UnknownTarget {
        /// The target.
        target: String,
        /// The record's targets.
        known: String,
    },
    /// The record holds no observation window (a run that never started).
    #[error("the record has no observations: its run never started ({0})")]
    NothingObserved(String),
}

/// One rehearsed step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RehearsedStep {
    /// Step name.
    pub name: String,
    /// When the rehearsal issued it, ms after the start; `None`: never issued.
    pub at_ms: Option<i64>,
    /// When the recorded run issued the step of that name, ms after the start.
    pub recorded_ms: Option<i64>,
}

/// What a rehearsal found.
#[derive(Debug, Clone)]
pub struct Rehearsal {
    /// Every step, in file order.
    pub steps: Vec<RehearsedStep>,
    /// Why the rehearsed run ended, in words.
    pub ended: String,
    /// Whether it ended before its plan did.
    pub ended_early: bool,
    /// The rehearsed timeline: the record's observations and the rehearsed steps.
    pub timeline: Timeline,
    /// Offset at which rehearsed observation ended.
    pub observed_until_ms: i64,
    /// The verdicts, judged as the runner judges a finished run.
    pub verdicts: Vec<Verdict>,
}

/// Rehearses `exp` against `record`.
pub fn rehearse(exp: &Experiment, record: &RunRecord) -> Result<Rehearsal, RehearseError> {
    check_targets(exp, record)?;
    let start_ms =
        start_of(record).ok_or_else(|| RehearseError::NothingObserved(record.run_id.clone()))?;
    let record_end = observed_until(record);
    let observations: Vec<&Entry> = record
        .timeline
        .entries
        .iter()
        .filter(|e| e.offset_ms <= record_end && is_observation(&e.event))
        .collect();
    let durations = step_durations(&record.timeline);
    let plan = Plan {
        exp,
        targets: &record.targets,
        timers: &record.cluster.timers,
        capabilities: &record.cluster.capabilities,
        keep_going: false,
    };
    let mut scheduler = Scheduler::new(plan, start_ms);
    let mut timeline = Timeline {
        zero: record.timeline.zero,
        entries: Vec::new(),
    };
    // The judge's view of the rehearsed timeline, filed entry by entry as in a run.
    let mut filed = TimelineIndex::new();
    let mut next = 0;
    let mut now = start_ms;
    let end = loop {
        while next < observations.len() && observations[next].offset_ms <= now {
            filed.insert(observations[next]);
            timeline.entries.push(observations[next].clone());
            next += 1;
        }
        if now > record_end {
            break None;
        }
        let tick = scheduler.poll(now, &filed);
        if let Some(end) = tick.end {
            break Some(end);
        }
        if let Some(&index) = tick.due.first() {
            let step = &exp.steps[index];
            let (takes_ms, ok) = durations.get(&step.name).copied().unwrap_or((0, true));
            let nodes = step.nodes(&record.targets);
            let record_step =
                |timeline: &mut Timeline, index: &mut TimelineIndex, at: i64, phase: StepPhase| {
                    let event = |node: Option<String>| Event::Step {
                        step: step.name.clone(),
                        action: action_name(&step.action).to_string(),
                        node,
                        phase: phase.clone(),
                    };
                    let wall = wall_at(&timeline.zero, at);
                    let mut put = |event| {
                        let entry = Entry {
                            offset_ms: at,
                            wall,
                            event,
                        };
                        index.insert(&entry);
                        timeline.insert(entry);
                    };
                    if nodes.is_empty() {
                        put(event(None));
                    }
                    for n in nodes {
                        put(event(Some(n.clone())));
                    }
                };
            record_step(&mut timeline, &mut filed, now, StepPhase::Issued);
            scheduler.started(index, now);
            // Steps run one at a time: the cluster goes on meanwhile.
            let done = now + takes_ms;
            while next < observations.len() && observations[next].offset_ms <= done {
                filed.insert(observations[next]);
                timeline.entries.push(observations[next].clone());
                next += 1;
            }
            let phase = if ok {
                StepPhase::Finished {
                    exit_status: None,
                    output: "rehearsed".into(),
                }
            } else {
                StepPhase::Failed {
                    error: "failed in the record".into(),
                }
            };
            record_step(&mut timeline, &mut filed, done, phase);
            scheduler.finished(index, done, ok);
            now = done;
            continue;
        }
        let after_entry = observations
            .get(next)
            .map(|e| e.offset_ms + super::BURST_MS);
        now = match (tick.wake_at_ms, after_entry) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(record_end + 1),
        }
        .max(now + 1);
    };
    let observed_until_ms = now.min(record_end);
    let (ended, early) = match &end {
        Some(end) => (end.to_string(), end.is_early()),
        None => (
            format!(
                "the record ends at {}: the rehearsal could not observe further",
                crate::timeline::format_offset_ms(record_end - start_ms)
            ),
            true,
        ),
    };
    let observed = timeline.until(observed_until_ms);
    let verdicts = schedule::final_verdicts(
        plan,
        &observed,
        observed_until_ms,
        early.then_some(ended.as_str()),
        matches!(end, Some(End::Cancelled)),
    );
    let steps = exp
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| RehearsedStep {
            name: s.name.clone(),
            at_ms: scheduler.issued_ms(i).map(|t| t - start_ms),
            recorded_ms: record
                .timeline
                .step_issued_ms(&s.name)
                .map(|t| t - start_ms),
        })
        .collect();
    Ok(Rehearsal {
        steps,
        ended,
        ended_early: early,
        timeline,
        observed_until_ms,
        verdicts,
    })
}

fn check_targets(exp: &Experiment, record: &RunRecord) -> Result<(), RehearseError> {
    for t in &exp.targets {
        if !record.targets.contains_key(&t.name) {
            return Err(RehearseError::UnknownTarget {
                target: t.name.clone(),
                known: record
                    .targets
                    .keys()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(())
}

/// Where the recorded experiment started: recorded since records carry it; for older
/// records, the runner's note that steps start.
fn start_of(record: &RunRecord) -> Option<i64> {
    record.start_ms.or_else(|| {
        record.timeline.entries.iter().find_map(|e| match &e.event {
            Event::Note { message } if message.starts_with("observer synced") => Some(e.offset_ms),
            _ => None,
        })
    })
}

/// Where the recorded observation ended: recorded since records carry it; for older
/// records, the runner's note that observation ends (what follows it is undo and teardown).
fn observed_until(record: &RunRecord) -> i64 {
    record.observed_until_ms.unwrap_or_else(|| {
        record
            .timeline
            .entries
            .iter()
            .find_map(|e| match &e.event {
                Event::Note { message } if message.starts_with("observation ends here") => {
                    Some(e.offset_ms)
                }
                _ => None,
            })
            .unwrap_or_else(|| record.timeline.end_ms())
    })
}

/// What the cluster did (as opposed to what faultline did or said).
fn is_observation(event: &Event) -> bool {
    matches!(
        event,
        Event::Node { .. }
            | Event::Pod { .. }
            | Event::Workload { .. }
            | Event::Probe { .. }
            | Event::Gap { .. }
            | Event::Api { .. }
            | Event::Query { .. }
    )
}

/// How long each recorded step took (first issue to its last finish), and whether it ended
/// well.
fn step_durations(timeline: &Timeline) -> BTreeMap<String, (i64, bool)> {
    let mut spans: BTreeMap<String, (i64, i64, bool)> = BTreeMap::new();
    for e in &timeline.entries {
        let Event::Step { step, phase, .. } = &e.event else {
            continue;
        };
        match phase {
            StepPhase::Issued => {
                spans
                    .entry(step.clone())
                    .or_insert((e.offset_ms, e.offset_ms, true));
            }
            StepPhase::Finished { .. } | StepPhase::Failed { .. } => {
                if let Some(span) = spans.get_mut(step) {
                    span.1 = e.offset_ms;
                    span.2 &= matches!(phase, StepPhase::Finished { .. });
                }
            }
            StepPhase::Armed { .. }
            | StepPhase::Undo { .. }
            | StepPhase::Confirmed { .. }
            | StepPhase::NotConfirmed { .. }
            | StepPhase::Reverted { .. } => {}
        }
    }
    spans
        .into_iter()
        .map(|(name, (from, to, ok))| (name, (to - from, ok)))
        .collect()
}

fn wall_at(
    zero: &Option<chrono::DateTime<chrono::Utc>>,
    offset_ms: i64,
) -> chrono::DateTime<chrono::Utc> {
    zero.unwrap_or_default() + chrono::Duration::milliseconds(offset_ms)
}
