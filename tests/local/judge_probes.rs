//! The judge over probe results: `becomes`/`never` for probes like for nodes, and
//! `downFor` as an outage budget, over hand-built timelines with probe events.

use crate::judge_support::*;
use chrono::Utc;
use faultline::experiment::model::*;
use faultline::judge::{Outcome, Verdict, judge};
use faultline::timeline::{Entry, Event, GapPhase, RunPhase, StepPhase, Timeline};

const STOP: &str = "stop kubelet";

fn entry(offset_ms: i64, event: Event) -> Entry {
    Entry {
        offset_ms,
        wall: Utc::now(),
        event,
    }
}

/// A timeline whose experiment starts at offset 1s (time zero of the messages) with
/// `since` issued then, the given probe results of `web` (offsets on the timeline), and a
/// last note at `end_ms` (how far observation reached).
fn probe_timeline(results: &[(i64, bool)], end_ms: i64) -> Timeline {
    let mut t = probe_timeline_from_observation(results, end_ms);
    t.entries.insert(
        0,
        entry(
            1000,
            Event::Run {
                phase: RunPhase::Started { zero_ms: None },
            },
        ),
    );
    t.entries.sort_by_key(|e| e.offset_ms);
    t
}

/// [`probe_timeline`] without the experiment's start: the messages count from the
/// timeline's own zero, one second before `since`.
fn probe_timeline_from_observation(results: &[(i64, bool)], end_ms: i64) -> Timeline {
    let mut t = Timeline::new(Utc::now());
    t.entries.push(entry(
        1000,
        Event::Step {
            step: STOP.into(),
            action: "kubelet-stop".into(),
            node: Some("lab-worker-2".into()),
            phase: StepPhase::Issued,
        },
    ));
    for &(at, up) in results {
        t.entries.push(entry(
            at,
            Event::Probe {
                name: "web".into(),
                up,
                detail: if up { "HTTP 200" } else { "HTTP 503" }.into(),
                failed: None,
            },
        ));
    }
    t.entries.push(entry(
        end_ms,
        Event::Note {
            message: "end".into(),
        },
    ));
    t.entries.sort_by_key(|e| e.offset_ms);
    t
}

fn one(check: Check, t: &Timeline, complete: bool) -> Verdict {
    let e = expect("probe", Subject::Probe { name: "web".into() }, check, STOP);
    let exp = experiment(vec![e]);
    judge(&exp, &targets(), &timers(), &[], t, complete).remove(0)
}

fn down_for(s: f64) -> Check {
    Check::DownFor { at_most: secs(s) }
}

const DOWN: StateMatch = StateMatch::Probe(ProbeStateMatch::Down);

#[test]
fn becomes_down_within_passes_and_says_when() {
    let t = probe_timeline(&[(0, true), (4100, false)], 30_000);
    let v = one(becomes(DOWN, Window::Within(secs(10.0))), &t, true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    assert_eq!(v.measured_ms, Some(3100));
    assert_eq!(v.message, "web became Down at +3.1s (bound 10.0s)");
}

#[test]
fn becomes_down_too_late_fails() {
    let t = probe_timeline(&[(0, true), (15_000, false)], 30_000);
    let v = one(becomes(DOWN, Window::Within(secs(10.0))), &t, true);
    assert_eq!(v.outcome, Outcome::Failed, "{}", v.message);
    assert_eq!(
        v.message,
        "expected Down within 10.0s after `stop kubelet`; web became Down at +14.0s, too late (bound 10.0s)"
    );
}

#[test]
fn never_down_fails_at_the_first_down_and_passes_without_one() {
    let never = Check::Never {
        state: DOWN,
        until: Until::End,
    };
    let t = probe_timeline(&[(0, true), (6000, false), (7000, true)], 30_000);
    let v = one(never.clone(), &t, true);
    assert_eq!(v.outcome, Outcome::Failed, "{}", v.message);
    assert_eq!(v.measured_ms, Some(5000));
    let t = probe_timeline(&[(0, true)], 30_000);
    assert_eq!(one(never.clone(), &t, true).outcome, Outcome::Passed);
    // While the run goes on, a probe that has been up so far is not decided.
    assert_eq!(one(never, &t, false).outcome, Outcome::Pending);
}

#[test]
fn watch_gaps_do_not_make_probe_results_uncertain() {
    let mut t = probe_timeline(&[(0, true)], 30_000);
    for (at, phase) in [(2000, GapPhase::Began), (9000, GapPhase::Ended)] {
        t.entries.push(entry(
            at,
            Event::Gap {
                source: "pods".into(),
                phase,
                reason: "watch error".into(),
            },
        ));
    }
    t.entries.sort_by_key(|e| e.offset_ms);
    let never = Check::Never {
        state: DOWN,
        until: Until::End,
    };
    let v = one(never, &t, true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
}

#[test]
fn down_for_passes_when_every_outage_is_short_enough() {
    let t = probe_timeline(
        &[
            (0, true),
            (4000, false),
            (9000, true),
            (15_000, false),
            (16_000, true),
        ],
        40_000,
    );
    let v = one(down_for(20.0), &t, true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    assert_eq!(
        v.message,
        "longest outage: web was Down from +3.0s to +8.0s (5.0s), within 20.0s"
    );
}

#[test]
fn down_for_fails_on_a_long_outage_with_its_interval() {
    let t = probe_timeline(&[(0, true), (4100, false), (26_000, true)], 40_000);
    let v = one(down_for(20.0), &t, true);
    assert_eq!(v.outcome, Outcome::Failed, "{}", v.message);
    assert_eq!(v.measured_ms, Some(3100));
    assert_eq!(
        v.message,
        "expected Down for at most 20.0s at a time after `stop kubelet`; web was Down from +3.1s to +25.0s (21.9s), longer than 20.0s"
    );
}

#[test]
fn an_outage_still_open_at_the_end_counts_up_to_the_end() {
    // Down from +3s and never back: 12s to the end passes a 20s budget...
    let t = probe_timeline(&[(0, true), (4000, false)], 16_000);
    let v = one(down_for(20.0), &t, true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    // ...but 29s to the end does not.
    let t = probe_timeline(&[(0, true), (4000, false)], 33_000);
    let v = one(down_for(20.0), &t, true);
    assert_eq!(v.outcome, Outcome::Failed, "{}", v.message);
    assert!(
        v.message
            .ends_with("web was Down from +3.0s to +32.0s (still Down when observation ended) (29.0s), longer than 20.0s"),
        "{}",
        v.message
    );
    // A live run fails as soon as the open outage is already too long, and waits otherwise.
    assert_eq!(one(down_for(20.0), &t, false).outcome, Outcome::Failed);
    let t = probe_timeline(&[(0, true), (4000, false)], 10_000);
    assert_eq!(one(down_for(20.0), &t, false).outcome, Outcome::Pending);
}

#[test]
fn an_outage_before_since_counts_only_from_since() {
    // Down from -10s to +12s (absolute offsets; `since` is at +1s): 11s after `since`.
    let t = probe_timeline(&[(-10_000, false), (12_000, true)], 30_000);
    let v = one(down_for(15.0), &t, true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    assert_eq!(v.measured_ms, Some(0));
}

#[test]
fn messages_count_from_the_experiments_start_and_measured_times_from_since() {
    // The same results, with and without the start on the timeline: the measured time is
    // after `since` either way; the message's moment is from time zero, the experiment's
    // start (offset 1s) when it is known, the timeline's own zero when it is not.
    let results = [(0, true), (4100, false)];
    let within = Check::Becomes {
        state: DOWN,
        window: Window::Within(secs(10.0)),
    };
    let started = one(within.clone(), &probe_timeline(&results, 20_000), true);
    let bare = one(
        within,
        &probe_timeline_from_observation(&results, 20_000),
        true,
    );
    assert_eq!(started.measured_ms, Some(3100));
    assert_eq!(bare.measured_ms, Some(3100));
    assert_eq!(started.message, "web became Down at +3.1s (bound 10.0s)");
    assert_eq!(bare.message, "web became Down at +4.1s (bound 10.0s)");
}
