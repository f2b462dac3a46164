//! Probes: reachability checks tried every interval while a run observes, recorded on the
//! timeline as Up/Down changes.
//!
//! One job: run the experiment's probes and hand their changes to a sink (the runner's
//! timeline). Each probe is its own tokio task; only a change of result becomes an event
//! (the first result always does), so a probe tried every second does not flood the
//! timeline. How one try is made lives in [`command`] (local `sh -c` or a node's
//! transport), [`http`] (a GET over hyper with rustls), [`exec`] (`kubectl exec`'s path)
//! and [`logs`] (`kubectl logs`'s path).

pub(crate) mod command;
pub(crate) mod exec;
pub(crate) mod http;
pub(crate) mod logs;
pub(crate) mod query;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::execute::Executor;
use crate::experiment::model::{ProbeKind, ProbeSpec};
use crate::experiment::url_template::{self, TemplateError};
use crate::sanitize::clean;
use crate::timeline::Event;

/// Longest detail kept on the timeline: enough for an exit status or an error's gist.
const MAX_DETAIL: usize = 160;

/// Reads a probe command's stderr to its end, keeping its last
/// [`crate::execute::MAX_OUTPUT`] bytes as the transports do: a probe runs every second for
/// the whole run, and one that floods its stderr must not grow faultline's memory with it.
/// Everything is read, so the command never blocks on a full pipe.
pub(crate) async fn read_capped(reader: impl tokio::io::AsyncRead + Unpin) -> String {
    let (tail, _) = crate::execute::read_tail_async(reader, crate::execute::MAX_OUTPUT).await;
    String::from_utf8_lossy(tail.kept()).into_owned()
}

/// Where probe events go: called once per change, from the probe's task.
pub(crate) type ProbeSink = Arc<dyn Fn(Event) + Send + Sync>;

/// The result of one try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TryResult {
    /// Whether the probe counts as Up.
    pub up: bool,
    /// Why, for the timeline: `exit 0`, `HTTP 503`, `timed out after 3s`.
    pub detail: String,
}

impl TryResult {
    /// A result with its detail sanitized and shortened for the timeline.
    pub(crate) fn new(up: bool, detail: impl AsRef<str>) -> Self {
        TryResult {
            up,
            detail: short(detail.as_ref()),
        }
    }
}

/// Why probes could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    /// A command probe's `on` names a target the run did not resolve to one node.
    #[error(
        "probe `{probe}`: target `{target}` resolved to {count} nodes; a probe runs on exactly one"
    )]
    NotOneNode {
        /// Probe name.
        probe: String,
        /// Target name.
        target: String,
        /// How many nodes it resolved to.
        count: usize,
    },
    /// A `{internalIP:<target>}` in an HTTP probe's URL could not be filled.
    #[error("probe `{probe}`: {reason}")]
    Url {
        /// Probe name.
        probe: String,
        /// Which placeholder, and why.
        reason: String,
    },
    /// An exec or logs probe was given no pod (or no cluster) to work in.
    #[error("probe `{probe}`: no pod was chosen for it")]
    NoPod {
        /// Probe name.
        probe: String,
    },
    /// The HTTP probe's client could not be built (TLS roots, CA file).
    #[error("probe `{probe}`: {source}")]
    Http {
        /// Probe name.
        probe: String,
        /// What went wrong.
        source: http::HttpSetupError,
    },
}

/// How one probe makes a try.
enum Prober {
    /// `sh -c` on the machine running faultline.
    Local(String),
    /// A command on a node over its transport.
    Remote {
        executor: Arc<Executor>,
        node: String,
        command: String,
    },
    /// An HTTP(S) GET.
    Http(http::HttpProbe),
    /// A command in a pod through the API server and its kubelet.
    Exec(exec::ExecProbe),
    /// A pod's log through the API server and its kubelet.
    Logs(logs::LogsProbe),
}

/// What probes need from the run besides their specs: where the targets landed, and the
/// handles they act through.
pub(crate) struct ProbeContext<'a> {
    /// Target name → nodes (a probe's target must have exactly one).
    pub targets: &'a BTreeMap<String, Vec<String>>,
    /// Node name → `InternalIP`, for `{internalIP:<target>}` in HTTP URLs.
    pub internal_ips: &'a BTreeMap<String, String>,
    /// Exec and logs probe name → its pod (chosen when targets were resolved).
    pub exec_pods: &'a BTreeMap<String, String>,
    /// Node operations, for command probes with `on`.
    pub executor: Arc<Executor>,
    /// The API client, for exec probes; `None` where there is no cluster.
    pub client: Option<kube::Client>,
}

impl Prober {
    async fn attempt(&self, timeout: Duration) -> TryResult {
        match self {
            Prober::Local(cmd) => command::local(cmd, timeout).await,
            Prober::Remote {
                executor,
                node,
                command,
            } => command::remote(executor, node, command, timeout).await,
            Prober::Http(p) => p.attempt(timeout).await,
            Prober::Exec(p) => p.attempt(timeout).await,
            Prober::Logs(p) => p.attempt(timeout).await,
        }
    }
}

/// Running probes; [`Probes::stop`] ends them.
pub(crate) struct Probes {
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Probes {
    /// Starts one task per probe: a command probe with `on` runs on its target's single
    /// node, an HTTP URL's `{internalIP:<target>}` is filled, an exec probe runs in the pod
    /// chosen for it. Nothing is started when any probe cannot be set up, so a run never
    /// goes on with half its probes.
    pub(crate) fn start(
        specs: &[ProbeSpec],
        ctx: ProbeContext<'_>,
        sink: ProbeSink,
    ) -> Result<Probes, ProbeError> {
        let ProbeContext {
            targets,
            internal_ips,
            exec_pods,
            executor,
            client,
        } = ctx;
        let mut probers = Vec::new();
        for spec in specs {
            let prober = match &spec.kind {
                ProbeKind::Command { command, on: None } => Prober::Local(command.clone()),
                ProbeKind::Command {
                    command,
                    on: Some(target),
                } => {
                    let node = one_node(&spec.name, targets, target)?;
                    Prober::Remote {
                        executor: executor.clone(),
                        node,
                        command: command.clone(),
                    }
                }
                ProbeKind::Http {
                    url,
                    expect_status,
                    insecure,
                    ca_file,
                } => {
                    let url = url_template::fill(url, |target| {
                        let node = one_node(&spec.name, targets, target)
                            .map_err(|e| TemplateError::Value(e.to_string()))?;
                        internal_ips.get(&node).cloned().ok_or_else(|| {
                            TemplateError::Value(format!(
                                "node `{node}` (target `{target}`) has no InternalIP address"
                            ))
                        })
                    })
                    .map_err(|e| ProbeError::Url {
                        probe: spec.name.clone(),
                        reason: e.to_string(),
                    })?;
                    Prober::Http(
                        http::HttpProbe::new(&url, *expect_status, *insecure, ca_file.as_deref())
                            .map_err(|source| ProbeError::Http {
                            probe: spec.name.clone(),
                            source,
                        })?,
                    )
                }
                ProbeKind::Exec {
                    command,
                    workload,
                    container,
                    ..
                } => {
                    let (pods, pod) = pod_of(spec, &client, exec_pods, &workload.namespace)?;
                    Prober::Exec(exec::ExecProbe::new(
                        pods,
                        pod,
                        container.clone(),
                        command.clone(),
                    ))
                }
                ProbeKind::Logs {
                    workload,
                    container,
                    tail_lines,
                    ..
                } => {
                    let (pods, pod) = pod_of(spec, &client, exec_pods, &workload.namespace)?;
                    Prober::Logs(logs::LogsProbe::new(
                        pods,
                        pod,
                        container.clone(),
                        *tail_lines,
                    ))
                }
            };
            probers.push((spec.clone(), prober));
        }
        let cancel = CancellationToken::new();
        let tasks = probers
            .into_iter()
            .map(|(spec, prober)| tokio::spawn(run_one(spec, prober, sink.clone(), cancel.clone())))
            .collect();
        Ok(Probes { cancel, tasks })
    }

    /// Stops every probe and waits for the tasks to end; a try in flight is abandoned.
    pub(crate) async fn stop(self) {
        self.cancel.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// The pods of `namespace` and the pod chosen for an exec or logs probe.
fn pod_of(
    spec: &ProbeSpec,
    client: &Option<kube::Client>,
    exec_pods: &BTreeMap<String, String>,
    namespace: &str,
) -> Result<(kube::Api<k8s_openapi::api::core::v1::Pod>, String), ProbeError> {
    match (client, exec_pods.get(&spec.name)) {
        (Some(client), Some(pod)) => Ok((
            kube::Api::namespaced(client.clone(), namespace),
            pod.clone(),
        )),
        _ => Err(ProbeError::NoPod {
            probe: spec.name.clone(),
        }),
    }
}

/// The single node a probe's target resolved to.
fn one_node(
    probe: &str,
    targets: &BTreeMap<String, Vec<String>>,
    target: &str,
) -> Result<String, ProbeError> {
    let nodes = targets.get(target).map(Vec::as_slice).unwrap_or_default();
    match nodes {
        [node] => Ok(node.clone()),
        _ => Err(ProbeError::NotOneNode {
            probe: probe.to_string(),
            target: target.to_string(),
            count: nodes.len(),
        }),
    }
}

/// One probe's loop: try every interval, report changes, until cancelled.
async fn run_one(spec: ProbeSpec, prober: Prober, sink: ProbeSink, cancel: CancellationToken) {
    let mut ticker = tokio::time::interval(spec.interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last: Option<bool> = None;
    let mut failed: u64 = 0;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let result = tokio::select! {
            _ = cancel.cancelled() => return,
            r = prober.attempt(spec.timeout) => r,
        };
        if !result.up {
            failed += 1;
        }
        if last != Some(result.up) {
            last = Some(result.up);
            sink(Event::Probe {
                name: spec.name.clone(),
                up: result.up,
                detail: result.detail,
                failed: Some(failed),
            });
        }
    }
}

/// Sanitized, one line, at most [`MAX_DETAIL`] characters.
fn short(text: &str) -> String {
    let one_line = clean(text).split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= MAX_DETAIL {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(MAX_DETAIL - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests;
