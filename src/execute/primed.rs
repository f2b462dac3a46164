//! Commands sent ahead of their step and waiting on their nodes for the word to start
//! ([`super::ssh::Primed`] over SSH, [`super::local::PrimedLocal`] through a local
//! client such as `docker exec -i`, [`PrimedPod`] through the API), kept until the step
//! is due.
//!
//! A step due at a known offset is armed a few seconds early; its commands are then sent
//! too, each wrapped in a gate ([`gated`]) that reads one line from standard input and
//! runs the command only if that line is [`super::ssh::GO`]. When the step is due,
//! [`super::Executor::perform`] finds the waiting command here and sends the line, so a
//! step's commands start on every node within a packet of their offset instead of a
//! channel, a fork and a login shell later over SSH, or a client process and the engine's
//! exec setup later through `docker exec`, or a pod's start and an exec later through the
//! API (issue 26, item 7). A local client is primed only when the inventory gives one that
//! passes standard input on (`execWithStdin`).
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

use super::local::PrimedLocal;
use super::pod::primed::PrimedPod;
use super::ssh::{GO, Primed};

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
        matches!(self, Sent::Ssh(p) if p.released_at().is_some())
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
    pub(super) fn forget_node(&self, node: &str) {
        let gone = match self.waiting.lock() {
            Ok(mut all) => {
                let mut gone = Vec::new();
                for list in all.values_mut() {
                    let (on_node, keep): (Vec<_>, Vec<_>) = std::mem::take(list)
                        .into_iter()
                        .partition(|w| w.node == node);
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
    /// Sends the word now to the SSH commands waiting under `keys` whose window holds
    /// this moment, all from one thread in one pass, and keeps them for
    /// [`PrimedCommands::take`], which then only hears them out. A step's commands so
    /// start on all of its nodes within a few packets of each other: started one by one
    /// from each node's own call, the first nodes' commands and their shells took this
    /// machine's CPU from the calls still to come (issue 26, item 7). Commands through a
    /// local client or the API are left to their calls.
    pub(super) async fn release(&self, keys: Vec<String>) {
        let now = Instant::now();
        let mut out: Vec<(String, Waiting)> = Vec::new();
        if let Ok(mut all) = self.waiting.lock() {
            for key in keys {
                let Some(list) = all.get_mut(&key) else {
                    continue;
                };
                let found = pick(list, now).filter(|&i| {
                    matches!(list[i].primed, Sent::Ssh(_)) && !list[i].primed.released()
                });
                if let Some(index) = found {
                    out.push((key, list.swap_remove(index)));
                }
            }
            all.retain(|_, list| !list.is_empty());
        }
        if out.is_empty() {
            return;
        }
        let released = tokio::task::spawn_blocking(move || {
            for (_, waiting) in &mut out {
                if let Sent::Ssh(primed) = &mut waiting.primed {
                    primed.release();
                }
            }
            out
        })
        .await;
        match (released, self.waiting.lock()) {
            (Ok(out), Ok(mut all)) => {
                for (key, waiting) in out {
                    all.entry(key).or_default().push(waiting);
                }
            }
            _ => tracing::warn!("primed commands lost while being released"),
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
