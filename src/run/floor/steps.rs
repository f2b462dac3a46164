//! Carrying out one step of the plan on all of its nodes at once.
//!
//! A step on twenty nodes must hit them together and on time: its nodes are armed (fault
//! journaled, self-restore set) all at once and, for a step due at a known offset, ahead
//! of that offset; then the action starts on every node together. What each node did then
//! settles the ledger. Every effect goes through the run's [`World`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::future::join_all;

use super::ledger::Ledger;
use super::schedule::{Scheduler, Tick, Wait};
use crate::cluster::ResolvedTargets;
use crate::execute::{ExecError, Executor};
use crate::experiment::fault as faults;
use crate::experiment::model::Experiment;
use crate::run::shared_timeline::SharedTimeline;
use crate::run::world::{ARM_AHEAD_MS, ActError, ActResult, FaultAt, World};
use crate::timeline::{Event, StepPhase};

/// The least time before a step is due for its commands to be sent ahead
/// ([`World::prime`]).
const PRIME_AT_LEAST_MS: i64 = 500;

/// The least time a fault's self-restore must still have before it when the fault is
/// issued. It is the margin a node's timer is armed with past its undo step
/// ([`super::host_timed::MARGIN`]), so a fault issued before its undo is due always has
/// it; one issued later (its arming took that long) is withdrawn, not injected.
const BACKSTOP_LEAD: Duration = super::host_timed::MARGIN;

/// How long past the executor's own longest wait ([`Executor::longest_wait`]) the loop
/// waits for an action to come back before it stops waiting. A world ends its command at
/// the timeout (the executor ends it on the node); this is the last guard against one that
/// does not, whose fault then stays journaled and armed however its undo goes
/// ([`super::ledger::ActiveFault::may_still_run`]), as does one whose end the executor
/// could not confirm.
pub(super) const ACT_GRACE: Duration = Duration::from_secs(5);

/// Whether an action's result says its command may still be running on the node.
fn may_still_run(result: &Result<ActResult, ActError>) -> bool {
    matches!(
        result,
        Err(ActError::Exec(ExecError::TimedOutUnconfirmed { .. }))
    )
}

/// Steps armed ahead of their due offset: step index → the journal ids of its faults, or
/// `Err` when arming failed (the step then fails when it comes due).
pub(super) type ArmedAhead = BTreeMap<usize, Result<Vec<String>, ()>>;

/// Step index → how long before its due offset a step whose nodes need more than
/// [`ARM_AHEAD_MS`] to be armed and sent ahead is armed ([`World::arm_ahead`]).
pub(super) type Leads = BTreeMap<usize, i64>;

/// Timed steps not armed yet and when each should be: `(index, offset to arm at)`.
///
/// A step is armed [`ARM_AHEAD_MS`] before it is due, or its own longer lead before, but
/// never the longer lead across another timed step due earlier: arming happens in the
/// loop, and must not make that step late. The longer lead then shrinks to what is free,
/// never below [`ARM_AHEAD_MS`].
fn arm_times<'t>(
    tick: &'t Tick,
    armed: &'t ArmedAhead,
    leads: &'t Leads,
) -> impl Iterator<Item = (usize, i64)> + 't {
    let timed = || {
        tick.waiting.iter().filter_map(|(index, wait)| match wait {
            Wait::Until { due_ms } => Some((*index, *due_ms)),
            _ => None,
        })
    };
    timed()
        .filter(|(index, _)| !armed.contains_key(index))
        .map(move |(index, due_ms)| {
            let usual = due_ms - ARM_AHEAD_MS;
            let lead = leads.get(&index).copied().unwrap_or(ARM_AHEAD_MS);
            let earlier_due = timed()
                .map(|(_, due)| due)
                .filter(|due| *due < due_ms)
                .max()
                .unwrap_or(i64::MIN);
            (index, (due_ms - lead).max(usual.min(earlier_due)))
        })
}

/// What carrying out the steps keeps from one step to the next: the steps armed ahead.
/// Errors go to the run's list, passed in.
pub(super) struct Steps<'a> {
    exp: &'a Experiment,
    targets: &'a ResolvedTargets,
    timeline: SharedTimeline,
    /// Timed steps armed ahead of their due offset.
    armed_ahead: ArmedAhead,
    /// Steps armed earlier than [`ARM_AHEAD_MS`] before they are due.
    leads: Leads,
    /// Undo steps whose nodes were marked ([`World::mark_before_undo`]) when they were
    /// armed ahead, because every fault they undo already held then.
    marked_ahead: BTreeSet<usize>,
    /// Steps whose action is over on every node.
    done: BTreeSet<usize>,
    /// Step index → the offset it is due at, for steps with a fixed time.
    fixed_due_ms: BTreeMap<usize, i64>,
    /// The run's cancellation: a step armed when it comes is not issued, and one under
    /// way is cut short.
    cancel: tokio_util::sync::CancellationToken,
    /// The actions a stop cut short, by step index and node, to be ended on their nodes.
    cut: Vec<(usize, Option<String>)>,
}

impl<'a> Steps<'a> {
    /// Steps of `exp` on `targets`, recorded on `timeline`.
    pub(super) fn new(
        exp: &'a Experiment,
        targets: &'a ResolvedTargets,
        timeline: SharedTimeline,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Self {
        Steps {
            cancel,
            cut: Vec::new(),
            exp,
            targets,
            timeline,
            armed_ahead: ArmedAhead::new(),
            leads: Leads::new(),
            marked_ahead: BTreeSet::new(),
            done: BTreeSet::new(),
            fixed_due_ms: BTreeMap::new(),
        }
    }

    /// Reads, once the run started, the offset of every step with a fixed time: a fault
    /// whose undo is armed on its node needs its planned undo's.
    pub(super) fn learn_fixed_offsets(&mut self, scheduler: &Scheduler<'_>) {
        self.fixed_due_ms = (0..self.exp.steps.len())
            .filter_map(|i| scheduler.fixed_due_ms(i).map(|due| (i, due)))
            .collect();
    }

    /// Asks the world, once the run started, which steps need a longer lead than
    /// [`ARM_AHEAD_MS`] to be armed and sent ahead in time (a node reached through the
    /// API starts a pod for each).
    pub(super) fn learn_leads(&mut self, world: &impl World) {
        self.leads = (0..self.exp.steps.len())
            .filter_map(|index| {
                let nodes = self.step_nodes(index);
                let named: Vec<&str> = nodes.iter().flatten().map(String::as_str).collect();
                let lead = world.arm_ahead(&self.exp.steps[index].action, &named);
                let lead = i64::try_from(lead.as_millis()).unwrap_or(i64::MAX);
                (lead > ARM_AHEAD_MS).then_some((index, lead))
            })
            .collect();
    }

    /// How much later than `began_ms` the experiment's zero must be for every step with
    /// a longer lead (see [`Steps::learn_leads`]) to have all of it: 0 when none is due
    /// sooner than its lead.
    pub(super) fn head_start_ms(&self, began_ms: i64) -> i64 {
        self.leads
            .iter()
            .filter_map(|(index, lead)| {
                let due_in = self.fixed_due_ms.get(index)? - began_ms;
                Some(lead - due_in)
            })
            .max()
            .unwrap_or(0)
            .max(0)
    }

    /// The first offset at which a timed step not armed yet should be armed.
    pub(super) fn next_arm_ms(&self, tick: &Tick) -> Option<i64> {
        arm_times(tick, &self.armed_ahead, &self.leads)
            .map(|(_, at)| at)
            .min()
    }

    /// Arms every timed step due within its lead of `now` and not armed yet;
    /// returns whether it armed any (time has passed: ask the scheduler again).
    pub(super) async fn arm_due_soon(
        &mut self,
        tick: &Tick,
        now: i64,
        world: &mut impl World,
        ledger: &mut Ledger,
        restore_after: impl Fn() -> Duration,
        errors: &mut Vec<String>,
    ) -> bool {
        let soon: Vec<usize> = arm_times(tick, &self.armed_ahead, &self.leads)
            .filter(|(_, at)| *at <= now)
            .map(|(index, _)| index)
            .collect();
        for &index in &soon {
            let armed = self
                .arm_step(index, world, ledger, restore_after(), errors)
                .await;
            if armed.is_ok() {
                self.prime(index, tick, world).await;
            }
            // An undo whose faults all hold already is marked now, so reading the marks
            // (an API round trip) is not part of the step's lateness when it comes due:
            // while a fault holds, nothing it silenced renews anything.
            if armed.is_ok() {
                let (undone, holding) = self.undone_nodes(index, ledger);
                if !undone.is_empty() && holding {
                    let undone: Vec<&str> = undone.iter().map(String::as_str).collect();
                    world.mark_before_undo(&undone).await;
                    self.marked_ahead.insert(index);
                }
            }
            self.armed_ahead.insert(index, armed);
        }
        !soon.is_empty()
    }

    /// Sends step `index`'s action ahead to its nodes, to wait there for when it is due
    /// ([`World::prime`]); a step due in less than [`PRIME_AT_LEAST_MS`] is not (the
    /// sending would be part of its lateness).
    async fn prime(&self, index: usize, tick: &Tick, world: &impl World) {
        let Some(due_ms) = tick.waiting.iter().find_map(|(i, wait)| match wait {
            Wait::Until { due_ms } if *i == index => Some(*due_ms),
            _ => None,
        }) else {
            return;
        };
        let due_in = due_ms - self.timeline.offset_ms();
        if due_in < PRIME_AT_LEAST_MS {
            return;
        }
        let step = &self.exp.steps[index];
        let nodes = self.step_nodes(index);
        let named: Vec<&str> = nodes.iter().flatten().map(String::as_str).collect();
        let due_in = Duration::from_millis(u64::try_from(due_in).unwrap_or(0));
        world
            .prime(index, &step.action, &named, step.timeout, due_in)
            .await;
    }

    /// The nodes on which step `index` undoes a fault in place, and whether every such
    /// fault holds: its step is over and it silences its node, so nothing on the node
    /// renews its Lease until the undo.
    fn undone_nodes(&self, index: usize, ledger: &Ledger) -> (Vec<String>, bool) {
        let step = &self.exp.steps[index];
        let mut nodes: Vec<String> = Vec::new();
        let mut holding = true;
        for node in self.step_nodes(index).into_iter().flatten() {
            let undone: Vec<_> = ledger
                .active()
                .iter()
                .filter(|f| f.node == node && faults::undoes(&step.action, &f.fault))
                .collect();
            if undone.is_empty() {
                continue;
            }
            holding &= undone.iter().all(|f| {
                faults::silences_node(&f.fault)
                    && self
                        .exp
                        .steps
                        .iter()
                        .position(|s| s.name == f.step)
                        .is_some_and(|i| self.done.contains(&i))
            });
            nodes.push(node);
        }
        (nodes, holding)
    }

    /// Arms the step's fault on all of its nodes at once, all or nothing, after the world
    /// read what it needs before the fault; the timeline gets an `armed` entry per node,
    /// or a `failed` one with the reason. Returns the faults' journal ids.
    async fn arm_step(
        &mut self,
        index: usize,
        world: &mut impl World,
        ledger: &mut Ledger,
        restore_after: Duration,
        errors: &mut Vec<String>,
    ) -> Result<Vec<String>, ()> {
        let exp = self.exp;
        let step = &exp.steps[index];
        let nodes = self.step_nodes(index);
        let named: Vec<&str> = nodes.iter().flatten().map(String::as_str).collect();
        // A fault goes out only while the run still holds the cluster (its lock).
        if !faults::info(&step.action).repairs
            && let Err(why) = world.may_fault().await
        {
            self.refuse(index, &named, &format!("not armed: {why}"), errors);
            return Err(());
        }
        world.before_fault(index, &step.action, &named).await;
        let planned = super::host_timed::restore_after(
            exp,
            index,
            named
                .iter()
                .any(|n| world.undo_armed_on_host(n, &step.action)),
            &self.fixed_due_ms,
            self.timeline.offset_ms(),
        );
        let armed = match planned {
            Ok(planned) => ledger
                .before_faults(
                    &*world,
                    &step.name,
                    &named,
                    &step.action,
                    planned.unwrap_or(restore_after),
                )
                .await
                .map_err(|e| e.to_string()),
            Err(late) => Err(late.to_string()),
        };
        match armed {
            Ok(armed) => {
                let mut ids = Vec::with_capacity(armed.len());
                for one in armed {
                    ids.push(one.journal_id.clone());
                    self.timeline.record(self.step_event(
                        index,
                        Some(one.node),
                        StepPhase::Armed {
                            journal_id: one.journal_id,
                            self_restore: one.self_restore,
                            ends_by_timer_in_secs: one.ends_by_timer_in_secs,
                        },
                    ));
                }
                Ok(ids)
            }
            Err(e) => {
                self.refuse(index, &named, &e, errors);
                Err(())
            }
        }
    }

    /// Step `index` fails on `nodes` before anything was done: a `failed` entry per node
    /// (one for the step when it has none) and the run's error.
    fn refuse(&self, index: usize, nodes: &[&str], error: &str, errors: &mut Vec<String>) {
        let step = &self.exp.steps[index];
        let on: Vec<Option<&str>> = if nodes.is_empty() {
            vec![None]
        } else {
            nodes.iter().copied().map(Some).collect()
        };
        for node in on {
            self.timeline.record(self.step_event(
                index,
                node,
                StepPhase::Failed {
                    error: error.to_string(),
                },
            ));
        }
        errors.push(format!("step `{}`: {error}", step.name));
    }

    /// Runs one step on all of its nodes at once; false when it failed (the run then
    /// stops) or the run was cancelled before it was issued. The step is armed first unless
    /// it was armed ahead; a signal while it was armed (a node-access pod takes seconds to
    /// start) leaves it armed and not issued, for [`Steps::disarm_unissued`] to withdraw.
    pub(super) async fn run_step(
        &mut self,
        index: usize,
        scheduler: &mut Scheduler<'_>,
        world: &mut impl World,
        ledger: &mut Ledger,
        restore_after: Duration,
        errors: &mut Vec<String>,
    ) -> bool {
        let armed = match self.armed_ahead.remove(&index) {
            Some(armed) => armed,
            None => {
                self.arm_step(index, world, ledger, restore_after, errors)
                    .await
            }
        };
        if armed.is_err() {
            scheduler.finished(index, self.timeline.offset_ms(), false);
            return false;
        }

        let exp = self.exp;
        let step = &exp.steps[index];
        let nodes = self.step_nodes(index);
        // The planned undo is not something else undoing the fault.
        let named: Vec<&str> = nodes.iter().flatten().map(String::as_str).collect();
        let (undone, _) = self.undone_nodes(index, ledger);
        if !self.marked_ahead.remove(&index) && !undone.is_empty() {
            let undone: Vec<&str> = undone.iter().map(String::as_str).collect();
            world.mark_before_undo(&undone).await;
        }
        world.before_undo(&step.action, &named).await;
        if self.cancel.is_cancelled() {
            self.armed_ahead.insert(index, armed);
            return false;
        }
        if !faults::info(&step.action).repairs
            && let Err(why) = world.still_may_fault()
        {
            self.refuse(index, &named, &format!("not issued: {why}"), errors);
            self.armed_ahead.insert(index, armed);
            scheduler.finished(index, self.timeline.offset_ms(), false);
            return false;
        }
        // The fault goes out only while every node's backstop is still ahead of it.
        let too_late = ledger.backstops_within(&step.name, BACKSTOP_LEAD);
        if !too_late.is_empty() {
            for (node, left) in &too_late {
                let error = format!(
                    "not issued: its self-restore on {node} can fire in {:.1} s (arming its \
                     nodes took until now), so the fault could outlast it; it is withdrawn",
                    left.as_secs_f64()
                );
                self.timeline.record(self.step_event(
                    index,
                    Some(node),
                    StepPhase::Failed { error },
                ));
            }
            let nodes: Vec<&str> = too_late.iter().map(|(n, _)| n.as_str()).collect();
            errors.push(format!(
                "step `{}` was not issued: its self-restore could fire within {} s on {} \
                 (arming took until {}); give the step more time before its undo",
                step.name,
                BACKSTOP_LEAD.as_secs(),
                nodes.join(", "),
                crate::timeline::format_offset_ms(self.timeline.offset_ms()),
            ));
            self.armed_ahead.insert(index, armed);
            scheduler.finished(index, self.timeline.offset_ms(), false);
            return false;
        }
        // Issued on every node, then what waits there started in one pass, then each
        // node's call hears its command out (or carries it, when nothing waited).
        let issued: Vec<i64> = nodes
            .iter()
            .map(|node| {
                self.timeline
                    .record(self.step_event(index, node.as_deref(), StepPhase::Issued))
            })
            .collect();
        world
            .release(index, &step.action, &named, step.timeout)
            .await;
        let this = &*self;
        let shared = &*world;
        let repairs = faults::info(&step.action).repairs;
        let acted = join_all(
            nodes
                .iter()
                .zip(issued)
                .map(|(node, issued_ms)| async move {
                    let node = node.as_deref();
                    let limit = Executor::longest_wait(step.timeout).saturating_add(ACT_GRACE);
                    let acting = tokio::time::timeout(
                        limit,
                        shared.act(&step.name, &step.action, node, step.timeout),
                    );
                    // A stop cuts the action at its next await (a held drain stops asking,
                    // a command's session is cut): what it left running on the node is
                    // ended there once observation is over ([`Steps::end_cut`]).
                    // A repair (a planned undo) is heard out: it is the undo.
                    let cut = async {
                        if repairs {
                            std::future::pending::<()>().await;
                        }
                        this.cancel.cancelled().await;
                    };
                    let (result, came_back) = tokio::select! {
                        acted = acting => match acted {
                            Ok(result) => {
                                let over = !may_still_run(&result);
                                (result, over)
                            }
                            Err(_) => (Err(ActError::Timeout(step.timeout)), false),
                        },
                        () = cut => (Err(ActError::Cut), false),
                    };
                    let phase = match &result {
                        Ok(done) => StepPhase::Finished {
                            exit_status: done.exit_status,
                            output: done.output.clone(),
                        },
                        Err(e) if !came_back => StepPhase::Failed {
                            error: format!("{e}; it may still be running on the node"),
                        },
                        Err(e) => StepPhase::Failed {
                            error: e.to_string(),
                        },
                    };
                    this.timeline.record(this.step_event(index, node, phase));
                    let result = result.map(drop);
                    (node, issued_ms, result, came_back)
                }),
        )
        .await;
        if let Some(first_ms) = acted.iter().map(|(_, ms, _, _)| *ms).min()
            && scheduler.issued_ms(index).is_none()
        {
            scheduler.started(index, first_ms);
        }

        let mut ok = true;
        let mut succeeded = Vec::new();
        for (node, _, result, came_back) in acted {
            if matches!(result, Err(ActError::Cut)) {
                self.cut.push((index, node.map(str::to_string)));
                // The run ends as cancelled, not as a step that failed.
                scheduler.cancel();
            }
            if !came_back && let Some(node) = node {
                let ids = ledger.ids_of(&step.name, node);
                ledger.may_still_run(&ids);
                self.timeline.note(format!(
                    "step `{}` on {node} may still be running: its fault stays journaled and its self-restore armed, whatever its undo does",
                    step.name
                ));
            }
            match result {
                Ok(()) => succeeded.extend(node),
                // A fault that may be half-injected stays in the ledger for the safety net.
                Err(e) => {
                    let at = super::schedule::on_node(node);
                    errors.push(format!("step `{}`{at}: {e}", step.name));
                    ok = false;
                }
            }
        }
        for over in ledger.finished(&*world, &step.name, &succeeded).await {
            self.timeline.note(format!(
                "`{}` came back on {}: its journal entry is cleared",
                over.step, over.node
            ));
        }
        for undone in ledger.undone_by(&*world, &step.action, &succeeded).await {
            self.timeline.note(format!(
                "`{}` undid `{}` on {}",
                step.name, undone.step, undone.node
            ));
        }
        // A fault now in place is marked once it holds, off its issue path: if the safety
        // net undoes it (a run cut short), a renewal seen later came after that undo. The
        // planned undo marks its nodes again.
        let fresh: Vec<&str> = succeeded
            .iter()
            .copied()
            .filter(|n| !undone.iter().any(|u| u == n))
            .collect();
        if !fresh.is_empty() {
            world.mark_before_undo(&fresh).await;
        }
        for node in succeeded {
            let fault = FaultAt {
                step: index,
                name: &step.name,
                action: &step.action,
                node,
            };
            if let Err(e) = world.after_fault(fault, &self.timeline).await {
                self.timeline.note(e.to_string());
                errors.push(format!("step `{}`: {e}", step.name));
                ok = false;
            }
        }
        self.done.insert(index);
        scheduler.finished(index, self.timeline.offset_ms(), ok);
        ok
    }

    /// Ends on their nodes the actions a stop cut short ([`World::end_cut`]), once
    /// observation is over and before the safety net undoes: a node where nothing of its
    /// action runs any more has its faults' journal entries cleared once they are undone;
    /// one where that cannot be confirmed keeps them (and its self-restore armed).
    pub(super) async fn end_cut(&mut self, world: &impl World, ledger: &mut Ledger) {
        for (index, node) in std::mem::take(&mut self.cut) {
            let step = &self.exp.steps[index];
            let ended = world.end_cut(&step.action, node.as_deref()).await;
            let Some(node) = node else { continue };
            if ended {
                ledger.ended(&ledger.ids_of(&step.name, &node));
                self.timeline.note(format!(
                    "step `{}` on {node} was cut short by the stop; nothing of it runs there any more",
                    step.name
                ));
            } else {
                self.timeline.note(format!(
                    "step `{}` on {node} was cut short by the stop, and what it left running there could not be ended: its fault stays journaled and its self-restore armed",
                    step.name
                ));
            }
        }
    }

    /// Steps armed ahead and never issued (the run stopped first): their self-restores
    /// are disarmed and their journal entries cleared, since no fault was injected.
    pub(super) async fn disarm_unissued(&mut self, world: &impl World, ledger: &mut Ledger) {
        for (index, armed) in std::mem::take(&mut self.armed_ahead) {
            let Ok(ids) = armed else { continue };
            if ids.is_empty() {
                continue;
            }
            ledger.forget(world, &ids).await;
            self.timeline.note(format!(
                "step `{}` was armed but never issued: its {} fault(s) withdrawn",
                self.exp.steps[index].name,
                ids.len()
            ));
        }
    }

    /// The nodes a step acts on (`None`: the step acts on pods or claims, not a node).
    fn step_nodes(&self, index: usize) -> Vec<Option<String>> {
        let step = &self.exp.steps[index];
        match &step.target {
            Some(_) => step.nodes(self.targets).iter().cloned().map(Some).collect(),
            None => vec![None],
        }
    }

    /// A timeline entry about step `index` on `node`.
    fn step_event(&self, index: usize, node: Option<&str>, phase: StepPhase) -> Event {
        let step = &self.exp.steps[index];
        Event::Step {
            step: step.name.clone(),
            action: faults::action_name(&step.action).to_string(),
            node: node.map(str::to_string),
            phase,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(waiting: Vec<(usize, Wait)>) -> Tick {
        Tick {
            due: Vec::new(),
            waiting,
            wake_at_ms: None,
            verdicts: Vec::new(),
            end: None,
        }
    }

    #[test]
    fn only_timed_steps_not_armed_yet_are_armed_ahead_of_their_offset() {
        let tick = tick(vec![
            (0, Wait::Until { due_ms: 10_000 }),
            (
                1,
                Wait::Step {
                    step: "a".into(),
                    finish: true,
                },
            ),
            (2, Wait::Until { due_ms: 20_000 }),
            (3, Wait::Running),
        ]);
        let mut armed = ArmedAhead::new();
        let leads = Leads::new();
        let times: Vec<(usize, i64)> = arm_times(&tick, &armed, &leads).collect();
        assert_eq!(
            times,
            vec![(0, 10_000 - ARM_AHEAD_MS), (2, 20_000 - ARM_AHEAD_MS)]
        );
        armed.insert(0, Ok(vec!["id-1".into()]));
        armed.insert(2, Err(()));
        assert_eq!(arm_times(&tick, &armed, &leads).count(), 0);
    }

    #[test]
    fn a_longer_lead_never_reaches_across_a_step_due_earlier() {
        let tick = tick(vec![
            (0, Wait::Until { due_ms: 15_000 }),
            (1, Wait::Until { due_ms: 25_000 }),
            (2, Wait::Until { due_ms: 26_000 }),
            (3, Wait::Until { due_ms: 60_000 }),
        ]);
        let leads: Leads = [(1, 10_000), (2, 10_000), (3, 10_000)].into();
        let times: Vec<(usize, i64)> = arm_times(&tick, &ArmedAhead::new(), &leads).collect();
        assert_eq!(
            times,
            vec![
                // Nothing due before it: its whole lead.
                (0, 15_000 - ARM_AHEAD_MS),
                // Armed once step 0 is due, not 10 s ahead across it.
                (1, 15_000),
                // Step 1 is due 1 s before it: the usual lead is all it gets.
                (2, 26_000 - ARM_AHEAD_MS),
                // Nothing due in its lead: the whole of it.
                (3, 50_000),
            ]
        );
    }
}
