use super::*;
use crate::experiment::model::{PodSelector, TaintSpec};

fn taint() -> TaintSpec {
    TaintSpec {
        key: "k".into(),
        value: None,
        effect: "NoExecute".into(),
    }
}

/// An action of `kind`. The match has no catch-all arm, so a new kind does not
/// compile until it has an example here, and so every test below enumerating
/// [`one_of_each`] meets it.
fn example(kind: ActionKind) -> Action {
    match kind {
        ActionKind::KubeletStop => Action::KubeletStop,
        ActionKind::KubeletStart => Action::KubeletStart,
        ActionKind::KubeletRestart => Action::KubeletRestart,
        ActionKind::Reboot => Action::Reboot,
        ActionKind::PowerOff => Action::PowerOff,
        ActionKind::PowerOn => Action::PowerOn,
        ActionKind::Shutdown => Action::Shutdown,
        ActionKind::Partition => Action::Partition,
        ActionKind::Heal => Action::Heal,
        ActionKind::Run => Action::Run {
            command: "a".into(),
            undo: None,
        },
        ActionKind::Cordon => Action::Cordon,
        ActionKind::Uncordon => Action::Uncordon,
        ActionKind::Drain => Action::Drain {
            on_timeout: Default::default(),
        },
        ActionKind::DeleteNode => Action::DeleteNode,
        ActionKind::DeletePods => Action::DeletePods {
            pods: PodSelector {
                workload: None,
                namespace: "default".into(),
                labels: Default::default(),
                on: None,
            },
            force: false,
        },
        ActionKind::DeletePvc => Action::DeletePvc {
            namespace: "default".into(),
            name: "data".into(),
            remove_finalizers: false,
        },
        ActionKind::Taint => Action::Taint(taint()),
        ActionKind::Untaint => Action::Untaint(taint()),
    }
}

/// One action of every kind, in the order of [`ActionKind::all`].
fn one_of_each() -> Vec<Action> {
    ActionKind::all().map(example).collect()
}

#[test]
fn every_kind_has_one_row_and_one_name() {
    let kinds: Vec<ActionKind> = one_of_each().iter().map(ActionKind::of).collect();
    assert_eq!(
        kinds,
        ActionKind::all().collect::<Vec<_>>(),
        "all() lists every kind once, in order"
    );
    for action in one_of_each() {
        let json = serde_json::to_value(&action).unwrap();
        assert_eq!(
            json["kind"],
            info(&action).name,
            "the journal's spelling of an action is its row's name"
        );
    }
    assert_eq!(
        names(),
        [
            "kubelet-stop",
            "kubelet-start",
            "kubelet-restart",
            "reboot",
            "power-off",
            "power-on",
            "shutdown",
            "partition",
            "heal",
            "run",
            "cordon",
            "uncordon",
            "drain",
            "delete-node",
            "delete-pods",
            "delete-pvc",
            "taint",
            "untaint",
        ]
    );
    for kind in ActionKind::all() {
        assert_eq!(ActionKind::named(kind.info().name), Some(kind));
    }
    assert_eq!(ActionKind::named("kubelet_stop"), None);
}

#[test]
fn every_undoable_fault_is_undone_by_its_inverse() {
    let taint = taint();
    let faults = [
        Action::KubeletStop,
        Action::PowerOff,
        Action::Shutdown,
        Action::Partition,
        Action::Cordon,
        Action::Drain {
            on_timeout: Default::default(),
        },
        Action::Taint(taint.clone()),
        Action::Run {
            command: "a".into(),
            undo: Some("b".into()),
        },
    ];
    for fault in faults {
        let inv = inverse(&fault).expect("fault has an inverse");
        assert!(undoes(&inv, &fault), "{fault:?} not undone by {inv:?}");
    }
    assert!(undoes(
        &Action::Untaint(taint.clone()),
        &Action::Taint(taint)
    ));
}

#[test]
fn restart_restores_a_stopped_kubelet_but_not_a_partition() {
    assert!(undoes(&Action::KubeletRestart, &Action::KubeletStop));
    assert!(!undoes(&Action::KubeletRestart, &Action::Partition));
    assert!(!undoes(&Action::Heal, &Action::KubeletStop));
}

#[test]
fn reboot_and_run_without_undo_have_no_inverse() {
    assert_eq!(inverse(&Action::Reboot), None);
    assert_eq!(
        inverse(&Action::Run {
            command: "x".into(),
            undo: None
        }),
        None
    );
    assert!(takes_node_down(&Action::Reboot));
    assert!(!takes_node_down(&Action::Cordon));
}

#[test]
fn repairs_are_the_inverses_of_faults() {
    let inverses: Vec<ActionKind> = one_of_each()
        .iter()
        .filter_map(inverse)
        .map(|inv| ActionKind::of(&inv))
        .collect();
    for action in one_of_each() {
        let kind = ActionKind::of(&action);
        assert_eq!(
            info(&action).repairs,
            inverses.contains(&kind),
            "{action:?}"
        );
    }
}

#[test]
fn every_fault_that_takes_a_node_down_or_has_an_undo_has_a_proof_but_run() {
    for action in one_of_each() {
        let fault = takes_node_down(&action) || inverse(&action).is_some();
        let proven = proof(&action) != Proof::None;
        let opaque = matches!(action, Action::Run { .. });
        assert_eq!(proven, fault && !opaque, "{action:?}");
    }
    assert_eq!(proof(&Action::KubeletStop), Proof::KubeletInactive);
    assert_eq!(proof(&Action::Partition), Proof::HeartbeatStopped);
    assert_eq!(proof(&Action::PowerOff), Proof::PoweredOff);
    assert_eq!(proof(&Action::Reboot), Proof::BootIdChanged);
    assert_eq!(proof(&Action::Shutdown), Proof::PoweredOff);
}

#[test]
fn a_shutdown_whose_kubelet_ends_its_pods_is_not_modelled_as_silence() {
    assert!(silences_node(&Action::PowerOff));
    assert!(!silences_node(&Action::Shutdown));
    assert!(takes_node_down(&Action::Shutdown));
    assert_eq!(inverse(&Action::Shutdown), Some(Action::PowerOn));
}

/// The transport, host-timer and doctor columns of every row agree with each other and
/// with what reads them: the executor ([`NodeOp::cuts_transport`]), the run's undos armed
/// on the node ([`undone_by_host_timer`], [`undo_watched`]) and `doctor`'s kubelet unit.
#[test]
fn every_row_sets_its_transport_timer_and_doctor_columns_consistently() {
    for action in one_of_each() {
        let kind = ActionKind::of(&action);
        let row = info(&action);
        let op = kind.node_op();
        if row.cuts_transport {
            let op = op.as_ref().unwrap_or_else(|| {
                panic!("{action:?} cuts the transport but no node command carries it")
            });
            assert!(op.cuts_transport(), "{action:?}: the executor disagrees");
        }
        if row.host_timer != HostTimer::None {
            assert!(
                row.cuts_transport && matches!(row.via, Via::Node(_)),
                "{action:?}: a host timer is for a node command that cuts the transport"
            );
            assert!(
                kind.bare().is_some(),
                "{action:?}: the undos armed on the host are found among the bare kinds"
            );
            if let Some(undo) = inverse(&action)
                && matches!(info(&undo).via, Via::Node(_))
            {
                assert!(undone_by_host_timer(&undo), "{action:?}: {undo:?}");
            }
        }
        if row.host_timer == HostTimer::TimerAndWatcher {
            let undo = inverse(&action).and_then(|undo| node_op(&undo));
            let undo = undo.unwrap_or_else(|| panic!("{action:?}: a watcher runs a node undo"));
            assert!(undo_watched(&undo), "{action:?}");
        }
        let kubelet = matches!(
            op,
            Some(NodeOp::KubeletStop | NodeOp::KubeletStart | NodeOp::KubeletRestart)
        );
        assert_eq!(
            row.doctor.contains(&NodeCheck::KubeletUnit),
            kubelet,
            "{action:?}: doctor checks the kubelet unit of every kubelet command"
        );
        if !row.cuts_transport {
            assert_eq!(row.host_timer, HostTimer::None, "{action:?}");
        }
    }
}

#[test]
fn the_operations_that_cut_the_transport_and_the_undos_armed_on_the_host() {
    for op in [
        NodeOp::KubeletStop,
        NodeOp::KubeletRestart,
        NodeOp::Partition,
        NodeOp::Reboot,
        NodeOp::PowerOff,
    ] {
        assert!(op.cuts_transport(), "{op:?}");
    }
    for op in [
        NodeOp::KubeletStart,
        NodeOp::Heal,
        NodeOp::KubeletStatus,
        NodeOp::BootId,
        NodeOp::Run("x".into()),
    ] {
        assert!(!op.cuts_transport(), "{op:?}");
    }
    for undo in [Action::KubeletStart, Action::KubeletRestart, Action::Heal] {
        assert!(undone_by_host_timer(&undo), "{undo:?}");
    }
    // A shutdown's power-on is out of band: carried, not confirmed.
    for undo in [Action::PowerOn, Action::Uncordon, Action::KubeletStop] {
        assert!(!undone_by_host_timer(&undo), "{undo:?}");
    }
    assert!(undo_watched(&NodeOp::KubeletStart));
    assert!(!undo_watched(&NodeOp::Heal));
    assert!(info(&Action::Shutdown).cuts_transport);
    assert!(!info(&Action::Cordon).cuts_transport);
}

#[test]
fn node_operations_behind_actions() {
    assert_eq!(node_op(&Action::Reboot), Some(NodeOp::Reboot));
    assert_eq!(node_op(&Action::PowerOff), Some(NodeOp::PowerOff));
    // An OS shutdown is always the node's own command, even with `power.off` set.
    assert_eq!(node_op(&Action::Shutdown), Some(NodeOp::PowerOff));
    assert_eq!(node_op(&Action::KubeletStop), Some(NodeOp::KubeletStop));
    assert_eq!(
        node_op(&Action::Run {
            command: "x".into(),
            undo: Some("y".into())
        }),
        Some(NodeOp::Run("x".into()))
    );
    assert_eq!(node_op(&Action::Cordon), None);
    assert_eq!(node_op(&Action::PowerOn), None);
}
