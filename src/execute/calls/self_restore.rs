//! The self-restore: a fault's undo armed on its node (or, for a power-off, where
//! faultline runs) before the fault, so that the node undoes it by itself even when
//! faultline is killed; and its disarming once the fault is settled.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::experiment::fault::{NodeOp, PowerKey};
use crate::inventory::NodeAccess;

use crate::execute::backstop::on_its_own;
use crate::execute::error::ExecError;
use crate::execute::executor::Executor;
use crate::execute::plan::command_text;
use crate::execute::render;

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
    /// The undo watcher started beside it (a pod on the node, [`crate::execute::pod::watcher`]), which
    /// runs the undo as soon as faultline asks, kubelet or not; its timer stays the
    /// backstop. Removed with the restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watcher: Option<String>,
}

impl Executor {
    /// Arm a self-restore ON the node: it will run `undo` after `after` by itself, even if
    /// faultline is killed. Arm BEFORE injecting the fault. Default mechanism: a detached
    /// `setsid nohup sh -c 'sleep N; <undo>'` whose command line carries `token`; the
    /// inventory's `armRestore` template (`{seconds}`, `{token}`, `{undo}`) replaces it, and
    /// its `restoreWaiting` (`{token}`, `{node}`) is what a fault that cuts the API transport
    /// is then gated on ([`super::super::backstop`]).
    pub async fn arm_restore(
        &self,
        node: &str,
        undo: &NodeOp,
        after: Duration,
        token: &str,
    ) -> Result<ArmedRestore, ExecError> {
        let access = self.access(node)?;
        check_token(node, token)?;
        let undo_text = command_text(&access, undo, self.run.as_deref())?;
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
        // Rendered before arming: nothing is armed that the run then cannot ask after.
        let waiting = waiting_check(&access, token)?;
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
        self.backstops.armed(node, token, waiting);
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

    /// Asks `node` whether `armed` still waits, with the node's `restoreWaiting` (the
    /// check a fault that cuts the API transport is gated on): `None` when the node gives
    /// none. `faultline doctor` asks it while armed and again once disarmed, so a check
    /// that always answers the same is found before a run relies on it.
    pub async fn restore_waits(
        &self,
        node: &str,
        armed: &ArmedRestore,
    ) -> Result<Option<bool>, ExecError> {
        let access = self.access(node)?;
        check_token(node, &armed.token)?;
        let Some(check) = waiting_check(&access, &armed.token)?.filter(|_| !armed.local) else {
            return Ok(None);
        };
        let (out, shown) = self.run_on_node(&access, node, check).await?;
        match out.exit_status {
            Some(0) => Ok(Some(true)),
            // A shell's own failures (a syntax error, a program it cannot find or run) and
            // a signal say nothing about the restore: the gate would refuse every fault.
            None | Some(2 | 126 | 127) => Err(ExecError::CommandFailed {
                node: node.into(),
                command: shown,
                exit_status: out.exit_status,
                output: out.output,
            }),
            Some(_) => Ok(Some(false)),
        }
    }

    /// Cancel an armed restore. Kills the process only if its command line still carries the
    /// token (a recycled pid is left alone). Returns whether something was disarmed: the
    /// default prints `disarmed` or `gone`; a `disarmRestore` template that prints a line
    /// `gone` found nothing to disarm (one that prints neither counts as disarmed).
    pub async fn disarm(&self, node: &str, armed: &ArmedRestore) -> Result<bool, ExecError> {
        self.remove_watcher(node, armed).await;
        self.backstops.disarmed(node, &armed.token);
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
}

/// `access`'s `restoreWaiting` for `token`, rendered and run by a shell of its own (what
/// the gate runs): `None` when the node's self-restore cannot be asked whether it still
/// waits.
fn waiting_check(access: &NodeAccess, token: &str) -> Result<Option<String>, ExecError> {
    access
        .restore_waiting
        .as_deref()
        .map(|t| {
            let check = render::shell(t, &[("token", token), ("node", &access.name)])?;
            on_its_own(&check)
        })
        .transpose()
        .map_err(|source| ExecError::Render {
            node: access.name.clone(),
            source,
        })
}

/// The recognisable text a restore process carries in its command line.
fn marker(token: &str) -> String {
    format!("faultline-restore-{token}")
}

/// Tokens go into command lines and `grep`: keep them to a safe alphabet.
pub(in crate::execute) fn check_token(node: &str, token: &str) -> Result<(), ExecError> {
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
