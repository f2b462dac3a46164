//! The cluster side of `doctor`: the API answers, and it allows what the experiments do.

use kube::Client;
use kube::api::GroupVersionKind;

use super::access::{self, Access};
use super::node_grants::{self, GrantedByName};
use super::review::can_i;
use super::{CheckKind, Finding, Status};
use crate::cluster::{self, Connection};
use crate::experiment::model::Experiment;
use crate::inventory::Inventory;

/// The API as `doctor` found it: a connection and the server's version when it answers,
/// and the finding that says so either way.
pub struct ClusterView {
    /// The connection, when the API answered.
    pub connection: Option<Connection>,
    /// The API server's `gitVersion`.
    pub version: Option<String>,
    /// `api`: reachable or not, and where.
    pub finding: Finding,
}

/// Connects as a run would (kubeconfig, context, failover endpoints) and asks the version.
pub async fn read_cluster(inventory: &Inventory) -> ClusterView {
    let cluster = inventory.cluster();
    let context = crate::cluster::kubeconfig::read_merged(inventory.kubeconfig())
        .ok()
        .and_then(|k| {
            inventory
                .context()
                .map(str::to_string)
                .or(k.current_context)
        })
        .unwrap_or_else(|| "(current)".into());
    let connection = match cluster::connect_with_failover(
        inventory.kubeconfig(),
        inventory.context(),
        &cluster.api_endpoints(),
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            return ClusterView {
                connection: None,
                version: None,
                finding: Finding::cluster(
                    CheckKind::Api,
                    Status::Fail,
                    format!("context {context}: {e}"),
                ),
            };
        }
    };
    match cluster::cluster_version(&connection.client).await {
        Ok(version) => {
            let endpoints = connection
                .failover
                .as_ref()
                .map(|f| f.endpoints().join(", "))
                .unwrap_or_else(|| "one endpoint".into());
            ClusterView {
                finding: Finding::cluster(
                    CheckKind::Api,
                    Status::Pass,
                    format!("context {context} answers: {version} ({endpoints})"),
                ),
                connection: Some(connection),
                version: Some(version),
            }
        }
        Err(e) => ClusterView {
            connection: None,
            version: None,
            finding: Finding::cluster(
                CheckKind::Api,
                Status::Fail,
                format!("context {context}: the API does not answer: {e}"),
            ),
        },
    }
}

/// Asks the API server whether it allows every permission the experiments use
/// (`SelfSubjectAccessReview`, the question `kubectl auth can-i` asks): a failure per
/// permission refused to a step or the observer, a warning per optional one refused, and
/// one pass when everything is allowed.
pub async fn preflight_cluster(client: &Client, experiments: &[Experiment]) -> Vec<Finding> {
    check_access(client, experiments).await.findings
}

/// The findings of [`preflight_cluster`], and the required permissions refused.
pub(crate) struct AccessAnswers {
    /// As [`preflight_cluster`] returns them.
    pub findings: Vec<Finding>,
    /// Every required permission the API server refused, to print as rules.
    pub missing: Vec<Access>,
}

/// [`preflight_cluster`], keeping the refused permissions apart.
pub(crate) async fn check_access(client: &Client, experiments: &[Experiment]) -> AccessAnswers {
    let mut needed = access::needed(experiments);
    let mut unread = Vec::new();
    for exp in experiments {
        match manifest_access(client, exp).await {
            Ok(more) => needed.extend(more),
            Err(why) => unread.push(Finding::cluster(CheckKind::Rbac, Status::Fail, why)),
        }
    }
    let mut answers = Vec::new();
    let mut by_name = Vec::new();
    for a in access::dedup(needed) {
        let answer = can_i(client, &a).await.map_err(|e| e.to_string());
        // Refused on every node, perhaps granted on some by name: a run then asks node
        // by node once its targets are resolved.
        if answer == Ok(false) && access::grantable_per_node(&a) {
            let nodes = node_grants::granted_nodes(client, &a).await;
            if !nodes.is_empty() {
                by_name.push(GrantedByName { access: a, nodes });
                continue;
            }
        }
        answers.push((a, answer));
    }
    judge_access(unread, answers, by_name)
}

/// Asks, node by node, every per-node permission the steps of `exp` need on the nodes
/// their targets resolved to: the run's pre-flight under grants by name. A refusal names
/// the node and the step.
pub(crate) async fn check_on_nodes(
    client: &Client,
    exp: &Experiment,
    targets: &std::collections::BTreeMap<String, Vec<String>>,
) -> AccessAnswers {
    let mut answers = Vec::new();
    for a in access::needed_on_nodes(exp, targets) {
        let answer = can_i(client, &a).await.map_err(|e| e.to_string());
        answers.push((a, answer));
    }
    judge_access(Vec::new(), answers, Vec::new())
}

/// The findings from each permission's answer (allowed, refused, or the question failed),
/// after `earlier` ones (setup manifests that could not be read): what the API server
/// decided, turned into what `doctor` prints and `run` refuses on.
/// `by_name`: per-node permissions allowed on some nodes only, said as such (a run asks
/// them again node by node).
pub(crate) fn judge_access(
    earlier: Vec<Finding>,
    answers: Vec<(Access, Result<bool, String>)>,
    by_name: Vec<GrantedByName>,
) -> AccessAnswers {
    let mut findings = earlier;
    let mut missing = Vec::new();
    let mut allowed = by_name.len();
    let total = answers.len() + by_name.len();
    for g in by_name {
        findings.push(Finding::cluster(
            CheckKind::Rbac,
            Status::Pass,
            format!(
                "`{} {}` is granted by name only, on {} node(s): {}; a run asks it node by \
                 node once its targets are resolved ({} needs it)",
                g.access.verb,
                g.access.resource,
                g.nodes.len(),
                g.nodes.join(", "),
                g.access.why
            ),
        ));
    }
    for (a, answer) in answers {
        match answer {
            Ok(true) => allowed += 1,
            Ok(false) if a.required => {
                findings.push(Finding::cluster(
                    CheckKind::Rbac,
                    Status::Fail,
                    format!("`{}` is not allowed; {} needs it", a.show(), a.why),
                ));
                missing.push(a);
            }
            Ok(false) => findings.push(Finding::cluster(
                CheckKind::Rbac,
                Status::Warn,
                format!(
                    "`{}` is not allowed ({}; faultline does without)",
                    a.show(),
                    a.why
                ),
            )),
            Err(e) => findings.push(Finding::cluster(
                CheckKind::Rbac,
                Status::Fail,
                format!("cannot ask whether `{}` is allowed: {e}", a.show()),
            )),
        }
    }
    if findings.iter().all(|f| f.status != Status::Fail) {
        findings.insert(
            0,
            Finding::cluster(
                CheckKind::Rbac,
                Status::Pass,
                format!("{allowed} of {total} permissions the experiments use are allowed"),
            ),
        );
    }
    AccessAnswers { findings, missing }
}

/// What applying (and tearing down) an experiment's setup manifests needs: server-side
/// apply is a `patch`, the readiness wait a `get`, teardown a `delete`, per object kind.
async fn manifest_access(client: &Client, exp: &Experiment) -> Result<Vec<Access>, String> {
    let mut out = Vec::new();
    for path in &exp.setup.manifests {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: setup manifest {}: {e}", exp.name, path.display()))?;
        let objects =
            crate::experiment::manifest::parse_manifest(path, &text).map_err(|e| e.to_string())?;
        for obj in objects {
            let types = obj.types.clone().unwrap_or_default();
            let gvk = GroupVersionKind::try_from(&types).map_err(|e| e.to_string())?;
            let (resource, caps) =
                kube::discovery::pinned_kind(client, &gvk)
                    .await
                    .map_err(|e| {
                        format!(
                            "{}: the cluster does not serve {} {} ({}): {e}",
                            exp.name,
                            types.api_version,
                            types.kind,
                            path.display()
                        )
                    })?;
            let namespace = cluster::manifests::namespace_of(&obj, &caps.scope);
            let why = format!("setup of {} ({})", exp.name, path.display());
            // A cluster-scoped object is asked about by name (a chart may grant it by
            // `resourceNames`); one already there is applied as a `patch`, so `create`
            // is not needed for it (the chart creates the setup's namespaces).
            let name = namespace
                .is_none()
                .then(|| obj.metadata.name.clone())
                .flatten();
            let exists = match &name {
                Some(name) => {
                    kube::Api::<kube::api::DynamicObject>::all_with(client.clone(), &resource)
                        .get_opt(name)
                        .await
                        .ok()
                        .flatten()
                        .is_some()
                }
                None => false,
            };
            out.extend(
                super::access::setup_object(
                    exp,
                    &resource.group,
                    &resource.plural,
                    namespace,
                    name,
                    &why,
                )
                .into_iter()
                .filter(|a| !(exists && a.verb == "create")),
            );
        }
    }
    Ok(out)
}
