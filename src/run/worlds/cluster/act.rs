//! Carrying out one action on one node: node operations through the executor, power
//! through the out-of-band driver, API actions through the cluster client.

use std::time::Duration;

use kube::Client;

use crate::cluster;
use crate::execute::{Executor, PowerAction};
use crate::experiment::fault::{self, Via};
use crate::experiment::model::Action;
use crate::run::world::{ActError, ActResult};

impl ActResult {
    /// What a node operation did, saying so when its connection dropped as expected.
    fn from_outcome(out: crate::execute::OpOutcome) -> Self {
        let output = if out.dropped {
            format!("connection dropped, as expected\n{}", out.output)
        } else {
            out.output
        };
        ActResult {
            exit_status: out.exit_status,
            output,
        }
    }
}

/// How long past its timeout a drain may take to say what held it (its last eviction
/// request and the budgets' list).
const DRAIN_GRACE: Duration = Duration::from_secs(4);

/// Everything an action may need to reach the cluster and its nodes.
pub(crate) struct Actor<'a> {
    /// Node operations and power.
    pub executor: &'a Executor,
    /// API actions.
    pub client: &'a Client,
    /// Target name → nodes, for pod selectors restricted to a target.
    pub targets: &'a crate::cluster::ResolvedTargets,
}

impl Actor<'_> {
    /// Performs `action` on `node` (`None` for actions that act on pods or claims). Node
    /// operations and power are limited by the executor itself, which ends the command
    /// at `timeout` rather than leaving it to run on after faultline stopped waiting (an
    /// undo must never come before the fault it undoes); API actions are limited here.
    pub(crate) async fn act(
        &self,
        action: &Action,
        node: Option<&str>,
        timeout: Duration,
    ) -> Result<ActResult, ActError> {
        let node_name = node.unwrap_or_default();
        match fault::info(action).via {
            Via::NodeApi | Via::ClusterApi => {
                // A drain ends itself at its timeout, to say which budget held it: the
                // limit here only catches an API call that hangs.
                let limit = match action {
                    Action::Drain { .. } => timeout.saturating_add(DRAIN_GRACE),
                    _ => timeout,
                };
                match tokio::time::timeout(limit, self.api(action, node_name, timeout)).await {
                    Ok(result) => result,
                    Err(_) => Err(ActError::Timeout(timeout)),
                }
            }
            _ => self.on_node(action, node_name, timeout).await,
        }
    }

    async fn on_node(
        &self,
        action: &Action,
        node_name: &str,
        timeout: Duration,
    ) -> Result<ActResult, ActError> {
        let info = fault::info(action);
        match info.via {
            Via::Power(power) => {
                // Out of band when the inventory can (it cannot fail by losing the session,
                // and `docker restart` brings a kind node back where an in-band reboot only
                // stops its container); the executor falls back to the node's own command.
                let out = self.executor.power(node_name, power, timeout).await?;
                Ok(if power == PowerAction::Reboot {
                    // The session dropping is a reboot's expected outcome, and said so.
                    ActResult::from_outcome(out)
                } else {
                    ActResult {
                        exit_status: out.exit_status,
                        output: out.output,
                    }
                })
            }
            Via::Node(_) | Via::StepCommand => {
                let op = fault::node_op(action).ok_or(ActError::NotANodeOperation(info.name))?;
                let out = self.executor.perform(node_name, &op, timeout).await?;
                Ok(ActResult::from_outcome(out))
            }
            Via::NodeApi | Via::ClusterApi => Err(ActError::NotANodeOperation(info.name)),
        }
    }

    /// Carries out an action the fault table routes through the Kubernetes API.
    async fn api(
        &self,
        action: &Action,
        node_name: &str,
        timeout: Duration,
    ) -> Result<ActResult, ActError> {
        let said = |output: String| {
            Ok(ActResult {
                exit_status: None,
                output,
            })
        };
        match action {
            Action::Cordon => said(cluster::cordon(self.client, node_name).await?),
            Action::Uncordon => said(cluster::uncordon(self.client, node_name).await?),
            Action::Drain { on_timeout } => {
                let own = self.executor.node_access_namespaces();
                let drained =
                    cluster::actions::drain(self.client, node_name, timeout, *on_timeout, &own)
                        .await?;
                said(drained.describe(node_name, timeout))
            }
            Action::DeleteNode => said(cluster::delete_node(self.client, node_name).await?),
            Action::DeletePods { pods, force } => {
                let on = pods.on.as_ref().and_then(|t| self.targets.get(t));
                let deleted =
                    cluster::delete_pods(self.client, pods, on.map(Vec::as_slice), *force).await?;
                said(format!("deleted: {}", list_or_none(&deleted)))
            }
            Action::DeletePvc {
                namespace,
                name,
                remove_finalizers,
            } => said(cluster::delete_pvc(self.client, namespace, name, *remove_finalizers).await?),
            Action::Taint(spec) => said(cluster::taint(self.client, node_name, spec).await?),
            Action::Untaint(spec) => {
                said(cluster::untaint(self.client, node_name, &spec.key, &spec.effect).await?)
            }
            other => Err(ActError::NotAnApiAction(fault::action_name(other))),
        }
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}
