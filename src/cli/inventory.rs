//! `faultline inventory kind|k3d`: writes an inventory read from a running cluster, so
//! kind and k3d users never hand-write node names, roles or timers.

use std::path::PathBuf;

use super::{EXIT_ERROR, EXIT_OK, InventoryArgs, InventoryCommand, NodeTransportArg};
use crate::cluster::kubeconfig::{file_defining, read_merged};
use crate::cluster::resolve_access;
use crate::inventory::discover::live::{Source, gather};
use crate::inventory::discover::{self, SshReach, Tool, choose_cluster};

/// Discovers the cluster and writes its inventory (to `--out` or stdout).
pub(super) async fn inventory(which: InventoryCommand) -> i32 {
    let (tool, args, ssh, pod) = match which {
        InventoryCommand::Kind(a) => {
            let pod = a.transport == NodeTransportArg::Pod;
            let ssh = match (a.transport, a.identity_file, a.known_hosts) {
                (NodeTransportArg::Ssh, Some(identity_file), Some(known_hosts)) => Some(SshReach {
                    identity_file: absolute(identity_file),
                    known_hosts: absolute(known_hosts),
                }),
                _ => None,
            };
            (Tool::Kind, a.common, ssh, pod)
        }
        InventoryCommand::K3d(a) => (Tool::K3d, a, None, false),
    };
    match generate(tool, &args, ssh, pod).await {
        Ok(summary) => {
            eprintln!("{summary}");
            EXIT_OK
        }
        Err(e) => {
            fail!("inventory {}: {e}", tool.name());
            EXIT_ERROR
        }
    }
}

/// The path as the inventory names it: absolute, so the file works from any directory.
fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

/// `ssh`: the nodes are reached over SSH so; `pod`: through a privileged pod and the API.
async fn generate(
    tool: Tool,
    args: &InventoryArgs,
    ssh: Option<SshReach>,
    pod: bool,
) -> Result<String, String> {
    // No inventory yet: only the flags, KUBECONFIG and ~/.kube/config choose the cluster.
    let access = resolve_access(&args.api.overrides(), None, None);
    let current = read_merged(&access.kubeconfig)
        .ok()
        .and_then(|k| k.current_context);
    let choice = choose_cluster(
        tool,
        args.name.as_deref(),
        args.api.context.as_deref(),
        current.as_deref(),
    );
    // The inventory names the one file that defines the context, as an absolute path, so
    // it works from any directory and whatever KUBECONFIG holds later.
    let files = if access.kubeconfig.is_empty() {
        std::env::home_dir()
            .map(|h| vec![h.join(".kube").join("config")])
            .unwrap_or_default()
    } else {
        access.kubeconfig.clone()
    };
    let kubeconfig_to_write =
        file_defining(&files, &choice.context).map(|f| std::path::absolute(&f).unwrap_or(f));
    let source = Source {
        tool,
        choice,
        kubeconfig: access.kubeconfig,
        kubeconfig_to_write,
    };
    let facts = gather(&source).await.map_err(|e| e.to_string())?;
    let mut discovered = discover::build(&facts).map_err(|e| e.to_string())?;
    if let Some(ssh) = ssh {
        discovered = discovered.over_ssh(ssh).map_err(|e| e.to_string())?;
    }
    let command: Vec<String> = std::env::args().collect();
    let mut text = discover::render(&discovered, &command.join(" ")).map_err(|e| e.to_string())?;
    if pod {
        let tag = format!("registry.k8s.io/kube-proxy:{}", discovered.version);
        let pinned = discover::pinned_image(&facts.nodes, &tag);
        text = discover::pod_transport(&text, &discovered.version, pinned.as_deref());
    }
    let written_to = match &args.out {
        Some(path) => {
            write(path, &text)?;
            path.display().to_string()
        }
        None => {
            print!("{text}");
            "stdout".to_string()
        }
    };
    let t = &discovered.timers;
    let mut summary = format!(
        "wrote the inventory of {} cluster `{}` to {written_to}: {} node(s); grace {:?}, \
         unreachable toleration {}s",
        tool.name(),
        discovered.cluster,
        discovered.nodes.len(),
        t.node_monitor_grace_period.value,
        t.default_unreachable_toleration_seconds.value,
    );
    if let discover::Reach::Ssh(ssh) = &discovered.reach {
        summary.push_str(&format!(
            "\nnodes reached over SSH as root (kubeadm profile), host keys checked against {}; \
             power through Docker",
            ssh.known_hosts.display()
        ));
    }
    for note in &discovered.notes {
        summary.push_str(&format!("\nnote: {note}"));
    }
    Ok(summary)
}

fn write(path: &PathBuf, text: &str) -> Result<(), String> {
    std::fs::write(path, text)
        .map_err(|e| format!("{}: cannot write the inventory: {e}", path.display()))
}
