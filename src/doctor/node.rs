//! The node side of `doctor`: each check goes through the executor, so it meets exactly
//! what a run meets (the transport with its host-key check, authentication and `sudo -n`,
//! the self-restore's own arm and disarm, the power driver's argv).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::join_all;

use super::needs::{Needs, PowerKey};
use super::{CheckKind, Finding, Status};
use crate::execute::{ExecError, Executor, NodeOp, PowerState, SshError};
use crate::experiment::model::Experiment;
use crate::inventory::{NodeAccess, TransportKind};

/// How long one check's command may take on a node.
const CHECK_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the self-restore armed by the check would wait before running its (harmless)
/// undo, should disarming it fail.
const CHECK_RESTORE_AFTER: Duration = Duration::from_secs(600);
/// A node clock further off than this is worth a warning.
const CLOCK_WARN: Duration = Duration::from_secs(1);
/// A node clock further off than this fails the check.
const CLOCK_FAIL: Duration = Duration::from_secs(5);
/// The line the check script ends with, so its output is known to be its own.
const SCRIPT_DONE: &str = "faultline-doctor-done";
/// The prefix of a line naming a program the node does not have.
const MISSING: &str = "faultline-missing:";

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
        match power_template(node, *key) {
            Some(_) => {}
            None => match key.action().in_band() {
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
                    programs
                        .entry(program)
                        .or_default()
                        .push(format!("{} `{}`", op_key(op), text));
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
    let (blocked, transport) = transport_findings(node, &reached);
    findings.extend(transport);
    if let Some(why) = blocked {
        for check in [CheckKind::KubeletUnit, CheckKind::Commands]
            .into_iter()
            .chain((depth == Depth::Full).then_some(CheckKind::SelfRestore))
            .chain((depth == Depth::Full).then_some(CheckKind::Clock))
        {
            findings.push(Finding::node(
                name,
                check,
                Status::Skip,
                format!("not checked: {why}"),
            ));
        }
        findings.extend(power_finding(executor, node, needs).await);
        return findings;
    }
    let output = reached.map(|o| o.output).unwrap_or_default();
    findings.push(commands_finding(name, &output, &programs, &not_configured));

    if needs.touches_kubelet() || needs.everything {
        findings.push(kubelet_unit_finding(executor, node).await);
    }
    findings.extend(power_finding(executor, node, needs).await);
    if depth == Depth::Full {
        if needs.self_restore {
            findings.push(self_restore_finding(executor, name).await);
        }
        findings.push(clock_finding(executor, name).await);
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

fn power_template(node: &NodeAccess, key: PowerKey) -> Option<&Vec<String>> {
    match key {
        PowerKey::On => node.power.on.as_ref(),
        PowerKey::Off => node.power.off.as_ref(),
        PowerKey::Reboot => node.power.reboot.as_ref(),
    }
}

/// The inventory key of an operation, for messages.
fn op_key(op: &NodeOp) -> &'static str {
    match op {
        NodeOp::KubeletStop => "commands.kubeletStop",
        NodeOp::KubeletStart => "commands.kubeletStart",
        NodeOp::KubeletRestart => "commands.kubeletRestart",
        NodeOp::KubeletStatus => "commands.kubeletStatus",
        NodeOp::Reboot => "commands.reboot",
        NodeOp::PowerOff => "commands.powerOff",
        NodeOp::Partition => "commands.partition",
        NodeOp::Heal => "commands.heal",
        NodeOp::Run(_) => "a `run` step's command",
    }
}

/// Shell words that start a compound command or change how the next word runs, skipped
/// to find the program a command starts.
const NOT_PROGRAMS: &[&str] = &[
    "while", "until", "if", "then", "do", "else", "elif", "!", "{", "(", "exec", "command",
    "nohup", "setsid", "env", "time", "sudo",
];

/// The program a shell command starts first: its first word that is neither a variable
/// assignment nor a keyword or wrapper (`while iptables -D …` starts `iptables`).
pub(crate) fn first_program(text: &str) -> Option<String> {
    let words =
        shlex::split(text).unwrap_or_else(|| text.split_whitespace().map(str::to_string).collect());
    words
        .into_iter()
        .map(|w| w.trim_start_matches(['(', '{']).to_string())
        .filter(|w| !w.is_empty())
        .find(|w| {
            let assignment = w.contains('=') && !w.starts_with(['/', '.']);
            !(NOT_PROGRAMS.contains(&w.as_str()) || w.starts_with('-') || assignment)
        })
        .map(|w| w.trim_end_matches([';', '&', '|']).to_string())
        .filter(|w| !w.is_empty() && !w.starts_with(':'))
}

/// `command -v` for each program, a line per missing one, then the done marker.
fn program_script<'a>(programs: impl Iterator<Item = &'a String>) -> String {
    let quoted: Vec<String> = programs
        .filter_map(|p| shlex::try_quote(p).ok().map(|q| q.into_owned()))
        .collect();
    if quoted.is_empty() {
        return format!("echo {SCRIPT_DONE}");
    }
    format!(
        "for p in {}; do command -v \"$p\" >/dev/null 2>&1 || echo \"{MISSING} $p\"; done; echo {SCRIPT_DONE}",
        quoted.join(" ")
    )
}

/// Reachable, host key, authentication and sudo, from how the first command ended; and,
/// when commands cannot run on the node, why (the other checks are then not made).
fn transport_findings(
    node: &NodeAccess,
    reached: &Result<crate::execute::OpOutcome, ExecError>,
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
    };
    let ssh = node.transport == TransportKind::Ssh;
    let not_ssh = |check| f(check, Status::Skip, "not SSH: the exec transport".into());
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
        Err(ExecError::CommandFailed {
            exit_status,
            output,
            ..
        }) if ssh && node.ssh.sudo => (
            Some("`sudo -n` fails"),
            vec![
                f(CheckKind::Reachable, Status::Pass, how),
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
                f(
                    CheckKind::Sudo,
                    Status::Fail,
                    format!(
                        "ssh.sudo is set, but `sudo -n` failed ({}): {}; give {} passwordless \
                         sudo (NOPASSWD) or log in as root without ssh.sudo",
                        exit_status.map_or("killed".into(), |c| format!("exit {c}")),
                        output.trim(),
                        node.ssh.user
                    ),
                ),
            ],
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

/// Which programs are missing, and commands the experiments need that are not configured.
fn commands_finding(
    name: &str,
    output: &str,
    programs: &BTreeMap<String, Vec<String>>,
    not_configured: &[String],
) -> Finding {
    let mut problems: Vec<String> = not_configured
        .iter()
        .map(|key| format!("no `{key}` configured, and the experiments use it"))
        .collect();
    if !output.contains(SCRIPT_DONE) {
        problems.push(format!(
            "the check of {} program(s) printed something else: {}",
            programs.len(),
            output.trim()
        ));
    }
    for line in output.lines() {
        if let Some(program) = line.trim().strip_prefix(MISSING) {
            let program = program.trim();
            let users = programs
                .get(program)
                .map(|u| u.join("; "))
                .unwrap_or_default();
            problems.push(format!(
                "`{program}` is not found on the node (used by {users})"
            ));
        }
    }
    if problems.is_empty() {
        let names: Vec<&str> = programs.keys().map(String::as_str).collect();
        Finding::node(
            name,
            CheckKind::Commands,
            Status::Pass,
            if names.is_empty() {
                "none needed".to_string()
            } else {
                format!("found: {}", names.join(", "))
            },
        )
    } else {
        Finding::node(name, CheckKind::Commands, Status::Fail, problems.join("; "))
    }
}

/// The systemd properties of the unit behind the kubelet, from `commands.kubeletUnit`.
async fn kubelet_unit_finding(executor: &Executor, node: &NodeAccess) -> Finding {
    let name = node.name.as_str();
    let Some(template) = &node.commands.kubelet_unit else {
        return Finding::node(
            name,
            CheckKind::KubeletUnit,
            Status::Skip,
            match node.profile {
                Some(p) => format!("profile {p} names no kubelet unit (commands.kubeletUnit)"),
                None => "no commands.kubeletUnit to ask the service manager with".into(),
            },
        );
    };
    let text = match crate::execute::render::shell(
        template,
        &[("node", &node.name), ("address", &node.address)],
    ) {
        Ok(t) => t,
        Err(e) => {
            return Finding::node(name, CheckKind::KubeletUnit, Status::Fail, e.to_string());
        }
    };
    match executor
        .perform(name, &NodeOp::Run(text.clone()), CHECK_TIMEOUT)
        .await
    {
        Ok(out) => judge_unit(
            name,
            &text,
            &out.output,
            node.commands.kubelet_stop.as_deref(),
        ),
        Err(ExecError::CommandFailed { output, .. }) => {
            judge_unit(name, &text, &output, node.commands.kubelet_stop.as_deref())
        }
        Err(e) => Finding::node(name, CheckKind::KubeletUnit, Status::Fail, e.to_string()),
    }
}

/// What `systemctl show -p Id,LoadState,ActiveState,Restart UNIT` printed, judged: the unit
/// must exist, and its `Restart=` must not undo the stop command (systemd does not restart
/// a unit stopped with `systemctl stop`; it does restart one whose process is killed).
pub(crate) fn judge_unit(node: &str, asked: &str, output: &str, stop: Option<&str>) -> Finding {
    let props: BTreeMap<&str, &str> = output
        .lines()
        .filter_map(|l| l.trim().split_once('='))
        .collect();
    let f = |status, detail: String| Finding::node(node, CheckKind::KubeletUnit, status, detail);
    let Some(load) = props.get("LoadState").copied() else {
        return f(
            Status::Fail,
            format!(
                "`{asked}` printed no LoadState=: {}",
                output.trim().lines().next().unwrap_or("(nothing)")
            ),
        );
    };
    let unit = props.get("Id").copied().unwrap_or("the unit");
    if load != "loaded" {
        return f(
            Status::Fail,
            format!(
                "{unit} is {load} (LoadState={load}, from `{asked}`): the profile's kubelet \
                 commands name a unit this node does not have; kubeadm, kind and OpenShift \
                 run `kubelet`, k3s `k3s` / `k3s-agent`, RKE2 `rke2-server` / `rke2-agent`: \
                 choose the node's profile or set commands.kubelet*"
            ),
        );
    }
    let active = props.get("ActiveState").copied().unwrap_or("unknown");
    let restart = props.get("Restart").copied().unwrap_or("no");
    let stops_through_systemd = stop.is_some_and(|s| s.contains("systemctl stop"));
    let restarts_on_exit = matches!(
        restart,
        "always" | "on-failure" | "on-abnormal" | "on-abort" | "on-watchdog"
    );
    if restarts_on_exit && !stops_through_systemd {
        let stop = stop.unwrap_or("(none)");
        let status = if restart == "always" {
            Status::Fail
        } else {
            Status::Warn
        };
        return f(
            status,
            format!(
                "{unit} has Restart={restart} and commands.kubeletStop (`{stop}`) does not \
                 stop it through systemd, so the service manager {} it again and the fault \
                 undoes itself; stop it with `systemctl stop`",
                if restart == "always" {
                    "starts"
                } else {
                    "may start"
                }
            ),
        );
    }
    let mut detail = format!("{unit} loaded, {active}, Restart={restart}");
    if restarts_on_exit {
        detail.push_str(" (not applied to a `systemctl stop`)");
    }
    if active != "active" {
        return f(
            Status::Warn,
            format!("{detail}: not running before any fault"),
        );
    }
    f(Status::Pass, detail)
}

/// The power driver, asked for the power state; or what is missing.
async fn power_finding(executor: &Executor, node: &NodeAccess, needs: &Needs) -> Option<Finding> {
    let name = node.name.as_str();
    let f = |status, detail: String| Some(Finding::node(name, CheckKind::Power, status, detail));
    if node.power.status.is_none() {
        return if node.power.on.is_some() {
            f(
                Status::Warn,
                "power.on is configured but no power.status: the driver cannot be checked \
                 without turning something on"
                    .into(),
            )
        } else if needs.power.contains(&PowerKey::On) {
            // Already a failure from the missing power.on.
            None
        } else {
            f(
                Status::Skip,
                "no power driver configured (no power action needs one)".into(),
            )
        };
    }
    let shown = executor.describe_power(name, crate::execute::PowerAction::Status);
    match executor.power_state(name, CHECK_TIMEOUT).await {
        Ok(PowerState::On) => f(Status::Pass, format!("answers `on` ({shown})")),
        Ok(PowerState::Off) => f(
            Status::Warn,
            format!("answers `off` ({shown}): the node is powered off now"),
        ),
        Ok(PowerState::Unknown(text)) => f(
            Status::Fail,
            format!("answered `{text}`, neither on nor off ({shown})"),
        ),
        Err(e) => f(
            Status::Fail,
            format!("the power driver does not answer: {e}"),
        ),
    }
}

/// Arms a self-restore through the node's own mechanism (the default, or the profile's or
/// inventory's `armRestore`) whose undo is `true`, and disarms it again at once.
async fn self_restore_finding(executor: &Executor, name: &str) -> Finding {
    let f = |status, detail: String| Finding::node(name, CheckKind::SelfRestore, status, detail);
    let token = format!(
        "doctor{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let armed = match executor
        .arm_restore(
            name,
            &NodeOp::Run("true".into()),
            CHECK_RESTORE_AFTER,
            &token,
        )
        .await
    {
        Ok(a) => a,
        Err(e) => return f(Status::Fail, format!("cannot arm a self-restore: {e}")),
    };
    match executor.disarm(name, &armed).await {
        Ok(true) => f(
            Status::Pass,
            match armed.pid {
                Some(pid) => format!("armed (pid {pid}) and disarmed"),
                None => "armed and disarmed".into(),
            },
        ),
        Ok(false) => f(
            Status::Fail,
            "armed, but the restore was gone before it was disarmed: whatever runs it on \
             this node ends with the command that started it (OpenShift's `oc debug` pod \
             does); use a profile or armRestore that hands it to the node's service manager \
             (`systemd-run`)"
                .into(),
        ),
        Err(e) => f(
            Status::Fail,
            format!(
                "armed, but disarming failed: {e}; it runs `true` in {} s if nothing stops it",
                CHECK_RESTORE_AFTER.as_secs()
            ),
        ),
    }
}

/// The node's clock against this machine's, to within half the command's round trip.
async fn clock_finding(executor: &Executor, name: &str) -> Finding {
    let f = |status, detail: String| Finding::node(name, CheckKind::Clock, status, detail);
    let now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    };
    let before = now();
    let out = executor
        .perform(name, &NodeOp::Run("date -u +%s.%N".into()), CHECK_TIMEOUT)
        .await;
    let after = now();
    let text = match out {
        Ok(o) => o.output,
        Err(e) => return f(Status::Fail, format!("cannot read the node's clock: {e}")),
    };
    let Some(remote) = parse_epoch(&text) else {
        return f(
            Status::Fail,
            format!("`date -u +%s.%N` printed `{}`", text.trim()),
        );
    };
    let offset = remote.seconds - (before + after) / 2.0;
    let within = (after - before) / 2.0 + remote.resolution;
    let beyond = (offset.abs() - within).max(0.0);
    let detail = format!(
        "{:+.3} s from this machine's (±{:.3} s); faultline compares the Ready \
         lastTransitionTime a node writes with its own clock",
        offset, within
    );
    if beyond > CLOCK_FAIL.as_secs_f64() {
        f(Status::Fail, detail)
    } else if beyond > CLOCK_WARN.as_secs_f64() {
        f(Status::Warn, detail)
    } else {
        f(Status::Pass, detail)
    }
}

/// Seconds since the epoch as `date +%s.%N` prints them, and the resolution (1 s where
/// `%N` is not supported and comes back as text).
struct Epoch {
    seconds: f64,
    resolution: f64,
}

fn parse_epoch(text: &str) -> Option<Epoch> {
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    if let Ok(seconds) = line.parse::<f64>() {
        return Some(Epoch {
            seconds,
            resolution: 0.0,
        });
    }
    let whole = line.split('.').next()?.parse::<f64>().ok()?;
    Some(Epoch {
        seconds: whole,
        resolution: 1.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_program_of_a_command() {
        let p = |t: &str| first_program(t);
        assert_eq!(p("systemctl stop kubelet").as_deref(), Some("systemctl"));
        assert_eq!(
            p("/abs/ci/lab/node-ctl kubelet stop").as_deref(),
            Some("/abs/ci/lab/node-ctl")
        );
        assert_eq!(
            p("while iptables -D OUTPUT -j DROP 2>/dev/null; do :; done").as_deref(),
            Some("iptables")
        );
        assert_eq!(p("FOO=bar LANG=C sh -c 'x'").as_deref(), Some("sh"));
        assert_eq!(
            p("sudo -n systemctl stop k3s").as_deref(),
            Some("systemctl")
        );
        assert_eq!(
            p("systemd-run --unit=x --on-active=5 sh -c {undo}").as_deref(),
            Some("systemd-run")
        );
        assert_eq!(p("").as_deref(), None);
    }

    #[test]
    fn the_program_script_names_what_is_missing() {
        let progs = ["iptables".to_string(), "/opt/it's".to_string()];
        let script = program_script(progs.iter());
        assert!(
            script.contains("'/opt/it'\"'\"'s'") || script.contains("\"/opt/it's\""),
            "{script}"
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(program_script(
                ["sh".to_string(), "no-such-program-xyz".to_string()].iter(),
            ))
            .output()
            .expect("sh");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("faultline-missing: no-such-program-xyz"),
            "{text}"
        );
        assert!(!text.contains("faultline-missing: sh"), "{text}");
        assert!(text.contains(SCRIPT_DONE));
    }

    #[test]
    fn a_unit_that_is_missing_or_restarts_itself_fails() {
        let j = |out: &str, stop: &str| {
            judge_unit("n1", "systemctl show -p … kubelet", out, Some(stop))
        };
        let ok = j(
            "Id=kubelet.service\nLoadState=loaded\nActiveState=active\nRestart=always\n",
            "systemctl stop kubelet",
        );
        assert_eq!(ok.status, Status::Pass, "{}", ok.detail);
        assert!(ok.detail.contains("not applied to a `systemctl stop`"));
        let missing = j(
            "Id=rke2-agent.service\nLoadState=not-found\nActiveState=inactive\nRestart=no\n",
            "systemctl stop rke2-agent",
        );
        assert_eq!(missing.status, Status::Fail);
        assert!(
            missing.detail.contains("rke2-agent.service is not-found"),
            "{}",
            missing.detail
        );
        let kills = j(
            "Id=kubelet.service\nLoadState=loaded\nActiveState=active\nRestart=always\n",
            "pkill kubelet",
        );
        assert_eq!(kills.status, Status::Fail);
        assert!(kills.detail.contains("Restart=always"), "{}", kills.detail);
        let maybe = j(
            "Id=kubelet.service\nLoadState=loaded\nActiveState=active\nRestart=on-failure\n",
            "pkill kubelet",
        );
        assert_eq!(maybe.status, Status::Warn);
        let down = j(
            "Id=kubelet.service\nLoadState=loaded\nActiveState=inactive\nRestart=no\n",
            "systemctl stop kubelet",
        );
        assert_eq!(down.status, Status::Warn);
        let garbage = j("Unit not found", "systemctl stop kubelet");
        assert_eq!(garbage.status, Status::Fail);
    }

    #[test]
    fn clocks_with_and_without_nanoseconds() {
        let e = parse_epoch("1700000000.250000000\n").expect("parsed");
        assert!((e.seconds - 1_700_000_000.25).abs() < 1e-6);
        assert_eq!(e.resolution, 0.0);
        let busybox = parse_epoch("1700000000.%N\n").expect("parsed");
        assert_eq!(busybox.seconds, 1_700_000_000.0);
        assert_eq!(busybox.resolution, 1.0);
        assert!(parse_epoch("date: invalid").is_none());
    }
}
