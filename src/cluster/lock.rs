//! One run per cluster: a Lease in the API server that a run holds for its whole life, the
//! way kured holds its lock so that one node reboots at a time.
//!
//! Two runs faulting one cluster would judge each other's faults, and one run's undo and
//! `restore` would take down what the other made. The journal keeps runs apart on one
//! machine only; the Lease keeps them apart across machines and inside the cluster. A run
//! takes it before its first fault and renews it every [`RENEW_EVERY`]; a second run (or a
//! `restore`) refuses, naming the holder. A holder that died stops renewing: once its
//! Lease has not been renewed for [`LEASE_SECONDS`] it is taken over, and the run says
//! from whom; one that ran on this same machine and whose process is gone (`kill -9`, then
//! `faultline restore` or the next run) is taken over at once ([`gone_from_here`]). The
//! Lease is deleted when the run ends.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::{Api, Client};

/// The namespace of the lock's Lease: one every cluster has, and one no component keeps
/// its own Leases in (a Lease in `kube-node-lease` named like a node would pass for its
/// heartbeat).
pub const NAMESPACE: &str = "default";

/// The lock's name.
pub const NAME: &str = "faultline-run";

/// How long a Lease not renewed stays the holder's: after that its holder is taken for dead.
pub const LEASE_SECONDS: i32 = 60;

/// How often a holder renews it.
pub const RENEW_EVERY: Duration = Duration::from_secs(15);

/// The annotation saying what the holder runs, for the refusal's message.
const WHAT_ANNOTATION: &str = "faultline.dev/running";

/// Who holds the lock, as another run is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// `host/pid/run id`.
    pub identity: String,
    /// What it runs (`faultline run EXPERIMENT`).
    pub running: String,
    /// When it took the lock.
    pub since: Option<Timestamp>,
    /// When it last renewed it.
    pub renewed: Option<Timestamp>,
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// A live run holds it.
    #[error(
        "another faultline run holds cluster `{cluster}`: {} ({}), since {}, renewed {}; two runs \
         would judge each other's faults. Wait for it to end; if it died, its lock expires \
         {LEASE_SECONDS}s after its last renewal (Lease {NAMESPACE}/{NAME})",
        .holder.identity,
        .holder.running,
        show(.holder.since),
        show(.holder.renewed)
    )]
    Held {
        /// The cluster.
        cluster: String,
        /// Who.
        holder: Holder,
    },
    /// The API refused or failed.
    #[error("the cluster lock (Lease {NAMESPACE}/{NAME}): {0}")]
    Api(String),
}

fn show(t: Option<Timestamp>) -> String {
    t.map_or_else(
        || "never".into(),
        |t| {
            t.round(k8s_openapi::jiff::Unit::Second)
                .map_or_else(|_| t.to_string(), |r| r.to_string())
        },
    )
}

/// What to do with a Lease found in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// A live holder: refuse.
    Live(Holder),
    /// Not renewed for longer than its duration: its holder died; take it over.
    Dead(Holder),
}

/// Whether `lease` is held by a live run at `now`.
pub(crate) fn judge(lease: &Lease, now: Timestamp) -> Found {
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = Holder {
        identity: spec
            .holder_identity
            .clone()
            .unwrap_or_else(|| "unknown".into()),
        running: lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(WHAT_ANNOTATION).cloned())
            .unwrap_or_else(|| "unknown".into()),
        since: spec.acquire_time.as_ref().map(|t| t.0),
        renewed: spec.renew_time.as_ref().map(|t| t.0),
    };
    let last = holder.renewed.or(holder.since);
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS));
    match last {
        Some(last) if now.as_second() - last.as_second() <= duration => Found::Live(holder),
        _ => Found::Dead(holder),
    }
}

/// The lock, held: renewed in the background until [`ClusterLock::release`].
pub struct ClusterLock {
    leases: Api<Lease>,
    identity: String,
    renewing: tokio::task::JoinHandle<()>,
    /// The holder taken over, if the last one died.
    pub took_over: Option<Holder>,
}

/// This process's identity as a holder: `host/pid/run`.
pub fn identity(run: &str) -> String {
    format!("{}/{}/{run}", this_host(), std::process::id())
}

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into())
}

/// Whether `identity` names a faultline process on this machine that is no longer there:
/// its pid gone, or reused by a process that is not faultline. A holder killed here
/// (`kill -9`) is then known dead at once, without waiting [`LEASE_SECONDS`] for its
/// Lease to lapse, so `restore` and the next run can start. Another machine's holder, or
/// one whose process may still be faultline, is judged by its Lease alone.
pub(crate) fn gone_from_here(identity: &str) -> bool {
    let mut parts = identity.splitn(3, '/');
    let (Some(host), Some(pid)) = (parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    if host != this_host() || pid == std::process::id() {
        return false;
    }
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => !String::from_utf8_lossy(&cmdline).contains("faultline"),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

fn lease(identity: &str, running: &str, now: Timestamp, resource_version: Option<String>) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some(NAMESPACE.into()),
            resource_version,
            labels: Some(
                [(
                    "app.kubernetes.io/name".to_string(),
                    "faultline".to_string(),
                )]
                .into(),
            ),
            annotations: Some([(WHAT_ANNOTATION.to_string(), running.to_string())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(identity.into()),
            lease_duration_seconds: Some(LEASE_SECONDS),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
    }
}

fn api_error(what: &str) -> impl FnOnce(kube::Error) -> LockError + '_ {
    move |e| LockError::Api(format!("{what}: {e}"))
}

impl ClusterLock {
    /// Takes the lock of the cluster named `cluster` for `identity`, which runs
    /// `running`; refuses while a live run holds it, takes it over from a dead one.
    pub async fn take(
        client: &Client,
        cluster: &str,
        identity: &str,
        running: &str,
    ) -> Result<ClusterLock, LockError> {
        let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
        let now = Timestamp::now();
        let mut took_over = None;
        match leases
            .create(&PostParams::default(), &lease(identity, running, now, None))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let found = leases
                    .get(NAME)
                    .await
                    .map_err(api_error("reading the holder"))?;
                match judge(&found, Timestamp::now()) {
                    Found::Live(holder) if !gone_from_here(&holder.identity) => {
                        return Err(LockError::Held {
                            cluster: cluster.to_string(),
                            holder,
                        });
                    }
                    Found::Live(holder) | Found::Dead(holder) => {
                        // Replaced only as it was read: a run taking it meanwhile wins.
                        let version = found.metadata.resource_version.clone();
                        leases
                            .replace(
                                NAME,
                                &PostParams::default(),
                                &lease(identity, running, now, version),
                            )
                            .await
                            .map_err(|e| match e {
                                kube::Error::Api(e) if e.code == 409 => LockError::Api(
                                    "another run took it over first; try again".into(),
                                ),
                                e => api_error("taking it over")(e),
                            })?;
                        took_over = Some(holder);
                    }
                }
            }
            Err(e) => return Err(api_error("creating it")(e)),
        }
        let renewing = tokio::spawn(renew(leases.clone(), identity.to_string()));
        Ok(ClusterLock {
            leases,
            identity: identity.to_string(),
            renewing,
            took_over,
        })
    }

    /// Stops renewing and deletes the Lease, if it is still ours.
    pub async fn release(self) {
        self.renewing.abort();
        let Ok(Some(current)) = self.leases.get_opt(NAME).await else {
            return;
        };
        let ours = current
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            == Some(self.identity.as_str());
        if !ours {
            return;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: current.metadata.resource_version.clone(),
                uid: current.metadata.uid.clone(),
            }),
            ..DeleteParams::default()
        };
        if let Err(e) = self.leases.delete(NAME, &params).await {
            tracing::warn!("could not release the cluster lock (it expires by itself): {e}");
        }
    }
}

/// Renews the Lease every [`RENEW_EVERY`] while it is still `identity`'s.
async fn renew(leases: Api<Lease>, identity: String) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let Ok(Some(mut current)) = leases.get_opt(NAME).await else {
            tracing::warn!("the cluster lock could not be read to renew it");
            continue;
        };
        let spec = current.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(identity.as_str()) {
            tracing::warn!("the cluster lock was taken by {:?}", spec.holder_identity);
            return;
        }
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        if let Err(e) = leases.replace(NAME, &PostParams::default(), &current).await {
            tracing::warn!("could not renew the cluster lock: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("time")
    }

    #[test]
    fn a_lease_renewed_within_its_duration_is_live_and_one_older_is_dead() {
        let l = lease("host/1/run-a", "faultline run reboot", at(0), None);
        match judge(&l, at(30)) {
            Found::Live(h) => {
                assert_eq!(h.identity, "host/1/run-a");
                assert_eq!(h.running, "faultline run reboot");
                assert_eq!(h.renewed, Some(at(0)));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(judge(&l, at(60)), Found::Live(_)));
        assert!(matches!(judge(&l, at(61)), Found::Dead(_)));
        // A Lease that was never renewed nor acquired has no live holder.
        let mut blank = l.clone();
        blank.spec = Some(LeaseSpec::default());
        assert!(matches!(judge(&blank, at(0)), Found::Dead(_)));
    }

    #[test]
    fn a_holder_killed_on_this_machine_is_known_gone_at_once() {
        let host = this_host();
        // A process that has ended: its pid names nothing (or, reused, not faultline).
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let ended = child.id();
        child.wait().expect("wait");
        assert!(gone_from_here(&format!("{host}/{ended}/fl1")));
        // A live process that is not faultline: a pid reused since.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        assert!(gone_from_here(&format!("{host}/{}/fl1", sleeper.id())));
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        // This process (a faultline test binary) and another machine's holder are not.
        assert!(!gone_from_here(&format!(
            "{host}/{}/fl1",
            std::process::id()
        )));
        assert!(!gone_from_here(&format!("elsewhere-{host}/{ended}/fl1")));
        assert!(!gone_from_here("no-pid-here"));
    }

    #[test]
    fn the_refusal_names_the_holder_and_what_it_runs() {
        let e = LockError::Held {
            cluster: "kind".into(),
            holder: Holder {
                identity: "laptop/4242/fl2026".into(),
                running: "faultline run reboot".into(),
                since: Some(at(0)),
                renewed: Some(at(15)),
            },
        };
        let text = e.to_string();
        assert!(
            text.contains("laptop/4242/fl2026 (faultline run reboot)"),
            "{text}"
        );
        assert!(
            text.contains("expires 60s after its last renewal"),
            "{text}"
        );
    }
}
