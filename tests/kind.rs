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
    shipped_experiment_passes_on_kind_as(name, |s, experiment| s.run(experiment, &[])).await
}

/// [`shipped_experiment_passes_on_kind`] with more arguments for `faultline run` (another
/// inventory).
async fn shipped_experiment_passes_with(
    name: &str,
    extra: &[&str],
) -> faultline::record::RunRecord {
    shipped_experiment_passes_on_kind_as(name, |s, experiment| s.run(experiment, extra)).await
}

/// [`shipped_experiment_passes_on_kind`], run by `run` (the scratch, the experiment file).
async fn shipped_experiment_passes_on_kind_as(
    name: &str,
    run: impl FnOnce(&Scratch, &str) -> std::process::Output,
) -> faultline::record::RunRecord {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    let s = Scratch::new();
    let out = run(&s, &format!("experiments/{name}.yaml"));
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
    // A kubelet restart is over when its command returns: the fault table gives it no
    // proof, so nothing is confirmed (the run's expectations judge it instead).
    assert!(
        confirmed || name == "rolling-kubelet-restart",
        "the fault was confirmed on its node"
    );
    assert_eq!(out.status.code(), Some(0));
    all_nodes_ready(&client, BACK).await;
    let journal = std::fs::read_to_string(s.journal()).unwrap_or_default();
    assert!(!journal.contains("\"node\""), "journal cleared: {journal}");
    model_explains(&s, name);
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

/// Non-graceful node shutdown (item 5 of "every real cluster"): the StatefulSet pod on a
/// powered-off node moves once a step adds the out-of-service taint, without the Node
/// being deleted, before the pods' toleration would have run out; the taint is removed
/// once the node is back.
#[tokio::test]
#[ignore = "needs kind: ci/test runs it after ci/kind/up"]
async fn kind_non_graceful_shutdown() {
    shipped_experiment_passes_on_kind("non-graceful-shutdown").await;
}

/// Graceful node shutdown against a hard power-off of the same node (item 5 of "every real
/// cluster"). ci/kind/up turns graceful node shutdown on in every kubelet (20 s). An OS
/// shutdown (`systemctl poweroff` in the node) reaches the kubelet through logind: the node
/// says it is shutting down, its pods end, and their replacements, the StatefulSet pod's
/// included, run elsewhere within seconds. `docker stop` of the same node (power-off) never
/// tells the kubelet: the node just goes silent and the same pods are kept.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_graceful_shutdown_moves_the_pods_a_power_off_of_the_same_node_strands() {
    let graceful = shipped_experiment_passes_on_kind("graceful-shutdown").await;
    let node = victim_of(&graceful);
    let reported_shutdown = |record: &faultline::record::RunRecord| {
        record.timeline.entries.iter().any(|e| {
            matches!(&e.event, faultline::timeline::Event::Node { name, after: Some(s), .. }
                if *name == node && s.shutting_down)
        })
    };
    assert!(reported_shutdown(&graceful), "{node} reported the shutdown");
    let moved = graceful.figures.replacement_ready_ms.expect("replacements");
    assert!(
        moved < 20_000,
        "replaced before the grace period: {moved} ms"
    );

    // The shipped power-off experiment, its victim pinned to the same node by name.
    let shipped =
        std::fs::read_to_string(repo().join("experiments/power-off-within-toleration.yaml"))
            .expect("read the power-off experiment");
    let pinned = shipped
        .replace(
            "    runningPodsOf: deployment/web\n",
            &format!("    names: [{node}]\n"),
        )
        .replace("../fixtures/", &format!("{}/fixtures/", repo().display()));
    assert_ne!(pinned, shipped, "the victim is pinned");
    let hard = shipped_experiment_passes_on_kind_as("power-off-within-toleration", |s, _| {
        let path = s
            .journal()
            .with_file_name("power-off-within-toleration.yaml");
        std::fs::write(&path, &pinned).expect("write the pinned experiment");
        s.run(&path.display().to_string(), &[])
    })
    .await;
    assert_eq!(victim_of(&hard), node, "the same node");
    assert!(
        !reported_shutdown(&hard),
        "a power cut is never announced to the kubelet"
    );
    assert_eq!(
        hard.figures.replacement_ready_ms, None,
        "nothing replaced before power-on"
    );
}

/// Seed 001's local PersistentVolume on real kubelets and a real volume binder: the shipped
/// experiment, unchanged. Its setup manifest's volumes name the lab's nodes; what a cluster
/// owner provisions on a real cluster, this test provisions on kind first: on each worker the
/// directory and one local volume of the experiment's class, pinned to it. Real kubelets mount
/// the volume, so the pod that runs again after the claim is deleted runs on the other worker
/// with a new claim bound to that worker's volume. The volumes are removed afterwards (the
/// experiment's teardown deletes its namespace, and with it the claim).
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_local_persistent_volume_moves_once_its_claim_is_gone() {
    use k8s_openapi::api::core::v1::PersistentVolume;
    use kube::api::{DeleteParams, PostParams};
    let client = client().await;
    let volumes: kube::Api<PersistentVolume> = kube::Api::all(client.clone());
    let workers = kind_workers();
    assert!(workers.len() >= 2, "two workers at least: {workers:?}");
    let name_of = |worker: &str| format!("faultline-local-kind-{worker}");
    for worker in &workers {
        docker(&["exec", worker, "mkdir", "-p", "/mnt/faultline"]);
        // A volume left by an earlier run that stopped half-way is replaced.
        let _ = volumes
            .delete(&name_of(worker), &DeleteParams::default())
            .await;
        let started = std::time::Instant::now();
        while volumes
            .get_opt(&name_of(worker))
            .await
            .expect("read volumes")
            .is_some()
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "an old volume gone"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let volume: PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name_of(worker)},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "faultline-local",
                "local": {"path": "/mnt/faultline"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [worker]}
                ]}]}}
            }
        }))
        .expect("a PersistentVolume");
        volumes
            .create(&PostParams::default(), &volume)
            .await
            .expect("create the worker's local volume");
    }

    let record = shipped_experiment_passes_on_kind("local-persistent-volume").await;
    let victim = victim_of(&record);
    assert!(workers.contains(&victim), "{victim} is a kind worker");

    for worker in &workers {
        volumes
            .delete(&name_of(worker), &DeleteParams::default())
            .await
            .expect("delete the worker's local volume");
    }
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

/// Issue 46: two workers rebooted in turn under the default `maxNodesDown: 1`. A kind
/// reboot (docker stop, start) is never seen NotReady, so the second reboot is held by the
/// run-time interlock until the first worker's new kubelet renewed its heartbeat twice;
/// the timeline shows it held, then let go, and issued only after the first reboot
/// finished: never two workers down at once. Before the heartbeat counted, the second
/// reboot waited its whole deadline (10 min) and the run stopped.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_rolling_reboot_holds_the_second_until_the_first_is_back() {
    use faultline::timeline::{Event, StepPhase};
    let record = shipped_experiment_passes_on_kind("rolling-reboot").await;
    let t = &record.timeline;
    let first = &record.targets["first"][0];
    let finished = |step: &str| {
        t.entries.iter().find_map(|e| match &e.event {
            Event::Step {
                step: s,
                phase: StepPhase::Finished { .. },
                ..
            } if s == step => Some(e.offset_ms),
            _ => None,
        })
    };
    let first_done = finished("reboot first").expect("the first reboot finished");
    let second = t
        .step_issued_ms("reboot second")
        .expect("the second reboot was issued");
    let held: Vec<(i64, Vec<String>)> = t
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Interlock { step, down, .. } if step == "reboot second" => {
                Some((e.offset_ms, down.iter().map(|d| d.node.clone()).collect()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(held.len(), 1, "held once: {held:?}");
    assert!(held[0].1.contains(first), "{held:?}");
    assert!(
        first_done < held[0].0 && held[0].0 < second,
        "first done +{first_done} ms, held +{} ms, second issued +{second} ms",
        held[0].0
    );
    // Let go well before its deadline: the first worker was seen back.
    assert!(
        second - held[0].0 < 60_000,
        "held {} ms",
        second - held[0].0
    );
}

/// Issue 46: the rolling step. One step, `roll:` on a target of every worker, becomes
/// one reboot per worker in name order once the workers are resolved; each next reboot
/// is issued only after the worker before it finished rebooting, was seen back, and the
/// 30 s settle passed: never two workers down at once, on real kubelets.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_rolling_step_reboots_every_worker_in_turn() {
    use faultline::timeline::{Event, StepPhase};
    let record = shipped_experiment_passes_on_kind("rolling-reboot-workers").await;
    let t = &record.timeline;
    let mut workers = record.targets["workers"].clone();
    workers.sort();
    assert!(workers.len() >= 2, "{workers:?}");
    let mut last_finished: Option<i64> = None;
    for worker in &workers {
        let step = format!("reboot workers ({worker})");
        let issued = t
            .step_issued_ms(&step)
            .unwrap_or_else(|| panic!("`{step}` was issued"));
        if let Some(done) = last_finished {
            assert!(
                issued >= done + 30_000,
                "`{step}` issued at +{issued} ms, the worker before it finished at +{done} ms"
            );
        }
        last_finished = t.entries.iter().find_map(|e| match &e.event {
            Event::Step {
                step: s,
                phase: StepPhase::Finished { .. },
                ..
            } if *s == step => Some(e.offset_ms),
            _ => None,
        });
        assert!(last_finished.is_some(), "`{step}` finished");
    }
}

/// Issue 46, item 5: the rolling kubelet restart on real kubelets: each worker's kubelet
/// restarted in turn, no container restarted (the expectation needs containers, so it is
/// judged here and skipped on the lab).
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_rolling_kubelet_restart_every_worker_in_turn() {
    let record = shipped_experiment_passes_on_kind("rolling-kubelet-restart").await;
    let t = &record.timeline;
    let mut workers = record.targets["workers"].clone();
    workers.sort();
    let issued: Vec<i64> = workers
        .iter()
        .map(|w| {
            t.step_issued_ms(&format!("restart kubelets ({w})"))
                .unwrap_or_else(|| panic!("{w}'s kubelet restarted"))
        })
        .collect();
    assert!(
        issued.windows(2).all(|p| p[0] + 20_000 <= p[1]),
        "in turn, 20 s apart at least: {issued:?}"
    );
    let restarts = record
        .verdicts
        .iter()
        .find(|v| v.name == "no container restarts")
        .expect("judged");
    assert_eq!(
        restarts.outcome,
        faultline::outcome::Outcome::Passed,
        "{restarts:?}"
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

/// The inventory `ci/kind/up` wrote for the same cluster reached over SSH: the `kubeadm`
/// profile, every node at its container's address as root, host keys pinned in
/// `target/kind/ssh/known_hosts`, power through Docker. Checked to be that before use, so a
/// test named "over SSH" cannot silently run through `docker exec`.
fn ssh_inventory() -> String {
    let path = lab_dir().join("inventory-ssh.yaml");
    let inv = faultline::inventory::Inventory::load(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (written by ci/kind/up)", path.display()));
    for node in inv.nodes() {
        assert_eq!(
            node.profile,
            Some(faultline::inventory::ProfileName::Kubeadm),
            "{}",
            node.name
        );
        assert_eq!(node.transport, faultline::inventory::TransportKind::Ssh);
        assert_ne!(
            node.address, node.name,
            "reached at its container's address"
        );
        assert!(!node.ssh.insecure_ignore_host_keys);
        let known_hosts = node.ssh.known_hosts.as_ref().expect("knownHosts set");
        let pinned = std::fs::read_to_string(known_hosts).expect("read known_hosts");
        assert!(
            pinned
                .lines()
                .any(|l| l.split_whitespace().next() == Some(node.address.as_str())),
            "{}'s host key is pinned by its address in {}",
            node.name,
            known_hosts.display()
        );
    }
    path.display().to_string()
}

/// Root logins the node's own sshd accepted since `since`, from its journal: proof that a
/// run reached the node over SSH.
fn ssh_logins_since(node: &str, since: chrono::DateTime<chrono::Utc>) -> usize {
    let since = format!("@{}", since.timestamp() - 1);
    docker(&[
        "exec",
        node,
        "journalctl",
        "-u",
        "ssh.service",
        "--since",
        &since,
        "-o",
        "cat",
        "--no-pager",
    ])
    .lines()
    .filter(|l| l.starts_with("Accepted publickey for root"))
    .count()
}

/// The victim of a recorded run (its one `victim` target node).
fn victim_of(record: &faultline::record::RunRecord) -> String {
    let victims = &record.targets["victim"];
    assert_eq!(victims.len(), 1, "{victims:?}");
    victims[0].clone()
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_ssh_kubelet_stop_past_toleration_with_the_kubeadm_profile() {
    let inventory = ssh_inventory();
    let record =
        shipped_experiment_passes_with("kubelet-stop-past-toleration", &["-i", &inventory]).await;
    let f = &record.figures;
    assert!(
        f.node_not_ready_ms.is_some() && f.first_eviction_ms.is_some(),
        "{f:?}"
    );
    let victim = victim_of(&record);
    let logins = ssh_logins_since(&victim, record.started_at);
    // One login or a few: faultline keeps its connection to a node for the run
    // (execute/ssh_pool.rs), and the SSH inventory has no other way to the node.
    assert!(
        logins >= 1,
        "stop and start went over SSH to {victim}: {logins} login(s)"
    );
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_ssh_partition_with_the_kubeadm_profile() {
    // The kubeadm profile's iptables rule on a real node beside kube-proxy's rules: the
    // kubelet's heartbeats to the API server's port stop, the SSH session does not.
    let inventory = ssh_inventory();
    let record = shipped_experiment_passes_with("partition", &["-i", &inventory]).await;
    let victim = victim_of(&record);
    let logins = ssh_logins_since(&victim, record.started_at);
    // One login or a few: faultline keeps its connection to a node for the run
    // (execute/ssh_pool.rs), and the SSH inventory has no other way to the node.
    assert!(
        logins >= 1,
        "partition and heal went over SSH to {victim}: {logins} login(s)"
    );
    let rules = docker(&["exec", &victim, "iptables", "-w", "10", "-S", "OUTPUT"]);
    assert!(!rules.contains("faultline-partition"), "healed: {rules}");
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_ssh_reboot_with_the_kubeadm_profile() {
    // On kind the inventory's out-of-band reboot (Docker, as a BMC) carries it out: the
    // kubeadm profile's in-band `systemctl reboot` would leave the node container stopped.
    let inventory = ssh_inventory();
    let record = shipped_experiment_passes_with("reboot", &["-i", &inventory]).await;
    assert_eq!(
        outcome_of(&record, "containers restarted once in place"),
        Outcome::Passed
    );
    // sshd came back with the node and its pinned host key: the node answers over SSH again.
    let victim = victim_of(&record);
    let inv = faultline::inventory::Inventory::load(&inventory).expect("ssh inventory");
    let node = inv.node(&victim).expect("victim in the inventory");
    let ssh = &node.ssh;
    let out = std::process::Command::new("ssh")
        .args([
            "-n",
            "-F",
            "none",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
        ])
        .arg("-i")
        .arg(ssh.identity_file.as_ref().expect("identityFile"))
        .arg("-o")
        .arg(format!(
            "UserKnownHostsFile={}",
            ssh.known_hosts.as_ref().expect("knownHosts").display()
        ))
        .arg(format!("root@{}", node.address))
        .arg("systemctl is-active kubelet")
        .output()
        .expect("run ssh");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "active",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether the kubelet unit inside a kind node container is active, asked with systemd's
/// own words (`active`, `inactive`, ...), out of band from faultline.
fn kubelet_unit_state(node: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["exec", node, "systemctl", "is-active", "kubelet"])
        .output()
        .expect("run docker exec");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `docker ps`'s filter for this cluster's containers: another kind cluster may run on the
/// same engine (ci/kind/up writes the name, `KIND_CLUSTER_NAME`, to target/kind/env).
fn this_cluster() -> String {
    format!("label=io.x-k8s.kind.cluster={}", kind_cluster())
}

/// The running worker containers of this kind cluster, by name.
fn kind_workers() -> Vec<String> {
    docker(&[
        "ps",
        "--filter",
        &this_cluster(),
        "--filter",
        "label=io.x-k8s.kind.role=worker",
        "--format",
        "{{.Names}}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// The kind workers whose kubelet unit is not active.
fn workers_with_kubelet_down() -> Vec<String> {
    kind_workers()
        .into_iter()
        .filter(|n| kubelet_unit_state(n) != "active")
        .collect()
}

/// Waits, polling every second, until `done` holds; how long it took.
async fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    started.elapsed()
}

/// `kill -9` while a kind node's kubelet is stopped: the self-restore armed inside the node
/// container (a detached process started through `docker exec`, which must outlive the
/// exec) starts the kubelet by itself after the planned end plus the restore margin, the
/// node is Ready again without help, and `restore` then finds nothing left to undo.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_kill_9_during_a_kubelet_stop_the_node_restores_itself() {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    let s = Scratch::new();
    s.kill_9_after_step(
        "fixtures/experiments/lab/kubelet-stop-short.yaml",
        &["--restore-margin", "10s"],
        "stop kubelet",
    )
    .await;
    let down = workers_with_kubelet_down();
    assert_eq!(
        down.len(),
        1,
        "exactly the victim's kubelet is down: {down:?}"
    );
    let victim = &down[0];
    wait_not_ready(&client, victim, Duration::from_secs(120)).await;
    // The experiment's planned length (about three grace periods) plus the 10 s margin.
    let took = wait_until("the kubelet started by the node itself", BACK * 2, || {
        kubelet_unit_state(victim) == "active"
    })
    .await;
    println!("kubelet on {victim} active again {took:?} after the kill, with no help");
    wait_ready(&client, victim, BACK).await;
    s.restore_leaves_nothing();
    all_nodes_ready(&client, BACK).await;
}

/// `kill -9` while a kind node is powered off (its container stopped): the power-on armed
/// where faultline runs (a detached process outliving faultline) starts the container again
/// after the planned end plus the restore margin, the node is Ready again without help, and
/// `restore` then finds nothing left to undo.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_kill_9_during_a_power_off_the_node_is_powered_on_without_help() {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    let s = Scratch::new();
    s.kill_9_after_step(
        "fixtures/experiments/lab/power-off-short.yaml",
        &["--restore-margin", "10s"],
        "power off",
    )
    .await;
    let victim = &the_one_worker_stopped().await;
    let took = wait_until("the container started again", BACK * 2, || {
        docker(&["inspect", "-f", "{{.State.Status}}", victim]) == "running"
    })
    .await;
    println!("{victim} running again {took:?} after the kill, with no help");
    wait_ready(&client, victim, BACK).await;
    s.restore_leaves_nothing();
    all_nodes_ready(&client, BACK).await;
}

/// A run cut off in the middle of a kind reboot (`docker stop`, a pause, `docker start`),
/// the way a CI runner that times out kills a job: faultline and the reboot command it
/// started both get SIGKILL after the stop began. The container stays stopped; the journal
/// holds the reboot with a power-on as its undo, so `faultline restore` starts the container
/// again and the node is Ready, and a second `restore` finds nothing.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_reboot_cut_off_between_stop_and_start_is_powered_on_by_restore() {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    let s = Scratch::new();
    let mut child = s
        .spawn_until_step("fixtures/experiments/lab/reboot-short.yaml", &[], "reboot")
        .await;
    let pid = child.id().to_string();
    // The reboot's own command first (it runs in its own process group), then faultline.
    let _ = std::process::Command::new("pkill")
        .args(["-KILL", "-P", &pid])
        .status();
    child.kill().expect("kill -9");
    let _ = child.wait();
    let victim = &the_one_worker_stopped().await;
    // Past the reboot's pause: nothing starts it again by itself.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(exited_workers(), std::slice::from_ref(victim), "still off");
    s.restore_leaves_nothing();
    assert_eq!(
        docker(&["inspect", "-f", "{{.State.Status}}", victim]),
        "running",
        "restore started the container"
    );
    wait_ready(&client, victim, BACK).await;
    all_nodes_ready(&client, BACK).await;
}

/// The kind workers whose containers are stopped.
fn exited_workers() -> Vec<String> {
    docker(&[
        "ps",
        "-a",
        "--filter",
        &this_cluster(),
        "--filter",
        "label=io.x-k8s.kind.role=worker",
        "--filter",
        "status=exited",
        "--format",
        "{{.Names}}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// Waits (30 s: `docker stop` gives systemd up to 10 s to shut the node down) until a
/// worker's container is stopped, and checks it is exactly one: the victim, returned.
async fn the_one_worker_stopped() -> String {
    wait_until(
        "the victim's container stopped",
        Duration::from_secs(30),
        || !exited_workers().is_empty(),
    )
    .await;
    let off = exited_workers();
    assert_eq!(off.len(), 1, "exactly the victim is off: {off:?}");
    off[0].clone()
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
        if let Some(name) = exited_workers().into_iter().next() {
            break name;
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

/// Where the Docker engine would be for faultline in the API-transport tests: nowhere, to
/// prove that nothing but the Kubernetes API carries their node commands.
const NO_DOCKER: &str = "unix:///nonexistent/docker.sock";

/// The name of the kind cluster under test (`ci/kind/up` writes it to `env`), so that the
/// containers of another kind cluster on the same Docker engine are never looked at.
fn kind_cluster() -> String {
    let env = std::fs::read_to_string(lab_dir().join("env")).expect("ci/kind/up wrote env");
    env.lines()
        .find_map(|l| l.strip_prefix("KIND_CLUSTER_NAME="))
        .expect("KIND_CLUSTER_NAME in env")
        .trim_matches(['\'', '"'])
        .to_string()
}

/// An inventory of the kind cluster written by `faultline inventory kind --transport pod`
/// (discovery itself reads Docker; the runs that use the inventory do not).
fn api_transport_inventory(s: &Scratch) -> std::path::PathBuf {
    let cluster = kind_cluster();
    let path = s.reports().with_file_name("inventory-pod.yaml");
    let kubeconfig = lab_dir().join("kubeconfig");
    let out = s
        .faultline(&[
            "inventory",
            "kind",
            "--name",
            &cluster,
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--transport",
            "pod",
            "--out",
            &path.display().to_string(),
        ])
        .output()
        .expect("run faultline inventory");
    echo(&out);
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(&path).expect("the inventory");
    assert!(text.contains("transport: pod"), "{text}");
    path
}

/// `faultline ARGS` with the pod-transport inventory and Docker out of reach.
fn without_docker(
    s: &Scratch,
    inventory: &std::path::Path,
    args: &[&str],
) -> std::process::Command {
    let mut cmd = s.faultline(args);
    cmd.env("FAULTLINE_INVENTORY", inventory)
        .env("DOCKER_HOST", NO_DOCKER);
    cmd
}

/// A shipped experiment run through the API transport with Docker hidden: it passes as it
/// does over `docker exec` (every expectation, restored, fault confirmed, journal empty),
/// and no node-access pod is left.
async fn shipped_experiment_passes_through_the_api(name: &str) -> faultline::record::RunRecord {
    let started = std::time::Instant::now();
    let record = shipped_experiment_passes_on_kind_as(name, |s, experiment| {
        let inventory = api_transport_inventory(s);
        let reports = s.reports().display().to_string();
        let out = without_docker(
            s,
            &inventory,
            &["run", experiment, "--yes", "--reports", &reports],
        )
        .output()
        .expect("run faultline");
        echo(&out);
        out
    })
    .await;
    // The undo was armed on the node (a partition's timer; a kubelet stop's watcher, asked
    // at the step's time), confirmed through the API.
    let undone_on_host = record
        .timeline
        .entries
        .iter()
        .any(|e| format!("{:?}", e.event).contains("undone on the node by"));
    assert!(
        undone_on_host,
        "the planned undo was confirmed through the API"
    );
    // Its commands went into a pod kept on the node for the run (issue 48, item 3).
    let kept: Vec<&str> = record
        .timeline
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            faultline::timeline::Event::Note { message } if message.starts_with("node access") => {
                Some(message.as_str())
            }
            _ => None,
        })
        .collect();
    assert!(
        matches!(kept.as_slice(), [one] if one.contains("a pod kept on 1 of 1 nodes")),
        "{kept:?}"
    );
    no_node_access_pods_left().await;
    println!("{name} through the API transport: {:?}", started.elapsed());
    record
}

/// The seconds after which only the node's timer can end each fault the run armed, as its
/// record says (`None` where a watcher or the transport can reach the node sooner).
fn ends_by_timer(record: &faultline::record::RunRecord) -> Vec<Option<u64>> {
    record
        .timeline
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            faultline::timeline::Event::Step {
                phase:
                    faultline::timeline::StepPhase::Armed {
                        ends_by_timer_in_secs,
                        ..
                    },
                ..
            } => Some(*ends_by_timer_in_secs),
            _ => None,
        })
        .collect()
}

/// No pod labelled as a node-access pod remains (each is deleted after its command; one
/// on a node whose kubelet was away goes once the kubelet is back).
async fn no_node_access_pods_left() {
    use k8s_openapi::api::core::v1::Pod;
    let pods: kube::Api<Pod> = kube::Api::all(client().await);
    let label = format!("{}=true", faultline::execute::pod::ACCESS_LABEL);
    let mut left = Vec::new();
    for _ in 0..60 {
        left = pods
            .list(&kube::api::ListParams::default().labels(&label))
            .await
            .expect("list pods")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect::<Vec<_>>();
        if left.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("node-access pods left: {left:?}");
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_api_transport_kubelet_stop_within_toleration() {
    let record = shipped_experiment_passes_through_the_api("kubelet-stop-within-toleration").await;
    // The undo watcher beside the timer can end it sooner: the run does not say otherwise.
    let armed = ends_by_timer(&record);
    assert!(
        !armed.is_empty() && armed.iter().all(Option::is_none),
        "{armed:?}"
    );
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_api_transport_kubelet_stop_past_toleration() {
    shipped_experiment_passes_through_the_api("kubelet-stop-past-toleration").await;
}

#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_api_transport_partition() {
    let record = shipped_experiment_passes_through_the_api("partition").await;
    // A partition cuts the node off from the API server: the run says only the node's
    // timer can end it (the terminal prints it from this event).
    let armed = ends_by_timer(&record);
    assert!(
        !armed.is_empty() && armed.iter().all(Option::is_some),
        "only the timer ends a partition through the API: {armed:?}"
    );
}

/// `kill -9` while a kubelet stopped through the API is down: the planned undo armed on
/// the node as a systemd timer (the transport cannot reach a node without its kubelet)
/// starts the kubelet by itself at the undo step's time, the node is Ready without help,
/// and `restore`, through the API too, leaves nothing behind.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_api_transport_kill_9_during_a_kubelet_stop_the_hosts_timer_heals() {
    let s = Scratch::new();
    let inventory = api_transport_inventory(&s);
    kill_9_during_a_kubelet_stop_the_hosts_systemd_timer_heals(&s, &inventory, without_docker, &[])
        .await;
}

/// The same over SSH with the kubeadm profile, whose self-restore is a transient systemd
/// timer too (issue 44): a `setsid nohup` process dies with the login session where logind
/// has `KillUserProcesses=yes`, a unit of the host's systemd does not.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_ssh_kill_9_during_a_kubelet_stop_the_hosts_timer_heals() {
    let s = Scratch::new();
    let inventory = std::path::PathBuf::from(ssh_inventory());
    // Docker stays: the SSH inventory's power driver is, and pre-flight checks it.
    let faultline = |s: &Scratch, inventory: &std::path::Path, args: &[&str]| {
        let mut cmd = s.faultline(args);
        cmd.env("FAULTLINE_INVENTORY", inventory);
        cmd
    };
    // Over SSH the self-restore is the safety net, due at the planned end plus the restore
    // margin (the API transport's timer is the planned undo itself).
    kill_9_during_a_kubelet_stop_the_hosts_systemd_timer_heals(
        &s,
        &inventory,
        faultline,
        &["--restore-margin", "10s"],
    )
    .await;
}

/// `kill -9` of a run of a short kubelet stop once the stop is issued: the victim holds a
/// `faultline-restore-*` systemd timer, which starts the kubelet at the planned undo; then
/// `restore` finds nothing left and no node-access pod remains.
async fn kill_9_during_a_kubelet_stop_the_hosts_systemd_timer_heals(
    s: &Scratch,
    inventory: &std::path::Path,
    faultline: impl Fn(&Scratch, &std::path::Path, &[&str]) -> std::process::Command,
    extra: &[&str],
) {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    let inventory = inventory.to_path_buf();
    let reports = s.reports().display().to_string();
    let mut child = faultline(
        s,
        &inventory,
        &[
            &[
                "run",
                "fixtures/experiments/lab/kubelet-stop-short.yaml",
                "--yes",
                "--reports",
                &reports,
            ],
            extra,
        ]
        .concat(),
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::inherit())
    .spawn()
    .expect("spawn faultline");
    let issued = |line: &str| line.contains("step `stop kubelet` ") && line.ends_with(" issued");
    assert!(
        wait_for(&mut child, issued, Duration::from_secs(120)),
        "step `stop kubelet` was never issued"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    child.kill().expect("kill -9");
    let _ = child.wait();
    let killed = std::time::Instant::now();
    let down = wait_until("the victim's kubelet down", Duration::from_secs(30), || {
        workers_with_kubelet_down().len() == 1
    })
    .await;
    let victim = workers_with_kubelet_down().remove(0);
    println!("kubelet on {victim} down {down:?} after the kill");
    let timers = docker(&[
        "exec",
        &victim,
        "systemctl",
        "list-timers",
        "--all",
        "--no-legend",
        "faultline-restore-*",
    ]);
    assert!(
        timers.contains("faultline-restore-"),
        "the self-restore is a systemd timer on {victim}: {timers:?}"
    );
    // The undo step is at grace + 20 s (20 s fast timers): the timer fires then.
    let took = wait_until("the kubelet started by the node's timer", BACK, || {
        kubelet_unit_state(&victim) == "active"
    })
    .await;
    println!(
        "kubelet on {victim} active again {:?} after the kill, by the node's own timer",
        killed.elapsed().max(took)
    );
    wait_ready(&client, &victim, BACK).await;
    let out = faultline(s, &inventory, &["restore"])
        .output()
        .expect("restore");
    echo(&out);
    assert_eq!(out.status.code(), Some(0));
    let again = faultline(s, &inventory, &["restore"])
        .output()
        .expect("restore");
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to restore"));
    no_node_access_pods_left().await;
    all_nodes_ready(&client, BACK).await;
}

/// SIGINT 20 s into a minute's kubelet stop through the API transport (issue 44, item 2):
/// a stopped kubelet ends exec, so the undo goes through the undo watcher armed beside the
/// node's timer, which reads its own pod through the API server and starts the kubelet when
/// faultline annotates it. The kubelet is back within seconds of the signal, not at the
/// planned minute; the node Ready within the grace period of it; faultline exits 2, the
/// journal is empty and no node-access pod (the watcher included) is left.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_api_transport_sigint_during_a_kubelet_stop_ends_it_at_once() {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    let s = Scratch::new();
    let inventory = api_transport_inventory(&s);
    let reports = s.reports().display().to_string();
    let mut child = without_docker(
        &s,
        &inventory,
        &[
            "run",
            "fixtures/experiments/lab/kubelet-stop-a-minute.yaml",
            "--yes",
            "--reports",
            &reports,
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::inherit())
    .spawn()
    .expect("spawn faultline");
    let issued = |line: &str| line.contains("step `stop kubelet` ") && line.ends_with(" issued");
    assert!(
        wait_for(&mut child, issued, Duration::from_secs(120)),
        "step `stop kubelet` was never issued"
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    let down = workers_with_kubelet_down();
    assert_eq!(down.len(), 1, "one kubelet stopped 20 s in: {down:?}");
    let victim = down[0].clone();
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let signalled = std::time::Instant::now();
    let back = wait_until(
        "the kubelet started after SIGINT",
        Duration::from_secs(15),
        || kubelet_unit_state(&victim) == "active",
    )
    .await;
    println!("kubelet on {victim} active {back:?} after SIGINT (the planned start was 40 s away)");
    // The fast timers' grace period is 20 s; a node whose kubelet is back posts Ready in a few.
    let ready = wait_ready(&client, &victim, Duration::from_secs(25)).await;
    println!("{victim} Ready {ready:?} after SIGINT");
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait for faultline") {
            break status.code();
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(40),
            "faultline still running 40 s after SIGINT"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "faultline exited {code:?} {:?} after SIGINT",
        signalled.elapsed()
    );
    assert_eq!(code, Some(2), "interrupted: exit 2");
    let record = s.record("kubelet-stop-a-minute");
    let by_watcher = record
        .timeline
        .entries
        .iter()
        .any(|e| format!("{:?}", e.event).contains("undone on the node by its undo watcher"));
    assert!(by_watcher, "the undo came through the watcher");
    let journal = std::fs::read_to_string(s.journal()).unwrap_or_default();
    assert!(!journal.contains("\"node\""), "journal cleared: {journal}");
    no_node_access_pods_left().await;
    all_nodes_ready(&client, BACK).await;
}

/// One run per cluster (issue 44, item 3): while a run holds the cluster's lock (a Lease),
/// a second run from another journal is refused before anything, naming the holder, and so
/// is `restore`; once the first has ended the lock is gone. A holder that died (its Lease
/// not renewed for longer than its duration) is taken over, and the run says from whom.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_a_second_run_is_refused_naming_the_first_and_a_dead_holder_is_taken_over() {
    use k8s_openapi::api::coordination::v1::Lease;
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    let leases: kube::Api<Lease> =
        kube::Api::namespaced(client.clone(), faultline::cluster::lock::NAMESPACE);
    let first = Scratch::new();
    let mut running = first
        .spawn_until_step(
            "fixtures/experiments/lab/kubelet-stop-short.yaml",
            &[],
            "stop kubelet",
        )
        .await;
    let second = Scratch::new();
    let out = second.run("fixtures/experiments/lab/cordon-short.yaml", &[]);
    assert_eq!(out.status.code(), Some(2), "the second run is refused");
    let record = second.record("cordon-short");
    let said = format!("{:?}", record.outcome);
    assert!(
        said.contains("another faultline run holds cluster"),
        "{said}"
    );
    assert!(
        said.contains(&format!("/{}/", running.id())),
        "the holder is named: {said}"
    );
    assert!(said.contains("faultline run kubelet-stop-short"), "{said}");
    assert!(
        record
            .timeline
            .entries
            .iter()
            .all(|e| !matches!(e.event, faultline::timeline::Event::Step { .. })),
        "nothing of the second run was issued"
    );
    // `restore` of a copy of the live run's journal: refused too, the fault left alone.
    std::fs::copy(first.journal(), second.journal()).expect("copy the journal");
    let out = second.faultline(&["restore"]).output().expect("restore");
    echo(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "restore under a live run is refused"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another faultline run holds cluster"),
        "restore names the holder"
    );
    assert_eq!(
        workers_with_kubelet_down().len(),
        1,
        "the live run's fault stays"
    );
    std::fs::remove_file(second.journal()).expect("journal");
    let status = std::process::Command::new("kill")
        .args(["-INT", &running.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    assert_eq!(running.wait().expect("wait").code(), Some(2));
    assert!(
        leases
            .get_opt(faultline::cluster::lock::NAME)
            .await
            .expect("read")
            .is_none(),
        "the first run released its lock"
    );

    // A holder that died two minutes ago (by its own clock, which a reader does not trust:
    // the Lease is watched for its duration, 10 s here, before it is taken over).
    let dead: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": faultline::cluster::lock::NAME,
                     "annotations": {"faultline.dev/running": "faultline run gone"}},
        "spec": {"holderIdentity": "crashed-host/1/fl1", "leaseDurationSeconds": 10,
                 "acquireTime": "2026-01-01T00:00:00.000000Z",
                 "renewTime": (chrono::Utc::now() - chrono::Duration::seconds(120))
                     .format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}
    }))
    .expect("lease");
    leases
        .create(&kube::api::PostParams::default(), &dead)
        .await
        .expect("create the dead holder's lease");
    let third = Scratch::new();
    let out = third.run("fixtures/experiments/lab/cordon-short.yaml", &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a dead holder does not stop a run"
    );
    let record = third.record("cordon-short");
    assert!(
        record
            .timeline
            .entries
            .iter()
            .any(|e| format!("{:?}", e.event)
                .contains("taken over from crashed-host/1/fl1 (faultline run gone)")),
        "the take-over is said"
    );
    assert!(
        leases
            .get_opt(faultline::cluster::lock::NAME)
            .await
            .expect("read")
            .is_none(),
        "released at the end"
    );
    all_nodes_ready(&client, BACK).await;
}

/// Cluster DNS works on the offline kind cluster (CoreDNS built from its Go module by
/// `ci/kind/build`): a pod resolves the API server's Service by its name and connects to it
/// through the Service's address. agnhost's `connect` says `DNS` when the name does not
/// resolve and exits non-zero on any failure.
///
/// The check starts once the cluster has settled from the test before it, and is tried up
/// to three times, 10 s apart. A kind node that was powered off or rebooted comes back
/// with empty iptables: until its kube-proxy has written the Service rules again, a pod's
/// query to the DNS Service's address leaves the node unrewritten. On this machine and in
/// CI, the network answers every DNS query, to any address, with NXDOMAIN, so such a query
/// fails as "no such host" (stop 42's CI run, right after a reboot test). kube-proxy has no
/// readiness probe that says its rules are written, so Ready pods do not close that gap.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_services_resolve_by_name() {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    system_pods_ready(&client, BACK).await;
    let mut attempts = Vec::new();
    for attempt in 1..=3 {
        if attempt > 1 {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        let (phase, log) = connect_by_name(&client, attempt).await;
        if phase == "Succeeded" {
            return;
        }
        let failed = format!("attempt {attempt}: {phase}: {log}");
        eprintln!("{failed}");
        attempts.push(failed);
    }
    panic!(
        "a pod could not reach kubernetes.default.svc.cluster.local:443 by name:\n{}",
        attempts.join("\n")
    );
}

/// One pod that connects to the API server's Service by name: its final phase and log.
async fn connect_by_name(client: &kube::Client, attempt: u32) -> (String, String) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{DeleteParams, LogParams, PostParams};
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "default");
    let name = format!("faultline-dns-check-{}-{attempt}", std::process::id());
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "check",
                "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "imagePullPolicy": "Never",
                "args": ["connect", "kubernetes.default.svc.cluster.local:443", "--timeout=5s"],
            }],
        },
    }))
    .expect("the check pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the check pod");
    let mut phase = String::new();
    let mut node = String::new();
    for _ in 0..120 {
        let status = pods.get(&name).await.expect("read the check pod");
        node = status.spec.and_then(|s| s.node_name).unwrap_or_default();
        phase = status.status.and_then(|s| s.phase).unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let log = pods
        .logs(&name, &LogParams::default())
        .await
        .unwrap_or_else(|e| format!("(no log: {e})"));
    pods.delete(&name, &DeleteParams::default().grace_period(0))
        .await
        .expect("delete the check pod");
    (phase, format!("on {node}: {log}"))
}

/// Waits until every kube-system pod bound to a node is Ready: the pod network, kube-proxy
/// and CoreDNS are running again after the test before.
async fn system_pods_ready(client: &kube::Client, limit: Duration) {
    use k8s_openapi::api::core::v1::Pod;
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "kube-system");
    let unready = || async {
        let list = pods
            .list(&Default::default())
            .await
            .expect("list kube-system pods");
        list.items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .filter(|p| {
                !p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .filter_map(|p| p.metadata.name)
            .collect::<Vec<_>>()
    };
    let start = std::time::Instant::now();
    loop {
        let waiting = unready().await;
        if waiting.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "kube-system pods not Ready within {limit:?}: {waiting:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The node-access pods of `node` not being deleted, by name.
async fn live_access_pods_on(node: &str) -> Vec<String> {
    use k8s_openapi::api::core::v1::Pod;
    let pods: kube::Api<Pod> = kube::Api::all(client().await);
    let label = format!("{}=true", faultline::execute::pod::ACCESS_LABEL);
    pods.list(&kube::api::ListParams::default().labels(&label))
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// Lines in `file` on the kind node `node` (0 when it does not exist).
fn lines_on(node: &str, file: &str) -> usize {
    docker(&[
        "exec",
        node,
        "sh",
        "-c",
        &format!("cat {file} 2>/dev/null || true"),
    ])
    .lines()
    .count()
}

/// A step sent ahead through the API transport (issue 26, item 7): its node-access pod is
/// started and the gated command's exec opened ahead; performed near when it is due, that
/// waiting command is the one that runs (its pod is deleted then, no other is made), once;
/// sent ahead and never performed, it runs nothing and its pod goes with the executor.
/// (How soon after its offset it starts is a figure: `ci/bench-fanout`'s kind run.)
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_api_transport_a_command_sent_ahead_runs_once_when_performed_and_never_when_not() {
    use faultline::execute::{Executor, NodeOp};
    use std::time::Instant;
    let s = Scratch::new();
    let inventory = faultline::inventory::Inventory::load(api_transport_inventory(&s))
        .unwrap_or_else(|e| panic!("{e}"));
    let node = kind_workers().into_iter().next().expect("a kind worker");
    let file = format!("/tmp/faultline-primed-{}", std::process::id());
    let op = NodeOp::Run(format!("echo x >> {file}; echo ran"));
    let limit = Duration::from_secs(20);
    let ahead = Duration::from_secs(12);

    let executor = Executor::new(inventory.clone());
    let due = Instant::now() + ahead;
    let primed = executor
        .prime(&node, &op, limit, due, ahead)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(primed, "a node reached through the API is sent ahead");
    let waiting = live_access_pods_on(&node).await;
    assert_eq!(waiting.len(), 1, "one pod waits: {waiting:?}");
    tokio::time::sleep_until((due - Duration::from_secs(2)).into()).await;
    assert_eq!(lines_on(&node, &file), 0, "it ran before it was performed");
    tokio::time::sleep_until(due.into()).await;
    let out = executor
        .perform(&node, &op, limit)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit_status, Some(0), "{out:?}");
    assert_eq!(out.output.trim(), "ran", "{out:?}");
    assert_eq!(lines_on(&node, &file), 1);
    assert!(
        live_access_pods_on(&node).await.is_empty(),
        "the waiting pod was not the one that ran"
    );

    let executor = Executor::new(inventory);
    let primed = executor
        .prime(&node, &op, limit, Instant::now() + ahead, ahead)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(primed);
    assert_eq!(live_access_pods_on(&node).await.len(), 1);
    drop(executor);
    no_node_access_pods_left().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        lines_on(&node, &file),
        1,
        "a command sent ahead ran without being performed"
    );
    docker(&["exec", &node, "rm", "-f", &file]);
}

/// The names of the node-access pods created while `during` runs: a watch on them from
/// before it starts, so a pod made and deleted within it is counted too.
async fn access_pods_created_during<T>(
    during: impl std::future::Future<Output = T>,
) -> (T, Vec<String>) {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{ListParams, WatchEvent, WatchParams};
    let pods: kube::Api<Pod> = kube::Api::all(client().await);
    let label = format!("{}=true", faultline::execute::pod::ACCESS_LABEL);
    let listed = pods
        .list(&ListParams::default().labels(&label))
        .await
        .expect("list pods");
    let version = listed.metadata.resource_version.expect("a list version");
    let mut events = pods
        .watch(&WatchParams::default().labels(&label), &version)
        .await
        .expect("watch pods")
        .boxed();
    let out = during.await;
    // Whatever was created is announced well within this (it ran and was heard out).
    let mut created = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(3), events.next()).await {
        if let WatchEvent::Added(pod) = event.expect("a watch event") {
            created.push(pod.metadata.name.unwrap_or_default());
        }
    }
    (out, created)
}

/// A run keeps one node-access pod per node reached through the API (issue 48, item 3:
/// a step's command is an exec into it, not a pod started per step). Commands run in it,
/// ordinary and sent ahead, and no other pod is created for them; a kept pod deleted
/// behind the run's back costs nothing but speed (the next command starts a pod of its
/// own and succeeds); at the end the kept pods are deleted.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_api_transport_a_runs_commands_go_into_the_pod_kept_on_their_node() {
    use faultline::execute::{Executor, NodeOp};
    use std::time::Instant;
    let s = Scratch::new();
    let inventory = faultline::inventory::Inventory::load(api_transport_inventory(&s))
        .unwrap_or_else(|e| panic!("{e}"));
    let node = kind_workers().into_iter().next().expect("a kind worker");
    let limit = Duration::from_secs(30);
    let executor = Executor::new(inventory).for_run("kept-pod-test");
    let kept = executor
        .keep_node_access_pods(&[node.as_str()], Duration::from_secs(600))
        .await;
    assert!(
        kept.iter().all(|(_, k)| k.is_ok()),
        "the pod was not kept: {kept:?}"
    );
    assert_eq!(executor.kept_node_access_pods(), 1);
    let pods = live_access_pods_on(&node).await;
    assert_eq!(pods.len(), 1, "{pods:?}");

    let echo = |word: &str| NodeOp::Run(format!("echo {word}"));
    let ((plain, ahead), created) = access_pods_created_during(async {
        let plain = executor.perform(&node, &echo("plain"), limit).await;
        let ahead = Duration::from_secs(3);
        let primed = executor
            .prime(&node, &echo("ahead"), limit, Instant::now() + ahead, ahead)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(primed, "sent ahead into the kept pod");
        tokio::time::sleep(ahead).await;
        (plain, executor.perform(&node, &echo("ahead"), limit).await)
    })
    .await;
    for (word, out) in [("plain", plain), ("ahead", ahead)] {
        let out = out.unwrap_or_else(|e| panic!("{word}: {e}"));
        assert_eq!(out.output.trim(), word, "{out:?}");
    }
    assert_eq!(
        created,
        Vec::<String>::new(),
        "pods were started beside the kept one"
    );
    assert_eq!(
        live_access_pods_on(&node).await,
        pods,
        "the kept pod is still the one"
    );

    // Deleted behind the run's back: the next command starts its own pod and runs.
    {
        use k8s_openapi::api::core::v1::Pod;
        let namespaced: kube::Api<Pod> =
            kube::Api::namespaced(client().await, faultline::execute::pod::DEFAULT_NAMESPACE);
        namespaced
            .delete(&pods[0], &kube::api::DeleteParams::default())
            .await
            .expect("delete the kept pod");
        let deleted = Instant::now();
        while namespaced
            .get_opt(&pods[0])
            .await
            .expect("read pod")
            .is_some()
        {
            assert!(
                deleted.elapsed() < Duration::from_secs(60),
                "{} stays",
                pods[0]
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    let (after, created) =
        access_pods_created_during(executor.perform(&node, &echo("after"), limit)).await;
    let after = after.unwrap_or_else(|e| panic!("after the kept pod went: {e}"));
    assert_eq!(after.output.trim(), "after", "{after:?}");
    assert_eq!(created.len(), 1, "one pod of its own: {created:?}");
    assert_eq!(
        executor.kept_node_access_pods(),
        0,
        "the gone pod is still kept"
    );

    let kept = executor
        .keep_node_access_pods(&[node.as_str()], Duration::from_secs(600))
        .await;
    assert!(kept.iter().all(|(_, k)| k.is_ok()), "{kept:?}");

    // A pod of this run it lost track of (CI once saw one left running after a Job's
    // run), and one of another run: the end finds the first by its label and leaves the
    // second.
    let lost = labelled_access_pod(&node, "kept-pod-test").await;
    let other = labelled_access_pod(&node, "another-run").await;
    executor.delete_kept_node_access_pods().await;
    let swept: Vec<String> = executor
        .delete_runs_node_access_pods()
        .await
        .into_iter()
        .map(|found| found.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(
        swept,
        vec![format!(
            "{}/{lost}",
            faultline::execute::pod::DEFAULT_NAMESPACE
        )],
        "the end's sweep"
    );
    {
        use k8s_openapi::api::core::v1::Pod;
        let namespaced: kube::Api<Pod> =
            kube::Api::namespaced(client().await, faultline::execute::pod::DEFAULT_NAMESPACE);
        let still = namespaced
            .get(&other)
            .await
            .expect("another run's pod stays");
        assert!(
            still.metadata.deletion_timestamp.is_none(),
            "another run's pod was deleted"
        );
        namespaced
            .delete(&other, &kube::api::DeleteParams::default())
            .await
            .expect("delete the other run's pod");
    }
    no_node_access_pods_left().await;
}

/// Creates a pod on `node` in the node-access namespace labelled as a node-access pod of
/// `run`, the way a run's own are, but unknown to any executor; returns its name.
async fn labelled_access_pod(node: &str, run: &str) -> String {
    use faultline::execute::pod::{ACCESS_LABEL, DEFAULT_NAMESPACE, RUN_LABEL};
    use k8s_openapi::api::core::v1::Pod;
    let namespaced: kube::Api<Pod> = kube::Api::namespaced(client().await, DEFAULT_NAMESPACE);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "generateName": "faultline-lost-",
            "labels": { ACCESS_LABEL: "true", RUN_LABEL: run },
        },
        "spec": {
            "nodeName": node,
            "activeDeadlineSeconds": 300,
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{ "operator": "Exists" }],
            "containers": [{
                "name": "sleep",
                "image": "registry.k8s.io/pause:3.10",
                "imagePullPolicy": "IfNotPresent",
            }],
        },
    }))
    .expect("a pod");
    namespaced
        .create(&kube::api::PostParams::default(), &pod)
        .await
        .expect("create a labelled pod")
        .metadata
        .name
        .expect("a generated name")
}

/// A kubelet stop through the API on a node whose self-restore timer is gone, or has
/// fired and is still running its undo, is not applied. The loop issues a fault only
/// while its backstop is ahead, but an unprimed stop through the API still waits for a
/// pod and an exec (seconds at 20 nodes), and the timer can fire in that time; the node
/// checks the timer just before the fault. First the timer is stopped by hand between
/// arming and the stop; then a timer fires into an undo that takes a while (a `sleep`),
/// and the stop lands while it runs, when systemd still calls the timer `active`. Both
/// times the stop fails with the gate's status (97) and the kubelet keeps running. (The
/// API-transport runs above are the other half: with the timer waiting, the gated stop
/// goes through.)
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_api_transport_a_kubelet_stop_whose_timer_is_gone_is_not_applied() {
    use faultline::execute::{ExecError, Executor, NodeOp};
    let s = Scratch::new();
    let inventory = faultline::inventory::Inventory::load(api_transport_inventory(&s))
        .unwrap_or_else(|e| panic!("{e}"));
    let node = kind_workers().into_iter().next().expect("a kind worker");
    let systemctl = |args: &[&str]| {
        let out = std::process::Command::new("docker")
            .args(["exec", &node, "systemctl"])
            .args(args)
            .output()
            .expect("run docker");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let is_active = |unit: &str| systemctl(&["is-active", unit]);
    let sub_state = |unit: &str| systemctl(&["show", "--property=SubState", "--value", unit]);
    assert_eq!(
        is_active("kubelet"),
        "active",
        "{node}'s kubelet before the test"
    );
    let executor = Executor::new(inventory);
    // The stop, with the kubelet started again should it have gone through.
    let stop = || async {
        let stopped = executor
            .perform(&node, &NodeOp::KubeletStop, Duration::from_secs(60))
            .await;
        let kubelet = is_active("kubelet");
        if kubelet != "active" {
            systemctl(&["start", "kubelet"]);
        }
        (stopped, kubelet)
    };
    let refused = |(stopped, kubelet): (Result<_, ExecError>, String), when: &str| {
        assert!(
            matches!(
                &stopped,
                Err(ExecError::CommandFailed {
                    exit_status: Some(97),
                    ..
                })
            ),
            "{when}: the stop was not refused by the node: {stopped:?}"
        );
        assert_eq!(
            kubelet, "active",
            "{when}: the kubelet was stopped with no timer left"
        );
    };

    let token = format!("flgate{}-1", std::process::id());
    let armed = executor
        .arm_restore(
            &node,
            &NodeOp::KubeletStart,
            Duration::from_secs(300),
            &token,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let unit = format!("faultline-restore-{token}.timer");
    assert_eq!(sub_state(&unit), "waiting", "the timer was armed");
    systemctl(&["stop", &unit]);
    refused(stop().await, "the timer stopped");
    let _ = executor.disarm(&node, &armed).await;

    let token = format!("flgate{}-2", std::process::id());
    let undo = NodeOp::Run("sleep 40".into());
    let armed = executor
        .arm_restore(&node, &undo, Duration::from_secs(1), &token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let unit = format!("faultline-restore-{token}.timer");
    let service = format!("faultline-restore-{token}.service");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while sub_state(&unit) != "running" && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let running = (sub_state(&unit), is_active(&unit));
    let outcome = stop().await;
    systemctl(&["stop", &service]);
    let _ = executor.disarm(&node, &armed).await;
    assert_eq!(
        running,
        ("running".to_string(), "active".to_string()),
        "the timer fired into its undo, which systemd calls active"
    );
    refused(outcome, "the timer's undo running");
    no_node_access_pods_left().await;
}

/// A command through the API whose future is dropped while it runs (an outer timeout, a
/// cancelled run) does not leave its node-access pod to its deadline, a minute and more
/// away: the pod is deleted at once (issue 44).
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_api_transport_a_dropped_command_deletes_its_pod_at_once() {
    use faultline::execute::{Executor, NodeOp};
    let s = Scratch::new();
    let inventory = faultline::inventory::Inventory::load(api_transport_inventory(&s))
        .unwrap_or_else(|e| panic!("{e}"));
    let node = kind_workers().into_iter().next().expect("a kind worker");
    assert_eq!(
        live_access_pods_on(&node).await,
        Vec::<String>::new(),
        "a node-access pod is already on {node}"
    );
    let executor = Executor::new(inventory);
    let op = NodeOp::Run("sleep 120".to_string());
    // Boxed, so that dropping it drops the future itself (a `pin!` would drop a reference).
    let mut command = Box::pin(executor.perform(&node, &op, Duration::from_secs(120)));
    let started = async {
        loop {
            if let [pod] = live_access_pods_on(&node).await.as_slice() {
                return pod.clone();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let pod = tokio::select! {
        ended = &mut command => panic!("`sleep 120` ended first: {ended:?}"),
        pod = tokio::time::timeout(Duration::from_secs(60), started) => {
            pod.expect("its pod runs within 60 s, before the command is dropped")
        }
    };
    // Running: the pod is there and the command inside it sleeps.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let dropped = std::time::Instant::now();
    drop(command);
    while live_access_pods_on(&node).await.contains(&pod) {
        assert!(
            dropped.elapsed() < Duration::from_secs(15),
            "the dropped command's pod {pod} was not deleted within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "its pod was being deleted {:?} after the drop",
        dropped.elapsed()
    );
    no_node_access_pods_left().await;
}

/// The outputs (finished) and errors (failed) of one step on a run's timeline.
fn step_says(record: &faultline::record::RunRecord, step: &str) -> Vec<String> {
    use faultline::timeline::{Event, StepPhase};
    record
        .timeline
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Step {
                step: s,
                phase: StepPhase::Finished { output, .. },
                ..
            } if s == step => Some(output.clone()),
            Event::Step {
                step: s,
                phase: StepPhase::Failed { error },
                ..
            } if s == step => Some(error.clone()),
            _ => None,
        })
        .collect()
}

/// The seconds after "held " in a drain's account of a hold ("… held 15.0 s by …").
fn held_secs(said: &str) -> f64 {
    said.split("held ")
        .nth(1)
        .and_then(|rest| rest.split(" s").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no held time in {said}"))
}

/// Whether the node is schedulable (not cordoned).
async fn schedulable(client: &kube::Client, node: &str) -> bool {
    let n = kube::Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .get(node)
        .await
        .expect("get the node");
    !n.spec.and_then(|s| s.unschedulable).unwrap_or(false)
}

/// Issue 46 item 3: a drain held by a PodDisruptionBudget (one pod, `minAvailable: 1`) is
/// reported by the budget's name and how long it held. `onTimeout: continue` goes on with
/// the pod left on the node (exit 0, the pod never evicted); `onTimeout: fail` makes the step
/// an error naming the budget (exit 2). Either way the worker is uncordoned at the end.
#[tokio::test]
#[ignore = "needs the kind cluster: ci/test runs it after ci/kind/up"]
async fn kind_drain_held_by_a_pdb_names_it_and_how_long_it_held() {
    let client = client().await;
    all_nodes_ready(&client, BACK).await;
    for (name, code) in [("drain-held-by-pdb", 0), ("drain-held-by-pdb-fails", 2)] {
        let s = Scratch::new();
        let out = s.run(&format!("fixtures/experiments/kind/{name}.yaml"), &[]);
        let record = s.record(name);
        let victim = &record.targets["victim"][0];
        let said = step_says(&record, "drain victim").join("\n");
        assert!(
            said.contains(&format!("drain of {victim} held "))
                && said.contains("by PodDisruptionBudget faultline-lab/held-pdb")
                && said.contains("still held at the 15 s timeout"),
            "{name}: {said}"
        );
        let suite_out = junit_suite_out(&s.junit(name));
        assert!(
            suite_out.contains("by PodDisruptionBudget faultline-lab/held-pdb"),
            "{name}: JUnit output names the budget: {suite_out}"
        );
        let held = held_secs(&said);
        assert!(
            (10.0..=20.0).contains(&held),
            "{name}: held {held} s: {said}"
        );
        if code == 0 {
            assert!(
                said.contains("onTimeout: continue: going on with faultline-lab/held-"),
                "{said}"
            );
            assert_eq!(
                outcome_of(&record, "the held pod is never evicted"),
                Outcome::Passed
            );
        }
        assert_eq!(out.status.code(), Some(code), "{name}");
        assert!(
            schedulable(&client, victim).await,
            "{name}: {victim} uncordoned at the end"
        );
        let journal = std::fs::read_to_string(s.journal()).unwrap_or_default();
        assert!(!journal.contains("\"node\""), "journal cleared: {journal}");
        // What setup applied is gone: the chart's check, after this test, installs a
        // faultline-lab of its own, which Helm refuses over one it does not own.
        let namespaces = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
        let left = namespaces
            .get_opt("faultline-lab")
            .await
            .expect("namespaces readable");
        assert!(
            left.is_none(),
            "{name}: faultline-lab deleted by the teardown"
        );
    }
    all_nodes_ready(&client, BACK).await;
}
