//! `plan` and `doctor` with an API server that does not answer (a kubeconfig pointing at a
//! closed local port; nothing is mocked, nothing answers): `plan` still prints the
//! experiment, offline, with the targets as selectors; `doctor` names the API and the
//! node it cannot reach and exits 1.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a port")
}

/// An inventory of three workers whose API and nodes are a closed port.
fn inventory(dir: &Path) -> std::path::PathBuf {
    let port = closed_port();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: not-a-secret\ncontexts:\n- name: gone\n  context: {{cluster: gone, user: u}}\ncurrent-context: gone\n"
        ),
    )
    .expect("kubeconfig");
    let inv = dir.join("inventory.yaml");
    std::fs::write(
        &inv,
        format!(
            "cluster:\n  name: gone\n  kubeconfig: {kc}\n  context: gone\n  discoverApiServers: false\n\
             profile: kubeadm\ntimers: {{nodeMonitorGracePeriod: 20s}}\n\
             ssh: {{port: {port}, connectTimeout: 1s, knownHosts: {dir}/known_hosts}}\n\
             nodes:\n  - {{name: w1, address: 127.0.0.1, roles: [worker]}}\n  - {{name: w2, address: 127.0.0.1, roles: [worker]}}\n  - {{name: cp1, address: 127.0.0.1, roles: [control-plane]}}\n",
            kc = kubeconfig.display(),
            dir = dir.display(),
        ),
    )
    .expect("inventory");
    inv
}

fn faultline(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(args)
        .env("FAULTLINE_JOURNAL", dir.join("journal.json"))
        .env_remove("KUBECONFIG")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("faultline runs")
}

#[test]
fn plan_without_an_api_prints_the_selectors_the_commands_and_the_assumed_timers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = inventory(dir.path());
    let out = faultline(
        &[
            "plan",
            "experiments/kubelet-stop-past-toleration.yaml",
            "-i",
            inv.to_str().expect("utf-8"),
        ],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "an offline plan is no error");
    assert!(text.contains("OFFLINE:"), "{text}");
    assert!(
        text.contains("victim: role worker, running pods of faultline-lab/statefulset/db, 1 node (resolved when the API is reachable; in the inventory: w1, w2)"),
        "{text}"
    );
    assert!(text.contains("w1: ssh root@127.0.0.1 -p "), "{text}");
    assert!(text.contains(": systemctl stop kubelet"), "{text}");
    assert!(
        text.contains("nodeMonitorGracePeriod 20s (inventory: timers.nodeMonitorGracePeriod"),
        "{text}"
    );
    assert!(
        text.contains("defaultUnreachableTolerationSeconds 5m (ASSUMED)\n")
            && text.contains("  (ASSUMED: upstream default"),
        "{text}"
    );
    // The grace period is the inventory's; the toleration of a step time is assumed.
    let start = text
        .lines()
        .find(|l| l.contains("start kubelet ("))
        .expect("start step");
    assert!(start.contains("[ASSUMED: toleration = 5m]"), "{start}");
}

#[test]
fn doctor_names_the_api_and_each_node_it_cannot_reach_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = inventory(dir.path());
    let out = faultline(
        &[
            "doctor",
            "-i",
            inv.to_str().expect("utf-8"),
            "--output",
            "json",
        ],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let findings = doc["findings"].as_array().expect("findings");
    let failed = |node: Option<&str>, check: &str| {
        findings.iter().any(|f| {
            f["status"] == "fail"
                && f["check"] == check
                && f.get("node").and_then(|n| n.as_str()) == node
        })
    };
    assert!(failed(None, "api"), "{text}");
    for node in ["w1", "w2", "cp1"] {
        assert!(failed(Some(node), "reachable"), "{node}: {text}");
    }
    assert_eq!(doc["failed"], true);
    assert_eq!(doc["timers"][1]["origin"], "inventory");
    assert_eq!(doc["timers"][0]["origin"], "assumed");

    let table = faultline(&["doctor", "-i", inv.to_str().expect("utf-8")], dir.path());
    let text = String::from_utf8_lossy(&table.stdout);
    assert_eq!(table.status.code(), Some(1));
    assert!(text.contains("FAIL cluster api: context gone"), "{text}");
    assert!(
        text.contains("FAIL w2 reachable: ssh root@127.0.0.1:"),
        "{text}"
    );
}

/// Issue 24: an experiment written node by node whose outages overlap in time (w1 down
/// from 0 s to 5 min, w2 from 1 min) is refused before any fault by `validate` and by an
/// offline `plan`, naming the steps and the interval; the file order alone would pass.
#[test]
fn overlapping_outages_written_node_by_node_are_refused_offline_with_the_interval() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = inventory(dir.path());
    let file = "fixtures/experiments/refused/overlapping-outages.yaml";
    let refusal = "steps `stop a` and `stop b` would have 2 nodes down at once (w1, w2) \
                   from +60.0s to +300.0s; the experiment allows 1.";

    let out = faultline(
        &["plan", file, "-i", inv.to_str().expect("utf-8")],
        dir.path(),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    println!("{stdout}\n{stderr}");
    assert_eq!(out.status.code(), Some(2), "a refused plan is an error");
    assert!(
        stderr.contains(&format!("overlapping-outages: refused: {refusal}")),
        "{stderr}"
    );
    assert!(stderr.contains("`safety.maxNodesDown`"), "{stderr}");
    assert!(!stdout.contains("plan for"), "no plan is printed: {stdout}");

    let out = faultline(&["validate", file], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains(&format!("overlapping-outages.yaml: refused: {refusal}")),
        "{stdout}"
    );
}

/// `sudo faultline restore`: HOME is root's, but the journal read is the invoking user's
/// (from the password database), and restore says which file it read.
#[test]
fn restore_under_sudo_reads_the_invoking_users_journal_and_says_which() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI runs as root: this test must run there"
        );
        println!("SKIP: needs root, as under sudo");
        return;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let Some(home) = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&"daemon")).then(|| f.get(5).map(|h| h.to_string()))?
    }) else {
        println!("SKIP: no user `daemon` in /etc/passwd");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = inventory(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(["restore", "--inventory"])
        .arg(&inv)
        .env_remove("FAULTLINE_JOURNAL")
        .env_remove("XDG_STATE_HOME")
        .env_remove("KUBECONFIG")
        .env("HOME", dir.path().join("root-home"))
        .env("SUDO_USER", "daemon")
        .env("SUDO_UID", "1")
        .env("SUDO_GID", "1")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("faultline runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let want = format!(
        "journal: {}/.local/state/faultline/journal.json (0 fault(s) for cluster gone; the \
         journal of daemon, who ran sudo)",
        home.trim_end_matches('/')
    );
    assert!(
        stdout.lines().any(|l| l == want),
        "wanted `{want}` in:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        !dir.path().join("root-home").exists(),
        "root's HOME untouched"
    );
}

/// Issue 46, item 2: two workers rebooted in turn, the second gated on the first being
/// Ready again after its reboot, are accepted by `validate` and an offline `plan` under
/// the default `safety.maxNodesDown: 1` (they were refused: "2 nodes down at once (w1,
/// w2) from +30.0s to +720.0s").
#[test]
fn a_rolling_reboot_gated_on_the_first_node_ready_again_is_accepted_offline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = inventory(dir.path());
    let file = "fixtures/experiments/valid/rolling-reboot-two-workers.yaml";

    let out = faultline(&["validate", file], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!stdout.contains("refused"), "{stdout}");

    let out = faultline(
        &["plan", file, "-i", inv.to_str().expect("utf-8")],
        dir.path(),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    println!("{stdout}\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("refused"), "{stderr}");
    assert!(stdout.contains("OFFLINE:"), "{stdout}");
}

/// Issue 46, item 1: a rolling step over a target that names its nodes is expanded for the
/// blast-radius check, one node at a time, and accepted under `safety.maxNodesDown: 1`;
/// the same step without `roll:` reboots every node at once and is refused. An offline
/// `plan` shows the roll as one step with its order.
#[test]
fn a_rolling_step_is_accepted_offline_where_the_same_step_without_roll_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = inventory(dir.path());
    let file = "fixtures/experiments/valid/rolling-reboot-every-worker.yaml";

    let out = faultline(&["validate", file], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");

    let text = std::fs::read_to_string(file).expect("fixture");
    let at_once = dir.path().join("at-once.yaml");
    std::fs::write(
        &at_once,
        text.replace("    roll: {order: name, settle: 30s, timeout: 10m}\n", ""),
    )
    .expect("write");
    let out = faultline(&["validate", at_once.to_str().expect("utf-8")], dir.path());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("would have 3 nodes down at once (w1, w2, w3)"),
        "{all}"
    );

    let out = faultline(
        &["plan", file, "-i", inv.to_str().expect("utf-8")],
        dir.path(),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("refused"), "{stderr}");
    assert!(
        stdout.contains(
            "rolls through `workers` one node at a time, by name; the next node once the one \
             before is Ready again + 30s, giving up after 600s"
        ),
        "{stdout}"
    );
}

/// Issue 46, item 1: a rolling step with a `sequence:` (drain, reboot, uncordon each
/// worker) is accepted by `validate` and an offline `plan` under `safety.maxNodesDown: 1`:
/// the blast-radius check expands it per node, each node's drain held until its own
/// uncordon and the next node gated on it. The same sequence without the uncordon is
/// refused at the drain's line and column; so is a second worker stopped while the first
/// is drained.
#[test]
fn a_rolling_sequence_is_accepted_offline_and_its_unrepaired_drain_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = inventory(dir.path());
    let file = "fixtures/experiments/valid/rolling-upgrade-sequence.yaml";

    let out = faultline(&["validate", file], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");

    let out = faultline(
        &["plan", file, "-i", inv.to_str().expect("utf-8")],
        dir.path(),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    println!("{stdout}\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("refused"), "{stderr}");
    assert!(stdout.contains("OFFLINE:"), "{stdout}");
    assert!(
        stdout.contains(
            "rolls through `workers` one node at a time, by name, doing drain → reboot → \
             uncordon to each; the next node once the one before is Ready again + 30s, giving \
             up after 600s"
        ),
        "{stdout}"
    );

    let text = std::fs::read_to_string(file).expect("fixture");
    let unrepaired = dir.path().join("unrepaired.yaml");
    std::fs::write(&unrepaired, text.replace("      - do: uncordon\n", "")).expect("write");
    let out = faultline(
        &["validate", unrepaired.to_str().expect("utf-8")],
        dir.path(),
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(
            "unrepaired.yaml:17:13: `do: drain` keeps its node down until `uncordon`, and no \
             later action of the sequence does that"
        ),
        "{all}"
    );

    let overlapping = dir.path().join("overlapping.yaml");
    std::fs::write(
        &overlapping,
        text.replace(
            "  - name: cordon after the roll\n",
            "  - {name: stop w2, at: 1m, do: kubelet-stop, target: other}\n  - name: cordon after the roll\n",
        )
        .replace("  workers: {names: [w2, w1]}\n", "  workers: {names: [w1]}\n  other: {names: [w2]}\n"),
    )
    .expect("write");
    let out = faultline(
        &["validate", overlapping.to_str().expect("utf-8")],
        dir.path(),
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("would have 2 nodes down at once (w1, w2)"),
        "{all}"
    );
}
