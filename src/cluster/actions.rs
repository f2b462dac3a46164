//! API actions an experiment step (or faultline's undo) performs: cordon, drain, taint,
//! delete nodes, pods and claims. Each returns what it did, for the timeline.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::error::ClusterError;
use super::owners::{OwnerIndex, pod_owner};
use crate::experiment::model::{PodSelector, TaintSpec};

fn nodes(client: &Client) -> Api<Node> {
    Api::all(client.clone())
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

async fn set_unschedulable(
    client: &Client,
    node: &str,
    value: bool,
) -> Result<String, ClusterError> {
    let verb = if value { "cordoned" } else { "uncordoned" };
    nodes(client)
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": value}})),
        )
        .await
        .map_err(ClusterError::api(format!(
            "{} node {node}",
            if value { "cordoning" } else { "uncordoning" }
        )))?;
    Ok(format!("node {node} {verb}"))
}

/// Marks a node unschedulable (`kubectl cordon`).
pub async fn cordon(client: &Client, node: &str) -> Result<String, ClusterError> {
    set_unschedulable(client, node, true).await
}

/// Marks a node schedulable again (`kubectl uncordon`); also the undo of cordon and drain.
pub async fn uncordon(client: &Client, node: &str) -> Result<String, ClusterError> {
    set_unschedulable(client, node, false).await
}

/// Whether drain leaves the pod alone: DaemonSet pods (their controller would recreate
/// them at once) and mirror pods (static pods the API cannot evict).
pub(crate) fn drain_skips(pod: &Pod) -> bool {
    let daemon = pod
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .any(|o| o.kind == "DaemonSet");
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    daemon || mirror
}

fn pod_name(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or(""),
        p.metadata.name.as_deref().unwrap_or("")
    )
}

async fn pods_on(client: &Client, node: &str) -> Result<Vec<Pod>, ClusterError> {
    let list = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .map_err(ClusterError::api(format!("listing pods on node {node}")))?;
    Ok(list.items.into_iter().filter(|p| !drain_skips(p)).collect())
}

/// Cordons the node and evicts its pods through the Eviction API (so PodDisruptionBudgets
/// are honoured, retrying while a budget refuses with 429), then waits until they are gone.
/// Returns the evicted pods as `namespace/name`.
pub async fn drain(
    client: &Client,
    node: &str,
    timeout: Duration,
) -> Result<Vec<String>, ClusterError> {
    let deadline = tokio::time::Instant::now() + timeout;
    cordon(client, node).await?;
    let targets = pods_on(client, node).await?;
    let mut evicted = Vec::new();
    for pod in &targets {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api = Api::<Pod>::namespaced(client.clone(), &ns);
        loop {
            match api.evict(&name, &EvictParams::default()).await {
                Ok(_) => break,
                Err(e) if is_not_found(&e) => break,
                Err(e) if status_code(&e) == Some(429) => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(ClusterError::DrainTimeout {
                            node: node.to_string(),
                            pods: vec![format!("{ns}/{name} (disruption budget)")],
                        });
                    }
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                Err(source) => {
                    return Err(ClusterError::Api {
                        what: format!("evicting pod {ns}/{name} from node {node}"),
                        source: Box::new(source),
                    });
                }
            }
        }
        evicted.push(pod_name(pod));
    }
    let uids: BTreeSet<String> = targets
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    loop {
        let left: Vec<String> = pods_on(client, node)
            .await?
            .iter()
            .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| uids.contains(u)))
            .map(pod_name)
            .collect();
        if left.is_empty() {
            return Ok(evicted);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ClusterError::DrainTimeout {
                node: node.to_string(),
                pods: left,
            });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Deletes the Node object: the cluster then reschedules its pods at once (no toleration wait).
pub async fn delete_node(client: &Client, node: &str) -> Result<String, ClusterError> {
    match nodes(client).delete(node, &DeleteParams::default()).await {
        Ok(_) => Ok(format!("node {node} deleted")),
        Err(e) if is_not_found(&e) => Ok(format!("node {node} was already gone")),
        Err(source) => Err(ClusterError::Api {
            what: format!("deleting node {node}"),
            source: Box::new(source),
        }),
    }
}

/// The pods a selector chooses, optionally only those on `on_nodes` (a resolved target).
/// Pods of a workload are those it owns (a Deployment through its ReplicaSets).
pub async fn list_pods(
    client: &Client,
    selector: &PodSelector,
    on_nodes: Option<&[String]>,
) -> Result<Vec<Pod>, ClusterError> {
    let namespace = selector
        .workload
        .as_ref()
        .map(|w| w.namespace.clone())
        .unwrap_or_else(|| selector.namespace.clone());
    let mut params = ListParams::default();
    if !selector.labels.is_empty() {
        let labels: Vec<String> = selector
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        params = params.labels(&labels.join(","));
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace)
        .list(&params)
        .await
        .map_err(ClusterError::api(format!("listing pods in {namespace}")))?
        .items;
    let owners = match &selector.workload {
        Some(_) => owner_index(client, &namespace).await?,
        None => OwnerIndex::new(),
    };
    Ok(pods
        .into_iter()
        .filter(|p| {
            selector
                .workload
                .as_ref()
                .is_none_or(|w| pod_owner(p, &owners).as_ref() == Some(w))
        })
        .filter(|p| {
            on_nodes.is_none_or(|nodes| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some_and(|n| nodes.contains(n))
            })
        })
        .collect())
}

/// ReplicaSet → Deployment index of one namespace.
pub(crate) async fn owner_index(
    client: &Client,
    namespace: &str,
) -> Result<OwnerIndex, ClusterError> {
    let sets = Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(ClusterError::api(format!(
            "listing ReplicaSets in {namespace}"
        )))?;
    let mut idx = OwnerIndex::new();
    idx.replace_namespace(namespace, &sets.items);
    Ok(idx)
}

/// Deletes the chosen pods; `force` uses grace period 0 (the pod object goes at once, even
/// on an unreachable node, as `kubectl delete --force` does). Returns `namespace/name`s.
pub async fn delete_pods(
    client: &Client,
    selector: &PodSelector,
    on_nodes: Option<&[String]>,
    force: bool,
) -> Result<Vec<String>, ClusterError> {
    let params = if force {
        DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        }
    } else {
        DeleteParams::default()
    };
    let mut deleted = Vec::new();
    for pod in list_pods(client, selector, on_nodes).await? {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        match Api::<Pod>::namespaced(client.clone(), &ns)
            .delete(&name, &params)
            .await
        {
            Ok(_) => deleted.push(pod_name(&pod)),
            Err(e) if is_not_found(&e) => {}
            Err(source) => {
                return Err(ClusterError::Api {
                    what: format!("deleting pod {ns}/{name}"),
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(deleted)
}

/// Deletes a PersistentVolumeClaim; with `remove_finalizers` its finalizers are cleared
/// first, so a claim still in use (e.g. by a pod on a dead node) really goes away.
pub async fn delete_pvc(
    client: &Client,
    namespace: &str,
    name: &str,
    remove_finalizers: bool,
) -> Result<String, ClusterError> {
    let api = Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace);
    let what = format!("PersistentVolumeClaim {namespace}/{name}");
    if remove_finalizers {
        match api
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => return Ok(format!("{what} was already gone")),
            Err(source) => {
                return Err(ClusterError::Api {
                    what: format!("removing finalizers of {what}"),
                    source: Box::new(source),
                });
            }
        }
    }
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(format!("{what} deleted")),
        Err(e) if is_not_found(&e) => Ok(format!("{what} was already gone")),
        Err(source) => Err(ClusterError::Api {
            what: format!("deleting {what}"),
            source: Box::new(source),
        }),
    }
}

/// Rewrites a node's taints with `edit`, guarded by resourceVersion so a taint the node
/// controller adds meanwhile is never overwritten (retries on conflict). Returns whether
/// anything changed.
async fn edit_taints(
    client: &Client,
    node: &str,
    edit: impl Fn(&mut Vec<k8s_openapi::api::core::v1::Taint>) -> bool,
) -> Result<bool, ClusterError> {
    let api = nodes(client);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let current = api
            .get(node)
            .await
            .map_err(ClusterError::api(format!("reading node {node}")))?;
        let mut taints = current
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        if !edit(&mut taints) {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "spec": {"taints": taints},
        });
        match api
            .patch(node, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.is_conflict() && attempts < 5 => continue,
            Err(source) => {
                return Err(ClusterError::Api {
                    what: format!("updating taints of node {node}"),
                    source: Box::new(source),
                });
            }
        }
    }
}

/// Adds a taint (idempotent: an existing taint with the same key and effect is replaced
/// only if its value differs).
pub async fn taint(client: &Client, node: &str, spec: &TaintSpec) -> Result<String, ClusterError> {
    let changed = edit_taints(client, node, |taints| {
        if let Some(t) = taints
            .iter_mut()
            .find(|t| t.key == spec.key && t.effect == spec.effect)
        {
            if t.value == spec.value {
                return false;
            }
            t.value = spec.value.clone();
            return true;
        }
        taints.push(k8s_openapi::api::core::v1::Taint {
            key: spec.key.clone(),
            value: spec.value.clone(),
            effect: spec.effect.clone(),
            time_added: None,
        });
        true
    })
    .await?;
    let verb = if changed {
        "tainted"
    } else {
        "already tainted"
    };
    Ok(format!("node {node} {verb} {}:{}", spec.key, spec.effect))
}

/// Removes the taint with this key and effect (idempotent).
pub async fn untaint(
    client: &Client,
    node: &str,
    key: &str,
    effect: &str,
) -> Result<String, ClusterError> {
    let changed = edit_taints(client, node, |taints| {
        let before = taints.len();
        taints.retain(|t| !(t.key == key && t.effect == effect));
        taints.len() != before
    })
    .await?;
    let verb = if changed { "untainted" } else { "had no taint" };
    Ok(format!("node {node} {verb} {key}:{effect}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::load;

    #[test]
    fn drain_skips_daemonset_and_mirror_pods_only() {
        assert!(drain_skips(&load("pod-agent-daemonset.json")));
        let mut web: Pod = load("pod-web-ready.json");
        assert!(!drain_skips(&web));
        web.metadata.owner_references = None;
        web.metadata.annotations = Some(
            [("kubernetes.io/config.mirror".to_string(), "abc".to_string())]
                .into_iter()
                .collect(),
        );
        assert!(drain_skips(&web));
    }
}
