//! The pieces every HTML report is made of (a run's page, a series' page, a comparison's
//! page): the style sheet, inline code in prose, and the timeline picture (one lane per
//! node, pod, workload and probe, with the faults, the expectations and the node failure
//! model's windows drawn on the lanes they are about). None of them renders a report, so
//! no HTML reporter imports another.

mod expectations;
mod faults;
mod inline_code;
mod lanes;
mod picture;
mod predicted;

pub(crate) use inline_code::html_text;
pub(crate) use picture::{Frame, timeline_svg_in, write_timeline_svg};

/// The style sheet every HTML report's page carries inline.
pub(crate) const CSS: &str = "body{font-family:system-ui,sans-serif;margin:24px;color:#222}\
h1{font-size:1.4em;margin-bottom:4px}.meta{color:#555}\
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}\
.Passed{background:#dff3e3}.Failed{background:#f8d7da}.Undecidable{background:#efe0f5}\
.Skipped{background:#fff3cd}.Error{background:#f5c2c7}.Pending{background:#d9edf7}\
.outcome{font-weight:bold;font-size:1.1em;padding:6px 10px;display:inline-block}\
code{background:rgba(0,0,0,.06);padding:0 3px;border-radius:3px;font-size:.95em}\
.timeline-wrap{overflow-x:auto}svg.timeline{display:block;min-width:900px;max-width:1600px}\
svg text{font-family:monospace;font-size:12px}svg text.expectation-name{font-size:11px}\
pre{background:#f6f6f6;padding:8px;overflow:auto}";
