//! faultline: takes Kubernetes nodes down on purpose and proves, with timestamps,
//! that the cluster reacted the way its owners believe it does.
//!
//! Data flows one way: [`experiment`] (file → validated plan) → [`execute`] (actions on
//! nodes, reached through the [`inventory`]) → [`observe`] (API watches → [`timeline`]) →
//! [`judge`] (expectations → verdicts) → [`report`] (JUnit, JSON, terminal, HTML). A
//! [`series`] keeps the runs of one `run --repeat`; [`compare`] sets two sets of runs side by
//! side (before an upgrade and after), and its reporters are in [`report`] too. [`run`]
//! ties the stages together for one experiment; [`cli`] is the command line. What each
//! action is called, what undoes it and what it does to a node is one table (`fault`)
//! that every stage reads.

#![warn(unreachable_pub)]

pub mod allocator;
pub mod capability;
pub mod cli;
pub mod cluster;
pub mod compare;
pub mod conformance;
pub mod doctor;
pub mod events;
pub mod execute;
pub mod experiment;
pub mod explain;
pub mod failure_model;
pub(crate) mod file_names;
#[cfg(test)]
mod fixtures;
pub mod focus;
#[cfg(feature = "heap-samples")]
pub mod heap_samples;
pub mod inventory;
pub(crate) mod journal;
pub mod judge;
pub mod observe;
pub mod outcome;
pub(crate) mod probe;
pub mod rbac;
pub mod record;
pub mod report;
pub mod run;
pub(crate) mod sanitize;
pub mod series;
pub mod timeline;
pub mod timers;
