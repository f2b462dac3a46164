//! Setup and teardown of an experiment's workloads: server-side apply of any kind, waiting
//! for workloads to be fully available, and deletion in reverse order.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{ApiResource, Scope};

use super::error::ClusterError;
use crate::experiment::manifest::{ManifestInvalid, parse_manifest};

/// Field manager faultline's server-side applies are recorded under.
pub(crate) const FIELD_MANAGER: &str = "faultline";

/// An object faultline applied, with what is needed to wait for it and delete it later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedObject {
    /// The resource (group, version, kind, plural) as discovered.
    pub resource: ApiResource,
    /// Namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// Object name.
    pub name: String,
    /// A Namespace that existed before setup applied it: teardown leaves it, since what the
    /// run did not make lives there (the Role that lets faultline act in it, when a Helm
    /// chart or an administrator made the namespace for it).
    pub kept: bool,
}

impl std::fmt::Display for AppliedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{} in {ns}", self.resource.kind, self.name),
            None => write!(f, "{}/{}", self.resource.kind, self.name),
        }
    }
}

impl AppliedObject {
    /// Whether it is a Namespace (core group).
    fn is_namespace(&self) -> bool {
        self.resource.group.is_empty() && self.resource.kind == "Namespace"
    }

    /// Whether teardown deletes it: everything setup applied but a Namespace that was
    /// there before.
    pub fn torn_down(&self) -> bool {
        !self.kept
    }

    fn api(&self, client: &Client) -> Api<DynamicObject> {
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &self.resource),
            None => Api::all_with(client.clone(), &self.resource),
        }
    }
}

/// How long an apply waits for a new namespace's `default` service account.
const SERVICE_ACCOUNT_WAIT: Duration = Duration::from_secs(30);
/// How often it asks again meanwhile.
const SERVICE_ACCOUNT_RETRY: Duration = Duration::from_millis(250);

/// Whether the API server refused an object only because its namespace's service account
/// does not exist yet (ServiceAccount admission, 403).
fn waits_for_service_account(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403
        && s.message.contains("error looking up service account")
        && s.message.contains("not found"))
}

/// Server-side applies every object of the files, in order, with field manager
/// `faultline` and force (faultline owns its setup objects), discovering each kind so
/// any resource the cluster serves works. Namespaced objects without a namespace go to
/// `default`.
pub async fn apply_manifests(
    client: &Client,
    paths: &[PathBuf],
) -> Result<Vec<AppliedObject>, ClusterError> {
    let mut applied = Vec::new();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for path in paths {
        let text =
            crate::experiment::read_input(path).map_err(|source| ClusterError::ManifestRead {
                path: path.clone(),
                source,
            })?;
        for obj in parse_manifest(path, &text)? {
            let types = obj.types.clone().unwrap_or_default();
            let gvk = GroupVersionKind::try_from(&types).map_err(|e| ManifestInvalid {
                path: path.clone(),
                document: 0,
                message: e.to_string(),
            })?;
            let (resource, caps) =
                kube::discovery::pinned_kind(client, &gvk)
                    .await
                    .map_err(|source| ClusterError::UnknownKind {
                        path: path.clone(),
                        api_version: types.api_version.clone(),
                        kind: types.kind.clone(),
                        source: Box::new(source),
                    })?;
            let namespace = namespace_of(&obj, &caps.scope);
            let name = obj.metadata.name.clone().unwrap_or_default();
            let mut target = AppliedObject {
                resource,
                namespace,
                name,
                kept: false,
            };
            let api = target.api(client);
            if target.is_namespace() {
                target.kept = api
                    .get_opt(&target.name)
                    .await
                    .map_err(ClusterError::api(format!("reading {target}")))?
                    .is_some();
            }
            let mut waited = Duration::ZERO;
            loop {
                match api.patch(&target.name, &params, &Patch::Apply(&obj)).await {
                    Ok(_) => break,
                    // A pod applied right after its new namespace: the ServiceAccount
                    // controller has not made the namespace's `default` account yet, and
                    // admission refuses the pod until it has (a second at most, usually).
                    Err(e) if waits_for_service_account(&e) && waited < SERVICE_ACCOUNT_WAIT => {
                        tokio::time::sleep(SERVICE_ACCOUNT_RETRY).await;
                        waited += SERVICE_ACCOUNT_RETRY;
                    }
                    Err(e) => return Err(ClusterError::api(format!("applying {target}"))(e)),
                }
            }
            applied.push(target);
        }
    }
    Ok(applied)
}

/// Why a Deployment's rollout is not complete yet, or `None` when it is: the controller saw
/// the current spec, and every replica is updated and available. Stricter than the
/// judge's `Available` (`WorkloadState::is_available`) on purpose: setup must not let a
/// fault land in the middle of a rollout.
pub(crate) fn deployment_unready(d: &Deployment) -> Option<String> {
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let st = d.status.clone().unwrap_or_default();
    let generation = d.metadata.generation.unwrap_or(0);
    let observed = st.observed_generation.unwrap_or(0);
    let updated = st.updated_replicas.unwrap_or(0);
    let available = st.available_replicas.unwrap_or(0);
    (observed < generation || updated != desired || available != desired).then(|| {
        format!(
            "observedGeneration {observed}/{generation}, updated {updated}/{desired}, available {available}/{desired}"
        )
    })
}

/// Why a StatefulSet is not fully available yet, or `None` when it is.
pub(crate) fn statefulset_unready(s: &StatefulSet) -> Option<String> {
    let desired = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let st = s.status.clone().unwrap_or_default();
    let generation = s.metadata.generation.unwrap_or(0);
    let observed = st.observed_generation.unwrap_or(0);
    let ready = st.ready_replicas.unwrap_or(0);
    let available = st.available_replicas.unwrap_or(0);
    (observed < generation || ready != desired || available != desired).then(|| {
        format!(
            "observedGeneration {observed}/{generation}, ready {ready}/{desired}, available {available}/{desired}"
        )
    })
}

/// Why a DaemonSet is not fully available yet, or `None` when it is.
pub(crate) fn daemonset_unready(d: &DaemonSet) -> Option<String> {
    let st = d.status.clone().unwrap_or_default();
    let generation = d.metadata.generation.unwrap_or(0);
    let observed = st.observed_generation.unwrap_or(0);
    let desired = st.desired_number_scheduled;
    let available = st.number_available.unwrap_or(0);
    let updated = st.updated_number_scheduled.unwrap_or(0);
    (observed < generation || updated != desired || available != desired).then(|| {
        format!(
            "observedGeneration {observed}/{generation}, updated {updated}/{desired}, available {available}/{desired}"
        )
    })
}

/// Why one applied object is not ready; `None` for ready workloads and for kinds that have
/// no readiness (ConfigMaps, Services...).
async fn unready(client: &Client, obj: &AppliedObject) -> Option<String> {
    if obj.resource.group != "apps" {
        return None;
    }
    let ns = obj.namespace.as_deref().unwrap_or("default");
    let reason = match obj.resource.kind.as_str() {
        "Deployment" => Api::<Deployment>::namespaced(client.clone(), ns)
            .get(&obj.name)
            .await
            .map(|d| deployment_unready(&d)),
        "StatefulSet" => Api::<StatefulSet>::namespaced(client.clone(), ns)
            .get(&obj.name)
            .await
            .map(|s| statefulset_unready(&s)),
        "DaemonSet" => Api::<DaemonSet>::namespaced(client.clone(), ns)
            .get(&obj.name)
            .await
            .map(|d| daemonset_unready(&d)),
        _ => return None,
    };
    match reason {
        Ok(r) => r.map(|r| format!("{obj}: {r}")),
        Err(e) => Some(format!("{obj}: {e}")),
    }
}

/// Waits until every Deployment, StatefulSet and DaemonSet among `objects` is fully
/// available (current generation observed, available == desired). The error lists each
/// workload that is not, with its counts.
pub async fn wait_workloads_ready(
    client: &Client,
    objects: &[AppliedObject],
    timeout: Duration,
) -> Result<(), ClusterError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let mut not_ready = Vec::new();
        for obj in objects {
            if let Some(r) = unready(client, obj).await {
                not_ready.push(r);
            }
        }
        if not_ready.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ClusterError::NotReady {
                timeout_secs: timeout.as_secs(),
                not_ready,
            });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until every object is gone (deleted by [`delete_objects`] and finalized), so the
/// next experiment can apply the same manifests without meeting a terminating namespace.
/// Returns the objects still present when `timeout` ran out.
pub async fn wait_objects_gone(
    client: &Client,
    objects: &[AppliedObject],
    timeout: Duration,
) -> Result<Vec<String>, ClusterError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let mut left = Vec::new();
        for obj in objects {
            match obj.api(client).get_opt(&obj.name).await {
                Ok(Some(_)) => left.push(obj.to_string()),
                Ok(None) => {}
                Err(source) => {
                    return Err(ClusterError::Api {
                        what: format!("reading {obj}"),
                        source: Box::new(source),
                    });
                }
            }
        }
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return Ok(left);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Deletes the objects in reverse order of application (so a Namespace goes last); objects
/// already gone are fine. Returns the objects actually deleted.
pub async fn delete_objects(
    client: &Client,
    objects: &[AppliedObject],
) -> Result<Vec<String>, ClusterError> {
    let mut deleted = Vec::new();
    for obj in objects.iter().rev() {
        match obj
            .api(client)
            .delete(&obj.name, &DeleteParams::background())
            .await
        {
            Ok(_) => deleted.push(obj.to_string()),
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(source) => {
                return Err(ClusterError::Api {
                    what: format!("deleting {obj}"),
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(deleted)
}

/// The namespace a manifest's object lands in: its own, `default` when a namespaced object
/// names none (as `kubectl apply` does), none for a cluster-scoped kind.
pub(crate) fn namespace_of(obj: &DynamicObject, scope: &Scope) -> Option<String> {
    match scope {
        Scope::Namespaced => Some(
            obj.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_string()),
        ),
        Scope::Cluster => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::load;

    fn applied(group: &str, kind: &str, plural: &str, kept: bool) -> AppliedObject {
        AppliedObject {
            resource: ApiResource {
                group: group.into(),
                version: "v1".into(),
                api_version: if group.is_empty() {
                    "v1".into()
                } else {
                    format!("{group}/v1")
                },
                kind: kind.into(),
                plural: plural.into(),
            },
            namespace: None,
            name: "faultline-lab".into(),
            kept,
        }
    }

    #[test]
    fn teardown_leaves_only_a_namespace_that_was_there_before_setup() {
        assert!(applied("", "Namespace", "namespaces", false).is_namespace());
        assert!(!applied("", "Namespace", "namespaces", true).torn_down());
        assert!(applied("", "Namespace", "namespaces", false).torn_down());
        assert!(!applied("apps", "Deployment", "deployments", false).is_namespace());
        assert!(!applied("example.com", "Namespace", "namespaces", false).is_namespace());
    }

    /// The refusal the lab's API server gave a pod applied right after its namespace.
    fn refused(code: u16, message: &str) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "reason": "Forbidden", "message": message,
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn only_a_missing_service_account_is_waited_for() {
        let sa = "pods \"keep\" is forbidden: error looking up service account \
                  faultline-gap-poll-19059/default: serviceaccount \"default\" not found";
        assert!(waits_for_service_account(&refused(403, sa)));
        assert!(!waits_for_service_account(&refused(
            403,
            "pods \"keep\" is forbidden: User \"x\" cannot create resource \"pods\""
        )));
        assert!(!waits_for_service_account(&refused(404, sa)));
    }

    #[test]
    fn readiness_of_workloads() {
        let d: Deployment = load("deployment-web.json");
        let why = deployment_unready(&d).unwrap_or_default();
        assert!(why.contains("available 2/3"), "{why}");
        let s: StatefulSet = load("statefulset-db.json");
        assert_eq!(statefulset_unready(&s), None);
        let ds: DaemonSet = load("daemonset-agent.json");
        assert!(daemonset_unready(&ds).is_some());
        let mut stale = s.clone();
        stale.metadata.generation = Some(2);
        assert!(
            statefulset_unready(&stale)
                .unwrap_or_default()
                .contains("observedGeneration 1/2")
        );
    }
}
