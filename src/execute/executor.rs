//! The executor itself: one inventory's nodes, the connections kept open to them, the
//! commands sent ahead, and the API client; and the calls that ask about a node without
//! running anything there. Running, priming, power and the self-restore each have a
//! module of their own, which adds its calls to [`Executor`].

use std::sync::Arc;
use std::time::Duration;

use crate::experiment::fault::NodeOp;
use crate::inventory::{Inventory, NodeAccess, TransportKind};

use super::backstop::BackstopTimers;
use super::deadline::{CONFIRM_SLACK, REAP, ends_within};
use super::error::ExecError;
use super::local::PrimedDockerExec;
use super::plan::{command_text, plan, ssh_target};
use super::pod;
use super::primed::{PRIMED_EXTRA_WAIT, PrimedCommands};
use super::ssh::{self, SessionPool};

/// Runs operations on the nodes of one inventory. Clones share the SSH connections kept
/// open for the nodes ([`Executor::open_sessions`]); they close when the last clone goes.
#[derive(Debug, Clone)]
pub struct Executor {
    /// The nodes and how each is reached.
    inventory: Inventory,
    /// The SSH connections kept open to the nodes.
    pub(super) sessions: Arc<SessionPool>,
    /// Commands sent ahead of their step, waiting on their nodes (`Executor::prime`).
    pub(super) primed: Arc<PrimedCommands>,
    /// The API client of the pod transport: the run's own when it gave one, else connected
    /// at the first command that needs it.
    api: ApiHandle,
    /// The run whose commands these are, labelled on its node-access pods
    /// ([`pod::RUN_LABEL`]); `None` outside a run (`doctor`, `restore`).
    pub(super) run: Option<String>,
    /// How a primed `docker exec -i` reaches its container.
    pub(super) docker_exec: PrimedDockerExec,
    /// The systemd timers armed as self-restores, which the faults they end are gated on
    /// ([`super::backstop`]).
    pub(super) backstops: Arc<BackstopTimers>,
    /// The node-access pods kept on the nodes reached through the API for the run
    /// ([`pod::kept`]).
    pub(super) kept_pods: Arc<pod::kept::KeptPods>,
}

/// The executor's API client, shared by its clones and connected once.
#[derive(Clone, Default)]
struct ApiHandle(std::sync::Arc<tokio::sync::OnceCell<kube::Client>>);

impl std::fmt::Debug for ApiHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.initialized() {
            "ApiHandle(connected)"
        } else {
            "ApiHandle(not connected)"
        })
    }
}

impl Executor {
    /// Wrap an inventory; nothing is contacted yet.
    pub fn new(inventory: Inventory) -> Executor {
        Executor {
            inventory,
            sessions: Arc::default(),
            primed: Arc::default(),
            api: ApiHandle::default(),
            run: None,
            docker_exec: PrimedDockerExec::default(),
            backstops: Arc::default(),
            kept_pods: Arc::default(),
        }
    }

    /// The shell text `op` is sent as to `access`'s node: its command, and for a fault
    /// that cuts the API transport on a node whose self-restore can be asked (its
    /// `restoreWaiting`), gated on that restore still waiting ([`super::backstop`]). Sending ahead and running use it
    /// alike, so a command sent ahead is found again by its text.
    pub(super) fn op_text(&self, access: &NodeAccess, op: &NodeOp) -> Result<String, ExecError> {
        let command = command_text(access, op, self.run.as_deref())?;
        Ok(
            if access.transport == TransportKind::Pod && op.cuts_transport() {
                self.backstops.gate(&access.name, command)
            } else {
                command
            },
        )
    }

    /// Sends primed `docker exec -i` commands the way `via` says (by default straight
    /// into the container's namespaces where faultline can do it as the engine would).
    pub fn with_primed_docker_exec(self, via: PrimedDockerExec) -> Executor {
        Executor {
            docker_exec: via,
            ..self
        }
    }

    /// Labels the node-access pods of the commands it carries with `run` (the run's id),
    /// so that a `restore` that could not take the cluster lock tells them from another
    /// run's.
    pub fn for_run(self, run: &str) -> Executor {
        Executor {
            run: Some(run.to_string()),
            ..self
        }
    }

    /// Carries the pod transport's commands over `client` (the run's, with its API
    /// failover) instead of connecting on first use.
    pub fn with_client(self, client: kube::Client) -> Executor {
        let api = ApiHandle::default();
        let _ = api.0.set(client);
        Executor { api, ..self }
    }

    /// The API client of the pod transport, connected from the inventory's kubeconfig and
    /// context at first use.
    pub(super) async fn client(&self, node: &str) -> Result<kube::Client, ExecError> {
        let inv = &self.inventory;
        self.api
            .0
            .get_or_try_init(|| async {
                crate::cluster::connect_with_failover(
                    inv.kubeconfig(),
                    inv.context(),
                    &inv.cluster().api_endpoints(),
                )
                .await
                .map(|c| c.client)
            })
            .await
            .cloned()
            .map_err(|e| ExecError::Pod {
                node: node.to_string(),
                source: pod::PodError::Exec {
                    namespace: String::new(),
                    pod: String::new(),
                    message: format!("cannot connect to the API server: {e}"),
                },
            })
    }

    /// The namespaces faultline's node-access pods run in: those of the nodes reached
    /// through the API. Its own pods are told from a tenant's by the label there alone.
    pub fn node_access_namespaces(&self) -> std::collections::BTreeSet<String> {
        self.inventory.node_access_namespaces()
    }

    /// Whether `node` is reached through the API (`transport: pod`).
    pub fn through_api(&self, node: &str) -> bool {
        self.inventory
            .node(node)
            .is_some_and(|a| a.transport == TransportKind::Pod)
    }

    /// Opens and logs into the SSH connection of each of `nodes` that reaches its node
    /// over SSH and has none kept yet, all at once, each within its connect timeout (twice
    /// over, for the handshake), so that a step's commands start when it is due instead of
    /// one handshake later. The loop calls it ahead of every step. A node that cannot be
    /// reached now is reported here and tried again by its command; other transports have
    /// nothing to open.
    pub async fn open_sessions(&self, nodes: &[&str]) -> Vec<(String, Result<(), ExecError>)> {
        futures::future::join_all(nodes.iter().map(|node| async move {
            let opened = match self.access(node) {
                Err(e) => Err(e),
                Ok(access) if access.transport != TransportKind::Ssh => Ok(()),
                Ok(access) => {
                    let limit = access.ssh.connect_timeout.saturating_mul(2);
                    ssh::open(self.sessions.clone(), ssh_target(&access), limit)
                        .await
                        .map_err(|source| ExecError::Ssh {
                            node: node.to_string(),
                            source,
                        })
                }
            };
            (node.to_string(), opened)
        }))
        .await
    }

    /// The inventory this executor acts on.
    pub fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    /// How `node` is reached, or [`ExecError::UnknownNode`].
    pub(super) fn access(&self, node: &str) -> Result<NodeAccess, ExecError> {
        self.inventory
            .node(node)
            .ok_or_else(|| ExecError::UnknownNode(node.to_string()))
    }

    /// The shell text `op` runs on `node`, before the transport wraps it (`sudo`, `docker
    /// exec`): for `doctor`, which checks that the programs it names exist on the node.
    pub fn command_of(&self, node: &str, op: &NodeOp) -> Result<String, ExecError> {
        command_text(&self.access(node)?, op, self.run.as_deref())
    }

    /// The exact command `op` would run on `node` and how, for `plan` and `--dry-run`.
    /// Holds no secrets: passwords are only ever read from the environment at connect time.
    pub fn describe(&self, node: &str, op: &NodeOp) -> String {
        let planned = self.access(node).and_then(|a| {
            command_text(&a, op, self.run.as_deref()).and_then(|c| plan(&a, c, None, None))
        });
        match planned {
            Ok(plan) => plan.show(),
            Err(e) => format!("cannot run: {e}"),
        }
    }

    /// The longest a call given the time limit `limit` can take: the limit, then the wait
    /// to hear the node's deadline end the command, then the wait for the cut session or
    /// the killed local client. A caller that wraps a call in a timeout of its own must
    /// allow at least this, or it drops the call before the command is known to be over.
    pub fn longest_wait(limit: Duration) -> Duration {
        limit
            .saturating_add(ends_within(limit))
            .saturating_add(PRIMED_EXTRA_WAIT)
            .saturating_add(CONFIRM_SLACK)
            .saturating_add(REAP)
    }
}
