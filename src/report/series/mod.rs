//! Reporters of a series (`run --repeat N`): every verdict run by run, each figure and
//! measured time as min / median / max, flaky expectations named. A series of one run is
//! reported by the single-run reporters instead ([`super::write_series`] chooses).

pub mod html;
pub mod junit;
pub mod markdown;
pub mod terminal;

use crate::judge::Outcome;
use crate::record::RunOutcome;
use crate::series::{Reliability, Series, SeriesSpread};

use super::text::outcome_word;

/// How a series ended as a whole, worst first: one word for headings and the last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SeriesVerdict {
    /// A run could not be carried out.
    Error,
    /// A run was interrupted.
    Interrupted,
    /// An expectation held in no run.
    Failed,
    /// An expectation held in some runs only.
    Flaky,
    /// Every counted expectation held in every run.
    Passed,
}

impl SeriesVerdict {
    /// Of a series and its spread.
    pub(crate) fn of(series: &Series, spread: &SeriesSpread) -> SeriesVerdict {
        let runs = series.runs();
        if runs
            .iter()
            .any(|r| matches!(r.outcome, RunOutcome::Error { .. }) || !r.errors.is_empty())
        {
            SeriesVerdict::Error
        } else if runs.iter().any(|r| r.outcome == RunOutcome::Interrupted) {
            SeriesVerdict::Interrupted
        } else if spread
            .expectations
            .iter()
            .any(|e| e.reliability == Reliability::NotHeld)
        {
            SeriesVerdict::Failed
        } else if spread.flaky().next().is_some() {
            SeriesVerdict::Flaky
        } else {
            SeriesVerdict::Passed
        }
    }

    /// The word: `PASSED`, `FLAKY`, `FAILED`, `ERROR`, `INTERRUPTED`.
    pub(crate) fn word(self) -> &'static str {
        match self {
            SeriesVerdict::Error => "ERROR",
            SeriesVerdict::Interrupted => "INTERRUPTED",
            SeriesVerdict::Failed => "FAILED",
            SeriesVerdict::Flaky => "FLAKY",
            SeriesVerdict::Passed => "PASSED",
        }
    }

    /// The CSS class of the single-run HTML report it resembles.
    pub(crate) fn class(self) -> &'static str {
        match self {
            SeriesVerdict::Passed => "Passed",
            SeriesVerdict::Flaky => "Undecidable",
            SeriesVerdict::Failed => "Failed",
            SeriesVerdict::Error => "Error",
            SeriesVerdict::Interrupted => "Pending",
        }
    }
}

/// The series' last line: `FLAKY: 1 expectation held in some runs only (…); 3 runs`.
pub(crate) fn verdict_line(series: &Series, spread: &SeriesSpread) -> String {
    let verdict = SeriesVerdict::of(series, spread);
    let n = series.runs().len();
    let names = |r: Reliability| {
        spread
            .expectations
            .iter()
            .filter(|e| e.reliability == r)
            .map(|e| format!("{} ({})", e.name, e.summary()))
            .collect::<Vec<_>>()
    };
    let detail = match verdict {
        SeriesVerdict::Passed => format!("every counted expectation held in all {n} runs"),
        SeriesVerdict::Flaky => {
            let flaky = names(Reliability::Flaky);
            format!(
                "{} expectation(s) held in some runs only: {}",
                flaky.len(),
                flaky.join("; ")
            )
        }
        SeriesVerdict::Failed => {
            let failed = names(Reliability::NotHeld);
            format!(
                "{} expectation(s) held in none of the {n} runs: {}",
                failed.len(),
                failed.join("; ")
            )
        }
        SeriesVerdict::Error | SeriesVerdict::Interrupted => {
            let bad: Vec<String> = series
                .runs()
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    !matches!(
                        r.outcome,
                        RunOutcome::Passed | RunOutcome::Failed | RunOutcome::Skipped { .. }
                    ) || !r.errors.is_empty()
                })
                .map(|(i, r)| {
                    let why = match &r.outcome {
                        RunOutcome::Error { message } => message.clone(),
                        RunOutcome::Interrupted => "interrupted".to_string(),
                        RunOutcome::Skipped { reason } => format!("skipped: {reason}"),
                        _ => r.errors.join("; "),
                    };
                    format!("run {}: {why}", i + 1)
                })
                .collect();
            bad.join("; ")
        }
    };
    format!("{}: {detail}", verdict.word())
}

/// An expectation's outcomes in run order as words: `PASS PASS FAIL`.
pub(crate) fn outcomes_text(outcomes: &[Outcome]) -> String {
    outcomes
        .iter()
        .map(|o| outcome_word(*o))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Each run's score in run order: `100, 87.5, 100`.
pub(crate) fn scores_text(scores: &[Option<f64>]) -> String {
    scores
        .iter()
        .map(|s| crate::judge::score::value_text(*s))
        .collect::<Vec<_>>()
        .join(", ")
}
