//! The observer: Kubernetes API watches (or polls) → a stream of timeline entries.
//!
//! Built kube-rs style: one follower (a list, then a watch; `follow`) or poll loop per
//! source, merged into one stream and folded by a pure [`Recorder`] that emits only
//! reduced-state changes and brackets lost sight with `Gap` entries. Nothing here acts on
//! the cluster.

pub(crate) mod clock;
pub(crate) mod diff;
pub(crate) mod follow;
pub(crate) mod ready;
pub(crate) mod recorder;
pub(crate) mod reduce;
pub(crate) mod stream;

#[cfg(test)]
mod lean_tests;

pub use crate::cluster::owners::OwnerIndex;
pub use clock::Clock;
pub(crate) use recorder::NODES_SOURCE;
pub use recorder::{ALL_NAMESPACES, Observation, Recorder, Seen};
pub use reduce::{Workload, node_state, pod_state, workload_state};
pub use stream::{Namespaces, ObserveMode, Scope, observe, resolve_first_lists};
