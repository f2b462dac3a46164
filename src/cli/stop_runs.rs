//! `faultline stop-runs`: the Helm chart's pre-delete and pre-upgrade hook.
//!
//! `helm uninstall` deletes a release's Jobs and, a moment later, the ServiceAccount and
//! rules their pods run with: a run told to stop (SIGTERM) would then undo its faults with
//! a token that no longer works, and leave a node cordoned. `helm upgrade` replaces the
//! run's Job while the old one is still undoing. So before either, this hook deletes the
//! Jobs of the release's running runs and waits until their pods are gone: each run hears
//! SIGTERM, undoes, writes its reports and exits while everything it needs still exists.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PropagationPolicy};

use super::{EXIT_ERROR, EXIT_OK};

/// How often the pods are listed while waiting.
const POLL: Duration = Duration::from_secs(1);

/// Stops the runs whose pods match `selector` in `namespace`, waiting up to `timeout`.
pub(super) async fn stop_runs(namespace: &str, selector: &str, timeout: Duration) -> i32 {
    let client = match kube::Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: stop-runs: no API client (it runs inside the cluster): {e}");
            return EXIT_ERROR;
        }
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let jobs: Api<Job> = Api::namespaced(client, namespace);
    let listed = match running(&pods, selector).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: stop-runs: {e}");
            return EXIT_ERROR;
        }
    };
    if listed.is_empty() {
        println!("stop-runs: no run is running in {namespace} ({selector})");
        return EXIT_OK;
    }
    let owners: BTreeSet<String> = listed.iter().filter_map(|(_, job)| job.clone()).collect();
    for job in &owners {
        println!("stop-runs: stopping the run of Job {namespace}/{job}");
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        match jobs.delete(job, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.is_not_found() => {}
            Err(e) => {
                eprintln!("error: stop-runs: deleting Job {namespace}/{job}: {e}");
                return EXIT_ERROR;
            }
        }
    }
    // A pod without a Job (made by hand from the template) is stopped directly.
    for (pod, _) in listed.iter().filter(|(_, job)| job.is_none()) {
        if let Err(e) = pods.delete(pod, &DeleteParams::default()).await {
            eprintln!("error: stop-runs: deleting pod {namespace}/{pod}: {e}");
        }
    }
    let names: BTreeSet<String> = listed.into_iter().map(|(pod, _)| pod).collect();
    let started = tokio::time::Instant::now();
    loop {
        let mut left = Vec::new();
        for name in &names {
            match pods.get_opt(name).await {
                Ok(Some(_)) => left.push(name.clone()),
                Ok(None) => {}
                Err(e) => {
                    eprintln!("error: stop-runs: reading pod {namespace}/{name}: {e}");
                    return EXIT_ERROR;
                }
            }
        }
        if left.is_empty() {
            println!(
                "stop-runs: every run ended in {:.1}s (each undid its faults first)",
                started.elapsed().as_secs_f64()
            );
            return EXIT_OK;
        }
        if started.elapsed() >= timeout {
            eprintln!(
                "error: stop-runs: still running after {timeout:?}: {}",
                left.join(", ")
            );
            return EXIT_ERROR;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The pods of `selector` that have not ended, each with the Job that owns it.
async fn running(pods: &Api<Pod>, selector: &str) -> Result<Vec<(String, Option<String>)>, String> {
    let list = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| format!("listing pods labelled {selector}: {e}"))?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter_map(|p| {
            let job = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "Job")
                .map(|o| o.name.clone());
            Some((p.metadata.name?, job))
        })
        .collect())
}
