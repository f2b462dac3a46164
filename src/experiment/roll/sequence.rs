//! The steps of one batch of a rolling step: its action, or each action of its `sequence:`
//! in turn, each once the one before finished, and once the batch's nodes are Ready again
//! after an action that brings a node back up (a reboot, a power-on, a kubelet restart).

use std::time::Duration;

use crate::experiment::fault;
use crate::experiment::model::{
    Action, Bound, NodeStateMatch, Roll, StateMatch, Step, StepTime, Subject,
};

/// What a rolling step does to each batch, each action with its own timeout: its
/// `sequence`, or its one action.
pub(super) fn actions(step: &Step, roll: &Roll) -> Vec<(Action, Duration)> {
    if roll.sequence.is_empty() {
        return vec![(step.action.clone(), step.timeout)];
    }
    roll.sequence
        .iter()
        .map(|a| (a.action.clone(), a.timeout))
        .collect()
}

/// Whether the step after `action` waits for its nodes to be Ready again: the action
/// leaves the node coming back up, Ready only once its machine or kubelet has started.
pub(crate) fn comes_back_up(action: &Action) -> bool {
    fault::restarts_machine(action)
        || matches!(action, Action::KubeletRestart | Action::KubeletStart)
}

/// The steps of one batch, on its own target `own`: the first at `at` (its timeout the
/// gate's `gate_timeout`, or its action's for the roll's first batch), each next one once
/// the one before finished, or once `own` is Ready again after an action that
/// [`comes_back_up`] (waiting up to the roll's `timeout`). One action: one step named
/// `base`; a sequence: `base` and the action's name (`reboot`, a second reboot `reboot 2`).
pub(super) fn steps(
    base: &str,
    own: &str,
    actions: &[(Action, Duration)],
    at: StepTime,
    gate_timeout: Option<Duration>,
    roll: &Roll,
) -> Vec<Step> {
    let names = names(base, actions);
    let mut out: Vec<Step> = Vec::with_capacity(actions.len());
    for ((action, timeout), name) in actions.iter().zip(names) {
        let (at, timeout) = match out.last() {
            None => (at.clone(), gate_timeout.unwrap_or(*timeout)),
            Some(prev) if comes_back_up(&prev.action) => (
                StepTime::When {
                    subject: Subject::Node {
                        target: own.to_string(),
                    },
                    state: StateMatch::Node(NodeStateMatch::Ready),
                    delay: Bound::fixed(Duration::ZERO),
                    since: Some(prev.name.clone()),
                },
                roll.timeout,
            ),
            Some(prev) => (
                StepTime::AfterStep {
                    step: prev.name.clone(),
                    delay: Bound::fixed(Duration::ZERO),
                },
                *timeout,
            ),
        };
        out.push(Step {
            name,
            at,
            action: action.clone(),
            target: Some(own.to_string()),
            timeout,
            roll: None,
        });
    }
    out
}

/// The step names of one batch (see [`steps`]).
fn names(base: &str, actions: &[(Action, Duration)]) -> Vec<String> {
    if actions.len() == 1 {
        return vec![base.to_string()];
    }
    let mut seen: Vec<&str> = Vec::new();
    actions
        .iter()
        .map(|(action, _)| {
            let name = fault::action_name(action);
            seen.push(name);
            match seen.iter().filter(|n| **n == name).count() {
                1 => format!("{base} {name}"),
                k => format!("{base} {name} {k}"),
            }
        })
        .collect()
}
