//! Terminal output: the summary table at a run's end. The live line per timeline entry
//! while a run goes on is [`super::text::entry_line`], which the other reports share.

use crate::judge::Outcome;
use crate::record::{RunOutcome, RunRecord};

use super::text::{figures_text, measured_text, outcome_word, tally};
use crate::sanitize::clean;

use super::colour::{BAD, DIM, GOOD, WARN};
use anstyle::{AnsiColor, Style};

/// `text` in `style` when `colour`, else plain.
fn paint(text: &str, style: Style, colour: bool) -> String {
    if colour {
        super::colour::paint(text, style)
    } else {
        text.to_string()
    }
}

fn outcome_colour(o: Outcome) -> Style {
    match o {
        Outcome::Passed => GOOD,
        Outcome::Failed => BAD,
        Outcome::Undecidable => AnsiColor::Magenta.on_default(),
        Outcome::Skipped => DIM,
        Outcome::Error => WARN,
        Outcome::Pending => AnsiColor::Cyan.on_default(),
    }
}

/// The end-of-run summary: expectations, figures, targets and a one-line verdict; of an
/// experiment the cluster could not run, that it was skipped and why.
pub fn summary(record: &RunRecord, colour: bool) -> String {
    let exp = &record.experiment;
    let mut out = format!(
        "experiment {} on cluster {}\n",
        clean(&exp.name),
        clean(&record.cluster.name)
    );
    if let RunOutcome::Skipped { reason } = &record.outcome {
        out.push_str(&paint(
            &format!(
                "SKIPPED ({} expectation(s) not run): {}",
                record.verdicts.len(),
                clean(reason)
            ),
            DIM,
            colour,
        ));
        out.push('\n');
        return out;
    }
    if record.start_ms.is_some() || record.timeline.zero_ms().is_some() {
        out.push_str(&super::text::time_zero_line(record));
        out.push('\n');
    }
    out.push_str("targets:\n");
    for (target, nodes) in &record.targets {
        out.push_str(&format!(
            "  {}: {}\n",
            clean(target),
            clean(&nodes.join(", "))
        ));
    }
    let timers = super::text::timer_lines(record);
    if !timers.is_empty() {
        out.push_str("timers:\n");
        for line in timers {
            out.push_str(&format!("  {}\n", clean(&line)));
        }
    }
    out.push_str("expectations:\n");
    let width = record
        .verdicts
        .iter()
        .map(|v| v.name.chars().count())
        .max()
        .unwrap_or(0);
    for v in &record.verdicts {
        let word = outcome_word(v.outcome);
        let measured = measured_text(v.measured_ms);
        out.push_str(&format!(
            "  {} {:<width$}  {:>8}  {}\n",
            paint(&format!("{word:<11}"), outcome_colour(v.outcome), colour),
            clean(&v.name),
            measured,
            clean(&super::text::verdict_message(record, v)),
        ));
    }
    out.push_str(&figures_text(record));
    out.push_str(&super::roll_text::rolls_text(record));
    let safety = super::text::safety_lines(record);
    if !safety.is_empty() {
        out.push_str("safety:\n");
        for line in safety {
            out.push_str(&format!("  {}\n", clean(&line)));
        }
    }
    for err in &record.errors {
        out.push_str(&format!(
            "{} {}\n",
            paint("error:", WARN, colour),
            clean(err)
        ));
    }
    let score = record.score();
    out.push_str(&format!(
        "resilience score: {} ({})\n",
        score.value_text(),
        score.explain()
    ));
    let tally = tally(record);
    let line = match &record.outcome {
        RunOutcome::Passed => paint(&format!("PASSED: {tally}"), GOOD.bold(), colour),
        RunOutcome::Failed => paint(&format!("FAILED: {tally}"), BAD, colour),
        RunOutcome::Error { message } => {
            paint(&format!("ERROR: {} ({tally})", clean(message)), BAD, colour)
        }
        RunOutcome::Interrupted => paint(&format!("INTERRUPTED: {tally}"), WARN.bold(), colour),
        RunOutcome::Skipped { reason } => {
            paint(&format!("SKIPPED: {}", clean(reason)), DIM, colour)
        }
    };
    out.push_str(&line);
    out.push('\n');
    out
}
