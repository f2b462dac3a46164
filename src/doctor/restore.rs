//! A self-restore can be armed on the node, through the node's own mechanism, and disarmed.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{CheckKind, Finding, Status};
use crate::execute::{Executor, NodeOp};
use crate::inventory::{NodeAccess, TransportKind};

/// How long the self-restore armed by the check would wait before running its (harmless)
/// undo, should disarming it fail.
const CHECK_RESTORE_AFTER: Duration = Duration::from_secs(600);

/// Arms a self-restore through the node's own mechanism (the default, or the profile's or
/// inventory's `armRestore`) whose undo is `true`, and disarms it again at once. Where the
/// node says how to ask whether it still waits (`restoreWaiting`, what a fault that cuts
/// the API transport is gated on), that check must answer "waiting" while armed and "not"
/// once disarmed; a node reached through the API without one is a warning.
pub(super) async fn finding(executor: &Executor, node: &NodeAccess) -> Finding {
    let found = armed_and_disarmed(executor, node).await;
    // The default self-restore over SSH is a process of the login session: where logind
    // ends a session's processes with it, the restore dies as the run's connection closes.
    if found.status != Status::Pass
        || node.arm_restore.is_some()
        || node.transport != TransportKind::Ssh
    {
        return found;
    }
    let asked = executor
        .perform(
            &node.name,
            &NodeOp::Run(LOGIND.into()),
            super::CHECK_TIMEOUT,
        )
        .await;
    match asked.map(|o| logind_kills(&o.output)) {
        Ok(Some(true)) => Finding::node(
            &node.name,
            CheckKind::SelfRestore,
            Status::Warn,
            format!(
                "{}, but systemd-logind has KillUserProcesses=yes and the login user is not                  root: the default self-restore (setsid nohup in the SSH session) is ended                  with the session, so a fault outlives a killed faultline. Choose a profile                  (its restore is a systemd-run timer) or set armRestore (docs/inventory.md)",
                found.detail
            ),
        ),
        _ => found,
    }
}

/// Asks logind whether it ends a session's processes with it, and who logs in.
const LOGIND: &str = "busctl get-property org.freedesktop.login1 /org/freedesktop/login1 \
                      org.freedesktop.login1.Manager KillUserProcesses 2>/dev/null; echo uid=$(id -u)";

/// Whether [`LOGIND`]'s output says the session's processes are ended with it (for a user
/// other than root, whom logind excludes by default); `None`: it could not tell.
fn logind_kills(output: &str) -> Option<bool> {
    let kills = output.lines().find_map(|l| match l.trim() {
        "b true" => Some(true),
        "b false" => Some(false),
        _ => None,
    })?;
    let root = output.lines().any(|l| l.trim() == "uid=0");
    Some(kills && !root)
}

async fn armed_and_disarmed(executor: &Executor, node: &NodeAccess) -> Finding {
    let name = node.name.as_str();
    let f = |status, detail: String| Finding::node(name, CheckKind::SelfRestore, status, detail);
    // One token per check, even for nodes checked in the same millisecond.
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let token = format!(
        "doctor{}-{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let armed = match executor
        .arm_restore(
            name,
            &NodeOp::Run("true".into()),
            CHECK_RESTORE_AFTER,
            &token,
        )
        .await
    {
        Ok(a) => a,
        Err(e) => return f(Status::Fail, format!("cannot arm a self-restore: {e}")),
    };
    let while_armed = executor.restore_waits(name, &armed).await;
    let disarmed = executor.disarm(name, &armed).await;
    let after = match disarmed {
        Ok(true) => Some(executor.restore_waits(name, &armed).await),
        _ => None,
    };
    match disarmed {
        Ok(true) => {}
        Ok(false) => {
            return f(
                Status::Fail,
                "armed, but the restore was gone before it was disarmed: whatever runs it on \
                 this node ends with the command that started it (OpenShift's `oc debug` pod \
                 does); use a profile or armRestore that hands it to the node's service \
                 manager (`systemd-run`)"
                    .into(),
            );
        }
        Err(e) => {
            return f(
                Status::Fail,
                format!(
                    "armed, but disarming failed: {e}; it runs `true` in {} s if nothing stops \
                     it",
                    CHECK_RESTORE_AFTER.as_secs()
                ),
            );
        }
    }
    let armed_and_disarmed = match armed.pid {
        Some(pid) => format!("armed (pid {pid}) and disarmed"),
        None => "armed and disarmed".into(),
    };
    // Only the API transport's faults are gated on the check: elsewhere a wrong one is
    // worth knowing (an inventory may switch the node over) but stops nothing.
    let (wrong, through) = if node.transport == TransportKind::Pod {
        (
            Status::Fail,
            "every fault that cuts the API transport would be",
        )
    } else {
        (
            Status::Warn,
            "this node's transport is not gated on it, but through the API every fault that \
             cuts it would be",
        )
    };
    match (while_armed, after) {
        (Ok(Some(true)), Some(Ok(Some(false)))) => f(
            Status::Pass,
            format!("{armed_and_disarmed}; restoreWaiting said waiting, then not"),
        ),
        (Ok(Some(false)), _) => f(
            wrong,
            format!(
                "{armed_and_disarmed}, but restoreWaiting said it was not waiting while \
                 armed: {through} refused (exit 97)"
            ),
        ),
        (Ok(Some(true)), Some(Ok(Some(true)))) => f(
            wrong,
            format!(
                "{armed_and_disarmed}, but restoreWaiting still said waiting once disarmed: \
                 it cannot tell a restore that has fired from one that waits, so a fault \
                 could land after its backstop"
            ),
        ),
        (Err(e), _) | (_, Some(Err(e))) => f(
            wrong,
            format!("{armed_and_disarmed}, but restoreWaiting could not be asked: {e}"),
        ),
        (Ok(None), _) if node.transport == TransportKind::Pod => f(
            Status::Warn,
            format!(
                "{armed_and_disarmed}; this armRestore has no restoreWaiting, so a fault \
                 that cuts the API transport cannot be gated on it: one that reaches the \
                 node after its restore fired would stay (set restoreWaiting, \
                 docs/inventory.md)"
            ),
        ),
        _ => f(Status::Pass, armed_and_disarmed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::Inventory;
    use std::path::Path;

    /// The doctor's check of a custom self-restore, on this machine (`transport: exec`,
    /// whose faults are not gated, so a wrong check is a warning): the restore is a
    /// file, its check `waiting` asks for it.
    async fn check_with(waiting: Option<&str>) -> Finding {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().display();
        let waiting = waiting
            .map(|w| format!("restoreWaiting: \"{}\"\n", w.replace("DIR", &d.to_string())))
            .unwrap_or_default();
        let text = format!(
            "cluster: {{name: c}}\ntransport: exec\nexec: [sh, -c, \"{{command}}\"]\n\
             armRestore: \"touch {d}/{{token}}\"\n\
             disarmRestore: \"rm {d}/{{token}} && echo disarmed\"\n{waiting}\
             nodes: [{{name: n1}}]\n"
        );
        let inventory = Inventory::parse(&text, Path::new("t.yaml")).expect("valid");
        let node = inventory.node("n1").expect("n1");
        finding(&Executor::new(inventory), &node).await
    }

    /// Issue 69, item 5: doctor did not look at logind, which ends the default
    /// self-restore's session with the SSH connection.
    #[test]
    fn logind_ending_a_users_processes_is_told_apart() {
        assert_eq!(logind_kills("b true\nuid=1000\n"), Some(true));
        assert_eq!(logind_kills("b true\nuid=0\n"), Some(false));
        assert_eq!(logind_kills("b false\nuid=1000\n"), Some(false));
        assert_eq!(logind_kills("uid=1000\n"), None, "no busctl, no logind");
    }

    #[tokio::test]
    async fn a_check_that_tells_waiting_from_gone_passes_and_one_that_cannot_is_flagged() {
        let good = check_with(Some("test -e DIR/{token}")).await;
        assert_eq!(good.status, Status::Pass, "{}", good.detail);
        assert_eq!(
            good.detail,
            "armed and disarmed; restoreWaiting said waiting, then not"
        );

        let always = check_with(Some("true")).await;
        assert_eq!(always.status, Status::Warn, "{}", always.detail);
        assert!(always.detail.contains("still said waiting once disarmed"));

        let never = check_with(Some("false")).await;
        assert_eq!(never.status, Status::Warn, "{}", never.detail);
        assert!(never.detail.contains("not waiting while armed"));
        assert!(
            never
                .detail
                .contains("this node's transport is not gated on it"),
            "only the API transport's faults are refused: {}",
            never.detail
        );

        // A check the shell cannot run says nothing about the restore.
        let broken = check_with(Some("faultline-no-such-program")).await;
        assert_eq!(broken.status, Status::Warn, "{}", broken.detail);
        assert!(
            broken.detail.contains("could not be asked"),
            "{}",
            broken.detail
        );

        // What it ends with stays in its own shell: an `exit 0` means waiting.
        let exits = check_with(Some("test -e DIR/{token} && exit 0; exit 1;")).await;
        assert_eq!(exits.status, Status::Pass, "{}", exits.detail);

        // Nothing to ask, and nothing gated (only the API transport's faults are): a pass.
        let none = check_with(None).await;
        assert_eq!(none.status, Status::Pass, "{}", none.detail);
        assert_eq!(none.detail, "armed and disarmed");
    }
}
