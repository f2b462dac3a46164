//! Reporters: each one a function of a [`RunRecord`] (or of a [`Series`] of them, or of a
//! [`crate::compare::Comparison`]), none reaching back into the run.

pub mod compare;
pub mod events;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod overview;
pub mod progress;

pub mod series;
pub mod subscribe;
pub mod terminal;

use std::path::{Path, PathBuf};

use crate::judge::{Outcome, format_relative};
use crate::record::{RecordError, RunOutcome, RunRecord};
use crate::series::Series;

/// An expectation's outcome as one upper-case word, the same in every report.
pub fn outcome_word(o: Outcome) -> &'static str {
    o.word()
}

/// A verdict's message, with the mark of an expectation whose bounds rest on an assumed
/// timer (` [ASSUMED: grace = 50s]`): every report shows it the same way.
pub fn verdict_message(record: &RunRecord, v: &crate::judge::Verdict) -> String {
    format!("{}{}", v.message, record.assumed_mark(&v.name))
}

/// What the node failure model predicted for the transitions a verdict's expectation is
/// about, each beside what was observed and, for a deviation, its cause: one line each,
/// for a failed case's message (empty when the model predicts nothing for them).
pub fn model_lines(
    record: &RunRecord,
    explanation: &crate::explain::Explanation,
    v: &crate::judge::Verdict,
) -> Vec<String> {
    let Some(expectation) = record.expectation_of(v) else {
        return Vec::new();
    };
    crate::explain::related(explanation, record, expectation)
        .into_iter()
        .map(|i| format!("the node failure model: {}", i.line()))
        .collect()
}

/// One line per timer the run resolved its bounds against, with where it came from
/// (`nodeMonitorGracePeriod 20s (cluster: …)`); none for records that do not say.
pub fn timer_lines(record: &RunRecord) -> Vec<String> {
    record
        .cluster
        .timer_sources
        .iter()
        .map(crate::timers::TimerSource::line)
        .collect()
}

/// A verdict's measured time, or `-` when nothing was measured.
pub fn measured_text(ms: Option<i64>) -> String {
    ms.map(format_relative).unwrap_or_else(|| "-".into())
}

/// A recovery figure, or `not observed`.
pub fn figure_text(ms: Option<i64>) -> String {
    ms.map(format_relative)
        .unwrap_or_else(|| "not observed".into())
}

/// How a run ended, counted the one way every reporter counts it (the terminal's last
/// line, Markdown, and JUnit's `tests`/`failures`/`errors`/`skipped`): each expectation
/// by its outcome, the check that the cluster was left as it was found (passed or failed),
/// and what is not an expectation but must show as an error in CI — each step or setup
/// error, an abort, a run that ended in error or was interrupted with nothing to say so.
/// Steps that never ran are not counted: they are said in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tally {
    /// Expectations that held, and a cluster restored as it was.
    pub passed: usize,
    /// Expectations that did not, and a cluster not restored.
    pub failed: usize,
    /// Expectations the timeline could not decide.
    pub undecidable: usize,
    /// Expectations not judged (the run was skipped, or their step never ran).
    pub skipped: usize,
    /// Expectations in error or left pending by an interruption, step and setup
    /// errors, an abort, and a run error or interruption no other entry reports.
    pub errors: usize,
}

impl Tally {
    /// Counts `record`.
    pub(crate) fn of(record: &RunRecord) -> Tally {
        let count = |o: Outcome| record.verdicts.iter().filter(|v| v.outcome == o).count();
        let restored = record.restored.as_ref().is_some_and(|r| r.ok);
        let not_restored = record.restored.as_ref().is_some_and(|r| !r.ok);
        Tally {
            passed: count(Outcome::Passed) + usize::from(restored),
            failed: count(Outcome::Failed) + usize::from(not_restored),
            undecidable: count(Outcome::Undecidable),
            skipped: count(Outcome::Skipped),
            errors: count(Outcome::Error)
                + count(Outcome::Pending)
                + record.errors.len()
                + usize::from(record.aborted.is_some())
                + usize::from(run_error(record).is_some()),
        }
    }

    /// Every entry counted: what JUnit calls `tests`.
    #[cfg(test)]
    pub(crate) fn total(&self) -> usize {
        self.passed + self.failed + self.undecidable + self.skipped + self.errors
    }
}

/// The run's own error, when no expectation, step error or abort already says the run did
/// not end well: a run error with nothing else to show it, or an interruption before any
/// expectation was pending. JUnit shows it as a `run` test case, the terminal counts it.
pub(crate) fn run_error(record: &RunRecord) -> Option<(&'static str, String)> {
    match &record.outcome {
        RunOutcome::Error { message } if record.errors.is_empty() && record.aborted.is_none() => {
            Some(("error", message.clone()))
        }
        RunOutcome::Interrupted
            if !record
                .verdicts
                .iter()
                .any(|v| v.outcome == Outcome::Pending) =>
        {
            Some((
                "interrupted",
                "interrupted before observation finished".to_string(),
            ))
        }
        _ => None,
    }
}

/// How many ended each way ([`Tally`]): `3 passed, 1 failed, 0 undecidable, …`.
pub fn tally(record: &RunRecord) -> String {
    let t = Tally::of(record);
    format!(
        "{} passed, {} failed, {} undecidable, {} skipped, {} errors",
        t.passed, t.failed, t.undecidable, t.skipped, t.errors
    )
}

/// The safety of the run in words, one line each: the abort condition that stopped it,
/// each fault's proof that it took effect (or not), and whether the cluster was left as
/// it was found. Every reporter shows these.
pub fn safety_lines(record: &RunRecord) -> Vec<String> {
    use crate::timeline::{Event, StepPhase, format_offset_ms};
    let mut out = Vec::new();
    if let Some(t) = &record.aborted {
        out.push(format!(
            "ABORTED at {}: {} ({}); every fault was undone at once",
            format_offset_ms(t.at_ms),
            t.condition,
            t.value
        ));
    }
    for e in &record.timeline.entries {
        let Event::Step {
            step, node, phase, ..
        } = &e.event
        else {
            continue;
        };
        let on = node
            .as_deref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default();
        let said = match phase {
            StepPhase::Confirmed { evidence } => format!("took effect: {evidence}"),
            StepPhase::NotConfirmed { evidence } => format!("DID NOT TAKE EFFECT: {evidence}"),
            StepPhase::Reverted { evidence } => {
                format!("UNDONE BY SOMETHING ELSE: {evidence}")
            }
            _ => continue,
        };
        out.push(format!(
            "{} fault of `{step}`{on} {said}",
            format_offset_ms(e.offset_ms)
        ));
    }
    match &record.restored {
        Some(r) if r.ok => out.push(format!(
            "cluster restored: {} (settled after {:.1}s)",
            r.compared,
            r.waited_ms as f64 / 1000.0
        )),
        Some(r) => out.push(format!(
            "cluster NOT restored after waiting {:.1}s: {}",
            r.waited_ms as f64 / 1000.0,
            r.differences.join("; ")
        )),
        None => {}
    }
    out
}

/// Writing a report failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The record could not be saved.
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// A file-name-safe form of the experiment name.
fn file_stem(name: &str) -> String {
    let stem = crate::file_names::safe(name);
    let stem = stem.trim_start_matches('.');
    if stem.is_empty() {
        "experiment".to_string()
    } else {
        stem.to_string()
    }
}

/// Writes `<dir>/<experiment>.junit.xml`, `.json` and `.html`; returns the paths written.
pub fn write_all(record: &RunRecord, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let stem = file_stem(&record.experiment.name);
    let junit_path = dir.join(format!("{stem}.junit.xml"));
    junit::write(record, &junit_path)?;
    let json_path = dir.join(format!("{stem}.json"));
    json::write(record, &json_path)?;
    let html_path = dir.join(format!("{stem}.html"));
    write_streamed(&html_path, |out| html::render_into(out, record))?;
    Ok(vec![junit_path, json_path, html_path])
}

/// Writes to `path` what `render` writes, through a buffer, never holding it whole.
fn write_streamed(
    path: &Path,
    render: impl FnOnce(&mut TextToFile<std::io::BufWriter<std::fs::File>>),
) -> Result<(), ReportError> {
    let io = |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = TextToFile {
        out: std::io::BufWriter::new(file),
        failed: None,
    };
    render(&mut out);
    if let Some(e) = out.failed {
        return Err(io(e));
    }
    std::io::Write::flush(&mut out.out).map_err(io)
}

/// Text written to a file: the first write that fails is kept, and the rest is dropped.
struct TextToFile<W> {
    out: W,
    failed: Option<std::io::Error>,
}

impl<W: std::io::Write> std::fmt::Write for TextToFile<W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.failed.is_some() {
            return Err(std::fmt::Error);
        }
        self.out.write_all(s.as_bytes()).map_err(|e| {
            self.failed = Some(e);
            std::fmt::Error
        })
    }
}

/// Writes a series' reports: those of [`write_all`] for a single run; for more,
/// `<dir>/<experiment>.junit.xml` (one case per expectation over all runs), `.json` (the
/// series file, every run kept) and `.html`. Returns the paths written.
pub fn write_series(series: &Series, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    if !series.is_repeated() {
        return write_all(series.first(), dir);
    }
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let stem = file_stem(series.name());
    let junit_path = dir.join(format!("{stem}.junit.xml"));
    write_text(&junit_path, &series::junit::render(series))?;
    let json_path = dir.join(format!("{stem}.json"));
    series.save(&json_path)?;
    let html_path = dir.join(format!("{stem}.html"));
    write_text(&html_path, &series::html::render(series))?;
    Ok(vec![junit_path, json_path, html_path])
}

/// Writes `text` to `path`.
pub(crate) fn write_text(path: &Path, text: &str) -> Result<(), ReportError> {
    std::fs::write(path, text).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_streamed_hold_what_the_renderers_say() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/records");
        let out = tempfile::tempdir().expect("tempdir");
        let mut seen = 0;
        for path in std::fs::read_dir(&dir).expect("fixtures/records") {
            let path = path.expect("entry").path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let record = RunRecord::load(&path).expect("record");
            let written = write_all(&record, out.path()).expect("written");
            let read = |i: usize| std::fs::read_to_string(&written[i]).expect("read");
            assert_eq!(read(1), record.to_json().expect("json") + "\n", "{path:?}");
            assert_eq!(read(2), html::render(&record), "{path:?}");
            seen += 1;
        }
        assert!(seen >= 4, "the recorded runs");
    }

    #[test]
    fn a_file_that_cannot_be_written_is_an_error_naming_it() {
        let out = tempfile::tempdir().expect("tempdir");
        let path = out.path().join("missing-dir").join("page.html");
        let err = write_streamed(&path, |w| {
            let _ = std::fmt::Write::write_str(w, "text");
        })
        .expect_err("no directory");
        assert!(err.to_string().contains("page.html"), "{err}");
    }
}
