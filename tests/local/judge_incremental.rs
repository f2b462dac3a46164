//! The live judge (an index fed entry by entry, as they arrive, judged on every tick)
//! against the reference: the timeline as it stands, judged from scratch. Both must give
//! identical verdicts at every tick, on every recorded run in `fixtures/records/` and on
//! generated timelines whose entries arrive out of order, as stamped-elsewhere entries do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::Utc;
use faultline::experiment::model::{ClusterTimers, Experiment};
use faultline::judge::{Observed, TimelineIndex, judge_index, judge_until};
use faultline::record::RunRecord;
use faultline::timeline::{
    ConditionStatus, Entry, Event, GapPhase, NodeState, PodId, PodState, StepPhase, Taint,
    Timeline, WorkloadState,
};

/// Feeds `arrivals` (entries in the order they reach the runner) into a timeline and an
/// index, and after every `every`-th arrival checks that the live judgement equals the
/// reference; finally checks the complete judgement and the index itself.
fn check_live_equals_reference(
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
    timers: &ClusterTimers,
    capabilities: &[String],
    arrivals: &[(i64, Entry)],
    every: usize,
    what: &str,
) {
    let mut timeline = Timeline::new(Utc::now());
    let mut index = TimelineIndex::new();
    for (i, (arrived_ms, entry)) in arrivals.iter().enumerate() {
        index.insert(entry);
        timeline.insert(entry.clone());
        if i % every != 0 && i + 1 != arrivals.len() {
            continue;
        }
        let observed = Observed {
            until_ms: arrived_ms - 500,
            complete: false,
        };
        let live = judge_index(exp, targets, timers, capabilities, &index, observed);
        let reference = judge_until(exp, targets, timers, capabilities, &timeline, observed);
        assert_eq!(
            live, reference,
            "{what}: after arrival {i} (+{arrived_ms} ms)"
        );
    }
    let observed = Observed {
        until_ms: timeline.end_ms(),
        complete: true,
    };
    assert_eq!(
        judge_index(exp, targets, timers, capabilities, &index, observed),
        judge_until(exp, targets, timers, capabilities, &timeline, observed),
        "{what}: complete"
    );
    assert_eq!(index.len(), timeline.entries.len());
}

#[test]
fn live_judge_equals_reference_on_every_recorded_run() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/records");
    let mut seen = 0;
    for path in std::fs::read_dir(&dir).expect("fixtures/records") {
        let path = path.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read record");
        let record: RunRecord = serde_json::from_str(&text).expect("parse record");
        // Entries arrive as recorded; steps are stamped by the runner before the
        // observations around them land, so deliver each step entry three arrivals late.
        let mut arrivals: Vec<(i64, Entry)> = Vec::new();
        let mut late: Vec<(usize, Entry)> = Vec::new();
        for e in &record.timeline.entries {
            if matches!(e.event, Event::Step { .. }) {
                late.push((3, e.clone()));
                continue;
            }
            arrivals.push((e.offset_ms, e.clone()));
            for (wait, entry) in &mut late {
                *wait -= 1;
                if *wait == 0 {
                    arrivals.push((e.offset_ms, entry.clone()));
                }
            }
            late.retain(|(wait, _)| *wait > 0);
        }
        let end = record.timeline.end_ms();
        arrivals.extend(late.into_iter().map(|(_, e)| (end, e)));
        check_live_equals_reference(
            &record.experiment,
            &record.targets,
            &record.cluster.timers,
            &record.cluster.capabilities,
            &arrivals,
            1,
            &path.display().to_string(),
        );
        seen += 1;
    }
    assert!(seen >= 4, "expected the recorded runs, found {seen}");
}

/// A small deterministic generator (xorshift): the cases are reproducible from their seed,
/// which a failure message names.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const EXPERIMENT: &str = r#"
name: generated
description: every subject and check, for the live-versus-reference test
namespace: ns
targets:
  victim: {names: [n0]}
  others: {names: [n1, n2]}
steps:
  - {name: fault, at: 0s, do: kubelet-stop, target: victim}
  - {name: repair, at: 40s, do: kubelet-start, target: victim}
expect:
  - {name: node unknown, node: victim, becomes: Unknown, within: 30s}
  - {name: node tainted, node: victim, becomes: {tainted: "node.kubernetes.io/unreachable:NoExecute"}, between: [5s, 35s]}
  - {name: others stay ready, node: others, stays: Ready, until: repair}
  - {name: web terminating, pods: {workload: deployment/web, on: victim}, becomes: Terminating, between: [10s, 50s]}
  - {name: web replaced elsewhere, pods: {workload: deployment/web, notOn: victim, generation: replacements, count: 1}, becomes: Ready, within: 60s}
  - {name: web all replacements ready, pods: {workload: deployment/web, generation: replacements}, eventually: Ready}
  - {name: db stays terminating, pods: {workload: statefulset/db, on: victim}, stays: Terminating, until: repair}
  - {name: no db replacement, pods: {workload: statefulset/db, generation: replacements}, never: Running, until: repair}
  - {name: web elsewhere never terminating, pods: {workload: deployment/web, notOn: victim}, never: Terminating}
  - {name: db restarts, pods: {workload: statefulset/db}, restarts: changed, since: repair}
  - {name: db replaced, pods: {workload: statefulset/db, on: victim}, replaced: true, since: repair}
  - {name: web available, workload: deployment/web, becomes: Available, within: 90s, since: repair}
  - {name: node ready again, node: victim, becomes: Ready, within: 20s, since: repair}
"#;

fn node(ready: u64, tainted: bool) -> NodeState {
    NodeState {
        ready: match ready {
            0 => ConditionStatus::True,
            1 => ConditionStatus::Unknown,
            _ => ConditionStatus::False,
        },
        ready_since: None,
        taints: if tainted {
            vec![Taint {
                key: "node.kubernetes.io/unreachable".into(),
                effect: "NoExecute".into(),
            }]
        } else {
            Vec::new()
        },
        unschedulable: false,
        zone: None,
        shutting_down: false,
    }
}

/// A random run: node, pod, workload, gap and step entries over two minutes, each arriving
/// up to 400 ms after its offset (so entries are inserted out of order).
fn generated(seed: u64) -> Vec<(i64, Entry)> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let web = faultline::experiment::model::WorkloadRef {
        kind: faultline::experiment::model::WorkloadKind::Deployment,
        namespace: "ns".into(),
        name: "web".into(),
    };
    let db = faultline::experiment::model::WorkloadRef {
        kind: faultline::experiment::model::WorkloadKind::StatefulSet,
        ..web.clone()
    };
    let db = faultline::experiment::model::WorkloadRef {
        name: "db".into(),
        ..db
    };
    let nodes = ["n0", "n1", "n2"];
    let mut entries: Vec<Entry> = Vec::new();
    let mut put = |ms: i64, event: Event| {
        entries.push(Entry {
            offset_ms: ms,
            wall: Utc::now(),
            event,
        })
    };
    let pods = 4 + rng.below(8) as usize;
    let mut ids = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        put(
            -1_000 + i as i64,
            Event::Node {
                name: (*n).into(),
                before: None,
                after: Some(node(0, false)),
            },
        );
    }
    for p in 0..pods {
        let owner = if p % 3 == 0 { db.clone() } else { web.clone() };
        let id = PodId {
            namespace: "ns".into(),
            name: format!("{}-{}", owner.name, p % 5),
            uid: format!("u{p}"),
        };
        ids.push((id, owner));
    }
    let events = 20 + rng.below(60);
    for _ in 0..events {
        let ms = rng.below(120_000) as i64 - 2_000;
        let event = match rng.below(10) {
            0..=1 => Event::Node {
                name: nodes[rng.below(3) as usize].into(),
                before: None,
                after: Some(node(rng.below(3), rng.chance(40))),
            },
            2..=6 => {
                let (id, owner) = ids[rng.below(ids.len() as u64) as usize].clone();
                let after = (!rng.chance(10)).then(|| PodState {
                    phase: if rng.chance(80) { "Running" } else { "Pending" }.into(),
                    ready: rng.chance(60),
                    ready_since: None,
                    terminating: rng.chance(25),
                    node: rng.chance(90).then(|| nodes[rng.below(3) as usize].into()),
                    restarts: rng.below(3) as i32,
                    owner: Some(owner),
                    created: None,
                    unreachable_toleration_secs: Some(30),
                    tolerates_unreachable_forever: false,
                });
                Event::Pod {
                    pod: id.into(),
                    before: None,
                    after: after.map(Into::into),
                }
            }
            7 => Event::Workload {
                workload: web.clone(),
                before: None,
                after: Some(WorkloadState {
                    desired: 3,
                    ready: rng.below(4) as i32,
                    available: rng.below(4) as i32,
                }),
            },
            8 => Event::Gap {
                source: if rng.chance(50) { "pods" } else { "nodes" }.into(),
                phase: if rng.chance(50) {
                    GapPhase::Began
                } else {
                    GapPhase::Ended
                },
                reason: if rng.chance(50) {
                    "relisted"
                } else {
                    "resumed"
                }
                .into(),
            },
            _ => Event::Note {
                message: "noise".into(),
            },
        };
        put(ms, event);
    }
    let fault = rng.below(5_000) as i64;
    let repair = fault + 30_000 + rng.below(20_000) as i64;
    for (step, action, at) in [
        ("fault", "kubelet-stop", fault),
        ("repair", "kubelet-start", repair),
    ] {
        if step == "repair" && rng.chance(10) {
            continue; // a step that never ran
        }
        put(
            at,
            Event::Step {
                step: step.into(),
                action: action.into(),
                node: Some("n0".into()),
                phase: StepPhase::Issued,
            },
        );
    }
    entries.sort_by_key(|e| e.offset_ms);
    let mut arrivals: Vec<(i64, Entry)> = entries
        .into_iter()
        .map(|e| (e.offset_ms + rng.below(400) as i64, e))
        .collect();
    arrivals.sort_by_key(|(arrived, _)| *arrived);
    arrivals
}

#[test]
fn live_judge_equals_reference_on_generated_timelines() {
    let exp = faultline::experiment::parse(EXPERIMENT, Path::new("generated.yaml"))
        .unwrap_or_else(|d| panic!("{d}"));
    let targets = BTreeMap::from([
        ("victim".to_string(), vec!["n0".to_string()]),
        (
            "others".to_string(),
            vec!["n1".to_string(), "n2".to_string()],
        ),
    ]);
    let timers = ClusterTimers {
        node_monitor_period: std::time::Duration::from_secs(5),
        node_monitor_grace_period: std::time::Duration::from_secs(20),
        default_unreachable_toleration: std::time::Duration::from_secs(30),
        default_not_ready_toleration: std::time::Duration::from_secs(30),
    };
    for seed in 1..=300 {
        let arrivals = generated(seed);
        check_live_equals_reference(
            &exp,
            &targets,
            &timers,
            &[],
            &arrivals,
            1,
            &format!("seed {seed}"),
        );
    }
}
