//! The run's active faults: journaled before injection, self-restores armed on the node
//! where it can undo the fault itself, cleared when the undo ran, and undone with retries
//! by the safety net at the end of a run, on a signal, or on an error.

use std::time::Duration;

use chrono::Utc;

use crate::execute::{ArmedRestore, Executor, PowerAction};
use crate::experiment::fault::{self, Via, action_name, inverse, undoes};
use crate::experiment::model::Action;
use crate::journal::{
    Entry as JournalEntry, Journal, JournalError, RetryPolicy, Undo, undo_with_retries,
};
use crate::run::act::{ActResult, Actor};

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
    /// The self-restore armed on the node, if any.
    pub armed: Option<ArmedRestore>,
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

/// Why a fault could not be prepared; the fault is then not injected.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LedgerError {
    /// The journal could not be written: without it a crash could leave the node broken.
    #[error("cannot write the fault journal, so the fault is not injected: {0}")]
    Journal(#[from] JournalError),
    /// Arming the self-restore on the node failed.
    #[error("cannot arm the self-restore on {node}, so the fault is not injected: {source}")]
    Arm {
        /// Node.
        node: String,
        /// Cause.
        source: crate::execute::ExecError,
    },
}

/// The active faults of one run.
pub(crate) struct Ledger {
    journal: Journal,
    cluster: String,
    run_id: String,
    seq: u32,
    active: Vec<ActiveFault>,
}

/// How a fault is undone, for the journal (which must be able to do it after a crash):
/// its inverse, carried as the fault table says. An undo on the node is what the node can
/// also do by itself, so it is the one armed there as a self-restore.
pub(crate) fn journal_undo(fault: &Action) -> Option<Undo> {
    let inv = inverse(fault)?;
    Some(match fault::info(&inv).via {
        Via::Power(PowerAction::On) => Undo::PowerOn,
        Via::NodeApi | Via::ClusterApi => Undo::Api(inv),
        Via::Node(_) | Via::StepCommand | Via::Power(_) => Undo::Node(fault::node_op(&inv)?),
    })
}

impl Ledger {
    /// A ledger writing to `journal` for the cluster named `cluster`.
    pub(crate) fn new(journal: Journal, cluster: &str, run_id: &str) -> Self {
        Ledger {
            journal,
            cluster: cluster.to_string(),
            run_id: run_id.to_string(),
            seq: 0,
            active: Vec::new(),
        }
    }

    /// Faults injected and not yet undone.
    pub(crate) fn active(&self) -> &[ActiveFault] {
        &self.active
    }

    /// Before injecting `fault` on `node`: journal it (atomically) and, where the node can
    /// undo the fault itself, arm a restore that fires after `restore_after` even if
    /// faultline dies. Returns the fault's journal id and whether a restore was armed on
    /// the node; `None` for actions that are not faults.
    pub(crate) async fn before_fault(
        &mut self,
        executor: &Executor,
        step: &str,
        node: &str,
        fault: &Action,
        restore_after: Duration,
    ) -> Result<Option<(String, bool)>, LedgerError> {
        let Some(undo) = journal_undo(fault) else {
            return Ok(None);
        };
        self.seq += 1;
        let id = format!("{}-{}", self.run_id, self.seq);
        let mut entry = JournalEntry {
            id: id.clone(),
            cluster: self.cluster.clone(),
            node: node.to_string(),
            fault: action_name(fault).to_string(),
            undo: undo.clone(),
            injected_at: Utc::now(),
            deadline: chrono::Duration::from_std(restore_after)
                .ok()
                .map(|d| Utc::now() + d),
            armed_restore: None,
        };
        self.journal.record(entry.clone())?;
        let armed = match &undo {
            Undo::Node(op) => match executor.arm_restore(node, op, restore_after, &id).await {
                Ok(armed) => Some(armed),
                Err(source) => {
                    let _ = self.journal.clear(&id);
                    return Err(LedgerError::Arm {
                        node: node.to_string(),
                        source,
                    });
                }
            },
            // Power-on is out of band and API undos need the API: `restore` does them.
            Undo::PowerOn | Undo::Api(_) => None,
        };
        let self_restore = armed.is_some();
        if self_restore {
            entry.armed_restore = armed.clone();
            self.journal.record(entry)?;
        }
        self.active.push(ActiveFault {
            id: id.clone(),
            step: step.to_string(),
            node: node.to_string(),
            fault: fault.clone(),
            armed,
        });
        Ok(Some((id, self_restore)))
    }

    /// A planned step ran `action` on `node` successfully: every fault there that it undoes
    /// is settled (self-restore disarmed, journal cleared). Returns them.
    pub(crate) async fn undone_by(
        &mut self,
        executor: &Executor,
        action: &Action,
        node: &str,
    ) -> Vec<ActiveFault> {
        let (done, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.active)
            .into_iter()
            .partition(|f| f.node == node && undoes(action, &f.fault));
        self.active = keep;
        for fault in &done {
            self.settle(executor, fault).await;
        }
        done
    }

    /// The safety net: undoes every fault still active, newest first, retrying as
    /// `restore` does ([`RetryPolicy::default`], each try limited to `timeout`); a fault
    /// whose undo keeps failing stays in the journal for `restore`.
    pub(crate) async fn undo_all(
        &mut self,
        actor: &Actor<'_>,
        timeout: Duration,
    ) -> Vec<UndoReport> {
        let policy = RetryPolicy {
            timeout,
            ..RetryPolicy::default()
        };
        let mut reports = Vec::new();
        while let Some(fault) = self.active.pop() {
            let Some(undo) = inverse(&fault.fault) else {
                continue;
            };
            let attempt = async || {
                actor
                    .act(&undo, Some(&fault.node), policy.timeout)
                    .await
                    .map_err(|e| e.to_string())
            };
            let name = action_name(&fault.fault);
            let (result, attempts) = undo_with_retries(&policy, &fault.node, name, attempt).await;
            if result.is_ok() {
                self.settle(actor.executor, &fault).await;
            }
            reports.push(UndoReport {
                fault,
                result,
                attempts,
            });
        }
        reports
    }

    async fn settle(&mut self, executor: &Executor, fault: &ActiveFault) {
        if let Some(armed) = &fault.armed
            && let Err(e) = executor.disarm(&fault.node, armed).await
        {
            tracing::warn!(node = %fault.node, "could not disarm the self-restore: {e}");
        }
        if let Err(e) = self.journal.clear(&fault.id) {
            tracing::warn!("could not clear fault {} from the journal: {e}", fault.id);
        }
    }
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
