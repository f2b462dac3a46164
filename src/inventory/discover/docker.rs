//! The Docker side: the node containers of a kind or k3d cluster, read with the `docker`
//! CLI that kind and k3d users already have (no Docker API crate: three read-only commands
//! do not justify a second HTTP client and its socket handling).
//!
//! [`parse_inspect`] is pure and tested on recorded `docker inspect` output; the functions
//! running `docker` are thin.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::DiscoverError;

/// How long one `docker` command may take before discovery gives up on it.
const DOCKER_TIMEOUT: Duration = Duration::from_secs(30);

/// One container as discovery needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Name without Docker's leading `/`.
    pub name: String,
    /// Its labels (`io.x-k8s.kind.role`, `k3d.role`, …).
    pub labels: BTreeMap<String, String>,
    /// `running`, `exited`, `paused`, …
    pub state: String,
    /// The command Docker started it with: `Path` then `Args`.
    pub command: Vec<String>,
    /// Its IPv4 address on each Docker network it is attached to (network name to
    /// address; a stopped container has none): where SSH reaches a kind node.
    pub addresses: BTreeMap<String, String>,
}

impl Container {
    /// A label's value, if set.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    /// The address a node container is reached at from the host: its only network's, or,
    /// attached to several, the one on kind's network `kind`. `None` when it has none (a
    /// stopped container) or several networks none of which is `kind`.
    pub fn address(&self) -> Option<&str> {
        match self.addresses.len() {
            1 => self.addresses.values().next().map(String::as_str),
            _ => self.addresses.get("kind").map(String::as_str),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Inspected {
    name: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    args: Vec<String>,
    state: InspectedState,
    config: InspectedConfig,
    #[serde(default)]
    network_settings: Option<InspectedNetworkSettings>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InspectedNetworkSettings {
    #[serde(default)]
    networks: Option<BTreeMap<String, InspectedNetwork>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InspectedNetwork {
    #[serde(default, rename = "IPAddress")]
    ip_address: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InspectedState {
    status: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InspectedConfig {
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

/// Parses the JSON array `docker inspect` prints.
pub fn parse_inspect(json: &str) -> Result<Vec<Container>, serde_json::Error> {
    let all: Vec<Inspected> = serde_json::from_str(json)?;
    Ok(all
        .into_iter()
        .map(|c| Container {
            name: c.name.trim_start_matches('/').to_string(),
            labels: c.config.labels.unwrap_or_default(),
            state: c.state.status,
            command: std::iter::once(c.path)
                .filter(|p| !p.is_empty())
                .chain(c.args)
                .collect(),
            addresses: c
                .network_settings
                .and_then(|n| n.networks)
                .unwrap_or_default()
                .into_iter()
                .filter(|(_, net)| !net.ip_address.is_empty())
                .map(|(name, net)| (name, net.ip_address))
                .collect(),
        })
        .collect())
}

/// Runs `docker ARGS` and returns its stdout; a missing `docker`, a daemon that does not
/// answer or a failing command is an error naming the command.
pub(super) async fn docker(args: &[&str]) -> Result<Vec<u8>, DiscoverError> {
    let command = format!("docker {}", args.join(" "));
    let fail = |message: String| DiscoverError::Docker {
        command: command.clone(),
        message,
    };
    let run = tokio::process::Command::new("docker")
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(DOCKER_TIMEOUT, run).await {
        Err(_) => return Err(fail(format!("no answer within {DOCKER_TIMEOUT:?}"))),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(fail(
                "the docker CLI is not on PATH (kind and k3d nodes are Docker containers; \
                 install docker or put it on PATH)"
                    .to_string(),
            ));
        }
        Ok(Err(e)) => return Err(fail(e.to_string())),
        Ok(Ok(o)) => o,
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("failed without a message");
        return Err(fail(format!("{first} ({})", output.status)));
    }
    Ok(output.stdout)
}

/// Every container (running or not) whose label `key` is `value`.
pub(super) async fn containers_labelled(
    key: &str,
    value: &str,
) -> Result<Vec<Container>, DiscoverError> {
    let filter = format!("label={key}={value}");
    let ids = docker(&["ps", "--all", "--quiet", "--no-trunc", "--filter", &filter]).await?;
    let ids = String::from_utf8_lossy(&ids);
    let ids: Vec<&str> = ids.split_whitespace().collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec!["inspect"];
    args.extend(&ids);
    let json = docker(&args).await?;
    parse_inspect(&String::from_utf8_lossy(&json)).map_err(|e| DiscoverError::DockerOutput {
        command: "docker inspect".to_string(),
        message: e.to_string(),
    })
}

/// The command line of PID 1 inside a running container (`/proc/1/cmdline`, NUL-separated).
pub(super) async fn pid1_command_line(container: &str) -> Result<Vec<String>, DiscoverError> {
    let raw = docker(&["exec", container, "cat", "/proc/1/cmdline"]).await?;
    Ok(raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect())
}

/// A text file in a container (`docker exec <container> cat <path>`).
pub(super) async fn read_file(container: &str, path: &str) -> Result<String, DiscoverError> {
    let raw = docker(&["exec", container, "cat", path]).await?;
    Ok(String::from_utf8_lossy(&raw).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_recorded_kind_node_containers() {
        let json = include_str!("../../../fixtures/docker/kind/inspect.json");
        let all = parse_inspect(json).unwrap();
        let names: Vec<_> = all.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "faultline-control-plane",
                "faultline-worker",
                "faultline-worker2"
            ]
        );
        assert_eq!(all[0].label("io.x-k8s.kind.role"), Some("control-plane"));
        assert_eq!(all[1].label("io.x-k8s.kind.cluster"), Some("faultline"));
        assert_eq!(all[0].state, "running");
        assert_eq!(all[0].command, ["/usr/local/bin/entrypoint", "/sbin/init"]);
        assert_eq!(
            all[0].addresses,
            BTreeMap::from([("kind".to_string(), "172.18.0.3".to_string())])
        );
    }

    #[test]
    fn a_container_on_several_networks_is_reached_on_kinds() {
        let mut c = parse_inspect(include_str!("../../../fixtures/docker/kind/inspect.json"))
            .unwrap()
            .remove(0);
        assert_eq!(c.address(), Some("172.18.0.3"));
        c.addresses.insert("bridge".into(), "172.17.0.5".into());
        assert_eq!(c.address(), Some("172.18.0.3"));
        c.addresses.remove("kind");
        c.addresses.insert("other".into(), "10.0.0.5".into());
        assert_eq!(c.address(), None, "two networks, neither kind's: no guess");
        c.addresses.clear();
        assert_eq!(c.address(), None, "a stopped container has no address");
    }

    #[test]
    fn output_that_is_not_inspect_json_is_an_error() {
        assert!(parse_inspect("Error: No such object: x").is_err());
        assert_eq!(parse_inspect("[]").unwrap(), Vec::new());
    }
}
