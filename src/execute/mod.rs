//! Actions on nodes: render the command an operation needs, carry it over the node's
//! transport (SSH or a local argv such as `docker exec`), drive out-of-band power, arm
//! self-restoring faults (the fault journal that `restore` replays is `crate::journal`).
//!
//! This stage only makes things happen on machines and says precisely what happened; it
//! looks at the Kubernetes API only to carry commands through it (`transport: pod`,
//! [`pod`]).
//!
//! # When a call returns, its command is over
//!
//! [`Executor::perform`], [`Executor::power`], [`Executor::arm_restore`] and the other
//! calls that run a command return only once that command is over where it runs: it
//! finished, or it was ended. A command still running after its step gave up on it could
//! apply a fault after the run's undo, with nothing left to undo it.
//!
//! Cutting the client off is not enough for that: closing an SSH session does not stop
//! the remote shell (no terminal, no SIGHUP), and killing `docker exec` or `oc debug`
//! leaves the process in the container or on the host running. So the NODE enforces the
//! deadline: every command is sent as `exec timeout -k 5 <secs> sh -c '<command>'`
//! ([`KILL_AFTER_SECS`]; `timeout` is GNU coreutils on the distributions the profiles
//! cover, BusyBox 1.35 or later on k3s images). When the time limit passes, faultline
//! keeps the session (or the local client) and waits, a few seconds at most, to hear the
//! command end there; only when it cannot hear that does it cut the session, kill the
//! local client and wait for it, and say so. The two outcomes are distinct errors:
//! [`ExecError::TimedOutEnded`] (it was ended, or never started) and
//! [`ExecError::TimedOutUnconfirmed`] (the node's deadline ends it, but nobody saw it).
//! Local argv commands (out-of-band power) run in a process group of their own, which is
//! killed and reaped on a timeout. A call takes at most [`Executor::longest_wait`] for a
//! given time limit; dropping its future instead (an outer `tokio::time::timeout`) cuts
//! the session and kills the local process group, but confirms nothing.
//!
//! Reboots and power-offs are the exception: their session dropping, or their command
//! hanging past the limit once sent, is the expected outcome and counts as success.
//!
//! A timed step's SSH commands can be sent ahead ([`Executor::prime`]) to wait on the
//! node behind a gate until the step is due; the `primed` module says how that keeps
//! these rules.

mod bridge;
mod local;
mod output;
pub mod pod;
mod primed;
pub(crate) mod render;
mod ssh;
mod ssh_pool;
mod watch;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::inventory::{Inventory, NodeAccess, TransportKind};
pub use output::MAX_OUTPUT;
pub(crate) use output::read_tail_async;
use primed::{PRIMED_EARLY, PRIMED_EXTRA_WAIT, PRIMED_LATE, PrimedCommands};
use render::RenderError;
use ssh::SessionPool;
pub use ssh::SshError;
use ssh::{Limits, Secret, SshEnd, SshTarget};

use crate::experiment::fault::{CommandKey, KeyTable, PowerKey};
pub use crate::experiment::fault::{NodeCommand, NodeOp, PowerAction};

/// How a node says which boot it is in when the inventory sets no `commands.bootId`: the
/// kernel's boot id, which changes at every boot of a machine, and the start time of PID 1
/// (in clock ticks since the kernel booted), which changes when a node container (kind,
/// k3d) is restarted on a kernel that did not reboot.
pub const DEFAULT_BOOT_ID: &str =
    "cat /proc/sys/kernel/random/boot_id && cut -d' ' -f22 /proc/1/stat";

/// Seconds the node's `timeout` waits after its TERM before it sends KILL.
pub const KILL_AFTER_SECS: u64 = 5;

/// How long past the node's own deadline faultline listens for the command to end there
/// before it gives up on hearing it (network latency, a slow node).
const CONFIRM_SLACK: Duration = Duration::from_secs(3);

/// How long a killed local process or a cut session's thread is waited for.
const REAP: Duration = Duration::from_secs(3);

/// Whole seconds of the node-side deadline for a time limit: rounded up, at least one.
fn node_secs(limit: Duration) -> u64 {
    limit
        .as_secs()
        .saturating_add(u64::from(limit.subsec_nanos() > 0))
        .max(1)
}

/// How long after it started a command wrapped for a limit of `limit` is surely over on
/// the node: its deadline, then the KILL after it.
fn ends_within(limit: Duration) -> Duration {
    Duration::from_secs(node_secs(limit).saturating_add(KILL_AFTER_SECS))
}

/// `command` wrapped so that the node ends it at `limit` (TERM, then KILL
/// [`KILL_AFTER_SECS`] later). `exec` keeps the shell's exit status the command's own.
fn with_node_deadline(command: &str, limit: Duration) -> Result<String, RenderError> {
    Ok(format!(
        "exec timeout -k {KILL_AFTER_SECS} {} sh -c {}",
        node_secs(limit),
        render::quote(command)?
    ))
}

/// The deadline a command sent ahead now, due at `due`, takes with it to its node: the
/// time left until it is due, its limit, and [`PRIMED_LATE`]. `None` when it is due too
/// soon to be sent ahead.
fn primed_node_limit(due: Instant, timeout: Duration) -> Option<Duration> {
    let now = Instant::now();
    if now + PRIMED_EARLY >= due {
        return None;
    }
    Some(
        (due - now)
            .saturating_add(timeout)
            .saturating_add(PRIMED_LATE),
    )
}

/// An `exec` argv template filled in for `access`'s node carrying `command`.
fn exec_argv(
    access: &NodeAccess,
    template: &[String],
    command: &str,
) -> Result<Vec<String>, RenderError> {
    render::argv(
        template,
        &[
            ("node", &access.name),
            ("address", &access.address),
            ("command", command),
        ],
    )
}

/// What a command sent ahead by a local client is found by, beside its text and limit.
fn local_via(node: &str) -> String {
    format!("exec {node}")
}

/// What a command sent ahead through the API is found by, beside its text and limit.
fn pod_via(node: &str) -> String {
    format!("pod {node}")
}

/// How long past its limit a command carried through the API is listened for: the node's
/// deadline ending it, the KILL after it, and `slack` for one sent ahead.
fn pod_grace(timeout: Duration, slack: Duration) -> Duration {
    ends_within(timeout)
        .saturating_add(slack)
        .saturating_add(CONFIRM_SLACK)
        .saturating_sub(timeout)
}

/// Power state as reported by a `power.status` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PowerState {
    /// Running.
    On,
    /// Off / stopped.
    Off,
    /// The output said neither.
    Unknown(String),
}

impl PowerState {
    /// Read `on`/`off` (also Docker's `running`/`exited`, `true`/`false`) from status output.
    pub fn parse(output: &str) -> PowerState {
        let word = output.trim().to_ascii_lowercase();
        match word.as_str() {
            "on" | "running" | "true" | "power on" | "chassis power is on" => PowerState::On,
            "off"
            | "exited"
            | "stopped"
            | "created"
            | "false"
            | "power off"
            | "chassis power is off" => PowerState::Off,
            _ => PowerState::Unknown(output.trim().to_string()),
        }
    }
}

/// What happened when an operation ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpOutcome {
    /// Exit code, when the command reported one.
    pub exit_status: Option<i32>,
    /// stdout+stderr, at most [`MAX_OUTPUT`] bytes (the tail).
    pub output: String,
    /// The connection dropped after the command was sent (expected for reboot/power-off).
    pub dropped: bool,
}

/// Why an operation did not do what was asked.
#[derive(Debug, Error)]
pub enum ExecError {
    /// The node is not in the inventory.
    #[error("node `{0}` is not in the inventory")]
    UnknownNode(String),
    /// The inventory defines no command for this operation on this node.
    #[error("node `{node}`: no `{what}` configured; {hint}")]
    NotConfigured {
        /// Node.
        node: String,
        /// Inventory key that is missing.
        what: String,
        /// How to fix it.
        hint: String,
    },
    /// A value could not be placed into a command.
    #[error("node `{node}`: {source}")]
    Render {
        /// Node.
        node: String,
        /// Cause.
        source: RenderError,
    },
    /// A local program could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// Program.
        program: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Connection, host key or authentication failed before the command ran.
    #[error("node `{node}`: {source}")]
    Ssh {
        /// Node.
        node: String,
        /// Cause.
        source: SshError,
    },
    /// The time limit passed, and the command is over: the node's deadline ended it, it
    /// ended just after the limit, or it was never sent.
    #[error("{}", timed_out_text(node, command, *after, *started))]
    TimedOutEnded {
        /// Node.
        node: String,
        /// What ran (as `describe` shows it).
        command: String,
        /// The limit.
        after: Duration,
        /// Whether it reached the node: `false` when connecting took the whole limit and
        /// it was never sent.
        started: bool,
    },
    /// The time limit passed, and its end could not be heard (the session went away, the
    /// local client hung). The node's own deadline still ends it, `ends_within` after it
    /// started at the latest, unless the node lacks `timeout` or the session was lost
    /// before the command reached it.
    #[error(
        "node `{node}`: `{command}` did not finish within {after:?}, and it could not be \
         confirmed that it ended; the node's own deadline ends it within {ends_within:?} \
         of its start"
    )]
    TimedOutUnconfirmed {
        /// Node.
        node: String,
        /// What ran (as `describe` shows it).
        command: String,
        /// The limit.
        after: Duration,
        /// When the node's deadline ends it at the latest, after its start.
        ends_within: Duration,
    },
    /// The command ran and failed.
    #[error("node `{node}`: `{command}` failed ({}): {output}", exit_text(*.exit_status))]
    CommandFailed {
        /// Node.
        node: String,
        /// What ran.
        command: String,
        /// Exit code (`None`: killed by a signal).
        exit_status: Option<i32>,
        /// Output tail.
        output: String,
    },
    /// The connection dropped during an operation that should have completed.
    #[error("node `{node}`: connection dropped while running `{command}`: {output}")]
    Dropped {
        /// Node.
        node: String,
        /// What ran.
        command: String,
        /// Output seen before the drop.
        output: String,
    },
    /// `sudo` on the node would not run the command: it wants a password faultline has not
    /// been given (or refused the one given), or the login user may not use it.
    #[error("node `{node}`: sudo as `{user}` {problem}; {hint}")]
    Sudo {
        /// Node.
        node: String,
        /// Login user.
        user: String,
        /// What sudo said, in short.
        problem: String,
        /// How to fix it.
        hint: String,
    },
    /// The API transport could not carry the command (see [`pod::PodError`]).
    #[error("node `{node}`: {source}")]
    Pod {
        /// Node.
        node: String,
        /// Cause.
        source: pod::PodError,
    },
    /// A self-restore could not be armed or the token is unusable.
    #[error("node `{node}`: {message}")]
    Restore {
        /// Node.
        node: String,
        /// What went wrong.
        message: String,
    },
}

/// A command ended by its time limit, as said to a person: one that never reached the
/// node is not said to have run.
fn timed_out_text(node: &str, command: &str, after: Duration, started: bool) -> String {
    if started {
        format!(
            "node `{node}`: `{command}` did not finish within {after:?}; it was ended by its timeout"
        )
    } else {
        format!(
            "node `{node}`: `{command}` was ended by its timeout after {after:?}, before it started: reaching the node took all of that time, and nothing ran there"
        )
    }
}

fn exit_text(code: Option<i32>) -> String {
    code.map_or_else(|| "killed by a signal".into(), |c| format!("exit {c}"))
}

/// A self-restore armed on a node: the node will run the undo by itself at the deadline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmedRestore {
    /// Node it was armed on.
    pub node: String,
    /// Token carried in the restore process' command line, so disarm never kills a
    /// recycled pid.
    pub token: String,
    /// Remote pid (default template); `None` when a custom template printed none.
    pub pid: Option<u32>,
    /// Delay before the node undoes the fault.
    pub after_secs: u64,
    /// Armed where faultline runs, not on the node: the undo of a power-off (`power.on`),
    /// which the node cannot do by itself. It survives faultline being killed, not the
    /// loss of this machine.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local: bool,
    /// The undo watcher started beside it (a pod on the node, [`pod::watcher`]), which
    /// runs the undo as soon as faultline asks, kubelet or not; its timer stays the
    /// backstop. Removed with the restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watcher: Option<String>,
}

/// Runs operations on the nodes of one inventory. Clones share the SSH connections kept
/// open for the nodes ([`Executor::open_sessions`]); they close when the last clone goes.
#[derive(Debug, Clone)]
pub struct Executor {
    inventory: Inventory,
    sessions: Arc<SessionPool>,
    /// Commands sent ahead of their step, waiting on their nodes ([`Executor::prime`]).
    primed: Arc<PrimedCommands>,
    /// The API client of the pod transport: the run's own when it gave one, else connected
    /// at the first command that needs it.
    api: ApiHandle,
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

/// A fully rendered command and the transport that will carry it.
enum Plan {
    Ssh {
        target: Box<SshTarget>,
        command: String,
        /// The same command, sent ahead and waiting on the node ([`Executor::prime`]).
        primed: Option<ssh::Primed>,
    },
    Local {
        argv: Vec<String>,
        /// Whether the argv carries a command to a node (`docker exec`), which then has
        /// a node-side deadline, or is the whole command (an out-of-band power driver).
        to_node: bool,
        /// The same command, its client started ahead and waiting ([`Executor::prime`]).
        primed: Option<local::PrimedLocal>,
    },
    /// Through a privileged pod on the node and the API's exec.
    Pod {
        node: String,
        settings: crate::inventory::PodSettings,
        command: String,
        /// The same command, waiting in its pod for the word ([`Executor::prime`]).
        primed: Option<Box<pod::primed::PrimedPod>>,
    },
}

impl Plan {
    fn show(&self) -> String {
        match self {
            Plan::Ssh {
                target, command, ..
            } => {
                let jumps: Vec<String> = target
                    .settings
                    .jump
                    .iter()
                    .map(|j| format!("{}@{}:{}", j.user, j.host, j.port))
                    .collect();
                let via = if jumps.is_empty() {
                    String::new()
                } else {
                    format!("-J {} ", jumps.join(","))
                };
                format!(
                    "ssh {via}{}@{} -p {}: {}",
                    target.settings.user, target.host, target.settings.port, command
                )
            }
            Plan::Local { argv, .. } => format!("local: {}", render::show_argv(argv)),
            Plan::Pod {
                node,
                settings,
                command,
                ..
            } => pod::show(node, settings, command),
        }
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
    async fn client(&self, node: &str) -> Result<kube::Client, ExecError> {
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
                    ssh::open(self.sessions.clone(), Self::ssh_target(&access), limit)
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

    /// Sends `op` to `node` ahead of time, to start when [`Executor::perform`] is called
    /// for it near `due` with the same operation and limit: the command then starts on
    /// the node one packet after the call, not one channel, fork and login shell later
    /// (see the `primed` module). The loop primes a step's commands when it arms the step
    /// ahead. Primed are SSH without a sudo password (the password would share the
    /// command's standard input) and `transport: exec` with an `execWithStdin` client;
    /// `Ok(false)` says it was not, and `perform` then sends the command the ordinary way.
    /// Priming over SSH gives up at `within`; a local client starts at once.
    pub async fn prime(
        &self,
        node: &str,
        op: &NodeOp,
        timeout: Duration,
        due: Instant,
        within: Duration,
    ) -> Result<bool, ExecError> {
        let access = self.access(node)?;
        let command = Self::command_text(&access, op)?;
        match access.transport {
            TransportKind::Ssh if access.ssh.sudo_password_env.is_none() => {}
            TransportKind::Exec if access.exec_with_stdin.is_some() => {
                return self.prime_local(&access, &command, timeout, due);
            }
            TransportKind::Pod => {
                return self.prime_pod(access, command, timeout, due, within).await;
            }
            _ => return Ok(false),
        }
        let target = Self::ssh_target(&access);
        let key = primed::key(&target.pool_key(), &command, timeout);
        // Checked now (the deadline would not render) and rendered again just before it
        // is sent: the node's deadline counts from then.
        Self::plan(&access, primed::gated(&command), Some(timeout))?;
        let render = {
            let gated = primed::gated(&command);
            move || {
                let node_limit = primed_node_limit(due, timeout)?;
                match Self::plan(&access, gated, Some(node_limit)) {
                    Ok(Plan::Ssh { command, .. }) => Some(command),
                    _ => None,
                }
            }
        };
        // Given up at half the time left at the latest: never part of the step's lateness.
        let within = within.min(due.saturating_duration_since(Instant::now()) / 2);
        let waiting = ssh::prime(self.sessions.clone(), target, Box::new(render), within)
            .await
            .map_err(|source| ExecError::Ssh {
                node: node.to_string(),
                source,
            })?;
        self.primed.put(key, node, primed::Sent::Ssh(waiting), due);
        Ok(true)
    }

    /// Starts now the commands of `op` sent ahead to `nodes` over SSH
    /// ([`Executor::prime`]), all in one pass, for the calls to [`Executor::perform`] that
    /// follow at once to hear them out: the loop releases a step's nodes together when
    /// the step is due. A node with no such command waiting (another transport, not
    /// primed, its window missed) is left to its call.
    pub async fn release(&self, nodes: &[&str], op: &NodeOp, timeout: Duration) {
        let keys = nodes
            .iter()
            .filter_map(|node| {
                let access = self.access(node).ok()?;
                if access.transport != TransportKind::Ssh {
                    return None;
                }
                let command = Self::command_text(&access, op).ok()?;
                let target = Self::ssh_target(&access);
                Some(primed::key(&target.pool_key(), &command, timeout))
            })
            .collect();
        self.primed.release(keys).await;
    }

    /// [`Executor::prime`] through a local client that passes its standard input on
    /// (`execWithStdin`): the client is started now, the gated command behind it.
    fn prime_local(
        &self,
        access: &NodeAccess,
        command: &str,
        timeout: Duration,
        due: Instant,
    ) -> Result<bool, ExecError> {
        let Some(template) = access.exec_with_stdin.as_ref() else {
            return Ok(false);
        };
        let Some(node_limit) = primed_node_limit(due, timeout) else {
            return Ok(false);
        };
        let render_err = |source| ExecError::Render {
            node: access.name.clone(),
            source,
        };
        let gated = with_node_deadline(&primed::gated(command), node_limit).map_err(render_err)?;
        let argv = exec_argv(access, template, &gated).map_err(render_err)?;
        let waiting = local::PrimedLocal::spawn(&argv).map_err(|source| ExecError::Spawn {
            program: argv.first().cloned().unwrap_or_default(),
            source,
        })?;
        let key = primed::key(&local_via(&access.name), command, timeout);
        self.primed
            .put(key, &access.name, primed::Sent::Local(waiting), due);
        Ok(true)
    }

    /// [`Executor::prime`] through the API: the node-access pod is started now and the
    /// gated command's exec opened in it, given up at `within` (and at half the time
    /// left), as over SSH.
    async fn prime_pod(
        &self,
        access: NodeAccess,
        command: String,
        timeout: Duration,
        due: Instant,
        within: Duration,
    ) -> Result<bool, ExecError> {
        let node = access.name.clone();
        let pod_err = |source| ExecError::Pod {
            node: node.clone(),
            source,
        };
        let Some(node_limit) = primed_node_limit(due, timeout) else {
            return Ok(false);
        };
        // Checked now (the deadline would not render) and rendered again just before it
        // is sent: the node's deadline counts from then.
        with_node_deadline(&primed::gated(&command), node_limit).map_err(|source| {
            ExecError::Render {
                node: node.clone(),
                source,
            }
        })?;
        let render = {
            let gated = primed::gated(&command);
            move || with_node_deadline(&gated, primed_node_limit(due, timeout)?).ok()
        };
        let within = within.min(due.saturating_duration_since(Instant::now()) / 2);
        let client = self.client(&node).await?;
        // The pod must outlive the wait, the command and the wait for its node deadline.
        let wait = node_limit
            .saturating_add(pod_grace(timeout, PRIMED_EXTRA_WAIT))
            .saturating_add(PRIMED_EXTRA_WAIT);
        let waiting = pod::primed::prime(&client, &node, &access.pod, render, wait, within)
            .await
            .map_err(pod_err)?;
        let Some(waiting) = waiting else {
            return Ok(false);
        };
        let key = primed::key(&pod_via(&node), &command, timeout);
        self.primed
            .put(key, &node, primed::Sent::Pod(Box::new(waiting)), due);
        Ok(true)
    }

    fn ssh_target(access: &NodeAccess) -> SshTarget {
        SshTarget {
            node: access.name.clone(),
            host: access
                .ssh
                .host_name
                .clone()
                .unwrap_or_else(|| access.address.clone()),
            settings: access.ssh.clone(),
        }
    }

    /// The inventory this executor acts on.
    pub fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    fn access(&self, node: &str) -> Result<NodeAccess, ExecError> {
        self.inventory
            .node(node)
            .ok_or_else(|| ExecError::UnknownNode(node.to_string()))
    }

    /// The shell text of `op` on `node`, before transport wrapping.
    fn command_text(access: &NodeAccess, op: &NodeOp) -> Result<String, ExecError> {
        let key = match op.command() {
            NodeCommand::Configured(key) => key,
            NodeCommand::Written(text) => return Ok(text.to_string()),
        };
        let template = match (access.commands.get(key), key) {
            (None, CommandKey::BootId) => Some(DEFAULT_BOOT_ID),
            (t, _) => t.map(String::as_str),
        };
        let template = template.ok_or_else(|| ExecError::NotConfigured {
            node: access.name.clone(),
            what: key.path(),
            hint: format!(
                "set it in the inventory (top level or under the node){}",
                access
                    .profile
                    .map(|p| format!("; profile {p} has no default for it"))
                    .unwrap_or_else(|| "; or choose a `profile:`".into())
            ),
        })?;
        render::shell(
            template,
            &[("node", &access.name), ("address", &access.address)],
        )
        .map_err(|source| ExecError::Render {
            node: access.name.clone(),
            source,
        })
    }

    /// Wrap shell text for the node's transport; with `deadline`, so that the node ends it
    /// at that limit by itself (see the module documentation).
    fn plan(
        access: &NodeAccess,
        command: String,
        deadline: Option<Duration>,
    ) -> Result<Plan, ExecError> {
        let render_err = |source| ExecError::Render {
            node: access.name.clone(),
            source,
        };
        let command = match deadline {
            Some(limit) => with_node_deadline(&command, limit).map_err(render_err)?,
            None => command,
        };
        match access.transport {
            TransportKind::Ssh => {
                let command = match (access.ssh.sudo, &access.ssh.sudo_password_env) {
                    (false, _) => command,
                    (true, None) => format!(
                        "sudo -n sh -c {}",
                        render::quote(&command).map_err(render_err)?
                    ),
                    // The password arrives on stdin; the command itself gets /dev/null, so
                    // it cannot read the password when sudo asked for none.
                    (true, Some(_)) => format!(
                        "sudo -S -p '' sh -c {}",
                        render::quote(&format!("exec </dev/null; {command}"))
                            .map_err(render_err)?
                    ),
                };
                Ok(Plan::Ssh {
                    target: Box::new(Self::ssh_target(access)),
                    command,
                    primed: None,
                })
            }
            TransportKind::Exec => {
                let template = access
                    .exec
                    .as_ref()
                    .ok_or_else(|| ExecError::NotConfigured {
                        node: access.name.clone(),
                        what: "exec".into(),
                        hint: "transport exec needs an argv template".into(),
                    })?;
                let argv = exec_argv(access, template, &command).map_err(render_err)?;
                Ok(Plan::Local {
                    argv,
                    to_node: true,
                    primed: None,
                })
            }
            TransportKind::Pod => Ok(Plan::Pod {
                node: access.name.clone(),
                settings: access.pod.clone(),
                command,
                primed: None,
            }),
        }
    }

    /// The shell text `op` runs on `node`, before the transport wraps it (`sudo`, `docker
    /// exec`): for `doctor`, which checks that the programs it names exist on the node.
    pub fn command_of(&self, node: &str, op: &NodeOp) -> Result<String, ExecError> {
        Self::command_text(&self.access(node)?, op)
    }

    /// The exact command `op` would run on `node` and how, for `plan` and `--dry-run`.
    /// Holds no secrets: passwords are only ever read from the environment at connect time.
    pub fn describe(&self, node: &str, op: &NodeOp) -> String {
        let planned = self
            .access(node)
            .and_then(|a| Self::command_text(&a, op).and_then(|c| Self::plan(&a, c, None)));
        match planned {
            Ok(plan) => plan.show(),
            Err(e) => format!("cannot run: {e}"),
        }
    }

    /// Run `op` on `node`. For reboot and power-off a dropped connection (or a timeout
    /// after the command was sent) is success with `dropped: true`. For kubelet status a
    /// non-zero exit is returned, not raised. Any other non-zero exit is
    /// [`ExecError::CommandFailed`].
    pub async fn perform(
        &self,
        node: &str,
        op: &NodeOp,
        timeout: Duration,
    ) -> Result<OpOutcome, ExecError> {
        let access = self.access(node)?;
        let command = Self::command_text(&access, op)?;
        // Messages show the command as `describe` does, without the deadline wrapper.
        let shown = Self::plan(&access, command.clone(), None)?.show();
        let mut plan = Self::plan(&access, command.clone(), Some(timeout))?;
        match &mut plan {
            Plan::Ssh { target, primed, .. } => {
                let key = primed::key(&target.pool_key(), &command, timeout);
                if let Some(primed::Sent::Ssh(waiting)) = self.primed.take(&key, Instant::now()) {
                    *primed = Some(waiting);
                }
            }
            Plan::Local {
                primed,
                to_node: true,
                ..
            } => {
                let key = primed::key(&local_via(&access.name), &command, timeout);
                if let Some(primed::Sent::Local(waiting)) = self.primed.take(&key, Instant::now()) {
                    *primed = waiting.alive();
                }
            }
            Plan::Pod { primed, .. } => {
                let key = primed::key(&pod_via(&access.name), &command, timeout);
                if let Some(primed::Sent::Pod(waiting)) = self.primed.take(&key, Instant::now()) {
                    *primed = (*waiting).alive().map(Box::new);
                }
            }
            _ => {}
        }
        // Through the API, a command that stops the kubelet or cuts the node off ends its
        // own stream; its proof is then read through the API.
        let expects_drop = op.expects_drop()
            || (access.transport == TransportKind::Pod && pod::cuts_transport(op));
        let outcome = self
            .carry(&access.name, plan, &shown, timeout, expects_drop)
            .await?;
        if matches!(op, NodeOp::KubeletStatus) {
            return Ok(outcome);
        }
        Self::require_success(&access.name, &shown, outcome)
    }

    fn require_success(node: &str, command: &str, o: OpOutcome) -> Result<OpOutcome, ExecError> {
        if o.dropped || o.exit_status == Some(0) {
            Ok(o)
        } else {
            Err(ExecError::CommandFailed {
                node: node.to_string(),
                command: command.to_string(),
                exit_status: o.exit_status,
                output: o.output,
            })
        }
    }

    /// Carry a plan over its transport and classify the ending; `shown` names the command
    /// in errors. Returns only once the command is over (see the module documentation).
    async fn carry(
        &self,
        node: &str,
        plan: Plan,
        shown: &str,
        timeout: Duration,
        expects_drop: bool,
    ) -> Result<OpOutcome, ExecError> {
        let ended = |started: bool| ExecError::TimedOutEnded {
            node: node.to_string(),
            command: shown.to_string(),
            after: timeout,
            started,
        };
        // `extra`: how much later a primed command's node deadline can fall.
        let unconfirmed = |extra: Duration| ExecError::TimedOutUnconfirmed {
            node: node.to_string(),
            command: shown.to_string(),
            after: timeout,
            ends_within: ends_within(timeout).saturating_add(extra),
        };
        let dropped = |output: String| OpOutcome {
            exit_status: None,
            output,
            dropped: true,
        };
        // It ended on the node after the limit: a reboot's expected hang, a command that
        // just finished, or the node's deadline ending it.
        let late = |code: Option<i32>, output: String| {
            if expects_drop {
                Ok(dropped(output))
            } else if code == Some(0) {
                Ok(OpOutcome {
                    exit_status: code,
                    output,
                    dropped: false,
                })
            } else {
                Err(ended(true))
            }
        };
        match plan {
            Plan::Ssh {
                target,
                command,
                primed,
            } => {
                tracing::debug!(node, primed = primed.is_some(), "ssh: {command}");
                let stdin = sudo_password(node, &target)?;
                let sudo = target.settings.sudo.then(|| {
                    (
                        target.settings.user.clone(),
                        target.settings.sudo_password_env.clone(),
                    )
                });
                // A primed command's node deadline counts from when it was sent ahead,
                // with room for its start to be late by up to the slack.
                let slack = if primed.is_some() {
                    PRIMED_EXTRA_WAIT
                } else {
                    Duration::ZERO
                };
                let limits = Limits {
                    timeout,
                    ends_within: ends_within(timeout).saturating_add(slack),
                };
                // A command that takes the machine down leaves its connection behind.
                let keep = !expects_drop;
                let pool = self.sessions.clone();
                let end = ssh::run(*target, command, stdin, limits, pool, keep, primed)
                    .await
                    .map_err(|source| ExecError::Ssh {
                        node: node.to_string(),
                        source,
                    })?;
                // A connection that went away may have taken others to the node with it,
                // some of them without a word: nothing waiting there is started any more.
                if matches!(end, SshEnd::Dropped { .. } | SshEnd::TimedOut { .. }) {
                    self.primed.forget_node(node);
                }
                if let (
                    Some((user, var)),
                    SshEnd::Exited {
                        code: Some(1),
                        output,
                    },
                ) = (&sudo, &end)
                    && let Some(e) = sudo_refused(node, user, var.as_deref(), output)
                {
                    return Err(e);
                }
                match end {
                    SshEnd::Exited { code, output } => {
                        // A signal ending the remote shell during a reboot is the reboot.
                        let dropped = expects_drop && code.is_none();
                        Ok(OpOutcome {
                            exit_status: code,
                            output,
                            dropped,
                        })
                    }
                    SshEnd::Dropped { output } if expects_drop => Ok(dropped(output)),
                    SshEnd::Dropped { output } => Err(ExecError::Dropped {
                        node: node.to_string(),
                        command: shown.to_string(),
                        output,
                    }),
                    SshEnd::Late { code, output } => late(code, output),
                    SshEnd::TimedOut { sent: true } if expects_drop => Ok(dropped(String::new())),
                    SshEnd::TimedOut { sent: false } => Err(ended(false)),
                    SshEnd::TimedOut { sent: true } => Err(unconfirmed(slack)),
                }
            }
            Plan::Pod {
                node: on,
                settings,
                command,
                primed,
            } => {
                tracing::debug!(node, primed = primed.is_some(), "pod: {command}");
                // A primed command's node deadline counts from when it was sent ahead,
                // with room for its start to be late by up to the slack.
                let slack = if primed.is_some() {
                    PRIMED_EXTRA_WAIT
                } else {
                    Duration::ZERO
                };
                let grace = pod_grace(timeout, slack);
                let end = match primed {
                    Some(waiting) => waiting.start(timeout, grace).await,
                    None => {
                        let client = self.client(node).await?;
                        pod::run(&client, &on, &settings, &command, timeout, grace).await
                    }
                }
                .map_err(|source| ExecError::Pod {
                    node: node.to_string(),
                    source,
                })?;
                match end {
                    pod::PodEnd::Exited { code, output } => Ok(OpOutcome {
                        exit_status: Some(code),
                        output,
                        dropped: false,
                    }),
                    pod::PodEnd::Dropped { output } if expects_drop => Ok(dropped(output)),
                    pod::PodEnd::Dropped { output } => Err(ExecError::Dropped {
                        node: node.to_string(),
                        command: shown.to_string(),
                        output,
                    }),
                    pod::PodEnd::Late { code, output } => late(Some(code), output),
                    pod::PodEnd::TimedOut { sent: true } if expects_drop => {
                        Ok(dropped(String::new()))
                    }
                    pod::PodEnd::TimedOut { sent: false } => Err(ended(false)),
                    pod::PodEnd::TimedOut { sent: true } => Err(unconfirmed(slack)),
                }
            }
            Plan::Local {
                argv,
                to_node,
                primed,
            } => {
                tracing::debug!(
                    node,
                    primed = primed.is_some(),
                    "local: {}",
                    render::show_argv(&argv)
                );
                // A primed command's node deadline counts from when it was sent ahead,
                // with room for its start to be late by up to the slack.
                let slack = if primed.is_some() {
                    PRIMED_EXTRA_WAIT
                } else {
                    Duration::ZERO
                };
                // A command carried to a node is ended there by its deadline: give it the
                // time to be. A local driver is ended here, at the limit.
                let grace = if to_node {
                    ends_within(timeout)
                        .saturating_add(slack)
                        .saturating_add(CONFIRM_SLACK)
                        .saturating_sub(timeout)
                } else {
                    Duration::ZERO
                };
                let end = match primed {
                    Some(waiting) => waiting.start(timeout, grace).await,
                    None => local::run(&argv, timeout, grace).await,
                }
                .map_err(|source| ExecError::Spawn {
                    program: argv.first().cloned().unwrap_or_default(),
                    source,
                })?;
                match end {
                    local::LocalEnd::Exited { code, output } => {
                        // docker exec / oc debug report a vanished container or session as
                        // a signal or 137/143/255.
                        let dropped = expects_drop
                            && matches!(code, None | Some(137) | Some(143) | Some(255));
                        Ok(OpOutcome {
                            exit_status: code,
                            output,
                            dropped,
                        })
                    }
                    local::LocalEnd::Late { code, output } => late(code, output),
                    local::LocalEnd::TimedOut { .. } if expects_drop => Ok(dropped(String::new())),
                    // The local driver itself was the command: killed and reaped, it is over.
                    local::LocalEnd::TimedOut { reaped: true } if !to_node => Err(ended(true)),
                    local::LocalEnd::TimedOut { .. } => Err(unconfirmed(slack)),
                }
            }
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

    /// The exact out-of-band command a power action would run on this machine, for `plan`.
    pub fn describe_power(&self, node: &str, action: PowerAction) -> String {
        let Ok(access) = self.access(node) else {
            return format!("cannot run: node `{node}` is not in the inventory");
        };
        match access.power.get(action.key()) {
            Some(t) => {
                match render::argv(t, &[("node", &access.name), ("address", &access.address)]) {
                    Ok(argv) => format!("local: {}", render::show_argv(&argv)),
                    Err(e) => format!("cannot run: {e}"),
                }
            }
            None => match action.in_band() {
                Some(op) => self.describe(node, &op),
                None => {
                    "cannot run: no power command configured (SSH can turn a node off, never on)"
                        .into()
                }
            },
        }
    }

    /// How to undo a reboot of `node` that was cut off midway, for the fault journal:
    /// [`PowerAction::On`] when the reboot goes out of band (`power.reboot`: kind and k3d
    /// `docker stop`, a pause, `docker start`) and the inventory has `power.on`, since a
    /// run killed between the stop and the start leaves the node off; powering on a node
    /// that runs already does nothing. `None` for an in-band reboot, which the node
    /// finishes by itself once the command reached it.
    pub fn reboot_undo(&self, node: &str) -> Option<PowerAction> {
        let access = self.access(node).ok()?;
        (access.power.has(PowerKey::Reboot) && access.power.has(PowerKey::On))
            .then_some(PowerAction::On)
    }

    /// Run an out-of-band power command locally (argv, no shell). `On` has no SSH path;
    /// `Off` and `Reboot` fall back to the in-band `commands.powerOff` / `commands.reboot`
    /// when no `power.off` / `power.reboot` is set.
    pub async fn power(
        &self,
        node: &str,
        action: PowerAction,
        timeout: Duration,
    ) -> Result<OpOutcome, ExecError> {
        // The machine goes down or restarts: what waits on it now waits on nothing.
        if action != PowerAction::Status {
            self.primed.forget_node(node);
        }
        let access = self.access(node)?;
        let key = action.key().path();
        let Some(template) = access.power.get(action.key()) else {
            return match (action.in_band(), action) {
                (Some(op), _) => self.perform(node, &op, timeout).await,
                (None, PowerAction::On) => Err(ExecError::NotConfigured {
                    node: node.into(),
                    what: key,
                    hint: "SSH can turn a node off, never on: configure power.on \
                           (BMC/IPMI, hypervisor, `docker start`)"
                        .into(),
                }),
                (None, _) => Err(ExecError::NotConfigured {
                    node: node.into(),
                    what: key,
                    hint: "configure power.status to read the power state".into(),
                }),
            };
        };
        self.run_local_template(&access, template, timeout).await
    }

    /// Renders an out-of-band argv template for `access`'s node, runs it where faultline
    /// runs (no shell) and requires it to succeed.
    async fn run_local_template(
        &self,
        access: &NodeAccess,
        template: &[String],
        timeout: Duration,
    ) -> Result<OpOutcome, ExecError> {
        let node = access.name.as_str();
        let argv = render::argv(
            template,
            &[("node", &access.name), ("address", &access.address)],
        )
        .map_err(|source| ExecError::Render {
            node: node.into(),
            source,
        })?;
        let shown = render::show_argv(&argv);
        let plan = Plan::Local {
            argv,
            to_node: false,
            primed: None,
        };
        let outcome = self.carry(node, plan, &shown, timeout, false).await?;
        Self::require_success(node, &shown, outcome)
    }

    /// The node machine's current address(es) through `power.address`, whitespace
    /// normalised; `None` when the inventory has no such command.
    pub async fn machine_address(
        &self,
        node: &str,
        timeout: Duration,
    ) -> Result<Option<String>, ExecError> {
        let access = self.access(node)?;
        let Some(template) = access.power.get(PowerKey::Address) else {
            return Ok(None);
        };
        let out = self.run_local_template(&access, template, timeout).await?;
        Ok(Some(
            out.output.split_whitespace().collect::<Vec<_>>().join(" "),
        ))
    }

    /// Read the power state through `power.status`.
    pub async fn power_state(
        &self,
        node: &str,
        timeout: Duration,
    ) -> Result<PowerState, ExecError> {
        let out = self.power(node, PowerAction::Status, timeout).await?;
        Ok(PowerState::parse(&out.output))
    }

    /// Arm a self-restore ON the node: it will run `undo` after `after` by itself, even if
    /// faultline is killed. Arm BEFORE injecting the fault. Default mechanism: a detached
    /// `setsid nohup sh -c 'sleep N; <undo>'` whose command line carries `token`; the
    /// inventory's `armRestore` template (`{seconds}`, `{token}`, `{undo}`) replaces it.
    pub async fn arm_restore(
        &self,
        node: &str,
        undo: &NodeOp,
        after: Duration,
        token: &str,
    ) -> Result<ArmedRestore, ExecError> {
        let access = self.access(node)?;
        check_token(node, token)?;
        let undo_text = Self::command_text(&access, undo)?;
        let seconds = after.as_secs().max(1);
        let render_err = |source| ExecError::Render {
            node: node.into(),
            source,
        };
        let text = match &access.arm_restore {
            Some(t) => render::shell(
                t,
                &[
                    ("seconds", &seconds.to_string()),
                    ("token", token),
                    ("undo", &undo_text),
                    ("node", &access.name),
                    ("address", &access.address),
                ],
            )
            .map_err(render_err)?,
            None => {
                let script = format!(": {}; sleep {seconds}; {undo_text}", marker(token));
                format!(
                    "FAULTLINE_RESTORE={token} setsid nohup sh -c {} >/dev/null 2>&1 </dev/null & echo $!",
                    render::quote(&script).map_err(render_err)?
                )
            }
        };
        let out = self.run_required(&access, node, text).await?;
        let pid = out
            .output
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().parse::<u32>().ok());
        if access.arm_restore.is_none() && pid.is_none() {
            return Err(ExecError::Restore {
                node: node.into(),
                message: format!("arming printed no pid: {}", out.output),
            });
        }
        Ok(ArmedRestore {
            watcher: None,
            node: node.into(),
            token: token.into(),
            pid,
            after_secs: seconds,
            local: false,
        })
    }

    /// Arms, where faultline runs, the undo of a power-off: a detached process runs the
    /// node's `power.on` after `after` unless disarmed, so a node powered off by a run that
    /// is then killed comes back without help. `None` when the inventory has no
    /// `power.on` (nothing can turn the node on then; `restore` says so).
    pub async fn arm_power_on(
        &self,
        node: &str,
        after: Duration,
        token: &str,
    ) -> Result<Option<ArmedRestore>, ExecError> {
        let access = self.access(node)?;
        check_token(node, token)?;
        let Some(template) = access.power.get(PowerKey::On) else {
            return Ok(None);
        };
        let render_err = |source| ExecError::Render {
            node: node.into(),
            source,
        };
        let argv = render::argv(
            template,
            &[("node", &access.name), ("address", &access.address)],
        )
        .map_err(render_err)?;
        let seconds = after.as_secs().max(1);
        let script = format!(
            ": {}; sleep {seconds}; {} >/dev/null 2>&1",
            marker(token),
            render::show_argv(&argv)
        );
        let text = format!(
            "FAULTLINE_RESTORE={token} setsid nohup sh -c {} >/dev/null 2>&1 </dev/null & echo $!",
            render::quote(&script).map_err(render_err)?
        );
        let out = self.run_here(node, text).await?;
        let pid = out
            .output
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().parse::<u32>().ok())
            .ok_or_else(|| ExecError::Restore {
                node: node.into(),
                message: format!("arming the local power-on printed no pid: {}", out.output),
            })?;
        Ok(Some(ArmedRestore {
            watcher: None,
            node: node.into(),
            token: token.into(),
            pid: Some(pid),
            after_secs: seconds,
            local: true,
        }))
    }

    /// Runs shell text where faultline runs (`sh -c`), under the node's command timeout;
    /// a non-zero exit is an error.
    async fn run_here(&self, node: &str, text: String) -> Result<OpOutcome, ExecError> {
        let access = self.access(node)?;
        let argv = vec!["sh".to_string(), "-c".to_string(), text];
        let shown = render::show_argv(&argv);
        let plan = Plan::Local {
            argv,
            to_node: false,
            primed: None,
        };
        let out = self
            .carry(node, plan, &shown, access.ssh.command_timeout, false)
            .await?;
        Self::require_success(node, &shown, out)
    }

    /// Cancel an armed restore. Kills the process only if its command line still carries the
    /// token (a recycled pid is left alone). Returns whether something was disarmed: the
    /// default prints `disarmed` or `gone`; a `disarmRestore` template that prints a line
    /// `gone` found nothing to disarm (one that prints neither counts as disarmed).
    pub async fn disarm(&self, node: &str, armed: &ArmedRestore) -> Result<bool, ExecError> {
        self.remove_watcher(node, armed).await;
        let access = self.access(node)?;
        check_token(node, &armed.token)?;
        let pid = armed.pid.map(|p| p.to_string()).unwrap_or_default();
        let custom = access.disarm_restore.as_ref().filter(|_| !armed.local);
        let text = match custom {
            Some(t) => render::shell(
                t,
                &[
                    ("token", &armed.token),
                    ("pid", &pid),
                    ("node", &access.name),
                ],
            )
            .map_err(|source| ExecError::Render {
                node: node.into(),
                source,
            })?,
            None => {
                let Some(pid) = armed.pid else {
                    return Ok(false);
                };
                // A process caught inside exec (it was armed a moment ago and is still
                // becoming setsid, nohup, sh) shows an empty command line: look again for
                // up to 2 s before saying it is gone. Any other command line without the
                // token is a recycled pid, left alone at once.
                format!(
                    "r=gone; i=0; while [ $i -lt 20 ]; do \
                     c=$(tr '\\0' ' ' </proc/{pid}/cmdline 2>/dev/null); \
                     if printf '%s' \"$c\" | grep -q -- {m}; then \
                     kill -TERM -- -{pid} 2>/dev/null || kill -TERM {pid}; r=disarmed; break; fi; \
                     [ -z \"$c\" ] && [ -d /proc/{pid} ] || break; i=$((i+1)); sleep 0.1; done; \
                     echo $r",
                    m = marker(&armed.token)
                )
            }
        };
        if armed.local {
            let out = self.run_here(node, text).await?;
            return Ok(out.output.contains("disarmed"));
        }
        let out = self.run_required(&access, node, text).await?;
        let says = |word: &str| out.output.lines().any(|l| l.trim() == word);
        Ok(match access.disarm_restore {
            // A template may say what it found, as the default does; one that prints
            // neither word is taken at its exit status.
            Some(_) => says("disarmed") || !says("gone"),
            None => says("disarmed"),
        })
    }

    /// Runs a rendered command on the node under its command timeout; a non-zero exit is
    /// an error (used for the self-restore bookkeeping, which must not half-succeed).
    async fn run_required(
        &self,
        access: &NodeAccess,
        node: &str,
        text: String,
    ) -> Result<OpOutcome, ExecError> {
        let limit = access.ssh.command_timeout;
        let shown = Self::plan(access, text.clone(), None)?.show();
        let plan = Self::plan(access, text, Some(limit))?;
        let out = self.carry(node, plan, &shown, limit, false).await?;
        Self::require_success(node, &shown, out)
    }
}

/// The sudo password for a node whose commands run through `sudo -S`, read from its
/// variable now (never stored).
fn sudo_password(node: &str, target: &SshTarget) -> Result<Option<Secret>, ExecError> {
    let s = &target.settings;
    let (true, Some(var)) = (s.sudo, &s.sudo_password_env) else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(pw) => Ok(Some(Secret(pw))),
        Err(_) => Err(ExecError::Sudo {
            node: node.into(),
            user: s.user.clone(),
            problem: format!("needs the password from ${var}, which is not set"),
            hint: format!("export {var} before running faultline"),
        }),
    }
}

/// Reads sudo's own complaint (exit 1, English messages) out of a command's output.
fn sudo_refused(node: &str, user: &str, var: Option<&str>, output: &str) -> Option<ExecError> {
    let said = |what: &str| {
        output
            .lines()
            .any(|l| l.starts_with("sudo:") && l.contains(what))
    };
    let nopasswd = format!(
        "allow it without a password (a sudoers line such as `{user} ALL=(ALL) NOPASSWD: ALL`, \
         or only for the commands faultline runs) or set ssh.sudoPasswordEnv to the name of an \
         environment variable holding the password"
    );
    let (problem, hint) = if said("is not in the sudoers file") || said("is not allowed to") {
        (
            "is not allowed".to_string(),
            format!("give `{user}` sudo rights on the node, or log in as root"),
        )
    } else if var.is_none()
        && (said("a password is required")
            || said("a terminal is required")
            || said("no tty present"))
    {
        (
            "requires a password (sudo -n would have prompted)".to_string(),
            nopasswd,
        )
    } else if let Some(var) = var
        && (said("incorrect password") || said("no password was provided"))
    {
        (
            format!("refused the password from ${var}"),
            format!("check the password in ${var}"),
        )
    } else {
        return None;
    };
    Some(ExecError::Sudo {
        node: node.into(),
        user: user.into(),
        problem,
        hint,
    })
}

/// The recognisable text a restore process carries in its command line.
fn marker(token: &str) -> String {
    format!("faultline-restore-{token}")
}

/// Tokens go into command lines and `grep`: keep them to a safe alphabet.
fn check_token(node: &str, token: &str) -> Result<(), ExecError> {
    let ok = !token.is_empty()
        && token.len() <= 64
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ExecError::Restore {
            node: node.into(),
            message: format!(
                "restore token `{}` must be 1-64 of [A-Za-z0-9_-]",
                token.escape_debug()
            ),
        })
    }
}

#[cfg(test)]
mod tests;
