//! `order: role` and `order: [node, …]`: how they read, order, refuse and read in `plan`.

use std::path::Path;

use super::*;

const ROLL: &str = "name: roll
description: d
targets:
  all: {labels: {kubernetes.io/os: linux}}
safety: {maxNodesDown: 3, allowControlPlane: true}
steps:
  - name: roll reboots
    at: 10s
    do: reboot
    target: all
    roll: {ROLL}
  - name: later
    at: 30m
    do: cordon
    target: all
expect:
  - name: back
    node: all
    eventually: Ready
";

fn parsed(roll: &str) -> Experiment {
    crate::experiment::parse(&ROLL.replace("{ROLL}", roll), Path::new("roll.yaml"))
        .unwrap_or_else(|d| panic!("{d}"))
}

fn refused(roll: &str) -> Vec<String> {
    match crate::experiment::parse(&ROLL.replace("{ROLL}", roll), Path::new("roll.yaml")) {
        Ok(_) => panic!("`roll: {roll}` was accepted"),
        Err(d) => {
            d.0.iter()
                .map(|d| format!("{}:{}: {}", d.line, d.column, d.message))
                .collect()
        }
    }
}

fn all(nodes: &[&str]) -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([(
        "all".to_string(),
        nodes.iter().map(|n| n.to_string()).collect(),
    )])
}

/// A cluster of three workers and two control-plane nodes (`cp-…`), in no zone.
fn order(exp: &Experiment, targets: &mut BTreeMap<String, Vec<String>>) -> Result<(), OrderError> {
    let facts = NodeFacts {
        zone_of: &|_| None,
        is_control_plane: &|n| n.starts_with("cp-"),
    };
    order_nodes(exp, targets, &facts)
}

/// The nodes of the expanded roll's steps, in the order it takes them.
fn rolled(exp: &Experiment, targets: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let (out, _) = expand(exp, targets);
    out.steps
        .iter()
        .filter_map(|s| s.target.as_deref()?.strip_prefix("all@"))
        .map(str::to_string)
        .collect()
}

#[test]
fn role_order_takes_the_workers_then_the_control_plane_by_name_within_each() {
    let exp = parsed("{order: role}");
    assert_eq!(
        exp.steps[0].roll.as_ref().map(|r| &r.order),
        Some(&RollOrder::Role)
    );
    let mut t = all(&["cp-2", "w3", "cp-1", "w1", "w2"]);
    order(&exp, &mut t).expect("a role order always fits");
    assert_eq!(t["all"], ["w1", "w2", "w3", "cp-1", "cp-2"]);
    assert_eq!(rolled(&exp, &t), ["w1", "w2", "w3", "cp-1", "cp-2"]);
    // Two at a time: batches cut by count in that order, a worker and a control-plane
    // node together only where the workers run out.
    let exp = parsed("{order: role, maxUnavailable: 2}");
    let mut t = all(&["cp-2", "w3", "cp-1", "w1", "w2"]);
    order(&exp, &mut t).expect("fits");
    assert_eq!(rolled(&exp, &t), ["w1,w2", "w3,cp-1", "cp-2"]);
    // A name roll of the same nodes puts `cp-…` first: the role order is not the name order.
    let exp = parsed("{order: name}");
    let mut t = all(&["cp-2", "w3", "cp-1", "w1", "w2"]);
    order(&exp, &mut t).expect("fits");
    assert_eq!(rolled(&exp, &t), ["cp-1", "cp-2", "w1", "w2", "w3"]);
}

#[test]
fn a_list_order_takes_the_nodes_as_listed() {
    let exp = parsed("{order: [w3, cp-1, w1, w2]}");
    assert_eq!(
        exp.steps[0].roll.as_ref().map(|r| &r.order),
        Some(&RollOrder::List(
            ["w3", "cp-1", "w1", "w2"].map(String::from).to_vec()
        ))
    );
    let mut t = all(&["w1", "w2", "w3", "cp-1"]);
    order(&exp, &mut t).expect("the list names every node once");
    assert_eq!(rolled(&exp, &t), ["w3", "cp-1", "w1", "w2"]);
    // The list is the experiment's: a rehearsal on a record's targets, in whatever order
    // they were kept, takes the same order.
    assert_eq!(
        rolled(&exp, &all(&["cp-1", "w1", "w2", "w3"])),
        ["w3", "cp-1", "w1", "w2"]
    );
}

#[test]
fn a_list_naming_another_node_or_leaving_one_out_is_refused_saying_which() {
    let exp = parsed("{order: [w2, w9, w1]}");
    let err = order(&exp, &mut all(&["w1", "w2"])).expect_err("w9 is not in the target");
    assert_eq!(
        err,
        OrderError::NotInTarget {
            step: "roll reboots".into(),
            target: "all".into(),
            node: "w9".into(),
            nodes: "w1, w2".into(),
        }
    );
    assert!(
        err.to_string().contains(
            "step `roll reboots`: `roll.order` lists node `w9`, which is not one of target \
             `all`'s nodes (w1, w2)"
        ),
        "{err}"
    );

    let exp = parsed("{order: [w2, w1]}");
    let err = order(&exp, &mut all(&["w1", "w2", "w3", "cp-1"])).expect_err("two left out");
    assert_eq!(
        err,
        OrderError::NotListed {
            step: "roll reboots".into(),
            target: "all".into(),
            missing: "w3, cp-1".into(),
        }
    );
    assert!(
        err.to_string()
            .contains("target `all` resolved to w3, cp-1, which `roll.order` does not list"),
        "{err}"
    );

    // A list with a node twice never gets past the file (below); a model built otherwise
    // is still refused where the target is resolved.
    let mut exp = parsed("{order: [w1, w2]}");
    if let Some(roll) = exp.steps[0].roll.as_mut() {
        roll.order = RollOrder::List(["w1", "w2", "w1"].map(String::from).to_vec());
    }
    assert_eq!(
        order(&exp, &mut all(&["w1", "w2"])),
        Err(OrderError::Twice {
            step: "roll reboots".into(),
            node: "w1".into(),
        })
    );
}

#[test]
fn two_rolls_on_one_target_in_two_cluster_given_orders_are_refused() {
    let mut exp = parsed("{order: zone}");
    let mut second = exp.steps[0].roll.clone().expect("a roll");
    second.order = RollOrder::Role;
    exp.steps[1].roll = Some(second.clone());
    let err = order(&exp, &mut all(&["w1", "cp-1"])).expect_err("zone and role");
    assert!(
        err.to_string().contains(
            "steps `roll reboots` (`order: zone`) and `later` (`order: role`) roll through \
             target `all` in two different orders"
        ),
        "{err}"
    );
    // The same order twice, or a list beside it, is one order of the target's nodes.
    second.order = RollOrder::Zone;
    exp.steps[1].roll = Some(second.clone());
    assert_eq!(order(&exp, &mut all(&["w1", "cp-1"])), Ok(()));
    second.order = RollOrder::List(["cp-1", "w1"].map(String::from).to_vec());
    exp.steps[1].roll = Some(second);
    assert_eq!(order(&exp, &mut all(&["w1", "cp-1"])), Ok(()));
}

#[test]
fn a_list_is_checked_offline_for_its_shape_where_it_is_written() {
    assert_eq!(
        refused("{order: [w1, w2, w1]}"),
        ["11:28: `order` lists node `w1` twice (first at 11:20)"]
    );
    assert_eq!(refused("{order: []}"), ["11:19: `order` lists no node"]);
    assert_eq!(
        refused("{order: [w1, Bad_Node]}"),
        ["11:24: `Bad_Node` in `order` is not a valid Kubernetes node name"]
    );
    assert_eq!(refused("{order: rol}"), ["11:19: unknown roll order `rol`"]);
    assert_eq!(
        refused("{order: role, sameZone: allow}"),
        ["11:35: `sameZone` only applies to `order: zone`"]
    );
}

#[test]
fn plan_words_say_the_role_and_list_orders() {
    let exp = parsed("{order: role, settle: 30s}");
    let roll = exp.steps[0].roll.as_ref().expect("a roll");
    assert_eq!(
        describe(roll, "all"),
        "rolls through `all` one node at a time, by role (workers first, then the control \
         plane, by name within each); the next node once the one before is Ready again + \
         30s, giving up after 600s"
    );
    let exp = parsed("{order: [w2, w1]}");
    let roll = exp.steps[0].roll.as_ref().expect("a roll");
    assert_eq!(
        describe(roll, "all"),
        "rolls through `all` one node at a time, in the order listed (w2, w1); the next node \
         once the one before is Ready again + 0s, giving up after 600s"
    );
}

#[test]
fn a_list_naming_a_node_a_named_target_cannot_have_is_refused_offline() {
    let named = ROLL.replace(
        "all: {labels: {kubernetes.io/os: linux}}",
        "all: {names: [w1, w2]}",
    );
    let text = named.replace("{ROLL}", "{order: [w2, w9, w1]}");
    let diags = crate::experiment::parse(&text, Path::new("roll.yaml")).expect_err("w9");
    let said: Vec<String> = diags
        .0
        .iter()
        .map(|d| format!("{}:{}: {}", d.line, d.column, d.message))
        .collect();
    assert_eq!(
        said,
        [
            "11:24: `order` lists node `w9`, which target `all` cannot resolve to: it names only \
          w1, w2"
        ]
    );
    // The named nodes in any order pass; so does a list leaving one out, which only the
    // run can refuse (the named node may not be in the cluster).
    for ok in ["{order: [w2, w1]}", "{order: [w2]}"] {
        let text = named.replace("{ROLL}", ok);
        assert!(
            crate::experiment::parse(&text, Path::new("roll.yaml")).is_ok(),
            "{ok}"
        );
    }
    // A target selected by labels cannot be checked offline.
    assert!(
        crate::experiment::parse(
            &ROLL.replace("{ROLL}", "{order: [w9]}"),
            Path::new("roll.yaml")
        )
        .is_ok()
    );
}
