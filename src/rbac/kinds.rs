//! What applying an experiment's setup manifests needs, decided from the files alone:
//! `faultline rbac` runs where there may be no cluster to ask (`doctor` asks the cluster's
//! discovery instead). Only the built-in kinds a setup usually creates are known; any
//! other kind is refused by name, so a rule is never guessed.

use crate::doctor::access::Access;
use crate::experiment::manifest::parse_manifest;
use crate::experiment::model::Experiment;

/// A kind's API group, plural resource and whether it lives in a namespace.
struct KindInfo {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
}

const fn kind(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> KindInfo {
    KindInfo {
        group,
        kind,
        plural,
        namespaced,
    }
}

const KINDS: &[KindInfo] = &[
    kind("", "Namespace", "namespaces", false),
    kind("", "Pod", "pods", true),
    kind("", "Service", "services", true),
    kind("", "ConfigMap", "configmaps", true),
    kind("", "Secret", "secrets", true),
    kind("", "ServiceAccount", "serviceaccounts", true),
    kind("", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    kind("", "PersistentVolume", "persistentvolumes", false),
    kind("apps", "Deployment", "deployments", true),
    kind("apps", "StatefulSet", "statefulsets", true),
    kind("apps", "DaemonSet", "daemonsets", true),
    kind("batch", "Job", "jobs", true),
    kind(
        "policy",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    kind("storage.k8s.io", "StorageClass", "storageclasses", false),
    kind(
        "networking.k8s.io",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
];

/// Why the setup's permissions could not be decided offline.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KindError {
    /// The manifest could not be read or parsed.
    #[error("{experiment}: setup manifest {path}: {message}")]
    Unreadable {
        /// Experiment name.
        experiment: String,
        /// Manifest file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A kind outside the built-in table (a custom resource, say).
    #[error(
        "{experiment}: setup manifest {path} creates a {api_version} {kind}, whose RBAC resource \
         faultline cannot know without the cluster; run `faultline doctor` against the cluster, \
         or add the rule for it by hand"
    )]
    Unknown {
        /// Experiment name.
        experiment: String,
        /// Manifest file.
        path: String,
        /// Its `apiVersion`.
        api_version: String,
        /// Its `kind`.
        kind: String,
    },
}

/// What applying `exp`'s setup (server-side apply: `patch`; the readiness wait: `get`) and
/// its teardown (`delete`, when it deletes them) needs, per object, as `doctor` asks it.
pub(crate) fn setup_access(exp: &Experiment) -> Result<Vec<Access>, KindError> {
    let mut out = Vec::new();
    for path in &exp.setup.manifests {
        let objects = setup_objects(exp, path)?;
        for obj in objects {
            let types = obj.types.clone().unwrap_or_default();
            let group = types.api_version.rsplit_once('/').map_or("", |(g, _)| g);
            let Some(info) = KINDS
                .iter()
                .find(|k| k.kind == types.kind && k.group == group)
            else {
                return Err(KindError::Unknown {
                    experiment: exp.name.clone(),
                    path: path.display().to_string(),
                    api_version: types.api_version,
                    kind: types.kind,
                });
            };
            let namespace = info.namespaced.then(|| {
                obj.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".to_string())
            });
            // A cluster-scoped object is granted by name: a Namespace's `get` and `patch`
            // then reach that namespace alone, not every one.
            let name = namespace
                .is_none()
                .then(|| obj.metadata.name.clone())
                .flatten();
            out.extend(crate::doctor::access::setup_object(
                exp,
                info.group,
                info.plural,
                namespace,
                name,
                &format!("setup of {} ({})", exp.name, path.display()),
            ));
        }
    }
    Ok(out)
}

/// The objects of one of `exp`'s setup manifests.
fn setup_objects(
    exp: &Experiment,
    path: &std::path::Path,
) -> Result<Vec<kube::api::DynamicObject>, KindError> {
    let unreadable = |message: String| KindError::Unreadable {
        experiment: exp.name.clone(),
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))?;
    parse_manifest(path, &text).map_err(|e| unreadable(e.to_string()))
}

/// The Namespaces `exp`'s setup manifests create.
pub(crate) fn setup_namespaces(exp: &Experiment) -> Result<Vec<String>, KindError> {
    let mut out = Vec::new();
    for path in &exp.setup.manifests {
        let objects = setup_objects(exp, path)?;
        out.extend(
            objects
                .into_iter()
                .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "Namespace"))
                .filter_map(|o| o.metadata.name),
        );
    }
    Ok(out)
}
