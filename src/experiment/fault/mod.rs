//! The fault vocabulary: one row per kind of experiment action saying what it is called,
//! how it is carried out, what undoes it, and what it does to a node.
//!
//! Every stage asks this table instead of deciding for itself: validation (the `do:` names,
//! which actions need a target), the blast-radius check, the journal and the self-restores
//! armed on nodes, the automatic undo, `plan`, the actor, the recovery figures, the API
//! transport (which faults cut it, and which undos are armed on the node as timers
//! before them) and `doctor` (the API permissions each action uses, the commands and
//! checks it needs on a node). The inventory keys that carry node and power operations out
//! are tables too ([`CommandKey`], [`PowerKey`] in `keys`): the inventory parses and merges
//! `commands:`/`power:` through them and every message names a key from them. Adding an
//! action means its [`Action`] variant ([`ActionKind`] is derived from it), its row in
//! [`ActionKind::info`] (and [`ActionKind::bare`] when it takes no parameters) and its
//! example in the tests; a new node operation adds its [`NodeOp`], its [`CommandKey`] row
//! and the profiles' commands. The compiler points at each, and a test holds every row's
//! columns to each other.
//!
//! It lives with the experiment model whose [`Action`]s it describes, and defines the
//! operations faults are carried out by ([`NodeOp`], [`PowerAction`]), so every later stage
//! (validation, `execute`, the runner, `judge`, `cli`) reads it without any of them being
//! read back.

use serde::{Deserialize, Serialize};

use crate::experiment::model::Action;

mod keys;

pub use keys::{CommandKey, Configured, KeyTable, NodeCommand, PowerKey};

/// One thing faultline can do on a node. Serialized (in the fault journal) in kebab-case,
/// as experiments spell actions; the camelCase aliases read journals written before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeOp {
    /// Stop the kubelet (or the service hosting it).
    #[serde(alias = "kubeletStop")]
    KubeletStop,
    /// Start it.
    #[serde(alias = "kubeletStart")]
    KubeletStart,
    /// Restart it.
    #[serde(alias = "kubeletRestart")]
    KubeletRestart,
    /// Ask whether it runs; a non-zero exit is an answer, not a failure.
    #[serde(alias = "kubeletStatus")]
    KubeletStatus,
    /// Reboot; the connection dropping is the expected outcome.
    Reboot,
    /// Power off from inside; the connection dropping is the expected outcome.
    #[serde(alias = "powerOff")]
    PowerOff,
    /// Cut the node off from the API server.
    Partition,
    /// Undo a partition.
    Heal,
    /// Print an identifier of the node's current boot (`/proc/sys/kernel/random/boot_id`
    /// by default); a reboot is confirmed when it changes.
    BootId,
    /// A shell command from the experiment (trusted text, run as written).
    Run(String),
}

impl NodeOp {
    /// Whether losing the connection after sending means success.
    pub fn expects_drop(&self) -> bool {
        matches!(self, NodeOp::Reboot | NodeOp::PowerOff)
    }

    /// Whether, on a node reached through the API (`transport: pod`), this operation cuts
    /// that path: it carries out an action whose row says so
    /// ([`ActionInfo::cuts_transport`]), itself or as the in-band fallback of an
    /// out-of-band one. Its own exec stream may then end without a status.
    pub fn cuts_transport(&self) -> bool {
        ActionKind::all().any(|k| k.info().cuts_transport && k.node_op().as_ref() == Some(self))
    }
}

/// Out-of-band power actions, run where faultline runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PowerAction {
    /// Turn on: the only way back from a power-off.
    On,
    /// Turn off.
    Off,
    /// Query.
    Status,
    /// Reboot from outside (`power.reboot`); returns once the node runs again.
    Reboot,
}

impl PowerAction {
    /// The node's own command that does the same when the inventory has no out-of-band
    /// one. Over SSH a node can be turned off or rebooted, never turned on, and its power
    /// state is not read in band; the fault table and the executor both ask this.
    pub(crate) fn in_band(self) -> Option<NodeOp> {
        match self {
            PowerAction::Off => Some(NodeOp::PowerOff),
            PowerAction::Reboot => Some(NodeOp::Reboot),
            PowerAction::On | PowerAction::Status => None,
        }
    }
}

/// An action without its parameters: the key of the table, derived from [`Action`].
pub(crate) use crate::experiment::model::ActionKind;

/// Everything the rest of faultline needs to know about one kind of action.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ActionInfo {
    /// The one spelling of the action's name: `do:` in experiments, `action` on the
    /// timeline and in reports, `fault` in the journal.
    pub(crate) name: &'static str,
    /// How it reaches what it acts on.
    pub(crate) via: Via,
    /// What undoes it. When that is carried out on the node (see [`Via`]), the node can
    /// undo the fault by itself, so a self-restore is armed there before the fault.
    pub(crate) inverse: Inverse,
    /// Also settles a fault of this action, though it is not that fault's inverse.
    pub(crate) also_undoes: Option<Action>,
    /// Takes the node out of service: counts against the blast radius, and the node's
    /// machine address is remembered first.
    pub(crate) takes_node_down: bool,
    /// Brings a node back into service: it no longer counts against the blast radius.
    pub(crate) brings_node_back: bool,
    /// Starts the node's machine again, after which its address may differ (checked after
    /// the step). A node-down action that restarts the machine comes back by itself.
    pub(crate) restarts_machine: bool,
    /// Repairs what a fault broke rather than breaking something: the recovery figures are
    /// measured from the first step that is not a repair.
    pub(crate) repairs: bool,
    /// The node's kubelet may end its pods itself before the node goes silent (a graceful
    /// node shutdown), after a delay its `shutdownGracePeriod` decides and the API does not
    /// show: the node failure model ([`crate::failure_model`]) predicts nothing for it.
    pub(crate) kubelet_ends_pods: bool,
    /// How faultline checks, after the step, that the fault took effect (and, for a fault
    /// that lasts, that nothing else undid it before its planned end).
    pub(crate) proof: Proof,
    /// What it asks of the Kubernetes API, so `doctor` can check each permission before a
    /// run (`doctor::access`).
    pub(crate) api: &'static [ApiUse],
    /// On a node reached through the API (`transport: pod`), whether the fault cuts that
    /// path while it lasts (the kubelet gone, the node cut off from the API server, the
    /// machine down): the command's own exec stream may end without a status, which is then
    /// the expected outcome ([`NodeOp::cuts_transport`]), and its proof is read through the
    /// API.
    pub(crate) cuts_transport: bool,
    /// What is armed before the fault, on a node reached through the API, because nothing
    /// reaches the node that way while it lasts (`run/floor/host_timed`).
    pub(crate) host_timer: HostTimer,
    /// What `doctor` checks on a node for this action beyond what [`ActionInfo::via`] and
    /// [`ActionInfo::inverse`] already name (the commands of its operation and of its
    /// undo, its power actions, the self-restore's arm): `doctor::needs` reads it.
    pub(crate) doctor: &'static [NodeCheck],
}

/// What a fault needs armed ahead on a node reached through the API, where nothing reaches
/// the node while the fault lasts ([`ActionInfo::cuts_transport`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostTimer {
    /// Nothing: the fault leaves the path alone, or is carried out of band (`power.*`, its
    /// in-band fallback included), where its undo, if any, is carried out of band too.
    None,
    /// The fault's self-restore is its planned undo: armed to fire a margin after the undo
    /// step's fixed time (which the undo then needs). An undo carried on the node was so
    /// armed there and is confirmed through the API instead of carried, and no other node
    /// command reaches the target until it: neither Ctrl-C nor the safety net ends the
    /// fault sooner.
    Timer,
    /// As [`HostTimer::Timer`], and an undo watcher beside the node's timer runs the undo as
    /// soon as faultline asks: the fault silences the kubelet but leaves the node's own
    /// network to the API server.
    TimerAndWatcher,
}

/// A check `doctor` makes on a node for an action, beside its commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum NodeCheck {
    /// The unit that runs the kubelet is found (`commands.kubeletUnit`): the action stops,
    /// starts or restarts it.
    KubeletUnit,
}

/// One request an action makes to the Kubernetes API: a verb on a resource.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ApiUse {
    /// `patch`, `delete`, `list`, `create`.
    pub(crate) verb: &'static str,
    /// API group (`""` for core).
    pub(crate) group: &'static str,
    /// Plural resource.
    pub(crate) resource: &'static str,
    /// Subresource (`eviction`), if any.
    pub(crate) subresource: Option<&'static str>,
    /// In the namespace of what the step names ([`api_namespace`]); otherwise
    /// cluster-wide.
    pub(crate) namespaced: bool,
    /// Only when the step removes finalizers first (`delete-pvc`).
    pub(crate) removing_finalizers: bool,
}

impl ApiUse {
    const fn cluster(verb: &'static str, resource: &'static str) -> ApiUse {
        ApiUse {
            verb,
            group: "",
            resource,
            subresource: None,
            namespaced: false,
            removing_finalizers: false,
        }
    }

    const fn namespaced(verb: &'static str, resource: &'static str) -> ApiUse {
        ApiUse {
            namespaced: true,
            ..ApiUse::cluster(verb, resource)
        }
    }
}

const PATCH_NODE: &[ApiUse] = &[ApiUse::cluster("patch", "nodes")];
const DRAIN: &[ApiUse] = &[
    ApiUse::cluster("patch", "nodes"),
    ApiUse::cluster("list", "pods"),
    ApiUse {
        subresource: Some("eviction"),
        ..ApiUse::cluster("create", "pods")
    },
];
const DELETE_NODE: &[ApiUse] = &[ApiUse::cluster("delete", "nodes")];
const DELETE_PODS: &[ApiUse] = &[
    ApiUse::namespaced("list", "pods"),
    ApiUse::namespaced("delete", "pods"),
];
const DELETE_PVC: &[ApiUse] = &[
    ApiUse::namespaced("delete", "persistentvolumeclaims"),
    ApiUse {
        removing_finalizers: true,
        ..ApiUse::namespaced("patch", "persistentvolumeclaims")
    },
];

/// The evidence that a fault took effect: what is checked on the node (or its object)
/// after the step. A fault that shows no evidence within its bound, or whose evidence
/// disappears before faultline undoes it, is a step error: the expectations judged after
/// it would describe a fault that did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proof {
    /// Nothing to check: a repair, an action on pods or claims, a command whose effect
    /// faultline cannot read (`run`), or a restart that is over when the step returns.
    None,
    /// The node's `commands.kubeletStatus` says the kubelet is not running (a non-zero
    /// exit), and keeps saying so: a restart policy or a supervisor that brings it back
    /// is caught.
    KubeletInactive,
    /// The node's heartbeat (its Lease in `kube-node-lease`) is no longer renewed: the
    /// node cannot reach the API server. Renewed again before the heal: undone.
    HeartbeatStopped,
    /// The out-of-band `power.status` says off (when the inventory has one) and the node
    /// does not answer over its transport; keeps so until power-on.
    PoweredOff,
    /// The node answers again with a boot id other than the one read before the step.
    BootIdChanged,
    /// The Node object is gone.
    NodeGone,
    /// The Node object is unschedulable, and stays so.
    Unschedulable,
    /// The Node object carries the step's taint, and keeps it.
    Tainted,
}

impl Proof {
    /// Whether the evidence is watched after it was seen, until the fault is undone: a
    /// fault that lasts can be undone behind faultline's back. A reboot is over once
    /// proven, and a deleted Node comes back when its kubelet registers it (as planned).
    pub(crate) fn watched(self) -> bool {
        matches!(
            self,
            Proof::KubeletInactive
                | Proof::HeartbeatStopped
                | Proof::PoweredOff
                | Proof::Unschedulable
                | Proof::Tainted
        )
    }
}

/// How an action reaches what it acts on.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// A command on the node over its transport: the inventory's command for this operation.
    Node(NodeOp),
    /// The step's own shell `command` on the node.
    StepCommand,
    /// Out of band, where faultline runs (`power.*`); off and reboot fall back to the
    /// node's own command ([`PowerAction::in_band`]) when the inventory has none.
    Power(PowerAction),
    /// The Kubernetes API, on the target node's object.
    NodeApi,
    /// The Kubernetes API, on the pods or claims the step names: it takes no target.
    ClusterApi,
}

impl Via {
    /// Whether a step doing it names a target (everything but API calls on pods and claims).
    pub(crate) fn needs_target(&self) -> bool {
        !matches!(self, Via::ClusterApi)
    }

    /// Whether carrying it out needs the node in the inventory.
    pub(crate) fn needs_node_access(&self) -> bool {
        matches!(self, Via::Node(_) | Via::StepCommand | Via::Power(_))
    }
}

/// What undoes an action.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Inverse {
    /// Nothing faultline can do: a reboot comes back by itself, a deleted object is gone,
    /// and a repair needs no undo.
    None,
    /// This action.
    Action(Action),
    /// `untaint` of the same taint.
    UntaintSame,
    /// `run` of the step's `undo` command, when it has one.
    StepUndo,
}

impl ActionKind {
    /// Every kind, in the order `do:` hints list them (the order of [`Action`]).
    pub(crate) fn all() -> impl Iterator<Item = ActionKind> {
        <ActionKind as strum::IntoEnumIterator>::iter()
    }

    /// The kind of `action`.
    pub(crate) fn of(action: &Action) -> ActionKind {
        ActionKind::from(action)
    }

    /// The kind whose name is `name` (a `do:` value).
    pub(crate) fn named(name: &str) -> Option<ActionKind> {
        ActionKind::all().find(|k| k.info().name == name)
    }

    /// The action of this kind when it takes no parameters: all `do:` needs is its name.
    pub(crate) fn bare(self) -> Option<Action> {
        Some(match self {
            ActionKind::KubeletStop => Action::KubeletStop,
            ActionKind::KubeletStart => Action::KubeletStart,
            ActionKind::KubeletRestart => Action::KubeletRestart,
            ActionKind::Reboot => Action::Reboot,
            ActionKind::PowerOff => Action::PowerOff,
            ActionKind::PowerOn => Action::PowerOn,
            ActionKind::Shutdown => Action::Shutdown,
            ActionKind::Partition => Action::Partition,
            ActionKind::Heal => Action::Heal,
            ActionKind::Cordon => Action::Cordon,
            ActionKind::Uncordon => Action::Uncordon,
            ActionKind::Drain => Action::Drain {
                on_timeout: Default::default(),
            },
            ActionKind::DeleteNode => Action::DeleteNode,
            ActionKind::Run
            | ActionKind::DeletePods
            | ActionKind::DeletePvc
            | ActionKind::Taint
            | ActionKind::Untaint => return None,
        })
    }

    /// Whether the node failure model predicts what Kubernetes does after a step of this
    /// kind ([`silences_node`], or a reboot): what `expect: conformance` needs at least one of.
    pub(crate) fn modelled(self) -> bool {
        self.bare()
            .as_ref()
            .is_some_and(|a| silences_node(a) || (restarts_machine(a) && takes_node_down(a)))
    }

    /// The names of the kinds [`ActionKind::modelled`] holds for, as `do:` writes them.
    pub(crate) fn modelled_names() -> Vec<&'static str> {
        ActionKind::all()
            .filter(|k| k.modelled())
            .map(|k| k.info().name)
            .collect()
    }

    /// The node operation behind this kind when the step gives it no command (all but
    /// `run`): its inventory command, or the in-band fallback of an out-of-band power
    /// action.
    pub(crate) fn node_op(self) -> Option<NodeOp> {
        match &self.info().via {
            Via::Node(op) => Some(op.clone()),
            Via::Power(power) => power.in_band(),
            Via::StepCommand | Via::NodeApi | Via::ClusterApi => None,
        }
    }

    /// The table: this kind's row.
    pub(crate) fn info(self) -> &'static ActionInfo {
        match self {
            ActionKind::KubeletStop => &ActionInfo {
                name: "kubelet-stop",
                via: Via::Node(NodeOp::KubeletStop),
                inverse: Inverse::Action(Action::KubeletStart),
                also_undoes: None,
                takes_node_down: true,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::KubeletInactive,
                api: &[],
                cuts_transport: true,
                host_timer: HostTimer::TimerAndWatcher,
                doctor: &[NodeCheck::KubeletUnit],
            },
            ActionKind::KubeletStart => &ActionInfo {
                name: "kubelet-start",
                via: Via::Node(NodeOp::KubeletStart),
                inverse: Inverse::None,
                also_undoes: None,
                takes_node_down: false,
                brings_node_back: true,
                restarts_machine: false,
                repairs: true,
                kubelet_ends_pods: false,
                proof: Proof::None,
                api: &[],
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[NodeCheck::KubeletUnit],
            },
            ActionKind::KubeletRestart => &ActionInfo {
                name: "kubelet-restart",
                via: Via::Node(NodeOp::KubeletRestart),
                inverse: Inverse::None,
                // A restart also brings a stopped kubelet back.
                also_undoes: Some(Action::KubeletStop),
                takes_node_down: false,
                brings_node_back: true,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::None,
                api: &[],
                cuts_transport: true,
                // Nothing undoes a restart, so nothing is armed for it; through the API,
                // a later node command on its target is refused (`host_timed::refusals`).
                host_timer: HostTimer::Timer,
                doctor: &[NodeCheck::KubeletUnit],
            },
            ActionKind::Reboot => &ActionInfo {
                name: "reboot",
                via: Via::Power(PowerAction::Reboot),
                inverse: Inverse::None,
                also_undoes: None,
                takes_node_down: true,
                brings_node_back: false,
                restarts_machine: true,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::BootIdChanged,
                api: &[],
                cuts_transport: true,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::PowerOff => &ActionInfo {
                name: "power-off",
                via: Via::Power(PowerAction::Off),
                inverse: Inverse::Action(Action::PowerOn),
                also_undoes: None,
                takes_node_down: true,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::PoweredOff,
                api: &[],
                cuts_transport: true,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::PowerOn => &ActionInfo {
                name: "power-on",
                via: Via::Power(PowerAction::On),
                inverse: Inverse::None,
                also_undoes: None,
                takes_node_down: false,
                brings_node_back: true,
                restarts_machine: true,
                repairs: true,
                kubelet_ends_pods: false,
                proof: Proof::None,
                api: &[],
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::Shutdown => &ActionInfo {
                name: "shutdown",
                via: Via::Node(NodeOp::PowerOff),
                inverse: Inverse::Action(Action::PowerOn),
                also_undoes: None,
                takes_node_down: true,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: true,
                proof: Proof::PoweredOff,
                api: &[],
                cuts_transport: true,
                // Its self-restore is a power-on armed where faultline runs (out of band,
                // so not confirmed instead of carried), moved to its undo step's time.
                host_timer: HostTimer::Timer,
                doctor: &[],
            },
            ActionKind::Partition => &ActionInfo {
                name: "partition",
                via: Via::Node(NodeOp::Partition),
                inverse: Inverse::Action(Action::Heal),
                also_undoes: None,
                takes_node_down: true,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::HeartbeatStopped,
                api: &[],
                cuts_transport: true,
                host_timer: HostTimer::Timer,
                doctor: &[],
            },
            ActionKind::Heal => &ActionInfo {
                name: "heal",
                via: Via::Node(NodeOp::Heal),
                inverse: Inverse::None,
                also_undoes: None,
                takes_node_down: false,
                brings_node_back: true,
                restarts_machine: false,
                repairs: true,
                kubelet_ends_pods: false,
                proof: Proof::None,
                api: &[],
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::Run => &ActionInfo {
                name: "run",
                via: Via::StepCommand,
                inverse: Inverse::StepUndo,
                also_undoes: None,
                takes_node_down: false,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::None,
                api: &[],
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::Cordon => &ActionInfo {
                name: "cordon",
                via: Via::NodeApi,
                inverse: Inverse::Action(Action::Uncordon),
                also_undoes: None,
                takes_node_down: false,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::Unschedulable,
                api: PATCH_NODE,
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::Uncordon => &ActionInfo {
                name: "uncordon",
                via: Via::NodeApi,
                inverse: Inverse::None,
                also_undoes: None,
                takes_node_down: false,
                brings_node_back: true,
                restarts_machine: false,
                repairs: true,
                kubelet_ends_pods: false,
                proof: Proof::None,
                api: PATCH_NODE,
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::Drain => &ActionInfo {
                name: "drain",
                via: Via::NodeApi,
                inverse: Inverse::Action(Action::Uncordon),
                also_undoes: None,
                takes_node_down: true,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::Unschedulable,
                api: DRAIN,
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::DeleteNode => &ActionInfo {
                name: "delete-node",
                via: Via::NodeApi,
                inverse: Inverse::None,
                also_undoes: None,
                takes_node_down: true,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::NodeGone,
                api: DELETE_NODE,
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::DeletePods => &ActionInfo {
                name: "delete-pods",
                via: Via::ClusterApi,
                inverse: Inverse::None,
                also_undoes: None,
                takes_node_down: false,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::None,
                api: DELETE_PODS,
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::DeletePvc => &ActionInfo {
                name: "delete-pvc",
                via: Via::ClusterApi,
                inverse: Inverse::None,
                also_undoes: None,
                takes_node_down: false,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::None,
                api: DELETE_PVC,
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::Taint => &ActionInfo {
                name: "taint",
                via: Via::NodeApi,
                inverse: Inverse::UntaintSame,
                also_undoes: None,
                takes_node_down: false,
                brings_node_back: false,
                restarts_machine: false,
                repairs: false,
                kubelet_ends_pods: false,
                proof: Proof::Tainted,
                api: PATCH_NODE,
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
            ActionKind::Untaint => &ActionInfo {
                name: "untaint",
                via: Via::NodeApi,
                inverse: Inverse::None,
                also_undoes: None,
                takes_node_down: false,
                brings_node_back: true,
                restarts_machine: false,
                repairs: true,
                kubelet_ends_pods: false,
                proof: Proof::None,
                api: PATCH_NODE,
                cuts_transport: false,
                host_timer: HostTimer::None,
                doctor: &[],
            },
        }
    }
}

/// The row of `action`.
pub(crate) fn info(action: &Action) -> &'static ActionInfo {
    ActionKind::of(action).info()
}

/// Every action name, in the order `do:` hints list them.
pub(crate) fn names() -> Vec<&'static str> {
    ActionKind::all().map(|k| k.info().name).collect()
}

/// The kebab-case name of an action, as written in experiments, on the timeline and in the
/// journal.
pub(crate) fn action_name(action: &Action) -> &'static str {
    info(action).name
}

/// The action that undoes `fault`, if it is a fault that can be undone.
pub(crate) fn inverse(fault: &Action) -> Option<Action> {
    match (&info(fault).inverse, fault) {
        (Inverse::Action(inverse), _) => Some(inverse.clone()),
        (Inverse::UntaintSame, Action::Taint(taint)) => Some(Action::Untaint(taint.clone())),
        (Inverse::StepUndo, Action::Run { undo, .. }) => undo.as_ref().map(|undo| Action::Run {
            command: undo.clone(),
            undo: None,
        }),
        _ => None,
    }
}

/// Whether running `action` restores what `fault` broke.
pub(crate) fn undoes(action: &Action, fault: &Action) -> bool {
    inverse(fault).as_ref() == Some(action) || info(action).also_undoes.as_ref() == Some(fault)
}

/// Whether the action silences the node towards the control plane until it is undone (its
/// Lease stops being renewed): the faults the node failure model ([`crate::failure_model`]) starts
/// an outage at. Read from the row's proof; a reboot comes back by itself, after a boot
/// time nothing knows in advance, so it is not one, and neither is a shutdown whose
/// kubelet ends its pods first ([`ActionInfo::kubelet_ends_pods`]).
pub(crate) fn silences_node(action: &Action) -> bool {
    matches!(
        proof(action),
        Proof::KubeletInactive | Proof::HeartbeatStopped | Proof::PoweredOff
    ) && !info(action).kubelet_ends_pods
}

/// Whether the action takes the node out of service (counts against the blast radius).
pub(crate) fn takes_node_down(action: &Action) -> bool {
    info(action).takes_node_down
}

/// Whether the step counts against the blast radius: an action that takes its node down,
/// and two whose effect hangs on their parameters: a taint that evicts the node's pods
/// (`NoExecute`), and a `run` with an `undo` (faultline cannot read what a command does;
/// one that needs undoing changed something until the end of the run).
pub(crate) fn counts_as_down(action: &Action) -> bool {
    match action {
        Action::Taint(t) => t.effect == "NoExecute",
        Action::Run { undo, .. } => undo.is_some(),
        _ => takes_node_down(action),
    }
}

/// Whether the action starts the node's machine again (after which its address may differ).
pub(crate) fn restarts_machine(action: &Action) -> bool {
    info(action).restarts_machine
}

/// How faultline checks that `action` took effect.
pub(crate) fn proof(action: &Action) -> Proof {
    info(action).proof
}

/// What `action` needs armed ahead on a node reached through the API
/// ([`ActionInfo::host_timer`]).
pub(crate) fn host_timer(action: &Action) -> HostTimer {
    info(action).host_timer
}

/// Whether `undo` is carried on the node and undoes a fault whose undo is armed there as a
/// timer ([`HostTimer`]): on a node reached through the API it was armed before the fault,
/// so it is confirmed through the API instead of carried.
pub(crate) fn undone_by_host_timer(undo: &Action) -> bool {
    matches!(info(undo).via, Via::Node(_))
        && ActionKind::all()
            .filter_map(ActionKind::bare)
            .any(|fault| host_timer(&fault) != HostTimer::None && undoes(undo, &fault))
}

/// Whether the self-restore `undo`, armed on a node reached through the API, also gets an
/// undo watcher: it is the undo of a fault whose row says
/// [`HostTimer::TimerAndWatcher`].
pub(crate) fn undo_watched(undo: &NodeOp) -> bool {
    ActionKind::all()
        .filter_map(ActionKind::bare)
        .filter(|fault| host_timer(fault) == HostTimer::TimerAndWatcher)
        .filter_map(|fault| inverse(&fault))
        .any(|inverse| node_op(&inverse).as_ref() == Some(undo))
}

/// The namespace of the objects a step names (the pods of `delete-pods`, the claim of
/// `delete-pvc`): where its namespaced [`ApiUse`]s apply.
pub(crate) fn api_namespace(action: &Action) -> Option<&str> {
    match action {
        Action::DeletePods { pods, .. } => Some(
            pods.workload
                .as_ref()
                .map_or(pods.namespace.as_str(), |w| w.namespace.as_str()),
        ),
        Action::DeletePvc { namespace, .. } => Some(namespace),
        _ => None,
    }
}

/// The operation on the node behind `action`: its inventory command, the step's own
/// command for `run`, or the in-band fallback of out-of-band power off and reboot. `None`
/// for API actions and power-on, which the node cannot do.
pub(crate) fn node_op(action: &Action) -> Option<NodeOp> {
    match (&info(action).via, action) {
        (Via::Node(op), _) => Some(op.clone()),
        (Via::StepCommand, Action::Run { command, .. }) => Some(NodeOp::Run(command.clone())),
        (Via::Power(power), _) => power.in_band(),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
