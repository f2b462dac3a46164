//! The most likely cause of a deviation, named from the model's own terms: heartbeat
//! timing, zone disruption, the eviction queue, the node back before a deadline, a pod's
//! node doing something else; "outside the model" when none of these fits.

use std::collections::BTreeMap;
use std::time::Duration;

use super::inputs::at;
use super::{Explained, Fit};
use crate::experiment::model::WorkloadKind;
use crate::failure_model::{ControllerSettings, Rule, Transition, Window};
use crate::record::RunRecord;
use crate::timeline::{ConditionStatus, Event, GapPhase};

/// Said when nothing the model knows explains a deviation.
pub(crate) const OUTSIDE: &str = "outside the model";

/// The observation gap (its source) that `t` falls in, if any: then the time is only known
/// to lie within the gap.
fn gap_around(record: &RunRecord, t: Duration) -> Option<String> {
    let mut open: BTreeMap<&str, Duration> = BTreeMap::new();
    for e in &record.timeline.entries {
        if let Event::Gap { source, phase, .. } = &e.event {
            match phase {
                GapPhase::Began => {
                    open.insert(source.as_str(), at(e.offset_ms));
                }
                GapPhase::Ended => {
                    if let Some(began) = open.remove(source.as_str())
                        && began <= t
                        && t <= at(e.offset_ms)
                    {
                        return Some(source.clone());
                    }
                }
            }
        }
    }
    None
}

/// How many of the nodes the run saw were not Ready at `t`, of how many.
fn not_ready_at(record: &RunRecord, t: Duration) -> (usize, usize) {
    let mut ready: BTreeMap<&str, bool> = BTreeMap::new();
    for e in &record.timeline.entries {
        if at(e.offset_ms) > t {
            break;
        }
        if let Event::Node { name, after, .. } = &e.event {
            match after {
                Some(state) => {
                    ready.insert(name, state.ready == ConditionStatus::True);
                }
                None => {
                    ready.remove(name.as_str());
                }
            }
        }
    }
    (ready.values().filter(|r| !**r).count(), ready.len())
}

/// Nodes other than `node` the run saw tainted unreachable:NoExecute in `[from, to]`.
fn tainted_between(record: &RunRecord, node: &str, from: Duration, to: Duration) -> usize {
    let mut names: Vec<&str> = Vec::new();
    for e in &record.timeline.entries {
        let t = at(e.offset_ms);
        if t < from || t > to {
            continue;
        }
        if let Event::Node {
            name,
            after: Some(a),
            ..
        } = &e.event
            && name != node
            && a.taints
                .iter()
                .any(|x| x.key == "node.kubernetes.io/unreachable" && x.effect == "NoExecute")
            && !names.contains(&name.as_str())
        {
            names.push(name);
        }
    }
    names.len()
}

fn latest(w: Window) -> Option<Duration> {
    match w {
        Window::Between { latest, .. } => latest,
        Window::Never => None,
    }
}

fn earliest(w: Window) -> Option<Duration> {
    match w {
        Window::Between { earliest, .. } => Some(earliest),
        Window::Never => None,
    }
}

/// The cause of `item`'s deviation. `items` are every explained transition of the run
/// (a pod's cause often is its node's).
pub(super) fn of(
    record: &RunRecord,
    settings: &ControllerSettings,
    items: &[Explained],
    item: &Explained,
) -> String {
    if let Some(source) = item.observed.and_then(|t| gap_around(record, t)) {
        return format!(
            "the observer lost sight of {source} around then: the change is only known to lie \
             within that gap"
        );
    }
    let node_item = |t: Transition| {
        items.iter().find(|i| {
            i.node == item.node && i.prediction.subject == item.node && i.prediction.transition == t
        })
    };
    let node_said = |t: Transition| -> Option<String> {
        node_item(t)
            .filter(|i| i.fit.deviates())
            .and_then(|i| i.cause.clone().or_else(|| Some(i.fit.to_string())))
    };
    let back = node_item(Transition::NodeReady).and_then(|i| i.observed);
    let p = &item.prediction;
    // A window the node's return cut short: the transition was due, not certain.
    if item.fit == Fit::Missing
        && let Some(b) = item
            .until
            .filter(|b| latest(p.window).is_some_and(|l| *b <= l))
    {
        return format!(
            "the fault was undone at {} inside the window, before the controller got to it",
            crate::failure_model::words::offset(
                b.saturating_sub(super::inputs::at(record.zero_ms()))
            )
        );
    }
    match (p.transition, item.fit) {
        (Transition::NodeUnknown, Fit::Early(_)) => format!(
            "heartbeat timing: the node went Unknown sooner than the grace period ({}s) after \
             its last possible Lease renewal; its kubelet stopped renewing before the step \
             finished, or its lease is shorter than the {}s assumed",
            settings.node_monitor_grace_period.as_secs(),
            settings.node_lease_duration.as_secs()
        ),
        (Transition::NodeUnknown, Fit::Late(_)) => "heartbeat timing: the controller heard \
             from the node after the fault (a Lease renewal or status write in flight as the \
             step ran), or its monitor pass ran late"
            .to_string(),
        (Transition::NodeUnknown, Fit::Missing) => "the fault did not silence the node: it kept \
             renewing its Lease (a supervisor restarting the kubelet, a partition that left the \
             API server reachable)"
            .to_string(),
        (Transition::NodeTainted, Fit::Missing) => {
            let t = latest(p.window).unwrap_or_default();
            let (down, total) = not_ready_at(record, t);
            if total > 0 && down == total {
                "full disruption: every node was NotReady, so the controller took the fault \
                 for its own side's and evicted nothing"
                    .to_string()
            } else if down > 2 && down as f64 / total as f64 >= settings.unhealthy_zone_threshold {
                format!(
                    "zone disruption stopped evictions: {down} of {total} nodes were not Ready \
                     (partial disruption from {:.0} %), and with {total} nodes (at most {}) \
                     the controller stops tainting",
                    settings.unhealthy_zone_threshold * 100.0,
                    settings.large_cluster_size_threshold
                )
            } else if let Some(why) = node_said(Transition::NodeUnknown) {
                format!("its node did not go Unknown as predicted ({why})")
            } else {
                OUTSIDE.to_string()
            }
        }
        (Transition::NodeTainted, Fit::Late(_)) => {
            let from = earliest(p.window).unwrap_or_default();
            let to = item.observed.unwrap_or(from);
            let ahead = tainted_between(record, &item.node, from, to);
            if ahead > 0 {
                format!(
                    "the eviction queue's rate delayed it: {ahead} other node(s) were tainted \
                     first, at {}/s",
                    settings.eviction_rate
                )
            } else if let Some(why) = node_said(Transition::NodeUnknown) {
                format!("its node went Unknown late ({why})")
            } else {
                OUTSIDE.to_string()
            }
        }
        (Transition::NodeTainted, Fit::Unexpected) => match &p.rule {
            Rule::AllZonesDisrupted | Rule::PartialDisruptionSmallZone { .. } => format!(
                "{OUTSIDE}: it predicted zone disruption to stop evictions, but the cluster's \
                 zones (not in the record) may split its nodes otherwise"
            ),
            _ => OUTSIDE.to_string(),
        },
        (Transition::NodeReady, Fit::Early(_)) => "the node answered before faultline undid \
             the fault: something else brought it back (a restart policy, its self-restore)"
            .to_string(),
        (Transition::PodNotReady, _) => match node_said(Transition::NodeUnknown) {
            Some(why) => format!("with its node ({why})"),
            None => OUTSIDE.to_string(),
        },
        (Transition::PodTerminating, Fit::Missing) => {
            if let Some(why) = node_said(Transition::NodeTainted) {
                format!("its node's taint did not come as predicted ({why})")
            } else if back.is_some_and(|b| earliest(p.window).is_some_and(|e| b <= e)) {
                "the node came back before the taint's deadline".to_string()
            } else {
                OUTSIDE.to_string()
            }
        }
        (Transition::PodTerminating, Fit::Late(_)) => match node_said(Transition::NodeTainted) {
            Some(why) => format!("its node's taint came late ({why})"),
            None if p.rule == Rule::NodeDeleted => {
                format!("{OUTSIDE}: the pod garbage collector deleted it late")
            }
            None => format!("{OUTSIDE}: the taint eviction controller deleted it late"),
        },
        (Transition::PodTerminating, Fit::Early(_) | Fit::Unexpected) => format!(
            "{OUTSIDE}: something other than the taint deleted it (a person, a controller, a \
             step the record does not tie to the node)"
        ),
        (Transition::PodReplaced, Fit::Missing | Fit::Late(_)) => {
            if item.workload.as_ref().map(|w| w.kind) == Some(WorkloadKind::StatefulSet) {
                "a StatefulSet waits for the old pod object to be gone".to_string()
            } else if let Some(i) = items.iter().find(|i| {
                i.prediction.subject == p.subject
                    && i.prediction.transition == Transition::PodTerminating
                    && i.fit.deviates()
            }) {
                format!("it was not evicted as predicted ({})", i.fit)
            } else {
                format!(
                    "{OUTSIDE}: no new pod of its workload appeared in time (scheduling, quota \
                     or image pulls may hold it)"
                )
            }
        }
        (Transition::PodReplaced, Fit::Early(_))
            if item.workload.as_ref().map(|w| w.kind) == Some(WorkloadKind::StatefulSet) =>
        {
            match removed_at(record, &p.subject, item.until) {
                Some(t) => format!(
                    "its pod object was removed at {} while its node was still down: something \
                     outside the node lifecycle controller force-deleted it (a reaper, a person), \
                     and the StatefulSet recreated it at once",
                    crate::failure_model::words::offset(
                        t.saturating_sub(super::inputs::at(record.zero_ms()))
                    )
                ),
                None => OUTSIDE.to_string(),
            }
        }
        _ => OUTSIDE.to_string(),
    }
}

/// When the pod `ns/name` was seen removed (its object gone) before `until` (the fault's
/// undo; none: any time), if it was.
fn removed_at(record: &RunRecord, subject: &str, until: Option<Duration>) -> Option<Duration> {
    record.timeline.entries.iter().find_map(|e| match &e.event {
        Event::Pod {
            pod,
            before: Some(_),
            after: None,
        } if format!("{}/{}", pod.namespace, pod.name) == subject
            && until.is_none_or(|u| at(e.offset_ms) < u) =>
        {
            Some(at(e.offset_ms))
        }
        _ => None,
    })
}
