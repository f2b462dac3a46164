use std::time::Duration;

use chrono::Utc;

use super::*;
use crate::experiment::model::{Bound, Threshold, WorkloadKind, WorkloadRef};
use crate::record::RunRecord;
use crate::timeline::{Entry, Event, WorkloadState};

/// The experiment's start: the messages count their moments from it.
const START: i64 = 1_000;

fn node(ready: ConditionStatus) -> Option<NodeState> {
    Some(NodeState {
        ready,
        ready_since: None,
        taints: Vec::new(),
        unschedulable: false,
        zone: None,
        shutting_down: false,
    })
}

fn node_change(at: i64, name: &str, after: Option<NodeState>) -> Entry {
    entry(
        at,
        Event::Node {
            name: name.into(),
            before: None,
            after,
        },
    )
}

fn entry(offset_ms: i64, event: Event) -> Entry {
    Entry {
        offset_ms,
        wall: Utc::now(),
        event,
    }
}

fn index(entries: &[Entry]) -> TimelineIndex {
    let mut index = TimelineIndex::new();
    for e in entries {
        index.insert(e);
    }
    index
}

fn secs(s: u64) -> Bound {
    Bound::fixed(Duration::from_secs(s))
}

fn spec(conditions: Vec<AbortCondition>) -> AbortSpec {
    AbortSpec { conditions }
}

fn condition(name: &str, kind: AbortKind, hold: Bound) -> AbortCondition {
    AbortCondition {
        name: name.into(),
        kind,
        hold,
    }
}

fn targets(nodes: &[&str]) -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([(
        "victim".to_string(),
        nodes.iter().map(|n| n.to_string()).collect(),
    )])
}

fn check(
    spec: &AbortSpec,
    t: &BTreeMap<String, Vec<String>>,
    index: &TimelineIndex,
    now: i64,
) -> AbortCheck {
    check_aborts(spec, t, &ClusterTimers::default(), index, START, now)
}

#[test]
fn a_node_that_is_not_a_target_going_unknown_trips_at_once_and_a_target_does_not() {
    let timeline = [
        node_change(0, "victim-1", node(ConditionStatus::True)),
        node_change(0, "bystander", node(ConditionStatus::True)),
        node_change(20_000, "victim-1", node(ConditionStatus::Unknown)),
    ];
    let spec = AbortSpec::defaults();
    let t = targets(&["victim-1"]);
    assert_eq!(
        check(&spec, &t, &index(&timeline), 30_000),
        AbortCheck::default()
    );

    let mut timeline = timeline.to_vec();
    timeline.push(node_change(
        25_000,
        "bystander",
        node(ConditionStatus::Unknown),
    ));
    let got = check(&spec, &t, &index(&timeline), 25_100);
    assert_eq!(
        got.tripped,
        Some(Tripped {
            condition: "a node that is not a target goes NotReady".into(),
            at_ms: 25_000,
            value: "node bystander left Ready at +24.0s: Ready Unknown".into(),
        })
    );
}

#[test]
fn a_node_not_ready_before_the_start_or_never_ready_is_the_clusters_state_not_a_trip() {
    let timeline = [
        node_change(0, "broken", node(ConditionStatus::True)),
        node_change(500, "broken", node(ConditionStatus::False)),
        node_change(0, "joining", node(ConditionStatus::False)),
        node_change(5_000, "joining", node(ConditionStatus::Unknown)),
    ];
    let got = check(
        &AbortSpec::defaults(),
        &targets(&[]),
        &index(&timeline),
        60_000,
    );
    assert_eq!(got, AbortCheck::default());
    // Ready again, then NotReady again during the run: that is the run's doing.
    let mut timeline = timeline.to_vec();
    timeline.push(node_change(10_000, "broken", node(ConditionStatus::True)));
    timeline.push(node_change(12_000, "broken", None));
    let got = check(
        &AbortSpec::defaults(),
        &targets(&[]),
        &index(&timeline),
        60_000,
    );
    let tripped = got.tripped.expect("a node deleted during the run trips");
    assert_eq!(tripped.at_ms, 12_000);
    assert_eq!(tripped.value, "node broken was deleted at +11.0s");
}

#[test]
fn a_hold_delays_the_trip_and_names_when_to_look_again() {
    let spec = spec(vec![AbortCondition::node_not_ready(secs(30))]);
    assert_eq!(
        spec.conditions[0].name,
        "a node that is not a target goes NotReady for 30s"
    );
    let timeline = [
        node_change(0, "bystander", node(ConditionStatus::True)),
        node_change(10_000, "bystander", node(ConditionStatus::Unknown)),
    ];
    let i = index(&timeline);
    let before = check(&spec, &targets(&[]), &i, 39_999);
    assert_eq!(before.tripped, None);
    assert_eq!(before.wake_at_ms, Some(40_000));
    let at = check(&spec, &targets(&[]), &i, 40_000);
    assert_eq!(at.tripped.map(|t| t.at_ms), Some(40_000));
    // Back in time: it does not trip.
    let mut timeline = timeline.to_vec();
    timeline.push(node_change(
        30_000,
        "bystander",
        node(ConditionStatus::True),
    ));
    let back = check(&spec, &targets(&[]), &index(&timeline), 50_000);
    assert_eq!(back, AbortCheck::default());
}

fn web() -> WorkloadRef {
    WorkloadRef {
        kind: WorkloadKind::Deployment,
        namespace: "lab".into(),
        name: "web".into(),
    }
}

fn workload(at: i64, desired: i32, ready: i32) -> Entry {
    entry(
        at,
        Event::Workload {
            workload: web(),
            before: None,
            after: Some(WorkloadState {
                desired,
                ready,
                available: ready,
            }),
        },
    )
}

#[test]
fn more_pods_not_ready_than_allowed_trips_counting_from_the_start() {
    let pods = |more_than| {
        spec(vec![condition(
            "web short",
            AbortKind::PodsNotReady {
                workload: web(),
                more_than,
            },
            secs(5),
        )])
    };
    let timeline = [workload(0, 3, 3), workload(20_000, 3, 1)];
    let i = index(&timeline);
    assert_eq!(
        check(&pods(2), &targets(&[]), &i, 60_000),
        AbortCheck::default()
    );
    let got = check(&pods(1), &targets(&[]), &i, 25_000);
    assert_eq!(
        got.tripped,
        Some(Tripped {
            condition: "web short".into(),
            at_ms: 25_000,
            value: "lab/deployment/web: 2 of 3 pod(s) not Ready since +19.0s".into(),
        })
    );
    // Short before the start: counted from the start.
    let early = index(&[workload(0, 3, 1)]);
    let got = check(&pods(1), &targets(&[]), &early, START + 5_000);
    assert_eq!(got.tripped.map(|t| t.at_ms), Some(START + 5_000));
}

#[test]
fn a_probe_down_and_the_api_unreachable_trip_after_their_hold() {
    let spec = spec(vec![
        condition(
            "web down",
            AbortKind::ProbeDown {
                probe: "web".into(),
            },
            secs(30),
        ),
        AbortCondition::api_unreachable(secs(60)),
    ]);
    let probe = |at, up| {
        entry(
            at,
            Event::Probe {
                name: "web".into(),
                up,
                detail: String::new(),
                failed: None,
            },
        )
    };
    let api = |at, up| {
        entry(
            at,
            Event::Api {
                up,
                detail: String::new(),
            },
        )
    };
    let timeline = [
        probe(0, true),
        api(0, true),
        probe(10_000, false),
        api(12_000, false),
    ];
    let i = index(&timeline);
    let got = check(&spec, &targets(&[]), &i, 39_000);
    assert_eq!(got.tripped, None);
    assert_eq!(got.wake_at_ms, Some(40_000));
    let got = check(&spec, &targets(&[]), &i, 80_000);
    assert_eq!(
        got.tripped,
        Some(Tripped {
            condition: "web down".into(),
            at_ms: 40_000,
            value: "probe web Down since +9.0s".into(),
        }),
        "the earlier of two trips"
    );
    let only_api = AbortSpec {
        conditions: vec![spec.conditions[1].clone()],
    };
    let got = check(&only_api, &targets(&[]), &i, 80_000);
    let tripped = got.tripped.expect("API unreachable for 60s");
    assert_eq!(tripped.condition, "the API server is unreachable for 60s");
    assert_eq!(tripped.at_ms, 72_000);
}

#[test]
fn a_query_trips_on_its_bad_side_and_on_no_data_not_before_its_first_answer() {
    let name = "errors (above 0.5)";
    let spec = spec(vec![condition(
        name,
        AbortKind::Query {
            query: "rate(x[1m])".into(),
            threshold: Threshold::Above(0.5),
            every: Duration::from_secs(5),
        },
        secs(0),
    )]);
    let answer = |at, value: Option<f64>, detail: &str| {
        entry(
            at,
            Event::Query {
                name: name.into(),
                value,
                detail: detail.into(),
            },
        )
    };
    assert_eq!(
        check(&spec, &targets(&[]), &index(&[]), 60_000),
        AbortCheck::default(),
        "not asked yet"
    );
    let fine = [answer(2_000, Some(0.1), "{} 0.1")];
    assert_eq!(
        check(&spec, &targets(&[]), &index(&fine), 60_000),
        AbortCheck::default()
    );
    let mut over = fine.to_vec();
    over.push(answer(7_000, Some(0.7), "{job=\"x\"} 0.7"));
    let got = check(&spec, &targets(&[]), &index(&over), 7_100);
    assert_eq!(
        got.tripped.map(|t| (t.at_ms, t.value)),
        Some((
            7_000,
            "0.7 (above 0.5) since +6.0s: {job=\"x\"} 0.7".to_string()
        ))
    );
    let mut empty = fine.to_vec();
    empty.push(answer(7_000, None, "the query returned no series"));
    let got = check(&spec, &targets(&[]), &index(&empty), 7_100);
    assert_eq!(
        got.tripped.map(|t| t.value),
        Some("no data since +6.0s (counted as tripped): the query returned no series".to_string())
    );
}

/// A real run on the lab (kubelet stopped past the toleration on lab-worker-2): with its
/// own targets, nothing trips during the whole observation; were lab-worker-2 not a target,
/// the default node condition trips the moment the controller marks it Unknown.
#[test]
fn over_a_recorded_run_only_a_node_that_is_not_a_target_trips() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/records/kubelet-stop-past-toleration.json");
    let record = RunRecord::load(&path).expect("recorded run");
    let start = record.start_ms.expect("started");
    let end = record.observed_until_ms.expect("observed");
    let observed = record.timeline.until(end);
    let index = TimelineIndex::of(&observed);
    let spec = AbortSpec::defaults();
    let timers = record.cluster.timers;
    let as_run = check_aborts(&spec, &record.targets, &timers, &index, start, end);
    assert_eq!(as_run, AbortCheck::default());
    let unknown_at = observed
        .entries
        .iter()
        .find_map(|e| match &e.event {
            Event::Node {
                name,
                after: Some(a),
                ..
            } if name == "lab-worker-2" && a.ready == ConditionStatus::Unknown => Some(e.offset_ms),
            _ => None,
        })
        .expect("the victim went Unknown");
    let mut elsewhere = TimelineIndex::new();
    let mut first_trip = None;
    for e in &observed.entries {
        elsewhere.insert(e);
        let got = check_aborts(
            &spec,
            &BTreeMap::new(),
            &timers,
            &elsewhere,
            start,
            e.offset_ms,
        );
        if let Some(t) = got.tripped {
            first_trip = Some(t);
            break;
        }
    }
    let t = first_trip.expect("a node that is not a target went Unknown");
    assert_eq!(t.at_ms, unknown_at);
    assert_eq!(
        t.value,
        format!(
            "node lab-worker-2 left Ready at {}: Ready Unknown",
            format_offset_ms(unknown_at - start)
        )
    );
}
