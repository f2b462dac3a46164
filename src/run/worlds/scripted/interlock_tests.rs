//! The run-time interlock on a paused clock: a fault step due while another node is down
//! waits until that node is seen Ready, a step that never fits stops the run at its
//! deadline with everything undone, and a reboot or power-on counts as back only once the
//! node is seen turning Ready or its kubelet renewed its heartbeat twice after it, not
//! when its command returned.

use super::*;

/// Both nodes Ready from the start.
fn both_ready() -> Vec<Event> {
    vec![
        node("a", ConditionStatus::True, 0),
        node("b", ConditionStatus::True, 0),
    ]
}

fn two_workers(steps: &str) -> Harness {
    Harness::new(&format!(
        "
name: scripted
description: a scripted run
targets:
  first: {{names: [a]}}
  second: {{names: [b]}}
steps:
{steps}
expect:
  - {{name: b stays, node: second, never: Unknown}}
"
    ))
    .with_targets(&[("first", &["a"]), ("second", &["b"])])
}

/// The interlock events of `timeline`: (step, nodes down, deadline).
fn interlock_events(timeline: &Timeline) -> Vec<(String, Vec<String>, i64)> {
    timeline
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Interlock {
                step,
                down,
                deadline_ms,
                ..
            } => Some((
                step.clone(),
                down.iter().map(|d| d.node.clone()).collect(),
                *deadline_ms,
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_due_fault_waits_while_another_node_is_seen_down_and_goes_once_it_is_ready() {
    let h = two_workers(
        "  - {name: stop a, at: 10s, do: kubelet-stop, target: first}
  - {name: start a, at: 20s, do: kubelet-start, target: first}
  - {name: stop b, at: 30s, do: kubelet-stop, target: second, timeout: 120s}
  - {name: start b, after: stop b, delay: 10s, do: kubelet-start, target: second}",
    );
    let mut world = Scripted {
        initial: both_ready(),
        // a goes unreachable after its kubelet stopped, and is Ready again at +50 s,
        // well after its kubelet was started.
        later: vec![
            (15_000, node("a", ConditionStatus::Unknown, 15)),
            (50_000, node("a", ConditionStatus::True, 50)),
        ],
        ..Scripted::default()
    };
    let (out, timeline) = h.run_kept(&mut world).await;
    assert_eq!(out.end, Some(End::Observed { all_decided: false }));
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let stop_b = out.issued_ms[2].expect("stop b issued") - out.start_ms.unwrap();
    assert!(
        (50_000..52_000).contains(&stop_b),
        "stop b issued at +{stop_b} ms"
    );
    let waits = interlock_events(&timeline);
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert_eq!(waits[0].0, "stop b");
    assert_eq!(waits[0].1, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_fault_that_never_fits_stops_the_run_at_its_deadline_and_undoes() {
    let h = two_workers(
        "  - {name: stop a, at: 10s, do: kubelet-stop, target: first}
  - {name: stop b, at: 30s, do: kubelet-stop, target: second}
  - {name: start a, at: 900s, do: kubelet-start, target: first}",
    );
    let mut world = Scripted {
        initial: both_ready(),
        later: vec![(15_000, node("a", ConditionStatus::Unknown, 15))],
        ..Scripted::default()
    };
    let (out, timeline) = h.run_kept(&mut world).await;
    let Some(End::Interlocked(refusal)) = &out.end else {
        panic!("{:?}", out.end)
    };
    assert_eq!(refusal.step, "stop b");
    // A step at a fixed offset waits as long as a rebooted node may take: 10 min.
    assert!(
        (600_000..602_000).contains(&refusal.waited_ms),
        "{refusal:?}"
    );
    let text = out.errors.join("\n");
    assert!(
        text.starts_with(
            "step `stop b` waited 600s for nodes to come back and was not run: with its \
             nodes, 2 nodes would be down at once; the experiment allows 1 \
             (`safety.maxNodesDown`); down: a (seen unreachable, Ready=Unknown), b (this \
             step's)"
        ),
        "{text}"
    );
    assert_eq!(out.issued_ms[1], None, "stop b never ran");
    let calls = world.calls();
    assert!(!calls.iter().any(|c| c == "act stop b on b"), "{calls:#?}");
    assert!(
        index_of(&calls, "act stop a on a") < index_of(&calls, "act undo stop a on a"),
        "{calls:#?}"
    );
    assert_eq!(interlock_events(&timeline).len(), 1);
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_reboot_or_power_on_counts_as_back_once_seen_ready_not_when_it_returns() {
    // The observer never sees a NotReady: the reboot is quicker than the grace period,
    // and the power-off too short. The node is back once its Ready is posted anew.
    for first in [
        "  - {name: reboot a, at: 10s, do: reboot, target: first}",
        "  - {name: off a, at: 5s, do: power-off, target: first}
  - {name: on a, at: 10s, do: power-on, target: first}",
    ] {
        let h = two_workers(&format!(
            "{first}
  - {{name: stop b, at: 20s, do: kubelet-stop, target: second}}
  - {{name: start b, at: 90s, do: kubelet-start, target: second}}"
        ));
        let mut world = Scripted {
            initial: both_ready(),
            later: vec![(60_000, node("a", ConditionStatus::True, 60))],
            ..Scripted::default()
        };
        let (out, timeline) = h.run_kept(&mut world).await;
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        let stop_b =
            out.issued_ms[out.issued_ms.len() - 2].expect("stop b issued") - out.start_ms.unwrap();
        assert!(
            (60_000..62_000).contains(&stop_b),
            "{first}: stop b issued at +{stop_b} ms"
        );
        let waits = interlock_events(&timeline);
        assert_eq!(waits.len(), 1, "{waits:?}");
        assert_eq!(waits[0].1, vec!["a".to_string(), "b".to_string()]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_gated_step_waits_its_own_timeout_and_the_quorum_rule_holds_too() {
    // Three control-plane nodes, three allowed down: the second stop would take two of
    // them (the majority) while c1 is still unreachable. It is gated on c1 being
    // Unknown, so it waits its own timeout (60 s) from the moment it is due.
    let h = Harness::new(
        "
name: scripted
description: a scripted run
targets:
  one: {names: [c1]}
  two: {names: [c2]}
safety: {maxNodesDown: 3, allowControlPlane: true}
steps:
  - {name: stop c1, at: 10s, do: kubelet-stop, target: one}
  - {name: stop c2, when: {node: one, is: Unknown, since: stop c1}, delay: 5s, do: kubelet-stop, target: two, timeout: 60s}
  - {name: start c1, at: 300s, do: kubelet-start, target: one}
expect:
  - {name: c2 stays, node: two, never: Unknown}
",
    )
    .with_targets(&[("one", &["c1"]), ("two", &["c2"])])
    .with_control_plane(&["c1", "c2", "c3"]);
    let mut world = Scripted {
        initial: vec![
            node("c1", ConditionStatus::True, 0),
            node("c2", ConditionStatus::True, 0),
            node("c3", ConditionStatus::True, 0),
        ],
        later: vec![(20_000, node("c1", ConditionStatus::Unknown, 20))],
        ..Scripted::default()
    };
    let (out, _) = h.run_kept(&mut world).await;
    let Some(End::Interlocked(refusal)) = &out.end else {
        panic!("{:?}", out.end)
    };
    assert_eq!(refusal.step, "stop c2");
    assert!((60_000..62_000).contains(&refusal.waited_ms), "{refusal:?}");
    assert_eq!(
        refusal.rule,
        "2 of 3 control-plane nodes would be down at once, losing etcd quorum \
         (`safety.allowQuorumLoss`)"
    );
    let calls = world.calls();
    assert!(
        !calls.iter().any(|c| c == "act stop c2 on c2"),
        "{calls:#?}"
    );
    assert!(
        calls.iter().any(|c| c == "act undo stop c1 on c1"),
        "{calls:#?}"
    );
    assert_eq!(h.journaled(), 0);
}

/// On kind a 6 s reboot was never seen NotReady and its new kubelet kept the Ready
/// condition's transition time: the second reboot of a roll waited its whole deadline.
/// A returning node seen Ready whose heartbeat renewed twice since its command finished
/// is back.
#[tokio::test(start_paused = true)]
async fn a_reboot_never_seen_not_ready_is_back_once_its_kubelet_renewed_twice() {
    let steps = "  - {name: reboot a, at: 10s, do: reboot, target: first}
  - {name: reboot b, at: 20s, do: reboot, target: second}";
    let h = two_workers(steps);
    let mut world = Scripted {
        initial: both_ready(),
        heartbeat_every: Some(Duration::from_secs(10)),
        ..Scripted::default()
    };
    let (out, timeline) = h.run_kept(&mut world).await;
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let reboot_b = out.issued_ms[1].expect("reboot b issued") - out.start_ms.unwrap();
    // Renewals at +20 s and +30 s after the reboot returned at +10 s; asked every 2 s.
    assert!(
        (30_000..33_000).contains(&reboot_b),
        "reboot b issued at +{reboot_b} ms"
    );
    assert_eq!(interlock_events(&timeline).len(), 1);
    assert!(world.calls().iter().any(|c| c == "renewals a"));

    // A world that cannot tell: the node is never seen back, the step waits its deadline.
    let h = two_workers(steps);
    let mut world = Scripted {
        initial: both_ready(),
        ..Scripted::default()
    };
    let (out, _) = h.run_kept(&mut world).await;
    assert!(
        out.errors
            .iter()
            .any(|e| e.contains("step `reboot b` waited")),
        "{:?}",
        out.errors
    );
}

/// A drained node rebooted (a roll's sequence) still counts down for its drain once back
/// from the reboot, until it is uncordoned: a fault due in between is held (and here,
/// where the uncordon comes after it, never fits: the run stops, as any held step past
/// its deadline does, rather than take a second node down).
#[tokio::test(start_paused = true)]
async fn a_drained_node_back_from_its_reboot_still_counts_down_until_uncordoned() {
    let h = two_workers(
        "  - {name: drain a, at: 10s, do: drain, target: first}
  - {name: reboot a, after: drain a, do: reboot, target: first}
  - {name: stop b, at: 70s, do: kubelet-stop, target: second, timeout: 120s}
  - {name: uncordon a, at: 90s, do: uncordon, target: first}",
    );
    let mut world = Scripted {
        initial: both_ready(),
        later: vec![
            (20_000, node("a", ConditionStatus::Unknown, 20)),
            (60_000, node("a", ConditionStatus::True, 60)),
        ],
        ..Scripted::default()
    };
    let (out, _) = h.run_kept(&mut world).await;
    let Some(End::Interlocked(refusal)) = &out.end else {
        panic!("{:?} {:?}", out.end, out.errors)
    };
    assert_eq!(refusal.step, "stop b");
    let down: Vec<String> = refusal
        .down
        .iter()
        .map(|d| format!("{} ({})", d.node, d.why))
        .collect();
    assert!(
        down.iter()
            .any(|d| d.starts_with("a (drain `drain a` issued at +10.0s, not undone")),
        "{down:?}"
    );
    assert_eq!(out.issued_ms[2], None, "b never stopped");
}
