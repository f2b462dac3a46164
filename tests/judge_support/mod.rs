//! Builders shared by the judge and report tests: the lab experiment skeleton, fast lab
//! timers, and the recorded fixture timelines.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use faultline::experiment::model::*;
use faultline::timeline::Timeline;

pub const NS: &str = "faultline-lab";

pub fn timeline(name: &str) -> Timeline {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/timelines")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// The timeline cut at `until_ms` (inclusive): what a live run has seen so far.
pub fn prefix(t: &Timeline, until_ms: i64) -> Timeline {
    Timeline {
        zero: t.zero,
        entries: t
            .entries
            .iter()
            .filter(|e| e.offset_ms <= until_ms)
            .cloned()
            .collect(),
    }
}

/// The lab's fast timers: grace 20s, monitor 5s, unreachable toleration 30s.
pub fn timers() -> ClusterTimers {
    ClusterTimers {
        node_monitor_period: Duration::from_secs(5),
        node_monitor_grace_period: Duration::from_secs(20),
        default_unreachable_toleration: Duration::from_secs(30),
        default_not_ready_toleration: Duration::from_secs(30),
    }
}

pub fn targets() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([
        ("down".to_string(), vec!["lab-worker-2".to_string()]),
        ("healthy".to_string(), vec!["lab-worker-1".to_string()]),
    ])
}

pub fn secs(s: f64) -> Bound {
    Bound::fixed(Duration::from_secs_f64(s))
}

pub fn sum(terms: &[BoundSymbol]) -> Bound {
    Bound {
        terms: terms
            .iter()
            .map(|s| BoundTerm {
                factor: 1.0,
                symbol: s.clone(),
            })
            .collect(),
    }
}

pub fn workload(kind: WorkloadKind, name: &str) -> WorkloadRef {
    WorkloadRef {
        kind,
        namespace: NS.to_string(),
        name: name.to_string(),
    }
}

pub fn web() -> WorkloadRef {
    workload(WorkloadKind::Deployment, "web")
}
pub fn db() -> WorkloadRef {
    workload(WorkloadKind::StatefulSet, "db")
}
pub fn agent() -> WorkloadRef {
    workload(WorkloadKind::DaemonSet, "agent")
}

pub fn pods(
    w: WorkloadRef,
    on: Option<&str>,
    not_on: Option<&str>,
    generation: PodGeneration,
    quantifier: Quantifier,
) -> Subject {
    Subject::Pods(PodSubject {
        workload: w,
        on: on.map(str::to_string),
        not_on: not_on.map(str::to_string),
        generation,
        quantifier,
    })
}

/// Existing pods of `w` on the target `down`, all of them.
pub fn existing_on_down(w: WorkloadRef) -> Subject {
    pods(
        w,
        Some("down"),
        None,
        PodGeneration::Existing,
        Quantifier::All,
    )
}

/// Replacement pods of `w` off the target `down`, all of them.
pub fn replacements_off_down(w: WorkloadRef) -> Subject {
    pods(
        w,
        None,
        Some("down"),
        PodGeneration::Replacements,
        Quantifier::All,
    )
}

pub fn node_down() -> Subject {
    Subject::Node {
        target: "down".to_string(),
    }
}

pub fn pod_state(s: PodStateMatch) -> StateMatch {
    StateMatch::Pod(s)
}

pub fn node_state(s: NodeStateMatch) -> StateMatch {
    StateMatch::Node(s)
}

pub fn expect(name: &str, subject: Subject, check: Check, since: &str) -> Expectation {
    Expectation {
        name: name.to_string(),
        subject,
        check,
        since: since.to_string(),
        requires: Vec::new(),
        weight: DEFAULT_WEIGHT,
    }
}

pub fn becomes(state: StateMatch, window: Window) -> Check {
    Check::Becomes { state, window }
}

fn step(name: &str, action: Action, target: &str) -> Step {
    Step {
        name: name.to_string(),
        at: StepTime::Offset(secs(0.0)),
        action,
        target: Some(target.to_string()),
        timeout: Duration::from_secs(30),
        roll: None,
    }
}

/// The kubelet-stop experiment with the given expectations.
pub fn experiment(expectations: Vec<Expectation>) -> Experiment {
    Experiment {
        conformance: false,
        name: "kubelet-stop-past-toleration".to_string(),
        description: "Pods on a node whose kubelet stops are evicted after their toleration".into(),
        tags: vec!["lab".into()],
        requires: Vec::new(),
        source: PathBuf::from("experiments/kubelet-stop.yaml"),
        namespace: NS.to_string(),
        targets: vec![TargetSpec {
            name: "down".into(),
            selector: NodeSelector {
                names: vec!["lab-worker-2".into()],
                ..NodeSelector::default()
            },
            count: Some(1),
        }],
        setup: Setup::default(),
        teardown: Teardown::default(),
        steps: vec![
            step("stop kubelet", Action::KubeletStop, "down"),
            step("start kubelet", Action::KubeletStart, "down"),
            step("reboot", Action::Reboot, "down"),
        ],
        expectations,
        observe: ObserveSpec {
            after_last_step: None,
            namespaces: vec![NS.into()],
            all_namespaces: false,
        },
        safety: SafetySpec::default(),
        probes: Vec::new(),
        abort: Default::default(),
    }
}

use chrono::{TimeZone, Utc};
use faultline::judge::{figures, judge};
use faultline::record::{ClusterInfo, RunOutcome, RunRecord};

/// Expectations covering every outcome the reporters render, over `kubelet-stop`.
pub fn report_expectations() -> Vec<Expectation> {
    let stop = "stop kubelet";
    let mut restarts = expect(
        "agent restarts",
        existing_on_down(agent()),
        Check::Restarts { changed: true },
        stop,
    );
    restarts.requires = vec!["containers".into()];
    vec![
        expect(
            "node unknown within 30s",
            node_down(),
            becomes(
                node_state(NodeStateMatch::Unknown),
                Window::Within(secs(30.0)),
            ),
            stop,
        ),
        expect(
            "web evicted between 30s and 40s",
            existing_on_down(web()),
            becomes(
                pod_state(PodStateMatch::Terminating),
                Window::Between(secs(30.0), secs(40.0)),
            ),
            stop,
        ),
        restarts,
        expect(
            "node ready after reboot",
            node_down(),
            becomes(node_state(NodeStateMatch::Ready), Window::Eventually),
            "reboot",
        ),
    ]
}

/// A finished run record over the `kubelet-stop` fixture, judged for real.
pub fn record() -> RunRecord {
    let timeline = timeline("kubelet-stop");
    let exp = experiment(report_expectations());
    let verdicts = judge(&exp, &targets(), &timers(), &[], &timeline, true);
    let figures = figures(&exp, &targets(), &timeline);
    let outcome = RunOutcome::from_verdicts(&verdicts, &[]);
    RunRecord {
        aborted: None,
        restored: None,
        faultline_version: "0.1.0".into(),
        run_id: "run-20261122-100000".into(),
        cluster: ClusterInfo {
            name: "lab".into(),
            context: Some("kind-lab".into()),
            server_version: Some("v1.33.1".into()),
            timers: timers(),
            timer_sources: vec![],
            capabilities: vec![],
            node_lease_seconds: None,
        },
        targets: targets(),
        started_at: Utc.with_ymd_and_hms(2026, 11, 22, 9, 59, 0).unwrap(),
        finished_at: Utc.with_ymd_and_hms(2026, 11, 22, 10, 2, 0).unwrap(),
        experiment: exp,
        timeline,
        start_ms: None,
        observed_until_ms: None,
        stopped_early: None,
        verdicts,
        figures,
        rolls: vec![],
        outcome,
        errors: vec![],
        costs: None,
    }
}
