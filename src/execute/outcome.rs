//! What a command did when it ran, and the rule that most calls hold it to: it must have
//! succeeded.

use serde::{Deserialize, Serialize};

use super::error::ExecError;

/// What happened when an operation ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpOutcome {
    /// Exit code, when the command reported one.
    pub exit_status: Option<i32>,
    /// stdout+stderr, at most [`super::output::MAX_OUTPUT`] bytes (the tail).
    pub output: String,
    /// The connection dropped after the command was sent (expected for reboot/power-off).
    pub dropped: bool,
}

/// `o` when the command succeeded (exit 0) or dropped its connection as expected; else
/// [`ExecError::CommandFailed`] naming `command` on `node`.
pub(super) fn require_success(
    node: &str,
    command: &str,
    o: OpOutcome,
) -> Result<OpOutcome, ExecError> {
    if o.dropped || o.exit_status == Some(0) {
        Ok(o)
    } else {
        Err(ExecError::CommandFailed {
            node: node.to_string(),
            command: command.to_string(),
            exit_status: o.exit_status,
            output: o.output,
        })
    }
}
