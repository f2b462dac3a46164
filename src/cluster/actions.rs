//! API actions an experiment step (or faultline's undo) performs: cordon, drain, taint,
//! delete nodes, pods and claims. Each returns what it did, for the timeline.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::error::ClusterError;
use super::owners::{OwnerIndex, pod_owner};
use super::pdb::{PdbHold, budget_named_by, budget_state, budgets_selecting, describe_holds};
use crate::experiment::model::{DrainOnTimeout, PodSelector, TaintSpec};

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

/// The label every node-access pod carries (value `true`): faultline's own hands on a
/// node reached through the API (`crate::execute::pod`), which `restore` finds by it and a
/// drain leaves alone. Defined here, below both, so the drain need not know the executor.
pub const NODE_ACCESS_LABEL: &str = "faultline.dev/node-access";

/// Whether drain leaves the pod alone: DaemonSet pods (their controller would recreate
/// them at once), mirror pods (static pods the API cannot evict), and faultline's own
/// node-access pods (the pod kept on the node for the run, an undo watcher): the run
/// deletes those itself, and evicting one would take away how it reaches the node. Its
/// own are those labelled so in `own_namespaces` (the API transport's): anywhere else the
/// label is a tenant's and means nothing, and its pod is drained like any other.
pub(crate) fn drain_skips(pod: &Pod, own_namespaces: &BTreeSet<String>) -> bool {
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
    let own = pod
        .metadata
        .namespace
        .as_ref()
        .is_some_and(|ns| own_namespaces.contains(ns))
        && pod
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get(NODE_ACCESS_LABEL).is_some_and(|v| v == "true"));
    daemon || mirror || own
}

fn pod_name(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or(""),
        p.metadata.name.as_deref().unwrap_or("")
    )
}

async fn pods_on(
    client: &Client,
    node: &str,
    own_namespaces: &BTreeSet<String>,
) -> Result<Vec<Pod>, ClusterError> {
    let list = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .map_err(ClusterError::api(format!("listing pods on node {node}")))?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| !drain_skips(p, own_namespaces))
        .collect())
}

/// How often a drain asks again to evict a pod a PodDisruptionBudget refused (`kubectl
/// drain` waits 5 s too).
const EVICT_RETRY: Duration = Duration::from_secs(5);

/// How long an eviction request is waited for before the drain reads the pod's budgets
/// instead: an accepted eviction answers at once; a refused one is retried inside kube's
/// client (429 is retryable there) until this bound drops it.
const EVICT_ANSWER: Duration = Duration::from_secs(3);

/// What a drain did: the pods evicted, those a PodDisruptionBudget held (for a while or
/// until the timeout), and those it left on the node.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Drained {
    /// Pods evicted, `namespace/name`.
    pub evicted: Vec<String>,
    /// Every pod a budget refused at least once.
    pub holds: Vec<PdbHold>,
    /// Pods still on the node at the timeout (`onTimeout: continue` only).
    pub left: Vec<String>,
}

impl Drained {
    /// The step's output. Its first line (the one the timeline, the live view and JUnit's
    /// output show) is each hold with its budget and time, then what was left on the node,
    /// when a budget held the drain; the pods evicted follow.
    pub(crate) fn describe(&self, node: &str, timeout: Duration) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let mut first = Vec::new();
        if !self.holds.is_empty() {
            first.push(describe_holds(node, &self.holds, timeout));
        }
        if !self.left.is_empty() {
            first.push(format!(
                "onTimeout: continue: going on with {} left on node {node}",
                self.left.join(", ")
            ));
        }
        let evicted = format!("evicted: {}", list(&self.evicted));
        if first.is_empty() {
            evicted
        } else {
            format!("{}\n{evicted}", first.join("; "))
        }
    }
}

/// The budgets that hold a pod whose eviction was refused: the one the API's 429 names
/// (`named`), else those of its namespace whose selector matches it; with their state.
async fn holding_budgets(
    client: &Client,
    pod: &Pod,
    named: Option<String>,
) -> (Vec<String>, Option<String>) {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    // Reading the budgets is for the report only: a drain is not stopped by a refused list.
    let budgets = Api::<PodDisruptionBudget>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let names = match named {
        Some(name) => vec![format!("{ns}/{name}")],
        None => budgets_selecting(&budgets, pod),
    };
    let states: Vec<String> = budgets
        .iter()
        .filter(|b| {
            names.contains(&format!(
                "{ns}/{}",
                b.metadata.name.as_deref().unwrap_or("")
            ))
        })
        .filter_map(budget_state)
        .collect();
    let state = (!states.is_empty()).then(|| states.join("; "));
    (names, state)
}

/// Records the hold of `pod` after an eviction asked at `times.0` was refused (or not
/// answered) by `times.1`, both after the drain began: the first time, its budgets (the
/// one the API `named`, else those whose selector matches) and their state, at `held_at`
/// in `holds`; after that, how long it has held. With `budgeted_only`, a pod no budget
/// selects is not a hold (an unanswered eviction may be a slow API, not a budget).
async fn note_hold(
    client: &Client,
    pod: &Pod,
    named: Option<String>,
    budgeted_only: bool,
    held_at: &mut Option<usize>,
    holds: &mut Vec<PdbHold>,
    (asked, now): (Duration, Duration),
) {
    if let Some(h) = *held_at {
        holds[h].held = now.saturating_sub(holds[h].since);
        return;
    }
    let (budgets, state) = holding_budgets(client, pod, named).await;
    if budgeted_only && budgets.is_empty() {
        return;
    }
    *held_at = Some(holds.len());
    holds.push(PdbHold {
        pod: pod_name(pod),
        budgets,
        state,
        since: asked,
        held: now.saturating_sub(asked),
        evicted: false,
    });
}

/// Cordons the node and evicts its pods through the Eviction API, so PodDisruptionBudgets
/// are honoured: a pod a budget refuses (429) is asked again every 5 s until the step's
/// timeout, and each such hold is recorded with its budget, when it began and how long it
/// lasted. Then waits until the evicted pods are gone. A pod still held at the timeout is
/// an error naming its budget ([`ClusterError::DrainHeld`]) unless `on_timeout` is
/// `continue`, when the drain ends with the pods left.
///
/// `own_namespaces`: where faultline's own node-access pods run, which it never evicts
/// ([`drain_skips`]).
pub(crate) async fn drain(
    client: &Client,
    node: &str,
    timeout: Duration,
    on_timeout: DrainOnTimeout,
    own_namespaces: &BTreeSet<String>,
) -> Result<Drained, ClusterError> {
    let began = tokio::time::Instant::now();
    let deadline = began + timeout;
    cordon(client, node).await?;
    let targets = pods_on(client, node, own_namespaces).await?;
    let mut done = Drained::default();
    // Index into `done.holds` of each pod held so far.
    let mut held_at: Vec<Option<usize>> = vec![None; targets.len()];
    let mut pending: Vec<usize> = (0..targets.len()).collect();
    loop {
        let mut refused = Vec::new();
        for &i in &pending {
            let pod = &targets[i];
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let api = Api::<Pod>::namespaced(client.clone(), &ns);
            // kube's client retries a 429 by itself (with the server's Retry-After, for
            // minutes), so a budget's refusal rarely reaches here: an eviction not answered
            // within EVICT_ANSWER is given up and the pod's budgets read instead; an
            // accepted eviction answers at once.
            let asked = began.elapsed();
            let bound = deadline.min(tokio::time::Instant::now() + EVICT_ANSWER);
            let answer =
                tokio::time::timeout_at(bound, api.evict(&name, &EvictParams::default())).await;
            let Ok(answer) = answer else {
                // No answer: a hold only when a budget selects the pod.
                let times = (asked, began.elapsed());
                note_hold(
                    client,
                    pod,
                    None,
                    true,
                    &mut held_at[i],
                    &mut done.holds,
                    times,
                )
                .await;
                refused.push(i);
                continue;
            };
            match answer {
                Ok(_) => {
                    if let Some(h) = held_at[i] {
                        let hold = &mut done.holds[h];
                        hold.held = began.elapsed().saturating_sub(hold.since);
                        hold.evicted = true;
                    }
                    done.evicted.push(pod_name(pod));
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) if status_code(&e) == Some(429) => {
                    let named = match &e {
                        kube::Error::Api(status) => budget_named_by(status),
                        _ => None,
                    };
                    let times = (asked, began.elapsed());
                    let (at, holds) = (&mut held_at[i], &mut done.holds);
                    note_hold(client, pod, named, false, at, holds, times).await;
                    refused.push(i);
                }
                Err(source) => {
                    return Err(ClusterError::Api {
                        what: format!("evicting pod {ns}/{name} from node {node}"),
                        source: Box::new(source),
                    });
                }
            }
        }
        pending = refused;
        if pending.is_empty() {
            break;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            for &i in &pending {
                if let Some(h) = held_at[i] {
                    let hold = &mut done.holds[h];
                    hold.held = began.elapsed().saturating_sub(hold.since);
                }
            }
            match on_timeout {
                DrainOnTimeout::Fail if done.holds.is_empty() => {
                    return Err(ClusterError::DrainTimeout {
                        node: node.to_string(),
                        pods: pending.iter().map(|&i| pod_name(&targets[i])).collect(),
                    });
                }
                DrainOnTimeout::Fail => {
                    return Err(ClusterError::DrainHeld {
                        node: node.to_string(),
                        holds: describe_holds(node, &done.holds, timeout),
                    });
                }
                DrainOnTimeout::Continue => {
                    done.left = pending.iter().map(|&i| pod_name(&targets[i])).collect();
                    break;
                }
            }
        }
        tokio::time::sleep(EVICT_RETRY.min(deadline - now)).await;
    }
    let uids: BTreeSet<String> = targets
        .iter()
        .filter(|p| done.evicted.contains(&pod_name(p)))
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    loop {
        let left: Vec<String> = pods_on(client, node, own_namespaces)
            .await?
            .iter()
            .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| uids.contains(u)))
            .map(pod_name)
            .collect();
        if left.is_empty() {
            return Ok(done);
        }
        if tokio::time::Instant::now() >= deadline {
            if on_timeout == DrainOnTimeout::Continue {
                done.left
                    .extend(left.into_iter().map(|p| format!("{p} (terminating)")));
                return Ok(done);
            }
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
    fn a_held_drain_says_its_budget_on_its_first_line() {
        let drained = Drained {
            evicted: vec!["faultline-lab/db-0".into()],
            holds: vec![PdbHold {
                pod: "faultline-lab/web-abc".into(),
                budgets: vec!["faultline-lab/web-pdb".into()],
                state: None,
                since: Duration::ZERO,
                held: Duration::from_secs(15),
                evicted: false,
            }],
            left: vec!["faultline-lab/web-abc".into()],
        };
        let said = drained.describe("kind-worker", Duration::from_secs(15));
        assert_eq!(
            said,
            "drain of kind-worker held 15.0 s by PodDisruptionBudget faultline-lab/web-pdb: \
             faultline-lab/web-abc held 15.0 s (from +0.0 s) by PodDisruptionBudget \
             faultline-lab/web-pdb; still held at the 15 s timeout; onTimeout: continue: going \
             on with faultline-lab/web-abc left on node kind-worker\nevicted: faultline-lab/db-0"
        );
        assert_eq!(
            Drained::default().describe("kind-worker", Duration::from_secs(15)),
            "evicted: none"
        );
    }

    /// A run's node-access pods (the one kept on the node, an undo watcher) are faultline's
    /// own way onto the node: a drain in the run must not evict them.
    ///
    /// Issue 69, item 5: the label was honoured in any namespace, so a tenant's pod that
    /// carried it was never drained. Only the API transport's namespaces hold faultline's.
    #[test]
    fn drain_skips_faultlines_own_node_access_pods() {
        let own: BTreeSet<String> = ["faultline-node-access".to_string()].into();
        let mut access: Pod = load("pod-web-ready.json");
        access.metadata.owner_references = None;
        access.metadata.namespace = Some("faultline-node-access".into());
        access.metadata.labels = Some(
            [(NODE_ACCESS_LABEL.to_string(), "true".to_string())]
                .into_iter()
                .collect(),
        );
        assert!(drain_skips(&access, &own));
        let mut tenant = access.clone();
        tenant.metadata.namespace = Some("shop".into());
        assert!(
            !drain_skips(&tenant, &own),
            "a tenant's pod wearing the label is drained"
        );
        access.metadata.labels = Some(
            [(NODE_ACCESS_LABEL.to_string(), "false".to_string())]
                .into_iter()
                .collect(),
        );
        assert!(
            !drain_skips(&access, &own),
            "only the label's value `true` counts"
        );
    }

    #[test]
    fn drain_skips_daemonset_and_mirror_pods_only() {
        let none = BTreeSet::new();
        assert!(drain_skips(&load("pod-agent-daemonset.json"), &none));
        let mut web: Pod = load("pod-web-ready.json");
        assert!(!drain_skips(&web, &none));
        web.metadata.owner_references = None;
        web.metadata.annotations = Some(
            [("kubernetes.io/config.mirror".to_string(), "abc".to_string())]
                .into_iter()
                .collect(),
        );
        assert!(drain_skips(&web, &none));
    }
}
