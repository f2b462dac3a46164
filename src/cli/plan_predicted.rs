//! The "predicted" section of `faultline plan`: what the node failure model
//! ([`crate::failure_model`]) says the cluster should do about each step that silences a node,
//! from the timers in force and the schedule the experiment alone decides.
//!
//! The plan knows the nodes but not the pods, so each node gets one line for a pod that
//! tolerates the unreachable taint for the API server's default time and is owned by a
//! ReplicaSet, the common case; a pod's own toleration moves its window by the difference.
//! Offline the plan knows only the inventory's node names: the rest of the cluster stands
//! as one Ready node, all in one zone, and the kubelet's lease is the upstream default
//! (40 s), each said so. With the API it knows every node, its zone and whether it is
//! Ready, and the Lease duration the nodes use, as a run's record does.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::experiment::fault;
use crate::experiment::model::{ClusterTimers, Experiment};
use crate::failure_model::{ControllerSettings, ModelNode, ModelPod, Outage, Prediction, predict};
use crate::run::floor::schedule::Projected;

use super::plan_roll_predicted::{RollPredicted, in_a_roll, typical_pods};

/// The node standing for the nodes the plan does not know of, assumed Ready.
const REST_OF_CLUSTER: &str = "(the rest of the cluster)";

/// The offset of step `i` when the schedule alone decides it.
fn step_offset(projected: &[Projected], i: usize) -> Option<Duration> {
    projected
        .get(i)
        .and_then(|p| p.at_ms)
        .and_then(|ms| u64::try_from(ms).ok())
        .map(Duration::from_millis)
}

/// A step's nodes as the model takes them: targets not resolved yet list every candidate,
/// and the first stands in for the node the run would pick.
fn modelled_nodes(nodes: &[String], resolved: bool) -> &[String] {
    if resolved {
        nodes
    } else {
        &nodes[..nodes.len().min(1)]
    }
}

/// The outages the schedule decides: each silencing step on each of its nodes, until the
/// first later step on the same node that undoes it. Steps that wait for something
/// observed have no offset: their outages are left out.
fn outages(
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
    projected: &[Projected],
    resolved: bool,
) -> Vec<Outage> {
    let at = |i: usize| step_offset(projected, i);
    let mut out = Vec::new();
    for (i, step) in exp.steps.iter().enumerate() {
        // A roll's steps are predicted node by node (`plan_roll_predicted`).
        let Some(from) = at(i).filter(|_| fault::silences_node(&step.action) && !in_a_roll(step))
        else {
            continue;
        };
        for node in modelled_nodes(step.nodes(targets), resolved) {
            let until = exp
                .steps
                .iter()
                .enumerate()
                .skip(i + 1)
                .find(|(_, s)| {
                    fault::undoes(&s.action, &step.action) && s.nodes(targets).contains(node)
                })
                .and_then(|(j, _)| at(j));
            out.push(Outage {
                node: node.clone(),
                from,
                held_by: from,
                until,
                out_of_service: None,
                deleted: None,
                restarts: false,
            });
        }
    }
    out
}

/// What a plan knows of the cluster's nodes.
pub(super) enum KnownNodes<'a> {
    /// No inventory: one stand-in node per target, the rest of the cluster unknown.
    StandIns,
    /// Offline: the inventory's node names. The rest of the cluster is unknown.
    Inventory(&'a [String]),
    /// Through the API: every node (its zone and readiness) and the Lease duration the
    /// nodes' kubelets use, when one could be read.
    Cluster {
        /// Every node of the cluster.
        nodes: &'a [ModelNode],
        /// `spec.leaseDurationSeconds` of a node's Lease.
        lease: Option<Duration>,
    },
}

/// What the model predicts for a plan: the settings it assumed and every prediction.
pub(super) struct Predicted {
    /// The controller's settings (timers in force, lease assumed).
    pub settings: ControllerSettings,
    /// What the predictions took for granted about the nodes and their heartbeat, for the
    /// section's heading.
    pub assumed: Vec<String>,
    /// Every prediction, per outage: the node, then the typical pod on it.
    pub predictions: Vec<Prediction>,
    /// Each reboot at a known offset, by node: silent for a boot time no plan knows.
    pub reboots: Vec<(String, Duration)>,
    /// Each OS shutdown at a known offset, by node: its kubelet may end its pods first,
    /// for as long as its own `shutdownGracePeriod`, which no plan knows.
    pub shutdowns: Vec<(String, Duration)>,
    /// Each roll, node by node in roll order (its steps are in none of the above).
    pub rolls: Vec<RollPredicted>,
    /// The workloads the setup manifests create, read once: the typical pods above and
    /// the flags on expectations about them take their tolerations from it.
    pub setup: Vec<crate::experiment::manifest::SetupWorkload>,
}

/// The steps the schedule decides whose action `kind` picks, on each of their nodes (the
/// first candidate when targets are not resolved), with their offsets.
fn steps_at(
    exp: &Experiment,
    (targets, resolved): (&BTreeMap<String, Vec<String>>, bool),
    projected: &[Projected],
    kind: impl Fn(&crate::experiment::model::Action) -> bool,
) -> Vec<(String, Duration)> {
    let mut out = Vec::new();
    for (i, step) in exp.steps.iter().enumerate() {
        if !kind(&step.action) || in_a_roll(step) {
            continue;
        }
        let Some(at) = step_offset(projected, i) else {
            continue;
        };
        let nodes = modelled_nodes(step.nodes(targets), resolved);
        out.extend(nodes.iter().map(|n| (n.clone(), at)));
    }
    out
}

/// The predictions, or `None` when no step silences, reboots or shuts down a node at a
/// known offset.
/// `resolved`: the targets are the run's nodes, not candidates (then the first candidate
/// stands in).
pub(super) fn predicted(
    exp: &Experiment,
    (targets, resolved): (&BTreeMap<String, Vec<String>>, bool),
    projected: &[Projected],
    timers: &ClusterTimers,
    known: KnownNodes<'_>,
) -> Option<Predicted> {
    let outages = outages(exp, targets, projected, resolved);
    // A reboot: a machine-restarting step that takes its node down.
    let reboots = steps_at(exp, (targets, resolved), projected, |a| {
        fault::restarts_machine(a) && fault::takes_node_down(a)
    });
    let shutdowns = steps_at(exp, (targets, resolved), projected, |a| {
        fault::info(a).kubelet_ends_pods
    });
    let singles = !(outages.is_empty() && reboots.is_empty() && shutdowns.is_empty());
    if !singles && !exp.steps.iter().any(in_a_roll) {
        return None;
    }
    let defaults = ControllerSettings::default();
    let lease = match &known {
        KnownNodes::Cluster { lease, .. } => *lease,
        KnownNodes::Inventory(_) | KnownNodes::StandIns => None,
    };
    let settings = ControllerSettings {
        node_monitor_period: timers.node_monitor_period,
        node_monitor_grace_period: timers.node_monitor_grace_period,
        default_unreachable_toleration: timers.default_unreachable_toleration,
        node_lease_duration: lease.unwrap_or(defaults.node_lease_duration),
        ..defaults
    };
    let mut assumed = Vec::new();
    if lease.is_none() {
        assumed.push(format!(
            "lease {}s assumed",
            settings.node_lease_duration.as_secs()
        ));
    }
    let stand_ins = matches!(known, KnownNodes::StandIns);
    let model_nodes = match known {
        KnownNodes::StandIns => {
            assumed.push("no inventory: the ASSUMED timers above".to_string());
            assumed.push("one zone".to_string());
            assumed.push("one stand-in node per target".to_string());
            inventory_nodes(&[], &outages)
        }
        KnownNodes::Inventory(names) => {
            assumed.push("one zone".to_string());
            assumed.push("the nodes the inventory does not name Ready".to_string());
            inventory_nodes(names, &outages)
        }
        KnownNodes::Cluster { nodes, .. } => {
            let zones: std::collections::BTreeSet<&str> =
                nodes.iter().map(|n| n.zone.as_str()).collect();
            if zones.iter().all(|z| z.is_empty()) {
                assumed.push("one zone (no node has zone labels)".to_string());
            }
            nodes.to_vec()
        }
    };
    if !resolved && !stand_ins && singles {
        assumed.push("for the first candidate of each target".to_string());
    }
    // One pod of each workload the experiment names or its setup creates, with its own
    // controller's rule.
    let setup =
        crate::experiment::manifest::setup_workloads(&exp.setup.manifests).unwrap_or_default();
    let pods: Vec<ModelPod> = outages
        .iter()
        .flat_map(|o| {
            typical_pods(&o.node, exp, &setup)
                .into_iter()
                .map(|(name, owner, toleration)| ModelPod {
                    name,
                    node: o.node.clone(),
                    owner,
                    toleration,
                    deleted: None,
                })
        })
        .collect();
    let predictions = predict(&settings, &model_nodes, &pods, &outages);
    let rolls = super::plan_roll_predicted::predicted(
        exp,
        (targets, resolved),
        &|i| step_offset(projected, i),
        (timers, &settings),
        (model_nodes.as_slice(), stand_ins),
    );
    if !singles && rolls.is_empty() {
        return None;
    }
    Some(Predicted {
        settings,
        assumed,
        predictions,
        reboots,
        shutdowns,
        rolls,
        setup,
    })
}

/// The nodes of an offline plan: the inventory's and every silenced one, Ready, in one
/// zone. The inventory names the nodes faultline reaches, not the whole cluster: the rest
/// stands as one Ready node, so a plan never predicts a disruption it cannot know of
/// (every node it knows silenced would otherwise read as a fully disrupted cluster).
fn inventory_nodes(names: &[String], outages: &[Outage]) -> Vec<ModelNode> {
    let mut all: Vec<String> = names.to_vec();
    all.extend(outages.iter().map(|o| o.node.clone()));
    all.sort();
    all.dedup();
    all.push(REST_OF_CLUSTER.to_string());
    all.into_iter()
        .map(|name| ModelNode {
            name,
            zone: String::new(),
            ready: true,
        })
        .collect()
}

impl Predicted {
    /// The plan's "predicted by the node failure model" section.
    pub(super) fn section(&self) -> String {
        let mut out = "predicted by the node failure model (docs/model.md".to_string();
        if !self.assumed.is_empty() {
            out.push_str("; ");
            out.push_str(&self.assumed.join(", "));
        }
        out.push_str("):\n");
        for p in &self.predictions {
            out.push_str(&format!(
                "  {}: {} {} ({})\n",
                p.subject, p.transition, p.window, p.rule
            ));
        }
        // A reboot's silence lasts as long as the machine takes to boot: the model gives
        // the bound that decides everything else.
        let s = &self.settings;
        let quiet = s
            .node_monitor_grace_period
            .saturating_sub(s.renew_interval());
        for (node, at) in &self.reboots {
            out.push_str(&format!(
                "  {node}: rebooted at {}: Unknown never if it answers again within {:.1}s (the \
                 grace period after its last lease renewal), else as after a power-off from \
                 {}; its pods stay on it either way until a taint's toleration runs out\n",
                crate::failure_model::words::offset(*at),
                quiet.as_secs_f64(),
                crate::failure_model::words::offset(*at + quiet)
            ));
        }
        // A graceful shutdown: the kubelet's own period decides when it falls silent.
        for (node, at) in &self.shutdowns {
            out.push_str(&format!(
                "  {node}: shut down at {}: with graceful node shutdown on its kubelet, \
                 ShuttingDown at once, its pods Terminated and replaced within its \
                 shutdownGracePeriod (the kubelet's setting, which the API does not show), \
                 then Unknown no sooner than {} (the grace period after its last lease \
                 renewal, counted from when the kubelet stops); without it, as after a \
                 power-off\n",
                crate::failure_model::words::offset(*at),
                crate::failure_model::words::offset(*at + quiet)
            ));
        }
        for roll in &self.rolls {
            out.push_str(&roll.table());
        }
        out
    }
}
