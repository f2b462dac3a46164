//! Running a command and holding it to succeed: a node operation
//! ([`Executor::perform`]), the self-restore's bookkeeping on the node, an out-of-band
//! argv, and shell text where faultline runs. Each plans its command, carries it and
//! reads the outcome.

use std::time::Duration;

use crate::experiment::fault::NodeOp;
use crate::inventory::{NodeAccess, TransportKind};

use crate::execute::deadline::{ENDING_WAIT, ending, with_node_deadline};
use crate::execute::error::ExecError;
use crate::execute::executor::Executor;
use crate::execute::outcome::{OpOutcome, require_success};
use crate::execute::plan::{Plan, plan};
use crate::execute::render;

impl Executor {
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
        let command = self.op_text(&access, op)?;
        // Messages show the command as `describe` does, without the deadline wrapper.
        let shown = plan(&access, command.clone(), None, None)?.show();
        let mut planned = plan(&access, command.clone(), Some(timeout), self.run.as_deref())?;
        self.take_primed(&access, &command, timeout, &mut planned);
        // Through the API, a command that stops the kubelet or cuts the node off ends its
        // own stream; its proof is then read through the API.
        let expects_drop =
            op.expects_drop() || (access.transport == TransportKind::Pod && op.cuts_transport());
        let outcome = self
            .carry(&access.name, planned, &shown, timeout, expects_drop)
            .await?;
        if matches!(op, NodeOp::KubeletStatus) {
            return Ok(outcome);
        }
        require_success(&access.name, &shown, outcome)
    }

    /// Ends on `node` every command of this executor's run still running there: those a
    /// stop cut short before they came back (their futures dropped: the session cut, the
    /// local client killed, and the command itself left to its node deadline). `Ok`: none
    /// is left there. Commands sent ahead to wait there are ended too, and forgotten. An
    /// executor outside a run has nothing marked to end.
    pub async fn end_run_commands(&self, node: &str) -> Result<(), ExecError> {
        let Some(run) = self.run.as_deref() else {
            return Ok(());
        };
        let access = self.access(node)?;
        let render_err = |source| ExecError::Render {
            node: node.to_string(),
            source,
        };
        let limit = Self::ending_limit();
        // Its own deadline carries no mark: it must not end itself.
        let text = with_node_deadline(&ending(run).map_err(render_err)?, limit, None)
            .map_err(render_err)?;
        let planned = plan(&access, text.clone(), None, None)?;
        let shown = planned.show();
        let out = self.carry(node, planned, &shown, limit, false).await;
        self.primed.forget_node(node);
        require_success(node, &shown, out?).map(drop)
    }

    /// The time limit of [`Executor::end_run_commands`]'s own command: its wait for the
    /// commands to be gone, and a little more.
    fn ending_limit() -> Duration {
        ENDING_WAIT.saturating_add(Duration::from_secs(3))
    }

    /// The longest [`Executor::end_run_commands`] takes on one node.
    pub fn longest_ending() -> Duration {
        Self::longest_wait(Self::ending_limit())
    }

    /// Renders an out-of-band argv template for `access`'s node, runs it where faultline
    /// runs (no shell) and requires it to succeed.
    pub(in crate::execute) async fn run_local_template(
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
        require_success(node, &shown, outcome)
    }

    /// Runs shell text where faultline runs (`sh -c`), under the node's command timeout;
    /// a non-zero exit is an error.
    pub(in crate::execute) async fn run_here(
        &self,
        node: &str,
        text: String,
    ) -> Result<OpOutcome, ExecError> {
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
        require_success(node, &shown, out)
    }

    /// Runs a rendered command on the node under its command timeout; a non-zero exit is
    /// an error (used for the self-restore bookkeeping, which must not half-succeed).
    pub(in crate::execute) async fn run_required(
        &self,
        access: &NodeAccess,
        node: &str,
        text: String,
    ) -> Result<OpOutcome, ExecError> {
        let (out, shown) = self.run_on_node(access, node, text).await?;
        require_success(node, &shown, out)
    }

    /// Runs a rendered command on the node under its command timeout and returns what it
    /// did whatever its exit, with the command as messages show it.
    pub(in crate::execute) async fn run_on_node(
        &self,
        access: &NodeAccess,
        node: &str,
        text: String,
    ) -> Result<(OpOutcome, String), ExecError> {
        let limit = access.ssh.command_timeout;
        let shown = plan(access, text.clone(), None, None)?.show();
        let planned = plan(access, text, Some(limit), self.run.as_deref())?;
        let out = self.carry(node, planned, &shown, limit, false).await?;
        Ok((out, shown))
    }
}
