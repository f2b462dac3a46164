//! What of the cluster an experiment touches: its targets' nodes, the workloads its
//! expectations, aborts, probes, targets and steps name, the namespaces whose pods a step
//! picks by label. On a cluster of 150,000 pods most pods are none of these: the terminal
//! and the run's record list the pods the experiment touches and count the others
//! (the run itself observes and judges on all of them).

use std::collections::HashSet;

use crate::experiment::Experiment;
use crate::experiment::model::{AbortKind, Action, Subject, WorkloadRef};
use crate::timeline::{PodId, PodState};

/// What the experiment touches, in the terms of a pod's reduced state.
#[derive(Debug, Default)]
pub struct Focus {
    nodes: HashSet<String>,
    workloads: HashSet<WorkloadRef>,
    /// Namespaces whose pods a step picks by label (a pod's state keeps no labels).
    namespaces: HashSet<String>,
}

impl Focus {
    /// The focus of `exp` with its targets resolved to `target_nodes`.
    pub fn of<'a>(
        exp: &Experiment,
        target_nodes: impl IntoIterator<Item = &'a Vec<String>>,
    ) -> Focus {
        let mut focus = Focus {
            nodes: target_nodes.into_iter().flatten().cloned().collect(),
            ..Focus::default()
        };
        for e in &exp.expectations {
            match &e.subject {
                Subject::Pods(p) => {
                    focus.workloads.insert(p.workload.clone());
                }
                Subject::Workload(w) => {
                    focus.workloads.insert(w.clone());
                }
                Subject::Node { .. } | Subject::Probe { .. } => {}
            }
        }
        for condition in &exp.abort.conditions {
            if let AbortKind::PodsNotReady { workload, .. } = &condition.kind {
                focus.workloads.insert(workload.clone());
            }
        }
        for probe in &exp.probes {
            if let Some((workload, _)) = probe.kind.pod() {
                focus.workloads.insert(workload.clone());
            }
        }
        for target in &exp.targets {
            if let Some(w) = &target.selector.running_pods_of {
                focus.workloads.insert(w.clone());
            }
        }
        for step in &exp.steps {
            for action in step.actions() {
                if let Action::DeletePods { pods, .. } = action {
                    match &pods.workload {
                        Some(w) => {
                            focus.workloads.insert(w.clone());
                        }
                        None => {
                            focus.namespaces.insert(pods.namespace.clone());
                        }
                    }
                }
            }
        }
        focus
    }

    /// The workloads the experiment names, in a stable order.
    pub fn workloads(&self) -> Vec<WorkloadRef> {
        let mut all: Vec<WorkloadRef> = self.workloads.iter().cloned().collect();
        all.sort_by_key(|w| w.to_string());
        all
    }

    /// Whether the experiment touches the pod `id` in `state`.
    pub fn touches(&self, id: &PodId, state: &PodState) -> bool {
        state.node.as_ref().is_some_and(|n| self.nodes.contains(n))
            || state
                .owner
                .as_ref()
                .is_some_and(|w| self.workloads.contains(w))
            || self.namespaces.contains(&id.namespace)
    }
}
