//! Which actions are faults, which action undoes each, and which take a node down.
//!
//! One table, used by the blast-radius check, the journal, the automatic undo and
//! `plan`, so that "what breaks a node" is decided in exactly one place.

use crate::experiment::model::Action;

/// The action that undoes `fault`, if it is a fault that can be undone.
///
/// Reboot has no inverse: the node comes back by itself.
pub fn inverse(fault: &Action) -> Option<Action> {
    match fault {
        Action::KubeletStop => Some(Action::KubeletStart),
        Action::PowerOff => Some(Action::PowerOn),
        Action::Partition => Some(Action::Heal),
        Action::Cordon | Action::Drain => Some(Action::Uncordon),
        Action::Taint(taint) => Some(Action::Untaint(taint.clone())),
        Action::Run {
            undo: Some(undo), ..
        } => Some(Action::Run {
            command: undo.clone(),
            undo: None,
        }),
        _ => None,
    }
}

/// Whether running `action` restores what `fault` broke.
pub fn undoes(action: &Action, fault: &Action) -> bool {
    match (inverse(fault), action) {
        // A kubelet restart also brings a stopped kubelet back.
        (Some(Action::KubeletStart), Action::KubeletRestart) => true,
        (Some(inv), action) => &inv == action,
        (None, _) => false,
    }
}

/// Whether the action takes the node out of service (counts against the blast radius).
pub fn takes_node_down(action: &Action) -> bool {
    matches!(
        action,
        Action::KubeletStop
            | Action::Reboot
            | Action::PowerOff
            | Action::Partition
            | Action::DeleteNode
            | Action::Drain
    )
}

/// Whether the action starts the node's machine again (after which its address may differ).
pub fn restarts_machine(action: &Action) -> bool {
    matches!(action, Action::PowerOn | Action::Reboot)
}

/// Whether the action brings a node back into service.
pub fn brings_node_back(action: &Action) -> bool {
    matches!(
        action,
        Action::KubeletStart
            | Action::KubeletRestart
            | Action::PowerOn
            | Action::Heal
            | Action::Uncordon
    )
}

/// The kebab-case name of an action, as written in experiments and shown on the timeline.
pub fn action_name(action: &Action) -> &'static str {
    match action {
        Action::KubeletStop => "kubelet-stop",
        Action::KubeletStart => "kubelet-start",
        Action::KubeletRestart => "kubelet-restart",
        Action::Reboot => "reboot",
        Action::PowerOff => "power-off",
        Action::PowerOn => "power-on",
        Action::Partition => "partition",
        Action::Heal => "heal",
        Action::Run { .. } => "run",
        Action::Cordon => "cordon",
        Action::Uncordon => "uncordon",
        Action::Drain => "drain",
        Action::DeleteNode => "delete-node",
        Action::DeletePods { .. } => "delete-pods",
        Action::DeletePvc { .. } => "delete-pvc",
        Action::Taint(_) => "taint",
        Action::Untaint(_) => "untaint",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::model::TaintSpec;

    #[test]
    fn every_undoable_fault_is_undone_by_its_inverse() {
        let taint = TaintSpec {
            key: "k".into(),
            value: None,
            effect: "NoExecute".into(),
        };
        let faults = [
            Action::KubeletStop,
            Action::PowerOff,
            Action::Partition,
            Action::Cordon,
            Action::Drain,
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
}
