use std::path::Path;
use std::time::Duration;

use super::*;
use crate::experiment::model::{Action, Bound, DrainOnTimeout};

const UPGRADE: &str = "name: upgrade
description: d
targets:
  workers: {names: [a, b]}
steps:
  - name: upgrade
    at: 5s
    target: workers
    timeout: 3m
    roll: {settle: 30s, timeout: 12m}
    sequence:
      - do: drain
        onTimeout: continue
        timeout: 5m
      - do: reboot
      - do: uncordon
  - name: after it
    after: upgrade
    do: cordon
    target: workers
expect:
  - name: back
    node: workers
    eventually: Ready
    since: upgrade
";

fn upgrade() -> Experiment {
    crate::experiment::parse(UPGRADE, Path::new("upgrade.yaml")).unwrap_or_else(|d| panic!("{d}"))
}

fn targets() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([("workers".to_string(), vec!["b".into(), "a".into()])])
}

fn ready(target: &str, since: &str, settle: u64) -> StepTime {
    StepTime::When {
        subject: Subject::Node {
            target: target.into(),
        },
        state: StateMatch::Node(NodeStateMatch::Ready),
        delay: Bound::fixed(Duration::from_secs(settle)),
        since: Some(since.into()),
    }
}

#[test]
fn a_sequence_is_read_with_each_action_and_its_timeout() {
    let exp = upgrade();
    let step = &exp.steps[0];
    let roll = step.roll.as_ref().expect("a roll");
    let actions: Vec<(&Action, u64)> = roll
        .sequence
        .iter()
        .map(|a| (&a.action, a.timeout.as_secs()))
        .collect();
    assert_eq!(
        actions,
        [
            (
                &Action::Drain {
                    on_timeout: DrainOnTimeout::Continue
                },
                300
            ),
            (&Action::Reboot, 180),
            (&Action::Uncordon, 180)
        ]
    );
    // The step stands for its first action where it is not expanded.
    assert_eq!(step.action, roll.sequence[0].action);
    assert_eq!(step.timeout, Duration::from_secs(300));
}

#[test]
fn a_sequence_is_one_step_per_action_per_node_each_after_the_one_before() {
    let exp = upgrade();
    let (out, resolved) = expand(&exp, &targets());
    let names: Vec<&str> = out.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "upgrade (a) drain",
            "upgrade (a) reboot",
            "upgrade (a) uncordon",
            "upgrade (b) drain",
            "upgrade (b) reboot",
            "upgrade (b) uncordon",
            "after it"
        ]
    );
    let s = &out.steps;
    // The first keeps the roll's own time; each node's steps are on its own target.
    assert_eq!(s[0].at, exp.steps[0].at);
    assert_eq!(s[0].timeout, Duration::from_secs(300));
    assert!(
        s[..3]
            .iter()
            .all(|s| s.target.as_deref() == Some("workers@a"))
    );
    assert!(
        s[3..6]
            .iter()
            .all(|s| s.target.as_deref() == Some("workers@b"))
    );
    assert_eq!(resolved["workers@b"], ["b"]);
    // The reboot once the drain finished; the uncordon once the node is Ready again after
    // the reboot, waiting up to the roll's timeout.
    assert_eq!(
        s[1].at,
        StepTime::AfterStep {
            step: "upgrade (a) drain".into(),
            delay: Bound::fixed(Duration::ZERO),
        }
    );
    assert_eq!(s[1].timeout, Duration::from_secs(180));
    assert_eq!(s[2].at, ready("workers@a", "upgrade (a) reboot", 0));
    assert_eq!(s[2].timeout, Duration::from_secs(720));
    // The next node: once the node before is Ready after its last action, then settle.
    assert_eq!(s[3].at, ready("workers@a", "upgrade (a) uncordon", 30));
    assert_eq!(s[3].timeout, Duration::from_secs(720));
    assert_eq!(s[3].action, s[0].action);
    // References: `after` the last action of the last node, `since` the first.
    assert!(matches!(
        &s[6].at,
        StepTime::AfterStep { step, .. } if step == "upgrade (b) uncordon"
    ));
    assert_eq!(out.expectations[0].since, "upgrade (a) drain");
    // Expanded once, expanded for good.
    let (twice, _) = expand(&out, &resolved);
    assert_eq!(twice, out);
}

#[test]
fn a_sequence_in_batches_and_an_action_twice() {
    let text = UPGRADE
        .replace("targets:\n", "targets:\n  all: {names: [a, b, c]}\n")
        .replace(
            "description: d\n",
            "description: d\nsafety: {maxNodesDown: 2}\n",
        )
        .replace(
            "roll: {settle: 30s, timeout: 12m}",
            "roll: {settle: 30s, timeout: 12m, maxUnavailable: 2}",
        )
        .replace(
            "      - do: uncordon\n",
            "      - do: uncordon\n      - do: reboot\n",
        );
    let exp =
        crate::experiment::parse(&text, Path::new("u.yaml")).unwrap_or_else(|d| panic!("{d}"));
    let t = BTreeMap::from([(
        "workers".to_string(),
        vec!["a".to_string(), "b".into(), "c".into()],
    )]);
    let (out, _) = expand(&exp, &t);
    let names: Vec<&str> = out.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names[..5],
        [
            "upgrade (a, b) drain",
            "upgrade (a, b) reboot",
            "upgrade (a, b) uncordon",
            "upgrade (a, b) reboot 2",
            "upgrade (c) drain",
        ]
    );
    // After the second reboot, the next batch waits for both nodes from it.
    assert_eq!(
        out.steps[4].at,
        ready("workers@a,b", "upgrade (a, b) reboot 2", 30)
    );
    // A plan without the nodes says what each node goes through.
    let roll = exp.steps[0].roll.as_ref().expect("a roll");
    assert!(
        describe(roll, "workers").contains(
            "2 nodes at a time, by name, doing drain → reboot → uncordon → reboot to each;"
        ),
        "{}",
        describe(roll, "workers")
    );
}

fn refused(text: &str) -> Vec<String> {
    crate::experiment::parse(text, Path::new("u.yaml"))
        .expect_err("refused")
        .iter()
        .map(|d| format!("{}:{}: {}", d.line, d.column, d.message))
        .collect()
}

#[test]
fn a_held_fault_in_a_sequence_needs_its_repair_after_it() {
    let diags = refused(&UPGRADE.replace("      - do: uncordon\n", ""));
    assert_eq!(
        diags,
        [
            "12:13: `do: drain` keeps its node down until `uncordon`, and no later action of the \
          sequence does that, so the roll would never go on to the next node"
        ]
    );
    // Repaired before it is done: refused too.
    let diags = refused(
        &UPGRADE
            .replace("      - do: uncordon\n", "")
            .replace("    sequence:\n", "    sequence:\n      - do: uncordon\n"),
    );
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert!(
        diags[0].starts_with("13:13: `do: drain` keeps its node down"),
        "{diags:?}"
    );
}

#[test]
fn a_sequence_is_written_on_a_rolling_step_with_its_actions_keys_in_its_entries() {
    let diags = refused(&UPGRADE.replace("    roll: {settle: 30s, timeout: 12m}\n", ""));
    assert_eq!(
        diags,
        ["11:7: `sequence` goes with `roll`: it is what a rolling step does to each node"]
    );
    let diags = refused(&UPGRADE.replace(
        "    timeout: 3m\n",
        "    timeout: 3m\n    do: reboot\n    onTimeout: fail\n",
    ));
    assert_eq!(
        diags,
        [
            "10:9: a step takes `do` or `sequence`, not both",
            "11:16: `onTimeout` belongs to an action: with `sequence`, write it in its entry"
        ]
    );
    let diags = refused(&UPGRADE.replace(
        "      - do: reboot\n",
        "      - do: reboot\n        target: workers\n        after: upgrade\n",
    ));
    assert_eq!(
        diags,
        [
            "16:17: `target` is not an action's key: an entry of `sequence` takes `do`, the keys of its action and `timeout`",
            "17:16: `after` is not an action's key: an entry of `sequence` takes `do`, the keys of its action and `timeout`"
        ]
    );
    let diags = refused(&UPGRADE.replace(
        "      - do: reboot\n",
        "      - do: rebot\n      - do: delete-pvc\n        pvc: {name: x}\n",
    ));
    assert_eq!(diags.len(), 2, "{diags:?}");
    assert!(
        diags[0].starts_with("15:13: unknown action `rebot`"),
        "{diags:?}"
    );
    assert!(
        diags[1].starts_with(
            "16:13: `roll` goes through the nodes of a target one at a time; `do: delete-pvc`"
        ),
        "{diags:?}"
    );
}

#[test]
fn every_mistyped_key_of_a_sequence_is_named_at_once() {
    let diags = refused(
        &UPGRADE
            .replace(
                "        onTimeout: continue\n",
                "        onTimout: continue\n",
            )
            .replace(
                "      - do: uncordon\n",
                "      - do: uncordon\n        timout: 1m\n",
            ),
    );
    assert_eq!(diags.len(), 2, "{diags:?}");
    assert!(
        diags[0].starts_with("13:9: unknown key `onTimout`"),
        "{diags:?}"
    );
    assert!(
        diags[1].starts_with("17:9: unknown key `timout`"),
        "{diags:?}"
    );
}

#[test]
fn a_sequence_of_one_action_is_named_as_a_one_action_roll() {
    let text = UPGRADE.replace(
        "      - do: drain\n        onTimeout: continue\n        timeout: 5m\n      - do: reboot\n      - do: uncordon\n",
        "      - do: reboot\n",
    );
    let exp =
        crate::experiment::parse(&text, Path::new("u.yaml")).unwrap_or_else(|d| panic!("{d}"));
    let (out, _) = expand(&exp, &targets());
    let names: Vec<&str> = out.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["upgrade (a)", "upgrade (b)", "after it"]);
    assert_eq!(out.steps[1].at, ready("workers@a", "upgrade (a)", 30));
}
