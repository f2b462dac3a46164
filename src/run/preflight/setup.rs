//! Before and after the fault: the setup manifests applied and waited for, torn down
//! afterwards, and the record of a run that could not start.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;

use crate::experiment::model::Experiment;
use crate::judge::{Outcome, Verdict};
use crate::record::{ClusterInfo, RunOutcome, RunRecord};
use crate::run::settings::RunSettings;
use crate::timers::{ClusterReadings, TimersInForce};

/// Longest wait for torn-down objects to be gone.
const TEARDOWN_TIMEOUT: Duration = Duration::from_secs(120);

/// The cluster as known before the API was asked anything: the timers the inventory
/// states, the others assumed.
pub(in crate::run) fn unread_cluster(settings: &RunSettings) -> ClusterInfo {
    let inv = &settings.inventory;
    let timers = TimersInForce::resolve(&ClusterReadings::default(), &inv.stated_timers(), None);
    ClusterInfo {
        name: inv.cluster().name.clone(),
        context: inv.context().map(str::to_string),
        server_version: None,
        timers: timers.timers,
        timer_sources: timers.sources,
        capabilities: inv.cluster().capabilities(),
        node_lease_seconds: None,
    }
}

/// The record of a run that could not start: every expectation is an error with the reason.
pub(in crate::run) fn not_run(
    exp: &Experiment,
    cluster: ClusterInfo,
    run_id: String,
    started_at: chrono::DateTime<Utc>,
    message: String,
) -> RunRecord {
    let verdicts = exp
        .expectations
        .iter()
        .map(|e| Verdict {
            name: e.name.clone(),
            outcome: Outcome::Error,
            message: format!("not run: {message}"),
            measured_ms: None,
            since: e.since.clone(),
            members: Vec::new(),
        })
        .collect();
    RunRecord {
        aborted: None,
        restored: None,
        faultline_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id,
        experiment: exp.clone(),
        cluster,
        targets: BTreeMap::new(),
        started_at,
        finished_at: Utc::now(),
        timeline: Default::default(),
        start_ms: None,
        observed_until_ms: None,
        stopped_early: Some(format!("the run could not start: {message}")),
        verdicts,
        figures: Default::default(),
        rolls: Vec::new(),
        costs: None,
        outcome: RunOutcome::Error {
            message: message.clone(),
        },
        errors: vec![message],
    }
}

/// The record of an experiment the cluster cannot run: it requires a capability the
/// inventory says the cluster lacks. Every expectation is skipped with the reason; nothing
/// on the cluster was touched, not even the API asked.
pub(in crate::run) fn skipped(
    exp: &Experiment,
    cluster: ClusterInfo,
    run_id: String,
    started_at: chrono::DateTime<Utc>,
    missing: &crate::capability::Missing,
) -> RunRecord {
    let reason = missing.explained();
    let verdicts = exp
        .expectations
        .iter()
        .map(|e| Verdict {
            name: e.name.clone(),
            outcome: Outcome::Skipped,
            message: format!("experiment not run: {missing}"),
            measured_ms: None,
            since: e.since.clone(),
            members: Vec::new(),
        })
        .collect();
    RunRecord {
        aborted: None,
        restored: None,
        faultline_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id,
        experiment: exp.clone(),
        cluster,
        targets: BTreeMap::new(),
        started_at,
        finished_at: Utc::now(),
        timeline: Default::default(),
        start_ms: None,
        observed_until_ms: None,
        stopped_early: Some(format!("not run: {missing}")),
        verdicts,
        figures: Default::default(),
        rolls: Vec::new(),
        costs: None,
        outcome: RunOutcome::Skipped { reason },
        errors: Vec::new(),
    }
}

/// Applies the setup manifests and waits for their workloads.
pub(in crate::run) async fn setup(
    exp: &Experiment,
    client: &kube::Client,
) -> Result<Vec<crate::cluster::AppliedObject>, crate::cluster::ClusterError> {
    let setup = &exp.setup;
    if setup.manifests.is_empty() {
        return Ok(Vec::new());
    }
    let applied = crate::cluster::apply_manifests(client, &setup.manifests).await?;
    crate::cluster::wait_workloads_ready(client, &applied, setup.wait_timeout).await?;
    Ok(applied)
}

/// Why the teardown did not leave the cluster as setup found it: the run's world reports
/// it among the run's errors.
#[derive(Debug, thiserror::Error)]
pub(in crate::run) enum TeardownError {
    /// Deleting or waiting failed at the API.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    /// Objects were still there when the wait ran out.
    #[error("still present after {after:?}: {}", .left.join(", "))]
    Left {
        /// How long was waited.
        after: Duration,
        /// The objects still present.
        left: Vec<String>,
    },
}

/// Deletes what setup applied and waits for it to be gone, so the next experiment starts
/// from a fresh, evenly spread layout. A Namespace that was there before setup stays
/// (its objects from the manifests go): deleting it would take what the run did not make
/// with it, such as the Role a scheduled run needs the next night.
pub(in crate::run) async fn teardown(
    client: &kube::Client,
    applied: &[crate::cluster::AppliedObject],
) -> Result<(), TeardownError> {
    let applied: Vec<crate::cluster::AppliedObject> =
        applied.iter().filter(|o| o.torn_down()).cloned().collect();
    crate::cluster::delete_objects(client, &applied).await?;
    let left = crate::cluster::wait_objects_gone(client, &applied, TEARDOWN_TIMEOUT).await?;
    if left.is_empty() {
        Ok(())
    } else {
        Err(TeardownError::Left {
            after: TEARDOWN_TIMEOUT,
            left,
        })
    }
}
