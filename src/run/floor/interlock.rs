//! The blast-radius interlock at run time (issue 46): `safety.maxNodesDown` and the
//! control-plane quorum rule, checked again when a fault step is due, from the nodes the
//! run sees down then rather than from the plan's worst case.
//!
//! A node counts as down when the observer last saw it with Ready not True (whatever made
//! it so: a node already broken before the run counts against the limit too), or when a
//! fault that takes it down was issued on it and has not been seen to end: a fault held
//! until its undo is issued (`kubelet-stop` until `kubelet-start`), a reboot or a power-on
//! until the node is seen back after it (not when its command returned: the machine is
//! still booting then, and may not even look NotReady yet): seen turning Ready, or, since
//! a reboot shorter than the grace period is never seen NotReady and its new kubelet keeps
//! the Ready condition's transition time, Ready with its kubelet's heartbeat renewed
//! [`RENEWALS_FOR_BACK`] times since the command finished (measured on kind: a 6 s reboot
//! was never seen NotReady). A due fault step
//! whose nodes would break a rule waits, with a deadline, and is issued as soon as it
//! fits; at its deadline the run stops the way an abort does (the safety net undoes what
//! it did), saying which nodes are down and why. A held step gated on a node being Ready
//! again (`when: {node: N, is: Ready}`, a rolling step's next node) goes its `delay` after
//! it fits, not at once: its gate may have been met by the node's Ready from before its
//! fault, and the node it waited on has only just come back. For the same reason a step
//! gated on nodes being Ready again, whatever its action (a roll's next batch, an
//! `uncordon` after a reboot in a roll's sequence), waits until none of them is seen down
//! or on its way back from a reboot or power-on this run issued.
//!
//! The static check (`crate::run::preflight::safety`) still refuses what the plan alone
//! shows to overlap (steps at fixed offsets); this one is what makes a step gated on a
//! node being Ready again safe to accept.
//!
//! Not counted yet: the self-restores armed on the nodes fire at the planned length plus
//! the margin (`schedule::planned_length`), which does not include these waits. A run held
//! back past it meets its own self-restore, which undoes the fault and ends the run as
//! "undone by something other than faultline": safe, but early. Counting every possible
//! wait would leave a crashed run's faults in place that much longer.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::cluster::ResolvedTargets;
use crate::experiment::fault::{self as faults, Proof};
use crate::experiment::model::{
    ClusterTimers, Experiment, NodeStateMatch, StateMatch, StepTime, Subject,
};
use crate::run::shared_timeline::SharedTimeline;
use crate::timeline::{DownNode, Event, format_offset_ms, format_secs};

/// Why the run stopped before a fault step: it never fit the interlock before its
/// deadline. The message starts with the step, which names its JUnit case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "step `{step}` waited {} for nodes to come back and was not run: with its nodes, {rule}; \
     down: {}",
    format_secs(Duration::from_millis(.waited_ms.unsigned_abs())),
    down_list(.down)
)]
pub(crate) struct InterlockRefusal {
    /// The step that waited.
    pub step: String,
    /// The nodes counted down at its deadline (its own included), each with why.
    pub down: Vec<DownNode>,
    /// The rule it would break, in words.
    pub rule: String,
    /// How long it waited.
    pub waited_ms: i64,
}

/// "worker-1 (seen NotReady, Ready=False), worker-2 (this step's)".
pub(crate) fn down_list(down: &[DownNode]) -> String {
    down.iter()
        .map(|d| format!("{} ({})", d.node, d.why))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How long a due fault step not placed by a condition waits for the interlock before the
/// run stops: as long as faultline waits for a rebooted node to answer again (10 min),
/// the longest any node it took down takes to come back by itself. A `when:` step waits
/// its own `timeout` (its gate's), counted from the moment it was due.
pub(crate) fn wait_limit(exp: &Experiment, index: usize) -> Duration {
    let step = &exp.steps[index];
    match step.at {
        StepTime::When { .. } => step.timeout,
        StepTime::Offset(_) | StepTime::AfterStep { .. } => {
            super::proofs::within(Proof::BootIdChanged)
        }
    }
}

/// What the loop does with a due step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Admit {
    /// Issue it.
    Go,
    /// Not yet: ask again when the timeline grows, at the latest at this offset.
    Wait {
        /// The step's deadline.
        until_ms: i64,
    },
    /// It never fit: the run stops.
    Stop(InterlockRefusal),
}

/// Heartbeat renewals, counted from the first reading after a reboot or power-on finished,
/// that make a Ready node back: two, so that a last renewal by the old kubelet while the
/// machine shuts down (an in-band reboot's command returns before it) cannot count alone.
pub(crate) const RENEWALS_FOR_BACK: u32 = 2;

/// While a due step waits on the interlock, how often it is asked again: renewals of a
/// returning node's heartbeat are not on the timeline, so its growth alone would not wake it.
pub(crate) const HELD_POLL_MS: i64 = 2_000;

/// A node a fault issued by this run took down and that was not seen back yet.
#[derive(Debug, Clone)]
struct Outstanding {
    /// The fault's step.
    fault: usize,
    /// Why it counts, in words.
    why: String,
    /// Set once it is on its way back by itself (a reboot, a power-on) whose command
    /// finished at this offset: from then on, the node is back once seen turning Ready,
    /// or seen Ready with its heartbeat renewed since.
    returning_since: Option<i64>,
    /// A fault held until its undo that this one came on top of (a drain, then a reboot:
    /// a roll's sequence): the node still counts down for it once back from this one.
    under: Option<Box<Outstanding>>,
}

/// Forgets the held fault under `o` that `action` undoes (an `uncordon` issued while the
/// node is still on its way back from the reboot that followed its drain).
fn drop_undone(
    mut o: &mut Outstanding,
    action: &crate::experiment::model::Action,
    exp: &Experiment,
) {
    loop {
        let undone = o
            .under
            .as_ref()
            .is_some_and(|u| faults::undoes(action, &exp.steps[u.fault].action));
        if undone {
            if let Some(u) = o.under.take() {
                o.under = u.under;
            }
            return;
        }
        match o.under.as_deref_mut() {
            Some(u) => o = u,
            None => return,
        }
    }
}

/// `node`'s outstanding fault once it is back from its reboot or power-on: the held fault
/// under it, if any, else none.
fn back_from(outstanding: &mut BTreeMap<String, Outstanding>, node: &str) {
    if let Some(o) = outstanding.remove(node)
        && let Some(under) = o.under
    {
        outstanding.insert(node.to_string(), *under);
    }
}

/// A step kept waiting.
#[derive(Debug, Clone)]
struct Waiting {
    since_ms: i64,
    deadline_ms: i64,
    /// Set once it fits, when it is gated on a node being Ready again: it is issued its
    /// `delay` after that, not at once (the node it waited on has only just come back).
    settle_until: Option<i64>,
    /// What was last put on the timeline about it.
    announced: Option<(Vec<DownNode>, String)>,
}

/// The interlock of one run: what this run took down, and the steps it keeps waiting.
pub(super) struct Interlock<'a> {
    exp: &'a Experiment,
    targets: &'a ResolvedTargets,
    control_plane: &'a BTreeSet<String>,
    timers: &'a ClusterTimers,
    outstanding: BTreeMap<String, Outstanding>,
    waiting: BTreeMap<usize, Waiting>,
}

impl<'a> Interlock<'a> {
    /// `control_plane`: every control-plane node of the cluster (empty: quorum unchecked);
    /// `timers`: the cluster's, for a gated step's `delay`.
    pub(super) fn new(
        exp: &'a Experiment,
        targets: &'a ResolvedTargets,
        control_plane: &'a BTreeSet<String>,
        timers: &'a ClusterTimers,
    ) -> Self {
        Interlock {
            exp,
            targets,
            control_plane,
            timers,
            outstanding: BTreeMap::new(),
            waiting: BTreeMap::new(),
        }
    }

    /// Whether step `index` is checked: its action takes its nodes down (or is counted so),
    /// or it is gated on nodes being Ready again ([`Self::gate_nodes`]).
    pub(super) fn applies(&self, index: usize) -> bool {
        faults::counts_as_down(&self.exp.steps[index].action) || !self.gate_nodes(index).is_empty()
    }

    /// The nodes step `index` waits for to be Ready again (`when: {node: T, is: Ready}`: a
    /// roll's next batch, the action after a reboot in a roll's sequence): its gate may
    /// have been met by their Ready from before a reboot this run issued, so the step also
    /// waits until none of them is seen down or on its way back.
    fn gate_nodes(&self, index: usize) -> &'a [String] {
        match &self.exp.steps[index].at {
            StepTime::When {
                subject: Subject::Node { target },
                state: StateMatch::Node(NodeStateMatch::Ready),
                ..
            } => self.targets.get(target).map_or(&[], Vec::as_slice),
            _ => &[],
        }
    }

    /// The nodes on their way back by themselves, each with the offset its reboot or
    /// power-on finished: the world is asked how often their heartbeat renewed since.
    pub(super) fn returning(&self) -> Vec<(String, i64)> {
        self.outstanding
            .iter()
            .filter_map(|(node, o)| Some((node.clone(), o.returning_since?)))
            .collect()
    }

    /// Step `index` is due at `now_ms`, with `seen` the nodes the world sees down and
    /// `renewed` the returning nodes whose heartbeat renewed [`RENEWALS_FOR_BACK`] times:
    /// whether it may go. A step that waits is put on the timeline ([`Event::Interlock`])
    /// when it starts waiting and when what it waits on changes.
    pub(super) fn admit(
        &mut self,
        index: usize,
        now_ms: i64,
        (seen, renewed): (Vec<DownNode>, &BTreeSet<String>),
        timeline: &SharedTimeline,
    ) -> Admit {
        if !self.applies(index) {
            return Admit::Go;
        }
        self.forget_back(&seen, renewed, timeline);
        let step = &self.exp.steps[index];
        let mut down: BTreeMap<String, String> = BTreeMap::new();
        let seen_down: BTreeSet<String> = seen.iter().map(|d| d.node.clone()).collect();
        for d in seen {
            down.entry(d.node).or_insert(d.why);
        }
        for (node, o) in &self.outstanding {
            down.entry(node.clone()).or_insert_with(|| o.why.clone());
        }
        let not_back: Vec<&str> = self
            .gate_nodes(index)
            .iter()
            .filter(|n| {
                seen_down.contains(*n)
                    || self
                        .outstanding
                        .get(*n)
                        .is_some_and(|o| o.returning_since.is_some())
            })
            .map(String::as_str)
            .collect();
        let fault = faults::counts_as_down(&step.action);
        if fault {
            for node in step.nodes(self.targets) {
                down.entry(node.clone())
                    .or_insert_with(|| DownNode::OWN.to_string());
            }
        }
        let rule = if !not_back.is_empty() {
            Some(format!(
                "the nodes its `when:` waits for are not back yet ({})",
                not_back.join(", ")
            ))
        } else if fault {
            self.broken_rule(&down)
        } else {
            None
        };
        let Some(rule) = rule else {
            let settle = self.settle(index);
            let Some(w) = self.waiting.get_mut(&index) else {
                return Admit::Go;
            };
            // Held, it goes its `delay` after the node it waited on is back, not at once.
            if w.settle_until.is_none() {
                timeline.note(format!(
                    "step `{}` fits the interlock after waiting {}: the nodes it waited on are back{}",
                    step.name,
                    format_secs(Duration::from_millis((now_ms - w.since_ms).unsigned_abs())),
                    if settle.is_zero() {
                        String::new()
                    } else {
                        format!("; issued {} later (its `delay`)", format_secs(settle))
                    }
                ));
                let until =
                    now_ms.saturating_add(i64::try_from(settle.as_millis()).unwrap_or(i64::MAX));
                w.settle_until = Some(until);
                // What it waits for now: no longer the nodes, its delay (the live view).
                if !settle.is_zero() {
                    timeline.record(Event::Schedule {
                        step: step.name.clone(),
                        wait: crate::timeline::due_at(until),
                        due_ms: Some(until),
                    });
                }
            }
            return match w.settle_until {
                Some(until) if now_ms < until => Admit::Wait { until_ms: until },
                _ => {
                    self.waiting.remove(&index);
                    Admit::Go
                }
            };
        };
        let down: Vec<DownNode> = down
            .into_iter()
            .map(|(node, why)| DownNode { node, why })
            .collect();
        let limit = i64::try_from(wait_limit(self.exp, index).as_millis()).unwrap_or(i64::MAX);
        let w = self.waiting.entry(index).or_insert_with(|| Waiting {
            since_ms: now_ms,
            deadline_ms: now_ms.saturating_add(limit),
            settle_until: None,
            announced: None,
        });
        // Something went down again while it settled: it waits for that too.
        w.settle_until = None;
        if now_ms >= w.deadline_ms {
            return Admit::Stop(InterlockRefusal {
                step: step.name.clone(),
                down,
                rule,
                waited_ms: now_ms - w.since_ms,
            });
        }
        let said = (down, rule);
        if w.announced.as_ref() != Some(&said) {
            timeline.record(Event::Interlock {
                step: step.name.clone(),
                down: said.0.clone(),
                rule: said.1.clone(),
                deadline_ms: w.deadline_ms,
            });
            w.announced = Some(said);
        }
        Admit::Wait {
            until_ms: w.deadline_ms,
        }
    }

    /// How long step `index`, once the interlock let it go, still waits: its `delay` when it
    /// is gated on a node being Ready again (`when: {node: N, is: Ready}`: a roll's next
    /// node), so that it comes that long after the node is back; zero otherwise.
    fn settle(&self, index: usize) -> Duration {
        match &self.exp.steps[index].at {
            StepTime::When {
                subject: Subject::Node { .. },
                state: StateMatch::Node(NodeStateMatch::Ready),
                delay,
                ..
            } => self.timers.resolve(delay),
            _ => Duration::ZERO,
        }
    }

    /// The rule `down` breaks, in words; `None`: it fits.
    fn broken_rule(&self, down: &BTreeMap<String, String>) -> Option<String> {
        let safety = &self.exp.safety;
        let limit = safety.max_nodes_down.unwrap_or(1);
        if down.len() > limit as usize {
            return Some(format!(
                "{} nodes would be down at once; the experiment allows {limit} \
                 (`safety.maxNodesDown`)",
                down.len()
            ));
        }
        let cp = down
            .keys()
            .filter(|n| self.control_plane.contains(*n))
            .count();
        (!safety.allow_quorum_loss && cp > 0 && cp * 2 >= self.control_plane.len()).then(|| {
            format!(
                "{cp} of {} control-plane nodes would be down at once, losing etcd quorum \
                 (`safety.allowQuorumLoss`)",
                self.control_plane.len()
            )
        })
    }

    /// Step `index` was issued at `issued_ms` and its action returned at `finished_ms`: a
    /// fault on its nodes counts them down, a step that brings a node back from one ends
    /// it (a reboot or power-on once the node is seen back after `finished_ms`).
    pub(super) fn issued(&mut self, index: usize, issued_ms: i64, finished_ms: i64) {
        let step = &self.exp.steps[index];
        let info = faults::info(&step.action);
        let at = format_offset_ms(issued_ms);
        for node in step.nodes(self.targets) {
            if faults::counts_as_down(&step.action) {
                let (why, returning_since) = if info.restarts_machine {
                    (
                        format!(
                            "{} `{}` issued at {at}, not seen back since",
                            info.name, step.name
                        ),
                        Some(finished_ms.max(issued_ms)),
                    )
                } else {
                    (
                        format!("{} `{}` issued at {at}, not undone", info.name, step.name),
                        None,
                    )
                };
                let under = self
                    .outstanding
                    .remove(node)
                    .filter(|o| o.returning_since.is_none())
                    .map(Box::new);
                self.outstanding.insert(
                    node.clone(),
                    Outstanding {
                        fault: index,
                        why,
                        returning_since,
                        under,
                    },
                );
            } else if info.brings_node_back
                && let Some(o) = self.outstanding.get_mut(node)
            {
                // It may undo a held fault under this one (an `uncordon` after a drain and
                // a reboot).
                drop_undone(o, &step.action, self.exp);
                let fault = &self.exp.steps[o.fault].action;
                if faults::inverse(fault).is_some() && !faults::undoes(&step.action, fault) {
                    continue;
                }
                if info.restarts_machine {
                    o.why = format!(
                        "{} `{}` issued at {at}, not seen back since",
                        info.name, step.name
                    );
                    o.returning_since = Some(finished_ms.max(issued_ms));
                } else {
                    // The observer's view of the node takes over (but for a fault held
                    // under this one).
                    back_from(&mut self.outstanding, node);
                }
            }
        }
    }

    /// Of `nodes`, those not back yet as a step gated on them being Ready again sees them
    /// ([`Self::admit`], same `seen` and `renewed`): seen down, or on their way back from a
    /// reboot or power-on this run issued. Observation waits this way for a roll's last
    /// batch before it ends (`super::schedule::Scheduler::awaits_back`).
    pub(super) fn not_back(
        &mut self,
        nodes: &[String],
        (seen, renewed): (Vec<DownNode>, &BTreeSet<String>),
        timeline: &SharedTimeline,
    ) -> Vec<String> {
        self.forget_back(&seen, renewed, timeline);
        nodes
            .iter()
            .filter(|n| {
                seen.iter().any(|d| d.node == **n)
                    || self
                        .outstanding
                        .get(*n)
                        .is_some_and(|o| o.returning_since.is_some())
            })
            .cloned()
            .collect()
    }

    /// Forgets the nodes back from their reboot or power-on: a returning node seen Ready
    /// (not in `seen`) whose new kubelet renewed its heartbeat (`renewed`), or seen turning
    /// Ready since.
    fn forget_back(
        &mut self,
        seen: &[DownNode],
        renewed: &BTreeSet<String>,
        timeline: &SharedTimeline,
    ) {
        let back: Vec<String> = self
            .outstanding
            .iter()
            .filter(|(node, o)| {
                o.returning_since.is_some()
                    && renewed.contains(*node)
                    && !seen.iter().any(|d| d.node == **node)
            })
            .map(|(node, _)| node.clone())
            .collect();
        for node in back {
            back_from(&mut self.outstanding, &node);
        }
        self.refresh(timeline);
    }

    /// Forgets the nodes on their way back that were seen turning Ready since.
    fn refresh(&mut self, timeline: &SharedTimeline) {
        let outstanding = &mut self.outstanding;
        timeline.judge_view(|index| {
            let back: Vec<String> = outstanding
                .iter()
                .filter(|(node, o)| {
                    o.returning_since
                        .is_some_and(|since| index.node_ready_anew_since(node, since))
                })
                .map(|(node, _)| node.clone())
                .collect();
            for node in back {
                back_from(outstanding, &node);
            }
        });
    }
}
