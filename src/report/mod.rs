//! Reporters: each one a function of a [`RunRecord`] (or of a [`Series`] of them, or of a
//! [`crate::compare::Comparison`]), none reaching back into the run.

pub(crate) mod colour;
pub mod compare;
pub mod events_file;
mod files;
mod first_lists;
pub mod html;
mod html_parts;
pub mod json;
pub mod junit;
mod junit_xml;
pub mod markdown;
pub mod overview;
pub mod progress;
pub mod roll_text;

pub mod series;
pub mod subscribe;
pub mod terminal;
pub mod text;

use std::path::{Path, PathBuf};

pub use files::ReportError;
use files::write_text;

use crate::record::RunRecord;
use crate::series::Series;

/// A file-name-safe form of the experiment name.
pub(crate) fn file_stem(name: &str) -> String {
    let stem = crate::file_names::safe(name);
    let stem = stem.trim_start_matches('.');
    if stem.is_empty() {
        "experiment".to_string()
    } else {
        stem.to_string()
    }
}

/// Writes `<dir>/<experiment>.junit.xml`, `.json` and `.html`; returns the paths written.
/// The node failure model's comparison of the run (`explain`, which runs the model) is
/// made once here and carried to the JUnit and HTML reports.
pub fn write_all(record: &RunRecord, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    write_all_explained(record, &crate::explain::explain(record), dir)
}

/// [`write_all`] with the model's comparison of the run already made.
fn write_all_explained(
    record: &RunRecord,
    explanation: &crate::explain::Explanation,
    dir: &Path,
) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let stem = file_stem(&record.experiment.name);
    let junit_path = dir.join(format!("{stem}.junit.xml"));
    write_text(&junit_path, &junit::render_explained(record, explanation))?;
    let json_path = dir.join(format!("{stem}.json"));
    json::write(record, &json_path)?;
    let html_path = dir.join(format!("{stem}.html"));
    write_streamed(&html_path, |out| {
        html::render_explained_into(out, record, explanation)
    })?;
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

/// Writes a series' reports: those of [`write_all`] for a single run (`explanation` is
/// the model's comparison of it); for more, `<dir>/<experiment>.junit.xml` (one case per
/// expectation over all runs), `.json` (the series file, every run kept) and `.html`.
/// Returns the paths written.
pub fn write_series(
    series: &Series,
    explanation: &crate::explain::Explanation,
    dir: &Path,
) -> Result<Vec<PathBuf>, ReportError> {
    if !series.is_repeated() {
        return write_all_explained(series.first(), explanation, dir);
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
            assert_eq!(read(0), junit::render(&record), "{path:?}");
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
