//! Pure reducers: API objects → the small states the timeline records.
//!
//! They exist so that metadata churn (resourceVersion bumps, heartbeats, managed fields)
//! never becomes a timeline entry: the observer only emits when a reduced state changes.
//! Being pure, they are tested against recorded API objects without a cluster.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Pod, Toleration};

use crate::cluster::owners::{OwnerIndex, pod_owner};
use crate::timeline::{ConditionStatus, NodeState, PodState, Taint, WorkloadState};

/// Taint key the node lifecycle controller sets when it stops hearing from a kubelet.
pub(crate) const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// What the kubelet's node shutdown manager puts in the Ready condition's message while a
/// graceful node shutdown is under way (`pkg/kubelet/nodeshutdown`, v1.33); the message
/// may list other errors beside it.
const SHUTTING_DOWN: &str = "node is shutting down";

/// Reduces a Node to its Ready condition, taints and schedulability.
///
/// A missing Ready condition is `Unknown`: the kubelet has never reported, which is what
/// the judge must treat as "not ready", not as an error.
pub fn node_state(node: &Node) -> NodeState {
    let condition = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let ready_since = condition
        .and_then(|c| c.last_transition_time.as_ref())
        .and_then(to_chrono);
    let ready = condition
        .map(|c| match c.status.as_str() {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        })
        .unwrap_or(ConditionStatus::Unknown);
    let spec = node.spec.as_ref();
    let mut taints: Vec<Taint> = spec
        .and_then(|s| s.taints.as_ref())
        .map(|ts| {
            ts.iter()
                .map(|t| Taint {
                    key: t.key.clone(),
                    effect: t.effect.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    // The API keeps taints in insertion order; sorting makes equal sets compare equal.
    taints.sort();
    taints.dedup();
    NodeState {
        ready,
        ready_since,
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        zone: zone_key(node),
        shutting_down: ready == ConditionStatus::False
            && condition
                .and_then(|c| c.message.as_deref())
                .is_some_and(|m| m.contains(SHUTTING_DOWN)),
    }
}

/// The node's zone as `pkg/controller/nodelifecycle` groups nodes (`GetZoneKey` in
/// `k8s.io/component-helpers/node/topology`): the `topology.kubernetes.io` region and zone
/// labels, or their deprecated `failure-domain.beta.kubernetes.io` forms; `region/zone`,
/// the zone alone without a region, `None` without either.
pub(crate) fn zone_key(node: &Node) -> Option<String> {
    let labels = node.metadata.labels.as_ref()?;
    let label = |name: &str, beta: &str| {
        labels
            .get(name)
            .or_else(|| labels.get(beta))
            .cloned()
            .unwrap_or_default()
    };
    let zone = label(
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
    );
    let region = label(
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    );
    match (region.is_empty(), zone.is_empty()) {
        (true, true) => None,
        (true, false) => Some(zone),
        _ => Some(format!("{region}/{zone}")),
    }
}

/// An API timestamp as chrono's.
fn to_chrono(
    t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp_millis(t.0.as_millisecond())
}

/// Reduces a Pod to what expectations can ask about.
pub fn pod_state(pod: &Pod, owners: &OwnerIndex) -> PodState {
    let status = pod.status.as_ref();
    let spec = pod.spec.as_ref();
    let condition = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let ready = condition.is_some_and(|c| c.status == "True");
    let ready_since = condition
        .and_then(|c| c.last_transition_time.as_ref())
        .and_then(to_chrono);
    let restarts = status
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0);
    let (unreachable_toleration_secs, tolerates_unreachable_forever) =
        unreachable_toleration(spec.and_then(|s| s.tolerations.as_deref()).unwrap_or(&[]));
    PodState {
        phase: status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".to_string()),
        ready,
        ready_since,
        terminating: pod.metadata.deletion_timestamp.is_some(),
        node: spec.and_then(|s| s.node_name.clone()),
        restarts,
        owner: pod_owner(pod, owners),
        created: pod.metadata.creation_timestamp.as_ref().and_then(to_chrono),
        unreachable_toleration_secs,
        tolerates_unreachable_forever,
    }
}

/// `(tolerationSeconds, forever)` of the toleration the taint eviction controller uses for
/// the unreachable NoExecute taint: the FIRST of the pod's tolerations, in spec order,
/// that tolerates it (`v1helper.GetMatchingTolerations` stops at the first match per
/// taint; `tainteviction.getMinTolerationTime` then reads its `tolerationSeconds`: unset
/// is forever, zero or less is at once). A later, longer or shorter, toleration changes
/// nothing.
pub(crate) fn unreachable_toleration(tolerations: &[Toleration]) -> (Option<i64>, bool) {
    let used = tolerations.iter().find(|t| {
        let key = t.key.as_deref().unwrap_or("");
        let effect = t.effect.as_deref().unwrap_or("");
        // `ToleratesTaint`: the effect empty or the taint's, the key empty (with Exists)
        // or the taint's, and with Equal the value the taint's (the unreachable taint has
        // none).
        let effect_matches = effect.is_empty() || effect == "NoExecute";
        let key_matches = key == UNREACHABLE_TAINT || key.is_empty();
        let value_matches = match t.operator.as_deref() {
            Some("Exists") => true,
            None | Some("Equal") => !key.is_empty() && t.value.as_deref().unwrap_or("").is_empty(),
            Some(_) => false,
        };
        effect_matches && key_matches && value_matches
    });
    match used {
        None => (None, false),
        Some(t) => match t.toleration_seconds {
            None => (None, true),
            Some(s) => (Some(s.max(0)), false),
        },
    }
}

/// Reduces a Deployment to its replica counts.
pub(crate) fn deployment_state(d: &Deployment) -> WorkloadState {
    let s = d.status.as_ref();
    WorkloadState {
        desired: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
        ready: s.and_then(|s| s.ready_replicas).unwrap_or(0),
        available: s.and_then(|s| s.available_replicas).unwrap_or(0),
    }
}

/// Reduces a StatefulSet to its replica counts.
pub(crate) fn statefulset_state(st: &StatefulSet) -> WorkloadState {
    let s = st.status.as_ref();
    WorkloadState {
        desired: st.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
        ready: s.and_then(|s| s.ready_replicas).unwrap_or(0),
        available: s.and_then(|s| s.available_replicas).unwrap_or(0),
    }
}

/// Reduces a DaemonSet to its scheduled/ready/available counts.
pub(crate) fn daemonset_state(ds: &DaemonSet) -> WorkloadState {
    let s = ds.status.as_ref();
    WorkloadState {
        desired: s.map(|s| s.desired_number_scheduled).unwrap_or(0),
        ready: s.map(|s| s.number_ready).unwrap_or(0),
        available: s.and_then(|s| s.number_available).unwrap_or(0),
    }
}

/// Any of the three workload kinds, so callers can reduce without matching on kind.
#[derive(Debug, Clone)]
pub enum Workload {
    /// apps/v1 Deployment.
    Deployment(Deployment),
    /// apps/v1 StatefulSet.
    StatefulSet(StatefulSet),
    /// apps/v1 DaemonSet.
    DaemonSet(DaemonSet),
}

/// Reduces any workload to its counts.
pub fn workload_state(w: &Workload) -> WorkloadState {
    match w {
        Workload::Deployment(d) => deployment_state(d),
        Workload::StatefulSet(s) => statefulset_state(s),
        Workload::DaemonSet(d) => daemonset_state(d),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;

    use super::*;
    use crate::experiment::model::{WorkloadKind, WorkloadRef};
    use crate::fixtures::load;

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.to_string(),
            effect: effect.to_string(),
        }
    }

    fn web_owners() -> OwnerIndex {
        let mut idx = OwnerIndex::new();
        idx.insert(&load::<ReplicaSet>("replicaset-web.json"));
        idx
    }

    fn wref(kind: WorkloadKind, name: &str) -> Option<WorkloadRef> {
        Some(WorkloadRef {
            kind,
            namespace: "faultline-lab".to_string(),
            name: name.to_string(),
        })
    }

    #[test]
    fn ready_node() {
        let s = node_state(&load("node-ready.json"));
        assert_eq!(s.ready, ConditionStatus::True);
        assert!(s.taints.is_empty());
        assert!(!s.unschedulable);
    }

    #[test]
    fn a_node_s_zone_is_its_region_and_zone_labels_or_their_beta_forms() {
        let mut node: Node = load("node-ready.json");
        assert_eq!(node_state(&node).zone, None, "unlabelled");
        let labels = node.metadata.labels.get_or_insert_default();
        labels.insert("topology.kubernetes.io/zone".into(), "eu-1a".into());
        assert_eq!(zone_key(&node).as_deref(), Some("eu-1a"), "a zone alone");
        let labels = node.metadata.labels.get_or_insert_default();
        labels.insert(
            "failure-domain.beta.kubernetes.io/region".into(),
            "eu-1".into(),
        );
        assert_eq!(
            zone_key(&node).as_deref(),
            Some("eu-1/eu-1a"),
            "beta region"
        );
        let labels = node.metadata.labels.get_or_insert_default();
        labels.insert("topology.kubernetes.io/region".into(), "eu-2".into());
        labels.remove("topology.kubernetes.io/zone");
        labels.insert(
            "failure-domain.beta.kubernetes.io/zone".into(),
            "old".into(),
        );
        assert_eq!(
            node_state(&node).zone.as_deref(),
            Some("eu-2/old"),
            "the GA region wins over the beta one, the beta zone stands in"
        );
    }

    #[test]
    fn unreachable_node_is_unknown_with_sorted_taints() {
        let s = node_state(&load("node-unreachable.json"));
        assert_eq!(s.ready, ConditionStatus::Unknown);
        assert_eq!(
            s.taints,
            vec![
                taint(UNREACHABLE_TAINT, "NoExecute"),
                taint(UNREACHABLE_TAINT, "NoSchedule")
            ]
        );
    }

    /// Recorded from a kind worker (kubelet v1.33.13, `shutdownGracePeriod: 20s`) a moment
    /// after `systemctl poweroff` ran in it.
    #[test]
    fn a_node_whose_kubelet_handles_a_graceful_shutdown_is_shutting_down() {
        let s = node_state(&load("node-shutting-down.json"));
        assert_eq!(s.ready, ConditionStatus::False);
        assert!(s.shutting_down);
        for other in [
            "node-ready.json",
            "node-unreachable.json",
            "node-notready-cordoned.json",
        ] {
            assert!(!node_state(&load(other)).shutting_down, "{other}");
        }
    }

    #[test]
    fn cordoned_not_ready_node() {
        let s = node_state(&load("node-notready-cordoned.json"));
        assert_eq!(s.ready, ConditionStatus::False);
        assert!(s.unschedulable);
        assert_eq!(
            s.taints,
            vec![
                taint("node.kubernetes.io/not-ready", "NoSchedule"),
                taint("node.kubernetes.io/unschedulable", "NoSchedule"),
            ]
        );
    }

    #[test]
    fn node_without_ready_condition_is_unknown() {
        let s = node_state(&load("node-no-conditions.json"));
        assert_eq!(s.ready, ConditionStatus::Unknown);
        assert_eq!(
            s.taints,
            vec![taint("node-role.kubernetes.io/control-plane", "NoSchedule")]
        );
    }

    #[test]
    fn deployment_pod_resolved_through_its_replica_set() {
        let s = pod_state(&load("pod-web-ready.json"), &web_owners());
        assert_eq!(s.phase, "Running");
        assert!(s.ready);
        assert!(!s.terminating);
        assert_eq!(s.node.as_deref(), Some("lab-worker-1"));
        assert_eq!(s.restarts, 2);
        assert_eq!(s.owner, wref(WorkloadKind::Deployment, "web"));
        assert_eq!(s.unreachable_toleration_secs, Some(300));
        assert!(!s.tolerates_unreachable_forever);
        assert_eq!(
            s.created.map(|c| c.to_rfc3339()).as_deref(),
            Some("2026-11-22T03:20:00+00:00")
        );
    }

    #[test]
    fn replica_set_owner_index_wins_over_the_name_suffix() {
        // An index saying the RS belongs to another Deployment must be believed.
        let mut rs: ReplicaSet = load("replicaset-web.json");
        if let Some(o) = rs
            .metadata
            .owner_references
            .as_mut()
            .and_then(|v| v.first_mut())
        {
            o.name = "frontend".to_string();
        }
        let mut idx = OwnerIndex::new();
        idx.insert(&rs);
        let s = pod_state(&load("pod-web-ready.json"), &idx);
        assert_eq!(s.owner, wref(WorkloadKind::Deployment, "frontend"));
    }

    #[test]
    fn deployment_pod_falls_back_to_stripping_the_template_hash() {
        let s = pod_state(&load("pod-web-toleration60.json"), &OwnerIndex::new());
        assert_eq!(s.owner, wref(WorkloadKind::Deployment, "fast-evict"));
    }

    #[test]
    fn pending_pod() {
        let s = pod_state(&load("pod-web-pending.json"), &web_owners());
        assert_eq!(s.phase, "Pending");
        assert!(!s.ready);
        assert_eq!(s.node, None);
        assert_eq!(s.restarts, 0);
    }

    #[test]
    fn terminating_pod() {
        let s = pod_state(&load("pod-web-terminating.json"), &web_owners());
        assert!(s.terminating);
        assert_eq!(s.phase, "Running");
        assert!(!s.ready);
        assert_eq!(s.node.as_deref(), Some("lab-worker-2"));
    }

    #[test]
    fn pod_with_sixty_second_toleration() {
        let s = pod_state(&load("pod-web-toleration60.json"), &OwnerIndex::new());
        assert_eq!(s.unreachable_toleration_secs, Some(60));
        assert!(!s.tolerates_unreachable_forever);
    }

    #[test]
    fn daemonset_pod_tolerates_unreachable_forever() {
        let s = pod_state(&load("pod-agent-daemonset.json"), &OwnerIndex::new());
        assert_eq!(s.owner, wref(WorkloadKind::DaemonSet, "agent"));
        assert_eq!(s.unreachable_toleration_secs, None);
        assert!(s.tolerates_unreachable_forever);
        assert_eq!(s.restarts, 1);
    }

    #[test]
    fn statefulset_pod() {
        let s = pod_state(&load("pod-db-statefulset.json"), &OwnerIndex::new());
        assert_eq!(s.owner, wref(WorkloadKind::StatefulSet, "db"));
        assert_eq!(s.unreachable_toleration_secs, Some(300));
    }

    #[test]
    fn wildcard_exists_toleration_counts_as_unreachable() {
        let mut pod: Pod = load("pod-db-statefulset.json");
        if let Some(spec) = pod.spec.as_mut() {
            spec.tolerations = Some(vec![Toleration {
                operator: Some("Exists".to_string()),
                ..Default::default()
            }]);
        }
        let s = pod_state(&pod, &OwnerIndex::new());
        assert!(s.tolerates_unreachable_forever);
        // A NoSchedule-only toleration does not keep a pod on an unreachable node.
        if let Some(spec) = pod.spec.as_mut() {
            spec.tolerations = Some(vec![Toleration {
                key: Some(UNREACHABLE_TAINT.to_string()),
                operator: Some("Exists".to_string()),
                effect: Some("NoSchedule".to_string()),
                ..Default::default()
            }]);
        }
        let s = pod_state(&pod, &OwnerIndex::new());
        assert!(!s.tolerates_unreachable_forever);
        assert_eq!(s.unreachable_toleration_secs, None);
    }

    /// The taint eviction controller uses the first toleration that matches, in spec order,
    /// not the longest or the shortest of those that do.
    #[test]
    fn the_first_matching_toleration_decides_as_upstream() {
        let mut pod: Pod = load("pod-db-statefulset.json");
        let unreachable = |secs: Option<i64>| Toleration {
            key: Some(UNREACHABLE_TAINT.to_string()),
            operator: Some("Exists".to_string()),
            effect: Some("NoExecute".to_string()),
            toleration_seconds: secs,
            ..Default::default()
        };
        let wildcard = Toleration {
            operator: Some("Exists".to_string()),
            ..Default::default()
        };
        let mut with = |tolerations: Vec<Toleration>| {
            if let Some(spec) = pod.spec.as_mut() {
                spec.tolerations = Some(tolerations);
            }
            let s = pod_state(&pod, &OwnerIndex::new());
            (
                s.unreachable_toleration_secs,
                s.tolerates_unreachable_forever,
            )
        };
        assert_eq!(
            with(vec![unreachable(Some(60)), wildcard.clone()]),
            (Some(60), false)
        );
        assert_eq!(
            with(vec![wildcard.clone(), unreachable(Some(60))]),
            (None, true)
        );
        assert_eq!(
            with(vec![unreachable(Some(600)), unreachable(Some(60))]),
            (Some(600), false)
        );
        assert_eq!(with(vec![unreachable(Some(-5))]), (Some(0), false));
        // Equal with a value the taint does not have tolerates nothing.
        let valued = Toleration {
            key: Some(UNREACHABLE_TAINT.to_string()),
            operator: Some("Equal".to_string()),
            value: Some("yes".to_string()),
            effect: Some("NoExecute".to_string()),
            toleration_seconds: Some(10),
        };
        assert_eq!(with(vec![valued, unreachable(Some(30))]), (Some(30), false));
    }

    #[test]
    fn workload_counts() {
        let d = workload_state(&Workload::Deployment(load("deployment-web.json")));
        assert_eq!(
            d,
            WorkloadState {
                desired: 3,
                ready: 2,
                available: 2
            }
        );
        let s = workload_state(&Workload::StatefulSet(load("statefulset-db.json")));
        assert_eq!(
            s,
            WorkloadState {
                desired: 1,
                ready: 1,
                available: 1
            }
        );
        let ds = workload_state(&Workload::DaemonSet(load("daemonset-agent.json")));
        assert_eq!(
            ds,
            WorkloadState {
                desired: 3,
                ready: 3,
                available: 2
            }
        );
    }
}
