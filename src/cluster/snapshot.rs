//! The cluster as faultline promises to leave it: a snapshot taken before the first fault,
//! compared after the last undo.
//!
//! What is compared is what a run could break and leave broken: every node Ready and
//! schedulable as it was, with the taints it had; every workload in the experiment's
//! namespaces at its desired Ready replicas if it was; no pod stuck Terminating that was
//! not already; every kubelet faultline acted on running again (read over the node's
//! transport by the caller, which fills [`Snapshot::kubelets`]). The comparison is pure
//! ([`differences`]); reading the cluster is [`take`].
//!
//! A run saves its snapshot beside the fault journal ([`path_beside`]), so that after a
//! crash or `kill -9` `faultline restore` can compare the cluster with it too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, Resource};
use serde::{Deserialize, Serialize};

use super::error::ClusterError;

/// What the cluster looked like, in the parts a run promises to restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When it was read.
    pub taken_at: DateTime<Utc>,
    /// The inventory's cluster name.
    pub cluster: String,
    /// Namespaces whose workloads and pods were read; `None`: every namespace.
    pub namespaces: Option<Vec<String>>,
    /// Every node, by name.
    pub nodes: BTreeMap<String, NodeSnap>,
    /// Every Deployment, StatefulSet and DaemonSet in `namespaces`, as `kind ns/name`.
    pub workloads: BTreeMap<String, WorkloadSnap>,
    /// Pods already Terminating, as `ns/name uid`: not the run's doing.
    pub terminating: BTreeSet<String>,
    /// Kubelets of the nodes faultline acts on, read by the caller over each node's
    /// transport: node → running.
    pub kubelets: BTreeMap<String, KubeletSnap>,
}

/// A node, as compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSnap {
    /// Ready condition True.
    pub ready: bool,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// Taints as `key:Effect`.
    pub taints: BTreeSet<String>,
}

/// A workload, as compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadSnap {
    /// Desired replicas (DaemonSet: desiredNumberScheduled).
    pub desired: i32,
    /// Ready replicas (DaemonSet: numberReady).
    pub ready: i32,
}

impl WorkloadSnap {
    fn whole(self) -> bool {
        self.ready >= self.desired
    }
}

/// A kubelet, as compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeletSnap {
    /// `commands.kubeletStatus` exited 0.
    pub running: bool,
    /// What it said (or why it could not be asked).
    pub said: String,
}

/// Reads the nodes, and the workloads and pods of `namespaces` (`None`: every namespace),
/// through the API. Kubelets are the caller's to fill.
pub async fn take(
    client: &Client,
    cluster: &str,
    namespaces: Option<&[String]>,
) -> Result<Snapshot, ClusterError> {
    let lp = ListParams::default();
    let nodes = Api::<Node>::all(client.clone())
        .list(&lp)
        .await
        .map_err(ClusterError::api("listing nodes"))?
        .items;
    let mut snap = Snapshot {
        taken_at: Utc::now(),
        cluster: cluster.to_string(),
        namespaces: namespaces.map(<[String]>::to_vec),
        nodes: nodes.iter().filter_map(node_snap).collect(),
        workloads: BTreeMap::new(),
        terminating: BTreeSet::new(),
        kubelets: BTreeMap::new(),
    };
    let scopes: Vec<Option<&str>> = match namespaces {
        None => vec![None],
        Some(list) => list.iter().map(|n| Some(n.as_str())).collect(),
    };
    for ns in scopes {
        let what = |kind: &str| match ns {
            Some(ns) => format!("listing {kind} in {ns}"),
            None => format!("listing {kind}"),
        };
        for d in list::<Deployment>(client, ns, &what("deployments")).await? {
            let status = d.status.clone().unwrap_or_default();
            let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            insert(&mut snap, "deployment", &d, desired, status.ready_replicas);
        }
        for s in list::<StatefulSet>(client, ns, &what("statefulsets")).await? {
            let status = s.status.clone().unwrap_or_default();
            let desired = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            insert(&mut snap, "statefulset", &s, desired, status.ready_replicas);
        }
        for d in list::<DaemonSet>(client, ns, &what("daemonsets")).await? {
            let status = d.status.clone().unwrap_or_default();
            let desired = status.desired_number_scheduled;
            insert(
                &mut snap,
                "daemonset",
                &d,
                desired,
                Some(status.number_ready),
            );
        }
        for p in list::<Pod>(client, ns, &what("pods")).await? {
            if p.metadata.deletion_timestamp.is_some() {
                snap.terminating.insert(pod_key(&p));
            }
        }
    }
    Ok(snap)
}

async fn list<K>(client: &Client, ns: Option<&str>, what: &str) -> Result<Vec<K>, ClusterError>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    Ok(api
        .list(&ListParams::default())
        .await
        .map_err(ClusterError::api(what))?
        .items)
}

fn insert<K: Resource>(snap: &mut Snapshot, kind: &str, k: &K, desired: i32, ready: Option<i32>) {
    let meta = k.meta();
    let key = format!(
        "{kind} {}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    );
    snap.workloads.insert(
        key,
        WorkloadSnap {
            desired,
            ready: ready.unwrap_or(0),
        },
    );
}

fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{} {}",
        p.metadata.namespace.as_deref().unwrap_or_default(),
        p.metadata.name.as_deref().unwrap_or_default(),
        p.metadata.uid.as_deref().unwrap_or_default()
    )
}

fn node_snap(n: &Node) -> Option<(String, NodeSnap)> {
    let name = n.metadata.name.clone()?;
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let spec = n.spec.clone().unwrap_or_default();
    Some((
        name,
        NodeSnap {
            ready,
            unschedulable: spec.unschedulable == Some(true),
            taints: spec
                .taints
                .unwrap_or_default()
                .iter()
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect(),
        },
    ))
}

/// What differs between the cluster `before` the first fault and `after` the last undo,
/// one line each, in a stable order; empty: restored.
pub fn differences(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for (name, b) in &before.nodes {
        let Some(a) = after.nodes.get(name) else {
            out.push(format!("node {name} is gone"));
            continue;
        };
        if b.ready && !a.ready {
            out.push(format!("node {name} is not Ready (it was)"));
        }
        match (b.unschedulable, a.unschedulable) {
            (false, true) => out.push(format!("node {name} is cordoned (it was schedulable)")),
            (true, false) => out.push(format!("node {name} is schedulable (it was cordoned)")),
            _ => {}
        }
        for t in a.taints.difference(&b.taints) {
            out.push(format!("node {name} has taint {t} (it did not)"));
        }
        for t in b.taints.difference(&a.taints) {
            out.push(format!("node {name} lost taint {t}"));
        }
    }
    for (name, b) in &before.workloads {
        match after.workloads.get(name) {
            None => out.push(format!("{name} is gone")),
            Some(a) if b.whole() && !a.whole() => out.push(format!(
                "{name} has {} of {} pod(s) Ready (it had {} of {})",
                a.ready, a.desired, b.ready, b.desired
            )),
            Some(_) => {}
        }
    }
    for pod in after.terminating.difference(&before.terminating) {
        let (name, _uid) = pod.split_once(' ').unwrap_or((pod, ""));
        out.push(format!("pod {name} is stuck Terminating"));
    }
    for (node, b) in &before.kubelets {
        match after.kubelets.get(node) {
            Some(a) if b.running && !a.running => {
                out.push(format!("kubelet on {node} is not running ({})", a.said))
            }
            None if b.running => out.push(format!("kubelet on {node} was not asked")),
            _ => {}
        }
    }
    out
}

/// What a snapshot holds, in words, for a passing report: "3 nodes, 3 workloads, 1
/// kubelet".
pub fn summary(s: &Snapshot) -> String {
    format!(
        "{} node(s) Ready and schedulable as before, taints as before, {} workload(s) at \
         their Ready replicas as before, no pod stuck Terminating, {} kubelet(s) running",
        s.nodes.len(),
        s.workloads.len(),
        s.kubelets.values().filter(|k| k.running).count()
    )
}

/// Where a run keeps its snapshot for `restore`: beside the fault journal, one file per
/// cluster.
pub fn path_beside(journal: &Path, cluster: &str) -> PathBuf {
    let safe = crate::file_names::safe(cluster);
    journal.with_file_name(format!("snapshot-{safe}.json"))
}

/// Writes the snapshot atomically (a temporary file renamed over it).
pub fn save(snapshot: &Snapshot, path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(snapshot).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, text + "\n")?;
    std::fs::rename(&tmp, path)
}

/// Reads a saved snapshot; `Ok(None)` when there is none.
pub fn load(path: &Path) -> std::io::Result<Option<Snapshot>> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(std::io::Error::other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ready: bool, unschedulable: bool, taints: &[&str]) -> NodeSnap {
        NodeSnap {
            ready,
            unschedulable,
            taints: taints.iter().map(|t| t.to_string()).collect(),
        }
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            taken_at: Utc::now(),
            cluster: "lab".into(),
            namespaces: Some(vec!["faultline-lab".into()]),
            nodes: BTreeMap::from([
                ("w1".into(), node(true, false, &[])),
                (
                    "cp".into(),
                    node(
                        true,
                        false,
                        &["node-role.kubernetes.io/control-plane:NoSchedule"],
                    ),
                ),
                ("broken".into(), node(false, false, &[])),
            ]),
            workloads: BTreeMap::from([
                (
                    "deployment faultline-lab/web".into(),
                    WorkloadSnap {
                        desired: 3,
                        ready: 3,
                    },
                ),
                (
                    "statefulset faultline-lab/db".into(),
                    WorkloadSnap {
                        desired: 1,
                        ready: 0,
                    },
                ),
            ]),
            terminating: BTreeSet::from(["faultline-lab/old u0".to_string()]),
            kubelets: BTreeMap::from([(
                "w1".into(),
                KubeletSnap {
                    running: true,
                    said: "running".into(),
                },
            )]),
        }
    }

    #[test]
    fn an_unchanged_cluster_is_restored() {
        let before = snapshot();
        let mut after = snapshot();
        after.taken_at = Utc::now();
        assert_eq!(differences(&before, &after), Vec::<String>::new());
    }

    #[test]
    fn a_cordon_a_taint_a_short_workload_a_stuck_pod_and_a_stopped_kubelet_are_each_named() {
        let before = snapshot();
        let mut after = snapshot();
        after.nodes.insert(
            "w1".into(),
            node(false, true, &["faultline.dev/test:NoSchedule"]),
        );
        after.nodes.insert("cp".into(), node(true, false, &[]));
        after.nodes.remove("broken");
        after.workloads.insert(
            "deployment faultline-lab/web".into(),
            WorkloadSnap {
                desired: 3,
                ready: 2,
            },
        );
        after.terminating.insert("faultline-lab/db-0 u1".into());
        after.kubelets.insert(
            "w1".into(),
            KubeletSnap {
                running: false,
                said: "kubelet status `stopped` (exit 3)".into(),
            },
        );
        assert_eq!(
            differences(&before, &after),
            [
                "node broken is gone",
                "node cp lost taint node-role.kubernetes.io/control-plane:NoSchedule",
                "node w1 is not Ready (it was)",
                "node w1 is cordoned (it was schedulable)",
                "node w1 has taint faultline.dev/test:NoSchedule (it did not)",
                "deployment faultline-lab/web has 2 of 3 pod(s) Ready (it had 3 of 3)",
                "pod faultline-lab/db-0 is stuck Terminating",
                "kubelet on w1 is not running (kubelet status `stopped` (exit 3))",
            ]
        );
    }

    #[test]
    fn what_was_already_broken_before_is_not_the_runs_doing() {
        let before = snapshot();
        let mut after = snapshot();
        // db was short before, the old pod was Terminating before, broken was NotReady.
        after.workloads.insert(
            "statefulset faultline-lab/db".into(),
            WorkloadSnap {
                desired: 1,
                ready: 0,
            },
        );
        assert!(differences(&before, &after).is_empty());
    }

    #[test]
    fn a_snapshot_is_saved_beside_the_journal_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("faultline/journal.json");
        let path = path_beside(&journal, "faultline lab/1");
        assert_eq!(
            path,
            dir.path().join("faultline/snapshot-faultline_lab_1.json")
        );
        assert_eq!(load(&path).unwrap(), None);
        let s = snapshot();
        save(&s, &path).unwrap();
        assert_eq!(load(&path).unwrap(), Some(s));
    }
}
