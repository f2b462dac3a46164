//! A comparison as Markdown, for `$GITHUB_STEP_SUMMARY` or a pull request comment: the
//! verdict in the heading, the regressions as a table (one per row: figure, baseline, now,
//! change), a table of the two sides' clusters, the tolerance and the noise floor, then per
//! experiment the expectations and every figure in labelled columns (baseline and now as
//! min / median / max, how far the median moved). Regressions are bold. Text from records
//! goes through `sanitize::markdown`.

use std::fmt::Write as _;

use crate::compare::{
    Change, Comparison, ExperimentDiff, FigureDiff, Presence, TIMER_LABELS, timer_rows,
};
use crate::sanitize::markdown as md;

use super::{REGRESSION_COLUMNS, change_text, regression_rows, thresholds, verdict_line};

/// One regression per row, under a header naming each column.
fn regressions(m: &mut String, cmp: &Comparison) {
    let rows = regression_rows(cmp);
    if rows.is_empty() {
        return;
    }
    table_header(m, &REGRESSION_COLUMNS);
    for r in rows {
        let cells: Vec<String> = r.cells().iter().map(|c| md(c)).collect();
        let _ = writeln!(m, "| {} |", cells.join(" | "));
    }
    m.push('\n');
}

fn table_header(m: &mut String, columns: &[&str]) {
    let mut names: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    for n in &mut names {
        if let Some(first) = n.get_mut(..1) {
            first.make_ascii_uppercase();
        }
    }
    let _ = writeln!(m, "| {} |", names.join(" | "));
    let _ = writeln!(m, "|{}", " --- |".repeat(columns.len()));
}

/// Renders the comparison as one Markdown section starting with a level-2 heading.
pub fn render(cmp: &Comparison) -> String {
    let mut m = String::new();
    let word = match cmp.exit_code() {
        0 => "NO REGRESSION",
        1 => "REGRESSED",
        _ => "NOTHING COMPARED",
    };
    let _ = writeln!(
        m,
        "## **{word}** {} → {}\n",
        md(&cmp.baseline.label),
        md(&cmp.now.label)
    );
    let _ = writeln!(m, "{}\n", md(&verdict_line(cmp)));
    regressions(&mut m, cmp);
    sides(&mut m, cmp);
    for (name, text) in thresholds(cmp) {
        let mut name = name.to_string();
        name[..1].make_ascii_uppercase();
        let _ = writeln!(m, "{name}: {}\n", md(&text));
    }
    for e in &cmp.experiments {
        experiment(&mut m, e);
    }
    m
}

fn sides(m: &mut String, cmp: &Comparison) {
    m.push_str("| Side | Source | Cluster | Kubernetes |");
    let labels = TIMER_LABELS;
    for l in &labels {
        let _ = write!(m, " {l} |");
    }
    m.push('\n');
    m.push_str(&"| --- ".repeat(4 + labels.len()));
    m.push_str("|\n");
    for (name, side) in [("baseline", &cmp.baseline), ("now", &cmp.now)] {
        for c in &side.clusters {
            let _ = write!(
                m,
                "| {name} | {} | {} | {} |",
                md(&side.label),
                md(&c.name),
                md(c.server_version.as_deref().unwrap_or("unknown"))
            );
            for (_, v) in timer_rows(&c.timers) {
                let _ = write!(m, " {v} |");
            }
            m.push('\n');
        }
    }
    m.push('\n');
    let changes = cmp.cluster_changes();
    if !changes.is_empty() {
        let _ = writeln!(m, "Changed: {}\n", md(&changes.join("; ")));
    }
}

fn experiment(m: &mut String, e: &ExperimentDiff) {
    let name = md(&e.name);
    match e.presence {
        Presence::BaselineOnly => {
            let _ = writeln!(
                m,
                "### {name}\n\nOnly in the baseline ({} run(s)): not compared.\n",
                e.runs.0
            );
            return;
        }
        Presence::NowOnly => {
            let _ = writeln!(
                m,
                "### {name}\n\nOnly now ({} run(s)): not compared.\n",
                e.runs.1
            );
            return;
        }
        Presence::Both => {}
    }
    let _ = writeln!(
        m,
        "### {name}\n\nBaseline {} run(s), now {} run(s).\n",
        e.runs.0, e.runs.1
    );
    m.push_str("| Expectation | Baseline → now | Change |\n| --- | --- | --- |\n");
    for x in &e.expectations {
        let change = if x.change == Change::Regressed {
            format!("**{}**", x.change.word())
        } else {
            x.change.word().to_string()
        };
        let _ = writeln!(m, "| {} | {} | {change} |", md(&x.name), change_text(x));
    }
    m.push('\n');
    table_header(
        m,
        &[
            "figure",
            "baseline min / median / max",
            "now min / median / max",
            "median moved",
            "%",
            "verdict",
        ],
    );
    for f in e
        .figures
        .iter()
        .chain(&e.transitions)
        .chain(e.roll_stages())
        .chain(std::iter::once(&e.score))
    {
        figure_row(m, f);
    }
    m.push('\n');
}

fn figure_row(m: &mut String, f: &FigureDiff) {
    let movement = if f.movement.regressed() {
        format!("**{}**", f.movement_text())
    } else {
        f.movement_text().to_string()
    };
    let label = match f.kind {
        crate::compare::FigureKind::Transition => format!("{} (transition)", md(&f.label)),
        _ => md(&f.label),
    };
    let _ = writeln!(
        m,
        "| {label} | {} | {} | {} | {} | {movement} |",
        f.spread_text(&f.baseline),
        f.spread_text(&f.now),
        f.delta_text(),
        f.delta_pct_text()
    );
}
