//! The node side of `doctor`: each check goes through the executor, so it meets exactly
//! what a run meets (the transport with its host-key check, authentication and `sudo -n`,
//! the self-restore's own arm and disarm, the power driver's argv).

use std::collections::BTreeMap;

use futures::future::join_all;

use super::needs::Needs;
use super::programs::{commands_finding, first_program, program_script};
use super::{CHECK_TIMEOUT, CheckKind, Finding, Status, clock, power, restore, transport, unit};
use crate::execute::{ExecError, Executor, NodeOp};
use crate::experiment::model::Experiment;
use crate::inventory::NodeAccess;

/// How much `check_node` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Everything `doctor` checks: also arming and disarming a self-restore and the clock.
    Full,
    /// What `run` checks before its first fault: the transport, the commands its steps
    /// run, the kubelet unit when it stops the kubelet, the power driver.
    Preflight,
}

/// Every check of one node for what `needs` says it will be asked to do.
pub async fn check_node(
    executor: &Executor,
    node: &NodeAccess,
    needs: &Needs,
    depth: Depth,
) -> Vec<Finding> {
    let name = node.name.as_str();
    let mut findings = Vec::new();
    let mut programs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut ops = needs.ops.clone();
    for key in &needs.power {
        match node.power.get(key.key()) {
            Some(_) => {}
            None => match key.in_band() {
                Some(op) => {
                    if !ops.contains(&op) {
                        ops.push(op)
                    }
                }
                None => findings.push(Finding::node(
                    name,
                    CheckKind::Power,
                    Status::Fail,
                    "the experiments power this node off, but no power.on is configured: SSH \
                     can turn a node off, never on (configure a BMC/IPMI, Redfish, hypervisor \
                     or cloud CLI argv)",
                )),
            },
        }
    }
    let mut not_configured = Vec::new();
    for op in &ops {
        match executor.command_of(name, op) {
            Ok(text) => {
                if let Some(program) = first_program(&text) {
                    programs.entry(program).or_default().push(format!(
                        "{} `{}`",
                        op.source(),
                        text
                    ));
                }
            }
            Err(ExecError::NotConfigured { what, .. }) => {
                if !needs.everything {
                    not_configured.push(what);
                }
            }
            Err(e) => findings.push(Finding::node(
                name,
                CheckKind::Commands,
                Status::Fail,
                e.to_string(),
            )),
        }
    }
    if needs.self_restore {
        let arm = node
            .arm_restore
            .as_deref()
            .and_then(first_program)
            .map(|p| (p, "armRestore".to_string()));
        match arm {
            Some((program, why)) => programs.entry(program).or_default().push(why),
            None => {
                for p in ["setsid", "nohup"] {
                    programs
                        .entry(p.into())
                        .or_default()
                        .push("the self-restore (setsid nohup sh -c 'sleep N; undo')".into());
                }
            }
        }
    }

    // One command over the node's transport: it proves the connection, the host key, the
    // authentication and sudo, and says which programs are missing.
    let script = program_script(programs.keys());
    let reached = executor
        .perform(name, &NodeOp::Run(script), CHECK_TIMEOUT)
        .await;
    let (blocked, transport) = transport::findings(node, &reached);
    findings.extend(transport);
    if let Some(why) = blocked {
        let unchecked: Vec<CheckKind> = [CheckKind::KubeletUnit, CheckKind::Commands]
            .into_iter()
            .chain((depth == Depth::Full).then_some(CheckKind::SelfRestore))
            .chain((depth == Depth::Full).then_some(CheckKind::Clock))
            .filter(|check| !findings.iter().any(|f| f.check == *check))
            .collect();
        for check in unchecked {
            findings.push(Finding::node(
                name,
                check,
                Status::Skip,
                format!("not checked: {why}"),
            ));
        }
        findings.extend(power::finding(executor, node, needs).await);
        return findings;
    }
    let output = reached.map(|o| o.output).unwrap_or_default();
    findings.push(commands_finding(name, &output, &programs, &not_configured));

    if needs.touches_kubelet() || needs.everything {
        findings.push(unit::finding(executor, node).await);
    }
    findings.extend(power::finding(executor, node, needs).await);
    if depth == Depth::Full {
        if needs.self_restore {
            findings.push(restore::finding(executor, node).await);
        }
        findings.push(clock::finding(executor, name).await);
    }
    findings
}

/// The checks `run` makes on the nodes its steps act on, all nodes at once.
pub async fn preflight_nodes(
    executor: &Executor,
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
) -> Vec<Finding> {
    let nodes: Vec<NodeAccess> = executor
        .inventory()
        .nodes()
        .iter()
        .filter(|n| targets.values().flatten().any(|t| *t == n.name))
        .cloned()
        .collect();
    let checks = nodes.iter().filter_map(|node| {
        let needs = Needs::on_node(exp, targets, &node.name);
        (!needs.is_empty())
            .then_some(async move { check_node(executor, node, &needs, Depth::Preflight).await })
    });
    join_all(checks).await.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::inventory::Inventory;

    /// An address that accepts TCP but where no SSH server ever speaks: doctor says the
    /// node does not answer SSH, and not its own probe script.
    #[tokio::test]
    async fn a_port_that_accepts_tcp_but_never_speaks_ssh_is_named_as_such() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let silent = std::thread::spawn(move || {
            let held: Vec<_> = listener.incoming().take(2).flatten().collect();
            std::thread::sleep(std::time::Duration::from_secs(30));
            drop(held);
        });
        let text = format!(
            "cluster: {{name: c}}\nnodes: [{{name: n1, address: 127.0.0.1, \
             ssh: {{port: {port}, user: root, connectTimeout: 2s}}}}]\n"
        );
        let inventory = Inventory::parse(&text, Path::new("t.yaml")).expect("inventory");
        let executor = Executor::new(inventory);
        let node = executor.inventory().nodes()[0].clone();
        let findings = check_node(&executor, &node, &Needs::everything(), Depth::Preflight).await;
        let reachable = findings
            .iter()
            .find(|f| f.check == CheckKind::Reachable)
            .expect("a reachable finding");
        assert_eq!(reachable.status, Status::Fail, "{findings:#?}");
        assert!(
            reachable.detail.contains("no SSH answer within"),
            "{}",
            reachable.detail
        );
        assert!(
            !reachable.detail.contains("command -v"),
            "no probe script: {}",
            reachable.detail
        );
        drop(silent);
    }

    /// A node whose shell finds no `timeout` (the exec transport with an empty PATH):
    /// doctor says that, not that the node cannot be reached or that sudo fails.
    #[tokio::test]
    async fn a_node_without_timeout_is_named_as_such() {
        let text = "cluster: {name: c}\ntransport: exec\n\
                    exec: [env, PATH=/nonexistent, /bin/sh, -c, \"{command}\"]\n\
                    nodes: [{name: n1}]\n";
        let inventory = Inventory::parse(text, Path::new("t.yaml")).expect("inventory");
        let executor = Executor::new(inventory);
        let node = executor.inventory().nodes()[0].clone();
        let findings = check_node(&executor, &node, &Needs::everything(), Depth::Preflight).await;
        let of = |check| {
            findings
                .iter()
                .filter(|f| f.check == check)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            of(CheckKind::Reachable)[0].status,
            Status::Pass,
            "{findings:#?}"
        );
        let commands = of(CheckKind::Commands);
        assert_eq!(commands.len(), 1, "{findings:#?}");
        assert_eq!(commands[0].status, Status::Fail);
        assert!(
            commands[0]
                .detail
                .contains("`timeout` is not found on the node"),
            "{}",
            commands[0].detail
        );
    }
}
