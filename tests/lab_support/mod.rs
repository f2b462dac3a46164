//! Shared helpers for the end-to-end tests on the lab: run the real `faultline` binary
//! against the lab's inventory, read what it wrote, and look at the cluster with a real
//! client. The tests using these are `#[ignore]`d; `ci/test` runs them after `ci/lab/up`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;

/// The lab's output directory (`ci/lab/up` writes `target/lab`).
pub fn lab_dir() -> PathBuf {
    PathBuf::from(
        std::env::var_os("FAULTLINE_LAB_DIR")
            .expect("FAULTLINE_LAB_DIR must point at the lab's output directory (target/lab)"),
    )
}

/// The inventory the lab generated.
pub fn inventory() -> PathBuf {
    lab_dir().join("inventory.yaml")
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A directory for one test's reports and journal, kept after the test under
/// `target/lab-reports/` so a failure in CI can be read afterwards.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// A new, empty directory named after the time it was made and the test process (the
    /// lab's and kind's suites run side by side in ci/test).
    pub fn new() -> Self {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3f");
        let dir = repo()
            .join("target/lab-reports")
            .join(format!("{stamp}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the report directory");
        println!("reports and journal of this test: {}", dir.display());
        Scratch { dir }
    }
    /// Where reports go.
    pub fn reports(&self) -> PathBuf {
        self.dir.join("reports")
    }
    /// The fault journal of this test.
    pub fn journal(&self) -> PathBuf {
        self.dir.join("journal.json")
    }
    /// A command running `faultline <args>` with this scratch's journal.
    pub fn faultline(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_faultline"));
        cmd.args(args)
            .env("FAULTLINE_JOURNAL", self.journal())
            .env("FAULTLINE_INVENTORY", inventory())
            .current_dir(repo());
        cmd
    }
    /// `bash -c SCRIPT` with `$0` the faultline binary, in the repository, with this
    /// scratch's journal and the lab's inventory: a pipeline as a user types it.
    pub fn piped(&self, script: &str) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(script)
            .arg(env!("CARGO_BIN_EXE_faultline"))
            .env("FAULTLINE_JOURNAL", self.journal())
            .env("FAULTLINE_INVENTORY", inventory())
            .current_dir(repo());
        cmd
    }
    /// The arguments of `faultline run --yes` for one experiment, reporting here.
    fn run_args(&self, experiment: &str, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = ["run", experiment, "--yes", "--reports"]
            .iter()
            .map(|a| a.to_string())
            .collect();
        args.push(self.reports().display().to_string());
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    }
    /// `faultline run --yes` of one experiment; waits for it and echoes its output.
    pub fn run(&self, experiment: &str, extra: &[&str]) -> Output {
        let args = self.run_args(experiment, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.faultline(&args).output().expect("run faultline");
        echo(&out);
        out
    }
    /// `faultline conformance --yes` of a suite (experiment paths), as [`Scratch::run`] runs
    /// one experiment: the report `conformance.md` lands in [`Scratch::reports`].
    pub fn conformance(&self, suite: &str, extra: &[&str]) -> Output {
        let mut args = self.run_args(suite, extra);
        args[0] = "conformance".to_string();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.faultline(&args).output().expect("run faultline");
        echo(&out);
        out
    }
    /// `faultline run --yes` started in the background (for signal tests).
    pub fn spawn(&self, experiment: &str, extra: &[&str]) -> Child {
        let args = self.run_args(experiment, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.faultline(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn faultline")
    }
    /// Starts `faultline run` in the background and returns once it has printed that
    /// `step` was issued, plus three seconds for the fault to land.
    pub async fn spawn_until_step(&self, experiment: &str, extra: &[&str], step: &str) -> Child {
        let mut child = self.spawn(experiment, extra);
        // The live line of the issue itself, not the schedule's "next: step …" line.
        let named = format!("step `{step}` ");
        let issued = move |line: &str| line.contains(&named) && line.ends_with(" issued");
        assert!(
            wait_for(&mut child, issued, Duration::from_secs(120)),
            "step `{step}` was never issued"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        child
    }
    /// Starts `faultline run`, waits until `step` is issued (and has landed), then kills
    /// faultline with SIGKILL: no chance to undo anything or clean up.
    pub async fn kill_9_after_step(&self, experiment: &str, extra: &[&str], step: &str) {
        let mut child = self.spawn_until_step(experiment, extra, step).await;
        child.kill().expect("kill -9");
        let _ = child.wait();
    }
    /// `faultline restore` exits 0, and a second one finds nothing left to restore.
    pub fn restore_leaves_nothing(&self) {
        let out = self.faultline(&["restore"]).output().expect("restore");
        echo(&out);
        assert_eq!(out.status.code(), Some(0));
        let again = self.faultline(&["restore"]).output().expect("restore");
        assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to restore"));
    }
    /// A copy of the lab's inventory whose kubeconfig is `kubeconfig` (e.g. one that goes
    /// through a control-plane node's own API server).
    pub fn inventory_through(&self, kubeconfig: &Path) -> PathBuf {
        let text = std::fs::read_to_string(inventory()).expect("the lab's inventory");
        let swapped: Vec<String> = text
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("kubeconfig:") {
                    format!("  kubeconfig: {}", kubeconfig.display())
                } else {
                    l.to_string()
                }
            })
            .collect();
        assert!(
            swapped
                .iter()
                .any(|l| l.contains(&*kubeconfig.to_string_lossy()))
        );
        let path = self.dir.join("inventory.yaml");
        std::fs::write(&path, swapped.join("\n") + "\n").expect("write the inventory");
        path
    }
    /// The lab's inventory without `commands.kubeletUnit`: the kubelet's service manager
    /// cannot be asked, as with a supervisor that is not systemd, so `doctor` and the
    /// pre-flight checks cannot see a restart policy and only the fault's proof can.
    pub fn inventory_without_kubelet_unit(&self) -> PathBuf {
        let text = std::fs::read_to_string(inventory()).expect("the lab's inventory");
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("kubeletUnit:"))
            .collect();
        assert!(
            kept.len() < text.lines().count(),
            "the lab's inventory names kubeletUnit"
        );
        let path = self.dir.join("inventory-no-unit.yaml");
        std::fs::write(&path, kept.join("\n") + "\n").expect("write the inventory");
        path
    }
    /// A copy of the lab's inventory in which `node` is reached at `address` (e.g. one
    /// nothing answers at), for tests of a node faultline cannot reach.
    pub fn inventory_with_address(&self, node: &str, address: &str) -> PathBuf {
        let text = std::fs::read_to_string(inventory()).expect("the lab's inventory");
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let at = lines
            .iter()
            .position(|l| l.trim() == format!("- name: {node}"))
            .unwrap_or_else(|| panic!("{node} is not in the lab's inventory"));
        let address_line = lines[at + 1..]
            .iter()
            .position(|l| l.trim_start().starts_with("address:"))
            .map(|i| at + 1 + i)
            .expect("the node's address line");
        lines[address_line] = format!("    address: {address}");
        let path = self.dir.join("inventory.yaml");
        std::fs::write(&path, lines.join("\n") + "\n").expect("write the inventory");
        path
    }
    /// A copy of the lab's inventory that names a Prometheus server for the abort
    /// conditions' queries.
    pub fn inventory_with_prometheus(&self, url: &str) -> PathBuf {
        let text = std::fs::read_to_string(inventory()).expect("the lab's inventory");
        let with = text.replacen(
            "nodes:\n",
            &format!("prometheus: {{url: {url}}}\nnodes:\n"),
            1,
        );
        assert_ne!(with, text, "the inventory has a nodes: list");
        let path = self.dir.join("inventory-prometheus.yaml");
        std::fs::write(&path, with).expect("write the inventory");
        path
    }
    /// `faultline run --yes` started in the background, its output lines (echoed) sent to
    /// the returned receiver as they come.
    pub fn spawn_lines(
        &self,
        experiment: &str,
        extra: &[&str],
    ) -> (Child, std::sync::mpsc::Receiver<String>) {
        use std::io::{BufRead, BufReader};
        let mut child = self.spawn(experiment, extra);
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                println!("{line}");
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        (child, rx)
    }
    /// The JUnit file a run of `name` wrote.
    pub fn junit(&self, name: &str) -> String {
        std::fs::read_to_string(self.reports().join(format!("{name}.junit.xml")))
            .expect("junit file written")
    }
    /// The run record a run of `name` wrote.
    pub fn record(&self, name: &str) -> faultline::record::RunRecord {
        faultline::record::RunRecord::load(&self.reports().join(format!("{name}.json")))
            .expect("run record written")
    }
}

/// The longest observation gap (Began → Ended of one source) that ended after `from`.
pub fn longest_gap_after(timeline: &faultline::timeline::Timeline, from: i64) -> i64 {
    use faultline::timeline::{Event, GapPhase};
    let mut open: Vec<(String, i64)> = Vec::new();
    let mut longest = 0;
    for e in &timeline.entries {
        if let Event::Gap { source, phase, .. } = &e.event {
            match phase {
                GapPhase::Began => open.push((source.clone(), e.offset_ms)),
                GapPhase::Ended => {
                    if let Some(i) = open.iter().position(|(s, _)| s == source) {
                        let (_, began) = open.remove(i);
                        if e.offset_ms > from {
                            longest = longest.max(e.offset_ms - began);
                        }
                    }
                }
            }
        }
    }
    longest
}

/// Prints a finished command's output so a failing test shows what faultline said.
pub fn echo(out: &Output) {
    println!("{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
}

/// The report's one test suite: the experiment's.
fn experiment_suite<'a>(doc: &'a roxmltree::Document<'a>) -> roxmltree::Node<'a, 'a> {
    doc.descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("an experiment test suite")
}

/// The experiment suite's own `<system-out>`: its timeline, and each step that never ran
/// with why (`step `x` not run: …`).
pub fn junit_suite_out(xml: &str) -> String {
    let doc = roxmltree::Document::parse(xml).expect("JUnit is well-formed XML");
    experiment_suite(&doc)
        .children()
        .find(|n| n.has_tag_name("system-out"))
        .and_then(|n| n.text())
        .unwrap_or_default()
        .to_string()
}

/// The experiment suite's JUnit test cases as (name, kind, message), kind being `passed`,
/// `failure`, `error` or `skipped`.
pub fn junit_cases(xml: &str) -> Vec<(String, String, String)> {
    let doc = roxmltree::Document::parse(xml).expect("JUnit is well-formed XML");
    experiment_suite(&doc)
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|case| {
            let name = case.attribute("name").unwrap_or_default().to_string();
            let child = case.children().find(|c| {
                c.has_tag_name("failure") || c.has_tag_name("error") || c.has_tag_name("skipped")
            });
            let (kind, message) = match child {
                Some(c) => (
                    c.tag_name().name().to_string(),
                    c.attribute("message").unwrap_or_default().to_string(),
                ),
                None => ("passed".to_string(), String::new()),
            };
            (name, kind, message)
        })
        .collect()
}

/// A client for the lab.
pub async fn client() -> kube::Client {
    faultline::cluster::connect(Some(&lab_dir().join("kubeconfig")), None)
        .await
        .expect("connect to the lab")
}

/// The Ready condition of a node (`True`, `False`, `Unknown`, or `missing`).
pub async fn node_ready(client: &kube::Client, name: &str) -> String {
    let api: Api<Node> = Api::all(client.clone());
    match api.get_opt(name).await {
        Ok(Some(node)) => node
            .status
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status)
            .unwrap_or_else(|| "missing".into()),
        _ => "missing".into(),
    }
}

/// Waits until the node is Ready; returns how long it took, or panics after `limit`.
pub async fn wait_ready(client: &kube::Client, name: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if node_ready(client, name).await == "True" {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "node {name} not Ready within {limit:?} (is {})",
            node_ready(client, name).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until the node is no longer Ready (the fault has been noticed).
pub async fn wait_not_ready(client: &kube::Client, name: &str, limit: Duration) {
    let start = Instant::now();
    while node_ready(client, name).await == "True" {
        assert!(
            start.elapsed() < limit,
            "node {name} still Ready after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until every node is settled ([`node_unsettled`]): tests leave the cluster as
/// they found it, and the next one starts only when no node is still coming back.
pub async fn all_nodes_ready(client: &kube::Client, limit: Duration) {
    let api: Api<Node> = Api::all(client.clone());
    let nodes = api.list(&Default::default()).await.expect("list nodes");
    let start = Instant::now();
    for n in nodes.items.iter().filter_map(|n| n.metadata.name.clone()) {
        loop {
            let Some(why) = node_unsettled(client, &n).await else {
                break;
            };
            assert!(
                start.elapsed() < limit,
                "node {n} not settled within {limit:?}: {why}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Why a node is not settled yet, if it is not: Ready is not True, the controller's
/// not-ready or unreachable taint is still on, or its kubelet has not renewed its Lease
/// since Ready last changed. The last catches a node that turned Ready on a first status
/// write while its heartbeats have not resumed (seen on the lab: a restarted kwok waits
/// for the old Lease; the controller then marks the node Unknown again, and the next test
/// started on a node that was down).
pub async fn node_unsettled(client: &kube::Client, name: &str) -> Option<String> {
    use k8s_openapi::api::coordination::v1::Lease;
    let node = match Api::<Node>::all(client.clone()).get_opt(name).await {
        Ok(Some(node)) => node,
        other => return Some(format!("not readable: {other:?}")),
    };
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let Some(ready) = ready.filter(|c| c.status == "True") else {
        return Some(format!("Ready is {:?}", ready.map(|c| &c.status)));
    };
    let down = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .find(|t| {
            t.key == "node.kubernetes.io/not-ready" || t.key == "node.kubernetes.io/unreachable"
        });
    if let Some(t) = down {
        return Some(format!("still tainted {}:{}", t.key, t.effect));
    }
    let lease = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .get_opt(name)
        .await
        .ok()
        .flatten();
    let spec = lease.and_then(|l| l.spec);
    let duration = spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .map_or(40, i64::from);
    let renewed = spec.and_then(|s| s.renew_time).map(|t| t.0);
    // A kubelet restarted a moment ago shows Ready from before its stop while its
    // heartbeats have not resumed: the controller marks it Unknown moments later (seen in
    // CI: the next test's run started on that node). Settled means renewed within the
    // Lease's duration, and since Ready last changed (same host clock: lab and kind).
    let age = renewed.map(|r| k8s_openapi::jiff::Timestamp::now().as_second() - r.as_second());
    match (
        renewed,
        ready.last_transition_time.as_ref().map(|t| t.0),
        age,
    ) {
        (None, _, _) => Some("no Lease renewal".to_string()),
        (Some(_), _, Some(age)) if age >= duration => Some(format!(
            "Lease last renewed {age}s ago (duration {duration}s)"
        )),
        (Some(r), Some(t), _) if r > t => None,
        (r, t, _) => Some(format!("Lease renewed {r:?}, not since Ready at {t:?}")),
    }
}

/// Runs a lab script (e.g. `ci/lab/power`) and returns its stdout.
pub fn lab_script(script: &str, args: &[&str]) -> String {
    let out = Command::new(repo().join("ci/lab").join(script))
        .args(args)
        .output()
        .expect("run lab script");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Reads lines from a child's stdout until one satisfies `wanted` (or the child ends);
/// every line is echoed.
pub fn wait_for(
    child: &mut Child,
    wanted: impl Fn(&str) -> bool + Send + 'static,
    limit: Duration,
) -> bool {
    use std::io::{BufRead, BufReader};
    let Some(stdout) = child.stdout.take() else {
        return false;
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            if wanted(&line) {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(limit).is_ok()
}

/// Waits for a line of `lines` that satisfies `wanted`; returns it, or `None` after `limit`
/// or when the output ended.
pub fn wait_line(
    lines: &std::sync::mpsc::Receiver<String>,
    wanted: impl Fn(&str) -> bool,
    limit: Duration,
) -> Option<String> {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match lines.recv_timeout(left) {
            Ok(line) if wanted(&line) => return Some(line),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

/// Whether the line is the live view's entry of `step` being issued.
pub fn is_issued(line: &str, step: &str) -> bool {
    line.contains(&format!("step `{step}` ")) && line.ends_with(" issued")
}

/// Runs a node operation over SSH exactly as faultline does (out of band, for tests that
/// break what faultline does not know about).
pub async fn node_op(node: &str, op: faultline::execute::NodeOp) -> String {
    let inv = faultline::inventory::Inventory::load(inventory()).expect("lab inventory");
    let exec = faultline::execute::Executor::new(inv);
    match exec.perform(node, &op, Duration::from_secs(30)).await {
        Ok(out) => out.output.trim().to_string(),
        Err(e) => panic!("{op:?} on {node}: {e}"),
    }
}

/// The lab's `kubelet-restart=always` switch on a node for as long as the value lives
/// (`ci/lab/switch`): a kubelet stop there is undone by the node itself a second later, as
/// systemd's `Restart=always` would. Dropped (also on a panic), the node's switches are reset.
pub struct RestartAlways {
    node: String,
}

impl RestartAlways {
    /// Turns the switch on for `node`.
    pub fn on(node: &str) -> Self {
        lab_switch(node, "kubelet-restart=always");
        RestartAlways { node: node.into() }
    }
}

impl Drop for RestartAlways {
    fn drop(&mut self) {
        lab_switch(&self.node, "reset");
    }
}

fn lab_switch(node: &str, setting: &str) {
    let ok = std::process::Command::new(repo().join("ci/lab/switch"))
        .args([node, setting])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ci/lab/switch {node} {setting}");
}

/// The names of the lab's workers.
pub fn workers() -> Vec<String> {
    lab_nodes()
        .into_iter()
        .filter(|n| n.starts_with("lab-worker"))
        .collect()
}

/// Whether a path exists relative to the repository.
pub fn exists(rel: &str) -> bool {
    Path::new(&repo()).join(rel).exists()
}

/// The lab's node names, from its inventory.
pub fn lab_nodes() -> Vec<String> {
    let inv = faultline::inventory::Inventory::load(inventory()).expect("lab inventory");
    inv.nodes().iter().map(|n| n.name.clone()).collect()
}

/// What the node's own `kubelet status` says, asked over SSH exactly as faultline asks.
pub async fn kubelet_status(node: &str) -> String {
    let inv = faultline::inventory::Inventory::load(inventory()).expect("lab inventory");
    let exec = faultline::execute::Executor::new(inv);
    match exec
        .perform(
            node,
            &faultline::execute::NodeOp::KubeletStatus,
            Duration::from_secs(20),
        )
        .await
    {
        Ok(out) => out.output.trim().to_string(),
        Err(e) => format!("unreachable: {e}"),
    }
}

/// Waits up to 10 s for the lab kubelet of `node` to read `running`; when it does not,
/// fails with what the lab knows of it (its pid file, the end of its log, the lab's
/// status), so a failure says whether the kubelet died, was never recorded, or was
/// stopped by someone.
pub async fn assert_kubelet_running(node: &str) {
    let start = Instant::now();
    let mut status = kubelet_status(node).await;
    while status != "running" && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        status = kubelet_status(node).await;
    }
    if status == "running" {
        return;
    }
    let pidfile = std::fs::read_to_string(lab_dir().join(format!("pids/{node}.kubelet.pid")))
        .unwrap_or_else(|e| format!("(no pid file: {e})"));
    let log = std::fs::read_to_string(lab_dir().join(format!("logs/{node}.kubelet.log")))
        .unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(25).collect();
    let tail: Vec<String> = tail
        .into_iter()
        .rev()
        .map(|l| l.chars().take(400).collect())
        .collect();
    panic!(
        "kubelet on {node} is `{status}`, not running\npid file: {pidfile}\nlab status:\n{}\n\
         end of its log:\n{}",
        lab_script("status", &[]),
        tail.join("\n")
    );
}

/// The node-monitor grace period the lab's controller-manager runs with, as `ci/lab/up`
/// wrote it in `target/lab/env` (the lab's inventory states no timers: runs read them from
/// the cluster).
pub fn lab_grace() -> Duration {
    let env = std::fs::read_to_string(lab_dir().join("env")).expect("target/lab/env");
    let value = env
        .lines()
        .find_map(|l| l.strip_prefix("NODE_MONITOR_GRACE_PERIOD="))
        .expect("NODE_MONITOR_GRACE_PERIOD in target/lab/env");
    faultline::experiment::parse_duration(value.trim())
        .unwrap_or_else(|e| panic!("NODE_MONITOR_GRACE_PERIOD={value}: {e}"))
}

/// The node failure model against a fresh run (issue 28): `faultline explain` on its
/// record finds no deviation it cannot name a cause for (exit 0), with the Lease duration
/// the run read from the cluster.
pub fn model_explains(s: &Scratch, name: &str) {
    let path = s.reports().join(format!("{name}.json"));
    let out = s
        .faultline(&["explain", &path.display().to_string()])
        .output()
        .expect("run faultline explain");
    echo(&out);
    // The deviations in the panic's first line: CI's view of a long log keeps that line.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let deviations: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(": predicted ") && !l.ends_with(": inside"))
        .map(str::trim)
        .collect();
    assert_eq!(
        out.status.code(),
        Some(0),
        "a deviation outside the model: {}",
        deviations.join(" | ")
    );
    assert!(
        s.record(name).cluster.node_lease_seconds.is_some(),
        "the lab's Lease duration is in the record"
    );
}

/// Zone labels (`topology.kubernetes.io/zone`) on lab nodes for as long as the value lives;
/// dropped (also on a panic), the labels are removed again, so the other tests see the
/// lab's nodes in one unlabelled zone as before.
pub struct ZoneLabels {
    nodes: Vec<String>,
}

impl ZoneLabels {
    /// Labels each `(node, zone)`.
    pub fn on(zones: &[(&str, &str)]) -> Self {
        let guard = ZoneLabels {
            nodes: zones.iter().map(|(n, _)| n.to_string()).collect(),
        };
        for (node, zone) in zones {
            label_node(node, &format!("topology.kubernetes.io/zone={zone}"));
        }
        guard
    }
}

impl Drop for ZoneLabels {
    fn drop(&mut self) {
        for node in &self.nodes {
            label_node(node, "topology.kubernetes.io/zone-");
        }
    }
}

fn label_node(node: &str, label: &str) {
    let out = Command::new(lab_dir().join("bin/kubectl"))
        .arg("--kubeconfig")
        .arg(lab_dir().join("kubeconfig"))
        .args(["label", "node", node, "--overwrite", label])
        .output()
        .expect("run the lab's kubectl");
    assert!(
        out.status.success(),
        "kubectl label node {node} {label}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
