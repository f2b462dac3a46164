//! The model's predictions in words, as `plan`, `explain` and the reports print them.

use std::fmt;
use std::time::Duration;

use super::{Rule, Transition, Window};

/// An offset from the start of the run, as the timeline prints offsets (`+42.0s`).
pub fn offset(d: Duration) -> String {
    format!("+{:.1}s", d.as_secs_f64())
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Window::Never => f.write_str("never"),
            Window::Between {
                earliest,
                latest: Some(latest),
            } => write!(f, "{} … {}", offset(*earliest), offset(*latest)),
            Window::Between {
                earliest,
                latest: None,
            } => write!(f, "from {}", offset(*earliest)),
        }
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transition::NodeUnknown => "Unknown",
            Transition::NodeTainted => "tainted unreachable:NoExecute",
            Transition::NodeReady => "Ready again",
            Transition::PodNotReady => "not Ready",
            Transition::PodTerminating => "Terminating (evicted)",
            Transition::PodReplaced => "replaced",
            Transition::PodRestarted => "restarted in place",
            Transition::RollIssued => "its roll step issued",
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::GracePeriod => {
                f.write_str("grace period after the last lease renewal, at the next monitor pass")
            }
            Rule::BackBeforeGrace => {
                f.write_str("the node answers again before the grace period runs out")
            }
            Rule::EvictionQueue { rate, position: 0 } => {
                write!(f, "first in its zone's queue ({rate}/s)")
            }
            Rule::EvictionQueue { rate, position } => {
                write!(
                    f,
                    "up to {position} node(s) ahead of it in its zone's queue at {rate}/s"
                )
            }
            Rule::AllZonesDisrupted => {
                f.write_str("every zone fully disrupted: the controller evicts nothing")
            }
            // Nodes without zone labels are one zone with no name.
            Rule::PartialDisruptionSmallZone { zone } if zone.is_empty() => f.write_str(
                "the cluster's one zone (no node has zone labels) partially disrupted and \
                 small: evictions stop",
            ),
            Rule::PartialDisruptionSmallZone { zone } => {
                write!(
                    f,
                    "zone `{zone}` partially disrupted and small: evictions stop"
                )
            }
            Rule::Toleration(d) => write!(f, "its toleration, {}s after the taint", d.as_secs()),
            Rule::ToleratesForever => f.write_str("tolerates the taint without a limit"),
            Rule::BackBeforeToleration => {
                f.write_str("the node answers again before the toleration runs out")
            }
            Rule::WithItsNode => f.write_str("with its node"),
            Rule::ReplicaSetReplaces => {
                f.write_str("its ReplicaSet replaces it once it is Terminating")
            }
            Rule::StatefulSetWaits => f.write_str("a StatefulSet waits for the pod to be gone"),
            Rule::OutOfService => f.write_str("the out-of-service taint"),
            Rule::NodeDeleted => f.write_str(
                "the Node deleted: one of the pod garbage collector's next two passes after 40 s of quarantine",
            ),
            Rule::DeletedByStep { force: true } => {
                f.write_str("force-deleted by a step: its controller recreates it at once")
            }
            Rule::DeletedByStep { force: false } => f.write_str("deleted by a step"),
            Rule::NotReplaced => f.write_str("nothing replaces it"),
            Rule::Answers => {
                f.write_str("once it answers again (how fast it starts is not modelled)")
            }
            Rule::RestartsInPlace => f.write_str(
                "the machine restarted: its kubelet starts the containers again in place once it \
                 is back",
            ),
            Rule::StaysReady => f.write_str("the roll's action leaves the node Ready"),
            Rule::NotBroughtBack => {
                f.write_str("silenced and nothing in the roll brings it back: the roll stops")
            }
            Rule::BackAfterRenewals => f.write_str(
                "back once its kubelet renewed its lease twice after the step (how long it \
                 boots is not modelled)",
            ),
            Rule::RollGate { settle } => write!(
                f,
                "the node before back, plus the roll's settle ({}s)",
                settle.as_secs_f64()
            ),
        }
    }
}
