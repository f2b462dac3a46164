//! Machine addresses before and after a node goes down.
//!
//! Docker may give a kind or k3d node container another address when it starts again
//! (kind issues #2045 and #3941: its old one can go to another container). The kubelet
//! keeps the address it was started with, so the node never rejoins and the cluster breaks
//! in ways that look like failed expectations. The run records each target's address
//! before its first fault and compares it after the node is back, so that this is reported
//! as what it is: an environment failure, not the cluster's behaviour.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::execute::Executor;
use crate::run::world::AfterFaultError;

/// How long one address query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(15);

/// Addresses recorded before the first fault on each node.
#[derive(Debug, Default)]
pub(crate) struct MachineAddresses {
    before: BTreeMap<String, String>,
    /// Nodes whose change was already reported, so the end-of-run check does not repeat it.
    reported: BTreeSet<String>,
}

impl MachineAddresses {
    /// Records each node's address unless it already is (the first fault's is the
    /// baseline), querying the nodes at once. Nodes whose inventory has no
    /// `power.address` are skipped; a failing query is logged and skipped too, since it
    /// must not stop a run that could otherwise go on.
    pub(crate) async fn remember(&mut self, executor: &Executor, nodes: &[&str]) {
        let unknown: Vec<&str> = nodes
            .iter()
            .copied()
            .filter(|n| !self.before.contains_key(*n))
            .collect();
        let found = futures::future::join_all(unknown.iter().map(|node| async move {
            (*node, executor.machine_address(node, QUERY_TIMEOUT).await)
        }))
        .await;
        for (node, result) in found {
            match result {
                Ok(Some(address)) if !address.is_empty() => {
                    self.before.insert(node.to_string(), address);
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("cannot read the address of {node}: {e}"),
            }
        }
    }

    /// Compares `node`'s address now with the one recorded; the error says what changed
    /// and what it means.
    pub(crate) async fn check(
        &mut self,
        executor: &Executor,
        node: &str,
    ) -> Result<(), AfterFaultError> {
        let Some(before) = self.before.get(node) else {
            return Ok(());
        };
        if self.reported.contains(node) {
            return Ok(());
        }
        let now = match executor.machine_address(node, QUERY_TIMEOUT).await {
            Ok(Some(now)) => now,
            Ok(None) => return Ok(()),
            Err(source) => {
                return Err(AfterFaultError::AddressUnread {
                    node: node.to_string(),
                    source,
                });
            }
        };
        match changed(node, before, &now) {
            Some(problem) => {
                self.reported.insert(node.to_string());
                Err(problem)
            }
            None => Ok(()),
        }
    }

    /// Checks every recorded node; one message per node whose address changed.
    pub(crate) async fn check_all(&mut self, executor: &Executor) -> Vec<String> {
        let mut problems = Vec::new();
        let nodes: Vec<String> = self.before.keys().cloned().collect();
        for node in &nodes {
            if let Err(e) = self.check(executor, node).await {
                problems.push(e.to_string());
            }
        }
        problems
    }
}

/// The message for an address that changed, or `None` when it did not. A container that
/// is stopped has no address: that is "not back", which the expectations judge, not this.
fn changed(node: &str, before: &str, now: &str) -> Option<AfterFaultError> {
    if now.is_empty() || now == before {
        return None;
    }
    Some(AfterFaultError::Readdressed {
        node: node.to_string(),
        before: before.to_string(),
        now: now.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_address_is_no_change() {
        assert!(changed("n1", "172.18.0.3", "172.18.0.3").is_none());
    }

    #[test]
    fn a_stopped_container_without_address_is_not_a_change() {
        assert!(changed("n1", "172.18.0.3", "").is_none());
    }

    #[test]
    fn a_new_address_is_reported_with_both_addresses_and_the_cause() {
        let change = changed("kind-worker", "172.18.0.3", "172.18.0.5").expect("a change");
        assert!(
            matches!(&change, AfterFaultError::Readdressed { node, before, now }
                if node == "kind-worker" && before == "172.18.0.3" && now == "172.18.0.5"),
            "{change:?}"
        );
        let msg = change.to_string();
        assert!(
            msg.contains("kind-worker came back with address 172.18.0.5"),
            "{msg}"
        );
        assert!(msg.contains("it had 172.18.0.3"), "{msg}");
        assert!(msg.contains("#2045"), "{msg}");
    }
}
