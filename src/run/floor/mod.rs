//! The run's loop and what it decides with: the step scheduler (`schedule`), one step
//! carried out on all its nodes (`steps`), the blast-radius interlock checked when a fault
//! step is due (`interlock`), the ledger of active faults (`ledger`), undos
//! armed on the node (`host_timed`) and the proofs that a fault took effect (`proofs`).
//! It is written once for every world: it reaches the cluster only through the `World`
//! seam (`crate::run::world`).

pub(crate) mod drive;
pub(crate) mod host_timed;
pub(crate) mod interlock;
pub(crate) mod ledger;
pub(super) mod proofs;
pub(crate) mod schedule;
mod steps;
mod thread_cpu;
