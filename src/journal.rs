//! The fault journal: every fault faultline has injected and not yet undone, on disk.
//!
//! It is written BEFORE a fault is injected and an entry is removed only after its undo
//! succeeded, so after a crash, SIGKILL or lost laptop `faultline restore` knows exactly
//! which nodes to bring back. Writes are atomic (temp file in the same directory, fsync,
//! rename): a reader sees the old journal or the new one, never half of one.
//!
//! Faults and undos are named as experiments and the timeline name actions, in kebab-case:
//! an entry's `fault` is its action name (`kubelet-stop`, `power-off`), its `undo` is
//! `{"node": "kubelet-start"}`, `"power-on"` or `{"api": {"kind": "uncordon"}}`. Journals
//! written before this spelling (`kubeletStart`, `powerOn`) are still read.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::experiment::model::Action;

use crate::execute::{ArmedRestore, Executor, NodeOp, OpOutcome, PowerAction};

/// How a journaled fault is undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Undo {
    /// An operation run on the node.
    Node(NodeOp),
    /// Out-of-band power on (the undo of a power-off).
    #[serde(alias = "powerOn")]
    PowerOn,
    /// A Kubernetes API action (uncordon, untaint), carried out by the caller's API client.
    Api(Action),
}

/// One active fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry {
    /// Unique id (also used as the self-restore token).
    pub id: String,
    /// Cluster name from the inventory, so one journal can serve several clusters.
    pub cluster: String,
    /// Node the fault is on.
    pub node: String,
    /// The fault, by its action name (see the module documentation for the spelling).
    pub fault: String,
    /// How to undo it.
    pub undo: Undo,
    /// When it was (about to be) injected.
    pub injected_at: DateTime<Utc>,
    /// When the run intended to undo it at the latest.
    pub deadline: Option<DateTime<Utc>>,
    /// The self-restore armed on the node, if any.
    pub armed_restore: Option<ArmedRestore>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct JournalFile {
    version: u32,
    faults: Vec<Entry>,
}

/// Why the journal could not be read or written.
#[derive(Debug, Error)]
pub(crate) enum JournalError {
    /// Filesystem error.
    #[error("fault journal {path}: {source}")]
    Io {
        /// Journal file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not a journal.
    #[error(
        "fault journal {path} is corrupt ({source}); inspect it before deleting it: it may list nodes still faulted"
    )]
    Corrupt {
        /// Journal file.
        path: PathBuf,
        /// Cause.
        source: serde_json::Error,
    },
    /// No state directory could be determined.
    #[error(
        "cannot locate the fault journal: neither XDG_STATE_HOME nor HOME is set; pass --journal"
    )]
    NoHome,
}

/// The journal file and its current content.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    entries: Vec<Entry>,
}

impl Journal {
    /// `$XDG_STATE_HOME/faultline/journal.json`, else `~/.local/state/faultline/journal.json`.
    pub(crate) fn default_path() -> Result<PathBuf, JournalError> {
        let base = std::env::var_os("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".local/state"))
            })
            .ok_or(JournalError::NoHome)?;
        Ok(base.join("faultline/journal.json"))
    }

    /// Open (or start) the journal at `path`; a missing file is an empty journal.
    pub(crate) fn open(path: impl AsRef<Path>) -> Result<Journal, JournalError> {
        let path = path.as_ref().to_path_buf();
        let entries = read(&path)?;
        Ok(Journal { path, entries })
    }

    /// Add (or replace, by id) one entry and persist it (the runner journals a step's
    /// nodes together with [`Journal::record_all`]).
    #[cfg(test)]
    pub(crate) fn record(&mut self, entry: Entry) -> Result<(), JournalError> {
        self.record_all(vec![entry])
    }

    /// Adds (or replaces, by id) several entries with one durable write, BEFORE the faults
    /// are injected: a step faulting
    /// twenty nodes journals them together instead of syncing the disk twenty times.
    pub(crate) fn record_all(&mut self, new: Vec<Entry>) -> Result<(), JournalError> {
        // Re-read so a concurrent run's entries are not lost.
        let mut entries = read(&self.path)?;
        entries.retain(|e| !new.iter().any(|n| n.id == e.id));
        entries.extend(new);
        write_atomic(&self.path, &entries)?;
        self.entries = entries;
        Ok(())
    }

    /// Remove an entry after its undo succeeded; returns whether it was there.
    pub(crate) fn clear(&mut self, id: &str) -> Result<bool, JournalError> {
        Ok(self.clear_all(&[id])? == 1)
    }

    /// Removes several entries with one durable write; returns how many were there.
    pub(crate) fn clear_all(&mut self, ids: &[&str]) -> Result<usize, JournalError> {
        let mut entries = read(&self.path)?;
        let before = entries.len();
        entries.retain(|e| !ids.contains(&e.id.as_str()));
        let removed = before - entries.len();
        if removed > 0 {
            write_atomic(&self.path, &entries)?;
        }
        self.entries = entries;
        Ok(removed)
    }

    /// Active faults on one cluster, oldest first.
    pub(crate) fn active(&self, cluster: &str) -> Vec<Entry> {
        self.entries
            .iter()
            .filter(|e| e.cluster == cluster)
            .cloned()
            .collect()
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn read(path: &Path) -> Result<Vec<Entry>, JournalError> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice::<JournalFile>(&bytes)
            .map(|f| f.faults)
            .map_err(|source| JournalError::Corrupt {
                path: path.to_path_buf(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Temp file in the same directory, fsync, rename over, fsync the directory.
fn write_atomic(path: &Path, entries: &[Entry]) -> Result<(), JournalError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let body = serde_json::to_vec_pretty(&JournalFile {
        version: 1,
        faults: entries.to_vec(),
    })
    .map_err(|source| JournalError::Corrupt {
        path: path.to_path_buf(),
        source,
    })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "journal.json".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        // Make the rename itself durable.
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io_err(path))
}

/// How hard an undo is tried, by a run's safety net and by `restore`, before the fault is
/// left in the journal for next time.
#[derive(Debug, Clone)]
pub(crate) struct RetryPolicy {
    /// Attempts per fault.
    pub attempts: u32,
    /// Delay before the second attempt; doubles each time.
    pub first_delay: Duration,
    /// Limit for one undo attempt.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    /// 3 tries, waiting 1s then 2s, 60s per try.
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            first_delay: Duration::from_secs(1),
            timeout: Duration::from_secs(60),
        }
    }
}

/// Runs `undo` until it succeeds or `policy.attempts` (at least one) have failed, waiting
/// `policy.first_delay` after the first failure and twice as long after each further one;
/// every failure is logged with the node and the fault being undone. The one retry loop
/// behind both a run's safety net and `restore`. Returns the last result and the attempts
/// made.
pub(crate) async fn undo_with_retries<T>(
    policy: &RetryPolicy,
    node: &str,
    fault: &str,
    mut undo: impl AsyncFnMut() -> Result<T, String>,
) -> (Result<T, String>, u32) {
    let mut delay = policy.first_delay;
    let mut attempts = 0;
    loop {
        attempts += 1;
        match undo().await {
            Ok(done) => return (Ok(done), attempts),
            Err(e) => {
                tracing::warn!(node, attempt = attempts, "undo of {fault} failed: {e}");
                if attempts >= policy.attempts.max(1) {
                    return (Err(e), attempts);
                }
                tokio::time::sleep(delay).await;
                delay = delay.saturating_mul(2);
            }
        }
    }
}

/// What `restore` did for one journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RestoreOutcome {
    /// Journal entry id.
    pub id: String,
    /// Node.
    pub node: String,
    /// Fault name.
    pub fault: String,
    /// Attempts made.
    pub attempts: u32,
    /// The successful undo, if any.
    pub outcome: Option<OpOutcome>,
    /// Last error when every attempt failed (the entry stays in the journal).
    pub error: Option<String>,
}

impl RestoreOutcome {
    #[cfg(test)]
    /// True when the fault was undone and cleared.
    pub(crate) fn restored(&self) -> bool {
        self.error.is_none()
    }
}

/// Undo every active fault of `cluster`, retrying with backoff; clear each on success.
/// Node operations and power go through `executor`; API undos through `api`.
pub(crate) async fn restore_all_with<F>(
    journal: &mut Journal,
    executor: &Executor,
    cluster: &str,
    policy: &RetryPolicy,
    api: F,
) -> Vec<RestoreOutcome>
where
    F: AsyncFn(&str, &Action, Duration) -> Result<OpOutcome, String>,
{
    let mut results = Vec::new();
    for entry in journal.active(cluster) {
        if let Some(armed) = &entry.armed_restore {
            // Best effort: the node may be down, and the undo below is what counts.
            if let Err(e) = executor.disarm(&entry.node, armed).await {
                tracing::debug!(node = %entry.node, "disarm before restore failed: {e}");
            }
        }
        let undo = async || match &entry.undo {
            Undo::Node(op) => executor
                .perform(&entry.node, op, policy.timeout)
                .await
                .map_err(|e| e.to_string()),
            Undo::PowerOn => executor
                .power(&entry.node, PowerAction::On, policy.timeout)
                .await
                .map_err(|e| e.to_string()),
            Undo::Api(action) => api(&entry.node, action, policy.timeout).await,
        };
        let (result, attempts) = undo_with_retries(policy, &entry.node, &entry.fault, undo).await;
        let (outcome, error) = match result {
            Ok(done) => match journal.clear(&entry.id) {
                Ok(_) => (Some(done), None),
                Err(e) => (
                    Some(done),
                    Some(format!("undone, but the journal could not be updated: {e}")),
                ),
            },
            Err(e) => (None, Some(e)),
        };
        results.push(RestoreOutcome {
            id: entry.id.clone(),
            node: entry.node.clone(),
            fault: entry.fault.clone(),
            attempts,
            outcome,
            error,
        });
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::Inventory;

    fn entry(id: &str, cluster: &str, undo: Undo) -> Entry {
        Entry {
            id: id.into(),
            cluster: cluster.into(),
            node: "n1".into(),
            fault: "kubelet-stop".into(),
            undo,
            injected_at: Utc::now(),
            deadline: None,
            armed_restore: None,
        }
    }

    #[test]
    fn record_survives_reopen_and_clear_removes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state/faultline/journal.json");
        let mut j = Journal::open(&path).expect("missing file is empty");
        assert!(j.active("c").is_empty());
        let a = entry("a", "c", Undo::Node(NodeOp::KubeletStart));
        j.record(a.clone()).expect("write");
        j.record(entry("b", "other", Undo::PowerOn)).expect("write");

        let reopened = Journal::open(&path).expect("read");
        assert_eq!(reopened.active("c"), vec![a]);
        assert_eq!(reopened.active("other").len(), 1);

        assert!(j.clear("a").expect("clear"));
        assert!(!j.clear("a").expect("clear twice"));
        let reopened = Journal::open(&path).expect("read");
        assert!(reopened.active("c").is_empty());
        assert_eq!(reopened.active("other").len(), 1);

        let leftovers: Vec<_> = fs::read_dir(path.parent().expect("dir"))
            .expect("ls")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            leftovers,
            vec![std::ffi::OsString::from("journal.json")],
            "no temp files"
        );
    }

    #[test]
    fn a_step_journals_and_clears_its_nodes_together() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.json");
        let mut j = Journal::open(&path).expect("open");
        j.record(entry("other-run", "c", Undo::PowerOn))
            .expect("write");
        let step: Vec<Entry> = ["n1", "n2", "n3"]
            .iter()
            .map(|id| entry(id, "c", Undo::Node(NodeOp::KubeletStart)))
            .collect();
        j.record_all(step.clone()).expect("write");
        // Written again (the self-restores armed): replaced by id, not added twice.
        j.record_all(step).expect("rewrite");
        assert_eq!(Journal::open(&path).expect("read").active("c").len(), 4);
        assert_eq!(j.clear_all(&["n1", "n3", "gone"]).expect("clear"), 2);
        let ids: Vec<String> = Journal::open(&path)
            .expect("read")
            .active("c")
            .into_iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, vec!["other-run".to_string(), "n2".to_string()]);
    }

    #[test]
    fn a_second_handle_does_not_lose_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.json");
        let mut one = Journal::open(&path).expect("open");
        let mut two = Journal::open(&path).expect("open");
        one.record(entry("a", "c", Undo::PowerOn)).expect("write");
        two.record(entry("b", "c", Undo::PowerOn)).expect("write");
        assert_eq!(Journal::open(&path).expect("read").active("c").len(), 2);
    }

    #[test]
    fn names_are_kebab_case_and_the_old_camel_case_still_reads() {
        let written = serde_json::to_value(entry("a", "c", Undo::Node(NodeOp::KubeletStart)))
            .expect("serialize");
        assert_eq!(written["fault"], "kubelet-stop");
        assert_eq!(
            written["undo"],
            serde_json::json!({"node": "kubelet-start"})
        );
        assert_eq!(
            serde_json::to_value(Undo::PowerOn).expect("serialize"),
            "power-on"
        );
        let old: Vec<Undo> =
            serde_json::from_str(r#"[{"node": "kubeletStart"}, {"node": "powerOff"}, "powerOn"]"#)
                .expect("old spelling");
        assert_eq!(
            old,
            [
                Undo::Node(NodeOp::KubeletStart),
                Undo::Node(NodeOp::PowerOff),
                Undo::PowerOn
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn undo_retries_wait_one_then_two_seconds_and_stop_after_three_tries() {
        let start = tokio::time::Instant::now();
        let mut tried_at = Vec::new();
        let failing = async || {
            tried_at.push(start.elapsed());
            Err::<(), _>("still broken".to_string())
        };
        let (result, attempts) =
            undo_with_retries(&RetryPolicy::default(), "n1", "kubelet-stop", failing).await;
        assert_eq!(result, Err("still broken".to_string()));
        assert_eq!(attempts, 3);
        assert_eq!(
            tried_at,
            [0, 1, 3].map(Duration::from_secs),
            "1s then 2s between tries"
        );
    }

    #[test]
    fn corrupt_journal_is_an_error_not_an_empty_list() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.json");
        fs::write(&path, "{not json").expect("write");
        let err = Journal::open(&path).expect_err("corrupt");
        assert!(err.to_string().contains("corrupt"), "{err}");
    }

    fn executor() -> Executor {
        let text = "cluster: {name: c}\ntransport: exec\nexec: [sh, -c, \"{command}\"]\nnodes: [{name: n1}]\n";
        Executor::new(Inventory::parse(text, Path::new("t.yaml")).expect("valid"))
    }

    #[tokio::test]
    async fn restore_undoes_clears_and_keeps_what_failed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.json");
        let flag = dir.path().join("undone");
        let mut j = Journal::open(&path).expect("open");
        let touch = format!("touch '{}'", flag.display());
        j.record(entry("ok", "c", Undo::Node(NodeOp::Run(touch))))
            .expect("w");
        j.record(entry("bad", "c", Undo::Node(NodeOp::Run("exit 7".into()))))
            .expect("w");
        j.record(entry("power", "c", Undo::PowerOn)).expect("w");
        j.record(entry(
            "elsewhere",
            "d",
            Undo::Node(NodeOp::Run("exit 1".into())),
        ))
        .expect("w");
        let policy = RetryPolicy {
            attempts: 3,
            first_delay: Duration::from_millis(10),
            timeout: Duration::from_secs(5),
        };
        let no_api = async |_: &str, _: &Action, _: Duration| -> Result<OpOutcome, String> {
            Err("no API in this test".into())
        };
        let out = restore_all_with(&mut j, &executor(), "c", &policy, no_api).await;
        assert_eq!(out.len(), 3);
        assert!(out[0].restored() && out[0].attempts == 1);
        assert!(flag.exists());
        assert!(!out[1].restored());
        assert_eq!(out[1].attempts, 3);
        assert!(
            out[2]
                .error
                .as_deref()
                .unwrap_or("")
                .contains("never on: configure power.on")
        );
        let left: Vec<String> = Journal::open(&path)
            .expect("read")
            .active("c")
            .into_iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(left, ["bad", "power"]);
        assert_eq!(j.active("d").len(), 1, "other clusters untouched");
    }
}
