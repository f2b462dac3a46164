//! A model of how Kubernetes handles a node that stops answering: given the cluster's
//! timers and shape, the pods on the nodes and when each node stops (and comes back), it
//! predicts the window in which each transition should happen and names the rule that
//! produced it. Pure: no I/O, no clock; offsets are from the start of the run.
//!
//! Written from the upstream controllers of Kubernetes v1.33 (`k8s.io/kubernetes`):
//! - `pkg/controller/nodelifecycle/node_lifecycle_controller.go`: `monitorNodeHealth` runs
//!   every `--node-monitor-period`; `tryUpdateNodeHealth` sets every node condition to
//!   `Unknown` once nothing was heard from the node (its Lease renewed, or its status
//!   changed) for `--node-monitor-grace-period`, and `MarkPodsNotReady` marks its pods not
//!   Ready in the same pass; the node joins the taint queue at the next pass (each pass
//!   decides on the Ready condition as it read it, before its own update), and
//!   `doNoExecuteTaintingPass` (every 100 ms) adds the
//!   `node.kubernetes.io/unreachable:NoExecute` taint through a per-zone token bucket
//!   (`--node-eviction-rate`, burst 1); `handleDisruption` and `ComputeZoneState` set each
//!   zone's state (full disruption: no Ready node; partial: more than 2 not Ready and at
//!   least `--unhealthy-zone-threshold` of them) and its rate (`ReducedQPSFunc`: the
//!   `--secondary-node-eviction-rate` above `--large-cluster-size-threshold` nodes, else
//!   0); when every zone is fully disrupted the taints are removed and evictions stop
//!   (the controller assumes the fault is its own side's).
//! - `pkg/controller/tainteviction/taint_eviction.go`: a pod that does not tolerate a
//!   NoExecute taint is deleted at once; one that tolerates it for `tolerationSeconds` is
//!   deleted that long after the taint is seen (the smallest of its matching
//!   tolerations); one that tolerates it without a limit (DaemonSet pods) never is. The
//!   API server's `DefaultTolerationSeconds` admission gives pods without their own
//!   `--default-unreachable-toleration-seconds` (300 s by default).
//! - The kubelet renews its Lease every quarter of `nodeLeaseDurationSeconds`
//!   (`nodeLeaseRenewIntervalFraction` 0.25), so the last renewal before a fault is up to
//!   that long before it.
//! - After a pod is marked for deletion its ReplicaSet no longer counts it and creates a
//!   replacement; a StatefulSet does not, until the pod object is gone, which on an
//!   unreachable node happens only when the node comes back, is deleted, or gets the
//!   `node.kubernetes.io/out-of-service` taint (the pod garbage collector then force-deletes
//!   it).
//! - A pod deleted through the API is marked for deletion when the call returns; on an
//!   unreachable node it stays so (its kubelet cannot confirm) unless the deletion is
//!   forced (grace period zero), which removes the object at once. Its controller sees the
//!   deletion through its informer and recreates the pod from its work queue, with no
//!   timer in between (`pkg/controller/statefulset`, `pkg/controller/daemon`).
//! - `pkg/controller/podgc/gc_controller.go`: every `gcCheckPeriod` (20 s) the collector
//!   force-deletes the terminating pods of a node that is out of service, and deletes the
//!   pods of a node that no longer exists once it has been gone for `quarantineTime` (40 s)
//!   (`gcOrphaned`), whatever their tolerations.

mod predict;
#[cfg(test)]
mod properties;
mod roll;
#[cfg(test)]
mod roll_tests;
mod sources;
#[cfg(test)]
mod tests;
pub mod words;

use std::time::Duration;

use serde::Serialize;

pub use predict::predict;
pub use roll::{RollFault, RollInput, RollNode, back_at_the_earliest, predict_roll};

/// Durations written to JSON as whole milliseconds, as the timeline writes its offsets.
pub(crate) mod json_ms {
    use std::time::Duration;

    use serde::Serializer;

    /// A duration as milliseconds.
    pub(crate) fn one<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// An optional duration as milliseconds, or null.
    pub(crate) fn maybe<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => one(d, s),
            None => s.serialize_none(),
        }
    }
}

/// The node lifecycle controller's settings the model needs, with the upstream defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControllerSettings {
    /// kube-controller-manager `--node-monitor-period`.
    pub node_monitor_period: Duration,
    /// kube-controller-manager `--node-monitor-grace-period`.
    pub node_monitor_grace_period: Duration,
    /// kube-apiserver `--default-unreachable-toleration-seconds`: what a pod without its
    /// own toleration of the unreachable taint gets.
    pub default_unreachable_toleration: Duration,
    /// kubelet `nodeLeaseDurationSeconds`; it renews every quarter of it.
    pub node_lease_duration: Duration,
    /// `--node-eviction-rate`: nodes tainted per second in a zone in normal state.
    pub eviction_rate: f64,
    /// `--secondary-node-eviction-rate`: the rate in a partially disrupted large zone.
    pub secondary_eviction_rate: f64,
    /// `--large-cluster-size-threshold`: above it, a partially disrupted zone keeps the
    /// secondary rate; at or below it, evictions stop.
    pub large_cluster_size_threshold: usize,
    /// `--unhealthy-zone-threshold`: the share of not-Ready nodes (more than 2) that makes
    /// a zone partially disrupted.
    pub unhealthy_zone_threshold: f64,
}

impl Default for ControllerSettings {
    /// Kubernetes v1.33's defaults.
    fn default() -> Self {
        ControllerSettings {
            node_monitor_period: Duration::from_secs(5),
            node_monitor_grace_period: Duration::from_secs(50),
            default_unreachable_toleration: Duration::from_secs(300),
            node_lease_duration: Duration::from_secs(40),
            eviction_rate: 0.1,
            secondary_eviction_rate: 0.01,
            large_cluster_size_threshold: 50,
            unhealthy_zone_threshold: 0.55,
        }
    }
}

impl ControllerSettings {
    /// How often the kubelet renews its Lease (a quarter of the lease's duration).
    pub fn renew_interval(&self) -> Duration {
        self.node_lease_duration / 4
    }
}

/// A node of the cluster, as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelNode {
    /// Node name.
    pub name: String,
    /// Its zone (`topology.kubernetes.io/zone`, with the region); "" when unlabelled.
    pub zone: String,
    /// Whether it is Ready before the experiment.
    pub ready: bool,
}

/// Who owns a pod: what happens after it is evicted depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Owner {
    /// A ReplicaSet (a Deployment's): replaced as soon as the pod is marked for deletion.
    ReplicaSet,
    /// A StatefulSet: replaced only once the pod object is gone.
    StatefulSet,
    /// A DaemonSet: tolerates the unreachable taint forever, never evicted.
    DaemonSet,
    /// No controller: nothing replaces it.
    None,
}

/// How a pod tolerates `node.kubernetes.io/unreachable:NoExecute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Toleration {
    /// It has no toleration of its own: the API server's default applies.
    Default,
    /// For this long (its smallest matching `tolerationSeconds`; zero: not at all).
    For(Duration),
    /// Without a limit.
    Forever,
}

/// A pod on a node the experiment faults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelPod {
    /// `namespace/name`.
    pub name: String,
    /// The node it runs on.
    pub node: String,
    /// Its controller.
    pub owner: Owner,
    /// Its toleration of the unreachable taint.
    pub toleration: Toleration,
    /// A step of the experiment deletes it while its node is down, if one does.
    pub deleted: Option<PodDeletion>,
}

/// A step that deletes a pod on a silenced node (`delete-pods`): the remediation people
/// apply by hand (seed 001), which the controllers then follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PodDeletion {
    /// When the delete was issued (offset from the start of the run).
    #[serde(rename = "from_ms", serialize_with = "json_ms::one")]
    pub from: Duration,
    /// When the API call returned: the pod is marked (or gone) by then.
    #[serde(rename = "by_ms", serialize_with = "json_ms::one")]
    pub by: Duration,
    /// Grace period zero: the API server removes the object at once, rather than leaving
    /// it Terminating until the unreachable kubelet confirms.
    pub force: bool,
}

/// A node that stops answering the control plane: its kubelet stopped, powered off, cut
/// off, rebooting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outage {
    /// The node.
    pub node: String,
    /// When it stops answering at the earliest (offset from the start of the run): when
    /// the silencing command was issued.
    pub from: Duration,
    /// When it had stopped answering at the latest: when the silencing command returned.
    /// A command may take hold anywhere between the two (an `iptables` rule inserted at the
    /// end of a 2 s exec through the API; a kubelet stopped in the first second of a 10 s
    /// `docker stop`). Equal to `from` where the moment is known, as in a plan.
    pub held_by: Duration,
    /// When it answers again, if it does within the experiment.
    pub until: Option<Duration>,
    /// A step adds `node.kubernetes.io/out-of-service` at this offset (non-graceful
    /// shutdown recovery).
    pub out_of_service: Option<Duration>,
    /// A step deletes the Node object at this offset.
    pub deleted: Option<Duration>,
    /// The machine restarted (a reboot): its containers ended with it, and its kubelet
    /// starts them again in place once it is back; `until` is when it was seen back up.
    pub restarts: bool,
}

/// What the model predicts for a node or a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Transition {
    /// The node's Ready condition becomes Unknown.
    NodeUnknown,
    /// The node gets the `unreachable:NoExecute` taint.
    NodeTainted,
    /// The node is Ready again.
    NodeReady,
    /// The pod is marked not Ready.
    PodNotReady,
    /// The pod is marked for deletion (Terminating).
    PodTerminating,
    /// Its controller creates a replacement elsewhere.
    PodReplaced,
    /// Its containers start again in place (its restart count goes up), same pod.
    PodRestarted,
    /// A roll's step is issued on the node (the one before back, plus `settle`).
    RollIssued,
}

/// When a transition should happen: between two offsets, or never within the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Window {
    /// At or after `earliest`, at or before `latest` (`None`: no upper bound the model
    /// can give, such as a machine's boot time).
    Between {
        /// The earliest offset.
        #[serde(rename = "earliest_ms", serialize_with = "json_ms::one")]
        earliest: Duration,
        /// The latest offset, when the model knows one.
        #[serde(rename = "latest_ms", serialize_with = "json_ms::maybe")]
        latest: Option<Duration>,
    },
    /// It does not happen.
    Never,
}

impl Window {
    /// The window counted from `zero` instead of from the model's own origin (moments
    /// before `zero` become `zero`).
    pub fn counted_from(self, zero: Duration) -> Window {
        match self {
            Window::Never => Window::Never,
            Window::Between { earliest, latest } => Window::Between {
                earliest: earliest.saturating_sub(zero),
                latest: latest.map(|l| l.saturating_sub(zero)),
            },
        }
    }
}

/// Why the model predicts what it does: the rule behind each window, named for a person.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Rule {
    /// Nothing heard for the grace period, seen at the next monitor pass.
    GracePeriod,
    /// The node answered again before the grace period ran out.
    BackBeforeGrace,
    /// Taints are added through the zone's queue, at `rate` nodes a second; at most
    /// `position` nodes may be ahead of this one (0: first for certain; nodes queued at
    /// overlapping times may go in either order, so the window covers every order).
    EvictionQueue {
        /// Nodes per second.
        rate: f64,
        /// Its place in the queue.
        position: usize,
    },
    /// Every zone is fully disrupted: the controller removes the taints and evicts nothing.
    AllZonesDisrupted,
    /// The zone is partially disrupted and no larger than the large-cluster threshold:
    /// evictions stop.
    PartialDisruptionSmallZone {
        /// The zone.
        zone: String,
    },
    /// The pod tolerates the taint for this long.
    Toleration(#[serde(serialize_with = "json_ms::one")] Duration),
    /// The pod tolerates the taint without a limit.
    ToleratesForever,
    /// The node came back before the pod's toleration ran out; the taint went with it.
    BackBeforeToleration,
    /// Marked not Ready in the same pass that made its node Unknown.
    WithItsNode,
    /// A ReplicaSet replaces a pod as soon as it is marked for deletion.
    ReplicaSetReplaces,
    /// A StatefulSet waits for the pod object to be gone: the node back, deleted, or
    /// out of service.
    StatefulSetWaits,
    /// The out-of-service taint lets the pod garbage collector force-delete the pod.
    OutOfService,
    /// The Node object was deleted: the pod garbage collector deletes its orphaned pods
    /// after a quarantine, at its next pass.
    NodeDeleted,
    /// A step of the experiment deleted the pod (force: removed at once, so its
    /// controller recreates it on the deletion event).
    DeletedByStep {
        /// Grace period zero.
        force: bool,
    },
    /// Nothing replaces a pod without a controller (or a DaemonSet's pod).
    NotReplaced,
    /// The node posts Ready once it answers again.
    Answers,
    /// A machine that restarted: its kubelet starts the pod's containers again in place
    /// once it is back (a new sandbox, the restart count up), same pod object.
    RestartsInPlace,
    /// A roll's action that leaves the node Ready (a kubelet restart, a cordon, a drain):
    /// nothing goes Unknown, and the roll goes on at once.
    StaysReady,
    /// A roll's action silences the node and nothing in the roll brings it back: the roll
    /// stops at it (its timeout).
    NotBroughtBack,
    /// A node that comes back by itself (a reboot) counts as back once its kubelet renewed
    /// its Lease twice after the step or it is seen turning Ready; how long it boots is not
    /// modelled.
    BackAfterRenewals,
    /// A roll's node is taken once the one before is back, plus the roll's `settle`.
    RollGate {
        /// The roll's `settle`.
        #[serde(rename = "settle_ms", serialize_with = "json_ms::one")]
        settle: Duration,
    },
}

/// One prediction: what, for which node or pod, when, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// The node or pod (`namespace/name`).
    pub subject: String,
    /// What happens to it.
    pub transition: Transition,
    /// When.
    pub window: Window,
    /// Why.
    pub rule: Rule,
}
