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
/// With `run` (the run the command belongs to), the shell is named after it ([`mark`], as
/// its `$0`), so that the run can end on the node whatever of its commands a stop cut
/// short ([`ending`]): `timeout` hands the TERM it gets on to the command's whole process
/// group, and sends KILL after it.
pub(super) fn with_node_deadline(
    command: &str,
    limit: Duration,
    run: Option<&str>,
) -> Result<String, RenderError> {
    let named = match run {
        Some(run) => format!(" {}", render::quote(&mark(run))?),
        None => String::new(),
    };
    Ok(format!(
        "exec timeout -k {KILL_AFTER_SECS} {} sh -c {}{named}",
        node_secs(limit),
        render::quote(command)?
    ))
}

/// The name a run's commands carry on the node: the `$0` of their shell.
pub(super) fn mark(run: &str) -> String {
    format!("faultline-run={run}")
}

/// How long [`ending`] waits for the run's commands to be gone.
pub(super) const ENDING_WAIT: Duration = Duration::from_secs(KILL_AFTER_SECS + 4);

/// Shell text that ends, on the node, every command of `run` still running there
/// ([`with_node_deadline`]'s mark): TERM to each (their `timeout` passes it to the whole
/// command), then waits up to [`ENDING_WAIT`] for them to be gone (the KILL after the TERM
/// included), and exits 0 only when none is left. Its own text never matches its pattern
/// (the bracket), and it is sent without a mark.
pub(super) fn ending(run: &str) -> Result<String, RenderError> {
    let pattern = format!("[{}]{}( |$)", &mark(run)[..1], &mark(run)[1..]);
    let tries = ENDING_WAIT.as_secs() * 2;
    Ok(format!(
        "p={}; pkill -TERM -f \"$p\"; i=0; while pgrep -f \"$p\" >/dev/null && [ $i -lt {tries} ]; \
         do sleep 0.5; i=$((i+1)); done; ! pgrep -f \"$p\" >/dev/null",
        render::quote(&pattern)?
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
