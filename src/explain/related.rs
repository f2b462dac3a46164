//! Which explained transitions an expectation is about: what a failed JUnit case and the
//! Markdown summary show beside its message.

use super::{Explained, Explanation};
use crate::experiment::model::{
    Check, Expectation, NodeStateMatch, PodStateMatch, StateMatch, Subject,
};
use crate::failure_model::Transition;
use crate::record::RunRecord;

/// The transitions that put a subject into `state` (none: the model says nothing of it).
fn entering(state: &StateMatch) -> &'static [Transition] {
    match state {
        StateMatch::Node(NodeStateMatch::NotReady | NodeStateMatch::Unknown) => {
            &[Transition::NodeUnknown]
        }
        StateMatch::Node(NodeStateMatch::Ready) => &[Transition::NodeReady],
        StateMatch::Node(NodeStateMatch::Tainted { key, .. })
            if key == "node.kubernetes.io/unreachable" =>
        {
            &[Transition::NodeTainted]
        }
        StateMatch::Pod(PodStateMatch::Terminating) => &[Transition::PodTerminating],
        StateMatch::Pod(PodStateMatch::NotReady) => &[Transition::PodNotReady],
        _ => &[],
    }
}

/// The transitions that take a subject out of `state`: what breaks a `stays`.
fn leaving(state: &StateMatch) -> &'static [Transition] {
    match state {
        StateMatch::Node(NodeStateMatch::Ready) => {
            &[Transition::NodeUnknown, Transition::NodeTainted]
        }
        StateMatch::Node(NodeStateMatch::NotReady | NodeStateMatch::Unknown) => {
            &[Transition::NodeReady]
        }
        // A pod not Ready, or Terminating, still runs (phase Running) until it is gone.
        StateMatch::Pod(PodStateMatch::Ready) => {
            &[Transition::PodNotReady, Transition::PodTerminating]
        }
        _ => &[],
    }
}

/// The transitions an expectation's check is about: those that enter its state for
/// `becomes` and `never`, those that leave it for `stays`.
pub(crate) fn transitions_of(check: &Check) -> &'static [Transition] {
    match check {
        Check::Becomes { state, .. } | Check::Never { state, .. } => entering(state),
        Check::Stays { state, .. } => leaving(state),
        Check::Replaced { .. } => &[Transition::PodReplaced],
        Check::Restarts { .. } | Check::DownFor { .. } => &[],
    }
}

/// The explained transitions `expectation` is about: its nodes' or its workload's pods',
/// of the kinds its check names.
pub fn related<'a>(
    explanation: &'a Explanation,
    record: &RunRecord,
    expectation: &Expectation,
) -> Vec<&'a Explained> {
    let kinds = transitions_of(&expectation.check);
    explanation
        .items
        .iter()
        .filter(|i| kinds.contains(&i.prediction.transition))
        .filter(|i| match &expectation.subject {
            Subject::Node { target } => record
                .targets
                .get(target)
                .is_some_and(|nodes| nodes.contains(&i.prediction.subject)),
            Subject::Pods(pods) => {
                i.workload.as_ref() == Some(&pods.workload)
                    && pods.on.as_ref().is_none_or(|on| {
                        record.targets.get(on).is_some_and(|n| n.contains(&i.node))
                    })
            }
            Subject::Workload(_) | Subject::Probe { .. } => false,
        })
        .collect()
}
