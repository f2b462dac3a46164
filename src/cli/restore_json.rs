//! `faultline restore -o json`: what a restore found and did, as one structure for tools.
//! It is filled in phase by phase as the restore goes (the journal read, each undo, the
//! node-access pods, the comparison with the snapshot), from the same values the text
//! lines are written from; the fields are documented in docs/reading-results.md. The exit
//! code is the text's.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{EXIT_ERROR, EXIT_OK};
use crate::journal::{Entry, Location, RestoreOutcome};

/// One restore of one cluster's journaled faults.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RestoreDoc {
    /// The inventory's cluster, whose faults were restored.
    pub cluster: String,
    /// What the journal held for it when the restore began.
    pub journal: JournalDoc,
    /// Each fault's undo, node by node, each node's newest fault first.
    pub undos: Vec<UndoDoc>,
    /// The node-access pods a killed run left behind; absent when no node is reached
    /// through the API (`transport: pod`) or the restore stopped before looking.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_access_pods: Option<PodsDoc>,
    /// The cluster compared with the snapshot a run took before its first fault; absent
    /// when no snapshot was left behind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<ComparisonDoc>,
    /// Why the restore stopped before undoing anything (a live run holds the cluster lock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The restore as a whole, from its exit code.
    pub outcome: Overall,
    /// The process's exit code, as the text output gives it.
    pub exit_code: i32,
}

/// The journal read, and what it held for the cluster.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JournalDoc {
    /// The file read (always said: a journal looked for in the wrong place must not pass
    /// for an empty one).
    pub path: String,
    /// The user who ran sudo, when the journal is theirs rather than root's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sudo_user: Option<String>,
    /// The runs whose faults it held, sorted.
    pub runs: Vec<String>,
    /// Every fault it held for the cluster, in journal order.
    pub faults: Vec<FaultDoc>,
}

/// A journaled fault as found.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FaultDoc {
    /// The journal entry's id.
    pub id: String,
    /// The run that made it.
    pub run: String,
    /// The node it is on.
    pub node: String,
    /// The fault, by its action name.
    pub fault: String,
    /// When it was (about to be) injected.
    pub injected_at: DateTime<Utc>,
    /// When its run meant to undo it at the latest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
}

/// What became of one fault's undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum UndoOutcome {
    /// Undone and cleared from the journal. A fault already gone is undone again
    /// (every undo is safe to repeat): it is `undone` too.
    Undone,
    /// Undone, but the journal could not be updated: the entry stays.
    UndoneNotCleared,
    /// Every attempt failed: the entry stays, and so does its self-restore if one was
    /// armed.
    Failed,
}

/// One fault's undo.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UndoDoc {
    /// The journal entry's id.
    pub id: String,
    /// The node.
    pub node: String,
    /// The fault.
    pub fault: String,
    /// What became of it.
    pub outcome: UndoOutcome,
    /// Attempts made.
    pub attempts: u32,
    /// Why it is not restored, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What went wrong after a successful undo (a self-restore not disarmed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// The node-access pods looked for and deleted.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PodsDoc {
    /// The pods deleted, by name.
    pub deleted: Vec<String>,
    /// Why they were not looked for (no cluster lock and no run in the journal: a live
    /// run's would be among them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Why they could not be looked for or deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The cluster compared with its snapshot from before the first fault.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ComparisonDoc {
    /// The snapshot file; removed once nothing differs, kept otherwise.
    pub snapshot: String,
    /// When the snapshot was taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<DateTime<Utc>>,
    /// How long the cluster was given to settle at most, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settle_ms: Option<u64>,
    /// Nothing differs.
    pub ok: bool,
    /// What was compared, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared: Option<String>,
    /// How long it waited for the cluster to settle, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    /// What differs, one line each.
    pub differences: Vec<String>,
    /// Why no comparison was made (the snapshot unreadable, the API unreachable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The restore as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Overall {
    /// The journal held no fault for the cluster, and no comparison found a difference
    /// (exit 0).
    NothingToRestore,
    /// Every fault undone, and the cluster as its snapshot when there was one (exit 0).
    Restored,
    /// A fault not undone, or the cluster not as its snapshot (exit 1).
    NotRestored,
    /// The restore could not be carried out (exit 2).
    Error,
}

impl RestoreDoc {
    /// The document of a restore of `cluster` from the journal at `location`, holding
    /// `active` for it; filled in as the restore goes, finished by [`RestoreDoc::finish`].
    pub(super) fn begin(cluster: &str, location: &Location, active: &[Entry]) -> RestoreDoc {
        let mut runs: Vec<String> = active
            .iter()
            .map(|e| crate::execute::run_of(&e.id).to_string())
            .collect();
        runs.sort();
        runs.dedup();
        RestoreDoc {
            cluster: cluster.to_string(),
            journal: JournalDoc {
                path: location.path.display().to_string(),
                sudo_user: location.sudo_user.clone(),
                runs,
                faults: active
                    .iter()
                    .map(|e| FaultDoc {
                        id: e.id.clone(),
                        run: crate::execute::run_of(&e.id).to_string(),
                        node: e.node.clone(),
                        fault: e.fault.clone(),
                        injected_at: e.injected_at,
                        deadline: e.deadline,
                    })
                    .collect(),
            },
            undos: Vec::new(),
            node_access_pods: None,
            comparison: None,
            error: None,
            outcome: Overall::Error,
            exit_code: EXIT_ERROR,
        }
    }

    /// Sets the exit code and the outcome it stands for.
    pub(super) fn finish(&mut self, exit_code: i32) {
        self.exit_code = exit_code;
        self.outcome = match exit_code {
            EXIT_OK if self.journal.faults.is_empty() => Overall::NothingToRestore,
            EXIT_OK => Overall::Restored,
            EXIT_ERROR => Overall::Error,
            _ => Overall::NotRestored,
        };
    }
}

impl ComparisonDoc {
    /// A comparison with the snapshot at `path` not made yet: filled in as it goes.
    pub(super) fn of(path: &std::path::Path) -> ComparisonDoc {
        ComparisonDoc {
            snapshot: path.display().to_string(),
            taken_at: None,
            settle_ms: None,
            ok: false,
            compared: None,
            waited_ms: None,
            differences: Vec::new(),
            error: None,
        }
    }
}

impl UndoDoc {
    /// One undo as `restore_all_with` reported it.
    pub(super) fn of(o: &RestoreOutcome) -> UndoDoc {
        let outcome = match (&o.outcome, &o.error) {
            (_, None) => UndoOutcome::Undone,
            (Some(_), Some(_)) => UndoOutcome::UndoneNotCleared,
            (None, Some(_)) => UndoOutcome::Failed,
        };
        UndoDoc {
            id: o.id.clone(),
            node: o.node.clone(),
            fault: o.fault.clone(),
            outcome,
            attempts: o.attempts,
            error: o.error.clone(),
            warning: o.warning.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execute::OpOutcome;

    fn outcome(node: &str, error: Option<&str>) -> RestoreOutcome {
        RestoreOutcome {
            id: format!("run-1-{node}"),
            node: node.to_string(),
            fault: "kubelet-stop".to_string(),
            attempts: if error.is_some() { 3 } else { 1 },
            outcome: error.is_none().then(|| OpOutcome {
                exit_status: Some(0),
                output: String::new(),
                dropped: false,
            }),
            error: error.map(str::to_string),
            warning: None,
        }
    }

    #[test]
    fn one_undone_and_one_failed_undo_read_as_not_restored() {
        let location = Location {
            path: "/state/journal.json".into(),
            owner: None,
            sudo_user: None,
        };
        let mut doc = RestoreDoc::begin("lab", &location, &[]);
        doc.undos = vec![
            UndoDoc::of(&outcome("worker-1", None)),
            UndoDoc::of(&outcome("worker-2", Some("ssh: connection refused"))),
        ];
        doc.finish(super::super::EXIT_FAILED);
        let json = serde_json::to_value(&doc).expect("serialises");
        assert_eq!(json["cluster"], "lab");
        assert_eq!(json["journal"]["path"], "/state/journal.json");
        assert!(json["journal"].get("sudoUser").is_none(), "{json}");
        let undos = json["undos"].as_array().expect("an array");
        assert_eq!(undos.len(), 2, "{json}");
        assert_eq!(
            (
                &undos[0]["node"],
                &undos[0]["outcome"],
                &undos[0]["attempts"]
            ),
            (&"worker-1".into(), &"undone".into(), &1.into())
        );
        assert!(undos[0].get("error").is_none(), "{json}");
        assert_eq!(undos[1]["outcome"], "failed");
        assert_eq!(undos[1]["error"], "ssh: connection refused");
        assert_eq!(undos[1]["attempts"], 3);
        assert_eq!(json["outcome"], "not-restored");
        assert_eq!(json["exitCode"], 1);
        assert!(json.get("comparison").is_none(), "{json}");
        assert!(json.get("nodeAccessPods").is_none(), "{json}");
    }

    #[test]
    fn an_undo_whose_entry_could_not_be_cleared_is_not_undone() {
        let mut o = outcome("worker-1", None);
        o.error = Some("undone, but the journal could not be updated: disk full".into());
        assert_eq!(UndoDoc::of(&o).outcome, UndoOutcome::UndoneNotCleared);
    }

    #[test]
    fn the_outcome_follows_the_exit_code_and_whether_anything_was_journaled() {
        let location = Location {
            path: "j".into(),
            owner: None,
            sudo_user: Some("ops".into()),
        };
        let mut empty = RestoreDoc::begin("c", &location, &[]);
        empty.finish(EXIT_OK);
        assert_eq!(empty.outcome, Overall::NothingToRestore);
        empty.finish(EXIT_ERROR);
        assert_eq!(empty.outcome, Overall::Error);
        let json = serde_json::to_value(&empty).expect("serialises");
        assert_eq!(json["journal"]["sudoUser"], "ops");
        assert_eq!(json["outcome"], "error");
    }
}
