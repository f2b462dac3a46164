//! A comparison as one self-contained HTML page: the sides' clusters, then per experiment
//! the verdicts and figures side by side (regressions marked) and the two timelines one
//! above the other on one time axis, both drawn from their fault step (time zero), so a
//! stage that moved shows as a shifted edge.
//!
//! Of a side with several runs, the run drawn is the one whose node-NotReady figure is
//! nearest the side's median (the first run when no run has that figure).

use std::fmt::Write as _;

use crate::compare::{Change, Comparison, ExperimentDiff, Presence, TIMER_LABELS, timer_rows};
use crate::record::RunRecord;
use crate::report::html_parts::{CSS, Frame, timeline_svg_in};
use crate::sanitize::html as esc;
use crate::series::{Series, Spread};

use super::{
    REGRESSION_COLUMNS, change_text, figure_name, regression_rows, thresholds, verdict_line,
};

/// The regressions under the verdict, one per row.
fn regressions(h: &mut String, cmp: &Comparison) {
    let rows = regression_rows(cmp);
    if rows.is_empty() {
        return;
    }
    h.push_str("<table class=\"regressions\"><tr>");
    for c in REGRESSION_COLUMNS {
        let _ = write!(h, "<th>{c}</th>");
    }
    h.push_str("</tr>");
    for r in rows {
        h.push_str("<tr class=\"Failed\">");
        for c in r.cells() {
            let _ = write!(h, "<td>{}</td>", esc(c));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
}

/// Renders the comparison; `baseline` and `now` are the sets it was made from, whose
/// timelines it draws.
pub fn render(cmp: &Comparison, baseline: &[Series], now: &[Series]) -> String {
    let class = match cmp.exit_code() {
        0 => "Passed",
        1 => "Failed",
        _ => "Error",
    };
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>faultline compare: {b} → {n}</title><style>{CSS}</style></head><body>\
<h1>faultline compare</h1><p class=\"meta\">baseline <b>{b}</b> → now <b>{n}</b></p>\
<p class=\"outcome {class}\">{line}</p>",
        b = esc(&cmp.baseline.label),
        n = esc(&cmp.now.label),
        line = esc(&verdict_line(cmp)),
    );
    regressions(&mut h, cmp);
    h.push_str("<ul class=\"meta\">");
    for (name, text) in thresholds(cmp) {
        let _ = write!(h, "<li>{name}: {}</li>", esc(&text));
    }
    h.push_str("</ul>");
    h.push_str("<h2>Clusters</h2><table><tr><th>side</th><th>cluster</th><th>Kubernetes</th>");
    for l in TIMER_LABELS {
        let _ = write!(h, "<th>{l}</th>");
    }
    h.push_str("</tr>");
    for (name, side) in [("baseline", &cmp.baseline), ("now", &cmp.now)] {
        for c in &side.clusters {
            let _ = write!(
                h,
                "<tr><td>{name}</td><td>{}</td><td>{}</td>",
                esc(&c.name),
                esc(c.server_version.as_deref().unwrap_or("unknown"))
            );
            for (_, v) in timer_rows(&c.timers) {
                let _ = write!(h, "<td>{v}</td>");
            }
            h.push_str("</tr>");
        }
    }
    h.push_str("</table>");
    let changes = cmp.cluster_changes();
    if !changes.is_empty() {
        let _ = write!(h, "<p>changed: <b>{}</b></p>", esc(&changes.join("; ")));
    }
    for e in &cmp.experiments {
        experiment(&mut h, e, baseline, now);
    }
    h.push_str("</body></html>\n");
    h
}

fn experiment(h: &mut String, e: &ExperimentDiff, baseline: &[Series], now: &[Series]) {
    let _ = write!(h, "<h2>{}</h2>", esc(&e.name));
    match e.presence {
        Presence::BaselineOnly => {
            let _ = write!(
                h,
                "<p>only in the baseline ({} run(s)): not compared</p>",
                e.runs.0
            );
            return;
        }
        Presence::NowOnly => {
            let _ = write!(h, "<p>only now ({} run(s)): not compared</p>", e.runs.1);
            return;
        }
        Presence::Both => {}
    }
    let _ = write!(
        h,
        "<p class=\"meta\">baseline {} run(s), now {} run(s)</p>\
<table class=\"verdicts\"><tr><th>expectation</th><th>baseline → now</th><th>change</th></tr>",
        e.runs.0, e.runs.1
    );
    for x in &e.expectations {
        let class = match x.change {
            Change::Regressed => "Failed",
            Change::Improved => "Passed",
            Change::Skipped | Change::OneSideOnly => "Skipped",
            Change::Unchanged => "",
        };
        let _ = write!(
            h,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&x.name),
            esc(&change_text(x)),
            x.change.word()
        );
    }
    h.push_str("</table><table class=\"figures\"><tr><th>figure</th><th>baseline min / median / max</th><th>now min / median / max</th><th>median moved</th><th>%</th><th>verdict</th></tr>");
    for f in e
        .figures
        .iter()
        .chain(&e.transitions)
        .chain(e.roll_stages())
        .chain(std::iter::once(&e.score))
    {
        let class = if f.movement.regressed() { "Failed" } else { "" };
        let _ = write!(
            h,
            "<tr class=\"{class}\" title=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&f.explain()),
            esc(&figure_name(f)),
            esc(&f.spread_text(&f.baseline)),
            esc(&f.spread_text(&f.now)),
            esc(&f.delta_text()),
            esc(&f.delta_pct_text()),
            f.movement_text()
        );
    }
    h.push_str("</table>");
    let (Some(b), Some(n)) = (
        baseline.iter().find(|s| s.name() == e.name),
        now.iter().find(|s| s.name() == e.name),
    ) else {
        return;
    };
    let (b, bi) = representative(b);
    let (n, ni) = representative(n);
    let fb = Frame::whole(b, fault_offset(b));
    let fnow = Frame::whole(n, fault_offset(n));
    let (fb, fnow) = (fb.covering(fnow), fnow.covering(fb));
    let _ = write!(
        h,
        "<p class=\"meta\">the two timelines on one time axis, time zero at each run's fault step</p>\
<h3>baseline: run {bi} ({})</h3>{}<h3>now: run {ni} ({})</h3>{}",
        esc(&b.run_id),
        timeline_svg_in(b, fb),
        esc(&n.run_id),
        timeline_svg_in(n, fnow),
    );
}

/// The run to draw of a series, with its 1-based number: node NotReady nearest the median.
fn representative(s: &Series) -> (&RunRecord, usize) {
    let spread = Spread::of_ms(s.runs().iter().map(|r| r.figures.node_not_ready_ms));
    let best = spread.median.and_then(|median| {
        s.runs()
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i, (r.figures.node_not_ready_ms? as f64 - median).abs())))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    });
    let i = best.unwrap_or(0);
    (&s.runs()[i], i + 1)
}

/// The offset of the run's first fault step (its recovery figures' origin), or of its
/// start when no fault step ran.
fn fault_offset(r: &RunRecord) -> i64 {
    r.figures
        .fault_step
        .as_deref()
        .and_then(|step| r.timeline.step_issued_ms(step))
        .or(r.start_ms)
        .unwrap_or(0)
}
