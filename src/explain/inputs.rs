//! What the model needs, read from a run record: the timers in force, the nodes, each
//! silenced node's outage (from the steps the run recorded) and the pods on it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::experiment::fault::{self, ActionKind};
use crate::experiment::model::{Action, PodSelector, WorkloadKind, WorkloadRef};
use crate::failure_model::{
    ControllerSettings, ModelNode, ModelPod, Outage, Owner, PodDeletion, Toleration,
};
use crate::record::RunRecord;
use crate::timeline::{ConditionStatus, Entry, Event, StepPhase};

/// The taint that tells Kubernetes a node is shut down for good (non-graceful node
/// shutdown): its pods are evicted at once and force-deleted by the pod garbage collector.
pub(super) const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// A milliseconds offset as a duration from the start (offsets before it count as 0).
pub(super) fn at(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The controller's settings from the record's timers and the nodes' Lease duration;
/// where a record does not hold the lease, the upstream default stands (said in
/// [`super::Explanation::assumed`]).
pub(super) fn settings(record: &RunRecord) -> ControllerSettings {
    let t = &record.cluster.timers;
    let defaults = ControllerSettings::default();
    ControllerSettings {
        node_monitor_period: t.node_monitor_period,
        node_monitor_grace_period: t.node_monitor_grace_period,
        default_unreachable_toleration: t.default_unreachable_toleration,
        node_lease_duration: record
            .cluster
            .node_lease_seconds
            .map_or(defaults.node_lease_duration, Duration::from_secs),
        ..defaults
    }
}

/// Every node the run saw, Ready or not when first seen, in its zone as first seen
/// (records written before zones were recorded, and unlabelled nodes: zone "").
pub(super) fn nodes(record: &RunRecord) -> Vec<ModelNode> {
    let mut out: Vec<ModelNode> = Vec::new();
    for e in &record.timeline.entries {
        if let Event::Node {
            name,
            after: Some(state),
            ..
        } = &e.event
            && !out.iter().any(|n| &n.name == name)
        {
            out.push(ModelNode {
                name: name.clone(),
                zone: state.zone.clone().unwrap_or_default(),
                ready: state.ready == ConditionStatus::True,
            });
        }
    }
    out
}

/// The action a recorded step ran: the experiment's step of that name, or (an undo by
/// the safety net, which is no step of the experiment) the bare action of that name.
pub(super) fn action_of(record: &RunRecord, step: &str, action: &str) -> Option<Action> {
    record
        .experiment
        .steps
        .iter()
        .find(|s| s.name == step)
        .map(|s| s.action.clone())
        .or_else(|| ActionKind::named(action).and_then(ActionKind::bare))
}

/// Whether a step entry says its action was carried out: finished, or an undo that worked.
fn carried_out(phase: &StepPhase) -> bool {
    matches!(
        phase,
        StepPhase::Finished { .. } | StepPhase::Undo { ok: true, .. }
    )
}

/// An outage and the fault that caused it.
pub(super) struct RecordedOutage {
    /// The model's view.
    pub outage: Outage,
    /// The silencing action.
    pub fault: Action,
}

/// When the step whose `Finished` entry is `entries[finished]` was issued on its node: a
/// fault can take hold while its command still runs (`docker stop` returns once the node's
/// systemd has finished shutting it down, or after its 10 s timeout; the kubelet stopped in
/// the first second), so an outage starts when the command does, and has begun by the
/// time the command returned. The finish time when no issue entry is recorded.
fn issued_at(entries: &[Entry], finished: usize) -> i64 {
    let Event::Step {
        step: name,
        node: target,
        ..
    } = &entries[finished].event
    else {
        return entries[finished].offset_ms;
    };
    entries[..finished]
        .iter()
        .rev()
        .find(|e| {
            matches!(&e.event, Event::Step { step, node, phase: StepPhase::Issued, .. }
                if step == name && node == target)
        })
        .map_or(entries[finished].offset_ms, |e| e.offset_ms)
}

/// When the step finished at `entries[finished]` on `node` was confirmed: for a reboot,
/// the moment the run saw the machine back up (its boot id changed).
fn back_up(entries: &[Entry], finished: usize, node: &str) -> Option<Duration> {
    let Event::Step { step: name, .. } = &entries[finished].event else {
        return None;
    };
    entries[finished + 1..]
        .iter()
        .find(|e| {
            matches!(&e.event, Event::Step { step, node: Some(n), phase: StepPhase::Confirmed { .. }, .. }
                if step == name && n == node)
        })
        .map(|e| at(e.offset_ms))
}

/// Each silencing step (or reboot) carried out on a node, from the moment it was issued until the
/// first later action on the node that undoes it (a planned step or the safety net's undo)
/// finished.
pub(super) fn outages(record: &RunRecord) -> Vec<RecordedOutage> {
    let entries = &record.timeline.entries;
    let done = |e: &Entry| match &e.event {
        Event::Step {
            step,
            action,
            node: Some(node),
            phase,
        } if carried_out(phase) => {
            action_of(record, step, action).map(|a| (node.clone(), a, e.offset_ms))
        }
        _ => None,
    };
    let mut out: Vec<RecordedOutage> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let Some((node, fault_action, finished)) = done(e) else {
            continue;
        };
        // A reboot in a roll is the roll's to explain (`super::roll`), node by node.
        let rolled = |name: &str| {
            record.experiment.steps.iter().any(|s| {
                s.name == name
                    && (s.roll.is_some() || crate::experiment::roll::roll_member(s).is_some())
            })
        };
        let reboot = fault::restarts_machine(&fault_action)
            && fault::takes_node_down(&fault_action)
            && !matches!(&e.event, Event::Step { step, .. } if rolled(step));
        if !fault::silences_node(&fault_action) && !reboot {
            continue;
        }
        let from = issued_at(entries, i);
        // A node already down (a second step on it) keeps its first outage.
        if out
            .iter()
            .map(|o| &o.outage)
            .any(|o| o.node == node && o.until.is_none_or(|u| u > at(from)))
        {
            continue;
        }
        let until = if reboot {
            // A reboot undoes itself: the machine is back when the run saw it come up
            // (its proof, the boot id changed); without that, nothing says when.
            let Some(back) = back_up(entries, i, &node) else {
                continue;
            };
            Some(back)
        } else {
            entries[i + 1..]
                .iter()
                .filter_map(done)
                .find(|(n, a, _)| *n == node && fault::undoes(a, &fault_action))
                .map(|(_, _, ms)| at(ms))
        };
        // Non-graceful shutdown recovery: a step put the out-of-service taint on the node
        // while it was down.
        let out_of_service = entries[i + 1..]
            .iter()
            .filter_map(done)
            .take_while(|(_, _, ms)| until.is_none_or(|u| at(*ms) <= u))
            .find(|(n, a, _)| {
                *n == node && matches!(a, Action::Taint(t) if t.key == OUT_OF_SERVICE)
            })
            .map(|(_, _, ms)| at(ms));
        let deleted = entries[i + 1..]
            .iter()
            .filter_map(done)
            .take_while(|(_, _, ms)| until.is_none_or(|u| at(*ms) <= u))
            .find(|(n, a, _)| *n == node && *a == Action::DeleteNode)
            .map(|(_, _, ms)| at(ms));
        out.push(RecordedOutage {
            outage: Outage {
                node,
                from: at(from),
                held_by: at(finished),
                until,
                out_of_service,
                deleted,
                restarts: reboot,
            },
            fault: fault_action,
        });
    }
    out
}

/// A pod on a faulted node as the model sees it, with the workload it belongs to.
pub(super) struct RecordedPod {
    /// The model's view.
    pub model: ModelPod,
    /// Its workload, when it has one.
    pub workload: Option<WorkloadRef>,
    /// The timeline index of the `delete-pods` step's issue that deleted it while its node
    /// was down, if one did: the model follows that step.
    pub deleted_by: Option<usize>,
}

impl RecordedPod {
    /// Its namespace.
    pub(super) fn namespace(&self) -> &str {
        self.model.name.split_once('/').map_or("", |(ns, _)| ns)
    }
}

/// Whether a `delete-pods` selector takes the pod `namespace`/… of `workload` on `node`:
/// `None` when the record cannot say (its labels are not recorded).
pub(super) fn selects(
    record: &RunRecord,
    selector: &PodSelector,
    pod: (&str, Option<&WorkloadRef>),
    node: &str,
) -> Option<bool> {
    let (namespace, workload) = pod;
    let on_node = |target: &String| {
        record
            .targets
            .get(target)
            .is_some_and(|nodes| nodes.iter().any(|n| n == node))
    };
    if selector.on.as_ref().is_some_and(|t| !on_node(t)) {
        return Some(false);
    }
    match &selector.workload {
        Some(w) if workload != Some(w) => Some(false),
        None if selector.namespace != namespace => Some(false),
        Some(_) if selector.labels.is_empty() => Some(true),
        _ => None,
    }
}

/// The first `delete-pods` step issued while `outage` lasted that took `pod` and
/// finished: its issue's index on the timeline and the deletion as the model reads it.
/// A selector the record cannot decide ends the search (the pod's cut handles it).
fn deletion_of(
    record: &RunRecord,
    pod: (&str, Option<&WorkloadRef>),
    outage: &Outage,
) -> Option<(usize, PodDeletion)> {
    let entries = &record.timeline.entries;
    let lasting = |ms: i64| at(ms) > outage.from && outage.until.is_none_or(|u| at(ms) < u);
    // Every delete-pods step issued while the node was down, with whether it took the pod;
    // the first that may have is the one: taken, or undecidable (then none is followed).
    let (issued, step, force, took) = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| lasting(e.offset_ms))
        .filter_map(|(i, e)| match &e.event {
            Event::Step {
                step,
                action,
                node: None,
                phase: StepPhase::Issued,
            } => match action_of(record, step, action)? {
                Action::DeletePods { pods, force } => {
                    let took = selects(record, &pods, pod, &outage.node);
                    Some((i, step.clone(), force, took))
                }
                _ => None,
            },
            _ => None,
        })
        .find(|(.., took)| *took != Some(false))?;
    if took != Some(true) {
        return None;
    }
    let by = entries[issued..].iter().find_map(|e| match &e.event {
        Event::Step {
            step: s,
            node: None,
            phase: StepPhase::Finished { .. },
            ..
        } if *s == step => Some(at(e.offset_ms)),
        _ => None,
    })?;
    Some((
        issued,
        PodDeletion {
            from: at(entries[issued].offset_ms),
            by,
            force,
        },
    ))
}

/// The pods on the outage's node when it began: every pod first seen there, not
/// Terminating, at or before its start; each with the step that deleted it while the node
/// was down, if one did.
pub(super) fn pods_on(record: &RunRecord, outage: &Outage) -> Vec<RecordedPod> {
    let (node, from) = (outage.node.as_str(), outage.from);
    let mut seen: BTreeMap<String, RecordedPod> = BTreeMap::new();
    for e in &record.timeline.entries {
        if at(e.offset_ms) > from {
            break;
        }
        let Event::Pod {
            pod,
            before: None,
            after: Some(state),
        } = &e.event
        else {
            continue;
        };
        if state.node.as_deref() != Some(node) || state.terminating {
            continue;
        }
        let name = format!("{}/{}", pod.namespace, pod.name);
        let owner = match state.owner.as_ref().map(|w| w.kind) {
            Some(WorkloadKind::Deployment) => Owner::ReplicaSet,
            Some(WorkloadKind::StatefulSet) => Owner::StatefulSet,
            Some(WorkloadKind::DaemonSet) => Owner::DaemonSet,
            None => Owner::None,
        };
        let toleration = match (
            state.tolerates_unreachable_forever,
            state.unreachable_toleration_secs,
        ) {
            (true, _) => Toleration::Forever,
            (false, Some(s)) => Toleration::For(Duration::from_secs(u64::try_from(s).unwrap_or(0))),
            (false, None) => Toleration::Default,
        };
        if seen.contains_key(&name) {
            continue;
        }
        let deletion = deletion_of(record, (&pod.namespace, state.owner.as_ref()), outage);
        seen.insert(
            name.clone(),
            RecordedPod {
                model: ModelPod {
                    name,
                    node: node.to_string(),
                    owner,
                    toleration,
                    deleted: deletion.map(|(_, d)| d),
                },
                workload: state.owner.clone(),
                deleted_by: deletion.map(|(i, _)| i),
            },
        );
    }
    seen.into_values().collect()
}
