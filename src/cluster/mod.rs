//! The cluster side: connecting, applying and removing manifests, API actions used as
//! experiment steps (and as their undo), and resolving targets to node names.
//!
//! Everything here talks to the API server; nothing here records the timeline (the
//! observer does that) or touches nodes over SSH (the executor does that).

pub(crate) mod actions;
pub mod api_timers;
pub(crate) mod endpoints;
pub(crate) mod error;
pub(crate) mod failover;
pub(crate) mod kubeconfig;
pub(crate) mod lean;
pub(crate) mod leases;
pub mod lock;
pub(crate) mod manifests;
pub(crate) mod owners;
pub(crate) mod pdb;
pub mod snapshot;
pub(crate) mod targets;

use std::path::{Path, PathBuf};

use kube::Client;
use kube::config::{Config, KubeConfigOptions, Kubeconfig};

pub use actions::{
    cordon, delete_node, delete_pods, delete_pvc, list_pods, taint, uncordon, untaint,
};
pub use endpoints::{ApiEndpoints, Connection, connect_with_failover};
pub use error::ClusterError;
pub use failover::{Failover, HealthPolicy, Switch};
pub use kubeconfig::{ApiAccess, ApiOverrides, KubeconfigOrigin, resolve_access};
pub use manifests::{
    AppliedObject, apply_manifests, delete_objects, wait_objects_gone, wait_workloads_ready,
};
pub use targets::{ResolvedTargets, resolve_targets};

/// Connects to the cluster named by a kubeconfig file and/or context, or (both `None`) the
/// usual way: `$KUBECONFIG`, `~/.kube/config`, then in-cluster service account.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, ClusterError> {
    let files: Vec<PathBuf> = kubeconfig.map(Path::to_path_buf).into_iter().collect();
    client_for(load_config(&files, context).await?)
}

/// The client configuration [`connect`] uses. `kubeconfig` lists files merged kubectl's
/// way (the `KUBECONFIG` list); empty means the usual lookup.
pub async fn load_config(
    kubeconfig: &[PathBuf],
    context: Option<&str>,
) -> Result<Config, ClusterError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    match kubeconfig {
        [_, ..] => {
            let kc: Kubeconfig = kubeconfig::read_merged(kubeconfig)?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|source| ClusterError::Kubeconfig {
                    path: kubeconfig::show_files(kubeconfig),
                    source,
                })
        }
        [] if context.is_some() => {
            Config::from_kubeconfig(&options)
                .await
                .map_err(|source| ClusterError::Kubeconfig {
                    path: "$KUBECONFIG or ~/.kube/config".to_string(),
                    source,
                })
        }
        [] => Config::infer().await.map_err(ClusterError::Infer),
    }
}

fn client_for(config: Config) -> Result<Client, ClusterError> {
    Client::try_from(config).map_err(|source| ClusterError::Api {
        what: "building the API client".to_string(),
        source: Box::new(source),
    })
}

/// How long a node's Lease lasts (`spec.leaseDurationSeconds` of the first Lease in
/// `kube-node-lease`): the kubelet's `nodeLeaseDurationSeconds`, which the node failure
/// model needs for when the last heartbeat before a fault was. `None` when unreadable.
pub async fn node_lease_seconds(client: &Client) -> Option<u64> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), leases::NAMESPACE);
    let list = leases
        .list(&kube::api::ListParams::default().limit(1))
        .await
        .ok()?;
    let secs = list.items.first()?.spec.as_ref()?.lease_duration_seconds?;
    u64::try_from(secs).ok()
}

/// The API server's version (`v1.33.4`), for the report header: failover behaviour
/// differs between versions, so every result must say which one it was measured on.
pub async fn cluster_version(client: &Client) -> Result<String, ClusterError> {
    let info = client
        .apiserver_version()
        .await
        .map_err(|source| ClusterError::Api {
            what: "reading the API server version".to_string(),
            source: Box::new(source),
        })?;
    Ok(info.git_version)
}
