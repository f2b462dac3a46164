//! A roll as a plan with the API sees it: expanded into one step per node (the run's
//! resolved targets), grouped back into one roll, each node issued after the one before.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::predicted;
use crate::experiment::model::{ClusterTimers, Experiment};
use crate::failure_model::{ControllerSettings, RollFault, Transition, Window};

fn shipped(name: &str) -> Experiment {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("experiments")
        .join(name);
    crate::experiment::load(&path).unwrap_or_else(|d| panic!("{d}"))
}

fn earliest(w: Window) -> Option<Duration> {
    match w {
        Window::Between { earliest, .. } => Some(earliest),
        Window::Never => None,
    }
}

/// The roll of `name` expanded on three resolved workers, predicted as `plan` does: the
/// schedule places the first step at +0s, the rest wait for what is observed.
fn expanded_roll(name: &str) -> super::RollPredicted {
    let exp = shipped(name);
    let workers: Vec<String> = ["w3", "w1", "w2"].map(String::from).to_vec();
    let targets = BTreeMap::from([("workers".to_string(), workers)]);
    let (expanded, targets) = crate::experiment::roll::expand(&exp, &targets);
    assert!(expanded.steps.len() >= 3, "{:?}", expanded.steps);
    let settings = ControllerSettings::default();
    let rolls = predicted(
        &expanded,
        (&targets, true),
        &|i| (i == 0).then_some(Duration::ZERO),
        (&ClusterTimers::default(), &settings),
        (&[], false),
    );
    assert_eq!(rolls.len(), 1, "{rolls:?}");
    rolls.into_iter().next().unwrap()
}

#[test]
fn an_expanded_roll_is_one_roll_with_every_node_in_the_run_s_order() {
    let roll = expanded_roll("rolling-reboot-workers.yaml");
    assert_eq!(roll.roll, "reboot workers");
    assert_eq!(roll.fault, RollFault::ComesBack);
    // Resolved: the run's own nodes, no word on which ones the prediction covers.
    assert_eq!(roll.covers, None);
    let nodes: Vec<&str> = roll.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(nodes, ["w1", "w2", "w3"]);
    // Two renewals (10 s apart with the default 40 s lease), then the 30 s settle read
    // from the expanded step's `when:` delay.
    let issued: Vec<_> = roll.nodes.iter().map(|n| earliest(n.issued)).collect();
    let s = Duration::from_secs;
    assert_eq!(issued, [Some(s(0)), Some(s(40)), Some(s(80))]);
}

#[test]
fn an_expanded_sequence_is_taken_by_what_its_actions_do_together() {
    let roll = expanded_roll("rolling-upgrade-workers.yaml");
    assert_eq!(roll.roll, "upgrade workers");
    // Drain, reboot, uncordon: the reboot takes the node down and it comes back.
    assert_eq!(roll.fault, RollFault::ComesBack);
    assert_eq!(roll.nodes.len(), 3);
    for n in &roll.nodes {
        assert!(
            n.predictions
                .iter()
                .any(|p| p.transition == Transition::NodeReady),
            "{n:?}"
        );
    }
    let kubelets = expanded_roll("rolling-kubelet-restart.yaml");
    assert_eq!(kubelets.fault, RollFault::StaysReady);
}
