//! Recovery figures over recorded runs.

use crate::judge_support::*;
use faultline::judge::figures;

#[test]
fn kubelet_stop_figures() {
    let f = figures(&experiment(vec![]), &targets(), &timeline("kubelet-stop"));
    assert_eq!(f.fault_step.as_deref(), Some("stop kubelet"));
    assert_eq!(f.node_not_ready_ms, Some(21300));
    assert_eq!(f.unreachable_taint_ms, Some(21300));
    assert_eq!(f.first_eviction_ms, Some(31500));
    assert_eq!(
        f.replacement_scheduled_ms,
        Some(31700),
        "created unscheduled at +31.6s"
    );
    assert_eq!(f.replacement_ready_ms, Some(33000));
    assert_eq!(f.workloads_available_ms, Some(96100), "db is the last back");
    assert_eq!(f.node_ready_again_ms, Some(92000));
}

#[test]
fn reboot_figures_have_no_eviction() {
    let f = figures(&experiment(vec![]), &targets(), &timeline("reboot"));
    assert_eq!(f.fault_step.as_deref(), Some("reboot"));
    assert_eq!(f.node_not_ready_ms, Some(21000));
    assert_eq!(f.first_eviction_ms, None);
    assert_eq!(f.replacement_scheduled_ms, None);
    assert_eq!(f.workloads_available_ms, Some(26500));
    assert_eq!(f.node_ready_again_ms, Some(24000));
}

#[test]
fn a_node_that_never_returns_has_no_ready_again_figure() {
    let t = prefix(&timeline("kubelet-stop"), 60000);
    let f = figures(&experiment(vec![]), &targets(), &t);
    assert_eq!(f.node_not_ready_ms, Some(21300));
    assert_eq!(f.node_ready_again_ms, None);
    assert_eq!(
        f.workloads_available_ms, None,
        "db and agent still degraded"
    );
}

#[test]
fn no_fault_step_no_figures() {
    let mut t = timeline("kubelet-stop");
    t.entries
        .retain(|e| !matches!(e.event, faultline::timeline::Event::Step { .. }));
    let f = figures(&experiment(vec![]), &targets(), &t);
    assert_eq!(f, faultline::judge::Figures::default());
}
