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
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::execute::ArmedRestore;
use crate::experiment::model::{Action, Experiment};
use crate::journal::Undo;
use crate::judge::Verdict;
use crate::record::RunRecord;
use crate::timeline::{DownNode, Entry, Event, StepPhase, Timeline};

use crate::run::floor::drive::{self, LoopPlan};
use crate::run::floor::ledger::Ledger;
use crate::run::floor::schedule::End;
use crate::run::shared_timeline::SharedTimeline;
use crate::run::world::{
    ActError, ActResult, AfterFaultError, AfterUndo, BeginError, FaultAt, SelfRestoreError, World,
    seen_down_on,
};

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
    /// The rehearsal's own clock could not be made (no thread could be started).
    #[error("cannot start the rehearsal's clock: {0}")]
    Clock(String),
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
    /// Each rolling step's figures, node by node, measured as a run measures them.
    pub rolls: Vec<crate::judge::RollFigures>,
}

/// Rehearses `exp` against `record`: the run's own loop, in a world that replays the
/// record's observations on a paused clock (each step taking as long as it took there).
pub fn rehearse(
    exp: &Experiment,
    record: &RunRecord,
    keep_going: bool,
) -> Result<Rehearsal, RehearseError> {
    check_targets(exp, record)?;
    // Rolling steps go through the record's nodes in the order its run took them.
    let (expanded, targets) = crate::experiment::roll::expand(exp, &record.targets);
    let (exp, targets) = (&expanded, &targets);
    let start_ms =
        start_of(record).ok_or_else(|| RehearseError::NothingObserved(record.run_id.clone()))?;
    // Its own thread and runtime: the clock is paused there (time jumps to the next
    // timer whenever everything waits), whatever runtime the caller is on.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .start_paused(true)
                    .build()
                    .map_err(|e| RehearseError::Clock(e.to_string()))?;
                Ok(runtime.block_on(rehearse_paused(exp, record, targets, start_ms, keep_going)))
            })
            .join()
            .unwrap_or_else(|_| Err(RehearseError::Clock("the rehearsal panicked".into())))
    })
}

async fn rehearse_paused(
    exp: &Experiment,
    record: &RunRecord,
    targets: &BTreeMap<String, Vec<String>>,
    start_ms: i64,
    keep_going: bool,
) -> Rehearsal {
    let record_end = observed_until(record);
    let timeline = SharedTimeline::start_at(
        record.timeline.zero.unwrap_or_default(),
        crate::events::RunEvents::default(),
    );
    let mut world = Recorded {
        observations: record
            .timeline
            .entries
            .iter()
            .filter(|e| e.offset_ms <= record_end && is_observation(&e.event))
            .cloned()
            .collect(),
        durations: step_durations(&record.timeline),
        start_ms,
        record_end,
        feeder: None,
    };
    // A record does not say which nodes are the control plane: quorum is not checked.
    let control_plane = std::collections::BTreeSet::new();
    let plan = LoopPlan {
        exp,
        targets,
        control_plane: &control_plane,
        timers: &record.cluster.timers,
        capabilities: &record.cluster.capabilities,
        keep_going,
        restore_margin: Duration::ZERO,
    };
    let ledger = Ledger::new(None, &record.cluster.name, "rehearsal");
    let done = drive::run_loop(
        plan,
        &mut world,
        ledger,
        &timeline,
        CancellationToken::new(),
    )
    .await;
    let end = done
        .end
        .unwrap_or(End::OutOfObservations { at_ms: record_end });
    let observed_until_ms = done.observed_until.unwrap_or(record_end).min(record_end);
    let steps = exp
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| RehearsedStep {
            name: s.name.clone(),
            at_ms: done
                .issued_ms
                .get(i)
                .copied()
                .flatten()
                .map(|t| t - start_ms),
            recorded_ms: record
                .timeline
                .step_issued_ms(&s.name)
                .map(|t| t - start_ms),
        })
        .collect();
    // What the rehearsal did, without what only a live run says about itself.
    let mut rehearsed = timeline.snapshot();
    rehearsed.entries.retain(|e| {
        is_observation(&e.event)
            || matches!(
                &e.event,
                Event::Step {
                    phase: StepPhase::Issued
                        | StepPhase::Finished { .. }
                        | StepPhase::Failed { .. },
                    ..
                }
            )
    });
    Rehearsal {
        steps,
        ended: end.to_string(),
        ended_early: end.is_early(),
        timeline: rehearsed,
        observed_until_ms,
        verdicts: done.verdicts,
        rolls: done.rolls,
    }
}

/// A recorded run as a world: its observations land on the timeline at their recorded
/// offsets, a step takes as long as the step of that name took in the record (no time for
/// one it does not have) and fails if it failed there; nothing is armed, proved or undone
/// for real.
struct Recorded {
    observations: Vec<Entry>,
    durations: BTreeMap<String, (i64, bool)>,
    start_ms: i64,
    record_end: i64,
    feeder: Option<tokio::task::JoinHandle<()>>,
}

impl World for Recorded {
    async fn begin(
        &mut self,
        timeline: &SharedTimeline,
        _cancel: &CancellationToken,
    ) -> Result<Vec<String>, BeginError> {
        let observations = std::mem::take(&mut self.observations);
        let sink = timeline.clone();
        self.feeder = Some(tokio::spawn(async move {
            for entry in observations {
                tokio::time::sleep_until(sink.instant_at(entry.offset_ms)).await;
                sink.push(entry);
            }
        }));
        tokio::time::sleep_until(timeline.instant_at(self.start_ms)).await;
        Ok(Vec::new())
    }

    fn observable_until_ms(&self) -> Option<i64> {
        Some(self.record_end)
    }

    fn nodes_seen_down(&self, timeline: &SharedTimeline) -> Vec<DownNode> {
        // The record's node observations are replayed onto the timeline as they came.
        seen_down_on(timeline)
    }

    async fn before_fault(&mut self, _: usize, _: &Action, _: &[&str]) {}

    async fn arm_restore(
        &self,
        _: &str,
        _: &Undo,
        _: Duration,
        _: &str,
    ) -> Result<Option<ArmedRestore>, SelfRestoreError> {
        Ok(None)
    }

    async fn disarm(&self, _: &str, _: &ArmedRestore) -> Result<(), SelfRestoreError> {
        Ok(())
    }

    async fn act(
        &self,
        step: &str,
        _: &Action,
        _: Option<&str>,
        _: Duration,
    ) -> Result<ActResult, ActError> {
        let (takes_ms, ok) = self.durations.get(step).copied().unwrap_or((0, true));
        // Steps run one at a time: the cluster goes on meanwhile.
        tokio::time::sleep(Duration::from_millis(takes_ms.max(0).unsigned_abs())).await;
        if ok {
            Ok(ActResult {
                exit_status: None,
                output: "rehearsed".into(),
            })
        } else {
            Err(ActError::Recorded)
        }
    }

    async fn after_fault(
        &mut self,
        _: FaultAt<'_>,
        _: &SharedTimeline,
    ) -> Result<(), AfterFaultError> {
        Ok(())
    }

    async fn mark_before_undo(&mut self, _: &[&str]) {}

    async fn before_undo(&mut self, _: &Action, _: &[&str]) {}

    async fn stop_proofs(&mut self) {}

    async fn after_undo(&mut self, _: &SharedTimeline, _: bool) -> AfterUndo {
        AfterUndo::default()
    }

    async fn end(&mut self, _: &SharedTimeline) -> Vec<String> {
        if let Some(feeder) = self.feeder.take() {
            feeder.abort();
        }
        Vec::new()
    }
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
