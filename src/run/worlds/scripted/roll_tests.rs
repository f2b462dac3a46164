//! A rolling step on a paused clock, expanded as a run expands it once its target is
//! resolved (`experiment::roll`): the next node's fault is not issued before the node
//! before it is seen back, and a node that never comes back stops the roll at its
//! `timeout`, the next node untouched and what was done undone.

use super::*;

/// Three workers `a`, `b`, `c`, every one rolled through by `do` with `roll`, one node
/// down at a time; when `held`, a kubelet stop on `other` first (undone at the end of the run),
/// and one more node allowed down for it.
fn rolled(action: &str, roll: &str, held: bool) -> Harness {
    let (first, limit) = if held {
        (
            "  - {name: stop other, at: 0s, do: kubelet-stop, target: other}\n",
            2,
        )
    } else {
        ("", 1)
    };
    let mut h = Harness::new(&format!(
        "
name: scripted
description: a scripted roll
targets:
  workers: {{names: [a, b, c]}}
  other: {{names: [z]}}
safety: {{maxNodesDown: {limit}}}
steps:
{first}  - {{name: roll, at: 10s, do: {action}, target: workers, roll: {roll}}}
expect:
  - {{name: back, node: workers, eventually: Ready}}
"
    ))
    .with_targets(&[("workers", &["c", "a", "b"]), ("other", &["z"])]);
    let (exp, targets) = crate::experiment::roll::expand(&h.exp, &h.targets);
    h.exp = exp;
    h.targets = targets;
    h
}

fn all_ready() -> Vec<Event> {
    ["a", "b", "c", "z"]
        .iter()
        .map(|n| node(n, ConditionStatus::True, 0))
        .collect()
}

/// Offset of step `name`'s issue from the start, if it was issued.
fn issued(h: &Harness, out: &LoopOutcome, name: &str) -> Option<i64> {
    let i = h.exp.steps.iter().position(|s| s.name == name)?;
    Some(out.issued_ms[i]? - out.start_ms?)
}

#[tokio::test(start_paused = true)]
async fn each_node_is_rebooted_only_once_the_one_before_is_back() {
    let h = rolled("reboot", "{settle: 5s, timeout: 5m}", false);
    let names: Vec<&str> = h.exp.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["roll (a)", "roll (b)", "roll (c)"]);
    let mut world = Scripted {
        initial: all_ready(),
        // Each reboot takes its node out: seen unreachable, then Ready again 60 s later.
        later: vec![
            (20_000, node("a", ConditionStatus::Unknown, 20)),
            (80_000, node("a", ConditionStatus::True, 80)),
            (100_000, node("b", ConditionStatus::Unknown, 100)),
            (150_000, node("b", ConditionStatus::True, 150)),
        ],
        ..Scripted::default()
    };
    let (out, _) = h.run_kept(&mut world).await;
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let a = issued(&h, &out, "roll (a)").expect("a rebooted");
    let b = issued(&h, &out, "roll (b)").expect("b rebooted");
    let c = issued(&h, &out, "roll (c)").expect("c rebooted");
    assert!((10_000..11_000).contains(&a), "a at +{a} ms");
    // Not before a is seen Ready again at +80 s (the interlock holds it until then), and
    // then its settle time (5 s) later.
    assert!((85_000..88_000).contains(&b), "b at +{b} ms");
    assert!((155_000..158_000).contains(&c), "c at +{c} ms");
    let calls = world.calls();
    let order: Vec<&String> = calls.iter().filter(|c| c.starts_with("act roll")).collect();
    assert_eq!(
        order,
        [
            "act roll (a) on a",
            "act roll (b) on b",
            "act roll (c) on c"
        ],
        "{calls:#?}"
    );
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_node_that_never_comes_back_stops_the_roll_and_the_run_undoes() {
    let h = rolled("reboot", "{settle: 5s, timeout: 2m}", true);
    let mut world = Scripted {
        initial: all_ready(),
        // a goes down for good after its reboot.
        later: vec![(20_000, node("a", ConditionStatus::Unknown, 20))],
        ..Scripted::default()
    };
    let (out, _) = h.run_kept(&mut world).await;
    let Some(End::Interlocked(refusal)) = &out.end else {
        panic!("{:?} {:?}", out.end, out.errors)
    };
    assert_eq!(refusal.step, "roll (b)");
    // Due at +15 s (a's stale Ready + settle); waits the roll's timeout from then.
    assert!(
        (120_000..122_000).contains(&refusal.waited_ms),
        "{refusal:?}"
    );
    let text = out.errors.join("\n");
    assert!(
        text.contains("step `roll (b)` waited 120s for nodes to come back and was not run"),
        "{text}"
    );
    assert!(
        text.contains("a (seen unreachable, Ready=Unknown)"),
        "{text}"
    );
    assert_eq!(issued(&h, &out, "roll (b)"), None, "b never taken down");
    assert_eq!(issued(&h, &out, "roll (c)"), None, "c never taken down");
    let calls = world.calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("act roll (b)") || c.starts_with("act roll (c)")),
        "{calls:#?}"
    );
    // What the run did before the roll is undone.
    assert!(
        index_of(&calls, "act stop other on z") < index_of(&calls, "act undo stop other on z"),
        "{calls:#?}"
    );
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_roll_that_takes_no_node_down_waits_for_ready_and_its_deadline() {
    // A kubelet restart does not count as down: the gate alone holds the next node,
    // until the node before is Ready; one still NotReady at the deadline stops the run.
    let h = rolled("kubelet-restart", "{settle: 10s, timeout: 1m}", false);
    let mut world = Scripted {
        initial: vec![
            node("a", ConditionStatus::False, 0),
            node("b", ConditionStatus::True, 0),
            node("c", ConditionStatus::True, 0),
            node("z", ConditionStatus::True, 0),
        ],
        later: vec![(40_000, node("a", ConditionStatus::True, 40))],
        ..Scripted::default()
    };
    let (out, _) = h.run_kept(&mut world).await;
    let b = issued(&h, &out, "roll (b)");
    // a Ready at +40 s, then 10 s of settle.
    assert!(
        b.is_some_and(|b| (50_000..52_000).contains(&b)),
        "b at {b:?}, {:?}",
        out.errors
    );

    let h = rolled("kubelet-restart", "{settle: 10s, timeout: 1m}", false);
    let mut world = Scripted {
        initial: vec![
            node("a", ConditionStatus::False, 0),
            node("b", ConditionStatus::True, 0),
            node("c", ConditionStatus::True, 0),
            node("z", ConditionStatus::True, 0),
        ],
        ..Scripted::default()
    };
    let (out, _) = h.run_kept(&mut world).await;
    assert_eq!(issued(&h, &out, "roll (b)"), None, "{:?}", out.errors);
    assert!(
        out.errors.iter().any(|e| e.contains("roll (b)")),
        "{:?}",
        out.errors
    );
    assert!(!world.calls().iter().any(|c| c.starts_with("act roll (b)")));
}

/// A reboot quicker than the grace period is never seen NotReady: the gate is met at once
/// by the node's Ready from before, and the interlock holds the next node until the node
/// is back (its kubelet renewed twice), then the settle time more.
#[tokio::test(start_paused = true)]
async fn settle_counts_from_the_return_of_a_reboot_never_seen_not_ready() {
    let h = rolled("reboot", "{settle: 5s, timeout: 5m}", false);
    let mut world = Scripted {
        initial: all_ready(),
        heartbeat_every: Some(Duration::from_secs(10)),
        ..Scripted::default()
    };
    let (out, timeline) = h.run_kept(&mut world).await;
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let b = issued(&h, &out, "roll (b)").expect("b rebooted");
    // a rebooted at +10 s, its stale Ready + 5 s due at +15 s, renewals at +20 s and
    // +30 s: back at +30 s (asked every 2 s), then 5 s.
    assert!((35_000..39_000).contains(&b), "b at +{b} ms");
    let notes: Vec<&String> = timeline
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Note { message } if message.contains("fits the interlock") => Some(message),
            _ => None,
        })
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with("step `roll (b)` fits")
            && n.ends_with("issued 5s later (its `delay`)")),
        "{notes:#?}"
    );
    // The live view is told it is due then, no longer waiting for the node.
    let due: Vec<i64> = timeline
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Schedule {
                step,
                due_ms: Some(due),
                ..
            } if step == "roll (b)" => Some(*due),
            _ => None,
        })
        .collect();
    assert_eq!(
        due.last().map(|d| d - out.start_ms.unwrap_or_default()),
        Some(b),
        "{due:?}"
    );
}

/// The run's per-node roll figures: each node measured from its own step, the slower node
/// showing its slower return, and the same figures a report computes again from the
/// record's timeline (what `rehearse` and a re-render see).
#[tokio::test(start_paused = true)]
async fn the_run_measures_each_node_of_the_roll_from_its_own_step() {
    let h = rolled("reboot", "{settle: 5s, timeout: 5m}", false);
    let mut world = Scripted {
        initial: all_ready(),
        // a back 60 s after going down, b 110 s after, c 10 s after (within the 20 s
        // observation goes on after its step).
        later: vec![
            (20_000, node("a", ConditionStatus::Unknown, 20)),
            (80_000, node("a", ConditionStatus::True, 80)),
            (100_000, node("b", ConditionStatus::Unknown, 100)),
            (210_000, node("b", ConditionStatus::True, 210)),
            (222_000, node("c", ConditionStatus::Unknown, 222)),
            (232_000, node("c", ConditionStatus::True, 232)),
        ],
        ..Scripted::default()
    };
    let (out, timeline) = h.run_kept(&mut world).await;
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.rolls.len(), 1, "{:?}", out.rolls);
    let roll = &out.rolls[0];
    assert_eq!(roll.roll, "roll");
    let nodes: Vec<&str> = roll.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(nodes, ["a", "b", "c"]);
    let down: Vec<i64> = roll.nodes[..2]
        .iter()
        .map(|n| n.ready_again_ms.expect("back") - n.not_ready_ms.expect("down"))
        .collect();
    assert_eq!(down, [60_000, 110_000]);
    // The expectation was decided before c's step: observation still waited for c, the
    // roll's last node, to be back, and ended then.
    let c = &roll.nodes[2];
    let c_issued = c.issued_ms.expect("c issued");
    assert_eq!(
        c.ready_again_ms.map(|ms| ms + c_issued),
        Some(232_000),
        "{c:?}"
    );
    assert_eq!(c.back_in_time(roll.timeout_ms), Some(true));
    assert_eq!(out.end, Some(End::Observed { all_decided: true }));
    let until = out.observed_until.expect("observed");
    assert!((232_000..233_000).contains(&until), "ended at {until}");
    let slowest = roll
        .nodes
        .iter()
        .max_by_key(|n| n.ready_again_ms)
        .expect("nodes");
    assert_eq!(slowest.node, "b");
    assert_eq!(
        out.rolls,
        crate::judge::roll_figures(&h.exp, &timeline.until(until))
    );
}

/// Two at a time: both nodes of a batch rebooted at once, the next batch once the slower
/// of the two is seen back, then its settle time.
#[tokio::test(start_paused = true)]
async fn a_batch_goes_down_together_and_the_next_waits_for_the_slowest_of_it() {
    let mut h = Harness::new(
        "
name: scripted
description: a scripted roll, two at a time
targets:
  workers: {names: [a, b, c]}
safety: {maxNodesDown: 2}
steps:
  - {name: roll, at: 10s, do: reboot, target: workers, roll: {maxUnavailable: 2, settle: 5s, timeout: 5m}}
expect:
  - {name: back, node: workers, eventually: Ready}
",
    )
    .with_targets(&[("workers", &["c", "a", "b"])]);
    let (exp, targets) = crate::experiment::roll::expand(&h.exp, &h.targets);
    h.exp = exp;
    h.targets = targets;
    let names: Vec<&str> = h.exp.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["roll (a, b)", "roll (c)"]);
    let mut world = Scripted {
        initial: ["a", "b", "c"]
            .iter()
            .map(|n| node(n, ConditionStatus::True, 0))
            .collect(),
        later: vec![
            (20_000, node("a", ConditionStatus::Unknown, 20)),
            (20_000, node("b", ConditionStatus::Unknown, 20)),
            (60_000, node("a", ConditionStatus::True, 60)),
            (90_000, node("b", ConditionStatus::True, 90)),
        ],
        ..Scripted::default()
    };
    let (out, _) = h.run_kept(&mut world).await;
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let ab = issued(&h, &out, "roll (a, b)").expect("a and b rebooted");
    let c = issued(&h, &out, "roll (c)").expect("c rebooted");
    assert!((10_000..11_000).contains(&ab), "a, b at +{ab} ms");
    // Not when a is back (+60 s): when b is too (+90 s), and 5 s later.
    assert!((95_000..98_000).contains(&c), "c at +{c} ms");
    let calls = world.calls();
    let acts: Vec<&String> = calls.iter().filter(|c| c.starts_with("act roll")).collect();
    assert_eq!(acts.len(), 3, "{calls:#?}");
    assert!(index_of(&calls, "act roll (a, b) on a") < index_of(&calls, "act roll (c) on c"));
    assert!(index_of(&calls, "act roll (a, b) on b") < index_of(&calls, "act roll (c) on c"));
    assert_eq!(h.journaled(), 0);
    // The roll's figures: every node of the batch measured from the batch's step, each
    // back at its own time.
    let roll = out.rolls.first().expect("the roll's figures");
    let nodes: Vec<&str> = roll.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(nodes, ["a", "b", "c"]);
    assert_eq!(roll.nodes[0].issued_ms, roll.nodes[1].issued_ms);
    let back = |i: usize| {
        roll.nodes[i].ready_again_ms.expect("back") + roll.nodes[i].issued_ms.expect("issued")
    };
    assert_eq!((back(0), back(1)), (60_000, 90_000));
}

/// A sequence per node: drain, reboot, uncordon. The uncordon waits for the node to be
/// back from its reboot (not for its Ready from before it), the next node's drain for the
/// node before's uncordon, its Ready and the settle time.
#[tokio::test(start_paused = true)]
async fn a_sequence_does_each_action_in_turn_and_the_next_node_after_the_last() {
    let mut h = Harness::new(
        "
name: scripted
description: drain, reboot, uncordon each worker
targets:
  workers: {names: [a, b]}
steps:
  - name: upgrade
    at: 10s
    target: workers
    roll: {settle: 5s, timeout: 5m}
    sequence:
      - do: drain
      - do: reboot
      - do: uncordon
expect:
  - {name: back, node: workers, eventually: Ready}
",
    )
    .with_targets(&[("workers", &["b", "a"])]);
    let (exp, targets) = crate::experiment::roll::expand(&h.exp, &h.targets);
    h.exp = exp;
    h.targets = targets;
    let mut world = Scripted {
        initial: ["a", "b"]
            .iter()
            .map(|n| node(n, ConditionStatus::True, 0))
            .collect(),
        later: vec![
            (30_000, node("a", ConditionStatus::Unknown, 30)),
            (70_000, node("a", ConditionStatus::True, 70)),
            (90_000, node("b", ConditionStatus::Unknown, 90)),
            (130_000, node("b", ConditionStatus::True, 130)),
        ],
        ..Scripted::default()
    };
    let (out, _) = h.run_kept(&mut world).await;
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let at = |name: &str| issued(&h, &out, name).unwrap_or_else(|| panic!("{name} issued"));
    assert!((10_000..11_000).contains(&at("upgrade (a) drain")));
    assert!(
        at("upgrade (a) reboot") < 12_000,
        "{}",
        at("upgrade (a) reboot")
    );
    // Not at once on a's Ready from before its reboot: once a is back at +70 s.
    let uncordon = at("upgrade (a) uncordon");
    assert!(
        (70_000..73_000).contains(&uncordon),
        "uncordon a at +{uncordon} ms"
    );
    let b = at("upgrade (b) drain");
    assert!((75_000..79_000).contains(&b), "drain b at +{b} ms");
    let uncordon = at("upgrade (b) uncordon");
    assert!(
        (130_000..133_000).contains(&uncordon),
        "uncordon b at +{uncordon} ms"
    );
    let calls = world.calls();
    let order: Vec<&String> = calls
        .iter()
        .filter(|c| c.starts_with("act upgrade"))
        .collect();
    assert_eq!(
        order,
        [
            "act upgrade (a) drain on a",
            "act upgrade (a) reboot on a",
            "act upgrade (a) uncordon on a",
            "act upgrade (b) drain on b",
            "act upgrade (b) reboot on b",
            "act upgrade (b) uncordon on b",
        ],
        "{calls:#?}"
    );
}

/// Every expectation decided before the roll's last node: observation waits for that node
/// to be back, up to the roll's timeout from its step, or the planned end of observation,
/// whichever comes first; never for ever.
#[tokio::test(start_paused = true)]
async fn observation_waits_for_the_last_node_of_a_roll_up_to_its_timeout_or_its_end() {
    let world = || Scripted {
        initial: all_ready(),
        // a and b go down and come back; c, rebooted last, is never seen again.
        later: vec![
            (20_000, node("a", ConditionStatus::Unknown, 20)),
            (40_000, node("a", ConditionStatus::True, 40)),
            (50_000, node("b", ConditionStatus::Unknown, 50)),
            (70_000, node("b", ConditionStatus::True, 70)),
        ],
        ..Scripted::default()
    };
    // Planned end: 20 s after c's step (no `observe.for`); the roll's timeout is longer.
    let h = rolled("reboot", "{settle: 5s, timeout: 2m}", false);
    let (out, _) = h.run_kept(&mut world()).await;
    assert_eq!(
        out.end,
        Some(End::Observed { all_decided: true }),
        "{:?}",
        out.errors
    );
    let c = out.issued_ms[2].expect("c rebooted");
    let waited = out.observed_until.expect("observed") - c;
    assert!((20_000..21_000).contains(&waited), "waited {waited} ms");
    let last = &out.rolls[0].nodes[2];
    // Watched up to the end, not seen back (never seen down either: the figures' own
    // reading of that is `stayed_ready`, which the interlock does not take as back).
    assert_eq!((last.node.as_str(), last.ready_again_ms), ("c", None));
    assert_eq!(last.watched_ms, Some(waited), "{last:?}");

    // With a longer observation, the roll's timeout (30 s from c's step) ends it.
    let mut h = Harness::new(
        "
name: scripted
description: a scripted roll observed long
targets:
  workers: {names: [a, b, c]}
observe: {for: 5m}
steps:
  - {name: roll, at: 10s, do: reboot, target: workers, roll: {settle: 5s, timeout: 30s}}
expect:
  - {name: back, node: workers, eventually: Ready}
",
    )
    .with_targets(&[("workers", &["c", "a", "b"])]);
    let (exp, targets) = crate::experiment::roll::expand(&h.exp, &h.targets);
    h.exp = exp;
    h.targets = targets;
    let (out, _) = h.run_kept(&mut world()).await;
    assert_eq!(
        out.end,
        Some(End::Observed { all_decided: true }),
        "{:?}",
        out.errors
    );
    let c = out.issued_ms[2].expect("c rebooted");
    let waited = out.observed_until.expect("observed") - c;
    assert!((30_000..31_000).contains(&waited), "waited {waited} ms");
}

/// Cancelled while observation waits for the roll's last node to be back: the run ends
/// at once as cancelled, not when the node comes back or the wait runs out.
#[tokio::test(start_paused = true)]
async fn cancelled_while_waiting_for_the_last_node_of_a_roll_it_ends_at_once() {
    let world = || Scripted {
        initial: all_ready(),
        later: vec![
            (20_000, node("a", ConditionStatus::Unknown, 20)),
            (40_000, node("a", ConditionStatus::True, 40)),
            (50_000, node("b", ConditionStatus::Unknown, 50)),
            (70_000, node("b", ConditionStatus::True, 70)),
        ],
        ..Scripted::default()
    };
    let h = rolled("reboot", "{settle: 5s, timeout: 2m}", false);
    let (waiting, _) = h.run_kept(&mut world()).await;
    let c = waiting.issued_ms[2].expect("c rebooted");
    // Cancelled 5 s into the last node's wait (which would run 20 s).
    let at = u64::try_from(c / 1000 + 5).expect("positive");
    let out = h.run_cancelled_at(&mut world(), at).await;
    assert_eq!(out.end, Some(End::Cancelled), "{:?}", out.errors);
    let until = out.observed_until.expect("observed");
    assert!(
        until < c + 10_000,
        "observed until +{until} ms, c issued +{c} ms"
    );
    assert_eq!(h.journaled(), 0);
}

/// A last node rebooted quicker than the grace period is never seen NotReady: observation
/// ends once its new kubelet renewed its heartbeat (as the interlock counts it back), and
/// its figures say it stayed Ready.
#[tokio::test(start_paused = true)]
async fn observation_ends_once_a_last_node_never_seen_not_ready_is_back() {
    let h = rolled("reboot", "{settle: 5s, timeout: 5m}", false);
    let mut world = Scripted {
        initial: all_ready(),
        heartbeat_every: Some(Duration::from_secs(4)),
        ..Scripted::default()
    };
    let (out, _) = h.run_kept(&mut world).await;
    assert_eq!(
        out.end,
        Some(End::Observed { all_decided: true }),
        "{:?}",
        out.errors
    );
    let c = out.issued_ms[2].expect("c rebooted");
    // Two renewals 4 s apart: back 8 s after its step, seen within the 2 s it is asked.
    let waited = out.observed_until.expect("observed") - c;
    assert!((8_000..11_000).contains(&waited), "waited {waited} ms");
    let last = &out.rolls[0].nodes[2];
    assert_eq!(last.node, "c");
    assert!(last.stayed_ready, "{last:?}");
}
