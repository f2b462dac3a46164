//! The cluster's node-lifecycle timers as the experiment's bounds resolve against them:
//! their own file, beside the experiment's model that names them, so that the run's
//! schedule, its interlock and the pre-flight resolve a bound the same one way.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::model::{Bound, BoundContext};

/// The cluster's node-lifecycle timers in force: read from the cluster where it shows them,
/// else as the inventory states them, else the upstream defaults, marked assumed (where
/// each came from is `crate::timers`). Bounds such as `grace` resolve against these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterTimers {
    /// kube-controller-manager `--node-monitor-period`.
    pub node_monitor_period: Duration,
    /// kube-controller-manager `--node-monitor-grace-period`.
    pub node_monitor_grace_period: Duration,
    /// kube-apiserver `--default-unreachable-toleration-seconds`.
    pub default_unreachable_toleration: Duration,
    /// kube-apiserver `--default-not-ready-toleration-seconds`.
    pub default_not_ready_toleration: Duration,
}

impl Default for ClusterTimers {
    /// Upstream defaults (Kubernetes 1.32+): what a timer is assumed to be when neither
    /// the cluster nor the inventory gives it, and then marked so (`crate::timers`).
    fn default() -> Self {
        ClusterTimers {
            node_monitor_period: Duration::from_secs(5),
            node_monitor_grace_period: Duration::from_secs(50),
            default_unreachable_toleration: Duration::from_secs(300),
            default_not_ready_toleration: Duration::from_secs(300),
        }
    }
}

impl ClusterTimers {
    /// The context bounds resolve against, for a subject with the given toleration.
    pub fn bound_context(&self, toleration: Option<Duration>) -> BoundContext {
        BoundContext {
            grace: self.node_monitor_grace_period,
            monitor_period: self.node_monitor_period,
            toleration,
        }
    }
}

impl ClusterTimers {
    /// `bound` resolved with the cluster's default toleration (a step time, a delay, an
    /// expectation's window): with a toleration supplied, resolution cannot fail.
    pub fn resolve(&self, bound: &Bound) -> Duration {
        let ctx = self.bound_context(Some(self.default_unreachable_toleration));
        bound.resolve(&ctx).unwrap_or_default()
    }
}
