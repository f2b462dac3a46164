//! A self-restore can be armed on the node, through the node's own mechanism, and disarmed.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{CheckKind, Finding, Status};
use crate::execute::{Executor, NodeOp};

/// How long the self-restore armed by the check would wait before running its (harmless)
/// undo, should disarming it fail.
const CHECK_RESTORE_AFTER: Duration = Duration::from_secs(600);

/// Arms a self-restore through the node's own mechanism (the default, or the profile's or
/// inventory's `armRestore`) whose undo is `true`, and disarms it again at once.
pub(super) async fn finding(executor: &Executor, name: &str) -> Finding {
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
    match executor.disarm(name, &armed).await {
        Ok(true) => f(
            Status::Pass,
            match armed.pid {
                Some(pid) => format!("armed (pid {pid}) and disarmed"),
                None => "armed and disarmed".into(),
            },
        ),
        Ok(false) => f(
            Status::Fail,
            "armed, but the restore was gone before it was disarmed: whatever runs it on \
             this node ends with the command that started it (OpenShift's `oc debug` pod \
             does); use a profile or armRestore that hands it to the node's service manager \
             (`systemd-run`)"
                .into(),
        ),
        Err(e) => f(
            Status::Fail,
            format!(
                "armed, but disarming failed: {e}; it runs `true` in {} s if nothing stops it",
                CHECK_RESTORE_AFTER.as_secs()
            ),
        ),
    }
}
