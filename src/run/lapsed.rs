//! What a dead run left in place that only the API undoes (a cordon, a drain, a taint),
//! carried out by whoever takes its cluster lock over.
//!
//! A node-side fault has its timer on the node; an API-side one has none, and after a
//! `kill -9` its only record was the dead run's journal, on a machine that may be gone (a
//! CI runner, a pod's emptyDir). So a holder keeps those undos on the Lease itself
//! ([`crate::cluster::lock::LockHandle::note_api_undos`]), and a run or `restore` taking
//! a dead holder's Lease over carries them out first, each screened as `restore` screens a
//! journal entry ([`crate::journal::trust`]): an undo through the API a run writes, and
//! nothing else.

use std::time::Duration;

use crate::cluster::lock::Holder;
use crate::execute::Executor;
use crate::journal::{Entry, RetryPolicy, Undo, trust, undo_with_retries};
use crate::run::worlds::cluster::act::Actor;

/// Why an undo a dead holder left was not done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotUndone {
    /// Its record on the Lease does not read.
    #[error("its record on the cluster lock does not read: {0}")]
    Unreadable(String),
    /// It is not an undo a run writes.
    #[error("{0}")]
    Refused(#[from] trust::Untrusted),
    /// Not an undo through the API (node undos are the journal's and the node's).
    #[error("refused: not an undo through the API")]
    NotThroughTheApi,
    /// Every try failed; the last one's error.
    #[error("{0}")]
    Failed(String),
}

/// One undo a dead holder left on its Lease, and how carrying it out went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lapsed {
    /// The entry as the dead run recorded it (its node, fault and undo).
    pub entry: Entry,
    /// What the undo said, or why it was not done.
    pub result: Result<String, NotUndone>,
}

impl Lapsed {
    /// One line for a person.
    pub(crate) fn line(&self, holder: &Holder) -> String {
        match &self.result {
            Ok(said) => format!(
                "undid `{}` on {} that the dead run {} left in place (recorded on the cluster \
                 lock): {said}",
                self.entry.fault, self.entry.node, holder.identity
            ),
            Err(why) => format!(
                "could not undo `{}` on {} that the dead run {} left in place (recorded on the \
                 cluster lock): {why}",
                self.entry.fault, self.entry.node, holder.identity
            ),
        }
    }
}

/// The entries `holder` kept on its Lease; an annotation that does not read is one
/// failed entry saying so.
fn entries_of(holder: &Holder) -> Result<Vec<Entry>, NotUndone> {
    match &holder.api_undos {
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str(text).map_err(|e| NotUndone::Unreadable(e.to_string())),
    }
}

/// Carries out what `holder` (dead, its Lease just taken over) left undone through the
/// API, each with the safety net's retries.
pub(crate) async fn undo_lapsed(
    holder: &Holder,
    client: &kube::Client,
    executor: &Executor,
) -> Vec<Lapsed> {
    let entries = match entries_of(holder) {
        Ok(entries) => entries,
        Err(why) => {
            return vec![Lapsed {
                entry: Entry {
                    id: "unreadable".into(),
                    cluster: String::new(),
                    node: "?".into(),
                    fault: "?".into(),
                    undo: Undo::PowerOn,
                    injected_at: chrono::Utc::now(),
                    deadline: None,
                    armed_restore: None,
                },
                result: Err(why),
            }];
        }
    };
    let targets = Default::default();
    let actor = Actor {
        executor,
        client,
        targets: &targets,
    };
    let policy = RetryPolicy {
        timeout: Duration::from_secs(60),
        ..RetryPolicy::default()
    };
    let none = trust::Commands::Declared(Default::default());
    let mut out = Vec::new();
    for entry in entries {
        let result = match (&entry.undo, trust::check(&entry, &none)) {
            (_, Err(untrusted)) => Err(NotUndone::Refused(untrusted)),
            (Undo::Api(action), Ok(())) => {
                let attempt = async || {
                    actor
                        .act(action, Some(&entry.node), policy.timeout)
                        .await
                        .map(|r| r.output)
                        .map_err(|e| e.to_string())
                };
                undo_with_retries(&policy, &entry.node, &entry.fault, attempt)
                    .await
                    .0
                    .map_err(NotUndone::Failed)
            }
            (_, Ok(())) => Err(NotUndone::NotThroughTheApi),
        };
        out.push(Lapsed { entry, result });
    }
    out
}

/// The entries of `lapsed` whose undo failed, as JSON for the taker's own Lease (so the
/// next taker tries again), `None` when every one was done.
pub(crate) fn still_left(lapsed: &[Lapsed]) -> Option<String> {
    let left: Vec<&Entry> = lapsed
        .iter()
        .filter(|l| l.result.is_err() && l.entry.id != "unreadable")
        .map(|l| &l.entry)
        .collect();
    (!left.is_empty())
        .then(|| serde_json::to_string(&left).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(api_undos: Option<&str>) -> Holder {
        Holder {
            identity: "ci-7/4242/fl1".into(),
            running: "faultline run drain".into(),
            since: None,
            renewed: None,
            pid_namespace: None,
            api_undos: api_undos.map(str::to_string),
        }
    }

    #[test]
    fn a_holders_record_reads_back_and_garbage_is_said() {
        let entry = Entry {
            id: "fl1-1".into(),
            cluster: "c".into(),
            node: "w1".into(),
            fault: "cordon".into(),
            undo: Undo::Api(crate::experiment::model::Action::Uncordon),
            injected_at: chrono::Utc::now(),
            deadline: None,
            armed_restore: None,
        };
        let text = serde_json::to_string(&[&entry]).expect("json");
        assert_eq!(entries_of(&holder(Some(&text))), Ok(vec![entry.clone()]));
        assert_eq!(entries_of(&holder(None)), Ok(Vec::new()));
        assert!(entries_of(&holder(Some("{not json"))).is_err());
        let lapsed = [
            Lapsed {
                entry: entry.clone(),
                result: Err(NotUndone::Failed("API refused".into())),
            },
            Lapsed {
                entry: Entry {
                    id: "fl1-2".into(),
                    ..entry.clone()
                },
                result: Ok("node w1 uncordoned".into()),
            },
        ];
        let left = still_left(&lapsed).expect("one left");
        assert!(left.contains("fl1-1") && !left.contains("fl1-2"), "{left}");
        assert!(
            lapsed[1]
                .line(&holder(None))
                .starts_with("undid `cordon` on w1")
        );
    }
}
