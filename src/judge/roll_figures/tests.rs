use std::collections::BTreeMap;
use std::path::Path;

use chrono::Utc;

use super::*;
use crate::timeline::{Entry, Event, NodeState, StepPhase, Timeline};

/// A roll of reboots over `w1`, `w2`, `w3` (timeout 5m), expanded as a run expands it,
/// with an HTTP probe `web`.
pub(crate) fn rolled() -> Experiment {
    let exp = crate::experiment::parse(
        "name: roll
description: d
targets:
  workers: {names: [w1, w2, w3]}
probes:
  web: {http: 'http://10.0.0.1/', interval: 1s}
steps:
  - {name: roll reboots, at: 0s, do: reboot, target: workers, roll: {settle: 5s, timeout: 5m}}
expect:
  - {name: back, node: workers, eventually: Ready}
",
        Path::new("roll.yaml"),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let targets = BTreeMap::from([(
        "workers".to_string(),
        vec!["w3".into(), "w1".into(), "w2".into()],
    )]);
    crate::experiment::roll::expand(&exp, &targets).0
}

pub(crate) fn push(t: &mut Timeline, offset_ms: i64, event: Event) {
    t.entries.push(Entry {
        offset_ms,
        wall: Utc::now(),
        event,
    });
    t.entries.sort_by_key(|e| e.offset_ms);
}

pub(crate) fn node(t: &mut Timeline, at: i64, name: &str, ready: ConditionStatus, cordoned: bool) {
    push(
        t,
        at,
        Event::Node {
            name: name.into(),
            before: None,
            after: Some(NodeState {
                ready,
                ready_since: None,
                taints: Vec::new(),
                unschedulable: cordoned,
                zone: None,
                shutting_down: false,
            }),
        },
    );
}

pub(crate) fn issued(t: &mut Timeline, at: i64, step: &str, node: &str) {
    push(
        t,
        at,
        Event::Step {
            step: step.into(),
            action: "reboot".into(),
            node: Some(node.into()),
            phase: StepPhase::Issued,
        },
    );
}

pub(crate) fn probe(t: &mut Timeline, at: i64, up: bool) {
    probe_counted(t, at, up, None);
}

/// A change of the probe `web` carrying its count of failed tries so far.
fn probe_counted(t: &mut Timeline, at: i64, up: bool, failed: Option<u64>) {
    push(
        t,
        at,
        Event::Probe {
            name: "web".into(),
            up,
            detail: String::new(),
            failed,
        },
    );
}

/// Each node rebooted in turn: NotReady 20 s after its step, Ready again `back` s after
/// it; the next node's step 5 s after that. `w2` is the slow one when `back[1]` is larger.
/// The probe `web` is down from 21 s to 23 s after each step.
pub(crate) fn roll_timeline(back: [i64; 3]) -> Timeline {
    let mut t = Timeline::new(Utc::now());
    for n in ["w1", "w2", "w3"] {
        node(&mut t, 0, n, ConditionStatus::True, false);
    }
    probe(&mut t, 0, true);
    let mut at = 1_000;
    for (i, n) in ["w1", "w2", "w3"].into_iter().enumerate() {
        issued(&mut t, at, &format!("roll reboots ({n})"), n);
        node(&mut t, at + 20_000, n, ConditionStatus::Unknown, false);
        probe(&mut t, at + 21_000, false);
        probe(&mut t, at + 23_000, true);
        node(&mut t, at + back[i] * 1000, n, ConditionStatus::True, false);
        at += back[i] * 1000 + 5_000;
    }
    push(
        &mut t,
        at + 30_000,
        Event::Note {
            message: "end".into(),
        },
    );
    t
}

#[test]
fn a_roll_member_is_known_by_its_step_and_its_target() {
    let exp = rolled();
    let members: Vec<_> = exp.steps.iter().filter_map(roll_member).collect();
    assert_eq!(
        members,
        [
            ("roll reboots", vec!["w1"]),
            ("roll reboots", vec!["w2"]),
            ("roll reboots", vec!["w3"])
        ]
    );
    // A batch of two, and a sequence's action of it.
    let mut batch = exp.steps[0].clone();
    batch.name = "roll reboots (w1, w2)".into();
    batch.target = Some("workers@w1,w2".into());
    assert_eq!(
        roll_member(&batch),
        Some(("roll reboots", vec!["w1", "w2"]))
    );
    batch.name = "roll reboots (w1, w2) drain".into();
    assert_eq!(
        roll_member(&batch),
        Some(("roll reboots", vec!["w1", "w2"]))
    );
    batch.name = "roll reboots (w1, w2)x".into();
    assert_eq!(roll_member(&batch), None);
    // A step named like a member on a target of another node, or on an ordinary target,
    // is not one.
    let mut other = exp.steps[0].clone();
    other.target = Some("workers@w2".into());
    assert_eq!(roll_member(&other), None);
    other.target = Some("workers".into());
    assert_eq!(roll_member(&other), None);
}

#[test]
fn each_node_is_measured_from_its_own_step_and_the_slow_one_shows() {
    let exp = rolled();
    let rolls = roll_figures(&exp, &roll_timeline([40, 95, 42]));
    assert_eq!(rolls.len(), 1);
    let r = &rolls[0];
    assert_eq!(r.roll, "roll reboots");
    assert_eq!(r.timeout_ms, Some(300_000));
    let names: Vec<&str> = r.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(names, ["w1", "w2", "w3"]);
    let back: Vec<Option<i64>> = r.nodes.iter().map(|n| n.ready_again_ms).collect();
    assert_eq!(back, [Some(40_000), Some(95_000), Some(42_000)]);
    for n in &r.nodes {
        assert_eq!(n.not_ready_ms, Some(20_000), "{n:?}");
        assert_eq!(n.drained_ms, None, "a reboot does not cordon");
        assert_eq!(n.back_in_time(r.timeout_ms), Some(true));
    }
    assert_eq!(r.nodes[1].issued_ms, Some(1_000 + 45_000));
    assert_eq!(r.nodes[1].step, "roll reboots (w2)");
    // The probe's three outages of 2 s each, over the whole roll.
    assert_eq!(r.probes.len(), 1);
    let p = &r.probes[0];
    assert_eq!((p.outages, p.downtime_ms, p.longest_ms), (3, 6_000, 2_000));
    assert!(!p.down_at_end);
    assert_eq!(r.from_ms, Some(1_000));
    assert_eq!(r.until_ms, Some(1_000 + 45_000 + 100_000 + 42_000));
}

#[test]
fn a_node_not_back_in_time_fails_and_one_never_down_stayed_ready() {
    let exp = rolled();
    // w2 back only after 6 minutes: past the roll's 5 m.
    let rolls = roll_figures(&exp, &roll_timeline([40, 360, 42]));
    let r = &rolls[0];
    assert_eq!(r.nodes[1].back_in_time(r.timeout_ms), Some(false));
    assert_eq!(r.nodes[0].back_in_time(r.timeout_ms), Some(true));

    // w1 never seen NotReady: it stayed Ready; w3 never issued.
    let mut t = Timeline::new(Utc::now());
    for n in ["w1", "w2", "w3"] {
        node(&mut t, 0, n, ConditionStatus::True, false);
    }
    issued(&mut t, 1_000, "roll reboots (w1)", "w1");
    issued(&mut t, 30_000, "roll reboots (w2)", "w2");
    node(&mut t, 31_000, "w2", ConditionStatus::True, true);
    node(&mut t, 50_000, "w2", ConditionStatus::False, true);
    push(
        &mut t,
        90_000,
        Event::Note {
            message: "end".into(),
        },
    );
    let r = &roll_figures(&exp, &t)[0];
    assert!(r.nodes[0].stayed_ready);
    assert_eq!(r.nodes[0].not_ready_ms, None);
    assert_eq!(r.nodes[0].back_in_time(r.timeout_ms), Some(true));
    assert_eq!(
        r.nodes[1].drained_ms,
        Some(1_000),
        "cordoned 1 s after its step"
    );
    assert_eq!(r.nodes[1].ready_again_ms, None);
    assert_eq!(
        r.nodes[1].back_in_time(r.timeout_ms),
        None,
        "watched 60 s of its 5 m: not decided"
    );
    push(
        &mut t,
        400_000,
        Event::Note {
            message: "end".into(),
        },
    );
    let r = &roll_figures(&exp, &t)[0];
    assert_eq!(r.nodes[1].watched_ms, Some(370_000));
    assert_eq!(
        r.nodes[1].back_in_time(r.timeout_ms),
        Some(false),
        "not back in 5 m"
    );
    assert_eq!(r.nodes[2].issued_ms, None);
    assert_eq!(r.nodes[2].back_in_time(r.timeout_ms), None);
    assert_eq!(r.until_ms, Some(400_000), "w2 never back: to the end");
}

#[test]
fn a_probe_down_at_the_end_counts_to_where_observation_ended() {
    let exp = rolled();
    let mut t = roll_timeline([40, 40, 40]);
    let end = t.end_ms();
    probe(&mut t, end - 10_000, false);
    let r = &roll_figures(&exp, &t)[0];
    let p = &r.probes[0];
    // Past the roll's window (which ends when w3 is back): not counted.
    assert_eq!(p.outages, 3);
    let mut t = roll_timeline([40, 40, 40]);
    // Down from w3's step to the end.
    let w3 = t.step_issued_ms("roll reboots (w3)").expect("w3");
    t.entries
        .retain(|e| !(matches!(e.event, Event::Probe { up: true, .. }) && e.offset_ms > w3));
    let r = &roll_figures(&exp, &t)[0];
    let p = &r.probes[0];
    assert!(p.down_at_end);
    assert_eq!(p.outages, 3);
    assert_eq!(p.longest_ms, t.end_ms() - (w3 + 21_000));
}

#[test]
fn an_experiment_without_a_roll_has_no_roll_figures() {
    let mut exp = rolled();
    for s in &mut exp.steps {
        s.target = Some("workers".into());
    }
    assert!(roll_figures(&exp, &roll_timeline([40, 40, 40])).is_empty());
}

/// Issue 46, item 4: the failed requests over a roll are the probe's own counts at its
/// changes: each outage's count where it ended less where it began, plus its first try.
/// One still under way when observation ended counts its first try only (a floor). A
/// record whose probe entries carry no count has none (the existing roll above).
#[test]
fn failed_requests_over_the_roll_come_from_the_probe_s_counts() {
    let exp = rolled();
    let counted = |open_at_end: bool| {
        let mut t = roll_timeline([40, 40, 40]);
        t.entries
            .retain(|e| !matches!(e.event, Event::Probe { .. }));
        probe_counted(&mut t, 0, true, Some(0));
        let mut failed = 0;
        let mut at = 1_000;
        for i in 0..3 {
            failed += 1;
            probe_counted(&mut t, at + 21_000, false, Some(failed));
            failed += 2;
            if !(open_at_end && i == 2) {
                probe_counted(&mut t, at + 24_000, true, Some(failed));
            }
            at += 45_000;
        }
        roll_figures(&exp, &t).remove(0).probes.remove(0)
    };
    let closed = counted(false);
    assert_eq!((closed.outages, closed.failed_requests), (3, Some(9)));
    let open = counted(true);
    assert!(open.down_at_end);
    assert_eq!(open.failed_requests, Some(3 + 3 + 1));
    let old = roll_figures(&exp, &roll_timeline([40, 40, 40])).remove(0);
    assert_eq!(old.probes[0].failed_requests, None);
}
