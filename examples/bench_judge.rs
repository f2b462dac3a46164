//! Benchmark: how long one judgement of a large timeline takes, and how big the timeline is.
//!
//! The runner re-judges the growing timeline every second to stop early, so the judge must
//! stay far below a second on the longest runs faultline is meant for. This builds a
//! synthetic timeline — `NODES` nodes, `PODS_PER_NODE` pods on each, one node's kubelet
//! stopped with the eviction story of the shipped experiment, plus readiness churn on every
//! other pod for an hour — and judges `experiments/kubelet-stop-past-toleration.yaml` over it.
//! Target: under 100 ms per judgement at 100 nodes × 30 pods × 1 h of churn.
//!
//! `cargo run --release --example bench_judge [NODES] [PODS_PER_NODE] [MINUTES]`

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use chrono::Utc;
use faultline::experiment::model::{ClusterTimers, WorkloadKind, WorkloadRef};
use faultline::timeline::{
    ConditionStatus, Entry, Event, NodeState, PodId, PodState, StepPhase, Taint, Timeline,
};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let nodes = args.first().copied().unwrap_or(100) as usize;
    let per_node = args.get(1).copied().unwrap_or(30) as usize;
    let minutes = args.get(2).copied().unwrap_or(60) as i64;

    let exp =
        faultline::experiment::load(Path::new("experiments/kubelet-stop-past-toleration.yaml"))
            .unwrap_or_else(|d| panic!("{d}"));
    let timers = ClusterTimers {
        node_monitor_period: std::time::Duration::from_secs(2),
        node_monitor_grace_period: std::time::Duration::from_secs(20),
        default_unreachable_toleration: std::time::Duration::from_secs(30),
        default_not_ready_toleration: std::time::Duration::from_secs(30),
    };
    let built = Instant::now();
    let timeline = synthetic(nodes, per_node, minutes);
    let build_ms = built.elapsed().as_secs_f64() * 1e3;
    let targets: BTreeMap<String, Vec<String>> =
        [("victim".to_string(), vec!["node-0".to_string()])].into();
    let json = serde_json::to_vec(&timeline).map(|v| v.len()).unwrap_or(0);

    let runs = 5;
    let mut times = Vec::new();
    let mut verdicts = Vec::new();
    for i in 0..runs {
        let t = Instant::now();
        verdicts = faultline::judge::judge(&exp, &targets, &timers, &[], &timeline, i % 2 == 1);
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let passed = verdicts
        .iter()
        .filter(|v| v.outcome == faultline::judge::Outcome::Passed)
        .count();
    println!("timeline: {nodes} nodes x {per_node} pods, {minutes} min of churn");
    println!("  entries            {}", timeline.entries.len());
    println!(
        "  as JSON            {:.1} MiB",
        json as f64 / (1024.0 * 1024.0)
    );
    println!("  built in           {build_ms:.1} ms");
    println!(
        "judge ({} expectations, {runs} runs): median {:.1} ms, max {:.1} ms",
        exp.expectations.len(),
        times[runs / 2],
        times[runs - 1]
    );
    println!("  verdicts passed    {passed}/{}", verdicts.len());
}

fn workload(kind: WorkloadKind, name: &str) -> WorkloadRef {
    WorkloadRef {
        kind,
        namespace: "faultline-lab".into(),
        name: name.into(),
    }
}

fn node_state(ready: ConditionStatus, unreachable: bool) -> NodeState {
    let taints = if unreachable {
        ["NoSchedule", "NoExecute"]
            .iter()
            .map(|e| Taint {
                key: "node.kubernetes.io/unreachable".into(),
                effect: (*e).into(),
            })
            .collect()
    } else {
        Vec::new()
    };
    NodeState {
        ready,
        ready_since: None,
        taints,
        unschedulable: false,
    }
}

fn pod_state(node: &str, owner: &WorkloadRef, ready: bool, terminating: bool) -> PodState {
    PodState {
        phase: "Running".into(),
        ready,
        ready_since: None,
        terminating,
        node: Some(node.into()),
        restarts: 0,
        owner: Some(owner.clone()),
        created: None,
        unreachable_toleration_secs: (owner.kind != WorkloadKind::DaemonSet).then_some(30),
        tolerates_unreachable_forever: owner.kind == WorkloadKind::DaemonSet,
    }
}

/// A deterministic synthetic timeline: the eviction story on node-0, churn elsewhere.
fn synthetic(nodes: usize, per_node: usize, minutes: i64) -> Timeline {
    let mut t = Timeline::new(Utc::now());
    let mut push = |ms: i64, event: Event| {
        t.entries.push(Entry {
            offset_ms: ms,
            wall: Utc::now(),
            event,
        });
    };
    let web = workload(WorkloadKind::Deployment, "web");
    let db = workload(WorkloadKind::StatefulSet, "db");
    let agent = workload(WorkloadKind::DaemonSet, "agent");
    let mut pods = Vec::new();
    for n in 0..nodes {
        let node = format!("node-{n}");
        push(
            0,
            Event::Node {
                name: node.clone(),
                before: None,
                after: Some(node_state(ConditionStatus::True, false)),
            },
        );
        for p in 0..per_node {
            let owner = match p % 3 {
                0 => &web,
                1 => &agent,
                _ => &db,
            };
            let name = match owner.kind {
                WorkloadKind::StatefulSet if n == 0 && p == 2 => "db-0".to_string(),
                _ => format!("{}-{n}-{p}", owner.name),
            };
            let id = PodId {
                namespace: "faultline-lab".into(),
                name,
                uid: format!("uid-{n}-{p}"),
            };
            push(
                0,
                Event::Pod {
                    pod: id.clone(),
                    before: None,
                    after: Some(pod_state(&node, owner, true, false)),
                },
            );
            pods.push((id, node.clone(), owner.clone()));
        }
    }
    push(
        500,
        Event::Step {
            step: "stop kubelet".into(),
            action: "kubelet-stop".into(),
            node: Some("node-0".into()),
            phase: StepPhase::Issued,
        },
    );
    push(
        20_500,
        Event::Node {
            name: "node-0".into(),
            before: Some(node_state(ConditionStatus::True, false)),
            after: Some(node_state(ConditionStatus::Unknown, true)),
        },
    );
    for (id, node, owner) in pods.iter().filter(|(_, n, _)| n == "node-0") {
        if owner.kind != WorkloadKind::DaemonSet {
            push(
                51_000,
                Event::Pod {
                    pod: id.clone(),
                    before: Some(pod_state(node, owner, false, false)),
                    after: Some(pod_state(node, owner, false, true)),
                },
            );
        }
    }
    // Replacements elsewhere.
    for (i, (_, _, owner)) in pods
        .iter()
        .filter(|(_, n, o)| n == "node-0" && o.kind == WorkloadKind::Deployment)
        .enumerate()
    {
        let id = PodId {
            namespace: "faultline-lab".into(),
            name: format!("web-new-{i}"),
            uid: format!("new-{i}"),
        };
        push(
            52_000,
            Event::Pod {
                pod: id,
                before: None,
                after: Some(pod_state("node-1", owner, true, false)),
            },
        );
    }
    push(
        80_500,
        Event::Step {
            step: "start kubelet".into(),
            action: "kubelet-start".into(),
            node: Some("node-0".into()),
            phase: StepPhase::Issued,
        },
    );
    push(
        81_000,
        Event::Node {
            name: "node-0".into(),
            before: Some(node_state(ConditionStatus::Unknown, true)),
            after: Some(node_state(ConditionStatus::True, false)),
        },
    );
    for (id, _, owner) in pods
        .iter()
        .filter(|(_, n, o)| n == "node-0" && o.kind != WorkloadKind::DaemonSet)
    {
        push(
            82_000,
            Event::Pod {
                pod: id.clone(),
                before: None,
                after: None,
            },
        );
        if owner.kind == WorkloadKind::StatefulSet && id.name == "db-0" {
            let new = PodId {
                uid: "db-0-new".into(),
                ..id.clone()
            };
            push(
                83_000,
                Event::Pod {
                    pod: new,
                    before: None,
                    after: Some(pod_state("node-0", owner, true, false)),
                },
            );
        }
    }
    // Readiness churn on every other node's pods: one flap per pod every 5 minutes.
    let end = minutes * 60_000;
    let others: Vec<_> = pods.iter().filter(|(_, n, _)| n != "node-0").collect();
    let mut ms = 90_000;
    let step = (300_000 / others.len().max(1) as i64).max(1);
    while ms < end {
        for (i, (id, node, owner)) in others.iter().enumerate() {
            let at = ms + i as i64 * step;
            if at >= end {
                break;
            }
            push(
                at,
                Event::Pod {
                    pod: id.clone(),
                    before: Some(pod_state(node, owner, true, false)),
                    after: Some(pod_state(node, owner, false, false)),
                },
            );
            push(
                at + 1_000,
                Event::Pod {
                    pod: id.clone(),
                    before: Some(pod_state(node, owner, false, false)),
                    after: Some(pod_state(node, owner, true, false)),
                },
            );
        }
        ms += 300_000;
    }
    t.entries.sort_by_key(|e| e.offset_ms);
    t
}
