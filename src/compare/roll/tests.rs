use super::*;
use crate::compare::{Movement, compare, parse_spec};
use crate::judge::roll_figures::tests::{roll_timeline, rolled};

/// A recorded run whose roll of `w1`, `w2`, `w3` brought each node back `back` seconds
/// after its step: only its `rolls` matter to this comparison.
fn run(back: [i64; 3]) -> Series {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/records/kubelet-stop-within-toleration.json");
    let mut record = RunRecord::load(&path).expect("record");
    record.rolls = crate::judge::roll_figures(&rolled(), &roll_timeline(back));
    Series::single(record)
}

fn tolerance(values: &[&str]) -> Tolerance {
    let specs: Vec<_> = values
        .iter()
        .map(|v| parse_spec(v).expect("spec"))
        .collect();
    Tolerance::from_specs(&specs).expect("tolerance")
}

#[test]
fn the_node_and_the_stage_that_got_slower_are_named() {
    let c = compare(
        &[run([40, 40, 40])],
        &[run([40, 95, 41])],
        &tolerance(&[]),
        ("before", "after"),
    );
    let slower: Vec<(&str, &str, &str)> = c
        .roll_stage_diffs()
        .filter(|(.., f)| f.movement.regressed())
        .map(|(_, r, n, f)| (r.roll.as_str(), n.node.as_str(), f.key.as_str()))
        .collect();
    assert_eq!(slower, [("roll reboots", "w2", "node_ready_again")]);
    assert_eq!(c.regressions(), 1);
    assert_eq!(c.exit_code(), 1);
    let e = &c.experiments[0];
    assert_eq!(e.rolls.len(), 1);
    let w3 = &e.rolls[0].nodes[2];
    let back = w3
        .stages
        .iter()
        .find(|f| f.key == "node_ready_again")
        .expect("w3 back");
    assert_eq!(
        back.movement,
        Movement::Within,
        "1 s later: inside 10% or 1s"
    );
    // Nothing drained on either side: no such stage.
    assert!(
        e.rolls[0]
            .nodes
            .iter()
            .all(|n| n.stages.iter().all(|f| f.key != "drained"))
    );
}

#[test]
fn a_tolerance_on_the_stage_s_key_lets_it_pass() {
    let c = compare(
        &[run([40, 40, 40])],
        &[run([40, 95, 41])],
        &tolerance(&["node_ready_again=60s"]),
        ("before", "after"),
    );
    assert_eq!(c.regressions(), 0);
    let c = compare(
        &[run([40, 40, 40])],
        &[run([40, 40, 40])],
        &tolerance(&[]),
        ("before", "after"),
    );
    assert_eq!(c.exit_code(), 0);
}

#[test]
fn a_node_on_one_side_only_is_listed_not_compared() {
    let mut now = run([40, 40, 40]).first().clone();
    now.rolls[0].nodes[2].node = "w4".into();
    let c = compare(
        &[run([40, 40, 40])],
        &[Series::single(now)],
        &tolerance(&[]),
        ("before", "after"),
    );
    let r = &c.experiments[0].rolls[0];
    let nodes: Vec<&str> = r.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(nodes, ["w1", "w2"]);
    assert_eq!(r.one_side_only, ["w4", "w3"]);
}
