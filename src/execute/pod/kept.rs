//! Node-access pods kept for a whole run, one per node reached through the API, so that a
//! step's command is one exec into a pod already running on its node instead of a pod
//! created, scheduled by the kubelet and started first. On kind that start is 1.5–2.5 s per
//! node on a quiet machine; with 20 nodes on two loaded cores it was seconds per step, past
//! the step's own offset (docs/performance.md).
//!
//! A kept pod is an ordinary node-access pod ([`super::AccessPod`]): labelled for
//! `restore`, ending by itself at its deadline, which the run sets past its planned length.
//! A command uses it only while its deadline is far enough away for the command, and the
//! first exec it cannot open there (the pod was deleted or evicted, its node restarted, its
//! kubelet is away) takes it out of the pool: that command and every later one on the node
//! start a pod of their own, as without a pool. Opening an exec sends nothing to the node,
//! so a command never runs twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::time::Instant;

use super::AccessPod;

/// One kept pod and the earliest its own deadline can end it.
struct Kept {
    pod: Arc<AccessPod>,
    ends_by: Instant,
}

/// The kept node-access pods of one executor (shared by its clones), by node.
#[derive(Default)]
pub(crate) struct KeptPods {
    kept: Mutex<HashMap<String, Kept>>,
    /// Pods taken out of the pool that a command may still hold: the last holder's drop
    /// deletes one, and the run's end deletes one still held then (a command sent ahead
    /// and never released holds its pod until the executor goes, at the process's exit).
    retired: Mutex<Vec<Weak<AccessPod>>>,
}

impl std::fmt::Debug for KeptPods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<String> = self
            .kept
            .lock()
            .map(|kept| kept.keys().cloned().collect())
            .unwrap_or_default();
        f.debug_struct("KeptPods").field("nodes", &nodes).finish()
    }
}

impl KeptPods {
    /// Keeps `pod`, running on `node`, whose deadline cannot end it before `ends_by`; one
    /// kept already for the node is let go (deleted once no command holds it).
    pub(crate) fn keep(&self, node: &str, pod: AccessPod, ends_by: Instant) {
        let replaced = self.kept.lock().ok().and_then(|mut kept| {
            kept.insert(
                node.to_string(),
                Kept {
                    pod: Arc::new(pod),
                    ends_by,
                },
            )
        });
        if let Some(replaced) = replaced {
            self.retire(replaced.pod);
        }
    }

    /// Lets `pod` go from the pool: deleted by its last holder's drop, or at the run's end
    /// if one still holds it then.
    fn retire(&self, pod: Arc<AccessPod>) {
        if let Ok(mut retired) = self.retired.lock() {
            retired.retain(|held| held.strong_count() > 0);
            retired.push(Arc::downgrade(&pod));
        }
        drop(pod);
    }

    /// The pod kept on `node` when it outlives `needed_until` (a command that may still
    /// be heard then must not have its pod ended under it); `None` sends the command to a
    /// pod of its own.
    pub(crate) fn get(&self, node: &str, needed_until: Instant) -> Option<Arc<AccessPod>> {
        let kept = self.kept.lock().ok()?;
        let found = kept.get(node)?;
        (found.ends_by > needed_until).then(|| Arc::clone(&found.pod))
    }

    /// Takes `pod` out of the pool (an exec could not be opened in it): the node's next
    /// commands start pods of their own. The pod is deleted once no command holds it.
    pub(crate) fn forget(&self, node: &str, pod: &Arc<AccessPod>) {
        let removed = self.kept.lock().ok().and_then(|mut kept| {
            let same = kept.get(node).is_some_and(|k| Arc::ptr_eq(&k.pod, pod));
            if same { kept.remove(node) } else { None }
        });
        if let Some(removed) = removed {
            tracing::debug!(node, "the kept node-access pod no longer takes an exec");
            self.retire(removed.pod);
        }
    }

    /// How many nodes have a pod kept.
    pub(crate) fn len(&self) -> usize {
        self.kept.lock().map(|kept| kept.len()).unwrap_or(0)
    }

    /// Deletes every kept pod now (the run is over), even one a command still holds: a
    /// step sent ahead and never released waits in it, and its gate reads end-of-file and
    /// runs nothing when the pod goes. Left to the last holder, the deletion would be
    /// spawned as the process exits and never sent, and the pod would stay privileged on
    /// its node until its deadline.
    /// A pod taken out of the pool earlier and still held is deleted too.
    pub(crate) async fn delete_all(&self) {
        let mut all: Vec<Arc<AccessPod>> = match self.kept.lock() {
            Ok(mut kept) => kept.drain().map(|(_, k)| k.pod).collect(),
            Err(_) => Vec::new(),
        };
        if let Ok(mut retired) = self.retired.lock() {
            all.extend(retired.drain(..).filter_map(|held| held.upgrade()));
        }
        futures::future::join_all(all.iter().map(|pod| pod.delete())).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A client that reaches no API server: deleting through it only logs.
    fn nowhere() -> kube::Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        kube::Client::try_from(config).expect("a client")
    }

    /// A handle on a pod already deleted as far as the handle knows.
    fn pod(name: &str) -> AccessPod {
        AccessPod::standing_in(nowhere(), name)
    }

    /// A handle on a pod not deleted yet.
    fn live_pod(name: &str) -> AccessPod {
        AccessPod::standing_in_live(nowhere(), name)
    }

    /// A command must not be sent into a pod whose deadline can end it first: it gets a
    /// pod of its own.
    #[tokio::test]
    async fn a_kept_pod_is_used_only_by_a_command_it_outlives() {
        let pool = KeptPods::default();
        let now = Instant::now();
        pool.keep("w1", pod("p1"), now + Duration::from_secs(60));
        assert!(pool.get("w1", now + Duration::from_secs(59)).is_some());
        assert!(
            pool.get("w1", now + Duration::from_secs(60)).is_none(),
            "a command heard until the pod's deadline was sent into it"
        );
        assert!(pool.get("w2", now).is_none(), "another node's pod was lent");
    }

    /// Forgetting a pod that failed an exec must not drop a newer one kept since for the
    /// same node.
    #[tokio::test]
    async fn forgetting_a_failed_pod_leaves_its_replacement() {
        let pool = KeptPods::default();
        let later = Instant::now() + Duration::from_secs(60);
        pool.keep("w1", pod("old"), later);
        let old = pool.get("w1", Instant::now()).expect("kept");
        pool.keep("w1", pod("new"), later);
        pool.forget("w1", &old);
        let kept = pool
            .get("w1", Instant::now())
            .expect("the replacement stays");
        assert_eq!(kept.name(), "new");
        pool.forget("w1", &kept);
        assert!(pool.get("w1", Instant::now()).is_none());
        assert_eq!(pool.len(), 0);
    }

    /// At the end every kept pod leaves the pool, and one still held by a command stays
    /// usable by that command.
    #[tokio::test]
    async fn deleting_all_empties_the_pool_but_spares_a_pod_in_use() {
        let pool = KeptPods::default();
        let later = Instant::now() + Duration::from_secs(60);
        pool.keep("w1", pod("p1"), later);
        pool.keep("w2", pod("p2"), later);
        let in_use = pool.get("w2", Instant::now()).expect("kept");
        pool.delete_all().await;
        assert_eq!(pool.len(), 0);
        assert_eq!(in_use.name(), "p2");
    }

    /// A pod taken out of the pool (its exec failed once) that a command still holds at
    /// the end is deleted by the end, not left to a drop at the process's exit (CI saw
    /// one left running after a Job's run); one no longer held was its holder's to delete.
    #[tokio::test]
    async fn the_end_deletes_a_forgotten_pod_still_held() {
        let pool = KeptPods::default();
        let later = Instant::now() + Duration::from_secs(60);
        pool.keep("w1", live_pod("forgotten"), later);
        let held = pool.get("w1", Instant::now()).expect("kept");
        pool.forget("w1", &held);
        pool.keep("w2", live_pod("replaced"), later);
        let replaced = pool.get("w2", Instant::now()).expect("kept");
        pool.keep("w2", live_pod("replacement"), later);
        assert!(!held.is_deleted() && !replaced.is_deleted());
        pool.delete_all().await;
        assert!(held.is_deleted(), "a forgotten pod still held was left");
        assert!(replaced.is_deleted(), "a replaced pod still held was left");
        assert_eq!(pool.len(), 0);
    }
}
