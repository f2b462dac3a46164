//! The permissions faultline needs inside a cluster, as RBAC: `faultline rbac` prints them
//! and the Helm chart (`deploy/helm/faultline/`) installs what it printed.
//!
//! Two roles, so a security review reads two short lists:
//! - the **observer** only reads: nodes, pods and workloads (to follow the run), events,
//!   and the node heartbeats (Leases) in `kube-node-lease` alone. It is the same for every
//!   experiment. With it alone a run is refused before any fault, naming what is missing
//!   and the rules that grant it; `doctor`, `validate` and `plan` need nothing more.
//! - the **actor** holds exactly what the chosen experiments do beyond reading: each step's
//!   API requests from the fault table (`fault::info(..).api`), what the setup manifests
//!   apply and delete, exec probes. It is generated, never written by hand.

pub(crate) mod kinds;
pub(crate) mod rules;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::api::ObjectMeta;
use serde_json::json;

use crate::doctor::access::{self, Access};
use crate::experiment::model::Experiment;
pub(crate) use kinds::KindError;
pub(crate) use rules::Grants;

/// The namespace holding the nodes' heartbeat Leases: the only place the observer reads
/// Leases.
pub(crate) const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// Which of faultline's two ServiceAccounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RbacRole {
    /// Read-only: what watching a run needs.
    Observer,
    /// What the experiments' faults, setup and probes do beyond reading.
    Actor,
}

impl RbacRole {
    /// The suffix of its objects' names (`faultline-observer`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            RbacRole::Observer => "observer",
            RbacRole::Actor => "actor",
        }
    }
}

fn read(verbs: &[&str], group: &str, resource: &str, namespace: Option<&str>) -> Vec<Access> {
    verbs
        .iter()
        .map(|verb| Access {
            verb: (*verb).into(),
            group: group.into(),
            resource: resource.into(),
            subresource: None,
            namespace: namespace.map(str::to_string),
            name: None,
            why: "observing the cluster".into(),
            required: true,
        })
        .collect()
}

/// Everything the observer may do: read nodes, pods, workloads and events anywhere, and
/// node Leases in `kube-node-lease` only.
pub(crate) fn observer() -> Vec<Access> {
    const READ: &[&str] = &["get", "list", "watch"];
    let mut all = Vec::new();
    for (group, resource) in [
        ("", "nodes"),
        ("", "pods"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("apps", "replicasets"),
    ] {
        all.extend(read(READ, group, resource, None));
    }
    all.extend(read(&["list", "watch"], "", "events", None));
    all.extend(read(&["list", "watch"], "events.k8s.io", "events", None));
    all.extend(read(
        READ,
        "coordination.k8s.io",
        "leases",
        Some(NODE_LEASE_NAMESPACE),
    ));
    all
}

/// What the actor needs on top of the observer for `experiments`: every required
/// permission a run of them uses ([`access::needed`] and the setup manifests) that the
/// observer's rules do not already allow. Optional permissions (faultline does without
/// them) are left out: least privilege wins over a slightly better timer reading.
pub(crate) fn actor(experiments: &[Experiment]) -> Result<Vec<Access>, KindError> {
    let mut all = access::needed(experiments);
    for exp in experiments {
        all.extend(kinds::setup_access(exp)?);
    }
    let observer = Grants::of(&observer());
    Ok(access::dedup(all)
        .into_iter()
        .filter(|a| a.required && !observer.allows(a))
        .collect())
}

/// What the inventory's API transport (`transport: pod`) does beyond reading: a pod per
/// node command in its namespace (create, exec, delete) and, where faultline creates that
/// namespace, the namespace itself. Nothing for SSH or a local exec: they do not go
/// through the API.
pub(crate) fn transport(inv: &crate::inventory::Inventory) -> Vec<Access> {
    use crate::inventory::TransportKind;
    let mut all = Vec::new();
    for node in inv
        .nodes()
        .iter()
        .filter(|n| n.transport == TransportKind::Pod)
    {
        let pod = &node.pod;
        let ns = Some(pod.namespace.clone());
        let one =
            |verb: &str, resource: &str, sub: Option<&str>, ns: Option<String>, why: &str| Access {
                verb: verb.into(),
                group: String::new(),
                resource: resource.into(),
                subresource: sub.map(str::to_string),
                namespace: ns,
                name: None,
                why: why.into(),
                required: true,
            };
        all.push(one(
            "create",
            "pods",
            None,
            ns.clone(),
            "the node-access pod of a node command",
        ));
        // Exec over a WebSocket (kube-rs's way) is authorized as `get` on pods/exec by the
        // API servers this was run against (v1.33 on kind refused a Job holding `create`
        // alone); SPDY and newer servers ask `create`. Both are granted.
        for verb in crate::doctor::access::EXEC_VERBS {
            all.push(one(
                verb,
                "pods",
                Some("exec"),
                ns.clone(),
                "each node command",
            ));
        }
        all.push(one(
            "delete",
            "pods",
            None,
            ns.clone(),
            "removing the pod after its command",
        ));
        // The undo watcher beside a kubelet stop's timer (execute::pod::watcher): its log
        // says it watches, an annotation asks it to undo, and faultline makes its
        // ServiceAccount, whose Role may only get pods there.
        all.push(one(
            "get",
            "pods",
            Some("log"),
            ns.clone(),
            "the undo watcher saying it watches",
        ));
        all.push(one(
            "patch",
            "pods",
            None,
            ns.clone(),
            "asking the undo watcher to undo",
        ));
        for (group, resource) in [
            ("", "serviceaccounts"),
            ("rbac.authorization.k8s.io", "roles"),
            ("rbac.authorization.k8s.io", "rolebindings"),
        ] {
            for verb in ["get", "create"] {
                all.push(Access {
                    group: group.into(),
                    ..one(
                        verb,
                        resource,
                        None,
                        ns.clone(),
                        "the undo watcher's account, which may only get pods there",
                    )
                });
            }
        }
        if pod.create_namespace {
            for verb in ["get", "create"] {
                all.push(Access {
                    name: Some(pod.namespace.clone()),
                    ..one(
                        verb,
                        "namespaces",
                        None,
                        None,
                        "the node-access pods' namespace",
                    )
                });
            }
        }
    }
    all
}

/// The namespaces of the inventory's API transport that faultline creates when missing.
pub(crate) fn node_access_namespaces(inv: &crate::inventory::Inventory) -> Vec<String> {
    let mut out: Vec<String> = inv
        .nodes()
        .iter()
        .filter(|n| n.transport == crate::inventory::TransportKind::Pod && n.pod.create_namespace)
        .map(|n| n.pod.namespace.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The rules of `role` for `experiments` (the observer's do not depend on them).
/// With `inventory`, the actor also holds what its API transport needs ([`transport`]).
/// `created_for_it`: namespaces made before faultline runs (the chart makes the setup's
/// and the node-access pods'), which the actor then never creates: it holds `get` and
/// `patch` on those by name, and no `create namespaces` at all for them.
/// `only_nodes`: when not empty, what the steps do to a node (`patch`, `delete`) is granted
/// on these nodes alone, by name; a run refuses a step whose target resolves to another.
pub(crate) fn grants(
    role: RbacRole,
    experiments: &[Experiment],
    inventory: Option<&crate::inventory::Inventory>,
    created_for_it: &[String],
    only_nodes: &[String],
) -> Result<Grants, KindError> {
    Ok(match role {
        RbacRole::Observer => Grants::of(&observer()),
        RbacRole::Actor => {
            let mut all = on_nodes(actor(experiments)?, only_nodes);
            let observer = Grants::of(&observer());
            all.extend(
                inventory
                    .map(transport)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|a| !observer.allows(a)),
            );
            all.retain(|a| {
                !(a.verb == "create"
                    && a.group.is_empty()
                    && a.resource == "namespaces"
                    && a.name.as_ref().is_some_and(|n| created_for_it.contains(n)))
            });
            Grants::of(&access::dedup(all))
        }
    })
}

/// `all` with every per-node permission ([`access::grantable_per_node`]) replaced by the
/// same on each of `nodes` by name; unchanged when `nodes` is empty.
fn on_nodes(all: Vec<Access>, nodes: &[String]) -> Vec<Access> {
    if nodes.is_empty() {
        return all;
    }
    all.into_iter()
        .flat_map(|a| {
            if access::grantable_per_node(&a) {
                nodes.iter().map(|n| access::on_node(&a, n)).collect()
            } else {
                vec![a]
            }
        })
        .collect()
}

/// Whether `name` can be a node's given to `faultline rbac --nodes`: a Node's name is a
/// DNS subdomain (RFC 1123 labels joined by `.`, at most 253 characters).
pub(crate) fn is_node_name(name: &str) -> bool {
    name.len() <= 253
        && name
            .split('.')
            .all(crate::inventory::pod_defaults::valid_dns_label)
}

/// `missing` as the `rules:` of a ClusterRole and of a Role per namespace, each headed by
/// a comment naming where it goes: ready to paste into the manifests.
pub(crate) fn paste_ready(missing: &[Access]) -> String {
    let grants = Grants::of(missing);
    let mut out = String::new();
    if !grants.cluster.is_empty() {
        out.push_str("# ClusterRole rules:\n");
        out.push_str(&rules_yaml(&grants.cluster));
    }
    for (ns, rules) in &grants.namespaced {
        out.push_str(&format!("# Role rules in namespace {ns}:\n"));
        out.push_str(&rules_yaml(rules));
    }
    out
}

fn rules_yaml(rules: &[PolicyRule]) -> String {
    serde_saphyr::to_string(&json!({ "rules": rules })).unwrap_or_default()
}

/// `grants` as Kubernetes objects: a ClusterRole `<prefix>-<role>` for the cluster-wide
/// rules and a Role of the same name in each namespace, as YAML documents.
pub(crate) fn manifests(prefix: &str, role: RbacRole, grants: &Grants) -> String {
    let name = format!("{prefix}-{}", role.name());
    let mut docs: Vec<serde_json::Value> = Vec::new();
    if !grants.cluster.is_empty() {
        let cr = ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            rules: Some(grants.cluster.clone()),
            ..ClusterRole::default()
        };
        docs.push(with_type(&cr, "ClusterRole"));
    }
    for (ns, rules) in &grants.namespaced {
        let r = Role {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ns.clone()),
                ..ObjectMeta::default()
            },
            rules: Some(rules.clone()),
        };
        docs.push(with_type(&r, "Role"));
    }
    docs.iter()
        .map(|d| format!("---\n{}", serde_saphyr::to_string(d).unwrap_or_default()))
        .collect()
}

fn with_type<T: serde::Serialize>(object: &T, kind: &str) -> serde_json::Value {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), json!("rbac.authorization.k8s.io/v1"));
        map.insert("kind".into(), json!(kind));
    }
    value
}

/// The chart's values for these roles: `rbac.<role>.clusterRules`, and
/// `rbac.<role>.namespaceRules` as a list of `{namespace, rules}` (a list, because helm
/// merges a map from `-f` into the chart's default one, and the default experiment's
/// namespaces would stay); `rbac.createNamespaces`: every namespace the experiments' own
/// setup creates, installed by the chart so the actor's Roles there can be installed first
/// and the actor needs no `create namespaces` (the grants are computed with them as
/// `created_for_it`).
/// `node_access_namespaces`: the API transport's namespaces faultline would create, which
/// the chart creates instead (labelled for privileged pods), so the actor's Role there can
/// be installed; listed only when there are any.
///
/// `grace`: the `job.terminationGracePeriodSeconds` the experiments need after SIGTERM and
/// why (computed by the runner, which knows its undo's bounds), when there are experiments.
pub(crate) fn values(
    roles: &[(RbacRole, Grants)],
    setup_namespaces: &[String],
    node_access_namespaces: &[String],
    grace: Option<(u64, &str)>,
) -> String {
    let mut rbac = serde_json::Map::new();
    let mut create: Vec<&String> = Vec::new();
    for (role, grants) in roles {
        let namespaced: Vec<serde_json::Value> = grants
            .namespaced
            .iter()
            .map(|(ns, rules)| json!({ "namespace": ns, "rules": rules }))
            .collect();
        if *role == RbacRole::Actor {
            create.extend(setup_namespaces);
        }
        rbac.insert(
            role.name().into(),
            json!({ "clusterRules": grants.cluster, "namespaceRules": namespaced }),
        );
    }
    create.sort();
    create.dedup();
    rbac.insert("createNamespaces".into(), json!(create));
    if !node_access_namespaces.is_empty() {
        rbac.insert("nodeAccessNamespaces".into(), json!(node_access_namespaces));
    }
    let mut values = json!({ "rbac": rbac });
    if let Some((seconds, _)) = grace {
        values["job"] = json!({ "terminationGracePeriodSeconds": seconds });
    }
    let text = serde_saphyr::to_string(&values).unwrap_or_default();
    match grace {
        Some((_, because)) => format!(
            "# job.terminationGracePeriodSeconds: what undoing these experiments' faults can \
             take after SIGTERM at worst\n# ({}).\n{text}",
            because
        ),
        None => text,
    }
}

#[cfg(test)]
mod tests;
