//! Carrying out one step of the plan on all of its nodes at once.
//!
//! A step on twenty nodes must hit them together and on time: its nodes are armed (fault
//! journaled, self-restore set) all at once and, for a step due at a known offset, ahead
//! of that offset; then the action starts on every node together. What each node did then
//! settles the ledger.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;

use super::act::Actor;
use super::addresses::MachineAddresses;
use super::ledger::Ledger;
use super::proofs::{self, Baseline, Proofs};
use super::safety::ResolvedTargets;
use super::schedule::{Scheduler, Tick, Wait};
use super::shared_timeline::SharedTimeline;
use crate::experiment::fault as faults;
use crate::experiment::model::Experiment;
use crate::timeline::{Event, StepPhase};

/// How long before its due offset a timed step is armed, so that arming (an SSH round per
/// node, all at once) is not part of the step's lateness. Arming early is harmless: the
/// self-restore's deadline is absolute, and undoing a fault that was never injected (a
/// kubelet start on a running kubelet) changes nothing if faultline dies in between.
pub(super) const ARM_AHEAD_MS: i64 = 3_000;

/// Steps armed ahead of their due offset: step index → the journal ids of its faults, or
/// `Err` when arming failed (the step then fails when it comes due).
pub(super) type ArmedAhead = BTreeMap<usize, Result<Vec<String>, ()>>;

/// Timed steps not armed yet and when each should be: `(index, offset to arm at)`.
fn arm_times<'t>(tick: &'t Tick, armed: &'t ArmedAhead) -> impl Iterator<Item = (usize, i64)> + 't {
    tick.waiting
        .iter()
        .filter(|(index, _)| !armed.contains_key(index))
        .filter_map(|(index, wait)| match wait {
            Wait::Until { due_ms } => Some((*index, due_ms - ARM_AHEAD_MS)),
            _ => None,
        })
}

/// What carrying out the steps keeps from one step to the next: the machine addresses
/// recorded before the first fault on each node, and the steps armed ahead. Errors go to
/// the run's list, passed in.
pub(super) struct Steps<'a> {
    exp: &'a Experiment,
    targets: &'a ResolvedTargets,
    timeline: SharedTimeline,
    /// Target machines' addresses before their first fault.
    addresses: MachineAddresses,
    /// Timed steps armed ahead of their due offset.
    armed_ahead: ArmedAhead,
    /// What each node's proof compares with after the step, read when it was armed:
    /// `(step index, node)` → the reading.
    baselines: BTreeMap<(usize, String), Baseline>,
    /// Each fault's proof that it took effect, under way.
    proofs: Proofs,
}

impl<'a> Steps<'a> {
    /// Steps of `exp` on `targets`, recorded on `timeline`.
    pub(super) fn new(
        exp: &'a Experiment,
        targets: &'a ResolvedTargets,
        timeline: SharedTimeline,
    ) -> Self {
        Steps {
            exp,
            targets,
            timeline,
            addresses: MachineAddresses::default(),
            armed_ahead: ArmedAhead::new(),
            baselines: BTreeMap::new(),
            proofs: Proofs::default(),
        }
    }

    /// Observation ended: every proof stops (what is left is the safety net's).
    pub(super) async fn stop_proofs(&mut self) {
        self.proofs.stop_all().await;
    }

    /// The first offset at which a timed step not armed yet should be armed.
    pub(super) fn next_arm_ms(&self, tick: &Tick) -> Option<i64> {
        arm_times(tick, &self.armed_ahead).map(|(_, at)| at).min()
    }

    /// Arms every timed step due within [`ARM_AHEAD_MS`] of `now` and not armed yet;
    /// returns whether it armed any (time has passed: ask the scheduler again).
    pub(super) async fn arm_due_soon(
        &mut self,
        tick: &Tick,
        now: i64,
        actor: &Actor<'_>,
        ledger: &mut Ledger,
        restore_after: impl Fn() -> Duration,
        errors: &mut Vec<String>,
    ) -> bool {
        let soon: Vec<usize> = arm_times(tick, &self.armed_ahead)
            .filter(|(_, at)| *at <= now)
            .map(|(index, _)| index)
            .collect();
        for &index in &soon {
            let armed = self
                .arm_step(index, actor, ledger, restore_after(), errors)
                .await;
            self.armed_ahead.insert(index, armed);
        }
        !soon.is_empty()
    }

    /// After the run: each node that came back with another machine address, one message
    /// per node.
    pub(super) async fn address_problems(&mut self, actor: &Actor<'_>) -> Vec<String> {
        self.addresses.check_all(actor.executor).await
    }

    /// Records the machine addresses of the step's nodes (when its fault takes a node
    /// down) and arms its fault on all of them at once, all or nothing; the timeline gets
    /// an `armed` entry per node, or a `failed` one with the reason. Returns the faults'
    /// journal ids.
    async fn arm_step(
        &mut self,
        index: usize,
        actor: &Actor<'_>,
        ledger: &mut Ledger,
        restore_after: Duration,
        errors: &mut Vec<String>,
    ) -> Result<Vec<String>, ()> {
        let exp = self.exp;
        let step = &exp.steps[index];
        let nodes = self.step_nodes(index);
        let named: Vec<&str> = nodes.iter().flatten().map(String::as_str).collect();
        let remember = async {
            if faults::takes_node_down(&step.action) {
                self.addresses.remember(actor.executor, &named).await;
            }
        };
        let arm = ledger.before_faults(
            actor.executor,
            &step.name,
            &named,
            &step.action,
            restore_after,
        );
        let read_before = join_all(named.iter().map(|node| async move {
            let baseline = proofs::baseline(actor.executor, &step.action, node).await;
            (node.to_string(), baseline)
        }));
        let ((), armed, before) = tokio::join!(remember, arm, read_before);
        for (node, baseline) in before {
            if let Some(b) = baseline {
                self.baselines.insert((index, node), b);
            }
        }
        match armed {
            Ok(armed) => {
                let mut ids = Vec::with_capacity(armed.len());
                for (node, (journal_id, self_restore)) in named.iter().zip(armed) {
                    ids.push(journal_id.clone());
                    self.timeline.record(self.step_event(
                        index,
                        Some(node),
                        StepPhase::Armed {
                            journal_id,
                            self_restore,
                        },
                    ));
                }
                Ok(ids)
            }
            Err(e) => {
                for node in &named {
                    self.timeline.record(self.step_event(
                        index,
                        Some(node),
                        StepPhase::Failed {
                            error: e.to_string(),
                        },
                    ));
                }
                errors.push(format!("step `{}`: {e}", step.name));
                Err(())
            }
        }
    }

    /// Runs one step on all of its nodes at once; false when it failed (the run then
    /// stops). The step is armed first unless it was armed ahead.
    pub(super) async fn run_step(
        &mut self,
        index: usize,
        scheduler: &mut Scheduler<'_>,
        actor: &Actor<'_>,
        ledger: &mut Ledger,
        restore_after: Duration,
        errors: &mut Vec<String>,
    ) -> bool {
        let armed = match self.armed_ahead.remove(&index) {
            Some(armed) => armed,
            None => {
                self.arm_step(index, actor, ledger, restore_after, errors)
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
        self.proofs.settle(&step.action, &named).await;
        let this = &*self;
        let acted = join_all(nodes.iter().map(|node| async move {
            let node = node.as_deref();
            let issued_ms = this
                .timeline
                .record(this.step_event(index, node, StepPhase::Issued));
            let result = actor.act(&step.action, node, step.timeout).await;
            let phase = match &result {
                Ok(done) => StepPhase::Finished {
                    exit_status: done.exit_status,
                    output: done.output.clone(),
                },
                Err(e) => StepPhase::Failed {
                    error: e.to_string(),
                },
            };
            this.timeline.record(this.step_event(index, node, phase));
            let result = result.map(drop);
            (node, issued_ms, result)
        }))
        .await;
        if let Some(first_ms) = acted.iter().map(|(_, ms, _)| *ms).min()
            && scheduler.issued_ms(index).is_none()
        {
            scheduler.started(index, first_ms);
        }

        let mut ok = true;
        let mut succeeded = Vec::new();
        for (node, _, result) in acted {
            match result {
                Ok(()) => succeeded.extend(node),
                // A fault that may be half-injected stays in the ledger for the safety net.
                Err(e) => {
                    let at = node.map(|n| format!(" on {n}")).unwrap_or_default();
                    errors.push(format!("step `{}`{at}: {e}", step.name));
                    ok = false;
                }
            }
        }
        for node in &succeeded {
            let baseline = self.baselines.remove(&(index, node.to_string()));
            self.proofs.start(
                actor,
                &self.timeline,
                &step.name,
                &step.action,
                node,
                baseline,
            );
        }
        for undone in ledger
            .undone_by(actor.executor, &step.action, &succeeded)
            .await
        {
            self.timeline.note(format!(
                "`{}` undid `{}` on {}",
                step.name, undone.step, undone.node
            ));
        }
        if faults::restarts_machine(&step.action) {
            for n in succeeded {
                if let Err(e) = self.addresses.check(actor.executor, n).await {
                    self.timeline.note(e.clone());
                    errors.push(format!("step `{}`: {e}", step.name));
                    ok = false;
                }
            }
        }
        scheduler.finished(index, self.timeline.offset_ms(), ok);
        ok
    }

    /// Steps armed ahead and never issued (the run stopped first): their self-restores
    /// are disarmed and their journal entries cleared, since no fault was injected.
    pub(super) async fn disarm_unissued(&mut self, actor: &Actor<'_>, ledger: &mut Ledger) {
        for (index, armed) in std::mem::take(&mut self.armed_ahead) {
            let Ok(ids) = armed else { continue };
            if ids.is_empty() {
                continue;
            }
            ledger.forget(actor.executor, &ids).await;
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
        let times: Vec<(usize, i64)> = arm_times(&tick, &armed).collect();
        assert_eq!(
            times,
            vec![(0, 10_000 - ARM_AHEAD_MS), (2, 20_000 - ARM_AHEAD_MS)]
        );
        armed.insert(0, Ok(vec!["id-1".into()]));
        armed.insert(2, Err(()));
        assert_eq!(arm_times(&tick, &armed).count(), 0);
    }
}
