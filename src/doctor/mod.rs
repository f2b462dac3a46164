//! `faultline doctor`: every check a run relies on, made before anything is broken, so the
//! first run against a real cluster does not fail (or break a node) for reasons that have
//! nothing to do with the cluster's resilience.
//!
//! Each check is a [`Finding`]: which node (or the cluster), which [`CheckKind`], a
//! [`Status`] and what was seen. The checks go through the real code paths a run uses: the
//! executor's transport for each node (so SSH connection, host key, authentication and
//! `sudo -n` are exactly a run's), the executor's arm and disarm of a self-restore, the
//! power driver's argv, the API client, and `SelfSubjectAccessReview` for each permission
//! the experiments need. `run` makes the subset that concerns its own steps and targets
//! ([`preflight_cluster`], [`preflight_nodes`]) and refuses with the same messages.
//!
//! [`report`] renders findings as a table or JSON; `cli/doctor.rs` is the command.

pub(crate) mod access;
mod clock;
mod cluster;
mod namespace_trust;
pub(crate) mod needs;
mod node;
pub(crate) mod node_grants;
mod pod_access;
mod power;
mod programs;
pub mod report;
mod restore;
mod review;
pub mod timers_in_force;
mod transport;
mod unit;

use std::fmt;

use futures::future::join_all;
use serde::Serialize;

#[cfg(test)]
pub(crate) use cluster::{AccessAnswers, judge_access};
pub use cluster::{ClusterView, preflight_cluster, read_cluster};
pub(crate) use cluster::{check_access, check_on_nodes};
pub use needs::Needs;
pub use node::{Depth, check_node, preflight_nodes};

use crate::execute::Executor;
use crate::experiment::model::Experiment;
use crate::inventory::Inventory;

/// How long one check's command may take on a node.
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// It holds.
    Pass,
    /// Nothing a run needs is missing, but something is worth knowing (an assumed timer,
    /// a slightly skewed clock, a driver that cannot be checked without acting).
    Warn,
    /// A run relying on it would fail or do harm: `doctor` exits 1, `run` refuses.
    Fail,
    /// Not checked: not needed by these experiments, or an earlier check failed.
    Skip,
}

impl Status {
    /// As the table prints it.
    pub fn word(self) -> &'static str {
        match self {
            Status::Pass => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        }
    }
}

/// What is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    /// The API server answers through the inventory's kubeconfig and context.
    Api,
    /// The permissions the experiments use are granted (SelfSubjectAccessReview).
    Rbac,
    /// A node-lifecycle timer: where it comes from, and whether the inventory agrees.
    Timer,
    /// The node answers over its transport (TCP + SSH handshake, or the exec argv runs).
    Reachable,
    /// The node's SSH host key is the one in known_hosts.
    HostKey,
    /// SSH authentication works.
    Auth,
    /// `sudo -n` works where the inventory asks for it.
    Sudo,
    /// The unit that runs the kubelet exists under the profile's name, and its `Restart=`
    /// would not undo a stop.
    KubeletUnit,
    /// Every program the experiments' commands start exists on the node.
    Commands,
    /// The out-of-band power driver answers.
    Power,
    /// A self-restore can be armed on the node and disarmed again.
    SelfRestore,
    /// The node's clock against the runner's.
    Clock,
    /// The API transport's pod is admitted and may be created and exec'd into.
    PodAccess,
    /// Inside the cluster: who else may change what the Job runs.
    Trust,
}

impl CheckKind {
    /// As the table prints it.
    pub fn title(self) -> &'static str {
        match self {
            CheckKind::Api => "api",
            CheckKind::Rbac => "rbac",
            CheckKind::Timer => "timer",
            CheckKind::Reachable => "reachable",
            CheckKind::HostKey => "host key",
            CheckKind::Auth => "auth",
            CheckKind::Sudo => "sudo",
            CheckKind::KubeletUnit => "kubelet unit",
            CheckKind::Commands => "commands",
            CheckKind::Power => "power",
            CheckKind::SelfRestore => "self-restore",
            CheckKind::Clock => "clock",
            CheckKind::PodAccess => "pod access",
            CheckKind::Trust => "trust",
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The node it is about; `None` for the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// What was checked.
    pub check: CheckKind,
    /// How it came out.
    pub status: Status,
    /// What was seen, and for a failure what to do about it.
    pub detail: String,
}

impl Finding {
    /// A finding about the cluster.
    pub fn cluster(check: CheckKind, status: Status, detail: impl Into<String>) -> Finding {
        Finding {
            node: None,
            check,
            status,
            detail: detail.into(),
        }
    }

    /// A finding about one node.
    pub fn node(
        node: &str,
        check: CheckKind,
        status: Status,
        detail: impl Into<String>,
    ) -> Finding {
        Finding {
            node: Some(node.to_string()),
            check,
            status,
            detail: detail.into(),
        }
    }

    /// Where it applies: the node's name or `cluster`.
    pub fn place(&self) -> &str {
        self.node.as_deref().unwrap_or("cluster")
    }
}

impl fmt::Display for Finding {
    /// `lab-worker-1 host key: HOST KEY MISMATCH …`: how `run` quotes a failure.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.place(),
            self.check.title(),
            self.detail
        )
    }
}

/// The failures among `findings`, one per line as `run` and `doctor` both print them.
pub fn failures(findings: &[Finding]) -> Vec<&Finding> {
    findings
        .iter()
        .filter(|f| f.status == Status::Fail)
        .collect()
}

/// Everything `doctor` found: the cluster's checks first, then each node's in inventory
/// order, and the timers in force.
#[derive(Debug, Clone)]
pub struct Examination {
    /// The inventory file examined.
    pub inventory: std::path::PathBuf,
    /// The cluster's name in the inventory.
    pub cluster: String,
    /// The API server's version, when it answered.
    pub version: Option<String>,
    /// Every check's outcome.
    pub findings: Vec<Finding>,
    /// The timers a run would use and where each comes from.
    pub timers: timers_in_force::Resolved,
    /// The required permissions the API server refused (empty: nothing is missing, or
    /// the API was not asked). `crate::rbac::paste_ready` writes them as rules ready to
    /// paste, which `faultline doctor` prints with the report.
    pub(crate) missing: Vec<access::Access>,
}

impl Examination {
    /// Whether any check failed (`doctor` then exits 1).
    pub fn failed(&self) -> bool {
        self.findings.iter().any(|f| f.status == Status::Fail)
    }
}

/// The release's own ServiceAccounts, as the chart names them to its Job
/// (`FAULTLINE_OWN_ACCOUNTS`, comma-separated): not counted among those who may change
/// what the Job runs.
fn own_accounts() -> Vec<String> {
    std::env::var("FAULTLINE_OWN_ACCOUNTS")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Every check, for the cluster and every node of the inventory, for what `experiments`
/// would do (every configured command when there are none). Nodes are checked in parallel.
pub async fn examine(inventory: &Inventory, experiments: &[Experiment]) -> Examination {
    let executor = Executor::new(inventory.clone());
    let view = read_cluster(inventory).await;
    let mut findings = vec![view.finding.clone()];
    let mut missing = Vec::new();
    let client = view.connection.as_ref().map(|c| c.client.clone());
    match &client {
        Some(client) => {
            let answers = check_access(client, experiments).await;
            findings.extend(answers.findings);
            missing = answers.missing;
            findings.extend(pod_access::findings(client, inventory).await);
            // From the chart's Job: who else may change what it runs.
            if let Ok(ns) = std::env::var("POD_NAMESPACE")
                && !ns.is_empty()
            {
                let own = own_accounts();
                findings.push(namespace_trust::finding(client, &ns, &own).await);
            }
        }
        None => findings.push(Finding::cluster(
            CheckKind::Rbac,
            Status::Skip,
            "not checked: the API does not answer",
        )),
    }
    let needs = Needs::of(experiments);
    let (resolved, nodes) = futures::join!(
        timers_in_force::resolve(
            client.as_ref(),
            view.version.as_deref(),
            inventory,
            &executor
        ),
        join_all(inventory.nodes().iter().map(|node| check_node(
            &executor,
            node,
            &needs,
            Depth::Full
        )),)
    );
    findings.extend(timers_in_force::findings(&resolved));
    findings.extend(nodes.into_iter().flatten());
    Examination {
        inventory: inventory.path().to_path_buf(),
        cluster: inventory.cluster().name.clone(),
        version: view.version,
        findings,
        timers: resolved,
        missing,
    }
}
