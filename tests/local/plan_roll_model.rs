//! The node failure model on a roll (issue 46): `plan -i` predicts every node of the roll
//! in roll order, each issued after the one before is back plus `settle` (text and
//! JSON), and `explain` of a recorded roll compares every worker's transitions with its
//! own windows.

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
        .env("COLUMNS", "80")
        .current_dir(repo())
        .output()
        .expect("faultline runs")
}

/// The inventory's three workers, by name: the order of a roll `order: name`.
const WORKERS: [&str; 3] = ["roll-worker", "roll-worker2", "roll-worker3"];

/// `plan` of `experiment` offline on the three-worker inventory.
fn plan(experiment: &str, json: bool) -> Output {
    let mut args = vec![
        "plan",
        experiment,
        "-i",
        "fixtures/inventory/three-workers.yaml",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ];
    if json {
        args.extend(["-o", "json"]);
    }
    faultline(&args)
}

/// The rows of the roll's table: (node, issued at the earliest, in s).
fn rows(text: &str, roll: &str) -> Vec<(String, f64)> {
    let start = text
        .lines()
        .position(|l| l.starts_with(&format!("  roll `{roll}`, node by node")))
        .unwrap_or_else(|| panic!("no table for `{roll}`:\n{text}"));
    text.lines()
        .skip(start + 1)
        .take_while(|l| l.starts_with("    "))
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let node = fields.next()?;
            let issued = fields.next()?.trim_start_matches('≥');
            let at: f64 = issued.split('-').next()?.parse().ok()?;
            Some((node.to_string(), at))
        })
        .collect()
}

#[test]
fn plan_predicts_every_worker_of_a_roll_in_order_each_issued_later() {
    for (experiment, roll) in [
        ("experiments/rolling-reboot-workers.yaml", "reboot workers"),
        (
            "experiments/rolling-kubelet-restart.yaml",
            "restart kubelets",
        ),
    ] {
        let out = plan(experiment, false);
        let text = String::from_utf8_lossy(&out.stdout);
        let rows = rows(&text, roll);
        let nodes: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(nodes, WORKERS, "{experiment}:\n{text}");
        assert!(
            rows.windows(2).all(|w| w[0].1 < w[1].1),
            "{experiment}: issue times not increasing: {rows:?}\n{text}"
        );
        // Offline, the plan says which nodes it covers.
        assert!(
            text.contains("the inventory's candidates for `workers`: roll-worker, roll-worker2"),
            "{text}"
        );
        // The table fits a terminal.
        let table_start = text.find(&format!("  roll `{roll}`")).unwrap();
        for line in text[table_start..].lines().skip(2).take(4) {
            assert!(line.chars().count() <= 80, "{line}");
        }
    }
}

#[test]
fn plan_json_gives_each_worker_of_a_roll_its_issue_and_windows() {
    let out = plan("experiments/rolling-reboot-workers.yaml", true);
    let plans: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let roll = &plans[0]["rollPredictions"][0];
    assert_eq!(roll["roll"], "reboot workers", "{roll}");
    assert_eq!(roll["fault"], "ComesBack");
    let nodes = roll["nodes"].as_array().expect("nodes");
    let names: Vec<&str> = nodes.iter().filter_map(|n| n["node"].as_str()).collect();
    assert_eq!(names, WORKERS);
    let issued: Vec<u64> = nodes
        .iter()
        .filter_map(|n| n["issued"]["Between"]["earliest_ms"].as_u64())
        .collect();
    assert_eq!(issued.len(), 3, "{roll}");
    assert!(issued.windows(2).all(|w| w[0] < w[1]), "{issued:?}");
    for n in nodes {
        let transitions: Vec<&str> = n["predictions"]
            .as_array()
            .expect("predictions")
            .iter()
            .filter_map(|p| p["transition"].as_str())
            .collect();
        assert!(transitions.contains(&"NodeUnknown"), "{n}");
        assert!(transitions.contains(&"NodeReady"), "{n}");
    }
    // An experiment without a roll has no such field.
    let out = plan("experiments/kubelet-stop-past-toleration.yaml", true);
    let plans: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(plans[0].get("rollPredictions").is_none(), "{}", plans[0]);
}

#[test]
fn explain_of_a_recorded_roll_names_every_worker_and_counts_each_line() {
    let record = "fixtures/records/rolls/rolling-upgrade-workers.json";
    let out = faultline(&["explain", record]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("roll `upgrade workers`, node by node"),
        "{text}"
    );
    let workers = ["lab-worker-1", "lab-worker-2", "lab-worker-3"];
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| workers.iter().any(|w| l.trim_start().starts_with(w)))
        .collect();
    for w in workers {
        assert!(
            lines.iter().any(|l| l
                .trim_start()
                .starts_with(&format!("{w} back (as the roll saw it)"))),
            "{w}: each worker back, as the roll's report says (it stayed Ready):\n{text}"
        );
    }
    // Each next worker's issue against the one before's return plus settle.
    for w in &workers[1..] {
        assert!(
            lines.iter().any(|l| l
                .trim_start()
                .starts_with(&format!("{w} its roll step issued"))),
            "{w}:\n{text}"
        );
    }
    // Every roll line is counted in the summary (the record has no other outage).
    let json = faultline(&["explain", record, "-o", "json"]);
    let value: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let explanation = &value[0]["explanation"];
    assert_eq!(explanation["items"].as_array().map(Vec::len), Some(0));
    let items = explanation["rolls"][0]["items"]
        .as_array()
        .expect("roll items");
    let decided = items.iter().filter(|i| i["fit"] != "Undecided").count();
    assert!(decided >= 3 * 3, "{explanation}");
    assert!(
        text.contains(&format!(" of {decided} decided transition(s)")),
        "{decided} decided:\n{text}"
    );
    for w in workers {
        assert!(items.iter().any(|i| i["node"] == w), "{w}");
    }
}
