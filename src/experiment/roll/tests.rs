use std::path::Path;
use std::time::Duration;

use super::*;
use crate::experiment::model::{Action, Bound, Check};

const ROLL: &str = "name: roll
description: d
targets:
  workers: {role: worker}
safety: {maxNodesDown: 3}
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

/// [`order_nodes`] knowing only the zones (no control-plane node).
fn order_by_zone(
    exp: &Experiment,
    targets: &mut BTreeMap<String, Vec<String>>,
    zone_of: &dyn Fn(&str) -> Option<String>,
) {
    let facts = NodeFacts {
        zone_of,
        is_control_plane: &|_| false,
    };
    order_nodes(exp, targets, &facts).expect("a zone or name order always fits");
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
    order_by_zone(&exp, &mut t, &zone_of);
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
    order_by_zone(&exp, &mut t, &zone_of);
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

fn names(exp: &Experiment) -> Vec<&str> {
    exp.steps.iter().map(|s| s.name.as_str()).collect()
}

fn gate(target: &str, since: &str, settle: u64) -> StepTime {
    StepTime::When {
        subject: Subject::Node {
            target: target.to_string(),
        },
        state: StateMatch::Node(NodeStateMatch::Ready),
        delay: Bound::fixed(Duration::from_secs(settle)),
        since: Some(since.to_string()),
    }
}

#[test]
fn max_unavailable_takes_batches_each_gated_on_every_node_of_the_one_before() {
    let exp = parsed("{maxUnavailable: 2, settle: 30s, timeout: 12m}");
    assert_eq!(
        exp.steps[0].roll.as_ref().map(|r| r.max_unavailable),
        Some(2)
    );
    let (out, resolved) = expand(&exp, &targets(&["w5", "w3", "w1", "w4", "w2"]));
    assert_eq!(
        names(&out),
        [
            "roll reboots (w1, w2)",
            "roll reboots (w3, w4)",
            "roll reboots (w5)",
            "after the roll",
            "when the roll began"
        ]
    );
    // One step per batch, on a target of the batch's nodes: its nodes go down together.
    assert_eq!(out.steps[0].target.as_deref(), Some("workers@w1,w2"));
    assert_eq!(resolved["workers@w1,w2"], ["w1", "w2"]);
    assert_eq!(resolved["workers@w5"], ["w5"]);
    let spec = out
        .targets
        .iter()
        .find(|t| t.name == "workers@w3,w4")
        .expect("the batch's target");
    assert_eq!(spec.selector.names, ["w3", "w4"]);
    assert_eq!(spec.count, Some(2));
    // The next batch waits for the whole batch before it (a node target is Ready once
    // every node of it is), from that batch's step, then settles.
    assert_eq!(out.steps[0].at, exp.steps[0].at);
    assert_eq!(
        out.steps[1].at,
        gate("workers@w1,w2", "roll reboots (w1, w2)", 30)
    );
    assert_eq!(
        out.steps[2].at,
        gate("workers@w3,w4", "roll reboots (w3, w4)", 30)
    );
    assert_eq!(out.steps[2].timeout, Duration::from_secs(720));
    // `after:` the roll: after its last batch.
    assert!(matches!(
        &out.steps[3].at,
        StepTime::AfterStep { step, .. } if step == "roll reboots (w5)"
    ));
}

#[test]
fn more_unavailable_than_nodes_is_one_batch() {
    let exp = parsed("{maxUnavailable: 3}");
    let (out, resolved) = expand(&exp, &targets(&["b", "a"]));
    assert_eq!(names(&out)[0], "roll reboots (a, b)");
    assert_eq!(out.steps[0].at, exp.steps[0].at);
    assert_eq!(resolved["workers@a,b"], ["a", "b"]);
    assert_eq!(out.steps.len(), 3);
}

fn zones_of(zones: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |n: &str| {
        zones
            .iter()
            .find(|(node, _)| *node == n)
            .map(|(_, z)| z.to_string())
    }
}

/// The roll's nodes by batch, as its steps' targets say.
fn batches_of(out: &Experiment, resolved: &BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    out.steps
        .iter()
        .filter(|s| s.name.starts_with("roll reboots ("))
        .map(|s| s.nodes(resolved).to_vec())
        .collect()
}

#[test]
fn a_zone_roll_never_takes_two_nodes_of_one_zone_at_once_unless_allowed() {
    const ZONES: &[(&str, &str)] = &[
        ("a1", "zone-a"),
        ("a2", "zone-a"),
        ("a3", "zone-a"),
        ("b1", "zone-b"),
        ("c1", "zone-c"),
    ];
    let zone_of = zones_of(ZONES);
    let run = |roll: &str| {
        let exp = parsed(roll);
        let mut t = targets(&["a3", "c1", "a1", "b1", "a2"]);
        order_by_zone(&exp, &mut t, &zone_of);
        let (out, resolved) = expand_in_zones(&exp, &t, Some(&zone_of));
        (exp, t, out, resolved)
    };
    // Interleaved a1 b1 c1 a2 a3: three at a time, but a2 and a3 share a zone.
    let (exp, given, out, resolved) = run("{order: zone, maxUnavailable: 3}");
    assert_eq!(
        batches_of(&out, &resolved),
        [vec!["a1", "b1", "c1"], vec!["a2"], vec!["a3"]]
    );
    // Rehearsed on the record (its targets hold the run's batches), the zones not known:
    // the same batches.
    let mut record = given.clone();
    record.extend(resolved.clone());
    let (again, _) = expand(&exp, &record);
    assert_eq!(again, out);
    // Zones not known and no batches given: by count alone.
    let (by_count, resolved) = expand(&exp, &given);
    assert_eq!(
        batches_of(&by_count, &resolved),
        [vec!["a1", "b1", "c1"], vec!["a2", "a3"]]
    );
    // Two at a time: a batch ends at a zone it already has.
    let (_, _, out, resolved) = run("{order: zone, maxUnavailable: 2}");
    assert_eq!(
        batches_of(&out, &resolved),
        [vec!["a1", "b1"], vec!["c1", "a2"], vec!["a3"]]
    );
    // `sameZone: allow`: by count.
    let (_, _, out, resolved) = run("{order: zone, maxUnavailable: 3, sameZone: allow}");
    assert_eq!(
        batches_of(&out, &resolved),
        [vec!["a1", "b1", "c1"], vec!["a2", "a3"]]
    );
    // Nodes without a zone count as one zone.
    let none = |_: &str| None;
    let exp = parsed("{order: zone, maxUnavailable: 2}");
    let (out, resolved) = expand_in_zones(&exp, &targets(&["x", "y"]), Some(&none));
    assert_eq!(batches_of(&out, &resolved), [vec!["x"], vec!["y"]]);
}

#[test]
fn plan_words_say_how_many_at_a_time() {
    let exp = parsed("{order: zone, maxUnavailable: 2}");
    let roll = exp.steps[0].roll.as_ref().expect("a roll");
    assert_eq!(
        describe(roll, "workers"),
        "rolls through `workers` 2 nodes at a time, by zone (zones interleaved, never two \
         nodes of one zone at once); the next nodes once every one before is Ready again + \
         0s, giving up after 600s"
    );
}

#[test]
fn max_unavailable_above_max_nodes_down_is_refused_where_it_is_written() {
    let text = ROLL
        .replace("{ROLL}", "{maxUnavailable: 4}")
        .replace("maxNodesDown: 3", "maxNodesDown: 2");
    let diags = crate::experiment::parse(&text, Path::new("roll.yaml")).expect_err("refused");
    let d = &diags.0[0];
    assert_eq!((d.line, d.column), (11, 28), "{d}");
    assert!(
        d.message.contains(
            "`maxUnavailable: 4` takes 4 nodes down at once; `safety.maxNodesDown` allows 2"
        ),
        "{d}"
    );
    assert!(
        d.hint
            .as_deref()
            .is_some_and(|h| h.contains("raise `safety.maxNodesDown` to at least 4")),
        "{d}"
    );
    // Without `safety`, one node may be down: two at a time is refused too.
    let text = ROLL
        .replace("{ROLL}", "{maxUnavailable: 2}")
        .replace("safety: {maxNodesDown: 3}\n", "");
    assert!(crate::experiment::parse(&text, Path::new("roll.yaml")).is_err());
    let text = ROLL.replace("{ROLL}", "{maxUnavailable: 3}");
    assert!(crate::experiment::parse(&text, Path::new("roll.yaml")).is_ok());
}
