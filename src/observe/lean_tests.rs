//! A lean decode (`crate::cluster::lean`) reduces to exactly what a full decode does, on
//! recorded API objects: the observer's reducers and the preflight's node reads.

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::Value;

use crate::cluster::lean::Lean;
use crate::cluster::owners::{OwnerIndex, pod_owner};
use crate::observe::recorder::pod_id;
use crate::observe::reduce::{node_state, pod_state};

fn api_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/api")
}

/// Every object of `kind` in the recorded API objects: single objects and list items.
fn recorded(kind: &str) -> Vec<Value> {
    let mut files = vec![];
    for dir in [api_dir(), api_dir().join("kind"), api_dir().join("k3d")] {
        for entry in std::fs::read_dir(&dir).expect("fixtures/api") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "json") {
                files.push(path);
            }
        }
    }
    let mut out = vec![];
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read");
        let Ok(value) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let items = match value.get("items").and_then(Value::as_array) {
            Some(items) => items.clone(),
            None => vec![value],
        };
        out.extend(
            items
                .into_iter()
                .filter(|o| o.get("kind").and_then(Value::as_str) == Some(kind)),
        );
    }
    out
}

#[test]
fn a_lean_pod_reduces_as_the_full_one_does() {
    let pods = recorded("Pod");
    assert!(pods.len() >= 6, "recorded pods: {}", pods.len());
    let owners = OwnerIndex::default();
    for value in pods {
        let full: Pod = serde_json::from_value(value.clone()).expect("a pod");
        let lean: Lean<Pod> = serde_json::from_value(value).expect("a lean pod");
        assert_eq!(pod_state(&lean.0, &owners), pod_state(&full, &owners));
        assert_eq!(pod_id(&lean.0), pod_id(&full));
        assert_eq!(pod_owner(&lean.0, &owners), pod_owner(&full, &owners));
        assert_eq!(
            lean.0.metadata.resource_version,
            full.metadata.resource_version
        );
    }
}

#[test]
fn a_lean_node_reduces_as_the_full_one_does() {
    let nodes = recorded("Node");
    assert!(nodes.len() >= 5, "recorded nodes: {}", nodes.len());
    for value in nodes {
        let full: Node = serde_json::from_value(value.clone()).expect("a node");
        let lean: Lean<Node> = serde_json::from_value(value).expect("a lean node");
        assert_eq!(node_state(&lean.0), node_state(&full));
        assert_eq!(lean.0.metadata.name, full.metadata.name);
        assert_eq!(
            lean.0.metadata.resource_version,
            full.metadata.resource_version
        );
        // What the preflight reads of a node (targets, zones, control plane, addresses).
        use crate::cluster::targets::{health_problem, internal_ips, is_control_plane};
        assert_eq!(health_problem(&lean.0), health_problem(&full));
        assert_eq!(is_control_plane(&lean.0), is_control_plane(&full));
        assert_eq!(
            lean.0.metadata.labels, full.metadata.labels,
            "zones are labels"
        );
        let ips = internal_ips(std::slice::from_ref(&full));
        assert_eq!(internal_ips(std::slice::from_ref(&lean.0)), ips);
        assert!(
            full.status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .is_none()
                || !ips.is_empty()
        );
    }
}

#[test]
fn a_lean_replica_set_indexes_its_owner_as_the_full_one_does() {
    let sets = recorded("ReplicaSet");
    assert!(!sets.is_empty(), "recorded ReplicaSets");
    for value in sets {
        let full: ReplicaSet = serde_json::from_value(value.clone()).expect("a ReplicaSet");
        let lean: Lean<ReplicaSet> = serde_json::from_value(value).expect("a lean one");
        let (mut a, mut b) = (OwnerIndex::default(), OwnerIndex::default());
        a.insert(&full);
        b.insert(&lean.0);
        assert_eq!(a, b);
        assert_ne!(
            a,
            OwnerIndex::default(),
            "the recorded ReplicaSet has an owner"
        );
    }
}

#[test]
fn what_the_observer_never_reads_is_skipped_not_kept() {
    let value = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1", "namespace": "lab", "resourceVersion": "42",
            "managedFields": [{"manager": "kubelet", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:status": {"f:conditions": {}}}}],
            "annotations": {"big": "x"}
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 3}
        ]}
    });
    let Lean(pod) = serde_json::from_value::<Lean<Pod>>(value).expect("a lean pod");
    assert_eq!(pod.metadata.managed_fields, None);
    assert_eq!(pod.metadata.annotations, None);
    let spec = pod.spec.as_ref().expect("spec");
    assert!(spec.containers.is_empty());
    assert_eq!(spec.node_name.as_deref(), Some("n1"));
    assert_eq!(pod_state(&pod, &OwnerIndex::default()).restarts, 3);
}

#[test]
fn of_a_pods_conditions_and_labels_only_what_is_read_is_built() {
    let value = serde_json::json!({
        "metadata": {
            "name": "web-5d9c-x", "namespace": "lab",
            "labels": {"app": "web", "pod-template-hash": "5d9c", "tier": "front"}
        },
        "status": {"conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-30T06:00:00Z",
             "message": "all good"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-30T06:00:05Z",
             "reason": "ContainersNotReady"},
            {"type": "PodScheduled", "status": "True"}
        ]}
    });
    let Lean(pod) = serde_json::from_value::<Lean<Pod>>(value.clone()).expect("a lean pod");
    let labels = pod.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels.len(), 1, "{labels:?}");
    assert_eq!(labels["pod-template-hash"], "5d9c");
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let [ready] = conditions.expect("conditions").as_slice() else {
        panic!("only Ready is kept: {conditions:?}");
    };
    assert_eq!(
        (ready.type_.as_str(), ready.status.as_str()),
        ("Ready", "False")
    );
    let full: Pod = serde_json::from_value(value).expect("a pod");
    let owners = OwnerIndex::default();
    assert_eq!(pod_state(&pod, &owners), pod_state(&full, &owners));
    assert!(pod_state(&pod, &owners).ready_since.is_some());
}

#[test]
fn a_ready_time_that_does_not_parse_is_refused_as_a_full_decode_refuses_it() {
    let value = serde_json::json!({
        "metadata": {"name": "p", "namespace": "lab"},
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "soon"}]}
    });
    assert!(serde_json::from_value::<Pod>(value.clone()).is_err());
    assert!(serde_json::from_value::<Lean<Pod>>(value).is_err());
}
