//! Which workload a pod belongs to: pods name their ReplicaSet, the ReplicaSet names its
//! Deployment. Target resolution, API actions and the observer all attribute pods this
//! one way.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::experiment::model::{WorkloadKind, WorkloadRef};

/// Which Deployment owns which ReplicaSet, so Deployment pods can be attributed to their
/// Deployment (pods only name their ReplicaSet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerIndex {
    /// (namespace, ReplicaSet name) → Deployment name.
    replica_sets: BTreeMap<(String, String), String>,
}

impl OwnerIndex {
    /// An empty index; pods then fall back to stripping the `pod-template-hash` suffix.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records (or forgets, when it has no Deployment owner) a ReplicaSet's owner.
    pub fn insert(&mut self, rs: &ReplicaSet) {
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let Some(name) = rs.metadata.name.clone() else {
            return;
        };
        match controller_of(rs.metadata.owner_references.as_deref(), "Deployment") {
            Some(deploy) => {
                self.replica_sets.insert((ns, name), deploy);
            }
            None => {
                self.replica_sets.remove(&(ns, name));
            }
        }
    }

    /// Forgets a deleted ReplicaSet.
    pub fn remove(&mut self, namespace: &str, name: &str) {
        self.replica_sets
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Replaces the entries of one namespace with a fresh list (after a relist).
    pub fn replace_namespace(&mut self, namespace: &str, sets: &[ReplicaSet]) {
        self.replica_sets.retain(|(ns, _), _| ns != namespace);
        for rs in sets {
            self.insert(rs);
        }
    }

    /// Replaces every entry with a fresh cluster-wide list (after a relist of all namespaces).
    pub(crate) fn replace_all(&mut self, sets: &[ReplicaSet]) {
        self.replica_sets.clear();
        for rs in sets {
            self.insert(rs);
        }
    }

    /// The Deployment owning a ReplicaSet, if known.
    pub fn deployment_of(&self, namespace: &str, replica_set: &str) -> Option<&str> {
        self.replica_sets
            .get(&(namespace.to_string(), replica_set.to_string()))
            .map(String::as_str)
    }
}

/// The name of the controlling owner of the given kind (falls back to any owner of that kind).
fn controller_of(owners: Option<&[OwnerReference]>, kind: &str) -> Option<String> {
    let owners = owners?;
    owners
        .iter()
        .filter(|o| o.kind == kind)
        .max_by_key(|o| o.controller.unwrap_or(false))
        .map(|o| o.name.clone())
}

/// The workload a pod belongs to, resolving ReplicaSet → Deployment.
pub(crate) fn pod_owner(pod: &Pod, owners: &OwnerIndex) -> Option<WorkloadRef> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let refs = pod.metadata.owner_references.as_deref()?;
    let owner = refs
        .iter()
        .find(|o| o.controller == Some(true))
        .or_else(|| refs.first())?;
    let (kind, name) = match owner.kind.as_str() {
        "StatefulSet" => (WorkloadKind::StatefulSet, owner.name.clone()),
        "DaemonSet" => (WorkloadKind::DaemonSet, owner.name.clone()),
        "ReplicaSet" => {
            let deploy = match owners.deployment_of(&namespace, &owner.name) {
                Some(d) => d.to_string(),
                None => strip_template_hash(pod, &owner.name)?,
            };
            (WorkloadKind::Deployment, deploy)
        }
        _ => return None,
    };
    Some(WorkloadRef {
        kind,
        namespace,
        name,
    })
}

/// `web-5d8f7c9b6` → `web`, using the pod's `pod-template-hash` label when it matches the
/// suffix (so a ReplicaSet not created by a Deployment is not misattributed).
fn strip_template_hash(pod: &Pod, rs_name: &str) -> Option<String> {
    let hash = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"))?;
    rs_name
        .strip_suffix(hash.as_str())
        .and_then(|s| s.strip_suffix('-'))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}
