//! How a command carried by a local argv ended, whatever carried it: a client process
//! ([`super`]) or the engine's API ([`super::engine_exec`]); both are heard out
//! into this one shape, which `carry` turns into an outcome.

/// How a local process ended.
#[derive(Debug)]
pub(in crate::execute) enum LocalEnd {
    /// It exited within the time limit; `code` is `None` when a signal ended it.
    Exited {
        /// Exit code.
        code: Option<i32>,
        /// Bounded stdout+stderr.
        output: String,
    },
    /// The time limit passed, then it exited by itself within the grace given (the node's
    /// own deadline ended the command, or it just finished).
    Late {
        /// Exit code; `None` for a signal.
        code: Option<i32>,
        /// Bounded stdout+stderr.
        output: String,
    },
    /// The time limit (and grace) passed; its process group was killed (an engine's
    /// exec stream is closed instead).
    TimedOut {
        /// Whether the killed process was seen to end (reaped) within a few seconds.
        reaped: bool,
    },
}
