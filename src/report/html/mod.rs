//! A single self-contained HTML page per run, readable offline and attachable to a ticket
//! as one file: the outcome, the timeline as a picture (one lane per node, pod, workload and
//! probe, with the faults and the expectations drawn on the lanes they are about), then the
//! verdict table, safety, recovery figures, targets and timers.

mod expectations;
mod faults;
mod inline_code;
mod lanes;
mod page;
mod picture;
mod predicted;

use crate::record::RunRecord;

pub(crate) use inline_code::html_text;
pub(crate) use page::render_explained_into;
pub use page::render_into;
pub(crate) use picture::{Frame, timeline_svg_in};

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

/// Renders the record as one self-contained HTML page.
pub fn render(record: &RunRecord) -> String {
    let mut h = String::new();
    render_into(&mut h, record);
    h
}
