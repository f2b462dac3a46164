//! Errors of the cluster side, each naming what was being done so the message says where
//! to look.

use std::path::PathBuf;

/// Why a cluster operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig could not be read or has no usable context.
    #[error("kubeconfig {path}: {}", kubeconfig_reason(source))]
    Kubeconfig {
        /// The file (or search path) that was read.
        path: String,
        /// The underlying error.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig and no in-cluster configuration was found.
    #[error(
        "no cluster configuration found (set KUBECONFIG, pass --kubeconfig, or run in a pod): {0}"
    )]
    Infer(#[source] kube::config::InferConfigError),
    /// An API endpoint (inventory `apiServers` or discovered) is not a URL.
    #[error("API endpoint {url}: {message}")]
    Endpoint {
        /// The endpoint as given.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done, e.g. `cordoning node lab-worker-1`.
        what: String,
        /// The client error (boxed: it is large and errors are rare).
        #[source]
        source: Box<kube::Error>,
    },
    /// A manifest file could not be read.
    #[error("reading manifest {path}: {source}")]
    ManifestRead {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A manifest file is not valid YAML or a document is not a Kubernetes object.
    #[error(transparent)]
    ManifestInvalid(#[from] crate::experiment::manifest::ManifestInvalid),
    /// The cluster does not serve a kind a manifest uses.
    #[error("manifest {path}: the cluster does not serve {api_version} {kind}: {source}")]
    UnknownKind {
        /// The file.
        path: PathBuf,
        /// `apiVersion` of the object.
        api_version: String,
        /// `kind` of the object.
        kind: String,
        /// The discovery error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Workloads did not become available in time.
    #[error("not ready after {timeout_secs}s: {}", not_ready.join("; "))]
    NotReady {
        /// How long was waited.
        timeout_secs: u64,
        /// One line per workload that is not ready, with its counts.
        not_ready: Vec<String>,
    },
    /// Draining did not evict every pod in time.
    #[error("drain of node {node} timed out; pods still on it: {}", pods.join(", "))]
    DrainTimeout {
        /// The node.
        node: String,
        /// Pods that could not be evicted.
        pods: Vec<String>,
    },
    /// A PodDisruptionBudget still refused an eviction at the drain's timeout
    /// (`onTimeout: fail`, the default).
    #[error("{holds}")]
    DrainHeld {
        /// The node.
        node: String,
        /// Each held pod with its budget and how long it held ("drain of NODE held 30.0 s
        /// by PodDisruptionBudget NS/NAME: …; still held at the 30 s timeout").
        holds: String,
    },
    /// A target matched fewer nodes than it needs.
    #[error("target `{target}` needs {needed} node(s) but matched {}: [{}]", matched.len(), matched.join(", "))]
    TargetUnsatisfied {
        /// Target name.
        target: String,
        /// How many nodes it needs (at least 1).
        needed: usize,
        /// The nodes that matched.
        matched: Vec<String>,
    },
    /// A step would act on a node that is already down before any fault.
    #[error(
        "step `{step}` acts on node {node} (target `{target}`), which is not healthy before any \
         fault: {problem}. A fault on a node that is already down shows nothing, and the \
         restored check would take its broken state as normal: wait until it is Ready, or \
         choose other nodes"
    )]
    TargetNotHealthy {
        /// The first step that acts on the node.
        step: String,
        /// Target name.
        target: String,
        /// The node.
        node: String,
        /// What is wrong with it ([`crate::cluster::targets::health_problem`]).
        problem: String,
    },
    /// An `exec` or `logs` probe's workload has no pod on its target's node.
    #[error("probe `{probe}`: {workload} has no running pod on node `{node}` (target `{target}`)")]
    NoPodForProbe {
        /// Probe name.
        probe: String,
        /// The workload, as `kind/namespace/name`.
        workload: String,
        /// Target name.
        target: String,
        /// The target's node.
        node: String,
    },
    /// A target excludes a target that was not resolved before it.
    #[error("target `{target}` excludes `{excluded}`, which is not an earlier target")]
    UnknownExcludedTarget {
        /// Target name.
        target: String,
        /// The excluded name.
        excluded: String,
    },
}

impl ClusterError {
    /// Wraps a client error with what was being done.
    pub fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ClusterError {
        let what = what.into();
        move |source| ClusterError::Api {
            what,
            source: Box::new(source),
        }
    }
}

/// What went wrong with a kubeconfig, without the path the caller already names (kube's
/// own message quotes it a second time, `'"/path"'`).
fn kubeconfig_reason(e: &kube::config::KubeconfigError) -> String {
    match e {
        kube::config::KubeconfigError::ReadConfig(io, _) => format!("cannot read it: {io}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_unreadable_kubeconfig_is_named_once_without_doubled_quotes() {
        let source = kube::config::Kubeconfig::read_from("/nonexistent/kc").expect_err("no file");
        let e = super::ClusterError::Kubeconfig {
            path: "/nonexistent/kc".into(),
            source,
        };
        assert_eq!(
            e.to_string(),
            "kubeconfig /nonexistent/kc: cannot read it: No such file or directory (os error 2)"
        );
    }
}
