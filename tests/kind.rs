//! faultline end to end on a real kind cluster: real kubelets, containerd and containers,
//! nodes that are Docker containers reached with `docker exec` and powered with
//! `docker stop/start/restart`, and the inventory `faultline inventory kind` generated.
//! Every test is `#[ignore]`d; `ci/test` runs them one at a time after `ci/kind/up`, with
//! `FAULTLINE_LAB_DIR` pointing at the kind cluster's directory (target/kind: its
//! kubeconfig and inventory), so the lab's helpers serve both. Each leaves every node Ready.

mod lab_support;

use std::time::Duration;

use faultline::judge::Outcome;
use lab_support::*;

/// Generous bound for a node to come back after a test's faults are undone: a kind node's
/// kubelet restarts its pods' containers after a reboot.
const BACK: Duration = Duration::from_secs(180);

/// Runs a shipped experiment on kind, unchanged: exit 0, one JUnit case per expectation plus
/// "cluster restored", every one of them passed (nothing skipped: kind has the containers
/// the lab lacks), each fault confirmed on the timeline, every node Ready afterwards and the
/// journal empty.
async fn shipped_experiment_passes_on_kind(name: &str) -> faultline::record::RunRecord {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    let s = Scratch::new();
    let out = s.run(&format!("experiments/{name}.yaml"), &[]);
    let record = s.record(name);
    let cases = junit_cases(&s.junit(name));
    assert_eq!(
        cases.len(),
        record.experiment.expectations.len() + 1,
        "{cases:?}"
    );
    assert!(
        cases.iter().any(|(case, _, _)| case == "cluster restored"),
        "{cases:?}"
    );
    for (case, kind, message) in &cases {
        assert_eq!(kind, "passed", "{case}: {kind}: {message}");
    }
    let confirmed = record.timeline.entries.iter().any(|e| {
        matches!(
            &e.event,
            faultline::timeline::Event::Step {
                phase: faultline::timeline::StepPhase::Confirmed { .. },
                ..
            }
        )
    });
    assert!(confirmed, "the fault was confirmed on its node");
    assert_eq!(out.status.code(), Some(0));
    all_nodes_ready(&client, BACK).await;
    let journal = std::fs::read_to_string(s.journal()).unwrap_or_default();
    assert!(!journal.contains("\"node\""), "journal cleared: {journal}");
    record
}

/// The verdict of one expectation by name.
fn outcome_of(record: &faultline::record::RunRecord, name: &str) -> Outcome {
    record
        .verdicts
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no expectation `{name}`"))
        .outcome
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_reboot_restarts_containers_in_place() {
    let record = shipped_experiment_passes_on_kind("reboot").await;
    // What only a real kubelet shows: the containers restarted (RESTARTS +1), the
    // DaemonSet's pod too, under the same pod names.
    assert_eq!(
        outcome_of(&record, "containers restarted once in place"),
        Outcome::Passed
    );
    assert_eq!(
        outcome_of(&record, "agent pod restarted in place on its node"),
        Outcome::Passed
    );
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_kubelet_stop_past_toleration() {
    let record = shipped_experiment_passes_on_kind("kubelet-stop-past-toleration").await;
    // The recovery figures come from a real kubelet's node going NotReady and real
    // evictions (CI runs this instead of the lab's kubelet_stop_past_toleration test).
    let f = &record.figures;
    assert!(
        f.node_not_ready_ms.is_some() && f.first_eviction_ms.is_some(),
        "{f:?}"
    );
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_power_off_service_outage() {
    // An HTTP probe through a Service (its NodePort on the other worker's InternalIP) sees
    // the requests that go to the dead node's pods fail, and the Service whole again once
    // they leave its endpoints: traffic no kwok node carries.
    // `kubectl exec` into the victim's pod (an exec probe through the API server and the
    // kubelet) fails while the node is off and works again after power-on.
    let record = shipped_experiment_passes_on_kind("power-off-service-outage").await;
    for name in [
        "requests to the dead node's pods fail (seed 002)",
        "kubectl exec into its pod fails while the node is off",
        "kubectl exec into the same pod works again after power-on",
    ] {
        assert_eq!(outcome_of(&record, name), Outcome::Passed, "{name}");
    }
}

/// `docker` with arguments; its trimmed stdout, panicking with its stderr on failure.
fn docker(args: &[&str]) -> String {
    let out = std::process::Command::new("docker")
        .args(args)
        .output()
        .expect("run docker");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_node_back_with_another_address_is_reported_as_a_broken_environment() {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    let s = Scratch::new();
    let run = s.spawn(
        "fixtures/experiments/kind/node-comes-back-with-another-address.yaml",
        &[],
    );
    // The victim is the worker container that stops; Docker hands its freed address to the
    // next container started on its network, as in kind #2045.
    let started = std::time::Instant::now();
    let victim = loop {
        let exited = docker(&[
            "ps",
            "-a",
            "--filter",
            "label=io.x-k8s.kind.role=worker",
            "--filter",
            "status=exited",
            "--format",
            "{{.Names}}",
        ]);
        if let Some(name) = exited.lines().next() {
            break name.to_string();
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no worker was powered off"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let image = docker(&["inspect", "-f", "{{.Config.Image}}", &victim]);
    let network = docker(&[
        "inspect",
        "-f",
        "{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}",
        &victim,
    ]);
    let squatter = format!("faultline-test-squatter-{}", std::process::id());
    docker(&[
        "run",
        "-d",
        "--name",
        &squatter,
        "--network",
        &network,
        "--entrypoint",
        "sleep",
        &image,
        "600",
    ]);
    let out = run.wait_with_output().expect("wait for faultline");
    echo(&out);
    // Repair before asserting: free the address and restart the victim, which then gets it.
    docker(&["rm", "-f", &squatter]);
    docker(&["stop", &victim]);
    docker(&["start", &victim]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("node {victim} came back with address")),
        "the changed address is reported: {stdout}"
    );
    assert!(stdout.contains("#2045"), "{stdout}");
    assert_eq!(out.status.code(), Some(2), "a broken environment is exit 2");
    all_nodes_ready(&client, BACK).await;
}
