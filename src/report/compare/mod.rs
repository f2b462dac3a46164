//! Reporters of a [`Comparison`]: terminal, Markdown, HTML and JUnit, each a function of
//! the comparison (HTML also draws one run of each side, on one time axis).

pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod terminal;

use std::path::{Path, PathBuf};

use crate::compare::{
    Change, Comparison, ExpectationDiff, FigureDiff, FigureKind, Presence, Side, timer_rows,
};
use crate::series::{ExpectationSpread, Reliability, Series, Spread};

use super::files::{ReportError, write_text};
use super::text::outcome_word;

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

/// One regression as a row of the reports' regression list: which experiment, which
/// figure or verdict, the baseline's value, now's, and the change in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegressionRow {
    /// The experiment's name.
    pub experiment: String,
    /// `node NotReady`, `verdict: <expectation>`, `transition: <expectation>`, `score`.
    pub figure: String,
    /// The baseline's median (`+38.2s`), verdicts (`held 3/3`) or score.
    pub baseline: String,
    /// Now's, in the same form.
    pub now: String,
    /// `+11.2s (+29.4%) SLOWER`, `held less often`, `NO LONGER OBSERVED`.
    pub change: String,
}

/// The header of the regression list, in the order of [`RegressionRow`]'s fields.
pub const REGRESSION_COLUMNS: [&str; 5] = [
    "experiment",
    "figure",
    "baseline (median)",
    "now (median)",
    "change",
];

impl RegressionRow {
    /// The row's cells, in the order of [`REGRESSION_COLUMNS`].
    pub fn cells(&self) -> [&str; 5] {
        [
            &self.experiment,
            &self.figure,
            &self.baseline,
            &self.now,
            &self.change,
        ]
    }
}

/// Every regression, one row each: the verdicts that hold less often, then the figures,
/// transitions and scores beyond the tolerance and the noise floor.
pub fn regression_rows(cmp: &Comparison) -> Vec<RegressionRow> {
    let mut out = Vec::new();
    for e in &cmp.experiments {
        for x in e
            .expectations
            .iter()
            .filter(|x| x.change == Change::Regressed)
        {
            out.push(RegressionRow {
                experiment: e.name.clone(),
                figure: format!("verdict: {}", x.name),
                baseline: verdicts_text(x.baseline.as_ref()),
                now: verdicts_text(x.now.as_ref()),
                change: "holds less often".to_string(),
            });
        }
    }
    let rolls = cmp
        .roll_stage_diffs()
        .map(|(e, _, _, f)| (e, f))
        .filter(|(_, f)| f.movement.regressed());
    for (e, f) in cmp
        .figure_diffs()
        .filter(|(_, f)| f.movement.regressed())
        .chain(rolls)
    {
        let change = match f.delta {
            Some(_) => format!(
                "{} ({}) {}",
                f.delta_text(),
                f.delta_pct_text(),
                f.movement_text()
            ),
            None => f.movement_text().to_string(),
        };
        out.push(RegressionRow {
            experiment: e.name.clone(),
            figure: figure_name(f),
            baseline: median_text(f, &f.baseline),
            now: median_text(f, &f.now),
            change,
        });
    }
    out
}

/// How the reports name a figure row: its label, `transition: <expectation>` for an
/// observed transition.
pub fn figure_name(f: &FigureDiff) -> String {
    match f.kind {
        FigureKind::Transition => format!("transition: {}", f.label),
        _ => f.label.clone(),
    }
}

/// A side's median as text: `38.2s` (a duration after its step), `100` for the score,
/// `not observed`.
pub fn median_text(f: &FigureDiff, spread: &Spread) -> String {
    match (spread.median, f.kind) {
        (None, _) => "not observed".to_string(),
        (Some(v), FigureKind::Score) => Spread::of([Some(v)]).score_text(),
        (Some(v), _) => format!("{:.1}s", v.round() / 1000.0),
    }
}

/// The tolerance and the noise floor in words, one line each, for the reports' header.
pub fn thresholds(cmp: &Comparison) -> [(&'static str, String); 2] {
    [
        (
            "tolerance",
            format!("{} (widens the baseline's min–max)", cmp.tolerance.text()),
        ),
        (
            "noise floor",
            format!(
                "a move of the median {} is noise, never a regression",
                cmp.tolerance.noise_floor.text()
            ),
        ),
    ]
}

/// The comparison's verdict in one short line: `REGRESSED: 6 regression(s) beyond the
/// tolerance and the noise floor`, `NO REGRESSION: …` or `NOTHING COMPARED: …`. The
/// regressions themselves are listed by [`regression_rows`].
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
        1 => format!(
            "REGRESSED: {} regression(s) beyond the tolerance and the noise floor",
            cmp.regressions()
        ),
        _ => format!(
            "NO REGRESSION: {} experiment(s) compared, every change within the tolerance",
            cmp.in_common()
        ),
    }
}

fn or_none(s: String) -> String {
    if s.is_empty() { "none".to_string() } else { s }
}
