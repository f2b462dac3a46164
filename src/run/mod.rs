//! The runner: ties the stages together for one experiment and produces the run record
//! the reporters render.
//!
//! Order of a run: interlocks (context, journal) → setup (`preflight::setup`) → targets
//! resolved and the blast radius checked (`preflight::prepare`) → the loop
//! (`floor::drive`, shared with `worlds::rehearse`) in the cluster's world
//! (`worlds::cluster`): observer and companions started, steps issued through the
//! `floor::ledger`, undo of whatever is still broken, the cluster compared with before,
//! teardown → the record. What happens is sent, entry by entry, to the run's events
//! (`crate::events`), which reporters subscribe to; nothing here writes to a terminal.
//!
//! The rooms, each importing only those after it: `worlds` (the effects: the cluster, a
//! recorded run, a scripted world in tests) → `preflight` (what is checked and resolved
//! before the first fault) → `floor` (the loop, its schedule and its ledger) → `world`
//! (the seam every world implements) and the run's shared pieces (`shared_timeline`,
//! `settings`, `signals`).

pub(crate) mod floor;
pub(crate) mod grace;
pub(crate) mod lapsed;
pub(crate) mod preflight;
mod record_focus;
mod settings;
pub(crate) mod shared_timeline;
pub(crate) mod signals;
pub(crate) mod world;
pub(crate) mod worlds;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use crate::events::RunEvents;
use crate::journal::Journal;
use crate::record::{RunCosts, RunOutcome, RunRecord};
use crate::timeline::{Event, RunPhase};

use floor::drive::{self, LoopPlan};
use floor::ledger::Ledger;
use preflight::{prepare, setup};
pub use settings::{DEFAULT_RESTORE_MARGIN, RunSettings};
use shared_timeline::SharedTimeline;
// `run::rehearse` is the crate's public way to replay a record (the integration tests use it).
use worlds::cluster::ClusterWorld;
pub use worlds::rehearse;

/// Runs one experiment and returns its record, after sending every timeline entry and the
/// record itself to `events` (shared with them, not copied). Never panics on cluster
/// trouble: what went wrong is in the record (outcome `Error`, or per-step errors).
pub async fn run_experiment(
    exp: &crate::experiment::model::Experiment,
    settings: &RunSettings,
    cancel: CancellationToken,
    events: RunEvents,
) -> std::sync::Arc<RunRecord> {
    let record = std::sync::Arc::new(run_once(exp, settings, cancel, events.clone()).await);
    events.finished(&record);
    record
}

async fn run_once(
    exp: &crate::experiment::model::Experiment,
    settings: &RunSettings,
    cancel: CancellationToken,
    events: RunEvents,
) -> RunRecord {
    let started_at = Utc::now();
    let run_id = format!("{}-{}", exp.name, started_at.format("%Y%m%dT%H%M%S%.3fZ"));
    let token_id = format!("fl{}", started_at.format("%Y%m%d%H%M%S%3f"));
    // An experiment the cluster cannot mean anything on is skipped before anything is
    // asked or touched: the capabilities are the inventory's word.
    let capabilities = settings.inventory.cluster().capabilities();
    if let Some(missing) = crate::capability::missing(&exp.requires, &capabilities) {
        let cluster = setup::unread_cluster(settings);
        return setup::skipped(exp, cluster, run_id, started_at, &missing);
    }
    if let Err(e) =
        crate::probe::query::Queries::can_ask(&exp.abort, settings.inventory.prometheus())
    {
        let cluster = setup::unread_cluster(settings);
        return setup::not_run(exp, cluster, run_id, started_at, e.to_string());
    }
    let prepared = match prepare::prepare(exp, settings).await {
        // Its node-access pods carry the run's id: a restore without the lock tells them
        // from another run's.
        Ok(mut p) => {
            p.executor = p.executor.for_run(&token_id);
            p
        }
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
    // One run per cluster, from here to the end of the undo and teardown.
    let lock = match crate::cluster::lock::ClusterLock::take(
        &prepared.client,
        &prepared.cluster.name,
        &crate::cluster::lock::identity(&token_id),
        &format!("faultline run {}", exp.name),
    )
    .await
    {
        Ok(lock) => lock,
        Err(e) => return not_run(e.to_string()),
    };
    if let Some(dead) = lock.took_over.clone() {
        warnings.push(format!(
            "the cluster lock was taken over from {} ({}), which stopped renewing it at {:?}: \
             that run died; `faultline restore` with its journal undoes what it left on the \
             nodes",
            dead.identity, dead.running, dead.renewed
        ));
        // What it left that only the API undoes, recorded on the Lease: undone first, or
        // nothing runs (and it stays recorded for the next taker).
        let lapsed = lapsed::undo_lapsed(&dead, &prepared.client, &prepared.executor).await;
        warnings.extend(lapsed.iter().map(|l| l.line(&dead)));
        if let Some(left) = lapsed::still_left(&lapsed) {
            let _ = lock.handle().note_api_undos(Some(left)).await;
            lock.abandon();
            let failed: Vec<String> = lapsed
                .iter()
                .filter(|l| l.result.is_err())
                .map(|l| l.line(&dead))
                .collect();
            return not_run(failed.join("; "));
        }
    }
    let record = locked(
        exp,
        settings,
        cancel,
        events,
        prepared,
        warnings,
        (run_id, token_id, started_at),
        lock.handle(),
    )
    .await;
    lock.release().await;
    record
}

/// The part of a run that holds the cluster lock: setup, the loop, undo and teardown. A
/// lock lost on the way (`hold`) cancels the loop as a signal would, and ends the run in
/// error saying why.
#[allow(clippy::too_many_arguments)] // the run's pieces, each used once, in order
async fn locked(
    exp: &crate::experiment::model::Experiment,
    settings: &RunSettings,
    cancel: CancellationToken,
    events: RunEvents,
    mut prepared: prepare::Prepared,
    mut warnings: Vec<String>,
    (run_id, token_id, started_at): (String, String, chrono::DateTime<Utc>),
    hold: crate::cluster::lock::LockHandle,
) -> RunRecord {
    let not_run = |message: String| {
        setup::not_run(
            exp,
            prepared.cluster.clone(),
            run_id.clone(),
            started_at,
            message,
        )
    };
    let journal = match Journal::open(&settings.journal_path) {
        Ok(j) => j,
        Err(e) => return not_run(format!("fault journal: {e}")),
    };
    // While this process lives, `restore` on this journal leaves this run's faults alone.
    let _claim = match journal.claim_run(&token_id) {
        Ok(claim) => claim,
        Err(e) => return not_run(format!("fault journal: {e}")),
    };
    let applied = match setup::setup(exp, &prepared.client).await {
        Ok(applied) => applied,
        Err(e) => return not_run(format!("setup: {e}")),
    };
    // From here on the experiment is the one that runs: its rolling steps expanded.
    let mut as_run = None;
    let resolved = match prepare::resolve(exp, &mut prepared, &settings.inventory).await {
        Ok(expanded) => {
            let exp = as_run.insert(expanded);
            // The wait for heartbeats overlaps the nodes' pre-flight checks.
            let (heard, preflight, grants) = tokio::join!(
                prepare::check_acted_on_nodes_heard(exp, &prepared),
                prepare::preflight_nodes(exp, &prepared),
                prepare::preflight_node_grants(exp, &prepared)
            );
            heard.and(grants).and_then(|mut w| {
                w.extend(preflight?);
                Ok(w)
            })
        }
        Err(e) => Err(e),
    };
    let exp = as_run.as_ref().unwrap_or(exp);
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
    let focus = std::sync::Arc::new(crate::focus::Focus::of(exp, prepared.targets.values()));
    events.focus(&focus);
    let timeline = SharedTimeline::start(events);
    for note in timer_notes(&prepared.cluster.timer_sources, &prepared.timer_misses)
        .into_iter()
        .chain(warnings)
    {
        timeline.note(note);
    }
    // A lock lost from here on stops the loop (and its step in flight) as a signal does.
    let cancel = cancel.child_token();
    let relay = tokio::spawn({
        let (hold, cancel, timeline) = (hold.clone(), cancel.clone(), timeline.clone());
        async move {
            hold.lost_token().cancelled().await;
            if let Some(why) = hold.lost() {
                timeline.note(why.to_string());
            }
            cancel.cancel();
        }
    });
    let ledger = Ledger::new(Some(journal), &prepared.cluster.name, &token_id);
    let mut world = ClusterWorld::new(exp, settings, &prepared, applied, Some(hold.clone()));
    let plan = LoopPlan {
        exp,
        targets: &prepared.targets,
        control_plane: &prepared.control_plane,
        timers: &prepared.cluster.timers,
        capabilities: &prepared.cluster.capabilities,
        keep_going: settings.keep_going,
        restore_margin: settings.restore_margin,
    };
    let done = drive::run_loop(plan, &mut world, ledger, &timeline, cancel).await;
    relay.abort();
    let initial_sync_ms = world.initial_sync_ms;
    drop(world);

    let entries = done.observed_entries;
    let lost = hold.lost();
    // At 30,000 pods a copy of the timeline costs tens of MB: the record's is moved out.
    let (mut snapshot, stamp) = timeline.into_parts();
    // The record keeps what the experiment touches of the first lists; the rest is counted.
    let left_out = record_focus::leave_out_untouched(&mut snapshot, &focus);
    let mut record = RunRecord {
        faultline_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id,
        experiment: exp.clone(),
        cluster: prepared.cluster.clone(),
        targets: prepared.targets.clone(),
        started_at,
        finished_at: Utc::now(),
        timeline: snapshot,
        start_ms: done.start_ms,
        observed_until_ms: done.observed_until,
        stopped_early: done.stopped_early,
        verdicts: done.verdicts,
        figures: done.figures,
        rolls: done.rolls,
        outcome: RunOutcome::Interrupted,
        errors: done.errors,
        aborted: done.aborted,
        restored: done.restored,
        costs: Some(
            RunCosts {
                initial_sync_ms,
                entries,
                pods_listed: left_out.listed,
                pods_left_out: left_out.pods,
                ..RunCosts::default()
            }
            .with_ticks(done.tick_micros)
            .with_tick_cpu(done.tick_cpu_micros),
        ),
    };
    // `expect: conformance`: the model's windows judged over the whole observation, once
    // the record holds it.
    for v in crate::conformance::verdicts(&record) {
        stamp.record(
            &mut record.timeline,
            Event::Verdict {
                name: v.name.clone(),
                outcome: v.outcome,
                message: v.message.clone(),
            },
        );
        record.verdicts.push(v);
    }
    record.outcome = run_outcome(&record, done.cancelled, lost);
    stamp.record(
        &mut record.timeline,
        Event::Run {
            phase: RunPhase::Ended {
                outcome: record.outcome.word().to_string(),
                exit_code: crate::record::exit_code(
                    &record.outcome,
                    &record.verdicts,
                    &record.errors,
                )
                .max(record.restored.as_ref().map_or(0, |r| i32::from(!r.ok))),
            },
        },
    );
    record.finished_at = Utc::now();
    record
}

/// How the run as a whole ended: its verdicts and errors, an abort, a signal or the lost
/// lock, and a cluster left unlike it was.
fn run_outcome(
    record: &RunRecord,
    cancelled: bool,
    lost: Option<crate::cluster::lock::LockLost>,
) -> RunOutcome {
    let mut outcome = RunOutcome::from_verdicts(&record.verdicts, &record.errors);
    if let Some(t) = &record.aborted {
        outcome = RunOutcome::Error {
            message: format!("aborted: {} ({})", t.condition, t.value),
        };
    }
    if cancelled {
        outcome = match lost {
            Some(lost) => RunOutcome::Error {
                message: lost.to_string(),
            },
            None => RunOutcome::Interrupted,
        };
    }
    if outcome == RunOutcome::Passed && record.restored.as_ref().is_some_and(|r| !r.ok) {
        outcome = RunOutcome::Failed;
    }
    outcome
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
