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

pub(crate) fn index_of(calls: &[String], line: &str) -> usize {
    calls
        .iter()
        .position(|c| c == line)
        .unwrap_or_else(|| panic!("no `{line}` in {calls:#?}"))
}

#[tokio::test(start_paused = true)]
async fn a_planned_run_injects_undoes_and_leaves_the_journal_empty() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted::default();
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    let calls = world.calls();
    assert!(index_of(&calls, "arm a") < index_of(&calls, "act stop on a"));
    assert!(index_of(&calls, "act start on a") < index_of(&calls, "disarm a"));
    assert!(
        !calls.iter().any(|c| c.starts_with("act undo")),
        "{calls:#?}"
    );
    assert_eq!(out.end, Some(End::Observed { all_decided: false }));
    assert_eq!((h.journaled(), out.left_journaled), (0, 0));
    assert!(out.errors.is_empty(), "{:?}", out.errors);
}

/// The undo's Lease marks are read when the undo is armed ahead, since the kubelet stop it
/// undoes holds by then: the API round trip is not part of the undo's lateness. The fault
/// step reads its marks only once it is done, never before it is issued.
#[tokio::test(start_paused = true)]
async fn an_undo_is_marked_when_armed_ahead_not_when_it_is_due() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted::default();
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    let calls = world.calls();
    let marks: Vec<usize> = (0..calls.len())
        .filter(|&i| calls[i].starts_with("mark a at "))
        .collect();
    // Once the stop holds (for the safety net), then for the planned start.
    assert_eq!(marks.len(), 2, "{calls:#?}");
    assert!(
        index_of(&calls, "done stop on a: Ok(())") < marks[0],
        "{calls:#?}"
    );
    let mark = marks[1];
    assert!(mark < index_of(&calls, "act start on a"), "{calls:#?}");
    let marked_ms: i64 = calls[mark]
        .trim_start_matches("mark a at ")
        .parse()
        .unwrap();
    let issued_ms = out.issued_ms[1].expect("start issued");
    assert!(
        marked_ms <= issued_ms - 2_000,
        "marked at {marked_ms} ms, issued at {issued_ms} ms"
    );
}

/// A timed step's commands are sent ahead when it is armed, 3 s before it is due, with
/// the step's own limit; a step that waits on another is not (its time is not known).
#[tokio::test(start_paused = true)]
async fn a_timed_step_is_sent_ahead_when_it_is_armed() {
    let h = Harness::new(
        "
name: scripted
description: a scripted run
targets:
  victim: {names: [a]}
steps:
  - {name: stop, at: 10s, do: kubelet-stop, target: victim, timeout: 30s}
  - {name: start, after: stop, do: kubelet-start, target: victim}
expect:
  - {name: node stays, node: victim, never: Unknown}
",
    );
    let mut world = Scripted::default();
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    let calls = world.calls();
    let primed: Vec<&String> = calls.iter().filter(|c| c.starts_with("prime")).collect();
    assert_eq!(primed.len(), 1, "{calls:#?}");
    let issued_ms = out.issued_ms[0].expect("stop issued");
    assert_eq!(
        primed[0],
        &format!(
            "prime 0 on a at {}, due in 3000 ms within 30s",
            issued_ms - 3_000
        ),
        "{calls:#?}"
    );
    assert!(
        index_of(&calls, "arm a") < index_of(&calls, primed[0])
            && index_of(&calls, primed[0]) < index_of(&calls, "act stop on a"),
        "{calls:#?}"
    );
}

/// When a step is due, what waits on its nodes is released in one call for all of them,
/// after the step was issued on every node and before any node's call hears it out.
#[tokio::test(start_paused = true)]
async fn a_due_step_is_released_on_all_its_nodes_at_once_before_they_are_heard() {
    let mut h = Harness::new(
        "
name: scripted
description: a scripted run
targets:
  victim: {names: [a, b]}
safety:
  maxNodesDown: 2
steps:
  - {name: stop, at: 10s, do: kubelet-stop, target: victim, timeout: 30s}
  - {name: start, after: stop, do: kubelet-start, target: victim}
expect:
  - {name: nodes stay, node: victim, never: Unknown}
",
    );
    h.targets = BTreeMap::from([("victim".into(), vec!["a".into(), "b".into()])]);
    let mut world = Scripted::default();
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    let calls = world.calls();
    let released: Vec<&String> = calls.iter().filter(|c| c.starts_with("release")).collect();
    let issued_ms = out.issued_ms[0].expect("stop issued");
    // One for the stop, one for the start that followed it.
    assert_eq!(released.len(), 2, "{calls:#?}");
    assert_eq!(
        released[0],
        &format!("release 0 on a,b at {issued_ms}"),
        "{calls:#?}"
    );
    let release = index_of(&calls, released[0]);
    let primed = calls.iter().position(|c| c.starts_with("prime 0 on a,b"));
    assert!(
        primed.is_some_and(|p| p < release)
            && release < index_of(&calls, "act stop on a")
            && release < index_of(&calls, "act stop on b"),
        "{calls:#?}"
    );
}

/// A world that needs 10 s to arm a step and send it ahead (nodes reached through the
/// API): a fault at 0 s moves the experiment's zero 10 s later, so that it is armed and
/// sent ahead in time and issued when it is due; the undo keeps its offset from the zero
/// and the usual lead where nothing is due before it.
#[tokio::test(start_paused = true)]
async fn a_step_due_sooner_than_its_lead_moves_the_zero_later() {
    let h = Harness::new(
        "
name: scripted
description: a scripted run
targets:
  victim: {names: [a]}
steps:
  - {name: stop, at: 0s, do: kubelet-stop, target: victim, timeout: 30s}
  - {name: start, at: 30s, do: kubelet-start, target: victim}
expect:
  - {name: node stays, node: victim, never: Unknown}
",
    );
    let mut world = Scripted {
        lead: Some(Duration::from_secs(10)),
        ..Scripted::default()
    };
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    let calls = world.calls();
    let start_ms = out.start_ms.expect("started");
    let issued_ms = out.issued_ms[0].expect("stop issued");
    assert!(
        (0..=50).contains(&(issued_ms - start_ms)),
        "issued {} ms after the zero",
        issued_ms - start_ms
    );
    let primed: Vec<&String> = calls.iter().filter(|c| c.starts_with("prime 0")).collect();
    assert_eq!(
        primed,
        [&format!(
            "prime 0 on a at {}, due in 10000 ms within 30s",
            start_ms - 10_000
        )],
        "{calls:#?}"
    );
    let start_issued = out.issued_ms[1].expect("start issued");
    assert!(
        (30_000..=30_050).contains(&(start_issued - start_ms)),
        "the undo moved with the zero: {} ms",
        start_issued - start_ms
    );
    let prime_start = format!(
        "prime 1 on a at {}, due in 10000 ms within",
        start_ms + 20_000
    );
    assert!(
        calls.iter().any(|c| c.starts_with(&prime_start)),
        "{calls:#?}"
    );
}

/// Cancelled during the head start a longer lead adds: the fault was armed and sent ahead
/// but never issued, so nothing acts on the node, its self-restore is disarmed and the
/// journal is left empty.
#[tokio::test(start_paused = true)]
async fn cancelled_during_the_head_start_the_armed_fault_is_withdrawn() {
    let h = Harness::new(&STOP_START.replace("at: 10s", "at: 0s"));
    let mut world = Scripted {
        lead: Some(Duration::from_secs(10)),
        ..Scripted::default()
    };
    let out = h.run_cancelled_at(&mut world, 5).await;
    let calls = world.calls();
    assert!(calls.iter().any(|c| c.starts_with("prime 0")), "{calls:#?}");
    assert!(
        !calls.iter().any(|c| c.starts_with("act")),
        "an action was carried out: {calls:#?}"
    );
    assert!(index_of(&calls, "arm a") < index_of(&calls, "disarm a"));
    assert!(out.cancelled);
    assert_eq!(out.issued_ms[0], None);
    assert_eq!(h.journaled(), 0);
}

/// A signal while a step is armed inline (a step that waits on another is not armed
/// ahead; through the API arming starts a pod and takes seconds): the fault is never
/// issued, its self-restore is disarmed and the journal is left empty.
#[tokio::test(start_paused = true)]
async fn cancelled_during_a_slow_arm_the_fault_is_never_issued() {
    let h = Harness::new(
        "
name: scripted
description: a scripted run
targets:
  victim: {names: [a]}
steps:
  - {name: cordon, at: 10s, do: cordon, target: victim}
  - {name: stop, after: cordon, do: kubelet-stop, target: victim, timeout: 30s}
  - {name: start, at: 60s, do: kubelet-start, target: victim}
expect:
  - {name: node stays, node: victim, never: Unknown}
",
    );
    let mut world = Scripted {
        // The cordon's arming is quick; the stop's takes 8 s, and the signal comes in it.
        arming: Mutex::new(VecDeque::from([
            Call::Ok,
            Call::Slow(Duration::from_secs(8)),
        ])),
        ..Scripted::default()
    };
    let out = h.run_cancelled_at(&mut world, 14).await;
    let calls = world.calls();
    assert!(calls.iter().any(|c| c == "act cordon on a"), "{calls:#?}");
    assert!(
        !calls.iter().any(|c| c == "act stop on a"),
        "the kubelet stop was issued after the signal: {calls:#?}"
    );
    assert!(out.cancelled);
    assert_eq!(out.issued_ms[1], None);
    assert_eq!(h.journaled(), 0, "{calls:#?}");
}

#[tokio::test(start_paused = true)]
async fn cancelled_while_beginning_no_fault_is_injected() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted {
        begin: VecDeque::from([Call::UntilCancelled]),
        ..Scripted::default()
    };
    let out = h.run_cancelled_at(&mut world, 5).await;
    let calls = world.calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("act") || c.starts_with("arm")),
        "{calls:#?}"
    );
    assert_eq!(out.end, Some(End::Cancelled));
    assert!(out.cancelled);
    assert_eq!(calls.last().map(String::as_str), Some("end"));
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_world_that_cannot_begin_injects_nothing_and_still_ends() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted {
        begin: VecDeque::from([Call::Fail("snapshot: API down")]),
        ..Scripted::default()
    };
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    assert_eq!(world.calls(), ["begin", "end"]);
    assert_eq!(out.errors, ["snapshot: API down"]);
    assert_eq!(out.start_ms, None);
}

#[tokio::test(start_paused = true)]
async fn a_self_restore_that_cannot_be_armed_refuses_the_fault_with_the_worlds_cause() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(dir.path().join("journal.json")).unwrap();
    let mut ledger = Ledger::new(Some(journal), "c", "r");
    let world = Scripted {
        arming: Mutex::new(VecDeque::from([
            Call::Ok,
            Call::Fail("ssh: no route to host"),
        ])),
        ..Scripted::default()
    };
    let refused = ledger
        .before_faults(
            &world,
            "stop",
            &["a", "b"],
            &Action::KubeletStop,
            Duration::from_secs(60),
        )
        .await
        .expect_err("one node cannot be armed");
    assert!(
        matches!(
            &refused,
            crate::run::floor::ledger::LedgerError::Arm {
                node,
                reason: SelfRestoreError::Scripted("ssh: no route to host"),
            } if node == "b"
        ),
        "{refused:?}"
    );
    assert_eq!(
        refused.to_string(),
        "cannot arm the self-restore on b, so the fault is not injected: ssh: no route to host"
    );
    // All or nothing: the node that was armed is disarmed again.
    assert!(
        world.calls().contains(&"disarm a".to_string()),
        "{:?}",
        world.calls()
    );
    assert!(ledger.active().is_empty());
}

#[tokio::test(start_paused = true)]
async fn cancelled_before_the_first_step_nothing_is_armed_or_acted() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted::default();
    let out = h.run_cancelled_at(&mut world, 4).await;
    let calls = world.calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("act") || c.starts_with("arm")),
        "{calls:#?}"
    );
    assert_eq!(out.end, Some(End::Cancelled));
    assert_eq!(out.issued_ms, [None, None]);
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn cancelled_after_arming_ahead_the_armed_fault_is_withdrawn() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted::default();
    let cancel = CancellationToken::new();
    // Armed 3 s ahead of its 10 s offset, cancelled at 8 s: never issued.
    cancel_after(&cancel, 8);
    let out = h.run(&mut world, cancel, RunEvents::default()).await;
    let calls = world.calls();
    assert!(index_of(&calls, "arm a") < index_of(&calls, "disarm a"));
    assert!(!calls.iter().any(|c| c.starts_with("act")), "{calls:#?}");
    assert_eq!(out.end, Some(End::Cancelled));
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn cancelled_while_an_action_runs_it_finishes_and_is_undone() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted::default().on("stop", &[Call::Slow(Duration::from_secs(5))]);
    let out = h.run_cancelled_at(&mut world, 12).await;
    let calls = world.calls();
    // The action is not dropped half-way: it ends, then the safety net undoes it.
    assert!(index_of(&calls, "done stop on a: Ok(())") < index_of(&calls, "act undo stop on a"));
    assert!(index_of(&calls, "act undo stop on a") < index_of(&calls, "disarm a"));
    assert!(!calls.contains(&"act start on a".to_string()), "{calls:#?}");
    assert!(calls.contains(&"after undo (interrupted: true)".to_string()));
    assert_eq!(out.end, Some(End::Cancelled));
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn cancelled_while_waiting_on_a_condition_the_fault_before_it_is_undone() {
    let h = Harness::new(
        "
name: scripted
description: a scripted run
targets:
  victim: {names: [a]}
steps:
  - {name: stop, at: 0s, do: kubelet-stop, target: victim}
  - name: start
    when: {node: victim, is: Unknown}
    do: kubelet-start
    target: victim
    timeout: 10m
expect:
  - {name: node stays, node: victim, never: Unknown}
",
    );
    let mut world = Scripted::default();
    let out = h.run_cancelled_at(&mut world, 30).await;
    let calls = world.calls();
    assert!(index_of(&calls, "act stop on a") < index_of(&calls, "act undo stop on a"));
    assert_eq!(out.end, Some(End::Cancelled));
    assert_eq!(out.issued_ms[1], None);
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn cancelled_while_the_planned_undo_runs_the_undo_completes() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted::default().on("start", &[Call::Slow(Duration::from_secs(5))]);
    let out = h.run_cancelled_at(&mut world, 42).await;
    let calls = world.calls();
    assert!(index_of(&calls, "done start on a: Ok(())") < index_of(&calls, "disarm a"));
    assert!(
        !calls.iter().any(|c| c.starts_with("act undo")),
        "{calls:#?}"
    );
    assert_eq!(out.end, Some(End::Cancelled));
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn sighup_with_a_dead_terminal_cancels_and_the_fault_is_undone() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted::default();
    let cancel = CancellationToken::new();
    let hangup = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(20)).await;
        crate::run::signals::tests_support::hangup_with_dead_terminal(&hangup);
    });
    let out = h.run(&mut world, cancel, RunEvents::default()).await;
    let calls = world.calls();
    assert!(index_of(&calls, "act stop on a") < index_of(&calls, "act undo stop on a"));
    assert_eq!(out.end, Some(End::Cancelled));
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_abort_that_trips_while_an_action_runs_ends_the_run_and_undoes() {
    let h = Harness::new(
        "
name: scripted
description: a scripted run
targets:
  victim: {names: [a]}
abort:
  nodeNotReady: 0s
steps:
  - {name: stop, at: 10s, do: kubelet-stop, target: victim}
  - {name: start, at: 40s, do: kubelet-start, target: victim}
expect:
  - {name: node stays, node: victim, never: Unknown}
",
    );
    let mut world = Scripted::default().on("stop", &[Call::Slow(Duration::from_secs(5))]);
    let node_b = |ready| Event::Node {
        name: "b".into(),
        before: None,
        after: Some(NodeState {
            ready,
            ready_since: None,
            taints: Vec::new(),
            unschedulable: false,
            zone: None,
            shutting_down: false,
        }),
    };
    // Another node, Ready at the start, goes Unknown while the kubelet stop runs.
    world.initial = vec![node_b(ConditionStatus::True)];
    world
        .during
        .insert("stop".into(), vec![node_b(ConditionStatus::Unknown)]);
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    let calls = world.calls();
    assert!(matches!(out.end, Some(End::Aborted(_))), "{:?}", out.end);
    assert!(out.aborted.is_some());
    assert!(index_of(&calls, "done stop on a: Ok(())") < index_of(&calls, "act undo stop on a"));
    assert!(!calls.contains(&"act start on a".to_string()), "{calls:#?}");
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_proof_that_never_arrives_does_not_hold_the_run() {
    let h = Harness::new(STOP_START);
    // No proof entry at all: the run goes to its planned end and undoes as planned.
    let mut world = Scripted::default();
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    assert_eq!(out.end, Some(End::Observed { all_decided: false }));
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_proof_that_says_not_in_effect_ends_the_run_and_undoes() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted {
        proof: Some(StepPhase::NotConfirmed {
            evidence: "kubelet still active".into(),
        }),
        ..Scripted::default()
    };
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    assert!(
        matches!(out.end, Some(End::FaultNotInEffect { .. })),
        "{:?}",
        out.end
    );
    let calls = world.calls();
    assert!(index_of(&calls, "act stop on a") < index_of(&calls, "act undo stop on a"));
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_undo_that_fails_twice_then_succeeds_is_retried_and_cleared() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted::default().on(
        "undo stop",
        &[
            Call::Fail("ssh: connection refused"),
            Call::Fail("ssh: connection refused"),
            Call::Ok,
        ],
    );
    let out = h.run_cancelled_at(&mut world, 20).await;
    let calls = world.calls();
    let undos = calls
        .iter()
        .filter(|c| c.starts_with("act undo stop"))
        .count();
    assert_eq!(undos, 3, "{calls:#?}");
    assert!(calls.contains(&"disarm a".to_string()));
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(h.journaled(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_undo_that_always_fails_keeps_the_journal_entry_and_the_self_restore() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted::default().on(
        "undo stop",
        &[
            Call::Fail("no route to host"),
            Call::Fail("no route to host"),
            Call::Fail("no route to host"),
        ],
    );
    let out = h.run_cancelled_at(&mut world, 20).await;
    let calls = world.calls();
    assert!(
        !calls.contains(&"disarm a".to_string()),
        "the self-restore stays armed: {calls:#?}"
    );
    assert_eq!((h.journaled(), out.left_journaled), (1, 1));
    assert!(
        out.errors.iter().any(
            |e| e.contains("undo of `stop` on a failed after 3 attempt(s)")
                && e.contains("faultline restore")
        ),
        "{:?}",
        out.errors
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_whose_command_outlives_its_timeout_stays_journaled_and_armed() {
    let h = Harness::new(STOP_START);
    let mut world = Scripted::default().on("stop", &[Call::Hang]);
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    let calls = world.calls();
    // The loop stopped waiting (timeout 30 s + grace), the undo was tried, and the fault
    // stays for `restore`: the command may still land after the undo.
    assert!(
        matches!(out.end, Some(End::StepFailed { .. })),
        "{:?}",
        out.end
    );
    assert!(
        calls.contains(&"act undo stop on a".to_string()),
        "{calls:#?}"
    );
    assert!(!calls.contains(&"disarm a".to_string()), "{calls:#?}");
    assert_eq!((h.journaled(), out.left_journaled), (1, 1));
    assert!(
        out.errors
            .iter()
            .any(|e| e.starts_with("step `stop` on a:")),
        "{:?}",
        out.errors
    );
}

#[tokio::test(start_paused = true)]
async fn two_runs_sharing_a_journal_keep_each_others_faults() {
    let one = Harness::new(STOP_START);
    let mut two = Harness::new(STOP_START);
    two.journal = one.journal.clone();
    two.targets = BTreeMap::from([("victim".into(), vec!["b".into()])]);
    let journal = one.journal.clone();
    // While both kubelets are stopped (between 10 s and 40 s), both faults are journaled.
    let seen = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(25)).await;
        Journal::open(&journal).unwrap().active("c").len()
    });
    let (mut w1, mut w2) = (Scripted::default(), Scripted::default());
    let (a, b) = tokio::join!(
        one.run(&mut w1, CancellationToken::new(), RunEvents::default()),
        two.run(&mut w2, CancellationToken::new(), RunEvents::default())
    );
    assert_eq!(seen.await.unwrap(), 2);
    assert_eq!((a.left_journaled, b.left_journaled), (0, 0));
    assert_eq!(one.journaled(), 0);
}

/// Reboot `a` at 10 s (on kind, `docker stop` then `docker start`).
const REBOOT: &str = "
name: scripted-reboot
description: a scripted reboot
targets:
  victim: {names: [a]}
steps:
  - {name: reboot, at: 10s, do: reboot, target: victim, timeout: 30s}
expect:
  - {name: node stays, node: victim, never: Unknown}
";

#[tokio::test(start_paused = true)]
async fn an_out_of_band_reboot_is_journaled_while_it_runs_and_cleared_when_it_returns() {
    let h = Harness::new(REBOOT);
    let mut world = Scripted {
        reboot_powers_on: true,
        ..Scripted::default()
    }
    .on("reboot", &[Call::Slow(Duration::from_secs(8))]);
    let journal = h.journal.clone();
    let during = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(14)).await;
        Journal::open(&journal).unwrap().active("c")
    });
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    let during = during.await.unwrap();
    assert_eq!(during.len(), 1, "journaled while it runs");
    assert_eq!(
        (during[0].fault.as_str(), &during[0].undo),
        ("reboot", &Undo::PowerOn)
    );
    let calls = world.calls();
    assert!(index_of(&calls, "arm a") < index_of(&calls, "act reboot on a"));
    assert!(
        index_of(&calls, "done reboot on a: Ok(())") < index_of(&calls, "disarm a"),
        "{calls:#?}"
    );
    assert!(
        !calls.iter().any(|c| c.starts_with("power on")),
        "{calls:#?}"
    );
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!((h.journaled(), out.left_journaled), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_reboot_cut_off_between_stop_and_start_is_powered_on_by_the_safety_net() {
    let h = Harness::new(REBOOT);
    let mut world = Scripted {
        reboot_powers_on: true,
        ..Scripted::default()
    }
    .on(
        "reboot",
        &[Call::Fail("docker start: cannot connect to the daemon")],
    );
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    let calls = world.calls();
    assert!(
        index_of(&calls, "act reboot on a") < index_of(&calls, "power on a"),
        "{calls:#?}"
    );
    assert!(calls.contains(&"disarm a".to_string()), "{calls:#?}");
    assert!(
        matches!(out.end, Some(End::StepFailed { .. })),
        "{:?}",
        out.end
    );
    assert_eq!((h.journaled(), out.left_journaled), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn an_in_band_reboot_is_not_journaled() {
    let h = Harness::new(REBOOT);
    let mut world = Scripted::default();
    let out = h
        .run(&mut world, CancellationToken::new(), RunEvents::default())
        .await;
    let calls = world.calls();
    assert!(!calls.contains(&"arm a".to_string()), "{calls:#?}");
    assert!(out.errors.is_empty(), "{:?}", out.errors);
}

#[tokio::test(start_paused = true)]
async fn a_verdict_decided_when_observation_ends_is_announced_before_the_teardown() {
    use crate::events::{EventSink, RunEvent};
    let h = Harness::new(STOP_START);
    let (tx, rx) = std::sync::mpsc::channel();
    let events = EventSink::new(vec![tx]).for_run("scripted", None);
    let mut world = Scripted::default();
    h.run(&mut world, CancellationToken::new(), events).await;
    let events: Vec<_> = rx.try_iter().collect();
    let position = |what: &dyn Fn(&RunEvent) -> bool| {
        events
            .iter()
            .position(|e| what(e))
            .unwrap_or_else(|| panic!("not sent: {events:#?}"))
    };
    let verdict = position(&|e| {
        matches!(e, RunEvent::Entry { entry, .. }
            if matches!(&entry.event, Event::Verdict { name, .. } if name == "node stays"))
    });
    let teardown = position(&|e| {
        matches!(e, RunEvent::Entry { entry, .. }
            if matches!(&entry.event, Event::Note { message } if message.starts_with("teardown")))
    });
    assert!(verdict < teardown, "{events:#?}");
    // What the run waited for went to the events too: where observation ends, and the
    // open `never`, which only the end decides (so no deadline of its own).
    let progress: Vec<_> = events
        .iter()
        .filter_map(|e| match &**e {
            RunEvent::Progress { progress, .. } => Some(progress),
            _ => None,
        })
        .collect();
    assert!(!progress.is_empty(), "{events:#?}");
    assert!(
        progress.iter().all(|p| p.observe_until_ms.is_some()),
        "{progress:#?}"
    );
    assert!(
        progress.iter().all(|p| p
            .open
            .iter()
            .all(|o| o.name == "node stays" && o.deadline_ms.is_none())),
        "{progress:#?}"
    );
    assert!(
        progress.windows(2).all(|w| w[0] != w[1]),
        "sent only when it changed: {progress:#?}"
    );
}

/// The run-time interlock (issue 46) against this world.
mod interlock_tests;

/// Rolling steps (issue 46, item 1), expanded as a run expands them, against this world.
mod roll_tests;
