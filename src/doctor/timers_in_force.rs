//! The timers in force for a run, from everywhere the cluster shows them: its API
//! (`cluster::api_timers`) and, on k3s and RKE2 whose components are not pods, the server
//! node's own config file and command line, read over the node's transport. What neither
//! gives comes from the inventory, else is an assumed upstream default (`crate::timers`).

use std::time::Duration;

use kube::Client;

use super::{CheckKind, Finding, Status};
use crate::cluster::api_timers::{ConfigzAccess, offer_line, read_timers};
use crate::execute::{Executor, NodeOp};
use crate::inventory::{Inventory, ProfileName};
use crate::timers::sources::k3s_command_lines;
use crate::timers::{ClusterReadings, Origin, Timer, TimersInForce};

/// How long reading a server's config may take.
const READ_TIMEOUT: Duration = Duration::from_secs(20);
/// Marks the start of each file the node prints.
const FILE_MARK: &str = "==> faultline-file ";

/// The timers in force and every place looked at that gave nothing.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The values and their sources.
    pub in_force: TimersInForce,
    /// Why timers the cluster did not show were not read (for `doctor` and `plan`).
    pub misses: Vec<String>,
}

/// Reads the timers from the API (`client`, when it answers) and, where still missing,
/// from a k3s or RKE2 server node; then resolves them against the inventory's.
pub async fn resolve(
    client: Option<&Client>,
    version: Option<&str>,
    inventory: &Inventory,
    executor: &Executor,
) -> Resolved {
    let mut readings = ClusterReadings::default();
    match client {
        Some(client) => {
            let cm = inventory.cluster().controller_manager.as_ref();
            let configz = cm.map(|cm| ConfigzAccess {
                url: &cm.url,
                ca_file: cm.ca_file.as_deref(),
                kubeconfig: inventory.kubeconfig(),
                context: inventory.context(),
            });
            readings.absorb(read_timers(client, version, configz).await);
        }
        None => readings.miss("the API server does not answer: nothing read from the cluster"),
    }
    if !readings.complete() {
        readings.absorb(read_from_server_node(inventory, executor, version).await);
    }
    Resolved {
        in_force: TimersInForce::resolve(&readings, &inventory.stated_timers(), version),
        misses: readings.misses,
    }
}

/// A k3s or RKE2 server's `kube-controller-manager-arg` / `kube-apiserver-arg`, from its
/// config files and command line, over the first server node of the inventory that answers.
async fn read_from_server_node(
    inventory: &Inventory,
    executor: &Executor,
    version: Option<&str>,
) -> ClusterReadings {
    let mut readings = ClusterReadings::default();
    let servers = inventory.nodes().iter().filter_map(|n| {
        let (distribution, unit) = match n.profile? {
            ProfileName::K3sServer => ("k3s", "k3s"),
            ProfileName::Rke2Server => ("rke2", "rke2-server"),
            _ => return None,
        };
        Some((n.name.as_str(), distribution, unit))
    });
    for (node, distribution, unit) in servers {
        let script = format!(
            "for f in /etc/rancher/{distribution}/config.yaml /etc/rancher/{distribution}/config.yaml.d/*.yaml; do \
             [ -f \"$f\" ] && {{ echo \"{FILE_MARK}$f\"; cat \"$f\"; echo; }}; done; \
             pid=$(systemctl show -p MainPID --value {unit} 2>/dev/null); \
             if [ -n \"$pid\" ] && [ \"$pid\" != 0 ]; then echo \"{FILE_MARK}/proc/$pid/cmdline\"; \
             tr '\\0' '\\n' </proc/$pid/cmdline; echo; fi; true"
        );
        let out = match executor
            .perform(node, &NodeOp::Run(script), READ_TIMEOUT)
            .await
        {
            Ok(o) => o.output,
            Err(e) => {
                readings.miss(format!("{distribution} config on {node}: {e}"));
                continue;
            }
        };
        let (files, argv) = split_files(&out, node);
        match k3s_command_lines(distribution, &files, argv.as_ref()) {
            Ok((kcm, api)) => {
                offer_line(&kcm, version, &mut readings);
                offer_line(&api, version, &mut readings);
                return readings;
            }
            Err(why) => readings.miss(format!("{distribution} config on {node}: {why}")),
        }
    }
    readings
}

/// A server's command line and where it was read.
type CommandLineRead = (String, Vec<String>);

/// The files the node printed, as `(place, text)`, and the server's command line.
fn split_files(out: &str, node: &str) -> (Vec<(String, String)>, Option<CommandLineRead>) {
    let mut files: Vec<(String, String)> = Vec::new();
    for line in out.lines() {
        if let Some(path) = line.strip_prefix(FILE_MARK) {
            files.push((format!("{path} on {node}"), String::new()));
        } else if let Some((_, text)) = files.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    let cmdline = files
        .iter()
        .position(|(p, _)| p.starts_with("/proc/"))
        .map(|i| files.remove(i))
        .map(|(place, text)| {
            (
                place,
                text.lines()
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect(),
            )
        });
    (files, cmdline)
}

/// One finding per timer: read from the cluster (and agreeing with the inventory), stated
/// only in the inventory, assumed, or contradicted by the cluster.
pub fn findings(resolved: &Resolved) -> Vec<Finding> {
    let mut out = Vec::new();
    for s in &resolved.in_force.sources {
        let (status, detail) = match s.origin {
            Origin::Cluster if s.disagrees() => (
                Status::Fail,
                format!(
                    "the inventory states {} {}, the cluster uses {} ({}); a run uses the \
                     cluster's: correct or remove timers.{}",
                    s.timer,
                    crate::timers::show(s.inventory.unwrap_or_default()),
                    crate::timers::show(s.value),
                    s.detail,
                    s.timer.key()
                ),
            ),
            Origin::Cluster => (Status::Pass, s.line()),
            Origin::Inventory => (
                Status::Warn,
                format!(
                    "{}; not read from the cluster{}",
                    s.line(),
                    misses_for(resolved, s.timer)
                ),
            ),
            Origin::Assumed => (
                Status::Warn,
                format!(
                    "{}: bounds on it are marked ASSUMED{}",
                    s.line(),
                    misses_for(resolved, s.timer)
                ),
            ),
        };
        out.push(Finding::cluster(CheckKind::Timer, status, detail));
    }
    out
}

/// `(looked at: …)` with the places that concern the timer's component.
fn misses_for(resolved: &Resolved, timer: Timer) -> String {
    let component = timer.component();
    let relevant: Vec<&str> = resolved
        .misses
        .iter()
        .filter(|m| {
            m.contains(component)
                || m.contains("API server does not answer")
                || (component == "kube-apiserver" && m.contains("tolerations"))
                || m.contains(" config on ")
        })
        .map(String::as_str)
        .collect();
    if relevant.is_empty() {
        String::new()
    } else {
        format!(" (looked at: {})", relevant.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_the_command_line_are_split_apart() {
        let out = "==> faultline-file /etc/rancher/k3s/config.yaml\nkube-apiserver-arg:\n  - default-unreachable-toleration-seconds=60\n\n==> faultline-file /proc/812/cmdline\n/usr/local/bin/k3s\nserver\n--kube-controller-manager-arg=node-monitor-grace-period=20s\n\n";
        let (files, argv) = split_files(out, "s1");
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].0, "/etc/rancher/k3s/config.yaml on s1");
        assert!(
            files[0]
                .1
                .contains("default-unreachable-toleration-seconds=60")
        );
        let (place, argv) = argv.expect("command line");
        assert_eq!(place, "/proc/812/cmdline on s1");
        assert_eq!(
            argv,
            [
                "/usr/local/bin/k3s",
                "server",
                "--kube-controller-manager-arg=node-monitor-grace-period=20s"
            ]
        );
    }
}
