//! What runs beside the steps and feeds the timeline: the wait for the observer's first
//! lists, the probes, and the API endpoint switches.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::experiment::model::Experiment;
use crate::run::preflight::prepare::Prepared;
use crate::run::shared_timeline::SharedTimeline;
use crate::timeline::{Event, RunPhase};

/// Longest wait for the observer's first lists before the first step: about five times
/// what 150,000 pods on 5,000 nodes took on a loaded 2-CPU machine (54-60 s, where a
/// bound of 60 s started one run before its lists were in), a bound for a source that
/// keeps failing (its gap is on the timeline) or a cluster far bigger than that.
const SYNC_TIMEOUT: Duration = Duration::from_secs(300);

/// Starts the experiment's probes, recording their changes on the run's timeline; `None`
/// when it has none.
pub(super) fn start_probes(
    exp: &Experiment,
    prepared: &Prepared,
    timeline: &SharedTimeline,
) -> Result<Option<crate::probe::Probes>, crate::probe::ProbeError> {
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
}

/// How often faultline asks the API server whether it answers, for the `apiUnreachable`
/// abort condition.
const API_EVERY: Duration = Duration::from_secs(2);
/// Longest one such question may take.
const API_TIMEOUT: Duration = Duration::from_secs(5);

/// Starts asking Prometheus the experiment's abort queries; `None` when it has none.
pub(super) fn start_queries(
    exp: &Experiment,
    inventory: &crate::inventory::Inventory,
    timeline: &SharedTimeline,
) -> Result<Option<crate::probe::query::Queries>, crate::probe::query::AbortQueryError> {
    let sink = timeline.clone();
    crate::probe::query::Queries::start(
        &exp.abort,
        inventory.prometheus(),
        Arc::new(move |event| {
            sink.record(event);
        }),
    )
}

/// Asks the API server (`/readyz`, through every endpoint the client knows) every
/// [`API_EVERY`] while the run goes on, when an `apiUnreachable` abort condition is on;
/// each change of answer is an `api` entry.
pub(super) fn watch_api(
    exp: &Experiment,
    client: &kube::Client,
    timeline: &SharedTimeline,
) -> Option<tokio::task::JoinHandle<()>> {
    let wanted = exp
        .abort
        .conditions
        .iter()
        .any(|c| c.kind == crate::experiment::model::AbortKind::ApiUnreachable);
    if !wanted {
        return None;
    }
    let client = client.clone();
    let sink = timeline.clone();
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(API_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<bool> = None;
        loop {
            ticks.tick().await;
            let request = http::Request::get("/readyz").body(Vec::new());
            let answer = match request {
                Ok(r) => tokio::time::timeout(API_TIMEOUT, client.request_text(r)).await,
                Err(_) => continue,
            };
            let (up, detail) = match answer {
                Ok(Ok(text)) => (true, format!("/readyz: {}", text.trim())),
                Ok(Err(e)) => (false, format!("/readyz: {e}")),
                Err(_) => (
                    false,
                    format!("/readyz: no answer within {}s", API_TIMEOUT.as_secs()),
                ),
            };
            if last != Some(up) {
                let detail: String = detail.chars().take(160).collect();
                sink.record(Event::Api { up, detail });
                last = Some(up);
            }
        }
    }))
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

/// The tasks that feed the timeline beside the steps, stopped together when the run ends
/// (or gives up before its first fault).
pub(super) struct Companions {
    /// The observer's stream into the timeline.
    pub observer: tokio::task::JoinHandle<()>,
    /// API endpoint switches onto the timeline, with failover configured.
    pub switches: Option<tokio::task::JoinHandle<()>>,
    /// The experiment's probes.
    pub probes: Option<crate::probe::Probes>,
    /// The abort conditions' queries.
    pub queries: Option<crate::probe::query::Queries>,
    /// The API server's own health, watched for the abort conditions.
    pub api_watch: Option<tokio::task::JoinHandle<()>>,
}

impl Companions {
    /// Stops every task: probes and queries finish their last round, the rest end now.
    pub(super) async fn stop(self) {
        if let Some(probes) = self.probes {
            probes.stop().await;
        }
        if let Some(queries) = self.queries {
            queries.stop().await;
        }
        if let Some(api_watch) = self.api_watch {
            api_watch.abort();
        }
        self.observer.abort();
        if let Some(switches) = self.switches {
            switches.abort();
        }
    }
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
