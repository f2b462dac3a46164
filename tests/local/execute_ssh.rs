//! The SSH transport against REAL sshd instances started on 127.0.0.1 for each test.
//!
//! Each test gets its own sshd (random port, fresh host and client keys, temp known_hosts),
//! killed by pid when the guard drops; jump-host tests start two. The password and sudo
//! tests run their sshd in a private mount namespace whose /etc/passwd, /etc/shadow,
//! /etc/group and /etc/sudoers are the test's own (two test users, one with passwordless
//! sudo, one whose sudo asks for a password), so nothing on the machine is changed; they need
//! root, `unshare` and `sudo`. What a test needs and cannot get (sshd, root, sudo) makes it
//! print SKIP and return, except under `CI=true`, where it fails.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::sshd_support::*;

use faultline::execute::{ExecError, Executor, NodeOp};
use faultline::inventory::Inventory;

pub(crate) fn executor(sshd: &Sshd, known_hosts: &str, commands: &str) -> Executor {
    let d = sshd.dir.path().display();
    let ssh = format!(
        "  user: {user}\n  port: {port}\n  identityFile: {d}/client_key\n  \
         knownHosts: {d}/{known_hosts}\n",
        user = user(),
        port = sshd.port,
    );
    executor_with(&ssh, "127.0.0.1", commands)
}

/// An executor for one node `local` at `address`: `ssh` holds more `ssh:` lines (indented
/// two spaces), `commands` the `commands:` lines. No ssh config unless `ssh` names one, so
/// that the tests do not depend on the machine's ~/.ssh/config.
fn executor_with(ssh: &str, address: &str, commands: &str) -> Executor {
    let config = if ssh.contains("config:") {
        ""
    } else {
        "  config: none\n"
    };
    let text = format!(
        "cluster: {{name: ssh-test}}\nssh:\n{config}  connectTimeout: 2s\n{ssh}\
         commands:\n{commands}\nnodes:\n  - name: local\n    address: {address}\n"
    );
    let inv = Inventory::parse(&text, Path::new("ssh-test.yaml")).unwrap_or_else(|e| panic!("{e}"));
    Executor::new(inv)
}

const T: Duration = Duration::from_secs(10);

/// What a machine going down looks like from here: the session's sshd process dies. The
/// command is its grandchild (the node's `timeout` sits between), so it is looked for
/// among the command's ancestors.
const KILL_SSHD: &str = "p=$PPID; while [ \"$p\" -gt 1 ] && ! grep -q '^sshd' /proc/$p/comm; \
                         do p=$(awk '{print $4}' /proc/$p/stat); done; kill -KILL $p; sleep 5";

#[tokio::test]
async fn command_runs_and_returns_output_and_exit_code() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(
        &sshd,
        "known_hosts",
        "  kubeletStop: echo out; echo err >&2\n  kubeletStatus: echo inactive; exit 3\n  partition: exit 5",
    );
    let out = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect("runs");
    assert_eq!(out.exit_status, Some(0));
    assert!(
        out.output.contains("out\n") && out.output.contains("err\n"),
        "{}",
        out.output
    );
    let out = ex
        .perform("local", &NodeOp::KubeletStatus, T)
        .await
        .expect("answer");
    assert_eq!(out.exit_status, Some(3));
    let err = ex
        .perform("local", &NodeOp::Partition, T)
        .await
        .expect_err("exit 5");
    assert!(
        matches!(
            err,
            ExecError::CommandFailed {
                exit_status: Some(5),
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn wrong_host_key_is_refused_with_a_clear_error() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(&sshd, "known_hosts_wrong", "  kubeletStop: echo never");
    let err = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("mismatch");
    let text = err.to_string();
    assert!(text.contains("HOST KEY MISMATCH"), "{text}");
    assert!(text.contains("known_hosts_wrong"), "{text}");
    assert!(text.contains("ssh-keyscan -p"), "{text}");
}

#[tokio::test]
async fn unknown_host_is_refused() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(&sshd, "known_hosts_other", "  kubeletStop: echo never");
    let err = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("unknown");
    let text = err.to_string();
    assert!(text.contains("is not in"), "{text}");
    assert!(text.contains("known_hosts_other"), "{text}");
}

#[tokio::test]
async fn command_timeout_is_enforced_by_the_outer_timeout() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(&sshd, "known_hosts", "  heal: sleep 30");
    let start = Instant::now();
    let err = ex
        .perform("local", &NodeOp::Heal, Duration::from_secs(2))
        .await
        .expect_err("times out");
    let took = start.elapsed();
    assert!(matches!(err, ExecError::TimedOutEnded { .. }), "{err}");
    // At its timeout, not at the command's end 30 s later (the margin is for a loaded machine).
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test]
async fn dropped_connection_during_reboot_is_success() {
    let Some(sshd) = start_sshd() else { return };
    // Killing the session's sshd process is what a reboot looks like from here.
    let ex = executor(&sshd, "known_hosts", &format!("  reboot: {KILL_SSHD}"));
    let out = ex
        .perform("local", &NodeOp::Reboot, T)
        .await
        .expect("dropped is ok");
    assert!(out.dropped, "{out:?}");
    // The same drop for an ordinary operation is an error.
    let ex = executor(&sshd, "known_hosts", &format!("  kubeletStop: {KILL_SSHD}"));
    let err = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("drop");
    assert!(matches!(err, ExecError::Dropped { .. }), "{err}");
}

#[tokio::test]
async fn reboot_that_hangs_after_sending_counts_as_dropped() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(&sshd, "known_hosts", "  reboot: sleep 30");
    let out = ex
        .perform("local", &NodeOp::Reboot, Duration::from_secs(2))
        .await
        .expect("timeout after send is the expected outcome");
    assert!(out.dropped);
}

#[tokio::test]
async fn self_restore_over_ssh_arms_and_disarms() {
    let Some(sshd) = start_sshd() else { return };
    let flag = sshd.dir.path().join("restored");
    let ex = executor(
        &sshd,
        "known_hosts",
        &format!("  kubeletStart: touch {}", flag.display()),
    );
    let armed = ex
        .arm_restore(
            "local",
            &NodeOp::KubeletStart,
            Duration::from_secs(1),
            "ssh-tok",
        )
        .await
        .expect("armed");
    assert!(armed.pid.is_some());
    let deadline = Instant::now() + Duration::from_secs(6);
    while !flag.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(flag.exists(), "restore ran on the node without faultline");
    fs::remove_file(&flag).expect("rm");
    let armed = ex
        .arm_restore(
            "local",
            &NodeOp::KubeletStart,
            // Far enough out that the disarm finishes first on a loaded machine.
            Duration::from_secs(8),
            "ssh-tok2",
        )
        .await
        .expect("armed");
    assert!(ex.disarm("local", &armed).await.expect("disarm"));
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!flag.exists(), "disarmed restore did not run");
}

#[tokio::test]
async fn failed_authentication_names_methods_but_never_the_password() {
    let Some(sshd) = start_sshd() else { return };
    let d = sshd.dir.path().display();
    // PATH stands in for a password variable: its value is known and must not leak.
    let text = format!(
        "cluster: {{name: ssh-test}}\nssh:\n  user: {user}\n  port: {port}\n  \
         identityFile: {d}/other_host_key\n  knownHosts: {d}/known_hosts\n  passwordEnv: PATH\n  \
         config: none\n\
         commands: {{kubeletStop: echo never}}\nnodes: [{{name: local, address: 127.0.0.1}}]\n",
        user = user(),
        port = sshd.port,
    );
    let ex = Executor::new(Inventory::parse(&text, Path::new("t.yaml")).expect("valid"));
    let err = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("auth");
    let text = err.to_string();
    assert!(text.contains("authentication"), "{text}");
    assert!(text.contains("password from $PATH"), "{text}");
    let secret = std::env::var("PATH").unwrap_or_default();
    assert!(!secret.is_empty() && !text.contains(&secret), "{text}");
    assert!(!format!("{err:?}").contains(&secret));
}

// ------------------------------------------------------------------ jump hosts

/// A bastion sshd and a node sshd; the node's client key may log into both, and
/// `known_hosts_both` (in the node's directory) holds both host keys.
fn bastion_and_node(bastion_extra: &str) -> Option<(Sshd, Sshd)> {
    let bastion = start_sshd_with(Options {
        extra: bastion_extra.into(),
        ..Options::default()
    })?;
    let node = start_sshd()?;
    bastion.authorize(&node.d().join("client_key"));
    fs::write(
        node.d().join("known_hosts_both"),
        format!(
            "{}\n{}\n",
            bastion.known_line("host_key"),
            node.known_line("host_key")
        ),
    )
    .expect("w");
    Some((bastion, node))
}

/// `ssh:` lines for the node behind `jump`, with the node's key and `known_hosts`.
fn through(node: &Sshd, jump: &str, known_hosts: &str) -> String {
    format!(
        "  user: {user}\n  port: {port}\n  identityFile: {d}/client_key\n  \
         knownHosts: {d}/{known_hosts}\n  jump: '{jump}'\n",
        user = user(),
        port = node.port,
        d = node.d().display(),
    )
}

#[tokio::test]
async fn a_node_is_reached_through_a_jump_host_and_a_chain_of_them() {
    let Some((bastion, node)) = bastion_and_node("") else {
        return;
    };
    let commands = "  kubeletStop: echo via $SSH_CONNECTION\n  partition: exit 5";
    let one = format!("{}@127.0.0.1:{}", user(), bastion.port);
    let two = format!("127.0.0.1:{p},127.0.0.1:{p}", p = bastion.port);
    for jump in [one, two] {
        let ex = executor_with(
            &through(&node, &jump, "known_hosts_both"),
            "127.0.0.1",
            commands,
        );
        let out = ex
            .perform("local", &NodeOp::KubeletStop, T)
            .await
            .unwrap_or_else(|e| panic!("{jump}: {e}"));
        assert_eq!(out.exit_status, Some(0));
        // The node saw the connection arrive at its own port (from the bastion).
        assert!(out.output.contains("via 127.0.0.1 "), "{}", out.output);
        assert!(
            out.output.trim_end().ends_with(&node.port.to_string()),
            "{}",
            out.output
        );
        let err = ex
            .perform("local", &NodeOp::Partition, T)
            .await
            .expect_err("exit 5");
        assert!(
            matches!(
                err,
                ExecError::CommandFailed {
                    exit_status: Some(5),
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            ex.describe("local", &NodeOp::KubeletStop)
                .starts_with("ssh -J "),
            "{}",
            ex.describe("local", &NodeOp::KubeletStop)
        );
    }
}

#[tokio::test]
async fn the_jump_hosts_key_is_verified_too() {
    let Some((bastion, node)) = bastion_and_node("") else {
        return;
    };
    // known_hosts holds the node's key only: the bastion is unknown.
    let jump = format!("127.0.0.1:{}", bastion.port);
    let ex = executor_with(
        &through(&node, &jump, "known_hosts"),
        "127.0.0.1",
        "  heal: echo never",
    );
    let err = ex
        .perform("local", &NodeOp::Heal, T)
        .await
        .expect_err("unknown bastion");
    let text = err.to_string();
    assert!(
        text.contains("jump host") && text.contains("is not in"),
        "{text}"
    );
    assert!(
        text.contains(&format!("ssh-keyscan -p {}", bastion.port)),
        "{text}"
    );
    // The bastion known, the node's key wrong: refused at the node, named as such.
    fs::write(
        node.d().join("known_hosts_mixed"),
        format!(
            "{}\n{}\n",
            bastion.known_line("host_key"),
            node.known_line("other_host_key")
        ),
    )
    .expect("w");
    let ex = executor_with(
        &through(&node, &jump, "known_hosts_mixed"),
        "127.0.0.1",
        "  heal: echo never",
    );
    let text = ex
        .perform("local", &NodeOp::Heal, T)
        .await
        .expect_err("mismatch")
        .to_string();
    assert!(
        text.contains("HOST KEY MISMATCH") && text.contains("(node local)"),
        "{text}"
    );
}

#[tokio::test]
async fn a_jump_host_that_forwards_nothing_says_so() {
    let Some((bastion, node)) = bastion_and_node("AllowTcpForwarding no") else {
        return;
    };
    let jump = format!("127.0.0.1:{}", bastion.port);
    let ex = executor_with(
        &through(&node, &jump, "known_hosts_both"),
        "127.0.0.1",
        "  heal: echo never",
    );
    let text = ex
        .perform("local", &NodeOp::Heal, T)
        .await
        .expect_err("no forwarding")
        .to_string();
    assert!(text.contains("AllowTcpForwarding"), "{text}");
}

#[tokio::test]
async fn timeouts_and_drops_through_a_jump_host_are_what_they_are_directly() {
    let Some((bastion, node)) = bastion_and_node("") else {
        return;
    };
    let jump = format!("127.0.0.1:{}", bastion.port);
    let ex = executor_with(
        &through(&node, &jump, "known_hosts_both"),
        "127.0.0.1",
        &format!("  heal: sleep 30\n  reboot: {KILL_SSHD}\n  kubeletStop: {KILL_SSHD}"),
    );
    let start = Instant::now();
    let err = ex
        .perform("local", &NodeOp::Heal, Duration::from_secs(2))
        .await
        .expect_err("times out");
    assert!(matches!(err, ExecError::TimedOutEnded { .. }), "{err}");
    // At its timeout, not at the command's end 30 s later (the margin is for a loaded machine).
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?}",
        start.elapsed()
    );
    let out = ex
        .perform("local", &NodeOp::Reboot, T)
        .await
        .expect("a dropped reboot is success");
    assert!(out.dropped, "{out:?}");
    let err = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("drop");
    assert!(matches!(err, ExecError::Dropped { .. }), "{err}");
    // The node still answers through the bastion afterwards (nothing was left stuck).
    let ex = executor_with(
        &through(&node, &jump, "known_hosts_both"),
        "127.0.0.1",
        "  heal: echo fine",
    );
    let out = ex.perform("local", &NodeOp::Heal, T).await.expect("runs");
    assert!(out.output.contains("fine"));
}

// ------------------------------------------------------------------ ~/.ssh/config

#[tokio::test]
async fn the_ssh_config_gives_alias_user_port_key_and_proxy_jump_and_cannot_weaken_host_keys() {
    let Some((bastion, node)) = bastion_and_node("") else {
        return;
    };
    let d = node.d();
    let config = format!(
        "Host node-alias\n  HostName 127.0.0.1\n  Port {np}\n  User {user}\n  \
         IdentityFile {d}/client_key\n  ProxyJump bastion-alias\n  StrictHostKeyChecking no\n\n\
         Host bastion-alias\n  HostName 127.0.0.1\n  Port {bp}\n  User {user}\n\n\
         Host *\n  User nobody-at-all\n  Port 1\n",
        np = node.port,
        bp = bastion.port,
        user = user(),
        d = d.display(),
    );
    fs::write(d.join("ssh_config"), config).expect("w");
    for (known, ok) in [("known_hosts_both", true), ("known_hosts_wrong", false)] {
        let ssh = format!(
            "  config: {}/ssh_config\n  knownHosts: {}/{known}\n",
            d.display(),
            d.display()
        );
        let ex = executor_with(
            &ssh,
            "node-alias",
            "  kubeletStop: echo via $SSH_CONNECTION",
        );
        let result = ex.perform("local", &NodeOp::KubeletStop, T).await;
        if ok {
            let out = result.unwrap_or_else(|e| panic!("{e}"));
            assert!(
                out.output.trim_end().ends_with(&node.port.to_string()),
                "{}",
                out.output
            );
        } else {
            let text = result
                .expect_err("StrictHostKeyChecking no changes nothing")
                .to_string();
            assert!(
                text.contains("is not in") || text.contains("MISMATCH"),
                "{text}"
            );
        }
    }
}

// ------------------------------------------------------------------ ssh-agent

/// An ssh-agent on its own socket, started for one test and killed by pid.
struct Agent {
    child: Child,
    socket: PathBuf,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_agent(dir: &Path) -> Option<Agent> {
    if !installed("/usr/bin/ssh-agent", "openssh-client") {
        return None;
    }
    let socket = dir.join("agent.sock");
    let child = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ssh-agent starts");
    let agent = Agent { child, socket };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !agent.socket.exists() {
        assert!(Instant::now() < deadline, "ssh-agent made no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(agent)
}

#[tokio::test]
async fn the_agent_holding_the_key_logs_in_and_an_empty_agent_does_not() {
    let Some(sshd) = start_sshd() else { return };
    let Some(agent) = start_agent(&sshd.d()) else {
        return;
    };
    let ssh = format!(
        "  user: {}\n  port: {}\n  knownHosts: {}/known_hosts\n  agentSocket: {}\n",
        user(),
        sshd.port,
        sshd.d().display(),
        agent.socket.display()
    );
    let ex = executor_with(&ssh, "127.0.0.1", "  kubeletStop: echo agent-ok");
    let err = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("the agent holds no key yet");
    let text = err.to_string();
    assert!(
        text.contains("ssh-agent at") && text.contains("holds no key"),
        "{text}"
    );
    let added = Command::new("ssh-add")
        .arg(sshd.d().join("client_key"))
        .env("SSH_AUTH_SOCK", &agent.socket)
        .output()
        .expect("ssh-add");
    assert!(added.status.success(), "{added:?}");
    let out = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.output.contains("agent-ok"), "{}", out.output);
}

// ------------------------------------------------------------------ password and sudo

/// `ssh:` lines for test user `name`, logging in with the password in `$HOME`.
fn as_test_user(sshd: &Sshd, name: &str, more: &str) -> String {
    format!(
        "  user: {name}\n  port: {}\n  knownHosts: {}/known_hosts\n  passwordEnv: HOME\n{more}",
        sshd.port,
        sshd.d().display()
    )
}

#[tokio::test]
async fn password_authentication_with_the_password_from_the_environment() {
    let Some(sshd) = start_sshd_with(Options {
        users: true,
        ..Options::default()
    }) else {
        return;
    };
    let ex = executor_with(
        &as_test_user(&sshd, "fltest-pw", ""),
        "127.0.0.1",
        "  kubeletStop: id -un",
    );
    let out = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.output.trim(), "fltest-pw");
    // The wrong password (PATH's value) is refused and never shown.
    let ssh =
        as_test_user(&sshd, "fltest-pw", "").replace("passwordEnv: HOME", "passwordEnv: PATH");
    let err = executor_with(&ssh, "127.0.0.1", "  kubeletStop: id -un")
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("wrong password");
    let text = format!("{err} {err:?}");
    assert!(text.contains("password from $PATH"), "{text}");
    assert!(!text.contains(&std::env::var("PATH").unwrap()), "{text}");
}

#[tokio::test]
async fn sudo_without_a_password_runs_as_root_and_a_password_prompt_is_an_error_not_a_hang() {
    let Some(sshd) = start_sshd_with(Options {
        users: true,
        ..Options::default()
    }) else {
        return;
    };
    let nopw = executor_with(
        &as_test_user(&sshd, "fltest-nopw", "  sudo: true\n"),
        "127.0.0.1",
        "  kubeletStop: id -u; exit 0",
    );
    let out = nopw
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.output.lines().last(), Some("0"), "{}", out.output);

    let prompting = executor_with(
        &as_test_user(&sshd, "fltest-pw", "  sudo: true\n"),
        "127.0.0.1",
        "  kubeletStop: id -u",
    );
    // Refused at once, not left waiting for a password until its own limit.
    let long = Duration::from_secs(30);
    let start = Instant::now();
    let err = prompting
        .perform("local", &NodeOp::KubeletStop, long)
        .await
        .expect_err("sudo wants a password");
    assert!(start.elapsed() < long, "took {:?}", start.elapsed());
    let text = err.to_string();
    assert!(matches!(err, ExecError::Sudo { .. }), "{text}");
    assert!(text.contains("requires a password"), "{text}");
    assert!(
        text.contains("NOPASSWD") && text.contains("sudoPasswordEnv"),
        "{text}"
    );
}

#[tokio::test]
async fn sudo_with_the_password_from_the_environment_and_a_wrong_one() {
    let Some(sshd) = start_sshd_with(Options {
        users: true,
        ..Options::default()
    }) else {
        return;
    };
    // `cat` shows that the command's stdin is not the password.
    let ex = executor_with(
        &as_test_user(
            &sshd,
            "fltest-pw",
            "  sudo: true\n  sudoPasswordEnv: HOME\n",
        ),
        "127.0.0.1",
        "  kubeletStop: id -u; cat",
    );
    let out = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.output.trim(), "0", "root, and nothing read from stdin");
    // The same for a user whose sudo asks for nothing: the password stays unread.
    let ex = executor_with(
        &as_test_user(
            &sshd,
            "fltest-nopw",
            "  sudo: true\n  sudoPasswordEnv: HOME\n",
        ),
        "127.0.0.1",
        "  kubeletStop: id -u; cat",
    );
    let out = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.output.trim(), "0", "{}", out.output);

    let wrong = executor_with(
        &as_test_user(
            &sshd,
            "fltest-pw",
            "  sudo: true\n  sudoPasswordEnv: PATH\n",
        ),
        "127.0.0.1",
        "  kubeletStop: id -u",
    );
    // Refused once sudo has said so, not left waiting until its own limit.
    let long = Duration::from_secs(30);
    let start = Instant::now();
    let err = wrong
        .perform("local", &NodeOp::KubeletStop, long)
        .await
        .expect_err("wrong sudo password");
    assert!(start.elapsed() < long, "took {:?}", start.elapsed());
    let text = format!("{err} {err:?}");
    assert!(text.contains("refused the password from $PATH"), "{text}");
    assert!(!text.contains(&std::env::var("PATH").unwrap()), "{text}");
}

#[tokio::test]
async fn a_timed_out_command_is_ended_on_the_node() {
    let Some(sshd) = start_sshd() else { return };
    let flag = sshd.dir.path().join("late");
    let ex = executor(
        &sshd,
        "known_hosts",
        &format!("  heal: sleep 8; touch {}", flag.display()),
    );
    let start = Instant::now();
    let err = ex
        .perform("local", &NodeOp::Heal, Duration::from_secs(1))
        .await
        .expect_err("times out");
    assert!(err.to_string().contains("did not finish within"), "{err}");
    assert!(matches!(err, ExecError::TimedOutEnded { .. }), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "returned after the command would have ended: {:?}",
        start.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(9).saturating_sub(start.elapsed())).await;
    assert!(
        !flag.exists(),
        "the command went on on the node after perform returned its timeout"
    );
}

/// The client port of the command's own connection, from `$SSH_CONNECTION`.
const CLIENT_PORT: &str = "set -- $SSH_CONNECTION; echo \"$2\"";

/// The logins sshd accepted so far, each with its client port.
fn accepted_ports(sshd: &Sshd) -> Vec<String> {
    let log = fs::read_to_string(sshd.d().join("sshd.log")).unwrap_or_default();
    log.lines()
        .filter(|l| l.contains("Accepted publickey"))
        .filter_map(|l| l.split(" port ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn commands_on_a_node_share_one_connection_and_a_stale_one_is_replaced() {
    let Some(sshd) = start_sshd() else { return };
    // kubeletStop answers, then its sshd session process dies a moment later: what a
    // kept connection sees when sshd restarts or the node reboots between two steps.
    let ex = executor(
        &sshd,
        "known_hosts",
        &format!(
            "  kubeletStatus: {CLIENT_PORT}\n  kubeletStop: >-\n    {CLIENT_PORT};\n    \
             p=$PPID; while [ \"$p\" -gt 1 ] && ! grep -q '^sshd' /proc/$p/comm;\n    \
             do p=$(awk '{{print $4}}' /proc/$p/stat); done;\n    \
             (sleep 0.3; kill -KILL $p) </dev/null >/dev/null 2>&1 &\n"
        ),
    );
    let port = |o: faultline::execute::OpOutcome| o.output.trim().to_string();
    let first = port(
        ex.perform("local", &NodeOp::KubeletStatus, T)
            .await
            .expect("1"),
    );
    let second = port(
        ex.perform("local", &NodeOp::KubeletStatus, T)
            .await
            .expect("2"),
    );
    assert_eq!(
        first, second,
        "the second command opened a connection of its own"
    );
    let third = port(
        ex.perform("local", &NodeOp::KubeletStop, T)
            .await
            .expect("3"),
    );
    assert_eq!(first, third);
    assert_eq!(
        accepted_ports(&sshd),
        std::slice::from_ref(&first),
        "one login for three commands"
    );
    std::thread::sleep(Duration::from_secs(1));
    // The kept connection is dead now: the next command opens a new one, silently.
    let fourth = port(
        ex.perform("local", &NodeOp::KubeletStatus, T)
            .await
            .expect("4"),
    );
    assert_ne!(first, fourth);
    assert_eq!(accepted_ports(&sshd), [first, fourth]);
}

#[tokio::test]
async fn a_command_that_takes_the_machine_down_leaves_its_connection_behind() {
    let Some(sshd) = start_sshd() else { return };
    // `reboot` answers (as `systemctl reboot` does) and the machine goes away afterwards;
    // the next command must not be sent down the connection the reboot used.
    let ex = executor(
        &sshd,
        "known_hosts",
        &format!("  kubeletStatus: {CLIENT_PORT}\n  reboot: {CLIENT_PORT}\n"),
    );
    let port = |o: faultline::execute::OpOutcome| o.output.trim().to_string();
    let before = port(
        ex.perform("local", &NodeOp::KubeletStatus, T)
            .await
            .expect("1"),
    );
    let reboot = port(
        ex.perform("local", &NodeOp::Reboot, T)
            .await
            .expect("reboot"),
    );
    assert_eq!(before, reboot, "the reboot reused the kept connection");
    let after = port(
        ex.perform("local", &NodeOp::KubeletStatus, T)
            .await
            .expect("2"),
    );
    assert_ne!(reboot, after);
}

#[tokio::test]
async fn sessions_opened_ahead_carry_the_next_command_and_an_unreachable_node_is_reported() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(
        &sshd,
        "known_hosts",
        &format!("  kubeletStatus: {CLIENT_PORT}\n"),
    );
    let opened = ex.open_sessions(&["local"]).await;
    assert!(
        matches!(opened.as_slice(), [(n, Ok(()))] if n == "local"),
        "{opened:?}"
    );
    let logins = accepted_ports(&sshd);
    assert_eq!(logins.len(), 1, "{logins:?}");
    // Opening again keeps the one there is.
    ex.open_sessions(&["local"]).await;
    let out = ex
        .perform("local", &NodeOp::KubeletStatus, T)
        .await
        .expect("runs");
    assert_eq!(out.output.trim(), logins[0], "the command logged in again");
    assert_eq!(accepted_ports(&sshd), logins);

    // Nothing listens on this port: reported by name, within the connect timeout.
    let closed = free_port();
    let ex = executor_with(
        &format!(
            "  user: {}\n  port: {closed}\n  knownHosts: {}/known_hosts\n",
            user(),
            sshd.d().display()
        ),
        "127.0.0.1",
        "",
    );
    let started = Instant::now();
    let opened = ex.open_sessions(&["local", "nowhere"]).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    match opened.as_slice() {
        [
            (_, Err(ExecError::Ssh { node, .. })),
            (_, Err(ExecError::UnknownNode(unknown))),
        ] => {
            assert_eq!((node.as_str(), unknown.as_str()), ("local", "nowhere"));
        }
        other => panic!("{other:?}"),
    }
}
