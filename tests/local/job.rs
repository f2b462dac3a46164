//! `faultline job`, the chart's pod as its PID 1, through the built binary without a
//! cluster (issue 69, item 3): the journal on the "reports volume" holds a fault whose
//! undo runs on a node reached by a local `transport: exec`, slowly; the API is a closed
//! local port. A SIGTERM while the restore runs lets it finish and runs nothing after it;
//! one at the very start runs nothing either. The shell the pod ran before started the
//! run after a restore it had handed its only SIGTERM to.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Pod {
    dir: tempfile::TempDir,
}

impl Pod {
    /// The chart's mounts under a temporary root, and a journal with a kubelet stop whose
    /// undo (a kubelet start on `w1`, run here by `sh`) takes `undo_secs`.
    fn new(undo_secs: u32) -> Pod {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a port");
        for sub in [
            "etc/experiments",
            "etc/manifests",
            "etc/inventory",
            "reports",
        ] {
            std::fs::create_dir_all(d.join(sub)).expect("mkdir");
        }
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/experiments/lab/cordon-short.yaml"),
            d.join("etc/experiments/cordon-short.yaml"),
        )
        .expect("experiment");
        let kubeconfig = d.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    \
                 server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\n\
                 users:\n- name: u\n  user:\n    token: not-a-secret\ncontexts:\n- name: gone\n  \
                 context: {{cluster: gone, user: u}}\ncurrent-context: gone\n"
            ),
        )
        .expect("kubeconfig");
        let started = d.join("undo-started");
        let done = d.join("undo-done");
        std::fs::write(
            d.join("etc/inventory/inventory.yaml"),
            format!(
                "cluster:\n  name: gone\n  kubeconfig: {kc}\n  context: gone\n  \
                 discoverApiServers: false\ntransport: exec\nexec: [sh, -c, \"{{command}}\"]\n\
                 commands:\n  kubeletStart: \"touch {started}; sleep {undo_secs}; touch {done}\"\n\
                 nodes:\n  - {{name: w1, address: 127.0.0.1, roles: [worker]}}\n",
                kc = kubeconfig.display(),
                started = started.display(),
                done = done.display(),
            ),
        )
        .expect("inventory");
        std::fs::write(
            d.join("reports/journal.json"),
            r#"{"version":1,"faults":[{"id":"fl20261207000000000-1","cluster":"gone","node":"w1","fault":"kubelet-stop","undo":{"node":"kubelet-start"},"injectedAt":"2026-12-07T00:00:00Z","deadline":null,"armedRestore":null}]}"#,
        )
        .expect("journal");
        Pod { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `faultline job run` on this pod's mounts.
    fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_faultline"));
        cmd.args(["job", "run", "--config"])
            .arg(self.path("etc"))
            .arg("--reports")
            .arg(self.path("reports"))
            .env("POD_NAME", "p")
            .env_remove("FAULTLINE_PINNED")
            .env_remove("KUBECONFIG");
        cmd
    }

    fn start(&self) -> Child {
        self.command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("faultline job")
    }

    fn faults_left(&self) -> usize {
        let text = std::fs::read_to_string(self.path("reports/journal.json")).unwrap_or_default();
        text.matches("\"node\":").count()
    }
}

fn term(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}

/// The job's exit and everything it said, stdout then stderr.
fn ended(child: Child) -> (std::process::Output, String) {
    let out = child.wait_with_output().expect("ends");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, said)
}

fn wait_for(path: &Path, limit: Duration) {
    let began = Instant::now();
    while !path.exists() {
        assert!(began.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_sigterm_while_restoring_lets_the_restore_finish_and_runs_nothing_after_it() {
    let pod = Pod::new(3);
    let child = pod.start();
    wait_for(&pod.path("undo-started"), Duration::from_secs(20));
    term(&child);
    let (out, said) = ended(child);
    assert!(
        pod.path("undo-done").exists(),
        "the restore finished: {said}"
    );
    assert_eq!(pod.faults_left(), 0, "{said}");
    assert!(said.contains("faultline restore first"), "{said}");
    assert!(said.contains("nothing was run"), "{said}");
    assert!(
        !said.contains("starting: faultline run"),
        "no run was started: {said}"
    );
    assert_eq!(out.status.code(), Some(2), "{said}");
}

#[test]
fn a_sigterm_at_the_very_start_runs_nothing() {
    let pod = Pod::new(0);
    let child = pod.start();
    term(&child);
    let (out, said) = ended(child);
    // Before its listener: ended by the signal, having done nothing; after: it says so.
    assert_ne!(out.status.code(), Some(0), "{said}");
    assert!(
        !said.contains("starting: faultline run"),
        "no run was started: {said}"
    );
}

/// Issue 69, item 5: with the chart's `reports.persistence.enabled=false` the journal was
/// on an emptyDir and nothing said so. The Job says it before it runs.
#[test]
fn an_ephemeral_reports_volume_is_said_before_the_run() {
    let pod = Pod::new(0);
    std::fs::remove_file(pod.path("reports/journal.json")).expect("no journal");
    let out = pod
        .command()
        .env("FAULTLINE_REPORTS_EPHEMERAL", "true")
        .output()
        .expect("faultline job");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("the reports volume is an emptyDir"), "{said}");
    assert!(said.contains("dies with this pod"), "{said}");
}
