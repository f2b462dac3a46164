//! Power: out-of-band drivers run where faultline runs (BMC/IPMI, a hypervisor, `docker
//! start`), with the in-band commands that stand in for them when none is set, and the
//! power state they report.

use std::time::Duration;

use crate::experiment::fault::{KeyTable, PowerAction, PowerKey};

use crate::execute::error::ExecError;
use crate::execute::executor::Executor;
use crate::execute::outcome::OpOutcome;
use crate::execute::render;

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

impl Executor {
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
}
