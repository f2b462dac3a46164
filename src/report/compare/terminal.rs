//! A comparison for the terminal: both sides' clusters and what differs between them, then
//! per experiment the verdicts that changed, every figure with baseline, now, delta and
//! delta %, and one last line with every regression.

use crate::compare::{Change, Comparison, ExperimentDiff, FigureDiff, Presence};
use crate::sanitize::clean;

use super::{change_text, side_text, verdict_line};

/// The comparison as text.
pub fn render(cmp: &Comparison) -> String {
    let mut out = String::from("faultline compare\n");
    out.push_str(&format!(
        "  baseline: {} — {}\n",
        clean(&cmp.baseline.label),
        clean(&side_text(&cmp.baseline))
    ));
    out.push_str(&format!(
        "  now:      {} — {}\n",
        clean(&cmp.now.label),
        clean(&side_text(&cmp.now))
    ));
    let changes = cmp.cluster_changes();
    if !changes.is_empty() {
        out.push_str(&format!("  changed:  {}\n", clean(&changes.join("; "))));
    }
    out.push_str(&format!("  tolerance: {}\n", clean(&cmp.tolerance.text())));
    for e in &cmp.experiments {
        out.push_str(&experiment(e));
    }
    out.push_str(&clean(&verdict_line(cmp)));
    out.push('\n');
    out
}

fn experiment(e: &ExperimentDiff) -> String {
    let name = clean(&e.name);
    match e.presence {
        Presence::BaselineOnly => {
            return format!(
                "== {name}: only in the baseline ({} run(s)), not compared\n",
                e.runs.0
            );
        }
        Presence::NowOnly => {
            return format!("== {name}: only now ({} run(s)), not compared\n", e.runs.1);
        }
        Presence::Both => {}
    }
    let mut out = format!(
        "== {name} (baseline {} run(s), now {} run(s))\n",
        e.runs.0, e.runs.1
    );
    out.push_str("  expectations:\n");
    let width = e
        .expectations
        .iter()
        .map(|x| x.name.chars().count())
        .max()
        .unwrap_or(0);
    for x in &e.expectations {
        let word = match x.change {
            Change::Skipped => "skipped",
            c => c.word(),
        };
        out.push_str(&format!(
            "    {word:<13} {:<width$}  {}\n",
            clean(&x.name),
            change_text(x)
        ));
    }
    out.push_str(&figures("recovery figures", &e.figures));
    if !e.transitions.is_empty() {
        out.push_str(&figures(
            "observed transitions (after each expectation's `since`)",
            &e.transitions,
        ));
    }
    out.push_str(&figures("resilience score", std::slice::from_ref(&e.score)));
    out
}

fn figures(title: &str, rows: &[FigureDiff]) -> String {
    let width = rows
        .iter()
        .map(|f| f.label.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let b: Vec<String> = rows.iter().map(|f| f.spread_text(&f.baseline)).collect();
    let n: Vec<String> = rows.iter().map(|f| f.spread_text(&f.now)).collect();
    let bw = b
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let nw = n
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let mut out = format!(
        "  {title}:\n    {:<width$}  {:<bw$}  {:<nw$}  {:>8}  {:>8}\n",
        "", "baseline", "now", "delta", "delta %"
    );
    for (i, f) in rows.iter().enumerate() {
        out.push_str(&format!(
            "    {:<width$}  {:<bw$}  {:<nw$}  {:>8}  {:>8}  {}\n",
            clean(&f.label),
            b[i],
            n[i],
            f.delta_text(),
            f.delta_pct_text(),
            f.movement_text()
        ));
    }
    out
}
