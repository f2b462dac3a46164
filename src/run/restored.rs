//! "Cluster restored": the cluster read before the first fault, and compared after the last
//! undo with a bounded wait for it to settle. The API side is `cluster::snapshot`; this
//! adds the kubelets, asked over each node's transport, and the wait. `faultline restore`
//! uses the same check against the snapshot a killed run left beside the journal.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;

use crate::cluster::snapshot::{self, KubeletSnap, Snapshot};
use crate::execute::{Executor, NodeOp};
use crate::experiment::model::ClusterTimers;
use crate::record::RestoredCheck;

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

/// Reads the cluster (the nodes, the workloads and pods of `namespaces`, `None` meaning
/// every namespace) and the kubelets of `kubelet_nodes`.
pub(crate) async fn take(
    client: &kube::Client,
    executor: &Executor,
    cluster: &str,
    namespaces: Option<&[String]>,
    kubelet_nodes: &[String],
) -> Result<Snapshot, String> {
    let (snap, kubelets) = tokio::join!(
        snapshot::take(client, cluster, namespaces),
        kubelets(executor, kubelet_nodes)
    );
    let mut snap = snap.map_err(|e| e.to_string())?;
    snap.kubelets = kubelets;
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

/// Compares the cluster with `before` until nothing differs or `settle` has passed.
pub(crate) async fn check(
    before: &Snapshot,
    client: &kube::Client,
    executor: &Executor,
    settle: Duration,
) -> RestoredCheck {
    let started = Instant::now();
    let kubelet_nodes: Vec<String> = before.kubelets.keys().cloned().collect();
    loop {
        let after = take(
            client,
            executor,
            &before.cluster,
            before.namespaces.as_deref(),
            &kubelet_nodes,
        )
        .await;
        let differences = match &after {
            Ok(after) => snapshot::differences(before, after),
            Err(e) => vec![format!("could not read the cluster: {e}")],
        };
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
