//! The runner: ties the stages together for one experiment, owns signals, the fault
//! ledger and undo, and produces the run record the reporters render.
//!
//! Order of a run: interlocks (context, journal) → setup (`setup`) → targets resolved and
//! the blast radius checked (`prepare`) → observer, probes and endpoint switches started
//! (`beside`) → the loop (`Run::drive`): ask the scheduler (`schedule`, pure) what is
//! due, issue it (`act`, through the `ledger`), sleep until the timeline grows, a deadline
//! or a signal → undo of whatever is still broken → teardown → final verdicts and figures.

pub(crate) mod act;
mod addresses;
mod beside;
#[cfg(test)]
mod context_tests;
pub(crate) mod ledger;
pub(crate) mod prepare;
mod proofs;
pub mod rehearse;
pub(crate) mod restored;
pub(crate) mod safety;
pub(crate) mod schedule;
mod settings;
mod setup;
pub(crate) mod shared_timeline;
pub(crate) mod signals;
mod steps;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::experiment::fault as faults;
use crate::experiment::model::Experiment;
use crate::journal::Journal;
use crate::judge::{self, Outcome, Verdict};
use crate::observe::{self, Clock};
use crate::record::{RunCosts, RunOutcome, RunRecord};
use crate::timeline::{Event, RunPhase, StepPhase};

use act::Actor;
use ledger::Ledger;
use prepare::Prepared;
use schedule::{End, Scheduler};
pub use settings::{DEFAULT_RESTORE_MARGIN, RunSettings};
use shared_timeline::{LiveView, SharedTimeline};

/// After a new timeline entry, how long the runner lets more land before judging again;
/// `rehearse` wakes its scheduler the same way.
const BURST_MS: i64 = 100;
/// The sleep when the scheduler names no deadline: only a new entry or a signal can
/// change its answer then.
const NO_DEADLINE: Duration = Duration::from_secs(3600);
/// Runs one experiment and returns its record. Never panics on cluster trouble: what
/// went wrong is in the record (outcome `Error`, or per-step errors).
pub async fn run_experiment(
    exp: &Experiment,
    settings: &RunSettings,
    cancel: CancellationToken,
    live: Option<LiveView>,
) -> RunRecord {
    let started_at = Utc::now();
    let run_id = format!("{}-{}", exp.name, started_at.format("%Y%m%dT%H%M%S%.3fZ"));
    let token_id = format!("fl{}", started_at.format("%Y%m%d%H%M%S%3f"));
    if let Err(e) =
        crate::probe::query::Queries::can_ask(&exp.abort, settings.inventory.prometheus())
    {
        let cluster = setup::unread_cluster(settings);
        return setup::not_run(exp, cluster, run_id, started_at, e);
    }
    let mut prepared = match prepare::prepare(exp, settings).await {
        Ok(p) => p,
        Err(e) => {
            let cluster = setup::unread_cluster(settings);
            return setup::not_run(exp, cluster, run_id, started_at, e.to_string());
        }
    };
    let not_run = |message: String| {
        setup::not_run(
            exp,
            prepared.cluster.clone(),
            run_id.clone(),
            started_at,
            message,
        )
    };
    let mut warnings = match prepare::preflight_cluster(exp, &prepared).await {
        Ok(w) => w,
        Err(e) => return not_run(e.to_string()),
    };
    let applied = match setup::setup(exp, &prepared.client).await {
        Ok(applied) => applied,
        Err(e) => return not_run(format!("setup: {e}")),
    };
    let resolved = match prepare::resolve(exp, &mut prepared, &settings.inventory).await {
        Ok(()) => prepare::preflight_nodes(exp, &prepared).await,
        Err(e) => Err(e),
    };
    match resolved {
        Ok(w) => warnings.extend(w),
        Err(e) => {
            if exp.teardown.delete_manifests {
                let _ = setup::teardown(&prepared.client, &applied).await;
            }
            return setup::not_run(
                exp,
                prepared.cluster.clone(),
                run_id,
                started_at,
                e.to_string(),
            );
        }
    }
    let timeline = SharedTimeline::start(live);
    for note in timer_notes(&prepared.cluster.timer_sources, &prepared.timer_misses)
        .into_iter()
        .chain(warnings)
    {
        timeline.note(note);
    }
    let mut run = Run {
        exp,
        settings,
        prepared: &prepared,
        timeline: timeline.clone(),
        cancel,
        errors: Vec::new(),
        stopped_early: None,
        observed_until: None,
        start_ms: None,
        steps: steps::Steps::new(exp, &prepared.targets, timeline.clone()),
        published: Published::default(),
        costs: Costs::default(),
        aborted: None,
        restored: None,
    };
    run.go(&token_id, &applied).await;
    let Run {
        errors,
        stopped_early,
        observed_until,
        start_ms,
        cancel,
        published,
        costs,
        aborted,
        restored,
        ..
    } = run;

    let snapshot = timeline.snapshot();
    let observed = match observed_until {
        Some(end) => snapshot.until(end),
        None => snapshot.clone(),
    };
    let plan = schedule::Plan {
        exp,
        targets: &prepared.targets,
        timers: &prepared.cluster.timers,
        capabilities: &prepared.cluster.capabilities,
        keep_going: settings.keep_going,
    };
    let verdicts = schedule::final_verdicts(
        plan,
        &observed,
        observed_until.unwrap_or_else(|| observed.end_ms()),
        stopped_early.as_deref(),
        cancel.is_cancelled(),
    );
    let figures = judge::figures(exp, &prepared.targets, &observed);
    let mut outcome = RunOutcome::from_verdicts(&verdicts, &errors);
    if let Some(t) = &aborted {
        outcome = RunOutcome::Error {
            message: format!("aborted: {} ({})", t.condition, t.value),
        };
    }
    if cancel.is_cancelled() {
        outcome = RunOutcome::Interrupted;
    }
    if outcome == RunOutcome::Passed && restored.as_ref().is_some_and(|r| !r.ok) {
        outcome = RunOutcome::Failed;
    }
    let mut published = published;
    for v in &verdicts {
        published.announce(&timeline, v);
    }
    timeline.record(Event::Run {
        phase: RunPhase::Ended {
            outcome: outcome.word().to_string(),
            exit_code: crate::record::exit_code(&outcome, &verdicts, &errors)
                .max(restored.as_ref().map_or(0, |r| i32::from(!r.ok))),
        },
    });
    let snapshot = timeline.snapshot();
    RunRecord {
        faultline_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id,
        experiment: exp.clone(),
        cluster: prepared.cluster.clone(),
        targets: prepared.targets.clone(),
        started_at,
        finished_at: Utc::now(),
        timeline: snapshot,
        start_ms,
        observed_until_ms: observed_until,
        stopped_early: stopped_early.clone(),
        verdicts,
        figures,
        outcome,
        errors,
        aborted,
        restored,
        costs: Some(
            RunCosts {
                initial_sync_ms: costs.initial_sync_ms,
                entries: observed.entries.len() as u64,
                ..RunCosts::default()
            }
            .with_ticks(costs.tick_micros),
        ),
    }
}

/// What a person must know about the timers before the run: each one that is assumed
/// (with why it was not read) and each the inventory states differently from the cluster.
fn timer_notes(sources: &[crate::timers::TimerSource], misses: &[String]) -> Vec<String> {
    let mut notes = Vec::new();
    for s in sources {
        if s.origin == crate::timers::Origin::Assumed {
            notes.push(format!(
                "timer {} = {} is ASSUMED ({}); bounds on it are marked",
                s.timer,
                crate::timers::show(s.value),
                s.detail
            ));
        } else if s.disagrees() {
            notes.push(format!("timer {}", s.line()));
        }
    }
    if notes.iter().any(|n| n.contains("ASSUMED")) && !misses.is_empty() {
        notes.push(format!(
            "timers not read from the cluster: {}",
            misses.join("; ")
        ));
    }
    notes
}

/// What the runner already put on the timeline about the schedule and the verdicts.
#[derive(Default)]
struct Published {
    /// Step index → what it was last said to wait for.
    waits: BTreeMap<usize, schedule::Wait>,
    /// Expectation → the outcome it was announced with.
    verdicts: BTreeMap<String, Outcome>,
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
            outcome: crate::report::outcome_word(v.outcome).to_string(),
            message: v.message.clone(),
        });
    }
}

/// State of a run in progress.
struct Run<'a> {
    exp: &'a Experiment,
    settings: &'a RunSettings,
    prepared: &'a Prepared,
    timeline: SharedTimeline,
    cancel: CancellationToken,
    errors: Vec<String>,
    /// Why the run stopped before its planned end, if it did.
    stopped_early: Option<String>,
    /// Offset at which observation ended and undo/teardown began: verdicts are judged on
    /// the timeline up to here.
    observed_until: Option<i64>,
    /// Offset at which the experiment started (the observer had synced).
    start_ms: Option<i64>,
    /// Carrying out the steps: addresses before the faults, steps armed ahead.
    steps: steps::Steps<'a>,
    /// What was put on the timeline about the schedule and the verdicts.
    published: Published,
    /// What observing and judging cost so far.
    costs: Costs,
    /// The abort condition that stopped the run, if one did.
    aborted: Option<judge::Tripped>,
    /// The cluster after the last undo compared with before the first fault.
    restored: Option<crate::record::RestoredCheck>,
}

/// The raw measures behind [`RunCosts`]: the sync time and each tick's judging time.
#[derive(Default)]
struct Costs {
    initial_sync_ms: u64,
    tick_micros: Vec<u64>,
}

impl Run<'_> {
    async fn go(&mut self, token_id: &str, applied: &[crate::cluster::AppliedObject]) {
        let p = self.prepared;
        let actor = Actor {
            executor: &p.executor,
            client: &p.client,
            targets: &p.targets,
        };
        let journal = match Journal::open(&self.settings.journal_path) {
            Ok(j) => j,
            Err(e) => {
                self.errors.push(format!("fault journal: {e}"));
                return;
            }
        };
        let mut ledger = Ledger::new(journal, &p.cluster.name, token_id);

        let clock = Clock::new(self.timeline.zero(), self.timeline.wall_zero());
        let stream = observe::observe(
            p.client.clone(),
            &p.scope,
            clock,
            self.settings.observe_mode,
        );
        let sink = self.timeline.clone();
        let (ready_tx, ready) = tokio::sync::watch::channel(false);
        let observer = tokio::spawn(async move {
            let mut stream = stream;
            while let Some(entry) = stream.next().await {
                let is_ready = beside::is_observer_ready(&entry.event);
                sink.push(entry);
                if is_ready {
                    let _ = ready_tx.send(true);
                }
            }
        });
        let switches = p
            .failover
            .as_ref()
            .map(|f| beside::record_switches(&self.timeline, f));
        let syncing = Instant::now();
        beside::wait_for_initial_state(&self.timeline, ready, &self.cancel).await;
        self.costs.initial_sync_ms = syncing.elapsed().as_millis() as u64;
        let probes = match beside::start_probes(self.exp, p, &self.timeline) {
            Ok(probes) => probes,
            // The run goes on without probes; the error is in the record.
            Err(e) => {
                self.errors.push(e);
                None
            }
        };
        // Guards that cannot see must not let faults in: no run without its queries.
        let queries =
            match beside::start_queries(self.exp, &self.settings.inventory, &self.timeline) {
                Ok(q) => q,
                Err(e) => {
                    self.errors.push(format!("abort conditions: {e}"));
                    let companions = beside::Companions {
                        observer,
                        switches,
                        probes,
                        queries: None,
                        api_watch: None,
                    };
                    companions.stop().await;
                    return;
                }
            };
        let companions = beside::Companions {
            observer,
            switches,
            probes,
            queries,
            api_watch: beside::watch_api(self.exp, &p.client, &self.timeline),
        };
        // What the run promises to leave as it found it, read before the first fault and
        // kept beside the journal for `restore` should the run be killed.
        let before = match self.snapshot().await {
            Ok(s) => s,
            Err(e) => {
                self.errors
                    .push(format!("cluster snapshot before the first fault: {e}"));
                companions.stop().await;
                return;
            }
        };
        self.timeline.record(Event::Run {
            phase: RunPhase::Started,
        });

        let plan = schedule::Plan {
            exp: self.exp,
            targets: &p.targets,
            timers: &p.cluster.timers,
            capabilities: &p.cluster.capabilities,
            keep_going: self.settings.keep_going,
        };
        let start_ms = self.timeline.offset_ms();
        self.start_ms = Some(start_ms);
        let mut scheduler = Scheduler::new(plan, start_ms);
        let restore_at = Instant::now()
            + schedule::planned_length(self.exp, &p.cluster.timers)
            + self.settings.restore_margin;
        let end = self
            .drive(&mut scheduler, &actor, &mut ledger, restore_at)
            .await;
        self.steps.stop_proofs().await;
        self.observed_until = Some(self.timeline.offset_ms());
        self.conclude(&end, &scheduler);
        self.steps.disarm_unissued(&actor, &mut ledger).await;
        self.safety_net(&actor, &mut ledger).await;
        for problem in self.steps.address_problems(&actor).await {
            self.timeline.note(problem.clone());
            self.errors.push(problem);
        }
        self.check_restored(&before, &actor).await;
        if self.exp.teardown.delete_manifests {
            match setup::teardown(&p.client, applied).await {
                Ok(()) => self.timeline.note("teardown: setup objects deleted"),
                Err(e) => self.errors.push(format!("teardown: {e}")),
            }
        }
        companions.stop().await;
    }

    /// The run's loop: asks the scheduler what is due, issues it, and sleeps until the
    /// timeline grows, the next deadline comes or a signal arrives; returns why it ended.
    async fn drive(
        &mut self,
        scheduler: &mut Scheduler<'_>,
        actor: &Actor<'_>,
        ledger: &mut Ledger,
        restore_at: Instant,
    ) -> End {
        loop {
            let now = self.timeline.offset_ms();
            let judging = std::time::Instant::now();
            let tick = self.timeline.judge_view(|index| scheduler.poll(now, index));
            self.costs
                .tick_micros
                .push(judging.elapsed().as_micros() as u64);
            self.publish(&tick);
            if let Some(end) = tick.end {
                return end;
            }
            if self.cancel.is_cancelled() {
                scheduler.cancel();
                continue;
            }
            if !tick.due.is_empty() {
                // Steps take time: ask again as soon as they are done.
                for index in tick.due {
                    let restore_after = restore_at.saturating_duration_since(Instant::now());
                    if !self
                        .steps
                        .run_step(
                            index,
                            scheduler,
                            actor,
                            ledger,
                            restore_after,
                            &mut self.errors,
                        )
                        .await
                    {
                        break;
                    }
                }
                continue;
            }
            // Arm what is due soon now, so that arming is not part of its lateness.
            let restore_after = || restore_at.saturating_duration_since(Instant::now());
            if self
                .steps
                .arm_due_soon(&tick, now, actor, ledger, restore_after, &mut self.errors)
                .await
            {
                continue;
            }
            let wake = [tick.wake_at_ms, self.steps.next_arm_ms(&tick)]
                .into_iter()
                .flatten()
                .min()
                .map(|ms| self.timeline.zero() + Duration::from_millis(ms.max(0).unsigned_abs()));
            let deadline = wake.unwrap_or_else(|| Instant::now() + NO_DEADLINE);
            tokio::select! {
                _ = self.cancel.cancelled() => scheduler.cancel(),
                _ = tokio::time::sleep_until(deadline) => {}
                _ = self.timeline.grown() => {
                    // Let a burst of entries land before judging again.
                    tokio::select! {
                        _ = self.cancel.cancelled() => scheduler.cancel(),
                        _ = tokio::time::sleep_until(deadline) => {}
                        _ = tokio::time::sleep(Duration::from_millis(BURST_MS.unsigned_abs())) => {}
                    }
                }
            }
        }
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
            } => self.errors.push(format!(
                "step `{step}`: waited {} for {what}, which was not observed: the step timed out",
                crate::timeline::format_offset_ms(*waited_ms).trim_start_matches('+')
            )),
            End::FaultNotInEffect {
                step,
                node,
                evidence,
                reverted,
            } => {
                let on = node
                    .as_ref()
                    .map(|n| format!(" on {n}"))
                    .unwrap_or_default();
                let what = if *reverted {
                    "its fault was undone by something other than faultline"
                } else {
                    "its fault did not take effect"
                };
                self.errors
                    .push(format!("step `{step}`{on}: {what}: {evidence}"));
            }
            End::Aborted(tripped) => {
                self.timeline.record(Event::Abort {
                    condition: tripped.condition.clone(),
                    value: tripped.value.clone(),
                });
                self.aborted = Some(tripped.clone());
            }
            _ => {}
        }
        for step in scheduler.never_issued() {
            self.timeline.note(format!(
                "step `{}` was not run ({})",
                step.name,
                schedule::describe_step_time(step, &self.prepared.cluster.timers)
            ));
        }
        self.stopped_early = Some(reason);
    }

    /// Puts on the timeline what changed since the last tick: what each waiting step now
    /// waits for, and the expectations decided since.
    fn publish(&mut self, tick: &schedule::Tick) {
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
                step: self.exp.steps[*index].name.clone(),
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

    /// Reads the cluster before the first fault and saves it beside the journal.
    async fn snapshot(&self) -> Result<crate::cluster::snapshot::Snapshot, String> {
        let p = self.prepared;
        let namespaces = match &p.scope.namespaces {
            observe::Namespaces::All => None,
            observe::Namespaces::Only(list) => Some(list.as_slice()),
        };
        let inventory = p.executor.inventory();
        let mut kubelet_nodes: Vec<String> = self
            .exp
            .steps
            .iter()
            .filter(|s| faults::info(&s.action).via.needs_node_access())
            .flat_map(|s| s.nodes(&p.targets).iter().cloned())
            .filter(|n| {
                inventory
                    .node(n)
                    .is_some_and(|a| a.commands.kubelet_status.is_some())
            })
            .collect();
        kubelet_nodes.sort();
        kubelet_nodes.dedup();
        let before = restored::take_observed(
            &self.timeline,
            &p.client,
            &p.executor,
            &p.cluster.name,
            namespaces,
            &kubelet_nodes,
        )
        .await?;
        let path =
            crate::cluster::snapshot::path_beside(&self.settings.journal_path, &p.cluster.name);
        if let Err(e) = crate::cluster::snapshot::save(&before, &path) {
            self.timeline.note(format!(
                "could not keep the cluster snapshot at {} for `faultline restore`: {e}",
                path.display()
            ));
        }
        Ok(before)
    }

    /// After the last undo: compares the cluster with `before`, waiting for it to settle,
    /// and drops the saved snapshot when nothing differs.
    async fn check_restored(
        &mut self,
        before: &crate::cluster::snapshot::Snapshot,
        actor: &Actor<'_>,
    ) {
        // Interrupted: one look, no wait (whoever pressed Ctrl-C wants the prompt back).
        let settle = if self.cancel.is_cancelled() {
            Duration::ZERO
        } else {
            restored::settle_bound(self.settings.restore_margin, &self.prepared.cluster.timers)
        };
        let check =
            restored::check_observed(&self.timeline, before, actor.client, actor.executor, settle)
                .await;
        self.timeline.record(Event::Restored {
            ok: check.ok,
            differences: check.differences.clone(),
            waited_ms: check.waited_ms,
        });
        if check.ok {
            let path = crate::cluster::snapshot::path_beside(
                &self.settings.journal_path,
                &self.prepared.cluster.name,
            );
            let _ = std::fs::remove_file(path);
        }
        self.restored = Some(check);
    }

    /// Undoes every fault still active, with retries, recording each outcome.
    async fn safety_net(&mut self, actor: &Actor<'_>, ledger: &mut Ledger) {
        if ledger.active().is_empty() {
            return;
        }
        let timeout = Duration::from_secs(60);
        for report in ledger.undo_all(actor, timeout).await {
            let (ok, detail) = match &report.result {
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
                self.errors.push(format!(
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
}
