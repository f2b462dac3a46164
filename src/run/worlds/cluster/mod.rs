//! The real world: the Kubernetes API, the nodes over their transports, power drivers.
//!
//! It owns what a run holds on the cluster beside the loop: the observer and the tasks
//! that feed the timeline with it (probes, abort queries, the API's health, endpoint
//! switches), the snapshot taken before the first fault, the machine addresses a node
//! must come back with, and the proofs that each fault took effect.

mod access_pods;
pub(crate) mod act;
mod addresses;
mod companions;
pub(crate) mod restored;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use futures::future::join_all;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::AppliedObject;
use crate::cluster::leases;
use crate::cluster::snapshot::Snapshot;
use crate::execute::ArmedRestore;
use crate::experiment::fault as faults;
use crate::experiment::model::{Action, Experiment};
use crate::journal::Undo;
use crate::observe::{self, Clock};
use crate::run::floor::host_timed;
use crate::run::floor::proofs::{self, Baseline, Proofs};
use crate::run::preflight::prepare::Prepared;
use crate::run::preflight::setup;
use crate::run::shared_timeline::SharedTimeline;
use crate::run::world::{
    ARM_AHEAD_MS, ActError, ActResult, AfterFaultError, AfterUndo, BeginError, FaultAt,
    SelfRestoreError, World, journal_undo,
};
use crate::timeline::DownNode;
use act::Actor;
use addresses::MachineAddresses;
use companions::Companions;

/// How long before it is due a step carried through the API transport is armed: arming
/// its self-restore is an exec, and for a kubelet stop an undo watcher pod (about 2.5 s on
/// kind); sending the step ahead opens an exec in the pod kept on the node, or where none
/// is kept starts a pod first (about 1.5 s), which must fit in half of what is left
/// (`Executor::prime`).
const ARM_AHEAD_THROUGH_API: Duration = Duration::from_secs(10);

/// The node command of an action that can be sent ahead to wait on its nodes: one
/// carried to the node (a fault's or a step's own command), not out of band or through
/// the API.
fn sent_ahead(action: &Action) -> Option<crate::execute::NodeOp> {
    matches!(
        faults::info(action).via,
        faults::Via::Node(_) | faults::Via::StepCommand
    )
    .then(|| faults::node_op(action))
    .flatten()
}

/// A run's handles on a real cluster.
pub(crate) struct ClusterWorld<'a> {
    exp: &'a Experiment,
    settings: &'a crate::run::settings::RunSettings,
    prepared: &'a Prepared,
    /// What setup applied, deleted at the end when the experiment says so.
    applied: Vec<AppliedObject>,
    /// The tasks feeding the timeline, once begun.
    companions: Option<Companions>,
    /// The cluster before the first fault.
    before: Option<Snapshot>,
    /// Target machines' addresses before their first fault.
    addresses: MachineAddresses,
    /// What each node's proof compares with after the step: `(step, node)` → the reading.
    baselines: BTreeMap<(usize, String), Baseline>,
    /// Each fault's proof that it took effect, under way.
    proofs: Proofs,
    /// Each acted-on node's Lease as read just before its last undo: the restored check
    /// waits for a renewal after it.
    undo_marks: leases::Marks,
    /// How long the observer's first lists took.
    pub(crate) initial_sync_ms: u64,
    /// The undo watchers armed, by node: asked to undo when the fault's undo is due or
    /// the run must end it early ([`host_timed::watched`]).
    watchers: std::sync::Mutex<BTreeMap<String, ArmedRestore>>,
    /// For each node on its way back (the interlock asks): the return's offset, the Lease
    /// as last read, and how many renewals were seen since the first reading.
    returns: BTreeMap<String, (i64, leases::Mark, u32)>,
    /// The run's hold on the cluster lock: confirmed before each fault.
    hold: Option<crate::cluster::lock::LockHandle>,
}

impl<'a> ClusterWorld<'a> {
    /// The world of a prepared run whose setup applied `applied`.
    pub(crate) fn new(
        exp: &'a Experiment,
        settings: &'a crate::run::settings::RunSettings,
        prepared: &'a Prepared,
        applied: Vec<AppliedObject>,
        hold: Option<crate::cluster::lock::LockHandle>,
    ) -> Self {
        ClusterWorld {
            hold,
            exp,
            settings,
            prepared,
            applied,
            companions: None,
            before: None,
            addresses: MachineAddresses::default(),
            baselines: BTreeMap::new(),
            proofs: Proofs::new(settings.observe_mode),
            undo_marks: leases::Marks::new(),
            initial_sync_ms: 0,
            watchers: std::sync::Mutex::new(BTreeMap::new()),
            returns: BTreeMap::new(),
        }
    }

    fn actor(&self) -> Actor<'_> {
        Actor {
            executor: &self.prepared.executor,
            client: &self.prepared.client,
            targets: &self.prepared.targets,
        }
    }

    /// Reads the cluster before the first fault and saves it beside the journal.
    async fn snapshot(
        &self,
        timeline: &SharedTimeline,
    ) -> Result<Snapshot, crate::cluster::ClusterError> {
        let p = self.prepared;
        let namespaces = match &p.scope.namespaces {
            observe::Namespaces::All => None,
            observe::Namespaces::Only(list) => Some(list.as_slice()),
        };
        let inventory = p.executor.inventory();
        let heartbeats = crate::run::preflight::prepare::acted_on_in_band(self.exp, &p.targets);
        let kubelet_nodes: Vec<String> = heartbeats
            .iter()
            .filter(|n| {
                inventory
                    .node(n)
                    .is_some_and(|a| a.commands.has(faults::CommandKey::KubeletStatus))
            })
            .cloned()
            .collect();
        let mut before = restored::take_observed(
            timeline,
            &p.client,
            &p.executor,
            &p.cluster.name,
            namespaces,
            &kubelet_nodes,
        )
        .await?;
        before.heartbeats = heartbeats;
        let path =
            crate::cluster::snapshot::path_beside(&self.settings.journal_path, &p.cluster.name);
        if let Err(e) = crate::cluster::snapshot::save(&before, &path) {
            timeline.note(format!(
                "could not keep the cluster snapshot at {} for `faultline restore`: {e}",
                path.display()
            ));
        }
        Ok(before)
    }
}

impl ClusterWorld<'_> {
    /// Arms the planned undo of a kubelet stop on a node reached through the API: the
    /// timer (the backstop), then its undo watcher. A watcher that cannot start (no `curl`
    /// on the node, the API server out of its reach) withdraws the timer and refuses the
    /// fault: an interrupt could not end it before its time.
    async fn arm_watched(
        &self,
        node: &str,
        op: &crate::execute::NodeOp,
        after: Duration,
        token: &str,
    ) -> Result<Option<ArmedRestore>, crate::execute::ExecError> {
        let executor = &self.prepared.executor;
        let mut armed = executor.arm_restore(node, op, after, token).await?;
        match executor.start_undo_watcher(node, op, after, token).await {
            Ok(watcher) => {
                armed.watcher = Some(watcher);
                if let Ok(mut watchers) = self.watchers.lock() {
                    watchers.insert(node.to_string(), armed.clone());
                }
                Ok(Some(armed))
            }
            Err(e) => {
                if let Err(d) = executor.disarm(node, &armed).await {
                    tracing::warn!(node, "could not withdraw the timer armed for {token}: {d}");
                }
                Err(e)
            }
        }
    }

    /// Asks the undo watcher on `node` to undo now; says how the undo is to come, for the
    /// confirmation's message.
    async fn ask_watcher(&self, node: &str) -> String {
        let armed = self.watchers.lock().ok().and_then(|w| w.get(node).cloned());
        let Some(armed) = armed else {
            return "the timer armed before the fault".to_string();
        };
        match self.prepared.executor.ask_undo(node, &armed).await {
            Ok(true) => "its undo watcher, asked through the API (the timer armed before \
                         the fault is the backstop)"
                .to_string(),
            Ok(false) => "the timer armed before the fault".to_string(),
            Err(e) => {
                format!("the timer armed before the fault (its watcher could not be asked: {e})")
            }
        }
    }
}

impl World for ClusterWorld<'_> {
    fn nodes_seen_down(&self, timeline: &SharedTimeline) -> Vec<DownNode> {
        // The observer's node watch puts every change of a node's Ready condition on the
        // timeline: its last state is the observer's, without another call to the API.
        crate::run::world::seen_down_on(timeline)
    }

    async fn renewals_since(&mut self, node: &str, since_ms: i64) -> Option<u32> {
        // Renewals are counted as changes of renewTime read by this machine's clock: no
        // skew between the node's clock and this one matters.
        let name = node.to_string();
        let now = leases::read(&self.prepared.client, std::iter::once(&name))
            .await
            .remove(node)?;
        match self.returns.get_mut(node) {
            Some((since, last, seen)) if *since == since_ms => {
                if matches!(&now, Ok(Some(_))) && now != *last {
                    *seen += 1;
                    *last = now;
                }
                Some(*seen)
            }
            _ => {
                self.returns.insert(name, (since_ms, now, 0));
                Some(0)
            }
        }
    }

    async fn begin(
        &mut self,
        timeline: &SharedTimeline,
        cancel: &CancellationToken,
    ) -> Result<Vec<String>, BeginError> {
        let p = self.prepared;
        let mut problems = Vec::new();
        let clock = Clock::new(timeline.zero(), timeline.wall_zero());
        let mode = observe::resolve_first_lists(&p.client, self.settings.observe_mode).await;
        match mode {
            observe::ObserveMode::WatchStreamed => {
                timeline.note("observer: first lists streamed (sendInitialEvents)")
            }
            observe::ObserveMode::WatchPaged => timeline.note(
                "observer: first lists in pages of 500 (the API server does not serve \
                 streaming lists, or --observe watch-paged)",
            ),
            _ => {}
        }
        let stream = observe::observe(p.client.clone(), &p.scope, clock, mode);
        let sink = timeline.clone();
        let (ready_tx, ready) = tokio::sync::watch::channel(false);
        let observer = tokio::spawn(async move {
            let mut stream = stream;
            while let Some(entry) = stream.next().await {
                let is_ready = companions::is_observer_ready(&entry.event);
                sink.push(entry);
                if is_ready {
                    let _ = ready_tx.send(true);
                }
            }
        });
        let switches = p
            .failover
            .as_ref()
            .map(|f| companions::record_switches(timeline, f));
        let syncing = Instant::now();
        let lifetime = access_pods::kept_lifetime(self.exp, p, self.settings.restore_margin);
        let keeping = access_pods::keep(self.exp, p, lifetime, timeline, cancel);
        let synced = async {
            companions::wait_for_initial_state(timeline, ready, cancel).await;
            self.initial_sync_ms = u64::try_from(syncing.elapsed().as_millis()).unwrap_or(u64::MAX);
        };
        tokio::join!(keeping, synced);
        let probes = match companions::start_probes(self.exp, p, timeline) {
            Ok(probes) => probes,
            // The run goes on without probes; the error is in the record.
            Err(e) => {
                problems.push(format!("probes: {e}"));
                None
            }
        };
        let mut companions = Companions {
            observer,
            switches,
            probes,
            queries: None,
            api_watch: None,
        };
        // Guards that cannot see must not let faults in: no run without its queries.
        match companions::start_queries(self.exp, &self.settings.inventory, timeline) {
            Ok(q) => companions.queries = q,
            Err(e) => {
                self.companions = Some(companions);
                return Err(BeginError::AbortConditions(e));
            }
        }
        companions.api_watch = companions::watch_api(self.exp, &p.client, timeline);
        self.companions = Some(companions);
        // What the run promises to leave as it found it, read before the first fault and
        // kept beside the journal for `restore` should the run be killed.
        let before = self.snapshot(timeline).await?;
        self.before = Some(before);
        Ok(problems)
    }

    async fn before_fault(&mut self, step: usize, action: &Action, nodes: &[&str]) {
        let executor = &self.prepared.executor;
        // Logged in ahead, so that the step's commands start when it is due; a node not
        // reachable now is tried again, and reported, by the command itself.
        if faults::node_op(action).is_some() {
            for (node, opened) in executor.open_sessions(nodes).await {
                if let Err(e) = opened {
                    tracing::debug!(node, "no session opened ahead of step {step}: {e}");
                }
            }
        }
        let remember = async {
            if faults::takes_node_down(action) {
                self.addresses.remember(executor, nodes).await;
            }
        };
        let read_before = join_all(nodes.iter().map(|node| async move {
            (
                node.to_string(),
                proofs::baseline(executor, action, node).await,
            )
        }));
        let ((), before) = tokio::join!(remember, read_before);
        for (node, baseline) in before {
            if let Some(b) = baseline {
                self.baselines.insert((step, node), b);
            }
        }
    }

    async fn prime(
        &self,
        step: usize,
        action: &Action,
        nodes: &[&str],
        timeout: Duration,
        due_in: Duration,
    ) {
        let Some(op) = sent_ahead(action) else {
            return;
        };
        let executor = self.prepared.executor.clone();
        let nodes: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        let due = std::time::Instant::now() + due_in;
        // Beside the loop, and given up well before the step is due: sending a step
        // ahead must never delay this or any other step. One not primed in time (or at
        // all) is sent the ordinary way when it is due.
        let within = due_in / 2;
        tokio::spawn(async move {
            join_all(nodes.iter().map(|node| {
                let (op, executor) = (&op, &executor);
                async move {
                    if let Err(e) = executor.prime(node, op, timeout, due, within).await {
                        tracing::debug!(node, "step {step} not sent ahead: {e}");
                    }
                }
            }))
            .await;
        });
    }

    async fn release(&self, _step: usize, action: &Action, nodes: &[&str], timeout: Duration) {
        if let Some(op) = sent_ahead(action) {
            self.prepared.executor.release(nodes, &op, timeout).await;
        }
    }

    async fn arm_restore(
        &self,
        node: &str,
        undo: &Undo,
        after: Duration,
        token: &str,
    ) -> Result<Option<ArmedRestore>, SelfRestoreError> {
        let executor = &self.prepared.executor;
        let armed = match undo {
            Undo::Node(op) if host_timed::watched(executor, node, op) => {
                self.arm_watched(node, op, after, token).await
            }
            Undo::Node(op) => executor.arm_restore(node, op, after, token).await.map(Some),
            // Power-on is out of band: armed where faultline runs, when it can be.
            Undo::PowerOn => executor.arm_power_on(node, after, token).await,
            // API undos need the API: `restore` does them.
            Undo::Api(_) => Ok(None),
        };
        Ok(armed?)
    }

    async fn may_fault(&self) -> Result<(), crate::cluster::lock::LockLost> {
        match &self.hold {
            Some(hold) => hold.confirm().await,
            None => Ok(()),
        }
    }

    async fn end_cut(&self, action: &Action, node: Option<&str>) -> bool {
        let carried_to_node = matches!(
            faults::info(action).via,
            faults::Via::Node(_) | faults::Via::StepCommand | faults::Via::Power(_)
        );
        let Some(node) = node.filter(|_| carried_to_node) else {
            return true;
        };
        match self.prepared.executor.end_run_commands(node).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(node, "could not end the commands cut short: {e}");
                false
            }
        }
    }

    async fn keep_on_lock(&self, entries: &[crate::journal::Entry]) {
        let Some(hold) = &self.hold else { return };
        let text = (!entries.is_empty())
            .then(|| serde_json::to_string(entries).ok())
            .flatten();
        if let Err(e) = hold.note_api_undos(text).await {
            tracing::warn!("{e}");
        }
    }

    fn still_may_fault(&self) -> Result<(), crate::cluster::lock::LockLost> {
        match &self.hold {
            Some(hold) => hold.held_here(),
            None => Ok(()),
        }
    }

    fn journal_undo(&self, node: &str, fault: &Action) -> Option<Undo> {
        match fault {
            Action::Reboot => crate::journal::reboot_undo(&self.prepared.executor, node),
            _ => journal_undo(fault),
        }
    }

    fn arm_ahead(&self, action: &Action, nodes: &[&str]) -> Duration {
        let executor = &self.prepared.executor;
        let primed_through_api = sent_ahead(action).is_some()
            && nodes.iter().any(|node| {
                executor.through_api(node) && !host_timed::undone_on_host(executor, node, action)
            });
        if primed_through_api {
            ARM_AHEAD_THROUGH_API
        } else {
            Duration::from_millis(ARM_AHEAD_MS.unsigned_abs())
        }
    }

    fn undo_armed_on_host(&self, node: &str, fault: &Action) -> bool {
        host_timed::cuts_transport(&self.prepared.executor, node, fault)
    }

    async fn disarm(&self, node: &str, armed: &ArmedRestore) -> Result<(), SelfRestoreError> {
        if armed.watcher.is_some()
            && let Ok(mut watchers) = self.watchers.lock()
            && watchers.get(node).is_some_and(|w| w.token == armed.token)
        {
            watchers.remove(node);
        }
        self.prepared
            .executor
            .disarm(node, armed)
            .await
            .map(drop)
            .map_err(SelfRestoreError::from)
    }

    async fn act(
        &self,
        _step: &str,
        action: &Action,
        node: Option<&str>,
        timeout: Duration,
    ) -> Result<ActResult, ActError> {
        // Through the API, the undo of a fault that cuts the transport was armed on the
        // node beforehand: it is confirmed through the API instead of carried.
        if let Some(n) = node
            && host_timed::undone_on_host(&self.prepared.executor, n, action)
        {
            let how = self.ask_watcher(n).await;
            return host_timed::confirm(&self.prepared.client, n, timeout, &how).await;
        }
        self.actor().act(action, node, timeout).await
    }

    async fn after_fault(
        &mut self,
        fault: FaultAt<'_>,
        timeline: &SharedTimeline,
    ) -> Result<(), AfterFaultError> {
        let baseline = self.baselines.remove(&(fault.step, fault.node.to_string()));
        self.proofs.start(
            &self.prepared.executor,
            &self.prepared.client,
            timeline,
            fault,
            baseline,
        );
        if faults::restarts_machine(fault.action) {
            self.addresses
                .check(&self.prepared.executor, fault.node)
                .await?;
        }
        Ok(())
    }

    async fn before_undo(&mut self, action: &Action, nodes: &[&str]) {
        self.proofs.settle(action, nodes).await;
    }

    async fn mark_before_undo(&mut self, nodes: &[&str]) {
        // Read before the undo: while the fault holds the kubelet cannot renew, so any
        // renewal seen later came after the undo.
        let watched = self.before.as_ref().map(|b| &b.heartbeats);
        let marked: Vec<&String> = watched
            .into_iter()
            .flatten()
            .filter(|n| nodes.contains(&n.as_str()))
            .collect();
        if !marked.is_empty() {
            let marks = leases::read(&self.prepared.client, marked).await;
            self.undo_marks.extend(marks);
        }
    }

    async fn stop_proofs(&mut self) {
        self.proofs.stop_all().await;
    }

    async fn after_undo(&mut self, timeline: &SharedTimeline, interrupted: bool) -> AfterUndo {
        let problems = self.addresses.check_all(&self.prepared.executor).await;
        let Some(before) = &self.before else {
            return AfterUndo {
                problems,
                restored: None,
            };
        };
        // Interrupted: one look, no wait (whoever pressed Ctrl-C wants the prompt back).
        let settle = if interrupted {
            Duration::ZERO
        } else {
            restored::settle_bound(self.settings.restore_margin, &self.prepared.cluster.timers)
        };
        let check = restored::check_observed(
            timeline,
            before,
            &self.prepared.client,
            &self.prepared.executor,
            settle,
            &self.undo_marks,
        )
        .await;
        timeline.record(crate::timeline::Event::Restored {
            ok: check.ok,
            differences: check.differences.clone(),
            waited_ms: check.waited_ms,
        });
        if check.ok {
            let path = crate::cluster::snapshot::path_beside(
                &self.settings.journal_path,
                &self.prepared.cluster.name,
            );
            let _ = std::fs::remove_file(path);
        }
        AfterUndo {
            problems,
            restored: Some(check),
        }
    }

    async fn end(&mut self, timeline: &SharedTimeline) -> Vec<String> {
        let mut errors = Vec::new();
        if self.exp.teardown.delete_manifests {
            match setup::teardown(&self.prepared.client, &self.applied).await {
                Ok(()) => timeline.note("teardown: setup objects deleted"),
                Err(e) => errors.push(format!("teardown: {e}")),
            }
        }
        access_pods::delete(&self.prepared.executor, timeline).await;
        if let Some(companions) = self.companions.take() {
            companions.stop().await;
        }
        errors
    }
}
