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

#[test]
fn run_writes_its_reports_under_out_and_still_takes_the_old_reports_spelling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (kc, port) = refusing_kubeconfig(dir.path());
    let inv = inventory(dir.path());
    for flag in ["--out", "--reports"] {
        let output = faultline(
            &[
                "run",
                EXPERIMENT,
                "-i",
                inv.to_str().expect("utf-8"),
                "--yes",
                flag,
                dir.path().join("reports").to_str().expect("utf-8"),
            ],
            dir.path(),
            Some(&kc),
        );
        let stderr = text(&output.stderr);
        // Parsed (no usage error): the run got as far as the API server.
        assert!(
            stderr.contains(&format!("API server https://127.0.0.1:{port}")),
            "{flag}: {stderr}"
        );
    }
}

#[test]
fn doctor_takes_dash_o_for_its_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (kc, _) = refusing_kubeconfig(dir.path());
    let inv = inventory(dir.path());
    let output = faultline(
        &["doctor", "-i", inv.to_str().expect("utf-8"), "-o", "json"],
        dir.path(),
        Some(&kc),
    );
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert!(doc.get("findings").is_some(), "{stdout}");
}

#[test]
fn report_takes_dash_o_and_the_old_format_spelling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = "fixtures/records/node-deleted.json";
    for flag in ["-o", "--output", "--format"] {
        let output = faultline(&["report", record, flag, "junit"], dir.path(), None);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{flag}: {}",
            text(&output.stderr)
        );
        roxmltree::Document::parse(&text(&output.stdout)).expect("JUnit on stdout");
    }
}

#[test]
fn report_renders_several_records_and_directories_into_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("rendered");
    let output = faultline(
        &[
            "report",
            "fixtures/records/node-deleted.json",
            "fixtures/records/upgrade/v1.33.13",
            "-o",
            "junit",
            "--out",
            out.to_str().expect("utf-8"),
        ],
        dir.path(),
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let mut written: Vec<String> = std::fs::read_dir(&out)
        .expect("the directory was made")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(
        written,
        [
            "kubelet-stop-within-toleration.junit.xml",
            "node-deleted.junit.xml",
            "power-off-within-toleration.junit.xml"
        ]
    );
    for name in &written {
        let xml = std::fs::read_to_string(out.join(name)).expect("readable");
        roxmltree::Document::parse(&xml).expect("well-formed JUnit");
    }
    // Several one-document reports cannot share stdout.
    let output = faultline(
        &["report", "fixtures/records/upgrade/v1.33.13", "-o", "json"],
        dir.path(),
        None,
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("pass --out DIR"),
        "{}",
        text(&output.stderr)
    );
    // The terminal summary of a directory is each record's, one after another.
    let output = faultline(
        &["report", "fixtures/records/upgrade/v1.33.13"],
        dir.path(),
        None,
    );
    assert_eq!(output.status.code(), Some(0));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("kubelet-stop-within-toleration")
            && stdout.contains("power-off-within-toleration"),
        "{stdout}"
    );
}

/// An experiment about an existing application: no setup, references without namespace
/// and one into kube-system.
fn experiment_without_setup(dir: &Path) -> PathBuf {
    let path = dir.join("shop.yaml");
    std::fs::write(
        &path,
        "name: shop-web\ndescription: the web pods of the shop\nnamespace: shop\n\
         targets:\n  victim: {role: worker, runningPodsOf: deployment/web, count: 1}\n\
         steps:\n  - {name: stop, at: 0s, do: kubelet-stop, target: victim}\n\
         expect:\n\
         \x20 - name: web pods go Terminating\n    pods: {workload: deployment/web, on: victim}\n    becomes: Terminating\n    within: 7m\n\
         \x20 - name: dns stays\n    pods: {workload: deployment/kube-system/coredns}\n    never: Terminating\n",
    )
    .expect("experiment");
    path
}

#[test]
fn namespace_flag_moves_the_experiments_namespace_and_refuses_what_it_cannot_move() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment_without_setup(dir.path());
    let exp = exp.to_str().expect("utf-8");
    for flag in ["-n", "--namespace"] {
        let output = faultline(&["plan", exp, flag, "shop-canary"], dir.path(), None);
        let stdout = text(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        assert!(
            stdout.contains("running pods of shop-canary/deployment/web"),
            "{flag}: {stdout}"
        );
        assert!(!stdout.contains(" shop/"), "{flag}: {stdout}");
    }
    // The shipped experiments create their namespace in setup: -n cannot move that.
    let output = faultline(&["plan", EXPERIMENT, "-n", "other"], dir.path(), None);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr)
            .contains("creates Namespace `faultline-lab` itself: with -n the run would create"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn plan_without_an_inventory_is_offline_with_assumed_timers_setup_and_teardown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = faultline(&["plan", EXPERIMENT], dir.path(), None);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        stdout
            .starts_with("plan for kubelet-stop-past-toleration, OFFLINE: no inventory (-i) given"),
        "{stdout}"
    );
    assert!(
        stdout.contains("nodeMonitorGracePeriod 50s (ASSUMED)\n")
            && stdout.contains("(ASSUMED: upstream default"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[ASSUMED: grace = 50s, toleration = 5m]"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "setup (server-side applied in this order, then waited for up to 180s to be ready):\n  Namespace faultline-lab (experiments/../fixtures/lab/00-namespace.yaml)\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  StatefulSet faultline-lab/db (experiments/../fixtures/lab/db-statefulset.yaml)\n"
        ),
        "{stdout}"
    );
    let teardown = stdout
        .split("teardown (deleted in reverse order, waited for to be gone):\n")
        .nth(1)
        .expect("a teardown section");
    assert!(
        teardown.starts_with("  DaemonSet faultline-lab/agent"),
        "reverse order: {teardown}"
    );
    assert!(
        stdout.contains("the command comes from the inventory (-i)"),
        "{stdout}"
    );
}

#[test]
fn plan_with_an_inventory_also_shows_setup_and_teardown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (kc, _) = refusing_kubeconfig(dir.path());
    let inv = inventory(dir.path());
    let output = faultline(
        &["plan", "experiments/", "-i", inv.to_str().expect("utf-8")],
        dir.path(),
        Some(&kc),
    );
    let stdout = text(&output.stdout);
    // Some shipped experiments cannot run on these three SSH nodes (no power command to
    // power a node on): the plan says so, and exits as a run would.
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        stdout.contains("step `power on` cannot run: no power command configured"),
        "{stdout}"
    );
    let plans = stdout.matches("plan for ").count();
    assert!(plans > 5, "{stdout}");
    assert_eq!(stdout.matches("\nsetup").count(), plans, "{stdout}");
    assert_eq!(stdout.matches("\nteardown").count(), plans, "{stdout}");
}

#[test]
fn completions_for_bash_zsh_and_fish_know_the_commands_and_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef faultline"),
        ("fish", "complete -c faultline"),
    ] {
        // fish names a long flag without its dashes (`-l kubeconfig`).
        let output = faultline(&["completion", shell], dir.path(), None);
        let script = text(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{shell}");
        assert!(script.contains(marker), "{shell}: {script}");
        for word in [
            "rehearse",
            "kubeconfig",
            "namespace",
            "output",
            "completion",
        ] {
            assert!(script.contains(word), "{shell} completes {word}");
        }
    }
}

#[test]
fn run_baseline_takes_compares_noise_floor_and_refuses_a_bad_one_before_anything_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let baseline = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/records/kubelet-stop-past-toleration.json");
    let baseline = baseline.to_str().expect("utf-8");
    let (output, left) = run_into(
        dir.path(),
        &["--baseline", baseline, "--noise-floor", "5 parsecs"],
        None,
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("noise-floor"), "names the flag:\n{stderr}");
    assert!(left.is_empty(), "no report may be written: {left:?}");
    assert!(
        stderr.contains("5 parsecs"),
        "the floor's own error:\n{stderr}"
    );
    // A good floor is taken: the run goes on to its next check (here: no kubeconfig).
    let (output, _) = run_into(
        dir.path(),
        &["--baseline", baseline, "--noise-floor", "2s"],
        None,
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(
        !stderr.contains("noise") && stderr.contains("kubeconfig"),
        "past the flags, stopped by the missing kubeconfig:\n{stderr}"
    );
    // Without --baseline it means nothing, and clap says so.
    let (output, _) = run_into(dir.path(), &["--noise-floor", "2s"], None);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("--baseline"), "{stderr}");
}
