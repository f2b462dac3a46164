//! What an [`Executor`](crate::execute::Executor) is asked to do, one file per kind of
//! call: run a node operation and hold it to succeed (`perform`), carry a planned command
//! over its transport and read how it ended (`carry`), drive power (`power`), send a
//! timed step's commands ahead and release them (`priming`), keep a node-access pod on
//! each node reached through the API for a run (`keep`), arm and disarm the
//! self-restore (`self_restore`) and its undo watcher (`watch`).
//!
//! Each is an `impl Executor` block over the pieces below it in `execute` (plans, carriers,
//! the waiting commands); nothing below reaches back up into a call.

mod carry;
mod keep;
mod perform;
mod power;
mod priming;
mod self_restore;
mod watch;

pub use power::PowerState;
pub use self_restore::ArmedRestore;
pub(crate) use watch::run_of;
