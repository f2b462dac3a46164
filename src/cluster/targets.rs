//! Resolving an experiment's named targets to node names, once, before any fault: steps
//! and expectations then refer to a fixed set of nodes for the whole run.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams};

use super::actions::owner_index;
use super::error::ClusterError;
use super::lean::Lean;
use super::owners::{OwnerIndex, pod_owner};
use crate::experiment::model::{NodeRole, TargetSpec, WorkloadRef};

/// Target name → node names (sorted).
pub type ResolvedTargets = BTreeMap<String, Vec<String>>;

const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

/// Whether a node carries a control-plane role label.
pub(crate) fn is_control_plane(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|l| CONTROL_PLANE_LABELS.iter().any(|k| l.contains_key(*k)))
}

/// Taints the node lifecycle controller puts on a node it sees as down.
const DOWN_TAINTS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// What is wrong with a node before any fault, if anything: its Ready condition is not
/// True, or it carries the controller's not-ready or unreachable taint with effect
/// NoExecute (Ready flips back before the taints come off, and that one evicts pods). A
/// Ready node with only the NoSchedule one is healthy: it is a node just registered, or a
/// cluster with no node lifecycle controller to take it off (the scale lab). `None`:
/// healthy, a node a fault can say something about.
pub(crate) fn health_problem(node: &Node) -> Option<String> {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    let taints: Vec<String> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| DOWN_TAINTS.contains(&t.key.as_str()))
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    if ready == Some("True") && !taints.iter().any(|t| t.ends_with(":NoExecute")) {
        return None;
    }
    let mut said = format!("Ready {}", ready.unwrap_or("not reported"));
    if !taints.is_empty() {
        said.push_str(&format!(", tainted {}", taints.join(", ")));
    }
    Some(said)
}

/// Node name → the node's first `InternalIP` (`status.addresses`): where a NodePort
/// Service answers, for probes that go through a node.
pub(crate) fn internal_ips(nodes: &[Node]) -> BTreeMap<String, String> {
    nodes
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.clone()?;
            let ip = n
                .status
                .as_ref()?
                .addresses
                .as_ref()?
                .iter()
                .find(|a| a.type_ == "InternalIP")?
                .address
                .clone();
            Some((name, ip))
        })
        .collect()
}

/// The workload's live pods: scheduled, not terminating, not finished.
fn live_pods_of<'a>(
    pods: &'a [Pod],
    owners: &'a OwnerIndex,
    workload: &'a WorkloadRef,
) -> impl Iterator<Item = &'a Pod> + 'a {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter(move |p| pod_owner(p, owners).as_ref() == Some(workload))
}

/// Nodes running a live (scheduled, not terminating, not finished) pod of the workload.
pub(crate) fn nodes_running(
    pods: &[Pod],
    owners: &OwnerIndex,
    workload: &WorkloadRef,
) -> BTreeSet<String> {
    live_pods_of(pods, owners, workload)
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect()
}

/// Names of the workload's live pods on `node`, sorted.
pub(crate) fn pods_on(
    pods: &[Pod],
    owners: &OwnerIndex,
    workload: &WorkloadRef,
    node: &str,
) -> Vec<String> {
    let mut names: Vec<String> = live_pods_of(pods, owners, workload)
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// The first (by name) live pod of the workload on `node`, read from the live cluster.
pub(crate) async fn pod_on(
    client: &Client,
    workload: &WorkloadRef,
    node: &str,
) -> Result<Option<String>, ClusterError> {
    let pods = Api::<Pod>::namespaced(client.clone(), &workload.namespace)
        .list(&ListParams::default())
        .await
        .map_err(ClusterError::api(format!(
            "listing pods in {}",
            workload.namespace
        )))?
        .items;
    let owners = owner_index(client, &workload.namespace).await?;
    Ok(pods_on(&pods, &owners, workload, node).into_iter().next())
}

/// Resolves targets in order against a listed cluster; pure so the selection rules are
/// tested without one. `running` maps each `runningPodsOf` workload to its nodes.
pub(crate) fn resolve_with(
    specs: &[TargetSpec],
    nodes: &[Node],
    running: &BTreeMap<WorkloadRef, BTreeSet<String>>,
) -> Result<ResolvedTargets, ClusterError> {
    let mut resolved = ResolvedTargets::new();
    for spec in specs {
        let sel = &spec.selector;
        let mut excluded = BTreeSet::new();
        for ex in &sel.exclude_targets {
            let nodes = resolved
                .get(ex)
                .ok_or_else(|| ClusterError::UnknownExcludedTarget {
                    target: spec.name.clone(),
                    excluded: ex.clone(),
                })?;
            excluded.extend(nodes.iter().cloned());
        }
        let mut matched: Vec<&Node> = nodes
            .iter()
            .filter(|n| {
                let name = n.metadata.name.as_deref().unwrap_or("");
                let labels = n.metadata.labels.clone().unwrap_or_default();
                (sel.names.is_empty() || sel.names.iter().any(|x| x == name))
                    && sel.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
                    && match sel.role {
                        None => true,
                        Some(NodeRole::ControlPlane) => is_control_plane(n),
                        Some(NodeRole::Worker) => !is_control_plane(n),
                    }
                    && sel
                        .running_pods_of
                        .as_ref()
                        .is_none_or(|w| running.get(w).is_some_and(|s| s.contains(name)))
                    && !excluded.contains(name)
            })
            .collect();
        // Healthy nodes first, each group by name: a `count` picks nodes a fault can say
        // something about when there are enough of them (the run refuses to fault the rest).
        matched.sort_by_key(|n| (health_problem(n).is_some(), n.metadata.name.clone()));
        let mut matched: Vec<String> = matched
            .into_iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let needed = spec.count.map(|c| c as usize).unwrap_or(1).max(1);
        if matched.len() < needed {
            return Err(ClusterError::TargetUnsatisfied {
                target: spec.name.clone(),
                needed,
                matched,
            });
        }
        if let Some(c) = spec.count {
            matched.truncate(c as usize);
        }
        matched.sort();
        resolved.insert(spec.name.clone(), matched);
    }
    Ok(resolved)
}

/// Every node, decoded only as far as faultline reads a node ([`Lean`]): a full list of
/// 5,000 nodes held about 100 MB (managed fields, image lists) where this holds a few.
pub(crate) async fn list_nodes_lean(client: &Client) -> Result<Vec<Node>, ClusterError> {
    Ok(Api::<Lean<Node>>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(ClusterError::api("listing nodes"))?
        .items
        .into_iter()
        .map(|n| n.0)
        .collect())
}

/// Resolves the experiment's targets against the live cluster: names, labels, role,
/// nodes running a workload's pods, exclusion of earlier targets, then the first `count`
/// by name (deterministic). A target that matches too few nodes is an error naming it.
pub async fn resolve_targets(
    client: &Client,
    specs: &[TargetSpec],
) -> Result<ResolvedTargets, ClusterError> {
    let nodes = list_nodes_lean(client).await?;
    let mut running = BTreeMap::new();
    for w in specs
        .iter()
        .filter_map(|s| s.selector.running_pods_of.as_ref())
    {
        if running.contains_key(w) {
            continue;
        }
        let pods = Api::<Pod>::namespaced(client.clone(), &w.namespace)
            .list(&ListParams::default())
            .await
            .map_err(ClusterError::api(format!(
                "listing pods in {}",
                w.namespace
            )))?
            .items;
        let owners = owner_index(client, &w.namespace).await?;
        running.insert(w.clone(), nodes_running(&pods, &owners, w));
    }
    resolve_with(specs, &nodes, &running)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::model::{NodeSelector, WorkloadKind};
    use crate::fixtures::load;

    fn cluster() -> Vec<Node> {
        let mut w3: Node = load("node-notready-cordoned.json");
        w3.metadata.name = Some("lab-worker-3".to_string());
        vec![
            w3,
            load("node-ready.json"),
            load("node-unreachable.json"),
            load("node-no-conditions.json"),
        ]
    }

    #[test]
    fn internal_ips_come_from_the_recorded_kind_nodes() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/api/kind/nodes.json"
        ))
        .unwrap();
        let list: serde_json::Value = serde_json::from_str(&text).unwrap();
        let nodes: Vec<Node> = serde_json::from_value(list["items"].clone()).unwrap();
        let ips = internal_ips(&nodes);
        assert_eq!(ips.len(), 3, "{ips:?}");
        assert!(
            ips.values().all(|ip| ip.starts_with("172.18.0.")),
            "{ips:?}"
        );
        let mut no_status: Node = load("node-ready.json");
        no_status.status = None;
        assert!(internal_ips(&[no_status]).is_empty());
    }

    fn target(name: &str, selector: NodeSelector, count: Option<u32>) -> TargetSpec {
        TargetSpec {
            name: name.to_string(),
            selector,
            count,
        }
    }

    fn web() -> WorkloadRef {
        WorkloadRef {
            kind: WorkloadKind::Deployment,
            namespace: "faultline-lab".to_string(),
            name: "web".to_string(),
        }
    }

    #[test]
    fn role_count_and_exclusion_are_deterministic() {
        let specs = vec![
            target(
                "victim",
                NodeSelector {
                    role: Some(NodeRole::Worker),
                    ..Default::default()
                },
                Some(1),
            ),
            target(
                "others",
                NodeSelector {
                    role: Some(NodeRole::Worker),
                    exclude_targets: vec!["victim".to_string()],
                    ..Default::default()
                },
                None,
            ),
            target(
                "cp",
                NodeSelector {
                    role: Some(NodeRole::ControlPlane),
                    ..Default::default()
                },
                None,
            ),
        ];
        let r =
            resolve_with(&specs, &cluster(), &BTreeMap::new()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r["victim"], vec!["lab-worker-1"]);
        assert_eq!(r["others"], vec!["lab-worker-2", "lab-worker-3"]);
        assert_eq!(r["cp"], vec!["lab-cp-1"]);
    }

    #[test]
    fn running_pods_of_uses_owner_resolution_and_skips_terminating_pods() {
        let mut idx = OwnerIndex::new();
        idx.insert(&load("replicaset-web.json"));
        // ready pod on worker-1; terminating one on worker-2; a DaemonSet pod on worker-2.
        let pods: Vec<Pod> = vec![
            load("pod-web-ready.json"),
            load("pod-web-terminating.json"),
            load("pod-agent-daemonset.json"),
        ];
        let on = nodes_running(&pods, &idx, &web());
        assert_eq!(on.into_iter().collect::<Vec<_>>(), vec!["lab-worker-1"]);

        // The exec probe's pod: the live one on the node, none where only a terminating one is.
        let ready: Pod = load("pod-web-ready.json");
        assert_eq!(
            pods_on(&pods, &idx, &web(), "lab-worker-1"),
            vec![ready.metadata.name.unwrap()]
        );
        assert!(pods_on(&pods, &idx, &web(), "lab-worker-2").is_empty());

        let running = BTreeMap::from([(web(), nodes_running(&pods, &idx, &web()))]);
        let specs = vec![target(
            "web-node",
            NodeSelector {
                running_pods_of: Some(web()),
                ..Default::default()
            },
            None,
        )];
        let r = resolve_with(&specs, &cluster(), &running).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r["web-node"], vec!["lab-worker-1"]);
    }

    #[test]
    fn a_count_picks_healthy_nodes_first_and_names_what_is_wrong_with_the_rest() {
        let workers = |count| {
            vec![target(
                "victim",
                NodeSelector {
                    role: Some(NodeRole::Worker),
                    ..Default::default()
                },
                Some(count),
            )]
        };
        let mut nodes = cluster();
        // The healthy worker sorts last by name: health comes before the name.
        nodes[1].metadata.name = Some("lab-worker-9".to_string());
        let r = resolve_with(&workers(1), &nodes, &BTreeMap::new()).unwrap();
        assert_eq!(r["victim"], vec!["lab-worker-9"]);
        let r = resolve_with(&workers(2), &nodes, &BTreeMap::new()).unwrap();
        assert_eq!(r["victim"], vec!["lab-worker-2", "lab-worker-9"]);

        // Ready, with only the NoSchedule one (no controller took it off yet): healthy.
        let mut fresh: Node = load("node-ready.json");
        fresh.spec.get_or_insert_with(Default::default).taints =
            Some(vec![k8s_openapi::api::core::v1::Taint {
                key: "node.kubernetes.io/not-ready".into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]);
        assert_eq!(health_problem(&fresh), None);
        let said: Vec<Option<String>> = cluster().iter().map(health_problem).collect();
        assert_eq!(
            said,
            [
                Some("Ready False, tainted node.kubernetes.io/not-ready:NoSchedule".to_string()),
                None,
                Some(
                    "Ready Unknown, tainted node.kubernetes.io/unreachable:NoExecute, \
                     node.kubernetes.io/unreachable:NoSchedule"
                        .to_string()
                ),
                Some("Ready not reported".to_string()),
            ]
        );
    }

    #[test]
    fn too_few_nodes_is_an_error_naming_target_and_matches() {
        let specs = vec![target(
            "pair",
            NodeSelector {
                labels: BTreeMap::from([("type".to_string(), "kwok".to_string())]),
                names: vec!["lab-worker-1".to_string(), "lab-cp-1".to_string()],
                ..Default::default()
            },
            Some(2),
        )];
        let err = resolve_with(&specs, &cluster(), &BTreeMap::new())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            err,
            "target `pair` needs 2 node(s) but matched 1: [lab-worker-1]"
        );
        let none = vec![target(
            "ghost",
            NodeSelector {
                names: vec!["nope".to_string()],
                ..Default::default()
            },
            None,
        )];
        assert!(resolve_with(&none, &cluster(), &BTreeMap::new()).is_err());
    }
}
