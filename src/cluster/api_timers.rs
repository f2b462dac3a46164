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
use thiserror::Error;

use super::load_config;
use crate::timers::sources::{self, CommandLine, TimerSourceError};
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
                Err(why) => readings.miss(why.to_string()),
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
        Err(why) => readings.miss(why.to_string()),
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
        Err(why) => readings.miss(why.to_string()),
    }
}

/// Why the default tolerations could not be read off a dry-run pod.
#[derive(Debug, Error)]
enum DryRunError {
    /// The pod faultline sends could not be built (a bug).
    #[error("building the dry-run pod: {0}")]
    Build(serde_json::Error),
    /// The API server refused the dry-run create.
    #[error(
        "default tolerations: a server-side dry-run create of a pod in namespace \
         {DRY_RUN_NAMESPACE} failed: {0}"
    )]
    Create(kube::Error),
}

/// Why kube-controller-manager's `/configz` gave no timers.
#[derive(Debug, Error)]
enum ConfigzError {
    /// It could not be fetched.
    #[error("kube-controller-manager {place}: {problem}")]
    Fetch {
        /// The `/configz` URL.
        place: String,
        /// What went wrong.
        problem: ConfigzProblem,
    },
    /// It was fetched and holds no readable timers.
    #[error(transparent)]
    Read(TimerSourceError),
}

/// What kept `/configz` from being fetched.
#[derive(Debug, Error)]
enum ConfigzProblem {
    /// The kubeconfig gave no credentials.
    #[error("{0}")]
    Kubeconfig(super::ClusterError),
    /// `cluster.controllerManager` is not a URL.
    #[error("not a URL: {0}")]
    Url(http::uri::InvalidUri),
    /// Its `caFile` could not be read.
    #[error("caFile {}: {source}", path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rustls_pki_types::pem::Error,
    },
    /// Its `caFile` holds no certificate.
    #[error("caFile {} holds no certificate", .0.display())]
    NoCertificate(PathBuf),
    /// The request could not be built (a bug).
    #[error("{0}")]
    Request(http::Error),
    /// The client could not be made, or the request failed.
    #[error("{0}")]
    Api(kube::Error),
    /// The answer is not JSON.
    #[error("not JSON: {0}")]
    Json(serde_json::Error),
}

/// A pod with no tolerations, created with `dryRun=All`: the API server runs admission
/// (which adds the default tolerations) and stores nothing.
async fn dry_run_pod(client: &Client) -> Result<Pod, DryRunError> {
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
    .map_err(DryRunError::Build)?;
    let params = PostParams {
        dry_run: true,
        field_manager: Some("faultline".into()),
    };
    Api::<Pod>::namespaced(client.clone(), DRY_RUN_NAMESPACE)
        .create(&params, &pod)
        .await
        .map_err(DryRunError::Create)
}

/// `GET <url>/configz` with the kubeconfig's credentials.
async fn read_configz(
    access: &ConfigzAccess<'_>,
) -> Result<Vec<(Timer, crate::timers::Reading)>, ConfigzError> {
    let place = format!("{}/configz", access.url.trim_end_matches('/'));
    let fail = |problem: ConfigzProblem| ConfigzError::Fetch {
        place: place.clone(),
        problem,
    };
    let mut config = load_config(access.kubeconfig, access.context)
        .await
        .map_err(|e| fail(ConfigzProblem::Kubeconfig(e)))?;
    config.cluster_url = access
        .url
        .parse()
        .map_err(|e| fail(ConfigzProblem::Url(e)))?;
    if let Some(ca) = access.ca_file {
        let certs: Vec<Vec<u8>> = CertificateDer::pem_file_iter(ca)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|source| {
                fail(ConfigzProblem::CaFile {
                    path: ca.to_path_buf(),
                    source,
                })
            })?
            .into_iter()
            .map(|c| c.as_ref().to_vec())
            .collect();
        if certs.is_empty() {
            return Err(fail(ConfigzProblem::NoCertificate(ca.to_path_buf())));
        }
        config.root_cert = Some(certs);
    }
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    let client = Client::try_from(config).map_err(|e| fail(ConfigzProblem::Api(e)))?;
    let request = http::Request::get("/configz")
        .body(Vec::new())
        .map_err(|e| fail(ConfigzProblem::Request(e)))?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| fail(ConfigzProblem::Api(e)))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| fail(ConfigzProblem::Json(e)))?;
    sources::from_configz(&doc, &place).map_err(ConfigzError::Read)
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
