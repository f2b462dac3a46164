//! The node's own last check before a fault: on a node whose self-restore is the API
//! transport's systemd timer ([`crate::inventory::pod_defaults::SYSTEMD_ARM`]), a fault
//! that cuts the transport is sent gated on that timer still waiting.
//!
//! The loop issues a fault only while its backstop is ahead of it, but through the API a
//! fault that was not sent ahead still needs a pod started and an exec opened before it
//! runs: seconds, at twenty nodes on a busy machine. If the timer fires in that time it
//! starts a kubelet that is still running, and the stop that lands after it has nothing
//! left to end it. So the node checks, just before it applies the fault, that the timer
//! has not fired (`systemctl is-active`, as the disarm template does), and otherwise
//! applies nothing and exits with [`GONE_EXIT`]: the step fails and says why.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::inventory::pod_defaults::SYSTEMD_ARM;

/// The exit status of a fault the node did not apply because its backstop was gone.
pub(super) const GONE_EXIT: i32 = 97;

/// Node → the systemd timer unit of the self-restore armed there, while armed.
#[derive(Debug, Default)]
pub(super) struct BackstopTimers(Mutex<HashMap<String, String>>);

impl BackstopTimers {
    /// A self-restore was armed on `node` with `template` and `token`: remembered when it
    /// is the systemd timer, whose unit the token names.
    pub(super) fn armed(&self, node: &str, template: Option<&str>, token: &str) {
        if template == Some(SYSTEMD_ARM) {
            self.lock().insert(node.to_string(), unit(token));
        }
    }

    /// The self-restore `token` on `node` was disarmed (or has fired): forgotten.
    pub(super) fn disarmed(&self, node: &str, token: &str) {
        let mut units = self.lock();
        if units.get(node).is_some_and(|u| *u == unit(token)) {
            units.remove(node);
        }
    }

    /// `command` as the node should run it: gated on the node's timer when one is armed
    /// there, unchanged otherwise.
    pub(super) fn gate(&self, node: &str, command: String) -> String {
        match self.lock().get(node) {
            Some(unit) => gated(unit, &command),
            None => command,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The timer unit [`SYSTEMD_ARM`] creates for `token`.
fn unit(token: &str) -> String {
    format!("faultline-restore-{token}.timer")
}

/// The check comes first, so nothing in `command` (a comment, a trailing `&`) can skip it.
fn gated(unit: &str, command: &str) -> String {
    format!(
        "systemctl is-active --quiet {unit} || {{ echo 'faultline: the self-restore {unit} \
         has fired or is gone: the fault is not applied' >&2; exit {GONE_EXIT}; }}; {command}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_node_armed_with_the_systemd_timer_is_gated_and_only_until_disarmed() {
        let timers = BackstopTimers::default();
        timers.armed("a", Some(SYSTEMD_ARM), "fl1-2");
        timers.armed("b", None, "fl1-3");
        timers.armed("c", Some("my-timer {seconds} {token} {undo}"), "fl1-4");
        let gated = timers.gate("a", "systemctl stop kubelet".into());
        assert_eq!(
            gated,
            "systemctl is-active --quiet faultline-restore-fl1-2.timer || { echo 'faultline: \
             the self-restore faultline-restore-fl1-2.timer has fired or is gone: the fault \
             is not applied' >&2; exit 97; }; systemctl stop kubelet"
        );
        assert_eq!(timers.gate("b", "x".into()), "x");
        assert_eq!(timers.gate("c", "x".into()), "x");
        // Another token's disarm leaves it; its own removes it.
        timers.disarmed("a", "fl1-9");
        assert!(timers.gate("a", "x".into()).contains("fl1-2"));
        timers.disarmed("a", "fl1-2");
        assert_eq!(timers.gate("a", "x".into()), "x");
    }

    /// The unit the gate asks about is the one the default template creates and the
    /// default disarm asks about: the three cannot drift apart.
    #[test]
    fn the_gated_unit_is_the_one_the_defaults_arm_and_disarm() {
        use crate::inventory::pod_defaults::SYSTEMD_DISARM;
        let named = unit("{token}");
        assert!(SYSTEMD_ARM.contains(&format!("--unit={}", named.trim_end_matches(".timer"))));
        assert!(SYSTEMD_DISARM.contains(&format!("systemctl is-active --quiet {named}")));
    }

    /// The gate in a real shell: with the check failing nothing after it runs and the
    /// exit is `GONE_EXIT`; with it passing the command runs.
    #[test]
    fn the_gate_stops_the_command_when_the_check_fails() {
        let run = |check: &str| {
            let text = gated("u.timer", "echo applied").replacen(
                "systemctl is-active --quiet u.timer",
                check,
                1,
            );
            let out = std::process::Command::new("sh")
                .args(["-c", &text])
                .output()
                .expect("sh runs");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        };
        assert_eq!(run("false"), (Some(GONE_EXIT), String::new()));
        assert_eq!(run("true"), (Some(0), "applied\n".to_string()));
    }
}
