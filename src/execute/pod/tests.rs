use std::path::Path;
use std::time::Duration;

use super::*;
use crate::execute::NodeOp;
use crate::inventory::pod_defaults::SYSTEMD_WAITING;
use crate::inventory::{Inventory, TransportKind};

fn settings() -> PodSettings {
    PodSettings {
        namespace: DEFAULT_NAMESPACE.into(),
        create_namespace: true,
        image: "example/debian:12".into(),
        start_timeout: Duration::from_secs(30),
    }
}

fn status(json: &str) -> Status {
    serde_json::from_str(json).expect("a Status")
}

#[test]
fn the_pod_is_pinned_privileged_in_the_hosts_namespaces_and_tolerates_every_taint() {
    let pod = pod_object(
        "worker-1",
        &settings(),
        Duration::from_secs(125),
        Some("fl1-7"),
    );
    let meta = &pod.metadata;
    assert_eq!(meta.namespace.as_deref(), Some(DEFAULT_NAMESPACE));
    assert_eq!(
        meta.labels.as_ref().and_then(|l| l.get(ACCESS_LABEL)),
        Some(&"true".to_string())
    );
    assert_eq!(
        meta.labels.as_ref().and_then(|l| l.get(RUN_LABEL)),
        Some(&"fl1-7".to_string()),
        "the run that made it, for a restore without the cluster lock"
    );
    let outside = pod_object("worker-1", &settings(), Duration::from_secs(1), None);
    assert!(
        outside
            .metadata
            .labels
            .is_some_and(|l| !l.contains_key(RUN_LABEL))
    );
    assert_eq!(meta.generate_name.as_deref(), Some("faultline-worker-1-"));
    let spec = pod.spec.expect("a spec");
    assert_eq!(spec.node_name.as_deref(), Some("worker-1"));
    assert_eq!(spec.host_pid, Some(true));
    assert_eq!(spec.host_network, Some(true));
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.active_deadline_seconds, Some(125));
    // One toleration with no key and `Exists` matches every taint, NoExecute included.
    let tolerations = spec.tolerations.expect("tolerations");
    assert_eq!(tolerations.len(), 1);
    assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"));
    assert_eq!(tolerations[0].key, None);
    assert_eq!(tolerations[0].effect, None);
    let c = &spec.containers[0];
    assert_eq!(c.image.as_deref(), Some("example/debian:12"));
    assert_eq!(
        c.command,
        Some(vec!["sleep".to_string(), "125".to_string()])
    );
    assert_eq!(
        c.security_context.as_ref().and_then(|s| s.privileged),
        Some(true)
    );
    let mount = &c.volume_mounts.as_ref().expect("mounts")[0];
    assert_eq!(mount.mount_path, "/host");
    let volume = &spec.volumes.expect("volumes")[0];
    assert_eq!(volume.name, mount.name);
    assert_eq!(
        volume.host_path.as_ref().map(|h| h.path.as_str()),
        Some("/")
    );
}

#[test]
fn a_long_node_name_still_gives_a_valid_generate_name() {
    let node = format!("{}.example.com", "n".repeat(80));
    let pod = pod_object(&node, &settings(), Duration::from_secs(1), None);
    let prefix = pod.metadata.generate_name.expect("generateName");
    assert!(prefix.len() <= 58, "{prefix}");
    assert!(prefix.ends_with('-'));
    assert!(
        !prefix.ends_with("--") && !prefix.contains(".-"),
        "{prefix}"
    );
    // The node name is kept whole in the annotation.
    assert_eq!(
        pod.metadata
            .annotations
            .and_then(|a| a.get("faultline.dev/node").cloned()),
        Some(node)
    );
}

#[test]
fn the_namespace_admits_privileged_pods() {
    let ns = namespace_object("faultline-node-access");
    let labels = ns.metadata.labels.expect("labels");
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("privileged")
    );
    assert_eq!(ns.metadata.name.as_deref(), Some("faultline-node-access"));
}

#[test]
fn the_command_runs_in_the_hosts_namespaces_as_one_argument() {
    let argv = enter_argv("exec timeout -k 5 3 sh -c 'systemctl stop kubelet'");
    assert_eq!(&argv[..3], ["nsenter", "-t", "1"]);
    assert!(argv.contains(&"-m".to_string()) && argv.contains(&"-p".to_string()));
    assert_eq!(argv[argv.len() - 3..argv.len() - 1], ["sh", "-c"]);
    assert_eq!(
        argv.last().map(String::as_str),
        Some("exec timeout -k 5 3 sh -c 'systemctl stop kubelet'")
    );
}

#[test]
fn the_exit_status_comes_from_the_streams_final_status() {
    assert_eq!(
        exit_code(Some(&status(r#"{"metadata": {}, "status": "Success"}"#))),
        ExitOf::Code(0)
    );
    let failed = status(
        r#"{"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": "command terminated with non-zero exit code: exit status 3",
            "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}"#,
    );
    assert_eq!(exit_code(Some(&failed)), ExitOf::Code(3));
    assert_eq!(exit_code(None), ExitOf::NoStatus);
    let refused = status(
        r#"{"metadata": {}, "status": "Failure",
            "message": "error dialing backend: dial tcp 172.18.0.4:10250: connect: connection refused"}"#,
    );
    assert_eq!(
        exit_code(Some(&refused)),
        ExitOf::Refused(
            "error dialing backend: dial tcp 172.18.0.4:10250: connect: connection refused".into()
        )
    );
}

fn pod_status(json: &str) -> Pod {
    serde_json::from_str(json).expect("a Pod")
}

#[test]
fn a_pod_that_cannot_start_fails_at_once_and_one_on_its_way_is_waited_for() {
    let never = pod_status(
        r#"{"metadata": {}, "status": {"phase": "Pending", "containerStatuses": [{"name": "node",
            "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ErrImageNeverPull", "message": "not present"}}}]}}"#,
    );
    assert!(
        matches!(start_state(&never), StartState::Failed(w) if w.contains("ErrImageNeverPull"))
    );
    let creating = pod_status(
        r#"{"metadata": {}, "status": {"phase": "Pending", "containerStatuses": [{"name": "node",
            "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}}}]}}"#,
    );
    assert!(matches!(start_state(&creating), StartState::Waiting(_)));
    let running = pod_status(
        r#"{"metadata": {}, "status": {"phase": "Running", "containerStatuses": [{"name": "node",
            "image": "x", "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {}}}]}}"#,
    );
    assert_eq!(start_state(&running), StartState::Running);
    assert!(matches!(
        start_state(&pod_status(r#"{"metadata": {}, "status": {"phase": "Failed", "reason": "DeadlineExceeded"}}"#)),
        StartState::Failed(w) if w.contains("DeadlineExceeded")
    ));
    assert!(matches!(
        start_state(&pod_status(r#"{"metadata": {}}"#)),
        StartState::Waiting(_)
    ));
}

#[test]
fn the_inventory_reads_pod_settings_and_arms_restores_with_systemd() {
    let inv = Inventory::parse(
        r#"
cluster: {name: c}
profile: kind
transport: pod
nodes:
  - {name: a}
  - {name: b, pod: {namespace: ops-debug, image: "debian:12", startTimeout: 20s}}
"#,
        Path::new("t.yaml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let a = inv.node("a").expect("a");
    assert_eq!(a.transport, TransportKind::Pod);
    assert_eq!(a.pod.namespace, DEFAULT_NAMESPACE);
    assert!(a.pod.create_namespace);
    assert_eq!(a.pod.image, DEFAULT_IMAGE);
    assert_eq!(a.arm_restore.as_deref(), Some(SYSTEMD_ARM));
    assert_eq!(a.disarm_restore.as_deref(), Some(SYSTEMD_DISARM));
    assert_eq!(a.restore_waiting.as_deref(), Some(SYSTEMD_WAITING));
    let b = inv.node("b").expect("b");
    // A namespace the inventory names is used as it is, not created.
    assert_eq!(b.pod.namespace, "ops-debug");
    assert!(!b.pod.create_namespace);
    assert_eq!(b.pod.image, "debian:12");
    assert_eq!(b.pod.start_timeout, Duration::from_secs(20));
    // The kind profile's own nodes keep the executor's default self-restore.
    let kind = Inventory::parse(
        "cluster: {name: c}\nprofile: kind\nnodes: [{name: a}]\n",
        Path::new("t.yaml"),
    )
    .expect("valid");
    assert_eq!(kind.node("a").expect("a").arm_restore, None);
    assert_eq!(kind.node("a").expect("a").restore_waiting, None);
}

/// The self-restore's three templates come from one layer; the systemd timer written out
/// in full is asked the default way; a custom arm without a check is not gated.
#[test]
fn the_restore_check_comes_with_its_arm() {
    let parse =
        |text: &str| Inventory::parse(text, Path::new("t.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let waiting = |inv: &Inventory, n: &str| inv.node(n).expect("node").restore_waiting.clone();
    let custom = parse(
        r#"
cluster: {name: c}
transport: pod
armRestore: my-timer arm {token} {seconds} {undo}
disarmRestore: my-timer disarm {token}
restoreWaiting: my-timer waiting {token}
nodes:
  - {name: a}
  - {name: b, armRestore: "other {token} {seconds} {undo}", disarmRestore: "other-off {token}"}
  - {name: c, profile: kubeadm}
"#,
    );
    assert_eq!(
        waiting(&custom, "a").as_deref(),
        Some("my-timer waiting {token}")
    );
    // A node's own arm does not borrow the top level's check: it has none.
    assert_eq!(waiting(&custom, "b"), None);
    // The top level is a nearer layer than the node's profile.
    assert_eq!(
        waiting(&custom, "c").as_deref(),
        Some("my-timer waiting {token}")
    );
    let spelled_out = parse(&format!(
        "cluster: {{name: c}}\ntransport: pod\narmRestore: '{SYSTEMD_ARM}'\n\
         disarmRestore: '{SYSTEMD_DISARM}'\nnodes: [{{name: a}}]\n"
    ));
    assert_eq!(waiting(&spelled_out, "a").as_deref(), Some(SYSTEMD_WAITING));
    let profile = parse("cluster: {name: c}\nprofile: kubeadm\nnodes: [{name: a}]\n");
    assert_eq!(waiting(&profile, "a").as_deref(), Some(SYSTEMD_WAITING));
}

/// A check or a disarm set where no arm is would take the layer's place and drop the
/// profile's arm (the restore would then die with the node-access pod): refused, naming
/// what to add.
#[test]
fn a_restore_template_without_its_arm_is_refused() {
    for (line, template) in [
        ("restoreWaiting: my-timer waiting {token}", "restoreWaiting"),
        ("disarmRestore: my-timer disarm {token}", "disarmRestore"),
    ] {
        let text = format!(
            "cluster: {{name: c}}\ntransport: pod\nprofile: kubeadm\n{line}\nnodes: [{{name: a}}]\n"
        );
        let err = Inventory::parse(&text, Path::new("t.yaml")).expect_err("no arm");
        let said = err.to_string();
        assert!(
            said.contains("node `a`")
                && said.contains(&format!("`{template}` is set without `armRestore`")),
            "{said}"
        );
    }
}

#[test]
fn a_bad_namespace_is_refused_with_the_node() {
    let err = Inventory::parse(
        "cluster: {name: c}\ntransport: pod\npod: {namespace: Not_OK}\nnodes: [{name: a}]\n",
        Path::new("t.yaml"),
    )
    .expect_err("invalid");
    let said = err.to_string();
    assert!(
        said.contains("node `a`") && said.contains("pod.namespace `Not_OK`"),
        "{said}"
    );
}

#[test]
fn plan_shows_the_pod_and_the_host_command() {
    let inv = Inventory::parse(
        "cluster: {name: c}\nprofile: kind\ntransport: pod\nnodes: [{name: w}]\n",
        Path::new("t.yaml"),
    )
    .expect("valid");
    let ex = crate::execute::Executor::new(inv);
    let shown = ex.describe("w", &NodeOp::KubeletStop);
    assert_eq!(
        shown,
        format!(
            "api exec in a privileged pod on w (namespace {DEFAULT_NAMESPACE}, image {DEFAULT_IMAGE}): nsenter -t 1 -m -u -i -n -p -- sh -c 'systemctl stop kubelet'"
        )
    );
}

#[test]
fn the_openshift_profile_is_the_api_transport_with_oc_debug_s_image_and_restore() {
    // The API transport's default self-restore is the `openshift` profile's, so the kind
    // tests through the API exercise that profile's systemd-run timer on real systemd.
    let inv = Inventory::parse(
        "cluster: {name: c}\nprofile: openshift\nnodes: [{name: a}]\n",
        Path::new("t.yaml"),
    )
    .expect("valid");
    let a = inv.node("a").expect("a");
    assert_eq!(a.arm_restore.as_deref(), Some(SYSTEMD_ARM));
    assert_eq!(a.disarm_restore.as_deref(), Some(SYSTEMD_DISARM));
    assert_eq!(a.restore_waiting.as_deref(), Some(SYSTEMD_WAITING));
    // It is the API transport, with `oc debug`'s image: no `oc` binary, no SSH.
    let ex = crate::execute::Executor::new(inv);
    assert_eq!(
        ex.describe("a", &NodeOp::KubeletStop),
        format!(
            "api exec in a privileged pod on a (namespace {DEFAULT_NAMESPACE}, image \
             image-registry.openshift-image-registry.svc:5000/openshift/tools:latest): nsenter \
             -t 1 -m -u -i -n -p -- sh -c 'systemctl stop kubelet'"
        )
    );
}

/// `restore` without the cluster lock deletes only the node-access pods of the runs its
/// journal names: another run's (live, perhaps) and an unlabelled one stay; with the lock,
/// every one left is a dead run's, but never one of a run still alive on this journal.
/// A pod already being deleted is never left behind.
#[test]
fn without_the_lock_restore_deletes_only_its_journals_runs_pods() {
    let pod = |run: Option<&str>| pod_object("w1", &settings(), Duration::from_secs(60), run);
    let mine: std::collections::BTreeSet<String> = ["fl1".to_string()].into();
    let only = |runs| Leftovers {
        only_runs: Some(runs),
        except_runs: None,
    };
    let any = Leftovers::default();
    assert!(left_behind(&pod(Some("fl1")), only(&mine)));
    assert!(!left_behind(&pod(Some("fl2")), only(&mine)));
    assert!(!left_behind(&pod(None), only(&mine)));
    assert!(left_behind(&pod(Some("fl2")), any));
    assert!(left_behind(&pod(None), any));
    let alive: std::collections::BTreeSet<String> = ["fl2".to_string()].into();
    let sparing = Leftovers {
        only_runs: None,
        except_runs: Some(&alive),
    };
    assert!(
        !left_behind(&pod(Some("fl2")), sparing),
        "a live run's pod stays"
    );
    assert!(left_behind(&pod(Some("fl1")), sparing));
    let mut going = pod(Some("fl1"));
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Default::default(),
    ));
    assert!(!left_behind(&going, any));
}

/// A pod dropped unfinished is deleted by a spawned task; the process must wait for that
/// task before it exits, or the deletion is never sent and the pod stays privileged on
/// its node until its deadline (CI saw one left after a Job's run).
#[tokio::test]
async fn a_dropped_pods_deletion_is_waited_for_before_exit() {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
    let client = kube::Client::try_from(config).expect("a client");
    drop(AccessPod::standing_in_live(client, "dropped"));
    // On this test's one thread the spawned deletion has not run yet.
    assert!(
        !DROPPED_DELETIONS.is_empty(),
        "a dropped pod spawned no tracked deletion"
    );
    assert!(send_pending_deletions(Duration::from_secs(10)).await);
}
