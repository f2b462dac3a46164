//! The step scheduler: which steps are due, which wait and for what, which gave up, and
//! when observation ends.
//!
//! A pure state machine. It is told what the runner did (a step started, a step finished)
//! and asked, with the timeline so far and the time now, what comes next; it answers with
//! the steps due now, what every other step waits for, when it must be asked again at the
//! latest, and whether the run is over and why. It has no clock and does no I/O: the runner
//! drives it with the timeline's offsets, `rehearse` and the tests with a virtual clock,
//! and `plan` projects the schedule with the same code.
//!
//! Times are milliseconds on the run's timeline. The experiment's start (where `at: 0s`
//! falls) is `start_ms`, the moment the observer had synced.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::interlock::InterlockRefusal;
use crate::experiment::fault;
use crate::experiment::model::{
    Bound, Check, ClusterTimers, Expectation, Experiment, Step, StepTime, Subject, Until, Window,
};
use crate::judge::{self, Outcome, TimelineIndex, Verdict};
use crate::timeline::format_secs;

/// How old an instant must be for the timeline to be taken as complete up to it: entries
/// are stamped when the observer receives them and appended a moment later, so the judge
/// looks only at what lies at least this far back.
pub(crate) const SETTLE_MS: i64 = 500;

/// How often undecided expectations whose bounds the scheduler cannot place in time are
/// judged again while nothing else happens.
pub(crate) const RECHECK_MS: i64 = 1_000;

/// Margin added after the last expectation bound before observation ends.
pub(crate) const OBSERVE_MARGIN: Duration = Duration::from_secs(20);

/// Resolves a bound written in a step time or an observation length: `toleration` there
/// means the cluster's default unreachable toleration (no pod is in question).
pub(crate) fn resolve_cluster_bound(bound: &Bound, timers: &ClusterTimers) -> Duration {
    timers.resolve(bound)
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The largest bound an expectation uses, resolved with the cluster's default toleration:
/// how long after its `since` step the expectation may still need observing.
pub(crate) fn expectation_horizon(check: &Check, timers: &ClusterTimers) -> Duration {
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
        }
        | Check::Never {
            until: Until::For(b),
            ..
        } => r(b),
        Check::DownFor { at_most } => r(at_most),
        _ => Duration::ZERO,
    }
}

/// How long to keep observing after the last step was issued.
///
/// An explicit `observe.for` wins. Otherwise: long enough for every expectation to reach
/// its largest bound counted from its `since` step (`issued_after_start` gives a step's
/// issue time after the start, `None` when it was not issued), plus [`OBSERVE_MARGIN`].
pub(crate) fn observe_after_last_step(
    exp: &Experiment,
    timers: &ClusterTimers,
    issued_after_start: &dyn Fn(&str) -> Option<Duration>,
    last_step: Duration,
) -> Duration {
    if let Some(b) = &exp.observe.after_last_step {
        return resolve_cluster_bound(b, timers);
    }
    let mut needed = Duration::ZERO;
    for e in &exp.expectations {
        let since = issued_after_start(&e.since).unwrap_or(last_step);
        let end = since + expectation_horizon(&e.check, timers);
        needed = needed.max(end.saturating_sub(last_step));
    }
    if exp.conformance {
        let end = conformance_end(exp, timers, issued_after_start, last_step);
        needed = needed.max(end.saturating_sub(last_step));
    }
    needed + OBSERVE_MARGIN
}

/// How long after a silencing step the node failure model's windows reach when nothing
/// undoes it: the grace period after the last Lease renewal (up to a quarter of a 40 s
/// lease before the fault), the monitor pass that sees it, the next that queues its
/// taint, the pods' default toleration after the taint, and a pass more.
fn silenced_reach(timers: &ClusterTimers) -> Duration {
    timers.node_monitor_grace_period
        + timers.default_unreachable_toleration
        + 3 * timers.node_monitor_period
        + Duration::from_secs(10)
}

/// Where observation must reach, from the start, for `expect: conformance` to decide
/// what the model predicts: each silencing step's windows ([`silenced_reach`]) unless a
/// later step undoes it first, and after each undo long enough to see the node Ready and
/// its pods replaced (a grace period: the kubelet posts its status within seconds).
fn conformance_end(
    exp: &Experiment,
    timers: &ClusterTimers,
    issued_after_start: &dyn Fn(&str) -> Option<Duration>,
    last_step: Duration,
) -> Duration {
    let after_undo = timers
        .node_monitor_grace_period
        .max(Duration::from_secs(20));
    let mut end = Duration::ZERO;
    for (i, step) in exp.steps.iter().enumerate() {
        let at = issued_after_start(&step.name).unwrap_or(last_step);
        let undone = exp.steps[i + 1..]
            .iter()
            .any(|later| later.target == step.target && fault::undoes(&later.action, &step.action));
        if fault::silences_node(&step.action) && !undone {
            end = end.max(at + silenced_reach(timers));
        }
        if fault::info(&step.action).brings_node_back {
            end = end.max(at + after_undo);
        }
    }
    end
}

/// How long the planned part of a run lasts at most, from its start: the base of the
/// deadline a self-restore armed on a node waits for. Every wait is counted at its longest
/// (a `when:` step at its timeout).
pub(crate) fn planned_length(exp: &Experiment, timers: &ClusterTimers) -> Duration {
    let mut fixed = Duration::ZERO;
    let mut waits = Duration::ZERO;
    for step in &exp.steps {
        match &step.at {
            StepTime::Offset(b) => fixed = fixed.max(resolve_cluster_bound(b, timers)),
            // The action before it may take up to its timeout.
            StepTime::AfterStep { delay, .. } => {
                waits += resolve_cluster_bound(delay, timers) + step.timeout;
            }
            // The wait for the condition and the action may each take up to the timeout.
            StepTime::When { delay, .. } => {
                waits += resolve_cluster_bound(delay, timers) + 2 * step.timeout;
            }
        }
    }
    let needed = exp
        .expectations
        .iter()
        .map(|e| expectation_horizon(&e.check, timers))
        .max()
        .unwrap_or_default();
    let needed = if exp.conformance {
        needed.max(silenced_reach(timers))
    } else {
        needed
    };
    let horizon = match &exp.observe.after_last_step {
        Some(b) => resolve_cluster_bound(b, timers).max(needed),
        None => needed,
    };
    fixed + waits + horizon + timers.node_monitor_grace_period
}

/// Where one step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Not issued yet.
    Waiting,
    /// Handed to the runner, its action under way.
    Running { issued_ms: i64 },
    /// Its action ended well.
    Finished { issued_ms: i64, finished_ms: i64 },
    /// Its action failed.
    Failed { issued_ms: i64 },
}

impl Slot {
    fn issued_ms(self) -> Option<i64> {
        match self {
            Slot::Waiting => None,
            Slot::Running { issued_ms }
            | Slot::Finished { issued_ms, .. }
            | Slot::Failed { issued_ms } => Some(issued_ms),
        }
    }
}

/// What a step not issued yet waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Its time: it is due at this offset.
    Until {
        /// Offset it is due at.
        due_ms: i64,
    },
    /// Another step: to be issued (a `when:` judged since it) or to finish (`after:`).
    Step {
        /// That step.
        step: String,
        /// `true`: waits for it to finish; `false`: for it to be issued.
        finish: bool,
    },
    /// A condition to be observed; the step gives up at `deadline_ms`.
    Condition {
        /// The condition, as a reader says it: "node victim is Unknown".
        what: String,
        /// Offset from which the condition is judged.
        since_ms: i64,
        /// Offset at which the step gives up.
        deadline_ms: i64,
    },
    /// Another step's action is running and steps run one at a time.
    Running,
}

impl std::fmt::Display for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wait::Until { due_ms } => f.write_str(&crate::timeline::due_at(*due_ms)),
            Wait::Step { step, finish: true } => write!(f, "waits for `{step}` to finish"),
            Wait::Step {
                step,
                finish: false,
            } => write!(f, "waits for `{step}` to be issued"),
            Wait::Condition {
                what, deadline_ms, ..
            } => write!(
                f,
                "waits for {what} (gives up at {})",
                crate::timeline::format_offset_ms(*deadline_ms)
            ),
            Wait::Running => f.write_str("waits for the running step"),
        }
    }
}

/// ` on NODE` for a node, nothing without one: how step messages name where they acted.
pub(crate) fn on_node(node: Option<&str>) -> String {
    node.map(|n| format!(" on {n}")).unwrap_or_default()
}

/// Why a run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// Every step ran and observation reached its planned end (or every expectation was
    /// decided before it, and the last batch of every roll was back or out of time).
    Observed {
        /// Observation ended early because nothing was left to decide.
        all_decided: bool,
    },
    /// An expectation failed and the run does not keep going.
    ExpectationFailed {
        /// Which expectation, and why.
        message: String,
    },
    /// A `when:` step's condition did not come true within the step's timeout.
    StepTimedOut {
        /// The step.
        step: String,
        /// What it waited for.
        what: String,
        /// How long it waited, from the moment its condition was judged since.
        waited_ms: i64,
    },
    /// A step's action failed.
    StepFailed {
        /// The step.
        step: String,
    },
    /// A signal arrived.
    Cancelled,
    /// The world can show nothing past this offset (a rehearsal's record ends there).
    OutOfObservations {
        /// The last offset observed.
        at_ms: i64,
    },
    /// An abort condition tripped: the cluster was hurt more than the experiment planned.
    Aborted(judge::Tripped),
    /// A fault step due never fit the run-time interlock (too many nodes down, or the
    /// control plane's majority) before its deadline.
    Interlocked(InterlockRefusal),
    /// A fault did not take effect on its node, or something other than faultline undid
    /// it: what the expectations would judge is not what the experiment meant.
    FaultNotInEffect {
        /// The step that injected it.
        step: String,
        /// Its node.
        node: Option<String>,
        /// What was checked and what it said.
        evidence: String,
        /// It took effect and was undone later (rather than never taking effect).
        reverted: bool,
    },
}

impl End {
    /// Whether the run ended before its plan did: verdicts still open then are not
    /// decided, and the outcome says why.
    pub(crate) fn is_early(&self) -> bool {
        !matches!(self, End::Observed { .. })
    }
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Observed { all_decided: true } => {
                f.write_str("observation ended: every expectation is decided")
            }
            End::Observed { all_decided: false } => {
                f.write_str("observation ended at its planned end")
            }
            End::ExpectationFailed { message } => {
                write!(f, "the run stopped early because {message}")
            }
            End::StepTimedOut {
                step,
                what,
                waited_ms,
            } => write!(
                f,
                "step `{step}` waited {} for {what}, which was not observed: the step timed out",
                format_secs(Duration::from_millis(
                    u64::try_from(*waited_ms).unwrap_or(0)
                ))
            ),
            End::StepFailed { step } => write!(f, "the run stopped after step `{step}` failed"),
            End::Cancelled => f.write_str("interrupted by a signal"),
            End::OutOfObservations { at_ms } => write!(
                f,
                "the record ends at {}: the rehearsal could not observe further",
                crate::timeline::format_offset_ms(*at_ms)
            ),
            End::Interlocked(refusal) => write!(f, "{refusal}"),
            End::Aborted(t) => write!(
                f,
                "aborted at {}: {} ({})",
                crate::timeline::format_offset_ms(t.at_ms),
                t.condition,
                t.value
            ),
            End::FaultNotInEffect {
                step,
                node,
                evidence,
                reverted,
            } => {
                let on = on_node(node.as_deref());
                if *reverted {
                    write!(
                        f,
                        "the fault of step `{step}`{on} was undone by something other than faultline: {evidence}"
                    )
                } else {
                    write!(
                        f,
                        "the fault of step `{step}`{on} did not take effect: {evidence}"
                    )
                }
            }
        }
    }
}

/// The scheduler's answer for one moment.
#[derive(Debug, Clone)]
pub(crate) struct Tick {
    /// Steps to issue now (indices into the experiment's steps), earliest due first.
    pub due: Vec<usize>,
    /// Every other step not issued yet, with what it waits for.
    pub waiting: Vec<(usize, Wait)>,
    /// The latest offset at which the scheduler must be asked again; new timeline entries
    /// may change its answer earlier.
    pub wake_at_ms: Option<i64>,
    /// The verdicts over the timeline so far (open ones Pending).
    pub verdicts: Vec<Verdict>,
    /// Set when the run is over.
    pub end: Option<End>,
}

/// What the scheduler needs from a run that does not change while it goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan<'a> {
    /// The experiment.
    pub exp: &'a Experiment,
    /// Target name → nodes.
    pub targets: &'a BTreeMap<String, Vec<String>>,
    /// The cluster's timers, for bounds.
    pub timers: &'a ClusterTimers,
    /// The cluster's capabilities, for expectations that need one.
    pub capabilities: &'a [String],
    /// Keep going after an expectation failed.
    pub keep_going: bool,
}

/// The scheduler of one run.
#[derive(Debug)]
pub(crate) struct Scheduler<'a> {
    plan: Plan<'a>,
    start_ms: i64,
    slots: Vec<Slot>,
    /// The condition of each `when:` step, as an expectation the judge decides.
    conditions: Vec<Option<Expectation>>,
    cancelled: bool,
    /// The last batch of every roll, which observation waits for ([`roll_end`]).
    last_batches: Vec<roll_end::LastBatch>,
    /// The nodes of those batches the runner saw back.
    back: BTreeSet<String>,
}

impl<'a> Scheduler<'a> {
    /// A scheduler whose experiment starts at `start_ms` on the timeline.
    pub(crate) fn new(plan: Plan<'a>, start_ms: i64) -> Self {
        let conditions = plan
            .exp
            .steps
            .iter()
            .map(|s| match &s.at {
                StepTime::When { subject, state, .. } => Some(Expectation {
                    name: format!("condition of step `{}`", s.name),
                    subject: subject.clone(),
                    check: Check::Becomes {
                        state: state.clone(),
                        window: Window::Eventually,
                    },
                    since: String::new(),
                    requires: Vec::new(),
                    weight: crate::experiment::model::DEFAULT_WEIGHT,
                }),
                _ => None,
            })
            .collect();
        Scheduler {
            slots: vec![Slot::Waiting; plan.exp.steps.len()],
            plan,
            start_ms,
            conditions,
            cancelled: false,
            last_batches: roll_end::last_batches(plan.exp),
            back: BTreeSet::new(),
        }
    }

    /// The runner issued step `index` at `at_ms`.
    pub(crate) fn started(&mut self, index: usize, at_ms: i64) {
        self.slots[index] = Slot::Running { issued_ms: at_ms };
    }

    /// Step `index`'s action ended at `at_ms`, well or not.
    /// The offset a step with a fixed time (`at:`) is due at; `None` for a step that
    /// waits on another step or a condition.
    pub(crate) fn fixed_due_ms(&self, index: usize) -> Option<i64> {
        match &self.plan.exp.steps.get(index)?.at {
            StepTime::Offset(b) => {
                Some(self.start_ms + ms(resolve_cluster_bound(b, self.plan.timers)))
            }
            StepTime::AfterStep { .. } | StepTime::When { .. } => None,
        }
    }

    pub(crate) fn finished(&mut self, index: usize, at_ms: i64, ok: bool) {
        let issued_ms = self.slots[index].issued_ms().unwrap_or(at_ms);
        self.slots[index] = if ok {
            Slot::Finished {
                issued_ms,
                finished_ms: at_ms,
            }
        } else {
            Slot::Failed { issued_ms }
        };
    }

    /// The runner saw these nodes of a roll's last batch back ([`Self::awaits_back`]).
    pub(crate) fn seen_back(&mut self, nodes: impl IntoIterator<Item = String>) {
        self.back.extend(nodes);
    }

    /// A signal arrived: the run ends at the next question.
    pub(crate) fn cancel(&mut self) {
        self.cancelled = true;
    }

    /// When step `index` was issued, if it was.
    pub(crate) fn issued_ms(&self, index: usize) -> Option<i64> {
        self.slots[index].issued_ms()
    }

    /// The steps never issued, in file order.
    pub(crate) fn never_issued(&self) -> Vec<&'a Step> {
        self.plan
            .exp
            .steps
            .iter()
            .zip(&self.slots)
            .filter(|(_, slot)| **slot == Slot::Waiting)
            .map(|(step, _)| step)
            .collect()
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.plan.exp.steps.iter().position(|s| s.name == name)
    }

    fn slot_of(&self, name: &str) -> Slot {
        self.index_of(name).map_or(Slot::Waiting, |i| self.slots[i])
    }

    /// What the run does at `now_ms`, given the timeline so far. Judges the timeline once.
    pub(crate) fn poll(&self, now_ms: i64, index: &TimelineIndex) -> Tick {
        let p = &self.plan;
        let verdicts = judge::judge_index(
            p.exp,
            p.targets,
            p.timers,
            p.capabilities,
            index,
            settled(now_ms),
        );
        let mut tick = Tick {
            due: Vec::new(),
            waiting: Vec::new(),
            wake_at_ms: None,
            verdicts,
            end: None,
        };
        if self.cancelled {
            tick.end = Some(End::Cancelled);
            return tick;
        }
        if let Some(i) = self
            .slots
            .iter()
            .position(|s| matches!(s, Slot::Failed { .. }))
        {
            tick.end = Some(End::StepFailed {
                step: p.exp.steps[i].name.clone(),
            });
            return tick;
        }
        if let Some(problem) = index.fault_problem() {
            tick.end = Some(End::FaultNotInEffect {
                step: problem.step.clone(),
                node: problem.node.clone(),
                evidence: problem.evidence.clone(),
                reverted: problem.reverted,
            });
            return tick;
        }
        let aborts = judge::check_aborts(
            &p.exp.abort,
            p.targets,
            p.timers,
            index,
            self.start_ms,
            now_ms,
        );
        if let Some(tripped) = aborts.tripped {
            tick.end = Some(End::Aborted(tripped));
            return tick;
        }
        if !p.keep_going
            && let Some(v) = tick.verdicts.iter().find(|v| v.outcome == Outcome::Failed)
        {
            tick.end = Some(End::ExpectationFailed {
                message: format!("`{}` failed: {}", v.name, v.message),
            });
            return tick;
        }
        tick.wake_at_ms = earliest(
            self.next_bound_ms(now_ms, &tick.verdicts),
            aborts.wake_at_ms,
        );
        let running = self.slots.iter().any(|s| matches!(s, Slot::Running { .. }));
        let mut due: Vec<(i64, usize)> = Vec::new();
        for (i, step) in p.exp.steps.iter().enumerate() {
            if self.slots[i] != Slot::Waiting {
                continue;
            }
            match self.wait_of(i, step, now_ms, index) {
                Wait::Until { due_ms } if due_ms <= now_ms && !running => due.push((due_ms, i)),
                Wait::Until { due_ms } if due_ms <= now_ms => tick.waiting.push((i, Wait::Running)),
                Wait::Condition {
                    what,
                    since_ms,
                    deadline_ms,
                } if deadline_ms <= now_ms => {
                    tick.end = Some(End::StepTimedOut {
                        step: step.name.clone(),
                        what,
                        waited_ms: now_ms - since_ms,
                    });
                    return tick;
                }
                wait => {
                    let wake = match &wait {
                        Wait::Until { due_ms } => Some(*due_ms),
                        Wait::Condition { deadline_ms, .. } => Some(*deadline_ms),
                        Wait::Step { .. } | Wait::Running => None,
                    };
                    tick.wake_at_ms = earliest(tick.wake_at_ms, wake);
                    tick.waiting.push((i, wait));
                }
            }
        }
        due.sort();
        tick.due = due.into_iter().map(|(_, i)| i).collect();
        let all_ran = self
            .slots
            .iter()
            .all(|s| matches!(s, Slot::Finished { .. }));
        if all_ran {
            let all_decided = self.all_decided(&tick.verdicts);
            let end_ms = self.observation_end_ms();
            // Decided, it still waits for the last nodes of its rolls, up to their timeout.
            match self.rolls_awaited(now_ms, all_decided) {
                _ if now_ms >= end_ms => tick.end = Some(End::Observed { all_decided }),
                None if all_decided => tick.end = Some(End::Observed { all_decided }),
                None => tick.wake_at_ms = earliest(tick.wake_at_ms, Some(end_ms)),
                Some((_, until)) => {
                    let until = until.map_or(end_ms, |u| u.min(end_ms));
                    tick.wake_at_ms = earliest(tick.wake_at_ms, Some(until));
                }
            }
        }
        tick
    }

    /// The nodes of a roll's last batch observation waits to see back at `now_ms`, once
    /// every step ran and every expectation is decided (`tick`, this moment's answer, did
    /// not end the run): the runner asks the interlock and tells [`Self::seen_back`] those
    /// that are ([`roll_end`]). Empty otherwise.
    pub(crate) fn awaits_back(&self, now_ms: i64, tick: &Tick) -> Vec<String> {
        let all_ran = self
            .slots
            .iter()
            .all(|s| matches!(s, Slot::Finished { .. }));
        let all_decided = self.all_decided(&tick.verdicts);
        if tick.end.is_some() || !all_ran {
            return Vec::new();
        }
        self.rolls_awaited(now_ms, all_decided)
            .map(|(nodes, _)| nodes)
            .unwrap_or_default()
    }

    /// Whether nothing is left to decide: every verdict out of pending, and no
    /// `expect: conformance`, which is judged on the whole observation once it ends.
    fn all_decided(&self, verdicts: &[Verdict]) -> bool {
        !self.plan.exp.conformance && verdicts.iter().all(|v| v.outcome != Outcome::Pending)
    }

    /// [`roll_end::awaited`] for this run, when every expectation is decided.
    fn rolls_awaited(&self, now_ms: i64, all_decided: bool) -> Option<(Vec<String>, Option<i64>)> {
        if !all_decided {
            return None;
        }
        roll_end::awaited(
            &self.last_batches,
            |i| self.slots[i].issued_ms(),
            &self.back,
            now_ms,
        )
    }

    /// The next moment after `now_ms` at which an undecided expectation's bound passes
    /// (once [`SETTLE_MS`] settled it), so a run notices a bound passing with nothing
    /// observed without polling. Bounds that differ per pod (`toleration`) or count from an
    /// observed moment (a probe's outage budget) are rechecked every [`RECHECK_MS`] instead.
    fn next_bound_ms(&self, now_ms: i64, verdicts: &[Verdict]) -> Option<i64> {
        let p = &self.plan;
        let mut next = None;
        for (e, v) in p.exp.expectations.iter().zip(verdicts) {
            if v.outcome != Outcome::Pending {
                continue;
            }
            let Some(t0) = self.slot_of(&e.since).issued_ms() else {
                continue;
            };
            let bounds: Vec<&Bound> = match &e.check {
                Check::Becomes { window, .. } => match window {
                    Window::Eventually => Vec::new(),
                    Window::Within(b) | Window::After(b) => vec![b],
                    Window::Between(a, b) => vec![a, b],
                },
                Check::Stays {
                    until: Until::For(b),
                    ..
                }
                | Check::Never {
                    until: Until::For(b),
                    ..
                } => vec![b],
                Check::DownFor { .. } => {
                    next = earliest(next, Some(now_ms + RECHECK_MS));
                    Vec::new()
                }
                _ => Vec::new(),
            };
            for b in bounds {
                let at = if b.uses_toleration() {
                    now_ms + RECHECK_MS
                } else {
                    t0 + ms(resolve_cluster_bound(b, p.timers)) + SETTLE_MS + 1
                };
                if at > now_ms {
                    next = earliest(next, Some(at));
                }
            }
        }
        next
    }

    /// What step `index` waits for at `now_ms`; `Until` with a due time not later than
    /// `now_ms` means it is due.
    fn wait_of(&self, at: usize, step: &Step, now_ms: i64, index: &TimelineIndex) -> Wait {
        let p = &self.plan;
        let bound = |b: &Bound| ms(resolve_cluster_bound(b, p.timers));
        match &step.at {
            StepTime::Offset(b) => Wait::Until {
                due_ms: self.start_ms + bound(b),
            },
            StepTime::AfterStep { step: prev, delay } => match self.slot_of(prev) {
                Slot::Finished { finished_ms, .. } => Wait::Until {
                    due_ms: finished_ms + bound(delay),
                },
                _ => Wait::Step {
                    step: prev.clone(),
                    finish: true,
                },
            },
            StepTime::When {
                subject,
                state,
                delay,
                since,
            } => {
                let since_ms = match since {
                    None => self.start_ms,
                    Some(s) => match self.slot_of(s).issued_ms() {
                        Some(at) => at,
                        None => {
                            return Wait::Step {
                                step: s.clone(),
                                finish: false,
                            };
                        }
                    },
                };
                let Some(condition) = &self.conditions[at] else {
                    return Wait::Until { due_ms: now_ms };
                };
                let v = judge::judge_from(
                    condition,
                    since_ms,
                    p.targets,
                    p.timers,
                    index,
                    settled(now_ms),
                );
                if v.outcome == Outcome::Passed {
                    let reached = since_ms + v.measured_ms.unwrap_or(now_ms - since_ms).max(0);
                    return Wait::Until {
                        due_ms: reached + bound(delay),
                    };
                }
                Wait::Condition {
                    what: describe_condition(subject, &judge::state_name(state)),
                    since_ms,
                    deadline_ms: since_ms + ms(step.timeout),
                }
            }
        }
    }

    /// Where observation is expected to end, for a live view: [`Self::observation_end_ms`]
    /// once every step was issued; before that, no earlier than the start plus the planned
    /// length (every wait at its longest).
    pub(crate) fn expected_end_ms(&self) -> i64 {
        let end = self.observation_end_ms();
        if self.slots.iter().all(|s| s.issued_ms().is_some()) {
            return end;
        }
        let planned = ms(planned_length(self.plan.exp, self.plan.timers));
        end.max(self.start_ms.saturating_add(planned))
    }

    /// The expectations still open among `verdicts` (the experiment's, in its order), each
    /// with the offset its largest bound passes once its `since` step was issued.
    pub(crate) fn open_expectations(
        &self,
        verdicts: &[Verdict],
    ) -> Vec<crate::events::OpenExpectation> {
        let p = &self.plan;
        p.exp
            .expectations
            .iter()
            .zip(verdicts)
            .filter(|(_, v)| v.outcome == Outcome::Pending)
            .map(|(e, _)| {
                let horizon = expectation_horizon(&e.check, p.timers);
                let deadline_ms = self
                    .slot_of(&e.since)
                    .issued_ms()
                    .filter(|_| !horizon.is_zero())
                    .map(|t0| t0.saturating_add(ms(horizon)));
                crate::events::OpenExpectation {
                    name: e.name.clone(),
                    deadline_ms,
                }
            })
            .collect()
    }

    /// Offset at which observation ends once every step has run: the last step's issue
    /// plus `observe.for` (or what the expectations' bounds need).
    pub(crate) fn observation_end_ms(&self) -> i64 {
        let p = &self.plan;
        let last = self
            .slots
            .iter()
            .filter_map(|s| s.issued_ms())
            .max()
            .unwrap_or(self.start_ms);
        let after_start =
            |ms_at: i64| Duration::from_millis(u64::try_from(ms_at - self.start_ms).unwrap_or(0));
        let issued = |name: &str| self.slot_of(name).issued_ms().map(after_start);
        let horizon = observe_after_last_step(p.exp, p.timers, &issued, after_start(last));
        last + ms(horizon)
    }
}

/// The verdicts a run ends with: the index of the timeline as observed until `until_ms`
/// (nothing stamped after it filed), judged. A run
/// cut short is judged as the prefix it is: what was still open stays Pending after a
/// signal (reported as interrupted) or, after another early stop, becomes an error that
/// names why.
pub(crate) fn final_verdicts(
    plan: Plan<'_>,
    index: &TimelineIndex,
    until_ms: i64,
    stopped_early: Option<&str>,
    cancelled: bool,
) -> Vec<Verdict> {
    let complete = !cancelled && stopped_early.is_none();
    let mut verdicts = judge::judge_index(
        plan.exp,
        plan.targets,
        plan.timers,
        plan.capabilities,
        index,
        judge::Observed { until_ms, complete },
    );
    if let Some(reason) = stopped_early.filter(|_| !cancelled) {
        for v in verdicts
            .iter_mut()
            .filter(|v| v.outcome == Outcome::Pending)
        {
            v.outcome = Outcome::Error;
            v.message = format!("not decided: {reason}");
        }
    }
    verdicts
}

/// The timeline as known at `now_ms`: complete up to [`SETTLE_MS`] ago, still live.
fn settled(now_ms: i64) -> judge::Observed {
    judge::Observed {
        until_ms: now_ms - SETTLE_MS,
        complete: false,
    }
}

fn earliest(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A `when:` condition as a reader says it: "node victim is Unknown".
pub(crate) fn describe_condition(subject: &Subject, state: &str) -> String {
    let who = match subject {
        Subject::Node { target } => format!("node {target}"),
        Subject::Pods(p) => {
            let mut s = format!("pods of {}", p.workload);
            if let Some(on) = &p.on {
                s.push_str(&format!(" on {on}"));
            }
            if let Some(not_on) = &p.not_on {
                s.push_str(&format!(" not on {not_on}"));
            }
            s
        }
        Subject::Workload(w) => format!("workload {w}"),
        Subject::Probe { name } => format!("probe {name}"),
    };
    format!("{who} is {state}")
}

/// When a step is issued, as the experiment says it, in words: `plan` prints it.
pub(crate) fn describe_step_time(step: &Step, timers: &ClusterTimers) -> String {
    let r = |b: &Bound| {
        let d = resolve_cluster_bound(b, timers);
        let text = b.to_string();
        let resolved = format_secs(d);
        if text == resolved {
            text
        } else {
            format!("{text} = {resolved}")
        }
    };
    match &step.at {
        StepTime::Offset(b) => format!("at {}", r(b)),
        StepTime::AfterStep { step, delay } => format!("{} after `{step}` finished", r(delay)),
        StepTime::When {
            subject,
            state,
            delay,
            since,
        } => {
            let since = match since {
                Some(s) => format!("`{s}` was issued"),
                None => "the start".to_string(),
            };
            format!(
                "{} after {}, judged from when {since}; gives up after {}",
                r(delay),
                describe_condition(subject, &judge::state_name(state)),
                format_secs(step.timeout)
            )
        }
    }
}

/// One step of a projected schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Projected {
    /// The step's index in the experiment.
    pub index: usize,
    /// Offset from the start it would be issued at, when the schedule alone decides it
    /// (actions taking no time); `None` when it waits for something observed.
    pub at_ms: Option<i64>,
}

/// The schedule as far as the experiment alone decides it, from the same scheduler a run
/// uses, with a virtual clock on an empty timeline and actions that take no time: `at:`
/// and `after:` steps get their offsets; `when:` steps (and what follows them) wait for
/// what a run observes. Also returns the planned end of observation when every step has
/// an offset.
pub(crate) fn project(plan: Plan<'_>) -> (Vec<Projected>, Option<i64>) {
    let empty = TimelineIndex::new();
    let mut s = Scheduler::new(plan, 0);
    let mut now = 0;
    let mut at: BTreeMap<usize, i64> = BTreeMap::new();
    loop {
        let tick = s.poll(now, &empty);
        for &i in &tick.due {
            s.started(i, now);
            s.finished(i, now, true);
            at.insert(i, now);
        }
        if !tick.due.is_empty() {
            continue;
        }
        let next_due = tick
            .waiting
            .iter()
            .filter_map(|(_, w)| match w {
                Wait::Until { due_ms } => Some(*due_ms),
                _ => None,
            })
            .min();
        match next_due {
            Some(t) => now = t.max(now),
            None => break,
        }
    }
    let steps = (0..plan.exp.steps.len())
        .map(|index| Projected {
            index,
            at_ms: at.get(&index).copied(),
        })
        .collect::<Vec<_>>();
    let end = (at.len() == plan.exp.steps.len()).then(|| s.observation_end_ms());
    (steps, end)
}

mod roll_end;

#[cfg(test)]
mod tests;
