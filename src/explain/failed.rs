//! What `explain` says first: for each expectation that failed, what the node failure
//! model predicts for it and which side is wrong — the cluster (it did not do what the
//! model predicts) or the expectation (the cluster did, and the expectation's bound is
//! stricter than the model's window, by how much).

use std::time::Duration;

use super::{Explained, Explanation};
use crate::experiment::model::{Check, Expectation, Subject, Window as Within};
use crate::failure_model::Window;
use crate::failure_model::words::offset;
use crate::judge::Outcome;
use crate::record::RunRecord;

/// The lines on every failed expectation, each headed `FAILED`, or none when none failed.
pub(super) fn lines(explanation: &Explanation, record: &RunRecord) -> Vec<String> {
    let mut out = Vec::new();
    for v in record
        .verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Failed)
    {
        out.push(format!("FAILED `{}`: {}", v.name, v.message));
        let Some(e) = record.expectation_of(v) else {
            continue;
        };
        let related = super::related(explanation, record, e);
        for item in &related {
            out.push(format!("  the node failure model: {}", item.line()));
        }
        out.push(format!("  so: {}", which_side(&related, span(record, e))));
    }
    out
}

/// The expectation's own window for a `becomes`, from time zero: `(from, to)`
/// (`to`: open); `None` for other checks or when its `since` step was never issued.
fn span(record: &RunRecord, e: &Expectation) -> Option<(Duration, Option<Duration>)> {
    let Check::Becomes { window, .. } = &e.check else {
        return None;
    };
    // From time zero, as the explanation's windows are.
    let since = record.timeline.step_issued_ms(&e.since)? - record.zero_ms();
    let since = Duration::from_millis(u64::try_from(since).ok()?);
    let timers = &record.cluster.timers;
    let toleration =
        matches!(e.subject, Subject::Pods(_)).then_some(timers.default_unreachable_toleration);
    let ctx = timers.bound_context(toleration);
    let at = |b: &crate::experiment::model::Bound| b.resolve(&ctx).ok().map(|d| since + d);
    Some(match window {
        Within::Eventually => (since, None),
        Within::Within(b) => (since, Some(at(b)?)),
        Within::After(b) => (at(b)?, None),
        Within::Between(a, b) => (at(a)?, Some(at(b)?)),
    })
}

/// One sentence: which side the model says is wrong, and by how much when it is the
/// expectation.
fn which_side(related: &[&Explained], span: Option<(Duration, Option<Duration>)>) -> String {
    if related.is_empty() {
        return "the model predicts nothing this expectation is about: it can say neither side \
                is wrong"
            .into();
    }
    if let Some(d) = related.iter().find(|i| i.fit.deviates()) {
        return format!(
            "the cluster did not do what the model predicts ({} {} {}): look at the cluster \
             before the expectation",
            d.prediction.subject, d.prediction.transition, d.fit
        );
    }
    let Some((from, to)) = span else {
        return "the cluster did what the model predicts; the model gives no window to hold \
                this expectation's bounds against"
            .into();
    };
    for i in related {
        let Window::Between { earliest, latest } = i.prediction.window else {
            continue;
        };
        let late = match (latest, to) {
            (Some(latest), Some(to)) if latest > to => Some((latest, to)),
            (None, Some(to)) => Some((to, to)),
            _ => None,
        };
        if let Some((latest, to)) = late {
            if latest == to {
                return format!(
                    "the cluster did what the model predicts, and the model gives no latest \
                     moment for {} {} while the expectation's bound ends at {}: the \
                     expectation is stricter than the model can promise",
                    i.prediction.subject,
                    i.prediction.transition,
                    offset(to)
                );
            }
            return too_strict(i, ("runs to", latest), "past", (latest - to, to));
        }
        if earliest < from {
            return too_strict(i, ("opens at", earliest), "before", (from - earliest, from));
        }
    }
    "the model's windows lie inside the expectation's bounds and nothing deviated from them: \
     the model says neither side is wrong (an observation gap, or a member the model does not \
     cover)"
        .into()
}

/// "the expectation is too strict": the model's window for `i` `edge` (its end or start)
/// lies `by` `side` the expectation's `bound`.
fn too_strict(
    i: &Explained,
    (edge, at): (&str, Duration),
    side: &str,
    (by, bound): (Duration, Duration),
) -> String {
    format!(
        "the cluster did what the model predicts; the expectation is too strict: the model's \
         window for {} {} {edge} {}, {:.1}s {side} the expectation's bound ({})",
        i.prediction.subject,
        i.prediction.transition,
        offset(at),
        by.as_secs_f64(),
        offset(bound)
    )
}
