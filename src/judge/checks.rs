//! Per-member evaluation of each check kind. Every function here decides one member and
//! says why in a note; quantifiers combine the members afterwards (see `verdict`).

use super::index::History;
use super::members::{Member, Series, last_known, state_at};
use super::states::{pod_label, rel, secs};
use super::truth::{Gap, Truth, gap_hiding, gap_overlapping};
use crate::timeline::PodState;
use std::sync::Arc;

/// What one member's evaluation came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MemberOutcome {
    /// The member satisfies the check.
    Pass,
    /// The member violates the check.
    Fail,
    /// A gap in observation hides the deciding moment.
    Undecidable,
    /// Not decided yet; the run is still going.
    Pending,
    /// The check cannot be evaluated for this member (e.g. an unresolvable bound).
    Error,
}

impl MemberOutcome {
    /// The outcome a report gives this member alone.
    pub(super) fn as_outcome(self) -> crate::outcome::Outcome {
        use crate::outcome::Outcome;
        match self {
            MemberOutcome::Pass => Outcome::Passed,
            MemberOutcome::Fail => Outcome::Failed,
            MemberOutcome::Undecidable => Outcome::Undecidable,
            MemberOutcome::Pending => Outcome::Pending,
            MemberOutcome::Error => Outcome::Error,
        }
    }
}

/// One member's result with the offset that decided it (relative to `since`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct MemberEval {
    /// Outcome for this member.
    pub outcome: MemberOutcome,
    /// Decisive moment, ms after `since`.
    pub at_ms: Option<i64>,
    /// Why, with timestamps.
    pub note: String,
}

impl MemberEval {
    fn new(outcome: MemberOutcome, at_ms: Option<i64>, note: String) -> Self {
        MemberEval {
            outcome,
            at_ms,
            note,
        }
    }

    /// An evaluation that could not run for this member.
    pub(super) fn error(note: String) -> Self {
        MemberEval::new(MemberOutcome::Error, None, note)
    }
}

/// What every check needs to know about the run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ctx<'a> {
    /// Offset at which `since` was issued.
    pub t0: i64,
    /// Offset of the experiment's `at: 0s`: the messages' moments are counted from it,
    /// as every report counts them (the measured times and bounds from `since`).
    pub zero: i64,
    /// Offset of the last timeline entry.
    pub obs_end: i64,
    /// Whether the timeline is final.
    pub complete: bool,
    /// Observation gaps.
    pub gaps: &'a [Gap],
}

impl Ctx<'_> {
    /// The moment at offset `ms`, as every output writes it: `+94.2s` from time zero.
    fn at(&self, ms: i64) -> String {
        rel(ms - self.zero)
    }

    fn gap_note(&self, g: &Gap) -> String {
        format!(
            "no observation from {} to {} ({})",
            self.at(g.began),
            self.at(g.ended),
            g.reason
        )
    }
}

/// `becomes`: the first moment ≥ `since` the state holds must lie within `[lo, hi]`
/// (ms after `since`; `None` = unbounded on that side).
pub(super) fn becomes(
    ctx: &Ctx,
    name: &str,
    state: &str,
    truth: &Truth,
    lo: Option<i64>,
    hi: Option<i64>,
) -> MemberEval {
    use MemberOutcome::*;
    let t0 = ctx.t0;
    let bound_note = match (lo, hi) {
        (Some(l), Some(h)) => format!(" (bounds {} and {})", secs(l), secs(h)),
        (Some(l), None) => format!(" (bound {})", secs(l)),
        (None, Some(h)) => format!(" (bound {})", secs(h)),
        (None, None) => String::new(),
    };
    let Some(t) = truth.first_true_from(t0) else {
        let observed = ctx.obs_end - t0;
        let last = truth
            .at(ctx.obs_end)
            .map(|p| p.label.clone())
            .unwrap_or_else(|| "never observed".into());
        if let Some(h) = hi.filter(|h| observed >= *h) {
            if let Some(g) = gap_overlapping(ctx.gaps, t0, t0 + h) {
                return MemberEval::new(
                    Undecidable,
                    None,
                    format!(
                        "{name} was not seen {state} by {}, but {}",
                        ctx.at(t0 + h),
                        ctx.gap_note(g)
                    ),
                );
            }
            return MemberEval::new(
                Fail,
                None,
                format!(
                    "{name} was not {state} by {} ({last} at {})",
                    ctx.at(t0 + h),
                    ctx.at(ctx.obs_end)
                ),
            );
        }
        if !ctx.complete {
            return MemberEval::new(
                Pending,
                None,
                format!("{name} not {state} yet at {}", ctx.at(ctx.obs_end)),
            );
        }
        if let Some(g) = gap_overlapping(ctx.gaps, t0, ctx.obs_end) {
            return MemberEval::new(
                Undecidable,
                None,
                format!("{name} was never seen {state}, but {}", ctx.gap_note(g)),
            );
        }
        return MemberEval::new(
            Fail,
            None,
            format!(
                "{name} never became {state} (observed until {}; last {last})",
                ctx.at(ctx.obs_end)
            ),
        );
    };
    let r = t - t0;
    let hidden = if t == t0 {
        None
    } else {
        gap_hiding(ctx.gaps, t)
    };
    let earliest = hidden.map(|g| (g.began - t0).max(0)).unwrap_or(r);
    let seen = match hidden {
        Some(g) => format!(
            "{name} was first seen {state} at {}, but it happened somewhere in the gap: {}",
            ctx.at(t),
            ctx.gap_note(g)
        ),
        None => format!("{name} became {state} at {}", ctx.at(t)),
    };
    if let Some(l) = lo {
        if r < l {
            return MemberEval::new(
                Fail,
                Some(r),
                format!(
                    "{name} became {state} at {}, too early{bound_note}",
                    ctx.at(t)
                ),
            );
        }
        if earliest < l {
            return MemberEval::new(Undecidable, Some(r), format!("{seen}{bound_note}"));
        }
    }
    if let Some(h) = hi {
        if earliest > h {
            return MemberEval::new(
                Fail,
                Some(r),
                format!(
                    "{name} became {state} at {}, too late{bound_note}",
                    ctx.at(t)
                ),
            );
        }
        if r > h {
            return MemberEval::new(Undecidable, Some(r), format!("{seen}{bound_note}"));
        }
    }
    MemberEval::new(Pass, Some(r), format!("{seen}{bound_note}"))
}

/// Where a `stays` hold ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HoldEnd {
    /// At this absolute offset.
    At(i64),
    /// When observation ends.
    ObservationEnd,
    /// At a step that has not been issued.
    StepNotIssued,
}

/// `stays`: in the state at some moment of the hold and continuously from then until its end.
pub(super) fn stays(ctx: &Ctx, name: &str, state: &str, truth: &Truth, end: HoldEnd) -> MemberEval {
    use MemberOutcome::*;
    let t0 = ctx.t0;
    let (until, settled) = match end {
        HoldEnd::At(e) if e <= ctx.obs_end => (e, true),
        HoldEnd::At(_) | HoldEnd::ObservationEnd | HoldEnd::StepNotIssued => (
            ctx.obs_end + 1,
            ctx.complete && end == HoldEnd::ObservationEnd,
        ),
    };
    let horizon = until.min(ctx.obs_end);
    let Some(first) = truth.first_true_from(t0).filter(|t| *t <= horizon) else {
        if !settled && !ctx.complete {
            return MemberEval::new(
                Pending,
                None,
                format!("{name} not {state} yet at {}", ctx.at(ctx.obs_end)),
            );
        }
        if let Some(g) = gap_overlapping(ctx.gaps, t0, horizon) {
            return MemberEval::new(
                Undecidable,
                None,
                format!("{name} was never seen {state}, but {}", ctx.gap_note(g)),
            );
        }
        let was = truth
            .at(t0)
            .map(|p| p.label.clone())
            .unwrap_or_else(|| "not observed".into());
        return MemberEval::new(
            Fail,
            None,
            format!("{name} was never {state} (at {}: {was})", ctx.at(t0)),
        );
    };
    if let Some(p) = truth.first_false_between(first, until) {
        return MemberEval::new(
            Fail,
            Some(p.at - t0),
            format!("{name} left {state} at {} ({})", ctx.at(p.at), p.label),
        );
    }
    if !settled {
        let note = match end {
            HoldEnd::StepNotIssued if ctx.complete => {
                return MemberEval::new(
                    Undecidable,
                    None,
                    format!(
                        "{name} was {state} until observation ended, but the hold's end step never ran"
                    ),
                );
            }
            HoldEnd::At(e) if ctx.complete => {
                return MemberEval::new(
                    Undecidable,
                    None,
                    format!(
                        "{name} was {state} until observation ended at {}, before the hold ended at {}",
                        ctx.at(ctx.obs_end),
                        ctx.at(e)
                    ),
                );
            }
            _ => format!("{name} {state} so far, at {}", ctx.at(ctx.obs_end)),
        };
        return MemberEval::new(Pending, None, note);
    }
    if let Some(g) = gap_overlapping(ctx.gaps, first, horizon) {
        return MemberEval::new(
            Undecidable,
            Some(first - t0),
            format!(
                "{name} was seen {state} throughout, but {}",
                ctx.gap_note(g)
            ),
        );
    }
    MemberEval::new(
        Pass,
        Some(first - t0),
        format!(
            "{name} was {state} from {} to {}",
            ctx.at(first),
            ctx.at(horizon)
        ),
    )
}

/// `never`: the state does not hold anywhere from `since` to the end of observation.
pub(super) fn never(ctx: &Ctx, name: &str, state: &str, truth: &Truth, end: HoldEnd) -> MemberEval {
    use MemberOutcome::*;
    let t0 = ctx.t0;
    let (until, settled) = match end {
        HoldEnd::At(e) => (e.min(ctx.obs_end), e <= ctx.obs_end),
        HoldEnd::ObservationEnd => (ctx.obs_end, ctx.complete),
        HoldEnd::StepNotIssued => (ctx.obs_end, false),
    };
    if let Some(t) = truth.first_true_from(t0).filter(|t| *t <= until) {
        let label = truth.at(t).map(|p| p.label.clone()).unwrap_or_default();
        return MemberEval::new(
            Fail,
            Some(t - t0),
            format!("{name} was {state} at {} ({label})", ctx.at(t)),
        );
    }
    let observed = ctx.at(until);
    if !settled {
        if !ctx.complete {
            return MemberEval::new(
                Pending,
                None,
                format!("{name} not {state} so far, at {observed}"),
            );
        }
        return MemberEval::new(
            Undecidable,
            None,
            format!(
                "{name} was not {state} until observation ended at {observed}, but the hold's end never came"
            ),
        );
    }
    if let Some(g) = gap_overlapping(ctx.gaps, t0, until) {
        return MemberEval::new(
            Undecidable,
            None,
            format!("{name} was never seen {state}, but {}", ctx.gap_note(g)),
        );
    }
    MemberEval::new(
        Pass,
        None,
        format!("{name} was never {state} (observed until {observed})"),
    )
}

fn pod_history<'a>(
    member: &'a Member,
    check: &str,
) -> Result<&'a History<Arc<PodState>>, MemberEval> {
    match &member.series {
        Series::Pod(h) => Ok(h),
        _ => Err(MemberEval::error(format!(
            "`{check}` applies to pods only, not to {}",
            member.name
        ))),
    }
}

/// `restarts`: the pod's restart count at the end compared with `since`.
pub(super) fn restarts(ctx: &Ctx, member: &Member, changed: bool) -> MemberEval {
    use MemberOutcome::*;
    let history = match pod_history(member, "restarts") {
        Ok(h) => h,
        Err(e) => return e,
    };
    let name = &member.name;
    let Some(r0) = state_at(history, ctx.t0)
        .or_else(|| history.iter().find_map(|(_, s)| s.as_ref()))
        .map(|s| s.restarts)
    else {
        return MemberEval::error(format!("{name} was never observed"));
    };
    let change = history.iter().find_map(|(at, s)| match s {
        Some(s) if *at > ctx.t0 && s.restarts != r0 => Some((*at, s.restarts)),
        _ => None,
    });
    match (change, changed) {
        (Some((at, r)), true) => MemberEval::new(
            Pass,
            Some(at - ctx.t0),
            format!("{name} restarts went {r0}→{r} at {}", ctx.at(at)),
        ),
        (Some((at, r)), false) => MemberEval::new(
            Fail,
            Some(at - ctx.t0),
            format!("{name} restarts went {r0}→{r} at {}", ctx.at(at)),
        ),
        (None, _) if !ctx.complete => MemberEval::new(
            Pending,
            None,
            format!("{name} restarts still {r0} at {}", ctx.at(ctx.obs_end)),
        ),
        (None, want_change) => MemberEval::new(
            if want_change { Fail } else { Pass },
            None,
            format!(
                "{name} restarts stayed at {r0} until {}",
                ctx.at(ctx.obs_end)
            ),
        ),
    }
}

/// A pod that may serve as another's replacement: first seen after `since`, still there.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Candidate {
    /// Pod name.
    pub name: String,
    /// First seen, absolute offset.
    pub first_seen: i64,
}

/// `replaced`: whether the pod's UID is gone by the end and (for `true`) a new pod of the
/// workload took its place. `candidates` are shared between members so that one new pod
/// replaces one old pod; a StatefulSet pod is paired with its same-named successor.
pub(super) fn replaced(
    ctx: &Ctx,
    member: &Member,
    want_replaced: bool,
    candidates: &mut Vec<Candidate>,
) -> MemberEval {
    use MemberOutcome::*;
    let history = match pod_history(member, "replaced") {
        Ok(h) => h,
        Err(e) => return e,
    };
    let name = &member.name;
    let uid = member.pod.as_ref().map(|p| p.uid.as_str()).unwrap_or("?");
    let gone_at = history
        .iter()
        .find(|(at, s)| *at > ctx.t0 && s.is_none())
        .map(|(at, _)| *at);
    match (gone_at, want_replaced) {
        (Some(at), false) => MemberEval::new(
            Fail,
            Some(at - ctx.t0),
            format!("{name} (uid {uid}) was gone at {}", ctx.at(at)),
        ),
        (None, false) if ctx.complete => MemberEval::new(
            Pass,
            None,
            format!(
                "{name} kept uid {uid} ({})",
                pod_label(last_known(history).map(Arc::as_ref))
            ),
        ),
        (None, false) => MemberEval::new(Pending, None, format!("{name} still has uid {uid}")),
        (None, true) if ctx.complete => MemberEval::new(
            Fail,
            None,
            format!(
                "{name} (uid {uid}) still existed when observation ended ({})",
                pod_label(last_known(history).map(Arc::as_ref))
            ),
        ),
        (None, true) => MemberEval::new(
            Pending,
            None,
            format!("{name} (uid {uid}) still exists at {}", ctx.at(ctx.obs_end)),
        ),
        (Some(gone), true) => {
            let pick = candidates
                .iter()
                .position(|c| &c.name == name)
                .or_else(|| (!candidates.is_empty()).then_some(0));
            match pick {
                Some(i) => {
                    let c = candidates.remove(i);
                    MemberEval::new(
                        Pass,
                        Some(c.first_seen - ctx.t0),
                        format!(
                            "{name} (uid {uid}) gone at {}, replaced by {} created at {}",
                            ctx.at(gone),
                            c.name,
                            ctx.at(c.first_seen)
                        ),
                    )
                }
                None => MemberEval::new(
                    if ctx.complete { Fail } else { Pending },
                    None,
                    format!(
                        "{name} (uid {uid}) gone at {} but no replacement exists",
                        ctx.at(gone)
                    ),
                ),
            }
        }
    }
}

/// `downFor`: every continuous Down stretch from `since` on lasts at most `limit` ms. A
/// stretch that began before `since` is counted from `since`; one still open when
/// observation ends is counted up to the end (and fails early once it is already too long).
pub(super) fn down_for(ctx: &Ctx, name: &str, down: &Truth, limit: i64) -> MemberEval {
    use MemberOutcome::*;
    let t0 = ctx.t0;
    // Down stretches as (start, end, open), clipped to start no earlier than `since`.
    let mut stretches: Vec<(i64, i64, bool)> = Vec::new();
    let mut start: Option<i64> = None;
    for p in &down.points {
        match (p.holds, start) {
            (true, None) => start = Some(p.at.max(t0)),
            (false, Some(s)) => {
                if p.at > t0 {
                    stretches.push((s, p.at, false));
                }
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        stretches.push((s, ctx.obs_end.max(s), true));
    }
    let longest = stretches.iter().max_by_key(|(s, e, _)| e - s).copied();
    let describe = |(s, e, open): (i64, i64, bool)| {
        let to = if open {
            format!("{} (still Down when observation ended)", ctx.at(e))
        } else {
            ctx.at(e)
        };
        format!(
            "{name} was Down from {} to {to} ({})",
            ctx.at(s),
            secs(e - s)
        )
    };
    if let Some(too_long) = stretches.iter().find(|(s, e, _)| e - s > limit).copied() {
        return MemberEval::new(
            Fail,
            Some(too_long.0 - t0),
            format!("{}, longer than {}", describe(too_long), secs(limit)),
        );
    }
    if !ctx.complete {
        return MemberEval::new(
            Pending,
            None,
            format!(
                "{name} not Down longer than {} so far, at {}",
                secs(limit),
                ctx.at(ctx.obs_end)
            ),
        );
    }
    match longest {
        None if down.points.is_empty() => MemberEval::new(
            Undecidable,
            None,
            format!("{name} has no result on the timeline"),
        ),
        None => MemberEval::new(
            Pass,
            None,
            format!(
                "{name} was never Down (observed until {})",
                ctx.at(ctx.obs_end)
            ),
        ),
        Some(l) => MemberEval::new(
            Pass,
            Some(l.0 - t0),
            format!("longest outage: {}, within {}", describe(l), secs(limit)),
        ),
    }
}
