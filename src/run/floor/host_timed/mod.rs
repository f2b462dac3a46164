//! Undos armed on the node, for nodes reached through the API (`transport: pod`).
//!
//! Exec goes through the node's kubelet: while a fault has stopped it, or cut the node off
//! from the API server, no command reaches the node that way, the planned undo included.
//! So the planned undo of such a fault is armed on the node before the fault, as the
//! self-restore is (a transient systemd timer, `crate::execute::pod::SYSTEMD_ARM`), due
//! [`MARGIN`] after the undo step's fixed offset; the undo step then confirms through the
//! API that the node is back (its Lease renewed, Ready) instead of carrying a command.
//! The timer fires after the step is due, never before: the fault's proof watches until
//! the step begins, and a node back earlier would look undone by someone else.
//!
//! That needs the undo at a fixed time (`at:`): an undo that waits on a condition or on
//! another step cannot be armed ahead, and no other command reaches the node while the
//! fault lasts. [`refusals`] lists such steps for `plan`, `validate -i` and `run`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client};

use crate::execute::Executor;
use crate::experiment::fault::{self, HostTimer, Via};
use crate::experiment::model::{Action, Experiment, StepTime};
use crate::inventory::{Inventory, TransportKind};
use crate::run::world::{ActError, ActResult};

/// How long after its undo step is due the node's timer fires: covers the whole seconds
/// the timer is armed with and the step's own start.
pub(crate) const MARGIN: Duration = Duration::from_secs(2);

/// How often the API is read while an undo is confirmed.
const POLL: Duration = Duration::from_millis(500);

/// Whether `fault` on `node` cuts the transport the node is reached by and has its undo
/// armed ahead: on a node reached through the API, a fault whose row in the fault table
/// asks for a [`HostTimer`].
pub(crate) fn cuts_transport(executor: &Executor, node: &str, fault: &Action) -> bool {
    executor.through_api(node) && cuts(fault)
}

/// Whether the action's row asks for its undo armed ahead when it cuts the API transport.
fn cuts(action: &Action) -> bool {
    fault::host_timer(action) != HostTimer::None
}

/// Whether `action` on `node` is the undo of a fault that cuts the node's transport, and
/// so was armed on the node: it is then confirmed, not carried.
pub(crate) fn undone_on_host(executor: &Executor, node: &str, action: &Action) -> bool {
    executor.through_api(node) && fault::undone_by_host_timer(action)
}

/// Whether the undo armed on `node` as `undo` also gets an undo watcher
/// (`crate::execute::pod::watcher`), so that it runs as soon as faultline asks instead of
/// at its timer: on a node reached through the API, the undo of a fault whose row says
/// [`HostTimer::TimerAndWatcher`] (a kubelet stop: it silences the kubelet but leaves the
/// node's own network to the API server). A partition cuts the watcher off too: it ends by
/// its timer alone.
pub(crate) fn watched(executor: &Executor, node: &str, undo: &crate::execute::NodeOp) -> bool {
    executor.through_api(node) && fault::undo_watched(undo)
}

/// The later step that undoes step `index`'s fault on the same target, if any.
fn undo_step(exp: &Experiment, index: usize) -> Option<usize> {
    let step = exp.steps.get(index)?;
    exp.steps
        .iter()
        .enumerate()
        .skip(index + 1)
        .find(|(_, s)| s.target == step.target && fault::undoes(&s.action, &step.action))
        .map(|(i, _)| i)
}

/// A fault whose undo, armed on the node as a timer, is already due: the timer would fire
/// before (or just after) the fault and undo nothing, so the fault is not injected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "its undo `{undo}` was due at {} (now {}): the timer armed on the node as that undo would \
     fire before the fault, so the fault is not injected",
    crate::timeline::format_offset_ms(*due_ms),
    crate::timeline::format_offset_ms(*now_ms)
)]
pub(crate) struct UndoAlreadyDue {
    /// The undo step's name.
    undo: String,
    /// When it was due, ms from the start.
    due_ms: i64,
    /// When the fault was about to be armed.
    now_ms: i64,
}

/// How long after now (`now_ms`) the self-restore of step `index`'s fault is armed for
/// when it `cut` the transport of one of its nodes: [`MARGIN`] after its undo step's fixed
/// offset, the node's timer then being the planned undo. `Ok(None)`: as any other fault
/// (no cut, or no undo at a fixed offset). An error when that undo is already due: the
/// timer would fire before (or just after) the fault and undo nothing, leaving the fault
/// in place with nothing armed, so the fault is not injected.
pub(crate) fn restore_after(
    exp: &Experiment,
    index: usize,
    cut: bool,
    fixed_due_ms: &BTreeMap<usize, i64>,
    now_ms: i64,
) -> Result<Option<Duration>, UndoAlreadyDue> {
    if !cut {
        return Ok(None);
    }
    let Some(undo) = undo_step(exp, index) else {
        return Ok(None);
    };
    let Some(&due) = fixed_due_ms.get(&undo) else {
        return Ok(None);
    };
    if due <= now_ms {
        return Err(UndoAlreadyDue {
            undo: exp.steps[undo].name.clone(),
            due_ms: due,
            now_ms,
        });
    }
    let after = u64::try_from(due - now_ms).unwrap_or(0);
    Ok(Some(Duration::from_millis(after) + MARGIN))
}

/// Waits until `node` is seen back through the API: its Lease renewed since the wait began
/// and its Ready condition True. That is the undo armed on the node having taken effect;
/// `how` says which of its two ways was asked for (the watcher now, or the timer).
pub(crate) async fn confirm(
    client: &Client,
    node: &str,
    timeout: Duration,
    how: &str,
) -> Result<ActResult, ActError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let nodes: Api<Node> = Api::all(client.clone());
    let renew_time = |l: Option<Lease>| {
        l.and_then(|l| l.spec)
            .and_then(|s| s.renew_time)
            .map(|t| t.0.to_string())
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let first = renew_time(leases.get_opt(node).await.ok().flatten());
    let seen = loop {
        let renewed = renew_time(leases.get_opt(node).await.ok().flatten());
        let ready = nodes
            .get_opt(node)
            .await
            .ok()
            .flatten()
            .and_then(|n| n.status)
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status);
        let renewed_since = renewed.is_some() && renewed != first;
        if renewed_since && ready.as_deref() == Some("True") {
            return Ok(ActResult {
                exit_status: None,
                output: format!(
                    "undone on the node by {how}: Lease renewed at {}, node Ready",
                    renewed.unwrap_or_default()
                ),
            });
        }
        let seen = format!(
            "Lease renewTime {} (at the start {}), Ready {}",
            renewed.as_deref().unwrap_or("unset"),
            first.as_deref().unwrap_or("unset"),
            ready.as_deref().unwrap_or("unknown")
        );
        if tokio::time::Instant::now() >= deadline {
            break seen;
        }
        tokio::time::sleep(POLL).await;
    };
    Err(ActError::NotConfirmed(format!(
        "the undo armed on node {node} ({how}) was not seen to take effect within \
         {timeout:?}: {seen}"
    )))
}

/// A step a node's transport cannot carry out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The step.
    pub(crate) step: String,
    /// Why, with what would allow it.
    pub(crate) reason: String,
}

/// The steps of `exp` that the API transport cannot carry out on `inventory`'s nodes: an
/// undo of a transport-cutting fault at no fixed time, and any other node command on the
/// same target while such a fault lasts. Offline, a target's nodes are not known: the
/// check applies when any node of the inventory is reached through the API.
pub(crate) fn refusals(exp: &Experiment, inventory: &Inventory) -> Vec<Refusal> {
    if !inventory
        .nodes()
        .iter()
        .any(|n| n.transport == TransportKind::Pod)
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, fault_step) in exp.steps.iter().enumerate() {
        if !cuts(&fault_step.action) {
            continue;
        }
        let target = fault_step.target.as_deref().unwrap_or("?");
        let undo = undo_step(exp, i);
        // A fault that waits may come after its undo's fixed time: the undo's timer, armed
        // before the fault, would then fire first and undo nothing.
        if let Some(j) = undo
            && matches!(exp.steps[j].at, StepTime::Offset(_))
            && !matches!(fault_step.at, StepTime::Offset(_))
        {
            out.push(Refusal {
                step: fault_step.name.clone(),
                reason: format!(
                    "it waits ({}), so it may come after its undo `{}` at a fixed time; the \
                     nodes of target `{target}` are reached through the API (transport: pod), \
                     where that undo is a timer armed on the node before the fault and would \
                     fire first; give this step `at:` too, before its undo's",
                    match &fault_step.at {
                        StepTime::AfterStep { step, .. } => format!("after step `{step}`"),
                        _ => "on `when:`".to_string(),
                    },
                    exp.steps[j].name
                ),
            });
        }
        if let Some(j) = undo {
            let s = &exp.steps[j];
            let waits = match &s.at {
                StepTime::Offset(_) => None,
                StepTime::AfterStep { step, .. } => Some(format!("waits for step `{step}`")),
                StepTime::When { .. } => Some("waits on `when:`".to_string()),
            };
            if let Some(waits) = waits {
                out.push(Refusal {
                    step: s.name.clone(),
                    reason: format!(
                        "it {waits}, but the nodes of target `{target}` are reached through the API \
                         (transport: pod) and step `{}` ({}) cuts that path: its undo must be armed \
                         on the node as a timer before the fault, which needs a fixed time; give \
                         it `at:`, or reach these nodes over SSH",
                        fault_step.name,
                        fault::action_name(&fault_step.action)
                    ),
                });
            }
        }
        let end = undo.unwrap_or(exp.steps.len());
        for s in &exp.steps[i + 1..end] {
            let on_node = matches!(fault::info(&s.action).via, Via::Node(_) | Via::StepCommand);
            if on_node && s.target == fault_step.target {
                out.push(Refusal {
                    step: s.name.clone(),
                    reason: format!(
                        "it runs a command on the nodes of target `{target}`, which are reached \
                         through the API (transport: pod), while step `{}` ({}) has cut that \
                         path; only its undo, armed on the node beforehand, runs then",
                        fault_step.name,
                        fault::action_name(&fault_step.action)
                    ),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
