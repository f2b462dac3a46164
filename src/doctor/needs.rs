//! What a set of experiments needs from a node: which operations it runs there (and their
//! undo), which out-of-band power actions, whether a self-restore is armed first. Read
//! from the fault table, so `doctor` checks exactly what a run would do.

use std::collections::BTreeSet;

use crate::execute::{NodeOp, PowerAction};
use crate::experiment::fault::{self, ActionKind, NodeCheck, Via};
use crate::experiment::model::{Action, Experiment, ProbeKind, Step};

/// The operations, power actions and self-restores the experiments use on one node (or on
/// every node, for `doctor`, which does not know yet which nodes targets will resolve to).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// Node operations, in first-use order, each once.
    pub ops: Vec<NodeOp>,
    /// Out-of-band power actions.
    pub power: BTreeSet<PowerAction>,
    /// A fault undone on the node is armed as a self-restore first.
    pub self_restore: bool,
    /// The checks the actions' rows in the fault table ask for beside their commands
    /// ([`NodeCheck`]).
    pub(crate) checks: BTreeSet<NodeCheck>,
    /// `true`: no experiment was given; every command the inventory configures is checked,
    /// and one it does not configure is no failure.
    pub everything: bool,
}

impl Needs {
    /// What `doctor` checks without experiments: the command of every node operation the
    /// fault table's rows carry out (the in-band fallbacks of power actions included), the
    /// kubelet stop's proof (`commands.kubeletStatus`), and every check a row asks for; in
    /// the inventory's order of commands.
    pub fn everything() -> Needs {
        let mut needs = Needs {
            self_restore: true,
            everything: true,
            ..Needs::default()
        };
        for kind in ActionKind::all() {
            if let Some(op) = kind.node_op() {
                needs.add_op(op);
            }
            needs.checks.extend(kind.info().doctor);
        }
        needs.add_op(NodeOp::KubeletStatus);
        needs.ops.sort_by_key(NodeOp::command_key);
        needs
    }

    /// What the experiments' steps and node probes need, on any node.
    pub fn of(experiments: &[Experiment]) -> Needs {
        if experiments.is_empty() {
            return Needs::everything();
        }
        let mut needs = Needs::default();
        for exp in experiments {
            for step in &exp.steps {
                needs.add_step(step);
            }
            for probe in &exp.probes {
                if let ProbeKind::Command {
                    command,
                    on: Some(_),
                } = &probe.kind
                {
                    needs.add_op(NodeOp::Run(command.clone()));
                }
            }
        }
        needs
    }

    /// What one experiment needs on `node`, given its resolved targets.
    pub fn on_node(
        exp: &Experiment,
        targets: &std::collections::BTreeMap<String, Vec<String>>,
        node: &str,
    ) -> Needs {
        let mut needs = Needs::default();
        for step in &exp.steps {
            if step.nodes(targets).iter().any(|n| n == node) {
                needs.add_step(step);
            }
        }
        for probe in &exp.probes {
            if let ProbeKind::Command {
                command,
                on: Some(on),
            } = &probe.kind
                && targets.get(on).is_some_and(|n| n.iter().any(|n| n == node))
            {
                needs.add_op(NodeOp::Run(command.clone()));
            }
        }
        needs
    }

    /// Whether nothing is needed on the node.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.power.is_empty() && !self.self_restore
    }

    /// Whether an action or undo acts on the kubelet (the kubelet unit then matters): its
    /// row asks for [`NodeCheck::KubeletUnit`].
    pub fn touches_kubelet(&self) -> bool {
        self.checks.contains(&NodeCheck::KubeletUnit)
    }

    fn add_op(&mut self, op: NodeOp) {
        if !self.ops.contains(&op) {
            self.ops.push(op);
        }
    }

    fn add_step(&mut self, step: &Step) {
        for action in step.actions() {
            self.add_action(action);
            if let Action::Run {
                undo: Some(undo), ..
            } = action
            {
                self.add_op(NodeOp::Run(undo.clone()));
            }
            if let Some(inverse) = fault::inverse(action) {
                self.add_action(&inverse);
                // An undo carried out on the node is armed there first.
                if matches!(fault::info(&inverse).via, Via::Node(_) | Via::StepCommand) {
                    self.self_restore = true;
                }
            }
        }
    }

    /// The operation or power action that carries `action` out, and the checks its row
    /// asks for.
    fn add_action(&mut self, action: &Action) {
        let row = fault::info(action);
        self.checks.extend(row.doctor);
        match &row.via {
            Via::Node(op) => self.add_op(op.clone()),
            Via::StepCommand => {
                if let Some(op) = fault::node_op(action) {
                    self.add_op(op);
                }
            }
            Via::Power(PowerAction::Status) => {}
            Via::Power(power) => {
                self.power.insert(*power);
            }
            Via::NodeApi | Via::ClusterApi => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp(yaml: &str) -> Experiment {
        let yaml = format!(
            "description: d\n{yaml}expect:\n  - {{name: back, node: v, becomes: Ready, within: 5m}}\n"
        );
        crate::experiment::parse(&yaml, std::path::Path::new("e.yaml"))
            .unwrap_or_else(|d| panic!("{d}"))
    }

    #[test]
    fn a_kubelet_stop_needs_stop_start_and_a_self_restore() {
        let e = exp(
            "name: e\ntargets: {v: {role: worker, count: 1}}\nsteps:\n  - {name: stop, at: 0s, do: kubelet-stop, target: v}\n  - {name: start, at: 30s, do: kubelet-start, target: v}\n",
        );
        let n = Needs::of(&[e]);
        assert_eq!(n.ops, [NodeOp::KubeletStop, NodeOp::KubeletStart]);
        assert!(n.self_restore);
        assert!(n.touches_kubelet());
        assert!(n.power.is_empty());
        assert!(!n.everything);
    }

    #[test]
    fn power_and_run_steps() {
        let e = exp(
            "name: e\ntargets: {v: {role: worker, count: 1}}\nsteps:\n  - {name: off, at: 0s, do: power-off, target: v}\n  - {name: mark, at: 1s, do: run, target: v, command: touch /tmp/x, undo: rm -f /tmp/x}\n  - {name: cordon, at: 2s, do: cordon, target: v}\n",
        );
        let n = Needs::of(&[e]);
        assert_eq!(
            n.power.iter().copied().collect::<Vec<_>>(),
            [PowerAction::On, PowerAction::Off]
        );
        assert_eq!(
            n.ops,
            [
                NodeOp::Run("touch /tmp/x".into()),
                NodeOp::Run("rm -f /tmp/x".into())
            ]
        );
        assert!(n.self_restore, "the run step's undo is armed on the node");
        assert!(!n.touches_kubelet());
    }

    /// A rolling step's `sequence`: every action of it, not only its first.
    #[test]
    fn a_rolling_sequence_needs_each_of_its_actions() {
        let e = exp(
            "name: e\ntargets: {v: {role: worker}}\nsteps:\n  - name: up\n    at: 0s\n    target: v\n    roll: {}\n    sequence:\n      - do: drain\n      - do: kubelet-restart\n      - do: uncordon\n",
        );
        let n = Needs::of(&[e]);
        assert_eq!(n.ops, [NodeOp::KubeletRestart]);
        assert!(n.touches_kubelet());
    }

    #[test]
    fn no_experiment_is_everything() {
        let n = Needs::of(&[]);
        assert!(n.everything);
        assert!(n.ops.contains(&NodeOp::Partition));
    }

    /// Without experiments `doctor` checks what every row of the fault table would need:
    /// a new fault's node command and checks join the list by its row alone.
    #[test]
    fn everything_is_every_command_and_check_of_the_fault_table() {
        let n = Needs::everything();
        assert_eq!(
            n.ops,
            [
                NodeOp::KubeletStop,
                NodeOp::KubeletStart,
                NodeOp::KubeletRestart,
                NodeOp::KubeletStatus,
                NodeOp::Reboot,
                NodeOp::PowerOff,
                NodeOp::Partition,
                NodeOp::Heal,
            ]
        );
        for kind in ActionKind::all() {
            if let Some(op) = kind.node_op() {
                assert!(n.ops.contains(&op), "{kind:?}");
            }
            for check in kind.info().doctor {
                assert!(n.checks.contains(check), "{kind:?}");
            }
        }
        assert!(n.touches_kubelet());
        assert!(n.self_restore);
    }

    #[test]
    fn a_partition_needs_no_kubelet_unit() {
        let e = exp(
            "name: e\ntargets: {v: {role: worker, count: 1}}\nsteps:\n  - {name: cut, at: 0s, do: partition, target: v}\n  - {name: heal, at: 30s, do: heal, target: v}\n",
        );
        let n = Needs::of(&[e]);
        assert_eq!(n.ops, [NodeOp::Partition, NodeOp::Heal]);
        assert!(!n.touches_kubelet());
        assert!(n.self_restore);
    }
}
