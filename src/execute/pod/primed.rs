//! A node command sent ahead through the API transport: its exec opened when the step is
//! armed (in the pod kept on the node for the run, else in a node-access pod started for
//! it), the gated command ([`super::super::primed`]) waiting in the host's namespaces for
//! the word on its standard input. At the offset faultline writes one line into an open
//! stream, instead of opening an exec (and, without a kept pod, creating a pod and waiting
//! for the kubelet to start it: 1.5–1.7 s on kind).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::Client;
use kube::api::AttachedProcess;
use tokio::io::{SimplexStream, WriteHalf};

use super::kept::KeptPods;
use super::{AccessPod, KeptExec, LIFETIME_MARGIN, PodEnd, PodError, PodInUse, kept_exec};
use crate::execute::gate_input::GateInput;
use crate::inventory::PodSettings;

/// The end of an exec stream, taken from it when it was opened, so that whether it has
/// ended can be asked before the word is written.
type StreamEnd = Pin<Box<dyn Future<Output = Option<Status>> + Send>>;

/// A gated command waiting in a node-access pod. Dropped without being started (the run
/// stopped first, or the step went the ordinary way), its stream is cut, the gate reads
/// end-of-file and runs nothing, and a pod started for it is deleted (a kept one stays);
/// the pod's own deadline ends it in any case, and `restore` deletes one a killed run left.
pub(crate) struct PrimedPod {
    pod: Option<PodInUse>,
    process: Option<AttachedProcess>,
    /// Held open until the command is over: closing it would, on an API server without
    /// the stream-close signal (before the v5 exec protocol), close the whole stream.
    stdin: GateInput<WriteHalf<SimplexStream>>,
    end: Option<StreamEnd>,
}

impl std::fmt::Debug for PrimedPod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrimedPod(..)")
    }
}

/// Opens the exec of `gated` (rendered just before it is sent, since the node's deadline
/// counts from then; `None` gives up) in the pod kept on `node` for the run, or else in a
/// node-access pod started for it, all within `within`. `wait` is how long, from now, the
/// command may wait and then run: the pod must outlive it (one started for it does by its
/// usual margin).
pub(crate) async fn prime(
    client: &Client,
    (node, settings, run): (&str, &PodSettings, Option<&str>),
    kept: &KeptPods,
    gated: impl Fn() -> Option<String>,
    wait: Duration,
    within: Duration,
) -> Result<Option<PrimedPod>, PodError> {
    let began = tokio::time::Instant::now();
    let Some(command) = gated() else {
        return Ok(None);
    };
    let (pod, opened) = match kept_exec(kept, node, &command, true, within, began + wait).await {
        KeptExec::Opened(pod, process) => (PodInUse::Kept(pod), Ok(Some(process))),
        KeptExec::TimedOut => return Ok(None),
        KeptExec::NoneKept => {
            let lifetime = settings.start_timeout + wait + LIFETIME_MARGIN;
            let left = within.saturating_sub(began.elapsed());
            let pod = AccessPod::start(client, (node, settings, run), lifetime, left).await?;
            let opened = match gated() {
                Some(command) => {
                    pod.open_exec(&command, true, within.saturating_sub(began.elapsed()))
                        .await
                }
                None => Ok(None),
            };
            (PodInUse::Own(Box::new(pod)), opened)
        }
    };
    let mut process = match opened {
        Ok(Some(process)) => process,
        other => {
            pod.done().await;
            return other.map(|_| None);
        }
    };
    let stdin = GateInput::new(process.stdin());
    let end = process.take_status().map(|s| Box::pin(s) as StreamEnd);
    Ok(Some(PrimedPod {
        pod: Some(pod),
        process: Some(process),
        stdin,
        end,
    }))
}

impl PrimedPod {
    /// `self` while its stream is open (a pod whose node went away, or that its deadline
    /// ended, has closed it); `None` after deleting it, for the command to go the
    /// ordinary way. A released one is kept unasked: its stream may have ended because
    /// it ran, and it must not run again.
    pub(crate) fn alive(mut self) -> Option<PrimedPod> {
        if self.released() {
            return Some(self);
        }
        let ended = match self.end.as_mut() {
            Some(end) => end.now_or_never().is_some(),
            None => true,
        };
        if ended || !self.stdin.is_open() {
            tracing::debug!("a primed node-access pod's stream had ended before it was due");
            return None;
        }
        Some(self)
    }

    /// Writes the word into the open stream now, ahead of the call that hears the
    /// command out: a step's commands are released on all of its nodes in one pass
    /// ([`crate::execute::Executor::release`]). Once only.
    pub(crate) async fn release(&mut self) {
        self.stdin.release().await;
    }

    /// Whether its word was written ([`PrimedPod::release`]).
    pub(crate) fn released(&self) -> bool {
        self.stdin.released_at().is_some()
    }

    /// Writes the word (unless it was released already), then hears the command out as
    /// an ordinary exec, and deletes the pod. `limit` and `grace` as for [`super::run`].
    pub(crate) async fn start(
        mut self,
        limit: Duration,
        grace: Duration,
    ) -> Result<PodEnd, PodError> {
        let (Some(pod), Some(process)) = (self.pod.take(), self.process.take()) else {
            return Ok(PodEnd::TimedOut {
                sent: self.released(),
            });
        };
        self.stdin.release().await;
        let ended = pod.hear_out(process, self.end.take(), limit, grace).await;
        pod.done().await;
        ended
    }
}

impl Drop for PrimedPod {
    fn drop(&mut self) {
        // Cut the stream first: the gate reads end-of-file and runs nothing.
        drop(self.process.take());
        drop(std::mem::replace(&mut self.stdin, GateInput::new(None)));
        // Then the pod: one started for it deletes itself when dropped; a kept one stays.
        drop(self.pod.take());
    }
}

#[cfg(test)]
impl PrimedPod {
    /// A command waiting behind `stdin` with no pod or exec behind it, for tests of how
    /// waiting commands are released and kept; `ended`: its stream has ended.
    pub(crate) fn standing_in(stdin: WriteHalf<SimplexStream>, ended: bool) -> PrimedPod {
        let end: StreamEnd = if ended {
            Box::pin(std::future::ready(None))
        } else {
            Box::pin(std::future::pending())
        };
        PrimedPod {
            pod: None,
            process: None,
            stdin: GateInput::new(Some(stdin)),
            end: Some(end),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A released command's stream may have ended because it ran: its call must hear it
    /// out, not take it for one that had gone and send it anew.
    #[tokio::test]
    async fn a_released_command_whose_stream_ended_is_kept_for_its_call() {
        let (_read, stdin) = tokio::io::simplex(64);
        let mut released = PrimedPod::standing_in(stdin, true);
        released.release().await;
        assert!(released.alive().is_some(), "a released command was dropped");
        let (_read, stdin) = tokio::io::simplex(64);
        let waiting = PrimedPod::standing_in(stdin, true);
        assert!(
            waiting.alive().is_none(),
            "a waiting command whose stream ended was kept"
        );
    }
}
