//! The fault journal: every fault faultline has injected and not yet undone, on disk.
//!
//! It is written BEFORE a fault is injected and an entry is removed only after its undo
//! succeeded, so after a crash, SIGKILL or lost laptop `faultline restore` knows exactly
//! which nodes to bring back. Writes are atomic (temp file in the same directory, fsync,
//! rename): a reader sees the old journal or the new one, never half of one.
//!
//! Several processes may share one journal (two runs on one CI runner, a run beside
//! `restore`). Every read-modify-write therefore holds an exclusive `flock` on a lock file
//! beside the journal (`journal.json.lock`; never the journal itself, which each write
//! replaces by a rename), and reads hold it shared: no process can lose another's entry.
//!
//! Its default place is the user's state directory, and the same one under `sudo`: a
//! process that is root through sudo uses the invoking user's directory (found in the
//! password database, not guessed from `HOME`, which sudo points at root's) and gives what
//! it creates there to that user, so `sudo faultline run` and a later `faultline restore`
//! read one journal.
//!
//! Faults and undos are named as experiments and the timeline name actions, in kebab-case:
//! an entry's `fault` is its action name (`kubelet-stop`, `power-off`), its `undo` is
//! `{"node": "kubelet-start"}`, `"power-on"` or `{"api": {"kind": "uncordon"}}`. Journals
//! written before this spelling (`kubeletStart`, `powerOn`) are still read.

use std::ffi::{CStr, CString, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::join_all;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::experiment::model::Action;

use crate::execute::{ArmedRestore, ExecError, Executor, NodeOp, OpOutcome, PowerAction};

pub(crate) mod trust;

/// How a journaled fault is undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Undo {
    /// An operation run on the node.
    Node(NodeOp),
    /// Out-of-band power on (the undo of a power-off, and of an out-of-band reboot cut off
    /// between its stop and its start).
    #[serde(alias = "powerOn")]
    PowerOn,
    /// A Kubernetes API action (uncordon, untaint), carried out by the caller's API client.
    Api(Action),
}

/// How the journal undoes a reboot of `node` cut off midway: [`Undo::PowerOn`] when the
/// node reboots out of band with a `power.on` to bring it back (kind, k3d: `docker stop`,
/// then `docker start`), `None` when it reboots by itself (see
/// [`Executor::reboot_undo`]). The fault table gives a reboot no inverse, since a reboot
/// that ran is over; one interrupted between its stop and its start is not.
pub(crate) fn reboot_undo(executor: &Executor, node: &str) -> Option<Undo> {
    match executor.reboot_undo(node)? {
        PowerAction::On => Some(Undo::PowerOn),
        _ => None,
    }
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
    /// Running as root through sudo, but the invoking user's home is unknown: using root's
    /// own journal instead would hide the user's faults from a later `restore`.
    #[error(
        "cannot locate the fault journal: running under sudo for `{user}`, whose home \
         directory is not in the password database; pass --journal"
    )]
    NoSudoHome {
        /// SUDO_USER.
        user: String,
    },
}

/// The environment the journal's default location depends on, read once so that the
/// decision ([`journal_location`]) is a pure function tests can feed any environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct StateEnv {
    /// `XDG_STATE_HOME`.
    pub xdg_state_home: Option<OsString>,
    /// `HOME`.
    pub home: Option<OsString>,
    /// `SUDO_USER`: who ran `sudo`.
    pub sudo_user: Option<String>,
    /// `SUDO_UID`, as sudo set it.
    pub sudo_uid: Option<String>,
    /// `SUDO_GID`, as sudo set it.
    pub sudo_gid: Option<String>,
    /// The process' effective user id.
    pub euid: u32,
}

impl StateEnv {
    /// This process' environment and user.
    pub(crate) fn current() -> StateEnv {
        let text = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        StateEnv {
            xdg_state_home: std::env::var_os("XDG_STATE_HOME"),
            home: std::env::var_os("HOME"),
            sudo_user: text("SUDO_USER"),
            sudo_uid: text("SUDO_UID"),
            sudo_gid: text("SUDO_GID"),
            euid: effective_uid(),
        }
    }

    /// The user who ran sudo, when this process is root because of it: their name, uid and
    /// gid (the ids `None` when sudo did not pass them as numbers).
    fn sudo_invoker(&self) -> Option<(&str, Option<(u32, u32)>)> {
        let user = self.sudo_user.as_deref().filter(|u| *u != "root")?;
        if self.euid != 0 {
            return None;
        }
        let id = |v: &Option<String>| v.as_deref().and_then(|v| v.parse::<u32>().ok());
        Some((user, id(&self.sudo_uid).zip(id(&self.sudo_gid))))
    }
}

/// Where the journal is, and for whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Location {
    /// The journal file.
    pub path: PathBuf,
    /// Owner (uid, gid) to give the directories and files faultline creates for it: the
    /// invoking user's when running as root through sudo.
    pub owner: Option<(u32, u32)>,
    /// The invoking user, when the location was chosen for them under sudo.
    pub sudo_user: Option<String>,
}

/// The default journal location for `env`: `$XDG_STATE_HOME/faultline/journal.json`, else
/// `~/.local/state/faultline/journal.json`. As root through sudo, `~` is the invoking
/// user's home from `home_of` (the password database), not `HOME` (root's, under sudo's
/// defaults), and `XDG_STATE_HOME` only counts if sudo kept it, which makes it the user's.
pub(crate) fn journal_location(
    env: &StateEnv,
    home_of: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<Location, JournalError> {
    let xdg = env
        .xdg_state_home
        .as_ref()
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let (base, owner, sudo_user) = match env.sudo_invoker() {
        Some((user, owner)) => {
            let base = match xdg {
                Some(x) => x,
                None => home_of(user)
                    .ok_or_else(|| JournalError::NoSudoHome { user: user.into() })?
                    .join(".local/state"),
            };
            (base, owner, Some(user.to_string()))
        }
        None => {
            let base = xdg
                .or_else(|| {
                    env.home
                        .as_ref()
                        .filter(|v| !v.is_empty())
                        .map(|h| PathBuf::from(h).join(".local/state"))
                })
                .ok_or(JournalError::NoHome)?;
            (base, None, None)
        }
    };
    Ok(Location {
        path: base.join("faultline/journal.json"),
        owner,
        sudo_user,
    })
}

/// Who should own what faultline creates for the journal at `path`: the invoking user
/// when this process is root through sudo and `path` lies in that user's home or state
/// directory (so a `--journal` in their home works like the default one); else nobody in
/// particular (the process' own user).
fn owner_for(
    path: &Path,
    env: &StateEnv,
    home_of: &dyn Fn(&str) -> Option<PathBuf>,
) -> Option<(u32, u32)> {
    let (user, owner) = env.sudo_invoker()?;
    let owner = owner?;
    let path = std::path::absolute(path).ok()?;
    let xdg = env
        .xdg_state_home
        .as_ref()
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let mine = home_of(user)
        .into_iter()
        .chain(xdg)
        .any(|base| path.starts_with(base));
    mine.then_some(owner)
}

/// The home directory of `user` in the password database (`getpwnam_r`).
pub(crate) fn home_of(user: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let name = CString::new(user).ok()?;
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: passwd is plain old data, valid when zeroed.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: `name` is NUL-terminated, `pwd` and
        // `found` are live locals, and `buf` is writable for `buf.len()` bytes; the strings
        // written into `pwd` point into `buf`, which outlives their use below.
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 || found.is_null() || pwd.pw_dir.is_null() {
            return None;
        }
        // SAFETY: on success pw_dir points at a NUL-terminated string inside `buf`.
        let dir = unsafe { CStr::from_ptr(pwd.pw_dir) };
        let dir = std::ffi::OsStr::from_bytes(dir.to_bytes());
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The journal file and its current content.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    entries: Vec<Entry>,
    /// Owner for the directories and files created for it (see [`Location::owner`]).
    owner: Option<(u32, u32)>,
}

impl Journal {
    /// The default location for this process (see [`journal_location`]).
    pub(crate) fn default_location() -> Result<Location, JournalError> {
        journal_location(&StateEnv::current(), &home_of)
    }

    /// Open (or start) the journal at `path`; a missing file is an empty journal. Under
    /// sudo, what is created for a journal in the invoking user's home is given to them.
    pub(crate) fn open(path: impl AsRef<Path>) -> Result<Journal, JournalError> {
        let path = path.as_ref();
        Journal::open_as(path, owner_for(path, &StateEnv::current(), &home_of))
    }

    /// Open (or start) the journal at `path`, giving the directories and files it creates
    /// to `owner` (uid, gid) when set.
    pub(crate) fn open_as(
        path: impl AsRef<Path>,
        owner: Option<(u32, u32)>,
    ) -> Result<Journal, JournalError> {
        let path = path.as_ref().to_path_buf();
        if owner.is_some() {
            // Made now, as the user's, before anything else is written beside the journal
            // (the run's cluster snapshot) creates it as root.
            let dir = parent_dir(&path);
            create_dir_owned(dir, owner).map_err(io_err(dir))?;
        }
        let entries = {
            let _shared = lock(&path, Lock::Shared, owner)?;
            read(&path)?
        };
        Ok(Journal {
            path,
            entries,
            owner,
        })
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
        // Under the lock, re-read: another process' entries written since are kept.
        let _exclusive = lock(&self.path, Lock::Exclusive, self.owner)?;
        let mut entries = read(&self.path)?;
        entries.retain(|e| !new.iter().any(|n| n.id == e.id));
        entries.extend(new);
        write_atomic(&self.path, &entries, self.owner)?;
        self.entries = entries;
        Ok(())
    }

    /// Remove an entry after its undo succeeded; returns whether it was there.
    pub(crate) fn clear(&mut self, id: &str) -> Result<bool, JournalError> {
        Ok(self.clear_all(&[id])? == 1)
    }

    /// Removes several entries with one durable write; returns how many were there.
    pub(crate) fn clear_all(&mut self, ids: &[&str]) -> Result<usize, JournalError> {
        let _exclusive = lock(&self.path, Lock::Exclusive, self.owner)?;
        let mut entries = read(&self.path)?;
        let before = entries.len();
        entries.retain(|e| !ids.contains(&e.id.as_str()));
        let removed = before - entries.len();
        if removed > 0 {
            write_atomic(&self.path, &entries, self.owner)?;
        }
        self.entries = entries;
        Ok(removed)
    }

    /// Whether it holds any fault, of any cluster.
    pub(crate) fn holds_any(&self) -> bool {
        !self.entries.is_empty()
    }

    /// Active faults on one cluster, in the order they were journaled.
    pub(crate) fn active(&self, cluster: &str) -> Vec<Entry> {
        self.entries
            .iter()
            .filter(|e| e.cluster == cluster)
            .cloned()
            .collect()
    }
}

/// A live run's claim on its journal entries: an exclusive `flock` on a file of its own
/// beside the journal, held for the run's whole life and released by the kernel when its
/// process ends, however it ends. `restore` (and any run sharing the journal) tells a live
/// run's entries from a dead one's by it ([`Journal::run_alive`]), without trusting pids,
/// hosts or clocks: a restore started while the run still lives leaves its faults alone.
#[derive(Debug)]
pub(crate) struct RunClaim {
    path: PathBuf,
    _file: File,
}

impl Drop for RunClaim {
    fn drop(&mut self) {
        // Removed while still locked: a later reader finds no file, or a locked one.
        let _ = fs::remove_file(&self.path);
    }
}

impl Journal {
    /// The claim file of `run` beside this journal.
    fn claim_path(&self, run: &str) -> PathBuf {
        let mut name = self
            .path
            .file_name()
            .map(OsString::from)
            .unwrap_or_else(|| "journal.json".into());
        name.push(format!(".run-{run}.lock"));
        self.path.with_file_name(name)
    }

    /// Claims `run`'s entries for this process until the claim is dropped.
    pub(crate) fn claim_run(&self, run: &str) -> Result<RunClaim, JournalError> {
        let path = self.claim_path(run);
        let dir = parent_dir(&self.path);
        create_dir_owned(dir, self.owner).map_err(io_err(dir))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(io_err(&path))?;
        }
        file.try_lock().map_err(|e| match e {
            fs::TryLockError::WouldBlock => JournalError::Io {
                path: path.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!("run {run} is already claimed by a live process"),
                ),
            },
            fs::TryLockError::Error(source) => JournalError::Io {
                path: path.clone(),
                source,
            },
        })?;
        Ok(RunClaim { path, _file: file })
    }

    /// Whether a live process claims `run`'s entries ([`Journal::claim_run`]): its claim
    /// file is there and locked. A file left unlocked (its process died) is removed.
    pub(crate) fn run_alive(&self, run: &str) -> bool {
        let path = self.claim_path(run);
        let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else {
            return false;
        };
        match file.try_lock() {
            Ok(()) => {
                let _ = fs::remove_file(&path);
                false
            }
            Err(fs::TryLockError::WouldBlock) => true,
            Err(fs::TryLockError::Error(e)) => {
                tracing::warn!("cannot tell whether run {run} lives ({e}): taken as live");
                true
            }
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The lock file of the journal at `path`: beside it, never the journal itself, which
/// every write replaces by a rename (a lock on the old file would guard nothing).
fn lock_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(OsString::from)
        .unwrap_or_else(|| "journal.json".into());
    name.push(".lock");
    path.with_file_name(name)
}

/// What a lock is held for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lock {
    /// Reading: other readers may hold it too.
    Shared,
    /// A read-modify-write.
    Exclusive,
}

/// Takes `how` on the journal's lock file, waiting for it; released when the returned
/// file is dropped (the process dying releases it too, so a lock is never left behind).
/// A shared lock is best effort: without the journal's directory there is nothing to
/// read, and a reader that may not create the lock file still reads a whole journal,
/// since writes are atomic renames.
fn lock(path: &Path, how: Lock, owner: Option<(u32, u32)>) -> Result<Option<File>, JournalError> {
    let file = lock_path(path);
    let dir = parent_dir(path);
    if how == Lock::Shared && !dir.is_dir() {
        return Ok(None);
    }
    if how == Lock::Exclusive {
        create_dir_owned(dir, owner).map_err(io_err(dir))?;
    }
    let existed = file.exists();
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&file)
        // One made by another user (root through sudo, say) can still be locked read-only.
        .or_else(|_| File::open(&file));
    let f = match opened {
        Ok(f) => f,
        Err(e) if how == Lock::Shared => {
            tracing::debug!("reading {} without its lock: {e}", path.display());
            return Ok(None);
        }
        Err(e) => return Err(io_err(&file)(e)),
    };
    if !existed && let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&file, Some(uid), Some(gid)).map_err(io_err(&file))?;
    }
    match how {
        Lock::Shared => f.lock_shared(),
        Lock::Exclusive => f.lock(),
    }
    .map_err(io_err(&file))?;
    Ok(Some(f))
}

fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `create_dir_all`, giving each directory it creates to `owner` when set.
fn create_dir_owned(dir: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.exists()).collect();
    fs::create_dir_all(dir)?;
    if let Some((uid, gid)) = owner {
        for d in missing.iter().rev() {
            std::os::unix::fs::chown(d, Some(uid), Some(gid))?;
        }
    }
    Ok(())
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

/// Temp file in the same directory, fsync, rename over, fsync the directory. Called with
/// the exclusive lock held.
fn write_atomic(
    path: &Path,
    entries: &[Entry],
    owner: Option<(u32, u32)>,
) -> Result<(), JournalError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = parent_dir(path);
    create_dir_owned(dir, owner).map_err(io_err(dir))?;
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
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&tmp, Some(uid), Some(gid))?;
        }
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
pub(crate) async fn undo_with_retries<T, E: std::fmt::Display>(
    policy: &RetryPolicy,
    node: &str,
    fault: &str,
    mut undo: impl AsyncFnMut() -> Result<T, E>,
) -> (Result<T, E>, u32) {
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

/// Why one attempt at undoing a journaled fault failed: the node's command or power, or
/// the API undo the caller carries out (whose error is its own).
#[derive(Debug, Error)]
enum UndoError<E> {
    /// The node operation or power command failed.
    #[error("{0}")]
    Node(ExecError),
    /// The API undo failed.
    #[error("{0}")]
    Api(E),
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
    /// Last error when every attempt failed (the entry stays in the journal, and its
    /// self-restore stays armed).
    pub error: Option<String>,
    /// Something that went wrong after the undo succeeded (its self-restore could not be
    /// disarmed, so it will run the undo once more at its deadline).
    pub warning: Option<String>,
}

impl RestoreOutcome {
    /// An entry left alone, with why: nothing attempted.
    fn not_carried_out(entry: &Entry, why: String) -> RestoreOutcome {
        RestoreOutcome {
            id: entry.id.clone(),
            node: entry.node.clone(),
            fault: entry.fault.clone(),
            attempts: 0,
            outcome: None,
            error: Some(why),
            warning: None,
        }
    }

    #[cfg(test)]
    /// True when the fault was undone and cleared.
    pub(crate) fn restored(&self) -> bool {
        self.error.is_none()
    }
}

/// `entries` grouped by node (nodes in the order they first appear), each node's newest
/// fault first: the order a node's faults must be undone in (a node whose kubelet was
/// stopped and which was then powered off is powered on before its kubelet is started).
/// Faults journaled at the same instant go by their order in the journal, later first.
fn newest_first_by_node(entries: Vec<Entry>) -> Vec<Vec<Entry>> {
    let mut by_node: Vec<Vec<(usize, Entry)>> = Vec::new();
    for (i, e) in entries.into_iter().enumerate() {
        match by_node.iter_mut().find(|n| n[0].1.node == e.node) {
            Some(n) => n.push((i, e)),
            None => by_node.push(vec![(i, e)]),
        }
    }
    by_node
        .into_iter()
        .map(|mut faults| {
            faults.sort_by(|(i, a), (j, b)| b.injected_at.cmp(&a.injected_at).then(j.cmp(i)));
            faults.into_iter().map(|(_, e)| e).collect()
        })
        .collect()
}

/// Undo every active fault of `cluster`, retrying with backoff: all nodes at once, each
/// node's faults newest first, as a run's safety net does. Only once a fault's undo has
/// succeeded is its self-restore disarmed and its entry cleared; a fault whose undo keeps
/// failing keeps both, so the node still has its own way back. Node operations and power
/// go through `executor`; API undos through `api`. Outcomes come node by node, newest
/// fault first.
///
/// `screen` says of an entry why it must not be carried out (an undo no run writes, a live
/// run's fault): such an entry is reported with that reason and left in the journal.
pub(crate) async fn restore_all_with<F, E>(
    journal: &mut Journal,
    executor: &Executor,
    cluster: &str,
    policy: &RetryPolicy,
    screen: &dyn Fn(&Entry) -> Option<String>,
    api: F,
) -> Vec<RestoreOutcome>
where
    F: AsyncFn(&str, &Action, Duration) -> Result<OpOutcome, E>,
    E: std::fmt::Display,
{
    let nodes = newest_first_by_node(journal.active(cluster));
    let journal = std::sync::Mutex::new(journal);
    let (journal, api) = (&journal, &api);
    let per_node = join_all(nodes.into_iter().map(|faults| async move {
        let mut outcomes = Vec::new();
        for entry in faults {
            if let Some(why) = screen(&entry) {
                outcomes.push(RestoreOutcome::not_carried_out(&entry, why));
                continue;
            }
            outcomes.push(restore_one(entry, executor, policy, api, journal).await);
        }
        outcomes
    }))
    .await;
    per_node.into_iter().flatten().collect()
}

/// Undoes one journaled fault; once that succeeded, disarms its self-restore and clears it.
async fn restore_one<F, E>(
    entry: Entry,
    executor: &Executor,
    policy: &RetryPolicy,
    api: &F,
    journal: &std::sync::Mutex<&mut Journal>,
) -> RestoreOutcome
where
    F: AsyncFn(&str, &Action, Duration) -> Result<OpOutcome, E>,
    E: std::fmt::Display,
{
    // The undo is the run's own: its commands name the run that made the fault (a
    // partition's rule), so `restore` heals that run's partition and no other.
    let executor = &executor.clone().for_run(crate::execute::run_of(&entry.id));
    // A kubelet stopped through the API cannot be reached by exec: its undo watcher, if
    // the run armed one, is asked first, and the command then finds the kubelet back.
    if let Some(armed) = &entry.armed_restore
        && let Err(e) = executor.ask_undo(&entry.node, armed).await
    {
        tracing::warn!(node = %entry.node, "could not ask the undo watcher: {e}");
    }
    let undo = async || match &entry.undo {
        Undo::Node(op) => executor
            .perform(&entry.node, op, policy.timeout)
            .await
            .map_err(UndoError::Node),
        Undo::PowerOn => executor
            .power(&entry.node, PowerAction::On, policy.timeout)
            .await
            .map_err(UndoError::Node),
        Undo::Api(action) => api(&entry.node, action, policy.timeout)
            .await
            .map_err(UndoError::Api),
    };
    let (result, attempts) = undo_with_retries(policy, &entry.node, &entry.fault, undo).await;
    let mut out = RestoreOutcome {
        id: entry.id.clone(),
        node: entry.node.clone(),
        fault: entry.fault.clone(),
        attempts,
        outcome: None,
        error: None,
        warning: None,
    };
    let done = match result {
        Ok(done) => done,
        // The entry and the self-restore armed on the node both stay.
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    out.outcome = Some(done);
    if let Some(armed) = &entry.armed_restore
        && let Err(e) = executor.disarm(&entry.node, armed).await
    {
        out.warning = Some(format!(
            "its self-restore could not be disarmed ({e}); it will run the undo again at \
             its deadline"
        ));
    }
    let cleared = journal
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clear(&entry.id);
    if let Err(e) = cleared {
        out.error = Some(format!("undone, but the journal could not be updated: {e}"));
    }
    out
}

#[cfg(test)]
mod tests;
