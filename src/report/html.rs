//! A single self-contained HTML page per run: header, verdict table, recovery figures and
//! the timeline as a picture (one lane per node, pod, workload and probe), readable offline and
//! attachable to a ticket as one file.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::judge::{Outcome, format_relative, labels};
use crate::record::{RunOutcome, RunRecord};
use crate::timeline::{
    ConditionStatus, Event, GapPhase, NodeState, PodId, PodState, RunPhase, StepPhase,
    WorkloadState,
};

use crate::sanitize::html as esc;

const LABEL_W: f64 = 280.0;
const PLOT_W: f64 = 1000.0;
const LANE_H: f64 = 22.0;
const TOP: f64 = 70.0;

pub(crate) const CSS: &str = "body{font-family:system-ui,sans-serif;margin:24px;color:#222}\
h1{font-size:1.4em;margin-bottom:4px}.meta{color:#555}\
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}\
.Passed{background:#dff3e3}.Failed{background:#f8d7da}.Undecidable{background:#efe0f5}\
.Skipped{background:#fff3cd}.Error{background:#f5c2c7}.Pending{background:#d9edf7}\
.outcome{font-weight:bold;font-size:1.1em;padding:6px 10px;display:inline-block}\
svg text{font-family:monospace;font-size:11px}pre{background:#f6f6f6;padding:8px;overflow:auto}";

/// Observed states of one object over time (`None` = gone).
type Changes<S> = Vec<(i64, Option<S>)>;

/// A coloured stretch of one lane.
struct Segment {
    from: i64,
    to: i64,
    colour: &'static str,
    title: String,
}

/// One row of the picture.
struct Lane {
    label: String,
    segments: Vec<Segment>,
}

fn node_colour(s: &NodeState) -> &'static str {
    match s.ready {
        ConditionStatus::True if s.unschedulable => "#8fcf9a",
        ConditionStatus::True => "#2e9e44",
        ConditionStatus::False => "#f0a030",
        ConditionStatus::Unknown => "#d64541",
    }
}

fn pod_colour(s: &PodState) -> &'static str {
    if s.terminating {
        "#9a9a9a"
    } else if s.ready {
        "#2e9e44"
    } else if s.phase == "Running" {
        "#f0a030"
    } else if s.phase == "Pending" {
        "#8fb8de"
    } else {
        "#d64541"
    }
}

fn workload_colour(s: &WorkloadState) -> &'static str {
    if s.is_available() {
        "#2e9e44"
    } else if s.available == 0 {
        "#d64541"
    } else {
        "#f0a030"
    }
}

fn probe_colour((up, _): &(bool, String)) -> &'static str {
    if *up { "#2e9e44" } else { "#d64541" }
}

/// Turns `(offset, Some(state))` changes into segments ending at the next change.
fn segments<S>(
    changes: &[(i64, Option<S>)],
    end: i64,
    colour: impl Fn(&S) -> &'static str,
    title: impl Fn(&S) -> String,
) -> Vec<Segment> {
    let mut out = Vec::new();
    for (i, (at, state)) in changes.iter().enumerate() {
        let to = changes.get(i + 1).map(|(t, _)| *t).unwrap_or(end);
        if let Some(s) = state {
            out.push(Segment {
                from: *at,
                to,
                colour: colour(s),
                title: format!("{} from {}", title(s), format_relative(*at)),
            });
        }
    }
    out
}

fn lanes(record: &RunRecord, end: i64) -> Vec<Lane> {
    // States are borrowed from the record, not copied: at 30,000 pods a copy of every
    // pod's states is tens of MB.
    let mut nodes: BTreeMap<&str, Changes<&NodeState>> = BTreeMap::new();
    let mut pods: BTreeMap<&PodId, Changes<&PodState>> = BTreeMap::new();
    let mut workloads: BTreeMap<String, Vec<(i64, Option<WorkloadState>)>> = BTreeMap::new();
    let mut pod_order: Vec<&PodId> = Vec::new();
    let mut probes: BTreeMap<String, Changes<(bool, String)>> = BTreeMap::new();
    let mut api: Changes<(bool, String)> = Vec::new();
    let mut queries: BTreeMap<String, Changes<(bool, String)>> = BTreeMap::new();
    let bad_side = |name: &str, value: Option<f64>| -> bool {
        let threshold = record
            .experiment
            .abort
            .conditions
            .iter()
            .find_map(|c| match &c.kind {
                crate::experiment::model::AbortKind::Query { threshold, .. } if c.name == name => {
                    Some(*threshold)
                }
                _ => None,
            });
        match (value, threshold) {
            (Some(v), Some(t)) => t.crossed(v),
            (Some(_), None) => false,
            (None, _) => true,
        }
    };
    for e in &record.timeline.entries {
        match &e.event {
            Event::Node { name, after, .. } => nodes
                .entry(name.as_str())
                .or_default()
                .push((e.offset_ms, after.as_ref())),
            Event::Pod { pod, after, .. } => {
                if !pods.contains_key(pod) {
                    pod_order.push(pod);
                }
                pods.entry(pod)
                    .or_default()
                    .push((e.offset_ms, after.as_ref()));
            }
            Event::Workload {
                workload, after, ..
            } => workloads
                .entry(workload.to_string())
                .or_default()
                .push((e.offset_ms, *after)),
            Event::Probe { name, up, detail } => probes
                .entry(name.clone())
                .or_default()
                .push((e.offset_ms, Some((*up, detail.clone())))),
            Event::Api { up, detail } => api.push((e.offset_ms, Some((*up, detail.clone())))),
            Event::Query {
                name,
                value,
                detail,
            } => {
                let said = match value {
                    Some(v) => format!("{v}: {detail}"),
                    None => format!("no data: {detail}"),
                };
                queries
                    .entry(name.clone())
                    .or_default()
                    .push((e.offset_ms, Some((!bad_side(name, *value), said))));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (name, changes) in &nodes {
        out.push(Lane {
            label: format!("node {name}"),
            segments: segments(
                changes,
                end,
                |s| node_colour(s),
                |s| labels::node_label(Some(*s)),
            ),
        });
    }
    for pod in pod_order {
        let Some(changes) = pods.get(pod) else {
            continue;
        };
        let uid: String = pod.uid.chars().take(8).collect();
        out.push(Lane {
            label: format!("pod {} ({uid})", pod.name),
            segments: segments(
                changes,
                end,
                |s| pod_colour(s),
                |s| labels::pod_label(Some(*s)),
            ),
        });
    }
    for (name, changes) in &workloads {
        out.push(Lane {
            label: name.clone(),
            segments: segments(changes, end, workload_colour, |s| {
                labels::workload_label(Some(s))
            }),
        });
    }
    for (name, changes) in &probes {
        out.push(Lane {
            label: format!("probe {name}"),
            segments: segments(changes, end, probe_colour, |(up, detail)| {
                format!("{} ({detail})", labels::probe_label(Some(up)))
            }),
        });
    }
    if !api.is_empty() {
        out.push(Lane {
            label: "API server".to_string(),
            segments: segments(&api, end, probe_colour, |(up, detail)| {
                format!("{} ({detail})", if *up { "answers" } else { "unreachable" })
            }),
        });
    }
    for (name, changes) in &queries {
        out.push(Lane {
            label: format!("query {name}"),
            segments: segments(changes, end, probe_colour, |(_, said)| said.clone()),
        });
    }
    out
}

/// The stretch of time a timeline picture shows: from `start` to `end`, both relative to
/// `origin` (an offset on the record's timeline, drawn as 0). Two pictures with the same
/// `start` and `end` share one time axis, whatever their origins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    /// The record's offset drawn as time zero.
    pub(crate) origin: i64,
    /// First moment shown, relative to `origin`.
    pub(crate) start: i64,
    /// Last moment shown, relative to `origin`.
    pub(crate) end: i64,
}

impl Frame {
    /// The whole of a record's timeline, with `origin` as time zero.
    pub(crate) fn whole(record: &RunRecord, origin: i64) -> Frame {
        let first = record.timeline.entries.first().map_or(0, |e| e.offset_ms);
        let start = first.min(origin) - origin;
        Frame {
            origin,
            start,
            end: (record.timeline.end_ms() - origin).max(start + 1),
        }
    }

    /// This frame widened to cover `other`'s stretch too (keeping its own origin).
    pub(crate) fn covering(self, other: Frame) -> Frame {
        Frame {
            origin: self.origin,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// The timeline picture of `record` over `frame`.
pub(crate) fn timeline_svg_in(record: &RunRecord, frame: Frame) -> String {
    let mut s = String::new();
    write_timeline_svg(&mut s, record, frame);
    s
}

/// Writes the timeline picture of `record` over `frame` to `s` (a page being written to
/// its file: at 30,000 pods the picture alone is megabytes, never held as a second text).
pub(crate) fn write_timeline_svg(s: &mut impl Write, record: &RunRecord, frame: Frame) {
    let entries = &record.timeline.entries;
    let Frame { origin, start, end } = frame;
    // Lanes end where this record's observation ends, which may be before the frame's end.
    let record_end = (origin + end).min(record.timeline.end_ms().max(origin + start + 1));
    let lanes = lanes(record, record_end);
    let x_rel = |t: i64| LABEL_W + (t - start) as f64 / (end - start).max(1) as f64 * PLOT_W;
    let x = |ms: i64| x_rel(ms - origin);
    let height = TOP + lanes.len() as f64 * LANE_H + 30.0;
    let width = LABEL_W + PLOT_W + 50.0;
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" class=\"timeline\">\
<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#555\" stroke-width=\"2\"/></pattern></defs>"
    );
    let bottom = TOP + lanes.len() as f64 * LANE_H;
    axis(s, start, end, bottom, &x_rel);
    for (i, lane) in lanes.iter().enumerate() {
        let y = TOP + i as f64 * LANE_H;
        let _ = write!(
            s,
            "<g class=\"lane\"><text x=\"4\" y=\"{:.1}\">{}</text>",
            y + 15.0,
            esc(&lane.label)
        );
        for seg in &lane.segments {
            let x0 = x(seg.from);
            let w = (x(seg.to) - x0).max(1.0);
            let _ = write!(
                s,
                "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>",
                y + 3.0,
                LANE_H - 6.0,
                seg.colour,
                esc(&seg.title)
            );
        }
        let _ = s.write_str("</g>");
    }
    let mut open: Vec<(String, i64, String)> = Vec::new();
    let mut steps_drawn = 0usize;
    for e in entries {
        match &e.event {
            Event::Gap {
                source,
                phase: GapPhase::Began,
                reason,
            } => open.push((source.clone(), e.offset_ms, reason.clone())),
            Event::Gap {
                source,
                phase: GapPhase::Ended,
                ..
            } => {
                if let Some(i) = open.iter().position(|(s, _, _)| s == source) {
                    let (src, began, reason) = open.remove(i);
                    gap_rect(s, x(began), x(e.offset_ms), bottom, &src, &reason);
                }
            }
            Event::Step {
                step,
                phase: StepPhase::Issued,
                ..
            } => {
                let px = x(e.offset_ms);
                let label_y = TOP - 8.0 - (steps_drawn % 3) as f64 * 14.0;
                steps_drawn += 1;
                let _ = write!(
                    s,
                    "<g class=\"step\"><line x1=\"{px:.1}\" y1=\"{label_y:.1}\" x2=\"{px:.1}\" y2=\"{bottom:.1}\" stroke=\"#1f4e9a\" stroke-dasharray=\"4 3\"/>\
<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#1f4e9a\">{} {}</text></g>",
                    px + 3.0,
                    label_y - 2.0,
                    esc(step),
                    format_relative(e.offset_ms - origin)
                );
            }
            Event::Endpoint { from, to, reason } => {
                let px = x(e.offset_ms);
                let _ = write!(
                    s,
                    "<g class=\"switch\"><line x1=\"{px:.1}\" y1=\"{TOP:.1}\" x2=\"{px:.1}\" y2=\"{bottom:.1}\" stroke=\"#c0392b\" stroke-dasharray=\"2 2\"/>\
<title>API endpoint {} left ({}); now {}</title></g>",
                    esc(from),
                    esc(reason),
                    esc(to)
                );
            }
            Event::Abort { condition, value } => {
                let px = x(e.offset_ms);
                let _ = write!(
                    s,
                    "<g class=\"abort\"><line x1=\"{px:.1}\" y1=\"{TOP:.1}\" x2=\"{px:.1}\" y2=\"{bottom:.1}\" stroke=\"#c0392b\" stroke-width=\"3\"/>\
<title>ABORT {}: {}</title></g>",
                    esc(condition),
                    esc(value)
                );
            }
            Event::Run {
                phase: RunPhase::ObservationEnded { reason, .. },
            } => {
                let px = x(e.offset_ms);
                let _ = write!(
                    s,
                    "<g class=\"observation-end\"><line x1=\"{px:.1}\" y1=\"{TOP:.1}\" x2=\"{px:.1}\" y2=\"{bottom:.1}\" stroke=\"#555\"/>\
<title>observation ends: {}</title></g>",
                    esc(reason)
                );
            }
            _ => {}
        }
    }
    for (src, began, reason) in open {
        gap_rect(s, x(began), x(record_end), bottom, &src, &reason);
    }
    let _ = s.write_str("</svg>");
}

/// Faint vertical grid lines with second labels under the lanes, about ten of them.
fn axis(s: &mut impl Write, start: i64, end: i64, bottom: f64, x: &dyn Fn(i64) -> f64) {
    const STEPS_MS: [i64; 10] = [
        1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000,
    ];
    let span = end - start;
    let step = STEPS_MS
        .iter()
        .copied()
        .find(|st| span / st <= 12)
        .unwrap_or(1_800_000);
    let mut t = start.div_euclid(step) * step;
    while t <= end {
        if t >= start {
            let px = x(t);
            let _ = write!(
                s,
                "<line x1=\"{px:.1}\" y1=\"{TOP}\" x2=\"{px:.1}\" y2=\"{bottom:.1}\" stroke=\"#ddd\"/><text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#666\">{}</text>",
                bottom + 16.0,
                format_relative(t)
            );
        }
        t += step;
    }
}

fn gap_rect(s: &mut impl Write, x0: f64, x1: f64, bottom: f64, source: &str, reason: &str) {
    let _ = write!(
        s,
        "<rect class=\"gap\" x=\"{x0:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"url(#hatch)\" opacity=\"0.5\"><title>no observation of {}: {}</title></rect>",
        (x1 - x0).max(1.0),
        bottom - TOP,
        esc(source),
        esc(reason)
    );
}

/// Renders the record as one self-contained HTML page.
pub fn render(record: &RunRecord) -> String {
    let mut h = String::new();
    render_into(&mut h, record);
    h
}

/// Writes the page of [`render`] to `h` as it goes (the report file: at 30,000 pods the
/// page is megabytes, written through a buffer rather than held whole).
pub fn render_into(h: &mut impl Write, record: &RunRecord) {
    let exp = &record.experiment;
    let (outcome, class) = match &record.outcome {
        RunOutcome::Passed => ("PASSED".to_string(), "Passed"),
        RunOutcome::Failed => ("FAILED".to_string(), "Failed"),
        RunOutcome::Error { message } => (format!("ERROR: {}", esc(message)), "Error"),
        RunOutcome::Interrupted => ("INTERRUPTED".to_string(), "Pending"),
    };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>faultline: {name}</title><style>{CSS}</style></head><body>\
<h1>{name}</h1><p class=\"meta\">{desc}</p>\
<p class=\"meta\">cluster <b>{cluster}</b>{version} · run {run} · {start} → {finish} · faultline {fv}</p>\
<p class=\"outcome {class}\">{outcome}</p>\
<p class=\"score\">resilience score <b>{score}</b> <span class=\"meta\">({explained})</span></p>",
        score = record.score().value_text(),
        explained = esc(&record.score().explain()),
        name = esc(&exp.name),
        desc = esc(&exp.description),
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
    );
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
    let timers = super::timer_lines(record);
    if !timers.is_empty() {
        let _ = h.write_str("<h2>Timers</h2><ul>");
        for line in timers {
            let _ = write!(h, "<li>{}</li>", esc(&line));
        }
        let _ = h.write_str("</ul>");
    }
    let _ = h.write_str("<h2>Expectations</h2><table class=\"verdicts\"><tr><th>outcome</th><th>expectation</th><th>since</th><th>measured</th><th>message</th></tr>");
    for v in &record.verdicts {
        let class = format!("{:?}", v.outcome);
        let _ = write!(
            h,
            "<tr class=\"{class}\"><td>{class}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&v.name),
            esc(&v.since),
            super::measured_text(v.measured_ms),
            esc(&super::verdict_message(record, v))
        );
    }
    let _ = h.write_str("</table>");
    if !record.errors.is_empty() {
        let _ = h.write_str("<h2>Errors</h2><ul>");
        for e in &record.errors {
            let _ = write!(h, "<li class=\"Error\">{}</li>", esc(e));
        }
        let _ = h.write_str("</ul>");
    }
    let safety = super::safety_lines(record);
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
                esc(line)
            );
        }
        let _ = h.write_str("</ul>");
    }
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
                    super::figure_text(value)
                );
            }
            let _ = h.write_str("</table>");
        }
        None => {
            let _ = h.write_str("<p>no fault step ran</p>");
        }
    }
    let _ = h.write_str("<h2>Timeline</h2>");
    let _ = h.write_str("<p class=\"meta\">green Ready/available · amber NotReady/degraded · red Unknown/failed · grey Terminating · blue Pending · blank gone · hatched: no observation</p>");
    write_timeline_svg(h, record, Frame::whole(record, 0));
    let _ = h.write_str("<details><summary>timeline entries</summary><pre>");
    for e in &record.timeline.entries {
        let _ = h.write_str(&esc(&super::terminal::entry_line(e)));
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
