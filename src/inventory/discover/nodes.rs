//! Nodes and roles: the API's nodes, each matched to the Docker container of its name.
//!
//! The API is the truth for which nodes exist and which are control plane (it is what the
//! blast-radius interlock reads); Docker must agree, because the profile reaches a node by
//! `docker exec <node name>`. Disagreement means the kube context points at another
//! cluster than the containers, and that must stop the command, not be written down.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;

use super::{ClusterFacts, Container, DiscoverError, InventoryNode, Tool};

/// A node as the API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiNode {
    /// `metadata.name`.
    pub name: String,
    /// Carries the `node-role.kubernetes.io/control-plane` (or `master`) label.
    pub control_plane: bool,
    /// `status.images[].names`: the names of each image the node holds, tags and
    /// registry digests (`repo@sha256:…`) of the same image side by side.
    pub images: Vec<Vec<String>>,
}

impl ApiNode {
    /// From a Node object.
    pub fn from_node(node: &Node) -> Option<ApiNode> {
        Some(ApiNode {
            name: node.metadata.name.clone()?,
            control_plane: crate::cluster::targets::is_control_plane(node),
            images: node
                .status
                .as_ref()
                .and_then(|s| s.images.as_ref())
                .map(|images| images.iter().filter_map(|i| i.names.clone()).collect())
                .unwrap_or_default(),
        })
    }
}

/// `tag` (`registry.k8s.io/kube-proxy:v1.33.13`) pinned to the registry digest every node
/// holds it by (`registry.k8s.io/kube-proxy:v1.33.13@sha256:…`), so the privileged
/// node-access pod runs exactly the image seen on the nodes, not whatever the tag names
/// later. `None` when a node lacks it, holds it under no digest of the same repository (an
/// image loaded rather than pulled, as on the offline kind cluster), or nodes disagree.
pub fn pinned_image(nodes: &[ApiNode], tag: &str) -> Option<String> {
    let (repository, _) = tag.rsplit_once(':').filter(|(_, t)| !t.contains('/'))?;
    let digest_prefix = format!("{repository}@sha256:");
    let mut digests = nodes.iter().map(|n| {
        let names = n
            .images
            .iter()
            .find(|names| names.iter().any(|x| x == tag))?;
        names
            .iter()
            .find_map(|x| x.strip_prefix(&digest_prefix))
            .map(str::to_string)
    });
    let first = digests.next()??;
    digests
        .all(|d| d.as_deref() == Some(first.as_str()))
        .then(|| format!("{tag}@sha256:{first}"))
}

/// What a node container's role label says it is: `Some(true)` control plane,
/// `Some(false)` worker, `None` not a node (kind's external load balancer, k3d's
/// load balancer and registry).
fn container_role(tool: Tool, c: &Container) -> Option<bool> {
    match tool {
        Tool::Kind => match c.label("io.x-k8s.kind.role")? {
            "control-plane" => Some(true),
            "worker" => Some(false),
            _ => None,
        },
        Tool::K3d => match c.label("k3d.role")? {
            "server" => Some(true),
            "agent" => Some(false),
            _ => None,
        },
    }
}

fn role_word(tool: Tool, control_plane: bool) -> &'static str {
    match (tool, control_plane) {
        (Tool::Kind, true) => "control-plane",
        (Tool::Kind, false) => "worker",
        (Tool::K3d, true) => "server",
        (Tool::K3d, false) => "agent",
    }
}

/// The inventory's nodes (control plane first, then by name) and notes for the reader.
pub(crate) fn match_nodes(
    facts: &ClusterFacts,
) -> Result<(Vec<InventoryNode>, Vec<String>), DiscoverError> {
    let tool = facts.tool;
    let label = tool.cluster_label();
    let mine: Vec<&Container> = facts
        .containers
        .iter()
        .filter(|c| c.label(label) == Some(facts.cluster.as_str()))
        .collect();
    if mine.is_empty() {
        return Err(DiscoverError::NoContainers {
            tool,
            cluster: facts.cluster.clone(),
        });
    }
    let mut notes = Vec::new();
    let node_containers: Vec<(&Container, bool)> = mine
        .iter()
        .filter_map(|c| container_role(tool, c).map(|cp| (*c, cp)))
        .collect();
    for c in &mine {
        if container_role(tool, c).is_none() {
            notes.push(format!(
                "container {} ({}) is not a node; not listed",
                c.name,
                c.label(role_label(tool)).unwrap_or("no role label")
            ));
        }
    }
    let api_names: BTreeSet<&str> = facts.nodes.iter().map(|n| n.name.as_str()).collect();
    if facts.nodes.is_empty() {
        return Err(DiscoverError::Mismatch(format!(
            "the API of context `{}` lists no nodes",
            facts.context
        )));
    }
    if !node_containers
        .iter()
        .any(|(c, _)| api_names.contains(c.name.as_str()))
    {
        return Err(DiscoverError::Mismatch(format!(
            "the API of context `{}` lists nodes {} but the {} cluster `{}` has containers {}: \
             the context points at another cluster (pass --context or --name)",
            facts.context,
            join(api_names.iter().copied()),
            tool.name(),
            facts.cluster,
            join(node_containers.iter().map(|(c, _)| c.name.as_str())),
        )));
    }
    let mut nodes = Vec::new();
    for api in &facts.nodes {
        let Some((container, cp)) = node_containers.iter().find(|(c, _)| c.name == api.name) else {
            return Err(DiscoverError::Mismatch(format!(
                "node {} (context `{}`) has no container of that name labelled {label}={}: \
                 faultline reaches nodes with `docker exec <node>`",
                api.name, facts.context, facts.cluster
            )));
        };
        if *cp != api.control_plane {
            return Err(DiscoverError::Mismatch(format!(
                "node {} is {} in the API but its container is labelled {}",
                api.name,
                if api.control_plane {
                    "control-plane"
                } else {
                    "a worker"
                },
                role_word(tool, *cp),
            )));
        }
        if container.state != "running" {
            notes.push(format!(
                "node container {} is {}, not running (`docker start {}` brings it back)",
                container.name, container.state, container.name
            ));
        }
        nodes.push(InventoryNode {
            name: api.name.clone(),
            role: if api.control_plane {
                "control-plane"
            } else {
                "worker"
            },
            note: match tool {
                Tool::Kind => None,
                Tool::K3d => Some(format!("k3s {}", role_word(tool, *cp))),
            },
            address: container.address().map(str::to_string),
        });
    }
    for (c, _) in &node_containers {
        if !api_names.contains(c.name.as_str()) {
            notes.push(format!(
                "container {} has no node in the API (not registered, or deleted); not listed",
                c.name
            ));
        }
    }
    nodes.sort_by(|a, b| {
        (a.role != "control-plane", &a.name).cmp(&(b.role != "control-plane", &b.name))
    });
    Ok((nodes, notes))
}

fn role_label(tool: Tool) -> &'static str {
    match tool {
        Tool::Kind => "io.x-k8s.kind.role",
        Tool::K3d => "k3d.role",
    }
}

fn join<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = names.collect();
    if all.is_empty() {
        "none".to_string()
    } else {
        all.join(", ")
    }
}
