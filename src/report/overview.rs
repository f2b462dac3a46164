//! The overview of a run of several experiments: one row each (outcome, how many
//! expectations passed, failed or ended in an error, how long it took, its slowest recovery
//! figure), at the end of the terminal output and at the top of the Markdown summary, so a
//! 12-experiment run can be read without scrolling through twelve sections.

use std::fmt::Write as _;

use super::series::SeriesVerdict;
use crate::judge::Outcome;
use crate::record::{RunOutcome, RunRecord};
use crate::sanitize::{clean, markdown as md};
use crate::series::Series;

/// One experiment's line of the overview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The experiment.
    pub name: String,
    /// How it ended, as its own section's heading says (`PASSED`, `FAILED`, `FLAKY`, …),
    /// with the number of runs of a `--repeat`.
    pub outcome: String,
    /// Whether that outcome is a pass (shown plain; anything else stands out).
    pub passed_outright: bool,
    /// Whether it was not run because the cluster lacks what it requires (shown plain,
    /// counted apart from both passes and failures).
    pub skipped: bool,
    /// Expectations that passed, over every run.
    pub passed: usize,
    /// Expectations that failed, over every run.
    pub failed: usize,
    /// Expectations that ended in an error, and step or setup errors, over every run.
    pub errors: usize,
    /// The runs' wall time added up, ms.
    pub wall_ms: i64,
    /// The slowest recovery figure observed in any run: its label and value, ms.
    pub slowest: Option<(&'static str, i64)>,
}

impl Row {
    /// The row of one experiment's series (a single run, or a `--repeat`).
    pub fn of(series: &Series) -> Row {
        let runs = series.runs();
        let count = |o: Outcome| -> usize {
            runs.iter()
                .map(|r| r.verdicts.iter().filter(|v| v.outcome == o).count())
                .sum()
        };
        let (outcome, passed_outright) = if series.is_repeated() {
            let verdict = SeriesVerdict::of(series, &series.spread());
            (
                format!("{} ({} runs)", verdict.word(), runs.len()),
                verdict == SeriesVerdict::Passed,
            )
        } else {
            let first = series.first();
            (
                run_word(&first.outcome).to_string(),
                first.outcome == RunOutcome::Passed,
            )
        };
        Row {
            name: series.name().to_string(),
            outcome,
            passed_outright,
            skipped: runs
                .iter()
                .all(|r| matches!(r.outcome, RunOutcome::Skipped { .. })),
            passed: count(Outcome::Passed),
            failed: count(Outcome::Failed),
            errors: count(Outcome::Error) + runs.iter().map(|r| r.errors.len()).sum::<usize>(),
            wall_ms: runs.iter().map(|r| wall_ms(r)).sum(),
            slowest: runs
                .iter()
                .flat_map(|r| r.figures.rows())
                .filter_map(|(label, value)| Some((label, value?)))
                .max_by_key(|(_, ms)| *ms),
        }
    }

    fn slowest_text(&self) -> String {
        self.slowest
            .map(|(label, ms)| format!("{label} {:.1}s", ms as f64 / 1000.0))
            .unwrap_or_else(|| "-".to_string())
    }
}

/// A run's wall time, from its record's start to its end.
fn wall_ms(record: &RunRecord) -> i64 {
    (record.finished_at - record.started_at)
        .num_milliseconds()
        .max(0)
}

fn run_word(outcome: &RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Passed => "PASSED",
        RunOutcome::Failed => "FAILED",
        RunOutcome::Error { .. } => "ERROR",
        RunOutcome::Interrupted => "INTERRUPTED",
        RunOutcome::Skipped { .. } => "SKIPPED",
    }
}

/// The last line under the rows: `12 experiments: 10 passed, 2 not · 36m 30s`.
fn total_line(rows: &[Row]) -> String {
    let passed = rows.iter().filter(|r| r.passed_outright).count();
    let skipped = rows.iter().filter(|r| r.skipped).count();
    let wall: i64 = rows.iter().map(|r| r.wall_ms).sum();
    let skipped_text = if skipped > 0 {
        format!(", {skipped} skipped (the cluster lacks what they need)")
    } else {
        String::new()
    };
    format!(
        "{} experiments: {passed} passed{skipped_text}, {} did not · {}",
        rows.len(),
        rows.len() - passed - skipped,
        super::text::duration_text(wall)
    )
}

/// The overview as aligned text lines for the terminal.
pub fn terminal(rows: &[Row]) -> String {
    let header = [
        "outcome",
        "experiment",
        "passed",
        "failed",
        "errors",
        "duration",
        "slowest figure",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.outcome.clone(),
                clean(&r.name),
                r.passed.to_string(),
                r.failed.to_string(),
                r.errors.to_string(),
                super::text::duration_text(r.wall_ms),
                r.slowest_text(),
            ]
        })
        .collect();
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].chars().count())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |c: [&str; 7]| {
        format!(
            "  {:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}  {:>w4$}  {:>w5$}  {}",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5],
            c[6],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
            w4 = widths[4],
            w5 = widths[5],
        )
        .trim_end()
        .to_string()
    };
    let mut out = String::from("== overview\n");
    out.push_str(&line(header));
    out.push('\n');
    for c in &cells {
        out.push_str(&line([&c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6]]));
        out.push('\n');
    }
    out.push_str(&total_line(rows));
    out.push('\n');
    out
}

/// The overview as a Markdown section (a level-2 heading and a table), for the top of the
/// summary.
pub fn markdown(rows: &[Row]) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "## Overview\n\n{}\n", total_line(rows));
    m.push_str("| Experiment | Outcome | Passed | Failed | Errors | Duration | Slowest figure |\n");
    m.push_str("| --- | --- | ---: | ---: | ---: | ---: | --- |\n");
    for r in rows {
        let outcome = if r.passed_outright || r.skipped {
            r.outcome.clone()
        } else {
            format!("**{}**", r.outcome)
        };
        let _ = writeln!(
            m,
            "| {} | {outcome} | {} | {} | {} | {} | {} |",
            md(&r.name),
            r.passed,
            r.failed,
            r.errors,
            super::text::duration_text(r.wall_ms),
            r.slowest_text()
        );
    }
    m
}
