//! Keeping a node-access pod on each node reached through the API for a whole run
//! ([`crate::execute::pod::kept`]): started once before the run's clock starts, deleted when it ends.

use std::time::Duration;

use tokio::time::Instant;

use crate::execute::error::ExecError;
use crate::execute::executor::Executor;
use crate::execute::pod::{self, AccessPod};

impl Executor {
    /// Starts a node-access pod on each of `nodes` reached through the API that has none
    /// kept, all at once, each within its inventory's start timeout, to end by itself
    /// after `lifetime` (the run's planned length and its margins): the run's commands on
    /// that node are then one exec each, not a pod each. Returns, for each node tried, how
    /// it went; a node whose pod did not start has its commands start pods of their own.
    pub async fn keep_node_access_pods(
        &self,
        nodes: &[&str],
        lifetime: Duration,
    ) -> Vec<(String, Result<(), ExecError>)> {
        let wanted = nodes.iter().filter(|node| {
            self.through_api(node) && self.kept_pods.get(node, Instant::now()).is_none()
        });
        futures::future::join_all(wanted.map(|node| async move {
            let kept = async {
                let access = self.access(node)?;
                let client = self.client(node).await?;
                let began = Instant::now();
                let settings = &access.pod;
                let pod = AccessPod::start(
                    &client,
                    (node, settings, self.run.as_deref()),
                    lifetime,
                    settings.start_timeout,
                )
                .await
                .map_err(|source| ExecError::Pod {
                    node: node.to_string(),
                    source,
                })?;
                // Its deadline counts from when its kubelet took it, after `began`.
                self.kept_pods.keep(node, pod, began + lifetime);
                Ok(())
            };
            (node.to_string(), kept.await)
        }))
        .await
    }

    /// How many nodes have a node-access pod kept now.
    pub fn kept_node_access_pods(&self) -> usize {
        self.kept_pods.len()
    }

    /// Deletes the kept node-access pods: the run is over. Commands after it start pods
    /// of their own.
    pub async fn delete_kept_node_access_pods(&self) {
        self.kept_pods.delete_all().await;
    }

    /// Deletes every node-access pod of this run still in the cluster (not already being
    /// deleted), in each namespace its nodes reached through the API use, after the kept
    /// ones: the run is over, and a pod it lost track of must not stay privileged on its
    /// node until its deadline. Returns `namespace/name` of each found, or why a namespace
    /// could not be swept.
    pub async fn delete_runs_node_access_pods(&self) -> Vec<Result<String, ExecError>> {
        let Some(run) = self.run.as_deref() else {
            return Vec::new();
        };
        let mut swept: std::collections::BTreeMap<String, String> =
            std::collections::BTreeMap::new();
        for node in self.inventory().nodes() {
            if node.transport == crate::inventory::TransportKind::Pod {
                swept
                    .entry(node.pod.namespace.clone())
                    .or_insert(node.name.clone());
            }
        }
        let mut found = Vec::new();
        for (namespace, node) in swept {
            let deleted = match self.client(&node).await {
                Ok(client) => pod::delete_runs_pods(&client, &namespace, run)
                    .await
                    .map_err(|source| ExecError::Pod { node, source }),
                Err(e) => Err(e),
            };
            match deleted {
                Ok(names) => {
                    found.extend(names.into_iter().map(|n| Ok(format!("{namespace}/{n}"))))
                }
                Err(e) => found.push(Err(e)),
            }
        }
        found
    }
}
