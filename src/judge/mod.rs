//! The judge: expectations evaluated over a timeline, one verdict per expectation, plus the
//! recovery figures of a run.
//!
//! Pure functions of the experiment, the resolved targets, the cluster's timers and
//! capabilities, and the timeline: no client, no clock. The runner calls [`judge`] with
//! `complete = false` while the run goes on to stop early once everything is decided.
//!
//! Decisions worth knowing when reading a verdict:
//! - All times in messages are relative to the expectation's `since` step (`+21.3s`).
//! - Before an object's first observation its state is unknown, and no state (not even
//!   `Gone`) counts as holding.
//! - Existing pods are those present at `since`, filtered by their node then. Replacements
//!   (first seen after `since`) are filtered by the first node they were bound to; one never
//!   scheduled fails an `on` filter and passes a `not_on` filter, so an unschedulable
//!   replacement is judged (and fails) instead of silently vanishing from the set.
//! - A transition first seen at the end of an observation gap is only known to lie inside
//!   the gap; if that uncertainty straddles a bound the outcome is Undecidable and names the
//!   gap. A gap that overlaps a `never`/`stays` interval (or the window of a `becomes` that
//!   was never seen) without an observed violation is Undecidable too. An observed
//!   violation is always a failure. Gaps apply to every subject whatever their source.
//! - While a run is live, replacements may still appear: an `all` over replacements that
//!   passes so far, or an `any`/`at-least` short of members, stays Pending.

mod abort;
mod checks;
pub(crate) mod figures;
mod gap_bridge;
mod index;
mod latest;
mod members;
pub(crate) mod roll_figures;
pub mod score;
mod states;
mod truth;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::experiment::model::{
    Bound, Check, ClusterTimers, Expectation, Experiment, PodGeneration, ProbeStateMatch,
    Quantifier, StateMatch, Subject, Until, Window,
};
use crate::timeline::Timeline;

pub use abort::{AbortCheck, Tripped, check_aborts};
pub use figures::{Figures, figures, figures_of};
pub use index::{FaultProblem, TimelineIndex};
pub(crate) use latest::Latest;
pub use roll_figures::{ProbeAvailability, RollFigures, RollNode, roll_figures, roll_figures_of};
pub use score::{Score, score};

/// State labels shared with reporters.
pub mod labels {
    pub use super::states::{node_label, pod_label, probe_label, workload_label};
}

use checks::{Candidate, Ctx, HoldEnd, MemberEval, MemberOutcome};
use members::{Member, Series, UnboundError, member_toleration, state_at};
pub use states::state_name;
use states::{rel, secs, truth};

pub use crate::outcome::Outcome;

/// The judgement of one expectation: one JUnit test case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The expectation's name.
    pub name: String,
    /// What became of it.
    pub outcome: Outcome,
    /// Why, with times relative to `since`.
    pub message: String,
    /// Time of the decisive transition, ms after `since`.
    pub measured_ms: Option<i64>,
    /// The step the expectation's times are relative to.
    pub since: String,
    /// Per-member detail.
    pub members: Vec<MemberResult>,
}

/// How one member (node, pod, workload) fared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberResult {
    /// Node, pod or workload name.
    pub member: String,
    /// Its decisive moment, ms after `since`.
    pub at_ms: Option<i64>,
    /// What happened to it.
    pub note: String,
    /// How it fared on its own: a `count: all` expectation fails for the whole subject when
    /// one member fails, and a report per node (a roll's JUnit case per node and
    /// expectation) needs each member's own outcome. `None` in records written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The node the member is about: a node itself, a pod's node at `since` (or the first
    /// it was bound to); `None` for workloads and probes, and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// Judges every expectation of `exp` over `timeline`, in order.
///
/// `complete` says whether the timeline is final; when it is not, outcomes that later
/// entries could still change are [`Outcome::Pending`], and decided ones are final.
pub fn judge(
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
    timers: &ClusterTimers,
    capabilities: &[String],
    timeline: &Timeline,
    complete: bool,
) -> Vec<Verdict> {
    let until = Observed {
        until_ms: timeline.end_ms(),
        complete,
    };
    judge_until(exp, targets, timers, capabilities, timeline, until)
}

/// How far a timeline is known to be: observation reached `until_ms` (which may lie after
/// its last entry: nothing changed since), and whether it is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// Offset up to which the cluster was watched.
    pub until_ms: i64,
    /// The timeline is final: nothing more will be observed.
    pub complete: bool,
}

/// Like [`judge`], for a timeline observed until a moment after its last entry: a live run
/// knows that a bound passed with nothing observed, which its last entry cannot tell.
pub fn judge_until(
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
    timers: &ClusterTimers,
    capabilities: &[String],
    timeline: &Timeline,
    observed: Observed,
) -> Vec<Verdict> {
    let index = TimelineIndex::of(timeline);
    judge_index(exp, targets, timers, capabilities, &index, observed)
}

/// Like [`judge_until`], over a timeline already filed in an index: what a live run calls
/// on every tick, at the cost of the expectations' members rather than of the timeline.
pub fn judge_index(
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
    timers: &ClusterTimers,
    capabilities: &[String],
    index: &TimelineIndex,
    observed: Observed,
) -> Vec<Verdict> {
    exp.expectations
        .iter()
        .map(|e| judge_one(e, targets, timers, capabilities, index, observed))
        .collect()
}

fn verdict(e: &Expectation, outcome: Outcome, message: String) -> Verdict {
    Verdict {
        name: e.name.clone(),
        outcome,
        message,
        measured_ms: None,
        since: e.since.clone(),
        members: Vec::new(),
    }
}

fn judge_one(
    e: &Expectation,
    targets: &BTreeMap<String, Vec<String>>,
    timers: &ClusterTimers,
    capabilities: &[String],
    index: &TimelineIndex,
    observed: Observed,
) -> Verdict {
    let complete = observed.complete;
    if let Some(missing) = crate::capability::missing(&e.requires, capabilities) {
        return verdict(e, Outcome::Skipped, missing.to_string());
    }
    let Some(t0) = index.step_issued_ms(&e.since) else {
        return if complete {
            verdict(e, Outcome::Error, format!("step `{}` never ran", e.since))
        } else {
            verdict(
                e,
                Outcome::Pending,
                format!("step `{}` has not run yet", e.since),
            )
        };
    };
    judge_at(e, t0, targets, timers, index, observed)
}

/// Judges one expectation with its times counted from `t0_ms` rather than from its
/// `since` step: how a `when:` step's condition is decided, which may be judged from the
/// experiment's start, before any step ran.
pub fn judge_from(
    e: &Expectation,
    t0_ms: i64,
    targets: &BTreeMap<String, Vec<String>>,
    timers: &ClusterTimers,
    index: &TimelineIndex,
    observed: Observed,
) -> Verdict {
    judge_at(e, t0_ms, targets, timers, index, observed)
}

fn judge_at(
    e: &Expectation,
    t0: i64,
    targets: &BTreeMap<String, Vec<String>>,
    timers: &ClusterTimers,
    index: &TimelineIndex,
    observed: Observed,
) -> Verdict {
    let complete = observed.complete;
    let obs_end = observed.until_ms.max(index.end_ms());
    let mut members = match members::members(&e.subject, targets, index, t0) {
        Ok(m) => m,
        Err(err) => return verdict(e, Outcome::Error, err.to_string()),
    };
    // A replacement that appears only after a hold ended has nothing to do with the hold
    // ("the replacement stays Pending until the claim is deleted" is not about the pod
    // created after that).
    if let (Subject::Pods(p), Some(end)) = (&e.subject, hold_end_step(e, index))
        && p.generation == PodGeneration::Replacements
    {
        members.retain(|m| match &m.series {
            members::Series::Pod(h) => h.first().is_some_and(|(at, _)| *at <= end),
            _ => true,
        });
    }
    let quantifier = match &e.subject {
        Subject::Pods(p) => p.quantifier,
        _ => Quantifier::All,
    };
    // Probes are tried by faultline itself, not seen through a watch, so watch gaps do
    // not make their results uncertain.
    let gaps = match &e.subject {
        Subject::Probe { .. } => Vec::new(),
        _ => index.gaps(obs_end),
    };
    let ctx = Ctx {
        t0,
        zero: index.zero_ms(),
        obs_end,
        complete,
        gaps: &gaps,
    };
    let expected = format!(
        "expected {} after `{}`",
        describe_check(&e.check, timers),
        e.since
    );
    if members.is_empty() {
        let what = match &e.subject {
            Subject::Pods(p) => format!(
                "no {} pods of {} matched",
                match p.generation {
                    PodGeneration::Existing => "existing",
                    PodGeneration::Replacements => "replacement",
                },
                p.workload
            ),
            _ => "the subject has no members".to_string(),
        };
        let replacements = matches!(
            &e.subject,
            Subject::Pods(p) if p.generation == PodGeneration::Replacements
        );
        if replacements && let Check::Never { until, .. } = &e.check {
            // No replacement ever appeared: a `never` about replacements holds vacuously
            // once its hold is over.
            let hold_over = complete
                || match until {
                    Until::Step(step) => index.step_issued_ms(step).is_some(),
                    Until::For(_) | Until::End => false,
                };
            return if hold_over {
                verdict(e, Outcome::Passed, format!("{what}: none appeared"))
            } else {
                verdict(e, Outcome::Pending, format!("{what} yet"))
            };
        }
        let replacements_may_come = replacements && !complete;
        return if replacements_may_come {
            verdict(e, Outcome::Pending, format!("{what} yet"))
        } else if quantifier == Quantifier::All || !matches!(e.subject, Subject::Pods(_)) {
            verdict(
                e,
                Outcome::Failed,
                format!("{expected}; {what} at `{}`", e.since),
            )
        } else {
            let mut v = aggregate(e, quantifier, &expected, &[], &[], false, t0);
            v.message = format!("{expected}; {what}");
            v
        };
    }
    let evals = evaluate(e, &members, timers, index, &ctx);
    let may_grow = !complete
        && matches!(&e.subject, Subject::Pods(p) if p.generation == PodGeneration::Replacements);
    aggregate(e, quantifier, &expected, &members, &evals, may_grow, t0)
}

fn evaluate(
    e: &Expectation,
    members: &[Member],
    timers: &ClusterTimers,
    index: &TimelineIndex,
    ctx: &Ctx,
) -> Vec<MemberEval> {
    let resolve = |m: &Member, b: &Bound| -> Result<i64, UnboundError> {
        let tol = if b.uses_toleration() {
            member_toleration(m, ctx.t0, timers.default_unreachable_toleration)?
        } else {
            None
        };
        b.resolve(&timers.bound_context(tol))
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .map_err(|reason| UnboundError::Unresolved {
                member: m.name.clone(),
                bound: b.to_string(),
                reason,
            })
    };
    let mut candidates = match (&e.check, &e.subject) {
        (Check::Replaced { .. }, Subject::Pods(p)) => {
            replacement_candidates(index, ctx, &p.workload)
        }
        _ => Vec::new(),
    };
    members
        .iter()
        .map(|m| match &e.check {
            Check::Becomes { state, window } => {
                let t = match truth(&m.series, state) {
                    Ok(t) => t,
                    Err(err) => return MemberEval::error(err.to_string()),
                };
                let gaps = gap_bridge::unbridged(ctx.gaps, &m.series, state);
                let ctx = &Ctx {
                    gaps: &gaps,
                    ..*ctx
                };
                let bounds = match window {
                    Window::Eventually => Ok((None, None)),
                    Window::Within(b) => resolve(m, b).map(|h| (None, Some(h))),
                    Window::After(b) => resolve(m, b).map(|l| (Some(l), None)),
                    Window::Between(a, b) => {
                        resolve(m, a).and_then(|l| resolve(m, b).map(|h| (Some(l), Some(h))))
                    }
                };
                match bounds {
                    Ok((lo, hi)) => checks::becomes(ctx, &m.name, &state_name(state), &t, lo, hi),
                    Err(err) => MemberEval::error(err.to_string()),
                }
            }
            Check::Stays { state, until } | Check::Never { state, until } => {
                let t = match truth(&m.series, state) {
                    Ok(t) => t,
                    Err(err) => return MemberEval::error(err.to_string()),
                };
                let gaps = gap_bridge::unbridged(ctx.gaps, &m.series, state);
                let ctx = &Ctx {
                    gaps: &gaps,
                    ..*ctx
                };
                let end = match until {
                    Until::Step(s) => index
                        .step_issued_ms(s)
                        .map(HoldEnd::At)
                        .unwrap_or(HoldEnd::StepNotIssued),
                    Until::For(b) => match resolve(m, b) {
                        Ok(ms) => HoldEnd::At(ctx.t0 + ms),
                        Err(err) => return MemberEval::error(err.to_string()),
                    },
                    Until::End => HoldEnd::ObservationEnd,
                };
                if matches!(e.check, Check::Stays { .. }) {
                    checks::stays(ctx, &m.name, &state_name(state), &t, end)
                } else {
                    checks::never(ctx, &m.name, &state_name(state), &t, end)
                }
            }
            Check::Restarts { changed } => checks::restarts(ctx, m, *changed),
            Check::Replaced { replaced } => checks::replaced(ctx, m, *replaced, &mut candidates),
            Check::DownFor { at_most } => {
                let down = StateMatch::Probe(ProbeStateMatch::Down);
                let t = match truth(&m.series, &down) {
                    Ok(t) => t,
                    Err(err) => return MemberEval::error(err.to_string()),
                };
                match resolve(m, at_most) {
                    Ok(limit) => checks::down_for(ctx, &m.name, &t, limit),
                    Err(err) => MemberEval::error(err.to_string()),
                }
            }
        })
        .collect()
}

/// Where a `stays`/`never` hold ends at a step that was issued.
fn hold_end_step(e: &Expectation, index: &TimelineIndex) -> Option<i64> {
    match &e.check {
        Check::Stays {
            until: Until::Step(step),
            ..
        }
        | Check::Never {
            until: Until::Step(step),
            ..
        } => index.step_issued_ms(step),
        _ => None,
    }
}

/// New pods of the workload (first seen after `since`) that exist when observation ends.
fn replacement_candidates(
    index: &TimelineIndex,
    ctx: &Ctx,
    workload: &crate::experiment::model::WorkloadRef,
) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = index
        .pods_of_first_seen_after(workload, ctx.t0)
        .into_iter()
        .filter_map(|(id, h)| {
            let first_seen = h.first()?.0;
            let alive = state_at(h, ctx.obs_end)?;
            (first_seen > ctx.t0 && alive.owner.as_ref() == Some(workload)).then_some(Candidate {
                name: id.name.clone(),
                first_seen,
            })
        })
        .collect();
    out.sort_by_key(|c| c.first_seen);
    out
}

/// Combines member results under the quantifier. `may_grow`: more members may still appear
/// (replacements during a live run), so an `all` pass and a count shortfall are not final.
fn aggregate(
    e: &Expectation,
    quantifier: Quantifier,
    expected: &str,
    members: &[Member],
    evals: &[MemberEval],
    may_grow: bool,
    t0: i64,
) -> Verdict {
    let count = |o: MemberOutcome| evals.iter().filter(|m| m.outcome == o).count();
    let notes = |o: MemberOutcome| {
        evals
            .iter()
            .filter(|m| m.outcome == o)
            .map(|m| m.note.clone())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let (pass, undecidable, pending, error) = (
        count(MemberOutcome::Pass),
        count(MemberOutcome::Undecidable),
        count(MemberOutcome::Pending),
        count(MemberOutcome::Error),
    );
    let needed = match quantifier {
        Quantifier::All => evals.len(),
        Quantifier::Any => 1,
        Quantifier::AtLeast(n) => n as usize,
    };
    let mut passing_at: Vec<i64> = evals
        .iter()
        .filter(|m| m.outcome == MemberOutcome::Pass)
        .filter_map(|m| m.at_ms)
        .collect();
    passing_at.sort_unstable();
    let need_text = match quantifier {
        Quantifier::All => String::new(),
        _ => format!(" (needs {needed} of {}, {pass} did)", evals.len()),
    };
    let (outcome, message, measured) = if error > 0 {
        (Outcome::Error, notes(MemberOutcome::Error), None)
    } else if may_grow
        && (quantifier == Quantifier::All && pass == evals.len()
            || quantifier != Quantifier::All && pass + undecidable + pending < needed)
    {
        (
            Outcome::Pending,
            format!("not decided yet{need_text}: more replacements may appear"),
            None,
        )
    } else if pass >= needed {
        let measured = if quantifier == Quantifier::All {
            passing_at.last().copied()
        } else {
            passing_at.get(needed.saturating_sub(1)).copied()
        };
        (Outcome::Passed, notes(MemberOutcome::Pass), measured)
    } else if pass + undecidable + pending < needed {
        let measured = evals
            .iter()
            .find(|m| m.outcome == MemberOutcome::Fail)
            .and_then(|m| m.at_ms);
        let failing = notes(MemberOutcome::Fail);
        let msg = if failing.is_empty() {
            format!("{expected}{need_text}")
        } else {
            format!("{expected}{need_text}; {failing}")
        };
        (Outcome::Failed, msg, measured)
    } else if pending > 0 {
        (
            Outcome::Pending,
            format!(
                "not decided yet{need_text}: {}",
                notes(MemberOutcome::Pending)
            ),
            None,
        )
    } else {
        (
            Outcome::Undecidable,
            format!(
                "cannot decide{need_text}: {}",
                notes(MemberOutcome::Undecidable)
            ),
            None,
        )
    };
    Verdict {
        name: e.name.clone(),
        outcome,
        message,
        measured_ms: measured,
        since: e.since.clone(),
        members: members
            .iter()
            .zip(evals)
            .map(|(m, ev)| MemberResult {
                member: m.name.clone(),
                at_ms: ev.at_ms,
                note: ev.note.clone(),
                outcome: Some(ev.outcome.as_outcome()),
                node: member_node(m, t0),
            })
            .collect(),
    }
}

/// The node a member is about: the node itself, or the node a pod was on at `t0` (the
/// first it was bound to when it was not yet then).
fn member_node(m: &Member, t0: i64) -> Option<String> {
    match &m.series {
        Series::Node(_) => Some(m.name.clone()),
        Series::Pod(h) => state_at(h, t0)
            .and_then(|s| s.node.as_deref())
            .or_else(|| members::first_node(h))
            .map(str::to_string),
        Series::Workload(_) | Series::Probe(_) => None,
    }
}

/// A bound for messages: resolved seconds when it needs no per-pod value, else the expression.
fn bound_text(b: &Bound, timers: &ClusterTimers) -> String {
    if b.uses_toleration() {
        return format!("`{b}`");
    }
    b.resolve(&timers.bound_context(None))
        .map(|d: Duration| secs(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
        .unwrap_or_else(|_| format!("`{b}`"))
}

/// The check as a phrase: `Terminating between 30.0s and 60.0s`, bounds resolved against
/// `timers`; verdict messages and reports show what was expected with it.
pub fn describe_check(check: &Check, timers: &ClusterTimers) -> String {
    match check {
        Check::Becomes { state, window } => {
            let s = state_name(state);
            match window {
                Window::Eventually => format!("{s} eventually"),
                Window::Within(b) => format!("{s} within {}", bound_text(b, timers)),
                Window::After(b) => format!("{s} no earlier than {}", bound_text(b, timers)),
                Window::Between(a, b) => format!(
                    "{s} between {} and {}",
                    bound_text(a, timers),
                    bound_text(b, timers)
                ),
            }
        }
        Check::Stays { state, until } => {
            let s = state_name(state);
            match until {
                Until::Step(step) => format!("{s} until `{step}`"),
                Until::For(b) => format!("{s} for {}", bound_text(b, timers)),
                Until::End => format!("{s} until observation ended"),
            }
        }
        Check::Never { state, until } => match until {
            Until::End => format!("never {}", state_name(state)),
            Until::Step(step) => format!("never {} until `{step}`", state_name(state)),
            Until::For(b) => format!("never {} for {b}", state_name(state)),
        },
        Check::Restarts { changed: true } => "restart counts to go up".into(),
        Check::Restarts { changed: false } => "restart counts unchanged".into(),
        Check::Replaced { replaced: true } => "pods replaced by new ones".into(),
        Check::Replaced { replaced: false } => "pods kept (same UID)".into(),
        Check::DownFor { at_most } => {
            format!("Down for at most {} at a time", bound_text(at_most, timers))
        }
    }
}

/// Formats a relative offset the way verdict messages do; exposed for reporters.
pub fn format_relative(ms: i64) -> String {
    rel(ms)
}
