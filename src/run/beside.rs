//! What runs beside the steps and feeds the timeline: the wait for the observer's first
//! lists, the probes, and the API endpoint switches.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::prepare::Prepared;
use super::shared_timeline::SharedTimeline;
use crate::experiment::model::Experiment;
use crate::timeline::Event;

/// Longest wait for the observer's initial lists before the first step.
const SYNC_TIMEOUT: Duration = Duration::from_secs(20);

/// Starts the experiment's probes, recording their changes on the run's timeline; `None`
/// when it has none.
pub(super) fn start_probes(
    exp: &Experiment,
    prepared: &Prepared,
    timeline: &SharedTimeline,
) -> Result<Option<crate::probe::Probes>, String> {
    if exp.probes.is_empty() {
        return Ok(None);
    }
    let sink = timeline.clone();
    let ctx = crate::probe::ProbeContext {
        targets: &prepared.targets,
        internal_ips: &prepared.internal_ips,
        exec_pods: &prepared.exec_pods,
        executor: Arc::new(prepared.executor.clone()),
        client: Some(prepared.client.clone()),
    };
    crate::probe::Probes::start(
        &exp.probes,
        ctx,
        Arc::new(move |event| {
            sink.record(event);
        }),
    )
    .map(Some)
    .map_err(|e| format!("probes: {e}"))
}

/// Notes the API endpoints on the timeline, then every switch between them as it
/// happens: a switch explains the observation gap next to it.
pub(super) fn record_switches(
    timeline: &SharedTimeline,
    failover: &crate::cluster::Failover,
) -> tokio::task::JoinHandle<()> {
    let in_use = failover.active();
    let others: Vec<String> = failover
        .endpoints()
        .into_iter()
        .filter(|e| *e != in_use)
        .collect();
    timeline.note(format!(
        "API endpoint {in_use} in use; failover to {}",
        others.join(", ")
    ));
    let mut switches = failover.subscribe();
    let sink = timeline.clone();
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match switches.recv().await {
                Ok(switch) => {
                    sink.record(Event::Endpoint {
                        from: switch.from,
                        to: switch.to,
                        reason: switch.reason,
                    });
                }
                Err(RecvError::Lagged(n)) => {
                    sink.note(format!("{n} API endpoint switches not recorded"))
                }
                Err(RecvError::Closed) => return,
            }
        }
    })
}

/// Waits until the observer has reported every target node (its initial list).
pub(super) async fn wait_for_initial_state(
    timeline: &SharedTimeline,
    prepared: &Prepared,
    cancel: &CancellationToken,
) {
    let nodes: Vec<&String> = prepared.targets.values().flatten().collect();
    let deadline = Instant::now() + SYNC_TIMEOUT;
    while Instant::now() < deadline && !cancel.is_cancelled() {
        let all = timeline.judge_view(|seen| nodes.iter().all(|n| seen.has_node(n)));
        if all && !nodes.is_empty() {
            // Let the pod and workload lists land too.
            tokio::time::sleep(Duration::from_millis(500)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
