//! The interlocks on hand-made plans: nodes down at once over time (file order and time
//! order, reboots, power-on, evicting taints, worst-case waits), control-plane quorum,
//! targets that name their nodes, the offline checks and the allow-listed contexts.

use super::*;
use crate::experiment::model::*;
use std::path::PathBuf;
use std::time::Duration;

fn step(name: &str, action: Action, target: &str) -> Step {
    Step {
        name: name.into(),
        at: StepTime::Offset(Bound::fixed(Duration::ZERO)),
        action,
        target: Some(target.into()),
        timeout: Duration::from_secs(60),
        roll: None,
    }
}

fn experiment(steps: Vec<Step>, safety: SafetySpec) -> Experiment {
    Experiment {
        conformance: false,
        name: "x".into(),
        description: String::new(),
        tags: Vec::new(),
        requires: Vec::new(),
        source: PathBuf::from("x.yaml"),
        namespace: "default".into(),
        targets: Vec::new(),
        setup: Setup::default(),
        teardown: Teardown::default(),
        steps,
        expectations: Vec::new(),
        probes: Vec::new(),
        abort: Default::default(),
        observe: ObserveSpec {
            after_last_step: None,
            namespaces: Vec::new(),
            all_namespaces: false,
        },
        safety,
    }
}

fn targets(pairs: &[(&str, &[&str])]) -> ResolvedTargets {
    pairs
        .iter()
        .map(|(t, nodes)| (t.to_string(), nodes.iter().map(|n| n.to_string()).collect()))
        .collect()
}

fn cp(nodes: &[&str]) -> BTreeSet<String> {
    nodes.iter().map(|n| n.to_string()).collect()
}

#[test]
fn two_nodes_down_at_once_needs_permission() {
    let steps = vec![
        step("a", Action::KubeletStop, "one"),
        step("b", Action::PowerOff, "two"),
    ];
    let t = targets(&[("one", &["w1"]), ("two", &["w2"])]);
    let err = check(
        &experiment(steps.clone(), SafetySpec::default()),
        &t,
        &cp(&[]),
    );
    assert!(
        matches!(
            err,
            Err(SafetyError::TooManyNodesDown {
                down: 2,
                limit: 1,
                ..
            })
        ),
        "{err:?}"
    );
    let allowed = SafetySpec {
        max_nodes_down: Some(2),
        ..SafetySpec::default()
    };
    assert_eq!(check(&experiment(steps, allowed), &t, &cp(&[])), Ok(()));
}

#[test]
fn a_node_brought_back_no_longer_counts() {
    let steps = vec![
        step("a", Action::KubeletStop, "one"),
        step("a2", Action::KubeletStart, "one"),
        step("b", Action::Partition, "two"),
    ];
    let t = targets(&[("one", &["w1"]), ("two", &["w2"])]);
    assert_eq!(
        check(&experiment(steps, SafetySpec::default()), &t, &cp(&[])),
        Ok(())
    );
}

#[test]
fn control_plane_needs_permission_and_never_loses_quorum_by_default() {
    let steps = vec![step("a", Action::KubeletStop, "cp")];
    let t = targets(&[("cp", &["c1"])]);
    let three = cp(&["c1", "c2", "c3"]);
    let err = check(
        &experiment(steps.clone(), SafetySpec::default()),
        &t,
        &three,
    );
    assert!(
        matches!(err, Err(SafetyError::ControlPlaneNotAllowed { .. })),
        "{err:?}"
    );
    let allow = SafetySpec {
        allow_control_plane: true,
        ..SafetySpec::default()
    };
    assert_eq!(
        check(&experiment(steps.clone(), allow.clone()), &t, &three),
        Ok(())
    );
    // The only control-plane node: taking it down loses the majority.
    let one = cp(&["c1"]);
    let err = check(&experiment(steps.clone(), allow.clone()), &t, &one);
    assert!(
        matches!(
            err,
            Err(SafetyError::QuorumLoss {
                down: 1,
                total: 1,
                ..
            })
        ),
        "{err:?}"
    );
    let quorum = SafetySpec {
        allow_quorum_loss: true,
        ..allow
    };
    assert_eq!(check(&experiment(steps, quorum), &t, &one), Ok(()));
}

/// The interlocks as a run and `plan` call them, with the upstream default timers.
fn check(
    exp: &Experiment,
    targets: &ResolvedTargets,
    control_plane: &BTreeSet<String>,
) -> Result<(), SafetyError> {
    check_blast_radius(exp, targets, control_plane, &ClusterTimers::default())
}

/// A step at a fixed offset, in seconds, whose action may take a minute.
fn at(name: &str, secs: u64, action: Action, target: &str) -> Step {
    Step {
        at: StepTime::Offset(Bound::fixed(Duration::from_secs(secs))),
        ..step(name, action, target)
    }
}

/// A step `delay` seconds after `after` finished.
fn after(name: &str, after: &str, delay: u64, action: Action, target: &str) -> Step {
    Step {
        at: StepTime::AfterStep {
            step: after.into(),
            delay: Bound::fixed(Duration::from_secs(delay)),
        },
        ..step(name, action, target)
    }
}

/// A step `delay` seconds after node target `node` is seen in `state`, judged from
/// the issue of `since`; it gives up after its timeout (`timeout` seconds).
fn when(
    name: &str,
    (node, state): (&str, NodeStateMatch),
    since: &str,
    (delay, timeout): (u64, u64),
    action: Action,
    target: &str,
) -> Step {
    Step {
        at: StepTime::When {
            subject: Subject::Node {
                target: node.into(),
            },
            state: StateMatch::Node(state),
            delay: Bound::fixed(Duration::from_secs(delay)),
            since: Some(since.into()),
        },
        timeout: Duration::from_secs(timeout),
        ..step(name, action, target)
    }
}

/// Targets `a`, `b` (and `c`) of one node each, with the node's name.
fn one_node_each() -> ResolvedTargets {
    targets(&[("a", &["a"]), ("b", &["b"]), ("c", &["c"])])
}

fn refusal(steps: Vec<Step>, safety: SafetySpec, control_plane: &[&str]) -> String {
    match check(
        &experiment(steps, safety),
        &one_node_each(),
        &cp(control_plane),
    ) {
        Ok(()) => panic!("the plan passed the interlocks"),
        Err(e) => e.to_string(),
    }
}

fn passes(steps: Vec<Step>, safety: SafetySpec, control_plane: &[&str]) {
    let result = check(
        &experiment(steps, safety),
        &one_node_each(),
        &cp(control_plane),
    );
    assert_eq!(result, Ok(()));
}

#[test]
fn written_node_by_node_the_outages_still_overlap_in_time() {
    // The example: a is down from 0 s to 5 min, b from 1 min on.
    let text = refusal(
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            at("start a", 300, Action::KubeletStart, "a"),
            at("stop b", 60, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
    assert!(
        text.starts_with(
            "steps `stop a` and `stop b` would have 2 nodes down at once (a, b) \
             from +60.0s to +300.0s; the experiment allows 1."
        ),
        "{text}"
    );
    assert!(text.contains("`safety.maxNodesDown`"), "{text}");
}

#[test]
fn the_labs_overlap_is_refused_in_file_order_and_in_time_order() {
    // Tried on the lab: a down 0-60 s, b down 20-80 s; both stopped from +20 s to +60 s.
    let node_by_node = vec![
        at("stop a", 0, Action::KubeletStop, "a"),
        at("start a", 60, Action::KubeletStart, "a"),
        at("stop b", 20, Action::KubeletStop, "b"),
        at("start b", 80, Action::KubeletStart, "b"),
    ];
    let in_time_order = vec![
        at("stop a", 0, Action::KubeletStop, "a"),
        at("stop b", 20, Action::KubeletStop, "b"),
        at("start a", 60, Action::KubeletStart, "a"),
        at("start b", 80, Action::KubeletStart, "b"),
    ];
    for steps in [node_by_node, in_time_order] {
        let text = refusal(steps, SafetySpec::default(), &[]);
        assert!(
            text.starts_with(
                "steps `stop a` and `stop b` would have 2 nodes down at once (a, b) \
                 from +20.0s to +60.0s;"
            ),
            "{text}"
        );
    }
}

#[test]
fn outages_one_after_the_other_pass_in_any_written_order() {
    let a = [
        at("stop a", 0, Action::KubeletStop, "a"),
        at("start a", 60, Action::KubeletStart, "a"),
    ];
    let b = [
        at("stop b", 90, Action::PowerOff, "b"),
        at("start b", 150, Action::PowerOn, "b"),
    ];
    let orders = [
        [&a[0], &a[1], &b[0], &b[1]],
        [&b[0], &b[1], &a[0], &a[1]],
        [&a[0], &b[0], &a[1], &b[1]],
        [&b[0], &a[0], &b[1], &a[1]],
    ];
    for order in orders {
        passes(
            order.into_iter().cloned().collect(),
            SafetySpec::default(),
            &[],
        );
    }
}

#[test]
fn a_reboot_counts_as_down_until_faultline_stops_waiting_for_the_node() {
    // The reboot's timeout is 60 s, and the node has 10 min more to answer again.
    let text = refusal(
        vec![
            at("reboot a", 0, Action::Reboot, "a"),
            at("stop b", 300, Action::KubeletStop, "b"),
            at("start b", 360, Action::KubeletStart, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
    assert!(
        text.starts_with(
            "steps `reboot a` and `stop b` would have 2 nodes down at once (a, b) \
             from +300.0s to +360.0s;"
        ),
        "{text}"
    );
    assert!(text.contains("A reboot counts as down"), "{text}");
    passes(
        vec![
            at("reboot a", 0, Action::Reboot, "a"),
            at("stop b", 661, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
}

#[test]
fn a_node_powered_on_counts_as_down_until_it_has_had_time_to_boot() {
    // Power-on at +60 s (timeout 60 s): a boots until +60 + 60 + 600 s.
    let steps = |stop_b: u64| {
        vec![
            at("off a", 0, Action::PowerOff, "a"),
            at("on a", 60, Action::PowerOn, "a"),
            at("stop b", stop_b, Action::KubeletStop, "b"),
        ]
    };
    let text = refusal(steps(120), SafetySpec::default(), &[]);
    assert!(
        text.starts_with(
            "steps `off a` and `stop b` would have 2 nodes down at once (a, b) \
             from +120.0s to"
        ),
        "{text}"
    );
    assert!(text.contains("A node powered on counts as down"), "{text}");
    passes(steps(721), SafetySpec::default(), &[]);
}

#[test]
fn an_evicting_taint_and_a_run_with_an_undo_count_as_down() {
    let taint = |effect: &str| TaintSpec {
        key: "faultline.dev/test".into(),
        value: None,
        effect: effect.into(),
    };
    // A NoExecute taint moves the node's pods away until its untaint.
    let text = refusal(
        vec![
            at("taint a", 0, Action::Taint(taint("NoExecute")), "a"),
            at("stop b", 30, Action::KubeletStop, "b"),
            at("untaint a", 60, Action::Untaint(taint("NoExecute")), "a"),
        ],
        SafetySpec::default(),
        &[],
    );
    assert!(
        text.starts_with(
            "steps `taint a` and `stop b` would have 2 nodes down at once (a, b) \
             from +30.0s to +60.0s;"
        ),
        "{text}"
    );
    assert!(text.contains("`NoExecute` taint"), "{text}");
    passes(
        vec![
            at("taint a", 0, Action::Taint(taint("NoExecute")), "a"),
            at("untaint a", 60, Action::Untaint(taint("NoExecute")), "a"),
            at("stop b", 90, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
    // A NoSchedule taint keeps the node's pods running: it does not count.
    passes(
        vec![
            at("taint a", 0, Action::Taint(taint("NoSchedule")), "a"),
            at("stop b", 30, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
    // A run with an undo changed something until the end of the run.
    let run = |undo: Option<&str>| Action::Run {
        command: "iptables -A INPUT -j DROP".into(),
        undo: undo.map(str::to_owned),
    };
    let text = refusal(
        vec![
            at("cut a", 0, run(Some("iptables -D INPUT -j DROP")), "a"),
            at("stop b", 600, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
    assert!(text.starts_with("steps `cut a` and `stop b`"), "{text}");
    passes(
        vec![
            at("look at a", 0, run(None), "a"),
            at("stop b", 30, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
}

#[test]
fn a_step_after_another_gets_the_worst_case() {
    // `start a` comes 30 s after `stop a` finished, which may take its whole minute:
    // a may be down until +90 s.
    let steps = |stop_b: u64| {
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            after("start a", "stop a", 30, Action::KubeletStart, "a"),
            at("stop b", stop_b, Action::KubeletStop, "b"),
        ]
    };
    let text = refusal(steps(60), SafetySpec::default(), &[]);
    assert!(
        text.starts_with(
            "steps `stop a` and `stop b` would have 2 nodes down at once (a, b) \
             from +60.0s to +90.0s;"
        ),
        "{text}"
    );
    assert!(text.contains("counted at their worst"), "{text}");
    passes(steps(91), SafetySpec::default(), &[]);
    // A fault after another step comes as early as it can: its delay after the
    // other step was issued, the action taking no time.
    let text = refusal(
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            at("start a", 60, Action::KubeletStart, "a"),
            after("stop b", "stop a", 30, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
    assert!(text.contains("from +30.0s to +60.0s;"), "{text}");
}

#[test]
fn a_step_that_waits_for_an_observed_state_gets_the_worst_case() {
    // `start a` waits for a to go Unknown, judged from `stop a`, for at most 120 s:
    // a return at its latest, +130 s.
    let text = refusal(
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            when(
                "start a",
                ("a", NodeStateMatch::Unknown),
                "stop a",
                (10, 120),
                Action::KubeletStart,
                "a",
            ),
            at("stop b", 100, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
    assert!(text.contains("from +100.0s to +130.0s;"), "{text}");
    // `stop b` waits for a to be Ready, judged from `stop c`: a state that already
    // holds then counts (a may still look Ready just after its kubelet stopped), so
    // `stop b` may come 10 s after `stop c`, while a and c are down.
    let text = refusal(
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            at("start a", 60, Action::KubeletStart, "a"),
            at("stop c", 0, Action::KubeletStop, "c"),
            when(
                "stop b",
                ("a", NodeStateMatch::Ready),
                "stop c",
                (10, 120),
                Action::KubeletStop,
                "b",
            ),
        ],
        SafetySpec {
            max_nodes_down: Some(2),
            ..SafetySpec::default()
        },
        &[],
    );
    assert!(
        text.starts_with(
            "steps `stop a`, `stop c` and `stop b` would have 3 nodes down at once \
             (a, b, c) from +10.0s to +60.0s; the experiment allows 2."
        ),
        "{text}"
    );
}

#[test]
fn two_of_three_control_plane_nodes_down_at_overlapping_times_lose_quorum() {
    let allowed = SafetySpec {
        max_nodes_down: Some(3),
        allow_control_plane: true,
        ..SafetySpec::default()
    };
    let text = refusal(
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            at("start a", 60, Action::KubeletStart, "a"),
            at("stop b", 30, Action::KubeletStop, "b"),
            at("start b", 90, Action::KubeletStart, "b"),
        ],
        allowed.clone(),
        &["a", "b", "c"],
    );
    assert!(
        text.starts_with(
            "steps `stop a` and `stop b` would have 2 of 3 control-plane nodes down at \
             once (a, b) from +30.0s to +60.0s, losing etcd quorum;"
        ),
        "{text}"
    );
    assert!(text.contains("`safety.allowQuorumLoss: true`"), "{text}");
    // One after the other, written interleaved: never two at once.
    passes(
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            at("stop b", 90, Action::KubeletStop, "b"),
            at("start a", 60, Action::KubeletStart, "a"),
            at("start b", 150, Action::KubeletStart, "b"),
        ],
        allowed,
        &["a", "b", "c"],
    );
}

#[test]
fn steps_due_at_one_offset_run_in_file_order() {
    // `stop b` written before `start a`, both at 60 s: the runner stops b first, and
    // both are down until `start a` has run.
    let text = refusal(
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            at("stop b", 60, Action::KubeletStop, "b"),
            at("start a", 60, Action::KubeletStart, "a"),
        ],
        SafetySpec::default(),
        &[],
    );
    assert!(
        text.starts_with(
            "steps `stop a` and `stop b` would have 2 nodes down at once (a, b) at +60.0s;"
        ),
        "{text}"
    );
    passes(
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            at("start a", 60, Action::KubeletStart, "a"),
            at("stop b", 60, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
}

#[test]
fn a_return_that_may_come_before_a_fault_does_not_end_it() {
    // `start a` may come anywhere from 10 s to 70 s, before or after `stop a again` at
    // 50 s: it cannot be counted on to end that second outage, which lasts until
    // `start a again` at 400 s.
    let text = refusal(
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            after("start a", "stop a", 10, Action::KubeletStart, "a"),
            at("stop a again", 50, Action::KubeletStop, "a"),
            at("stop b", 200, Action::KubeletStop, "b"),
            at("start a again", 400, Action::KubeletStart, "a"),
        ],
        SafetySpec::default(),
        &[],
    );
    assert!(
        text.starts_with(
            "steps `stop a again` and `stop b` would have 2 nodes down at once (a, b) \
             from +200.0s to +400.0s;"
        ),
        "{text}"
    );
}

#[test]
fn only_the_undo_of_a_fault_ends_it() {
    // `kubelet-start` does not bring back a partitioned node: b is cut off until the
    // safety net heals it at the end.
    let text = refusal(
        vec![
            at("cut a", 0, Action::Partition, "a"),
            at("start a", 60, Action::KubeletStart, "a"),
            at("stop b", 90, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
        &[],
    );
    assert!(
        text.contains("from +90.0s to the end of the run (when the safety net"),
        "{text}"
    );
}

fn named(name: &str, nodes: &[&str], count: Option<u32>, exclude: &[&str]) -> TargetSpec {
    TargetSpec {
        name: name.into(),
        selector: NodeSelector {
            names: nodes.iter().map(|n| n.to_string()).collect(),
            exclude_targets: exclude.iter().map(|n| n.to_string()).collect(),
            ..NodeSelector::default()
        },
        count,
    }
}

#[test]
fn targets_that_name_their_nodes_resolve_without_the_api() {
    let by_label = TargetSpec {
        selector: NodeSelector {
            labels: [("zone".to_string(), "a".to_string())].into(),
            ..named("x", &["w1"], None, &[]).selector
        },
        ..named("labelled", &[], None, &[])
    };
    let specs = vec![
        named("both", &["w2", "w1"], None, &[]),
        named("first", &["w3", "w2"], Some(1), &[]),
        named("other", &["w1", "w2", "w3"], Some(1), &["first"]),
        by_label,
        named("after-unknown", &["w1"], None, &["labelled"]),
        named("too-few", &["w1", "gone"], Some(2), &[]),
    ];
    let present = |n: &str, _: Option<NodeRole>| n != "gone";
    assert_eq!(
        resolve_named_targets(&specs, &present),
        targets(&[
            ("both", &["w1", "w2"]),
            ("first", &["w2"]),
            ("other", &["w1"]),
        ])
    );
}

#[test]
fn offline_the_file_alone_refuses_what_it_decides() {
    let mut exp = experiment(
        vec![
            at("stop a", 0, Action::KubeletStop, "a"),
            at("start a", 300, Action::KubeletStart, "a"),
            at("stop b", 60, Action::KubeletStop, "b"),
        ],
        SafetySpec::default(),
    );
    exp.targets = vec![
        named("a", &["w1"], None, &[]),
        named("b", &["w2"], None, &[]),
    ];
    let err = check_offline(&exp, None).expect_err("overlapping outages");
    assert!(
        err.to_string().contains("(w1, w2) from +60.0s to +300.0s"),
        "{err}"
    );
    // A step time on a cluster timer needs the cluster's timers: not decided here.
    exp.steps[2].at = StepTime::Offset(Bound {
        terms: vec![BoundTerm {
            factor: 1.0,
            symbol: BoundSymbol::Grace,
        }],
    });
    assert_eq!(check_offline(&exp, None), Ok(()));
    // A target chosen by what only the cluster knows is left out.
    exp.steps[2].at = StepTime::Offset(Bound::fixed(Duration::from_secs(60)));
    exp.targets[1].selector.role = Some(NodeRole::Worker);
    exp.targets[1].selector.running_pods_of = Some(WorkloadRef {
        kind: WorkloadKind::StatefulSet,
        namespace: "default".into(),
        name: "db".into(),
    });
    assert_eq!(check_offline(&exp, None), Ok(()));
}

#[test]
fn contexts_off_a_non_empty_allow_list_are_refused() {
    assert_eq!(check_context("lab", &[], AllowList::Inventory), Ok(()));
    assert_eq!(
        check_context("lab", &["lab".into()], AllowList::Inventory),
        Ok(())
    );
    let allowed = ["lab".to_string(), "kind".to_string()];
    let err = check_context("prod", &allowed, AllowList::CommandLine);
    assert!(
        err.unwrap_err()
            .to_string()
            .contains("(--allow-context) (lab, kind); refusing to start. Add --allow-context prod")
    );
    let err = check_context("prod", &allowed, AllowList::Inventory);
    assert!(
        err.unwrap_err()
            .to_string()
            .contains("Add `prod` to the inventory's cluster.allowedContexts")
    );
}

#[test]
fn a_rolling_reboot_gated_on_the_first_node_ready_again_passes() {
    // Issue 46: the second reboot waits for the first node to be Ready again (judged
    // from its own reboot), then 30 s. The two can never be down at once; a run checks
    // it again when the step is due (`floor::interlock`).
    let rolling = |gate_since: &str| {
        vec![
            at("reboot a", 0, Action::Reboot, "a"),
            when(
                "reboot b",
                ("a", NodeStateMatch::Ready),
                gate_since,
                (30, 120),
                Action::Reboot,
                "b",
            ),
        ]
    };
    passes(rolling("reboot a"), SafetySpec::default(), &[]);
    // A third step at a fixed offset still meets a, not yet back, while b may not be
    // issued yet: refused.
    let mut three = rolling("reboot a");
    three.push(at("stop c", 100, Action::KubeletStop, "c"));
    let text = refusal(three, SafetySpec::default(), &[]);
    assert!(
        text.starts_with("steps `reboot a` and `stop c` would have 2 nodes down at once (a, c)"),
        "{text}"
    );
    // A step issued only after the gated one also finds a back.
    passes(
        vec![
            at("reboot a", 0, Action::Reboot, "a"),
            when(
                "reboot b",
                ("a", NodeStateMatch::Ready),
                "reboot a",
                (30, 120),
                Action::Reboot,
                "b",
            ),
            when(
                "reboot c",
                ("b", NodeStateMatch::Ready),
                "reboot b",
                (30, 120),
                Action::Reboot,
                "c",
            ),
        ],
        SafetySpec::default(),
        &[],
    );
    // Judged from another step, Ready may be seen before a ever went down: refused.
    let mut other = rolling("mark");
    other.insert(0, at("mark", 0, Action::Cordon, "c"));
    let text = refusal(other, SafetySpec::default(), &[]);
    assert!(
        text.starts_with("steps `reboot a` and `reboot b` would have 2 nodes down at once"),
        "{text}"
    );
}

#[test]
fn a_power_off_gated_on_the_power_on_then_ready_passes() {
    // b goes off only once a, powered on again, is seen Ready.
    passes(
        vec![
            at("off a", 0, Action::PowerOff, "a"),
            at("on a", 60, Action::PowerOn, "a"),
            when(
                "off b",
                ("a", NodeStateMatch::Ready),
                "on a",
                (30, 900),
                Action::PowerOff,
                "b",
            ),
            when(
                "on b",
                ("b", NodeStateMatch::NotReady),
                "off b",
                (0, 120),
                Action::PowerOn,
                "b",
            ),
        ],
        SafetySpec::default(),
        &[],
    );
}

#[test]
fn a_roll_two_at_a_time_passes_under_two_nodes_down_and_a_third_is_refused() {
    // Issue 46: batches of two, the second gated on both nodes of the first being Ready
    // again: never more than two down at once.
    let yaml = |extra: &str| {
        format!(
            "name: x\ndescription: d\ntargets:\n  workers: {{names: [a, b, c, d]}}\n  other: \
             {{names: [z]}}\nsafety: {{maxNodesDown: 2}}\nsteps:\n  - {{name: roll, at: 0s, do: \
             reboot, target: workers, roll: {{maxUnavailable: 2, settle: 30s}}}}\n{extra}expect:\n  \
             - {{name: back, node: workers, eventually: Ready}}\n"
        )
    };
    let parse = |text: &str| {
        crate::experiment::parse(text, std::path::Path::new("x.yaml"))
            .unwrap_or_else(|d| panic!("{d}"))
    };
    let targets = targets(&[("workers", &["a", "b", "c", "d"]), ("other", &["z"])]);
    assert_eq!(check(&parse(&yaml("")), &targets, &cp(&[])), Ok(()));
    // A kubelet stop at a fixed offset meets the first batch, not yet back: three down.
    let exp = parse(&yaml(
        "  - {name: stop z, at: 1m, do: kubelet-stop, target: other}\n",
    ));
    let text = check(&exp, &targets, &cp(&[]))
        .expect_err("refused")
        .to_string();
    assert!(
        text.starts_with("steps `roll (a, b)` and `stop z` would have 3 nodes down at once"),
        "{text}"
    );
}
