//! Commands sent ahead of their step and waiting on their nodes for the word to start
//! ([`super::ssh::Primed`] over SSH, [`super::local::PrimedLocal`] through a local
//! client such as `docker exec -i`, [`PrimedPod`] through the API), kept until the step
//! is due.
//!
//! A step due at a known offset is armed a few seconds early; its commands are then sent
//! too, each wrapped in a gate ([`gated`]) that reads one line from standard input and
//! runs the command only if that line is [`super::gate_input::GO`]. When the step is due,
//! [`super::Executor::release`] sends the line to the commands waiting on all of its
//! nodes in one pass ([`PrimedCommands::release`]), whatever carries them, and each
//! node's [`super::Executor::perform`] then finds its command here and hears it out (or
//! sends the line itself, when nothing released it). A step's commands so start on every
//! node within a packet of their offset instead of a channel, a fork and a login shell
//! later over SSH, or a client process and the engine's exec setup later through `docker
//! exec`, or a pod's start and an exec later through the API (issue 26, item 7). A local
//! client is primed only when the inventory gives one that passes standard input on
//! (`execWithStdin`).
//!
//! The node's deadline is armed with the command: it counts from when the command was
//! sent, so it is rendered just before sending, as the time left until the step is due
//! plus the step's limit plus [`PRIMED_LATE`]. A waiting command is started only from
//! [`PRIMED_EARLY`] before to [`PRIMED_LATE`] after when it was due, and only by a call
//! with the same limit; outside that (a step issued late, a safety-net undo or a proof
//! that happens to run the same command) it is closed, which makes the gate exit without
//! running anything, and the command goes the ordinary way. So once started, its node
//! deadline falls no sooner than its limit and at most [`PRIMED_EXTRA_WAIT`] later than an
//! ordinary command's would.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::gate_input::GO;
use super::local::PrimedLocal;
use super::pod::primed::PrimedPod;
use super::ssh::Primed;

/// How late after when it was due a waiting command may still be started; its node
/// deadline adds as much, so that it is never ended before its limit.
pub(super) const PRIMED_LATE: Duration = Duration::from_millis(250);

/// How early before when it was due a waiting command may be started (the loop's offsets
/// and this process's monotonic clock can differ by a few milliseconds).
pub(super) const PRIMED_EARLY: Duration = Duration::from_millis(50);

/// How much later than an ordinary command's a started primed command's node deadline
/// can fall: the whole second its deadline is rounded up to, [`PRIMED_LATE`] and
/// [`PRIMED_EARLY`], and the round trip of sending it. The executor's waits allow it.
pub(super) const PRIMED_EXTRA_WAIT: Duration = Duration::from_secs(2);

/// `command`, made to wait for [`GO`] on its standard input first. End-of-file, or any
/// other line, exits with 125 and runs nothing. The command then reads an empty standard
/// input, as any command faultline runs without a password does: the line was all that
/// was sent, and the API transport holds its stream's input open until the command ends.
pub(super) fn gated(command: &str) -> String {
    format!(
        "IFS= read -r faultline_go && [ \"$faultline_go\" = {GO} ] || exit 125\nexec </dev/null\n{command}"
    )
}

/// A command waiting on its node, by the way it was sent.
#[derive(Debug)]
pub(super) enum Sent {
    /// Over a kept SSH session.
    Ssh(Primed),
    /// By a local client that carries its standard input (`docker exec -i`).
    Local(PrimedLocal),
    /// Through the API's exec in a node-access pod (`transport: pod`).
    Pod(Box<PrimedPod>),
}

impl Sent {
    /// Whether its word was sent already ([`PrimedCommands::release`]): it runs, and only
    /// [`PrimedCommands::take`] may end its life here.
    fn released(&self) -> bool {
        match self {
            Sent::Ssh(p) => p.released_at().is_some(),
            Sent::Local(p) => p.released(),
            Sent::Pod(p) => p.released(),
        }
    }
}

/// One waiting command, the node it waits on, and when its step is due.
struct Waiting {
    primed: Sent,
    node: String,
    due: Instant,
}

/// The commands waiting on nodes, by [`key`]. Shared by an executor's clones; dropped
/// with the last of them, which closes every command still waiting.
#[derive(Default)]
pub(super) struct PrimedCommands {
    waiting: Mutex<HashMap<String, Vec<Waiting>>>,
}

impl std::fmt::Debug for PrimedCommands {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self
            .waiting
            .lock()
            .map(|w| w.values().map(Vec::len).sum::<usize>())
            .unwrap_or(0);
        f.debug_struct("PrimedCommands")
            .field("waiting", &count)
            .finish()
    }
}

/// What a waiting command is found by: the way it was sent (the SSH login, or the node
/// of a local client), the time limit it was sent for and the command text before any
/// wrapping, so that only exactly the same command on the same node with the same limit
/// takes it.
pub(super) fn key(via: &str, command: &str, timeout: Duration) -> String {
    format!("{via}\n{timeout:?}\n{command}")
}

/// Closes waiting commands off the async threads: closing a channel can wait for the
/// node's answer, and a connection through jump hosts joins its pump thread.
fn close(stale: Vec<Waiting>) {
    if stale.is_empty() {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn_blocking(move || drop(stale));
        }
        Err(_) => drop(stale),
    }
}

impl PrimedCommands {
    /// Keeps `primed`, due at `due`, for [`PrimedCommands::take`]; closes any waiting
    /// command whose window has passed.
    pub(super) fn put(&self, key: String, node: &str, primed: Sent, due: Instant) {
        let waiting = Waiting {
            primed,
            node: node.to_string(),
            due,
        };
        let stale = match self.waiting.lock() {
            Ok(mut all) => {
                let stale = drain_stale(&mut all, Instant::now());
                all.entry(key).or_default().push(waiting);
                stale
            }
            Err(_) => vec![waiting],
        };
        close(stale);
    }

    /// Closes every command waiting on `node`: it was powered off, rebooted or its
    /// connection dropped, and a connection that died without a word still looks open.
    /// A released one runs already and is left to its call, which hears how it ended.
    pub(super) fn forget_node(&self, node: &str) {
        let gone = match self.waiting.lock() {
            Ok(mut all) => {
                let mut gone = Vec::new();
                for list in all.values_mut() {
                    let (on_node, keep): (Vec<_>, Vec<_>) = std::mem::take(list)
                        .into_iter()
                        .partition(|w| w.node == node && !w.primed.released());
                    gone.extend(on_node);
                    *list = keep;
                }
                all.retain(|_, list| !list.is_empty());
                gone
            }
            Err(_) => Vec::new(),
        };
        close(gone);
    }

    /// The command waiting under `key` that was released, else the one whose window holds
    /// `now`, taken out; `None` when there is none (any whose window has passed is
    /// closed).
    pub(super) fn take(&self, key: &str, now: Instant) -> Option<Sent> {
        let mut stale = Vec::new();
        let found = match self.waiting.lock() {
            Ok(mut all) => {
                stale = drain_stale(&mut all, now);
                let found = all.get_mut(key).and_then(|list| {
                    let index = list
                        .iter()
                        .position(|w| w.primed.released())
                        .or_else(|| pick(list, now))?;
                    Some(list.swap_remove(index).primed)
                });
                all.retain(|_, list| !list.is_empty());
                found
            }
            Err(_) => None,
        };
        close(stale);
        found
    }
}

impl PrimedCommands {
    /// Sends the word now to the commands waiting under `keys` whose window holds this
    /// moment, all in one pass, and keeps them for [`PrimedCommands::take`], which then
    /// only hears them out. A step's commands so start on all of its nodes within a few
    /// packets of each other: started one by one from each node's own call, the first
    /// nodes' commands and their shells took this machine's CPU from the calls still to
    /// come (issue 26, item 7). SSH channels block: their words are written from one
    /// thread, while this task writes those of local clients and API streams (a pipe or
    /// an in-memory stream each, which do not wait). One already released is not sent a
    /// second word.
    pub(super) async fn release(&self, keys: Vec<String>) {
        let (ssh, mut streams): (Vec<_>, Vec<_>) = self
            .take_due(keys, Instant::now())
            .into_iter()
            .partition(|(_, w)| matches!(w.primed, Sent::Ssh(_)));
        let blocking = (!ssh.is_empty()).then(|| {
            tokio::task::spawn_blocking(move || {
                let mut ssh = ssh;
                for (_, waiting) in &mut ssh {
                    if let Sent::Ssh(primed) = &mut waiting.primed {
                        primed.release();
                    }
                }
                ssh
            })
        });
        for (_, waiting) in &mut streams {
            match &mut waiting.primed {
                Sent::Local(primed) => primed.release().await,
                Sent::Pod(primed) => primed.release().await,
                Sent::Ssh(_) => {}
            }
        }
        if let Some(blocking) = blocking {
            match blocking.await {
                Ok(ssh) => streams.extend(ssh),
                Err(_) => tracing::warn!("primed SSH commands lost while being released"),
            }
        }
        self.put_back(streams);
    }

    /// The commands under `keys` whose window holds `now` and that were not released yet,
    /// taken out with their keys.
    fn take_due(&self, keys: Vec<String>, now: Instant) -> Vec<(String, Waiting)> {
        let mut out = Vec::new();
        if let Ok(mut all) = self.waiting.lock() {
            for key in keys {
                let Some(list) = all.get_mut(&key) else {
                    continue;
                };
                if let Some(index) = pick(list, now).filter(|&i| !list[i].primed.released()) {
                    out.push((key, list.swap_remove(index)));
                }
            }
            all.retain(|_, list| !list.is_empty());
        }
        out
    }

    /// Keeps `released` again, each under its key.
    fn put_back(&self, released: Vec<(String, Waiting)>) {
        match self.waiting.lock() {
            Ok(mut all) => {
                for (key, waiting) in released {
                    all.entry(key).or_default().push(waiting);
                }
            }
            Err(_) => {
                tracing::warn!("primed commands lost while being released");
                close(released.into_iter().map(|(_, w)| w).collect());
            }
        }
    }
}

/// Which of `list` `now` falls in the window of, the nearest to when it was due.
fn pick(list: &[Waiting], now: Instant) -> Option<usize> {
    list.iter()
        .enumerate()
        .filter(|(_, w)| within_window(w.due, now))
        .min_by_key(|(_, w)| distance(w.due, now))
        .map(|(i, _)| i)
}

impl Drop for PrimedCommands {
    fn drop(&mut self) {
        if let Ok(all) = self.waiting.get_mut() {
            close(all.drain().flat_map(|(_, list)| list).collect());
        }
    }
}

/// How far `now` is from `due`, either way.
fn distance(due: Instant, now: Instant) -> Duration {
    if now >= due { now - due } else { due - now }
}

/// Whether a command due at `due` may be started at `now`.
fn within_window(due: Instant, now: Instant) -> bool {
    if now >= due {
        now - due <= PRIMED_LATE
    } else {
        due - now <= PRIMED_EARLY
    }
}

/// Takes out every waiting command whose window has passed at `now`, for the caller to
/// close.
fn drain_stale(waiting: &mut HashMap<String, Vec<Waiting>>, now: Instant) -> Vec<Waiting> {
    let mut stale = Vec::new();
    for list in waiting.values_mut() {
        // A released command runs already: only its call may take it.
        let (late, keep): (Vec<_>, Vec<_>) = std::mem::take(list)
            .into_iter()
            .partition(|w| now > w.due + PRIMED_LATE && !w.primed.released());
        stale.extend(late);
        *list = keep;
    }
    waiting.retain(|_, list| !list.is_empty());
    stale
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use tokio::io::{AsyncReadExt, ReadHalf, SimplexStream};

    /// What an API stream standing in for a node-access pod's exec has heard so far,
    /// without waiting.
    fn heard(stream: &mut ReadHalf<SimplexStream>) -> String {
        let mut buf = [0u8; 64];
        match stream.read(&mut buf).now_or_never() {
            Some(Ok(n)) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            _ => String::new(),
        }
    }

    /// A step due now on three nodes through the API and two through a local client: one
    /// call writes the word to all five before any node's call takes its command, once,
    /// and what it released is never closed as stale, however late its call comes.
    #[tokio::test]
    async fn a_steps_commands_through_the_api_and_local_clients_are_released_in_one_pass() {
        let commands = PrimedCommands::default();
        let due = Instant::now();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut streams = Vec::new();
        let mut keys = Vec::new();
        for node in ["a", "b", "c"] {
            let (read, stdin) = tokio::io::simplex(64);
            let pod = PrimedPod::standing_in(stdin, false);
            commands.put(format!("pod {node}"), node, Sent::Pod(Box::new(pod)), due);
            streams.push(read);
            keys.push(format!("pod {node}"));
        }
        for node in ["d", "e"] {
            let file = dir.path().join(node);
            let script = format!("IFS= read -r w; echo \"$w\" > {}; sleep 30", file.display());
            let argv = ["sh".to_string(), "-c".to_string(), script];
            let local = PrimedLocal::spawn(&argv).expect("sh");
            commands.put(format!("exec {node}"), node, Sent::Local(local), due);
            keys.push(format!("exec {node}"));
        }
        assert!(
            streams.iter_mut().all(|s| heard(s).is_empty()),
            "a word before the release"
        );
        commands.release(keys.clone()).await;
        for (stream, node) in streams.iter_mut().zip(["a", "b", "c"]) {
            assert_eq!(
                heard(stream),
                "go\n",
                "node {node}: not released in the pass"
            );
        }
        let said = |node: &str| std::fs::read_to_string(dir.path().join(node)).unwrap_or_default();
        let limit = Instant::now() + Duration::from_secs(10);
        while (said("d").is_empty() || said("e").is_empty()) && Instant::now() < limit {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!((said("d"), said("e")), ("go\n".into(), "go\n".into()));
        commands.release(keys.clone()).await;
        for stream in &mut streams {
            assert_eq!(heard(stream), "", "a command was released twice");
        }
        let late = Instant::now() + PRIMED_LATE + Duration::from_secs(1);
        for key in &keys {
            let taken = commands.take(key, late);
            assert!(
                taken.as_ref().is_some_and(Sent::released),
                "{key}: its released command was not kept for its call"
            );
        }
    }

    /// What is not released stays to its window: one released under another key is not
    /// this one, and a waiting command past its window is closed as before.
    #[tokio::test]
    async fn only_the_keys_named_are_released_and_the_rest_still_go_stale() {
        let commands = PrimedCommands::default();
        let due = Instant::now();
        let (mut stream, stdin) = tokio::io::simplex(64);
        let pod = PrimedPod::standing_in(stdin, false);
        commands.put("pod a".into(), "a", Sent::Pod(Box::new(pod)), due);
        commands.release(vec!["pod b".into()]).await;
        assert_eq!(heard(&mut stream), "");
        let late = Instant::now() + PRIMED_LATE + Duration::from_secs(1);
        assert!(
            commands.take("pod a", late).is_none(),
            "a stale command was taken"
        );
    }

    #[test]
    fn a_command_is_started_only_near_when_it_was_due() {
        let due = Instant::now() + Duration::from_secs(10);
        let ms = Duration::from_millis;
        assert!(within_window(due, due));
        assert!(within_window(due, due + PRIMED_LATE));
        assert!(within_window(due, due - PRIMED_EARLY));
        assert!(!within_window(due, due + PRIMED_LATE + ms(1)));
        assert!(!within_window(due, due - PRIMED_EARLY - ms(1)));
        assert!(!within_window(due, due - Duration::from_secs(3)));
    }

    #[test]
    fn the_gate_runs_the_command_only_on_the_word() {
        let run = |input: &str| {
            let mut child = std::process::Command::new("sh")
                .args(["-c", &gated("echo ran; exit 7")])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("sh");
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write");
            let out = child.wait_with_output().expect("wait");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        };
        assert_eq!(run("go\n"), (Some(7), "ran\n".to_string()));
        assert_eq!(run(""), (Some(125), String::new()));
        assert_eq!(run("gone\n"), (Some(125), String::new()));
        assert_eq!(run("g"), (Some(125), String::new()));
    }
}
