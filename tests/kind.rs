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

/// Runs a shipped experiment on kind, unchanged: exit 0, one JUnit case per expectation and
/// every one of them passed (nothing skipped: kind has the containers the lab lacks), every
/// node Ready afterwards and the journal empty.
async fn shipped_experiment_passes_on_kind(name: &str) -> faultline::record::RunRecord {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    let s = Scratch::new();
    let out = s.run(&format!("experiments/{name}.yaml"), &[]);
    let record = s.record(name);
    let cases = junit_cases(&s.junit(name));
    assert_eq!(
        cases.len(),
        record.experiment.expectations.len(),
        "{cases:?}"
    );
    for (case, kind, message) in &cases {
        assert_eq!(kind, "passed", "{case}: {kind}: {message}");
    }
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
    shipped_experiment_passes_on_kind("kubelet-stop-past-toleration").await;
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_power_off_service_outage() {
    // An HTTP probe through a Service (NodePort published by ci/kind/up) sees the requests
    // that go to the dead node's pods fail, and the Service whole again once they leave its
    // endpoints: traffic no kwok node carries.
    let record = shipped_experiment_passes_on_kind("power-off-service-outage").await;
    assert_eq!(
        outcome_of(&record, "requests to the dead node's pods fail (seed 002)"),
        Outcome::Passed
    );
}
