//! Integration tests on a real cluster (the faultline lab): server-side apply, readiness,
//! the observer stream in Watch and Poll mode, cordon/taint round trips, target
//! resolution. `#[ignore]`d: `ci/test` runs them on the lab; each test works in its own
//! namespace and removes it, and undoes every node change it makes.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::Duration;

use faultline::cluster::{self, AppliedObject, ClusterError};
use faultline::experiment::model::{
    NodeRole, NodeSelector, PodSelector, TaintSpec, TargetSpec, WorkloadKind, WorkloadRef,
};
use faultline::observe::{Clock, Namespaces, ObserveMode, Scope, observe};
use faultline::timeline::{Entry, Event, PodState};
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kube::Client;

/// The lab's kubeconfig. These tests are `#[ignore]`d: `ci/test` runs them with
/// `--ignored` after `ci/lab/up`, and then a missing lab is a failure, not a skip.
fn kubeconfig() -> Option<PathBuf> {
    let dir = std::env::var_os("FAULTLINE_LAB_DIR").expect(
        "FAULTLINE_LAB_DIR must point at the lab's output directory (ci/lab/up writes target/lab)",
    );
    Some(PathBuf::from(dir).join("kubeconfig"))
}

fn manifest(ns: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: {ns}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo
  namespace: {ns}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: echo}}
  template:
    metadata:
      labels: {{app: echo}}
    spec:
      nodeSelector:
        type: kwok
      terminationGracePeriodSeconds: 1
      containers:
      - name: echo
        image: registry.k8s.io/pause:3.10
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: {ns}
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Mi
"#
    )
}

/// Reads entries until `pred` holds for one; all read entries are kept in `seen`.
async fn wait_for(
    entries: &mut BoxStream<'static, Entry>,
    seen: &mut Vec<Entry>,
    what: &str,
    pred: impl Fn(&Entry) -> bool,
) -> Entry {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let next = tokio::time::timeout_at(deadline, entries.next()).await;
        match next {
            Ok(Some(e)) => {
                seen.push(e.clone());
                if pred(&e) {
                    return e;
                }
            }
            Ok(None) => panic!("observer stream ended while waiting for {what}"),
            Err(_) => panic!("timed out waiting for {what}; saw {seen:#?}"),
        }
    }
}

fn pod_after(e: &Entry) -> Option<&PodState> {
    match &e.event {
        Event::Pod { after, .. } => after.as_deref(),
        _ => None,
    }
}

fn node_flag(e: &Entry, node: &str, f: impl Fn(&faultline::timeline::NodeState) -> bool) -> bool {
    matches!(&e.event, Event::Node { name, after: Some(s), .. } if name == node && f(s))
}

async fn workers(client: &Client) -> Vec<String> {
    let specs = [TargetSpec {
        name: "workers".to_string(),
        selector: NodeSelector {
            role: Some(NodeRole::Worker),
            ..Default::default()
        },
        count: None,
    }];
    cluster::resolve_targets(client, &specs)
        .await
        .unwrap_or_else(|e| panic!("{e}"))["workers"]
        .clone()
}

/// Applies the test manifest; returns the objects (for cleanup) and the workload.
async fn setup(client: &Client, ns: &str, dir: &tempfile::TempDir) -> Vec<AppliedObject> {
    let path = dir.path().join("echo.yaml");
    std::fs::write(&path, manifest(ns)).unwrap_or_else(|e| panic!("{e}"));
    cluster::apply_manifests(client, &[path])
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A namespace name of this run, so a namespace still terminating from an earlier run
/// (pods on a NotReady node finish late) never collides.
fn unique(prefix: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    format!("{prefix}-{}", secs % 100_000)
}

async fn scenario(mode: ObserveMode, ns: &str, pick_last_worker: bool) {
    let Some(kc) = kubeconfig() else { return };
    let client = cluster::connect(Some(&kc), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let nodes = workers(&client).await;
    let node = if pick_last_worker {
        nodes.last()
    } else {
        nodes.first()
    }
    .cloned()
    .unwrap_or_else(|| panic!("the lab has no worker nodes"));
    let echo = WorkloadRef {
        kind: WorkloadKind::Deployment,
        namespace: ns.to_string(),
        name: "echo".to_string(),
    };
    let scope = Scope {
        namespaces: Namespaces::Only(vec![ns.to_string()]),
        workloads: vec![echo.clone()],
    };
    let mut entries = observe(client.clone(), &scope, Clock::start(), mode);
    let mut seen = Vec::new();
    // The first entries are the nodes' initial state.
    wait_for(
        &mut entries,
        &mut seen,
        "initial node list",
        |e| matches!(&e.event, Event::Node { name, before: None, .. } if *name == node),
    )
    .await;

    // An empty namespace produces no entry to wait for, so give the pod watch time to
    // finish its initial list; otherwise a fast pod may first be seen already Running.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let applied = setup(&client, ns, &dir).await;
    let key = format!("faultline.test/{ns}");
    // Run the body so that a failure still undoes node changes and removes the namespace.
    let outcome = AssertUnwindSafe(async {
        cluster::wait_workloads_ready(&client, &applied, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let ready = wait_for(&mut entries, &mut seen, "echo pod Ready", |e| {
            pod_after(e).is_some_and(|s| s.ready && s.phase == "Running")
        })
        .await;
        let state = pod_after(&ready).cloned().unwrap_or_else(|| unreachable!());
        assert_eq!(state.owner.as_ref(), Some(&echo));
        // The pod was first seen Pending (in poll mode only if a poll caught it).
        let first = seen
            .iter()
            .find(|e| matches!(&e.event, Event::Pod { before: None, .. }))
            .and_then(pod_after)
            .cloned()
            .unwrap_or_else(|| panic!("no first-seen pod entry in {seen:#?}"));
        if mode == ObserveMode::Watch {
            assert_eq!(first.phase, "Pending", "{seen:#?}");
            assert!(!first.ready);
        }
        // Pods and workloads are separate sources: in poll mode the workload's count may
        // already have been recorded before the pod's Ready entry.
        let available = |e: &Entry| {
            matches!(&e.event, Event::Workload { workload, after: Some(s), .. }
                if *workload == echo && s.available == 1 && s.desired == 1)
        };
        if !seen.iter().any(available) {
            wait_for(
                &mut entries,
                &mut seen,
                "echo workload available",
                available,
            )
            .await;
        }

        cluster::cordon(&client, &node)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_for(&mut entries, &mut seen, "node unschedulable", |e| {
            node_flag(e, &node, |s| s.unschedulable)
        })
        .await;
        cluster::uncordon(&client, &node)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_for(&mut entries, &mut seen, "node schedulable again", |e| {
            node_flag(e, &node, |s| !s.unschedulable)
        })
        .await;

        let spec = TaintSpec {
            key: key.clone(),
            value: Some("x".to_string()),
            effect: "NoSchedule".to_string(),
        };
        let done = cluster::taint(&client, &node, &spec)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(done.contains("tainted"), "{done}");
        let again = cluster::taint(&client, &node, &spec)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(again.contains("already tainted"), "{again}");
        wait_for(&mut entries, &mut seen, "taint on the timeline", |e| {
            node_flag(e, &node, |s| s.taints.iter().any(|t| t.key == key))
        })
        .await;
        cluster::untaint(&client, &node, &key, "NoSchedule")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_for(
            &mut entries,
            &mut seen,
            "taint gone from the timeline",
            |e| node_flag(e, &node, |s| !s.taints.iter().any(|t| t.key == key)),
        )
        .await;

        // Target resolution against the live cluster: the nodes of the echo pods right now
        // (other people's faults on the shared lab may have moved the pod we watched).
        let selector = PodSelector {
            workload: Some(echo.clone()),
            namespace: ns.to_string(),
            labels: Default::default(),
            on: None,
        };
        let mut pod_nodes: Vec<String> = cluster::list_pods(&client, &selector, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
            .collect();
        pod_nodes.sort();
        pod_nodes.dedup();
        assert!(!pod_nodes.is_empty());
        let specs = vec![
            TargetSpec {
                name: "echo-node".to_string(),
                selector: NodeSelector {
                    running_pods_of: Some(echo.clone()),
                    ..Default::default()
                },
                count: None,
            },
            TargetSpec {
                name: "spare".to_string(),
                selector: NodeSelector {
                    role: Some(NodeRole::Worker),
                    exclude_targets: vec!["echo-node".to_string()],
                    ..Default::default()
                },
                count: Some(1),
            },
        ];
        let resolved = cluster::resolve_targets(&client, &specs)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(resolved["echo-node"], pod_nodes);
        assert_eq!(resolved["spare"].len(), 1);
        assert!(!pod_nodes.contains(&resolved["spare"][0]));
        let too_many = [TargetSpec {
            name: "all-and-more".to_string(),
            selector: NodeSelector {
                role: Some(NodeRole::Worker),
                ..Default::default()
            },
            count: Some(1000),
        }];
        match cluster::resolve_targets(&client, &too_many).await {
            Err(ClusterError::TargetUnsatisfied { target, needed, .. }) => {
                assert_eq!((target.as_str(), needed), ("all-and-more", 1000));
            }
            other => panic!("expected TargetUnsatisfied, got {other:?}"),
        }
    if mode == ObserveMode::Watch {
        // Force-deleting the pod removes the object at once; the Deployment replaces it.
        let selector = PodSelector {
            workload: Some(echo.clone()),
            namespace: ns.to_string(),
            labels: Default::default(),
            on: None,
        };
        let mark = seen.len();
        let gone = cluster::delete_pods(&client, &selector, None, true)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // Usually one; two when the shared lab's faults already had it replaced.
        assert!(!gone.is_empty());
        let old = wait_for(&mut entries, &mut seen, "force-deleted pod gone", |e| {
            matches!(&e.event, Event::Pod { pod, after: None, .. }
                if gone.contains(&format!("{}/{}", pod.namespace, pod.name)))
        })
        .await;
        let Event::Pod { pod: old_id, .. } = old.event else {
            unreachable!()
        };
        // The replacement may be created before the old object is finally removed.
        let replacement = |e: &Entry| matches!(&e.event, Event::Pod { pod, before: None, .. } if pod.uid != old_id.uid);
        if !seen[mark..].iter().any(replacement) {
            wait_for(&mut entries, &mut seen, "replacement pod", replacement).await;
        }

        // The claim carries kubernetes.io/pvc-protection; removing finalizers first still
        // deletes it, and a second delete is a no-op.
        let done = cluster::delete_pvc(&client, ns, "data", true)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(done.ends_with("deleted"), "{done}");
        let again = cluster::delete_pvc(&client, ns, "data", true)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(again.ends_with("already gone"), "{again}");
    }

    })
    .catch_unwind()
    .await;
    let undo_cordon = cluster::uncordon(&client, &node).await;
    let undo_taint = cluster::untaint(&client, &node, &key, "NoSchedule").await;
    if let Err(panic) = outcome {
        let _ = cluster::delete_objects(&client, &applied).await;
        std::panic::resume_unwind(panic);
    }
    undo_cordon.unwrap_or_else(|e| panic!("{e}"));
    undo_taint.unwrap_or_else(|e| panic!("{e}"));

    let deleted = cluster::delete_objects(&client, &applied)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        deleted.iter().any(|d| d.starts_with("Deployment/echo"))
            && deleted.last().is_some_and(|d| d.starts_with("Namespace/")),
        "{deleted:?}"
    );
    // On a NotReady node the pod can only reach Terminating; either shows the deletion.
    wait_for(&mut entries, &mut seen, "echo pod deleted", |e| {
        matches!(&e.event, Event::Pod { after: None, .. })
            || pod_after(e).is_some_and(|s| s.terminating)
    })
    .await;
    // Deleting twice is fine: everything is already gone or going.
    cluster::delete_objects(&client, &applied)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
#[ignore = "needs the lab: ci/test runs it after ci/lab/up"]
async fn watch_mode_records_pods_nodes_and_workloads() {
    scenario(ObserveMode::Watch, &unique("faultline-test-watch"), false).await;
}

#[tokio::test]
#[ignore = "needs the lab: ci/test runs it after ci/lab/up"]
async fn poll_mode_records_pods_nodes_and_workloads() {
    scenario(
        ObserveMode::Poll {
            interval: Duration::from_millis(500),
        },
        &unique("faultline-test-poll"),
        true,
    )
    .await;
}

/// The lab's API server is an upstream v1.33 (the `WatchList` gate off by default): asked
/// once, it refuses a streaming list, so a run reads its first lists in pages. The streamed
/// path runs on the scale lab, which serves them (`ci/bench-memory` checks the run said so).
#[tokio::test]
#[ignore = "needs the lab: ci/test runs it after ci/lab/up"]
async fn first_lists_are_paged_where_the_server_does_not_stream_them() {
    let Some(kc) = kubeconfig() else { return };
    let client = cluster::connect(Some(&kc), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        faultline::observe::resolve_first_lists(&client, ObserveMode::Watch).await,
        ObserveMode::WatchPaged
    );
    // A definite mode is kept as asked.
    assert_eq!(
        faultline::observe::resolve_first_lists(&client, ObserveMode::WatchStreamed).await,
        ObserveMode::WatchStreamed
    );
}

#[tokio::test]
#[ignore = "needs the lab: ci/test runs it after ci/lab/up"]
async fn cluster_version_is_reported() {
    let Some(kc) = kubeconfig() else { return };
    let client = cluster::connect(Some(&kc), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let v = cluster::cluster_version(&client)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(v.starts_with('v'), "{v}");
}

#[tokio::test]
#[ignore = "needs the lab: ci/test runs it after ci/lab/up"]
async fn wait_ready_names_the_workload_that_never_becomes_available() {
    let Some(kc) = kubeconfig() else { return };
    let client = cluster::connect(Some(&kc), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ns = unique("faultline-test-stuck");
    let text = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: stuck\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: stuck}}\n  template:\n    metadata:\n      labels: {{app: stuck}}\n    spec:\n      nodeSelector:\n        faultline.test/no-such-node: \"true\"\n      containers:\n      - name: c\n        image: registry.k8s.io/pause:3.10\n"
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("stuck.yaml");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    let applied = cluster::apply_manifests(&client, &[path])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let result = cluster::wait_workloads_ready(&client, &applied, Duration::from_secs(3)).await;
    cluster::delete_objects(&client, &applied)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    match result {
        Err(ClusterError::NotReady { not_ready, .. }) => {
            assert_eq!(not_ready.len(), 1, "{not_ready:?}");
            assert!(
                not_ready[0].starts_with(&format!("Deployment/stuck in {ns}"))
                    && not_ready[0].contains("available 0/1"),
                "{not_ready:?}"
            );
        }
        other => panic!("expected NotReady, got {other:?}"),
    }
}

/// Read-only: the shared lab's StatefulSet and DaemonSet are recorded with their counts
/// as the first workload entries.
#[tokio::test]
#[ignore = "needs the lab: ci/test runs it after ci/lab/up"]
async fn statefulset_and_daemonset_counts_are_recorded() {
    let Some(kc) = kubeconfig() else { return };
    let client = cluster::connect(Some(&kc), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let lab = |kind, name: &str| WorkloadRef {
        kind,
        namespace: "faultline-lab".to_string(),
        name: name.to_string(),
    };
    let db = lab(WorkloadKind::StatefulSet, "db");
    let agent = lab(WorkloadKind::DaemonSet, "agent");
    let scope = Scope {
        namespaces: Namespaces::default(),
        workloads: vec![db.clone(), agent.clone()],
    };
    let mut entries = observe(client, &scope, Clock::start(), ObserveMode::Watch);
    let mut seen = Vec::new();
    for w in [&db, &agent] {
        let first = |e: &Entry| matches!(&e.event, Event::Workload { workload, before: None, .. } if workload == w);
        if !seen.iter().any(first) {
            wait_for(&mut entries, &mut seen, "first workload entry", first).await;
        }
    }
    for e in &seen {
        if let Event::Workload {
            workload,
            after: Some(s),
            ..
        } = &e.event
        {
            if *workload == db {
                assert_eq!(s.desired, 1, "{s:?}");
            }
            if *workload == agent {
                // One agent per kwok node (three in the lab).
                assert!(s.desired >= 1, "{s:?}");
            }
        }
    }
}
