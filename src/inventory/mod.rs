//! How nodes are reached: the inventory file, built-in cluster profiles, SSH settings,
//! command maps and out-of-band power drivers, merged into one [`NodeAccess`] per node.
//!
//! Precedence for every setting: node override > inventory top level > the OpenSSH client
//! config (`ssh_config`, SSH settings only) > profile > built-in default. The merge happens
//! once at load so every mistake surfaces before a fault is injected. The format is
//! documented in `docs/inventory.md`.

pub mod discover;
mod duration;
mod jump;
mod node_error;
pub mod pod_defaults;
mod profile;
mod raw;
mod ssh_config;

use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

pub use crate::experiment::fault::{CommandKey, Configured, KeyTable, PowerKey};
use crate::timers::StatedTimers;

pub use jump::JumpHost;
use node_error::{NodeError, PodSettingsError, SshSettingsError};
pub use profile::ProfileName;
pub use raw::TransportKind;
use raw::{RawInventory, RawNode, RawPod, RawProfile, RawSsh};

/// Why an inventory could not be used; always names the file (and line:column when known).
#[derive(Debug, Error)]
pub enum InventoryError {
    /// The file could not be read.
    #[error("{path}: cannot read inventory: {source}")]
    Io {
        /// The inventory file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// YAML syntax, an unknown key or a bad value.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// The inventory file.
        path: String,
        /// 1-based line.
        line: u64,
        /// 1-based column.
        column: u64,
        /// What is wrong.
        message: String,
    },
    /// Well-formed YAML whose meaning is inconsistent (e.g. duplicate node).
    #[error("{path}: {message}")]
    Invalid {
        /// The inventory file.
        path: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// The cluster the inventory describes, and how to reach its API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterRef {
    /// Name used in the fault journal and reports.
    pub name: String,
    /// Kubeconfig files merged in order (the file's `kubeconfig`, or what `--kubeconfig` /
    /// `KUBECONFIG` put in its place); empty means the usual ~/.kube/config lookup.
    pub kubeconfig: Vec<PathBuf>,
    /// Kubeconfig context (the file's, or `--context`); `None` means the current context.
    pub context: Option<String>,
    /// Capabilities this cluster has beyond upstream's defaults (`graceful-node-shutdown`),
    /// so experiments that need them run (see [`crate::capability`]).
    pub offers: Vec<String>,
    /// Capabilities this cluster lacks (e.g. `containers` on the kwok lab), so expectations
    /// and experiments that need them are reported skipped rather than failed.
    pub lacks: Vec<String>,
    /// Kube contexts faultline may run against with this inventory; empty = any.
    pub allowed_contexts: Vec<String>,
    /// API endpoints to fail over to, besides the kubeconfig's and the discovered ones.
    pub api_servers: Vec<String>,
    /// Whether to discover API endpoints from the `kubernetes` Service (default on).
    pub discover_api_servers: bool,
    /// Where kube-controller-manager's secure port answers, for its `/configz`.
    pub controller_manager: Option<ControllerManager>,
}

/// kube-controller-manager's secure port, named by the inventory so its timers can be read
/// from `/configz` where it does not run as a pod whose flags the API shows (a control
/// plane run as host processes, like the lab's). Reached with the kubeconfig's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerManager {
    /// `https://host:port` of its secure port (`/configz` is appended).
    pub url: String,
    /// CA that signed its serving certificate; default: the kubeconfig's CA.
    pub ca_file: Option<PathBuf>,
}

impl ClusterRef {
    /// The API endpoints faultline may fail over to.
    pub fn api_endpoints(&self) -> crate::cluster::ApiEndpoints {
        crate::cluster::ApiEndpoints {
            extra: self.api_servers.clone(),
            discover: self.discover_api_servers,
        }
    }
}

impl ClusterRef {
    /// The capabilities this cluster has: what it offers, and upstream's defaults it does
    /// not declare lacking.
    pub fn capabilities(&self) -> Vec<String> {
        crate::capability::resolve(&self.offers, &self.lacks)
    }
}

/// SSH settings after merging. Holds the NAME of the password variable, never a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshSettings {
    /// Login user.
    pub user: String,
    /// TCP port.
    pub port: u16,
    /// Private key file.
    pub identity_file: Option<PathBuf>,
    /// known_hosts file the host key is checked against (default `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// TCP connect + handshake limit.
    pub connect_timeout: Duration,
    /// Default limit for one command when the caller gives none.
    pub command_timeout: Duration,
    /// Environment variable holding the password, read only at connect time.
    pub password_env: Option<String>,
    /// Authenticate through the running ssh-agent.
    pub agent: bool,
    /// The agent's socket, when not `$SSH_AUTH_SOCK` (`ssh.agentSocket`, ssh config
    /// `IdentityAgent`).
    pub agent_socket: Option<PathBuf>,
    /// Prefix commands with `sudo` (non-root login users): `sudo -n`, or `sudo -S` fed from
    /// `sudo_password_env`.
    pub sudo: bool,
    /// Environment variable holding the sudo password, read only when a command runs.
    pub sudo_password_env: Option<String>,
    /// Skip host-key checking. Only the CLI flag turns this on.
    pub insecure_ignore_host_keys: bool,
    /// Where to connect instead of the node's address (ssh config `HostName`).
    pub host_name: Option<String>,
    /// Jump hosts to go through, first one reached directly (`ssh.jump`, ssh config
    /// `ProxyJump`).
    pub jump: Vec<JumpHost>,
    /// The OpenSSH client config file these settings were read with, if any.
    pub config: Option<PathBuf>,
}

impl Default for SshSettings {
    /// Built-in defaults, the lowest layer of the merge.
    fn default() -> Self {
        SshSettings {
            user: "root".into(),
            port: 22,
            identity_file: None,
            known_hosts: None,
            connect_timeout: Duration::from_secs(10),
            command_timeout: Duration::from_secs(60),
            password_env: None,
            agent: false,
            agent_socket: None,
            sudo: false,
            sudo_password_env: None,
            insecure_ignore_host_keys: false,
            host_name: None,
            jump: Vec::new(),
            config: None,
        }
    }
}

/// The API transport's settings after merging (`transport: pod`): where faultline's
/// privileged pod on the node lives and what it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSettings {
    /// Namespace of the pods (default [`pod_defaults::DEFAULT_NAMESPACE`]).
    pub namespace: String,
    /// Create the namespace, labelled for the `privileged` Pod Security level, when it is
    /// missing: on for the default namespace, off for one the inventory names (unless it
    /// says `createNamespace: true`).
    pub create_namespace: bool,
    /// Image of the pod: anything with `sh` and `nsenter` (util-linux).
    pub image: String,
    /// How long the pod may take to run before faultline gives up on the command (pulling
    /// the image, the kubelet starting it); the command's own limit starts after.
    pub start_timeout: Duration,
}

/// Shell commands run ON the node, per key of the fault table's command keys
/// ([`CommandKey`]); a key no layer set is absent.
pub type Commands = Configured<CommandKey, String>;

/// Out-of-band power argv templates, run where faultline runs (no shell), per key of the
/// fault table's power keys ([`PowerKey`]).
pub type PowerCommands = Configured<PowerKey, Vec<String>>;

/// Everything needed to act on one node, fully merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAccess {
    /// Kubernetes node name (validated DNS-like).
    pub name: String,
    /// Network address for SSH (defaults to the name).
    pub address: String,
    /// Free roles from the inventory (e.g. `worker`).
    pub roles: Vec<String>,
    /// The profile that supplied defaults, if any.
    pub profile: Option<ProfileName>,
    /// How commands reach the node.
    pub transport: TransportKind,
    /// Argv template for `transport: exec` (contains `{command}`).
    pub exec: Option<Vec<String>>,
    /// The same client made to pass faultline's standard input to the command (`docker
    /// exec -i`): with it, a step's commands are sent ahead and wait on their nodes for the
    /// word to start, as over SSH (see `execute::primed`).
    pub exec_with_stdin: Option<Vec<String>>,
    /// The API transport's pod (used when `transport: pod`).
    pub pod: PodSettings,
    /// SSH settings (used when `transport: ssh`).
    pub ssh: SshSettings,
    /// Node commands.
    pub commands: Commands,
    /// Out-of-band power commands.
    pub power: PowerCommands,
    /// Template that arms a self-restore on the node (`{seconds}`, `{token}`, `{undo}`).
    pub arm_restore: Option<String>,
    /// Template that disarms it (`{token}`, `{pid}`).
    pub disarm_restore: Option<String>,
    /// Template (`{token}`, `{node}`) that exits 0 while the self-restore armed with
    /// `{token}` is still waiting. A fault that cuts the API transport is sent gated on it
    /// (`crate::execute::backstop`): without it, a custom `armRestore` cannot be asked.
    pub restore_waiting: Option<String>,
}

/// A loaded, validated inventory.
#[derive(Debug, Clone)]
pub struct Inventory {
    path: PathBuf,
    cluster: ClusterRef,
    timers: StatedTimers,
    nodes: Vec<NodeAccess>,
    prometheus: Option<PrometheusAccess>,
}

/// The Prometheus server an experiment's `prometheus` abort conditions ask (its HTTP API,
/// `GET /api/v1/query`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrometheusAccess {
    /// Base URL, e.g. `http://prometheus.monitoring:9090` (the path `/api/v1/query` is
    /// appended).
    pub url: String,
    /// PEM file with the CA that signs the server's certificate.
    pub ca_file: Option<PathBuf>,
    /// Skip TLS certificate verification.
    pub insecure: bool,
    /// Longest one query may take; a slower answer is no data.
    pub timeout: Duration,
}

impl Inventory {
    /// Read and validate an inventory file.
    pub fn load(path: impl AsRef<Path>) -> Result<Inventory, InventoryError> {
        let path = path.as_ref();
        let text = crate::experiment::read_input(path).map_err(|source| InventoryError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Inventory::parse(&text, path)
    }

    /// Validate inventory text; `path` is used for messages only.
    pub fn parse(text: &str, path: &Path) -> Result<Inventory, InventoryError> {
        let shown = path.display().to_string();
        let raw: RawInventory = serde_saphyr::from_str(text).map_err(|e| {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((0, 0));
            InventoryError::Parse {
                path: shown.clone(),
                line,
                column,
                message: first_line(&e.without_snippet().to_string()),
            }
        })?;
        let invalid = |message: String| InventoryError::Invalid {
            path: shown.clone(),
            message,
        };
        for (key, names) in [
            ("offers", &raw.cluster.offers),
            ("lacks", &raw.cluster.lacks),
        ] {
            if let Some(unknown) = names.iter().find(|n| crate::capability::find(n).is_none()) {
                return Err(invalid(format!(
                    "cluster.{key}: `{unknown}` is not a capability faultline knows ({})",
                    crate::capability::names().join(", ")
                )));
            }
        }
        for url in &raw.cluster.api_servers {
            check_api_server(url)
                .map_err(|why| invalid(format!("cluster.apiServers: `{url}` {why}")))?;
        }
        if let Some(cm) = &raw.cluster.controller_manager {
            check_api_server(&cm.url).map_err(|why| {
                invalid(format!("cluster.controllerManager.url: `{}` {why}", cm.url))
            })?;
        }
        let timers = stated_timers(&raw);
        let prometheus = match &raw.prometheus {
            None => None,
            Some(p) => {
                check_api_server(&p.url)
                    .map_err(|why| invalid(format!("prometheus.url: `{}` {why}", p.url)))?;
                Some(PrometheusAccess {
                    url: p.url.trim_end_matches('/').to_string(),
                    ca_file: p.ca_file.clone(),
                    insecure: p.insecure.unwrap_or(false),
                    timeout: p.timeout.map_or(Duration::from_secs(10), |t| t.0),
                })
            }
        };
        let mut nodes: Vec<NodeAccess> = Vec::with_capacity(raw.nodes.len());
        let mut configs = ssh_config::ConfigCache::default();
        for node in &raw.nodes {
            if nodes.iter().any(|n| n.name == node.name.0) {
                return Err(invalid(format!("node `{}` is listed twice", node.name.0)));
            }
            nodes.push(merge_node(&raw, node, &mut configs).map_err(|e| invalid(e.to_string()))?);
        }
        Ok(Inventory {
            path: path.to_path_buf(),
            cluster: ClusterRef {
                name: raw.cluster.name,
                kubeconfig: raw.cluster.kubeconfig.into_iter().collect(),
                context: raw.cluster.context,
                offers: raw.cluster.offers,
                lacks: raw.cluster.lacks,
                allowed_contexts: raw.cluster.allowed_contexts,
                api_servers: raw.cluster.api_servers,
                discover_api_servers: raw.cluster.discover_api_servers.unwrap_or(true),
                controller_manager: raw.cluster.controller_manager.map(|cm| ControllerManager {
                    url: cm.url,
                    ca_file: cm.ca_file,
                }),
            },
            timers,
            nodes,
            prometheus,
        })
    }

    /// The Prometheus server abort conditions ask, when the inventory names one.
    pub fn prometheus(&self) -> Option<&PrometheusAccess> {
        self.prometheus.as_ref()
    }

    /// The file this inventory came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cluster and how to reach its API.
    pub fn cluster(&self) -> &ClusterRef {
        &self.cluster
    }

    /// Kubeconfig files to merge, in order; empty means the usual lookup.
    pub fn kubeconfig(&self) -> &[PathBuf] {
        &self.cluster.kubeconfig
    }

    /// Kubeconfig context, if the inventory (or `--context`) names one.
    pub fn context(&self) -> Option<&str> {
        self.cluster.context.as_deref()
    }

    /// Puts the command line's `--kubeconfig` / `--context` / `KUBECONFIG` in place of the
    /// file's settings (kubectl's precedence, see `cluster::kubeconfig`); the
    /// context allow-lists are checked later against the context this leaves in use.
    pub fn apply_api_overrides(
        &mut self,
        overrides: &crate::cluster::ApiOverrides,
    ) -> crate::cluster::ApiAccess {
        let access = crate::cluster::resolve_access(
            overrides,
            self.cluster.kubeconfig.first().map(PathBuf::as_path),
            self.cluster.context.as_deref(),
        );
        if access.origin == crate::cluster::KubeconfigOrigin::Env
            && !self.cluster.kubeconfig.is_empty()
            && self.cluster.kubeconfig != access.kubeconfig
        {
            tracing::warn!(
                "KUBECONFIG={} is used instead of the kubeconfig {} names ({}); unset \
                 KUBECONFIG to use the inventory's",
                crate::cluster::kubeconfig::show_files(&access.kubeconfig),
                self.path.display(),
                crate::cluster::kubeconfig::show_files(&self.cluster.kubeconfig),
            );
        }
        self.cluster.kubeconfig = access.kubeconfig.clone();
        self.cluster.context = access.context.clone();
        access
    }

    /// The node-lifecycle timers the inventory states (each may be absent). A run uses
    /// what the cluster shows where it shows it, these where it does not, and says which
    /// (see [`crate::timers`]).
    pub fn stated_timers(&self) -> StatedTimers {
        self.timers
    }

    /// Fully merged access settings for one node.
    pub fn node(&self, name: &str) -> Option<NodeAccess> {
        self.nodes.iter().find(|n| n.name == name).cloned()
    }

    /// All nodes in file order.
    pub fn nodes(&self) -> &[NodeAccess] {
        &self.nodes
    }

    /// The namespaces faultline's node-access pods run in: those of the nodes reached
    /// through the API (`transport: pod`). Its own pods are told from a tenant's by their
    /// label there alone.
    pub fn node_access_namespaces(&self) -> std::collections::BTreeSet<String> {
        self.nodes
            .iter()
            .filter(|n| n.transport == TransportKind::Pod)
            .map(|n| n.pod.namespace.clone())
            .collect()
    }

    /// Turn host-key checking off for every node: for the CLI's explicit flag only.
    pub fn set_insecure_ignore_host_keys(&mut self, on: bool) {
        if on {
            tracing::warn!(
                "!!! SSH HOST KEYS ARE NOT VERIFIED for inventory {}: anyone on the path can \
                 impersonate a node; use this only in a throwaway lab !!!",
                self.path.display()
            );
        }
        for n in &mut self.nodes {
            n.ssh.insecure_ignore_host_keys = on;
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

fn stated_timers(raw: &RawInventory) -> StatedTimers {
    let Some(r) = &raw.timers else {
        return StatedTimers::default();
    };
    StatedTimers {
        node_monitor_period: r.node_monitor_period.map(|d| d.0),
        node_monitor_grace_period: r.node_monitor_grace_period.map(|d| d.0),
        default_unreachable_toleration: r
            .default_unreachable_toleration_seconds
            .map(Duration::from_secs),
        default_not_ready_toleration: r
            .default_not_ready_toleration_seconds
            .map(Duration::from_secs),
    }
}

/// True for names Kubernetes and our shell quoting can both live with.
pub fn valid_node_name(name: &str) -> bool {
    let b = name.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'.';
    let end = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match b {
        [] => false,
        [only] => end(only),
        [first, mid @ .., last] => end(first) && end(last) && mid.iter().all(inner),
    }
}

/// The first `Some` in precedence order.
fn first<T: Clone, const N: usize>(layers: [Option<&T>; N]) -> Option<T> {
    layers.into_iter().flatten().next().cloned()
}

/// The first layer, in precedence order, that sets either of two keys that go together:
/// both of its values (one may be `None`), never one from each layer.
fn first_pair<A: Clone, B: Clone, const N: usize>(
    layers: [(Option<&A>, Option<&B>); N],
) -> Option<(Option<A>, Option<B>)> {
    layers
        .into_iter()
        .find(|(a, b)| a.is_some() || b.is_some())
        .map(|(a, b)| (a.cloned(), b.cloned()))
}

/// The self-restore templates (arm, disarm, still waiting) of the first layer that sets
/// any of them.
fn first_restore(layers: [[Option<&String>; 3]; 3]) -> Option<[Option<String>; 3]> {
    layers
        .into_iter()
        .find(|l| l.iter().any(Option::is_some))
        .map(|l| l.map(|t| t.cloned()))
}

fn merge_node(
    top: &RawInventory,
    node: &RawNode,
    configs: &mut ssh_config::ConfigCache,
) -> Result<NodeAccess, NodeError> {
    let name = &node.name.0;
    let profile_name = node.profile.or(top.profile);
    let profile: Option<RawProfile> = profile_name
        .map(ProfileName::load)
        .transpose()
        .map_err(|e| NodeError::Profile(e.to_string()))?;
    let p = profile.as_ref();
    let transport = first([
        node.transport.as_ref(),
        top.transport.as_ref(),
        p.and_then(|p| p.transport.as_ref()),
    ])
    .unwrap_or(TransportKind::Ssh);
    // `exec` and `execWithStdin` go together: the first layer that sets either supplies
    // both, so a node's own client is never primed through its profile's.
    let (exec, exec_with_stdin) = first_pair([
        (node.exec.as_ref(), node.exec_with_stdin.as_ref()),
        (top.exec.as_ref(), top.exec_with_stdin.as_ref()),
        (
            p.and_then(|p| p.exec.as_ref()),
            p.and_then(|p| p.exec_with_stdin.as_ref()),
        ),
    ])
    .unwrap_or_default();
    if transport == TransportKind::Exec {
        match &exec {
            Some(argv) if argv.iter().any(|a| a.contains("{command}")) => {}
            _ => {
                return Err(NodeError::ExecTemplate { node: name.clone() });
            }
        }
        if let Some(argv) = &exec_with_stdin
            && !argv.iter().any(|a| a.contains("{command}"))
        {
            return Err(NodeError::ExecWithStdinTemplate { node: name.clone() });
        }
    }
    let address = node.address.clone().unwrap_or_else(|| name.clone());
    let ssh = if transport == TransportKind::Ssh {
        merge_ssh(
            [
                node.ssh.as_ref(),
                top.ssh.as_ref(),
                p.and_then(|p| p.ssh.as_ref()),
            ],
            &address,
            configs,
        )
        .map_err(|source| NodeError::Ssh {
            node: name.clone(),
            source,
        })?
    } else {
        merge_inventory_ssh([
            node.ssh.as_ref(),
            top.ssh.as_ref(),
            p.and_then(|p| p.ssh.as_ref()),
        ])
    };
    if ssh.insecure_ignore_host_keys {
        return Err(NodeError::InsecureFromFile { node: name.clone() });
    }
    let commands = Configured::merged([
        node.commands.as_ref(),
        top.commands.as_ref(),
        p.and_then(|p| p.commands.as_ref()),
    ]);
    let power = Configured::merged([
        node.power.as_ref(),
        top.power.as_ref(),
        p.and_then(|p| p.power.as_ref()),
    ]);
    // The self-restore's templates go together: the first layer that sets any of them
    // supplies all, so a node's own arm is never disarmed (or asked after) by its
    // profile's template.
    let [arm_restore, disarm_restore, restore_waiting] = first_restore([
        [
            node.arm_restore.as_ref(),
            node.disarm_restore.as_ref(),
            node.restore_waiting.as_ref(),
        ],
        [
            top.arm_restore.as_ref(),
            top.disarm_restore.as_ref(),
            top.restore_waiting.as_ref(),
        ],
        [
            p.and_then(|p| p.arm_restore.as_ref()),
            p.and_then(|p| p.disarm_restore.as_ref()),
            p.and_then(|p| p.restore_waiting.as_ref()),
        ],
    ])
    .map(|[arm, disarm, waiting]| match (&arm, &disarm) {
        (None, Some(_)) => Err("disarmRestore"),
        (None, None) => Err("restoreWaiting"),
        _ => Ok([arm, disarm, waiting]),
    })
    .transpose()
    .map_err(|template| NodeError::RestoreWithoutArm {
        node: name.clone(),
        template,
    })?
    .unwrap_or_else(|| pod_defaults::default_restore(transport));
    // The systemd timer written out in full (as docs/inventory.md shows it) is asked the
    // way its default is, unless the layer says otherwise.
    let restore_waiting = restore_waiting.or_else(|| {
        (arm_restore.as_deref() == Some(pod_defaults::SYSTEMD_ARM))
            .then(|| pod_defaults::SYSTEMD_WAITING.to_string())
    });
    let pod = merge_pod([
        node.pod.as_ref(),
        top.pod.as_ref(),
        p.and_then(|p| p.pod.as_ref()),
    ])
    .map_err(|source| NodeError::Pod {
        node: name.clone(),
        source,
    })?;
    Ok(NodeAccess {
        name: name.clone(),
        address,
        roles: node.roles.clone(),
        profile: profile_name,
        transport,
        exec,
        exec_with_stdin,
        pod,
        ssh,
        commands,
        power,
        arm_restore,
        disarm_restore,
        restore_waiting,
    })
}

/// The API transport's settings from the inventory's layers (node, top level, profile).
fn merge_pod(layers: [Option<&RawPod>; 3]) -> Result<PodSettings, PodSettingsError> {
    macro_rules! pick {
        ($f:ident) => {
            first(layers.map(|l| l.and_then(|s| s.$f.as_ref())))
        };
    }
    let named: Option<String> = pick!(namespace);
    if let Some(ns) = &named
        && !pod_defaults::valid_dns_label(ns)
    {
        return Err(PodSettingsError::Namespace(ns.clone()));
    }
    let image: String = pick!(image).unwrap_or_else(|| pod_defaults::DEFAULT_IMAGE.to_string());
    if image.trim().is_empty() {
        return Err(PodSettingsError::EmptyImage);
    }
    Ok(PodSettings {
        create_namespace: pick!(create_namespace).unwrap_or(named.is_none()),
        namespace: named.unwrap_or_else(|| pod_defaults::DEFAULT_NAMESPACE.to_string()),
        image,
        start_timeout: pick!(start_timeout).map_or(pod_defaults::DEFAULT_START_TIMEOUT, |h| h.0),
    })
}

/// SSH settings from the inventory's layers alone (node, top level, profile), with no ssh
/// config: for nodes that are not reached over SSH.
fn merge_inventory_ssh(layers: [Option<&RawSsh>; 3]) -> SshSettings {
    let d = SshSettings::default();
    macro_rules! pick {
        ($f:ident) => {
            first(layers.map(|l| l.and_then(|s| s.$f.as_ref())))
        };
    }
    SshSettings {
        user: pick!(user).unwrap_or(d.user),
        port: pick!(port).unwrap_or(d.port),
        identity_file: pick!(identity_file),
        known_hosts: pick!(known_hosts),
        connect_timeout: pick!(connect_timeout).map_or(d.connect_timeout, |h| h.0),
        command_timeout: pick!(command_timeout).map_or(d.command_timeout, |h| h.0),
        password_env: pick!(password_env),
        agent: pick!(agent).unwrap_or(d.agent) || pick!(agent_socket).is_some(),
        agent_socket: pick!(agent_socket),
        sudo: pick!(sudo).unwrap_or(d.sudo),
        sudo_password_env: pick!(sudo_password_env),
        insecure_ignore_host_keys: pick!(insecure_ignore_host_keys).unwrap_or(false),
        host_name: None,
        jump: Vec::new(),
        config: None,
    }
}

/// The OpenSSH client config a node's settings are read with: `ssh.config` (`none` for
/// none, `~/` allowed), else `~/.ssh/config` when it exists.
fn config_path(layers: &[Option<&RawSsh>; 3]) -> Result<Option<PathBuf>, SshSettingsError> {
    match first(layers.map(|l| l.and_then(|s| s.config.as_ref()))) {
        Some(v) if v.trim().eq_ignore_ascii_case("none") => Ok(None),
        Some(v) => {
            let path = ssh_config::expand_home(v.trim());
            if path.is_file() {
                Ok(Some(path))
            } else {
                Err(SshSettingsError::NoConfigFile(path))
            }
        }
        None => Ok(std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(".ssh/config"))
            .filter(|p| p.is_file())),
    }
}

/// SSH settings of a node reached over SSH: the inventory's layers (node, top level) over
/// what the ssh config says for the node's address, over the profile and the defaults.
fn merge_ssh(
    layers: [Option<&RawSsh>; 3],
    address: &str,
    configs: &mut ssh_config::ConfigCache,
) -> Result<SshSettings, SshSettingsError> {
    let [node, top, profile] = layers;
    let config = config_path(&layers)?;
    let mut warnings = Vec::new();
    let file = config.as_deref().map(|p| configs.get(p)).transpose()?;
    let entry = file.map(|f| f.lookup(address)).unwrap_or_default();
    warnings.extend(entry.warnings.iter().cloned());
    // What the ssh config says, as one more layer between the inventory and the profile.
    let from_config = RawSsh {
        user: entry.user.clone(),
        port: entry.port,
        known_hosts: entry.known_hosts.clone(),
        agent_socket: entry.identity_agent.clone(),
        ..RawSsh::default()
    };
    let all = [node, top, Some(&from_config), profile];
    let inventory = [node, top];
    let mut s = merge_inventory_ssh([node, top, profile]);
    macro_rules! pick {
        ($layers:expr, $f:ident) => {
            first($layers.map(|l| l.and_then(|s| s.$f.as_ref())))
        };
    }
    s.user = pick!(all, user).unwrap_or(s.user);
    s.port = pick!(all, port).unwrap_or(s.port);
    s.known_hosts = pick!(all, known_hosts);
    s.agent_socket = pick!(all, agent_socket);
    s.host_name = entry.host_name.clone();
    let host = s.host_name.clone().unwrap_or_else(|| address.to_string());
    let tokens = ssh_config::Tokens {
        host: &host,
        original: address,
        user: &s.user,
        port: s.port,
    };
    s.identity_file = match pick!(inventory, identity_file) {
        Some(explicit) => Some(explicit),
        None => jump::pick_identity(&entry.identity_files, &tokens)
            .map_err(|source| SshSettingsError::IdentityFile {
                config: show(config.as_deref()),
                source,
            })?
            .or_else(|| profile.and_then(|p| p.identity_file.clone())),
    };
    let chain = match pick!(inventory, jump) {
        Some(text) => jump::parse_chain(&text).map_err(SshSettingsError::Jump)?,
        None => match &entry.proxy_jump {
            Some(hops) => jump::parse_chain(&hops.join(",")).map_err(|source| {
                SshSettingsError::ProxyJump {
                    config: show(config.as_deref()),
                    source,
                }
            })?,
            None => match profile.and_then(|p| p.jump.as_ref()) {
                Some(text) => jump::parse_chain(text).map_err(SshSettingsError::Jump)?,
                None => Vec::new(),
            },
        },
    };
    s.jump = jump::resolve(
        &chain,
        file,
        &jump::Fallback {
            user: &s.user,
            identity_file: s.identity_file.as_deref(),
        },
        &mut warnings,
    )
    .map_err(SshSettingsError::Resolve)?;
    s.config = config;
    for w in &warnings {
        configs.warn_once(w);
    }
    Ok(s)
}

fn show(path: Option<&Path>) -> String {
    path.map_or_else(
        || "ssh config".into(),
        |p| format!("ssh config {}", p.display()),
    )
}

#[cfg(test)]
mod tests;

/// Why an endpoint URL in the inventory is unusable; said after the URL it is about.
#[derive(Debug, Error)]
enum EndpointUrlError {
    /// Not a URL at all.
    #[error("is not a URL ({0}); want https://host:port")]
    NotUrl(http::uri::InvalidUri),
    /// Neither `https://` nor `http://`.
    #[error("needs https:// (want https://host:port)")]
    Scheme,
    /// No host.
    #[error("has no host (want https://host:port)")]
    NoHost,
}

/// An API endpoint must be an absolute `https://` (or `http://`) URL with a host.
fn check_api_server(url: &str) -> Result<(), EndpointUrlError> {
    let uri: http::Uri = url.parse().map_err(EndpointUrlError::NotUrl)?;
    match uri.scheme_str() {
        Some("https" | "http") => {}
        _ => return Err(EndpointUrlError::Scheme),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(EndpointUrlError::NoHost);
    }
    Ok(())
}

#[cfg(test)]
mod ssh_config_tests;
