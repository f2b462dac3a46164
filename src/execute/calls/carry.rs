//! Carrying a planned command over its transport and reading how it ended: finished,
//! dropped, late or timed out, told apart as the module documentation of `execute`
//! promises. A call returns only once its command is over.

use std::time::Duration;

use crate::execute::deadline::{ends_within, node_grace};
use crate::execute::error::ExecError;
use crate::execute::executor::Executor;
use crate::execute::local::{self, LocalEnd, PrimedLocal};
use crate::execute::outcome::OpOutcome;
use crate::execute::plan::Plan;
use crate::execute::pod::{self, PodEnd, primed::PrimedPod};
use crate::execute::primed::PRIMED_EXTRA_WAIT;
use crate::execute::render;
use crate::execute::ssh::{self, Limits, SshEnd, SshTarget};
use crate::execute::sudo::{SudoLogin, sudo_password};
use crate::inventory::PodSettings;

/// The endings every transport shares, for one command: what a timeout, a drop or a late
/// end of it means.
struct Endings<'a> {
    /// The node, as errors name it.
    node: &'a str,
    /// The command, as errors show it.
    shown: &'a str,
    /// Its time limit.
    timeout: Duration,
    /// Whether its connection is expected to go away (a reboot, a power-off).
    expects_drop: bool,
}

impl Endings<'_> {
    /// Ended by its time limit; `started`: it had reached the node.
    fn ended(&self, started: bool) -> ExecError {
        ExecError::TimedOutEnded {
            node: self.node.to_string(),
            command: self.shown.to_string(),
            after: self.timeout,
            started,
        }
    }

    /// Past its limit with its end unheard; `extra`: how much later a primed command's
    /// node deadline can fall.
    fn unconfirmed(&self, extra: Duration) -> ExecError {
        ExecError::TimedOutUnconfirmed {
            node: self.node.to_string(),
            command: self.shown.to_string(),
            after: self.timeout,
            ends_within: ends_within(self.timeout).saturating_add(extra),
        }
    }

    /// Its connection went away after it was sent, as expected.
    fn dropped(output: String) -> OpOutcome {
        OpOutcome {
            exit_status: None,
            output,
            dropped: true,
        }
    }

    /// Its connection went away: expected for a reboot, an error otherwise.
    fn drop_of(&self, output: String) -> Result<OpOutcome, ExecError> {
        if self.expects_drop {
            Ok(Self::dropped(output))
        } else {
            Err(ExecError::Dropped {
                node: self.node.to_string(),
                command: self.shown.to_string(),
                output,
            })
        }
    }

    /// It ended on the node after the limit: a reboot's expected hang, a command that
    /// just finished, or the node's deadline ending it.
    fn late(&self, code: Option<i32>, output: String) -> Result<OpOutcome, ExecError> {
        if self.expects_drop {
            Ok(Self::dropped(output))
        } else if code == Some(0) {
            Ok(OpOutcome {
                exit_status: code,
                output,
                dropped: false,
            })
        } else {
            Err(self.ended(true))
        }
    }

    /// Past its limit, sent, and unheard since: expected for a reboot, else
    /// [`Endings::unconfirmed`] with `slack`.
    fn sent_and_unheard(&self, slack: Duration) -> Result<OpOutcome, ExecError> {
        if self.expects_drop {
            Ok(Self::dropped(String::new()))
        } else {
            Err(self.unconfirmed(slack))
        }
    }
}

/// How much later a command's node deadline can fall than its limit: a primed command's
/// counts from when it was sent ahead, with room for its start to be late.
fn slack(primed: bool) -> Duration {
    if primed {
        PRIMED_EXTRA_WAIT
    } else {
        Duration::ZERO
    }
}

impl Executor {
    /// Carry a plan over its transport and classify the ending; `shown` names the command
    /// in errors. Returns only once the command is over (see the module documentation).
    pub(in crate::execute) async fn carry(
        &self,
        node: &str,
        plan: Plan,
        shown: &str,
        timeout: Duration,
        expects_drop: bool,
    ) -> Result<OpOutcome, ExecError> {
        let endings = Endings {
            node,
            shown,
            timeout,
            expects_drop,
        };
        match plan {
            Plan::Ssh {
                target,
                command,
                primed,
            } => self.carry_ssh(&endings, *target, command, primed).await,
            Plan::Pod {
                node: on,
                settings,
                command,
                primed,
            } => {
                self.carry_pod(&endings, &on, &settings, &command, primed)
                    .await
            }
            Plan::Local {
                argv,
                to_node,
                primed,
            } => carry_local(&endings, &argv, to_node, primed).await,
        }
    }

    /// [`Executor::carry`] over SSH.
    async fn carry_ssh(
        &self,
        endings: &Endings<'_>,
        target: SshTarget,
        command: String,
        primed: Option<ssh::Primed>,
    ) -> Result<OpOutcome, ExecError> {
        let node = endings.node;
        tracing::debug!(node, primed = primed.is_some(), "ssh: {command}");
        let stdin = sudo_password(node, &target)?;
        let sudo = SudoLogin::of(&target);
        let slack = slack(primed.is_some());
        let limits = Limits {
            timeout: endings.timeout,
            ends_within: ends_within(endings.timeout).saturating_add(slack),
        };
        // A command that takes the machine down leaves its connection behind.
        let keep = !endings.expects_drop;
        let pool = self.sessions.clone();
        let end = ssh::run(target, command, stdin, limits, pool, keep, primed)
            .await
            .map_err(|source| ExecError::Ssh {
                node: node.to_string(),
                source,
            })?;
        // A connection that went away may have taken others to the node with it, some of
        // them without a word: nothing waiting there is started any more.
        if matches!(end, SshEnd::Dropped { .. } | SshEnd::TimedOut { .. }) {
            self.primed.forget_node(node);
        }
        if let Some(e) = sudo.and_then(|login| login.refusal(node, &end)) {
            return Err(e);
        }
        match end {
            SshEnd::Exited { code, output } => {
                // A signal ending the remote shell during a reboot is the reboot.
                let dropped = endings.expects_drop && code.is_none();
                Ok(OpOutcome {
                    exit_status: code,
                    output,
                    dropped,
                })
            }
            SshEnd::Dropped { output } => endings.drop_of(output),
            SshEnd::Late { code, output } => endings.late(code, output),
            SshEnd::TimedOut { sent: false } => Err(endings.ended(false)),
            SshEnd::TimedOut { sent: true } => endings.sent_and_unheard(slack),
        }
    }

    /// [`Executor::carry`] through the API.
    async fn carry_pod(
        &self,
        endings: &Endings<'_>,
        on: &str,
        settings: &PodSettings,
        command: &str,
        primed: Option<Box<PrimedPod>>,
    ) -> Result<OpOutcome, ExecError> {
        let node = endings.node;
        let timeout = endings.timeout;
        tracing::debug!(node, primed = primed.is_some(), "pod: {command}");
        let slack = slack(primed.is_some());
        let grace = node_grace(timeout, slack);
        let end = match primed {
            Some(waiting) => waiting.start(timeout, grace).await,
            None => {
                let client = self.client(node).await?;
                let run = self.run.as_deref();
                pod::run(
                    &client,
                    (on, settings, run),
                    &self.kept_pods,
                    command,
                    timeout,
                    grace,
                )
                .await
            }
        }
        .map_err(|source| ExecError::Pod {
            node: node.to_string(),
            source,
        })?;
        match end {
            PodEnd::Exited { code, output } => Ok(OpOutcome {
                exit_status: Some(code),
                output,
                dropped: false,
            }),
            PodEnd::Dropped { output } => endings.drop_of(output),
            PodEnd::Late { code, output } => endings.late(Some(code), output),
            PodEnd::TimedOut { sent: false } => Err(endings.ended(false)),
            PodEnd::TimedOut { sent: true } => endings.sent_and_unheard(slack),
        }
    }
}

/// [`Executor::carry`] by a local argv: a client carrying the command to a node, or an
/// out-of-band driver that is the whole command.
async fn carry_local(
    endings: &Endings<'_>,
    argv: &[String],
    to_node: bool,
    primed: Option<PrimedLocal>,
) -> Result<OpOutcome, ExecError> {
    let node = endings.node;
    let timeout = endings.timeout;
    tracing::debug!(
        node,
        primed = primed.is_some(),
        "local: {}",
        render::show_argv(argv)
    );
    let slack = slack(primed.is_some());
    // A command carried to a node is ended there by its deadline: give it the time to be.
    // A local driver is ended here, at the limit.
    let grace = if to_node {
        node_grace(timeout, slack)
    } else {
        Duration::ZERO
    };
    let end = match primed {
        Some(waiting) => waiting.start(timeout, grace).await,
        None => local::run(argv, timeout, grace).await,
    }
    .map_err(|source| ExecError::Spawn {
        program: argv.first().cloned().unwrap_or_default(),
        source,
    })?;
    match end {
        LocalEnd::Exited { code, output } => {
            // docker exec / oc debug report a vanished container or session as a signal or
            // 137/143/255.
            let dropped =
                endings.expects_drop && matches!(code, None | Some(137) | Some(143) | Some(255));
            Ok(OpOutcome {
                exit_status: code,
                output,
                dropped,
            })
        }
        LocalEnd::Late { code, output } => endings.late(code, output),
        LocalEnd::TimedOut { .. } if endings.expects_drop => Ok(Endings::dropped(String::new())),
        // The local driver itself was the command: killed and reaped, it is over.
        LocalEnd::TimedOut { reaped: true } if !to_node => Err(endings.ended(true)),
        LocalEnd::TimedOut { .. } => Err(endings.unconfirmed(slack)),
    }
}
