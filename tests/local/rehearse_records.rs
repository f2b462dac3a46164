//! `rehearse` against the records of real lab runs committed under `fixtures/records/`
//! (written by `faultline run`, never edited): rehearsing each shipped experiment against
//! its own record reproduces its verdicts and its schedule; a changed step moves in the
//! rehearsal; an experiment that needs a target the record lacks is refused.

use std::path::{Path, PathBuf};

use faultline::experiment::model::{Bound, StepTime};
use faultline::judge::Outcome;
use faultline::record::RunRecord;
use faultline::run::rehearse::{RehearseError, rehearse};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn records() -> Vec<(PathBuf, RunRecord)> {
    let dir = repo().join("fixtures/records");
    let mut out: Vec<(PathBuf, RunRecord)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let r = RunRecord::load(&p).unwrap_or_else(|e| panic!("{e}"));
            (p, r)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The shipped experiment a record was made from, loaded from the file as it is now.
fn shipped(record: &RunRecord) -> faultline::experiment::model::Experiment {
    let name = record
        .experiment
        .source
        .file_name()
        .expect("the record names its experiment file");
    let path = repo().join("experiments").join(name);
    faultline::experiment::load(Path::new(&path))
        .unwrap_or_else(|d| panic!("{}: {d}", path.display()))
}

#[test]
fn each_shipped_experiment_rehearsed_against_its_record_reproduces_its_verdicts() {
    let records = records();
    assert!(
        records.len() >= 2,
        "fixtures/records holds the records of real lab runs; found {}",
        records.len()
    );
    for (path, record) in &records {
        let exp = shipped(record);
        let r = rehearse(&exp, record, false).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!r.ended_early, "{}: {}", path.display(), r.ended);
        assert_eq!(
            r.verdicts.len(),
            record.verdicts.len(),
            "{}",
            path.display()
        );
        for (got, want) in r.verdicts.iter().zip(&record.verdicts) {
            assert_eq!(
                (got.name.as_str(), got.outcome),
                (want.name.as_str(), want.outcome),
                "{}: {}\n  rehearsed: {}\n  recorded:  {}",
                path.display(),
                got.name,
                got.message,
                want.message
            );
            if let (Some(a), Some(b)) = (got.measured_ms, want.measured_ms) {
                assert!(
                    (a - b).abs() <= 1_000,
                    "{}: `{}` measured {a} ms rehearsed, {b} ms recorded",
                    path.display(),
                    got.name
                );
            }
        }
        for step in &r.steps {
            let (Some(at), Some(recorded)) = (step.at_ms, step.recorded_ms) else {
                panic!(
                    "{}: step `{}` ran in one and not the other: {step:?}",
                    path.display(),
                    step.name
                );
            };
            assert!(
                (at - recorded).abs() <= 1_000,
                "{}: step `{}` at {at} ms rehearsed, {recorded} ms recorded",
                path.display(),
                step.name
            );
        }
        assert!(
            r.verdicts.iter().any(|v| v.outcome == Outcome::Passed),
            "{}: a record whose run passed nothing proves little",
            path.display()
        );
    }
}

/// The record named `name` and the shipped experiment it was made from.
fn record_named(name: &str) -> (PathBuf, RunRecord) {
    records()
        .into_iter()
        .find(|(_, r)| r.experiment.name == name)
        .unwrap_or_else(|| panic!("no record of `{name}` in fixtures/records"))
}

/// The experiment with its last step issued 5 s later than it says.
fn last_step_5s_later(record: &RunRecord) -> faultline::experiment::model::Experiment {
    let mut exp = shipped(record);
    let last = exp.steps.len() - 1;
    let moved = &mut exp.steps[last];
    moved.at = match &moved.at {
        StepTime::Offset(b) => StepTime::Offset(plus_5s(b)),
        StepTime::AfterStep { step, delay } => StepTime::AfterStep {
            step: step.clone(),
            delay: plus_5s(delay),
        },
        StepTime::When {
            subject,
            state,
            delay,
            since,
        } => StepTime::When {
            subject: subject.clone(),
            state: state.clone(),
            delay: plus_5s(delay),
            since: since.clone(),
        },
    };
    exp
}

#[test]
fn a_step_moved_in_the_experiment_moves_in_the_rehearsal() {
    let (path, record) = record_named("kubelet-stop-within-toleration");
    let exp = last_step_5s_later(&record);
    let r = rehearse(&exp, &record, false).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let step = r.steps.last().expect("steps");
    let (at, recorded) = (
        step.at_ms
            .unwrap_or_else(|| panic!("never issued: {}", r.ended)),
        step.recorded_ms.expect("recorded"),
    );
    assert!(
        (at - recorded - 5_000).abs() <= 1_000,
        "{}: `{}` rehearsed at {at} ms, recorded at {recorded} ms",
        path.display(),
        step.name
    );
}

/// The recorded cluster does not react to a rehearsed step: with the kubelet started 5 s
/// later than in the record, the db pod is seen leaving Terminating before the (rehearsed)
/// start, so "stays Terminating until the kubelet is back" fails and the rehearsal stops
/// there, as a run would.
#[test]
fn a_rehearsal_shows_which_expectation_a_moved_step_breaks() {
    let (path, record) = record_named("kubelet-stop-past-toleration");
    let exp = last_step_5s_later(&record);
    let r = rehearse(&exp, &record, false).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(r.ended_early, "{}", r.ended);
    let failed: Vec<&str> = r
        .verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Failed)
        .map(|v| v.name.as_str())
        .collect();
    // Both expectations tied to the kubelet's return fail; the first one stopped it.
    assert_eq!(
        failed,
        [
            "db pod stays Terminating until the kubelet is back",
            "no db replacement while the old pod exists"
        ],
        "{}",
        r.ended
    );
    assert!(
        r.ended
            .contains("`db pod stays Terminating until the kubelet is back` failed"),
        "{}",
        r.ended
    );
    assert_eq!(r.steps.last().and_then(|s| s.at_ms), None, "never issued");
}

fn plus_5s(b: &Bound) -> Bound {
    let mut b = b.clone();
    b.terms
        .extend(Bound::fixed(std::time::Duration::from_secs(5)).terms);
    b
}

#[test]
fn an_experiment_needing_a_target_the_record_lacks_is_refused() {
    let (_, record) = records().into_iter().next().expect("a record");
    let mut exp = shipped(&record);
    let mut extra = exp.targets[0].clone();
    extra.name = "elsewhere".into();
    exp.targets.push(extra);
    let err = rehearse(&exp, &record, false).expect_err("refused");
    assert!(
        matches!(&err, RehearseError::UnknownTarget { target, .. } if target == "elsewhere"),
        "{err}"
    );
}
