//! `faultline rehearse`: an experiment's scheduler and judge over a recorded run's
//! timeline, with a virtual clock; prints when each step would have been issued and every
//! verdict beside the recorded ones.

use std::path::Path;

use super::rehearse_json::RehearsalDoc;
use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, RehearseFormat};
use crate::judge::Outcome;
use crate::record::RunRecord;
use crate::report::text::{measured_text, outcome_word};
use crate::run::rehearse::{Rehearsal, rehearse};
use crate::sanitize::clean;
use crate::series::Series;
use crate::timeline::format_offset_ms;

/// Rehearses the experiment at `experiment` (moved to `namespace` when given, as the
/// recorded `run -n` was) against the run record at `record`; against each run of a series
/// in turn (or only run `only`), the exit code the worst of them. As text, or as one JSON
/// array with an object per rehearsed run.
pub(super) fn run(
    experiment: &Path,
    record: &Path,
    only: Option<u32>,
    namespace: &super::NamespaceArg,
    keep_going: bool,
    format: RehearseFormat,
) -> i32 {
    let Some(mut experiments) = super::load_experiments_in(&[experiment.to_path_buf()], namespace)
    else {
        return EXIT_ERROR;
    };
    if experiments.len() != 1 {
        fail!(
            "{}: rehearse takes one experiment file, found {}",
            experiment.display(),
            experiments.len()
        );
        return EXIT_ERROR;
    }
    let exp = experiments.remove(0);
    let path = record;
    let series = match Series::load(path) {
        Ok(s) => s,
        Err(e) => {
            fail!("{e}");
            return EXIT_ERROR;
        }
    };
    // A record of another experiment would give a verdict per expectation, each wrong for
    // the same reason: say the reason once.
    if let Some(other) = series.runs().iter().find(|r| r.experiment.name != exp.name) {
        fail!(
            "{} is a record of experiment {}, not of {}",
            path.display(),
            clean(&other.experiment.name),
            clean(&exp.name)
        );
        return EXIT_ERROR;
    }
    let n = series.runs().len();
    let chosen: Vec<(usize, &RunRecord)> = match only {
        Some(k) => match series.runs().get(k as usize - 1) {
            Some(r) => vec![(k as usize, &**r)],
            None => {
                fail!("{}: --run {k}, but it holds {n} run(s)", path.display());
                return EXIT_ERROR;
            }
        },
        None => series
            .runs()
            .iter()
            .enumerate()
            .map(|(i, r)| (i + 1, &**r))
            .collect(),
    };
    let mut worst = EXIT_OK;
    let mut docs = Vec::new();
    for (k, record) in chosen {
        if n > 1 && format == RehearseFormat::Text {
            println!("== run {k} of {n}");
        }
        let rehearsal = rehearse(&exp, record, keep_going);
        let code = match &rehearsal {
            Ok(r) => exit_code(r),
            Err(e) => {
                fail!(
                    "{}: cannot rehearse against {}: {e}",
                    exp.name,
                    record.run_id
                );
                EXIT_ERROR
            }
        };
        match (format, &rehearsal) {
            (RehearseFormat::Text, Ok(r)) => print!("{}", render(&exp.name, record, r)),
            (RehearseFormat::Text, Err(_)) => {}
            (RehearseFormat::Json, _) => docs.push(RehearsalDoc::of(
                &exp.name,
                (k, n),
                record,
                rehearsal.as_ref(),
                code,
            )),
        }
        worst = worst.max(code);
    }
    if format == RehearseFormat::Json {
        match serde_json::to_string_pretty(&docs) {
            Ok(text) => say!("{text}"),
            Err(e) => {
                fail!("cannot write the rehearsals as JSON: {e}");
                return EXIT_ERROR;
            }
        }
    }
    worst
}

/// A verdict's message, or in place of the early stop's reason said again for every
/// expectation it left undecided, a pointer to the `ended:` line that says it once.
fn message(v: &crate::judge::Verdict, r: &Rehearsal) -> String {
    if v.message == format!("not decided: {}", r.ended) {
        "not decided: the run stopped early (see `ended:`; --keep-going judges every \
         expectation to the end)"
            .to_string()
    } else {
        v.message.clone()
    }
}

/// Exit code of a rehearsal: as a run's, from its verdicts.
fn exit_code(r: &Rehearsal) -> i32 {
    let outcomes = || r.verdicts.iter().map(|v| v.outcome);
    if outcomes().any(|o| o == Outcome::Failed) {
        EXIT_FAILED
    } else if outcomes().all(|o| matches!(o, Outcome::Passed | Outcome::Skipped)) {
        EXIT_OK
    } else {
        EXIT_ERROR
    }
}

/// The rehearsal as text: steps (rehearsed and recorded times), how it ended, verdicts
/// (rehearsed and recorded).
pub(crate) fn render(name: &str, record: &RunRecord, r: &Rehearsal) -> String {
    let at = |ms: Option<i64>| ms.map_or_else(|| "not run".to_string(), format_offset_ms);
    let mut out = format!(
        "rehearsal of {} against run {} (experiment {}, cluster {})\n",
        clean(name),
        clean(&record.run_id),
        clean(&record.experiment.name),
        clean(&record.cluster.name)
    );
    let width = r
        .steps
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0);
    out.push_str(&format!("steps: {:width$}  rehearsed  recorded\n", ""));
    for s in &r.steps {
        out.push_str(&format!(
            "  {:width$}  {:>9}  {:>8}\n",
            clean(&s.name),
            at(s.at_ms),
            at(s.recorded_ms)
        ));
    }
    out.push_str(&format!("ended: {}\n", clean(&r.ended)));
    out.push_str("expectations:\n");
    for v in &r.verdicts {
        let recorded = record
            .verdicts
            .iter()
            .find(|rv| rv.name == v.name)
            .map_or_else(
                || "not in the record".to_string(),
                |rv| {
                    format!(
                        "{} {}",
                        outcome_word(rv.outcome),
                        measured_text(rv.measured_ms)
                    )
                },
            );
        out.push_str(&format!(
            "  {:<11} {:>8}  {}  (recorded: {})\n    {}\n",
            outcome_word(v.outcome),
            measured_text(v.measured_ms),
            clean(&v.name),
            recorded,
            clean(&message(v, r))
        ));
    }
    out
}
