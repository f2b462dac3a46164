//! Reading the node-lifecycle timers a cluster runs with through its API, from wherever it
//! shows them:
//!
//! - kube-controller-manager's flags on its kube-system static (mirror) pod, on kubeadm,
//!   kind and RKE2;
//! - else its `/configz` on the secure port the inventory names (`cluster.controllerManager`),
//!   for a control plane run as host processes (the lab's), with the kubeconfig's credentials;
//! - the apiserver's default tolerations as its `DefaultTolerationSeconds` admission puts
//!   them on a pod: a server-side dry-run create of a pod without tolerations (nothing is
//!   stored), else the kube-apiserver static pod's flags.
//!
//! What could not be read is said in [`ClusterReadings::misses`]; nothing is filled in here
//! (k3s, whose components are not pods, is read over the node's own transport by `doctor`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::load_config;
use crate::timers::sources::{self, CommandLine};
use crate::timers::{ClusterReadings, Timer};

/// How long connecting to the controller-manager may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long its answer may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The namespace of the dry-run pod: one every cluster has.
const DRY_RUN_NAMESPACE: &str = "default";

/// Where kube-controller-manager's secure port answers, and how to reach it.
#[derive(Debug, Clone)]
pub struct ConfigzAccess<'a> {
    /// `https://host:port` of the secure port.
    pub url: &'a str,
    /// CA of its serving certificate; `None`: the kubeconfig's.
    pub ca_file: Option<&'a Path>,
    /// Kubeconfig files whose credentials are sent.
    pub kubeconfig: &'a [PathBuf],
    /// Their context.
    pub context: Option<&'a str>,
}

/// Reads every timer the API shows. `version` is the API server's `gitVersion` (the
/// default of an absent flag depends on it); `configz` is the controller-manager's secure
/// port when the inventory names one.
pub async fn read_timers(
    client: &Client,
    version: Option<&str>,
    configz: Option<ConfigzAccess<'_>>,
) -> ClusterReadings {
    let mut readings = ClusterReadings::default();
    let controller_manager = [Timer::NodeMonitorPeriod, Timer::NodeMonitorGracePeriod];
    let api_server = [
        Timer::DefaultUnreachableTolerationSeconds,
        Timer::DefaultNotReadyTolerationSeconds,
    ];

    static_pod_timers(client, "kube-controller-manager", version, &mut readings).await;
    if readings.lacks_any(&controller_manager) {
        match configz {
            Some(access) => match read_configz(&access).await {
                Ok(found) => {
                    for (timer, reading) in found {
                        readings.offer(timer, reading);
                    }
                }
                Err(why) => readings.miss(why),
            },
            None => readings.miss(
                "kube-controller-manager /configz: the inventory names no \
                 cluster.controllerManager to read it from",
            ),
        }
    }

    match dry_run_pod(client).await {
        Ok(pod) => {
            let place = format!("a server-side dry-run pod in namespace {DRY_RUN_NAMESPACE}");
            for (timer, reading) in sources::from_defaulted_pod(&pod, &place) {
                readings.offer(timer, reading);
            }
        }
        Err(why) => readings.miss(why),
    }
    if readings.lacks_any(&api_server) {
        static_pod_timers(client, "kube-apiserver", version, &mut readings).await;
    }
    readings
}

/// The timers one component's kube-system static pod shows in its flags.
async fn static_pod_timers(
    client: &Client,
    component: &'static str,
    version: Option<&str>,
    readings: &mut ClusterReadings,
) {
    let pods = match Api::<Pod>::namespaced(client.clone(), "kube-system")
        .list(&ListParams::default().labels(&format!("component={component}")))
        .await
    {
        Ok(list) => list,
        Err(e) => {
            readings.miss(format!(
                "{component} flags: listing kube-system pods labelled component={component}: {e}"
            ));
            return;
        }
    };
    let commands: Vec<(String, Vec<String>)> = pods.items.iter().filter_map(pod_command).collect();
    let mut notes = Vec::new();
    let line = match sources::static_pod(component, &commands, &mut notes) {
        Ok(line) => line,
        Err(why) => {
            readings.miss(format!("{component} flags: {why}"));
            return;
        }
    };
    for note in notes {
        readings.miss(note);
    }
    offer_line(&line, version, readings);
}

/// Offers what a component's command line shows, or notes why it showed nothing.
pub(crate) fn offer_line(
    line: &CommandLine,
    version: Option<&str>,
    readings: &mut ClusterReadings,
) {
    let Some(version) = version else {
        readings.miss(format!(
            "{} flags ({}): the cluster's version is unknown, so the defaults of absent flags \
             are too",
            line.component, line.place
        ));
        return;
    };
    match line.timers(version) {
        Ok(found) => {
            for (timer, reading) in found {
                readings.offer(timer, reading);
            }
        }
        Err(why) => readings.miss(why),
    }
}

/// A pod with no tolerations, created with `dryRun=All`: the API server runs admission
/// (which adds the default tolerations) and stores nothing.
async fn dry_run_pod(client: &Client) -> Result<Pod, String> {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "faultline-timers-dry-run",
            "labels": {"app.kubernetes.io/managed-by": "faultline"}
        },
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "dry-run",
                "image": "registry.invalid/faultline/dry-run:never-pulled",
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}
                }
            }]
        }
    }))
    .map_err(|e| format!("building the dry-run pod: {e}"))?;
    let params = PostParams {
        dry_run: true,
        field_manager: Some("faultline".into()),
    };
    Api::<Pod>::namespaced(client.clone(), DRY_RUN_NAMESPACE)
        .create(&params, &pod)
        .await
        .map_err(|e| {
            format!(
                "default tolerations: a server-side dry-run create of a pod in namespace \
                 {DRY_RUN_NAMESPACE} failed: {e}"
            )
        })
}

/// `GET <url>/configz` with the kubeconfig's credentials.
async fn read_configz(
    access: &ConfigzAccess<'_>,
) -> Result<Vec<(Timer, crate::timers::Reading)>, String> {
    let place = format!("{}/configz", access.url.trim_end_matches('/'));
    let fail = |why: String| format!("kube-controller-manager {place}: {why}");
    let mut config = load_config(access.kubeconfig, access.context)
        .await
        .map_err(|e| fail(e.to_string()))?;
    config.cluster_url = access
        .url
        .parse()
        .map_err(|e| fail(format!("not a URL: {e}")))?;
    if let Some(ca) = access.ca_file {
        let certs: Vec<Vec<u8>> = CertificateDer::pem_file_iter(ca)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| fail(format!("caFile {}: {e}", ca.display())))?
            .into_iter()
            .map(|c| c.as_ref().to_vec())
            .collect();
        if certs.is_empty() {
            return Err(fail(format!(
                "caFile {} holds no certificate",
                ca.display()
            )));
        }
        config.root_cert = Some(certs);
    }
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    let client = Client::try_from(config).map_err(|e| fail(e.to_string()))?;
    let request = http::Request::get("/configz")
        .body(Vec::new())
        .map_err(|e| fail(e.to_string()))?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| fail(format!("not JSON: {e}")))?;
    sources::from_configz(&doc, &place)
}

/// A pod's name and its first container's `command` followed by its `args`: a static
/// pod's component flags.
pub(crate) fn pod_command(pod: &Pod) -> Option<(String, Vec<String>)> {
    let name = pod.metadata.name.clone()?;
    let c = pod.spec.as_ref()?.containers.first()?;
    let argv = c
        .command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .cloned()
        .collect();
    Some((name, argv))
}
