//! HTML of a series: one page with the expectations against the runs (a coloured cell per
//! verdict), the recovery figures as min / median / max, each run's score, and each run's
//! timeline picture folded below (the first one open).

use std::fmt::Write as _;

use crate::report::html_parts::{CSS, Frame, html_text, timeline_svg_in};
use crate::report::text::{measured_text, outcome_word};
use crate::sanitize::html as esc;
use crate::series::Series;

use super::{SeriesVerdict, verdict_line};

/// Renders the series as one self-contained HTML page.
pub fn render(series: &Series) -> String {
    let spread = series.spread();
    let first = series.first();
    let exp = series.experiment();
    let n = series.runs().len();
    let verdict = SeriesVerdict::of(series, &spread);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>faultline: {name} ({n} runs)</title><style>{CSS}</style></head><body>\
<h1>{name} <span class=\"meta\">{n} runs</span></h1><p class=\"meta\">{desc}</p>\
<p class=\"meta\">cluster <b>{cluster}</b>{version} · faultline {fv}</p>\
<p class=\"outcome {class}\">{line}</p>\
<p class=\"score\">resilience score <b>{score}</b> <span class=\"meta\">(min / median / max over {n} runs)</span></p>",
        name = esc(&exp.name),
        desc = html_text(&exp.description),
        cluster = esc(&first.cluster.name),
        version = first
            .cluster
            .server_version
            .as_ref()
            .map(|v| format!(" ({})", esc(v)))
            .unwrap_or_default(),
        fv = esc(&first.faultline_version),
        class = verdict.class(),
        line = html_text(&verdict_line(series, &spread)),
        score = esc(&spread.score.score_text()),
    );
    h.push_str("<h2>Expectations</h2><table class=\"verdicts\"><tr><th>expectation</th>");
    for i in 1..=n {
        let _ = write!(h, "<th>run {i}</th>");
    }
    h.push_str("<th>held</th><th>measured (min / median / max)</th></tr>");
    for e in &spread.expectations {
        let _ = write!(h, "<tr><td>{}</td>", html_text(&e.name));
        for (i, o) in e.outcomes.iter().enumerate() {
            let measured = series.runs()[i]
                .verdicts
                .iter()
                .find(|v| v.name == e.name)
                .map(|v| measured_text(v.measured_ms))
                .unwrap_or_else(|| "-".into());
            let _ = write!(
                h,
                "<td class=\"{o:?}\">{} {measured}</td>",
                outcome_word(*o)
            );
        }
        let _ = write!(
            h,
            "<td>{}</td><td>{}</td></tr>",
            html_text(&e.summary()),
            esc(&e.measured.ms_text())
        );
    }
    h.push_str("</table><h2>Recovery figures</h2>");
    match &first.figures.fault_step {
        Some(step) => {
            let _ = write!(
                h,
                "<p>measured from <b>{}</b>; min / median / max over {n} runs</p><table class=\"figures\">",
                esc(step)
            );
            for f in &spread.figures {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td></tr>",
                    f.label,
                    esc(&f.spread.ms_text())
                );
            }
            h.push_str("</table>");
        }
        None => h.push_str("<p>no fault step ran</p>"),
    }
    h.push_str("<h2>Runs</h2><p class=\"meta\">green Ready/available · amber NotReady/degraded · red Unknown/failed · grey Terminating · blue Pending · blank gone · hatched: no observation</p>");
    for (i, run) in series.runs().iter().enumerate() {
        let _ = write!(
            h,
            "<details{}><summary>run {} · {} · score {} · {}</summary>",
            if i == 0 { " open" } else { "" },
            i + 1,
            esc(&run.run_id),
            run.score().value_text(),
            run.outcome.word()
        );
        h.push_str(&timeline_svg_in(run, Frame::whole(run, 0)));
        h.push_str("</details>");
    }
    h.push_str("</body></html>\n");
    h
}
