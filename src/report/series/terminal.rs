//! A series at the end of `run --repeat N` and in `faultline report`: every expectation's
//! verdict per run with its measured time as min / median / max, the recovery figures as
//! spreads, each run's score, and one line that names what was flaky.

use crate::sanitize::clean;
use crate::series::{Reliability, Series};

use super::{outcomes_text, scores_text, verdict_line};

/// The series summary.
pub fn summary(series: &Series) -> String {
    let spread = series.spread();
    let first = series.first();
    let n = series.runs().len();
    let mut out = format!(
        "experiment {}: {n} runs on cluster {}{}\n",
        clean(series.name()),
        clean(&first.cluster.name),
        first
            .cluster
            .server_version
            .as_ref()
            .map(|v| format!(" ({})", clean(v)))
            .unwrap_or_default()
    );
    out.push_str("expectations (verdict in each run; measured time min / median / max):\n");
    let width = spread
        .expectations
        .iter()
        .map(|e| e.name.chars().count())
        .max()
        .unwrap_or(0);
    for e in &spread.expectations {
        let word = match e.reliability {
            Reliability::Flaky => "FLAKY".to_string(),
            Reliability::NotHeld => "NOT HELD".to_string(),
            r => r.word().to_string(),
        };
        out.push_str(&format!(
            "  {word:<9} {:<width$}  {}  {}\n",
            clean(&e.name),
            outcomes_text(&e.outcomes),
            if e.measured.observed == 0 {
                "-".to_string()
            } else {
                e.measured.ms_text()
            }
        ));
    }
    match &first.figures.fault_step {
        Some(step) => {
            out.push_str(&format!(
                "recovery figures (from `{}`; min / median / max over {n} runs):\n",
                clean(step)
            ));
            for f in &spread.figures {
                out.push_str(&format!("  {:<26} {}\n", f.label, f.spread.ms_text()));
            }
        }
        None => out.push_str("recovery figures: no fault step ran\n"),
    }
    out.push_str(&format!(
        "resilience score: {} ({}each run: {})\n",
        spread.score.score_text(),
        if spread.score.varies() {
            "min / median / max; "
        } else {
            ""
        },
        scores_text(&spread.scores)
    ));
    out.push_str(&clean(&verdict_line(series, &spread)));
    out.push('\n');
    out
}
