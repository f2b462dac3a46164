//! A single self-contained HTML page per run, readable offline and attachable to a ticket
//! as one file: the run's header and outcome, then the timeline as a picture (one lane per
//! node, pod, workload and probe, with the faults and the expectations drawn on the lanes
//! they are about; `html_parts`), the verdicts, safety, recovery figures, targets and
//! timers, and every entry folded away. The picture comes before the tables: it is what a
//! reader takes in at a glance.

use std::fmt::Write;

use super::html_parts::{CSS, Frame, html_text, write_timeline_svg};
use crate::judge::Outcome;
use crate::record::{RunOutcome, RunRecord};
use crate::sanitize::html as esc;

/// How to read the picture, above it.
const LEGEND: &str = "<p class=\"meta\">Lanes: green Ready/available · amber NotReady/degraded · red Unknown/failed · grey Terminating · blue Pending · blank gone · hatched: no observation. \
A dark red strip and pink shading on a node's lane: a fault in force there, from its step to its undo. \
Under each lane, the expectations about it: the band is the window it is judged in, the marker its verdict \
(● passed, ◆ failed, ■ undecidable) where it was observed or decided. \
A purple band with a dashed outline on a node's or pod's lane: the window in which the node failure model predicts a transition of it \
(a dashed tick where it gives no upper bound); outlined red where the cluster did otherwise (see faultline explain). Hover for details.</p>";

/// Renders the record as one self-contained HTML page.
pub fn render(record: &RunRecord) -> String {
    let mut h = String::new();
    render_into(&mut h, record);
    h
}

/// Writes the page of [`render`] to `h` as it goes (the report file: at 30,000 pods the
/// page is megabytes, written through a buffer rather than held whole).
pub fn render_into(h: &mut impl Write, record: &RunRecord) {
    render_explained_into(h, record, &crate::explain::explain(record));
}

/// [`render_into`] with the node failure model's comparison of `record` already made
/// (`explain`), by whoever renders the other reports of the run from it too.
pub(crate) fn render_explained_into(
    h: &mut impl Write,
    record: &RunRecord,
    explanation: &crate::explain::Explanation,
) {
    header(h, record);
    errors(h, record);
    timeline(h, record, explanation);
    verdicts(h, record);
    safety(h, record);
    figures(h, record);
    rolls(h, record);
    targets_and_timers(h, record);
    entries(h, record);
}

/// The run in one look: the experiment, the cluster and when, the outcome and its score.
fn header(h: &mut impl Write, record: &RunRecord) {
    let exp = &record.experiment;
    let (outcome, class) = match &record.outcome {
        RunOutcome::Passed => ("PASSED".to_string(), "Passed"),
        RunOutcome::Failed => ("FAILED".to_string(), "Failed"),
        RunOutcome::Error { message } => (format!("ERROR: {}", html_text(message)), "Error"),
        RunOutcome::Interrupted => ("INTERRUPTED".to_string(), "Pending"),
        RunOutcome::Skipped { reason } => (format!("SKIPPED: {}", html_text(reason)), "Skipped"),
    };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>faultline: {name}</title><style>{CSS}</style></head><body>\
<h1>{name}</h1><p class=\"meta\">{desc}</p>\
<p class=\"meta\">cluster <b>{cluster}</b>{version} · run {run} · {start} → {finish} · faultline {fv}</p>\
<p class=\"meta\">{zero}</p>\
<p><span class=\"outcome {class}\">{outcome}</span> \
<span class=\"score\">resilience score <b>{score}</b> <span class=\"meta\">({explained})</span></span></p>",
        score = record.score().value_text(),
        explained = esc(&record.score().explain()),
        name = esc(&exp.name),
        desc = html_text(&exp.description),
        cluster = esc(&record.cluster.name),
        version = record
            .cluster
            .server_version
            .as_ref()
            .map(|v| format!(" ({})", esc(v)))
            .unwrap_or_default(),
        run = esc(&record.run_id),
        start = record.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        finish = record.finished_at.format("%H:%M:%S UTC"),
        fv = esc(&record.faultline_version),
        zero = html_text(&crate::report::text::time_zero_line(record)),
    );
}

/// Which nodes each target resolved to, and the cluster timers bounds were resolved with.
fn targets_and_timers(h: &mut impl Write, record: &RunRecord) {
    let _ = h.write_str("<h2>Targets</h2><table><tr><th>target</th><th>nodes</th></tr>");
    for (t, nodes) in &record.targets {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td></tr>",
            esc(t),
            esc(&nodes.join(", "))
        );
    }
    let _ = h.write_str("</table>");
    let timers = crate::report::text::timer_lines(record);
    if !timers.is_empty() {
        let _ = h.write_str("<h2>Timers</h2><ul>");
        for line in timers {
            let _ = write!(h, "<li>{}</li>", html_text(&line));
        }
        let _ = h.write_str("</ul>");
    }
}

/// One row per expectation: its verdict, when it was measured and why.
fn verdicts(h: &mut impl Write, record: &RunRecord) {
    let _ = h.write_str("<h2>Expectations</h2><table class=\"verdicts\"><tr><th>outcome</th><th>expectation</th><th>since</th><th>measured</th><th>message</th></tr>");
    for v in &record.verdicts {
        let class = format!("{:?}", v.outcome);
        let _ = write!(
            h,
            "<tr class=\"{class}\"><td>{class}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            html_text(&v.name),
            esc(&v.since),
            crate::report::text::measured_text(v.measured_ms),
            html_text(&crate::report::text::verdict_message(record, v))
        );
    }
    let _ = h.write_str("</table>");
}

/// Step failures and setup errors, high on the page: they mean the run is not a test result.
fn errors(h: &mut impl Write, record: &RunRecord) {
    if !record.errors.is_empty() {
        let _ = h.write_str("<h2>Errors</h2><ul>");
        for e in &record.errors {
            let _ = write!(h, "<li class=\"Error\">{}</li>", html_text(e));
        }
        let _ = h.write_str("</ul>");
    }
}

/// Each fault's proof that it took effect, any abort, and whether the cluster was restored.
fn safety(h: &mut impl Write, record: &RunRecord) {
    let safety = crate::report::text::safety_lines(record);
    if !safety.is_empty() {
        let _ = h.write_str("<h2>Safety</h2><ul class=\"safety\">");
        for line in &safety {
            let bad = ["ABORTED", "NOT restored", "DID NOT", "UNDONE BY"]
                .iter()
                .any(|w| line.contains(w));
            let _ = write!(
                h,
                "<li class=\"{}\">{}</li>",
                if bad { "Error" } else { "Passed" },
                html_text(line)
            );
        }
        let _ = h.write_str("</ul>");
    }
}

/// The recovery figures, measured from the first fault step.
fn figures(h: &mut impl Write, record: &RunRecord) {
    let _ = h.write_str("<h2>Recovery figures</h2>");
    match &record.figures.fault_step {
        Some(step) => {
            let _ = write!(
                h,
                "<p>measured from <b>{}</b></p><table class=\"figures\">",
                esc(step)
            );
            for (label, value) in record.figures.rows() {
                let _ = write!(
                    h,
                    "<tr><td>{label}</td><td>{}</td></tr>",
                    crate::report::text::figure_text(value)
                );
            }
            let _ = h.write_str("</table>");
        }
        None => {
            let _ = h.write_str("<p>no fault step ran</p>");
        }
    }
}

/// Each roll: a row per node in the order the roll took them (the lanes show their steps
/// in turn), each stage from the node's own step, the row coloured by whether the node
/// was back within the roll's timeout; then what the probes saw over the roll.
fn rolls(h: &mut impl Write, record: &RunRecord) {
    use crate::report::roll_text::{
        HEADS, node_verdict, probe_line, probes_note, row, timeout_text,
    };
    for roll in &record.rolls {
        let _ = write!(
            h,
            "<h2>Roll <code>{}</code></h2><p>timeout {}; each stage measured from the node's \
             own step, nodes in the order the roll took them</p><table class=\"roll\"><tr>",
            esc(&roll.roll),
            esc(&timeout_text(roll))
        );
        for head in HEADS.iter().chain(&["back in time"]) {
            let _ = write!(h, "<th>{head}</th>");
        }
        let _ = h.write_str("</tr>");
        for n in &roll.nodes {
            let (verdict, words) = node_verdict(roll, n);
            let class = match verdict {
                Some(true) => "Passed",
                Some(false) => "Failed",
                None => "Skipped",
            };
            let _ = write!(h, "<tr class=\"{class}\">");
            for cell in row(record, n) {
                let _ = write!(h, "<td>{}</td>", esc(&cell));
            }
            let _ = write!(h, "<td>{}</td></tr>", esc(&words));
        }
        let _ = h.write_str("</table>");
        if !roll.probes.is_empty() {
            let _ = h.write_str("<ul>");
            for p in &roll.probes {
                let _ = write!(h, "<li>{}</li>", esc(&probe_line(p)));
            }
            let _ = h.write_str("</ul>");
            if let Some(note) = probes_note(&roll.probes) {
                let _ = write!(h, "<p class=\"meta\">{}</p>", esc(note));
            }
        }
    }
}

/// The picture, with how to read it.
fn timeline(h: &mut impl Write, record: &RunRecord, explanation: &crate::explain::Explanation) {
    let _ = h.write_str("<h2 id=\"timeline\">Timeline</h2>");
    let _ = h.write_str(LEGEND);
    let _ = h.write_str("<div class=\"timeline-wrap\">");
    write_timeline_svg(
        h,
        record,
        explanation,
        Frame::whole(record, record.zero_ms()),
    );
    let _ = h.write_str("</div>");
}

/// Every timeline entry as the terminal writes it, folded; and how many verdicts were decided.
fn entries(h: &mut impl Write, record: &RunRecord) {
    let _ = h.write_str("<details><summary>timeline entries</summary><pre>");
    let zero = Some(record.zero_ms());
    for e in &record.timeline.entries {
        let _ = h.write_str(&esc(&crate::report::text::entry_line(e, zero)));
        let _ = h.write_str("\n");
    }
    let _ = h.write_str("</pre></details>");
    let decided = record
        .verdicts
        .iter()
        .filter(|v| v.outcome != Outcome::Pending)
        .count();
    let _ = writeln!(
        h,
        "<p class=\"meta\">{decided} of {} expectations decided</p></body></html>",
        record.verdicts.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roll_is_a_table_of_its_nodes_in_turn() {
        let record = crate::report::roll_text::tests::rolled_record([40, 360, 42]);
        let page = render(&record);
        assert!(
            page.contains("<h2>Roll <code>roll reboots</code></h2>"),
            "{page}"
        );
        let table = page
            .split("<table class=\"roll\">")
            .nth(1)
            .and_then(|t| t.split("</table>").next())
            .expect("the roll's table");
        let rows: Vec<&str> = table.split("<tr").skip(2).collect();
        assert_eq!(rows.len(), 3, "{table}");
        assert!(rows[0].contains("<td>w1</td>") && rows[0].starts_with(" class=\"Passed\""));
        assert!(rows[1].contains("<td>w2</td>") && rows[1].starts_with(" class=\"Failed\""));
        assert!(rows[1].contains("<td>360.0s</td>"), "{}", rows[1]);
        assert!(page.contains("probe web: down 6.0s over the roll in 3 outage(s)"));
        let none = RunRecord::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/records/kubelet-stop-within-toleration.json"),
        )
        .expect("record");
        assert!(!render(&none).contains("class=\"roll\""));
    }
}
