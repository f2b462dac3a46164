//! `expect: conformance`: every transition the node failure model
//! ([`crate::failure_model`]) predicts for a run's faults, judged as a verdict of its own
//! (one JUnit case each), named by the behaviour Kubernetes specifies, with its window and
//! the upstream rule behind it. No bound is written by hand: the windows come from the
//! cluster's timers as the run read them and from the pods it observed.
//!
//! The judging is [`crate::explain`]'s comparison, read as verdicts: inside its window
//! passes; early, late, missing or unexpected fails and names the model's likely cause;
//! a window that reaches past what the run observed is skipped, saying that faultline
//! could not observe it (not that the cluster deviates).

pub mod report;
#[cfg(test)]
mod tests;

use std::time::Duration;

use crate::explain::{Explained, Fit, explain};
use crate::failure_model::words::offset;
use crate::failure_model::{Rule, Transition, Window};
use crate::judge::{MemberResult, Outcome, Verdict};
use crate::record::RunRecord;

/// What every conformance case's name starts with, so a report can tell them from the
/// hand-written expectations.
pub const PREFIX: &str = "conformance: ";

/// One behaviour judged: what the model predicted for one subject, what the run saw, and
/// how the two fit; a verdict and a row of the conformance report.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The behaviour Kubernetes specifies, in words.
    pub behaviour: String,
    /// The node or pod (`namespace/name`).
    pub subject: String,
    /// The node it is about.
    pub node: String,
    /// What its verdict is about, named the same on every run and cluster: the pod's
    /// workload ("Deployment faultline-lab/web") or the node's target ("target `victim`");
    /// the subject itself when it has neither. Pods' random names would make every run's
    /// JUnit cases new ones, and `compare` could pair nothing.
    pub group: String,
    /// Passed (inside its window), failed (a deviation), skipped (not observable).
    pub outcome: Outcome,
    /// What was seen and when, from the first step ("Unknown at +19.2s"), or "not seen".
    pub observed: String,
    /// The window, from the first step ("+10.0s … +22.3s", "from +80.3s", "never").
    pub window: String,
    /// How the observation fits it ("inside", "LATE by 3.1s", …).
    pub fit: String,
    /// The rule behind the window, in words.
    pub rule: String,
    /// The rule's upstream source.
    pub source: &'static str,
    /// For a deviation: the model's most likely cause.
    pub cause: Option<String>,
    /// When it was seen, ms after the first step.
    pub at_ms: Option<i64>,
}

/// Every behaviour `expect: conformance` judges for a finished run's record, in the
/// model's order (per outage: the node, then its pods; then each roll). Empty when the
/// experiment does not ask for conformance.
pub fn cases(record: &RunRecord) -> Vec<Case> {
    if !record.experiment.conformance {
        return Vec::new();
    }
    cases_of(record, &explain(record))
}

/// [`cases`] from the record's explanation, made once by the caller.
fn cases_of(record: &RunRecord, explanation: &crate::explain::Explanation) -> Vec<Case> {
    // Messages and measured times count from the first step, as the judge's do.
    let since_at = first_step(record)
        .and_then(|s| record.timeline.step_issued_ms(&s))
        .map_or(Duration::ZERO, |ms| {
            Duration::from_millis(u64::try_from(ms - record.zero_ms()).unwrap_or(0))
        });
    explanation
        .items
        .iter()
        .chain(explanation.rolls.iter().flat_map(|r| r.items.iter()))
        .map(|item| case(item, since_at, group_of(record, item)))
        .collect()
}

/// [`Case::group`] of one explained item.
fn group_of(record: &RunRecord, item: &Explained) -> String {
    if let Some(w) = &item.workload {
        return format!("{:?} {}/{}", w.kind, w.namespace, w.name);
    }
    let node_transition = item.prediction.subject == item.node;
    match record
        .targets
        .iter()
        .find(|(_, nodes)| nodes.contains(&item.node))
    {
        Some((target, _)) if node_transition => format!("target `{target}`"),
        _ => item.prediction.subject.clone(),
    }
}

/// The verdicts of `expect: conformance`: one per behaviour and [`Case::group`], each
/// subject of the group one member with its own outcome (as a hand-written expectation
/// over a workload has), so that a case keeps its name from run to run. A subject met by a
/// behaviour twice (two outages of one node) opens a second verdict, numbered.
pub fn verdicts(record: &RunRecord) -> Vec<Verdict> {
    if !record.experiment.conformance {
        return Vec::new();
    }
    let since = first_step(record).unwrap_or_default();
    let explanation = explain(record);
    let assumed = &explanation.assumed;
    // (behaviour and group, its ordinal among those, members)
    let mut groups: Vec<(String, usize, Vec<Case>)> = Vec::new();
    for c in cases_of(record, &explanation) {
        let base = format!("{PREFIX}{}: {}", c.behaviour, c.group);
        let open = groups.iter().position(|(b, _, members)| {
            *b == base && !members.iter().any(|m| m.subject == c.subject)
        });
        match open {
            Some(i) => groups[i].2.push(c),
            None => {
                let ordinal = groups.iter().filter(|(b, _, _)| *b == base).count() + 1;
                groups.push((base, ordinal, vec![c]));
            }
        }
    }
    groups
        .into_iter()
        .map(|(base, ordinal, members)| {
            let name = match ordinal {
                1 => base,
                n => format!("{base} ({n})"),
            };
            verdict(&members, name, &since, assumed)
        })
        .collect()
}

/// The experiment's first step: what every conformance case counts from.
fn first_step(record: &RunRecord) -> Option<String> {
    record.experiment.steps.first().map(|s| s.name.clone())
}

/// The behaviour a prediction stands for, as a person names it.
fn behaviour(item: &Explained) -> String {
    let p = &item.prediction;
    let never = p.window == Window::Never;
    match (p.transition, never, &p.rule) {
        (Transition::NodeUnknown, false, _) => {
            "the node goes Unknown once nothing is heard for the grace period".into()
        }
        (Transition::NodeUnknown, true, _) => {
            "the node stays Ready: it answered again within the grace period".into()
        }
        (Transition::NodeTainted, false, _) => {
            "the node gets the unreachable NoExecute taint through its zone's queue".into()
        }
        (Transition::NodeTainted, true, rule) => format!("the node is not tainted ({rule})"),
        (Transition::NodeReady, _, Rule::BackAfterRenewals) => {
            "the roll sees the node back once its kubelet renewed its lease".into()
        }
        (Transition::NodeReady, _, _) => "the node is Ready again once it answers".into(),
        (Transition::PodNotReady, false, _) => "the pod is marked not Ready with its node".into(),
        (Transition::PodNotReady, true, _) => "the pod stays Ready".into(),
        (Transition::PodTerminating, false, Rule::Toleration(_)) => {
            "the pod is evicted at its own toleration".into()
        }
        (Transition::PodTerminating, false, rule) => format!("the pod is evicted ({rule})"),
        (Transition::PodTerminating, true, rule) => format!("the pod is not evicted ({rule})"),
        (Transition::PodReplaced, false, rule) => format!("the pod is replaced ({rule})"),
        (Transition::PodReplaced, true, rule) => format!("the pod is not replaced ({rule})"),
        (Transition::PodRestarted, false, _) => {
            "the pod's containers restart in place once its machine is back".into()
        }
        (Transition::PodRestarted, true, rule) => format!("the pod is not restarted ({rule})"),
        (Transition::RollIssued, _, _) => {
            "the roll takes the node once the one before is back".into()
        }
    }
}

/// One explained item as a case, its times counted from `since_at`.
fn case(item: &Explained, since_at: Duration, group: String) -> Case {
    let p = &item.prediction;
    let rel = |t: Duration| offset(t.saturating_sub(since_at));
    let window = match p.window {
        Window::Never => "never".to_string(),
        Window::Between { earliest, latest } => match latest {
            Some(l) => format!("{} … {}", rel(earliest), rel(l)),
            None => format!("from {}", rel(earliest)),
        },
    };
    let observed = match item.observed {
        Some(t) => format!("{} at {}", p.transition, rel(t)),
        None => format!("{} not seen", p.transition),
    };
    let outcome = match item.fit {
        Fit::Inside => Outcome::Passed,
        Fit::Undecided => Outcome::Skipped,
        _ => Outcome::Failed,
    };
    Case {
        behaviour: behaviour(item),
        subject: p.subject.clone(),
        node: item.node.clone(),
        group,
        outcome,
        observed,
        window,
        fit: item.fit.to_string(),
        rule: p.rule.to_string(),
        source: p.rule.source(),
        cause: item.cause.clone(),
        at_ms: item
            .observed
            .map(|t| i64::try_from(t.saturating_sub(since_at).as_millis()).unwrap_or(i64::MAX)),
    }
}

/// One case's message: what was seen, against which window, by which rule, and for a
/// deviation its likely cause (and, when failed, what the model assumed).
fn message(c: &Case, assumed: &[String]) -> String {
    let window = match c.window.as_str() {
        "never" => "never".to_string(),
        w => format!("window {w}"),
    };
    let rule = format!("{} [{}]", c.rule, c.source);
    let seen = &c.observed;
    let mut message = match c.outcome {
        Outcome::Passed => format!("{seen}; {window}; {rule}"),
        Outcome::Skipped => format!(
            "faultline could not observe it: {seen}, and the {window} reaches past what the \
             run observed of it; {rule}"
        ),
        _ => format!("{seen}: {}; {window}; {rule}", c.fit),
    };
    if let Some(cause) = &c.cause {
        message.push_str(&format!("; likely cause: {cause}"));
    }
    if c.outcome == Outcome::Failed && !assumed.is_empty() {
        message.push_str(&format!("; assumed: {}", assumed.join("; ")));
    }
    message
}

/// A group's cases as one verdict: failed when one member deviates, passed when every
/// member it could observe is inside its window, skipped when it could observe none. Its
/// measured time is the last member's (when the whole group had made the transition).
fn verdict(members: &[Case], name: String, since: &str, assumed: &[String]) -> Verdict {
    let outcome = if members.iter().any(|c| c.outcome == Outcome::Failed) {
        Outcome::Failed
    } else if members.iter().any(|c| c.outcome == Outcome::Passed) {
        Outcome::Passed
    } else {
        Outcome::Skipped
    };
    let notes: Vec<(&Case, String)> = members.iter().map(|c| (c, message(c, assumed))).collect();
    let message = match notes.as_slice() {
        [(_, only)] => only.clone(),
        _ => notes
            .iter()
            .filter(|(c, _)| outcome != Outcome::Failed || c.outcome == Outcome::Failed)
            .map(|(c, note)| format!("{}: {note}", c.subject))
            .collect::<Vec<_>>()
            .join("; "),
    };
    let measured_ms = if members.iter().all(|c| c.at_ms.is_some()) {
        members.iter().filter_map(|c| c.at_ms).max()
    } else {
        None
    };
    Verdict {
        name,
        outcome,
        message,
        measured_ms,
        since: since.to_string(),
        members: notes
            .into_iter()
            .map(|(c, note)| MemberResult {
                member: c.subject.clone(),
                at_ms: c.at_ms,
                note,
                outcome: Some(c.outcome),
                node: Some(c.node.clone()),
            })
            .collect(),
    }
}
