//! `doctor`'s node checks against a REAL sshd started on 127.0.0.1 for each test: a wrong
//! host key, a wrong client key, a sudo that wants a password, a missing program, a unit
//! that does not exist, a closed port. Each must be named, on its node, by its check.
//!
//! The sshd (tests/sshd_support) sets `PATH` for its sessions to a directory of this test
//! first, where a `sudo` stands for a node whose sudo asks for a password (the machine
//! running the tests may have no sudo, or a sudo that lets root through). sshd missing is a
//! failure under `CI=true`, a printed skip otherwise.

use std::fs;
use std::net::TcpListener;
use std::path::Path;

use crate::sshd_support::*;

use faultline::doctor::{CheckKind, Depth, Finding, Needs, Status, check_node};
use faultline::execute::Executor;
use faultline::inventory::Inventory;

/// An sshd whose sessions find a `sudo` that wants a password first on their `PATH`.
fn start_sshd() -> Option<Sshd> {
    start_sshd_with(Options {
        sudo_wants_password: true,
        ..Options::default()
    })
}

/// How the test node is reached.
struct Reach<'a> {
    port: u16,
    key: &'a str,
    known_hosts: &'a str,
    sudo: bool,
}

impl Reach<'_> {
    fn good(sshd: &Sshd) -> Reach<'static> {
        Reach {
            port: sshd.port,
            key: "client_key",
            known_hosts: "known_hosts",
            sudo: false,
        }
    }
}

/// The node `local` behind this sshd with these `commands` (YAML lines).
fn inventory(sshd: &Sshd, reach: Reach<'_>, commands: &str) -> Inventory {
    let d = sshd.dir.path().display();
    let text = format!(
        "cluster: {{name: doctor-test}}\nssh:\n  user: {user}\n  port: {port}\n  \
         identityFile: {d}/{key}\n  knownHosts: {d}/{known}\n  connectTimeout: 2s\n  \
         sudo: {sudo}\ncommands:\n{commands}\nnodes:\n  - name: local\n    address: 127.0.0.1\n",
        user = user(),
        port = reach.port,
        key = reach.key,
        known = reach.known_hosts,
        sudo = reach.sudo,
    );
    Inventory::parse(&text, Path::new("doctor-test.yaml")).unwrap_or_else(|e| panic!("{e}"))
}

/// Every check of node `local`, for every configured command.
async fn examine(inv: Inventory) -> Vec<Finding> {
    let executor = Executor::new(inv.clone());
    let node = inv.node("local").expect("the node");
    let findings = check_node(&executor, &node, &Needs::everything(), Depth::Full).await;
    for f in &findings {
        println!(
            "{:<5} {:<12} {}",
            f.status.word(),
            f.check.title(),
            f.detail
        );
    }
    findings
}

fn get(findings: &[Finding], check: CheckKind) -> &Finding {
    findings
        .iter()
        .find(|f| f.check == check)
        .unwrap_or_else(|| panic!("no {check:?} finding in {findings:#?}"))
}

const UNIT_OK: &str = "  kubeletUnit: printf 'Id=kubelet.service\\nLoadState=loaded\\nActiveState=active\\nRestart=always\\n'\n";

#[tokio::test]
async fn a_healthy_node_passes_every_check() {
    let Some(sshd) = start_sshd() else { return };
    let inv = inventory(
        &sshd,
        Reach::good(&sshd),
        &format!("  kubeletStop: systemctl stop kubelet\n  kubeletStart: true\n{UNIT_OK}"),
    );
    let findings = examine(inv).await;
    for f in &findings {
        assert!(
            matches!(f.status, Status::Pass | Status::Skip),
            "{f} ({:?})",
            f.status
        );
    }
    assert_eq!(get(&findings, CheckKind::Reachable).status, Status::Pass);
    assert_eq!(get(&findings, CheckKind::HostKey).status, Status::Pass);
    assert_eq!(get(&findings, CheckKind::Auth).status, Status::Pass);
    let restore = get(&findings, CheckKind::SelfRestore);
    assert_eq!(restore.status, Status::Pass, "{restore}");
    assert!(restore.detail.contains("armed (pid"), "{restore}");
    let unit = get(&findings, CheckKind::KubeletUnit);
    assert!(
        unit.detail.contains("not applied to a `systemctl stop`"),
        "{unit}"
    );
    assert_eq!(get(&findings, CheckKind::Clock).status, Status::Pass);
    // The armed `sleep 600; true` is really gone (by its pid: other tests arm their own).
    let pid: u32 = restore
        .detail
        .trim_start_matches("armed (pid ")
        .split(')')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the pid in the detail");
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains("faultline-restore-doctor"),
        "pid {pid} still runs the restore"
    );
}

#[tokio::test]
async fn a_wrong_host_key_is_named_and_nothing_is_sent() {
    let Some(sshd) = start_sshd() else { return };
    let reach = Reach {
        known_hosts: "known_hosts_wrong",
        ..Reach::good(&sshd)
    };
    let inv = inventory(&sshd, reach, UNIT_OK);
    let findings = examine(inv).await;
    let key = get(&findings, CheckKind::HostKey);
    assert_eq!(key.status, Status::Fail, "{key}");
    assert!(key.detail.contains("HOST KEY MISMATCH"), "{key}");
    assert_eq!(key.node.as_deref(), Some("local"));
    assert_eq!(get(&findings, CheckKind::Reachable).status, Status::Pass);
    assert_eq!(get(&findings, CheckKind::Auth).status, Status::Skip);
    assert_eq!(get(&findings, CheckKind::Commands).status, Status::Skip);
}

#[tokio::test]
async fn a_key_the_node_does_not_accept_fails_authentication() {
    let Some(sshd) = start_sshd() else { return };
    let reach = Reach {
        key: "other_host_key",
        ..Reach::good(&sshd)
    };
    let inv = inventory(&sshd, reach, UNIT_OK);
    let findings = examine(inv).await;
    let auth = get(&findings, CheckKind::Auth);
    assert_eq!(auth.status, Status::Fail, "{auth}");
    assert!(auth.detail.contains("authentication as"), "{auth}");
    assert_eq!(get(&findings, CheckKind::HostKey).status, Status::Pass);
}

#[tokio::test]
async fn sudo_that_wants_a_password_is_named() {
    let Some(sshd) = start_sshd() else { return };
    let reach = Reach {
        sudo: true,
        ..Reach::good(&sshd)
    };
    let inv = inventory(&sshd, reach, UNIT_OK);
    let findings = examine(inv).await;
    let sudo = get(&findings, CheckKind::Sudo);
    assert_eq!(sudo.status, Status::Fail, "{sudo}");
    assert!(sudo.detail.contains("requires a password"), "{sudo}");
    assert!(sudo.detail.contains("NOPASSWD"), "{sudo}");
    assert_eq!(get(&findings, CheckKind::Auth).status, Status::Pass);
}

#[tokio::test]
async fn a_missing_program_and_a_missing_unit_are_named_with_their_commands() {
    let Some(sshd) = start_sshd() else { return };
    let inv = inventory(
        &sshd,
        Reach::good(&sshd),
        "  kubeletStop: no-such-kubelet-ctl stop\n  partition: while iptables-nowhere -D X; do :; done\n  kubeletUnit: printf 'Id=rke2-agent.service\\nLoadState=not-found\\nActiveState=inactive\\nRestart=no\\n'\n",
    );
    let findings = examine(inv).await;
    let commands = get(&findings, CheckKind::Commands);
    assert_eq!(commands.status, Status::Fail, "{commands}");
    assert!(
        commands.detail.contains(
            "`no-such-kubelet-ctl` is not found on the node (used by commands.kubeletStop"
        ),
        "{commands}"
    );
    assert!(commands.detail.contains("`iptables-nowhere`"), "{commands}");
    let unit = get(&findings, CheckKind::KubeletUnit);
    assert_eq!(unit.status, Status::Fail, "{unit}");
    assert!(
        unit.detail.contains("rke2-agent.service is not-found"),
        "{unit}"
    );
}

#[tokio::test]
async fn a_closed_port_is_unreachable_and_the_rest_is_not_checked() {
    let Some(sshd) = start_sshd() else { return };
    let closed = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let reach = Reach {
        port: closed,
        ..Reach::good(&sshd)
    };
    let inv = inventory(&sshd, reach, UNIT_OK);
    let findings = examine(inv).await;
    let reach = get(&findings, CheckKind::Reachable);
    assert_eq!(reach.status, Status::Fail, "{reach}");
    assert!(reach.detail.contains("cannot connect"), "{reach}");
    for check in [
        CheckKind::HostKey,
        CheckKind::Auth,
        CheckKind::SelfRestore,
        CheckKind::Clock,
    ] {
        assert_eq!(get(&findings, check).status, Status::Skip, "{check:?}");
    }
}
