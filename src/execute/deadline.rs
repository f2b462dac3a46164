//! The node-side deadline every command carries (see the module documentation of
//! `execute`): how a command is wrapped so that the node ends it by itself, and how long
//! faultline listens, past a time limit, to hear that end.

use std::time::Duration;

use super::render::{self, RenderError};

/// Seconds the node's `timeout` waits after its TERM before it sends KILL.
pub const KILL_AFTER_SECS: u64 = 5;

/// How long past the node's own deadline faultline listens for the command to end there
/// before it gives up on hearing it (network latency, a slow node).
pub(super) const CONFIRM_SLACK: Duration = Duration::from_secs(3);

/// How long a killed local process or a cut session's thread is waited for.
pub(super) const REAP: Duration = Duration::from_secs(3);

/// Whole seconds of the node-side deadline for a time limit: rounded up, at least one.
fn node_secs(limit: Duration) -> u64 {
    limit
        .as_secs()
        .saturating_add(u64::from(limit.subsec_nanos() > 0))
        .max(1)
}

/// How long after it started a command wrapped for a limit of `limit` is surely over on
/// the node: its deadline, then the KILL after it.
pub(super) fn ends_within(limit: Duration) -> Duration {
    Duration::from_secs(node_secs(limit).saturating_add(KILL_AFTER_SECS))
}

/// `command` wrapped so that the node ends it at `limit` (TERM, then KILL
/// [`KILL_AFTER_SECS`] later). `exec` keeps the shell's exit status the command's own.
pub(super) fn with_node_deadline(command: &str, limit: Duration) -> Result<String, RenderError> {
    Ok(format!(
        "exec timeout -k {KILL_AFTER_SECS} {} sh -c {}",
        node_secs(limit),
        render::quote(command)?
    ))
}

/// How long past its limit a command carried to a node (through the API, or by a local
/// client) is listened for: the node's deadline ending it, the KILL after it, and `slack`
/// for one sent ahead.
pub(super) fn node_grace(timeout: Duration, slack: Duration) -> Duration {
    ends_within(timeout)
        .saturating_add(slack)
        .saturating_add(CONFIRM_SLACK)
        .saturating_sub(timeout)
}
