//! The I/O of discovery, kept thin: the `docker` CLI for the containers and k3s's command
//! line, the kube client for the version, the nodes and the static pods. Everything it
//! reads goes into [`ClusterFacts`] and is interpreted by the pure [`super::build`].

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams};

use super::docker::{containers_labelled, pid1_command_line, read_file};
use super::{ApiNode, ClusterChoice, ClusterFacts, Container, DiscoverError, Tool};
use crate::cluster::api_timers::pod_command;
use crate::cluster::{self, ClusterError};

/// How long connecting to the API may take before discovery reports it unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one API request may take.
const READ_TIMEOUT: Duration = Duration::from_secs(20);

/// Where to read the cluster from and what the inventory will name.
#[derive(Debug, Clone)]
pub struct Source {
    /// kind or k3d.
    pub tool: Tool,
    /// Cluster and context.
    pub choice: ClusterChoice,
    /// Kubeconfig files to read through (empty: the default lookup).
    pub kubeconfig: Vec<PathBuf>,
    /// The kubeconfig file the inventory names.
    pub kubeconfig_to_write: Option<PathBuf>,
}

/// Reads everything [`super::build`] needs from Docker and the API.
pub async fn gather(source: &Source) -> Result<ClusterFacts, DiscoverError> {
    let tool = source.tool;
    let cluster_name = &source.choice.cluster;
    // Docker first: "no such cluster" is the likeliest mistake and needs no API.
    let DockerSide {
        containers,
        server_argv,
    } = docker_side(tool, cluster_name).await?;
    let context = &source.choice.context;
    let kubeconfig = cluster::kubeconfig::read_merged(&source.kubeconfig)?;
    if !kubeconfig.contexts.iter().any(|c| &c.name == context) {
        return Err(DiscoverError::NoContext {
            tool,
            cluster: cluster_name.clone(),
            context: context.clone(),
            kubeconfig: cluster::kubeconfig::show_files(&source.kubeconfig),
        });
    }
    let (client, url) = connect(source).await?;
    let place = format!("context {context} at {url}");
    let version = client
        .apiserver_version()
        .await
        .map_err(api_error(format!(
            "reading the API server version ({place})"
        )))?
        .git_version;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(api_error(format!("listing nodes ({place})")))?
        .items
        .iter()
        .filter_map(ApiNode::from_node)
        .collect();
    let (controller_managers, api_servers) = match tool {
        Tool::Kind => (
            static_pods(&client, "kube-controller-manager", &place).await?,
            static_pods(&client, "kube-apiserver", &place).await?,
        ),
        Tool::K3d => (Vec::new(), Vec::new()),
    };
    let kubelet_configs = match tool {
        Tool::Kind => kubelet_configs(&containers).await,
        Tool::K3d => Vec::new(),
    };
    Ok(ClusterFacts {
        kubelet_configs,
        tool,
        cluster: cluster_name.clone(),
        context: context.clone(),
        kubeconfig: source.kubeconfig_to_write.clone(),
        version,
        nodes,
        containers,
        controller_managers,
        api_servers,
        server_argv,
    })
}

/// What Docker says about a cluster: its containers and, for k3d, the k3s server's
/// command line.
#[derive(Debug, Clone)]
pub struct DockerSide {
    /// Every container labelled with the cluster's name.
    pub containers: Vec<Container>,
    /// k3d: where the server's command line was read, and the command line.
    pub server_argv: Option<(String, Vec<String>)>,
}

/// Reads the Docker side of a cluster; no container labelled with its name is an error.
pub async fn docker_side(tool: Tool, cluster: &str) -> Result<DockerSide, DiscoverError> {
    let containers = containers_labelled(tool.cluster_label(), cluster).await?;
    if containers.is_empty() {
        return Err(DiscoverError::NoContainers {
            tool,
            cluster: cluster.to_string(),
        });
    }
    let server_argv = match tool {
        Tool::Kind => None,
        Tool::K3d => server_command_line(&containers).await,
    };
    Ok(DockerSide {
        containers,
        server_argv,
    })
}

/// A client with short timeouts, and the API server URL for messages.
async fn connect(source: &Source) -> Result<(Client, String), DiscoverError> {
    let mut config = cluster::load_config(&source.kubeconfig, Some(&source.choice.context)).await?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    let url = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|e| {
        DiscoverError::Cluster(ClusterError::Api {
            what: format!("building the API client for {url}"),
            source: Box::new(e),
        })
    })?;
    Ok((client, url))
}

fn api_error(what: String) -> impl FnOnce(kube::Error) -> DiscoverError {
    move |source| {
        DiscoverError::Cluster(ClusterError::Api {
            what,
            source: Box::new(source),
        })
    }
}

/// `(pod name, command + args)` of the kube-system pods labelled `component=<component>`:
/// kubeadm's static pods, whose flags are the component's configuration.
async fn static_pods(
    client: &Client,
    component: &str,
    place: &str,
) -> Result<Vec<(String, Vec<String>)>, DiscoverError> {
    let pods = Api::<Pod>::namespaced(client.clone(), "kube-system")
        .list(&ListParams::default().labels(&format!("component={component}")))
        .await
        .map_err(api_error(format!(
            "listing kube-system pods labelled component={component} ({place})"
        )))?;
    Ok(pods.items.iter().filter_map(pod_command).collect())
}

/// kind: each running node container's kubelet configuration file, read with `docker
/// exec`; a node whose file cannot be read is left out of the list and so of what the
/// inventory says every kubelet offers, which then offers nothing beyond the defaults.
async fn kubelet_configs(containers: &[Container]) -> Vec<(String, String)> {
    let mut configs = Vec::new();
    for c in containers.iter().filter(|c| c.state == "running") {
        match read_file(&c.name, KUBELET_CONFIG).await {
            Ok(text) => configs.push((c.name.clone(), text)),
            // One unreadable node means nothing can be said of every node.
            Err(_) => return Vec::new(),
        }
    }
    configs
}

/// Where kubeadm (and so kind) writes the kubelet's configuration.
const KUBELET_CONFIG: &str = "/var/lib/kubelet/config.yaml";

/// The first running k3s server's PID 1 command line (`docker exec … cat /proc/1/cmdline`);
/// if that cannot be read, the command Docker started it with, which k3d's entrypoint
/// passes on to k3s unchanged. `None` when no server container runs.
async fn server_command_line(containers: &[Container]) -> Option<(String, Vec<String>)> {
    let mut servers: Vec<&Container> = containers
        .iter()
        .filter(|c| c.label("k3d.role") == Some("server") && c.state == "running")
        .collect();
    servers.sort_by(|a, b| a.name.cmp(&b.name));
    let server = servers.first()?;
    match pid1_command_line(&server.name).await {
        Ok(argv) if !argv.is_empty() => Some((format!("/proc/1/cmdline of {}", server.name), argv)),
        Ok(_) | Err(_) => Some((
            format!("docker inspect command of {}", server.name),
            server.command.clone(),
        )),
    }
}
