//! `faultline plan` flags an expectation the node failure model says cannot hold: a
//! `becomes` whose window closes before the model's opens (a bound shorter than the grace
//! period) or opens after it closed, a transition the model says never comes (evictions
//! in a partially disrupted small zone, a node back before the toleration), and a `stays`
//! or `never` the model's window ends inside.

use std::collections::BTreeMap;
use std::time::Duration;

use super::plan_predicted::Predicted;
use super::plan_roll_predicted::{template_toleration, typical_pod, typical_pods_prefix};
use crate::experiment::model::{
    Bound, Check, ClusterTimers, Expectation, Experiment, Subject, Until, Window as Within,
    WorkloadKind,
};
use crate::failure_model::words::offset;
use crate::failure_model::{Prediction, Window};
use crate::run::floor::schedule::Projected;

/// An expectation's own window, as offsets from the start: `(from, to)` (`to`: open).
type Span = (Duration, Option<Duration>);

/// The offset of the step named `name`, when the schedule alone decides it.
fn step_at(exp: &Experiment, projected: &[Projected], name: &str) -> Option<Duration> {
    let index = exp.steps.iter().position(|s| s.name == name)?;
    let ms = projected.iter().find(|p| p.index == index)?.at_ms?;
    Some(Duration::from_millis(u64::try_from(ms).ok()?))
}

/// The predictions an expectation is about: its target's node (the first candidate when
/// targets are not resolved), or the typical pod on that node for a Deployment's pods.
fn about<'a>(
    predicted: &'a Predicted,
    e: &Expectation,
    (targets, resolved): (&BTreeMap<String, Vec<String>>, bool),
) -> Vec<&'a Prediction> {
    let nodes_of = |target: &str| -> Vec<String> {
        let nodes = targets.get(target).cloned().unwrap_or_default();
        if resolved {
            nodes
        } else {
            nodes.into_iter().take(1).collect()
        }
    };
    // Subjects named exactly (a node, the typical pod), and the workload's stand-in pods
    // by what their names start with (they say the toleration they were given).
    let mut exact: Vec<String> = Vec::new();
    let mut prefixes: Vec<String> = Vec::new();
    match &e.subject {
        Subject::Node { target } => exact = nodes_of(target),
        // The pods of the workload the plan stood for on that node, or (a Deployment's,
        // in a roll's table) the typical pod.
        Subject::Pods(pods) => {
            for n in pods.on.as_deref().map(nodes_of).unwrap_or_default() {
                if pods.workload.kind == WorkloadKind::Deployment {
                    exact.push(typical_pod(&n));
                }
                prefixes.push(typical_pods_prefix(&n, &pods.workload));
            }
        }
        _ => {}
    }
    let kinds = crate::explain::transitions_of(&e.check);
    predicted
        .predictions
        .iter()
        .filter(|p| {
            kinds.contains(&p.transition)
                && (exact.contains(&p.subject)
                    || prefixes.iter().any(|s| p.subject.starts_with(s.as_str())))
        })
        .collect()
}

/// The flag for `e`, if the model says it cannot hold; the first prediction that says so.
/// `observation_end_ms`: where observation ends at the latest (a `stays` or `never` to the
/// end holds to there, not beyond).
pub(super) fn flag(
    predicted: &Predicted,
    exp: &Experiment,
    e: &Expectation,
    targets: (&BTreeMap<String, Vec<String>>, bool),
    (projected, observation_end_ms): (&[Projected], Option<i64>),
    timers: &ClusterTimers,
) -> Option<String> {
    let since = step_at(exp, projected, &e.since)?;
    // A workload's pods resolve `toleration` to what their template gives, as a run
    // resolves it to each pod's own.
    let toleration = match &e.subject {
        Subject::Pods(pods) => Some(
            match template_toleration(&predicted.setup, &pods.workload) {
                crate::failure_model::Toleration::For(d) => d,
                _ => timers.default_unreachable_toleration,
            },
        ),
        _ => None,
    };
    let ctx = timers.bound_context(toleration);
    let at = |b: &Bound| b.resolve(&ctx).ok().map(|d| since + d);
    about(predicted, e, targets)
        .into_iter()
        .find_map(|p| match &e.check {
            Check::Becomes { window, .. } => {
                let span: Span = match window {
                    Within::Eventually => (since, None),
                    Within::Within(b) => (since, Some(at(b)?)),
                    Within::After(b) => (at(b)?, None),
                    Within::Between(a, b) => (at(a)?, Some(at(b)?)),
                };
                becomes(p, span)
            }
            Check::Stays { until, .. } | Check::Never { until, .. } => {
                let end = match until {
                    Until::For(b) => Some(at(b)?),
                    Until::Step(name) => Some(step_at(exp, projected, name)?),
                    Until::End => observation_end_ms
                        .and_then(|ms| u64::try_from(ms).ok())
                        .map(Duration::from_millis),
                };
                happens_before(p, end)
            }
            Check::Replaced { replaced: true } => becomes(p, (since, None)),
            _ => None,
        })
}

/// A `becomes` against the prediction: it cannot hold when the model says never, or when
/// the two windows do not meet.
fn becomes(p: &Prediction, (from, to): Span) -> Option<String> {
    match p.window {
        Window::Never => Some(format!(
            "{} {} never comes ({})",
            p.subject, p.transition, p.rule
        )),
        Window::Between { earliest, .. } if to.is_some_and(|t| t < earliest) => Some(format!(
            "{} {} no sooner than {} ({}), after this window closes at {}",
            p.subject,
            p.transition,
            offset(earliest),
            p.rule,
            offset(to.unwrap_or_default())
        )),
        Window::Between {
            latest: Some(latest),
            ..
        } if from > latest => Some(format!(
            "{} {} by {} ({}), before this window opens at {}",
            p.subject,
            p.transition,
            offset(latest),
            p.rule,
            offset(from)
        )),
        _ => None,
    }
}

/// A `stays` or `never` against the prediction: it cannot hold when the model's window
/// closes before the hold ends (`end`: open, the end of observation).
fn happens_before(p: &Prediction, end: Option<Duration>) -> Option<String> {
    match p.window {
        Window::Between {
            latest: Some(latest),
            ..
        } if end.is_none_or(|e| latest < e) => Some(format!(
            "{} {} by {} ({}), before this holds to its end{}",
            p.subject,
            p.transition,
            offset(latest),
            p.rule,
            end.map(|e| format!(" at {}", offset(e)))
                .unwrap_or_default()
        )),
        _ => None,
    }
}
