//! Everything checked and resolved before a run injects anything. Before setup: the kube
//! context against the allow-lists, the fault journal, the API connection. After setup
//! (targets like `runningPodsOf` need the workloads running): the targets, the blast
//! radius, and that every node a step acts on is in the inventory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use kube::Client;

use super::own_feet;
use super::safety::{self, SafetyError};
use crate::cluster::{self, ClusterError, ResolvedTargets, leases};
use crate::doctor;
use crate::execute::Executor;
use crate::experiment::model::Experiment;
use crate::experiment::{fault, roll};
use crate::inventory::Inventory;
use crate::journal::{Journal, JournalError};
use crate::observe::Scope;
use crate::record::ClusterInfo;
use crate::run::settings::RunSettings;
use std::time::Duration;

/// Why a run did not start. Nothing on the cluster was touched.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// Connecting or talking to the API failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// An interlock refused the plan.
    #[error(transparent)]
    Safety(#[from] SafetyError),
    /// The journal could not be read.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A crashed run left faults behind.
    #[error(
        "the fault journal {path} holds {count} unrestored fault(s) on cluster `{cluster}` ({faults}); \
         run `faultline restore` first, or pass --ignore-journal if they are known to be gone"
    )]
    JournalNotEmpty {
        /// Journal file.
        path: String,
        /// Cluster.
        cluster: String,
        /// How many.
        count: usize,
        /// Which, as `fault on node`.
        faults: String,
    },
    /// A pre-flight check (`faultline doctor`'s, for this run's steps and nodes) failed.
    #[error(
        "refused by the pre-flight checks (`faultline doctor -i INVENTORY EXPERIMENT` shows \
         them all): {0}"
    )]
    Preflight(String),
    /// A step would fault the node faultline runs on, or its only API server.
    #[error(transparent)]
    OwnFeet(#[from] super::own_feet::OwnFeetError),
    /// faultline runs in a pod (`POD_NAME`, `POD_NAMESPACE`) that could not be read, so
    /// the node it must spare is unknown.
    #[error(transparent)]
    OwnPod(super::own_feet::OwnPodError),
    /// A rolling step's order does not fit its target's nodes (a list naming another node,
    /// or leaving one out).
    #[error(transparent)]
    RollOrder(#[from] roll::OrderError),
    /// A step acts on a node the inventory does not describe.
    #[error(
        "step `{step}` acts on node `{node}` (target `{target}`), which is not in the inventory {inventory}; \
         add it under `nodes:`"
    )]
    NodeNotInInventory {
        /// Step.
        step: String,
        /// Target.
        target: String,
        /// Node.
        node: String,
        /// Inventory file.
        inventory: String,
    },
}

/// A run's resolved plan and its handles on the cluster.
pub(crate) struct Prepared {
    /// API client (over every API endpoint when there are several).
    pub client: Client,
    /// The failover handle when there are several API endpoints: the observer puts its
    /// switches on the timeline.
    pub failover: Option<cluster::Failover>,
    /// Node operations.
    pub executor: Executor,
    /// Target name → nodes; empty until [`resolve`] ran (after setup).
    pub targets: ResolvedTargets,
    /// Node name → its `InternalIP`, for probe URLs that go through a node; empty until
    /// [`resolve`] ran.
    pub internal_ips: BTreeMap<String, String>,
    /// Exec probe name → the pod it runs in (the workload's pod on the probe's node when
    /// targets were resolved); empty until [`resolve`] ran.
    pub exec_pods: BTreeMap<String, String>,
    /// Every node as the node failure model takes it (its zone, whether it is Ready), for
    /// the plan's predictions; empty until [`resolve`] ran.
    pub model_nodes: Vec<crate::failure_model::ModelNode>,
    /// Every control-plane node of the cluster, for the quorum rule of the run-time
    /// interlock (`crate::run::floor::interlock`); empty until [`resolve`] ran.
    pub control_plane: BTreeSet<String>,
    /// The cluster, as the record states it (the timers in force with their sources).
    pub cluster: ClusterInfo,
    /// Why timers the cluster did not show were not read from it.
    pub timer_misses: Vec<String>,
    /// What the observer watches.
    pub scope: Scope,
    /// The API server URL used first (the kubeconfig's, or the in-cluster one).
    pub api_url: String,
}

/// The name the allow-lists know a run inside the cluster by: no kubeconfig, the pod's own
/// ServiceAccount (`cluster.allowedContexts: [in-cluster]` allows it). An inventory written
/// outside the cluster lists the context it was written from, which a Job does not have.
pub(crate) const IN_CLUSTER_CONTEXT: &str = "in-cluster";

/// The kube context a run will use: the inventory's (or `--context`'s, once applied), or
/// the current one of the kubeconfig files in use, or [`IN_CLUSTER_CONTEXT`] when there is
/// none and faultline runs in a pod (the client then uses the in-cluster configuration).
pub(crate) fn effective_context(inventory: &Inventory) -> Option<String> {
    context_in_use(inventory, in_a_pod())
}

/// [`effective_context`], told whether faultline runs in a pod.
pub(crate) fn context_in_use(inventory: &Inventory, in_a_pod: bool) -> Option<String> {
    if let Some(c) = inventory.context() {
        return Some(c.to_string());
    }
    cluster::kubeconfig::read_merged(inventory.kubeconfig())
        .ok()
        .and_then(|k| k.current_context)
        .or_else(|| in_a_pod.then(|| IN_CLUSTER_CONTEXT.to_string()))
}

/// Whether the environment is a pod's, where the client falls back to the in-cluster
/// configuration: the API server's address in the environment and a ServiceAccount token.
fn in_a_pod() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        && Path::new("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
}

/// Runs the interlocks that need no workloads (context allow-list, journal) and connects;
/// touches nothing. Targets are resolved by [`resolve`] once setup has run.
pub(crate) async fn prepare(
    exp: &Experiment,
    settings: &RunSettings,
) -> Result<Prepared, RunError> {
    let inv = &settings.inventory;
    safety::check_transport(exp, inv)?;
    // Both lists must allow the context: the operator's (--allow-context) and the
    // inventory's (allowedContexts); an empty list allows any.
    let context = effective_context(inv);
    let in_use = context.as_deref().unwrap_or("(none)");
    safety::check_context(
        in_use,
        &settings.allowed_contexts,
        safety::AllowList::CommandLine,
    )?;
    safety::check_context(
        in_use,
        &inv.cluster().allowed_contexts,
        safety::AllowList::Inventory,
    )?;

    let journal = Journal::open(&settings.journal_path)?;
    let left = journal.active(&inv.cluster().name);
    if !left.is_empty() && !settings.ignore_journal {
        return Err(RunError::JournalNotEmpty {
            path: settings.journal_path.display().to_string(),
            cluster: inv.cluster().name.clone(),
            count: left.len(),
            faults: left
                .iter()
                .map(|e| format!("{} on {}", e.fault, e.node))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }

    let connection = cluster::connect_with_failover(
        inv.kubeconfig(),
        inv.context(),
        &inv.cluster().api_endpoints(),
    )
    .await?;
    let client = connection.client;
    let server_version = cluster::cluster_version(&client).await.ok();
    let executor = Executor::new(inv.clone()).with_client(client.clone());
    // Only an API that answered is asked for the timers: one that does not would hold
    // every request for its connect timeout.
    let timers = doctor::timers_in_force::resolve(
        server_version.as_ref().map(|_| &client),
        server_version.as_deref(),
        inv,
        &executor,
    )
    .await;
    let node_lease_seconds = match server_version {
        Some(_) => cluster::node_lease_seconds(&client).await,
        None => None,
    };
    Ok(Prepared {
        executor,
        cluster: ClusterInfo {
            name: inv.cluster().name.clone(),
            context,
            server_version,
            timers: timers.in_force.timers,
            timer_sources: timers.in_force.sources.clone(),
            capabilities: inv.cluster().capabilities(),
            node_lease_seconds,
        },
        timer_misses: timers.misses,
        scope: scope_of(exp),
        targets: ResolvedTargets::new(),
        internal_ips: BTreeMap::new(),
        exec_pods: BTreeMap::new(),
        model_nodes: Vec::new(),
        control_plane: BTreeSet::new(),
        client,
        failover: connection.failover,
        api_url: connection.primary_url,
    })
}

/// Resolves the targets (after setup, since `runningPodsOf` needs the workloads running)
/// and runs the interlocks that depend on them: the blast radius, and that every node a
/// step acts on is in the inventory. Still no fault has been injected.
///
/// Returns the experiment as it runs: each rolling step expanded into one step per node of
/// its target, in the roll's order (`experiment::roll`); the checks here are on it.
pub(crate) async fn resolve(
    exp: &Experiment,
    prepared: &mut Prepared,
    inv: &Inventory,
) -> Result<Experiment, RunError> {
    let mut targets = cluster::resolve_targets(&prepared.client, &exp.targets).await?;
    let nodes = cluster::targets::list_nodes_lean(&prepared.client).await?;
    let zones: BTreeMap<String, String> = nodes
        .iter()
        .filter_map(|n| {
            Some((
                n.metadata.name.clone()?,
                crate::observe::reduce::zone_key(n)?,
            ))
        })
        .collect();
    let zone_of = |n: &str| zones.get(n).cloned();
    let control_plane: BTreeSet<String> = nodes
        .iter()
        .filter(|n| cluster::targets::is_control_plane(n))
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let is_control_plane = |n: &str| control_plane.contains(n);
    let facts = roll::NodeFacts {
        zone_of: &zone_of,
        is_control_plane: &is_control_plane,
    };
    roll::order_nodes(exp, &mut targets, &facts)?;
    let (expanded, targets) = roll::expand_in_zones(exp, &targets, Some(&zone_of));
    let exp = &expanded;
    safety::check_blast_radius(exp, &targets, &control_plane, &prepared.cluster.timers)?;
    prepared.control_plane = control_plane.clone();
    check_acted_on_nodes_healthy(exp, &targets, &nodes)?;
    let feet = own_feet::OwnFeet {
        own_pod: own_feet::own_pod(&prepared.client)
            .await
            .map_err(RunError::OwnPod)?,
        api_server_node: own_feet::api_server_node(
            &prepared.api_url,
            prepared.failover.is_some(),
            &nodes,
            &own_feet::apiserver_pod_nodes(&prepared.client).await,
        ),
    };
    own_feet::check(exp, &targets, &feet, &prepared.api_url)?;
    check_inventory_covers(exp, &targets, inv)?;
    prepared.exec_pods = exec_pods(exp, &targets, &prepared.client).await?;
    prepared.targets = targets;
    prepared.internal_ips = cluster::targets::internal_ips(&nodes);
    prepared.model_nodes = nodes.iter().map(model_node).collect();
    Ok(expanded)
}

/// A node as the node failure model takes it: its zone as the node lifecycle controller
/// groups nodes, and whether it is Ready and untainted (a node the controller already
/// counts as down is not Ready to it either).
fn model_node(node: &Node) -> crate::failure_model::ModelNode {
    crate::failure_model::ModelNode {
        name: node.metadata.name.clone().unwrap_or_default(),
        zone: crate::observe::reduce::zone_key(node).unwrap_or_default(),
        ready: cluster::targets::health_problem(node).is_none(),
    }
}

/// The pod each exec or logs probe works in: its workload's first pod on its target's node. Chosen
/// once, so a pod that keeps its name through the fault (a kubelet stop, a reboot) is the
/// one probed before, during and after.
async fn exec_pods(
    exp: &Experiment,
    targets: &ResolvedTargets,
    client: &Client,
) -> Result<BTreeMap<String, String>, RunError> {
    let mut chosen = BTreeMap::new();
    for probe in &exp.probes {
        let Some((workload, on)) = probe.kind.pod() else {
            continue;
        };
        // Validation made `on` a one-node target, and resolution gave it its node.
        let node = targets
            .get(on)
            .and_then(|nodes| nodes.first())
            .cloned()
            .unwrap_or_default();
        let pod = cluster::targets::pod_on(client, workload, &node)
            .await?
            .ok_or_else(|| ClusterError::NoPodForProbe {
                probe: probe.name.clone(),
                workload: workload.to_string(),
                target: on.to_string(),
                node: node.clone(),
            })?;
        chosen.insert(probe.name.clone(), pod);
    }
    Ok(chosen)
}

/// Every node a step acts on must be healthy before the first fault: a node still down
/// from an earlier run (seen in CI: Ready Unknown a few seconds after its kubelet came
/// back) would fail the experiment for the wrong reason, and the restored check would
/// take its broken state as the one to return to.
fn check_acted_on_nodes_healthy(
    exp: &Experiment,
    targets: &ResolvedTargets,
    nodes: &[Node],
) -> Result<(), ClusterError> {
    for step in &exp.steps {
        let Some(target) = step.target.as_ref() else {
            continue;
        };
        for name in targets.get(target).into_iter().flatten() {
            let node = nodes
                .iter()
                .find(|n| n.metadata.name.as_ref() == Some(name));
            let problem = match node {
                Some(n) => cluster::targets::health_problem(n),
                None => Some("not in the cluster's node list".to_string()),
            };
            if let Some(problem) = problem {
                return Err(ClusterError::TargetNotHealthy {
                    step: step.name.clone(),
                    target: target.clone(),
                    node: name.clone(),
                    problem,
                });
            }
        }
    }
    Ok(())
}

/// Every node a step silences must be heard from before the first fault: its Lease renewed
/// while faultline waits (a quarter of the Lease duration for a healthy kubelet; a whole
/// duration is allowed). A Ready condition alone can be a leftover of a kubelet that was
/// just stopped or restarted (see `cluster::leases`), and the restored check would take it
/// as the state to return to.
/// A run's own check (not `plan`'s: it waits), beside the pre-flight checks of the nodes.
pub(crate) async fn check_acted_on_nodes_heard(
    exp: &Experiment,
    prepared: &Prepared,
) -> Result<(), RunError> {
    let targets = &prepared.targets;
    let nodes = acted_on_in_band(exp, targets);
    if nodes.is_empty() {
        return Ok(());
    }
    let lease = Duration::from_secs(prepared.cluster.node_lease_seconds.unwrap_or(40));
    let silent = leases::wait_heard(&prepared.client, &nodes, lease).await;
    let Some((node, why)) = silent.into_iter().next() else {
        return Ok(());
    };
    let (step, target) = exp
        .steps
        .iter()
        .find_map(|s| {
            let target = s.target.as_ref()?;
            targets
                .get(target)
                .is_some_and(|ns| ns.contains(&node))
                .then(|| (s.name.clone(), target.clone()))
        })
        .unwrap_or_default();
    Err(RunError::Cluster(ClusterError::TargetNotHealthy {
        step,
        target,
        node,
        problem: format!(
            "its kubelet renewed no heartbeat in {}s ({why}): its Ready condition is a \
             leftover, not a running kubelet",
            lease.as_secs()
        ),
    }))
}
/// The nodes steps act on in band or through their power (a kubelet stopped, a partition, a
/// reboot, a power-off, a step's own command), each of which silences the node's heartbeat.
pub(crate) fn acted_on_in_band(exp: &Experiment, targets: &ResolvedTargets) -> BTreeSet<String> {
    exp.steps
        .iter()
        .filter(|s| fault::info(&s.action).via.needs_node_access())
        .flat_map(|s| s.nodes(targets).iter().cloned())
        .collect()
}

/// Every node a node-level step acts on must be reachable through the inventory.
fn check_inventory_covers(
    exp: &Experiment,
    targets: &ResolvedTargets,
    inv: &Inventory,
) -> Result<(), RunError> {
    for step in &exp.steps {
        let needs_node_access = fault::info(&step.action).via.needs_node_access();
        let Some(target) = step.target.as_ref().filter(|_| needs_node_access) else {
            continue;
        };
        for node in targets.get(target).into_iter().flatten() {
            if inv.node(node).is_none() {
                return Err(RunError::NodeNotInInventory {
                    step: step.name.clone(),
                    target: target.clone(),
                    node: node.clone(),
                    inventory: inv.path().display().to_string(),
                });
            }
        }
    }
    Ok(())
}

/// What the observer must watch for this experiment.
pub(crate) fn scope_of(exp: &Experiment) -> Scope {
    Scope::of(exp)
}

/// Before setup: the API allows everything the experiment does (the observer, its API
/// steps, its setup manifests). Warnings are returned for the timeline; a failure refuses.
pub(crate) async fn preflight_cluster(
    exp: &Experiment,
    prepared: &Prepared,
) -> Result<Vec<String>, RunError> {
    let answers = doctor::check_access(&prepared.client, std::slice::from_ref(exp)).await;
    with_rules(verdict(&answers.findings), &answers.missing)
}

/// After the targets are resolved, before the first fault: the API allows what each step
/// does to each node its target resolved to, asked node by node, so an actor granted
/// `patch nodes` on some nodes alone (`faultline rbac --nodes`) is refused here, naming the
/// node, rather than at the step.
pub(crate) async fn preflight_node_grants(
    exp: &Experiment,
    prepared: &Prepared,
) -> Result<Vec<String>, RunError> {
    let answers = doctor::check_on_nodes(&prepared.client, exp, &prepared.targets).await;
    with_rules(verdict(&answers.findings), &answers.missing)
}

/// A refusal for missing permissions, followed by the rules that grant them.
fn with_rules(
    verdict: Result<Vec<String>, RunError>,
    missing: &[crate::doctor::access::Access],
) -> Result<Vec<String>, RunError> {
    verdict.map_err(|refused| match refused {
        RunError::Preflight(why) if !missing.is_empty() => RunError::Preflight(format!(
            "{why}\nRBAC rules that grant the missing permissions (`faultline rbac` prints them all):\n{}",
            crate::rbac::paste_ready(missing)
        )),
        other => other,
    })
}

/// After the targets are resolved, before the first fault: every node a step acts on is
/// reachable as configured and has what the steps run there.
pub(crate) async fn preflight_nodes(
    exp: &Experiment,
    prepared: &Prepared,
) -> Result<Vec<String>, RunError> {
    let findings = doctor::preflight_nodes(&prepared.executor, exp, &prepared.targets).await;
    verdict(&findings)
}

/// Failures refuse the run, quoted as `doctor` prints them; warnings are passed on.
fn verdict(findings: &[doctor::Finding]) -> Result<Vec<String>, RunError> {
    let failed = doctor::failures(findings);
    if !failed.is_empty() {
        return Err(RunError::Preflight(
            failed
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    Ok(findings
        .iter()
        .filter(|f| f.status == doctor::Status::Warn)
        .map(|f| format!("pre-flight: {f}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::load;

    #[test]
    fn a_step_on_a_node_that_is_already_down_is_refused_naming_it_and_why() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/experiments/lab/wrong-expectation.yaml");
        let exp = crate::experiment::load(&path).unwrap_or_else(|d| panic!("{d:?}"));
        let healthy: Node = load("node-ready.json");
        let down: Node = load("node-unreachable.json");
        let on = |node: &str| ResolvedTargets::from([("victim".to_string(), vec![node.into()])]);
        let nodes = [healthy, down];
        assert!(check_acted_on_nodes_healthy(&exp, &on("lab-worker-1"), &nodes).is_ok());
        let err = check_acted_on_nodes_healthy(&exp, &on("lab-worker-2"), &nodes)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with(
                "step `stop kubelet` acts on node lab-worker-2 (target `victim`), which is not \
                 healthy before any fault: Ready Unknown, tainted node.kubernetes.io/unreachable"
            ),
            "{err}"
        );
        let err = check_acted_on_nodes_healthy(&exp, &on("lab-worker-7"), &nodes)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("not in the cluster's node list"), "{err}");
    }
}
