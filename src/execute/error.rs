//! Why a call of the executor did not do what was asked, said so that a person knows
//! what ran where, and whether it can still be running.

use std::time::Duration;

use thiserror::Error;

use super::pod;
use super::render::RenderError;
use super::ssh::SshError;

/// Why an operation did not do what was asked.
#[derive(Debug, Error)]
pub enum ExecError {
    /// The node is not in the inventory.
    #[error("node `{0}` is not in the inventory")]
    UnknownNode(String),
    /// The inventory defines no command for this operation on this node.
    #[error("node `{node}`: no `{what}` configured; {hint}")]
    NotConfigured {
        /// Node.
        node: String,
        /// Inventory key that is missing.
        what: String,
        /// How to fix it.
        hint: String,
    },
    /// A value could not be placed into a command.
    #[error("node `{node}`: {source}")]
    Render {
        /// Node.
        node: String,
        /// Cause.
        source: RenderError,
    },
    /// A local program could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// Program.
        program: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Connection, host key or authentication failed before the command ran.
    #[error("node `{node}`: {source}")]
    Ssh {
        /// Node.
        node: String,
        /// Cause.
        source: SshError,
    },
    /// The time limit passed, and the command is over: the node's deadline ended it, it
    /// ended just after the limit, or it was never sent.
    #[error("{}", timed_out_text(node, command, *after, *started))]
    TimedOutEnded {
        /// Node.
        node: String,
        /// What ran (as `describe` shows it).
        command: String,
        /// The limit.
        after: Duration,
        /// Whether it reached the node: `false` when connecting took the whole limit and
        /// it was never sent.
        started: bool,
    },
    /// The time limit passed, and its end could not be heard (the session went away, the
    /// local client hung). The node's own deadline still ends it, `ends_within` after it
    /// started at the latest, unless the node lacks `timeout` or the session was lost
    /// before the command reached it.
    #[error(
        "node `{node}`: `{command}` did not finish within {after:?}, and it could not be \
         confirmed that it ended; the node's own deadline ends it within {ends_within:?} \
         of its start"
    )]
    TimedOutUnconfirmed {
        /// Node.
        node: String,
        /// What ran (as `describe` shows it).
        command: String,
        /// The limit.
        after: Duration,
        /// When the node's deadline ends it at the latest, after its start.
        ends_within: Duration,
    },
    /// The command ran and failed.
    #[error("node `{node}`: `{command}` failed ({}): {output}", exit_text(*.exit_status))]
    CommandFailed {
        /// Node.
        node: String,
        /// What ran.
        command: String,
        /// Exit code (`None`: killed by a signal).
        exit_status: Option<i32>,
        /// Output tail.
        output: String,
    },
    /// The connection dropped during an operation that should have completed.
    #[error("node `{node}`: connection dropped while running `{command}`: {output}")]
    Dropped {
        /// Node.
        node: String,
        /// What ran.
        command: String,
        /// Output seen before the drop.
        output: String,
    },
    /// `sudo` on the node would not run the command: it wants a password faultline has not
    /// been given (or refused the one given), or the login user may not use it.
    #[error("node `{node}`: sudo as `{user}` {problem}; {hint}")]
    Sudo {
        /// Node.
        node: String,
        /// Login user.
        user: String,
        /// What sudo said, in short.
        problem: String,
        /// How to fix it.
        hint: String,
    },
    /// The API transport could not carry the command (see [`pod::PodError`]).
    #[error("node `{node}`: {source}")]
    Pod {
        /// Node.
        node: String,
        /// Cause.
        source: pod::PodError,
    },
    /// A self-restore could not be armed or the token is unusable.
    #[error("node `{node}`: {message}")]
    Restore {
        /// Node.
        node: String,
        /// What went wrong.
        message: String,
    },
}

/// A command ended by its time limit, as said to a person: one that never reached the
/// node is not said to have run.
fn timed_out_text(node: &str, command: &str, after: Duration, started: bool) -> String {
    if started {
        format!(
            "node `{node}`: `{command}` did not finish within {after:?}; it was ended by its timeout"
        )
    } else {
        format!(
            "node `{node}`: `{command}` was ended by its timeout after {after:?}, before it started: reaching the node took all of that time, and nothing ran there"
        )
    }
}

/// An exit status as said to a person.
fn exit_text(code: Option<i32>) -> String {
    code.map_or_else(|| "killed by a signal".into(), |c| format!("exit {c}"))
}
