//! Judges a recorded run again against another experiment file's expectations, and writes
//! the result as a run record: what the same cluster behaviour says about a different
//! belief. The observations (the timeline, the targets, the timers, the recovery figures)
//! stay the record's; only the expectations, their verdicts and the outcome change, and the
//! run's id says so (`<id>+rejudged`). The original run's live verdict announcements are
//! left out of the timeline, since they judged other expectations.
//!
//! `ci/screenshots` uses it for the picture of a failed run: every shipped record passed.
//!
//! `cargo run --release --example rejudge -- RECORD.json EXPERIMENT.yaml OUT.json`

use std::path::Path;
use std::process::ExitCode;

use faultline::record::RunRecord;
use faultline::timeline::Event;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [record, experiment, out] = args.as_slice() else {
        eprintln!("usage: rejudge RECORD.json EXPERIMENT.yaml OUT.json");
        return ExitCode::from(2);
    };
    match rejudge(Path::new(record), Path::new(experiment), Path::new(out)) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rejudge: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes `record` judged against `experiment` to `out`; returns its tally in words.
fn rejudge(record: &Path, experiment: &Path, out: &Path) -> Result<String, String> {
    let mut run = RunRecord::load(record).map_err(|e| e.to_string())?;
    let exp = faultline::experiment::load(experiment).map_err(|d| d.to_string())?;
    run.timeline
        .entries
        .retain(|e| !matches!(e.event, Event::Verdict { .. }));
    run.judged_against(exp);
    run.run_id = format!("{}+rejudged", run.run_id);
    run.save(out).map_err(|e| e.to_string())?;
    Ok(format!(
        "{}: {} ({})",
        out.display(),
        run.outcome.word(),
        faultline::report::text::tally(&run)
    ))
}
