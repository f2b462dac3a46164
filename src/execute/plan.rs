//! Planning a command: the shell text an operation runs on a node, rendered from the
//! inventory, and the transport that will carry it there (SSH, a local argv such as
//! `docker exec`, or the API), before anything is contacted.

use std::time::Duration;

use crate::experiment::fault::{CommandKey, KeyTable, NodeCommand, NodeOp};
use crate::inventory::{NodeAccess, PodSettings, TransportKind};

use super::deadline::with_node_deadline;
use super::error::ExecError;
use super::local::PrimedLocal;
use super::pod;
use super::render::{self, RenderError};
use super::ssh::{self, SshTarget};
use super::sudo;

/// How a node says which boot it is in when the inventory sets no `commands.bootId`: the
/// kernel's boot id, which changes at every boot of a machine, and the start time of PID 1
/// (in clock ticks since the kernel booted), which changes when a node container (kind,
/// k3d) is restarted on a kernel that did not reboot.
pub const DEFAULT_BOOT_ID: &str =
    "cat /proc/sys/kernel/random/boot_id && cut -d' ' -f22 /proc/1/stat";

/// A fully rendered command and the transport that will carry it.
pub(super) enum Plan {
    /// Over SSH, as the node's login user.
    Ssh {
        /// Where and as whom.
        target: Box<SshTarget>,
        /// The shell text, wrapped for its deadline and `sudo`.
        command: String,
        /// The same command, sent ahead and waiting on the node (`Executor::prime`).
        primed: Option<ssh::Primed>,
    },
    /// As an argv run where faultline runs.
    Local {
        /// The argv, rendered.
        argv: Vec<String>,
        /// Whether the argv carries a command to a node (`docker exec`), which then has
        /// a node-side deadline, or is the whole command (an out-of-band power driver).
        to_node: bool,
        /// The same command, its client started ahead and waiting (`Executor::prime`).
        primed: Option<PrimedLocal>,
    },
    /// Through a privileged pod on the node and the API's exec.
    Pod {
        /// The node the pod runs on.
        node: String,
        /// The API transport's settings.
        settings: PodSettings,
        /// The shell text, wrapped for its deadline.
        command: String,
        /// The same command, waiting in its pod for the word (`Executor::prime`).
        primed: Option<Box<pod::primed::PrimedPod>>,
    },
}

impl Plan {
    /// The plan as said to a person: the command and how it is carried, with no secret.
    pub(super) fn show(&self) -> String {
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

/// An `exec` argv template filled in for `access`'s node carrying `command`.
pub(super) fn exec_argv(
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

/// Where and as whom `access`'s node is reached over SSH.
pub(super) fn ssh_target(access: &NodeAccess) -> SshTarget {
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

/// What `{run}` stands for in a command rendered outside a run (`plan`, `doctor`): shown,
/// never run, since every command a run or `restore` sends names its run.
pub(super) const NO_RUN: &str = "<run id>";

/// The shell text of `op` on `access`'s node, before transport wrapping. `{run}` is the
/// run the command belongs to (see [`Executor::for_run`](super::Executor::for_run)): the
/// profiles name their iptables rules after it, so that one run's heal deletes its own
/// partition and never another run's.
pub(super) fn command_text(
    access: &NodeAccess,
    op: &NodeOp,
    run: Option<&str>,
) -> Result<String, ExecError> {
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
        &[
            ("node", &access.name),
            ("address", &access.address),
            ("run", run.unwrap_or(NO_RUN)),
        ],
    )
    .map_err(|source| ExecError::Render {
        node: access.name.clone(),
        source,
    })
}

/// Wrap shell text for the node's transport; with `deadline`, so that the node ends it
/// at that limit by itself (see the module documentation of `execute`).
///
/// `run`: the run the command belongs to, whose mark its deadline wrapper carries (see
/// `deadline::with_node_deadline`).
pub(super) fn plan(
    access: &NodeAccess,
    command: String,
    deadline: Option<Duration>,
    run: Option<&str>,
) -> Result<Plan, ExecError> {
    let render_err = |source| ExecError::Render {
        node: access.name.clone(),
        source,
    };
    let command = match deadline {
        Some(limit) => with_node_deadline(&command, limit, run).map_err(render_err)?,
        None => command,
    };
    match access.transport {
        TransportKind::Ssh => Ok(Plan::Ssh {
            target: Box::new(ssh_target(access)),
            command: sudo::wrap(&access.ssh, command).map_err(render_err)?,
            primed: None,
        }),
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
