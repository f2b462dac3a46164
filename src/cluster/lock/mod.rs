//! One run per cluster: a Lease in the API server that a run holds for its whole life, the
//! way kured holds its lock so that one node reboots at a time.
//!
//! Two runs faulting one cluster would judge each other's faults, and one run's undo and
//! `restore` would take down what the other made. The journal keeps runs apart on one
//! machine only; the Lease keeps them apart across machines and inside the cluster. A run
//! takes it before its first fault and holds it until its undo and teardown are over
//! ([`hold`]): renewed every [`RENEW_EVERY`], watched in between, confirmed before each
//! fault; a run that loses it (deleted, taken, not renewable) stops and undoes at once. A
//! second run (or a `restore`) refuses while the holder lives, naming it. Whether it lives
//! is decided on one clock ([`liveness`]): a renewal that looks fresh refuses at once; one
//! that does not is watched for the Lease's duration before its holder is called dead and
//! the Lease taken over, from whom the run says. A holder of this same machine and PID
//! namespace whose process is gone (`kill -9`, then `faultline restore` or the next run)
//! is taken over at once. The Lease is deleted when the run ends.

mod hold;
pub(crate) mod liveness;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::{Api, Client};

pub use hold::{GIVE_UP_AFTER, LockHandle, LockLost, NotRecorded};
pub use liveness::Holder;
use liveness::{FirstSight, Here, Look, PID_NAMESPACE_ANNOTATION, WHAT_ANNOTATION, Watched};

/// The namespace of the lock's Lease: one every cluster has, and one no component keeps
/// its own Leases in (a Lease in `kube-node-lease` named like a node would pass for its
/// heartbeat).
pub const NAMESPACE: &str = "default";

/// The lock's name.
pub const NAME: &str = "faultline-run";

/// How long a Lease not renewed stays the holder's: a reader watches it unchanged this
/// long before it takes the holder for dead.
pub const LEASE_SECONDS: i32 = 60;

/// How often a holder renews it.
pub const RENEW_EVERY: Duration = Duration::from_secs(15);

/// How often a Lease whose holder may be dead is read again while it is watched.
const LOOK_EVERY: Duration = Duration::from_secs(2);

/// How many times taking the lock starts again when the Lease changes under it (deleted
/// between a create and a read, taken over by someone else first).
const TAKE_ATTEMPTS: u32 = 3;

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// A live run holds it.
    #[error(
        "another faultline run holds cluster `{cluster}`: {} ({}), since {}, renewed {}; two runs \
         would judge each other's faults. Wait for it to end; if it died, its lock is taken over \
         once it has not been renewed for {LEASE_SECONDS}s (Lease {NAMESPACE}/{NAME})",
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
    /// Another run took the Lease between our read and our write.
    #[error(
        "another faultline run took the cluster lock (Lease {NAMESPACE}/{NAME}) over first; \
         wait for it to end"
    )]
    TakenFirst,
    /// The API refused the request (permissions, validation): the lock cannot be known.
    #[error("the cluster lock (Lease {NAMESPACE}/{NAME}): {0}")]
    Refused(String),
    /// The API server could not be reached.
    #[error("the cluster lock (Lease {NAMESPACE}/{NAME}): the API server did not answer: {0}")]
    Unreachable(String),
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

/// The lock, held: renewed in the background until [`ClusterLock::release`].
pub struct ClusterLock {
    handle: LockHandle,
    renewing: tokio::task::JoinHandle<()>,
    /// The holder taken over, if the last one died.
    pub took_over: Option<Holder>,
}

/// This process's identity as a holder: `host/pid/run`.
pub fn identity(run: &str) -> String {
    let here = Here::current();
    format!("{}/{}/{run}", here.host, here.pid)
}

fn lease(identity: &str, running: &str, now: Timestamp, resource_version: Option<String>) -> Lease {
    let mut annotations = vec![(WHAT_ANNOTATION.to_string(), running.to_string())];
    if let Some(ns) = Here::current().pid_namespace {
        annotations.push((PID_NAMESPACE_ANNOTATION.to_string(), ns));
    }
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
            annotations: Some(annotations.into_iter().collect()),
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

/// A kube error as the lock's error: no answer at all, or a refusal.
fn api_error(what: &str) -> impl FnOnce(kube::Error) -> LockError + '_ {
    move |e| match e {
        kube::Error::Api(status) => LockError::Refused(format!("{what}: {status}")),
        other => LockError::Unreachable(format!("{what}: {other}")),
    }
}

/// What watching a Lease whose holder may be dead found.
enum Watch {
    /// It was written meanwhile: its holder (the one now on it) lives.
    Written(Lease),
    /// It was deleted meanwhile: create it again.
    Gone,
    /// Unchanged for its duration: its holder is dead; replace this version.
    Expired(Lease),
}

/// Watches `found` on this machine's clock until it changes or its duration passed.
async fn watch_holder(leases: &Api<Lease>, found: Lease) -> Result<Watch, LockError> {
    let watched = Watched::start(&found, tokio::time::Instant::now());
    let holder = Holder::of(&found);
    tracing::warn!(
        "the cluster lock is held by {} ({}), last renewed {} by its own clock, which this \
         machine cannot check: watching it for up to {}s to see whether it is still renewed",
        holder.identity,
        holder.running,
        show(holder.renewed),
        watched.duration().as_secs()
    );
    loop {
        tokio::time::sleep(LOOK_EVERY).await;
        let Some(now) = leases
            .get_opt(NAME)
            .await
            .map_err(api_error("watching the holder"))?
        else {
            return Ok(Watch::Gone);
        };
        match watched.look(
            now.metadata.resource_version.as_deref(),
            tokio::time::Instant::now(),
        ) {
            Look::Written => return Ok(Watch::Written(now)),
            Look::Expired => return Ok(Watch::Expired(now)),
            Look::Unchanged => {}
        }
    }
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
        let held = |holder: Holder| LockError::Held {
            cluster: cluster.to_string(),
            holder,
        };
        let mut took_over = None;
        let mut attempts = 0;
        let version = loop {
            attempts += 1;
            if attempts > TAKE_ATTEMPTS {
                return Err(LockError::TakenFirst);
            }
            let now = Timestamp::now();
            match leases
                .create(&PostParams::default(), &lease(identity, running, now, None))
                .await
            {
                Ok(created) => break created.metadata.resource_version,
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(api_error("creating it")(e)),
            }
            let Some(found) = leases
                .get_opt(NAME)
                .await
                .map_err(api_error("reading the holder"))?
            else {
                continue;
            };
            let replace = match liveness::first_sight(&found, Timestamp::now(), &Here::current()) {
                FirstSight::Live(holder) => return Err(held(holder)),
                FirstSight::Free(holder) => (found, holder),
                FirstSight::Unsure(holder) => match watch_holder(&leases, found).await? {
                    Watch::Written(now) => return Err(held(Holder::of(&now))),
                    Watch::Gone => continue,
                    Watch::Expired(now) => (now, Some(holder)),
                },
            };
            let (found, holder) = replace;
            // Replaced only as it was read: a run taking it meanwhile wins.
            let version = found.metadata.resource_version.clone();
            match leases
                .replace(
                    NAME,
                    &PostParams::default(),
                    &lease(identity, running, Timestamp::now(), version),
                )
                .await
            {
                Ok(written) => {
                    took_over = holder;
                    break written.metadata.resource_version;
                }
                Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => continue,
                Err(e) => return Err(api_error("taking it over")(e)),
            }
        };
        let handle = LockHandle::new(leases, identity, version);
        let renewing = tokio::spawn(hold::keep(handle.clone()));
        Ok(ClusterLock {
            handle,
            renewing,
            took_over,
        })
    }

    /// What the run watches and asks: whether the lock is still its own.
    pub fn handle(&self) -> LockHandle {
        self.handle.clone()
    }

    /// Stops renewing and leaves the Lease to lapse, with what it records: a taker that could
    /// not undo what a dead holder left hands it on to the next one.
    pub fn abandon(self) {
        self.renewing.abort();
    }

    /// Stops renewing and deletes the Lease, if it is still ours.
    pub async fn release(self) {
        self.renewing.abort();
        let leases = &self.handle.leases();
        let Ok(Some(current)) = leases.get_opt(NAME).await else {
            return;
        };
        let ours = current
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            == Some(self.handle.identity());
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
        if let Err(e) = leases.delete(NAME, &params).await {
            tracing::warn!("could not release the cluster lock (it expires by itself): {e}");
        }
    }
}

#[cfg(test)]
mod tests;
