//! Commands sent ahead of their step and waiting on their nodes for the word to start
//! ([`super::ssh::Primed`]), kept until the step is due.
//!
//! A step due at a known offset is armed a few seconds early; its SSH commands are then
//! sent too, each wrapped in a gate ([`gated`]) that reads one line from standard input
//! and runs the command only if that line is [`super::ssh::GO`]. When the step is due,
//! [`super::Executor::perform`] finds the waiting command here and sends the line, so a
//! step's commands start on every node within a packet of their offset instead of a
//! channel, a fork and a login shell later (issue 26, item 7).
//!
//! The node's deadline is armed with the command: it counts from when the command was
//! sent, so it is the step's limit plus the time until the step is due plus
//! [`PRIMED_SLACK`]. A waiting command is used only within [`PRIMED_SLACK`] of when it
//! was due; outside that window (a step issued late, or another step's command that
//! happens to read the same) it is closed, which makes the gate exit without running
//! anything, and the command goes the ordinary way.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::ssh::{GO, Primed, SshTarget};

/// How far from when it was due a waiting command may still be started, and what its
/// node deadline adds for that (so that it is never ended before its limit after the
/// start, late by up to this much).
pub(super) const PRIMED_SLACK: Duration = Duration::from_secs(1);

/// `command`, made to wait for [`GO`] on its standard input first. End-of-file, or any
/// other line, exits with 125 and runs nothing. The command then reads an empty standard
/// input (the line was all that was sent), as any command faultline runs without a
/// password does.
pub(super) fn gated(command: &str) -> String {
    format!("IFS= read -r faultline_go && [ \"$faultline_go\" = {GO} ] || exit 125\n{command}")
}

/// One waiting command and when its step is due.
struct Waiting {
    primed: Primed,
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

/// What a waiting command is found by: the login it was sent over and the command text
/// before any wrapping, so that only exactly the same command on the same node takes it.
pub(super) fn key(target: &SshTarget, command: &str) -> String {
    format!("{}\n{command}", target.pool_key())
}

impl PrimedCommands {
    /// Keeps `primed`, due at `due`, for [`PrimedCommands::take`]; closes any waiting
    /// command whose window has passed.
    pub(super) fn put(&self, key: String, primed: Primed, due: Instant) {
        let stale = {
            let Ok(mut waiting) = self.waiting.lock() else {
                return;
            };
            let stale = drain_stale(&mut waiting, Instant::now());
            waiting
                .entry(key)
                .or_default()
                .push(Waiting { primed, due });
            stale
        };
        // Closed outside the lock: closing joins a jump host's pump thread.
        drop(stale);
    }

    /// The command waiting under `key` and due within [`PRIMED_SLACK`] of `now`, taken
    /// out; `None` when there is none (any that is too late is closed).
    pub(super) fn take(&self, key: &str, now: Instant) -> Option<Primed> {
        let (found, stale) = {
            let mut waiting = self.waiting.lock().ok()?;
            let stale = drain_stale(&mut waiting, now);
            let list = waiting.get_mut(key)?;
            let found = list
                .iter()
                .enumerate()
                .filter(|(_, w)| within_window(w.due, now))
                .min_by_key(|(_, w)| distance(w.due, now))
                .map(|(i, _)| i)
                .map(|i| list.swap_remove(i).primed);
            if list.is_empty() {
                waiting.remove(key);
            }
            (found, stale)
        };
        drop(stale);
        found
    }
}

/// How far `now` is from `due`, either way.
fn distance(due: Instant, now: Instant) -> Duration {
    if now >= due { now - due } else { due - now }
}

/// Whether a command due at `due` may be started at `now`.
fn within_window(due: Instant, now: Instant) -> bool {
    distance(due, now) <= PRIMED_SLACK
}

/// Takes out every waiting command whose window has passed at `now`, for the caller to
/// close.
fn drain_stale(waiting: &mut HashMap<String, Vec<Waiting>>, now: Instant) -> Vec<Waiting> {
    let mut stale = Vec::new();
    for list in waiting.values_mut() {
        let (late, keep): (Vec<_>, Vec<_>) = std::mem::take(list)
            .into_iter()
            .partition(|w| now > w.due + PRIMED_SLACK);
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
        assert!(within_window(due, due));
        assert!(within_window(due, due + PRIMED_SLACK));
        assert!(within_window(due, due - PRIMED_SLACK));
        assert!(!within_window(
            due,
            due + PRIMED_SLACK + Duration::from_millis(1)
        ));
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
