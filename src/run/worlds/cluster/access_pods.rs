//! The node-access pods a run keeps on the nodes it reaches through the API
//! (`crate::execute::pod::kept`): started while the observer makes its first lists, before
//! the run's clock starts, so that no step waits for a pod to start on its node; deleted
//! when the run ends.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::execute::Executor;
use crate::experiment::model::Experiment;
use crate::run::floor::schedule;
use crate::run::preflight::prepare::{Prepared, acted_on_in_band};
use crate::run::shared_timeline::SharedTimeline;

use super::restored;

/// How long a kept pod outlives the run's planned length, its restore margin and its wait
/// for the cluster to settle: the safety net, the restored check and the teardown. A
/// command after that starts a pod of its own.
const KEPT_MARGIN: Duration = Duration::from_secs(300);

/// How long the run's kept pods may live: past everything the run plans to do.
pub(super) fn kept_lifetime(
    exp: &Experiment,
    prepared: &Prepared,
    restore_margin: Duration,
) -> Duration {
    let timers = &prepared.cluster.timers;
    schedule::planned_length(exp, timers)
        .saturating_add(restore_margin)
        .saturating_add(restored::settle_bound(restore_margin, timers))
        .saturating_add(KEPT_MARGIN)
}

/// Starts a kept node-access pod on each node the experiment acts on through the API, and
/// notes on `timeline` how it went; given up when `cancel` fires (the run then ends before
/// its first step).
pub(super) async fn keep(
    exp: &Experiment,
    prepared: &Prepared,
    lifetime: Duration,
    timeline: &SharedTimeline,
    cancel: &CancellationToken,
) {
    let executor: &Executor = &prepared.executor;
    let nodes: Vec<String> = acted_on_in_band(exp, &prepared.targets)
        .into_iter()
        .filter(|node| executor.through_api(node))
        .collect();
    if nodes.is_empty() {
        return;
    }
    let named: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let began = Instant::now();
    let kept = tokio::select! {
        kept = executor.keep_node_access_pods(&named, lifetime) => kept,
        () = cancel.cancelled() => return,
    };
    let mut started = 0;
    for (node, outcome) in kept {
        match outcome {
            Ok(()) => started += 1,
            Err(e) => timeline.note(format!(
                "node {node}: no node-access pod kept for the run ({e}); each of its \
                 commands starts a pod of its own"
            )),
        }
    }
    timeline.note(format!(
        "node access: a pod kept on {started} of {} nodes reached through the API, \
         started in {:.1} s",
        nodes.len(),
        began.elapsed().as_secs_f64()
    ));
}

/// Deletes the run's kept node-access pods, then any other pod of the run still there (a
/// pod it lost track of), noting each of those on `timeline`: the run is over.
pub(super) async fn delete(executor: &Executor, timeline: &SharedTimeline) {
    executor.delete_kept_node_access_pods().await;
    for found in executor.delete_runs_node_access_pods().await {
        match found {
            Ok(pod) => timeline.note(format!(
                "node access: pod {pod} of this run was still there at its end, deleted"
            )),
            Err(e) => timeline.note(format!(
                "node access: could not look for node-access pods of this run left at its \
                 end ({e}); each ends at its own deadline, and `faultline restore` deletes them"
            )),
        }
    }
}
