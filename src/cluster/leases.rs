//! Whether a node is heard from: its kubelet renewing its Lease in `kube-node-lease`.
//!
//! A node's Ready condition can be a leftover: a kubelet stopped and started again posts
//! nothing new until it has synced, and the node lifecycle controller marks it Unknown
//! only a grace period after the last renewal it saw. A node read Ready just after an
//! undo may go Unknown a moment later (seen in CI). A renewal seen after a given moment is
//! the proof that the kubelet is back, and it needs no clock: the `renewTime` read now
//! differs from the one read at that moment, whatever the node's clock says.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};

/// Where kubelets keep their Leases.
pub(crate) const NAMESPACE: &str = "kube-node-lease";

/// Time between two readings while waiting for a renewal.
const POLL: Duration = Duration::from_millis(500);

/// One node's Lease as read: its `renewTime` (`None`: no Lease, or never renewed), or why
/// it could not be read.
pub(crate) type Mark = Result<Option<String>, String>;

/// Each node's [`Mark`], by node name.
pub(crate) type Marks = BTreeMap<String, Mark>;

/// Reads the Lease of every node in `nodes`, all at once.
pub(crate) async fn read<'a>(
    client: &Client,
    nodes: impl IntoIterator<Item = &'a String>,
) -> Marks {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    join_all(nodes.into_iter().map(|node| {
        let leases = leases.clone();
        async move {
            let mark = match leases.get_opt(node).await {
                Ok(lease) => Ok(lease
                    .and_then(|l| l.spec)
                    .and_then(|s| s.renew_time)
                    .map(|t| t.0.to_string())),
                Err(e) => Err(e.to_string()),
            };
            (node.clone(), mark)
        }
    }))
    .await
    .into_iter()
    .collect()
}

/// The nodes of `since` not heard from in `now`, each with what was seen. A node is heard
/// from when `now` holds a renewal that `since` did not (a new `renewTime`, or a Lease
/// where there was none: a Node deleted and registered again gets a new one).
pub(crate) fn unheard(since: &Marks, now: &Marks) -> Vec<(String, String)> {
    since
        .iter()
        .filter_map(|(node, before)| {
            let why = match now.get(node) {
                None => "its Lease was not read".to_string(),
                Some(Err(e)) => format!("its Lease could not be read: {e}"),
                Some(Ok(None)) => format!("no renewed Lease in {NAMESPACE}"),
                Some(Ok(Some(t))) if before.as_ref().ok() == Some(&Some(t.clone())) => {
                    format!("Lease renewTime still {t}")
                }
                Some(Ok(Some(_))) => return None,
            };
            Some((node.clone(), why))
        })
        .collect()
}

/// Keeps in `awaited` only the nodes `now` does not show heard from, and returns those with
/// what was seen: a renewal seen once is proof enough, so a node heard from is never
/// awaited again (a later unreadable Lease does not take it back).
pub(crate) fn settle(awaited: &mut Marks, now: &Marks) -> Vec<(String, String)> {
    let silent = unheard(awaited, now);
    awaited.retain(|node, _| silent.iter().any(|(n, _)| n == node));
    silent
}

/// Waits until every node of `nodes` has renewed its Lease since this call began, for at
/// most `within`; returns those that did not, each with what was seen. A kubelet renews
/// every quarter of its Lease duration, so a healthy node is heard from within that.
pub(crate) async fn wait_heard(
    client: &Client,
    nodes: &BTreeSet<String>,
    within: Duration,
) -> Vec<(String, String)> {
    let started = tokio::time::Instant::now();
    let mut awaited = read(client, nodes).await;
    loop {
        tokio::time::sleep(POLL).await;
        let now = read(client, awaited.keys()).await;
        let left = settle(&mut awaited, &now);
        if left.is_empty() || started.elapsed() >= within {
            return left;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(of: &[(&str, Mark)]) -> Marks {
        of.iter().map(|(n, m)| (n.to_string(), m.clone())).collect()
    }

    #[test]
    fn a_node_is_heard_from_only_with_a_renewal_after_the_first_reading() {
        let t0 = Ok(Some("2026-11-26 10:00:00 UTC".to_string()));
        let t1 = Ok(Some("2026-11-26 10:00:02 UTC".to_string()));
        let since = marks(&[
            ("renewed", t0.clone()),
            ("stale", t0.clone()),
            ("registered-again", Ok(None)),
            ("was-unreadable", Err("timeout".into())),
            ("now-unreadable", t0.clone()),
            ("lease-gone", t0.clone()),
        ]);
        let now = marks(&[
            ("renewed", t1.clone()),
            ("stale", t0),
            ("registered-again", t1.clone()),
            ("was-unreadable", t1),
            ("now-unreadable", Err("connection refused".into())),
            ("lease-gone", Ok(None)),
        ]);
        let left = unheard(&since, &now);
        let names: Vec<&str> = left.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["lease-gone", "now-unreadable", "stale"]);
        assert!(left[2].1.contains("still 2026-11-26 10:00:00"), "{left:?}");
        assert!(left[1].1.contains("connection refused"), "{left:?}");
    }

    #[test]
    fn a_node_heard_from_once_is_not_awaited_again() {
        let t0 = Ok(Some("t0".to_string()));
        let mut awaited = marks(&[("w1", t0.clone()), ("w2", t0.clone())]);
        let first = settle(
            &mut awaited,
            &marks(&[("w1", Ok(Some("t1".into()))), ("w2", t0.clone())]),
        );
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(awaited.keys().collect::<Vec<_>>(), ["w2"]);
        // w1's Lease unreadable now: it was heard from already, and stays so.
        let second = settle(
            &mut awaited,
            &marks(&[("w1", Err("timeout".into())), ("w2", Ok(Some("t2".into())))]),
        );
        assert!(second.is_empty(), "{second:?}");
        assert!(awaited.is_empty());
    }

    #[test]
    fn a_node_missing_from_the_second_reading_is_not_heard_from() {
        let since = marks(&[("w1", Ok(None))]);
        assert_eq!(unheard(&since, &Marks::new()).len(), 1);
    }
}
