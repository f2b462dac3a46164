//! The JSON record round-trips, and the exit code follows the outcome.

use crate::judge_support::*;
use faultline::judge::Outcome;
use faultline::record::{RunOutcome, RunRecord};
use faultline::report::{json, write_all};

#[test]
fn json_round_trip_is_lossless() {
    let rec = record();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("run.json");
    json::write(&rec, &path).expect("write");
    let back = RunRecord::load(&path).expect("load");
    assert_eq!(back, rec);
    // The score is written for tools, derived from the verdicts again on load.
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(raw["score"]["value"], 33.3);
    assert_eq!(raw["score"]["counted"], 3);
    assert_eq!(back.score(), rec.score());
}

#[test]
fn loading_garbage_names_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.json");
    std::fs::write(&path, "{\"not\": \"a record\"}").expect("write");
    let err = RunRecord::load(&path).expect_err("must fail");
    assert!(
        err.to_string()
            .contains("bad.json: not a faultline run record"),
        "{err}"
    );
}

#[test]
fn exit_codes() {
    let mut rec = record();
    assert_eq!(rec.outcome, RunOutcome::Failed);
    assert_eq!(rec.exit_code(), 1);
    for v in &mut rec.verdicts {
        v.outcome = Outcome::Passed;
    }
    rec.outcome = RunOutcome::from_verdicts(&rec.verdicts, &rec.errors);
    assert_eq!(rec.outcome, RunOutcome::Passed);
    assert_eq!(rec.exit_code(), 0);
    rec.outcome = RunOutcome::Interrupted;
    assert_eq!(rec.exit_code(), 2);
    rec.outcome = RunOutcome::Passed;
    rec.errors.push("step `stop kubelet`: timed out".into());
    assert_eq!(rec.exit_code(), 2);
}

#[test]
fn write_all_writes_three_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let paths = write_all(&record(), dir.path()).expect("write_all");
    let names: Vec<String> = paths
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    assert_eq!(
        names,
        vec![
            "kubelet-stop-past-toleration.junit.xml",
            "kubelet-stop-past-toleration.json",
            "kubelet-stop-past-toleration.html"
        ]
    );
    assert!(paths.iter().all(|p| p.exists()));
}
