//! Executor behaviour with the `exec` transport running real local commands through `sh -c`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::inventory::Inventory;

use super::deadline::{ending, with_node_deadline};
use super::sudo::sudo_refused;
use super::*;

/// Inventory whose "node" is this machine, reached through `sh -c`.
fn executor(extra_commands: &str) -> Executor {
    let text = format!(
        r#"
cluster: {{name: local}}
transport: exec
exec: [sh, -c, "{{command}}"]
commands:
  kubeletStop: echo stopping {{node}}
  kubeletStatus: echo inactive; exit 3
  reboot: kill -KILL $$
  powerOff: sleep 30
  partition: echo no iptables >&2; exit 4
  heal: sleep 30
{extra_commands}
power:
  on: [printf, "%s|%s", "{{node}}", "{{address}}"]
  status: [echo, "off"]
nodes:
  - name: n1
    address: "10.0.0.1; touch /tmp/faultline-pwned $(id)"
  - name: bare
    power: {{}}
"#
    );
    let inv = Inventory::parse(&text, Path::new("t.yaml")).unwrap_or_else(|e| panic!("{e}"));
    Executor::new(inv)
}

const T: Duration = Duration::from_secs(5);

#[tokio::test]
async fn runs_a_command_and_returns_its_output() {
    let ex = executor("");
    let out = ex.perform("n1", &NodeOp::KubeletStop, T).await.expect("ok");
    assert_eq!(out.exit_status, Some(0));
    assert_eq!(out.output, "stopping n1\n");
    assert!(!out.dropped);
}

#[tokio::test]
async fn substituted_address_is_one_word_not_code() {
    let ex = executor("  kubeletRestart: printf %s {address}");
    let out = ex
        .perform("n1", &NodeOp::KubeletRestart, T)
        .await
        .expect("ok");
    assert_eq!(out.output, "10.0.0.1; touch /tmp/faultline-pwned $(id)");
    // Run commands are trusted experiment text, used as written.
    let out = ex
        .perform("n1", &NodeOp::Run("printf %s {address}".into()), T)
        .await
        .expect("ok");
    assert_eq!(out.output, "{address}");
}

#[tokio::test]
async fn nonzero_exit_is_command_failed_with_output() {
    let ex = executor("");
    let err = ex
        .perform("n1", &NodeOp::Partition, T)
        .await
        .expect_err("exit 4");
    match err {
        ExecError::CommandFailed {
            exit_status,
            output,
            ..
        } => {
            assert_eq!(exit_status, Some(4));
            assert_eq!(output, "no iptables\n");
        }
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn status_nonzero_is_an_answer_not_an_error() {
    let ex = executor("");
    let out = ex
        .perform("n1", &NodeOp::KubeletStatus, T)
        .await
        .expect("answer");
    assert_eq!(out.exit_status, Some(3));
    assert_eq!(out.output.trim(), "inactive");
}

#[tokio::test]
async fn reboot_killing_the_session_is_success_dropped() {
    let ex = executor("");
    let out = ex
        .perform("n1", &NodeOp::Reboot, T)
        .await
        .expect("dropped is fine");
    assert!(out.dropped);
    assert_eq!(out.exit_status, None);
}

#[tokio::test]
async fn power_off_hanging_past_the_timeout_is_success_dropped() {
    let ex = executor("");
    let start = Instant::now();
    let out = ex
        .perform("n1", &NodeOp::PowerOff, Duration::from_millis(300))
        .await
        .expect("timeout after send is expected");
    assert!(out.dropped);
    // At its timeout, not when `sleep 30` ends (the margin is for a loaded machine).
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn other_ops_time_out_as_errors() {
    let ex = executor("");
    let start = Instant::now();
    let err = ex
        .perform("n1", &NodeOp::Heal, Duration::from_millis(300))
        .await
        .expect_err("timeout");
    assert!(matches!(err, ExecError::TimedOutEnded { .. }), "{err}");
    // At its timeout, not when `sleep 30` ends (the margin is for a loaded machine).
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_failing_reboot_command_is_still_an_error() {
    let ex = executor("");
    // command not found (127) is not a drop
    let ex2 = Executor::new(
        Inventory::parse(
            "cluster: {name: c}\ntransport: exec\nexec: [sh, -c, \"{command}\"]\ncommands: {reboot: no-such-reboot-cmd}\nnodes: [{name: n1}]\n",
            Path::new("t.yaml"),
        )
        .expect("valid"),
    );
    let err = ex2
        .perform("n1", &NodeOp::Reboot, T)
        .await
        .expect_err("127");
    assert!(
        matches!(
            err,
            ExecError::CommandFailed {
                exit_status: Some(127),
                ..
            }
        ),
        "{err}"
    );
    drop(ex);
}

#[tokio::test]
async fn unknown_node_and_missing_command_are_clear_errors() {
    let ex = executor("");
    let err = ex
        .perform("ghost", &NodeOp::KubeletStop, T)
        .await
        .expect_err("unknown");
    assert!(err.to_string().contains("not in the inventory"));
    let err = ex
        .perform("n1", &NodeOp::KubeletStart, T)
        .await
        .expect_err("none");
    assert!(err.to_string().contains("commands.kubeletStart"), "{err}");
}

#[tokio::test]
async fn power_argv_gets_values_verbatim_without_a_shell() {
    let ex = executor("");
    let out = ex.power("n1", PowerAction::On, T).await.expect("on");
    assert_eq!(out.output, "n1|10.0.0.1; touch /tmp/faultline-pwned $(id)");
    assert_eq!(
        ex.power_state("n1", T).await.expect("status"),
        PowerState::Off
    );
}

#[tokio::test]
async fn power_on_without_a_driver_says_ssh_cannot() {
    let text = "cluster: {name: c}\nnodes: [{name: n1}]\n";
    let ex = Executor::new(Inventory::parse(text, Path::new("t.yaml")).expect("valid"));
    let err = ex
        .power("n1", PowerAction::On, T)
        .await
        .expect_err("no power.on");
    assert!(
        err.to_string()
            .contains("SSH can turn a node off, never on: configure power.on"),
        "{err}"
    );
}

#[test]
fn describe_shows_the_transport_and_quotes_arguments() {
    let ex = executor("");
    assert_eq!(
        ex.describe("n1", &NodeOp::KubeletStop),
        "local: sh -c 'echo stopping n1'"
    );
    let text = "cluster: {name: c}\nssh: {user: core, sudo: true, passwordEnv: SECRET_PW}\n\
                commands: {kubeletStop: systemctl stop kubelet}\nnodes: [{name: n1, address: 192.0.2.1}]\n";
    let ex = Executor::new(Inventory::parse(text, Path::new("t.yaml")).expect("valid"));
    let shown = ex.describe("n1", &NodeOp::KubeletStop);
    assert_eq!(
        shown,
        "ssh core@192.0.2.1 -p 22: sudo -n sh -c 'systemctl stop kubelet'"
    );
    assert!(
        ex.describe("n9", &NodeOp::Reboot)
            .starts_with("cannot run:")
    );
}

#[test]
fn secrets_are_never_in_debug_or_describe() {
    // SAFETY-free: only this test uses this variable name.
    let text = "cluster: {name: c}\nssh: {passwordEnv: FAULTLINE_TEST_SECRET_PW}\n\
                commands: {reboot: reboot}\nnodes: [{name: n1}]\n";
    let ex = Executor::new(Inventory::parse(text, Path::new("t.yaml")).expect("valid"));
    let password = "hunter2-very-secret";
    // The executor never holds the password: only the variable name is stored.
    let debug = format!("{ex:?}");
    assert!(!debug.contains(password));
    assert!(debug.contains("FAULTLINE_TEST_SECRET_PW"));
    assert!(!ex.describe("n1", &NodeOp::Reboot).contains(password));
}

#[test]
fn power_state_is_read_from_status_output() {
    assert_eq!(PowerState::parse("running\n"), PowerState::On);
    assert_eq!(PowerState::parse("exited"), PowerState::Off);
}

#[tokio::test]
async fn armed_restore_runs_the_undo_by_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flag = dir.path().join("restored");
    let ex = executor("");
    let undo = touch(&flag);
    let armed = ex
        .arm_restore("n1", &undo, Duration::from_secs(1), "tok-1")
        .await
        .expect("armed");
    assert!(armed.pid.is_some());
    assert!(!flag.exists(), "not before the deadline");
    let deadline = Instant::now() + Duration::from_secs(6);
    while !flag.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(flag.exists(), "the node restored itself");
    // Already fired: disarm finds nothing carrying the token.
    assert!(!ex.disarm("n1", &armed).await.expect("disarm runs"));
}

#[tokio::test]
async fn disarm_cancels_the_restore_and_checks_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flag = dir.path().join("restored");
    let ex = executor("");
    let undo = touch(&flag);
    let armed = ex
        // Far enough out that the two disarms finish first on a loaded machine.
        .arm_restore("n1", &undo, Duration::from_secs(8), "tok-2")
        .await
        .expect("armed");
    let wrong = ArmedRestore {
        token: "other-token".into(),
        ..armed.clone()
    };
    assert!(
        !ex.disarm("n1", &wrong).await.expect("runs"),
        "wrong token: left alone"
    );
    assert!(
        ex.disarm("n1", &armed).await.expect("runs"),
        "right token: killed"
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!flag.exists(), "disarmed restore never ran");
}

#[tokio::test]
async fn hostile_tokens_are_refused() {
    let ex = executor("");
    for bad in ["", "a b", "x;rm", "$(id)", "a\nb"] {
        let err = ex
            .arm_restore("n1", &NodeOp::KubeletStart, Duration::from_secs(1), bad)
            .await
            .expect_err(bad);
        assert!(matches!(err, ExecError::Restore { .. }), "{err}");
    }
}

/// An undo that leaves a mark: `touch FLAG`, quoted.
fn touch(flag: &std::path::Path) -> NodeOp {
    NodeOp::Run(format!(
        "touch {}",
        render::quote(&flag.to_string_lossy()).expect("quotable path")
    ))
}

/// An inventory whose one node has `power:` exactly as given.
fn executor_with_power(power: &str) -> Executor {
    let text = format!(
        "cluster: {{name: c}}\ntransport: exec\nexec: [sh, -c, \"{{command}}\"]\n\
         commands: {{reboot: kill -KILL $$}}\npower: {power}\nnodes: [{{name: n1}}]\n"
    );
    Executor::new(Inventory::parse(&text, Path::new("t.yaml")).unwrap_or_else(|e| panic!("{e}")))
}

#[tokio::test]
async fn reboot_goes_out_of_band_when_the_inventory_has_power_reboot() {
    let ex = executor_with_power(r#"{reboot: [printf, "restarted %s", "{node}"]}"#);
    let out = ex
        .power("n1", PowerAction::Reboot, T)
        .await
        .expect("reboot");
    assert_eq!(out.output, "restarted n1");
    assert!(!out.dropped);
    assert!(
        ex.describe_power("n1", PowerAction::Reboot)
            .contains("local: printf")
    );
}

#[tokio::test]
async fn reboot_falls_back_to_the_in_band_command_without_power_reboot() {
    let ex = executor_with_power("{}");
    let out = ex
        .power("n1", PowerAction::Reboot, T)
        .await
        .expect("reboot");
    assert!(out.dropped, "the in-band reboot ends its session: {out:?}");
    assert!(
        ex.describe_power("n1", PowerAction::Reboot)
            .contains("kill -KILL")
    );
}

#[tokio::test]
async fn machine_address_is_read_with_whitespace_normalised() {
    let ex = executor_with_power(r#"{address: [printf, " 172.18.0.3  \n"]}"#);
    assert_eq!(
        ex.machine_address("n1", T)
            .await
            .expect("address")
            .as_deref(),
        Some("172.18.0.3")
    );
    let none = executor_with_power("{}");
    assert_eq!(
        none.machine_address("n1", T).await.expect("no command"),
        None
    );
    let failing = executor_with_power("{address: [sh, -c, 'exit 7']}");
    assert!(failing.machine_address("n1", T).await.is_err());
}

#[test]
fn describe_shows_jump_hosts_and_the_sudo_form() {
    let text = "cluster: {name: c}\nssh: {config: none, user: core, sudo: true, sudoPasswordEnv: SUDO_PW, \
                jump: 'admin@gw:2200,gw2'}\ncommands: {kubeletStop: systemctl stop kubelet}\n\
                nodes: [{name: n1, address: 192.0.2.1}]\n";
    let ex = Executor::new(Inventory::parse(text, Path::new("t.yaml")).expect("valid"));
    assert_eq!(
        ex.describe("n1", &NodeOp::KubeletStop),
        "ssh -J admin@gw:2200,core@gw2:22 core@192.0.2.1 -p 22: \
         sudo -S -p '' sh -c 'exec </dev/null; systemctl stop kubelet'"
    );
}

#[test]
fn sudo_complaints_become_errors_that_say_what_to_do() {
    let e = sudo_refused("n1", "core", None, "sudo: a password is required\n").expect("prompt");
    let text = e.to_string();
    assert!(text.contains("requires a password"), "{text}");
    assert!(
        text.contains("NOPASSWD") && text.contains("sudoPasswordEnv"),
        "{text}"
    );
    let e = sudo_refused(
        "n1",
        "core",
        Some("PW"),
        "Sorry, try again.\nsudo: no password was provided\nsudo: 1 incorrect password attempt\n",
    )
    .expect("refused");
    assert!(
        e.to_string().contains("refused the password from $PW"),
        "{e}"
    );
    let e = sudo_refused(
        "n1",
        "core",
        None,
        "sudo: core is not in the sudoers file.\n",
    )
    .expect("not allowed");
    assert!(e.to_string().contains("is not allowed"), "{e}");
    assert!(sudo_refused("n1", "core", None, "grep: no match\n").is_none());
    // A command that merely prints the words is not sudo talking.
    assert!(sudo_refused("n1", "core", None, "a password is required\n").is_none());
}

/// The undo of a power-off is armed where faultline runs: it runs `power.on` by itself at
/// its deadline, and a disarmed one never does.
#[tokio::test]
async fn a_power_on_armed_here_runs_by_itself_unless_disarmed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let on = |flag: &Path| {
        let text = format!(
            r#"
cluster: {{name: local}}
transport: exec
exec: [sh, -c, "{{command}}"]
power:
  on: [touch, "{}"]
nodes:
  - name: n1
"#,
            flag.display()
        );
        Executor::new(
            Inventory::parse(&text, Path::new("t.yaml")).unwrap_or_else(|e| panic!("{e}")),
        )
    };
    let fired = dir.path().join("fired");
    let ex = on(&fired);
    let armed = ex
        .arm_power_on("n1", Duration::from_secs(1), "tok-on-1")
        .await
        .expect("arms")
        .expect("power.on is configured");
    assert!(armed.local && armed.pid.is_some(), "{armed:?}");
    let deadline = Instant::now() + Duration::from_secs(6);
    while !fired.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(fired.exists(), "powered on by itself");

    let kept = dir.path().join("kept");
    let ex = on(&kept);
    let armed = ex
        .arm_power_on("n1", Duration::from_secs(8), "tok-on-2")
        .await
        .expect("arms")
        .expect("configured");
    // 8 s leaves the disarm time on a loaded machine (at 2 s it lost the race at load 10).
    assert!(ex.disarm("n1", &armed).await.expect("runs"), "disarmed");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!kept.exists(), "a disarmed power-on never ran");
}

/// The peak resident memory of this test process (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
        * 1024
}

#[tokio::test]
async fn a_flood_of_output_is_capped_as_it_streams_not_after() {
    let ex = executor("");
    let before = peak_rss();
    let out = ex
        .perform(
            "n1",
            &NodeOp::Run("head -c 200000000 /dev/zero; echo; echo the end >&2".into()),
            Duration::from_secs(60),
        )
        .await
        .expect("runs");
    let grew = peak_rss().saturating_sub(before);
    assert!(out.output.len() <= MAX_OUTPUT + 40, "{}", out.output.len());
    assert!(
        out.output.starts_with("[199995913 bytes cut]"),
        "says how much was cut: {}",
        &out.output[..40]
    );
    assert!(out.output.ends_with("the end\n"), "keeps the tail");
    assert!(
        grew < 64 << 20,
        "200 MB of output made the process grow by {} MB",
        grew >> 20
    );
}

/// An exec transport like `docker exec`: the command runs in a process the local client
/// does not own (a new session), so killing the client does not end it.
fn remote_like_executor() -> Executor {
    let text = "cluster: {name: c}\ntransport: exec\n\
                exec: [sh, -c, 'setsid sh -c \"$0\" & wait $!', \"{command}\"]\n\
                nodes: [{name: n1}]\n";
    Executor::new(Inventory::parse(text, Path::new("t.yaml")).unwrap_or_else(|e| panic!("{e}")))
}

#[tokio::test]
async fn a_timed_out_command_is_ended_on_the_node_not_only_locally() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flag = dir.path().join("late");
    let ex = remote_like_executor();
    let start = Instant::now();
    let cmd = format!(
        "sleep 8; touch {}",
        render::quote(&flag.to_string_lossy()).expect("quotable")
    );
    let err = ex
        .perform("n1", &NodeOp::Run(cmd), Duration::from_secs(1))
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
        "the command went on after perform returned its timeout"
    );
}

#[tokio::test]
async fn a_timed_out_local_power_command_is_ended_with_its_children() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flag = dir.path().join("late");
    let ex = executor_with_power(&format!(
        "{{on: [sh, -c, '(sleep 8; touch \"$0\") & wait', '{}']}}",
        flag.display()
    ));
    let start = Instant::now();
    let err = ex
        .power("n1", PowerAction::On, Duration::from_secs(1))
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
    assert!(!flag.exists(), "a child of the power command went on");
}

/// A fake `iptables` for the profiles' partition and heal: the rule table is the file
/// `$FAKE_IPT/rules`, one rule a line; `$FAKE_IPT/mode` makes it refuse as a real one does
/// while another program holds the xtables lock: `locked` (every call, `-w` or not),
/// `busy` (calls without `-w`), `refuse-delete` (deletes only; `-C` still answers).
const FAKE_IPTABLES: &str = r#"#!/bin/sh
d=$FAKE_IPT
wait=no
op=
rule=
while [ $# -gt 0 ]; do
  case $1 in
    -w) wait=yes; case ${2:-} in [0-9]*) shift ;; esac ;;
    -I|-A|-D|-C) op=$1 ;;
    *) rule="$rule $1" ;;
  esac
  shift
done
rule=${rule# }
mode=$(cat "$d/mode" 2>/dev/null)
locked() {
  echo "Another app is currently holding the xtables lock. Perhaps you want to use the -w option?" >&2
  exit 4
}
case $mode in
  locked) locked ;;
  busy) [ "$wait" = yes ] || locked ;;
  refuse-delete) [ "$op" = -D ] && locked ;;
esac
touch "$d/rules"
absent() {
  echo "iptables: Bad rule (does a matching rule exist in that chain?)." >&2
  exit 1
}
case $op in
  -I|-A) echo "$rule" >>"$d/rules" ;;
  -C) grep -qxF -- "$rule" "$d/rules" || absent ;;
  -D)
    grep -qxF -- "$rule" "$d/rules" || absent
    awk -v r="$rule" '!gone && $0 == r { gone = 1; next } { print }' "$d/rules" >"$d/rules.new"
    mv "$d/rules.new" "$d/rules" ;;
esac
"#;

/// A node of `profile` whose commands run here, with the fake `iptables` first on PATH.
fn node_with_fake_iptables(profile: &str, dir: &Path) -> Executor {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    std::fs::write(bin.join("iptables"), FAKE_IPTABLES).expect("fake iptables");
    std::fs::set_permissions(bin.join("iptables"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let text = format!(
        "cluster: {{name: c}}\nprofile: {profile}\nnodes:\n  - name: n1\n    transport: exec\n    \
         exec: [env, 'PATH={bin}:/usr/bin:/bin', 'FAKE_IPT={dir}', sh, -c, '{{command}}']\n",
        bin = bin.display(),
        dir = dir.display(),
    );
    Executor::new(Inventory::parse(&text, Path::new("t.yaml")).unwrap_or_else(|e| panic!("{e}")))
}

#[tokio::test]
async fn every_profiles_heal_fails_while_the_partition_rule_stays() {
    for profile in crate::inventory::ProfileName::ALL {
        let name = profile.to_string();
        let dir = tempfile::tempdir().expect("tempdir");
        let ex = node_with_fake_iptables(&name, dir.path());
        let rules = || std::fs::read_to_string(dir.path().join("rules")).unwrap_or_default();
        let mode = |m: &str| std::fs::write(dir.path().join("mode"), m).expect("mode");

        // Two copies (a partition applied twice): heal deletes both.
        for _ in 0..2 {
            ex.perform("n1", &NodeOp::Partition, T)
                .await
                .unwrap_or_else(|e| panic!("{name}: partition: {e}"));
        }
        assert_eq!(rules().lines().count(), 2, "{name}");
        ex.perform("n1", &NodeOp::Heal, T)
            .await
            .unwrap_or_else(|e| panic!("{name}: heal: {e}"));
        assert_eq!(rules(), "", "{name}: every copy deleted");
        // Nothing to heal is not an error.
        ex.perform("n1", &NodeOp::Heal, T)
            .await
            .unwrap_or_else(|e| panic!("{name}: heal again: {e}"));

        // The lock is busy for a moment: `-w` waits for it.
        ex.perform("n1", &NodeOp::Partition, T)
            .await
            .unwrap_or_else(|e| panic!("{name}: partition: {e}"));
        mode("busy");
        ex.perform("n1", &NodeOp::Heal, T)
            .await
            .unwrap_or_else(|e| panic!("{name}: heal waits for the lock: {e}"));
        assert_eq!(rules(), "", "{name}");

        // Deletes refused: the rule stays, and heal says so.
        mode("");
        ex.perform("n1", &NodeOp::Partition, T)
            .await
            .unwrap_or_else(|e| panic!("{name}: partition: {e}"));
        mode("refuse-delete");
        let err = ex
            .perform("n1", &NodeOp::Heal, T)
            .await
            .expect_err("heal must fail while the rule stays");
        assert!(
            matches!(err, ExecError::CommandFailed { .. })
                && err.to_string().contains("still in OUTPUT"),
            "{name}: {err}"
        );
        assert_eq!(
            rules().lines().count(),
            1,
            "{name}: the rule is still there"
        );

        // iptables answers nothing at all: heal cannot know, so it fails.
        mode("locked");
        let err = ex
            .perform("n1", &NodeOp::Heal, T)
            .await
            .expect_err("heal must fail when it cannot check");
        assert!(err.to_string().contains("xtables lock"), "{name}: {err}");
    }
}

#[tokio::test]
async fn a_client_that_cannot_say_the_command_ended_is_a_distinct_error() {
    // The command ends on the "node" at its deadline, but the local client hangs on.
    let text = "cluster: {name: c}\ntransport: exec\n\
                exec: [sh, -c, 'sh -c \"$0\"; sleep 60', \"{command}\"]\n\
                nodes: [{name: n1}]\n";
    let ex = Executor::new(Inventory::parse(text, Path::new("t.yaml")).expect("valid"));
    let limit = Duration::from_secs(1);
    let start = Instant::now();
    let err = ex
        .perform("n1", &NodeOp::Run("sleep 30".into()), limit)
        .await
        .expect_err("times out");
    assert!(
        matches!(err, ExecError::TimedOutUnconfirmed { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("could not be confirmed"), "{err}");
    assert!(
        start.elapsed() <= Executor::longest_wait(limit),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn the_node_deadline_is_whole_seconds_and_huge_limits_do_not_overflow() {
    for (limit, secs) in [(300, 1), (1000, 1), (2500, 3)] {
        let text =
            with_node_deadline("echo 'a b'", Duration::from_millis(limit), None).expect("renders");
        assert!(
            text.starts_with(&format!("exec timeout -k {KILL_AFTER_SECS} {secs} sh -c ")),
            "{text}"
        );
    }
    assert_eq!(
        Executor::longest_wait(Duration::from_secs(10)),
        Duration::from_secs(10 + 10 + KILL_AFTER_SECS + 2 + 3 + 3)
    );
    assert_eq!(Executor::longest_wait(Duration::MAX), Duration::MAX);
    assert!(with_node_deadline("true", Duration::MAX, None).is_ok());
}

/// A command the watcher gave up on before it was sent (reaching the node took the whole
/// limit) is not said to have run; one that ran and was ended still says it did not finish.
/// (The moment between connecting and sending is too narrow to hit from a test.)
#[test]
fn a_command_its_timeout_ended_before_it_started_is_not_said_to_have_run() {
    let err = |started| ExecError::TimedOutEnded {
        node: "n1".into(),
        command: "systemctl stop kubelet".into(),
        after: Duration::from_secs(30),
        started,
    };
    let never = err(false).to_string();
    assert_eq!(
        never,
        "node `n1`: `systemctl stop kubelet` was ended by its timeout after 30s, before it started: reaching the node took all of that time, and nothing ran there"
    );
    let ran = err(true).to_string();
    assert!(
        ran.contains("did not finish within 30s; it was ended by its timeout"),
        "{ran}"
    );
}

#[tokio::test]
async fn every_profiles_heal_deletes_its_own_runs_partition_and_no_other() {
    for profile in crate::inventory::ProfileName::ALL {
        let name = profile.to_string();
        let dir = tempfile::tempdir().expect("tempdir");
        let node = node_with_fake_iptables(&name, dir.path());
        let (ours, theirs) = (
            node.clone().for_run("fl20261129090000001"),
            node.for_run("fl20261129090000002"),
        );
        let rules = || std::fs::read_to_string(dir.path().join("rules")).unwrap_or_default();
        for run in [&ours, &theirs] {
            run.perform("n1", &NodeOp::Partition, T)
                .await
                .unwrap_or_else(|e| panic!("{name}: partition: {e}"));
        }
        ours.perform("n1", &NodeOp::Heal, T)
            .await
            .unwrap_or_else(|e| panic!("{name}: heal: {e}"));
        let left = rules();
        assert_eq!(left.lines().count(), 1, "{name}: {left}");
        assert!(
            left.contains("faultline-partition-fl20261129090000002"),
            "{name}: the other run's rule stays: {left}"
        );
        theirs
            .perform("n1", &NodeOp::Heal, T)
            .await
            .unwrap_or_else(|e| panic!("{name}: heal: {e}"));
        assert_eq!(rules(), "", "{name}");
    }
}

#[test]
fn a_command_planned_outside_a_run_names_no_run_of_its_own() {
    let ex = node_with_fake_iptables("kubeadm", Path::new("/nonexistent"));
    let shown = ex.command_of("n1", &NodeOp::Partition).expect("configured");
    assert!(shown.contains("faultline-partition-'<run id>'"), "{shown}");
    let run = ex.for_run("fl1").command_of("n1", &NodeOp::Partition);
    assert!(
        run.expect("configured")
            .contains("faultline-partition-fl1 ")
    );
}

/// Issue 69, item 2: a command a stop cut short went on running on the node until its
/// deadline (closing a session does not stop a remote shell). Every command of a run
/// now carries the run's mark, and the run's ending text ends exactly those, their whole
/// process group included, and not another run's.
#[test]
fn a_runs_ending_ends_its_own_marked_commands_and_no_others() {
    let gone = |pattern: &str| {
        !std::process::Command::new("pgrep")
            .args(["-f", pattern])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("pgrep")
            .success()
    };
    let start = |run: &str, secs: u32| {
        let text = with_node_deadline(
            &format!("sleep {secs}; true"),
            Duration::from_secs(600),
            Some(run),
        )
        .expect("renders");
        assert!(text.ends_with(&format!("'faultline-run={run}'")), "{text}");
        std::process::Command::new("sh")
            .args(["-c", &text])
            .spawn()
            .expect("spawn")
    };
    // Names and durations of this process only: another copy of this test running on the
    // same machine (a second checkout's suite) must not see these, nor end them.
    let pid = std::process::id();
    let (run1, run2) = (format!("flcut1x{pid}"), format!("flcut2x{pid}"));
    let (secs1, secs2) = (40_000 + 2 * (pid % 10_000), 40_001 + 2 * (pid % 10_000));
    let (sleep1, sleep2) = (format!("sleep {secs1}"), format!("sleep {secs2}"));
    let mut mine = start(&run1, secs1);
    let mut other = start(&run2, secs2);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!gone(&sleep1) && !gone(&sleep2), "both run");
    let began = Instant::now();
    let ended = std::process::Command::new("sh")
        .args(["-c", &ending(&run1).expect("renders")])
        .status()
        .expect("ending");
    assert!(ended.success(), "the ending says none is left");
    assert!(
        began.elapsed() < Duration::from_secs(8),
        "{:?}",
        began.elapsed()
    );
    let status = mine.wait().expect("wait");
    assert!(!status.success(), "ended by a signal: {status:?}");
    assert!(gone(&sleep1), "its command, a grandchild, is gone too");
    assert!(!gone(&sleep2), "another run's command is left alone");
    // Ending a run with nothing left is a success, and does not end itself.
    assert!(
        std::process::Command::new("sh")
            .args(["-c", &ending(&run1).expect("renders")])
            .status()
            .expect("again")
            .success()
    );
    let _ = other.kill();
    let _ = std::process::Command::new("pkill")
        .args(["-f", &sleep2])
        .status();
    let _ = other.wait();
}
