//! Whether the holder of a Lease found in place is alive, decided without trusting two
//! machines' clocks to agree.
//!
//! A Lease carries its holder's own timestamps, written by the holder's clock. Read on
//! another machine, they are only a hint: a reader whose clock runs five minutes ahead
//! would call every live holder dead. So the hint may only ever make a reader *refuse*
//! (a renewal that looks fresh is taken as live at once); to call a holder dead, the
//! reader watches the Lease itself over its whole duration on its own monotonic clock,
//! as client-go's leader election does (`observedTime`): a holder that renews changes the
//! Lease's `resourceVersion`, which the API server alone assigns. One that did not change
//! it for `leaseDurationSeconds` is dead, whatever anyone's wall clock says.
//!
//! The one shortcut: a holder on this very machine, in this very PID namespace, whose
//! process is gone. Only there can a pid be looked up and mean the holder's process, so
//! the holder's PID namespace travels with the Lease and is compared first.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;

/// How far in the future a holder's renewal may look, by this machine's clock, and still
/// be taken as fresh: clocks a few seconds apart are normal; beyond that the timestamps
/// say nothing, and the Lease is watched instead.
pub(crate) const SKEW_ALLOWED: Duration = Duration::from_secs(5);

/// Who holds the lock, as another run is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// `host/pid/run id`.
    pub identity: String,
    /// What it runs (`faultline run EXPERIMENT`).
    pub running: String,
    /// When it took the lock (its own clock).
    pub since: Option<Timestamp>,
    /// When it last renewed it (its own clock).
    pub renewed: Option<Timestamp>,
    /// The PID namespace it ran in (`boot id:pid namespace`), when it could tell.
    pub pid_namespace: Option<String>,
    /// The undos through the API of the faults it had in place, as it recorded them on
    /// the Lease ([`API_UNDOS_ANNOTATION`]): what its taker carries out, since no node
    /// timer ends a cordon, a drain or a taint.
    pub api_undos: Option<String>,
}

/// The annotation saying what the holder runs, for the refusal's message.
pub(crate) const WHAT_ANNOTATION: &str = "faultline.dev/running";

/// The annotation naming the holder's PID namespace ([`Here::pid_namespace`]).
pub(crate) const PID_NAMESPACE_ANNOTATION: &str = "faultline.dev/pid-namespace";

/// The annotation holding the holder's faults undone through the API (JSON, journal
/// entries), kept current while it holds the lock.
pub(crate) const API_UNDOS_ANNOTATION: &str = "faultline.dev/api-undos";

impl Holder {
    /// The holder a Lease names.
    pub(crate) fn of(lease: &Lease) -> Holder {
        let spec = lease.spec.clone().unwrap_or_default();
        let annotation = |key: &str| {
            lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key).cloned())
        };
        Holder {
            identity: spec
                .holder_identity
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            running: annotation(WHAT_ANNOTATION).unwrap_or_else(|| "unknown".into()),
            since: spec.acquire_time.as_ref().map(|t| t.0),
            renewed: spec.renew_time.as_ref().map(|t| t.0),
            pid_namespace: annotation(PID_NAMESPACE_ANNOTATION),
            api_undos: annotation(API_UNDOS_ANNOTATION),
        }
    }
}

/// The machine and process a reader runs as: what a holder's identity is compared with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Here {
    /// The host name (`/proc/sys/kernel/hostname`).
    pub host: String,
    /// This process's id, as its own PID namespace numbers it.
    pub pid: u32,
    /// `boot id:pid namespace` (`/proc/sys/kernel/random/boot_id`, `/proc/self/ns/pid`),
    /// only when `/proc` is this process's own PID namespace's (`/proc/self` names this
    /// pid): then, and only then, `/proc/PID` of another process of the same namespace
    /// means that process.
    pub pid_namespace: Option<String>,
}

impl Here {
    /// This process, read from `/proc`.
    pub(crate) fn current() -> Here {
        let pid = std::process::id();
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let own_proc = std::fs::read_link("/proc/self")
            .ok()
            .is_some_and(|p| p.to_string_lossy() == pid.to_string());
        let pid_namespace = own_proc
            .then(|| {
                let boot = read("/proc/sys/kernel/random/boot_id")?;
                let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
                Some(format!("{boot}:{}", ns.to_string_lossy()))
            })
            .flatten();
        Here {
            host: read("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown-host".into()),
            pid,
            pid_namespace,
        }
    }
}

/// Whether `holder` is provably a process of this machine and PID namespace that is no
/// longer there: its pid gone, or reused by a process that is not faultline. A holder
/// killed here (`kill -9`) is then known dead at once, without watching its Lease for its
/// whole duration. Anything not provable (another host, another PID namespace on the same
/// host name, no `/proc`) is `false`: its Lease decides.
pub(crate) fn gone_from_here(holder: &Holder, here: &Here) -> bool {
    let Some(ours) = &here.pid_namespace else {
        return false;
    };
    if holder.pid_namespace.as_deref() != Some(ours.as_str()) {
        return false;
    }
    let mut parts = holder.identity.splitn(3, '/');
    let (Some(host), Some(pid)) = (parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    if host != here.host || pid == here.pid {
        return false;
    }
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => !String::from_utf8_lossy(&cmdline).contains("faultline"),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// What a Lease found in place says at first sight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FirstSight {
    /// Renewed recently by this machine's clock: a live holder; refuse at once.
    Live(Holder),
    /// Released (no holder), or a holder of this machine whose process is gone: take it.
    Free(Option<Holder>),
    /// Its timestamps say nothing this machine may trust (stale or in the future by its
    /// clock): watch it for its duration before calling its holder dead.
    Unsure(Holder),
}

/// What a Lease's own fields say at `now` (this machine's clock), seen from `here`.
pub(crate) fn first_sight(lease: &Lease, now: Timestamp, here: &Here) -> FirstSight {
    let spec = lease.spec.clone().unwrap_or_default();
    if spec.holder_identity.as_deref().is_none_or(str::is_empty) {
        return FirstSight::Free(None);
    }
    let holder = Holder::of(lease);
    if gone_from_here(&holder, here) {
        return FirstSight::Free(Some(holder));
    }
    let duration = lease_duration(lease);
    let fresh = holder.renewed.or(holder.since).is_some_and(|last| {
        let age = now.as_millisecond() - last.as_millisecond();
        let skew = i64::try_from(SKEW_ALLOWED.as_millis()).unwrap_or(i64::MAX);
        let duration = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        (-skew..=duration).contains(&age)
    });
    if fresh {
        FirstSight::Live(holder)
    } else {
        FirstSight::Unsure(holder)
    }
}

/// How long a Lease is its holder's without a renewal: its own `leaseDurationSeconds`
/// (at least one second), else faultline's.
pub(crate) fn lease_duration(lease: &Lease) -> Duration {
    let secs = lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .unwrap_or(super::LEASE_SECONDS)
        .max(1);
    Duration::from_secs(u64::from(secs.unsigned_abs()))
}

/// A Lease watched on this machine's monotonic clock: the version first seen and when.
#[derive(Debug, Clone)]
pub(crate) struct Watched<I> {
    version: Option<String>,
    since: I,
    duration: Duration,
}

/// What one more look at a watched Lease says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    /// Its version changed: its holder (or another) wrote it, so someone is alive.
    Written,
    /// Unchanged, and not yet for its whole duration: look again.
    Unchanged,
    /// Unchanged for its whole duration on this clock: its holder is dead.
    Expired,
}

impl<I: Copy + std::ops::Sub<Output = Duration>> Watched<I> {
    /// Starts watching `lease` at `now`.
    pub(crate) fn start(lease: &Lease, now: I) -> Self {
        Watched {
            version: lease.metadata.resource_version.clone(),
            since: now,
            duration: lease_duration(lease),
        }
    }

    /// Its version now (`version`), seen at `now`.
    pub(crate) fn look(&self, version: Option<&str>, now: I) -> Look {
        if version != self.version.as_deref() {
            Look::Written
        } else if now - self.since > self.duration {
            Look::Expired
        } else {
            Look::Unchanged
        }
    }

    /// How long it is watched in all.
    pub(crate) fn duration(&self) -> Duration {
        self.duration
    }
}
