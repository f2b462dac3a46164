//! What runs beside the steps and feeds the timeline: the wait for the observer's first
//! lists, the probes, and the API endpoint switches.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::prepare::Prepared;
use super::shared_timeline::SharedTimeline;
use crate::experiment::model::Experiment;
use crate::timeline::{Event, RunPhase};

/// Longest wait for the observer's first lists before the first step: twice what 30,000
/// pods took on a loaded 2-CPU machine (about 30 s), a bound for a source that keeps
/// failing (its gap is on the timeline) or a cluster far bigger than that.
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

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

/// Whether `event` is the observer's word that its first lists are all on the timeline.
pub(super) fn is_observer_ready(event: &Event) -> bool {
    matches!(
        event,
        Event::Run {
            phase: RunPhase::ObserverReady { .. }
        }
    )
}

/// Waits until every source of the observer has answered its first list (`ready` turns
/// true), so that the state before the run is all on the timeline before the first step.
/// Gives up after [`SYNC_TIMEOUT`], saying so on the timeline: the run then goes on, and
/// what the late lists bring is recorded as it lands.
pub(super) async fn wait_for_initial_state(
    timeline: &SharedTimeline,
    mut ready: tokio::sync::watch::Receiver<bool>,
    cancel: &CancellationToken,
) {
    tokio::select! {
        _ = cancel.cancelled() => {}
        waited = tokio::time::timeout(SYNC_TIMEOUT, ready.wait_for(|ready| *ready)) => {
            if waited.is_err() {
                timeline.note(format!(
                    "the observer had not listed everything after {}s (a source that failed \
                     has its gap on the timeline); the experiment starts anyway, and objects \
                     listed later appear on the timeline when they land",
                    SYNC_TIMEOUT.as_secs()
                ));
            }
        }
    }
}
