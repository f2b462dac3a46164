//! The runner: ties the stages together for one experiment, owns signals, the fault
//! ledger and undo, and produces the run record the reporters render.

pub mod faults;
pub mod safety;
pub mod schedule;
pub mod shared_timeline;
pub mod signals;
