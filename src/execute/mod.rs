//! Actions on nodes: render the command an operation needs, carry it over the node's
//! transport (SSH or a local argv such as `docker exec`), drive out-of-band power, arm
//! self-restoring faults (the fault journal that `restore` replays is `crate::journal`).
//!
//! This stage only makes things happen on machines and says precisely what happened; it
//! looks at the Kubernetes API only to carry commands through it (`transport: pod`,
//! [`pod`]).
//!
//! # When a call returns, its command is over
//!
//! [`Executor::perform`], [`Executor::power`], [`Executor::arm_restore`] and the other
//! calls that run a command return only once that command is over where it runs: it
//! finished, or it was ended. A command still running after its step gave up on it could
//! apply a fault after the run's undo, with nothing left to undo it.
//!
//! Cutting the client off is not enough for that: closing an SSH session does not stop
//! the remote shell (no terminal, no SIGHUP), and killing `docker exec` or `oc debug`
//! leaves the process in the container or on the host running. So the NODE enforces the
//! deadline: every command is sent as `exec timeout -k 5 <secs> sh -c '<command>'`
//! ([`KILL_AFTER_SECS`]; `timeout` is GNU coreutils on the distributions the profiles
//! cover, BusyBox 1.35 or later on k3s images). When the time limit passes, faultline
//! keeps the session (or the local client) and waits, a few seconds at most, to hear the
//! command end there; only when it cannot hear that does it cut the session, kill the
//! local client and wait for it, and say so. The two outcomes are distinct errors:
//! [`ExecError::TimedOutEnded`] (it was ended, or never started) and
//! [`ExecError::TimedOutUnconfirmed`] (the node's deadline ends it, but nobody saw it).
//! Local argv commands (out-of-band power) run in a process group of their own, which is
//! killed and reaped on a timeout. A call takes at most [`Executor::longest_wait`] for a
//! given time limit; dropping its future instead (an outer `tokio::time::timeout`) cuts
//! the session and kills the local process group, but confirms nothing.
//!
//! Reboots and power-offs are the exception: their session dropping, or their command
//! hanging past the limit once sent, is the expected outcome and counts as success.
//!
//! A timed step's commands can be sent ahead ([`Executor::prime`]) to wait on the node
//! behind a gate until the step is due, and are then released on all of the step's nodes
//! in one pass ([`Executor::release`]); the `primed` module says how that keeps these
//! rules.

mod backstop;
mod calls;
mod deadline;
mod error;
mod executor;
mod gate_input;
mod local;
mod outcome;
mod output;
mod plan;
pub mod pod;
mod primed;
pub(crate) mod render;
mod ssh;
mod sudo;

pub use calls::ArmedRestore;
pub use calls::PowerState;
pub(crate) use calls::run_of;
pub use deadline::KILL_AFTER_SECS;
pub use error::ExecError;
pub use executor::Executor;
pub use local::PrimedDockerExec;
pub use outcome::OpOutcome;
pub use output::MAX_OUTPUT;
pub(crate) use output::read_tail_async;
pub use plan::DEFAULT_BOOT_ID;
pub use ssh::SshError;

pub use crate::experiment::fault::{NodeCommand, NodeOp, PowerAction};

#[cfg(test)]
mod tests;
