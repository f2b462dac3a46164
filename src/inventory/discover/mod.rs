//! Writing an inventory for a kind or k3d cluster from what the cluster says about itself,
//! so nobody hand-writes node names, roles or timers that may be wrong.
//!
//! Nodes and roles come from the Kubernetes API, cross-checked with the node containers
//! Docker runs (the profile reaches nodes with `docker exec <node>`, so every node needs a
//! container of its name). The node-lifecycle timers are read from the components' own
//! command lines (kind: the kube-controller-manager and kube-apiserver static pods; k3d:
//! the k3s server's argv); a flag that is absent is the compiled-in default of the
//! cluster's Kubernetes version, and the file says which.
//!
//! [`build`] is pure: recorded API objects and `docker inspect` output in, inventory out,
//! so it is unit-tested on recordings. [`live`] does the I/O (kube client, `docker` CLI).

mod component_flags;
mod docker;
mod kubelets;
pub mod live;
mod nodes;
mod render;
mod ssh;
mod target;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

use thiserror::Error;

pub use component_flags::{Sourced, TimerSources};
pub use docker::{Container, parse_inspect};
pub use nodes::{ApiNode, pinned_image};
pub use render::pod_transport;
pub use ssh::{Reach, SshReach};
pub use target::{ClusterChoice, choose_cluster};

/// The local-cluster tools faultline writes inventories for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// kind: kubeadm clusters in Docker containers.
    Kind,
    /// k3d: k3s clusters in Docker containers.
    K3d,
}

impl Tool {
    /// The command's and the built-in profile's name.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Kind => "kind",
            Tool::K3d => "k3d",
        }
    }

    /// The cluster name the tool uses when none is given.
    pub fn default_cluster(self) -> &'static str {
        match self {
            Tool::Kind => "kind",
            Tool::K3d => "k3s-default",
        }
    }

    /// The tool's command listing its clusters, for error messages.
    pub fn list_command(self) -> &'static str {
        match self {
            Tool::Kind => "kind get clusters",
            Tool::K3d => "k3d cluster list",
        }
    }

    /// The tool's command adding a cluster's context to the kubeconfig.
    pub fn export_command(self, cluster: &str) -> String {
        match self {
            Tool::Kind => format!("kind export kubeconfig --name {cluster}"),
            Tool::K3d => format!("k3d kubeconfig merge {cluster} --kubeconfig-merge-default"),
        }
    }

    /// The Docker label whose value is the cluster name on every container of a cluster.
    pub fn cluster_label(self) -> &'static str {
        match self {
            Tool::Kind => "io.x-k8s.kind.cluster",
            Tool::K3d => "k3d.cluster",
        }
    }

    /// The kube context the tool writes for a cluster: `kind-NAME`, `k3d-NAME`.
    pub fn context_of(self, cluster: &str) -> String {
        format!("{}-{cluster}", self.name())
    }
}

/// Everything read from a cluster, recorded or live: the input of [`build`].
#[derive(Debug, Clone)]
pub struct ClusterFacts {
    /// kind or k3d.
    pub tool: Tool,
    /// The cluster's name (kind's `--name`, k3d's cluster name).
    pub cluster: String,
    /// The kube context the inventory names.
    pub context: String,
    /// The kubeconfig file the inventory names, if one.
    pub kubeconfig: Option<PathBuf>,
    /// The API server's `gitVersion` (`v1.33.13`, `v1.31.5+k3s1`).
    pub version: String,
    /// The API's nodes.
    pub nodes: Vec<ApiNode>,
    /// Every container carrying the cluster's label.
    pub containers: Vec<Container>,
    /// kind: `(pod name, spec.containers[0].command)` of each kube-controller-manager pod.
    pub controller_managers: Vec<(String, Vec<String>)>,
    /// kind: the same for each kube-apiserver pod.
    pub api_servers: Vec<(String, Vec<String>)>,
    /// k3d: the k3s server's command line, and where it was read (`/proc/1/cmdline of X`).
    pub server_argv: Option<(String, Vec<String>)>,
    /// kind: each running node container's kubelet configuration file
    /// (`/var/lib/kubelet/config.yaml`), by container name; what the kubelets offer (graceful
    /// node shutdown) is read from them.
    pub kubelet_configs: Vec<(String, String)>,
}

/// A node of the generated inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryNode {
    /// Node name = container name.
    pub name: String,
    /// `control-plane` or `worker`.
    pub role: &'static str,
    /// A short note for the file (`k3s server`), if any.
    pub note: Option<String>,
    /// The node container's address (see [`Container::address`]), written only when the
    /// inventory reaches nodes over SSH.
    pub address: Option<String>,
}

/// A generated inventory before it is written as YAML.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// kind or k3d (also the profile).
    pub tool: Tool,
    /// The cluster's name.
    pub cluster: String,
    /// Kube context.
    pub context: String,
    /// Kubeconfig file, if one.
    pub kubeconfig: Option<PathBuf>,
    /// The API server's version.
    pub version: String,
    /// Nodes, control plane first, then by name.
    pub nodes: Vec<InventoryNode>,
    /// The timers, each with where it came from.
    pub timers: TimerSources,
    /// Things the reader should know (stopped containers, containers without nodes).
    pub notes: Vec<String>,
    /// How the inventory reaches the nodes (`docker exec` unless [`Discovered::over_ssh`]).
    pub reach: Reach,
    /// Capabilities beyond upstream's defaults that every node was seen to offer, each
    /// with where it was read (`cluster.offers`).
    pub offers: Vec<(&'static str, String)>,
}

/// Why no inventory could be written; each names what was looked at and where.
#[derive(Debug, Error)]
pub enum DiscoverError {
    /// The `docker` CLI could not be run or failed.
    #[error("`{command}`: {message}")]
    Docker {
        /// The command line.
        command: String,
        /// What went wrong (its stderr's first line).
        message: String,
    },
    /// `docker inspect` printed something that is not its JSON.
    #[error("`{command}` printed unreadable JSON: {message}")]
    DockerOutput {
        /// The command line.
        command: String,
        /// The parse error.
        message: String,
    },
    /// No container carries the cluster's label.
    #[error(
        "no Docker container is labelled {}={cluster}: is the {} cluster `{cluster}` running? \
         (`{}` lists them; pass --name)",
        .tool.cluster_label(), .tool.name(), .tool.list_command()
    )]
    NoContainers {
        /// kind or k3d.
        tool: Tool,
        /// The cluster name looked for.
        cluster: String,
    },
    /// The API and Docker disagree about the cluster.
    #[error("{0}")]
    Mismatch(String),
    /// A timer could not be read from the cluster.
    #[error("{0}")]
    Timers(String),
    /// The nodes cannot be reached over SSH as asked.
    #[error("{0}")]
    Ssh(String),
    /// The kubeconfig has no such context.
    #[error(
        "kube context `{context}` is not in {kubeconfig}: is the {} cluster `{cluster}` \
         running? (`{}`; `{}` adds it; or pass --context)",
        .tool.name(), .tool.list_command(), .tool.export_command(cluster)
    )]
    NoContext {
        /// kind or k3d.
        tool: Tool,
        /// Cluster.
        cluster: String,
        /// Context looked for.
        context: String,
        /// The kubeconfig files.
        kubeconfig: String,
    },
    /// Talking to the API failed.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
}

/// Builds the inventory from recorded or live facts: nodes cross-checked with their
/// containers, timers read from the command lines (or the version's defaults).
pub fn build(facts: &ClusterFacts) -> Result<Discovered, DiscoverError> {
    let (nodes, mut notes) = nodes::match_nodes(facts)?;
    let timers = component_flags::read(facts, &mut notes)?;
    let offers = kubelets::offers(facts, &mut notes);
    Ok(Discovered {
        tool: facts.tool,
        cluster: facts.cluster.clone(),
        context: facts.context.clone(),
        kubeconfig: facts.kubeconfig.clone(),
        version: facts.version.clone(),
        nodes,
        timers,
        notes,
        reach: Reach::DockerExec,
        offers,
    })
}

/// The inventory as YAML that `faultline run -i` reads unchanged, each timer commented
/// with its source; `command` is the command line that generated it, for the header.
/// Fails only if the built-in kind profile, whose power commands an SSH inventory copies,
/// cannot be read (the unit tests catch that).
pub fn render(discovered: &Discovered, command: &str) -> Result<String, DiscoverError> {
    render::yaml(discovered, command).map_err(|e| DiscoverError::Ssh(e.to_string()))
}
