//! Holding the lock: renewing the Lease, and noticing at once when it is no longer ours.
//!
//! A holder that cannot keep its Lease must stop faulting *before* anyone else could take
//! it: a reader takes over only after watching the Lease unchanged for its whole duration
//! ([`super::liveness`]), which starts at the earliest right after this holder's last
//! renewal. So the holder gives up [`GIVE_UP_AFTER`] after its last renewal that went
//! through, well inside [`super::LEASE_SECONDS`], and at once when the Lease is deleted
//! (an admin's `kubectl delete lease`, a namespace cleanup) or names someone else. Giving
//! up cancels the run ([`LockHandle::lost`]), which then undoes its faults, and says why.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::watcher;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::liveness::API_UNDOS_ANNOTATION;
use super::{NAME, RENEW_EVERY};

/// How long after its last renewal that went through a holder gives up the lock: half the
/// Lease's duration, so that a run cut off from the API server (or from this runner
/// alone) has stopped and begun its undo long before anyone may take over.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(30);

/// How soon a renewal that failed is tried again.
const RETRY_EVERY: Duration = Duration::from_secs(3);

/// The longest one renewal is waited for: an API server that does not answer must not
/// hold the holder past [`GIVE_UP_AFTER`].
const RENEW_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a held lock is held no more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockLost {
    /// The Lease was deleted under the run.
    #[error(
        "the cluster lock (Lease {}/{NAME}) was deleted while this run held it: another run \
         could start beside this one, so this one stops and undoes its faults",
        super::NAMESPACE
    )]
    Deleted,
    /// Another holder's name is on it.
    #[error(
        "the cluster lock (Lease {}/{NAME}) was taken by {by} ({running}) while this run \
         held it: two runs would judge each other's faults, so this one stops and undoes its \
         faults",
        super::NAMESPACE
    )]
    Taken {
        /// The new holder.
        by: String,
        /// What it runs.
        running: String,
    },
    /// Renewals kept failing.
    #[error(
        "the cluster lock (Lease {}/{NAME}) could not be renewed for {}s (last error: \
         {error}): before another run may take it over, this one stops and undoes its faults",
        super::NAMESPACE,
        .for_.as_secs()
    )]
    Unrenewable {
        /// How long since the last renewal that went through.
        for_: Duration,
        /// The last renewal's error.
        error: String,
    },
}

/// The Lease could not be written with the run's API undos ([`LockHandle::note_api_undos`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cluster lock (Lease {ns}/{NAME}) could not record this run's undos through the API \
     ({0}): if faultline is killed, only its own journal has them",
    ns = super::NAMESPACE
)]
pub struct NotRecorded(String);

/// What the holder knows of its lock.
#[derive(Debug)]
struct State {
    /// The Lease's version after our last write.
    version: Option<String>,
    /// When our last renewal went through.
    renewed: Instant,
    /// Why it is lost, once it is.
    lost: Option<LockLost>,
    /// What the Lease must carry of this run's API undos (JSON), `None`: nothing.
    api_undos: Option<String>,
}

/// A held lock as the run sees it: whether it is still ours, and a token cancelled the
/// moment it is not. Cheap to clone.
#[derive(Clone)]
pub struct LockHandle {
    leases: Api<Lease>,
    identity: String,
    state: Arc<Mutex<State>>,
    lost: CancellationToken,
}

impl std::fmt::Debug for LockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockHandle")
            .field("identity", &self.identity)
            .field("lost", &self.lost())
            .finish()
    }
}

impl LockHandle {
    pub(super) fn new(leases: Api<Lease>, identity: &str, version: Option<String>) -> Self {
        LockHandle {
            leases,
            identity: identity.to_string(),
            state: Arc::new(Mutex::new(State {
                version,
                renewed: Instant::now(),
                lost: None,
                api_undos: None,
            })),
            lost: CancellationToken::new(),
        }
    }

    /// The Leases of the lock's namespace.
    pub(super) fn leases(&self) -> Api<Lease> {
        self.leases.clone()
    }

    /// The holder identity written on the Lease.
    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }

    /// Cancelled when the lock is lost.
    pub fn lost_token(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Why the lock is lost, once it is.
    pub fn lost(&self) -> Option<LockLost> {
        self.with_state(|s| s.lost.clone())
    }

    /// Whether the lock is still ours as far as this process knows, without asking the
    /// API server: not lost, and renewed within [`GIVE_UP_AFTER`]. For the issue path of a
    /// step, which must not wait on a round trip.
    pub(crate) fn held_here(&self) -> Result<(), LockLost> {
        let (lost, since) = self.with_state(|s| (s.lost.clone(), s.renewed.elapsed()));
        if let Some(lost) = lost {
            return Err(lost);
        }
        if since >= GIVE_UP_AFTER {
            let lost = LockLost::Unrenewable {
                for_: since,
                error: "no renewal went through".into(),
            };
            self.lose(lost.clone());
            return Err(lost);
        }
        Ok(())
    }

    /// Asks the API server whether the Lease is still this run's: before each fault.
    pub(crate) async fn confirm(&self) -> Result<(), LockLost> {
        self.held_here()?;
        match self.leases.get_opt(NAME).await {
            Ok(Some(lease)) => self.check_ours(&lease).map(|_| ()),
            Ok(None) => Err(self.lose(LockLost::Deleted)),
            // Not an answer: the renewals decide (they give up in time).
            Err(e) => {
                tracing::warn!("the cluster lock could not be read before a fault: {e}");
                self.held_here()
            }
        }
    }

    /// Records on the Lease, at once, this run's faults that are undone through the API
    /// (`undos`: JSON; `None` when there are none left): a run killed with them in place
    /// leaves them where any later run or `restore` against this cluster finds them, when it
    /// takes the lock over ([`super::Holder::api_undos`]), whatever became of this machine
    /// and its journal. `Err`: the Lease could not be written (the run's own journal still
    /// holds them).
    pub(crate) async fn note_api_undos(&self, undos: Option<String>) -> Result<(), NotRecorded> {
        self.with_state(|s| s.api_undos = undos);
        match tokio::time::timeout(RENEW_TIMEOUT, self.renew_once()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(RenewError::Failed(e))) => Err(NotRecorded(e)),
            Ok(Err(RenewError::Lost)) => Err(NotRecorded(
                self.lost()
                    .map_or_else(|| "the lock is lost".into(), |l| l.to_string()),
            )),
            Err(_) => Err(NotRecorded(format!(
                "no answer within {}s",
                RENEW_TIMEOUT.as_secs()
            ))),
        }
    }

    /// `Ok` when `lease` names this holder; else the lock is lost to whoever it names.
    fn check_ours(&self, lease: &Lease) -> Result<(), LockLost> {
        let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
        if holder.as_deref() == Some(self.identity.as_str()) {
            return Ok(());
        }
        let by = super::liveness::Holder::of(lease);
        Err(self.lose(LockLost::Taken {
            by: holder.unwrap_or_else(|| "nobody (released)".into()),
            running: by.running,
        }))
    }

    /// Marks the lock lost (the first reason stays) and cancels the run; returns the reason
    /// that stands.
    fn lose(&self, why: LockLost) -> LockLost {
        let stands = self.with_state(|s| s.lost.get_or_insert(why).clone());
        if !self.lost.is_cancelled() {
            tracing::warn!("{stands}");
            self.lost.cancel();
        }
        stands
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// One renewal: our last version, our renew time now. A conflict is read again: still
    /// ours (someone touched an annotation), it is renewed on the version read.
    async fn renew_once(&self) -> Result<(), RenewError> {
        for _ in 0..3 {
            let Some(version) = self.with_state(|s| s.version.clone()) else {
                return Err({
                    self.lose(LockLost::Deleted);
                    RenewError::Lost
                });
            };
            let mut lease = match self.leases.get_opt(NAME).await {
                Ok(Some(l)) => l,
                Ok(None) => {
                    return Err({
                        self.lose(LockLost::Deleted);
                        RenewError::Lost
                    });
                }
                Err(e) => return Err(RenewError::Failed(e.to_string())),
            };
            self.check_ours(&lease).map_err(|_| RenewError::Lost)?;
            if lease.metadata.resource_version.as_deref() != Some(version.as_str()) {
                tracing::debug!("the cluster lock was written by someone else; still ours");
            }
            let undos = self.with_state(|s| s.api_undos.clone());
            let annotations = lease
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            match undos {
                Some(text) => annotations.insert(API_UNDOS_ANNOTATION.to_string(), text),
                None => annotations.remove(API_UNDOS_ANNOTATION),
            };
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            match self
                .leases
                .replace(NAME, &PostParams::default(), &lease)
                .await
            {
                Ok(written) => {
                    self.with_state(|s| {
                        s.version = written.metadata.resource_version.clone();
                        s.renewed = Instant::now();
                    });
                    return Ok(());
                }
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    return Err({
                        self.lose(LockLost::Deleted);
                        RenewError::Lost
                    });
                }
                Err(e) => return Err(RenewError::Failed(e.to_string())),
            }
        }
        Err(RenewError::Failed(
            "the Lease kept changing under the renewal".into(),
        ))
    }
}

enum RenewError {
    /// The lock is lost ([`LockHandle::lost`] says why).
    Lost,
    /// This renewal failed; the next may go through.
    Failed(String),
}

/// Renews the lock every [`RENEW_EVERY`] (every [`RETRY_EVERY`] after a failure) and
/// watches its Lease between renewals; gives it up ([`LockHandle::lost`]) when it is
/// deleted, taken, or not renewed for [`GIVE_UP_AFTER`]. Ends when the lock is lost.
pub(super) async fn keep(handle: LockHandle) {
    let watch = watch_for_loss(handle.clone());
    tokio::pin!(watch);
    let mut wait = RENEW_EVERY;
    loop {
        tokio::select! {
            () = handle.lost.cancelled() => return,
            () = &mut watch => {}
            () = tokio::time::sleep(wait) => {}
        }
        if handle.lost.is_cancelled() {
            return;
        }
        let renewed = tokio::time::timeout(RENEW_TIMEOUT, handle.renew_once())
            .await
            .unwrap_or_else(|_| {
                Err(RenewError::Failed(format!(
                    "no answer within {}s",
                    RENEW_TIMEOUT.as_secs()
                )))
            });
        wait = match renewed {
            Ok(()) => RENEW_EVERY,
            Err(RenewError::Lost) => return,
            Err(RenewError::Failed(error)) => {
                let since = handle.with_state(|s| s.renewed.elapsed());
                if since >= GIVE_UP_AFTER {
                    handle.lose(LockLost::Unrenewable { for_: since, error });
                    return;
                }
                tracing::warn!("could not renew the cluster lock (tried again shortly): {error}");
                RETRY_EVERY.min(GIVE_UP_AFTER.saturating_sub(since))
            }
        };
    }
}

/// Watches the Lease and loses the lock the moment it is deleted or names another holder.
/// A watch that fails is started again by the watcher's backoff; between, the renewals
/// notice what it would have.
async fn watch_for_loss(handle: LockHandle) {
    let config = watcher::Config::default().fields(&format!("metadata.name={NAME}"));
    let mut events = std::pin::pin!(watcher::watcher(handle.leases.clone(), config));
    let mut seen_in_list = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => {
                seen_in_list = true;
                if handle.check_ours(&lease).is_err() {
                    return;
                }
            }
            Ok(watcher::Event::Delete(_)) => {
                handle.lose(LockLost::Deleted);
                return;
            }
            Ok(watcher::Event::Init) => seen_in_list = false,
            // A (re)list that did not find it: it is gone.
            Ok(watcher::Event::InitDone) if !seen_in_list => {
                handle.lose(LockLost::Deleted);
                return;
            }
            Ok(watcher::Event::InitDone) => {}
            Err(e) => tracing::debug!("the cluster lock's watch: {e}"),
        }
    }
    // The watcher's stream does not end; were it to, the renewals go on alone.
    std::future::pending::<()>().await;
}
