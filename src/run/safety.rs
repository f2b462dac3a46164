//! Interlocks checked before anything touches a cluster: the blast radius of the plan and
//! the kube context it is about to run against.

use std::collections::{BTreeMap, BTreeSet};

use crate::experiment::fault;
use crate::experiment::model::Experiment;

/// Target name → the node names it resolved to.
pub(crate) type ResolvedTargets = BTreeMap<String, Vec<String>>;

/// Why a plan is refused before it starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SafetyError {
    /// More nodes would be down at once than the experiment allows.
    #[error(
        "step `{step}` would have {down} nodes down at once ({nodes}); the experiment allows {limit}. \
         Raise `safety.maxNodesDown` in the experiment if that is really intended"
    )]
    TooManyNodesDown {
        /// Step that crosses the limit.
        step: String,
        /// How many would be down.
        down: usize,
        /// Which.
        nodes: String,
        /// The limit.
        limit: u32,
    },
    /// A fault on a control-plane node without the experiment's explicit permission.
    #[error(
        "step `{step}` does {action} on control-plane node {node}; set `safety.allowControlPlane: true` \
         in the experiment to allow faults on control-plane nodes"
    )]
    ControlPlaneNotAllowed {
        /// Step.
        step: String,
        /// Action name.
        action: &'static str,
        /// Node.
        node: String,
    },
    /// The plan would take down half or more of the control plane (and with it etcd quorum).
    #[error(
        "step `{step}` would have {down} of {total} control-plane nodes down at once, losing etcd quorum; \
         faultline never does that unless the experiment sets `safety.allowQuorumLoss: true`"
    )]
    QuorumLoss {
        /// Step.
        step: String,
        /// Control-plane nodes down.
        down: usize,
        /// Control-plane nodes in the cluster.
        total: usize,
    },
    /// The kube context is not on the allow-list.
    #[error(
        "kube context `{context}` is not on the allow-list ({allowed}); refusing to start. \
         Add it with --allow-context {context} if this is the cluster you mean"
    )]
    ContextNotAllowed {
        /// Context in use.
        context: String,
        /// The list.
        allowed: String,
    },
}

/// Checks that the plan never has more nodes down at once than allowed, touches a
/// control-plane node only with permission, and never takes the control plane's majority.
///
/// `control_plane` holds the names of every control-plane node in the cluster.
pub(crate) fn check_blast_radius(
    exp: &Experiment,
    targets: &ResolvedTargets,
    control_plane: &BTreeSet<String>,
) -> Result<(), SafetyError> {
    let limit = exp.safety.max_nodes_down.unwrap_or(1);
    let mut down: BTreeSet<String> = BTreeSet::new();
    for step in &exp.steps {
        let nodes = step
            .target
            .as_ref()
            .and_then(|t| targets.get(t))
            .cloned()
            .unwrap_or_default();
        let action = fault::info(&step.action);
        if action.takes_node_down {
            for node in &nodes {
                if control_plane.contains(node) && !exp.safety.allow_control_plane {
                    return Err(SafetyError::ControlPlaneNotAllowed {
                        step: step.name.clone(),
                        action: action.name,
                        node: node.clone(),
                    });
                }
                down.insert(node.clone());
            }
            if down.len() > limit as usize {
                return Err(SafetyError::TooManyNodesDown {
                    step: step.name.clone(),
                    down: down.len(),
                    nodes: down.iter().cloned().collect::<Vec<_>>().join(", "),
                    limit,
                });
            }
            let cp_down = down.iter().filter(|n| control_plane.contains(*n)).count();
            if cp_down > 0 && cp_down * 2 >= control_plane.len() && !exp.safety.allow_quorum_loss {
                return Err(SafetyError::QuorumLoss {
                    step: step.name.clone(),
                    down: cp_down,
                    total: control_plane.len(),
                });
            }
            if action.restarts_machine {
                // A machine that restarts (a reboot) brings the node back by itself.
                for node in &nodes {
                    down.remove(node);
                }
            }
        } else if action.brings_node_back {
            for node in &nodes {
                down.remove(node);
            }
        }
    }
    Ok(())
}

/// Refuses a context that is not on a non-empty allow-list. An empty list allows any
/// context (the inventory pins one anyway).
pub(crate) fn check_context(context: &str, allowed: &[String]) -> Result<(), SafetyError> {
    if allowed.is_empty() || allowed.iter().any(|a| a == context) {
        Ok(())
    } else {
        Err(SafetyError::ContextNotAllowed {
            context: context.to_string(),
            allowed: allowed.join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::model::*;
    use std::path::PathBuf;
    use std::time::Duration;

    fn step(name: &str, action: Action, target: &str) -> Step {
        Step {
            name: name.into(),
            at: StepTime::Offset(Bound::fixed(Duration::ZERO)),
            action,
            target: Some(target.into()),
            timeout: Duration::from_secs(60),
        }
    }

    fn experiment(steps: Vec<Step>, safety: SafetySpec) -> Experiment {
        Experiment {
            name: "x".into(),
            description: String::new(),
            tags: Vec::new(),
            source: PathBuf::from("x.yaml"),
            namespace: "default".into(),
            targets: Vec::new(),
            setup: Setup::default(),
            teardown: Teardown::default(),
            steps,
            expectations: Vec::new(),
            probes: Vec::new(),
            abort: Default::default(),
            observe: ObserveSpec {
                after_last_step: None,
                namespaces: Vec::new(),
                all_namespaces: false,
            },
            safety,
        }
    }

    fn targets(pairs: &[(&str, &[&str])]) -> ResolvedTargets {
        pairs
            .iter()
            .map(|(t, nodes)| (t.to_string(), nodes.iter().map(|n| n.to_string()).collect()))
            .collect()
    }

    fn cp(nodes: &[&str]) -> BTreeSet<String> {
        nodes.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn two_nodes_down_at_once_needs_permission() {
        let steps = vec![
            step("a", Action::KubeletStop, "one"),
            step("b", Action::PowerOff, "two"),
        ];
        let t = targets(&[("one", &["w1"]), ("two", &["w2"])]);
        let err = check_blast_radius(
            &experiment(steps.clone(), SafetySpec::default()),
            &t,
            &cp(&[]),
        );
        assert!(
            matches!(
                err,
                Err(SafetyError::TooManyNodesDown {
                    down: 2,
                    limit: 1,
                    ..
                })
            ),
            "{err:?}"
        );
        let allowed = SafetySpec {
            max_nodes_down: Some(2),
            ..SafetySpec::default()
        };
        assert_eq!(
            check_blast_radius(&experiment(steps, allowed), &t, &cp(&[])),
            Ok(())
        );
    }

    #[test]
    fn a_node_brought_back_no_longer_counts() {
        let steps = vec![
            step("a", Action::KubeletStop, "one"),
            step("a2", Action::KubeletStart, "one"),
            step("b", Action::Partition, "two"),
        ];
        let t = targets(&[("one", &["w1"]), ("two", &["w2"])]);
        assert_eq!(
            check_blast_radius(&experiment(steps, SafetySpec::default()), &t, &cp(&[])),
            Ok(())
        );
    }

    #[test]
    fn control_plane_needs_permission_and_never_loses_quorum_by_default() {
        let steps = vec![step("a", Action::KubeletStop, "cp")];
        let t = targets(&[("cp", &["c1"])]);
        let three = cp(&["c1", "c2", "c3"]);
        let err = check_blast_radius(
            &experiment(steps.clone(), SafetySpec::default()),
            &t,
            &three,
        );
        assert!(
            matches!(err, Err(SafetyError::ControlPlaneNotAllowed { .. })),
            "{err:?}"
        );
        let allow = SafetySpec {
            allow_control_plane: true,
            ..SafetySpec::default()
        };
        assert_eq!(
            check_blast_radius(&experiment(steps.clone(), allow.clone()), &t, &three),
            Ok(())
        );
        // The only control-plane node: taking it down loses the majority.
        let one = cp(&["c1"]);
        let err = check_blast_radius(&experiment(steps.clone(), allow.clone()), &t, &one);
        assert!(
            matches!(
                err,
                Err(SafetyError::QuorumLoss {
                    down: 1,
                    total: 1,
                    ..
                })
            ),
            "{err:?}"
        );
        let quorum = SafetySpec {
            allow_quorum_loss: true,
            ..allow
        };
        assert_eq!(
            check_blast_radius(&experiment(steps, quorum), &t, &one),
            Ok(())
        );
    }

    #[test]
    fn contexts_off_a_non_empty_allow_list_are_refused() {
        assert_eq!(check_context("lab", &[]), Ok(()));
        assert_eq!(check_context("lab", &["lab".into()]), Ok(()));
        let err = check_context("prod", &["lab".into(), "kind".into()]);
        assert!(
            err.unwrap_err()
                .to_string()
                .contains("--allow-context prod")
        );
    }
}
