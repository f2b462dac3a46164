//! A scripted world for the run loop's offline tests: every call can succeed, fail, hang
//! or be slow, and every call is logged, so each safety path (cancel at each phase, a
//! closed output, an abort while an action runs, a proof that never comes, undo that
//! fails, a step whose command outlives its timeout, two runs on one journal) is tested
//! against the real loop, ledger and journal, on a paused clock, without a cluster.
//!
//! It is a double of faultline's own effect interface ([`World`]), not of the Kubernetes
//! API: the end-to-end tests keep running against the real lab and kind.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::events::RunEvents;
use crate::execute::ArmedRestore;
use crate::experiment::model::{Action, ClusterTimers, Experiment};
use crate::journal::{Journal, Undo};
use crate::run::floor::drive::{LoopOutcome, LoopPlan, run_loop};
use crate::run::floor::ledger::Ledger;
pub(crate) use crate::run::floor::schedule::End as LoopEnd;
use crate::run::floor::schedule::End;
use crate::run::shared_timeline::SharedTimeline;
use crate::run::world::{
    ARM_AHEAD_MS, ActError, ActResult, AfterFaultError, AfterUndo, BeginError, FaultAt,
    SelfRestoreError, World, journal_undo, seen_down_on,
};
use crate::timeline::{ConditionStatus, DownNode, Event, NodeState, StepPhase, Timeline};

/// What one call does.
#[derive(Debug, Clone)]
enum Call {
    /// Succeeds at once.
    Ok,
    /// Fails at once, saying this.
    Fail(&'static str),
    /// Never comes back.
    Hang,
    /// Succeeds after this long.
    Slow(Duration),
    /// Waits for the run's cancellation, then succeeds (a `begin` that is cut short).
    UntilCancelled,
}

/// The scripted world: calls logged in order, behaviours taken from queues (an empty
/// queue means `Ok`).
#[derive(Default)]
pub(crate) struct Scripted {
    log: Arc<Mutex<Vec<String>>>,
    begin: VecDeque<Call>,
    /// Step name (an undo is `undo STEP`) → what its successive calls do.
    acts: Mutex<BTreeMap<String, VecDeque<Call>>>,
    /// Step name → what lands on the timeline while it runs (after its first second).
    pub(crate) during: BTreeMap<String, Vec<Event>>,
    /// What a fault's proof puts on its step's timeline after the fault.
    proof: Option<StepPhase>,
    /// What is on the timeline before the first step (the first full view).
    initial: Vec<Event>,
    /// What the observer sees later: each event lands at its offset on the timeline.
    later: Vec<(i64, Event)>,
    timeline: Option<SharedTimeline>,
    /// Reboots go out of band and a power-on brings a node back (kind, k3d).
    reboot_powers_on: bool,
    /// How long before it is due every fault step is armed and sent ahead, when it is
    /// longer than usual (a world whose nodes are reached through the API).
    lead: Option<Duration>,
    /// What successive self-restore armings do (empty: succeed at once).
    arming: Mutex<VecDeque<Call>>,
    /// Every node's kubelet renews its heartbeat this often (`None`: the world cannot
    /// tell, as a recording cannot).
    pub(crate) heartbeat_every: Option<Duration>,
    /// A fault that cuts the node's transport has its planned undo armed on the node as a
    /// timer (a node reached through the API).
    host_timed: bool,
    /// An action cut short by the stop cannot be confirmed ended on its node.
    cut_unended: bool,
    /// From this offset (ms) on, the run's cluster lock is no longer its own.
    lock_lost_at: Option<i64>,
}

impl Scripted {
    fn log(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }

    /// Every call made, in order.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn on(mut self, step: &str, calls: &[Call]) -> Self {
        self.acts
            .get_mut()
            .unwrap()
            .insert(step.to_string(), calls.iter().cloned().collect());
        self
    }

    async fn perform(call: Call, cancel: Option<&CancellationToken>) -> Result<(), &'static str> {
        match call {
            Call::Ok => Ok(()),
            Call::Fail(why) => Err(why),
            Call::Hang => std::future::pending().await,
            Call::Slow(d) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
            Call::UntilCancelled => {
                if let Some(cancel) = cancel {
                    cancel.cancelled().await;
                }
                Ok(())
            }
        }
    }
}

impl World for Scripted {
    fn nodes_seen_down(&self, timeline: &SharedTimeline) -> Vec<DownNode> {
        // What the script puts on the timeline is what its observer saw.
        seen_down_on(timeline)
    }

    async fn renewals_since(&mut self, node: &str, since_ms: i64) -> Option<u32> {
        let every = i64::try_from(self.heartbeat_every?.as_millis())
            .ok()?
            .max(1);
        let now = self.timeline.as_ref()?.offset_ms();
        self.log(format!("renewals {node}"));
        u32::try_from(now.saturating_sub(since_ms).max(0) / every).ok()
    }

    async fn begin(
        &mut self,
        timeline: &SharedTimeline,
        cancel: &CancellationToken,
    ) -> Result<Vec<String>, BeginError> {
        self.log("begin".into());
        self.timeline = Some(timeline.clone());
        for e in std::mem::take(&mut self.initial) {
            timeline.record(e);
        }
        let later = std::mem::take(&mut self.later);
        let sink = timeline.clone();
        tokio::spawn(async move {
            for (at_ms, e) in later {
                tokio::time::sleep_until(sink.instant_at(at_ms)).await;
                sink.record(e);
            }
        });
        let call = self.begin.pop_front().unwrap_or(Call::Ok);
        Self::perform(call, Some(cancel))
            .await
            .map(|()| Vec::new())
            .map_err(BeginError::Scripted)
    }

    async fn may_fault(&self) -> Result<(), crate::cluster::lock::LockLost> {
        self.log("confirm lock".into());
        self.still_may_fault()
    }

    fn still_may_fault(&self) -> Result<(), crate::cluster::lock::LockLost> {
        let now = self.timeline.as_ref().map_or(0, SharedTimeline::offset_ms);
        match self.lock_lost_at {
            Some(at) if now >= at => Err(crate::cluster::lock::LockLost::Deleted),
            _ => Ok(()),
        }
    }

    async fn keep_on_lock(&self, entries: &[crate::journal::Entry]) {
        self.log(format!("keep on lock {}", entries.len()));
    }

    async fn end_cut(&self, _: &Action, node: Option<&str>) -> bool {
        self.log(format!("end cut on {}", node.unwrap_or("-")));
        !self.cut_unended
    }

    async fn before_fault(&mut self, step: usize, _: &Action, nodes: &[&str]) {
        self.log(format!("before fault {step} on {}", nodes.join(",")));
    }

    fn arm_ahead(&self, action: &Action, _: &[&str]) -> Duration {
        let usual = Duration::from_millis(ARM_AHEAD_MS.unsigned_abs());
        match self.lead {
            Some(lead) if crate::experiment::fault::node_op(action).is_some() => lead,
            _ => usual,
        }
    }

    async fn prime(
        &self,
        step: usize,
        _: &Action,
        nodes: &[&str],
        timeout: Duration,
        due_in: Duration,
    ) {
        let at = self.timeline.as_ref().map_or(-1, SharedTimeline::offset_ms);
        self.log(format!(
            "prime {step} on {} at {at}, due in {} ms within {timeout:?}",
            nodes.join(","),
            due_in.as_millis()
        ));
    }

    async fn release(&self, step: usize, _: &Action, nodes: &[&str], _: Duration) {
        let at = self.timeline.as_ref().map_or(-1, SharedTimeline::offset_ms);
        self.log(format!("release {step} on {} at {at}", nodes.join(",")));
    }

    fn undo_armed_on_host(&self, _: &str, fault: &Action) -> bool {
        self.host_timed && crate::experiment::fault::inverse(fault).is_some()
    }

    async fn arm_restore(
        &self,
        node: &str,
        _: &Undo,
        after: Duration,
        token: &str,
    ) -> Result<Option<ArmedRestore>, SelfRestoreError> {
        self.log(format!("arm {node}"));
        let call = self.arming.lock().unwrap().pop_front().unwrap_or(Call::Ok);
        Self::perform(call, None)
            .await
            .map_err(SelfRestoreError::Scripted)?;
        self.log(format!("armed {node}"));
        Ok(Some(ArmedRestore {
            watcher: None,
            node: node.to_string(),
            token: token.to_string(),
            pid: Some(1),
            after_secs: after.as_secs(),
            local: false,
        }))
    }

    fn journal_undo(&self, _: &str, fault: &Action) -> Option<Undo> {
        match fault {
            Action::Reboot if self.reboot_powers_on => Some(Undo::PowerOn),
            _ => journal_undo(fault),
        }
    }

    async fn disarm(&self, node: &str, _: &ArmedRestore) -> Result<(), SelfRestoreError> {
        self.log(format!("disarm {node}"));
        Ok(())
    }

    async fn act(
        &self,
        step: &str,
        action: &Action,
        node: Option<&str>,
        _: Duration,
    ) -> Result<ActResult, ActError> {
        let on = node.unwrap_or("-");
        self.log(format!("act {step} on {on}"));
        if *action == Action::PowerOn {
            self.log(format!("power on {on}"));
        }
        let call = self
            .acts
            .lock()
            .unwrap()
            .get_mut(step)
            .and_then(VecDeque::pop_front)
            .unwrap_or(Call::Ok);
        if let (Some(events), Some(timeline)) = (self.during.get(step), &self.timeline) {
            let timeline = timeline.clone();
            let events = events.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                for e in events {
                    timeline.record(e);
                }
            });
        }
        let result = Self::perform(call, None).await;
        self.log(format!("done {step} on {on}: {result:?}"));
        result
            .map(|()| ActResult {
                exit_status: Some(0),
                output: String::new(),
            })
            .map_err(|e| {
                ActError::Exec(crate::execute::ExecError::CommandFailed {
                    node: on.to_string(),
                    command: step.to_string(),
                    exit_status: Some(1),
                    output: e.to_string(),
                })
            })
    }

    async fn after_fault(
        &mut self,
        fault: FaultAt<'_>,
        timeline: &SharedTimeline,
    ) -> Result<(), AfterFaultError> {
        if let Some(phase) = &self.proof
            && crate::experiment::fault::inverse(fault.action).is_some()
        {
            timeline.record(Event::Step {
                step: fault.name.to_string(),
                action: crate::experiment::fault::action_name(fault.action).to_string(),
                node: Some(fault.node.to_string()),
                phase: phase.clone(),
            });
        }
        Ok(())
    }

    async fn mark_before_undo(&mut self, nodes: &[&str]) {
        let at = self.timeline.as_ref().map_or(-1, SharedTimeline::offset_ms);
        self.log(format!("mark {} at {at}", nodes.join(",")));
    }

    async fn before_undo(&mut self, _: &Action, _: &[&str]) {}

    async fn stop_proofs(&mut self) {}

    async fn after_undo(&mut self, _: &SharedTimeline, interrupted: bool) -> AfterUndo {
        self.log(format!("after undo (interrupted: {interrupted})"));
        AfterUndo::default()
    }

    async fn end(&mut self, timeline: &SharedTimeline) -> Vec<String> {
        self.log("end".into());
        // As the cluster's world says it deletes what setup applied.
        timeline.note("teardown: scripted objects deleted");
        Vec::new()
    }
}

/// An experiment from YAML, with timers that make the lab's numbers small.
fn experiment(yaml: &str) -> Experiment {
    crate::experiment::parse(yaml, Path::new("scripted.yaml"))
        .unwrap_or_else(|d| panic!("scripted experiment: {d}"))
}

fn timers() -> ClusterTimers {
    ClusterTimers {
        node_monitor_period: Duration::from_secs(2),
        node_monitor_grace_period: Duration::from_secs(20),
        default_unreachable_toleration: Duration::from_secs(30),
        default_not_ready_toleration: Duration::from_secs(30),
    }
}

/// Stop the kubelet on `a` at 10 s, start it at 40 s; nothing expected but that the node
/// is never deleted (open until the end).
pub(crate) const STOP_START: &str = "
name: scripted
description: a scripted run
targets:
  victim: {names: [a]}
steps:
  - {name: stop, at: 10s, do: kubelet-stop, target: victim, timeout: 30s}
  - {name: start, at: 40s, do: kubelet-start, target: victim}
expect:
  - {name: node stays, node: victim, never: Unknown}
";

/// Everything a scripted run needs, and what it left.
pub(crate) struct Harness {
    exp: Experiment,
    targets: BTreeMap<String, Vec<String>>,
    control_plane: std::collections::BTreeSet<String>,
    timers: ClusterTimers,
    journal: std::path::PathBuf,
    run_id: String,
    _dir: tempfile::TempDir,
}

impl Harness {
    /// An experiment from `yaml` with its target `victim` on node `a`.
    pub(crate) fn new(yaml: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Harness {
            exp: experiment(yaml),
            targets: BTreeMap::from([("victim".into(), vec!["a".into()])]),
            control_plane: Default::default(),
            timers: timers(),
            journal: dir.path().join("journal.json"),
            run_id: dir
                .path()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            _dir: dir,
        }
    }

    /// The same experiment with these targets (target name → nodes).
    pub(crate) fn with_targets(mut self, targets: &[(&str, &[&str])]) -> Self {
        self.targets = targets
            .iter()
            .map(|(t, nodes)| (t.to_string(), nodes.iter().map(|n| n.to_string()).collect()))
            .collect();
        self
    }

    /// The same experiment in a cluster whose control plane is these nodes.
    pub(crate) fn with_control_plane(mut self, nodes: &[&str]) -> Self {
        self.control_plane = nodes.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Runs the loop in `world` and returns what it did with the timeline it left.
    pub(crate) async fn run_kept(&self, world: &mut Scripted) -> (LoopOutcome, Timeline) {
        let timeline = SharedTimeline::start(RunEvents::default());
        let out = self
            .run_on(world, CancellationToken::new(), &timeline)
            .await;
        (out, timeline.snapshot())
    }

    /// Runs the loop in `world`, sending the timeline to `events`.
    pub(crate) async fn run(
        &self,
        world: &mut Scripted,
        cancel: CancellationToken,
        events: RunEvents,
    ) -> LoopOutcome {
        self.run_on(world, cancel, &SharedTimeline::start(events))
            .await
    }

    async fn run_on(
        &self,
        world: &mut Scripted,
        cancel: CancellationToken,
        timeline: &SharedTimeline,
    ) -> LoopOutcome {
        let plan = LoopPlan {
            exp: &self.exp,
            targets: &self.targets,
            control_plane: &self.control_plane,
            timers: &self.timers,
            capabilities: &[],
            keep_going: false,
            restore_margin: Duration::from_secs(60),
        };
        let journal = Journal::open(&self.journal).unwrap();
        let ledger = Ledger::new(Some(journal), "c", &self.run_id);
        run_loop(plan, world, ledger, timeline, cancel).await
    }

    /// Runs the loop in `world`, cancelled after `secs` on the (paused) clock.
    pub(crate) async fn run_cancelled_at(&self, world: &mut Scripted, secs: u64) -> LoopOutcome {
        let cancel = CancellationToken::new();
        cancel_after(&cancel, secs);
        self.run(world, cancel, RunEvents::default()).await
    }

    /// Faults left in the journal.
    pub(crate) fn journaled(&self) -> usize {
        Journal::open(&self.journal).unwrap().active("c").len()
    }
}

/// Cancels `cancel` after `secs` on the (paused) clock.
fn cancel_after(cancel: &CancellationToken, secs: u64) {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        cancel.cancel();
    });
}

/// Node `name` as the observer sees it, its Ready condition last changed at `since` (s).
pub(crate) fn node(name: &str, ready: ConditionStatus, since: i64) -> Event {
    Event::Node {
        name: name.into(),
        before: None,
        after: Some(NodeState {
            ready,
            ready_since: chrono::DateTime::<chrono::Utc>::from_timestamp(since, 0),
            taints: Vec::new(),
            unschedulable: false,
            zone: None,
            shutting_down: false,
        }),
    }
}

pub(crate) fn index_of(calls: &[String], line: &str) -> usize {
    calls
        .iter()
        .position(|c| c == line)
        .unwrap_or_else(|| panic!("no `{line}` in {calls:#?}"))
}

/// The loop's safety paths against this world: cancel at each phase, aborts, proofs,
/// undo that fails, commands that outlive their timeout, two runs on one journal, reboots.
mod loop_tests;

/// The run-time interlock (issue 46) against this world.
mod interlock_tests;

/// Rolling steps (issue 46, item 1), expanded as a run expands them, against this world.
mod roll_tests;
