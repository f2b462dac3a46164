//! `faultline report`: render a saved run record again.

use std::path::Path;

use super::{EXIT_ERROR, EXIT_OK, ReportFormat};
use crate::record::RunRecord;
use crate::report;

/// Renders `record` in `format`, to `out` or stdout.
pub(super) fn report(record: &Path, format: ReportFormat, out: Option<&Path>) -> i32 {
    let record = match RunRecord::load(record) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_ERROR;
        }
    };
    let text = match format {
        ReportFormat::Terminal => report::terminal::summary(&record, false),
        ReportFormat::Junit => report::junit::render(&record),
        ReportFormat::Html => report::html::render(&record),
        ReportFormat::Markdown => report::markdown::render(&record),
        ReportFormat::Json => match serde_json::to_string_pretty(&record) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{e}");
                return EXIT_ERROR;
            }
        },
    };
    match out {
        Some(path) => match std::fs::write(path, text) {
            Ok(()) => EXIT_OK,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                EXIT_ERROR
            }
        },
        None => {
            println!("{text}");
            EXIT_OK
        }
    }
}
