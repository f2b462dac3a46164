//! Every report says where the timers came from, and marks an expectation whose bounds
//! rest on an assumed one (issue 15: never resolve silently against assumed defaults).

use crate::judge_support::*;
use faultline::experiment::model::{Check, Window};
use faultline::experiment::parse_bound;
use faultline::report::{html, junit, markdown, terminal};
use faultline::timers::{ClusterReadings, Reading, StatedTimers, Timer, TimersInForce};

/// The fixture record, its first expectation bounded by `grace + 10s`, with the grace
/// period assumed and the tolerations read from the cluster.
fn record_on_assumed_grace() -> faultline::record::RunRecord {
    let mut record = record();
    let first = &mut record.experiment.expectations[0];
    if let Check::Becomes { window, .. } = &mut first.check {
        *window = Window::Within(parse_bound("grace + 10s").expect("bound"));
    }
    let mut readings = ClusterReadings::default();
    readings.offer(
        Timer::DefaultUnreachableTolerationSeconds,
        Reading {
            value: std::time::Duration::from_secs(30),
            source: "a dry-run pod".into(),
        },
    );
    let t = TimersInForce::resolve(&readings, &StatedTimers::default(), Some("v1.33.1"));
    record.cluster.timers = t.timers;
    record.cluster.timer_sources = t.sources;
    record
}

#[test]
fn the_terminal_summary_lists_the_timers_and_marks_the_assumed_bound() {
    let text = terminal::summary(&record_on_assumed_grace(), false);
    assert!(text.contains("timers:\n"), "{text}");
    assert!(
        text.contains("  nodeMonitorGracePeriod 50s (ASSUMED: upstream default of v1.33;"),
        "{text}"
    );
    assert!(
        text.contains("  defaultUnreachableTolerationSeconds 30s (cluster: a dry-run pod)"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.contains("node unknown within 30s"))
        .expect("the verdict line");
    assert!(line.ends_with("[ASSUMED: grace = 50s]"), "{line}");
    let other = text
        .lines()
        .find(|l| l.contains("web evicted between 30s and 40s"))
        .expect("the verdict line");
    assert!(
        !other.contains("ASSUMED"),
        "fixed bounds are not marked: {other}"
    );
}

#[test]
fn junit_markdown_and_html_carry_the_mark() {
    let record = record_on_assumed_grace();
    let xml = junit::render(&record);
    assert!(xml.contains("[ASSUMED: grace = 50s]"), "{xml}");
    assert!(
        xml.contains("timer nodeMonitorGracePeriod 50s (ASSUMED"),
        "{xml}"
    );
    let md = markdown::render(&record);
    assert!(md.contains("Timers: "), "{md}");
    // Markdown escapes the brackets; GitHub shows them as written.
    assert!(md.contains("\\[ASSUMED: grace = 50s\\]"), "{md}");
    let page = html::render(&record);
    assert!(page.contains("<h2>Timers</h2>"), "{page}");
    assert!(page.contains("[ASSUMED: grace = 50s]"), "{page}");
}

#[test]
fn records_that_do_not_say_where_their_timers_came_from_are_shown_as_before() {
    let record = record();
    assert!(record.cluster.timer_sources.is_empty());
    let text = terminal::summary(&record, false);
    assert!(!text.contains("timers:"), "{text}");
    assert!(!text.contains("ASSUMED"), "{text}");
}
