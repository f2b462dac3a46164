//! `faultline report`: render saved run records, or series of runs, again: one file, or
//! several and report directories as `compare` takes them.

use std::path::{Path, PathBuf};

use super::{EXIT_ERROR, EXIT_OK, ReportArgs, ReportFormat};
use crate::report;
use crate::series::{Series, load_all};

/// Renders every record named in the format asked for, to `--out` or stdout.
pub(super) fn report(args: &ReportArgs) -> i32 {
    let mut sets = Vec::new();
    for path in &args.records {
        match load_all(path) {
            Ok(found) => sets.extend(found),
            Err(e) => {
                fail!("{e}");
                return EXIT_ERROR;
            }
        }
    }
    let mut rendered = Vec::with_capacity(sets.len());
    for series in &sets {
        match render(series, args.output) {
            Ok(text) => rendered.push((series.name().to_string(), text)),
            Err(e) => {
                fail!("{}: {e}", series.name());
                return EXIT_ERROR;
            }
        }
    }
    match destination(args.out.as_deref(), rendered.len()) {
        Destination::Stdout => print_all(&rendered, args.output),
        Destination::File(path) => write(&path, &rendered[0].1),
        Destination::Directory(dir) => write_into(&dir, &rendered, args.output),
    }
}

/// Where the rendered reports go.
#[derive(Debug, PartialEq, Eq)]
enum Destination {
    /// No `--out`.
    Stdout,
    /// `--out FILE` with one record.
    File(PathBuf),
    /// `--out DIR`: several records, or `--out` is an existing directory.
    Directory(PathBuf),
}

/// One record goes into the file `--out` names unless that is a directory; several go
/// into the directory `--out` names, one file each.
fn destination(out: Option<&Path>, records: usize) -> Destination {
    match out {
        None => Destination::Stdout,
        Some(path) if records > 1 || path.is_dir() => Destination::Directory(path.to_path_buf()),
        Some(path) => Destination::File(path.to_path_buf()),
    }
}

fn render(series: &Series, format: ReportFormat) -> Result<String, String> {
    if series.is_repeated() {
        return Ok(match format {
            ReportFormat::Text => report::series::terminal::summary(series),
            ReportFormat::Junit => report::series::junit::render(series),
            ReportFormat::Html => report::series::html::render(series),
            ReportFormat::Markdown => report::series::markdown::render(series),
            ReportFormat::Json => series.to_json().map_err(|e| e.to_string())?,
        });
    }
    let record = series.first();
    Ok(match format {
        ReportFormat::Text => report::terminal::summary(record, false),
        ReportFormat::Junit => report::junit::render(record),
        ReportFormat::Html => report::html::render(record),
        ReportFormat::Markdown => report::markdown::render(record),
        ReportFormat::Json => record.to_json().map_err(|e| e.to_string())?,
    })
}

/// Prints the reports one after another; formats that are one document per file (JUnit,
/// HTML, JSON) need `--out DIR` for several.
fn print_all(rendered: &[(String, String)], format: ReportFormat) -> i32 {
    let one_document = matches!(
        format,
        ReportFormat::Junit | ReportFormat::Html | ReportFormat::Json
    );
    if rendered.len() > 1 && one_document {
        fail!(
            "{} records: {} is one document per record, so they cannot share stdout; pass --out DIR",
            rendered.len(),
            extension(format)
        );
        return EXIT_ERROR;
    }
    for (_, text) in rendered {
        match format {
            ReportFormat::Text => report::colour::print(&format!("{text}\n")),
            _ => println!("{text}"),
        }
    }
    EXIT_OK
}

fn write(path: &Path, text: &str) -> i32 {
    match std::fs::write(path, text) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            fail!("{}: {e}", path.display());
            EXIT_ERROR
        }
    }
}

/// Writes `<experiment>.<ext>` per record into `dir` (created), as a run names its reports.
fn write_into(dir: &Path, rendered: &[(String, String)], format: ReportFormat) -> i32 {
    let mut names: Vec<&str> = rendered.iter().map(|(name, _)| name.as_str()).collect();
    names.sort_unstable();
    if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
        fail!(
            "two records of experiment `{}`: their reports would overwrite each other in {}; render them one at a time",
            twice[0],
            dir.display()
        );
        return EXIT_ERROR;
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        fail!("{}: {e}", dir.display());
        return EXIT_ERROR;
    }
    for (name, text) in rendered {
        let path = dir.join(format!(
            "{}.{}",
            crate::file_names::safe(name),
            extension(format)
        ));
        if write(&path, text) != EXIT_OK {
            return EXIT_ERROR;
        }
        println!("wrote {}", path.display());
    }
    EXIT_OK
}

/// The file extension of a format, as a run's reports use them.
fn extension(format: ReportFormat) -> &'static str {
    match format {
        ReportFormat::Text => "txt",
        ReportFormat::Junit => "junit.xml",
        ReportFormat::Html => "html",
        ReportFormat::Markdown => "md",
        ReportFormat::Json => "json",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_record_goes_to_the_file_and_several_into_the_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("one.xml");
        assert_eq!(destination(None, 3), Destination::Stdout);
        assert_eq!(destination(Some(&file), 1), Destination::File(file.clone()));
        assert_eq!(
            destination(Some(&file), 2),
            Destination::Directory(file.clone())
        );
        assert_eq!(
            destination(Some(dir.path()), 1),
            Destination::Directory(dir.path().to_path_buf())
        );
    }
}
