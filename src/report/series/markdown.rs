//! Markdown of a series, for a CI job summary: the verdict in the heading (`FLAKY` when an
//! expectation held in some runs only), one row per expectation with its verdict in each
//! run, the recovery figures as min / median / max, each run's score.

use std::fmt::Write as _;

use crate::sanitize::markdown as md;
use crate::series::{Reliability, Series};

use super::{SeriesVerdict, outcomes_text, scores_text, verdict_line};

/// Renders the series as one Markdown section starting with a level-2 heading.
pub fn render(series: &Series) -> String {
    let spread = series.spread();
    let first = series.first();
    let n = series.runs().len();
    let verdict = SeriesVerdict::of(series, &spread);
    let mut m = String::new();
    let _ = writeln!(
        m,
        "## **{}** {} ({n} runs)\n",
        verdict.word(),
        md(series.name())
    );
    let mut meta = vec![format!("cluster {}", md(&first.cluster.name))];
    if let Some(v) = &first.cluster.server_version {
        meta.push(format!("Kubernetes {}", md(v)));
    }
    meta.push(format!(
        "score **{}** (each run: {})",
        spread.score.score_text(),
        scores_text(&spread.scores)
    ));
    let _ = writeln!(m, "{}\n", meta.join(" · "));
    let _ = writeln!(m, "{}\n", md(&verdict_line(series, &spread)));

    m.push_str("| Expectation | Each run | Held | Measured (min / median / max) |\n");
    m.push_str("| --- | --- | --- | --- |\n");
    for e in &spread.expectations {
        let held = match e.reliability {
            Reliability::Held | Reliability::Skipped => e.summary(),
            _ => format!("**{}**", e.summary()),
        };
        let measured = if e.measured.observed == 0 {
            "-".to_string()
        } else {
            e.measured.ms_text()
        };
        let _ = writeln!(
            m,
            "| {} | {} | {held} | {measured} |",
            md(&e.name),
            outcomes_text(&e.outcomes)
        );
    }
    m.push('\n');
    match &first.figures.fault_step {
        Some(step) => {
            let _ = writeln!(
                m,
                "**Recovery figures** after step {}, over {n} runs:\n",
                md(step)
            );
            m.push_str("| Stage | Min / median / max |\n| --- | --- |\n");
            for f in &spread.figures {
                let _ = writeln!(m, "| {} | {} |", f.label, f.spread.ms_text());
            }
            m.push('\n');
        }
        None => m.push_str("Recovery figures: no fault step ran.\n\n"),
    }
    let runs: Vec<String> = series.runs().iter().map(|r| md(&r.run_id)).collect();
    let _ = writeln!(
        m,
        "<sub>faultline {} · runs {}</sub>",
        md(&first.faultline_version),
        runs.join(", ")
    );
    m
}
