//! `faultline compare BASELINE NOW` (and the end of `run --baseline`): load both sides,
//! compare, print, write the reports asked for; the exit code says whether anything
//! regressed.

use std::io::Write;
use std::path::Path;

use super::{CompareArgs, EXIT_ERROR};
use crate::compare::{Comparison, NoiseFloor, Tolerance, ToleranceSpec, compare as compare_sets};
use crate::report;
use crate::series::{Series, load_all};

/// The tolerance and the noise floor of `compare` and `run --baseline`, from their flags;
/// `None` (said on stderr) when either is wrong.
pub(super) fn tolerance_with_floor(
    specs: &[ToleranceSpec],
    floor: &[crate::compare::NoiseFloorPart],
) -> Option<Tolerance> {
    let tolerance = tolerance(specs)?;
    match NoiseFloor::from_parts(floor) {
        Ok(floor) => Some(tolerance.with_noise_floor(floor)),
        Err(e) => {
            fail!("{e}");
            None
        }
    }
}

/// `faultline compare`.
pub(super) fn compare(args: &CompareArgs) -> i32 {
    let Some(tolerance) = tolerance_with_floor(&args.tolerance, &args.noise_floor) else {
        return EXIT_ERROR;
    };
    let (Some(baseline), Some(now)) = (load(&args.baseline), load(&args.now)) else {
        return EXIT_ERROR;
    };
    let labels = (
        args.baseline.display().to_string(),
        args.now.display().to_string(),
    );
    compare_and_report(
        &baseline,
        &now,
        &tolerance,
        (&labels.0, &labels.1),
        args.out.as_deref(),
        args.summary.as_deref(),
        args.output == super::CompareFormat::Json,
    )
}

/// Combines the `--tolerance` values, printing the error.
pub(super) fn tolerance(specs: &[ToleranceSpec]) -> Option<Tolerance> {
    match Tolerance::from_specs(specs) {
        Ok(t) => Some(t),
        Err(e) => {
            fail!("{e}");
            None
        }
    }
}

/// Loads one side (a record, a series file or a report directory), printing the error.
pub(super) fn load(path: &Path) -> Option<Vec<Series>> {
    match load_all(path) {
        Ok(sets) => Some(sets),
        Err(e) => {
            fail!("{e}");
            None
        }
    }
}

/// Checks the tolerance's keys against both sides, compares, prints the comparison (as
/// JSON when `json`, the "wrote" lines then on stderr so stdout stays one object),
/// writes `compare.{md,html,junit.xml}` into `out` and appends the Markdown to `summary`
/// when given. Returns the exit code: the comparison's, or 2 when something could not be
/// written or a tolerance names nothing.
pub(super) fn compare_and_report(
    baseline: &[Series],
    now: &[Series],
    tolerance: &Tolerance,
    labels: (&str, &str),
    out: Option<&Path>,
    summary: Option<&Path>,
    json: bool,
) -> i32 {
    let names = crate::compare::expectation_names(&[baseline, now]);
    if let Err(e) = tolerance.check_keys(names.iter().map(String::as_str)) {
        let _ = writeln!(std::io::stderr(), "{e}");
        return EXIT_ERROR;
    }
    let cmp: Comparison = compare_sets(baseline, now, tolerance, labels);
    if json {
        say!("{}", report::compare::json::render(&cmp));
    } else {
        let text = match report::colour::width() {
            Some(_) => report::compare::terminal::render_narrow(&cmp),
            None => report::compare::terminal::render(&cmp),
        };
        report::colour::print(&text);
    }
    // What was written is said where it does not break the JSON on stdout.
    let said = |line: String| {
        if json {
            say_err!("{line}");
        } else {
            say!("{line}");
        }
    };
    let mut code = cmp.exit_code();
    if let Some(dir) = out {
        match report::compare::write_all(&cmp, baseline, now, dir) {
            Ok(paths) => {
                for p in paths {
                    said(format!("wrote {}", p.display()));
                }
            }
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "cannot write the comparison: {e}");
                code = code.max(EXIT_ERROR);
            }
        }
    }
    if let Some(path) = summary {
        let section = report::compare::markdown::render(&cmp);
        match report::markdown::append_section(&section, path) {
            Ok(()) => {
                said(format!("appended the comparison to {}", path.display()));
            }
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "cannot write the summary: {e}");
                code = code.max(EXIT_ERROR);
            }
        }
    }
    code
}
