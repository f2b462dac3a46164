//! `plan -o json` and `rehearse -o json` through the built binary: the JSON parses, says
//! what the text says (steps in time order with their commands, predictions, problems;
//! each expectation's verdict and the early stop), and the exit code is the text's.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn faultline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("FAULTLINE_INVENTORY")
        .current_dir(repo())
        .output()
        .expect("faultline runs")
}

/// The JSON on stdout, and the exit code.
fn json(args: &[&str]) -> (Value, Option<i32>) {
    let out = faultline(args);
    let value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (value, out.status.code())
}

fn exit_of(args: &[&str]) -> Option<i32> {
    faultline(args).status.code()
}

#[test]
fn a_plan_without_an_inventory_is_the_steps_in_time_order_with_predictions() {
    let exp = "experiments/kubelet-stop-within-toleration.yaml";
    let (plans, code) = json(&["plan", exp, "-o", "json"]);
    assert_eq!(code, exit_of(&["plan", exp]));
    assert_eq!(code, Some(0));
    let plan = &plans[0];
    assert_eq!(plan["status"], "planned");
    assert_eq!(plan["experiment"], "kubelet-stop-within-toleration");
    assert_eq!(plan["offline"], "no inventory (-i) given");
    let steps = plan["steps"].as_array().expect("steps");
    let names: Vec<&str> = steps.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["stop kubelet", "start kubelet"]);
    let at: Vec<i64> = steps.iter().filter_map(|s| s["atMs"].as_i64()).collect();
    assert_eq!(at.len(), 2);
    assert!(at[0] < at[1], "{at:?}");
    assert!(
        plan["timers"]
            .as_array()
            .expect("timers")
            .iter()
            .all(|t| t["origin"] == "assumed" && t["valueMs"].as_u64().is_some())
    );
    let predictions = plan["predictions"].as_array().expect("predictions");
    assert!(
        predictions.iter().any(|p| p["transition"] == "NodeUnknown"),
        "{predictions:?}"
    );
    assert!(plan["expectations"].as_array().is_some_and(|e| e.len() > 1));
    assert_eq!(plan["problems"].as_array().map(Vec::len), Some(0));
    assert_eq!(plan["exitCode"], 0);
}

#[test]
fn a_plan_that_cannot_run_says_why_per_node_and_exits_2_as_the_text_does() {
    let args = [
        "plan",
        "-i",
        "fixtures/inventory/k3s.yaml",
        "experiments/power-off-past-toleration.yaml",
    ];
    let (plans, code) = json(&[&args[..], &["-o", "json"]].concat());
    assert_eq!(code, Some(2));
    assert_eq!(code, exit_of(&args));
    let plan = &plans[0];
    assert_eq!(plan["exitCode"], 2);
    assert!(plan["cluster"].is_string(), "{plan}");
    let power_on = plan["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "power on"))
        .expect("the power on step");
    let commands = power_on["commands"].as_array().expect("commands");
    assert!(!commands.is_empty(), "{power_on}");
    assert!(
        commands
            .iter()
            .all(|c| c["cannotRun"].as_str().is_some() && c["command"].is_null()),
        "{power_on}"
    );
    let problems = plan["problems"].as_array().expect("problems");
    assert!(
        problems
            .iter()
            .any(|p| p["kind"] == "cannot-run" && p["about"] == "power on" && p["exitCode"] == 2),
        "{problems:?}"
    );
    // A target resolved to candidates: the inventory's nodes, said as not resolved.
    assert!(
        plan["targets"]
            .as_array()
            .expect("targets")
            .iter()
            .all(|t| t["resolved"] == false && t["nodes"].as_array().is_some_and(|n| !n.is_empty())),
        "{plan}"
    );
}

#[test]
fn an_expectation_the_model_says_cannot_hold_is_flagged_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("short.yaml");
    std::fs::write(
        &file,
        "name: short\ndescription: d\nnamespace: faultline-lab\n\
         targets:\n  victim: {role: worker, count: 1}\n\
         steps:\n  - {name: stop, at: 0s, do: kubelet-stop, target: victim}\n\
         \x20 - {name: start, at: 3m, do: kubelet-start, target: victim}\n\
         expect:\n  - {name: evicted, pods: {workload: deployment/web, on: victim}, becomes: Terminating, within: grace + toleration + 30s}\n",
    )
    .expect("write");
    let file = file.to_str().expect("utf-8");
    let args = ["plan", "-i", "fixtures/inventory/kind.yaml", file];
    let (plans, code) = json(&[&args[..], &["--output", "json"]].concat());
    assert_eq!(code, Some(1));
    assert_eq!(code, exit_of(&args));
    let plan = &plans[0];
    let evicted = &plan["expectations"][0];
    assert_eq!(evicted["name"], "evicted");
    assert!(
        evicted["cannotHold"]
            .as_str()
            .is_some_and(|w| !w.is_empty()),
        "{evicted}"
    );
    assert_eq!(plan["problems"][0]["kind"], "cannot-hold");
    assert_eq!(plan["problems"][0]["exitCode"], 1);
    // With an inventory every candidate's command is there.
    assert!(
        plan["steps"][0]["commands"]
            .as_array()
            .is_some_and(|c| c.iter().all(|c| c["command"].is_string())),
        "{plan}"
    );
}

#[test]
fn a_refused_plan_is_an_object_with_its_reason_and_exit_2() {
    let args = [
        "plan",
        "experiments/control-plane-node-down.yaml",
        "-i",
        "fixtures/inventory/kind.yaml",
    ];
    let (plans, code) = json(&[&args[..], &["-o", "json"]].concat());
    assert_eq!(code, Some(2));
    assert_eq!(code, exit_of(&args));
    let plan = &plans[0];
    let said = plan["reason"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| {
            plan["problems"]
                .as_array()
                .map(|p| format!("{p:?}"))
                .unwrap_or_default()
        });
    assert!(
        said.contains("which runs the only API server faultline talks to"),
        "{plan}"
    );
}

#[test]
fn a_rehearsal_gives_each_verdict_beside_the_record_and_the_early_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original =
        std::fs::read_to_string(repo().join("experiments/kubelet-stop-past-toleration.yaml"))
            .expect("shipped experiment");
    let fixtures = repo().join("fixtures");
    let changed = original
        .replacen("within: grace + 10s", "within: 5s", 1)
        .replace("../fixtures", fixtures.to_str().expect("utf-8"));
    let file = dir.path().join("stricter.yaml");
    std::fs::write(&file, changed).expect("write");
    let file = file.to_str().expect("utf-8");
    let record = "fixtures/records/kubelet-stop-past-toleration.json";

    let args = ["rehearse", file, "--record", record];
    let (runs, code) = json(&[&args[..], &["-o", "json"]].concat());
    assert_eq!(code, Some(1));
    assert_eq!(code, exit_of(&args));
    let run = &runs[0];
    assert_eq!(
        (run["run"].as_u64(), run["runs"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(run["endedEarly"], true);
    assert!(
        run["ended"].as_str().is_some_and(|e| !e.is_empty()),
        "{run}"
    );
    let expectations = run["expectations"].as_array().expect("expectations");
    let failed: Vec<&Value> = expectations
        .iter()
        .filter(|e| e["outcome"] == "Failed")
        .collect();
    assert_eq!(failed.len(), 1, "{expectations:?}");
    assert!(
        failed[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("was not Unknown by +5.0s")),
        "{failed:?}"
    );
    // The record passed it: the recorded verdict stands beside the rehearsed one.
    assert_eq!(failed[0]["recorded"]["outcome"], "Passed");
    assert!(
        expectations.iter().any(|e| e["outcome"] == "Error"
            || e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("not decided"))),
        "the early stop leaves some undecided: {expectations:?}"
    );
    assert!(
        run["steps"]
            .as_array()
            .is_some_and(|s| s.iter().all(|s| s["name"].is_string())),
        "{run}"
    );

    let args = ["rehearse", file, "--record", record, "--keep-going"];
    let (runs, code) = json(&[&args[..], &["-o", "json"]].concat());
    assert_eq!(code, exit_of(&args));
    assert_eq!(runs[0]["endedEarly"], false, "{}", runs[0]);
}

#[test]
fn a_plan_carries_its_file_s_warnings_at_their_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lab = repo().join("fixtures/lab");
    let file = dir.path().join("setup.yaml");
    std::fs::write(
        &file,
        format!(
            "name: setup\ndescription: d\nnamespace: faultline-lab\n\
             targets:\n  victim: {{role: worker, runningPodsOf: deployment/web, count: 1}}\n\
             setup:\n  manifests: [{ns}, {web}]\n\
             steps:\n  - {{name: stop, at: 0s, do: kubelet-stop, target: victim}}\n\
             expect:\n  - {{name: db kept, pods: {{workload: statefulset/db, on: victim}}, never: Terminating}}\n",
            ns = lab.join("00-namespace.yaml").display(),
            web = lab.join("web-deployment.yaml").display(),
        ),
    )
    .expect("write");
    let (plans, code) = json(&["plan", file.to_str().expect("utf-8"), "-o", "json"]);
    assert_eq!(code, Some(0));
    let warnings = plans[0]["fileWarnings"].as_array().expect("fileWarnings");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["line"], 11);
    assert!(
        warnings[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("does not create statefulset/db")),
        "{warnings:?}"
    );
}
