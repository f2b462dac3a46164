//! The traps of a new user's first hour with experiment files, through the built binary:
//! what `validate` and `rehearse` print for what people actually write (durations with
//! spaces and long units, dotted node names, misspelled keys, the wrong kind of file, a
//! record of another experiment, an expectation about a workload setup never creates).
//! Nothing here needs a cluster.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn faultline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(args)
        .env_remove("KUBECONFIG")
        .current_dir(repo())
        .output()
        .expect("faultline runs")
}

/// stdout and stderr together, printed so a failing assertion shows them.
fn text(out: &Output) -> String {
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{all}");
    all
}

/// Writes `body` as `name` in `dir` and returns its path as a string.
fn write(dir: &Path, name: &str, body: &str) -> String {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, body).expect("write experiment");
    path.to_str().expect("utf-8 path").to_owned()
}

const HEAD: &str = "name: first-hour\ndescription: d\nnamespace: faultline-lab\n";

#[test]
fn durations_and_bounds_are_read_as_people_write_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "durations.yaml",
        &format!(
            "{HEAD}targets:\n  victim: {{role: worker, count: 1}}\nobserve:\n  for: 2 hours\n\
             steps:\n  - {{name: stop, at: 5 mins, do: kubelet-stop, target: victim, timeout: 1m30s}}\n\
             \x20 - {{name: start, at: 5 min + 90s, do: kubelet-start, target: victim, timeout: 10 s}}\n\
             expect:\n  - {{name: down, node: victim, becomes: NotReady, within: grace + 10 s}}\n\
             \x20 - {{name: back, node: victim, becomes: Ready, within: 1 minute 30 seconds, since: start}}\n"
        ),
    );
    let out = faultline(&["validate", &file]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains(": ok (first-hour: 2 step(s), 2 expectation(s))"));
}

#[test]
fn a_number_without_a_unit_gets_every_unit_offered_not_seconds_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "unitless.yaml",
        &format!(
            "{HEAD}targets:\n  victim: {{role: worker, count: 1}}\n\
             steps:\n  - {{name: stop, at: 5, do: kubelet-stop, target: victim}}\n\
             expect:\n  - {{name: down, node: victim, becomes: NotReady, within: grace}}\n"
        ),
    );
    let out = faultline(&["validate", &file]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(all.contains("unitless.yaml:7:22: `5` has no unit"), "{all}");
    assert!(all.contains("`5s`") && all.contains("`5m`"), "{all}");
}

#[test]
fn node_names_with_dots_are_valid_targets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "eks.yaml",
        &format!(
            "{HEAD}targets:\n  victim: {{names: [ip-10-0-1-5.ec2.internal]}}\n\
             steps:\n  - {{name: cordon, at: 0s, do: cordon, target: victim}}\n\
             expect:\n  - {{name: cordoned, node: victim, becomes: Unschedulable, within: 5s}}\n"
        ),
    );
    let out = faultline(&["validate", &file]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
}

#[test]
fn every_unknown_key_is_reported_with_the_key_it_probably_means() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "typos.yaml",
        &format!(
            "{HEAD}targets:\n  victim: {{role: worker, count: 1}}\n\
             setup:\n  wait_timeout: 2m\n\
             steps:\n  - {{name: stop, at: 0s, do: kubelet-stop, target: victim, timout: 5s}}\n\
             expect:\n  - {{name: down, node: victim, becomes: NotReady, wihtin: grace}}\n"
        ),
    );
    let out = faultline(&["validate", &file]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1));
    let first = all.find("typos.yaml:7:3: unknown key `wait_timeout`");
    let second = all.find("typos.yaml:9:60: unknown key `timout`");
    let third = all.find("typos.yaml:11:51: unknown key `wihtin`");
    assert!(
        first.is_some() && second.is_some() && third.is_some(),
        "{all}"
    );
    assert!(first < second && second < third, "in file order: {all}");
    assert!(
        all.contains("keys are camelCase: write `waitTimeout`"),
        "{all}"
    );
    assert!(all.contains("did you mean `timeout`?"), "{all}");
    assert!(all.contains("did you mean `within`?"), "{all}");
    assert_eq!(
        all.matches("camelCase").count(),
        1,
        "the camelCase hint only for the snake_case key: {all}"
    );
}

#[test]
fn a_missing_file_says_so_without_a_made_up_position() {
    let out = faultline(&["validate", "no-such-experiment.yaml"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        all.contains("no-such-experiment.yaml: no such file"),
        "{all}"
    );
    assert!(!all.contains(":0:0"), "{all}");
}

#[test]
fn a_kubernetes_manifest_passed_as_an_experiment_is_named_as_one() {
    let out = faultline(&["validate", "fixtures/lab/web-deployment.yaml"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        all.contains("is a Kubernetes manifest (Deployment web), not a faultline experiment"),
        "{all}"
    );
    assert!(all.contains("setup.manifests"), "{all}");
    assert!(
        !all.contains("apiVersion`") && !all.contains("camelCase"),
        "{all}"
    );
}

#[test]
fn an_inventory_passed_as_an_experiment_is_named_as_one() {
    let out = faultline(&["validate", "fixtures/inventory/lab.yaml"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        all.contains("is a faultline inventory (how nodes are reached), not an experiment"),
        "{all}"
    );
    assert!(all.contains("--inventory"), "{all}");
    assert!(
        !all.contains("unknown") && !all.contains("camelCase"),
        "{all}"
    );
}

#[test]
fn a_run_record_passed_as_an_experiment_is_named_as_one() {
    let out = faultline(&["validate", "fixtures/records/node-deleted.json"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        all.contains("node-deleted.json: this is a faultline run record, not an experiment"),
        "{all}"
    );
    assert_eq!(all.lines().count(), 3, "one problem and its hint: {all}");
}

#[test]
fn rehearsing_against_a_record_of_another_experiment_is_one_clear_error() {
    let out = faultline(&[
        "rehearse",
        "experiments/reboot.yaml",
        "--record",
        "fixtures/records/node-deleted.json",
    ]);
    let all = text(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a mistake, not a failed rehearsal"
    );
    assert_eq!(
        all.trim_end(),
        "error: fixtures/records/node-deleted.json is a record of experiment node-deleted, not of reboot"
    );
}

#[test]
fn an_expectation_about_a_workload_setup_never_creates_is_warned_at_its_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lab = repo().join("fixtures/lab");
    let file = write(
        dir.path(),
        "setup.yaml",
        &format!(
            "{HEAD}targets:\n  victim: {{role: worker, runningPodsOf: deployment/web, count: 1}}\n\
             setup:\n  manifests: [{ns}, {web}]\n\
             steps:\n  - {{name: stop, at: 0s, do: kubelet-stop, target: victim}}\n\
             expect:\n  - {{name: web kept, pods: {{workload: deployment/web, on: victim}}, never: Terminating}}\n\
             \x20 - {{name: db kept, pods: {{workload: statefulset/db, on: victim}}, never: Terminating}}\n",
            ns = lab.join("00-namespace.yaml").display(),
            web = lab.join("web-deployment.yaml").display(),
        ),
    );
    let out = faultline(&["validate", &file]);
    let all = text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the workload may exist in the cluster already: a warning, not an error"
    );
    assert!(
        all.contains(
            "setup.yaml:12:38: warning: `setup` does not create statefulset/db in faultline-lab"
        ),
        "{all}"
    );
    assert_eq!(all.matches("warning:").count(), 1, "{all}");
    // `plan` and `run` load experiments through the CLI's loader: they say it too.
    let out = faultline(&["plan", &file]);
    let all = text(&out);
    assert!(
        all.contains("warning: `setup` does not create statefulset/db in faultline-lab"),
        "{all}"
    );
}

#[test]
fn the_shipped_experiments_validate_without_warnings() {
    let out = faultline(&["validate", "experiments/"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains("warning"), "{all}");
}

/// An inventory of a cluster like the lab (kwok nodes: no containers, no logind) whose API
/// is nowhere: what a skipped experiment needs, it never asks the cluster.
fn lab_like_inventory(dir: &Path, offers: &str) -> String {
    write(
        dir,
        "inventory.yaml",
        &format!(
            "cluster:\n  name: no-logind\n  kubeconfig: {kc}\n  lacks: [containers]\n{offers}\
             profile: kubeadm\nssh: {{user: root}}\n\
             power: {{on: [/bin/true, \"{{node}}\"], off: [/bin/true, \"{{node}}\"]}}\n\
             nodes:\n  - {{name: w1, address: 127.0.0.1, roles: [worker]}}\n",
            kc = dir.join("no-such-kubeconfig").display()
        ),
    )
}

#[test]
fn an_experiment_the_cluster_lacks_a_capability_for_is_skipped_not_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = lab_like_inventory(dir.path(), "");
    let exp = "experiments/graceful-shutdown.yaml";

    // Said up front, by validate and plan, without failing either.
    let out = faultline(&["validate", "-i", &inv, exp]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("a run on this cluster skips it"), "{all}");
    assert!(all.contains("needs `graceful-node-shutdown`"), "{all}");
    let out = faultline(&["plan", "-i", &inv, exp]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("NOT RUN on this cluster"), "{all}");

    // The run: exit 0, nothing asked of a cluster that is not there, a skipped suite.
    let reports = dir.path().join("reports");
    let out = faultline(&[
        "run",
        exp,
        "-i",
        &inv,
        "--yes",
        "--out",
        reports.to_str().expect("utf-8"),
    ]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("SKIPPED"), "{all}");
    let junit = std::fs::read_to_string(reports.join("graceful-shutdown.junit.xml"))
        .expect("a JUnit file is written for the skipped experiment");
    let cases = junit.matches("<testcase").count();
    assert_eq!(cases, 9, "one case per expectation, no step cases: {junit}");
    assert_eq!(junit.matches("<skipped").count(), cases, "{junit}");
    assert!(
        !junit.contains("<failure") && !junit.contains("<error"),
        "{junit}"
    );
    let record = std::fs::read_to_string(reports.join("graceful-shutdown.json")).expect("record");
    assert!(record.contains("\"kind\": \"skipped\""), "{record}");

    // A cluster that offers it runs it: validate no longer says it is skipped.
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = lab_like_inventory(dir.path(), "  offers: [graceful-node-shutdown]\n");
    let out = faultline(&["validate", "-i", &inv, exp]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains("skips it"), "{all}");
}

#[test]
fn a_capability_no_one_knows_is_an_error_at_its_place_in_both_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = write(
        dir.path(),
        "e.yaml",
        &format!(
            "{HEAD}requires: [logind]\ntargets:\n  v: {{role: worker, count: 1}}\n\
             steps:\n  - {{name: s, at: 0s, do: kubelet-stop, target: v}}\n\
             expect:\n  - {{name: e, node: v, becomes: Unknown, within: 60s, requires: [container]}}\n"
        ),
    );
    let out = faultline(&["validate", &exp]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("e.yaml:4:12: `logind` is not a capability"),
        "{all}"
    );
    assert!(all.contains("did you mean `containers`?"), "{all}");
    let inv = lab_like_inventory(dir.path(), "  offers: [logind]\n");
    let out = faultline(&["validate", "-i", &inv, "experiments/reboot.yaml"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("cluster.offers: `logind` is not a capability"),
        "{all}"
    );
}

/// A log line written to a stderr that is gone (a closed `2>&1 | tee`, a terminal that hung
/// up) is dropped, never a panic: the run's warnings are written while it undoes faults.
/// `FAULTLINE_LOG=debug` makes faultline log at its start; its stderr's reader is gone.
#[test]
fn a_log_line_to_a_closed_stderr_is_dropped_not_a_panic() {
    // A pipe whose reader is closed before faultline starts: every write to it fails.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(["validate", "experiments/reboot.yaml"])
        .env("FAULTLINE_LOG", "debug")
        .current_dir(repo())
        .stderr(writer)
        .output()
        .expect("faultline runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("1 valid"), "{said}");
}

/// `validate -i` and `plan` say up front what a run would not get past, with the exit
/// code the run would have: a step no node can carry out (power on over SSH with no power
/// command), a fault on the node of the only API server, and an expectation the node
/// failure model says cannot hold (Terminating after the toleration, while the kubelet is
/// back before it). Issue 47, item 2.
#[test]
fn plans_that_cannot_run_or_pass_exit_with_the_run_s_code() {
    let k3s = "fixtures/inventory/k3s.yaml";
    let power = "experiments/power-off-past-toleration.yaml";
    let out = faultline(&["validate", "-i", k3s, power]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("refused on this inventory:\n  step `power on` cannot run: no power command"),
        "{all}"
    );
    let out = faultline(&["plan", "-i", k3s, power]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains(
            "verdict: a run could not be carried out (exit 2):\n  step `power on` cannot run"
        ),
        "{all}"
    );

    let kind = "fixtures/inventory/kind.yaml";
    let out = faultline(&[
        "plan",
        "experiments/control-plane-node-down.yaml",
        "-i",
        kind,
    ]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("which runs the only API server faultline talks to"),
        "{all}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let short = write(
        dir.path(),
        "short.yaml",
        &format!(
            "{HEAD}targets:\n  victim: {{role: worker, count: 1}}\n\
             steps:\n  - {{name: stop, at: 0s, do: kubelet-stop, target: victim}}\n\
             \x20 - {{name: start, at: 3m, do: kubelet-start, target: victim}}\n\
             expect:\n  - {{name: evicted, pods: {{workload: deployment/web, on: victim}}, becomes: Terminating, within: grace + toleration + 30s}}\n"
        ),
    );
    let out = faultline(&["plan", "-i", kind, &short]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("verdict: a run would fail an expectation (exit 1):\n  expectation `evicted` cannot hold: the node failure model:"),
        "{all}"
    );
    let out = faultline(&["validate", "-i", kind, &short]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // Without an inventory the model still predicts, from the assumed timers, said so.
    let out = faultline(&["plan", &short]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("predicted by the node failure model (docs/model.md; lease 40s assumed, no inventory: the ASSUMED timers above"),
        "{all}"
    );
    assert!(all.contains("  a node of `victim`: Unknown +"), "{all}");

    // A plan a run would pass says so and exits 0.
    let out = faultline(&[
        "plan",
        "-i",
        kind,
        "experiments/kubelet-stop-within-toleration.yaml",
    ]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("verdict: nothing found that would stop a run"),
        "{all}"
    );
}

/// `FAULTLINE_INVENTORY` stands for `-i` wherever `-i` exists: `validate` and `rbac` read
/// it too (issue 47, item 8).
#[test]
fn the_inventory_variable_is_read_by_validate_and_rbac() {
    let with_env = |args: &[&str], inventory: &str| {
        Command::new(env!("CARGO_BIN_EXE_faultline"))
            .args(args)
            .env_remove("KUBECONFIG")
            .env("FAULTLINE_INVENTORY", inventory)
            .current_dir(repo())
            .output()
            .expect("faultline runs")
    };
    let out = with_env(
        &["validate", "experiments/power-off-past-toleration.yaml"],
        "fixtures/inventory/k3s.yaml",
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("refused on this inventory"), "{all}");
    // kind's API-transport inventory: the actor gets the node-access pods' rules.
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = write(
        dir.path(),
        "pod.yaml",
        "cluster: {name: c}\nprofile: kind\ntransport: pod\nnodes:\n  - {name: w1, roles: [worker]}\n",
    );
    let out = with_env(
        &[
            "rbac",
            "experiments/kubelet-stop-within-toleration.yaml",
            "--role",
            "actor",
        ],
        &inv,
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("pods/exec"), "{all}");
}

/// `restore` takes `--insecure-ignore-host-keys` as `run` and `doctor` do: a restore over
/// SSH after a node's host key changed must not be the one command that cannot skip the
/// check (issue 47, item 8).
#[test]
fn restore_skips_host_keys_as_run_and_doctor_can() {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("journal.json");
    let journal = journal.to_str().expect("utf-8");
    for command in ["run", "doctor", "restore"] {
        let out = faultline(&[command, "--help"]);
        assert!(
            text(&out).contains("--insecure-ignore-host-keys"),
            "{command} lacks the flag"
        );
    }
    let out = faultline(&[
        "restore",
        "-i",
        "fixtures/inventory/kubeadm.yaml",
        "--journal",
        journal,
        "--insecure-ignore-host-keys",
    ]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("nothing to restore"), "{all}");
}

/// `plan` lists the steps in the order they happen, not in file order (`+0.0s`,
/// `+120.0s`, `+10.0s` before; issue 47, item 7).
#[test]
fn plan_lists_steps_in_time_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "order.yaml",
        &format!(
            "{HEAD}targets:\n  victim: {{role: worker, count: 1}}\n\
             steps:\n  - {{name: stop, at: 0s, do: kubelet-stop, target: victim}}\n\
             \x20 - {{name: start, at: 120s, do: kubelet-start, target: victim}}\n\
             \x20 - {{name: cordon, at: 10s, do: cordon, target: victim}}\n\
             expect:\n  - {{name: down, node: victim, becomes: Unknown, within: grace + 10s}}\n"
        ),
    );
    let out = faultline(&["plan", &file]);
    let all = text(&out);
    let steps: Vec<&str> = all
        .lines()
        .filter(|l| l.trim_start().starts_with('+') && l.contains(" (at "))
        .map(|l| l.split_whitespace().nth(1).unwrap_or_default())
        .collect();
    assert_eq!(steps, ["stop", "cordon", "start"], "{all}");
}

/// The reason timers are assumed is said once in a plan, not on each of four lines
/// (issue 47, item 7).
#[test]
fn a_plan_says_why_timers_are_assumed_once() {
    let out = faultline(&["plan", "experiments/kubelet-stop-past-toleration.yaml"]);
    let all = text(&out);
    assert_eq!(
        all.matches("upstream default of Kubernetes").count(),
        1,
        "{all}"
    );
    assert!(
        all.contains("  nodeMonitorGracePeriod 50s (ASSUMED)\n"),
        "{all}"
    );
}

/// The subcommands as they are typed, nested ones with their parent.
const COMMANDS: &[&[&str]] = &[
    &["run"],
    &["validate"],
    &["plan"],
    &["doctor"],
    &["rbac"],
    &["restore"],
    &["inventory"],
    &["inventory", "kind"],
    &["inventory", "k3d"],
    &["rehearse"],
    &["compare"],
    &["report"],
    &["explain"],
    &["list"],
    &["init"],
    &["completion"],
];

#[test]
fn every_help_fits_80_columns() {
    let mut checked = vec![vec!["--help"]];
    for cmd in COMMANDS {
        for flag in ["-h", "--help"] {
            let mut args = cmd.to_vec();
            args.push(flag);
            checked.push(args);
        }
    }
    for args in checked {
        let out = faultline(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        let wide: Vec<&str> = help.lines().filter(|l| l.chars().count() > 80).collect();
        assert!(wide.is_empty(), "{args:?}: {wide:#?}");
    }
}

#[test]
fn list_shows_every_shipped_experiment_in_80_columns_and_as_json() {
    let shipped = std::fs::read_dir(repo().join("experiments"))
        .expect("experiments/")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        })
        .count();
    let out = faultline(&["list"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert_eq!(
        all.matches("\n  file: experiments/").count(),
        shipped,
        "{all}"
    );
    assert!(all.lines().all(|l| l.chars().count() <= 80), "{all}");
    assert!(all.contains("needs: graceful-node-shutdown"), "{all}");

    let out = faultline(&["list", "-o", "json"]);
    let listed: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("list -o json is JSON");
    let listed = listed.as_array().expect("an array");
    assert_eq!(listed.len(), shipped);
    let reboot = listed
        .iter()
        .find(|e| e["name"] == "reboot")
        .expect("reboot is listed");
    assert_eq!(reboot["faults"], serde_json::json!(["reboot"]));

    // Elsewhere than the repository, with nothing to list: one line, exit 2.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_faultline"))
        .arg("list")
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("no `experiments/` directory here"), "{all}");
}

#[test]
fn init_starts_an_experiment_that_validates_and_plans() {
    let dir = tempfile::tempdir().expect("tempdir");
    for fault in ["kubelet-stop", "reboot", "power-off", "partition", "drain"] {
        let file = dir.path().join(format!("{fault}.yaml"));
        let file = file.to_str().expect("utf-8");
        let out = faultline(&["init", fault, file]);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(0), "{fault}: {all}");
        assert!(
            all.contains("faultline validate"),
            "{fault}: says what next: {all}"
        );
        let out = faultline(&["validate", file]);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(0), "{fault}: {all}");
        assert!(!all.contains("warning"), "{fault}: {all}");
        let out = faultline(&["plan", file]);
        assert_eq!(out.status.code(), Some(0), "{fault}: {}", text(&out));
        // Never over a file the user may have edited.
        let out = faultline(&["init", fault, file]);
        assert_eq!(out.status.code(), Some(2), "{fault}");
    }
    let out = faultline(&["init", "reboot"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("# A reboot"));
}

#[test]
fn validate_speaks_json_for_tools_with_the_same_verdicts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = write(
        dir.path(),
        "broken.yaml",
        &format!("{HEAD}steps:\n  - {{name: s, at: soon, do: reboot, target: nowhere}}\n"),
    );
    let out = faultline(&["validate", "-o", "json", "experiments/reboot.yaml", &broken]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let files: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let files = files.as_array().expect("an array");
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["status"], "ok");
    assert_eq!(files[0]["name"], "reboot");
    assert_eq!(files[1]["status"], "invalid");
    let problems = files[1]["problems"].as_array().expect("problems");
    assert!(!problems.is_empty());
    assert!(
        problems.iter().all(|p| p["line"].as_u64() > Some(0)),
        "{problems:?}"
    );

    // A refusal on the inventory's transports is `refused`, with its reason.
    let out = faultline(&[
        "validate",
        "-o",
        "json",
        "-i",
        "fixtures/inventory/k3s.yaml",
        "experiments/power-off-past-toleration.yaml",
    ]);
    let files: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(files[0]["status"], "refused", "{files}");
    assert!(files[0]["reasons"][0].as_str().is_some(), "{files}");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_dry_run_needs_no_inventory_and_one_name_means_text_everywhere() {
    let out = faultline(&["run", "--dry-run", "experiments/reboot.yaml"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("plan for reboot, OFFLINE"), "{all}");
    let out = faultline(&["run", "experiments/reboot.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--inventory"));

    for args in [
        &["report", "-o", "text", "fixtures/records/node-deleted.json"][..],
        &[
            "report",
            "-o",
            "terminal",
            "fixtures/records/node-deleted.json",
        ],
        &[
            "explain",
            "-o",
            "text",
            "fixtures/records/node-deleted.json",
        ],
        &["validate", "-o", "text", "experiments/reboot.yaml"],
        &["list", "-o", "text"],
    ] {
        let out = faultline(args);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?}: {}",
            text(&out)
        );
    }
    // doctor needs a cluster; its help names the same value.
    let out = faultline(&["doctor", "--help"]);
    assert!(text(&out).contains("text:"), "doctor -o text");
}

#[test]
fn a_command_that_cannot_do_what_was_asked_says_error_once_at_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nowhere.yaml");
    let missing = missing.to_str().expect("utf-8");
    for args in [
        &["compare", "no/such/dir", "fixtures/records"][..],
        &["report", "no/such/record.json"],
        &["explain", "no/such/record.json"],
        &["plan", "experiments/reboot.yaml", "-i", missing],
        &["validate", "experiments/reboot.yaml", "-i", missing],
        &["rbac", "--role", "actor"],
        &[
            "run",
            "experiments/reboot.yaml",
            "-i",
            "fixtures/inventory/lab.yaml",
        ],
        &[
            "inventory",
            "kind",
            "--name",
            "no-such-cluster",
            "--kubeconfig",
            missing,
        ],
    ] {
        let out = faultline(args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("error: ") && !last["error: ".len()..].starts_with("error"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_server_that_is_not_kubernetes_is_named_as_such() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let body = "<html>not here</html>";
            let _ = write!(
                stream,
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = write(
        dir.path(),
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster: {{server: \
             \"http://127.0.0.1:{port}\"}}\nusers:\n- name: u\n  user: {{token: t}}\n\
             contexts:\n- name: x\n  context: {{cluster: x, user: u}}\ncurrent-context: x\n"
        ),
    );
    let out = faultline(&[
        "run",
        "experiments/reboot.yaml",
        "-i",
        "fixtures/inventory/kind.yaml",
        "--kubeconfig",
        &kubeconfig,
        "--context",
        "x",
        "--yes",
    ]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("is not a Kubernetes API server: it answered the first request with HTTP 404"),
        "{all}"
    );
    assert!(!all.contains("Failed to parse error data"), "{all}");
}

#[test]
fn report_explain_and_compare_name_an_experiment_file_passed_as_a_record() {
    for args in [
        &["report", "experiments/reboot.yaml"][..],
        &["explain", "experiments/reboot.yaml"],
        &[
            "compare",
            "experiments/reboot.yaml",
            "fixtures/records/node-deleted.json",
        ],
    ] {
        let out = faultline(args);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {all}");
        assert!(
            all.contains("experiments/reboot.yaml is an experiment file, not a run record")
                && all.contains("faultline run"),
            "{args:?}: {all}"
        );
        assert!(!all.contains("expected value at line 1"), "{args:?}: {all}");
    }
}

#[test]
fn validate_with_a_namespace_counts_no_file_valid_that_cannot_run_there() {
    let out = faultline(&["validate", "-n", "team-a", "experiments/reboot.yaml"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("1 file(s), 0 valid, 0 invalid, 1 cannot run with -n team-a"),
        "{all}"
    );
}

#[test]
fn a_rehearsal_says_its_early_stop_once_and_keep_going_judges_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original =
        std::fs::read_to_string(repo().join("experiments/kubelet-stop-past-toleration.yaml"))
            .expect("shipped experiment");
    let fixtures = repo().join("fixtures");
    let changed = original
        .replacen("within: grace + 10s", "within: 5s", 1)
        .replace("../fixtures", fixtures.to_str().expect("utf-8"));
    let file = write(dir.path(), "stricter.yaml", &changed);
    let record = "fixtures/records/kubelet-stop-past-toleration.json";

    let out = faultline(&["rehearse", &file, "--record", record]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert_eq!(
        all.matches("lab-worker-2 was not Unknown by +5.0s").count(),
        2,
        "{all}"
    );
    assert!(
        all.contains("not decided: the run stopped early (see `ended:`"),
        "{all}"
    );

    let out = faultline(&["rehearse", &file, "--record", record, "--keep-going"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(!all.contains("not decided"), "{all}");
    assert_eq!(all.matches("\n  FAIL").count(), 1, "{all}");
    assert!(all.contains("web pods on the node go Terminating"), "{all}");
}

/// The binary with the colour and width settings of the environment removed, then `env`.
fn laid_out(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_faultline"));
    cmd.args(args).current_dir(repo());
    for name in [
        "KUBECONFIG",
        "NO_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "COLUMNS",
    ] {
        cmd.env_remove(name);
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("faultline runs")
}

/// The shipped records `report` and `explain` are shown on, as `fixtures/records/*.json`.
fn shipped_records() -> Vec<String> {
    let mut records: Vec<String> = std::fs::read_dir(repo().join("fixtures/records"))
        .expect("fixtures/records/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| p.strip_prefix(repo()).unwrap().display().to_string())
        .collect();
    records.sort();
    records
}

/// The commands whose human output must fit 80 columns, on the shipped files.
fn human_outputs() -> Vec<Vec<String>> {
    let mut all = Vec::new();
    let mut experiments: Vec<String> = std::fs::read_dir(repo().join("experiments"))
        .expect("experiments/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.strip_prefix(repo()).unwrap().display().to_string())
        .collect();
    experiments.sort();
    for exp in &experiments {
        all.push(vec!["plan".to_string(), exp.clone()]);
    }
    let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    for inventory in ["kind", "openshift"] {
        all.push(owned(&[
            "plan",
            "experiments/kubelet-stop-past-toleration.yaml",
            "-i",
            &format!("fixtures/inventory/{inventory}.yaml"),
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ]));
    }
    all.push(owned(&[
        "compare",
        "fixtures/records/upgrade/v1.31.4",
        "fixtures/records/upgrade/v1.33.13",
    ]));
    for record in shipped_records() {
        all.push(vec!["explain".to_string(), record]);
    }
    let mut report = vec!["report".to_string()];
    report.extend(shipped_records());
    all.push(report);
    all
}

#[test]
fn plan_compare_explain_and_report_fit_80_columns_on_a_terminal_s_width() {
    for args in human_outputs() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = laid_out(&args, &[("COLUMNS", "80")]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.trim().is_empty(), "{args:?}: {}", text(&out));
        // A line may be wider only when it is one word (a path, a command).
        let wide: Vec<&str> = stdout
            .lines()
            .filter(|l| l.chars().count() > 80 && l.trim().contains(' '))
            .collect();
        assert!(wide.is_empty(), "{args:?}: {wide:#?}");
    }
    // compare keeps every figure: the move and verdict, then min / median / max below.
    let out = laid_out(
        &[
            "compare",
            "fixtures/records/upgrade/v1.31.4",
            "fixtures/records/upgrade/v1.33.13",
        ],
        &[("COLUMNS", "80")],
    );
    let compared = String::from_utf8_lossy(&out.stdout);
    assert!(
        compared.contains(
            "    node NotReady              +11.2s +29.4% SLOWER\n      36.2s / 38.2s / 40.0s → 47.6s / 49.4s / 51.2s\n"
        ),
        "{compared}"
    );
}

#[test]
fn outcomes_are_coloured_when_forced_and_never_with_no_color_or_a_pipe() {
    let record = "fixtures/records/kubelet-stop-past-toleration.json";
    let forced = [("CLICOLOR_FORCE", "1")];
    let out = laid_out(&["report", record], &forced);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("\u{1b}[32mPASS\u{1b}[0m"), "{report:?}");
    let out = laid_out(
        &[
            "compare",
            "fixtures/records/upgrade/v1.31.4",
            "fixtures/records/upgrade/v1.33.13",
        ],
        &forced,
    );
    let compared = String::from_utf8_lossy(&out.stdout);
    assert!(compared.contains("\u{1b}[31mSLOWER"), "{compared:?}");
    let out = laid_out(&["plan", "experiments/reboot.yaml"], &forced);
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(plan.contains("\u{1b}[32mverdict:\u{1b}[0m"), "{plan:?}");
    let out = laid_out(&["explain", record], &forced);
    let explained = String::from_utf8_lossy(&out.stdout);
    assert!(
        explained.contains(": \u{1b}[32minside\u{1b}[0m"),
        "{explained:?}"
    );

    for env in [
        &[][..],
        &[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")][..],
        &[("NO_COLOR", "1"), ("COLUMNS", "80")][..],
    ] {
        for args in human_outputs() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = laid_out(&args, env);
            assert!(
                !out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b),
                "{env:?} {args:?}: {}",
                text(&out)
            );
        }
    }
}

#[test]
fn reports_written_to_files_carry_no_colour_even_when_forced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let forced = [("CLICOLOR_FORCE", "1")];
    let record = "fixtures/records/kubelet-stop-past-toleration.json";
    let file = dir.path().join("report.txt");
    let out = laid_out(
        &[
            "report",
            "-o",
            "text",
            "--out",
            file.to_str().unwrap(),
            record,
        ],
        &forced,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for format in ["text", "markdown", "html", "junit", "json"] {
        let into = dir.path().join(format);
        let mut args = vec!["report", "-o", format, "--out", into.to_str().unwrap()];
        let records = shipped_records();
        args.extend(records.iter().map(String::as_str));
        let out = laid_out(&args, &forced);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", text(&out));
    }
    let compared = dir.path().join("compare");
    laid_out(
        &[
            "compare",
            "fixtures/records/upgrade/v1.31.4",
            "fixtures/records/upgrade/v1.33.13",
            "--out",
            compared.to_str().unwrap(),
        ],
        &forced,
    );
    let mut files = vec![file];
    let mut dirs = vec![dir.path().to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    assert!(files.len() > 10, "{files:?}");
    for path in files {
        let bytes = std::fs::read(&path).expect("readable");
        assert!(!bytes.contains(&0x1b), "{}", path.display());
    }
}

/// A conformance run that records nothing (its cluster cannot be reached) says so and
/// exits 2, instead of failing to write its report into a directory never made.
#[test]
fn conformance_with_nothing_recorded_says_so_and_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("reports");
    let inventory =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/inventory/lab.yaml");
    let out = faultline(&[
        "conformance",
        "-i",
        inventory.to_str().expect("utf-8"),
        "--out",
        out_dir.to_str().expect("utf-8"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no conformance run was recorded: no conformance report"),
        "{stderr}"
    );
    assert!(!stderr.contains("cannot write"), "{stderr}");
    assert!(!out_dir.join("conformance.md").exists());
}

/// `faultline conformance --dry-run` needs no cluster: it writes the suite built into the
/// binary (identical to the repository's `experiments/conformance/`), plans it, and says
/// that no observation ends before the model's windows close.
#[test]
fn conformance_dry_run_writes_the_built_in_suite_and_plans_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("reports");
    let out = faultline(&[
        "conformance",
        "--dry-run",
        "--out",
        out_dir.to_str().expect("utf-8"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("plan for conformance-kubelet-stop"),
        "{stdout}"
    );
    assert!(
        stdout.contains("`expect: conformance` judges every transition"),
        "{stdout}"
    );
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["kubelet-stop.yaml", "partition-healed.yaml", "reboot.yaml"] {
        let written =
            std::fs::read_to_string(out_dir.join("suite/experiments/conformance").join(name))
                .expect("written");
        let shipped = std::fs::read_to_string(repo.join("experiments/conformance").join(name))
            .expect("shipped");
        assert_eq!(written, shipped, "{name}");
    }
    assert_eq!(
        std::fs::read_dir(repo.join("experiments/conformance"))
            .expect("dir")
            .count(),
        3,
        "every shipped conformance experiment is built into the binary (cli/conformance.rs SUITE)"
    );
}
