//! The API transport (`transport: pod`): a node command carried by the Kubernetes API
//! alone, for clusters that give no SSH (managed node pools) and no Docker socket.
//!
//! A command runs in a privileged pod pinned to the node (`nodeName`, host PID and
//! network, the host's root filesystem at `/host`, tolerating every taint) in a namespace
//! labelled for the `privileged` Pod Security level: in the host's namespaces (`nsenter -t
//! 1 -m -u -i -n -p`) through the API's exec (the path `kubectl exec` takes), its exit
//! status read from the status the API server sends at the end of the stream. A run keeps
//! one such pod per node for its whole length ([`kept`]); a command with none kept (outside
//! a run, or after its node's kept pod went away) creates a short-lived one and deletes it
//! afterwards. Pods carry [`ACCESS_LABEL`], so `faultline restore` deletes any a killed run
//! left behind; each one also ends by itself (`activeDeadlineSeconds`).
//!
//! Exec goes through the node's kubelet: while the kubelet is stopped, or the node is cut
//! off from the API server, nothing reaches the node this way. So what must happen then
//! is armed on the host beforehand: the self-restore is a transient systemd timer
//! ([`SYSTEMD_ARM`]), and the run arms a fault's planned undo the same way when the
//! transport cannot carry it (see `crate::run`). A command that cuts the transport (a
//! kubelet stop) ends its own stream: the stream closing without a status after the
//! command was sent is then the expected outcome (the fault table says which:
//! [`crate::execute::NodeOp::cuts_transport`]), and the fault's proof is read through the
//! API.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, Namespace, Pod, PodSpec, SecurityContext, Toleration, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Status};
use std::future::Future;

use kube::api::{AttachParams, AttachedProcess, DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use thiserror::Error;

use super::output::{MAX_OUTPUT, bounded, read_tail_async};
use crate::inventory::PodSettings;
pub use crate::inventory::pod_defaults::{
    DEFAULT_IMAGE, DEFAULT_NAMESPACE, DEFAULT_START_TIMEOUT, SYSTEMD_ARM, SYSTEMD_DISARM,
};
use kept::KeptPods;

/// The label every node-access pod carries (value `true`), for `restore` to find them
/// and a drain to leave them.
pub use crate::cluster::actions::NODE_ACCESS_LABEL as ACCESS_LABEL;

/// The label naming the run (its id) that made a node-access pod, so that one run's
/// `restore` never removes another's.
pub const RUN_LABEL: &str = "faultline.dev/run";

/// The annotation naming the node a pod was made for (a label value cannot hold every
/// node name).
const NODE_ANNOTATION: &str = "faultline.dev/node";

/// The Pod Security labels that admit a privileged pod in a namespace.
pub const PRIVILEGED_LABELS: [(&str, &str); 3] = [
    ("pod-security.kubernetes.io/enforce", "privileged"),
    ("pod-security.kubernetes.io/audit", "privileged"),
    ("pod-security.kubernetes.io/warn", "privileged"),
];

/// Seconds a pod outlives the longest its command may take, before its own deadline ends
/// it (a pod left behind by a killed run must not stay privileged on the node for ever).
const LIFETIME_MARGIN: Duration = Duration::from_secs(60);

/// How often a starting pod is read.
const POLL: Duration = Duration::from_millis(250);

/// The argv run in the pod: the command in the host's mount, UTS, IPC, network and PID
/// namespaces (those of the node's PID 1), so it sees the node as a login shell would.
pub(crate) fn enter_argv(command: &str) -> Vec<String> {
    [
        "nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "sh", "-c",
    ]
    .iter()
    .map(|s| (*s).to_string())
    .chain(std::iter::once(command.to_string()))
    .collect()
}

/// How `plan` and messages show a command carried this way.
pub(crate) fn show(node: &str, settings: &PodSettings, command: &str) -> String {
    format!(
        "api exec in a privileged pod on {node} (namespace {}, image {}): nsenter -t 1 -m -u -i -n -p -- sh -c {}",
        settings.namespace,
        settings.image,
        shlex::try_quote(command).map_or_else(|_| command.to_string(), |q| q.into_owned())
    )
}

/// The namespace faultline creates for its pods: admitted at the `privileged` level.
pub(crate) fn namespace_object(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                PRIVILEGED_LABELS
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                    .chain(std::iter::once((ACCESS_LABEL.to_string(), "true".into())))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// The node-access pod for `node`: pinned to it by `nodeName` (no scheduler, so neither a
/// cordon nor a taint keeps it off), tolerating every taint (so a NotReady or unreachable
/// node does not evict it), in the host's PID and network namespaces, privileged, the
/// host's root at `/host`; its container sleeps, and the pod ends by itself after
/// `lifetime`. `run`: the run that makes it, as [`RUN_LABEL`], so that a `restore` that
/// could not take the cluster lock deletes only the pods of the runs in its journal.
pub(crate) fn pod_object(
    node: &str,
    settings: &PodSettings,
    lifetime: Duration,
    run: Option<&str>,
) -> Pod {
    let secs = lifetime.as_secs().max(1);
    // generateName keeps at most 58 characters of the prefix before its random suffix.
    let mut prefix: String = format!("faultline-{node}").chars().take(52).collect();
    while prefix.ends_with(['-', '.']) {
        prefix.pop();
    }
    prefix.push('-');
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(prefix),
            namespace: Some(settings.namespace.clone()),
            labels: Some(
                std::iter::once((ACCESS_LABEL.to_string(), "true".to_string()))
                    .chain(run.map(|r| (RUN_LABEL.to_string(), r.to_string())))
                    .collect(),
            ),
            annotations: Some([(NODE_ANNOTATION.to_string(), node.to_string())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_string()),
            host_pid: Some(true),
            host_network: Some(true),
            host_ipc: Some(true),
            restart_policy: Some("Never".into()),
            active_deadline_seconds: Some(i64::try_from(secs).unwrap_or(i64::MAX)),
            termination_grace_period_seconds: Some(1),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            tolerations: Some(vec![Toleration {
                operator: Some("Exists".into()),
                ..Toleration::default()
            }]),
            containers: vec![Container {
                name: "node".into(),
                image: Some(settings.image.clone()),
                image_pull_policy: Some("IfNotPresent".into()),
                command: Some(vec!["sleep".into(), secs.to_string()]),
                security_context: Some(SecurityContext {
                    privileged: Some(true),
                    ..SecurityContext::default()
                }),
                volume_mounts: Some(vec![VolumeMount {
                    name: "host".into(),
                    mount_path: "/host".into(),
                    ..VolumeMount::default()
                }]),
                ..Container::default()
            }],
            volumes: Some(vec![Volume {
                name: "host".into(),
                host_path: Some(HostPathVolumeSource {
                    path: "/".into(),
                    ..HostPathVolumeSource::default()
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// How a command carried through a node-access pod ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PodEnd {
    /// It ended within its limit with this exit code.
    Exited {
        /// Exit code.
        code: i32,
        /// stdout then stderr, at most [`MAX_OUTPUT`] bytes.
        output: String,
    },
    /// The stream closed without a status after the command was sent: the kubelet or the
    /// node went away under it.
    Dropped {
        /// Output seen before.
        output: String,
    },
    /// It ended after its limit, within the wait for the node's own deadline.
    Late {
        /// Exit code.
        code: i32,
        /// Output.
        output: String,
    },
    /// Its end was not heard: never sent (`sent: false`, opening the stream took the whole
    /// limit) or sent and not heard ending (the stream was then cut).
    TimedOut {
        /// Whether the command reached the node.
        sent: bool,
    },
}

/// Why a command could not be carried through a node-access pod; nothing ran on the node
/// unless it says so.
#[derive(Debug, Error)]
pub enum PodError {
    /// The API refused or failed a request.
    #[error("{what}: {source}")]
    Api {
        /// What was asked.
        what: String,
        /// Cause.
        source: Box<kube::Error>,
    },
    /// The pod did not run in time, or could not.
    #[error(
        "the node-access pod {namespace}/{pod} did not run within {after:?} ({why}); nothing ran on the node"
    )]
    NotStarted {
        /// Namespace.
        namespace: String,
        /// Pod.
        pod: String,
        /// Its start timeout.
        after: Duration,
        /// What the pod said last.
        why: String,
    },
    /// The exec stream could not be opened, or it ended with a failure that is not an
    /// exit code (the API server could not reach the kubelet).
    #[error("exec in {namespace}/{pod}: {message}")]
    Exec {
        /// Namespace.
        namespace: String,
        /// Pod.
        pod: String,
        /// What the API server said.
        message: String,
    },
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> PodError {
    let what = what.into();
    move |source| PodError::Api {
        what,
        source: Box::new(source),
    }
}

/// Creates the namespace when it is missing (labelled for privileged pods); one that
/// exists is left as it is (`doctor` says whether it admits the pod).
pub(crate) async fn ensure_namespace(client: &Client, name: &str) -> Result<(), PodError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(name)
        .await
        .map_err(api_error(format!("reading namespace {name}")))?
        .is_some()
    {
        return Ok(());
    }
    match namespaces
        .create(&PostParams::default(), &namespace_object(name))
        .await
    {
        Ok(_) => Ok(()),
        // Another command created it meanwhile.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(api_error(format!("creating namespace {name}"))(e)),
    }
}

/// Runs `command` (already wrapped with the node's deadline) on `node`: in the pod kept
/// there for the run when `kept` has one that outlives the command, else through a fresh
/// node-access pod, deleted afterwards. `limit` is the command's time limit, starting a
/// pod included; `grace` how long past it faultline listens for the node's deadline to end
/// it.
pub(crate) async fn run(
    client: &Client,
    (node, settings, run): (&str, &PodSettings, Option<&str>),
    kept: &KeptPods,
    command: &str,
    limit: Duration,
    grace: Duration,
) -> Result<PodEnd, PodError> {
    // Starting the pod counts within the command's limit, as connecting does over SSH: a
    // caller's own wait (`Executor::longest_wait`) holds for every transport.
    let began = tokio::time::Instant::now();
    if let Some(ended) = run_in_kept(kept, node, command, began, limit, grace).await {
        return ended;
    }
    let lifetime = settings.start_timeout + limit + grace + LIFETIME_MARGIN;
    let within = limit.saturating_sub(began.elapsed());
    let pod = AccessPod::start(client, (node, settings, run), lifetime, within).await?;
    let result = async {
        let spent = began.elapsed();
        let remaining = limit.saturating_sub(spent);
        if remaining.is_zero() {
            return Ok(PodEnd::TimedOut { sent: false });
        }
        // The node's deadline counts from the command's start: listen as long past the
        // remaining limit as it may take.
        let process = pod.open_exec(command, false, remaining).await?;
        let Some(mut process) = process else {
            return Ok(PodEnd::TimedOut { sent: false });
        };
        let status = process.take_status();
        pod.hear_out(process, status, remaining, grace + spent)
            .await
    }
    .await;
    pod.delete().await;
    result
}

/// [`run`] in the pod kept on `node`: `None` when there is none kept for that long, or it
/// turned the command away unrun (its exec could not be opened, or the kubelet refused it
/// with a status that is not an exit code: after a kubelet restart it says "pod does not
/// exist" until it has listed its pods again); the command then needs a pod of its own.
async fn run_in_kept(
    kept: &KeptPods,
    node: &str,
    command: &str,
    began: tokio::time::Instant,
    limit: Duration,
    grace: Duration,
) -> Option<Result<PodEnd, PodError>> {
    let (pod, mut process) =
        match kept_exec(kept, node, command, false, limit, began + limit + grace).await {
            KeptExec::Opened(pod, process) => (pod, process),
            KeptExec::TimedOut => return Some(Ok(PodEnd::TimedOut { sent: false })),
            KeptExec::NoneKept => return None,
        };
    let spent = began.elapsed();
    let status = process.take_status();
    let ended = pod
        .hear_out(process, status, limit.saturating_sub(spent), grace + spent)
        .await;
    match ended {
        Err(PodError::Exec { message, .. }) if began.elapsed() < limit => {
            tracing::debug!(
                node,
                "the kept node-access pod turned a command away: {message}"
            );
            kept.forget(node, &pod);
            None
        }
        ended => Some(ended),
    }
}

/// What came of opening a command's exec in the pod kept on its node.
pub(crate) enum KeptExec {
    /// It is open: the command was sent.
    Opened(Arc<AccessPod>, AttachedProcess),
    /// Opening took the whole limit; nothing was sent, and there is no time left to send
    /// it another way.
    TimedOut,
    /// No pod is kept there for that long, or it no longer takes an exec (it is out of
    /// the pool now): nothing was sent, the command needs a pod of its own.
    NoneKept,
}

/// Opens `command`'s exec (its standard input held open when `stdin`) within `within` in
/// the pod kept on `node`, when one outlives `needed_until`.
pub(crate) async fn kept_exec(
    kept: &KeptPods,
    node: &str,
    command: &str,
    stdin: bool,
    within: Duration,
    needed_until: tokio::time::Instant,
) -> KeptExec {
    let Some(pod) = kept.get(node, needed_until) else {
        return KeptExec::NoneKept;
    };
    match pod.open_exec(command, stdin, within).await {
        Ok(Some(process)) => KeptExec::Opened(pod, process),
        Ok(None) => KeptExec::TimedOut,
        Err(e) => {
            tracing::debug!(node, "no exec in the kept node-access pod: {e}");
            kept.forget(node, &pod);
            KeptExec::NoneKept
        }
    }
}

/// The pod a command runs in: one started for it, deleted once the command is over, or
/// the pod kept on its node for the run, which outlives it.
pub(crate) enum PodInUse {
    /// Started for this command.
    Own(Box<AccessPod>),
    /// The node's kept pod ([`kept`]).
    Kept(Arc<AccessPod>),
}

impl std::ops::Deref for PodInUse {
    type Target = AccessPod;

    fn deref(&self) -> &AccessPod {
        match self {
            PodInUse::Own(pod) => pod,
            PodInUse::Kept(pod) => pod,
        }
    }
}

impl PodInUse {
    /// The command is over: deletes the pod started for it; a kept pod stays.
    pub(crate) async fn done(self) {
        if let PodInUse::Own(pod) = self {
            pod.delete().await;
        }
    }
}

/// A node-access pod created for one command and running on its node; deleted by
/// [`AccessPod::delete`], or when dropped unfinished (an outer timeout, a cancelled run)
/// by a deletion spawned on the runtime; left behind only without a runtime or an API
/// server, to its own deadline and `restore`.
pub(crate) struct AccessPod {
    pods: Api<Pod>,
    namespace: String,
    name: String,
    node: String,
    /// Set once [`AccessPod::delete`] has run: nothing is left for `Drop` to do.
    deleted: std::sync::atomic::AtomicBool,
}

impl AccessPod {
    /// Creates the pod on `node`, to end by itself after `lifetime`, and waits until it
    /// runs, at most the inventory's start timeout and `within`; a pod that does not run
    /// is deleted again.
    pub(crate) async fn start(
        client: &Client,
        (node, settings, run): (&str, &PodSettings, Option<&str>),
        lifetime: Duration,
        within: Duration,
    ) -> Result<AccessPod, PodError> {
        let began = tokio::time::Instant::now();
        if settings.create_namespace {
            ensure_namespace(client, &settings.namespace).await?;
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), &settings.namespace);
        let created = pods
            .create(
                &PostParams::default(),
                &pod_object(node, settings, lifetime, run),
            )
            .await
            .map_err(api_error(format!(
                "creating a privileged pod on node {node} in namespace {}",
                settings.namespace
            )))?;
        let pod = AccessPod {
            pods,
            namespace: settings.namespace.clone(),
            name: created.metadata.name.unwrap_or_default(),
            node: node.to_string(),
            deleted: std::sync::atomic::AtomicBool::new(false),
        };
        let start_within = settings
            .start_timeout
            .min(within.saturating_sub(began.elapsed()));
        match wait_running(&pod.pods, &pod.namespace, &pod.name, start_within).await {
            Ok(()) => Ok(pod),
            Err(e) => {
                pod.delete().await;
                Err(e)
            }
        }
    }

    fn exec_error(&self, message: String) -> PodError {
        PodError::Exec {
            namespace: self.namespace.clone(),
            pod: self.name.clone(),
            message,
        }
    }

    /// Opens the API's exec of `command` in the host's namespaces, with its standard
    /// input held open when `stdin`; `None` when opening took longer than `within`.
    pub(crate) async fn open_exec(
        &self,
        command: &str,
        stdin: bool,
        within: Duration,
    ) -> Result<Option<AttachedProcess>, PodError> {
        let params = AttachParams::default()
            .stdin(stdin)
            .stdout(true)
            .stderr(true);
        let opened = tokio::time::timeout(
            within,
            self.pods.exec(&self.name, enter_argv(command), &params),
        )
        .await;
        match opened {
            Err(_) => Ok(None),
            Ok(Err(e)) => Err(self.exec_error(e.to_string())),
            Ok(Ok(p)) => Ok(Some(p)),
        }
    }

    /// Reads the command's output to its end and classifies how it ended: within
    /// `limit`, within `grace` more (the node's own deadline), or not heard at all.
    pub(crate) async fn hear_out(
        &self,
        mut process: AttachedProcess,
        status: Option<impl Future<Output = Option<Status>>>,
        limit: Duration,
        grace: Duration,
    ) -> Result<PodEnd, PodError> {
        let stdout = process.stdout();
        let stderr = process.stderr();
        let finished = async move {
            let read = |r: Option<_>| async move {
                match r {
                    Some(r) => read_tail_async(r, MAX_OUTPUT).await.0,
                    None => super::output::Tail::new(MAX_OUTPUT),
                }
            };
            let (out, err) = futures::join!(read(stdout), read(stderr));
            let status = match status {
                Some(s) => s.await,
                None => None,
            };
            (bounded(&out, &err), status)
        };
        tokio::pin!(finished);
        let (late, (output, status)) = match tokio::time::timeout(limit, &mut finished).await {
            Ok(done) => (false, done),
            Err(_) => match tokio::time::timeout(grace, &mut finished).await {
                Ok(done) => (true, done),
                Err(_) => {
                    process.abort();
                    return Ok(PodEnd::TimedOut { sent: true });
                }
            },
        };
        let _ = process.join().await;
        match (exit_code(status.as_ref()), late) {
            (ExitOf::Code(code), false) => Ok(PodEnd::Exited { code, output }),
            (ExitOf::Code(code), true) => Ok(PodEnd::Late { code, output }),
            (ExitOf::NoStatus, _) => Ok(PodEnd::Dropped { output }),
            (ExitOf::Refused(message), _) => Err(self.exec_error(message)),
        }
    }

    /// Deletes the pod, returning at once: a pod on a node whose kubelet is away stays
    /// Terminating until it is back, and the kubelet then ends it; its own deadline ends
    /// it in any case.
    pub(crate) async fn delete(&self) {
        if !self.deleted.swap(true, std::sync::atomic::Ordering::SeqCst) {
            delete_access_pod(&self.pods, &self.name, &self.node).await;
        }
    }
}

#[cfg(test)]
impl AccessPod {
    /// A handle on pod `name` that was never created (already deleted as far as `Drop`
    /// is concerned), for tests of what holds pods.
    pub(crate) fn standing_in(client: Client, name: &str) -> AccessPod {
        AccessPod {
            pods: Api::namespaced(client, DEFAULT_NAMESPACE),
            namespace: DEFAULT_NAMESPACE.to_string(),
            name: name.to_string(),
            node: String::new(),
            deleted: std::sync::atomic::AtomicBool::new(true),
        }
    }

    /// A handle on pod `name`, not deleted yet: its deletion (through a `client` that
    /// reaches nothing, in tests) is still to be sent.
    pub(crate) fn standing_in_live(client: Client, name: &str) -> AccessPod {
        let pod = AccessPod::standing_in(client, name);
        pod.deleted
            .store(false, std::sync::atomic::Ordering::SeqCst);
        pod
    }

    /// The pod's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether its deletion was sent (or it was never created).
    pub(crate) fn is_deleted(&self) -> bool {
        self.deleted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for AccessPod {
    fn drop(&mut self) {
        if *self.deleted.get_mut() {
            return;
        }
        // Dropped with its command unheard: its exec stream is closed with it, and the
        // pod is deleted now rather than at its deadline (minutes away for a long fault).
        let (pods, name, node) = (self.pods.clone(), self.name.clone(), self.node.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                DROPPED_DELETIONS.spawn_on(
                    async move { delete_access_pod(&pods, &name, &node).await },
                    &runtime,
                );
            }
            Err(_) => tracing::debug!(
                node = node,
                "node-access pod {name} is left to its own deadline: no runtime to delete it"
            ),
        }
    }
}

/// The deletions spawned by node-access pods dropped unfinished ([`AccessPod`]'s `Drop`).
/// A task still pending when the process exits is never run, and its pod would stay
/// privileged on its node until its deadline: [`send_pending_deletions`] waits for them.
static DROPPED_DELETIONS: std::sync::LazyLock<tokio_util::task::TaskTracker> =
    std::sync::LazyLock::new(tokio_util::task::TaskTracker::new);

/// Waits, at most `within`, for the deletions of node-access pods dropped unfinished to be
/// sent: the last thing a command does before the process exits, since a pod dropped in a
/// run's last moments (a command cut off by its outer timeout, a pod its holder let go at
/// the end) is deleted by a task spawned then. Returns whether all were sent in time.
pub async fn send_pending_deletions(within: Duration) -> bool {
    DROPPED_DELETIONS.close();
    let sent = tokio::time::timeout(within, DROPPED_DELETIONS.wait())
        .await
        .is_ok();
    // Later drops (a test's next run in this process) are waited for again.
    DROPPED_DELETIONS.reopen();
    sent
}

/// Deletes one node-access pod with a short grace period, warning when it cannot (one
/// gone already is not a failure: its deletion may have been asked twice).
async fn delete_access_pod(pods: &Api<Pod>, name: &str, node: &str) {
    let params = DeleteParams {
        grace_period_seconds: Some(1),
        ..DeleteParams::default()
    };
    match pods.delete(name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_not_found() => {}
        Err(e) => tracing::warn!(
            node = node,
            "could not delete the node-access pod {name}: {e}"
        ),
    }
}

/// Waits for the pod's container to run; fails at once when it cannot (an image that
/// cannot be pulled, a pod the kubelet rejected).
async fn wait_running(
    pods: &Api<Pod>,
    namespace: &str,
    name: &str,
    within: Duration,
) -> Result<(), PodError> {
    let deadline = tokio::time::Instant::now() + within;
    let not_started = |why: String| PodError::NotStarted {
        namespace: namespace.to_string(),
        pod: name.to_string(),
        after: within,
        why,
    };
    let mut last = "not scheduled to the node's kubelet yet".to_string();
    loop {
        if let Some(pod) = pods
            .get_opt(name)
            .await
            .map_err(api_error(format!("reading pod {namespace}/{name}")))?
        {
            match start_state(&pod) {
                StartState::Running => return Ok(()),
                StartState::Failed(why) => return Err(not_started(why)),
                StartState::Waiting(why) => last = why,
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(not_started(last));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Where a node-access pod is on its way to running.
#[derive(Debug, PartialEq, Eq)]
enum StartState {
    Running,
    /// It will not run: why.
    Failed(String),
    /// Not yet: what it says.
    Waiting(String),
}

/// Image-pull and configuration reasons a waiting container does not recover from by
/// itself within a command's time.
const HOPELESS: &[&str] = &[
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "ImagePullBackOff",
    "ErrImagePull",
];

fn start_state(pod: &Pod) -> StartState {
    let status = pod.status.clone().unwrap_or_default();
    let phase = status.phase.clone().unwrap_or_else(|| "Pending".into());
    if matches!(phase.as_str(), "Failed" | "Succeeded") {
        let why = status.reason.or(status.message).unwrap_or_default();
        return StartState::Failed(format!("phase {phase} {why}").trim().to_string());
    }
    let container = status
        .container_statuses
        .unwrap_or_default()
        .into_iter()
        .next();
    let Some(state) = container.and_then(|c| c.state) else {
        return StartState::Waiting(format!("phase {phase}"));
    };
    if state.running.is_some() {
        return StartState::Running;
    }
    if let Some(t) = state.terminated {
        return StartState::Failed(format!(
            "its container ended: {}",
            t.reason.unwrap_or_else(|| format!("exit {}", t.exit_code))
        ));
    }
    match state.waiting {
        Some(w) => {
            let reason = w.reason.unwrap_or_default();
            let said = format!("{reason}: {}", w.message.unwrap_or_default());
            if HOPELESS.contains(&reason.as_str()) {
                StartState::Failed(said)
            } else {
                StartState::Waiting(said)
            }
        }
        None => StartState::Waiting(format!("phase {phase}")),
    }
}

/// What the status at the end of an exec stream says about the command (shared with the
/// exec probe, which reads the same stream end).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ExitOf {
    /// It exited with this code.
    Code(i32),
    /// The stream ended without a status.
    NoStatus,
    /// A failure that is not the command's exit (the API server could not reach the
    /// kubelet, the container is gone): what it said.
    Refused(String),
}

/// The command's exit code from the status the API server sends at the end of an exec
/// stream: Success is 0, a `NonZeroExitCode` failure carries its code in an `ExitCode`
/// cause; anything else is a refusal, with what the API server said.
pub(crate) fn exit_code(status: Option<&Status>) -> ExitOf {
    let Some(status) = status else {
        return ExitOf::NoStatus;
    };
    if status.status.as_deref() == Some("Success") {
        return ExitOf::Code(0);
    }
    let code = status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .and_then(|causes| {
            causes
                .iter()
                .find(|c| c.reason.as_deref() == Some("ExitCode"))
        })
        .and_then(|c| c.message.as_deref())
        .and_then(|m| m.trim().parse::<i32>().ok());
    match code {
        Some(code) => ExitOf::Code(code),
        None => ExitOf::Refused(
            status
                .message
                .clone()
                .unwrap_or_else(|| "exec failed without a message".into()),
        ),
    }
}

/// Which node-access pods a sweep deletes ([`delete_leftovers`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Leftovers<'a> {
    /// Only the pods labelled ([`RUN_LABEL`]) with one of these runs (a `restore` that
    /// could not take the cluster lock must not delete a live run's pods).
    pub only_runs: Option<&'a std::collections::BTreeSet<String>>,
    /// Never the pods of these runs (runs still alive on this machine's journal).
    pub except_runs: Option<&'a std::collections::BTreeSet<String>>,
}

/// What a sweep of leftover node-access pods did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// `namespace/name` of each pod deleted.
    pub deleted: Vec<String>,
    /// What could not be listed or deleted, each with why; the sweep went on past each.
    pub failed: Vec<String>,
}

/// Deletes the node-access pods left in `namespaces` (the inventory's API transport
/// namespaces: faultline's own, never a tenant's, where the label means nothing) by a run
/// killed while a command ran, except those already being deleted and as `which` says.
/// A pod that cannot be deleted is reported and the sweep goes on to the next.
pub async fn delete_leftovers(
    client: &Client,
    namespaces: &std::collections::BTreeSet<String>,
    which: Leftovers<'_>,
) -> Swept {
    let mut swept = Swept::default();
    for ns in namespaces {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let found = match pods
            .list(&ListParams::default().labels(&format!("{ACCESS_LABEL}=true")))
            .await
        {
            Ok(found) => found,
            Err(e) => {
                let e = api_error(format!("listing node-access pods in namespace {ns}"))(e);
                swept.failed.push(e.to_string());
                continue;
            }
        };
        for pod in found.items {
            if !left_behind(&pod, which) {
                continue;
            }
            let Some(name) = pod.metadata.name else {
                continue;
            };
            match pods.delete(&name, &DeleteParams::default()).await {
                Ok(_) => swept.deleted.push(format!("{ns}/{name}")),
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => swept
                    .failed
                    .push(api_error(format!("deleting pod {ns}/{name}"))(e).to_string()),
            }
        }
    }
    swept
}

/// Deletes the node-access pods of run `run` left in `namespace`, except those already
/// being deleted; returns the name of each. A run's end calls it after deleting the pods
/// it knows of: one it lost track of (its creation answered after the caller gave up, its
/// deletion spawned too late) is found by its label. Needs only `list` on pods, which the
/// observer has, and `delete` in the namespace, which the API transport has.
pub(crate) async fn delete_runs_pods(
    client: &Client,
    namespace: &str,
    run: &str,
) -> Result<Vec<String>, PodError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let found = pods
        .list(&ListParams::default().labels(&format!("{ACCESS_LABEL}=true,{RUN_LABEL}={run}")))
        .await
        .map_err(api_error(format!(
            "listing the node-access pods in namespace {namespace}"
        )))?;
    let mut deleted = Vec::new();
    for pod in found.items {
        // The label selector already names the run: only "not being deleted" is left.
        if !left_behind(&pod, Leftovers::default()) {
            continue;
        }
        let Some(name) = pod.metadata.name else {
            continue;
        };
        let node = pod.spec.and_then(|spec| spec.node_name).unwrap_or_default();
        delete_access_pod(&pods, &name, &node).await;
        deleted.push(name);
    }
    Ok(deleted)
}

/// Whether `pod` is a node-access pod a sweep deletes: not being deleted already (after
/// its command, or on a node whose kubelet is away until it returns), and of a run `which`
/// lets it delete.
fn left_behind(pod: &Pod, which: Leftovers<'_>) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let run = pod.metadata.labels.as_ref().and_then(|l| l.get(RUN_LABEL));
    let wanted = which
        .only_runs
        .is_none_or(|runs| run.is_some_and(|r| runs.contains(r)));
    let spared = which
        .except_runs
        .is_some_and(|runs| run.is_some_and(|r| runs.contains(r)));
    wanted && !spared
}

pub(crate) mod kept;
pub(crate) mod primed;
pub mod watcher;

#[cfg(test)]
mod tests;
