//! Sending a timed step's commands ahead ([`Executor::prime`]), releasing them together
//! when the step is due ([`Executor::release`]), and handing a waiting one to the call
//! that runs it. What waits, and how it keeps the rules of a call, is the `primed`
//! module's.

use std::time::{Duration, Instant};

use crate::experiment::fault::NodeOp;
use crate::inventory::{NodeAccess, TransportKind};

use crate::execute::deadline::{node_grace, with_node_deadline};
use crate::execute::error::ExecError;
use crate::execute::executor::Executor;
use crate::execute::local::PrimedLocal;
use crate::execute::plan::{Plan, exec_argv, plan, ssh_target};
use crate::execute::pod;
use crate::execute::primed::{self, PRIMED_EARLY, PRIMED_EXTRA_WAIT, PRIMED_LATE};
use crate::execute::ssh;

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

/// What a command sent ahead to `access`'s node is found by ([`primed::key`]): the way
/// it was sent (the SSH login, or the node of a local client or of the API's pod), its
/// text and its limit. Priming, releasing and taking it all ask here.
fn waiting_key(access: &NodeAccess, command: &str, timeout: Duration) -> String {
    let via = match access.transport {
        TransportKind::Ssh => ssh_target(access).pool_key(),
        TransportKind::Exec => format!("exec {}", access.name),
        TransportKind::Pod => format!("pod {}", access.name),
    };
    primed::key(&via, command, timeout)
}

impl Executor {
    /// Sends `op` to `node` ahead of time, to start when [`Executor::perform`] is called
    /// for it near `due` with the same operation and limit: the command then starts on
    /// the node one packet after the call, not one channel, fork and login shell later
    /// (see the `primed` module). The loop primes a step's commands when it arms the step
    /// ahead. Primed are SSH without a sudo password (the password would share the
    /// command's standard input) and `transport: exec` with an `execWithStdin` client;
    /// `Ok(false)` says it was not, and `perform` then sends the command the ordinary way.
    /// Priming over SSH gives up at `within`; a local client starts at once (through
    /// the engine's API, a plain `docker exec -i` gives up at half the lead, 5 s at most).
    pub async fn prime(
        &self,
        node: &str,
        op: &NodeOp,
        timeout: Duration,
        due: Instant,
        within: Duration,
    ) -> Result<bool, ExecError> {
        let access = self.access(node)?;
        let command = self.op_text(&access, op)?;
        match access.transport {
            TransportKind::Ssh if access.ssh.sudo_password_env.is_none() => {}
            TransportKind::Exec if access.exec_with_stdin.is_some() => {
                return self.prime_local(&access, &command, timeout, due).await;
            }
            TransportKind::Pod => {
                return self.prime_pod(access, command, timeout, due, within).await;
            }
            _ => return Ok(false),
        }
        let target = ssh_target(&access);
        let key = waiting_key(&access, &command, timeout);
        // Checked now (the deadline would not render) and rendered again just before it
        // is sent: the node's deadline counts from then.
        let run = self.run.clone();
        plan(
            &access,
            primed::gated(&command),
            Some(timeout),
            run.as_deref(),
        )?;
        let render = {
            let gated = primed::gated(&command);
            move || {
                let node_limit = primed_node_limit(due, timeout)?;
                match plan(&access, gated, Some(node_limit), run.as_deref()) {
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

    /// Starts now the commands of `op` sent ahead to `nodes` ([`Executor::prime`]: over
    /// SSH, through a local client such as `docker exec -i`, or through the API), all in
    /// one pass, for the calls to [`Executor::perform`] that follow at once to hear them
    /// out: the loop releases a step's nodes together when the step is due. A node with
    /// no such command waiting (not primed, its window missed) is left to its call.
    pub async fn release(&self, nodes: &[&str], op: &NodeOp, timeout: Duration) {
        let keys = nodes
            .iter()
            .filter_map(|node| {
                let access = self.access(node).ok()?;
                let command = self.op_text(&access, op).ok()?;
                Some(waiting_key(&access, &command, timeout))
            })
            .collect();
        self.primed.release(keys).await;
    }

    /// Hands `plan` the same command sent ahead to `access`'s node, if one waits there
    /// still (`command` before its deadline, under the limit `timeout`).
    pub(in crate::execute) fn take_primed(
        &self,
        access: &NodeAccess,
        command: &str,
        timeout: Duration,
        plan: &mut Plan,
    ) {
        if matches!(plan, Plan::Local { to_node: false, .. }) {
            return;
        }
        let key = waiting_key(access, command, timeout);
        match (plan, self.primed.take(&key, Instant::now())) {
            (Plan::Ssh { primed, .. }, Some(primed::Sent::Ssh(waiting))) => {
                *primed = Some(waiting);
            }
            (Plan::Local { primed, .. }, Some(primed::Sent::Local(waiting))) => {
                *primed = waiting.alive();
            }
            (Plan::Pod { primed, .. }, Some(primed::Sent::Pod(waiting))) => {
                *primed = (*waiting).alive().map(Box::new);
            }
            _ => {}
        }
    }

    /// [`Executor::prime`] through a local client that passes its standard input on
    /// (`execWithStdin`): the client is started now, the gated command behind it (a plain
    /// `docker exec -i` is made through the engine's API instead: `engine_exec`).
    async fn prime_local(
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
        let gated = with_node_deadline(&primed::gated(command), node_limit, self.run.as_deref())
            .map_err(render_err)?;
        let argv = exec_argv(access, template, &gated).map_err(render_err)?;
        // Half the lead at most, as over SSH: a stalled engine leaves the client the rest.
        let within = due.saturating_duration_since(Instant::now()) / 2;
        let waiting = PrimedLocal::prime(&argv, within, self.docker_exec)
            .await
            .map_err(|source| ExecError::Spawn {
                program: argv.first().cloned().unwrap_or_default(),
                source,
            })?;
        let key = waiting_key(access, command, timeout);
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
        let run = self.run.clone();
        with_node_deadline(&primed::gated(&command), node_limit, run.as_deref()).map_err(
            |source| ExecError::Render {
                node: node.clone(),
                source,
            },
        )?;
        let render = {
            let gated = primed::gated(&command);
            move || {
                with_node_deadline(&gated, primed_node_limit(due, timeout)?, run.as_deref()).ok()
            }
        };
        let within = within.min(due.saturating_duration_since(Instant::now()) / 2);
        let client = self.client(&node).await?;
        // The pod must outlive the wait, the command and the wait for its node deadline.
        let wait = node_limit
            .saturating_add(node_grace(timeout, PRIMED_EXTRA_WAIT))
            .saturating_add(PRIMED_EXTRA_WAIT);
        let waiting = pod::primed::prime(
            &client,
            (&node, &access.pod, self.run.as_deref()),
            &self.kept_pods,
            render,
            wait,
            within,
        )
        .await
        .map_err(pod_err)?;
        let Some(waiting) = waiting else {
            return Ok(false);
        };
        let key = waiting_key(&access, &command, timeout);
        self.primed
            .put(key, &node, primed::Sent::Pod(Box::new(waiting)), due);
        Ok(true)
    }
}
