//! A recorded roll, node by node: each node's transitions beside the model's windows
//! counted from that node's own issue, not the first node's, and each next node's issue
//! beside the one before's return plus the roll's `settle`.
//!
//! A node counts as seen back when it was seen turning Ready, or when the run let go a
//! step that waited for it to be Ready (its issue, less the step's delay): a reboot
//! quicker than the grace period is never seen NotReady, and the run's interlock is what
//! decides it is back.

use std::time::Duration;

use serde::Serialize;

use super::inputs::{self, at};
use super::{Explained, fit, observed};
use crate::experiment::fault;
use crate::experiment::model::{Action, StepTime, Subject};
use crate::experiment::roll::roll_member;
use crate::failure_model::{
    ControllerSettings, ModelNode, Outage, Prediction, RollFault, Rule, Transition, Window,
    back_at_the_earliest, predict,
};
use crate::record::RunRecord;
use crate::timeline::{Entry, Event, StepPhase};

/// What a roll's actions do to a node, as the model takes it: taken down and back by
/// itself (a reboot, or a fault its sequence undoes), silenced for good, or left Ready.
pub(crate) fn roll_fault(actions: &[Action]) -> RollFault {
    for (i, a) in actions.iter().enumerate() {
        if fault::restarts_machine(a) && fault::takes_node_down(a) {
            return RollFault::ComesBack;
        }
        if fault::silences_node(a) || fault::info(a).kubelet_ends_pods {
            let undone = actions[i + 1..].iter().any(|b| fault::undoes(b, a));
            return if undone {
                RollFault::ComesBack
            } else {
                RollFault::Silences
            };
        }
    }
    RollFault::StaysReady
}

/// One recorded roll explained, node by node in roll order.
#[derive(Debug, Clone, Serialize)]
pub struct RollExplained {
    /// The rolling step's name.
    pub roll: String,
    /// Each node's transitions (its issue, Unknown, tainted, back), beside what was seen.
    pub items: Vec<Explained>,
}

/// One batch of a recorded roll: its nodes, its target, its steps (in order).
struct Batch<'a> {
    nodes: Vec<String>,
    target: &'a str,
    steps: Vec<&'a crate::experiment::model::Step>,
}

/// The record's rolls, by name in file order, each with its batches in order.
fn rolls(record: &RunRecord) -> Vec<(String, Vec<Batch<'_>>)> {
    let mut out: Vec<(String, Vec<Batch<'_>>)> = Vec::new();
    for step in &record.experiment.steps {
        let (Some((roll, nodes)), Some(target)) = (roll_member(step), step.target.as_deref())
        else {
            continue;
        };
        let nodes: Vec<String> = nodes.iter().map(|n| (*n).to_string()).collect();
        let k = match out.iter().position(|(name, _)| name == roll) {
            Some(k) => k,
            None => {
                out.push((roll.to_string(), Vec::new()));
                out.len() - 1
            }
        };
        let batches = &mut out[k].1;
        if let Some(b) = batches.last_mut().filter(|b| b.target == target) {
            b.steps.push(step);
        } else {
            batches.push(Batch {
                nodes,
                target,
                steps: vec![step],
            });
        }
    }
    out
}

/// When the step `name` was issued on `node`, if it was.
fn issued(entries: &[Entry], name: &str, node: &str) -> Option<Duration> {
    entries.iter().find_map(|e| match &e.event {
        Event::Step {
            step,
            node: Some(n),
            phase: StepPhase::Issued,
            ..
        } if step == name && n == node => Some(at(e.offset_ms)),
        _ => None,
    })
}

/// When `node` of batch target `target` was seen back after `since`: seen turning Ready,
/// or a step waiting for the target to be Ready let go (its issue less its delay).
fn back(
    record: &RunRecord,
    (node, target): (&str, &str),
    since: Duration,
    end: Duration,
) -> Option<Duration> {
    let entries = &record.timeline.entries;
    let turned = observed::first(entries, node, Transition::NodeReady, since, end);
    let ctx = crate::experiment::model::BoundContext {
        grace: record.cluster.timers.node_monitor_grace_period,
        monitor_period: record.cluster.timers.node_monitor_period,
        toleration: None,
    };
    let let_go = record
        .experiment
        .steps
        .iter()
        .filter_map(|s| match &s.at {
            StepTime::When {
                subject: Subject::Node { target: t },
                delay,
                ..
            } if t == target => {
                let on = s.target.as_deref()?;
                let nodes = record.targets.get(on)?;
                let when = nodes
                    .iter()
                    .find_map(|n| issued(entries, &s.name, n))
                    .filter(|t| *t > since)?;
                // Back by the time the wait ended; a delay longer than the wait says
                // nothing of this return.
                when.checked_sub(delay.resolve(&ctx).ok()?)
                    .filter(|b| *b >= since)
            }
            _ => None,
        })
        .min();
    turned.into_iter().chain(let_go).min()
}

/// One item: the prediction beside what was seen up to `cut`.
fn item(
    prediction: Prediction,
    node: &str,
    observed: Option<Duration>,
    cut: Duration,
) -> Explained {
    Explained {
        fit: fit(prediction.window, observed, cut),
        prediction,
        node: node.to_string(),
        workload: None,
        observed,
        until: None,
        cause: None,
    }
}

/// Every recorded roll explained (offsets on the timeline's clock; the caller counts
/// them from time zero). `covered` says whether a node's Unknown and taint are explained
/// already (a silencing step is an outage of its own).
pub(super) fn explain_rolls(
    record: &RunRecord,
    settings: &ControllerSettings,
    nodes: &[ModelNode],
    covered: &dyn Fn(&str, Transition) -> bool,
) -> Vec<RollExplained> {
    let entries = &record.timeline.entries;
    let end = record
        .observed_until_ms
        .map(inputs::at)
        .unwrap_or(Duration::MAX);
    let mut out = Vec::new();
    for (name, batches) in rolls(record) {
        let Some(first) = batches.first() else {
            continue;
        };
        let actions: Vec<Action> = first.steps.iter().map(|s| s.action.clone()).collect();
        let kind = roll_fault(&actions);
        let mut items = Vec::new();
        // When the batch before was back, every node of it (the next waits for them all).
        let mut before_back: Option<Duration> = None;
        for (b, batch) in batches.iter().enumerate() {
            let settle = match batch.steps.first().map(|s| &s.at) {
                Some(StepTime::When { delay, .. }) if b > 0 => delay
                    .resolve(&crate::experiment::model::BoundContext {
                        grace: settings.node_monitor_grace_period,
                        monitor_period: settings.node_monitor_period,
                        toleration: None,
                    })
                    .ok(),
                _ => None,
            };
            let mut batch_back: Option<Duration> = Some(Duration::ZERO);
            for node in &batch.nodes {
                let Some(first_issue) = batch
                    .steps
                    .first()
                    .and_then(|s| issued(entries, &s.name, node))
                else {
                    batch_back = None;
                    continue;
                };
                if let (Some(prev), Some(settle)) = (before_back, settle) {
                    let p = Prediction {
                        subject: node.clone(),
                        transition: Transition::RollIssued,
                        window: Window::Between {
                            earliest: prev + settle,
                            latest: None,
                        },
                        rule: Rule::RollGate { settle },
                    };
                    items.push(item(p, node, Some(first_issue), end));
                }
                // The fault's own step (a sequence's reboot, not its drain), or the first.
                let fault_step = batch
                    .steps
                    .iter()
                    .find(|s| {
                        fault::silences_node(&s.action)
                            || fault::restarts_machine(&s.action)
                            || fault::info(&s.action).kubelet_ends_pods
                    })
                    .copied()
                    .or(batch.steps.first().copied());
                let fault_at = fault_step
                    .and_then(|s| issued(entries, &s.name, node))
                    .unwrap_or(first_issue);
                let seen_back = match kind {
                    RollFault::StaysReady => None,
                    _ => back(record, (node, batch.target), fault_at, end),
                };
                let node_back = match kind {
                    RollFault::StaysReady => Some(first_issue),
                    _ => seen_back,
                };
                batch_back = batch_back.zip(node_back).map(|(a, b)| a.max(b));
                // Unknown and tainted, from this node's own fault.
                let predicted: Vec<Prediction> = match kind {
                    RollFault::StaysReady => [Transition::NodeUnknown, Transition::NodeTainted]
                        .into_iter()
                        .map(|t| Prediction {
                            subject: node.clone(),
                            transition: t,
                            window: Window::Never,
                            rule: Rule::StaysReady,
                        })
                        .collect(),
                    RollFault::Silences | RollFault::ComesBack => {
                        let outage = Outage {
                            node: node.clone(),
                            from: fault_at,
                            held_by: fault_at,
                            until: seen_back,
                            out_of_service: None,
                            deleted: None,
                            restarts: false,
                        };
                        predict(settings, nodes, &[], &[outage])
                            .into_iter()
                            .filter(|p| {
                                matches!(
                                    p.transition,
                                    Transition::NodeUnknown | Transition::NodeTainted
                                )
                            })
                            .collect()
                    }
                };
                for p in predicted {
                    if covered(node, p.transition) {
                        continue;
                    }
                    let seen = observed::first(entries, node, p.transition, fault_at, end);
                    items.push(item(p, node, seen, end));
                }
                let back_prediction = match kind {
                    RollFault::StaysReady => None,
                    RollFault::ComesBack => Some((
                        Window::Between {
                            earliest: fault_at + back_at_the_earliest(settings),
                            latest: None,
                        },
                        Rule::BackAfterRenewals,
                    )),
                    RollFault::Silences => Some((Window::Never, Rule::NotBroughtBack)),
                };
                if let Some((window, rule)) = back_prediction {
                    let p = Prediction {
                        subject: node.clone(),
                        transition: Transition::NodeReady,
                        window,
                        rule,
                    };
                    items.push(item(p, node, seen_back, end));
                }
            }
            before_back = batch_back;
        }
        out.push(RollExplained { roll: name, items });
    }
    out
}
