//! A comparison for the terminal: both sides' clusters and what differs between them, the
//! tolerance and the noise floor, then per experiment the verdicts and every figure in
//! labelled columns (baseline and now as min / median / max, how far the median moved),
//! the regressions as a list (one per line) and a last line with the verdict.

use crate::compare::{Change, Comparison, ExperimentDiff, FigureDiff, Presence, Side, timer_rows};
use crate::sanitize::clean;

use super::{REGRESSION_COLUMNS, change_text, regression_rows, thresholds, verdict_line};

/// The header of every figure table: what each column holds.
const FIGURE_COLUMNS: [&str; 5] = [
    "baseline min / median / max",
    "now min / median / max",
    "median moved",
    "%",
    "verdict",
];

/// The comparison as text.
pub fn render(cmp: &Comparison) -> String {
    render_with(cmp, false)
}

/// The comparison as text for 80 columns: each figure's median move and verdict on its
/// line, its min / median / max on both sides on an indented line below.
pub(crate) fn render_narrow(cmp: &Comparison) -> String {
    render_with(cmp, true)
}

fn render_with(cmp: &Comparison, narrow: bool) -> String {
    let mut out = String::from("faultline compare\n");
    side(&mut out, "baseline", &cmp.baseline);
    side(&mut out, "now", &cmp.now);
    let changes = cmp.cluster_changes();
    if !changes.is_empty() {
        out.push_str(&format!(
            "  {:<12} {}\n",
            "changed:",
            clean(&changes.join("; "))
        ));
    }
    for (name, text) in thresholds(cmp) {
        out.push_str(&format!("  {:<12} {}\n", format!("{name}:"), clean(&text)));
    }
    for e in &cmp.experiments {
        out.push_str(&experiment(e, narrow));
    }
    let rows = regression_rows(cmp);
    if !rows.is_empty() {
        out.push_str("== regressions, one per line\n");
        let cells: Vec<[String; 5]> = rows.iter().map(|r| r.cells().map(clean)).collect();
        out.push_str(&table(&REGRESSION_COLUMNS.map(String::from), &cells, "  "));
    }
    out.push_str(&clean(&verdict_line(cmp)));
    out.push('\n');
    out
}

/// A side as three short lines: where its runs came from, its clusters and their timers.
fn side(out: &mut String, name: &str, side: &Side) {
    let label = format!("{name}:");
    out.push_str(&format!("  {label:<12} {}\n", clean(&side.label)));
    if side.clusters.is_empty() {
        out.push_str(&format!("  {:<12} no runs\n", ""));
    }
    for c in &side.clusters {
        out.push_str(&format!(
            "  {:<12} cluster {}, Kubernetes {}\n",
            "",
            clean(&c.name),
            clean(c.server_version.as_deref().unwrap_or("unknown"))
        ));
        let timers: Vec<String> = timer_rows(&c.timers)
            .iter()
            .map(|(label, value)| format!("{label} {value}"))
            .collect();
        out.push_str(&format!("  {:<12} {}\n", "", timers.join(", ")));
    }
}

fn experiment(e: &ExperimentDiff, narrow: bool) -> String {
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
    out.push_str(&figures(
        "recovery figures (after the fault step)",
        "figure",
        &e.figures,
        narrow,
    ));
    if !e.transitions.is_empty() {
        out.push_str(&figures(
            "observed transitions (after each expectation's `since`)",
            "expectation",
            &e.transitions,
            narrow,
        ));
    }
    let stages: Vec<FigureDiff> = e.roll_stages().cloned().collect();
    if !stages.is_empty() {
        out.push_str(&figures(
            "rolls, node by node (after each node's own step)",
            "roll, node: stage",
            &stages,
            narrow,
        ));
    }
    for r in e.rolls.iter().filter(|r| !r.one_side_only.is_empty()) {
        out.push_str(&format!(
            "  roll {}: rolled on one side only, not compared: {}\n",
            clean(&r.roll),
            clean(&r.one_side_only.join(", "))
        ));
    }
    out.push_str(&figures(
        "resilience score",
        "",
        std::slice::from_ref(&e.score),
        narrow,
    ));
    out
}

fn figures(title: &str, first_column: &str, rows: &[FigureDiff], narrow: bool) -> String {
    if narrow {
        return narrow_figures(title, first_column, rows);
    }
    let mut header = vec![first_column.to_string()];
    header.extend(FIGURE_COLUMNS.map(String::from));
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|f| {
            [
                clean(&f.label),
                f.spread_text(&f.baseline),
                f.spread_text(&f.now),
                f.delta_text(),
                f.delta_pct_text(),
                f.movement_text().to_string(),
            ]
        })
        .collect();
    let header: [String; 6] = header.try_into().expect("six columns");
    format!("  {title}:\n{}", table(&header, &cells, "    "))
}

/// A figure table in two lines a figure: the median's move and the verdict, then
/// baseline → now as min / median / max, indented.
fn narrow_figures(title: &str, first_column: &str, rows: &[FigureDiff]) -> String {
    let header = [
        first_column.to_string(),
        "median moved, %, verdict".to_string(),
    ];
    let cells: Vec<[String; 2]> = rows
        .iter()
        .map(|f| {
            let moved = match f.delta_text().as_str() {
                "-" => f.movement_text().to_string(),
                delta => format!("{delta} {} {}", f.delta_pct_text(), f.movement_text()),
            };
            [clean(&f.label), moved]
        })
        .collect();
    let text = table(&header, &cells, "    ");
    let mut lines = text.lines();
    let mut out = format!("  {title}:\n");
    if let Some(head) = lines.next() {
        out.push_str(head);
        out.push('\n');
        out.push_str("      baseline → now, min / median / max\n");
    }
    for (line, f) in lines.zip(rows) {
        out.push_str(line);
        out.push('\n');
        out.push_str(&format!(
            "      {} → {}\n",
            f.spread_text(&f.baseline),
            f.spread_text(&f.now)
        ));
    }
    out
}

/// Rows under a header, each column as wide as its widest cell, the last one unpadded.
fn table<const N: usize>(header: &[String; N], rows: &[[String; N]], indent: &str) -> String {
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String; N]| {
        let mut l = indent.to_string();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == N {
                l.push_str(cell);
            } else {
                l.push_str(&format!("{cell:<w$}  "));
            }
        }
        l.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    for row in rows {
        out.push_str(&line(row));
    }
    out
}
