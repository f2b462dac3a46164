//! Benchmark: what judging costs per tick of a live run, and once at the end, as the
//! timeline grows.
//!
//! The runner judges on every wake (new entries after a 100 ms burst, or a deadline) to
//! act on `when:` steps and to stop early. Each tick files the new entries into the judge's
//! index and judges over it, so its cost should follow what the expectations are about, not
//! the length of the run; the final judgement builds the index from the whole timeline once.
//!
//! This builds a synthetic timeline: `NODES` nodes, `PODS_PER_NODE` pods on each, one
//! node's kubelet stopped with the eviction story of `kubelet-stop-past-toleration`, plus a
//! readiness flap of every other pod every 5 minutes for `MINUTES`. It then replays it as a
//! run would, one tick per second of timeline, and prints (figures, one per line):
//! - `judge_tick_{p50,p99,max}_<label>`: one live tick (filing the second's new entries and
//!   judging every expectation), over the ticks of the last tenth of the run, µs;
//! - `judge_rescan_<label>`: judging the whole timeline from scratch, what every tick cost
//!   before the index (and what the final judgement costs), ms;
//! - `judge_entries_<label>`: the timeline's length.
//!
//! `cargo run --release --example bench_judge [LABEL:NODES:PODS_PER_NODE:MINUTES ...]`
//! (default `72k:100:30:60 1m:1000:30:90`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use faultline::experiment::model::{ClusterTimers, Experiment, WorkloadKind, WorkloadRef};
use faultline::judge::{Observed, Outcome, TimelineIndex, judge_index, judge_until};
use faultline::timeline::{
    ConditionStatus, Entry, Event, NodeState, PodId, PodState, StepPhase, Taint, Timeline,
};

/// One size of timeline to measure.
struct Size {
    label: String,
    nodes: usize,
    per_node: usize,
    minutes: i64,
}

fn main() {
    let mut sizes: Vec<Size> = std::env::args().skip(1).filter_map(|a| parse(&a)).collect();
    if sizes.is_empty() {
        sizes = ["72k:100:30:60", "1m:1000:30:90"]
            .iter()
            .filter_map(|a| parse(a))
            .collect();
    }
    let exp =
        faultline::experiment::load(Path::new("experiments/kubelet-stop-past-toleration.yaml"))
            .unwrap_or_else(|d| panic!("{d}"));
    for size in &sizes {
        measure(&exp, size);
    }
}

fn parse(arg: &str) -> Option<Size> {
    let mut parts = arg.split(':');
    Some(Size {
        label: parts.next()?.to_string(),
        nodes: parts.next()?.parse().ok()?,
        per_node: parts.next()?.parse().ok()?,
        minutes: parts.next()?.parse().ok()?,
    })
}

fn measure(exp: &Experiment, size: &Size) {
    let timers = ClusterTimers {
        node_monitor_period: std::time::Duration::from_secs(2),
        node_monitor_grace_period: std::time::Duration::from_secs(20),
        default_unreachable_toleration: std::time::Duration::from_secs(30),
        default_not_ready_toleration: std::time::Duration::from_secs(30),
    };
    let timeline = synthetic(size.nodes, size.per_node, size.minutes);
    let targets: BTreeMap<String, Vec<String>> =
        [("victim".to_string(), vec!["node-0".to_string()])].into();
    let label = &size.label;

    // A live run: one tick per second of timeline, filing that second's entries first.
    let mut index = TimelineIndex::new();
    let mut next = 0;
    let end = timeline.end_ms();
    let mut ticks: Vec<(i64, f64)> = Vec::new();
    let mut now = 0;
    while now <= end + 1_000 {
        let t = Instant::now();
        while next < timeline.entries.len() && timeline.entries[next].offset_ms <= now {
            index.insert(&timeline.entries[next]);
            next += 1;
        }
        let observed = Observed {
            until_ms: now - 500,
            complete: false,
        };
        let verdicts = judge_index(exp, &targets, &timers, &[], &index, observed);
        std::hint::black_box(verdicts);
        ticks.push((now, t.elapsed().as_secs_f64() * 1e6));
        now += 1_000;
    }
    let mut late: Vec<f64> = ticks
        .iter()
        .filter(|(at, _)| *at >= end - end / 10)
        .map(|(_, us)| *us)
        .collect();
    late.sort_by(f64::total_cmp);
    let q = |p: f64| late[((late.len() as f64 * p).ceil() as usize).saturating_sub(1)];

    // The same timeline judged from scratch: the old per-tick cost, and the final judgement.
    let runs = 3;
    let mut rescans = Vec::new();
    let mut verdicts = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let observed = Observed {
            until_ms: end,
            complete: true,
        };
        verdicts = judge_until(exp, &targets, &timers, &[], &timeline, observed);
        rescans.push(t.elapsed().as_secs_f64() * 1e3);
    }
    rescans.sort_by(f64::total_cmp);
    let live = judge_index(
        exp,
        &targets,
        &timers,
        &[],
        &index,
        Observed {
            until_ms: end,
            complete: true,
        },
    );
    assert_eq!(
        live, verdicts,
        "the index fed tick by tick judges as a rescan"
    );
    let passed = verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Passed)
        .count();
    println!(
        "# {label}: {} nodes x {} pods, {} min of churn; {} ticks; verdicts passed {passed}/{}",
        size.nodes,
        size.per_node,
        size.minutes,
        ticks.len(),
        verdicts.len()
    );
    println!(
        "figure judge_entries_{label} {} entries",
        timeline.entries.len()
    );
    println!("figure judge_tick_p50_{label} {:.1} us", q(0.50));
    println!("figure judge_tick_p99_{label} {:.1} us", q(0.99));
    println!(
        "figure judge_tick_max_{label} {:.1} us",
        late[late.len() - 1]
    );
    println!("figure judge_rescan_{label} {:.1} ms", rescans[runs / 2]);
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
        zone: None,
        shutting_down: false,
    }
}

fn pod_state(node: &str, owner: &WorkloadRef, ready: bool, terminating: bool) -> Arc<PodState> {
    Arc::new(PodState {
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
    })
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
            let id = Arc::new(PodId {
                namespace: "faultline-lab".into(),
                name,
                uid: format!("uid-{n}-{p}"),
            });
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
        let id = Arc::new(PodId {
            namespace: "faultline-lab".into(),
            name: format!("web-new-{i}"),
            uid: format!("new-{i}"),
        });
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
            let new = Arc::new(PodId {
                uid: "db-0-new".into(),
                ..PodId::clone(id)
            });
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
