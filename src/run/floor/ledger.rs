//! The run's active faults: journaled before injection, self-restores armed on the node
//! where it can undo the fault itself, cleared when the undo ran, and undone with retries
//! by the safety net at the end of a run, on a signal, or on an error.

use std::time::Duration;

use chrono::Utc;
use futures::future::join_all;
use tokio::time::Instant;

use crate::execute::ArmedRestore;
use crate::experiment::fault::{action_name, inverse, undoes};
use crate::experiment::model::Action;
use crate::journal::{
    Entry as JournalEntry, Journal, JournalError, RetryPolicy, Undo, undo_with_retries,
};
use crate::run::world::{ActResult, SelfRestoreError, World};

/// One fault faultline has injected and not yet undone.
#[derive(Debug, Clone)]
pub(crate) struct ActiveFault {
    /// Journal id, also the self-restore token.
    pub id: String,
    /// Step that injected it.
    pub step: String,
    /// Node it is on.
    pub node: String,
    /// The fault.
    pub fault: Action,
    /// What the safety net runs to undo it: the fault's inverse, or for a fault that is
    /// over when its step returns (a reboot) what brings the node back if it was cut off
    /// midway (power on).
    pub undo: Action,
    /// The self-restore armed on the node, if any.
    pub armed: Option<ArmedRestore>,
    /// The step's command did not come back within its timeout: it may still be running
    /// on the node, so an undo now may come before it. Its journal entry and self-restore
    /// are kept even after a successful undo, for `restore` and the node to finish.
    pub may_still_run: bool,
    /// The earliest its self-restore can fire: when arming began, plus the whole seconds
    /// it was armed for (the node counts them from later, when its timer was set).
    /// `None`: nothing armed. A fault issued after it would outlast its own backstop
    /// ([`Ledger::backstops_within`]).
    pub backstop_at: Option<Instant>,
}

/// What the safety net did for one fault.
#[derive(Debug, Clone)]
pub(crate) struct UndoReport {
    /// The fault.
    pub fault: ActiveFault,
    /// Result of the last attempt.
    pub result: Result<ActResult, String>,
    /// Attempts made.
    pub attempts: u32,
}

/// One node's fault journaled and armed by [`Ledger::before_faults`], as the run reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Armed<'n> {
    /// The node.
    pub(crate) node: &'n str,
    /// Its id in the fault journal.
    pub(crate) journal_id: String,
    /// A self-restore was armed on the node.
    pub(crate) self_restore: bool,
    /// Only the node's timer can end the fault, this many seconds from now.
    pub(crate) ends_by_timer_in_secs: Option<u64>,
}

/// Why a fault could not be prepared; the fault is then not injected.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LedgerError {
    /// The journal could not be written: without it a crash could leave the node broken.
    #[error("cannot write the fault journal, so the fault is not injected: {0}")]
    Journal(#[from] JournalError),
    /// Arming the self-restore on the node failed.
    #[error("cannot arm the self-restore on {node}, so the fault is not injected: {reason}")]
    Arm {
        /// Node.
        node: String,
        /// Cause.
        reason: SelfRestoreError,
    },
}

/// The active faults of one run.
pub(crate) struct Ledger {
    /// `None` for a rehearsal, which injects nothing.
    journal: Option<Journal>,
    cluster: String,
    run_id: String,
    seq: u32,
    active: Vec<ActiveFault>,
    /// The entries of the active faults undone through the API, as kept on the cluster
    /// lock ([`World::keep_on_lock`]): no timer on a node ends them.
    on_lock: Vec<JournalEntry>,
}

/// The action the safety net runs to undo `fault`, journaled with `undo`: the fault's
/// inverse, or power on for a fault the table gives none (a reboot cut off between its
/// stop and its start).
fn undo_action(fault: &Action, undo: &Undo) -> Option<Action> {
    inverse(fault).or_else(|| matches!(undo, Undo::PowerOn).then_some(Action::PowerOn))
}

impl Ledger {
    /// A ledger writing to `journal` (`None`: nothing is kept on disk, for a rehearsal)
    /// for the cluster named `cluster`.
    pub(crate) fn new(journal: Option<Journal>, cluster: &str, run_id: &str) -> Self {
        Ledger {
            journal,
            cluster: cluster.to_string(),
            run_id: run_id.to_string(),
            seq: 0,
            active: Vec::new(),
            on_lock: Vec::new(),
        }
    }

    /// Faults injected and not yet undone.
    pub(crate) fn active(&self) -> &[ActiveFault] {
        &self.active
    }

    /// Before injecting `fault` on `nodes`: journal it for each node the world can undo it
    /// on (one durable write) and, where a node can undo the fault itself, arm a restore
    /// there that fires after `restore_after` even if faultline dies. The nodes are armed at
    /// once, so a step on twenty nodes waits for the slowest one, not for the sum. All or
    /// nothing: when one node cannot be armed, the others are disarmed and nothing stays
    /// journaled.
    ///
    /// Returns, for each node journaled, in the order of `nodes`: the node, its journal id
    /// and whether a restore was armed on it; empty for actions that are not faults.
    pub(crate) async fn before_faults<'n>(
        &mut self,
        world: &impl World,
        step: &str,
        nodes: &[&'n str],
        fault: &Action,
        restore_after: Duration,
    ) -> Result<Vec<Armed<'n>>, LedgerError> {
        let mut undos = Vec::new();
        let mut entries: Vec<JournalEntry> = Vec::new();
        let arming_from = Instant::now();
        for node in nodes {
            let Some(undo) = world.journal_undo(node, fault) else {
                continue;
            };
            let Some(action) = undo_action(fault, &undo) else {
                continue;
            };
            self.seq += 1;
            entries.push(JournalEntry {
                id: format!("{}-{}", self.run_id, self.seq),
                cluster: self.cluster.clone(),
                node: node.to_string(),
                fault: action_name(fault).to_string(),
                undo: undo.clone(),
                injected_at: Utc::now(),
                deadline: chrono::Duration::from_std(restore_after)
                    .ok()
                    .and_then(|d| Utc::now().checked_add_signed(d)),
                armed_restore: None,
            });
            undos.push((*node, undo, action));
        }
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        self.record(entries.clone())?;
        let through_api: Vec<JournalEntry> = entries
            .iter()
            .filter(|e| matches!(e.undo, Undo::Api(_)))
            .cloned()
            .collect();
        if !through_api.is_empty() {
            self.on_lock.extend(through_api);
            world.keep_on_lock(&self.on_lock).await;
        }
        let results = join_all(entries.iter().zip(&undos).map(|(entry, (_, undo, _))| {
            world.arm_restore(&entry.node, undo, restore_after, &entry.id)
        }))
        .await;
        let mut failure = None;
        for (entry, result) in entries.iter_mut().zip(results) {
            match result {
                Ok(armed) => entry.armed_restore = armed,
                Err(source) => {
                    failure.get_or_insert(LedgerError::Arm {
                        node: entry.node.clone(),
                        reason: source,
                    });
                }
            }
        }
        if let Some(failure) = failure {
            self.withdraw(world, &entries).await;
            return Err(failure);
        }
        if entries.iter().any(|e| e.armed_restore.is_some())
            && let Err(e) = self.record(entries.clone())
        {
            // Without the restores in the journal, `restore` could not disarm them.
            self.withdraw(world, &entries).await;
            return Err(e.into());
        }
        let mut out = Vec::with_capacity(entries.len());
        for (entry, (node, _, undo)) in entries.into_iter().zip(undos) {
            // Armed on the host because the fault cuts the node's transport, with no
            // watcher beside it: nothing but the node's timer reaches it.
            let ends_by_timer_in_secs = entry
                .armed_restore
                .as_ref()
                .filter(|a| a.watcher.is_none() && world.undo_armed_on_host(node, fault))
                .map(|a| a.after_secs);
            out.push(Armed {
                node,
                journal_id: entry.id.clone(),
                self_restore: entry.armed_restore.is_some(),
                ends_by_timer_in_secs,
            });
            let backstop_at = entry
                .armed_restore
                .as_ref()
                .map(|a| arming_from + Duration::from_secs(a.after_secs).min(restore_after));
            self.active.push(ActiveFault {
                backstop_at,
                id: entry.id,
                step: step.to_string(),
                node: entry.node,
                fault: fault.clone(),
                undo,
                armed: entry.armed_restore,
                may_still_run: false,
            });
        }
        Ok(out)
    }

    /// A step could not be armed everywhere: disarms the nodes that were and clears every
    /// entry, since none of the faults is injected.
    async fn withdraw(&mut self, world: &impl World, entries: &[JournalEntry]) {
        let parts = entries
            .iter()
            .map(|e| (e.node.as_str(), e.armed_restore.as_ref(), e.id.as_str()));
        self.release(world, parts.collect()).await;
    }

    /// Writes entries to the journal, when there is one.
    fn record(&mut self, entries: Vec<JournalEntry>) -> Result<(), JournalError> {
        match &mut self.journal {
            Some(journal) => journal.record_all(entries),
            None => Ok(()),
        }
    }

    /// The step that injected the faults `ids` did not come back in time: its command may
    /// still run on the node. They stay journaled and armed until `restore` (see
    /// [`ActiveFault::may_still_run`]).
    pub(crate) fn may_still_run(&mut self, ids: &[String]) {
        for f in &mut self.active {
            if ids.contains(&f.id) {
                f.may_still_run = true;
            }
        }
    }

    /// The commands of the faults `ids` were ended on their node after all (a stop cut
    /// them short, and the world confirmed nothing of them runs): their undo now comes
    /// after them, so a successful one may clear them as usual.
    pub(crate) fn ended(&mut self, ids: &[String]) {
        for f in &mut self.active {
            if ids.contains(&f.id) {
                f.may_still_run = false;
            }
        }
    }

    /// The journal ids of the active faults a step put on `node`.
    pub(crate) fn ids_of(&self, step: &str, node: &str) -> Vec<String> {
        self.active
            .iter()
            .filter(|f| f.step == step && f.node == node)
            .map(|f| f.id.clone())
            .collect()
    }

    /// The nodes where a fault of `step` has a self-restore that can fire within `lead`
    /// from now, each with the time left (zero when it may have fired already). Arming
    /// through the API starts a pod per node and can take longer than the time the
    /// restore was armed for; a fault issued then would land after its backstop fired,
    /// with nothing left to end it.
    pub(crate) fn backstops_within(&self, step: &str, lead: Duration) -> Vec<(String, Duration)> {
        let now = Instant::now();
        self.active
            .iter()
            .filter(|f| f.step == step)
            .filter_map(|f| {
                let left = f.backstop_at?.saturating_duration_since(now);
                (left < lead).then(|| (f.node.clone(), left))
            })
            .collect()
    }

    /// Faults armed but never injected (their step was not issued): disarmed, cleared and
    /// dropped from the ledger, so the safety net does not undo what never happened.
    pub(crate) async fn forget(&mut self, world: &impl World, ids: &[String]) {
        let (gone, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.active)
            .into_iter()
            .partition(|f| ids.contains(&f.id));
        self.active = keep;
        self.settle(world, &gone).await;
    }

    /// A planned step ran `action` on `nodes` successfully: every fault there that it
    /// undoes is settled (self-restores disarmed, at once; journal cleared). Returns them.
    pub(crate) async fn undone_by(
        &mut self,
        world: &impl World,
        action: &Action,
        nodes: &[&str],
    ) -> Vec<ActiveFault> {
        let (done, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.active)
            .into_iter()
            .partition(|f| nodes.contains(&f.node.as_str()) && undoes(action, &f.fault));
        // A fault whose command may still run is undone but stays journaled and armed.
        let (settled, kept): (Vec<_>, Vec<_>) =
            done.iter().cloned().partition(|f| !f.may_still_run);
        self.active = keep;
        self.active.extend(kept.into_iter().map(|f| ActiveFault {
            may_still_run: true,
            ..f
        }));
        self.settle(world, &settled).await;
        done
    }

    /// Step `step` came back successfully on `nodes`: a fault of it that is over when its
    /// command returns (a reboot, journaled only while it runs, since one cut off between
    /// its stop and its start leaves the node off) is settled. Returns them.
    pub(crate) async fn finished(
        &mut self,
        world: &impl World,
        step: &str,
        nodes: &[&str],
    ) -> Vec<ActiveFault> {
        let (over, keep): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.active).into_iter().partition(|f| {
                f.step == step
                    && nodes.contains(&f.node.as_str())
                    && inverse(&f.fault).is_none()
                    && !f.may_still_run
            });
        self.active = keep;
        self.settle(world, &over).await;
        over
    }

    /// The safety net: undoes every fault still active, all nodes at once and each node's
    /// faults newest first, retrying as `restore` does ([`RetryPolicy::default`], each try
    /// limited to `timeout`); a fault whose undo keeps failing stays in the journal for
    /// `restore`. Reports come back node by node, newest fault first.
    pub(crate) async fn undo_all(
        &mut self,
        world: &impl World,
        timeout: Duration,
    ) -> Vec<UndoReport> {
        let policy = RetryPolicy {
            timeout,
            ..RetryPolicy::default()
        };
        let mut by_node: Vec<(String, Vec<ActiveFault>)> = Vec::new();
        while let Some(fault) = self.active.pop() {
            match by_node.iter_mut().find(|(n, _)| *n == fault.node) {
                Some((_, faults)) => faults.push(fault),
                None => by_node.push((fault.node.clone(), vec![fault])),
            }
        }
        let policy = &policy;
        let per_node = join_all(by_node.into_iter().map(|(_, faults)| async move {
            let mut reports = Vec::new();
            for fault in faults {
                let undo = fault.undo.clone();
                let step = format!("undo {}", fault.step);
                let attempt = async || {
                    world
                        .act(&step, &undo, Some(&fault.node), policy.timeout)
                        .await
                        .map_err(|e| e.to_string())
                };
                let name = action_name(&fault.fault);
                let (result, attempts) =
                    undo_with_retries(policy, &fault.node, name, attempt).await;
                reports.push(UndoReport {
                    fault,
                    result,
                    attempts,
                });
            }
            reports
        }))
        .await;
        let reports: Vec<UndoReport> = per_node.into_iter().flatten().collect();
        // What failed stays journaled and armed: `restore`, or the node itself, brings
        // it back. What may still be running on its node stays too, undone or not.
        let mut undone = Vec::new();
        for r in &reports {
            if r.result.is_ok() && !r.fault.may_still_run {
                undone.push(r.fault.clone());
            } else {
                self.active.push(r.fault.clone());
            }
        }
        self.settle(world, &undone).await;
        reports
    }

    /// Faults that were undone: their self-restores disarmed (at once) and their journal
    /// entries cleared (one write).
    async fn settle(&mut self, world: &impl World, faults: &[ActiveFault]) {
        let parts = faults
            .iter()
            .map(|f| (f.node.as_str(), f.armed.as_ref(), f.id.as_str()));
        self.release(world, parts.collect()).await;
    }

    /// Disarms the self-restores of `(node, restore, journal id)` on their nodes, all at
    /// once, then clears their journal entries in one write. A node that cannot be reached
    /// is logged: its restore then fires on its own and undoes what is already undone.
    async fn release(
        &mut self,
        world: &impl World,
        parts: Vec<(&str, Option<&ArmedRestore>, &str)>,
    ) {
        join_all(parts.iter().filter_map(|(node, restore, _)| {
            let restore = (*restore)?;
            Some(async move {
                if let Err(e) = world.disarm(node, restore).await {
                    tracing::warn!(node = %node, "could not disarm the self-restore: {e}");
                }
            })
        }))
        .await;
        let ids: Vec<&str> = parts.iter().map(|(_, _, id)| *id).collect();
        if !ids.is_empty()
            && let Some(journal) = &mut self.journal
            && let Err(e) = journal.clear_all(&ids)
        {
            tracing::warn!("could not clear faults {ids:?} from the journal: {e}");
        }
        let kept = self.on_lock.len();
        self.on_lock.retain(|e| !ids.contains(&e.id.as_str()));
        if self.on_lock.len() != kept {
            world.keep_on_lock(&self.on_lock).await;
        }
    }
}
