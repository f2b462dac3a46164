//! The recorded roll (`fixtures/records/rolls/rolling-upgrade-workers.json`: drain, reboot,
//! uncordon on three workers in turn) explained node by node.

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::experiment::model::{Bound, BoundSymbol, BoundTerm, StepTime};
use crate::record::RunRecord;

fn rolled() -> RunRecord {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/records/rolls/rolling-upgrade-workers.json");
    RunRecord::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

const WORKERS: [&str; 3] = ["lab-worker-1", "lab-worker-2", "lab-worker-3"];

fn find<'a>(roll: &'a RollExplained, node: &str, t: Transition) -> &'a Explained {
    roll.items
        .iter()
        .find(|i| i.node == node && i.prediction.transition == t)
        .unwrap_or_else(|| panic!("{node} {t:?}: {roll:?}"))
}

fn opens(w: Window) -> Duration {
    match w {
        Window::Between { earliest, .. } => earliest,
        Window::Never => panic!("never"),
    }
}

#[test]
fn every_worker_of_a_recorded_roll_is_explained_from_its_own_issue() {
    let r = rolled();
    let e = explain(&r);
    let text = e.render(&r);
    // No step silenced a node: every line is the roll's.
    assert!(e.items.is_empty(), "{text}");
    assert_eq!(e.rolls.len(), 1, "{text}");
    let roll = &e.rolls[0];
    assert_eq!(roll.roll, "upgrade workers");
    for w in WORKERS {
        for t in [
            Transition::NodeUnknown,
            Transition::NodeTainted,
            Transition::NodeReady,
        ] {
            assert_eq!(find(roll, w, t).fit, Fit::Inside, "{w} {t:?}: {text}");
        }
    }
    // Each worker's return is counted from its own reboot: it opens after the worker
    // before was seen back, not at the first worker's.
    for pair in WORKERS.windows(2) {
        let before = find(roll, pair[0], Transition::NodeReady)
            .observed
            .expect("seen back");
        assert!(
            opens(find(roll, pair[1], Transition::NodeReady).prediction.window) > before,
            "{text}"
        );
        assert_eq!(
            find(roll, pair[1], Transition::RollIssued).fit,
            Fit::Inside,
            "{text}"
        );
    }
    assert!(text.contains("11 of 11 decided transition(s)"), "{text}");
}

#[test]
fn a_worker_issued_before_the_one_before_was_back_plus_settle_is_early() {
    let mut r = rolled();
    // As if the roll's settle had been 60 s: the second worker came 30 s too soon.
    let step = r
        .experiment
        .steps
        .iter_mut()
        .find(|s| s.name == "upgrade workers (lab-worker-2) drain")
        .expect("the second worker's first step");
    let StepTime::When { delay, .. } = &mut step.at else {
        panic!("{:?}", step.at)
    };
    *delay = Bound {
        terms: vec![BoundTerm {
            factor: 1.0,
            symbol: BoundSymbol::Fixed(Duration::from_secs(60)),
        }],
    };
    let e = explain(&r);
    let text = e.render(&r);
    let issued = find(&e.rolls[0], "lab-worker-2", Transition::RollIssued);
    assert!(matches!(issued.fit, Fit::Early(_)), "{text}");
    assert!(e.unexplained().next().is_some(), "{text}");
    assert!(text.contains("1 deviation(s)"), "{text}");
}
