//! `faultline plan`'s own tests: offline plans on the shipped experiments and the
//! inventory fixtures, what the model flags, and the verdict.

use super::*;

fn shipped(name: &str) -> Experiment {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("experiments")
        .join(name);
    crate::experiment::load(&path).unwrap_or_else(|d| panic!("{d}"))
}

/// The lab fixture with two more workers and a control-plane node.
fn four_nodes() -> Inventory {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/inventory/lab.yaml");
    let mut text = std::fs::read_to_string(&path).expect("fixture");
    for (name, address, role) in [
        ("lab-worker-2", "10.213.77.12", "worker"),
        ("lab-worker-3", "10.213.77.13", "worker"),
        ("lab-cp-1", "10.213.77.14", "control-plane"),
    ] {
        text.push_str(&format!(
            "  - {{name: {name}, address: {address}, roles: [{role}]}}\n"
        ));
    }
    Inventory::parse(&text, &path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn offline_the_targets_are_selectors_and_the_commands_those_of_each_candidate() {
    let inv = four_nodes();
    let settings = RunSettings::new(inv.clone(), "/nonexistent/journal.json".into());
    let executor = Executor::new(inv);
    let exp = shipped("kubelet-stop-past-toleration.yaml");
    let text = offline(&exp, &settings, &executor, "connection refused").text;
    assert!(
        text.starts_with(
            "plan for kubelet-stop-past-toleration on cluster faultline-lab (context \
             faultline-lab), OFFLINE: connection refused\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "  victim: role worker, running pods of faultline-lab/statefulset/db, 1 node \
             (resolved when the API is reachable; in the inventory: lab-worker-1, \
             lab-worker-2, lab-worker-3)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "            lab-worker-2: ssh root@10.213.77.12 -p 22: /abs/ci/lab/node-ctl kubelet stop\n"
        ),
        "{text}"
    );
    assert!(!text.contains("lab-cp-1:"), "not a worker: {text}");
    // The lab fixture states every timer: nothing is assumed, and each says where from.
    assert!(
        text.contains(
            "nodeMonitorGracePeriod 20s (inventory: timers.nodeMonitorGracePeriod in the inventory)"
        ),
        "{text}"
    );
    assert!(!text.contains("ASSUMED"), "{text}");
    assert!(
        text.contains("  +80.0s  start kubelet (at grace + toleration + 30s = 80s): kubelet-start"),
        "{text}"
    );
    assert!(
        text.contains("expectations:\n  node goes Unknown within the grace period: Unknown within 30.0s after `stop kubelet`\n"),
        "{text}"
    );
}

#[test]
fn through_the_api_the_plan_says_which_faults_only_their_timer_can_end() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/inventory/openshift.yaml");
    let inv = Inventory::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let settings = RunSettings::new(inv.clone(), "/nonexistent/journal.json".into());
    let executor = Executor::new(inv);
    let partition = offline(&shipped("partition.yaml"), &settings, &executor, "offline").text;
    assert!(
        partition.contains(
            "undone only by its timer on the node: it cuts the node off from the API \
             server, so neither Ctrl-C nor the safety net can end it sooner\n"
        ),
        "{partition}"
    );
    let stop = offline(
        &shipped("kubelet-stop-past-toleration.yaml"),
        &settings,
        &executor,
        "offline",
    )
    .text;
    assert!(
        stop.contains("or sooner by the undo watcher beside it when faultline asks"),
        "{stop}"
    );
    assert!(!stop.contains("undone only by its timer"), "{stop}");
    // Over SSH the undo is carried as any other step: nothing to say.
    let ssh = four_nodes();
    let lab = offline(
        &shipped("partition.yaml"),
        &RunSettings::new(ssh.clone(), "/nonexistent/journal.json".into()),
        &Executor::new(ssh),
        "offline",
    )
    .text;
    assert!(!lab.contains("undone only by its timer"), "{lab}");
}

#[test]
fn offline_without_inventory_timers_every_bound_on_them_is_marked_assumed() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/inventory/lab.yaml"),
    )
    .expect("fixture");
    let without: String = text
        .lines()
        .filter(|l| {
            !l.contains("Period:") && !l.contains("TolerationSeconds:") && !l.starts_with("timers:")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let inv = Inventory::parse(&without, Path::new("no-timers.yaml")).expect("valid");
    let settings = RunSettings::new(inv.clone(), "/nonexistent/journal.json".into());
    let executor = Executor::new(inv);
    let exp = shipped("kubelet-stop-past-toleration.yaml");
    let text = offline(&exp, &settings, &executor, "connection refused").text;
    assert!(
        text.contains("nodeMonitorGracePeriod 50s (ASSUMED)\n")
            && text.contains("  (ASSUMED: upstream default of Kubernetes v1.32+"),
        "{text}"
    );
    let start = text
        .lines()
        .find(|l| l.contains("start kubelet ("))
        .expect("the start step");
    assert!(
        start.contains("[ASSUMED: grace = 50s, toleration = 5m]"),
        "{start}"
    );
    let unknown = text
        .lines()
        .find(|l| l.contains("node goes Unknown within the grace period:"))
        .expect("the expectation");
    assert!(unknown.ends_with("[ASSUMED: grace = 50s]"), "{unknown}");
    assert!(
        text.contains(
            "(ASSUMED timers were not read: not read from the cluster: connection refused)"
        ),
        "{text}"
    );
}

/// Issue 70: the offline plan called a StatefulSet's pod a ReplicaSet's ("replaced …
/// (its ReplicaSet replaces it once it is Terminating)") beside the experiment's own
/// expectation that no db replacement comes while the old pod exists. Each workload the
/// experiment names now stands with its own controller's rule.
#[test]
fn the_offline_plan_predicts_each_workload_by_its_own_controller() {
    let inv = four_nodes();
    let settings = RunSettings::new(inv.clone(), "/nonexistent/journal.json".into());
    let executor = Executor::new(inv);
    let exp = shipped("kubelet-stop-past-toleration.yaml");
    let text = offline(&exp, &settings, &executor, "connection refused").text;
    assert!(!text.contains("ReplicaSet): replaced"), "{text}");
    let lines = |who: &str| -> Vec<&str> { text.lines().filter(|l| l.contains(who)).collect() };
    let db = lines("pods of faultline-lab/statefulset/db");
    // Replaced only once its node answers again (+80 s, the kubelet's start), not when
    // it goes Terminating (+42 s).
    assert!(
        db.iter()
            .any(|l| l.contains("replaced from +80.0s (once it answers again")),
        "{db:#?}"
    );
    assert!(!db.iter().any(|l| l.contains("ReplicaSet")), "{db:#?}");
    let agent = lines("pods of faultline-lab/daemonset/agent");
    assert!(
        agent
            .iter()
            .any(|l| l.contains("Terminating (evicted) never")),
        "{agent:#?}"
    );
    let web = lines("pods of faultline-lab/deployment/web");
    assert!(
        web.iter().any(|l| l.contains("its ReplicaSet replaces it")),
        "{web:#?}"
    );
}

/// The conformance suite names no workload: the plan predicts every workload its setup
/// manifests create, each by its own controller; a pod template's own toleration of the
/// unreachable taint moves its pods' window, and the `toleration` of an expectation
/// about them resolves to it, as a run resolves it to each pod's own.
#[test]
fn the_offline_plan_predicts_the_setup_workloads_with_their_templates_tolerations() {
    let inv = four_nodes();
    let settings = RunSettings::new(inv.clone(), "/nonexistent/journal.json".into());
    let executor = Executor::new(inv);
    let exp = shipped("conformance/kubelet-stop.yaml");
    let text = offline(&exp, &settings, &executor, "connection refused").text;
    for who in [
        "pods of faultline-lab/statefulset/db (default toleration): replaced from",
        "pods of faultline-lab/deployment/web (default toleration): replaced",
        "pods of faultline-lab/daemonset/agent (tolerate unreachable forever, as a DaemonSet's do): Terminating (evicted) never",
    ] {
        assert!(text.contains(who), "{who}: {text}");
    }
    let exp = shipped("short-toleration.yaml");
    let text = offline(&exp, &settings, &executor, "connection refused").text;
    let quick = "pods of faultline-lab/deployment/quick (tolerate unreachable 10s, as its template \
                 says): Terminating (evicted) +";
    assert!(text.contains(quick), "{text}");
    assert!(
        text.contains("verdict: nothing found"),
        "the quick pods' bounds resolve to their own 10 s: {text}"
    );
}

#[test]
fn the_plan_predicts_what_the_cluster_should_do_from_the_timers_in_force() {
    let inv = four_nodes();
    let settings = RunSettings::new(inv.clone(), "/nonexistent/journal.json".into());
    let executor = Executor::new(inv);
    let exp = shipped("kubelet-stop-past-toleration.yaml");
    let text = offline(&exp, &settings, &executor, "connection refused").text;
    // The lab fixture's timers: 20 s grace, 2 s monitor period, 30 s toleration; the
    // kubelet stops at +0 s and starts at +80 s, after its pods' toleration ran out.
    for line in [
        "  lab-worker-1: Unknown +10.0s … +22.0s (grace period after the last lease renewal, at the next monitor pass)\n",
        "  lab-worker-1 pods of faultline-lab/deployment/web (default toleration): Terminating (evicted) +42.0s … +54.1s (its toleration, 30s after the taint)\n",
        "  lab-worker-1: Ready again from +80.0s (once it answers again (how fast it starts is not modelled))\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
    let within = shipped("kubelet-stop-within-toleration.yaml");
    let text = offline(&within, &settings, &executor, "connection refused").text;
    assert!(
        text.contains(
            "pods of faultline-lab/deployment/web (default toleration): Terminating (evicted) never (the node answers again before the toleration runs out)"
        ),
        "{text}"
    );
}

/// The plan of `zone-outage` with every node read through the API: the zones as
/// labelled, or none.
fn zoned_plan(zones: [&str; 4]) -> String {
    let inv = four_nodes();
    let settings = RunSettings::new(inv.clone(), "/nonexistent/journal.json".into());
    let executor = Executor::new(inv);
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/experiments/lab/zone-outage.yaml");
    let exp = crate::experiment::load(&path).unwrap_or_else(|d| panic!("{d}"));
    let nodes: Vec<crate::failure_model::ModelNode> =
        ["lab-worker-1", "lab-worker-2", "lab-worker-3", "lab-cp-1"]
            .iter()
            .zip(zones)
            .map(|(name, zone)| crate::failure_model::ModelNode {
                name: name.to_string(),
                zone: zone.to_string(),
                ready: true,
            })
            .collect();
    let mut view = offline_view(&settings, &executor, "a test", &exp, true);
    view.targets = Targets::Resolved(BTreeMap::from([(
        "down".to_string(),
        vec!["lab-worker-1".to_string(), "lab-worker-2".to_string()],
    )]));
    view.cluster_nodes = Some((&nodes, Some(std::time::Duration::from_secs(10))));
    render(&exp, &view).text
}

#[test]
fn with_the_cluster_s_nodes_the_plan_predicts_each_zone_s_own_queue() {
    let text = zoned_plan(["lab-a", "lab-b", "lab-c", "lab-c"]);
    assert!(
        text.contains("predicted by the node failure model (docs/model.md):\n"),
        "nothing assumed: {text}"
    );
    for node in ["lab-worker-1", "lab-worker-2"] {
        let taint = text
            .lines()
            .find(|l| l.starts_with(&format!("  {node}: tainted")))
            .unwrap_or_else(|| panic!("{node}'s taint: {text}"));
        assert!(taint.contains("(first in its zone's queue"), "{taint}");
    }
    // Unlabelled, one queue takes both: one of them may wait a turn.
    let text = zoned_plan(["", "", "", ""]);
    assert!(
        text.contains(
            "predicted by the node failure model (docs/model.md; one zone (no node has \
             zone labels)):\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("up to 1 node(s) ahead of it in its zone's queue"),
        "{text}"
    );
}

#[test]
fn an_expectation_the_model_says_cannot_hold_is_flagged_and_no_shipped_one_is() {
    let inv = four_nodes();
    let settings = RunSettings::new(inv.clone(), "/nonexistent/journal.json".into());
    let executor = Executor::new(inv);
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/experiments/lab/wrong-expectation.yaml");
    let wrong = crate::experiment::load(&path).unwrap_or_else(|d| panic!("{d}"));
    let text = offline(&wrong, &settings, &executor, "connection refused").text;
    assert!(
        text.contains(
            "  node stays Ready while its kubelet is stopped: Ready for 30.0s after `stop kubelet`\n    \
             ! the node failure model: lab-worker-1 Unknown by +22.0s (grace period after the \
             last lease renewal, at the next monitor pass), before this holds to its end at +30.0s\n"
        ),
        "{text}"
    );
    assert_eq!(
        text.matches("! the node failure model").count(),
        1,
        "{text}"
    );
    // An eviction bound shorter than the grace period cannot hold either.
    let mut early = shipped("kubelet-stop-past-toleration.yaml");
    let e = early
        .expectations
        .iter_mut()
        .find(|e| e.name == "node gets the unreachable NoExecute taint")
        .expect("the taint's expectation");
    if let crate::experiment::model::Check::Becomes { window, .. } = &mut e.check {
        *window = crate::experiment::model::Window::Within(crate::experiment::model::Bound::fixed(
            std::time::Duration::from_secs(5),
        ));
    }
    let text = offline(&early, &settings, &executor, "connection refused").text;
    assert!(
        text.contains(
            "! the node failure model: lab-worker-1 tainted unreachable:NoExecute no sooner \
             than +12.0s (first in its zone's queue (0.1/s)), after this window closes at +5.0s"
        ),
        "{text}"
    );

    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments"))
        .expect("experiments/")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".yaml") {
            continue;
        }
        let text = offline(&shipped(&name), &settings, &executor, "connection refused").text;
        assert!(
            !text.contains("! the node failure model"),
            "{name}:\n{text}"
        );
        if name == "reboot.yaml" {
            // The lab fixture: 20 s grace; a 40 s lease assumed, renewed every 10 s.
            assert!(
                text.contains("rebooted at +0.0s: Unknown never if it answers again within 10.0s"),
                "{text}"
            );
        }
        if name == "graceful-shutdown.yaml" {
            assert!(
                text.contains(
                    "shut down at +0.0s: with graceful node shutdown on its kubelet, \
                     ShuttingDown at once"
                ),
                "{text}"
            );
        }
        // Every shipped experiment that faults a worker at a known offset has a
        // prediction (the control-plane one needs a control-plane node in the inventory;
        // a kubelet restart silences no node for long enough to model; an offline plan
        // shows a rolling sequence as one step doing its first action, a drain, which
        // silences no node either).
        if name != "control-plane-node-down.yaml"
            && name != "rolling-kubelet-restart.yaml"
            && name != "rolling-upgrade-workers.yaml"
        {
            assert!(
                text.contains("predicted by the node failure model"),
                "{name}:\n{text}"
            );
        }
    }
}

#[test]
fn the_json_plan_says_what_the_text_says_step_by_step() {
    let inv = four_nodes();
    let settings = RunSettings::new(inv.clone(), "/nonexistent/journal.json".into());
    let executor = Executor::new(inv);
    let exp = shipped("kubelet-stop-past-toleration.yaml");
    let rendered = offline(&exp, &settings, &executor, "connection refused");
    let (text, doc) = (&rendered.text, &rendered.doc);
    assert_eq!(doc.offline.as_deref(), Some("connection refused"));
    assert_eq!(doc.cluster.as_deref(), Some("faultline-lab"));
    // Steps in the order the text lists them, each command as the text shows it.
    let mut from = 0;
    for step in &doc.steps {
        let at = text[from..]
            .find(&format!("  {} (", step.name))
            .unwrap_or_else(|| panic!("`{}` not after byte {from}: {text}", step.name));
        from += at;
        for c in &step.commands {
            let command = c.command.as_deref().expect("lab nodes run every command");
            assert!(
                text.contains(&format!("{}: {command}\n", c.node)),
                "{command}"
            );
        }
    }
    let offsets: Vec<i64> = doc.steps.iter().filter_map(|s| s.at_ms).collect();
    assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "{offsets:?}");
    let victim = doc
        .targets
        .iter()
        .find(|t| t.name == "victim")
        .expect("victim");
    assert!(!victim.resolved);
    assert_eq!(
        victim.nodes,
        ["lab-worker-1", "lab-worker-2", "lab-worker-3"]
    );
    assert_eq!(doc.expectations.len(), exp.expectations.len());
    assert!(!doc.predictions.is_empty());
    assert_eq!(doc.exit_code, plan_verdict::exit_code(&rendered.problems));
    // Serialised with the documented names.
    let json = serde_json::to_value(doc).expect("serialises");
    assert_eq!(json["status"], "planned");
    assert!(json["steps"][0]["atMs"].is_i64(), "{json}");
    assert!(
        json["steps"][0]["commands"][0]["node"].is_string(),
        "{json}"
    );
}
