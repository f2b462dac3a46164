//! The generated inventory as YAML text, written by hand rather than serialized so every
//! timer carries a comment saying where its value came from.
//!
//! Every free-form string (paths, contexts) is written as a JSON string, which is a valid
//! YAML double-quoted scalar, so no name can break the file.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Discovered, Reach};

fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Comment text on one line whatever it holds.
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The YAML text; `command` is the command line that produced it, for the header.
pub(crate) fn yaml(d: &Discovered, command: &str) -> Result<String, super::ssh::KindPowerError> {
    let mut out = String::new();
    let tool = d.tool.name();
    let _ = writeln!(
        out,
        "# faultline inventory for the {tool} cluster `{}` (Kubernetes {}), written by",
        d.cluster, d.version
    );
    let _ = writeln!(out, "#   {}", comment(command));
    let _ = writeln!(
        out,
        "# from the cluster's API and its Docker containers. Run it again after changing the cluster."
    );
    for note in &d.notes {
        let _ = writeln!(out, "# note: {}", comment(note));
    }
    out.push_str("cluster:\n");
    let _ = writeln!(out, "  name: {}", quoted(&d.tool.context_of(&d.cluster)));
    if let Some(kc) = &d.kubeconfig {
        let _ = writeln!(out, "  kubeconfig: {}", quoted(&kc.display().to_string()));
    }
    let _ = writeln!(out, "  context: {}", quoted(&d.context));
    let _ = writeln!(
        out,
        "  allowedContexts: [{}]   # a run against any other context refuses to start",
        quoted(&d.context)
    );
    if !d.offers.is_empty() {
        let names: Vec<&str> = d.offers.iter().map(|(name, _)| *name).collect();
        let why: Vec<String> = d.offers.iter().map(|(_, why)| comment(why)).collect();
        let _ = writeln!(
            out,
            "  offers: [{}]   # {}",
            names.join(", "),
            why.join("; ")
        );
    }
    match &d.reach {
        Reach::DockerExec => {
            let _ = writeln!(
                out,
                "profile: {tool}                  # nodes are containers: docker exec, power through Docker"
            );
        }
        Reach::Ssh(ssh) => out.push_str(&super::ssh::yaml(ssh, quoted)?),
    }
    let t = &d.timers;
    out.push_str(
        "timers:                          # read from the cluster; each value's source after it\n",
    );
    let _ = writeln!(
        out,
        "  nodeMonitorPeriod: {:<10} # {}",
        duration(t.node_monitor_period.value),
        comment(&t.node_monitor_period.source)
    );
    let _ = writeln!(
        out,
        "  nodeMonitorGracePeriod: {:<5} # {}",
        duration(t.node_monitor_grace_period.value),
        comment(&t.node_monitor_grace_period.source)
    );
    let _ = writeln!(
        out,
        "  defaultUnreachableTolerationSeconds: {} # {}",
        t.default_unreachable_toleration_seconds.value,
        comment(&t.default_unreachable_toleration_seconds.source)
    );
    let _ = writeln!(
        out,
        "  defaultNotReadyTolerationSeconds: {}    # {}",
        t.default_not_ready_toleration_seconds.value,
        comment(&t.default_not_ready_toleration_seconds.source)
    );
    out.push_str("nodes:\n");
    for n in &d.nodes {
        match (&d.reach, &n.address) {
            (Reach::Ssh(_), Some(address)) => {
                let _ = write!(
                    out,
                    "  - {{name: {}, address: {}, roles: [{}]}}",
                    n.name,
                    quoted(address),
                    n.role
                );
            }
            _ => {
                let _ = write!(out, "  - {{name: {}, roles: [{}]}}", n.name, n.role);
            }
        }
        if let Some(note) = &n.note {
            let _ = write!(out, "   # {}", comment(note));
        }
        out.push('\n');
    }
    Ok(out)
}

/// A discovered kind inventory switched to the API transport (`faultline inventory kind
/// --transport pod`): the `kubeadm` profile (kind nodes are kubeadm nodes running
/// `kubelet.service`; the `kind` profile's power driver needs Docker, which this transport
/// is meant to do without), node commands through a privileged pod whose image is the
/// cluster's own kube-proxy image (on every node, so nothing is pulled; on the offline kind
/// cluster a Debian root filesystem with `nsenter`). `pinned` is that image by the digest
/// every node holds it under ([`super::pinned_image`]); without one the file keeps the tag
/// and says so.
pub fn pod_transport(text: &str, version: &str, pinned: Option<&str>) -> String {
    let mut out: String = text
        .lines()
        .map(|l| {
            if l.starts_with("profile: kind") {
                "profile: kubeadm               # kind nodes are kubeadm nodes (kubelet.service); no power driver: Docker is not used".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    let image = match pinned {
        Some(pinned) => format!(
            "  image: \"{pinned}\"   # any image with sh and nsenter; this one is on every node, pinned to the digest they hold\n"
        ),
        None => format!(
            "  image: \"registry.k8s.io/kube-proxy:{version}\"   # any image with sh and nsenter; on every node, but held under no registry digest (loaded, not pulled): a tag, pin it with @sha256: where you can\n"
        ),
    };
    out.push_str(
        "transport: pod                   # node commands through a privileged pod and the API's exec (no SSH, no Docker)\npod:\n",
    );
    out.push_str(&image);
    out
}
