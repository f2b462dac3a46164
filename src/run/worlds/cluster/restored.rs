//! "Cluster restored": the cluster read before the first fault, and compared after the last
//! undo with a bounded wait for it to settle. The API side is `cluster::snapshot`; this
//! adds the kubelets, asked over each node's transport, and the wait. `faultline restore`
//! uses the same check against the snapshot a killed run left beside the journal.
//!
//! A run reads the nodes and the pods from its own observer ([`Sight::Observer`]): the
//! observer already holds every node and every pod of the run's namespaces, reduced, and a
//! second list of them would cost what the observer saves (at 30,000 pods, one list of every
//! pod as API objects is hundreds of MB). Only the workloads, which the observer follows only
//! when the experiment names them, are listed, in pages. While the observer has not listed
//! everything yet, or has lost sight, the check lists the cluster instead, in pages,
//! reducing each page as it arrives; so does `faultline restore`, which has no observer.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;

use crate::cluster::leases;
use crate::cluster::snapshot::{self, KubeletSnap, NodeSnap, Snapshot};
use crate::execute::{Executor, NodeOp};
use crate::experiment::model::ClusterTimers;
use crate::record::RestoredCheck;
use crate::run::shared_timeline::SharedTimeline;

/// Time between two comparisons while the cluster settles.
const SETTLE_EVERY: Duration = Duration::from_secs(2);
/// Longest a kubelet status question may take.
const KUBELET_TIMEOUT: Duration = Duration::from_secs(15);

/// How long faultline waits for the cluster to settle after the last undo: the restore
/// margin (the time a run allows itself past its planned end), and at least two grace
/// periods (a kubelet back, its node Ready, its taints lifted).
pub(crate) fn settle_bound(restore_margin: Duration, timers: &ClusterTimers) -> Duration {
    restore_margin.max(2 * timers.node_monitor_grace_period)
}

/// Where the check reads the nodes and the pods.
#[derive(Clone, Copy)]
pub(crate) enum Sight<'a> {
    /// Lists through the API, in pages (`faultline restore`: no observer runs).
    Api,
    /// The run's observer, through the timeline it fills; the API while it is not in sight
    /// of the whole cluster (first lists not all in, or a gap open).
    Observer(&'a SharedTimeline),
}

/// Reads the cluster (the nodes, the workloads and pods of `namespaces`, `None` meaning
/// every namespace) and the kubelets of `kubelet_nodes`: the nodes and pods from the run's
/// observer (see [`Sight::Observer`]).
pub(crate) async fn take_observed(
    timeline: &SharedTimeline,
    client: &kube::Client,
    executor: &Executor,
    cluster: &str,
    namespaces: Option<&[String]>,
    kubelet_nodes: &[String],
) -> Result<Snapshot, crate::cluster::ClusterError> {
    take_from(
        Sight::Observer(timeline),
        client,
        executor,
        cluster,
        namespaces,
        kubelet_nodes,
    )
    .await
}

async fn take_from(
    sight: Sight<'_>,
    client: &kube::Client,
    executor: &Executor,
    cluster: &str,
    namespaces: Option<&[String]>,
    kubelet_nodes: &[String],
) -> Result<Snapshot, crate::cluster::ClusterError> {
    let (snap, kubelets) = tokio::join!(
        read(sight, client, cluster, namespaces),
        kubelets(executor, kubelet_nodes)
    );
    let mut snap = snap?;
    snap.kubelets = kubelets;
    Ok(snap)
}

/// The nodes and the Terminating pods the observer holds, when it is in sight of the
/// whole cluster; `None` otherwise.
fn observed(timeline: &SharedTimeline) -> Option<(BTreeMap<String, NodeSnap>, BTreeSet<String>)> {
    timeline.latest_view(|latest| {
        if !latest.observer_in_sight() {
            return None;
        }
        let nodes = latest
            .nodes()
            .map(|(name, state)| (name.clone(), snapshot::node_snap_of(state)))
            .collect();
        let terminating = latest
            .pods()
            .filter(|(_, state)| state.terminating)
            .map(|(pod, _)| snapshot::pod_key(&pod.namespace, &pod.name, &pod.uid))
            .collect();
        Some((nodes, terminating))
    })
}

/// The API side of a snapshot: from the observer where `sight` allows, the rest in pages.
async fn read(
    sight: Sight<'_>,
    client: &kube::Client,
    cluster: &str,
    namespaces: Option<&[String]>,
) -> Result<Snapshot, crate::cluster::ClusterError> {
    let seen = match sight {
        Sight::Api => None,
        Sight::Observer(timeline) => {
            let seen = observed(timeline);
            if seen.is_none() {
                timeline.note(
                    "cluster restored: the observer is not in sight of the whole cluster (first \
                     lists not all in, or a gap open): the nodes and pods are listed instead",
                );
            }
            seen
        }
    };
    let Some((nodes, terminating)) = seen else {
        return snapshot::take(client, cluster, namespaces).await;
    };
    let mut snap = snapshot::empty(cluster, namespaces);
    snap.nodes = nodes;
    snap.terminating = terminating;
    snap.workloads = snapshot::read_workloads(client, namespaces).await?;
    Ok(snap)
}

/// Asks each node's kubelet whether it runs, all at once.
async fn kubelets(executor: &Executor, nodes: &[String]) -> BTreeMap<String, KubeletSnap> {
    join_all(nodes.iter().map(|node| async move {
        let snap = match executor
            .perform(node, &NodeOp::KubeletStatus, KUBELET_TIMEOUT)
            .await
        {
            Ok(out) => KubeletSnap {
                running: out.exit_status == Some(0),
                said: format!(
                    "kubelet status `{}` (exit {})",
                    out.output.split_whitespace().collect::<Vec<_>>().join(" "),
                    out.exit_status
                        .map_or_else(|| "none".to_string(), |c| c.to_string())
                ),
            },
            Err(e) => KubeletSnap {
                running: false,
                said: format!(
                    "could not ask: {}",
                    e.to_string().lines().next().unwrap_or_default()
                ),
            },
        };
        (node.clone(), snap)
    }))
    .await
    .into_iter()
    .collect()
}

/// Compares the cluster, read through the API, with `before` until nothing differs or
/// `settle` has passed. Each node of [`Snapshot::heartbeats`] must also renew its Lease
/// after the check begins (`faultline restore` knows no undo's moment).
pub(crate) async fn check(
    before: &Snapshot,
    client: &kube::Client,
    executor: &Executor,
    settle: Duration,
) -> RestoredCheck {
    check_from(
        Sight::Api,
        before,
        client,
        executor,
        settle,
        &leases::Marks::new(),
    )
    .await
}

/// As [`check`], the nodes and pods read from the run's observer (see [`Sight::Observer`]);
/// a node's Lease must be renewed after its mark in `undo_marks` (read just before its last
/// undo), or after the check begins for a node no undo touched (a reboot).
pub(crate) async fn check_observed(
    timeline: &SharedTimeline,
    before: &Snapshot,
    client: &kube::Client,
    executor: &Executor,
    settle: Duration,
    undo_marks: &leases::Marks,
) -> RestoredCheck {
    check_from(
        Sight::Observer(timeline),
        before,
        client,
        executor,
        settle,
        undo_marks,
    )
    .await
}

/// The marks each heartbeat node's renewal is awaited after: its undo's, or one read now.
async fn heartbeat_marks(
    client: &kube::Client,
    before: &Snapshot,
    undo_marks: &leases::Marks,
) -> leases::Marks {
    let unmarked = before
        .heartbeats
        .iter()
        .filter(|n| !undo_marks.contains_key(*n));
    let mut marks = leases::read(client, unmarked).await;
    marks.extend(
        undo_marks
            .iter()
            .filter(|(n, _)| before.heartbeats.contains(*n))
            .map(|(n, m)| (n.clone(), m.clone())),
    );
    marks
}

async fn check_from(
    sight: Sight<'_>,
    before: &Snapshot,
    client: &kube::Client,
    executor: &Executor,
    settle: Duration,
    undo_marks: &leases::Marks,
) -> RestoredCheck {
    let started = Instant::now();
    let kubelet_nodes: Vec<String> = before.kubelets.keys().cloned().collect();
    // Shrinks as nodes are heard from: a renewal seen once is proof enough.
    let mut unheard = heartbeat_marks(client, before, undo_marks).await;
    loop {
        let (after, leases_now) = tokio::join!(
            take_from(
                sight,
                client,
                executor,
                &before.cluster,
                before.namespaces.as_deref(),
                &kubelet_nodes,
            ),
            leases::read(client, unheard.keys())
        );
        let silent = leases::settle(&mut unheard, &leases_now);
        let mut differences = match &after {
            Ok(after) => snapshot::differences(before, after),
            Err(e) => vec![format!("could not read the cluster: {e}")],
        };
        differences.extend(silent.into_iter().map(|(node, why)| {
            format!(
                "node {node}: its kubelet not heard from since the undo ({why}): its Ready \
                 may be the one from before the fault"
            )
        }));
        let waited = started.elapsed();
        if differences.is_empty() || waited >= settle {
            return RestoredCheck {
                ok: differences.is_empty(),
                differences,
                waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                compared: snapshot::summary(before),
            };
        }
        tokio::time::sleep(SETTLE_EVERY.min(settle.saturating_sub(waited))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{
        ConditionStatus, Event, GapPhase, NodeState, PodId, PodState, RunPhase, Taint,
    };

    fn node(ready: ConditionStatus, taints: &[(&str, &str)]) -> Event {
        Event::Node {
            name: "w1".into(),
            before: None,
            after: Some(NodeState {
                ready,
                ready_since: None,
                taints: taints
                    .iter()
                    .map(|(key, effect)| Taint {
                        key: key.to_string(),
                        effect: effect.to_string(),
                    })
                    .collect(),
                unschedulable: false,
                zone: None,
                shutting_down: false,
            }),
        }
    }

    fn pod(name: &str, terminating: bool) -> Event {
        Event::Pod {
            pod: std::sync::Arc::new(PodId {
                namespace: "ns".into(),
                name: name.into(),
                uid: format!("u-{name}"),
            }),
            before: None,
            after: Some(
                PodState {
                    terminating,
                    ..PodState::running_on(Some("w1"))
                }
                .into(),
            ),
        }
    }

    fn gap(phase: GapPhase) -> Event {
        Event::Gap {
            source: "pods".into(),
            phase,
            reason: "connection reset".into(),
        }
    }

    const READY: Event = Event::Run {
        phase: RunPhase::ObserverReady { sources: 2 },
    };

    #[test]
    fn the_observer_gives_the_nodes_and_terminating_pods_once_it_has_listed_everything() {
        let timeline = SharedTimeline::start(crate::events::RunEvents::default());
        timeline.record(node(
            ConditionStatus::True,
            &[("node.kubernetes.io/not-ready", "NoSchedule")],
        ));
        timeline.record(pod("web-1", false));
        timeline.record(pod("old", true));
        // Before its first lists are all in, the observer's state is not the cluster's.
        assert_eq!(observed(&timeline), None);
        timeline.record(READY);
        let (nodes, terminating) = observed(&timeline).expect("in sight");
        assert_eq!(
            nodes,
            BTreeMap::from([(
                "w1".to_string(),
                NodeSnap {
                    ready: true,
                    unschedulable: false,
                    taints: BTreeSet::from(["node.kubernetes.io/not-ready:NoSchedule".into()]),
                }
            )])
        );
        assert_eq!(terminating, BTreeSet::from(["ns/old u-old".to_string()]));
        // A pod seen gone is not there any more.
        timeline.record(Event::Pod {
            pod: std::sync::Arc::new(PodId {
                namespace: "ns".into(),
                name: "old".into(),
                uid: "u-old".into(),
            }),
            before: None,
            after: None,
        });
        assert_eq!(observed(&timeline).expect("in sight").1, BTreeSet::new());
    }

    #[test]
    fn an_open_gap_sends_the_check_to_the_api() {
        let timeline = SharedTimeline::start(crate::events::RunEvents::default());
        timeline.record(READY);
        timeline.record(node(ConditionStatus::True, &[]));
        timeline.record(gap(GapPhase::Began));
        assert_eq!(observed(&timeline), None);
        timeline.record(gap(GapPhase::Ended));
        assert!(observed(&timeline).is_some());
    }
}
