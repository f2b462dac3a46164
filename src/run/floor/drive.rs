//! The run's loop, the one place that knows every stage, written once for every world.
//!
//! Order: the world begins (observing, first full view, the cluster read before the first
//! fault) → `Started` → the loop: ask the scheduler (`schedule`, pure) what is due, issue
//! it through the ledger (journal and self-restore before every fault), sleep until the
//! timeline grows, the next deadline comes or a signal arrives → observation ends →
//! steps armed but never issued are withdrawn → the safety net undoes what is still
//! broken, newest first, keeping in the journal (and armed on the node) whatever it could
//! not undo → the world checks it is as it was → the world ends (teardown) → final
//! verdicts. Nothing here writes to a terminal: what happens goes onto the timeline,
//! whose entries are the run's events.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::interlock::{self, Admit, Interlock};
use super::ledger::Ledger;
use super::schedule::{self, End, Plan, Scheduler};
use super::steps::Steps;
use crate::cluster::ResolvedTargets;
use crate::experiment::fault as faults;
use crate::experiment::model::{ClusterTimers, Experiment};
use crate::judge::{self, Outcome, Verdict};
use crate::record::RestoredCheck;
use crate::run::shared_timeline::SharedTimeline;
use crate::run::world::World;
use crate::timeline::{Event, RunPhase, StepPhase};

/// After a new timeline entry, how long the loop lets more land before judging again.
pub(crate) const BURST_MS: u64 = 100;
/// The sleep when the scheduler names no deadline: only a new entry or a signal can
/// change its answer then.
const NO_DEADLINE: Duration = Duration::from_secs(3600);
/// Longest one undo attempt of the safety net may take.
pub(crate) const UNDO_TIMEOUT: Duration = Duration::from_secs(60);
/// The farthest ahead any deadline of the loop is put: durations from a cluster or a
/// record that reach past it are held there instead of overflowing the clock.
const FAR_FUTURE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// What the loop needs that does not change while it goes.
#[derive(Clone, Copy)]
pub(crate) struct LoopPlan<'a> {
    /// The experiment.
    pub exp: &'a Experiment,
    /// Target name → nodes.
    pub targets: &'a ResolvedTargets,
    /// Every control-plane node of the cluster, for the run-time interlock's quorum rule
    /// (empty: not checked).
    pub control_plane: &'a BTreeSet<String>,
    /// The timers in force.
    pub timers: &'a ClusterTimers,
    /// What the cluster can show.
    pub capabilities: &'a [String],
    /// Keep observing after an expectation failed.
    pub keep_going: bool,
    /// How long past the planned end a self-restore waits.
    pub restore_margin: Duration,
}

impl<'a> LoopPlan<'a> {
    fn schedule(&self) -> Plan<'a> {
        Plan {
            exp: self.exp,
            targets: self.targets,
            timers: self.timers,
            capabilities: self.capabilities,
            keep_going: self.keep_going,
        }
    }
}

/// What the loop did, for the run's record or the rehearsal's report.
#[derive(Debug, Default)]
pub(crate) struct LoopOutcome {
    /// Errors to put in the record.
    pub errors: Vec<String>,
    /// Why the run stopped before its planned end, if it did.
    pub stopped_early: Option<String>,
    /// How the loop ended, when it ran.
    pub end: Option<End>,
    /// Offset at which observation ended and undo began.
    pub observed_until: Option<i64>,
    /// Offset at which the experiment started.
    pub start_ms: Option<i64>,
    /// The abort condition that stopped the run, if one did.
    pub aborted: Option<judge::Tripped>,
    /// The world compared with before the first fault.
    pub restored: Option<RestoredCheck>,
    /// Whether a signal cancelled the run.
    pub cancelled: bool,
    /// Each tick's judging time, µs.
    pub tick_micros: Vec<u64>,
    /// Each tick's judging time on the CPU, µs (its wall time less any wait for a core).
    pub tick_cpu_micros: Vec<u64>,
    /// When each step was issued (offset), by index; `None`: never.
    pub issued_ms: Vec<Option<i64>>,
    /// The final verdicts.
    pub verdicts: Vec<Verdict>,
    /// The recovery figures, over the same observations as the final verdicts.
    pub figures: judge::Figures,
    /// Each rolling step's figures, node by node, over the same observations.
    pub rolls: Vec<judge::RollFigures>,
    /// How many entries were observed up to where observation ended.
    pub observed_entries: u64,
    /// Faults left journaled (undo failed, or the step's command may still run).
    pub left_journaled: usize,
}

/// Runs the experiment's steps in `world` and returns what happened; every fault injected
/// is undone before it returns, or left journaled (and armed on its node) with the reason.
pub(crate) async fn run_loop<W: World>(
    plan: LoopPlan<'_>,
    world: &mut W,
    ledger: Ledger,
    timeline: &SharedTimeline,
    cancel: CancellationToken,
) -> LoopOutcome {
    let mut run = Run {
        plan,
        timeline: timeline.clone(),
        steps: Steps::new(plan.exp, plan.targets, timeline.clone(), cancel.clone()),
        interlock: Interlock::new(plan.exp, plan.targets, plan.control_plane, plan.timers),
        cancel,
        ledger,
        published: Published::default(),
        out: LoopOutcome::default(),
    };
    let mut scheduler = Scheduler::new(plan.schedule(), 0);
    match world.begin(timeline, &run.cancel).await {
        Ok(problems) => {
            run.out.errors.extend(problems);
            scheduler = run.go(world).await;
        }
        Err(e) => run.out.errors.push(e.to_string()),
    }
    run.out.errors.extend(world.end(timeline).await);
    run.finish(&scheduler)
}

/// What the loop already put on the timeline about the schedule and the verdicts.
#[derive(Default)]
struct Published {
    /// Step index → what it was last said to wait for.
    waits: BTreeMap<usize, schedule::Wait>,
    /// Expectation → the outcome it was announced with.
    verdicts: BTreeMap<String, Outcome>,
    /// What the run was last said to wait for.
    progress: Option<crate::events::Progress>,
}

impl Published {
    /// Records a verdict event unless this outcome was already announced for it.
    fn announce(&mut self, timeline: &SharedTimeline, v: &Verdict) {
        if self.verdicts.get(&v.name) == Some(&v.outcome) {
            return;
        }
        self.verdicts.insert(v.name.clone(), v.outcome);
        timeline.record(Event::Verdict {
            name: v.name.clone(),
            outcome: v.outcome,
            message: v.message.clone(),
        });
    }
}

/// A run in progress.
struct Run<'a> {
    plan: LoopPlan<'a>,
    timeline: SharedTimeline,
    cancel: CancellationToken,
    steps: Steps<'a>,
    interlock: Interlock<'a>,
    ledger: Ledger,
    published: Published,
    out: LoopOutcome,
}

impl<'a> Run<'a> {
    /// From the first step to the last undo; returns the scheduler as it ended.
    async fn go<W: World>(&mut self, world: &mut W) -> Scheduler<'a> {
        let began_ms = self.timeline.offset_ms();
        // A step due sooner than its nodes take to be armed and sent ahead (a fault at
        // 0 s through the API transport) moves the experiment's zero later by the
        // difference, so that it too starts when it is due.
        self.steps
            .learn_fixed_offsets(&Scheduler::new(self.plan.schedule(), began_ms));
        self.steps.learn_leads(world);
        let head_start_ms = self.steps.head_start_ms(began_ms);
        let start_ms = began_ms + head_start_ms;
        self.out.start_ms = Some(start_ms);
        // Time zero of every report, the judge's messages included.
        self.timeline.record(Event::Run {
            phase: RunPhase::Started {
                zero_ms: Some(start_ms),
            },
        });
        let mut scheduler = Scheduler::new(self.plan.schedule(), start_ms);
        self.steps.learn_fixed_offsets(&scheduler);
        let planned = schedule::planned_length(self.plan.exp, self.plan.timers)
            .saturating_add(self.plan.restore_margin)
            .saturating_add(Duration::from_millis(head_start_ms.unsigned_abs()))
            .min(FAR_FUTURE);
        let restore_at = Instant::now() + planned;
        let end = self.drive(&mut scheduler, world, restore_at).await;
        world.stop_proofs().await;
        // From here on the index the final verdicts are judged on takes nothing stamped
        // later: what comes after (undo, the restored check, teardown) is filed apart.
        self.out.observed_until = Some(self.timeline.end_observation(world.observable_until_ms()));
        self.conclude(&end, &scheduler);
        self.announce_observed();
        self.out.end = Some(end);
        self.steps.disarm_unissued(&*world, &mut self.ledger).await;
        self.steps.end_cut(&*world, &mut self.ledger).await;
        self.safety_net(&*world).await;
        let after = world
            .after_undo(&self.timeline, self.cancel.is_cancelled())
            .await;
        for problem in after.problems {
            self.timeline.note(problem.clone());
            self.out.errors.push(problem);
        }
        self.out.restored = after.restored;
        scheduler
    }

    /// The loop: asks the scheduler what is due, issues it, and sleeps until the timeline
    /// grows, the next deadline comes or a signal arrives; returns why it ended.
    async fn drive<W: World>(
        &mut self,
        scheduler: &mut Scheduler<'a>,
        world: &mut W,
        restore_at: Instant,
    ) -> End {
        loop {
            let now = self.timeline.offset_ms();
            if let Some(until) = world.observable_until_ms()
                && now > until
            {
                return End::OutOfObservations { at_ms: until };
            }
            let judging = std::time::Instant::now();
            let judging_cpu = super::thread_cpu::now_micros();
            let tick = self.timeline.judge_view(|index| scheduler.poll(now, index));
            self.out
                .tick_cpu_micros
                .push(super::thread_cpu::now_micros().saturating_sub(judging_cpu));
            self.out
                .tick_micros
                .push(u64::try_from(judging.elapsed().as_micros()).unwrap_or(u64::MAX));
            self.publish(&tick, scheduler);
            if let Some(end) = tick.end {
                return end;
            }
            if self.cancel.is_cancelled() {
                scheduler.cancel();
                continue;
            }
            let restore_after = || restore_at.saturating_duration_since(Instant::now());
            // A fault step due that the interlock holds back: the offset it gives up at; or
            // a roll's last node observation waits to see back: when to ask again.
            let mut held_until = None;
            let awaited = scheduler.awaits_back(now, &tick);
            if !awaited.is_empty() {
                // A world that shows nothing past an offset (a rehearsal's record) ends the
                // wait there, as observation of the run it replays ended no later.
                if let Some(until) = world.observable_until_ms() {
                    if now >= until {
                        return End::Observed { all_decided: true };
                    }
                    held_until = Some(until);
                }
                let view = self.back_view(world).await;
                let not_back = self
                    .interlock
                    .not_back(&awaited, (view.0, &view.1), &self.timeline);
                let back: Vec<String> = awaited
                    .into_iter()
                    .filter(|n| !not_back.contains(n))
                    .collect();
                if !back.is_empty() {
                    scheduler.seen_back(back);
                    continue;
                }
                // A node on its way back is back once its kubelet renewed its heartbeat,
                // which is not on the timeline: asked again soon. One seen down is back
                // when seen Ready, which wakes the loop.
                let returning = self.interlock.returning();
                if not_back
                    .iter()
                    .any(|n| returning.iter().any(|(r, _)| r == n))
                {
                    let poll = self
                        .timeline
                        .offset_ms()
                        .saturating_add(interlock::HELD_POLL_MS);
                    held_until = Some(held_until.map_or(poll, |h: i64| h.min(poll)));
                }
            }
            if !tick.due.is_empty() {
                let mut issued_any = false;
                // Steps take time: ask again as soon as they are done.
                for index in tick.due.clone() {
                    if self.cancel.is_cancelled() {
                        break;
                    }
                    if self.interlock.applies(index) {
                        let (seen, renewed) = self.back_view(world).await;
                        let now = self.timeline.offset_ms();
                        match self
                            .interlock
                            .admit(index, now, (seen, &renewed), &self.timeline)
                        {
                            Admit::Go => {}
                            // Steps due together go in their order: those after it wait too.
                            // Asked again soon: a returning node's renewals are not on the
                            // timeline, whose growth alone would not wake the loop.
                            Admit::Wait { until_ms } => {
                                held_until =
                                    Some(until_ms.min(now.saturating_add(interlock::HELD_POLL_MS)));
                                break;
                            }
                            Admit::Stop(refusal) => return End::Interlocked(refusal),
                        }
                    }
                    issued_any = true;
                    let ran = self
                        .steps
                        .run_step(
                            index,
                            scheduler,
                            world,
                            &mut self.ledger,
                            restore_after(),
                            &mut self.out.errors,
                        )
                        .await;
                    if let Some(at_ms) = scheduler.issued_ms(index) {
                        self.interlock
                            .issued(index, at_ms, self.timeline.offset_ms());
                    }
                    if !ran {
                        break;
                    }
                }
                if held_until.is_none() || issued_any {
                    continue;
                }
            }
            // Arm what is due soon now, so that arming is not part of its lateness.
            if self
                .steps
                .arm_due_soon(
                    &tick,
                    now,
                    world,
                    &mut self.ledger,
                    restore_after,
                    &mut self.out.errors,
                )
                .await
            {
                continue;
            }
            let wake = [
                tick.wake_at_ms,
                held_until,
                self.steps.next_arm_ms(&tick),
                world.observable_until_ms().map(|ms| ms.saturating_add(1)),
            ]
            .into_iter()
            .flatten()
            .min()
            .map(|ms| self.timeline.instant_at(ms));
            let deadline = wake.unwrap_or_else(|| Instant::now() + NO_DEADLINE);
            tokio::select! {
                _ = self.cancel.cancelled() => scheduler.cancel(),
                _ = tokio::time::sleep_until(deadline) => {}
                _ = self.timeline.grown() => {
                    // Let a burst of entries land before judging again.
                    tokio::select! {
                        _ = self.cancel.cancelled() => scheduler.cancel(),
                        _ = tokio::time::sleep_until(deadline) => {}
                        _ = tokio::time::sleep(Duration::from_millis(BURST_MS)) => {}
                    }
                }
            }
        }
    }

    /// What the interlock needs to tell a node back: the nodes the world sees down, and the
    /// nodes on their way back whose kubelet renewed its heartbeat
    /// [`interlock::RENEWALS_FOR_BACK`] times since.
    async fn back_view<W: World>(
        &self,
        world: &mut W,
    ) -> (Vec<crate::timeline::DownNode>, BTreeSet<String>) {
        let seen = world.nodes_seen_down(&self.timeline);
        let mut renewed = BTreeSet::new();
        for (node, since) in self.interlock.returning() {
            if world
                .renewals_since(&node, since)
                .await
                .is_some_and(|n| n >= interlock::RENEWALS_FOR_BACK)
            {
                renewed.insert(node);
            }
        }
        (seen, renewed)
    }

    /// Puts how the run ended on the timeline and in the record: why it stopped early, a
    /// step that gave up waiting (a step error), and the steps never issued.
    fn conclude(&mut self, end: &End, scheduler: &Scheduler<'_>) {
        let reason = end.to_string();
        self.timeline.record(Event::Run {
            phase: RunPhase::ObservationEnded {
                reason: reason.clone(),
                early: end.is_early(),
            },
        });
        if !end.is_early() {
            return;
        }
        match end {
            // Step errors start with `step `NAME` [on NODE]:`, which names their JUnit case.
            End::StepTimedOut {
                step,
                what,
                waited_ms,
            } => self.out.errors.push(format!(
                "step `{step}`: waited {} for {what}, which was not observed: the step timed out",
                crate::timeline::format_offset_ms(*waited_ms).trim_start_matches('+')
            )),
            End::FaultNotInEffect {
                step,
                node,
                evidence,
                reverted,
            } => {
                let on = schedule::on_node(node.as_deref());
                let what = if *reverted {
                    "its fault was undone by something other than faultline"
                } else {
                    "its fault did not take effect"
                };
                self.out
                    .errors
                    .push(format!("step `{step}`{on}: {what}: {evidence}"));
            }
            // Starts with `step `NAME``, as step errors do.
            End::Interlocked(refusal) => self.out.errors.push(refusal.to_string()),
            End::Aborted(tripped) => {
                self.timeline.record(Event::Abort {
                    condition: tripped.condition.clone(),
                    value: tripped.value.clone(),
                });
                self.out.aborted = Some(tripped.clone());
            }
            _ => {}
        }
        for step in scheduler.never_issued() {
            self.timeline.note(format!(
                "step `{}` was not run ({})",
                step.name,
                schedule::describe_step_time(step, self.plan.timers)
            ));
        }
        self.out.stopped_early = Some(reason);
    }

    /// Announces what the end of observation decided (`never`, `stays` until the end, an
    /// early stop), before undo and teardown put their lines on the timeline, so a reader
    /// sees each verdict when it is known. The final verdicts are judged again at the very
    /// end (a signal during undo changes what was still open), and announced if changed.
    fn announce_observed(&mut self) {
        let plan = self.plan;
        let stopped_early = self.out.stopped_early.as_deref();
        let cancelled = self.cancel.is_cancelled();
        let verdicts = self.timeline.observed_view(|index, until_ms| {
            schedule::final_verdicts(plan.schedule(), index, until_ms, stopped_early, cancelled)
        });
        for v in verdicts.iter().filter(|v| v.outcome != Outcome::Pending) {
            self.published.announce(&self.timeline, v);
        }
    }

    /// Puts on the timeline what changed since the last tick: what each waiting step now
    /// waits for, and the expectations decided since; and tells the run's events what it
    /// now waits for.
    fn publish(&mut self, tick: &schedule::Tick, scheduler: &Scheduler<'_>) {
        let progress = crate::events::Progress {
            observe_until_ms: Some(scheduler.expected_end_ms()),
            open: scheduler.open_expectations(&tick.verdicts),
        };
        if self.published.progress.as_ref() != Some(&progress) {
            self.published.progress = Some(progress.clone());
            self.timeline.progress(progress);
        }
        let seen = &mut self.published;
        for (index, wait) in &tick.waiting {
            if seen.waits.get(index) == Some(wait) {
                continue;
            }
            seen.waits.insert(*index, wait.clone());
            let due_ms = match wait {
                schedule::Wait::Until { due_ms } => Some(*due_ms),
                _ => None,
            };
            self.timeline.record(Event::Schedule {
                step: self.plan.exp.steps[*index].name.clone(),
                wait: wait.to_string(),
                due_ms,
            });
        }
        for v in &tick.verdicts {
            if v.outcome != Outcome::Pending {
                seen.announce(&self.timeline, v);
            }
        }
    }

    /// Undoes every fault still active, with retries, recording each outcome. What it
    /// could not undo stays journaled and armed on its node, and is an error naming
    /// `faultline restore`.
    async fn safety_net(&mut self, world: &impl World) {
        if self.ledger.active().is_empty() {
            return;
        }
        for report in self.ledger.undo_all(world, UNDO_TIMEOUT).await {
            let (ok, detail) = match &report.result {
                Ok(r) if report.fault.may_still_run => (
                    true,
                    format!(
                        "after {} attempt(s): {}; kept in the journal and armed on the node: the step's command may still be running",
                        report.attempts, r.output
                    ),
                ),
                Ok(r) => (
                    true,
                    format!("after {} attempt(s): {}", report.attempts, r.output),
                ),
                Err(e) => (
                    false,
                    format!("failed after {} attempt(s): {e}", report.attempts),
                ),
            };
            if !ok {
                self.out.errors.push(format!(
                    "undo of `{}` on {} {detail}; run `faultline restore`",
                    report.fault.step, report.fault.node
                ));
            }
            let undo = faults::inverse(&report.fault.fault);
            self.timeline.record(Event::Step {
                step: format!("undo {}", report.fault.step),
                action: undo
                    .as_ref()
                    .map_or("undo", faults::action_name)
                    .to_string(),
                node: Some(report.fault.node.clone()),
                phase: StepPhase::Undo { ok, detail },
            });
        }
    }

    /// Final verdicts and recovery figures over what was observed (the run's own index,
    /// which took nothing stamped after observation ended: no copy of the timeline and no
    /// second index of it); each verdict announced once more if it changed.
    fn finish(mut self, scheduler: &Scheduler<'_>) -> LoopOutcome {
        let cancelled = self.cancel.is_cancelled();
        let plan = self.plan;
        let stopped_early = self.out.stopped_early.as_deref();
        let (verdicts, (figures, rolls), entries) =
            self.timeline.observed_view(|index, until_ms| {
                let verdicts = schedule::final_verdicts(
                    plan.schedule(),
                    index,
                    until_ms,
                    stopped_early,
                    cancelled,
                );
                let figures = judge::figures_of(plan.exp, plan.targets, index);
                let rolls = judge::roll_figures_of(plan.exp, index);
                (verdicts, (figures, rolls), index.len() as u64)
            });
        self.out.verdicts = verdicts;
        self.out.figures = figures;
        self.out.rolls = rolls;
        self.out.observed_entries = entries;
        for v in &self.out.verdicts {
            self.published.announce(&self.timeline, v);
        }
        self.out.cancelled = cancelled;
        self.out.issued_ms = (0..self.plan.exp.steps.len())
            .map(|i| scheduler.issued_ms(i))
            .collect();
        self.out.left_journaled = self.ledger.active().len();
        self.out
    }
}
