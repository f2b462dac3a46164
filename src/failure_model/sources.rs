//! Where each rule of the model comes from upstream: the controller and function, the
//! kubelet field, or the docs page, as every report of a judged behaviour names it.

use super::Rule;

impl Rule {
    /// The upstream source of the rule (Kubernetes v1.33, `k8s.io/kubernetes`), short
    /// enough for a report's column.
    pub fn source(&self) -> &'static str {
        match self {
            Rule::GracePeriod | Rule::BackBeforeGrace => {
                "nodelifecycle: tryUpdateNodeHealth (--node-monitor-grace-period, --node-monitor-period)"
            }
            Rule::EvictionQueue { .. } => {
                "nodelifecycle: doNoExecuteTaintingPass (--node-eviction-rate, burst 1)"
            }
            Rule::AllZonesDisrupted => {
                "nodelifecycle: handleDisruption (every zone FullDisruption)"
            }
            Rule::PartialDisruptionSmallZone { .. } => {
                "nodelifecycle: ComputeZoneState, ReducedQPSFunc (--unhealthy-zone-threshold, --large-cluster-size-threshold)"
            }
            Rule::Toleration(_) => {
                "tainteviction: getMinTolerationTime; admission DefaultTolerationSeconds"
            }
            Rule::ToleratesForever => "tainteviction: a toleration without tolerationSeconds",
            Rule::BackBeforeToleration => "tainteviction: the taint removed cancels the deletion",
            Rule::WithItsNode => "nodelifecycle: MarkPodsNotReady",
            Rule::ReplicaSetReplaces => {
                "replicaset: FilterActivePods (a pod with a deletionTimestamp does not count)"
            }
            Rule::StatefulSetWaits => "statefulset: at most one pod per identity",
            Rule::OutOfService => "podgc: gcTerminating (node.kubernetes.io/out-of-service)",
            Rule::NodeDeleted => "podgc: gcOrphaned (quarantineTime 40 s, gcCheckPeriod 20 s)",
            Rule::DeletedByStep { .. } => "the step's own delete; the owner's informer",
            Rule::NotReplaced => "no controller recreates it (none, or a DaemonSet's node)",
            Rule::Answers => "kubelet: tryUpdateNodeStatus (the Ready condition)",
            Rule::RestartsInPlace => {
                "kubelet: kuberuntime SyncPod (the sandbox changed: a new one, containers started, restartCount +1)"
            }
            Rule::StaysReady
            | Rule::NotBroughtBack
            | Rule::BackAfterRenewals
            | Rule::RollGate { .. } => "faultline's roll: settle and back-gate",
        }
    }
}
