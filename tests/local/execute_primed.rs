//! Commands sent ahead of their step (`Executor::prime`) against a REAL sshd on loopback:
//! a primed command runs once, only when it is performed near when it was due, and never
//! when it is not; one whose shell is gone is sent anew. (How soon after its offset it
//! starts is a figure of `ci/bench-fanout`, not a test.)

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::execute_ssh::executor;
use crate::sshd_support::*;

use faultline::execute::{ExecError, NodeOp};

const T: Duration = Duration::from_secs(10);
const AHEAD: Duration = Duration::from_secs(3);

/// Waits until `done` holds, at most `limit`; whether it did.
pub(crate) async fn until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

/// The file each run of `heal` appends a line to, and an executor for the sshd whose
/// `heal` appends it and then runs `then` (from `; `, or empty).
fn heal_logging(sshd: &Sshd, then: &str) -> (std::path::PathBuf, faultline::execute::Executor) {
    let log = sshd.dir.path().join("ran");
    let ex = executor(
        sshd,
        "known_hosts",
        &format!("  heal: echo x >> {}{then}", log.display()),
    );
    (log, ex)
}

/// Sends `heal` ahead on node `local` for a step due at `due` with `limit`; it must be sent.
async fn prime_heal(ex: &faultline::execute::Executor, limit: Duration, due: Instant) {
    let primed = ex
        .prime("local", &NodeOp::Heal, limit, due, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(primed, "SSH without a sudo password is primed");
}

/// Whether a process whose command line matches `pattern` runs.
pub(crate) fn running(pattern: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .is_ok_and(|o| !o.stdout.is_empty())
}

/// How many lines `path` holds (0 when it does not exist).
pub(crate) fn lines(path: &Path) -> usize {
    fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

#[tokio::test]
async fn a_primed_command_runs_once_when_performed_and_not_before() {
    let Some(sshd) = start_sshd() else { return };
    let (log, ex) = heal_logging(&sshd, "; echo healed");
    let due = Instant::now() + AHEAD;
    let primed = ex
        .prime("local", &NodeOp::Heal, T, due, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(primed, "SSH without a sudo password is primed");
    tokio::time::sleep_until(due.into()).await;
    assert_eq!(
        lines(&log),
        0,
        "the primed command ran before it was performed"
    );
    let out = ex
        .perform("local", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit_status, Some(0), "{out:?}");
    assert_eq!(out.output.trim(), "healed", "{out:?}");
    assert_eq!(lines(&log), 1);
    // The next one goes the ordinary way, over the connection the primed one gave back.
    ex.perform("local", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lines(&log), 2);
}

/// Released ahead of its call (a step's nodes all at once), the command runs at once,
/// once, and its call hears it out whole, even when it has already ended by then.
#[tokio::test]
async fn a_released_command_runs_once_and_its_call_hears_it_whole() {
    let Some(sshd) = start_sshd() else { return };
    let (log, ex) = heal_logging(&sshd, "; echo healed");
    let due = Instant::now() + AHEAD;
    prime_heal(&ex, T, due).await;
    tokio::time::sleep_until(due.into()).await;
    ex.release(&["local"], &NodeOp::Heal, T).await;
    assert!(
        until(T, || lines(&log) == 1).await,
        "a released command did not run before its call"
    );
    let out = ex
        .perform("local", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit_status, Some(0), "{out:?}");
    assert_eq!(out.output.trim(), "healed", "{out:?}");
    assert_eq!(lines(&log), 1, "a released command was sent again");
}

/// A released command that outlives its limit was sent: its call says it started and
/// that the node's deadline ends it, never that nothing ran, and it is not sent again.
#[tokio::test]
async fn a_released_command_past_its_limit_counts_as_started() {
    let Some(sshd) = start_sshd() else { return };
    let (log, ex) = heal_logging(&sshd, "; sleep 30");
    let limit = Duration::from_secs(1);
    let due = Instant::now() + AHEAD;
    let primed = ex
        .prime("local", &NodeOp::Heal, limit, due, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(primed, "SSH without a sudo password is primed");
    tokio::time::sleep_until(due.into()).await;
    ex.release(&["local"], &NodeOp::Heal, limit).await;
    let err = ex
        .perform("local", &NodeOp::Heal, limit)
        .await
        .expect_err("a command sleeping 30 s ended within 1 s");
    assert!(
        matches!(
            err,
            ExecError::TimedOutEnded { started: true, .. } | ExecError::TimedOutUnconfirmed { .. }
        ),
        "{err}"
    );
    assert_eq!(lines(&log), 1, "a released command was sent again");
}

/// Releasing what was never sent ahead (or with another limit) starts nothing: the call
/// carries it the ordinary way, once.
#[tokio::test]
async fn releasing_a_command_not_sent_ahead_starts_nothing() {
    let Some(sshd) = start_sshd() else { return };
    let (log, ex) = heal_logging(&sshd, "");
    let due = Instant::now() + AHEAD;
    prime_heal(&ex, T, due).await;
    tokio::time::sleep_until(due.into()).await;
    ex.release(&["local"], &NodeOp::Heal, Duration::from_secs(7))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(lines(&log), 0, "released under another limit");
    ex.perform("local", &NodeOp::Heal, Duration::from_secs(7))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lines(&log), 1);
}

#[tokio::test]
async fn a_primed_command_never_performed_never_runs() {
    let Some(sshd) = start_sshd() else { return };
    let (log, ex) = heal_logging(&sshd, "");
    // A long limit: what ends the waiting shell must be its channel, not its deadline.
    let long = Duration::from_secs(60);
    let due = Instant::now() + Duration::from_secs(2);
    prime_heal(&ex, long, due).await;
    let waiting = format!("faultline_go.*{}", log.display());
    assert!(
        until(T, || running(&waiting)).await,
        "no shell waits on the node"
    );
    // The run stopped before the step was due: the executor goes, and the channel with it.
    drop(ex);
    assert!(
        until(Duration::from_secs(20), || !running(&waiting)).await,
        "a waiting shell outlived its channel"
    );
    assert_eq!(lines(&log), 0, "a primed command ran without being started");
}

#[tokio::test]
async fn a_primed_command_is_not_taken_by_a_call_with_another_limit() {
    let Some(sshd) = start_sshd() else { return };
    let (log, ex) = heal_logging(&sshd, "");
    let due = Instant::now() + AHEAD;
    prime_heal(&ex, T, due).await;
    // A safety-net undo running the same command at the same moment, with its own limit:
    // the node deadline sent ahead was for the step's.
    tokio::time::sleep_until(due.into()).await;
    ex.perform("local", &NodeOp::Heal, Duration::from_secs(7))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lines(&log), 1);
    let waiting = format!("faultline_go.*{}", log.display());
    assert!(running(&waiting), "the primed command was taken");
    drop(ex);
    assert!(until(Duration::from_secs(20), || !running(&waiting)).await);
    assert_eq!(lines(&log), 1, "the primed command ran too");
}

#[tokio::test]
async fn a_command_performed_far_from_when_it_was_primed_goes_the_ordinary_way_once() {
    let Some(sshd) = start_sshd() else { return };
    let (log, ex) = heal_logging(&sshd, "");
    // Primed for a step due in 8 s, performed now: not the one it waits for.
    let due = Instant::now() + Duration::from_secs(8);
    prime_heal(&ex, T, due).await;
    ex.perform("local", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lines(&log), 1);
    // Past its window, the waiting one is closed at the next use, never started.
    tokio::time::sleep_until((due + Duration::from_millis(1_500)).into()).await;
    ex.perform("local", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(lines(&log), 2, "the stale primed command ran too");
}

#[tokio::test]
async fn a_primed_command_whose_shell_is_gone_is_sent_anew() {
    let Some(sshd) = start_sshd() else { return };
    let (log, ex) = heal_logging(&sshd, "; echo healed");
    let due = Instant::now() + Duration::from_secs(5);
    prime_heal(&ex, T, due).await;
    // The node lost it (sshd restarted, the shell killed) while it waited.
    let waiting = format!("faultline_go.*{}", log.display());
    let killed = until(T, || {
        std::process::Command::new("pkill")
            .args(["-f", &waiting])
            .status()
            .is_ok_and(|s| s.success())
    })
    .await;
    assert!(killed, "no waiting shell found to kill");
    assert!(until(T, || !running(&waiting)).await);
    tokio::time::sleep_until(due.into()).await;
    let out = ex
        .perform("local", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.output.trim(), "healed", "{out:?}");
    assert_eq!(lines(&log), 1);
}
