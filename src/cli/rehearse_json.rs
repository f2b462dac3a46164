//! `faultline rehearse -o json`: each rehearsal as a structure for tools, from the same
//! [`Rehearsal`] the text is written from. One object per rehearsed run, in an array; the
//! fields are documented in docs/reading-results.md. The exit code is the text's.

use serde::Serialize;

use crate::judge::Outcome;
use crate::record::RunRecord;
use crate::run::rehearse::{Rehearsal, RehearseError};

/// One rehearsal against one recorded run.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RehearsalDoc {
    /// The experiment rehearsed.
    pub experiment: String,
    /// The recorded run's id.
    pub run_id: String,
    /// Its place in the series (1 is the first; 1 of 1 for a single record).
    pub run: usize,
    /// How many runs the record holds.
    pub runs: usize,
    /// The recorded run's cluster.
    pub cluster: String,
    /// Why the rehearsal could not be made, when it could not (exit 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every step, in file order: when the rehearsal and the record issued it.
    pub steps: Vec<StepDoc>,
    /// Why the rehearsed run ended, in words (the early stop's reason when `endedEarly`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// Whether it stopped before its plan did (a failed expectation without
    /// `--keep-going`, an abort condition).
    pub ended_early: bool,
    /// Each expectation's rehearsed verdict beside the recorded one.
    pub expectations: Vec<ExpectationDoc>,
    /// The exit code this rehearsal gives (the process exits with the worst).
    pub exit_code: i32,
}

/// A step as rehearsed and as recorded.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StepDoc {
    /// The step.
    pub name: String,
    /// When the rehearsal issued it, ms after the start; absent: not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<i64>,
    /// When the recorded run issued it, ms after the start; absent: not run there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded_ms: Option<i64>,
}

/// An expectation's verdict as rehearsed, beside the record's.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ExpectationDoc {
    /// The expectation.
    pub name: String,
    /// `Passed`, `Failed`, `Undecidable`, `Skipped`, `Error` or `Pending`, as in a record.
    pub outcome: Outcome,
    /// The decisive moment, ms after `since`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_ms: Option<i64>,
    /// Why, as the judge says it.
    pub message: String,
    /// The step its times count from.
    pub since: String,
    /// The recorded run's verdict on it, when the record has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<RecordedDoc>,
}

/// The recorded verdict of an expectation.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RecordedDoc {
    /// Its outcome.
    pub outcome: Outcome,
    /// Its decisive moment, ms after `since`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_ms: Option<i64>,
}

impl RehearsalDoc {
    /// The rehearsal of `name` against run `k` of `n`, `record`; `Err` when it could not
    /// be made.
    pub(super) fn of(
        name: &str,
        (k, n): (usize, usize),
        record: &RunRecord,
        rehearsal: Result<&Rehearsal, &RehearseError>,
        exit_code: i32,
    ) -> RehearsalDoc {
        let mut doc = RehearsalDoc {
            experiment: name.to_string(),
            run_id: record.run_id.clone(),
            run: k,
            runs: n,
            cluster: record.cluster.name.clone(),
            error: None,
            steps: Vec::new(),
            ended: None,
            ended_early: false,
            expectations: Vec::new(),
            exit_code,
        };
        let r = match rehearsal {
            Ok(r) => r,
            Err(e) => {
                doc.error = Some(e.to_string());
                return doc;
            }
        };
        doc.steps = r
            .steps
            .iter()
            .map(|s| StepDoc {
                name: s.name.clone(),
                at_ms: s.at_ms,
                recorded_ms: s.recorded_ms,
            })
            .collect();
        doc.ended = Some(r.ended.clone());
        doc.ended_early = r.ended_early;
        doc.expectations = r
            .verdicts
            .iter()
            .map(|v| ExpectationDoc {
                name: v.name.clone(),
                outcome: v.outcome,
                measured_ms: v.measured_ms,
                message: v.message.clone(),
                since: v.since.clone(),
                recorded: record
                    .verdicts
                    .iter()
                    .find(|rv| rv.name == v.name)
                    .map(|rv| RecordedDoc {
                        outcome: rv.outcome,
                        measured_ms: rv.measured_ms,
                    }),
            })
            .collect();
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> std::sync::Arc<RunRecord> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/records/kubelet-stop-past-toleration.json");
        let series = crate::series::Series::load(&path).unwrap_or_else(|e| panic!("{e}"));
        series.runs()[0].clone()
    }

    #[test]
    fn a_rehearsal_that_could_not_be_made_says_why_and_nothing_else() {
        let record = record();
        let err = RehearseError::NothingObserved("no start".into());
        let doc = RehearsalDoc::of("e", (2, 3), &record, Err(&err), 2);
        let json = serde_json::to_value(&doc).expect("serialises");
        assert_eq!(
            json["error"],
            "the record has no observations: its run never started (no start)"
        );
        assert_eq!(
            (json["run"].as_u64(), json["runs"].as_u64()),
            (Some(2), Some(3))
        );
        assert_eq!(json["runId"], record.run_id.as_str());
        assert!(json.get("ended").is_none(), "{json}");
        assert_eq!(json["expectations"].as_array().map(Vec::len), Some(0));
        assert_eq!(json["exitCode"], 2);
    }

    #[test]
    fn each_verdict_stands_beside_the_recorded_one() {
        let record = record();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("experiments/kubelet-stop-past-toleration.yaml");
        let exp = crate::experiment::load(&path).unwrap_or_else(|d| panic!("{d}"));
        let r =
            crate::run::rehearse::rehearse(&exp, &record, false).unwrap_or_else(|e| panic!("{e}"));
        let doc = RehearsalDoc::of(&exp.name, (1, 1), &record, Ok(&r), 0);
        assert_eq!(doc.expectations.len(), record.verdicts.len());
        for e in &doc.expectations {
            let recorded = e.recorded.as_ref().expect("in the record");
            assert_eq!(e.outcome, recorded.outcome, "{}", e.name);
        }
        assert_eq!(doc.steps.len(), exp.steps.len());
        assert_eq!(doc.ended.as_deref(), Some(r.ended.as_str()));
    }
}
