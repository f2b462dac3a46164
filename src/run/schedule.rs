//! When things happen: the offset each step is due at, and how long observation lasts.
//!
//! Pure functions of the experiment and the cluster's timers, so `plan` can print the
//! schedule and tests can check it without a cluster.

use std::time::Duration;

use crate::experiment::model::{Bound, Check, ClusterTimers, Experiment, StepTime, Until, Window};

/// Margin added after the last expectation bound before observation ends.
pub const OBSERVE_MARGIN: Duration = Duration::from_secs(20);

/// Resolves a bound written in a step time or an observation length: `toleration` there
/// means the cluster's default unreachable toleration (no pod is in question).
pub fn resolve_cluster_bound(bound: &Bound, timers: &ClusterTimers) -> Duration {
    let ctx = timers.bound_context(Some(timers.default_unreachable_toleration));
    // With a toleration supplied, resolution cannot fail.
    bound.resolve(&ctx).unwrap_or_default()
}

/// The offset (from time zero) a step written with `at:` is due at; `None` for steps
/// that wait for another step or an observed state.
pub fn fixed_offset(at: &StepTime, timers: &ClusterTimers) -> Option<Duration> {
    match at {
        StepTime::Offset(bound) => Some(resolve_cluster_bound(bound, timers)),
        _ => None,
    }
}

/// The largest bound an expectation uses, resolved with the cluster's default toleration:
/// how long after its `since` step the expectation may still need observing.
pub fn expectation_horizon(check: &Check, timers: &ClusterTimers) -> Duration {
    let r = |b: &Bound| resolve_cluster_bound(b, timers);
    match check {
        Check::Becomes { window, .. } => match window {
            Window::Eventually => Duration::ZERO,
            Window::Within(b) | Window::After(b) => r(b),
            Window::Between(_, b2) => r(b2),
        },
        Check::Stays {
            until: Until::For(b),
            ..
        } => r(b),
        Check::Never {
            until: Until::For(b),
            ..
        } => r(b),
        Check::DownFor { at_most } => r(at_most),
        _ => Duration::ZERO,
    }
}

/// How long to keep observing after the last step was issued.
///
/// An explicit `observe.for` wins. Otherwise: long enough for every expectation whose
/// `since` is the last step (or earlier, measured from time zero via `step_offsets`) to
/// reach its largest bound, plus [`OBSERVE_MARGIN`].
pub fn observe_after_last_step(
    exp: &Experiment,
    timers: &ClusterTimers,
    step_offsets: &dyn Fn(&str) -> Option<Duration>,
    last_step_offset: Duration,
) -> Duration {
    if let Some(b) = &exp.observe.after_last_step {
        return resolve_cluster_bound(b, timers);
    }
    let mut needed = Duration::ZERO;
    for e in &exp.expectations {
        let since = step_offsets(&e.since).unwrap_or(last_step_offset);
        let end = since + expectation_horizon(&e.check, timers);
        needed = needed.max(end.saturating_sub(last_step_offset));
    }
    needed + OBSERVE_MARGIN
}
