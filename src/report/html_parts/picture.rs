//! The timeline as an SVG picture: a lane per object, the faults shaded on the lanes of the
//! nodes they hit, under each lane the expectations about it (window and verdict), and the
//! steps, gaps, endpoint switches, aborts and the end of observation across all lanes.
//! It scales to the page's width (a `viewBox`, no fixed size), so it fits a laptop.

use std::fmt::Write;

use super::expectations::{Mark, Seen, marks};
use super::faults::{FaultSpan, fault_spans};
use super::lanes::{Lane, LaneOf, lanes};
use super::predicted;
use crate::explain::{Explained, Explanation};
use crate::judge::{Outcome, format_relative};
use crate::record::RunRecord;
use crate::sanitize::html as esc;
use crate::timeline::{Event, GapPhase, RunPhase, StepPhase};

const LABEL_W: f64 = 300.0;
const PLOT_W: f64 = 1000.0;
const RIGHT_W: f64 = 30.0;
const LANE_H: f64 = 22.0;
/// Height of one expectation's row under its lane.
const MARK_H: f64 = 16.0;
const TOP: f64 = 70.0;
/// Longest expectation name written in the label column; the rest is in its tooltip.
const MARK_NAME_CHARS: usize = 41;
/// Issues of one step closer than this are one issue on several nodes: labelled once.
const SAME_ISSUE_MS: i64 = 2_000;
/// Narrowest stretch (px) of a pod lane that gets its node's name written on it.
const NODE_NAME_MIN_PX: f64 = 40.0;

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
    write_timeline_svg(&mut s, record, &crate::explain::explain(record), frame);
    s
}

/// The colour an outcome is drawn in, as the verdict table colours its rows (darker).
fn outcome_colour(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "#1e7b34",
        Outcome::Failed => "#c0392b",
        Outcome::Undecidable => "#7d3c98",
        Outcome::Skipped => "#b7950b",
        Outcome::Error => "#922b21",
        Outcome::Pending => "#2e6da4",
    }
}

/// The sign before an expectation's name: not only its colour tells the verdict.
fn outcome_sign(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "✓",
        Outcome::Failed => "✗",
        Outcome::Pending => "…",
        Outcome::Undecidable | Outcome::Skipped | Outcome::Error => "?",
    }
}

/// `name` cut to `max` characters, with an ellipsis when cut.
fn shortened(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        name.to_string()
    } else {
        let mut out: String = name.chars().take(max - 1).collect();
        out.push('…');
        out
    }
}

/// An expectation's name as its row writes it: on one line when it fits the label column,
/// else wrapped on words over two (the second shortened with `…` if still too long).
fn name_lines(name: &str) -> Vec<String> {
    let mut lines: Vec<String> = textwrap::wrap(name, MARK_NAME_CHARS)
        .into_iter()
        .map(|l| l.into_owned())
        .collect();
    if lines.len() > 2 {
        let rest = lines[1..].join(" ");
        lines.truncate(1);
        lines.push(shortened(&rest, MARK_NAME_CHARS));
    }
    lines
}

/// The height of an expectation's row: one line of its name, or two.
fn mark_h(mark: &Mark) -> f64 {
    if mark.name.chars().count() <= MARK_NAME_CHARS {
        MARK_H
    } else {
        name_lines(&mark.name).len() as f64 * MARK_H
    }
}

/// The height of a lane's expectation rows.
fn marks_h(marks: &[Mark]) -> f64 {
    marks.iter().map(mark_h).sum()
}

/// Maps record offsets to x on the picture, clamped to the plot.
struct Scale {
    origin: i64,
    start: i64,
    end: i64,
}

impl Scale {
    /// x of a time relative to the frame's origin.
    fn rel(&self, t: i64) -> f64 {
        LABEL_W + (t - self.start) as f64 / (self.end - self.start).max(1) as f64 * PLOT_W
    }

    /// x of a record offset.
    fn at(&self, ms: i64) -> f64 {
        self.rel(ms - self.origin)
    }

    /// x of a record offset, kept inside the plot (windows may reach past the picture).
    fn clamped(&self, ms: i64) -> f64 {
        self.at(ms).clamp(LABEL_W, LABEL_W + PLOT_W)
    }
}

/// Writes the timeline picture of `record` over `frame` to `s` (a page being written to
/// its file: at 30,000 pods the picture alone is megabytes, never held as a second text),
/// with the windows of `explanation`, the node failure model's comparison of `record`.
pub(crate) fn write_timeline_svg(
    s: &mut impl Write,
    record: &RunRecord,
    explanation: &Explanation,
    frame: Frame,
) {
    let Frame { origin, start, end } = frame;
    // Lanes end where this record's observation ends, which may be before the frame's end.
    let record_end = (origin + end).min(record.timeline.end_ms().max(origin + start + 1));
    let lanes = lanes(record, record_end);
    let marks = marks(record, &lanes, record_end);
    let faults = fault_spans(record, record_end);
    let scale = Scale { origin, start, end };
    // The explanation counts from time zero; the picture draws the record's offsets.
    let zero = record.zero_ms();
    let tops: Vec<f64> = lanes
        .iter()
        .zip(&marks)
        .scan(TOP, |y, (_, m)| {
            let top = *y;
            *y += LANE_H + marks_h(m);
            Some(top)
        })
        .collect();
    let bottom = TOP + lanes.len() as f64 * LANE_H + marks.iter().map(|m| marks_h(m)).sum::<f64>();
    let height = bottom + 30.0;
    let width = LABEL_W + PLOT_W + RIGHT_W;
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" viewBox=\"0 0 {width} {height}\" preserveAspectRatio=\"xMinYMin meet\" class=\"timeline\" role=\"img\">\
<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#555\" stroke-width=\"2\"/></pattern></defs>"
    );
    axis(s, start, end, bottom, &|t| scale.rel(t));
    for ((lane, lane_marks), y) in lanes.iter().zip(&marks).zip(&tops) {
        let predicted = predicted::on_lane(&explanation.items, lane, zero);
        write_lane(s, lane, lane_marks, (&faults, &predicted, zero), *y, &scale);
    }
    write_across(s, record, &scale, bottom, record_end);
    let _ = s.write_str("</svg>");
}

/// One lane's group: its label, the faults on its node, the model's predicted windows
/// (a band under the states, an outline over them), its state segments, the node a pod ran
/// on, and a row for each expectation about it.
fn write_lane(
    s: &mut impl Write,
    lane: &Lane<'_>,
    marks: &[Mark],
    (faults, predicted, zero): (&[FaultSpan], &[&Explained], i64),
    y: f64,
    scale: &Scale,
) {
    let lane_h = LANE_H + marks_h(marks);
    let _ = write!(
        s,
        "<g class=\"lane\"><text x=\"4\" y=\"{:.1}\">{}</text>",
        y + 15.0,
        esc(&lane.label)
    );
    if let LaneOf::Node(node) = lane.of {
        for f in faults.iter().filter(|f| f.node == node) {
            let x0 = scale.clamped(f.from);
            let w = (scale.clamped(f.to) - x0).max(2.0);
            let title = format!(
                "fault `{}` ({}) on {node} from {} to {}: {}",
                f.step,
                f.action,
                format_relative(f.from - scale.origin),
                format_relative(f.to - scale.origin),
                f.ended
            );
            let _ = write!(
                s,
                "<g class=\"fault\" data-step=\"{step}\"><rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{lane_h:.1}\" fill=\"#e74c3c\" fill-opacity=\"0.13\"/>\
<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"3\" fill=\"#8b1a1a\"/><title>{title}</title></g>",
                step = esc(&f.step),
                title = esc(&title)
            );
        }
    }
    let x = |ms: i64| scale.clamped(ms + zero);
    for item in predicted {
        predicted::write(s, item, (y, LANE_H), &x, true);
    }
    for seg in &lane.segments {
        let x0 = scale.at(seg.from);
        let w = (scale.at(seg.to) - x0).max(1.0);
        let _ = write!(
            s,
            "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>",
            y + 3.0,
            LANE_H - 6.0,
            seg.colour,
            esc(&seg.title)
        );
    }
    for item in predicted {
        predicted::write(s, item, (y, LANE_H), &x, false);
    }
    for stretch in &lane.nodes {
        let x0 = scale.clamped(stretch.from);
        if scale.clamped(stretch.to) - x0 < NODE_NAME_MIN_PX {
            continue;
        }
        let _ = write!(
            s,
            "<text class=\"pod-node\" x=\"{:.1}\" y=\"{:.1}\" fill=\"#fff\" font-weight=\"bold\">{}</text>",
            x0 + 4.0,
            y + 15.0,
            esc(&stretch.node)
        );
    }
    let mut row_y = y + LANE_H;
    for mark in marks {
        write_mark(s, mark, row_y, scale);
        row_y += mark_h(mark);
    }
    let _ = s.write_str("</g>");
}

/// One expectation's row under its subject's lane: its name, its window as a band, and its
/// verdict as a marker where it was observed or decided.
fn write_mark(s: &mut impl Write, mark: &Mark, y: f64, scale: &Scale) {
    let colour = outcome_colour(mark.outcome);
    let word = mark.outcome.word();
    let _ = write!(
        s,
        "<g class=\"expectation\" data-outcome=\"{outcome:?}\"><text class=\"expectation-name\" x=\"16\" y=\"{:.1}\" fill=\"{colour}\">",
        y + 12.0,
        outcome = mark.outcome,
    );
    for (i, line) in name_lines(&mark.name).iter().enumerate() {
        let sign = if i == 0 {
            outcome_sign(mark.outcome)
        } else {
            " "
        };
        let _ = write!(
            s,
            "<tspan x=\"16\" dy=\"{}\" xml:space=\"preserve\">{sign} {}</tspan>",
            if i == 0 { 0.0 } else { MARK_H - 2.0 },
            esc(line)
        );
    }
    let _ = write!(s, "<title>{}</title></text>", esc(&mark.name));
    if let Some((from, to)) = mark.window {
        let x0 = scale.clamped(from);
        let w = (scale.clamped(to) - x0).max(2.0);
        let _ = write!(
            s,
            "<rect class=\"window\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{colour}\" fill-opacity=\"0.18\" stroke=\"{colour}\" stroke-opacity=\"0.7\"><title>{}: judged {}</title></rect>",
            y + 3.0,
            MARK_H - 6.0,
            esc(&mark.name),
            esc(&mark.window_text)
        );
    }
    if let Some((at, seen)) = mark.marker {
        let (cx, cy) = (scale.clamped(at), y + MARK_H / 2.0);
        let when = match seen {
            Seen::Observed => "observed",
            Seen::Decided => "decided",
        };
        let word = if mark.member_outcome == mark.outcome {
            word.to_string()
        } else {
            format!("{word} (another member failed it; this one held)")
        };
        let title = format!(
            "{}: {word} ({when} at {}): {}",
            mark.name,
            format_relative(at - scale.origin),
            mark.message
        );
        let shape = match mark.member_outcome {
            Outcome::Passed => format!("<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"5\""),
            Outcome::Failed => format!(
                "<polygon points=\"{:.1},{cy:.1} {cx:.1},{:.1} {:.1},{cy:.1} {cx:.1},{:.1}\"",
                cx - 6.5,
                cy - 6.5,
                cx + 6.5,
                cy + 6.5
            ),
            _ => format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\"",
                cx - 5.0,
                cy - 5.0
            ),
        };
        let _ = write!(
            s,
            "<g class=\"verdict\" data-at=\"{at}\" data-member-outcome=\"{:?}\">{shape} fill=\"{}\" stroke=\"#fff\" stroke-width=\"1.5\"/><title>{}</title></g>",
            mark.member_outcome,
            outcome_colour(mark.member_outcome),
            esc(&title)
        );
    }
    let _ = s.write_str("</g>");
}

/// What runs across every lane: observation gaps, steps, endpoint switches, aborts and
/// the end of observation.
fn write_across(
    s: &mut impl Write,
    record: &RunRecord,
    scale: &Scale,
    bottom: f64,
    record_end: i64,
) {
    let mut open: Vec<(String, i64, String)> = Vec::new();
    let mut steps_drawn = 0usize;
    // Each step's last labelled issue.
    let mut labelled: std::collections::HashMap<&str, i64> = std::collections::HashMap::new();
    for e in &record.timeline.entries {
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
                    gap_rect(
                        s,
                        scale.at(began),
                        scale.at(e.offset_ms),
                        bottom,
                        &src,
                        &reason,
                    );
                }
            }
            Event::Step {
                step,
                phase: StepPhase::Issued,
                ..
            } => {
                let px = scale.at(e.offset_ms);
                // A step on several nodes is issued once per node, a moment apart: one
                // label for them, a line for each.
                let again = labelled
                    .get(step.as_str())
                    .is_some_and(|at| e.offset_ms - at < SAME_ISSUE_MS);
                if again {
                    let _ = write!(
                        s,
                        "<g class=\"step\"><line x1=\"{px:.1}\" y1=\"{TOP:.1}\" x2=\"{px:.1}\" y2=\"{bottom:.1}\" stroke=\"#1f4e9a\" stroke-dasharray=\"4 3\"/></g>"
                    );
                    continue;
                }
                labelled.insert(step.as_str(), e.offset_ms);
                let label_y = TOP - 8.0 - (steps_drawn % 3) as f64 * 14.0;
                steps_drawn += 1;
                let _ = write!(
                    s,
                    "<g class=\"step\"><line x1=\"{px:.1}\" y1=\"{label_y:.1}\" x2=\"{px:.1}\" y2=\"{bottom:.1}\" stroke=\"#1f4e9a\" stroke-dasharray=\"4 3\"/>\
<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#1f4e9a\">{} {}</text></g>",
                    px + 3.0,
                    label_y - 2.0,
                    esc(step),
                    format_relative(e.offset_ms - scale.origin)
                );
            }
            Event::Endpoint { from, to, reason } => {
                let px = scale.at(e.offset_ms);
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
                let px = scale.at(e.offset_ms);
                let _ = write!(
                    s,
                    "<g class=\"abort\"><line x1=\"{px:.1}\" y1=\"{TOP:.1}\" x2=\"{px:.1}\" y2=\"{bottom:.1}\" stroke=\"#c0392b\" stroke-width=\"3\"/>\
<title>ABORT {}: {}</title></g>",
                    esc(condition),
                    esc(value)
                );
            }
            Event::Run {
                phase: RunPhase::ObservationEnded { reason, early },
            } => {
                let px = scale.at(e.offset_ms);
                // An early stop is news: it says so where it happened, not only on hover.
                let label = if *early {
                    format!(
                        "<text class=\"early-stop\" x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\" font-weight=\"bold\" text-anchor=\"end\">stopped early {}</text>",
                        px - 3.0,
                        TOP - 4.0,
                        format_relative(e.offset_ms - scale.origin)
                    )
                } else {
                    String::new()
                };
                let _ = write!(
                    s,
                    "<g class=\"observation-end\"><line x1=\"{px:.1}\" y1=\"{TOP:.1}\" x2=\"{px:.1}\" y2=\"{bottom:.1}\" stroke=\"#555\"/>{label}\
<title>observation ends: {}</title></g>",
                    esc(reason)
                );
            }
            _ => {}
        }
    }
    for (src, began, reason) in open {
        gap_rect(
            s,
            scale.at(began),
            scale.at(record_end),
            bottom,
            &src,
            &reason,
        );
    }
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
