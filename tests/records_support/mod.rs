//! Records for the comparison tests, derived in the test from the real lab runs committed
//! under `fixtures/records/` (which are never edited): a copy with its figures moved, a
//! verdict changed, or the cluster "upgraded".
#![allow(dead_code)]

use std::path::PathBuf;

use faultline::judge::Outcome;
use faultline::record::{RunOutcome, RunRecord};
use faultline::series::Series;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A committed record, by experiment name.
pub fn fixture(name: &str) -> RunRecord {
    let path = repo().join("fixtures/records").join(format!("{name}.json"));
    RunRecord::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The record with the node noticed `ms` later: the node-NotReady and unreachable-taint
/// figures and the measured time of every expectation about the node going Unknown or
/// tainted move by `ms` — what a longer node-monitor grace period does.
pub fn node_noticed_later(mut r: RunRecord, ms: i64) -> RunRecord {
    let shift = |v: &mut Option<i64>| *v = v.map(|x| x + ms);
    shift(&mut r.figures.node_not_ready_ms);
    shift(&mut r.figures.unreachable_taint_ms);
    for v in &mut r.verdicts {
        if v.name.starts_with("node goes Unknown") || v.name.contains("unreachable") {
            shift(&mut v.measured_ms);
        }
    }
    r
}

/// The record as if made on another Kubernetes version with a grace period `ms` longer:
/// the version and timers change, and the node is noticed `ms` later.
pub fn upgraded(r: RunRecord, version: &str, ms: i64) -> RunRecord {
    let mut r = node_noticed_later(r, ms);
    r.cluster.server_version = Some(version.to_string());
    let by = std::time::Duration::from_millis(ms.unsigned_abs());
    let grace = &mut r.cluster.timers.node_monitor_grace_period;
    *grace = if ms >= 0 { *grace + by } else { *grace - by };
    r
}

/// The record with the node-NotReady figure set to `ms` (a sample of the heartbeat jitter).
pub fn with_node_not_ready(mut r: RunRecord, ms: i64) -> RunRecord {
    r.figures.node_not_ready_ms = Some(ms);
    r
}

/// The record with expectation `name` ending as `outcome` (and the run's outcome with it).
pub fn with_outcome(mut r: RunRecord, name: &str, outcome: Outcome) -> RunRecord {
    let v = r
        .verdicts
        .iter_mut()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no expectation {name:?}"));
    v.outcome = outcome;
    v.message = format!("made {outcome:?} by the test");
    r.outcome = RunOutcome::from_verdicts(&r.verdicts, &r.errors);
    r
}

/// A series of `runs`.
pub fn series(runs: Vec<RunRecord>) -> Series {
    Series::new(runs).expect("at least one run")
}

/// Every committed record, one series each.
pub fn committed() -> Vec<Series> {
    faultline::series::load_all(&repo().join("fixtures/records")).expect("the committed records")
}
