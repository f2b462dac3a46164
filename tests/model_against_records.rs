//! The node failure model (`faultline::model`) against what real runs recorded: for each
//! committed lab record of a kubelet stop, the model's window for the node going Unknown,
//! its NoExecute taint and each of its pods going Terminating must hold what the run saw
//! (within one second: the stop command returns a moment after the kubelet stopped, and
//! the observer sees a change a few milliseconds after the API server has it). Prints a
//! line per transition, predicted beside observed.
//!
//! The records come from the netns lab's `fast` timers (ci/lab): 20 s grace, 2 s monitor
//! period, 30 s tolerations, a 10 s node lease.

use std::path::Path;
use std::time::Duration;

use faultline::model::{
    ControllerSettings, ModelNode, ModelPod, Outage, Owner, Toleration, Transition, Window, predict,
};
use serde_json::Value;

/// The lab's `fast` preset's lease (not in the record: the kubelet's setting).
const LAB_LEASE: Duration = Duration::from_secs(10);
/// How far an observation may fall outside its window.
const SLACK: Duration = Duration::from_secs(1);

fn secs(v: &Value) -> Duration {
    Duration::from_secs(v["secs"].as_u64().expect("secs"))
}

fn ms(offset: i64) -> Duration {
    Duration::from_millis(u64::try_from(offset).expect("offset after the start"))
}

fn entries(record: &Value) -> &Vec<Value> {
    record["timeline"]["entries"].as_array().expect("entries")
}

/// The offset at which step action `kind` finished on `node`.
fn step_finished(record: &Value, kind: &str, node: &str) -> Option<Duration> {
    entries(record)
        .iter()
        .find(|e| {
            let ev = &e["event"];
            ev["type"] == "step"
                && ev["action"] == kind
                && ev["node"] == node
                && ev["phase"]["phase"] == "finished"
        })
        .map(|e| ms(e["offset_ms"].as_i64().expect("offset")))
}

/// The first offset, up to `cut`, at which `test` holds for an event.
fn first(record: &Value, cut: Duration, test: impl Fn(&Value) -> bool) -> Option<Duration> {
    entries(record)
        .iter()
        .map(|e| (ms(e["offset_ms"].as_i64().expect("offset")), &e["event"]))
        .take_while(|(at, _)| *at <= cut)
        .find(|(_, ev)| test(ev))
        .map(|(at, _)| at)
}

fn settings(record: &Value) -> ControllerSettings {
    let t = &record["cluster"]["timers"];
    ControllerSettings {
        node_monitor_period: secs(&t["node_monitor_period"]),
        node_monitor_grace_period: secs(&t["node_monitor_grace_period"]),
        default_unreachable_toleration: secs(&t["default_unreachable_toleration"]),
        node_lease_duration: LAB_LEASE,
        ..ControllerSettings::default()
    }
}

/// Every node the run saw, with whether it was Ready at the start (one zone: the lab
/// labels none).
fn nodes(record: &Value) -> Vec<ModelNode> {
    let mut out: Vec<ModelNode> = Vec::new();
    for e in entries(record) {
        let ev = &e["event"];
        if ev["type"] == "node" && !out.iter().any(|n| ev["name"] == n.name.as_str()) {
            out.push(ModelNode {
                name: ev["name"].as_str().expect("name").to_string(),
                zone: String::new(),
                ready: ev["after"]["ready"] == "True",
            });
        }
    }
    out
}

/// The pods on `node` when the run started, with their owner and toleration.
fn pods_on(record: &Value, node: &str) -> Vec<ModelPod> {
    let mut out: Vec<ModelPod> = Vec::new();
    for e in entries(record) {
        let ev = &e["event"];
        let after = &ev["after"];
        if ev["type"] != "pod" || !ev["before"].is_null() || after["node"] != node {
            continue;
        }
        let name = format!(
            "{}/{}",
            ev["pod"]["namespace"].as_str().unwrap(),
            ev["pod"]["name"].as_str().unwrap()
        );
        if out.iter().any(|p| p.name == name) || after["terminating"] == true {
            continue;
        }
        let owner = match after["owner"]["kind"].as_str() {
            Some("ReplicaSet") => Owner::ReplicaSet,
            Some("StatefulSet") => Owner::StatefulSet,
            Some("DaemonSet") => Owner::DaemonSet,
            _ => Owner::None,
        };
        let toleration = match (
            after["tolerates_unreachable_forever"].as_bool(),
            after["unreachable_toleration_secs"].as_u64(),
        ) {
            (Some(true), _) => Toleration::Forever,
            (_, Some(s)) => Toleration::For(Duration::from_secs(s)),
            _ => Toleration::Default,
        };
        out.push(ModelPod {
            name,
            node: node.to_string(),
            owner,
            toleration,
        });
    }
    out
}

fn shown(d: Option<Duration>) -> String {
    d.map_or("—".into(), |d| format!("{:.1}s", d.as_secs_f64()))
}

/// Whether `observed` (seen up to `cut`) fits `window` (within [`SLACK`]); `None` when
/// the window reaches past the cut and nothing was seen before it (undecidable). Prints
/// the comparison.
fn fits(what: &str, window: Window, observed: Option<Duration>, cut: Duration) -> Option<bool> {
    let ok = match (window, observed) {
        (Window::Never, None) => Some(true),
        (Window::Never, Some(_)) => Some(false),
        (Window::Between { earliest, latest }, Some(at)) => {
            Some(at + SLACK >= earliest && latest.is_none_or(|l| at <= l + SLACK))
        }
        (Window::Between { latest, .. }, None) => match latest {
            Some(l) if l + SLACK < cut => Some(false),
            _ => None,
        },
    };
    let predicted = match window {
        Window::Never => "never".to_string(),
        Window::Between { earliest, latest } => {
            format!("{} … {}", shown(Some(earliest)), shown(latest))
        }
    };
    let mark = match ok {
        Some(true) => "ok  ",
        Some(false) => "MISS",
        None => "n/a ",
    };
    println!(
        "{mark} {what}: predicted {predicted}, observed {} (seen up to {})",
        shown(observed),
        shown(Some(cut))
    );
    ok
}

/// Compares the model with one record; returns the transitions that missed.
fn compare(file: &str, check_pods: bool) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/records")
        .join(file);
    let record: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("record"))
        .expect("record is JSON");
    println!("== {file}");
    let victim = record["targets"]["victim"][0]
        .as_str()
        .expect("victim")
        .to_string();
    let from = step_finished(&record, "kubelet-stop", &victim).expect("the kubelet stopped");
    let until = step_finished(&record, "kubelet-start", &victim);
    let outage = Outage {
        node: victim.clone(),
        from,
        until,
        out_of_service: None,
    };
    let pods = pods_on(&record, &victim);
    let predictions = predict(&settings(&record), &nodes(&record), &pods, &[outage]);
    // Observation ends before teardown deletes the workloads; a deleted Node has no more
    // transitions (the model does not cover node deletion yet).
    let cut = [
        record["observed_until_ms"].as_i64().map(ms),
        step_finished(&record, "delete-node", &victim),
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(Duration::MAX);
    let mut missed = Vec::new();
    for p in &predictions {
        let observed = match p.transition {
            Transition::NodeUnknown => first(&record, cut, |ev| {
                ev["type"] == "node"
                    && ev["name"] == victim.as_str()
                    && ev["after"]["ready"] == "Unknown"
            }),
            Transition::NodeTainted => first(&record, cut, |ev| {
                ev["type"] == "node"
                    && ev["name"] == victim.as_str()
                    && ev["after"]["taints"].as_array().is_some_and(|ts| {
                        ts.iter().any(|t| {
                            t["key"] == "node.kubernetes.io/unreachable"
                                && t["effect"] == "NoExecute"
                        })
                    })
            }),
            Transition::PodTerminating if check_pods => {
                let (ns, name) = p.subject.split_once('/').expect("namespace/name");
                first(&record, cut, |ev| {
                    ev["type"] == "pod"
                        && ev["pod"]["namespace"] == ns
                        && ev["pod"]["name"] == name
                        && ev["after"]["terminating"] == true
                })
            }
            _ => continue,
        };
        let what = format!("{} {:?} ({:?})", p.subject, p.transition, p.rule);
        if fits(&what, p.window, observed, cut) == Some(false) {
            missed.push(format!("{file}: {what}"));
        }
    }
    missed
}

#[test]
fn the_model_holds_what_the_lab_records_saw() {
    let mut missed = Vec::new();
    // Kubelet stopped, then started: every transition of node and pods.
    missed.extend(compare("kubelet-stop-past-toleration.json", true));
    missed.extend(compare("kubelet-stop-within-toleration.json", true));
    // Steps that delete pods or the node follow: the node's own transitions only.
    missed.extend(compare("node-deleted.json", false));
    missed.extend(compare("local-persistent-volume.json", false));
    assert!(
        missed.is_empty(),
        "outside the model's windows:\n{}",
        missed.join("\n")
    );
}
