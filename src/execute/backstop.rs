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
//! has not fired (for the systemd timer, that its sub-state is still `waiting`), and
//! otherwise applies nothing and exits with [`GONE_EXIT`]: the step fails and says why. A
//! custom `armRestore` without `restoreWaiting` cannot be asked: `faultline doctor` says so
//! for every node reached through the API.

use std::collections::HashMap;
use std::sync::Mutex;

use super::render::{self, RenderError};

/// The exit status of a fault the node did not apply because its backstop was gone.
pub(super) const GONE_EXIT: i32 = 97;

/// What a gate remembers of a self-restore armed on a node.
#[derive(Debug, Clone)]
struct Waiting {
    /// The token it was armed with (its disarm forgets it).
    token: String,
    /// The shell command, from [`on_its_own`], that exits 0 while it still waits; `None`
    /// when it cannot be asked.
    check: Option<String>,
}

/// Node → the self-restores armed there and not yet disarmed, oldest first. A fault is
/// armed for just before it is sent, so the newest is its own.
#[derive(Debug, Default)]
pub(super) struct BackstopTimers(Mutex<HashMap<String, Vec<Waiting>>>);

impl BackstopTimers {
    /// A self-restore was armed on `node` with `token`; `check` (from [`on_its_own`]) asks
    /// whether it still waits, where the node says how.
    pub(super) fn armed(&self, node: &str, token: &str, check: Option<String>) {
        let token = token.to_string();
        let mut armed = self.lock();
        let on_node = armed.entry(node.to_string()).or_default();
        on_node.retain(|w| w.token != token);
        on_node.push(Waiting { token, check });
    }

    /// The self-restore `token` on `node` was disarmed (or has fired): forgotten, and any
    /// other armed there stays.
    pub(super) fn disarmed(&self, node: &str, token: &str) {
        let mut armed = self.lock();
        if let Some(on_node) = armed.get_mut(node) {
            on_node.retain(|w| w.token != token);
            if on_node.is_empty() {
                armed.remove(node);
            }
        }
    }

    /// `command` as the node should run it: gated on the newest self-restore armed there
    /// when it can be asked, unchanged otherwise.
    pub(super) fn gate(&self, node: &str, command: String) -> String {
        match self.lock().get(node).and_then(|on_node| on_node.last()) {
            Some(Waiting {
                token,
                check: Some(check),
            }) => gated(token, check, &command),
            _ => command,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Waiting>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A `restoreWaiting` check, rendered, as one shell word run by a shell of its own: what
/// it ends with (a `;`, a newline, a comment), an `exit`, a `set -e` or a `cd` stays in
/// it, so the gate and `faultline doctor` run exactly the same thing and the fault after
/// it runs as it would ungated.
pub(super) fn on_its_own(check: &str) -> Result<String, RenderError> {
    Ok(format!("sh -c {}", render::quote(check)?))
}

/// The check (from [`on_its_own`]) comes first, so nothing in `command` (a comment, a
/// trailing `&`) can skip it. One line: a command sent ahead is found again by its text.
fn gated(token: &str, check: &str, command: &str) -> String {
    format!(
        "{check} || {{ echo 'faultline: the self-restore {token} has fired or is gone: the \
         fault is not applied' >&2; exit {GONE_EXIT}; }}; {command}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::pod_defaults::{SYSTEMD_ARM, SYSTEMD_DISARM, SYSTEMD_WAITING};

    #[test]
    fn a_node_is_gated_on_its_newest_restore_and_only_until_disarmed() {
        let timers = BackstopTimers::default();
        timers.armed("a", "fl1-2", Some("my-timer --waiting fl1-2".into()));
        timers.armed("b", "fl1-3", None);
        let gated = timers.gate("a", "systemctl stop kubelet".into());
        assert_eq!(
            gated,
            "my-timer --waiting fl1-2 || { echo 'faultline: the self-restore fl1-2 has fired \
             or is gone: the fault is not applied' >&2; exit 97; }; systemctl stop kubelet"
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
        // Armed again with nothing to ask: the last check is not used for the new restore.
        timers.armed("a", "fl1-4", Some("check fl1-4".into()));
        timers.armed("a", "fl1-5", None);
        assert_eq!(timers.gate("a", "x".into()), "x");
        // Two armed at once: the newest gates, and its disarm leaves the other gating.
        timers.armed("c", "fl1-6", Some("check fl1-6".into()));
        timers.armed("c", "fl1-7", Some("check fl1-7".into()));
        assert!(timers.gate("c", "x".into()).starts_with("check fl1-7 "));
        timers.disarmed("c", "fl1-7");
        assert!(timers.gate("c", "x".into()).starts_with("check fl1-6 "));
    }

    /// The unit the default check asks about is the one the default template creates and
    /// the default disarm stops: the three cannot drift apart.
    #[test]
    fn the_default_check_asks_the_unit_the_defaults_arm_and_disarm() {
        let unit = "faultline-restore-{token}";
        assert!(SYSTEMD_ARM.contains(&format!("--unit={unit} ")));
        assert_eq!(
            SYSTEMD_WAITING,
            format!(
                "test \"$(systemctl show --property=SubState --value {unit}.timer)\" = waiting"
            )
        );
        assert!(SYSTEMD_DISARM.contains(&format!("systemctl stop {unit}.timer")));
    }

    /// The gate in a real shell: with the check failing nothing after it runs and the
    /// exit is `GONE_EXIT`; with it passing the command runs as it would alone, whatever
    /// the check ends with or does to its own shell.
    #[test]
    fn the_gate_stops_the_command_unless_the_check_passes() {
        let run = |check: &str| {
            let line = gated("fl1-2", &on_its_own(check).expect("quotes"), "echo applied");
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("{line} # and a comment")])
                .output()
                .expect("sh runs");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        };
        let applied = (Some(0), "applied\n".to_string());
        let refused = (Some(GONE_EXIT), String::new());
        assert_eq!(run("false"), refused);
        assert_eq!(run("false || false"), refused);
        assert_eq!(run("false && true"), refused);
        assert_eq!(run("exit 3"), refused);
        assert_eq!(run("true"), applied);
        assert_eq!(run("true # a comment"), applied);
        assert_eq!(run("true;"), applied);
        assert_eq!(run("true\n"), applied);
        assert_eq!(run("test -d / && exit 0; exit 1"), applied);
        assert_eq!(
            run("set -e; cd /nonexistent-faultline || true; true"),
            applied
        );
        assert_eq!(run("it's; \"quoted\" $(false)"), refused);
    }
}
