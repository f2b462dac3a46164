//! Everything checked and resolved before the first fault: the kube context and the
//! allow-lists, the fault journal, the API connection, the setup manifests, the targets,
//! the blast radius of the plan and faultline's own feet. Nothing here injects a fault;
//! what it resolves (`prepare::Prepared`) is what the cluster's world runs on.

#[cfg(test)]
mod context_tests;
pub(crate) mod own_feet;
pub(crate) mod prepare;
pub(crate) mod safety;
pub(super) mod setup;
