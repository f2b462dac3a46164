//! The validated experiment: what the runner executes and the judge checks.
//!
//! These types are produced only by validation (`experiment::load` / `parse`), never by
//! hand-written YAML mapping in other stages, so every later stage can trust them: every
//! target name used by a step or an expectation exists, every step name referenced exists,
//! every bound only uses symbols the run can resolve.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One experiment, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    /// Short identifier, used as the JUnit test-suite name and in report file names.
    pub name: String,
    /// Free text shown in reports: what the experiment proves and which observation it comes from.
    pub description: String,
    /// Free labels for selecting experiments (`--tag`).
    pub tags: Vec<String>,
    /// What the cluster must offer for the experiment to mean anything at all (e.g.
    /// `graceful-node-shutdown`, see [`crate::capability`]); a run on a cluster without
    /// one is skipped with the reason. Records written before it existed read as none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// The file this experiment was read from, for messages and for resolving relative paths.
    pub source: PathBuf,
    /// Default namespace for workload references written without one.
    pub namespace: String,
    /// Named node sets, resolved against the cluster at run time.
    pub targets: Vec<TargetSpec>,
    /// Manifests applied before the fault and waited for.
    pub setup: Setup,
    /// What is removed after the run.
    pub teardown: Teardown,
    /// Actions on a timeline.
    pub steps: Vec<Step>,
    /// Expectations over the observed timeline; each is one JUnit test case.
    pub expectations: Vec<Expectation>,
    /// How long to keep observing, and what to observe.
    pub observe: ObserveSpec,
    /// Blast-radius settings the experiment opts into explicitly.
    pub safety: SafetySpec,
    /// Reachability checks run during the run and recorded as Up/Down on the timeline,
    /// so "the service stayed reachable" is judged instead of checked by hand with curl.
    #[serde(default)]
    pub probes: Vec<ProbeSpec>,
    /// Conditions that stop the run by itself, undoing every fault at once, when the
    /// cluster hurts more than the experiment planned. Records written before abort
    /// conditions existed read as the defaults.
    #[serde(default)]
    pub abort: AbortSpec,
    /// `expect: conformance` (or a `- conformance: true` item beside hand-written
    /// expectations): the run also judges every transition the node failure model
    /// ([`crate::failure_model`]) predicts for its faults, from the cluster's timers and
    /// the pods it observes, so that no bound has to be written by hand. Records written
    /// before it read as `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub conformance: bool,
}

/// The abort conditions of an experiment (`abort:`): watched on the timeline from the
/// start until observation ends; the first one that trips ends the run (exit 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbortSpec {
    /// Every condition, the defaults (unless switched `off`) first.
    pub conditions: Vec<AbortCondition>,
}

impl AbortSpec {
    /// How long a node that is not a target may be NotReady by default: not at all.
    pub const DEFAULT_NODE_NOT_READY: Duration = Duration::ZERO;
    /// How long the API may be unreachable by default before the run aborts.
    pub const DEFAULT_API_UNREACHABLE: Duration = Duration::from_secs(60);
    /// How often a Prometheus query is asked by default.
    pub const DEFAULT_QUERY_EVERY: Duration = Duration::from_secs(10);

    /// The conditions every experiment has unless it switches them `off`.
    pub fn defaults() -> Self {
        AbortSpec {
            conditions: vec![
                AbortCondition::node_not_ready(Bound::fixed(Self::DEFAULT_NODE_NOT_READY)),
                AbortCondition::api_unreachable(Bound::fixed(Self::DEFAULT_API_UNREACHABLE)),
            ],
        }
    }
}

impl Default for AbortSpec {
    /// [`AbortSpec::defaults`]: what an experiment without `abort:` gets.
    fn default() -> Self {
        Self::defaults()
    }
}

/// One abort condition: a bad state that, once it has lasted `hold`, stops the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbortCondition {
    /// How reports name it: "a node that is not a target goes NotReady".
    pub name: String,
    /// What is watched.
    pub kind: AbortKind,
    /// How long the bad state must last before the condition trips (`for:`); zero trips
    /// at once.
    pub hold: Bound,
}

impl AbortCondition {
    /// The default node condition, with its hold.
    pub fn node_not_ready(hold: Bound) -> Self {
        AbortCondition {
            name: with_hold("a node that is not a target goes NotReady", &hold),
            kind: AbortKind::NodeNotReady,
            hold,
        }
    }

    /// The default API condition, with its hold.
    pub fn api_unreachable(hold: Bound) -> Self {
        AbortCondition {
            name: with_hold("the API server is unreachable", &hold),
            kind: AbortKind::ApiUnreachable,
            hold,
        }
    }
}

/// A condition's name with its hold, when it has one: "… for 30s".
pub fn with_hold(what: &str, hold: &Bound) -> String {
    if hold
        .terms
        .iter()
        .all(|t| t.symbol == BoundSymbol::Fixed(Duration::ZERO))
    {
        what.to_string()
    } else {
        format!("{what} for {hold}")
    }
}

/// What an abort condition watches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AbortKind {
    /// A node that is not a target goes from Ready to NotReady (or is deleted).
    NodeNotReady,
    /// faultline's health check of the API server (`/readyz`, through every endpoint it
    /// knows) fails.
    ApiUnreachable,
    /// More than `more_than` of a workload's desired pods are not Ready.
    PodsNotReady {
        /// The workload.
        workload: WorkloadRef,
        /// How many not-Ready pods are tolerated.
        more_than: u32,
    },
    /// One of the experiment's probes is Down.
    ProbeDown {
        /// The probe.
        probe: String,
    },
    /// A Prometheus instant query crosses a threshold; no data counts as crossed.
    Query {
        /// The PromQL expression, asked of the inventory's `prometheus.url`.
        query: String,
        /// Which side of which value is bad.
        threshold: Threshold,
        /// How often it is asked.
        every: Duration,
    },
}

/// The bad side of a query's threshold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Threshold {
    /// A value above this trips.
    Above(f64),
    /// A value below this trips.
    Below(f64),
}

impl Threshold {
    /// Whether `value` lies on the bad side.
    pub fn crossed(self, value: f64) -> bool {
        match self {
            Threshold::Above(t) => value > t,
            Threshold::Below(t) => value < t,
        }
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Threshold::Above(t) => write!(f, "above {t}"),
            Threshold::Below(t) => write!(f, "below {t}"),
        }
    }
}

/// A named reachability check that runs every `interval` while the run observes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeSpec {
    /// Name expectations use (`probe: <name>`).
    pub name: String,
    /// What is tried.
    pub kind: ProbeKind,
    /// Time between the starts of two tries.
    pub interval: Duration,
    /// Longest a try may take; a try that takes longer counts as Down.
    pub timeout: Duration,
}

/// How a probe decides Up or Down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ProbeKind {
    /// A shell command; exit status 0 is Up.
    Command {
        /// Command text, run by `sh -c` (locally) or the node's shell.
        command: String,
        /// Target whose single node runs the command over its transport; `None` runs it
        /// on the machine running faultline.
        on: Option<String>,
    },
    /// An HTTP(S) GET; the expected status (any 2xx by default) is Up.
    Http {
        /// The URL fetched.
        url: String,
        /// The status that counts as Up; `None` = any 2xx.
        expect_status: Option<u16>,
        /// Skip TLS certificate verification (self-signed API servers in labs).
        insecure: bool,
        /// PEM file with the CA that signs the server's certificate.
        ca_file: Option<PathBuf>,
    },
    /// A command run in a pod's container through the API server and the pod's kubelet,
    /// as `kubectl exec` does; exit status 0 is Up. Shows when `kubectl exec` (and the
    /// kubelet's other streaming endpoints) stop and start working on a node.
    Exec {
        /// The command (argv), run without a shell unless it names one.
        command: Vec<String>,
        /// The workload whose pod is used.
        workload: WorkloadRef,
        /// Target of exactly one node; the workload's pod on that node when probes start
        /// is used for the whole run, so a pod that comes back under its name is seen again.
        on: String,
        /// Container name; `None` uses the pod's default container.
        container: Option<String>,
    },
    /// A read of a pod's container log through the API server and the pod's kubelet, as
    /// `kubectl logs` does; a log served (even an empty one) is Up. Shows when `kubectl
    /// logs` stops and starts working for the pods on a node.
    Logs {
        /// The workload whose pod is read.
        workload: WorkloadRef,
        /// Target of exactly one node; the workload's pod on it when probes start is read
        /// for the whole run.
        on: String,
        /// Container name; `None` reads the pod's default container.
        container: Option<String>,
        /// How many lines from the end of the log each try reads.
        tail_lines: u32,
    },
}

impl ProbeKind {
    /// The workload and one-node target whose pod the probe works in (`exec` and `logs`).
    pub fn pod(&self) -> Option<(&WorkloadRef, &str)> {
        match self {
            ProbeKind::Exec { workload, on, .. } | ProbeKind::Logs { workload, on, .. } => {
                Some((workload, on))
            }
            ProbeKind::Command { .. } | ProbeKind::Http { .. } => None,
        }
    }
}

/// A named set of nodes chosen by a selector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetSpec {
    /// Name steps and expectations use to refer to this set.
    pub name: String,
    /// How candidate nodes are chosen.
    pub selector: NodeSelector,
    /// How many of the matching nodes to take; `None` takes all of them.
    pub count: Option<u32>,
}

/// Criteria for choosing nodes; every criterion given must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSelector {
    /// Exact node names.
    pub names: Vec<String>,
    /// Label equality requirements.
    pub labels: BTreeMap<String, String>,
    /// Node role, from the `node-role.kubernetes.io/*` labels.
    pub role: Option<NodeRole>,
    /// Only nodes currently running pods of this workload.
    pub running_pods_of: Option<WorkloadRef>,
    /// Never pick a node already chosen by these earlier targets.
    pub exclude_targets: Vec<String>,
}

/// Role of a node as Kubernetes labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeRole {
    /// Any node without a control-plane role label.
    Worker,
    /// Nodes labelled `node-role.kubernetes.io/control-plane` (or legacy `master`).
    ControlPlane,
}

/// A workload named as `kind/name` in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WorkloadRef {
    /// The workload's kind.
    pub kind: WorkloadKind,
    /// Namespace (defaulted from the experiment's namespace).
    pub namespace: String,
    /// Object name.
    pub name: String,
}

/// The workload kinds faultline follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WorkloadKind {
    /// apps/v1 Deployment (pods owned through a ReplicaSet).
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
}

/// Manifests to apply before the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// Manifest files (multi-document YAML), resolved relative to the experiment file's directory.
    pub manifests: Vec<PathBuf>,
    /// How long to wait for applied workloads to be fully available.
    pub wait_timeout: Duration,
}

/// What to remove after the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Teardown {
    /// Delete the setup manifests' objects after the run.
    pub delete_manifests: bool,
}

/// One action at a point of the experiment's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Unique name; expectations and later steps refer to it.
    pub name: String,
    /// When the step runs.
    pub at: StepTime,
    /// What it does.
    pub action: Action,
    /// The target (node set) it acts on; `None` only for actions that need none.
    pub target: Option<String>,
    /// Upper bound on how long the action itself may take.
    pub timeout: Duration,
    /// `roll:`: the step is a rolling step, its action applied to each node of its target
    /// in turn (`crate::experiment::roll` expands it, once the target is resolved, into one
    /// step per node). Absent from records written before rolling steps existed, and from
    /// the steps of an expanded roll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roll: Option<Roll>,
}

impl Step {
    /// Every action the step does: each of its rolling `sequence`, or its one action. What
    /// the step needs (transport, access, capabilities) is what all of them need.
    pub fn actions(&self) -> Vec<&Action> {
        match &self.roll {
            Some(roll) if !roll.sequence.is_empty() => {
                roll.sequence.iter().map(|a| &a.action).collect()
            }
            _ => vec![&self.action],
        }
    }

    /// The nodes this step acts on, from the resolved targets (none when it has no target
    /// or its target matched nothing).
    pub fn nodes<'a>(&self, targets: &'a BTreeMap<String, Vec<String>>) -> &'a [String] {
        self.target
            .as_ref()
            .and_then(|t| targets.get(t))
            .map_or(&[], Vec::as_slice)
    }
}

/// When a step is issued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StepTime {
    /// At an offset from the experiment's start (the moment the first step may run).
    Offset(Bound),
    /// A delay after another step finished.
    AfterStep {
        /// Name of the earlier step.
        step: String,
        /// Delay after it finished.
        delay: Bound,
    },
    /// A delay after an observed state is first reached.
    When {
        /// What is watched.
        subject: Subject,
        /// The state that triggers the step.
        state: StateMatch,
        /// Delay after the state was observed.
        delay: Bound,
        /// The earlier step from whose issue the condition is judged (a state already
        /// holding then counts); `None` judges it from the experiment's start. Validation
        /// defaults it to the step before this one in the file.
        #[serde(default)]
        since: Option<String>,
    },
}

/// Something faultline does to a node or through the API. Its kind without parameters
/// (`ActionKind`, derived) is the key of the fault table (`experiment::fault`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::EnumDiscriminants)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[strum_discriminants(name(ActionKind), vis(pub(crate)), derive(strum::EnumIter))]
pub enum Action {
    /// Stop the kubelet (or the service that hosts it).
    KubeletStop,
    /// Start the kubelet again.
    KubeletStart,
    /// Restart the kubelet.
    KubeletRestart,
    /// Reboot the node; the SSH session dropping is the expected outcome.
    Reboot,
    /// Power the node off (over SSH or out of band).
    PowerOff,
    /// Power the node on, always out of band.
    PowerOn,
    /// Shut the node's operating system down from inside (the inventory's `powerOff`
    /// command, `systemctl poweroff`): systemd asks logind first, so a kubelet configured
    /// for graceful node shutdown ends its pods before the machine goes off, where
    /// `power-off` cuts the power from outside. Powered on again out of band.
    Shutdown,
    /// Cut the node off from the API server.
    Partition,
    /// Undo a partition.
    Heal,
    /// Run a shell command on the node; `undo` runs at restore time.
    Run {
        /// Command run by the node's shell.
        command: String,
        /// Command that undoes it, if any.
        undo: Option<String>,
    },
    /// Mark the node unschedulable.
    Cordon,
    /// Mark the node schedulable again.
    Uncordon,
    /// Cordon and evict the node's pods (DaemonSet pods are left alone), retrying while a
    /// PodDisruptionBudget refuses, until the step's timeout.
    Drain {
        /// What a drain still held by a budget at its timeout does (`onTimeout:`).
        #[serde(default, skip_serializing_if = "DrainOnTimeout::is_fail")]
        on_timeout: DrainOnTimeout,
    },
    /// Delete the Node object.
    DeleteNode,
    /// Delete pods, optionally with grace period 0 (force).
    DeletePods {
        /// Which pods.
        pods: PodSelector,
        /// Delete with `gracePeriodSeconds: 0`.
        force: bool,
    },
    /// Delete a PersistentVolumeClaim, optionally stripping its finalizers first.
    DeletePvc {
        /// Namespace of the claim.
        namespace: String,
        /// Claim name.
        name: String,
        /// Remove `metadata.finalizers` so the claim goes away even while in use.
        remove_finalizers: bool,
    },
    /// Add a taint to the node.
    Taint(TaintSpec),
    /// Remove a taint from the node.
    Untaint(TaintSpec),
}

/// What a drain still held by a PodDisruptionBudget at its step's timeout does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DrainOnTimeout {
    /// The step is an error naming the budget (the default).
    #[default]
    Fail,
    /// The run goes on with the held pods left on the node, saying so.
    Continue,
}

impl DrainOnTimeout {
    /// Whether this is the default, `fail` (left out of records).
    pub fn is_fail(&self) -> bool {
        *self == DrainOnTimeout::Fail
    }

    /// The word written in an experiment.
    pub fn word(self) -> &'static str {
        match self {
            DrainOnTimeout::Fail => "fail",
            DrainOnTimeout::Continue => "continue",
        }
    }
}

/// A taint as written in an experiment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaintSpec {
    /// Taint key.
    pub key: String,
    /// Optional value.
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// Pods chosen for an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodSelector {
    /// Pods of this workload.
    pub workload: Option<WorkloadRef>,
    /// Namespace used with `labels` when no workload is given.
    pub namespace: String,
    /// Label equality requirements.
    pub labels: BTreeMap<String, String>,
    /// Only pods on nodes of this target.
    pub on: Option<String>,
}

/// Observation settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObserveSpec {
    /// How long to keep observing after the last step was issued; `None` = derived
    /// from the expectations' bounds plus a margin.
    pub after_last_step: Option<Bound>,
    /// Namespaces whose pods are watched (defaults to the namespaces of referenced workloads).
    pub namespaces: Vec<String>,
    /// `namespaces: all`: pods of every namespace are watched (one cluster-wide watch), and
    /// `namespaces` is empty. Absent from records written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_namespaces: bool,
}

/// Blast-radius permissions an experiment must state explicitly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SafetySpec {
    /// Most nodes this experiment may take down at once (default 1).
    pub max_nodes_down: Option<u32>,
    /// Allow faults on control-plane nodes.
    pub allow_control_plane: bool,
    /// Allow taking half or more of the control-plane nodes down (etcd quorum loss).
    pub allow_quorum_loss: bool,
}

/// One expectation; one JUnit test case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    /// Test-case name; unique within the experiment.
    pub name: String,
    /// What is looked at.
    pub subject: Subject,
    /// What must hold.
    pub check: Check,
    /// Time zero for this expectation's bounds: the moment this step was issued.
    /// Validation defaults it to the first step.
    pub since: String,
    /// Capabilities the cluster must have for this expectation to be decidable
    /// (e.g. `containers`); where the profile lacks one the case is reported skipped.
    pub requires: Vec<String>,
    /// How much this expectation counts in the run's resilience score (default 1; see
    /// `judge::score`). Records written before weights existed read as 1.
    #[serde(default = "default_weight", skip_serializing_if = "is_default_weight")]
    pub weight: f64,
}

/// The weight of an expectation that does not state one.
pub const DEFAULT_WEIGHT: f64 = 1.0;

fn default_weight() -> f64 {
    DEFAULT_WEIGHT
}

fn is_default_weight(w: &f64) -> bool {
    *w == DEFAULT_WEIGHT
}

/// The thing an expectation is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Subject {
    /// Every node of a target.
    Node {
        /// Target name.
        target: String,
    },
    /// A set of pods.
    Pods(PodSubject),
    /// A workload's replica counts.
    Workload(WorkloadRef),
    /// A probe's Up/Down results.
    Probe {
        /// Probe name.
        name: String,
    },
}

/// A set of pods an expectation quantifies over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodSubject {
    /// Pods of this workload.
    pub workload: WorkloadRef,
    /// Only pods on nodes of this target.
    pub on: Option<String>,
    /// Only pods not on nodes of this target.
    pub not_on: Option<String>,
    /// Which generation of pods.
    pub generation: PodGeneration,
    /// How many of the set must satisfy the check.
    pub quantifier: Quantifier,
}

/// Which pods a pod subject means, relative to the expectation's `since` step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PodGeneration {
    /// Pods that existed when the `since` step was issued.
    Existing,
    /// Pods created after the `since` step was issued (replacements).
    Replacements,
}

/// How many members of a set must satisfy a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Quantifier {
    /// Every member (an empty set fails: nothing was there to check).
    All,
    /// At least one member.
    Any,
    /// At least this many members.
    AtLeast(u32),
}

/// What must hold for the subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Check {
    /// The subject reaches the state inside the window.
    Becomes {
        /// Target state.
        state: StateMatch,
        /// When it must happen.
        window: Window,
    },
    /// The subject is in the state from `since` until the end of the hold.
    Stays {
        /// State that must hold.
        state: StateMatch,
        /// Until when.
        until: Until,
    },
    /// The subject is never in the state from `since` until the end of the hold.
    Never {
        /// Forbidden state.
        state: StateMatch,
        /// Until when (default: the end of observation).
        until: Until,
    },
    /// Container restart counts changed (`true`) or stayed the same (`false`).
    Restarts {
        /// Whether a change is expected.
        changed: bool,
    },
    /// The pods were replaced by new objects (`true`, new UID) or kept (`false`, same UID).
    Replaced {
        /// Whether replacement is expected.
        replaced: bool,
    },
    /// Every continuous Down interval of a probe after `since` lasts at most this long (an
    /// interval still open when observation ends counts up to the end): an outage budget.
    DownFor {
        /// Longest allowed outage.
        at_most: Bound,
    },
}

impl Check {
    /// Every bound the check uses, in the order it is written: what `plan` and the reports
    /// look at to mark one built on an assumed timer.
    pub fn bounds(&self) -> Vec<&Bound> {
        match self {
            Check::Becomes { window, .. } => match window {
                Window::Eventually => vec![],
                Window::Within(b) | Window::After(b) => vec![b],
                Window::Between(a, b) => vec![a, b],
            },
            Check::Stays { until, .. } | Check::Never { until, .. } => match until {
                Until::For(b) => vec![b],
                Until::Step(_) | Until::End => vec![],
            },
            Check::DownFor { at_most } => vec![at_most],
            Check::Restarts { .. } | Check::Replaced { .. } => vec![],
        }
    }
}

/// The time window of a `becomes` check, relative to the `since` step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Window {
    /// Any time before observation ends (`eventually`).
    Eventually,
    /// No later than the bound.
    Within(Bound),
    /// No earlier than the bound.
    After(Bound),
    /// Between the two bounds, inclusive.
    Between(Bound, Bound),
}

/// End of a `stays` hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Until {
    /// Until the named step is issued.
    Step(String),
    /// For this long after `since`.
    For(Bound),
    /// Until observation ends.
    End,
}

/// A state a subject can be in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "of", content = "state", rename_all = "kebab-case")]
pub enum StateMatch {
    /// A node state.
    Node(NodeStateMatch),
    /// A pod state.
    Pod(PodStateMatch),
    /// A workload state.
    Workload(WorkloadStateMatch),
    /// A probe state.
    Probe(ProbeStateMatch),
}

/// Probe states an expectation can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeStateMatch {
    /// The last try succeeded.
    Up,
    /// The last try failed or timed out.
    Down,
}

/// Node states an expectation can name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeStateMatch {
    /// Ready condition True.
    Ready,
    /// Ready condition not True (False or Unknown), as kubectl's `NotReady`.
    NotReady,
    /// Ready condition Unknown (the controller stopped hearing from the kubelet).
    Unknown,
    /// Ready condition False (the kubelet reports itself unhealthy).
    ReadyFalse,
    /// Ready condition False because the kubelet handles a graceful node shutdown (its
    /// message says `node is shutting down`).
    ShuttingDown,
    /// Carries a taint with this key (and effect, if given).
    Tainted {
        /// Taint key.
        key: String,
        /// Taint effect, if it matters.
        effect: Option<String>,
    },
    /// `spec.unschedulable` is true.
    Unschedulable,
    /// The Node object does not exist.
    Gone,
}

/// Pod states an expectation can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PodStateMatch {
    /// Phase Pending.
    Pending,
    /// Phase Running (whatever readiness says).
    Running,
    /// Ready condition True and not terminating.
    Ready,
    /// Not Ready (condition False or missing) while it exists.
    NotReady,
    /// `deletionTimestamp` set.
    Terminating,
    /// Phase Failed: every container ended and one failed, or the kubelet ended the pod
    /// itself (a graceful node shutdown, an eviction for node pressure) and said why.
    Failed,
    /// Phase Succeeded or Failed: the pod's containers have ended for good and the object
    /// stays until something deletes it. A graceful node shutdown leaves pods so: Failed,
    /// or Succeeded (kubectl's `Completed`) when every container exits 0 on SIGTERM.
    Terminated,
    /// The pod object no longer exists.
    Gone,
}

/// Workload states an expectation can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadStateMatch {
    /// Available replicas equal desired (for a DaemonSet: numberAvailable = desiredNumberScheduled).
    Available,
    /// Fewer available replicas than desired.
    Degraded,
    /// Ready replicas equal desired.
    Ready,
}

/// A duration written as a sum of fixed durations and symbols from the cluster, such as
/// `grace + toleration + 30s` or `2 * grace`. Resolved at judge time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// The terms, added together.
    pub terms: Vec<BoundTerm>,
}

/// One term of a bound: `factor * symbol`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoundTerm {
    /// Multiplier (1.0 when none is written).
    pub factor: f64,
    /// What is multiplied.
    pub symbol: BoundSymbol,
}

/// Values a bound may refer to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoundSymbol {
    /// A fixed duration.
    Fixed(Duration),
    /// `grace`: the cluster's node-monitor grace period (from the inventory's timers).
    Grace,
    /// `monitor`: the controller's node-monitor period.
    MonitorPeriod,
    /// `toleration`: the pod's own `tolerationSeconds` for `node.kubernetes.io/unreachable`
    /// (the cluster default when the pod has none). Only meaningful for pod subjects.
    Toleration,
}

/// Values that symbolic bounds resolve against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundContext {
    /// Node-monitor grace period.
    pub grace: Duration,
    /// Node-monitor period.
    pub monitor_period: Duration,
    /// The subject pod's unreachable toleration, if the subject is a pod.
    pub toleration: Option<Duration>,
}

/// A bound that could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundError {
    /// `toleration` used where no pod toleration is known.
    #[error(
        "`toleration` has no value here: the subject is not a pod with an unreachable toleration"
    )]
    NoToleration,
    /// The bound is longer than a duration can hold (a toleration of `i64::MAX` seconds
    /// from a pod, times a multiplier): an error, never a panic inside the run.
    #[error("the bound resolves to more than a duration can hold (about 584 billion years)")]
    OutOfRange,
}

impl Bound {
    /// A bound of one fixed duration.
    pub fn fixed(d: Duration) -> Self {
        Bound {
            terms: vec![BoundTerm {
                factor: 1.0,
                symbol: BoundSymbol::Fixed(d),
            }],
        }
    }

    /// Whether the bound refers to the pod's toleration (and so differs per pod).
    pub fn uses_toleration(&self) -> bool {
        self.terms
            .iter()
            .any(|t| t.symbol == BoundSymbol::Toleration)
    }

    /// Resolves the bound against the cluster's timers and the subject's toleration.
    pub fn resolve(&self, ctx: &BoundContext) -> Result<Duration, BoundError> {
        let mut total = 0.0f64;
        for term in &self.terms {
            let base = match &term.symbol {
                BoundSymbol::Fixed(d) => *d,
                BoundSymbol::Grace => ctx.grace,
                BoundSymbol::MonitorPeriod => ctx.monitor_period,
                BoundSymbol::Toleration => ctx.toleration.ok_or(BoundError::NoToleration)?,
            };
            total += term.factor * base.as_secs_f64();
        }
        Duration::try_from_secs_f64(total.max(0.0)).map_err(|_| BoundError::OutOfRange)
    }
}

/// Formats a duration in seconds with one decimal where needed: `94.2s`, `30s`: how
/// messages and reports write a duration, readable back by `experiment::bound::parse_duration`.
pub fn format_secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Writes the bound as it would be written in an experiment: `grace + toleration - 10s`.
impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, term) in self.terms.iter().enumerate() {
            let factor = term.factor.abs();
            match (i, term.factor < 0.0) {
                (0, true) => f.write_str("-")?,
                (0, false) => {}
                (_, true) => f.write_str(" - ")?,
                (_, false) => f.write_str(" + ")?,
            }
            if factor != 1.0 {
                write!(f, "{factor} * ")?;
            }
            match &term.symbol {
                BoundSymbol::Fixed(d) => write!(f, "{}", format_secs(*d))?,
                BoundSymbol::Grace => f.write_str("grace")?,
                BoundSymbol::MonitorPeriod => f.write_str("monitor")?,
                BoundSymbol::Toleration => f.write_str("toleration")?,
            }
        }
        Ok(())
    }
}

pub use super::cluster_timers::ClusterTimers;

mod roll;
pub use roll::{Roll, RollAction, RollOrder};
