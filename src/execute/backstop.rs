//! The node's own last check before a fault: on a node whose self-restore can be asked
//! whether it is still waiting (the inventory's `restoreWaiting`; the API transport's
//! systemd timer, [`crate::inventory::pod_defaults::SYSTEMD_WAITING`], by default), a fault
//! that cuts the transport is sent gated on that answer.
//!
//! The loop issues a fault only while its backstop is ahead of it, but through the API a
//! fault that was not sent ahead still needs a pod started and an exec opened before it
//! runs: seconds, at twenty nodes on a busy machine. If the restore fires in that time it
//! starts a kubelet that is still running, and the stop that lands after it has nothing
//! left to end it. So the node checks, just before it applies the fault, that the restore
//! has not fired (for the systemd timer, `systemctl is-active`, as the disarm template
//! does), and otherwise applies nothing and exits with [`GONE_EXIT`]: the step fails and
//! says why. A custom `armRestore` without `restoreWaiting` cannot be asked: `faultline
//! doctor` says so for every node reached through the API.

use std::collections::HashMap;
use std::sync::Mutex;

/// The exit status of a fault the node did not apply because its backstop was gone.
pub(super) const GONE_EXIT: i32 = 97;

/// What a gate remembers of a node's armed self-restore.
#[derive(Debug, Clone)]
struct Waiting {
    /// The token it was armed with (its disarm forgets it).
    token: String,
    /// The shell check, rendered, that exits 0 while it still waits.
    check: String,
}

/// Node → how to ask whether its armed self-restore still waits, while armed.
#[derive(Debug, Default)]
pub(super) struct BackstopTimers(Mutex<HashMap<String, Waiting>>);

impl BackstopTimers {
    /// A self-restore was armed on `node` with `token`: remembered with `check` (the
    /// node's `restoreWaiting`, rendered) when there is one to ask.
    pub(super) fn armed(&self, node: &str, token: &str, check: Option<String>) {
        let mut waiting = self.lock();
        match check {
            Some(check) => {
                let token = token.to_string();
                waiting.insert(node.to_string(), Waiting { token, check });
            }
            None => {
                waiting.remove(node);
            }
        }
    }

    /// The self-restore `token` on `node` was disarmed (or has fired): forgotten.
    pub(super) fn disarmed(&self, node: &str, token: &str) {
        let mut waiting = self.lock();
        if waiting.get(node).is_some_and(|w| w.token == token) {
            waiting.remove(node);
        }
    }

    /// `command` as the node should run it: gated on the node's self-restore when one that
    /// can be asked is armed there, unchanged otherwise.
    pub(super) fn gate(&self, node: &str, command: String) -> String {
        match self.lock().get(node) {
            Some(w) => gated(&w.token, &w.check, &command),
            None => command,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The check comes first, in a group of its own, so nothing in `command` (a comment, a
/// trailing `&`) can skip it and an `||` in `check` stays inside it. One line: a command
/// sent ahead is found again by its text. A check that ends in a comment leaves the group
/// unclosed, and the shell then runs nothing at all: the fault fails rather than going
/// ungated.
fn gated(token: &str, check: &str, command: &str) -> String {
    format!(
        "{{ {check}; }} || {{ echo 'faultline: the self-restore {token} has fired or is gone: \
         the fault is not applied' >&2; exit {GONE_EXIT}; }}; {command}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::pod_defaults::{SYSTEMD_ARM, SYSTEMD_DISARM, SYSTEMD_WAITING};

    #[test]
    fn a_node_is_gated_on_its_own_check_and_only_until_disarmed() {
        let timers = BackstopTimers::default();
        timers.armed("a", "fl1-2", Some("my-timer --waiting fl1-2".into()));
        timers.armed("b", "fl1-3", None);
        let gated = timers.gate("a", "systemctl stop kubelet".into());
        assert_eq!(
            gated,
            "{ my-timer --waiting fl1-2; } || { echo 'faultline: the self-restore fl1-2 has \
             fired or is gone: the fault is not applied' >&2; exit 97; }; systemctl stop kubelet"
        );
        assert_eq!(
            timers.gate("b", "x".into()),
            "x",
            "nothing to ask: not gated"
        );
        // Another token's disarm leaves it; its own removes it.
        timers.disarmed("a", "fl1-9");
        assert!(timers.gate("a", "x".into()).contains("fl1-2"));
        timers.disarmed("a", "fl1-2");
        assert_eq!(timers.gate("a", "x".into()), "x");
        // Armed again with nothing to ask: the last check is not kept for the new restore.
        timers.armed("a", "fl1-4", Some("check fl1-4".into()));
        timers.armed("a", "fl1-5", None);
        assert_eq!(timers.gate("a", "x".into()), "x");
    }

    /// The unit the default check asks about is the one the default template creates and
    /// the default disarm asks about: the three cannot drift apart.
    #[test]
    fn the_default_check_asks_the_unit_the_defaults_arm_and_disarm() {
        let unit = "faultline-restore-{token}";
        assert!(SYSTEMD_ARM.contains(&format!("--unit={unit} ")));
        assert_eq!(
            SYSTEMD_WAITING,
            format!("systemctl is-active --quiet {unit}.timer")
        );
        assert!(SYSTEMD_DISARM.contains(SYSTEMD_WAITING));
    }

    /// The gate in a real shell: with the check failing nothing after it runs and the
    /// exit is `GONE_EXIT`; with it passing the command runs; a check that could swallow
    /// the group fails the whole line instead of letting the command through.
    #[test]
    fn the_gate_stops_the_command_unless_the_check_passes() {
        let run = |check: &str| {
            let out = std::process::Command::new("sh")
                .args(["-c", &gated("fl1-2", check, "echo applied # and a comment")])
                .output()
                .expect("sh runs");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        };
        assert_eq!(run("false"), (Some(GONE_EXIT), String::new()));
        assert_eq!(run("false || false"), (Some(GONE_EXIT), String::new()));
        assert_eq!(run("true"), (Some(0), "applied\n".to_string()));
        assert_eq!(run("false && true"), (Some(GONE_EXIT), String::new()));
        let (code, out) = run("true # a comment");
        assert_ne!(code, Some(0), "an unclosed group must not run");
        assert_eq!(out, "", "nothing runs when the check swallows the group");
    }
}
