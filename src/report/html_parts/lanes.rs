//! The rows of the timeline picture: one lane per node, pod, workload, probe, the API
//! server and each query, each a list of coloured segments, and what each lane is about
//! (so expectations and faults can be drawn on the lane of their subject).

use std::collections::BTreeMap;

use crate::judge::{format_relative, labels};
use crate::record::RunRecord;
use crate::timeline::{ConditionStatus, Event, NodeState, PodId, PodState, WorkloadState};

/// Observed states of one object over time (`None` = gone).
type Changes<S> = Vec<(i64, Option<S>)>;

/// A coloured stretch of one lane.
pub(super) struct Segment {
    pub(super) from: i64,
    pub(super) to: i64,
    pub(super) colour: &'static str,
    pub(super) title: String,
}

/// A stretch of a pod lane during which the pod was bound to one node: the lane names the
/// node on the picture, once per stretch, so a reader sees where each pod ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NodeStretch {
    pub(super) from: i64,
    pub(super) to: i64,
    pub(super) node: String,
}

/// What a lane shows.
pub(super) enum LaneOf<'r> {
    /// A node, by name.
    Node(&'r str),
    /// One pod object (name and UID), first seen at `first_seen`.
    Pod {
        id: &'r PodId,
        first_seen: i64,
        states: Changes<&'r PodState>,
    },
    /// A workload, as `namespace/kind/name`.
    Workload(String),
    /// A probe, by name.
    Probe(String),
    /// The API server or a query: no expectation is about it.
    Other,
}

/// One row of the picture.
pub(super) struct Lane<'r> {
    pub(super) label: String,
    pub(super) segments: Vec<Segment>,
    pub(super) of: LaneOf<'r>,
    /// For pod lanes, the node of each stretch; empty for the others.
    pub(super) nodes: Vec<NodeStretch>,
}

fn node_colour(s: &NodeState) -> &'static str {
    match s.ready {
        ConditionStatus::True if s.unschedulable => "#8fcf9a",
        ConditionStatus::True => "#2e9e44",
        ConditionStatus::False => "#f0a030",
        ConditionStatus::Unknown => "#d64541",
    }
}

fn pod_colour(s: &PodState) -> &'static str {
    if s.terminating {
        "#9a9a9a"
    } else if s.ready {
        "#2e9e44"
    } else if s.phase == "Running" {
        "#f0a030"
    } else if s.phase == "Pending" {
        "#8fb8de"
    } else {
        "#d64541"
    }
}

fn workload_colour(s: &WorkloadState) -> &'static str {
    if s.is_available() {
        "#2e9e44"
    } else if s.available == 0 {
        "#d64541"
    } else {
        "#f0a030"
    }
}

fn probe_colour((up, _): &(bool, String)) -> &'static str {
    if *up { "#2e9e44" } else { "#d64541" }
}

/// Turns `(offset, Some(state))` changes into segments ending at the next change.
fn segments<S>(
    changes: &[(i64, Option<S>)],
    (end, zero): (i64, i64),
    colour: impl Fn(&S) -> &'static str,
    title: impl Fn(&S) -> String,
) -> Vec<Segment> {
    let mut out = Vec::new();
    for (i, (at, state)) in changes.iter().enumerate() {
        let to = changes.get(i + 1).map(|(t, _)| *t).unwrap_or(end);
        if let Some(s) = state {
            out.push(Segment {
                from: *at,
                to,
                colour: colour(s),
                title: format!("{} from {}", title(s), format_relative(*at - zero)),
            });
        }
    }
    out
}

/// The stretches of a pod's changes during which it was bound to one node, each ending
/// where the pod moved, went unscheduled or went away.
pub(super) fn node_stretches(changes: &[(i64, Option<&PodState>)], end: i64) -> Vec<NodeStretch> {
    let mut out: Vec<NodeStretch> = Vec::new();
    let mut open: Option<NodeStretch> = None;
    for (at, state) in changes {
        let node = state.and_then(|s| s.node.as_deref());
        match (&mut open, node) {
            (Some(o), Some(n)) if o.node == n => {}
            (o, n) => {
                if let Some(mut done) = o.take() {
                    done.to = *at;
                    out.push(done);
                }
                open = n.map(|n| NodeStretch {
                    from: *at,
                    to: end,
                    node: n.to_string(),
                });
            }
        }
    }
    out.extend(open);
    out
}

/// Every lane of `record`, each ending at `end` when its object is still there: nodes by
/// name, pods in the order first seen, workloads, probes, the API server, queries.
pub(super) fn lanes(record: &RunRecord, end: i64) -> Vec<Lane<'_>> {
    // Titles say their moments from time zero, as every report does.
    let zero = record.zero_ms();
    // States are borrowed from the record, not copied: at 30,000 pods a copy of every
    // pod's states is tens of MB.
    let mut nodes: BTreeMap<&str, Changes<&NodeState>> = BTreeMap::new();
    let mut pods: BTreeMap<&PodId, Changes<&PodState>> = BTreeMap::new();
    let mut workloads: BTreeMap<String, Vec<(i64, Option<WorkloadState>)>> = BTreeMap::new();
    let mut pod_order: Vec<&PodId> = Vec::new();
    let mut probes: BTreeMap<String, Changes<(bool, String)>> = BTreeMap::new();
    let mut api: Changes<(bool, String)> = Vec::new();
    let mut queries: BTreeMap<String, Changes<(bool, String)>> = BTreeMap::new();
    let bad_side = |name: &str, value: Option<f64>| -> bool {
        let threshold = record
            .experiment
            .abort
            .conditions
            .iter()
            .find_map(|c| match &c.kind {
                crate::experiment::model::AbortKind::Query { threshold, .. } if c.name == name => {
                    Some(*threshold)
                }
                _ => None,
            });
        match (value, threshold) {
            (Some(v), Some(t)) => t.crossed(v),
            (Some(_), None) => false,
            (None, _) => true,
        }
    };
    for e in &record.timeline.entries {
        match &e.event {
            Event::Node { name, after, .. } => nodes
                .entry(name.as_str())
                .or_default()
                .push((e.offset_ms, after.as_ref())),
            Event::Pod { pod, after, .. } => {
                let pod: &PodId = pod;
                if !pods.contains_key(pod) {
                    pod_order.push(pod);
                }
                pods.entry(pod)
                    .or_default()
                    .push((e.offset_ms, after.as_deref()));
            }
            Event::Workload {
                workload, after, ..
            } => workloads
                .entry(workload.to_string())
                .or_default()
                .push((e.offset_ms, *after)),
            Event::Probe {
                name, up, detail, ..
            } => probes
                .entry(name.clone())
                .or_default()
                .push((e.offset_ms, Some((*up, detail.clone())))),
            Event::Api { up, detail } => api.push((e.offset_ms, Some((*up, detail.clone())))),
            Event::Query {
                name,
                value,
                detail,
            } => {
                let said = match value {
                    Some(v) => format!("{v}: {detail}"),
                    None => format!("no data: {detail}"),
                };
                queries
                    .entry(name.clone())
                    .or_default()
                    .push((e.offset_ms, Some((!bad_side(name, *value), said))));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (name, changes) in &nodes {
        out.push(Lane {
            label: format!("node {name}"),
            segments: segments(
                changes,
                (end, zero),
                |s| node_colour(s),
                |s| labels::node_label(Some(*s)),
            ),
            of: LaneOf::Node(name),
            nodes: Vec::new(),
        });
    }
    for pod in pod_order {
        let Some(changes) = pods.remove(pod) else {
            continue;
        };
        let uid: String = pod.uid.chars().take(8).collect();
        out.push(Lane {
            label: format!("pod {} ({uid})", pod.name),
            segments: segments(
                &changes,
                (end, zero),
                |s| pod_colour(s),
                |s| labels::pod_label(Some(*s)),
            ),
            nodes: node_stretches(&changes, end),
            of: LaneOf::Pod {
                id: pod,
                first_seen: changes.first().map_or(0, |(at, _)| *at),
                states: changes,
            },
        });
    }
    for (name, changes) in &workloads {
        out.push(Lane {
            label: name.clone(),
            segments: segments(changes, (end, zero), workload_colour, |s| {
                labels::workload_label(Some(s))
            }),
            of: LaneOf::Workload(name.clone()),
            nodes: Vec::new(),
        });
    }
    for (name, changes) in &probes {
        out.push(Lane {
            label: format!("probe {name}"),
            segments: segments(changes, (end, zero), probe_colour, |(up, detail)| {
                format!("{} ({detail})", labels::probe_label(Some(up)))
            }),
            of: LaneOf::Probe(name.clone()),
            nodes: Vec::new(),
        });
    }
    if !api.is_empty() {
        out.push(Lane {
            label: "API server".to_string(),
            segments: segments(&api, (end, zero), probe_colour, |(up, detail)| {
                format!("{} ({detail})", if *up { "answers" } else { "unreachable" })
            }),
            of: LaneOf::Other,
            nodes: Vec::new(),
        });
    }
    for (name, changes) in &queries {
        out.push(Lane {
            label: format!("query {name}"),
            segments: segments(changes, (end, zero), probe_colour, |(_, said)| said.clone()),
            of: LaneOf::Other,
            nodes: Vec::new(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_on(node: Option<&str>) -> PodState {
        PodState::running_on(node)
    }

    #[test]
    fn a_pod_that_moves_has_one_stretch_per_node() {
        let (pending, a, b) = (pod_on(None), pod_on(Some("a")), pod_on(Some("b")));
        let changes = vec![
            (0, Some(&pending)),
            (10, Some(&a)),
            (20, Some(&a)),
            (30, Some(&b)),
            (40, None),
        ];
        let stretch = |from, to, node: &str| NodeStretch {
            from,
            to,
            node: node.into(),
        };
        assert_eq!(
            node_stretches(&changes, 50),
            vec![stretch(10, 30, "a"), stretch(30, 40, "b")]
        );
        assert_eq!(
            node_stretches(&changes[..3], 50),
            vec![stretch(10, 50, "a")],
            "still there at the end: the stretch runs to it"
        );
    }
}
