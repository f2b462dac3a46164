//! The inventory file exactly as written: every field optional where the merge can fill it.
//!
//! Kept apart from the merged [`super::NodeAccess`] so that "what the user wrote" and "what
//! will be used" never get confused; unknown keys are rejected so typos fail loudly.

use std::path::PathBuf;

use serde::Deserialize;

use super::ProfileName;
use super::duration::HumanDuration;

/// Top level of an inventory file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawInventory {
    pub cluster: RawCluster,
    pub profile: Option<ProfileName>,
    pub timers: Option<RawTimers>,
    pub transport: Option<TransportKind>,
    pub exec: Option<Vec<String>>,
    pub exec_with_stdin: Option<Vec<String>>,
    pub pod: Option<RawPod>,
    pub ssh: Option<RawSsh>,
    pub commands: Option<RawCommands>,
    pub power: Option<RawPower>,
    pub arm_restore: Option<String>,
    pub disarm_restore: Option<String>,
    pub restore_waiting: Option<String>,
    pub prometheus: Option<RawPrometheus>,
    #[serde(default)]
    pub nodes: Vec<RawNode>,
}

/// `prometheus:` — where abort conditions' queries are asked.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawPrometheus {
    pub url: String,
    pub ca_file: Option<PathBuf>,
    pub insecure: Option<bool>,
    pub timeout: Option<HumanDuration>,
}

/// `cluster:` — which cluster and how its API is reached.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawCluster {
    pub name: String,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    #[serde(default)]
    pub offers: Vec<String>,
    #[serde(default)]
    pub lacks: Vec<String>,
    #[serde(default)]
    pub allowed_contexts: Vec<String>,
    #[serde(default)]
    pub api_servers: Vec<String>,
    pub discover_api_servers: Option<bool>,
    pub controller_manager: Option<RawControllerManager>,
}

/// `cluster.controllerManager:` — where kube-controller-manager's secure port answers, so
/// its timers can be read from `/configz` on a control plane that does not run it as a pod.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawControllerManager {
    pub url: String,
    pub ca_file: Option<PathBuf>,
}

/// `timers:` — the cluster's own node-lifecycle timers.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawTimers {
    pub node_monitor_period: Option<HumanDuration>,
    pub node_monitor_grace_period: Option<HumanDuration>,
    pub default_unreachable_toleration_seconds: Option<u64>,
    pub default_not_ready_toleration_seconds: Option<u64>,
}

/// How a command reaches a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TransportKind {
    /// SSH to the node's address (ssh2).
    Ssh,
    /// A local argv template (`docker exec`, `oc debug`).
    Exec,
    /// A short-lived privileged pod pinned to the node, commands through the API's exec
    /// (`pod:` settings; see `crate::execute::pod`).
    Pod,
}

/// `pod:` settings of the API transport; every field may be overridden per node.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawPod {
    pub namespace: Option<String>,
    pub create_namespace: Option<bool>,
    pub image: Option<String>,
    pub start_timeout: Option<HumanDuration>,
}

/// `ssh:` settings; every field may be overridden per node.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawSsh {
    pub user: Option<String>,
    pub port: Option<u16>,
    pub identity_file: Option<PathBuf>,
    pub known_hosts: Option<PathBuf>,
    pub connect_timeout: Option<HumanDuration>,
    pub command_timeout: Option<HumanDuration>,
    pub password_env: Option<String>,
    pub agent: Option<bool>,
    pub agent_socket: Option<PathBuf>,
    pub sudo: Option<bool>,
    pub sudo_password_env: Option<String>,
    pub insecure_ignore_host_keys: Option<bool>,
    /// OpenSSH client config to read (`none` to read none).
    pub config: Option<String>,
    /// Jump hosts, as ssh's `-J` / ProxyJump (`none` for none).
    pub jump: Option<String>,
}

/// `commands:` run by the node's shell, keyed by the fault table.
pub(crate) type RawCommands =
    crate::experiment::fault::Configured<crate::experiment::fault::CommandKey, String>;

/// `power:` argv templates run where faultline runs, keyed by the fault table.
pub(crate) type RawPower =
    crate::experiment::fault::Configured<crate::experiment::fault::PowerKey, Vec<String>>;

/// One `nodes:` entry.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawNode {
    pub name: NodeName,
    pub address: Option<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    pub profile: Option<ProfileName>,
    pub transport: Option<TransportKind>,
    pub exec: Option<Vec<String>>,
    pub exec_with_stdin: Option<Vec<String>>,
    pub pod: Option<RawPod>,
    pub ssh: Option<RawSsh>,
    pub commands: Option<RawCommands>,
    pub power: Option<RawPower>,
    pub arm_restore: Option<String>,
    pub disarm_restore: Option<String>,
    pub restore_waiting: Option<String>,
}

/// A built-in profile file (`profiles/*.yaml`): defaults for one Kubernetes distribution.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawProfile {
    pub transport: Option<TransportKind>,
    pub exec: Option<Vec<String>>,
    pub exec_with_stdin: Option<Vec<String>>,
    pub pod: Option<RawPod>,
    pub ssh: Option<RawSsh>,
    pub commands: Option<RawCommands>,
    pub power: Option<RawPower>,
    pub arm_restore: Option<String>,
    pub disarm_restore: Option<String>,
    pub restore_waiting: Option<String>,
}

/// A node name checked while parsing, so a bad one is reported at its line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NodeName(pub String);

impl<'de> Deserialize<'de> for NodeName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        if super::valid_node_name(&name) {
            Ok(NodeName(name))
        } else {
            Err(serde::de::Error::custom(format!(
                "node name `{}` is not a valid Kubernetes node name \
                 (lowercase letters, digits, '-' and '.', starting and ending alphanumeric)",
                name.escape_debug()
            )))
        }
    }
}
