//! The two sides of a comparison as the reports name them: where the runs came from, which
//! clusters they ran on, with which Kubernetes version and node-lifecycle timers.

use crate::experiment::model::ClusterTimers;
use crate::series::Series;

/// One side of a comparison: where its runs came from and which clusters they ran on.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// The path given for it, or `this run`.
    pub label: String,
    /// The clusters its runs were made against, each once, in the order first met.
    pub clusters: Vec<ClusterSummary>,
}

/// A cluster as a run record describes it, as far as a comparison needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSummary {
    /// Name from the inventory.
    pub name: String,
    /// API server version.
    pub server_version: Option<String>,
    /// The node-lifecycle timers bounds were resolved against.
    pub timers: ClusterTimers,
}

/// The labels of [`timer_rows`], in its order.
pub const TIMER_LABELS: [&str; 4] = [
    "node-monitor period",
    "node-monitor grace period",
    "default unreachable toleration",
    "default not-ready toleration",
];

/// The timers as (label, value) rows, in the order the node lifecycle uses them.
pub fn timer_rows(t: &ClusterTimers) -> [(&'static str, String); 4] {
    let s = |d: std::time::Duration| {
        let secs = d.as_secs_f64();
        if secs.fract() == 0.0 {
            format!("{secs:.0}s")
        } else {
            format!("{secs:.1}s")
        }
    };
    let [period, grace, unreachable, not_ready] = TIMER_LABELS;
    [
        (period, s(t.node_monitor_period)),
        (grace, s(t.node_monitor_grace_period)),
        (unreachable, s(t.default_unreachable_toleration)),
        (not_ready, s(t.default_not_ready_toleration)),
    ]
}

/// The side made of `sets`, called `label`.
pub(super) fn side(label: &str, sets: &[Series]) -> Side {
    let mut clusters: Vec<ClusterSummary> = Vec::new();
    for r in sets.iter().flat_map(Series::runs) {
        let c = ClusterSummary {
            name: r.cluster.name.clone(),
            server_version: r.cluster.server_version.clone(),
            timers: r.cluster.timers,
        };
        if !clusters.contains(&c) {
            clusters.push(c);
        }
    }
    Side {
        label: label.to_string(),
        clusters,
    }
}
