//! The command line as a user meets it, through the built binary: configuration mistakes
//! are one line and exit 2 (never a report of failed tests), the flags follow kubectl's
//! conventions, `plan` works without an inventory, and completions are generated.
//!
//! Nothing is mocked: a cluster that is not there is a kubeconfig that does not exist, a
//! context it does not have, or a server on a closed local port, which refuses at once.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXPERIMENT: &str = "experiments/kubelet-stop-past-toleration.yaml";

fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a port")
}

/// A kubeconfig whose one context, `gone`, points at a closed local port.
fn refusing_kubeconfig(dir: &Path) -> (PathBuf, u16) {
    let port = closed_port();
    let path = dir.join("refusing.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: not-a-secret\ncontexts:\n- name: gone\n  context: {{cluster: gone, user: u}}\ncurrent-context: gone\n"
        ),
    )
    .expect("kubeconfig");
    (path, port)
}

/// An inventory that names no kubeconfig (KUBECONFIG or the flags choose it) and whose
/// nodes are a closed port.
fn inventory(dir: &Path) -> PathBuf {
    let path = dir.join("inventory.yaml");
    std::fs::write(
        &path,
        format!(
            "cluster:\n  name: gone\n  discoverApiServers: false\nprofile: kubeadm\n\
             ssh: {{port: {port}, connectTimeout: 1s, knownHosts: {dir}/known_hosts}}\n\
             nodes:\n  - {{name: w1, address: 127.0.0.1, roles: [worker]}}\n  - {{name: w2, address: 127.0.0.1, roles: [worker]}}\n  - {{name: cp1, address: 127.0.0.1, roles: [control-plane]}}\n",
            port = closed_port(),
            dir = dir.display(),
        ),
    )
    .expect("inventory");
    path
}

/// Runs the binary from the repository root with a private journal and home, and
/// `KUBECONFIG` as given (unset for `None`).
fn faultline(args: &[&str], dir: &Path, kubeconfig_env: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_faultline"));
    cmd.args(args)
        .env("FAULTLINE_JOURNAL", dir.join("journal.json"))
        .env("HOME", dir.join("home"))
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("FAULTLINE_INVENTORY")
        .env_remove("FAULTLINE_LOG")
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if let Some(kc) = kubeconfig_env {
        cmd.env("KUBECONFIG", kc);
    }
    cmd.output().expect("faultline runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `run --yes` with every report flag pointing into `dir/out`; returns the output and
/// what it left there.
fn run_into(dir: &Path, extra: &[&str], kubeconfig_env: Option<&Path>) -> (Output, Vec<String>) {
    let inv = inventory(dir);
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).expect("out dir");
    let reports = out_dir.join("reports");
    let events = out_dir.join("events.jsonl");
    let summary = out_dir.join("summary.md");
    let mut args = vec![
        "run",
        EXPERIMENT,
        "-i",
        inv.to_str().expect("utf-8"),
        "--yes",
        "--reports",
        reports.to_str().expect("utf-8"),
        "--events",
        events.to_str().expect("utf-8"),
        "--summary",
        summary.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    let output = faultline(&args, dir, kubeconfig_env);
    let left = walk(&out_dir);
    (output, left)
}

fn walk(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("readable").flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path.display().to_string());
        }
    }
    found
}

/// Exit 2, one line on stderr containing every `needle`, nothing on stdout, no file written.
fn assert_one_line_error(output: &Output, left: &[String], needles: &[&str]) {
    let stderr = text(&output.stderr);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(2),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} in:\n{stderr}");
    }
    assert!(stdout.is_empty(), "nothing on stdout, got:\n{stdout}");
    assert!(left.is_empty(), "no report may be written: {left:?}");
}

#[test]
fn a_missing_kubeconfig_is_one_line_naming_it_and_no_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-kubeconfig");
    let (output, left) = run_into(dir.path(), &[], Some(&missing));
    assert_one_line_error(
        &output,
        &left,
        &[
            missing.to_str().expect("utf-8"),
            "KUBECONFIG",
            "does not exist",
        ],
    );
}

#[test]
fn no_kubeconfig_anywhere_is_one_line_saying_what_to_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (output, left) = run_into(dir.path(), &[], None);
    assert_one_line_error(
        &output,
        &left,
        &["no kubeconfig", ".kube/config", "--kubeconfig"],
    );
}

#[test]
fn a_refusing_api_server_is_one_line_naming_the_server_and_no_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (kc, port) = refusing_kubeconfig(dir.path());
    let (output, left) = run_into(dir.path(), &[], Some(&kc));
    let server = format!("https://127.0.0.1:{port}");
    assert_one_line_error(&output, &left, &[&server, "context `gone`", "refused"]);
}

#[test]
fn a_context_the_kubeconfig_lacks_is_one_line_naming_it_and_no_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (kc, _) = refusing_kubeconfig(dir.path());
    let kc_flag = kc.to_str().expect("utf-8").to_string();
    let (output, left) = run_into(
        dir.path(),
        &["--kubeconfig", &kc_flag, "--context", "nope"],
        None,
    );
    assert_one_line_error(
        &output,
        &left,
        &["context `nope`", "--context", &kc_flag, "it has: gone"],
    );
}

#[test]
fn an_unreadable_inventory_is_one_line_and_no_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&out_dir).expect("out dir");
    let reports = out_dir.join("reports");
    let missing = dir.path().join("no-inventory.yaml");
    let output = faultline(
        &[
            "run",
            EXPERIMENT,
            "-i",
            missing.to_str().expect("utf-8"),
            "--yes",
            "--reports",
            reports.to_str().expect("utf-8"),
        ],
        dir.path(),
        None,
    );
    assert_one_line_error(
        &output,
        &walk(&out_dir),
        &[missing.to_str().expect("utf-8"), "cannot read inventory"],
    );
}
