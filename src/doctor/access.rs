//! The API permissions a run of some experiments uses, each with the reason, so `doctor`
//! can ask the API server about each (`SelfSubjectAccessReview`) and say which step or
//! observation would be refused. Setup manifests add theirs once their kinds are looked up
//! (`doctor::cluster`).

use crate::experiment::fault;
use crate::experiment::model::{Action, Experiment, ProbeKind, WorkloadKind};
use crate::observe::{Namespaces, Scope};

/// One permission: a verb on a resource, in a namespace or cluster-wide.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Access {
    /// `list`, `watch`, `patch`, `create`, `delete`, `get`.
    pub verb: String,
    /// API group (`""` for core, `apps`).
    pub group: String,
    /// Plural resource (`pods`, `deployments`).
    pub resource: String,
    /// Subresource (`eviction`, `exec`), if any.
    pub subresource: Option<String>,
    /// Namespace; `None`: cluster-scoped, or every namespace.
    pub namespace: Option<String>,
    /// The one object it is needed on, when faultline knows it in advance (a setup
    /// manifest's cluster-scoped objects): RBAC can then grant it by `resourceNames`
    /// instead of on every object of the resource. `None`: any object.
    pub name: Option<String>,
    /// What needs it (`observing pods`, step `drain node`).
    pub why: String,
    /// Whether a run fails without it; optional ones only warn (faultline has another way).
    pub required: bool,
}

impl Access {
    fn new(verb: &str, group: &str, resource: &str, namespace: Option<&str>, why: &str) -> Access {
        Access {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: None,
            namespace: namespace.map(str::to_string),
            name: None,
            why: why.into(),
            required: true,
        }
    }

    fn sub(mut self, subresource: &str) -> Access {
        self.subresource = Some(subresource.into());
        self
    }

    fn optional(mut self) -> Access {
        self.required = false;
        self
    }

    /// `create pods/eviction in namespace x`, `patch nodes (cluster-wide)`, `patch nodes w1`
    /// for messages.
    pub(crate) fn show(&self) -> String {
        let mut resource = self.resource.clone();
        if !self.group.is_empty() {
            resource = format!("{resource}.{}", self.group);
        }
        if let Some(sub) = &self.subresource {
            resource = format!("{resource}/{sub}");
        }
        let named = self.name.is_some();
        if let Some(name) = &self.name {
            resource = format!("{resource} {name}");
        }
        match &self.namespace {
            Some(ns) => format!("{} {resource} in namespace {ns}", self.verb),
            // One named object is not "cluster-wide", whatever its scope.
            None if named => format!("{} {resource}", self.verb),
            None => format!("{} {resource} (cluster-wide)", self.verb),
        }
    }
}

/// What applying one setup object of `resource` needs, and deleting it when the
/// experiment's teardown deletes its manifests: a server-side apply that creates its
/// object is authorized as `create` as well as `patch`.
pub(crate) fn setup_object(
    exp: &Experiment,
    group: &str,
    resource: &str,
    namespace: Option<String>,
    name: Option<String>,
    why: &str,
) -> Vec<Access> {
    let mut verbs = vec!["create", "patch", "get"];
    if exp.teardown.delete_manifests {
        verbs.push("delete");
    }
    verbs
        .into_iter()
        .map(|verb| Access {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: None,
            namespace: namespace.clone(),
            name: name.clone(),
            why: why.into(),
            required: true,
        })
        .collect()
}

fn workload_resource(kind: WorkloadKind) -> &'static str {
    match kind {
        WorkloadKind::Deployment => "deployments",
        WorkloadKind::StatefulSet => "statefulsets",
        WorkloadKind::DaemonSet => "daemonsets",
    }
}

/// The permissions running `experiments` uses, deduplicated (the first reason is kept).
pub(crate) fn needed(experiments: &[Experiment]) -> Vec<Access> {
    let mut all = vec![
        Access::new("list", "", "nodes", None, "observing nodes"),
        Access::new("watch", "", "nodes", None, "observing nodes"),
        Access::new(
            "create",
            "",
            "pods",
            Some("default"),
            "reading the default tolerations (a server-side dry run)",
        )
        .optional(),
        Access::new(
            "list",
            "",
            "pods",
            Some("kube-system"),
            "reading the control plane's timer flags from its static pods",
        )
        .optional(),
    ];
    // One run per cluster: the Lease a run holds for its whole life (cluster::lock), and
    // watches while it holds it. That Lease alone, by name: RBAC cannot restrict `create`
    // by name (the name is not known when it is authorized), the rest can (a watch by
    // name is one with the field selector `metadata.name`, as the holder's is).
    for verb in ["create", "get", "update", "delete", "list", "watch"] {
        let mut lease = Access::new(
            verb,
            "coordination.k8s.io",
            "leases",
            Some(crate::cluster::lock::NAMESPACE),
            "the cluster lock a run holds (one run per cluster)",
        );
        if verb != "create" {
            lease.name = Some(crate::cluster::lock::NAME.to_string());
        }
        all.push(lease);
    }
    for exp in experiments {
        let scope = Scope::of(exp);
        let namespaces: Vec<Option<String>> = match &scope.namespaces {
            Namespaces::All => vec![None],
            Namespaces::Only(names) => names.iter().cloned().map(Some).collect(),
        };
        for ns in &namespaces {
            for (resource, group) in [("pods", ""), ("replicasets", "apps")] {
                for verb in ["list", "watch"] {
                    all.push(Access::new(
                        verb,
                        group,
                        resource,
                        ns.as_deref(),
                        &format!("observing {resource} for {}", exp.name),
                    ));
                }
            }
        }
        for w in &scope.workloads {
            for verb in ["list", "watch"] {
                all.push(Access::new(
                    verb,
                    "apps",
                    workload_resource(w.kind),
                    Some(&w.namespace),
                    &format!("observing {w} for {}", exp.name),
                ));
            }
        }
        for (step, action) in exp
            .steps
            .iter()
            .flat_map(|s| s.actions().into_iter().map(move |a| (s, a)))
        {
            let why = format!("step `{}` of {}", step.name, exp.name);
            let removes_finalizers = matches!(
                action,
                Action::DeletePvc {
                    remove_finalizers: true,
                    ..
                }
            );
            let namespace = fault::api_namespace(action);
            for api in fault::info(action).api {
                if api.removing_finalizers && !removes_finalizers {
                    continue;
                }
                let ns = if api.namespaced { namespace } else { None };
                let mut access = Access::new(api.verb, api.group, api.resource, ns, &why);
                access.subresource = api.subresource.map(str::to_string);
                all.push(access);
            }
        }
        for probe in &exp.probes {
            match &probe.kind {
                ProbeKind::Exec { workload, .. } => {
                    let why = format!("exec probe `{}` of {}", probe.name, exp.name);
                    for verb in EXEC_VERBS {
                        all.push(
                            Access::new(verb, "", "pods", Some(&workload.namespace), &why)
                                .sub("exec"),
                        );
                    }
                }
                ProbeKind::Logs { workload, .. } => {
                    let why = format!("logs probe `{}` of {}", probe.name, exp.name);
                    all.push(
                        Access::new("get", "", "pods", Some(&workload.namespace), &why).sub("log"),
                    );
                }
                ProbeKind::Command { .. } | ProbeKind::Http { .. } => {}
            }
        }
    }
    dedup(all)
}

/// The verbs on a node that RBAC can grant node by node (`resourceNames`): a step's
/// `patch` (cordon, drain, taint) or `delete` reaches the nodes its target resolves to, so
/// an actor may hold them on those nodes alone (`faultline rbac --nodes`). `list` and
/// `watch` cannot be restricted by name, and the observer holds `get` everywhere.
pub(crate) const PER_NODE_VERBS: [&str; 3] = ["patch", "update", "delete"];

/// Whether `a` is a verb on nodes that can be granted node by node and is asked for on
/// every node ([`PER_NODE_VERBS`], no name yet): a refusal of the unnamed question then
/// may still be a grant by name, asked per node.
pub(crate) fn grantable_per_node(a: &Access) -> bool {
    a.group.is_empty()
        && a.resource == "nodes"
        && a.subresource.is_none()
        && a.namespace.is_none()
        && a.name.is_none()
        && PER_NODE_VERBS.contains(&a.verb.as_str())
}

/// `a` asked on one node: the same verb, that node's name.
pub(crate) fn on_node(a: &Access, node: &str) -> Access {
    Access {
        name: Some(node.to_string()),
        ..a.clone()
    }
}

/// What the steps of `exp` do on each node they act on, by name: every per-node verb
/// ([`grantable_per_node`]) a step's API use needs, on each node of its resolved target.
/// Asked after the targets are resolved, so an actor granted `patch nodes` on some nodes
/// only is refused exactly when a step would reach another.
pub(crate) fn needed_on_nodes(
    exp: &Experiment,
    targets: &std::collections::BTreeMap<String, Vec<String>>,
) -> Vec<Access> {
    let mut all = Vec::new();
    for (step, action) in exp
        .steps
        .iter()
        .flat_map(|s| s.actions().into_iter().map(move |a| (s, a)))
    {
        let why = format!("step `{}` of {}", step.name, exp.name);
        for api in fault::info(action).api {
            let access = Access::new(api.verb, api.group, api.resource, None, &why);
            if api.namespaced || api.subresource.is_some() || !grantable_per_node(&access) {
                continue;
            }
            for node in step.nodes(targets) {
                all.push(on_node(&access, node));
            }
        }
    }
    dedup(all)
}

/// The verbs an exec through the API needs on `pods/exec`: the API server authorizes
/// kube-rs's WebSocket upgrade as `get` (v1.33 on kind refused a Job that held `create`
/// alone), and SPDY connections and newer servers' WebSocket upgrades as `create`.
pub(crate) const EXEC_VERBS: [&str; 2] = ["create", "get"];

/// One entry per permission, keeping the first reason; a required use wins over an
/// optional one.
pub(crate) fn dedup(all: Vec<Access>) -> Vec<Access> {
    let mut out: Vec<Access> = Vec::new();
    for a in all {
        match out.iter_mut().find(|o| {
            o.verb == a.verb
                && o.group == a.group
                && o.resource == a.resource
                && o.subresource == a.subresource
                && o.namespace == a.namespace
                && o.name == a.name
        }) {
            Some(existing) => existing.required |= a.required,
            None => out.push(a),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_experiment_needs_what_it_observes_and_does() {
        let e = crate::experiment::parse(
            "name: e\ndescription: d\nnamespace: shop\ntargets: {v: {role: worker, count: 1}}\nsteps:\n  - {name: drain it, at: 0s, do: drain, target: v}\n  - {name: back, at: 30s, do: uncordon, target: v}\nexpect:\n  - {name: web, pods: {workload: deployment/web}, eventually: Ready}\n",
            std::path::Path::new("e.yaml"),
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let got: Vec<String> = needed(&[e]).iter().map(Access::show).collect();
        for want in [
            "list nodes (cluster-wide)",
            "watch pods in namespace shop",
            "list replicasets.apps in namespace shop",
            "watch deployments.apps in namespace shop",
            "patch nodes (cluster-wide)",
            "create pods/eviction (cluster-wide)",
            "create pods in namespace default",
        ] {
            assert!(
                got.iter().any(|g| g == want),
                "{want} missing from {got:#?}"
            );
        }
        assert_eq!(
            got.iter()
                .filter(|g| *g == "patch nodes (cluster-wide)")
                .count(),
            1,
            "deduplicated"
        );
    }

    #[test]
    fn claims_and_pods_are_asked_for_in_the_namespace_the_step_names() {
        let e = crate::experiment::parse(
            "name: e\ndescription: d\nnamespace: shop\ntargets: {v: {role: worker, count: 1}}\nsteps:\n  - {name: kill, at: 0s, do: delete-pods, pods: {workload: statefulset/data/db}}\n  - {name: claim, at: 1s, do: delete-pvc, pvc: {name: data-db-0, namespace: data}}\n  - {name: stuck claim, at: 2s, do: delete-pvc, pvc: {name: data-db-1, namespace: vault}, removeFinalizers: true}\nexpect:\n  - {name: db, pods: {workload: statefulset/data/db}, eventually: Ready}\n",
            std::path::Path::new("e.yaml"),
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let got: Vec<String> = needed(&[e]).iter().map(Access::show).collect();
        for want in [
            "list pods in namespace data",
            "delete pods in namespace data",
            "delete persistentvolumeclaims in namespace data",
            "delete persistentvolumeclaims in namespace vault",
            "patch persistentvolumeclaims in namespace vault",
        ] {
            assert!(
                got.iter().any(|g| g == want),
                "{want} missing from {got:#?}"
            );
        }
        assert!(
            !got.iter()
                .any(|g| g == "patch persistentvolumeclaims in namespace data"),
            "finalizers are patched only where the step removes them: {got:#?}"
        );
    }

    #[test]
    fn exec_and_logs_probes_need_their_pod_subresources() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("experiments/power-off-service-outage.yaml");
        let e = crate::experiment::load(&path).unwrap_or_else(|d| panic!("{d}"));
        let got: Vec<String> = needed(&[e]).iter().map(Access::show).collect();
        for want in [
            "create pods/exec in namespace faultline-lab",
            "get pods/exec in namespace faultline-lab",
            "get pods/log in namespace faultline-lab",
        ] {
            assert!(
                got.iter().any(|g| g == want),
                "{want} missing from {got:#?}"
            );
        }
    }
}
