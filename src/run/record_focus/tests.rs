use std::path::{Path, PathBuf};

use super::*;
use crate::experiment::Experiment;
use crate::experiment::model::WorkloadRef;
use crate::record::RunRecord;

/// Every recorded run under `fixtures/records`, written by real runs.
fn records() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            // `upgrade/` holds `faultline compare`'s summaries of runs, not run records.
            if path.is_dir() && !path.ends_with("upgrade") {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/records"),
        &mut out,
    );
    out.sort();
    out
}

fn compacted(record: &RunRecord) -> (RunRecord, LeftOut) {
    let mut compact = record.clone();
    let focus = Focus::of(&record.experiment, record.targets.values());
    let left_out = leave_out_untouched(&mut compact.timeline, &focus);
    (compact, left_out)
}

#[test]
fn every_recorded_run_judges_and_explains_the_same_with_untouched_pods_counted() {
    let mut left_out_somewhere = 0;
    let paths = records();
    assert!(paths.len() > 10, "recorded runs under fixtures/records");
    for path in paths {
        let record = RunRecord::load(&path).expect("a recorded run loads");
        let (compact, left_out) = compacted(&record);
        left_out_somewhere += left_out.pods;
        let mut full = record.clone();
        full.judged_against(record.experiment.clone());
        let mut small = compact.clone();
        small.judged_against(record.experiment.clone());
        assert_eq!(small.verdicts, full.verdicts, "{}", path.display());
        assert_eq!(
            format!("{:?}", crate::explain::explain(&compact)),
            format!("{:?}", crate::explain::explain(&record)),
            "{}",
            path.display()
        );
        let dropped = record.timeline.entries.len() - compact.timeline.entries.len();
        let notes = usize::from(left_out.pods > 0);
        assert_eq!(
            dropped + notes,
            usize::try_from(left_out.pods).expect("fits"),
            "{}: one entry per pod left out, one note",
            path.display()
        );
    }
    assert!(
        left_out_somewhere > 0,
        "the recorded runs hold pods their experiments do not touch (kube-system's)"
    );
}

fn pod(namespace: &str, name: &str, node: &str, owner: Option<&str>) -> (PodId, PodState) {
    let id = PodId {
        namespace: namespace.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
    };
    let state = PodState {
        owner: owner.map(|d| WorkloadRef {
            kind: crate::experiment::model::WorkloadKind::Deployment,
            namespace: namespace.into(),
            name: d.into(),
        }),
        ..PodState::running_on(Some(node))
    };
    (id, state)
}

fn at(offset_ms: i64, event: Event) -> Entry {
    Entry {
        offset_ms,
        wall: chrono::DateTime::UNIX_EPOCH + chrono::Duration::milliseconds(offset_ms),
        event,
    }
}

fn seen((pod, state): &(PodId, PodState), offset_ms: i64) -> Entry {
    at(
        offset_ms,
        Event::Pod {
            pod: pod.clone().into(),
            before: None,
            after: Some(state.clone().into()),
        },
    )
}

fn ready(offset_ms: i64) -> Entry {
    at(
        offset_ms,
        Event::Run {
            phase: RunPhase::ObserverReady { sources: 3 },
        },
    )
}

fn experiment() -> Experiment {
    crate::experiment::parse(
        "name: e\ndescription: d\nnamespace: shop\ntargets: {v: {names: [w1]}}\nsteps:\n  - {name: drain it, at: 0s, do: drain, target: v}\n  - {name: kill, at: 5s, do: delete-pods, pods: {namespace: jobs, labels: {app: batch}}}\nexpect:\n  - {name: web, pods: {workload: deployment/web}, eventually: Ready}\n",
        Path::new("e.yaml"),
    )
    .unwrap_or_else(|d| panic!("{d}"))
}

#[test]
fn the_record_keeps_what_the_experiment_touches_and_what_changed_and_counts_the_rest() {
    let on_target = pod("other", "on-w1", "w1", None);
    let of_web = pod("shop", "web-1", "w2", Some("web"));
    let by_label = pod("jobs", "batch-1", "w3", None);
    let changes = pod("other", "moves", "w3", None);
    let quiet_a = pod("other", "quiet-a", "w2", Some("api"));
    let quiet_b = pod("kube-system", "quiet-b", "w3", None);
    let mut timeline = Timeline::new(chrono::DateTime::UNIX_EPOCH);
    for (i, p) in [&on_target, &of_web, &by_label, &changes, &quiet_a, &quiet_b]
        .into_iter()
        .enumerate()
    {
        timeline.entries.push(seen(p, -100 + i as i64));
    }
    timeline.entries.push(ready(-10));
    let mut moved = changes.1.clone();
    moved.ready = false;
    timeline.entries.push(at(
        2_000,
        Event::Pod {
            pod: changes.0.clone().into(),
            before: Some(changes.1.clone().into()),
            after: Some(moved.into()),
        },
    ));
    let focus = Focus::of(&experiment(), [&vec!["w1".to_string()]]);
    let left_out = leave_out_untouched(&mut timeline, &focus);
    assert_eq!(
        left_out,
        LeftOut {
            pods: 2,
            namespaces: 2,
            listed: 6
        }
    );
    let names: Vec<String> = timeline
        .entries
        .iter()
        .map(|e| match &e.event {
            Event::Pod { pod, .. } => pod.name.clone(),
            Event::Note { message } => format!("note: {message}"),
            Event::Run { .. } => "ready".into(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(&names[..4], ["on-w1", "web-1", "batch-1", "moves"]);
    assert!(
        names[4].starts_with("note: record: 2 of the 6 pods in the first lists are counted"),
        "{names:?}"
    );
    assert_eq!(&names[5..], ["ready", "moves"]);
}

#[test]
fn a_timeline_whose_observer_never_synced_is_kept_whole() {
    let quiet = pod("other", "quiet", "w2", None);
    let mut timeline = Timeline::new(chrono::DateTime::UNIX_EPOCH);
    timeline.entries.push(seen(&quiet, -5));
    let focus = Focus::of(&experiment(), [&vec!["w1".to_string()]]);
    assert_eq!(
        leave_out_untouched(&mut timeline, &focus),
        LeftOut::default()
    );
    assert_eq!(timeline.entries.len(), 1);
}
