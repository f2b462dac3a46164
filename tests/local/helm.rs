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

/// (kind, namespace, name) → rules, for every ClusterRole and Role.
fn roles(docs: &[Value]) -> BTreeMap<(String, String, String), Value> {
    docs.iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("ClusterRole" | "Role")))
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
    let generated = docs(&faultline(&["rbac", exp, "--name", "t"]));
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
    let generated = docs(&faultline(&["rbac", exp, "-i", &inv, "--name", "t"]));
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
    // The comparison's arguments go with the baseline only (the first run has none).
    assert!(
        container["args"][0]
            .to_string()
            .contains("${baseline:+--baseline \\\"$baseline\\\" $FAULTLINE_COMPARE_ARGS}"),
        "{}",
        container["args"][0]
    );
}
