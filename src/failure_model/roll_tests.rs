//! A roll's nodes one after the other: each issued once the one before is back plus
//! `settle`, its windows counted from its own issue.

use std::time::Duration;

use super::{
    ControllerSettings, ModelNode, RollFault, RollInput, Rule, Transition, Window, predict_roll,
};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn cluster(names: &[&str]) -> Vec<ModelNode> {
    names
        .iter()
        .map(|n| ModelNode {
            name: (*n).to_string(),
            zone: String::new(),
            ready: true,
        })
        .collect()
}

fn batches(names: &[&str]) -> Vec<Vec<String>> {
    names.iter().map(|n| vec![(*n).to_string()]).collect()
}

fn earliest(w: Window) -> Option<Duration> {
    match w {
        Window::Between { earliest, .. } => Some(earliest),
        Window::Never => None,
    }
}

#[test]
fn a_roll_that_leaves_its_nodes_ready_goes_on_every_settle() {
    let settings = ControllerSettings::default();
    let names = ["w1", "w2", "w3"];
    let b = batches(&names);
    let roll = RollInput {
        batches: &b,
        from: secs(5),
        settle: secs(20),
        fault: RollFault::StaysReady,
    };
    let rows = predict_roll(&settings, &cluster(&names), &[], &roll);
    let issued: Vec<_> = rows.iter().map(|r| r.issued).collect();
    let at = |s| Window::Between {
        earliest: secs(s),
        latest: Some(secs(s)),
    };
    assert_eq!(issued, vec![at(5), at(25), at(45)]);
    for r in &rows {
        let unknown = r
            .predictions
            .iter()
            .find(|p| p.transition == Transition::NodeUnknown)
            .expect("an Unknown prediction");
        assert_eq!(unknown.window, Window::Never);
        assert_eq!(unknown.rule, Rule::StaysReady);
    }
}

#[test]
fn a_reboot_roll_takes_each_next_node_after_two_renewals_and_settle() {
    let settings = ControllerSettings::default(); // lease 40 s: renewed every 10 s
    let names = ["w1", "w2", "w3"];
    let b = batches(&names);
    let roll = RollInput {
        batches: &b,
        from: Duration::ZERO,
        settle: secs(30),
        fault: RollFault::ComesBack,
    };
    let rows = predict_roll(&settings, &cluster(&names), &[], &roll);
    let names_seen: Vec<&str> = rows.iter().map(|r| r.node.as_str()).collect();
    assert_eq!(names_seen, names);
    let firsts: Vec<_> = rows.iter().map(|r| earliest(r.issued)).collect();
    assert_eq!(firsts, vec![Some(secs(0)), Some(secs(40)), Some(secs(80))]);
    // The boot time is not known: after the first, no latest issue, and every window of a
    // node is open and counted from its own issue.
    assert!(matches!(
        rows[1].issued,
        Window::Between { latest: None, .. }
    ));
    for r in &rows {
        assert!(r.if_still_silent);
        let unknown = r
            .predictions
            .iter()
            .find(|p| p.transition == Transition::NodeUnknown)
            .expect("Unknown if still silent");
        // 50 s grace after the last renewal, up to 10 s before the reboot.
        assert_eq!(
            unknown.window,
            Window::Between {
                earliest: earliest(r.issued).unwrap() + secs(40),
                latest: None
            }
        );
    }
}

#[test]
fn a_roll_whose_node_never_comes_back_gets_no_further() {
    let settings = ControllerSettings::default();
    let names = ["w1", "w2"];
    let b = batches(&names);
    let roll = RollInput {
        batches: &b,
        from: Duration::ZERO,
        settle: secs(10),
        fault: RollFault::Silences,
    };
    let rows = predict_roll(&settings, &cluster(&names), &[], &roll);
    let ready = rows[0]
        .predictions
        .iter()
        .find(|p| p.transition == Transition::NodeReady)
        .expect("Ready again said");
    assert_eq!(ready.window, Window::Never);
    assert!(matches!(
        rows[0]
            .predictions
            .iter()
            .find(|p| p.transition == Transition::NodeUnknown)
            .map(|p| p.window),
        Some(Window::Between {
            latest: Some(_),
            ..
        })
    ));
    assert_eq!(rows[1].issued, Window::Never);
    assert!(rows[1].predictions.is_empty());
}
