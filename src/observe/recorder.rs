//! Folds raw observations (watch events, relists, failures) into timeline events.
//!
//! This is the observer's only state: the last known reduced state per source, the
//! ReplicaSet owner index, and which sources are in a gap. It is pure (no I/O, no clock),
//! so the gap and relist rules are tested by feeding it recorded objects.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;

use super::diff::{Change, Known};
use super::reduce::{Workload, node_state, pod_state, workload_state};
use crate::cluster::owners::OwnerIndex;
use crate::experiment::model::WorkloadRef;
use crate::timeline::{Event, GapPhase, NodeState, PodId, PodState, WorkloadState};

/// What one source reported: the shape of a `kube::runtime::watcher` event, which a poll
/// also produces (`Init`, one `InitApply` per listed object, `InitDone`), plus failures.
#[derive(Debug, Clone)]
pub enum Seen<T> {
    /// Added or modified (live).
    Applied(T),
    /// Deleted (live).
    Deleted(T),
    /// A full list starts.
    Init,
    /// One object of the full list.
    InitApply(T),
    /// The full list is complete; anything known but not listed is gone.
    InitDone,
    /// The source failed (watch error or failed list); the reason is recorded in the gap.
    Failed(String),
}

/// A report from one source of the observer.
// Observations live for one fold step; boxing the API objects would only add allocations.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Observation {
    /// All nodes.
    Node(Seen<Node>),
    /// Pods of one namespace, or of all of them when the name is [`ALL_NAMESPACES`].
    Pod(String, Seen<Pod>),
    /// ReplicaSets of one namespace, or of all of them when the name is [`ALL_NAMESPACES`]
    /// (owner resolution only; never recorded).
    ReplicaSet(String, Seen<ReplicaSet>),
    /// One workload of the scope.
    Workload(WorkloadRef, Seen<Workload>),
}

/// The namespace name of a cluster-wide source (the API's own convention: no namespace in
/// the path means all of them). Its gaps are reported as source `pods`.
pub const ALL_NAMESPACES: &str = "";

/// The name of the Node source on gap entries: a reader of the observer's nodes (a fault's
/// proof) asks whether this one is in sight.
pub(crate) const NODES_SOURCE: &str = "nodes";

/// Known states of one source, its pending relist and whether it is in a gap.
///
/// A relist is buffered as reduced states, reduced as each listed object arrives, never as
/// the objects themselves: with every pod of a big cluster in one list, holding the API
/// objects until the list ends would be the observer's peak memory. A first list, with
/// nothing known before it, is not buffered at all: each object is first seen as it
/// arrives (nothing can have vanished), so 150,000 pods are never held twice and turned
/// into entries all at once when the list ends.
struct Tracked<K, S> {
    known: Known<K, S>,
    buffer: Option<Vec<(K, S)>>,
    /// The list under way started with nothing known: its objects go straight through.
    streaming: bool,
    gap: bool,
}

impl<K, S> Default for Tracked<K, S> {
    fn default() -> Self {
        Tracked {
            known: Known::default(),
            buffer: None,
            streaming: false,
            gap: false,
        }
    }
}

fn gap(source: &dyn Fn() -> String, phase: GapPhase, reason: &str) -> Event {
    Event::Gap {
        source: source(),
        phase,
        reason: reason.to_string(),
    }
}

impl<K: Ord + std::hash::Hash + Clone, S: PartialEq + Clone> Tracked<K, S> {
    /// Folds one report; `reduce` gives key and state, `key` the key of a deleted object.
    /// `source` names the source on a gap entry; it is only called for one (not per event).
    fn step<T>(
        &mut self,
        source: &dyn Fn() -> String,
        seen: Seen<T>,
        reduce: impl Fn(&T) -> Option<(K, S)>,
        key: impl Fn(&T) -> Option<K>,
        to_event: impl Fn(Change<K, S>) -> Event,
    ) -> Vec<Event> {
        let mut out = Vec::new();
        match seen {
            Seen::Applied(obj) => {
                // A live event after a failure means the watch resumed from its last
                // resourceVersion: nothing in between was lost.
                self.close_gap(source, "watch resumed", &mut out);
                if let Some((k, s)) = reduce(&obj) {
                    out.extend(self.known.apply(k, s).map(&to_event));
                }
            }
            Seen::Deleted(obj) => {
                self.close_gap(source, "watch resumed", &mut out);
                if let Some(k) = key(&obj) {
                    out.extend(self.known.delete(&k).map(&to_event));
                }
            }
            Seen::Init => {
                self.streaming = self.known.is_empty();
                self.buffer = (!self.streaming).then(Vec::new);
            }
            Seen::InitApply(obj) => {
                if let Some((k, s)) = reduce(&obj) {
                    if self.streaming {
                        out.extend(self.known.apply(k, s).map(&to_event));
                    } else {
                        self.buffer.get_or_insert_with(Vec::new).push((k, s));
                    }
                }
            }
            Seen::InitDone => {
                if !std::mem::take(&mut self.streaming) {
                    let listed = self.buffer.take().unwrap_or_default();
                    let changes = self.known.relist(listed);
                    out.extend(changes.into_iter().map(&to_event));
                }
                self.close_gap(source, crate::timeline::GAP_RELISTED, &mut out);
            }
            Seen::Failed(reason) => {
                // A list that failed half-way streamed what it had: the next one diffs.
                self.streaming = false;
                self.buffer = None;
                if !self.gap {
                    self.gap = true;
                    out.push(gap(source, GapPhase::Began, &reason));
                }
            }
        }
        out
    }

    fn close_gap(&mut self, source: &dyn Fn() -> String, how: &str, out: &mut Vec<Event>) {
        if self.gap {
            self.gap = false;
            out.push(gap(source, GapPhase::Ended, how));
        }
    }
}

/// The observer's state: turns [`Observation`]s into timeline [`Event`]s, emitting only
/// when a reduced state changes, and bracketing lost sight with `Gap` events.
#[derive(Default)]
pub struct Recorder {
    nodes: Tracked<String, NodeState>,
    pods: BTreeMap<String, Tracked<Arc<PodId>, Arc<PodState>>>,
    workloads: BTreeMap<WorkloadRef, Tracked<WorkloadRef, WorkloadState>>,
    replica_sets: BTreeMap<String, Option<Vec<ReplicaSet>>>,
    owners: OwnerIndex,
}

/// Identity of a pod for the timeline.
pub(crate) fn pod_id(pod: &Pod) -> Option<PodId> {
    Some(PodId {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone()?,
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    })
}

impl Recorder {
    /// A recorder that knows nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ReplicaSet → Deployment index built so far.
    pub fn owners(&self) -> &OwnerIndex {
        &self.owners
    }

    /// Folds one observation into zero or more timeline events.
    pub fn record(&mut self, observation: Observation) -> Vec<Event> {
        match observation {
            Observation::Node(seen) => self.nodes.step(
                &|| NODES_SOURCE.to_string(),
                seen,
                |n: &Node| Some((n.metadata.name.clone()?, node_state(n))),
                |n: &Node| n.metadata.name.clone(),
                |(name, before, after)| Event::Node {
                    name,
                    before,
                    after,
                },
            ),
            Observation::Pod(ns, seen) => {
                let owners = &self.owners;
                let source = || {
                    if ns == ALL_NAMESPACES {
                        "pods".to_string()
                    } else {
                        format!("pods/{ns}")
                    }
                };
                // The namespace is copied into the map once, not per event.
                if !self.pods.contains_key(&ns) {
                    self.pods.insert(ns.clone(), Tracked::default());
                }
                let Some(tracked) = self.pods.get_mut(&ns) else {
                    return Vec::new();
                };
                tracked.step(
                    &source,
                    seen,
                    |p: &Pod| Some((Arc::new(pod_id(p)?), Arc::new(pod_state(p, owners)))),
                    |p: &Pod| pod_id(p).map(Arc::new),
                    |(pod, before, after)| Event::Pod { pod, before, after },
                )
            }
            Observation::Workload(wref, seen) => {
                let source = || wref.to_string();
                let key = wref.clone();
                let key2 = wref.clone();
                self.workloads.entry(wref.clone()).or_default().step(
                    &source,
                    seen,
                    move |w: &Workload| Some((key.clone(), workload_state(w))),
                    move |_| Some(key2.clone()),
                    |(workload, before, after)| Event::Workload {
                        workload,
                        before,
                        after,
                    },
                )
            }
            Observation::ReplicaSet(ns, seen) => {
                self.record_replica_set(&ns, seen);
                Vec::new()
            }
        }
    }

    fn record_replica_set(&mut self, ns: &str, seen: Seen<ReplicaSet>) {
        let buffer = self.replica_sets.entry(ns.to_string()).or_default();
        match seen {
            Seen::Applied(rs) => self.owners.insert(&rs),
            Seen::Deleted(rs) => self.owners.remove(
                rs.metadata.namespace.as_deref().unwrap_or(ns),
                &rs.name_any(),
            ),
            Seen::Init => *buffer = Some(Vec::new()),
            Seen::InitApply(rs) => buffer.get_or_insert_with(Vec::new).push(rs),
            Seen::InitDone => {
                let listed = buffer.take().unwrap_or_default();
                if ns == ALL_NAMESPACES {
                    self.owners.replace_all(&listed);
                } else {
                    self.owners.replace_namespace(ns, &listed);
                }
            }
            // Owner resolution falls back to the pod-template-hash suffix meanwhile.
            Seen::Failed(_) => *buffer = None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::model::WorkloadKind;
    use crate::fixtures::load;
    use crate::timeline::ConditionStatus;

    const NS: &str = "faultline-lab";

    fn pods(seen: Seen<Pod>) -> Observation {
        Observation::Pod(NS.to_string(), seen)
    }

    fn list_pods(r: &mut Recorder, items: &[Pod]) -> Vec<Event> {
        let mut out = r.record(pods(Seen::Init));
        for p in items {
            out.extend(r.record(pods(Seen::InitApply(p.clone()))));
        }
        out.extend(r.record(pods(Seen::InitDone)));
        out
    }

    fn pod_change(e: &Event) -> (String, Option<PodState>, Option<PodState>) {
        match e {
            Event::Pod { pod, before, after } => (
                pod.name.clone(),
                before.as_deref().cloned(),
                after.as_deref().cloned(),
            ),
            other => panic!("expected a pod entry, got {other:?}"),
        }
    }

    #[test]
    fn a_first_list_emits_each_object_as_it_arrives_a_relist_at_its_end() {
        let mut r = Recorder::new();
        assert!(r.record(pods(Seen::Init)).is_empty());
        let out = r.record(pods(Seen::InitApply(load("pod-db-statefulset.json"))));
        assert_eq!(out.len(), 1, "nothing known before: first seen at once");
        let (name, before, after) = pod_change(&out[0]);
        assert_eq!(name, "db-0");
        assert_eq!(before, None);
        assert_eq!(after.map(|s| s.phase).as_deref(), Some("Running"));
        assert!(r.record(pods(Seen::InitDone)).is_empty());
        // After a failure the next list is compared with what was known, at its end.
        r.record(pods(Seen::Failed("reset".into())));
        assert!(r.record(pods(Seen::Init)).is_empty());
        let mut restarted: Pod = load("pod-db-statefulset.json");
        restarted.metadata.uid = Some("another-uid".into());
        assert!(r.record(pods(Seen::InitApply(restarted))).is_empty());
        let out = r.record(pods(Seen::InitDone));
        assert!(
            out.iter()
                .filter(|e| matches!(e, Event::Pod { .. }))
                .count()
                == 2,
            "the old pod gone, the new one seen, at the list's end: {out:?}"
        );
    }

    #[test]
    fn unchanged_reduced_state_is_not_an_entry() {
        let mut r = Recorder::new();
        let pod: Pod = load("pod-db-statefulset.json");
        list_pods(&mut r, std::slice::from_ref(&pod));
        let mut churn = pod.clone();
        churn.metadata.resource_version = Some("99999".to_string());
        assert!(r.record(pods(Seen::Applied(churn))).is_empty());
        let mut terminating = pod;
        terminating.metadata.deletion_timestamp = load::<Pod>("pod-web-terminating.json")
            .metadata
            .deletion_timestamp;
        let out = r.record(pods(Seen::Applied(terminating.clone())));
        assert_eq!(out.len(), 1);
        let (_, before, after) = pod_change(&out[0]);
        assert_eq!(before.map(|s| s.terminating), Some(false));
        assert_eq!(after.map(|s| s.terminating), Some(true));
        let out = r.record(pods(Seen::Deleted(terminating)));
        let (_, before, after) = pod_change(&out[0]);
        assert!(before.is_some());
        assert_eq!(after, None);
    }

    #[test]
    fn deletion_during_a_gap_is_recovered_between_gap_markers() {
        let mut r = Recorder::new();
        let db: Pod = load("pod-db-statefulset.json");
        let agent: Pod = load("pod-agent-daemonset.json");
        list_pods(&mut r, &[db.clone(), agent.clone()]);

        let out = r.record(pods(Seen::Failed("connection reset".to_string())));
        assert_eq!(
            out,
            vec![Event::Gap {
                source: "pods/faultline-lab".to_string(),
                phase: GapPhase::Began,
                reason: "connection reset".to_string()
            }]
        );
        // A second failure inside the same gap is not a second gap.
        assert!(r.record(pods(Seen::Failed("again".to_string()))).is_empty());

        // db-0 vanished and came back as a new object (new UID) while we were blind.
        let mut db_new = db.clone();
        db_new.metadata.uid = Some("c0ffee00-0000-4000-8000-0000000000ff".to_string());
        let out = list_pods(&mut r, &[agent, db_new]);
        assert_eq!(out.len(), 3, "{out:#?}");
        match &out[0] {
            Event::Pod { pod, before, after } => {
                assert_eq!(pod.uid, "c0ffee00-0000-4000-8000-0000000000ff");
                assert!(before.is_none() && after.is_some());
            }
            other => panic!("{other:?}"),
        }
        match &out[1] {
            Event::Pod { pod, before, after } => {
                assert_eq!(pod.uid, "c0ffee00-0000-4000-8000-000000000006");
                assert!(before.is_some() && after.is_none());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &out[2],
            Event::Gap { phase: GapPhase::Ended, source, .. } if source == "pods/faultline-lab"
        ));
    }

    #[test]
    fn a_resumed_watch_closes_the_gap_before_its_event() {
        let mut r = Recorder::new();
        let node: Node = load("node-ready.json");
        r.record(Observation::Node(Seen::Init));
        r.record(Observation::Node(Seen::InitApply(node)));
        r.record(Observation::Node(Seen::InitDone));
        r.record(Observation::Node(Seen::Failed("timeout".to_string())));
        let mut lost: Node = load("node-unreachable.json");
        lost.metadata.name = Some("lab-worker-1".to_string());
        let out = r.record(Observation::Node(Seen::Applied(lost)));
        assert!(matches!(
            &out[0],
            Event::Gap {
                phase: GapPhase::Ended,
                ..
            }
        ));
        match &out[1] {
            Event::Node {
                name,
                before,
                after,
            } => {
                assert_eq!(name, "lab-worker-1");
                assert_eq!(
                    before.as_ref().map(|s| s.ready),
                    Some(ConditionStatus::True)
                );
                assert_eq!(
                    after.as_ref().map(|s| s.ready),
                    Some(ConditionStatus::Unknown)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn replica_sets_are_not_recorded_but_resolve_owners() {
        let mut r = Recorder::new();
        let mut rs: ReplicaSet = load("replicaset-web.json");
        if let Some(o) = rs
            .metadata
            .owner_references
            .as_mut()
            .and_then(|v| v.first_mut())
        {
            o.name = "frontend".to_string();
        }
        assert!(
            r.record(Observation::ReplicaSet(NS.to_string(), Seen::Applied(rs)))
                .is_empty()
        );
        let out = list_pods(&mut r, &[load("pod-web-ready.json")]);
        let (_, _, after) = pod_change(&out[0]);
        assert_eq!(
            after.and_then(|s| s.owner).map(|o| (o.kind, o.name)),
            Some((WorkloadKind::Deployment, "frontend".to_string()))
        );
    }

    #[test]
    fn workload_counts_are_recorded_per_workload() {
        let mut r = Recorder::new();
        let wref = WorkloadRef {
            kind: WorkloadKind::Deployment,
            namespace: NS.to_string(),
            name: "web".to_string(),
        };
        let d: k8s_openapi::api::apps::v1::Deployment = load("deployment-web.json");
        let out = r.record(Observation::Workload(
            wref.clone(),
            Seen::Applied(Workload::Deployment(d.clone())),
        ));
        assert_eq!(
            out,
            vec![Event::Workload {
                workload: wref.clone(),
                before: None,
                after: Some(WorkloadState {
                    desired: 3,
                    ready: 2,
                    available: 2
                })
            }]
        );
        let out = r.record(Observation::Workload(
            wref.clone(),
            Seen::Deleted(Workload::Deployment(d)),
        ));
        assert!(matches!(&out[0], Event::Workload { after: None, .. }));
    }

    #[test]
    fn a_cluster_wide_source_keeps_each_pods_own_namespace_and_one_gap() {
        let all = |seen| Observation::Pod(ALL_NAMESPACES.to_string(), seen);
        let mut r = Recorder::new();
        let db: Pod = load("pod-db-statefulset.json");
        let mut elsewhere: Pod = load("pod-agent-daemonset.json");
        elsewhere.metadata.namespace = Some("other".to_string());
        assert!(r.record(all(Seen::Init)).is_empty());
        let mut out = r.record(all(Seen::InitApply(db.clone())));
        out.extend(r.record(all(Seen::InitApply(elsewhere.clone()))));
        out.extend(r.record(all(Seen::InitDone)));
        let mut namespaces: Vec<String> = out
            .iter()
            .map(|e| match e {
                Event::Pod { pod, .. } => pod.namespace.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        namespaces.sort();
        assert_eq!(namespaces, vec![NS.to_string(), "other".to_string()]);

        let out = r.record(all(Seen::Failed("connection reset".to_string())));
        assert!(
            matches!(&out[..], [Event::Gap { source, phase: GapPhase::Began, .. }] if source == "pods"),
            "{out:?}"
        );
        // The relist covers every namespace: the pod of `other` is gone, db-0 is not.
        let out = list_all(&mut r, std::slice::from_ref(&db));
        assert!(
            matches!(&out[0], Event::Pod { pod, after: None, .. } if pod.namespace == "other"),
            "{out:?}"
        );
        assert!(matches!(
            &out[1],
            Event::Gap {
                phase: GapPhase::Ended,
                ..
            }
        ));
    }

    fn list_all(r: &mut Recorder, items: &[Pod]) -> Vec<Event> {
        let all = |seen| Observation::Pod(ALL_NAMESPACES.to_string(), seen);
        let mut out = r.record(all(Seen::Init));
        for p in items {
            out.extend(r.record(all(Seen::InitApply(p.clone()))));
        }
        out.extend(r.record(all(Seen::InitDone)));
        out
    }
}
