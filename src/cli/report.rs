//! `faultline report`: render a saved run record, or series of runs, again.

use std::path::Path;

use super::{EXIT_ERROR, EXIT_OK, ReportFormat};
use crate::report;
use crate::series::Series;

/// Renders the record or series at `path` in `format`, to `out` or stdout.
pub(super) fn report(path: &Path, format: ReportFormat, out: Option<&Path>) -> i32 {
    let series = match Series::load(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_ERROR;
        }
    };
    let text = if series.is_repeated() {
        match format {
            ReportFormat::Terminal => report::series::terminal::summary(&series),
            ReportFormat::Junit => report::series::junit::render(&series),
            ReportFormat::Html => report::series::html::render(&series),
            ReportFormat::Markdown => report::series::markdown::render(&series),
            ReportFormat::Json => match series.to_json() {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{e}");
                    return EXIT_ERROR;
                }
            },
        }
    } else {
        let record = series.first();
        match format {
            ReportFormat::Terminal => report::terminal::summary(record, false),
            ReportFormat::Junit => report::junit::render(record),
            ReportFormat::Html => report::html::render(record),
            ReportFormat::Markdown => report::markdown::render(record),
            ReportFormat::Json => match record.to_json() {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{e}");
                    return EXIT_ERROR;
                }
            },
        }
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
