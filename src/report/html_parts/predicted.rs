//! The node failure model's predicted windows on the timeline picture: on the lane of each
//! node and pod the model predicts a transition for, a band from the window's earliest to
//! its latest offset (a tick where it has no upper bound), outlined in the model's colour,
//! or in red where the cluster did otherwise ([`crate::explain`]). Drawn behind the
//! observed states, so a reader sees at a glance where the cluster was early or late.

use std::fmt::Write;

use super::lanes::{Lane, LaneOf};
use crate::explain::Explained;
use crate::failure_model::Window;
use crate::sanitize::html as esc;

/// The model's colour: neither a state's nor a verdict's.
const MODEL: &str = "#6c3483";
/// A deviation's outline.
const DEVIATION: &str = "#c0392b";

/// The explained transitions drawn on `lane`: a node's own, or a pod's (on the lane of the
/// pod object that was there when its node's outage began). The items count from time
/// zero, at offset `zero` of the record's timeline.
pub(super) fn on_lane<'a>(
    items: &'a [Explained],
    lane: &Lane<'_>,
    zero: i64,
) -> Vec<&'a Explained> {
    items
        .iter()
        .filter(|i| match &lane.of {
            LaneOf::Node(node) => i.prediction.subject == *node,
            LaneOf::Pod { id, first_seen, .. } => {
                i.prediction.subject == format!("{}/{}", id.namespace, id.name)
                    && match i.prediction.window {
                        Window::Between { earliest, .. } => {
                            i64::try_from(earliest.as_millis())
                                .unwrap_or(i64::MAX)
                                .saturating_add(zero)
                                >= *first_seen
                        }
                        Window::Never => false,
                    }
            }
            _ => false,
        })
        .collect()
}

/// Draws one predicted window on a lane at `y` of height `h`; `x` maps an offset from
/// time zero (the explanation's) to the picture, kept inside the plot. `behind`: the band under the states (true), or its
/// outline over them (false), so both the window and the states stay visible.
pub(super) fn write(
    s: &mut impl Write,
    item: &Explained,
    (y, h): (f64, f64),
    x: &dyn Fn(i64) -> f64,
    behind: bool,
) {
    let Window::Between { earliest, latest } = item.prediction.window else {
        return;
    };
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let colour = if item.fit.deviates() {
        DEVIATION
    } else {
        MODEL
    };
    let x0 = x(ms(earliest));
    match (latest, behind) {
        (Some(latest), true) => {
            let w = (x(ms(latest)) - x0).max(2.0);
            let _ = write!(
                s,
                "<rect class=\"predicted-band\" x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{colour}\" fill-opacity=\"0.22\"/>"
            );
        }
        (Some(latest), false) => {
            let w = (x(ms(latest)) - x0).max(2.0);
            let _ = write!(
                s,
                "<rect class=\"predicted\" data-fit=\"{fit:?}\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"><title>{}</title></rect>",
                y + 0.75,
                h - 1.5,
                esc(&item.line()),
                fit = item.fit,
            );
        }
        (None, false) => {
            let _ = write!(
                s,
                "<g class=\"predicted\" data-fit=\"{fit:?}\"><line x1=\"{x0:.1}\" y1=\"{y:.1}\" x2=\"{x0:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"2\" stroke-dasharray=\"3 2\"/><title>{}</title></g>",
                y + h,
                esc(&item.line()),
                fit = item.fit,
            );
        }
        (None, true) => {}
    }
}
