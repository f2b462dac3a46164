//! How the first command over a node's transport ended, as four findings: reachable, host
//! key, authentication, sudo.

use super::{CheckKind, Finding, Status};
use crate::execute::{ExecError, OpOutcome, SshError};
use crate::inventory::{NodeAccess, TransportKind};

/// Reachable, host key, authentication and sudo, from how the first command ended; and,
/// when commands cannot run on the node, why (the other checks are then not made).
pub(super) fn findings(
    node: &NodeAccess,
    reached: &Result<OpOutcome, ExecError>,
) -> (Option<&'static str>, Vec<Finding>) {
    let name = node.name.as_str();
    let f = |check, status, detail: String| Finding::node(name, check, status, detail);
    let how = match node.transport {
        TransportKind::Ssh => format!("ssh {}@{}:{}", node.ssh.user, node.address, node.ssh.port),
        TransportKind::Exec => format!(
            "exec {}",
            node.exec
                .as_ref()
                .and_then(|a| a.first())
                .cloned()
                .unwrap_or_default()
        ),
        TransportKind::Pod => format!(
            "api exec in a privileged pod (namespace {}, image {})",
            node.pod.namespace, node.pod.image
        ),
    };
    let ssh = node.transport == TransportKind::Ssh;
    let not_ssh = |check| {
        let which = if node.transport == TransportKind::Pod {
            "not SSH: the API transport"
        } else {
            "not SSH: the exec transport"
        };
        f(check, Status::Skip, which.into())
    };
    let sudo_unset = || {
        if !ssh {
            not_ssh(CheckKind::Sudo)
        } else {
            f(
                CheckKind::Sudo,
                Status::Skip,
                format!("ssh.sudo is not set: commands run as {}", node.ssh.user),
            )
        }
    };
    let skipped = |check, why: &str| f(check, Status::Skip, format!("not checked: {why}"));
    // Logged in over SSH; then `sudo`, as it went.
    let logged_in = |sudo: Finding| {
        vec![
            f(CheckKind::Reachable, Status::Pass, how.clone()),
            f(
                CheckKind::HostKey,
                Status::Pass,
                "matches known_hosts".into(),
            ),
            f(
                CheckKind::Auth,
                Status::Pass,
                format!("logged in as {}", node.ssh.user),
            ),
            sudo,
        ]
    };
    // Logged in, and sudo would not run the command.
    let sudo_failed = |detail: String| logged_in(f(CheckKind::Sudo, Status::Fail, detail));
    match reached {
        Ok(_) => {
            let mut out = vec![f(CheckKind::Reachable, Status::Pass, how)];
            if ssh {
                out.push(f(
                    CheckKind::HostKey,
                    Status::Pass,
                    match &node.ssh.known_hosts {
                        _ if node.ssh.insecure_ignore_host_keys => {
                            "NOT verified (--insecure-ignore-host-keys)".to_string()
                        }
                        Some(k) => format!("matches {}", k.display()),
                        None => "matches ~/.ssh/known_hosts".to_string(),
                    },
                ));
                out.push(f(
                    CheckKind::Auth,
                    Status::Pass,
                    format!("logged in as {}", node.ssh.user),
                ));
                if node.ssh.sudo {
                    out.push(f(CheckKind::Sudo, Status::Pass, "`sudo -n` works".into()));
                } else {
                    out.push(sudo_unset());
                }
            } else {
                out.extend([
                    not_ssh(CheckKind::HostKey),
                    not_ssh(CheckKind::Auth),
                    not_ssh(CheckKind::Sudo),
                ]);
            }
            (None, out)
        }
        Err(ExecError::Ssh { source, .. }) => {
            let (why, out) = match source {
                SshError::HostKey(msg) => (
                    "the host key did not match",
                    vec![
                        f(CheckKind::Reachable, Status::Pass, how),
                        f(CheckKind::HostKey, Status::Fail, msg.clone()),
                        skipped(CheckKind::Auth, "the host key did not match"),
                        skipped(CheckKind::Sudo, "the host key did not match"),
                    ],
                ),
                SshError::Auth { .. } => (
                    "authentication failed",
                    vec![
                        f(CheckKind::Reachable, Status::Pass, how),
                        f(
                            CheckKind::HostKey,
                            Status::Pass,
                            "matches known_hosts".into(),
                        ),
                        f(CheckKind::Auth, Status::Fail, source.to_string()),
                        skipped(CheckKind::Sudo, "authentication failed"),
                    ],
                ),
                other => (
                    "the node cannot be reached",
                    vec![
                        f(
                            CheckKind::Reachable,
                            Status::Fail,
                            format!("{how}: {other}"),
                        ),
                        skipped(CheckKind::HostKey, "the node cannot be reached"),
                        skipped(CheckKind::Auth, "the node cannot be reached"),
                        skipped(CheckKind::Sudo, "the node cannot be reached"),
                    ],
                ),
            };
            (Some(why), out)
        }
        // Logged in, but the node has no `timeout`: every command is sent as `exec timeout
        // -k 5 N sh -c …` so that it ends on the node at its deadline, so nothing can run.
        Err(ExecError::CommandFailed {
            exit_status: Some(127),
            output,
            ..
        }) if timeout_missing(output) => {
            let mut out = if !ssh {
                vec![
                    f(CheckKind::Reachable, Status::Pass, how),
                    not_ssh(CheckKind::HostKey),
                    not_ssh(CheckKind::Auth),
                    not_ssh(CheckKind::Sudo),
                ]
            } else if node.ssh.sudo {
                logged_in(f(CheckKind::Sudo, Status::Pass, "`sudo -n` works".into()))
            } else {
                logged_in(sudo_unset())
            };
            out.push(f(
                CheckKind::Commands,
                Status::Fail,
                format!(
                    "`timeout` is not found on the node ({}): faultline runs every command \
                     under `timeout -k` so that it ends on the node at its deadline; install \
                     coreutils (or a busybox with `timeout`)",
                    output.trim()
                ),
            ));
            (Some("`timeout` is missing on the node"), out)
        }
        // Doctor's probe is a few `command -v`: when it does not come back in time, the
        // connection or the login hung (an address that accepts TCP but no SSH server
        // answers, a firewall dropping packets), so say that, not the probe's script.
        Err(
            ExecError::TimedOutEnded { after, .. } | ExecError::TimedOutUnconfirmed { after, .. },
        ) if ssh => {
            let why = "the node does not answer SSH";
            (
                Some(why),
                vec![
                    f(
                        CheckKind::Reachable,
                        Status::Fail,
                        format!(
                            "{how}: no SSH answer within {}s: the TCP connection or the SSH \
                             handshake hangs (is sshd listening on that address and port? does \
                             a firewall drop the packets?)",
                            after.as_secs()
                        ),
                    ),
                    skipped(CheckKind::HostKey, why),
                    skipped(CheckKind::Auth, why),
                    skipped(CheckKind::Sudo, why),
                ],
            )
        }
        // The transport read sudo's own refusal (a password wanted, a user not allowed):
        // its message already says what to change.
        Err(e @ ExecError::Sudo { .. }) => (Some("sudo refuses"), sudo_failed(e.to_string())),
        Err(ExecError::CommandFailed {
            exit_status,
            output,
            ..
        }) if ssh && node.ssh.sudo => (
            Some("`sudo -n` fails"),
            sudo_failed(format!(
                "ssh.sudo is set, but `sudo -n` failed ({}): {}; give {} passwordless \
                 sudo (NOPASSWD) or log in as root without ssh.sudo",
                exit_status.map_or("killed".into(), |c| format!("exit {c}")),
                output.trim(),
                node.ssh.user
            )),
        ),
        Err(e) => {
            let mut out = vec![f(CheckKind::Reachable, Status::Fail, format!("{how}: {e}"))];
            if ssh {
                out.extend([
                    skipped(CheckKind::HostKey, "the node cannot be reached"),
                    skipped(CheckKind::Auth, "the node cannot be reached"),
                    skipped(CheckKind::Sudo, "the node cannot be reached"),
                ]);
            } else {
                out.extend([
                    not_ssh(CheckKind::HostKey),
                    not_ssh(CheckKind::Auth),
                    not_ssh(CheckKind::Sudo),
                ]);
            }
            (Some("the node cannot be reached"), out)
        }
    }
}

/// Whether a command's output says the shell found no `timeout` program (dash: `exec:
/// timeout: not found`; bash: `timeout: command not found`; busybox: `timeout: not found`).
fn timeout_missing(output: &str) -> bool {
    output
        .lines()
        .any(|l| l.contains("timeout") && l.contains("not found"))
}
