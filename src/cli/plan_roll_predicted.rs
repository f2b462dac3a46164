//! The node failure model's word on each node of a roll, for `plan`: a roll is one
//! rolling step where its nodes are not resolved (offline: the inventory's candidates, or
//! one stand-in), or one step per node once they are ([`roll_member`]); either way each
//! node gets its predicted issue (the one before back, plus `settle`) and its windows,
//! counted from its own issue ([`crate::failure_model::predict_roll`]), as a table.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::experiment::model::RollOrder;
use crate::experiment::model::{Action, BoundContext, ClusterTimers, Experiment, StepTime};
use crate::experiment::roll::{NodeFacts, order_nodes, roll_member, roll_nodes};
use crate::failure_model::{
    ControllerSettings, ModelNode, ModelPod, Owner, RollFault, RollInput, RollNode, Toleration,
    Transition, Window, predict_roll,
};

/// One roll of a plan, as the model predicts it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RollPredicted {
    /// The rolling step's name.
    pub roll: String,
    /// Which nodes the prediction covers when they are not the run's (offline: the
    /// inventory's candidates for the target; without one: a stand-in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covers: Option<String>,
    /// What the roll does to each node, as the model takes it.
    pub fault: RollFault,
    /// Each node, in roll order, with its issue and windows.
    pub nodes: Vec<RollNode>,
}

/// A roll found in the plan's steps, before the model.
struct Found {
    name: String,
    batches: Vec<Vec<String>>,
    actions: Vec<Action>,
    settle: Option<Duration>,
    from: Option<Duration>,
    covers: Option<String>,
}

/// Whether the step is (part of) a roll: its steps are predicted here, not one by one.
pub(super) fn in_a_roll(step: &crate::experiment::model::Step) -> bool {
    step.roll.is_some() || roll_member(step).is_some()
}

/// The rolls of `exp`: rolling steps as written (their nodes not resolved) and expanded
/// rolls (grouped back by [`roll_member`]), in file order.
fn found(
    exp: &Experiment,
    (targets, resolved): (&BTreeMap<String, Vec<String>>, bool),
    offset: &dyn Fn(usize) -> Option<Duration>,
    timers: &ClusterTimers,
    stand_ins: bool,
) -> Vec<Found> {
    let ctx = BoundContext {
        grace: timers.node_monitor_grace_period,
        monitor_period: timers.node_monitor_period,
        toleration: None,
    };
    // Offline no node's zone or role is known: a roll by zones takes them as one zone, a
    // roll by role as workers, by name, as the run would (`roll::order_nodes`); a listed
    // order that does not fit the nodes known offline is the run's to refuse, and the
    // prediction goes on with them as they are. Resolved targets are in the run's order.
    let mut ordered = targets.clone();
    if !resolved {
        let facts = NodeFacts {
            zone_of: &|_| None,
            is_control_plane: &|_| false,
        };
        if order_nodes(exp, &mut ordered, &facts).is_err() {
            ordered = targets.clone();
        }
    }
    let targets = &ordered;
    let mut out: Vec<Found> = Vec::new();
    for (i, step) in exp.steps.iter().enumerate() {
        if let (Some(roll), Some(target)) = (&step.roll, &step.target) {
            let nodes = roll_nodes(roll, targets.get(target).map_or(&[][..], Vec::as_slice));
            let size = usize::try_from(roll.max_unavailable.max(1)).unwrap_or(1);
            let actions = if roll.sequence.is_empty() {
                vec![step.action.clone()]
            } else {
                roll.sequence.iter().map(|a| a.action.clone()).collect()
            };
            let covers = match (stand_ins, resolved) {
                (true, _) => Some(format!(
                    "one stand-in node of `{target}` (no inventory: the run resolves the target)"
                )),
                (false, false) if nodes.is_empty() => {
                    Some(format!("no node of the inventory can be `{target}`"))
                }
                (false, false) => Some(format!(
                    "the inventory's candidates for `{target}`: {} (the run resolves the \
                     target; nodes the inventory does not name are not predicted){}",
                    nodes.join(", "),
                    if roll.order == RollOrder::Zone {
                        "; no zone is known offline: by name, as one zone"
                    } else {
                        ""
                    }
                )),
                (false, true) => None,
            };
            out.push(Found {
                name: step.name.clone(),
                batches: nodes.chunks(size).map(<[String]>::to_vec).collect(),
                actions,
                settle: roll.settle.resolve(&ctx).ok(),
                from: offset(i),
                covers,
            });
            continue;
        }
        let Some((roll, nodes)) = roll_member(step) else {
            continue;
        };
        let batch: Vec<String> = nodes.iter().map(|n| (*n).to_string()).collect();
        let index = match out.iter().position(|f| f.name == roll) {
            Some(k) => k,
            None => {
                out.push(Found {
                    name: roll.to_string(),
                    batches: Vec::new(),
                    actions: Vec::new(),
                    settle: None,
                    from: offset(i),
                    covers: None,
                });
                out.len() - 1
            }
        };
        let f = &mut out[index];
        if f.batches.last() != Some(&batch) {
            // A next batch's first step waits for the one before: its delay is `settle`.
            if f.batches.len() == 1
                && let StepTime::When { delay, .. } = &step.at
            {
                f.settle = delay.resolve(&ctx).ok();
            }
            f.batches.push(batch);
        }
        if f.batches.len() == 1 {
            f.actions.push(step.action.clone());
        }
    }
    out
}

/// Each roll's prediction: `cluster` the whole cluster as the plan knows it, `settings`
/// the controller's. A roll whose first step waits for something observed is left out
/// (no offset to count from); one of a single batch has no settle to know.
pub(super) fn predicted(
    exp: &Experiment,
    targets: (&BTreeMap<String, Vec<String>>, bool),
    offset: &dyn Fn(usize) -> Option<Duration>,
    (timers, settings): (&ClusterTimers, &ControllerSettings),
    (cluster, stand_ins): (&[ModelNode], bool),
) -> Vec<RollPredicted> {
    found(exp, targets, offset, timers, stand_ins)
        .into_iter()
        .filter_map(|f| {
            let from = f.from?;
            let fault = crate::explain::roll_fault(&f.actions);
            let pods: Vec<ModelPod> = f
                .batches
                .iter()
                .flatten()
                .map(|n| ModelPod {
                    name: typical_pod(n),
                    node: n.clone(),
                    owner: Owner::ReplicaSet,
                    toleration: Toleration::Default,
                    deleted: None,
                })
                .collect();
            let mut nodes = cluster.to_vec();
            for n in f.batches.iter().flatten() {
                if !nodes.iter().any(|m| &m.name == n) {
                    nodes.push(ModelNode {
                        name: n.clone(),
                        zone: String::new(),
                        ready: true,
                    });
                }
            }
            let input = RollInput {
                batches: &f.batches,
                from,
                settle: f.settle.unwrap_or(Duration::ZERO),
                fault,
            };
            Some(RollPredicted {
                roll: f.name,
                covers: f.covers,
                fault,
                nodes: predict_roll(settings, &nodes, &pods, &input),
            })
        })
        .collect()
}

/// A window in a table cell: seconds from the start, `≥` for one without an end.
fn cell(w: Option<Window>) -> String {
    match w {
        None => "-".to_string(),
        Some(Window::Never) => "never".to_string(),
        Some(Window::Between {
            earliest,
            latest: Some(latest),
        }) if latest == earliest => format!("{:.1}", earliest.as_secs_f64()),
        Some(Window::Between {
            earliest,
            latest: Some(latest),
        }) => format!("{:.1}-{:.1}", earliest.as_secs_f64(), latest.as_secs_f64()),
        Some(Window::Between {
            earliest,
            latest: None,
        }) => format!("≥{:.1}", earliest.as_secs_f64()),
    }
}

/// The widest a table line may be: a terminal's 80 columns.
const COLUMNS: usize = 80;

impl RollPredicted {
    /// The roll's table: one row per node in roll order (the node on a line of its own
    /// when a row would not fit 80 columns).
    pub(super) fn table(&self) -> String {
        let what = match self.fault {
            RollFault::ComesBack => {
                "; * only if the node is still silent then: its boot time is not modelled"
            }
            RollFault::Silences => "; nothing in the roll brings a node back: it stops there",
            RollFault::StaysReady => "; its action leaves each node Ready",
        };
        let mut out = format!(
            "  roll `{}`, node by node (seconds from the start{what}):\n",
            self.roll
        );
        if let Some(covers) = &self.covers {
            out.push_str(&format!("    for {covers}\n"));
        }
        let star = if self.fault == RollFault::ComesBack {
            "*"
        } else {
            ""
        };
        let header = [
            "issued".to_string(),
            format!("Unknown{star}"),
            format!("tainted{star}"),
            format!("evicted{star}"),
            "Ready again".to_string(),
        ];
        let rows: Vec<(String, [String; 5])> = self
            .nodes
            .iter()
            .map(|n| {
                let node = |t: Transition| {
                    n.predictions
                        .iter()
                        .find(|p| p.subject == n.node && p.transition == t)
                        .map(|p| p.window)
                };
                let evicted = n
                    .predictions
                    .iter()
                    .find(|p| p.subject != n.node && p.transition == Transition::PodTerminating)
                    .map(|p| p.window);
                (
                    n.node.clone(),
                    [
                        cell(Some(n.issued)),
                        cell(node(Transition::NodeUnknown)),
                        cell(node(Transition::NodeTainted)),
                        cell(evicted),
                        cell(node(Transition::NodeReady)),
                    ],
                )
            })
            .collect();
        let mut widths = header.clone().map(|h| h.chars().count());
        for (_, cells) in &rows {
            for (w, c) in widths.iter_mut().zip(cells) {
                *w = (*w).max(c.chars().count());
            }
        }
        let name_width = rows
            .iter()
            .map(|(n, _)| n.chars().count())
            .chain(["node".len()])
            .max()
            .unwrap_or(4);
        let line = |cells: &[String; 5]| -> String {
            cells
                .iter()
                .zip(widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        let cells_width: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
        if 4 + name_width + 2 + cells_width <= COLUMNS {
            out.push_str(&format!("    {:<name_width$}  {}\n", "node", line(&header)));
            for (node, cells) in &rows {
                out.push_str(&format!("    {node:<name_width$}  {}\n", line(cells)));
            }
        } else {
            out.push_str(&format!("    node\n      {}\n", line(&header)));
            for (node, cells) in &rows {
                out.push_str(&format!("    {node}\n      {}\n", line(cells)));
            }
        }
        out
    }
}

/// The subject standing for the pods of a node in the plan.
const TYPICAL_POD: &str = "its pods (default toleration, ReplicaSet)";

/// The subject standing for the pods on `node`.
pub(super) fn typical_pod(node: &str) -> String {
    format!("{node} {TYPICAL_POD}")
}

/// The subject standing for the pods of workload `w` on `node` ([`typical_pods`]), saying
/// the toleration it was given.
pub(super) fn typical_pod_of(
    node: &str,
    w: &crate::experiment::model::WorkloadRef,
    toleration: crate::failure_model::Toleration,
) -> String {
    use crate::failure_model::Toleration;
    let tolerates = match (w.kind, toleration) {
        (crate::experiment::model::WorkloadKind::DaemonSet, _) => {
            "tolerate unreachable forever, as a DaemonSet's do".to_string()
        }
        (_, Toleration::Default) => "default toleration".to_string(),
        (_, Toleration::Forever) => "tolerate unreachable forever, as its template says".into(),
        (_, Toleration::For(d)) => format!(
            "tolerate unreachable {}, as its template says",
            crate::timeline::format_secs(d)
        ),
    };
    format!("{}{tolerates})", typical_pods_prefix(node, w))
}

/// What every [`typical_pod_of`] subject of workload `w` on `node` starts with, whatever
/// toleration it says (it ends with " (").
pub(super) fn typical_pods_prefix(node: &str, w: &crate::experiment::model::WorkloadRef) -> String {
    format!("{node} pods of {w} (")
}

/// The toleration of the unreachable taint that `w`'s pod template in `setup` gives
/// ([`crate::observe::reduce::unreachable_toleration`], as a run reads it from its pods);
/// the API server's default when setup does not create `w` or its template gives none.
pub(super) fn template_toleration(
    setup: &[crate::experiment::manifest::SetupWorkload],
    w: &crate::experiment::model::WorkloadRef,
) -> crate::failure_model::Toleration {
    use crate::failure_model::Toleration;
    let template = setup
        .iter()
        .find(|s| s.workload == *w)
        .map(|s| crate::observe::reduce::unreachable_toleration(&s.tolerations));
    match template {
        Some((_, true)) => Toleration::Forever,
        Some((Some(secs), _)) => {
            Toleration::For(Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
        }
        _ => Toleration::Default,
    }
}

/// The pods standing for those on `node` in a plan that cannot list them: one for each
/// workload the experiment names and each its setup manifests create, with its own
/// controller's rule (a StatefulSet's pod is never a ReplicaSet's) and the toleration its
/// pod template gives the unreachable taint (the API server's default when it gives none,
/// as the `DefaultTolerationSeconds` admission plugin adds it); the typical ReplicaSet pod
/// ([`typical_pod`]) when it knows of none.
///
/// A DaemonSet's pods tolerate the unreachable taint without a limit: its controller adds
/// that toleration to every pod it makes (`pkg/controller/daemon/util`,
/// `AddOrUpdateDaemonPodTolerations`).
pub(super) fn typical_pods(
    node: &str,
    exp: &crate::experiment::model::Experiment,
    setup: &[crate::experiment::manifest::SetupWorkload],
) -> Vec<(
    String,
    crate::failure_model::Owner,
    crate::failure_model::Toleration,
)> {
    use crate::experiment::model::WorkloadKind;
    use crate::failure_model::{Owner, Toleration};
    let mut workloads = crate::focus::Focus::of(exp, std::iter::empty()).workloads();
    for s in setup {
        if !workloads.contains(&s.workload) {
            workloads.push(s.workload.clone());
        }
    }
    if workloads.is_empty() {
        return vec![(typical_pod(node), Owner::ReplicaSet, Toleration::Default)];
    }
    workloads
        .into_iter()
        .map(|w| {
            let written = template_toleration(setup, &w);
            let (owner, toleration) = match w.kind {
                WorkloadKind::Deployment => (Owner::ReplicaSet, written),
                WorkloadKind::StatefulSet => (Owner::StatefulSet, written),
                WorkloadKind::DaemonSet => (Owner::DaemonSet, Toleration::Forever),
            };
            (typical_pod_of(node, &w, toleration), owner, toleration)
        })
        .collect()
}

#[cfg(test)]
#[path = "plan_roll_predicted_tests.rs"]
mod tests;
