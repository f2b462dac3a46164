//! The effects of a run, behind one trait, so that the run's loop (`floor::drive`) exists
//! once.
//!
//! Three worlds drive the same loop: the cluster (`worlds::cluster`: the API, SSH, Docker,
//! power drivers), a recorded run (`worlds::rehearse`: the record's observations replayed
//! on a paused clock) and, in tests, a scripted world (`worlds::scripted`) that can fail,
//! hang or be slow at any call. The decisions (what is due, what to journal, what to undo
//! and in which order, what to keep when an undo fails) stay in the loop and its ledger,
//! so every cancel, abort, timeout and undo path is tested without a cluster, the way
//! cargo-nextest tests its dispatcher without running a process.
//!
//! Time is tokio's clock: the cluster runs on it as it is, a rehearsal and the tests pause
//! it (it then jumps to the next timer whenever every task waits), so no world needs a
//! clock of its own. What the world observes goes onto the run's `SharedTimeline`, whose
//! growth wakes the loop.
//!
//! The seam imports nothing of the run above it: what the loop and every world share
//! across it (an action's result and error, the default lead of a timed step, the default
//! journal undo) is defined here, and the loop and the worlds import it from here.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::execute::{ArmedRestore, PowerAction};
use crate::experiment::fault::{self, Via, inverse};
use crate::experiment::model::Action;
use crate::journal::Undo;
use crate::record::RestoredCheck;
use crate::run::shared_timeline::SharedTimeline;
use crate::timeline::{ConditionStatus, DownNode};

/// How long before its due offset a timed step is armed, so that arming (an SSH round per
/// node, all at once) is not part of the step's lateness. Arming early is harmless: the
/// self-restore's deadline is absolute, and undoing a fault that was never injected (a
/// kubelet start on a running kubelet) changes nothing if faultline dies in between.
pub(super) const ARM_AHEAD_MS: i64 = 3_000;

/// How a fault is undone, for the journal (which must be able to do it after a crash):
/// its inverse, carried as the fault table says. An undo on the node is what the node can
/// also do by itself, so it is the one armed there as a self-restore. A world may know
/// more for a node ([`World::journal_undo`]: a kind/k3d reboot is powered on).
pub(crate) fn journal_undo(fault: &Action) -> Option<Undo> {
    let inv = inverse(fault)?;
    Some(match fault::info(&inv).via {
        Via::Power(PowerAction::On) => Undo::PowerOn,
        Via::NodeApi | Via::ClusterApi => Undo::Api(inv),
        Via::Node(_) | Via::StepCommand | Via::Power(_) => Undo::Node(fault::node_op(&inv)?),
    })
}

/// The nodes the observer last saw with Ready not True, read from the run's timeline
/// (where every world's observations land), each with why. What a world that observes
/// through the timeline answers to [`World::nodes_seen_down`]; nodes last seen gone are
/// left out (a node this run deleted is counted down by the interlock itself).
pub(crate) fn seen_down_on(timeline: &SharedTimeline) -> Vec<DownNode> {
    timeline.judge_view(|index| {
        index
            .last_nodes()
            .filter(|(_, s)| s.ready != ConditionStatus::True)
            .map(|(name, s)| DownNode {
                node: name.clone(),
                why: match s.ready {
                    ConditionStatus::Unknown => "seen unreachable, Ready=Unknown".to_string(),
                    _ => "seen NotReady, Ready=False".to_string(),
                },
            })
            .collect()
    })
}

/// What one action did on one node (or, for pod and PVC actions, in the cluster).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActResult {
    /// Exit status of a command, when the action was one.
    pub exit_status: Option<i32>,
    /// Command output or a description of what the API call did.
    pub output: String,
}

/// Why an action failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ActError {
    /// The node operation or power command failed.
    #[error(transparent)]
    Exec(#[from] crate::execute::ExecError),
    /// The API call failed.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    /// An action reached the node-operation path without being one (a bug, reported as such).
    #[error("`{0}` is not a node operation")]
    NotANodeOperation(&'static str),
    /// An action reached the API path without being an API action (a bug, reported as such).
    #[error("`{0}` is not an API action")]
    NotAnApiAction(&'static str),
    /// The action took longer than its step's timeout.
    #[error("did not finish within {0:?}")]
    Timeout(Duration),
    /// The run stopped (a signal, its cluster lock lost) while the action was under way:
    /// it was dropped at its next await.
    #[error("cut short: the run is stopping")]
    Cut,
    /// A rehearsed step that failed in the record it replays.
    #[error("failed in the record")]
    Recorded,
    /// An undo armed on the node (the pod transport's timer) was not seen to take effect
    /// through the API: what was seen.
    #[error("{0}")]
    NotConfirmed(String),
}

/// Why a world could not begin the run ([`World::begin`]): no fault may be injected. A
/// type of its own so that the loop and its tests can tell a run refused before its
/// first fault from one that went wrong later, and so the worlds share the messages.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BeginError {
    /// The experiment's abort queries could not start: guards that cannot see must not
    /// let faults in.
    #[error("abort conditions: {0}")]
    AbortConditions(#[from] crate::probe::query::AbortQueryError),
    /// The cluster could not be read before the first fault, so "restored" would have
    /// nothing to be compared with.
    #[error("cluster snapshot before the first fault: {0}")]
    Snapshot(#[from] crate::cluster::ClusterError),
    /// A scripted world's `begin` failed as its test asked.
    #[cfg(test)]
    #[error("{0}")]
    Scripted(&'static str),
}

/// Why a self-restore could not be armed ([`World::arm_restore`]) or withdrawn
/// ([`World::disarm`]). A type of its own so the ledger's refusal of a fault carries the
/// cause as it came, not as text.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SelfRestoreError {
    /// The node (or the power driver) refused or could not be reached.
    #[error(transparent)]
    Exec(#[from] crate::execute::ExecError),
    /// A scripted world's arming failed as its test asked.
    #[cfg(test)]
    #[error("{0}")]
    Scripted(&'static str),
}

/// Why a fault that took was failed after all ([`World::after_fault`]). A type of its
/// own so that a node that came back as another machine is told apart from one whose
/// address could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AfterFaultError {
    /// The node's address could not be read once it was back.
    #[error("cannot read the address of {node} after it came back: {source}")]
    AddressUnread {
        /// The node.
        node: String,
        /// Why it could not be read.
        source: crate::execute::ExecError,
    },
    /// The node came back with another address: what follows is a broken environment,
    /// not the cluster's reaction to the fault.
    #[error(
        "node {node} came back with address {now}, it had {before}: its container was given \
         another address when it started again (Docker may reuse a stopped container's \
         address; kind issues #2045, #3941). The kubelet and the cluster still use the old \
         one, so what follows is a broken environment, not the cluster's reaction to the \
         fault. Recreate the cluster, or give the nodes fixed addresses."
    )]
    Readdressed {
        /// The node.
        node: String,
        /// Its address before the fault.
        before: String,
        /// Its address now.
        now: String,
    },
}

/// One node of a fault step, as the world is told about it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FaultAt<'a> {
    /// Index of the step in the experiment.
    pub step: usize,
    /// The step's name.
    pub name: &'a str,
    /// What the step does.
    pub action: &'a Action,
    /// The node.
    pub node: &'a str,
}

/// What the world found once every fault was undone.
#[derive(Debug, Default)]
pub(crate) struct AfterUndo {
    /// Problems to put in the record (a node that came back with another address).
    pub problems: Vec<String>,
    /// The cluster compared with how it was before the first fault, when the world can.
    pub restored: Option<RestoredCheck>,
}

/// Everything a run does outside its own bookkeeping.
#[allow(async_fn_in_trait)] // used generically inside the crate, never as `dyn`
pub(crate) trait World {
    /// Starts observing onto `timeline`, waits for the first full view (or `cancel`), and
    /// reads what "restored" is compared with. `Ok` carries problems the run goes on with
    /// (a probe that could not start); `Err` means no fault may be injected.
    async fn begin(
        &mut self,
        timeline: &SharedTimeline,
        cancel: &CancellationToken,
    ) -> Result<Vec<String>, BeginError>;

    /// The last offset this world can observe (a record ends there); `None`: no end.
    fn observable_until_ms(&self) -> Option<i64> {
        None
    }

    /// The nodes seen down now (Ready not True, unreachable), each with why: what the
    /// run-time interlock counts, with the faults the run issued, when a fault step is due
    /// (`crate::run::floor::interlock`). Read from what the world already observes; never
    /// a new call to the cluster.
    fn nodes_seen_down(&self, timeline: &SharedTimeline) -> Vec<DownNode>;

    /// How many times `node`'s kubelet has renewed its heartbeat (its Lease) since the
    /// first time the world was asked about its return that began at `since_ms` (a reboot
    /// or power-on that finished then): the first call reads the mark and answers 0. A
    /// reboot shorter than the grace period is never seen NotReady and its kubelet keeps
    /// the Ready condition's transition time, so renewals are how the interlock knows
    /// that a new kubelet runs. `None`: this world cannot tell (a recording, a script).
    async fn renewals_since(&mut self, node: &str, since_ms: i64) -> Option<u32> {
        let _ = (node, since_ms);
        None
    }

    /// Whether this run may still fault the cluster, asked before each fault is armed:
    /// its cluster lock is still its own, as the API server says (a Lease deleted or taken
    /// under the run). `Err`: why not; the fault is not armed and the run stops.
    async fn may_fault(&self) -> Result<(), crate::cluster::lock::LockLost> {
        Ok(())
    }

    /// Keeps `entries` (the run's faults in place whose undo goes through the API: cordon,
    /// drain, taint) where a later run finds them if this one is killed: on the cluster
    /// lock. Called before such a fault is injected and whenever one is settled; nothing
    /// here can stop a run (a failure is said, and the journal still holds them).
    async fn keep_on_lock(&self, entries: &[crate::journal::Entry]) {
        let _ = entries;
    }

    /// [`World::may_fault`] without asking anyone, on a step's issue path: what the run's
    /// holder already knows of its lock.
    fn still_may_fault(&self) -> Result<(), crate::cluster::lock::LockLost> {
        Ok(())
    }

    /// Before step `step` injects `action` on `nodes`: reads what its proofs compare with
    /// and what a node that restarts must come back as.
    async fn before_fault(&mut self, step: usize, action: &Action, nodes: &[&str]);

    /// Step `step`, armed ahead, carries out `action` on `nodes` in `due_in`, each
    /// within `timeout`: sends ahead what can wait on the node for the word to start
    /// (the executor's primed commands), so that the action starts when it is due, not
    /// one channel and fork later. Anything not sent ahead goes the ordinary way when
    /// the step is issued; nothing here can fail or delay the step (the sending goes on
    /// beside the loop).
    async fn prime(
        &self,
        _step: usize,
        _action: &Action,
        _nodes: &[&str],
        _timeout: Duration,
        _due_in: Duration,
    ) {
    }

    /// Step `step` is issued now on `nodes`: starts at once, in one pass, what was sent
    /// ahead to wait there ([`World::prime`]), before the step's calls to
    /// [`World::act`] (which then hear it out). Nothing here can fail the step: what is
    /// not released is started by its own call.
    async fn release(&self, _step: usize, _action: &Action, _nodes: &[&str], _timeout: Duration) {}

    /// How long before it is due a timed step carrying out `action` on `nodes` is armed
    /// and sent ahead ([`World::prime`]): [`ARM_AHEAD_MS`] unless its nodes
    /// need longer (a node reached through the API starts a pod to arm its self-restore
    /// and another to wait for the word).
    fn arm_ahead(&self, _action: &Action, _nodes: &[&str]) -> Duration {
        Duration::from_millis(ARM_AHEAD_MS.unsigned_abs())
    }

    /// Arms `undo` on `node` (or beside it) to fire after `after` if faultline is gone;
    /// `token` names it. `None`: this fault cannot restore itself there.
    async fn arm_restore(
        &self,
        node: &str,
        undo: &Undo,
        after: Duration,
        token: &str,
    ) -> Result<Option<ArmedRestore>, SelfRestoreError>;

    /// How the journal undoes `fault` on `node` if faultline is cut off while it is in
    /// place: the fault table's inverse ([`journal_undo`]), unless this
    /// world knows more about the node (a kind/k3d reboot is `docker stop`, then `docker
    /// start`: cut off between the two, the node stays off until powered on). `None`:
    /// nothing to journal.
    fn journal_undo(&self, _node: &str, fault: &Action) -> Option<Undo> {
        journal_undo(fault)
    }

    /// Whether `fault` on `node` cuts the transport its undo would take (a kubelet stop on
    /// a node reached through the API): the planned undo is then armed on the node, as a
    /// timer, before the fault ([`crate::run::floor::host_timed`]).
    fn undo_armed_on_host(&self, _node: &str, _fault: &Action) -> bool {
        false
    }

    /// `action` on `node` was cut short by the run's stop before it came back
    /// ([`ActError::Cut`]): ends on the node whatever of it may still run there (a command
    /// carried to it). `true`: nothing of it runs any more (an API call dropped at its next
    /// await is over), so its fault's journal entry may be cleared once undone.
    async fn end_cut(&self, _action: &Action, _node: Option<&str>) -> bool {
        true
    }

    /// Withdraws a self-restore armed by [`World::arm_restore`].
    async fn disarm(&self, node: &str, armed: &ArmedRestore) -> Result<(), SelfRestoreError>;

    /// Carries out `action` for step `step` (a safety-net undo is `undo STEP`) on `node`
    /// (`None`: an action on pods or claims). Returns once the action is over, at the
    /// latest about `timeout` after it began.
    async fn act(
        &self,
        step: &str,
        action: &Action,
        node: Option<&str>,
        timeout: Duration,
    ) -> Result<ActResult, ActError>;

    /// A fault took on its node: prove it, and check a restarted machine came back as
    /// itself. `Err`: the step failed after all.
    async fn after_fault(
        &mut self,
        fault: FaultAt<'_>,
        timeline: &SharedTimeline,
    ) -> Result<(), AfterFaultError>;

    /// Reads, for each of `nodes`, what later shows that it came back after its fault was
    /// undone (its Lease, which nothing renews while a silencing fault holds). Called once a
    /// fault is in place (for the safety net's undo), and again for a planned undo: when it
    /// is armed ahead if every fault it undoes already holds, else just before it is
    /// issued. Never on a step's issue path where it need not be.
    async fn mark_before_undo(&mut self, nodes: &[&str]);

    /// `action` is about to undo faults on `nodes`: their proofs stop, so a planned undo
    /// is not taken for something else undoing them.
    async fn before_undo(&mut self, action: &Action, nodes: &[&str]);

    /// Observation ended: every proof stops (the safety net undoes what is left).
    async fn stop_proofs(&mut self);

    /// Every fault was undone (or left to `restore`): what the world looks like now,
    /// waiting for it to settle unless `interrupted`.
    async fn after_undo(&mut self, timeline: &SharedTimeline, interrupted: bool) -> AfterUndo;

    /// The last call: stops what observes and deletes what setup created. Returns errors.
    async fn end(&mut self, timeline: &SharedTimeline) -> Vec<String>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execute::NodeOp;
    use crate::experiment::model::TaintSpec;

    #[test]
    fn journal_knows_how_to_undo_each_kind_of_fault() {
        assert_eq!(
            journal_undo(&Action::KubeletStop),
            Some(Undo::Node(NodeOp::KubeletStart))
        );
        assert_eq!(
            journal_undo(&Action::Partition),
            Some(Undo::Node(NodeOp::Heal))
        );
        assert_eq!(journal_undo(&Action::PowerOff), Some(Undo::PowerOn));
        assert_eq!(
            journal_undo(&Action::Cordon),
            Some(Undo::Api(Action::Uncordon))
        );
        let taint = TaintSpec {
            key: "k".into(),
            value: None,
            effect: "NoExecute".into(),
        };
        assert_eq!(
            journal_undo(&Action::Taint(taint.clone())),
            Some(Undo::Api(Action::Untaint(taint)))
        );
        assert_eq!(
            journal_undo(&Action::Run {
                command: "a".into(),
                undo: Some("b".into())
            }),
            Some(Undo::Node(NodeOp::Run("b".into())))
        );
        assert_eq!(journal_undo(&Action::Reboot), None);
        assert_eq!(journal_undo(&Action::KubeletStart), None);
    }
}
