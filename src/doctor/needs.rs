//! What a set of experiments needs from a node: which operations it runs there (and their
//! undo), which out-of-band power actions, whether a self-restore is armed first. Read
//! from the fault table, so `doctor` checks exactly what a run would do.

use std::collections::BTreeSet;

use crate::execute::{NodeOp, PowerAction};
use crate::experiment::fault::{self, Via};
use crate::experiment::model::{Experiment, ProbeKind, Step};

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
    /// `true`: no experiment was given; every command the inventory configures is checked,
    /// and one it does not configure is no failure.
    pub everything: bool,
}

impl Needs {
    /// What `doctor` checks without experiments: every configured node command.
    pub fn everything() -> Needs {
        Needs {
            ops: vec![
                NodeOp::KubeletStop,
                NodeOp::KubeletStart,
                NodeOp::KubeletRestart,
                NodeOp::KubeletStatus,
                NodeOp::Reboot,
                NodeOp::PowerOff,
                NodeOp::Partition,
                NodeOp::Heal,
            ],
            power: BTreeSet::new(),
            self_restore: true,
            everything: true,
        }
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

    /// Whether a kubelet operation is among the needs (the kubelet unit then matters).
    pub fn touches_kubelet(&self) -> bool {
        self.ops.iter().any(|op| {
            matches!(
                op,
                NodeOp::KubeletStop | NodeOp::KubeletStart | NodeOp::KubeletRestart
            )
        })
    }

    fn add_op(&mut self, op: NodeOp) {
        if !self.ops.contains(&op) {
            self.ops.push(op);
        }
    }

    fn add_step(&mut self, step: &Step) {
        let action = &step.action;
        let add = |needs: &mut Needs, action: &crate::experiment::model::Action| match &fault::info(
            action,
        )
        .via
        {
            Via::Node(op) => needs.add_op(op.clone()),
            Via::StepCommand => {
                if let Some(op) = fault::node_op(action) {
                    needs.add_op(op);
                }
            }
            Via::Power(PowerAction::Status) => {}
            Via::Power(power) => {
                needs.power.insert(*power);
            }
            Via::NodeApi | Via::ClusterApi => {}
        };
        add(self, action);
        if let crate::experiment::model::Action::Run {
            undo: Some(undo), ..
        } = action
        {
            self.add_op(NodeOp::Run(undo.clone()));
        }
        if let Some(inverse) = fault::inverse(action) {
            add(self, &inverse);
            // An undo carried out on the node is armed there first.
            if matches!(fault::info(&inverse).via, Via::Node(_) | Via::StepCommand) {
                self.self_restore = true;
            }
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

    #[test]
    fn no_experiment_is_everything() {
        let n = Needs::of(&[]);
        assert!(n.everything);
        assert!(n.ops.contains(&NodeOp::Partition));
    }
}
