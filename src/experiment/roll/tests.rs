use std::path::Path;
use std::time::Duration;

use super::*;
use crate::experiment::model::{Action, Bound, Check};

const ROLL: &str = "name: roll
description: d
targets:
  workers: {role: worker}
steps:
  - name: roll reboots
    at: 10s
    do: reboot
    target: workers
    roll: {ROLL}
  - name: after the roll
    after: roll reboots
    do: cordon
    target: workers
  - name: when the roll began
    when: {node: workers, is: Ready, since: roll reboots}
    do: uncordon
    target: workers
expect:
  - name: back
    node: workers
    eventually: Ready
    since: roll reboots
  - name: never gone
    node: workers
    never: Gone
    until: roll reboots
";

fn parsed(roll: &str) -> Experiment {
    crate::experiment::parse(&ROLL.replace("{ROLL}", roll), Path::new("roll.yaml"))
        .unwrap_or_else(|d| panic!("{d}"))
}

fn targets(nodes: &[&str]) -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([(
        "workers".to_string(),
        nodes.iter().map(|n| n.to_string()).collect(),
    )])
}

#[test]
fn roll_keys_are_read_with_their_defaults() {
    let exp = parsed("{}");
    let roll = exp.steps[0].roll.clone().expect("a roll");
    assert_eq!(roll.order, RollOrder::Name);
    assert_eq!(roll.settle, Bound::fixed(Duration::ZERO));
    assert_eq!(roll.timeout, Duration::from_secs(600));
    let exp = parsed("{order: zone, settle: grace + 5s, timeout: 15m, maxUnavailable: 1}");
    let roll = exp.steps[0].roll.clone().expect("a roll");
    assert_eq!(roll.order, RollOrder::Zone);
    assert_eq!(roll.settle.to_string(), "grace + 5s");
    assert_eq!(roll.timeout, Duration::from_secs(900));
}

#[test]
fn a_roll_becomes_one_step_per_node_each_gated_on_the_one_before() {
    let exp = parsed("{settle: 30s, timeout: 12m}");
    let (out, resolved) = expand(&exp, &targets(&["w3", "w1", "w2"]));
    let names: Vec<&str> = out.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "roll reboots (w1)",
            "roll reboots (w2)",
            "roll reboots (w3)",
            "after the roll",
            "when the roll began"
        ]
    );
    // The first keeps the roll's own time and timeout.
    let first = &out.steps[0];
    assert_eq!(first.at, exp.steps[0].at);
    assert_eq!(first.timeout, exp.steps[0].timeout);
    assert_eq!(first.target.as_deref(), Some("workers@w1"));
    assert_eq!(first.action, Action::Reboot);
    assert!(out.steps.iter().all(|s| s.roll.is_none()));
    // Each next one waits for the node before it, from that node's step, then settles.
    for (i, prev) in [(1, "w1"), (2, "w2")] {
        let step = &out.steps[i];
        assert_eq!(
            step.at,
            StepTime::When {
                subject: Subject::Node {
                    target: format!("workers@{prev}"),
                },
                state: StateMatch::Node(NodeStateMatch::Ready),
                delay: Bound::fixed(Duration::from_secs(30)),
                since: Some(format!("roll reboots ({prev})")),
            }
        );
        assert_eq!(step.timeout, Duration::from_secs(720));
    }
    // Each node has a target of its own, in the experiment and resolved.
    for n in ["w1", "w2", "w3"] {
        assert_eq!(resolved[&format!("workers@{n}")], vec![n.to_string()]);
        let spec = out
            .targets
            .iter()
            .find(|t| t.name == format!("workers@{n}"))
            .expect("the node's target");
        assert_eq!(spec.selector.names, vec![n.to_string()]);
        assert_eq!(spec.count, Some(1));
    }
    assert_eq!(resolved["workers"].len(), 3);
}

#[test]
fn references_to_a_roll_are_to_its_first_issue_or_its_last_finish() {
    let (out, _) = expand(&parsed("{}"), &targets(&["a", "b"]));
    let step = |name: &str| out.steps.iter().find(|s| s.name == name).expect(name);
    assert!(matches!(
        &step("after the roll").at,
        StepTime::AfterStep { step, .. } if step == "roll reboots (b)"
    ));
    assert!(matches!(
        &step("when the roll began").at,
        StepTime::When { since: Some(s), .. } if s == "roll reboots (a)"
    ));
    assert_eq!(out.expectations[0].since, "roll reboots (a)");
    assert!(matches!(
        &out.expectations[1].check,
        Check::Never { until: Until::Step(s), .. } if s == "roll reboots (a)"
    ));
}

#[test]
fn a_roll_on_one_node_is_one_step_and_an_unresolved_roll_stays_as_written() {
    let exp = parsed("{}");
    let (out, _) = expand(&exp, &targets(&["only"]));
    assert_eq!(out.steps[0].name, "roll reboots (only)");
    assert_eq!(out.steps[0].at, exp.steps[0].at);
    assert_eq!(out.steps.len(), 3);

    let (out, resolved) = expand(&exp, &BTreeMap::new());
    assert_eq!(out, exp, "nothing resolved, nothing expanded");
    assert!(resolved.is_empty());
}

#[test]
fn expanding_twice_changes_nothing_more() {
    let exp = parsed("{settle: 5s}");
    let (once, resolved) = expand(&exp, &targets(&["a", "b", "c"]));
    let (twice, again) = expand(&once, &resolved);
    assert_eq!(once, twice);
    assert_eq!(resolved, again);
}

#[test]
fn zone_order_interleaves_zones_and_name_order_sorts() {
    let zones = BTreeMap::from([
        ("a1", "zone-a"),
        ("a2", "zone-a"),
        ("a3", "zone-a"),
        ("b1", "zone-b"),
        ("b2", "zone-b"),
        ("c1", "zone-c"),
    ]);
    let zone_of = |n: &str| zones.get(n).map(|z| z.to_string());
    let exp = parsed("{order: zone}");
    let mut t = targets(&["b2", "a3", "c1", "a1", "b1", "a2"]);
    order_nodes(&exp, &mut t, &zone_of);
    assert_eq!(t["workers"], ["a1", "b1", "c1", "a2", "b2", "a3"]);
    let (out, _) = expand(&exp, &t);
    let order: Vec<&str> = out.steps[..6]
        .iter()
        .map(|s| s.target.as_deref().unwrap_or_default())
        .collect();
    assert_eq!(
        order,
        [
            "workers@a1",
            "workers@b1",
            "workers@c1",
            "workers@a2",
            "workers@b2",
            "workers@a3"
        ]
    );

    // A name roll leaves the order to `expand`, which sorts by name.
    let exp = parsed("{order: name}");
    let mut t = targets(&["b2", "a3", "c1"]);
    order_nodes(&exp, &mut t, &zone_of);
    assert_eq!(t["workers"], ["b2", "a3", "c1"]);
    let (out, _) = expand(&exp, &t);
    assert_eq!(out.steps[0].name, "roll reboots (a3)");
}

#[test]
fn nodes_without_a_zone_are_one_zone_of_their_own() {
    let zone_of = |n: &str| n.strip_prefix("z-").map(|_| "z".to_string());
    let nodes: Vec<String> = ["n2", "z-1", "n1", "z-2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        interleave_zones(&nodes, &zone_of),
        ["n1", "z-1", "n2", "z-2"]
    );
}

#[test]
fn plan_words_say_the_order_and_the_bounds() {
    let exp = parsed("{order: zone, settle: 30s, timeout: 10m}");
    let roll = exp.steps[0].roll.as_ref().expect("a roll");
    assert_eq!(
        describe(roll, "workers"),
        "rolls through `workers` one node at a time, by zone (zones interleaved); the next \
         node once the one before is Ready again + 30s, giving up after 600s"
    );
}
