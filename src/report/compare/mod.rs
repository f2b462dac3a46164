//! Reporters of a [`Comparison`]: terminal, Markdown, HTML and JUnit, each a function of
//! the comparison (HTML also draws one run of each side, on one time axis).

pub mod html;
pub mod junit;
pub mod markdown;
pub mod terminal;

use std::path::{Path, PathBuf};

use crate::compare::{Change, Comparison, ExpectationDiff, Presence, Side, timer_rows};
use crate::series::{ExpectationSpread, Reliability, Series};

use super::{ReportError, outcome_word, write_text};

/// Writes `<dir>/compare.md`, `compare.html` and `compare.junit.xml`; returns the paths.
pub fn write_all(
    cmp: &Comparison,
    baseline: &[Series],
    now: &[Series],
    dir: &Path,
) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let files = [
        ("compare.md", markdown::render(cmp)),
        ("compare.html", html::render(cmp, baseline, now)),
        ("compare.junit.xml", junit::render(cmp)),
    ];
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        write_text(&path, &text)?;
        written.push(path);
    }
    Ok(written)
}

/// A side's clusters in words: `cluster lab, Kubernetes v1.33.13, node-monitor period 2s,
/// node-monitor grace period 20s, …`, several clusters separated by `; `.
pub fn side_text(side: &Side) -> String {
    if side.clusters.is_empty() {
        return "no runs".to_string();
    }
    side.clusters
        .iter()
        .map(|c| {
            let mut parts = vec![format!("cluster {}", c.name)];
            parts.push(format!(
                "Kubernetes {}",
                c.server_version.as_deref().unwrap_or("unknown")
            ));
            for (label, value) in timer_rows(&c.timers) {
                parts.push(format!("{label} {value}"));
            }
            parts.join(", ")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// An expectation's verdicts on one side in a few words: `PASS` for one run, `held 3/3`,
/// `flaky 2/3`, `not held 0/3`, `skipped` for more, `absent` when not there.
pub fn verdicts_text(side: Option<&ExpectationSpread>) -> String {
    let Some(e) = side else {
        return "absent".to_string();
    };
    if let [one] = e.outcomes.as_slice() {
        return outcome_word(*one).to_string();
    }
    match e.reliability {
        Reliability::Skipped => "skipped".to_string(),
        r => format!("{} {}/{}", r.word(), e.passed, e.counted),
    }
}

/// One expectation's change as `PASS → FAIL` (or `held 3/3 → flaky 2/3`).
pub fn change_text(x: &ExpectationDiff) -> String {
    format!(
        "{} → {}",
        verdicts_text(x.baseline.as_ref()),
        verdicts_text(x.now.as_ref())
    )
}

/// Every regression, one line each: `kubelet-stop: node NotReady SLOWER (+10.0s, +24.4%)`.
pub fn regression_lines(cmp: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    for e in &cmp.experiments {
        for x in e
            .expectations
            .iter()
            .filter(|x| x.change == Change::Regressed)
        {
            out.push(format!("{}: `{}` {}", e.name, x.name, change_text(x)));
        }
    }
    for (e, f) in cmp.figure_diffs().filter(|(_, f)| f.movement.regressed()) {
        let numbers = match f.delta {
            Some(_) => format!(" ({}, {})", f.delta_text(), f.delta_pct_text()),
            None => String::new(),
        };
        out.push(format!(
            "{}: {} {}{numbers}",
            e.name,
            f.label,
            f.movement_text()
        ));
    }
    out
}

/// The comparison's last line: `REGRESSED: …`, `NO REGRESSION: …` or `NOTHING COMPARED: …`.
pub fn verdict_line(cmp: &Comparison) -> String {
    let names = |p: Presence| {
        cmp.experiments
            .iter()
            .filter(|e| e.presence == p)
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match cmp.exit_code() {
        2 => format!(
            "NOTHING COMPARED: no experiment is on both sides (baseline: {}; now: {})",
            or_none(names(Presence::BaselineOnly)),
            or_none(names(Presence::NowOnly))
        ),
        1 => {
            let lines = regression_lines(cmp);
            format!(
                "REGRESSED: {} regression(s) beyond the tolerance: {}",
                lines.len(),
                lines.join("; ")
            )
        }
        _ => format!(
            "NO REGRESSION: {} experiment(s) compared, every change within the tolerance",
            cmp.in_common()
        ),
    }
}

fn or_none(s: String) -> String {
    if s.is_empty() { "none".to_string() } else { s }
}
