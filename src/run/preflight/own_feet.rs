//! faultline must not break its own feet: a run refuses a step that acts on the node its
//! own pod runs on (a drain evicts it, a kubelet stop or reboot kills it, a partition cuts
//! it off), and a step that takes down the node of the only API server it talks to (when
//! there is no other endpoint to fail over to). Checked with the targets resolved, before
//! any fault.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams};

use crate::cluster::ResolvedTargets;
use crate::experiment::fault;
use crate::experiment::model::Experiment;

/// Where faultline itself stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OwnFeet {
    /// The node faultline's own pod runs on, and the pod (`namespace/name`), when it runs
    /// in the cluster (`POD_NAME` and `POD_NAMESPACE` from the downward API).
    pub own_pod: Option<(String, String)>,
    /// The node of the one API server faultline talks to, when there is nothing to fail
    /// over to.
    pub api_server_node: Option<String>,
}

/// Why a step would break faultline's own feet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OwnFeetError {
    /// The step acts on the node running faultline's pod.
    #[error(
        "step `{step}` does {action} on node {node}, which runs faultline's own pod {pod}: \
         the run would break itself. Keep faultline off the nodes experiments may fault \
         (the Helm chart's job.nodeSelector / job.affinity), or exclude {node} from target `{target}`"
    )]
    OwnNode {
        /// Step.
        step: String,
        /// Action name.
        action: &'static str,
        /// Node.
        node: String,
        /// The target naming it.
        target: String,
        /// faultline's pod, `namespace/name`.
        pod: String,
    },
    /// The step takes down the node of the only API server faultline talks to.
    #[error(
        "step `{step}` does {action} on node {node}, which runs the only API server faultline \
         talks to ({url}): the run would lose its own eyes. List the other API servers in the \
         inventory (cluster.apiEndpoints) so faultline can fail over, or exclude {node} from \
         target `{target}`"
    )]
    ApiServerNode {
        /// Step.
        step: String,
        /// Action name.
        action: &'static str,
        /// Node.
        node: String,
        /// The target naming it.
        target: String,
        /// The API server's URL.
        url: String,
    },
}

/// Refuses the first step that would break faultline's own feet, in file order. Steps that
/// only bring a node back or repair it are harmless; any other step on faultline's node is
/// refused, and any step that cuts the API server's node off, powers it off or restarts it.
pub(crate) fn check(
    exp: &Experiment,
    targets: &ResolvedTargets,
    feet: &OwnFeet,
    api_url: &str,
) -> Result<(), OwnFeetError> {
    for step in &exp.steps {
        let info = fault::info(&step.action);
        if info.repairs || info.brings_node_back {
            continue;
        }
        let Some(target) = &step.target else {
            continue;
        };
        for node in targets.get(target).into_iter().flatten() {
            if let Some((own_node, pod)) = &feet.own_pod
                && own_node == node
            {
                return Err(OwnFeetError::OwnNode {
                    step: step.name.clone(),
                    action: info.name,
                    node: node.clone(),
                    target: target.clone(),
                    pod: pod.clone(),
                });
            }
            // A stopped kubelet leaves the API server's static pod running; a partition,
            // a power-off or a reboot does not.
            let takes_api_down = info.restarts_machine
                || (info.takes_node_down && info.proof != fault::Proof::KubeletInactive);
            if feet.api_server_node.as_ref() == Some(node) && takes_api_down {
                return Err(OwnFeetError::ApiServerNode {
                    step: step.name.clone(),
                    action: info.name,
                    node: node.clone(),
                    target: target.clone(),
                    url: api_url.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// The node of the API server at `api_url` when faultline cannot fail over: the node whose
/// name or InternalIP is the URL's host, else, behind a Service or a name, the node of the
/// only `kube-apiserver` pod (`apiserver_nodes`). `None` with failover, with several API
/// servers behind one name, or with none on the nodes (a managed control plane).
pub(crate) fn api_server_node(
    api_url: &str,
    can_fail_over: bool,
    nodes: &[Node],
    apiserver_nodes: &[String],
) -> Option<String> {
    if can_fail_over {
        return None;
    }
    let host = host_of(api_url);
    let by_address = nodes.iter().find(|n| {
        n.metadata.name.as_deref() == Some(host)
            || n.status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .into_iter()
                .flatten()
                .any(|a| a.address == host)
    });
    if let Some(node) = by_address {
        return node.metadata.name.clone();
    }
    match apiserver_nodes {
        [only] => Some(only.clone()),
        _ => None,
    }
}

/// `10.0.0.1` of `https://10.0.0.1:6443/`, `::1` of `https://[::1]:6443`.
fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

/// Why faultline's own pod could not be read: a run in a pod must know the node it
/// spares, so this refuses the run ([`crate::run::preflight::prepare`]'s `OwnPod`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum OwnPodError {
    /// The API refused or did not answer.
    #[error("reading faultline's own pod {pod} (POD_NAME, POD_NAMESPACE): {source}")]
    Read {
        /// `namespace/name`.
        pod: String,
        /// The API's error.
        source: kube::Error,
    },
    /// The pod is not scheduled on any node.
    #[error("faultline's own pod {0} has no node")]
    NoNode(String),
}

/// faultline's own pod and its node, from `POD_NAME` and `POD_NAMESPACE` (the Helm chart
/// sets them from the downward API); `None` outside a pod. A pod that cannot be read is an
/// error: the check must not pass silently.
pub(crate) async fn own_pod(client: &Client) -> Result<Option<(String, String)>, OwnPodError> {
    let (Ok(name), Ok(namespace)) = (std::env::var("POD_NAME"), std::env::var("POD_NAMESPACE"))
    else {
        return Ok(None);
    };
    let pod = Api::<Pod>::namespaced(client.clone(), &namespace)
        .get(&name)
        .await
        .map_err(|source| OwnPodError::Read {
            pod: format!("{namespace}/{name}"),
            source,
        })?;
    let node = pod
        .spec
        .and_then(|s| s.node_name)
        .ok_or_else(|| OwnPodError::NoNode(format!("{namespace}/{name}")))?;
    Ok(Some((node, format!("{namespace}/{name}"))))
}

/// The nodes running a `kube-apiserver` pod (kubeadm's static pods, labelled
/// `component=kube-apiserver` in `kube-system`); empty when they cannot be listed.
pub(crate) async fn apiserver_pod_nodes(client: &Client) -> Vec<String> {
    let Ok(pods) = Api::<Pod>::namespaced(client.clone(), "kube-system")
        .list(&ListParams::default().labels("component=kube-apiserver"))
        .await
    else {
        return Vec::new();
    };
    let mut nodes: Vec<String> = pods
        .items
        .into_iter()
        .filter_map(|p| p.spec.and_then(|s| s.node_name))
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

#[cfg(test)]
mod tests;
