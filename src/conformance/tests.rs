use std::path::Path;
use std::time::Duration;

use super::*;

fn record(file: &str) -> RunRecord {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/records")
        .join(file);
    let mut r = RunRecord::load(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    r.experiment.conformance = true;
    r
}

fn show(vs: &[Verdict]) -> String {
    vs.iter()
        .map(|v| format!("{} {}: {}\n", v.outcome.word(), v.name, v.message))
        .collect()
}

#[test]
fn an_experiment_without_conformance_gets_no_conformance_verdicts() {
    let mut r = record("kubelet-stop-past-toleration.json");
    r.experiment.conformance = false;
    assert!(verdicts(&r).is_empty());
}

#[test]
fn a_kubelet_stop_past_toleration_passes_every_behaviour_with_its_window_and_rule() {
    let r = record("kubelet-stop-past-toleration.json");
    let vs = verdicts(&r);
    let text = show(&vs);
    println!("{text}");
    assert!(vs.len() >= 6, "{text}");
    assert!(vs.iter().all(|v| v.outcome == Outcome::Passed), "{text}");
    // Named by workload or target, never by a pod's own (random) name: a case keeps its
    // name from run to run.
    for pod in r.timeline.entries.iter().filter_map(|e| match &e.event {
        crate::timeline::Event::Pod { pod, .. } => Some(pod.name.clone()),
        _ => None,
    }) {
        assert!(vs.iter().all(|v| !v.name.contains(&pod)), "{pod}: {text}");
    }
    let web = vs
        .iter()
        .find(|v| v.name.contains("evicted") && v.name.contains("Deployment "))
        .unwrap_or_else(|| panic!("the Deployment's eviction: {text}"));
    assert!(
        !web.members.is_empty() && web.members.iter().all(|m| m.member.contains("/web-")),
        "each pod a member, by its own name: {web:?}"
    );
    assert!(
        web.members
            .iter()
            .all(|m| m.outcome == Some(Outcome::Passed) && m.at_ms.is_some()),
        "{web:?}"
    );
    assert_eq!(
        web.measured_ms,
        web.members.iter().filter_map(|m| m.at_ms).max(),
        "measured when the last pod was"
    );
    assert!(vs.iter().all(|v| v.name.starts_with(PREFIX)), "{text}");
    let names: std::collections::BTreeSet<_> = vs.iter().map(|v| &v.name).collect();
    assert_eq!(names.len(), vs.len(), "names are unique: {text}");
    let evicted = vs
        .iter()
        .find(|v| v.name.contains("evicted at its own toleration"))
        .unwrap_or_else(|| panic!("an eviction case: {text}"));
    assert!(evicted.message.contains("window +"), "{}", evicted.message);
    assert!(
        evicted.message.contains("tainteviction"),
        "{}",
        evicted.message
    );
    assert!(evicted.measured_ms.is_some());
    // The StatefulSet's pod is not called a ReplicaSet's.
    assert!(
        vs.iter()
            .filter(|v| v.name.contains("StatefulSet "))
            .all(|v| !v.message.contains("ReplicaSet")),
        "{text}"
    );
}

#[test]
fn every_recorded_run_the_model_covers_passes_or_says_what_it_could_not_observe() {
    for file in [
        "kubelet-stop-within-toleration.json",
        "node-deleted.json",
        "kind/api-transport-partition.json",
        "kind/non-graceful-shutdown.json",
        "kind/power-off-past-toleration.json",
        "kind/short-toleration.json",
        "kind/ssh-partition.json",
        "kind/ssh-reboot.json",
        "kind/docker-reboot.json",
    ] {
        let vs = verdicts(&record(file));
        let text = show(&vs);
        assert!(!vs.is_empty(), "{file}");
        assert!(
            vs.iter()
                .all(|v| matches!(v.outcome, Outcome::Passed | Outcome::Skipped)),
            "{file}: {text}"
        );
        for v in vs.iter().filter(|v| v.outcome == Outcome::Skipped) {
            assert!(
                v.message.starts_with("faultline could not observe it"),
                "{file}: {}",
                v.message
            );
        }
    }
}

/// A cluster whose taint eviction does not follow the pods' own toleration (told that
/// the pods tolerate the taint for 10 s, where the record's were evicted after 30 s): the
/// eviction cases fail, naming the lateness, their window and rule; the node's own cases
/// and the DaemonSet's still pass.
/// The record's pods told a 10 s toleration where they had 30 s.
fn told_ten_seconds(r: &mut RunRecord) {
    for e in &mut r.timeline.entries {
        if let crate::timeline::Event::Pod {
            after: Some(state), ..
        } = &mut e.event
            && state.unreachable_toleration_secs == Some(30)
        {
            std::sync::Arc::make_mut(state).unreachable_toleration_secs = Some(10);
        }
    }
}

#[test]
fn evictions_later_than_the_toleration_fail_only_the_eviction_behaviours() {
    let mut r = record("kubelet-stop-past-toleration.json");
    told_ten_seconds(&mut r);
    let vs = verdicts(&r);
    let text = show(&vs);
    println!("{text}");
    let failed: Vec<_> = vs.iter().filter(|v| v.outcome == Outcome::Failed).collect();
    assert!(!failed.is_empty(), "{text}");
    assert!(
        failed
            .iter()
            .all(|v| v.name.contains("evicted") || v.name.contains("replaced")),
        "only evictions and what follows them fail: {text}"
    );
    assert!(failed.iter().any(|v| v.message.contains("LATE")), "{text}");
    assert!(
        failed.iter().all(|v| v.message.contains("window +")),
        "{text}"
    );
    for kept in ["goes Unknown", "unreachable NoExecute taint", "DaemonSet "] {
        assert!(
            vs.iter()
                .filter(|v| v.name.contains(kept))
                .all(|v| v.outcome == Outcome::Passed),
            "{kept}: {text}"
        );
    }
}

#[test]
fn the_report_tables_every_case_under_the_clusters_timers() {
    let records = vec![record("kubelet-stop-past-toleration.json")];
    let md = report::markdown(&records, Some(Duration::from_secs(150)));
    println!("{md}");
    let t = report::tally(&records);
    assert_eq!(t.failed, 0, "{md}");
    assert!(t.passed >= 9, "{md}");
    assert!(md.contains("| timer | value | from |"), "{md}");
    assert!(md.contains("nodeMonitorGracePeriod"), "{md}");
    let rows = md
        .lines()
        .filter(|l| l.starts_with("| the ") && l.contains("| PASS |"))
        .count();
    assert_eq!(rows, t.passed, "{md}");
    let length = (records[0].finished_at - records[0].started_at)
        .to_std()
        .unwrap();
    assert!(
        md.contains(&format!(
            "Time: 1 run(s): sum of their lengths {:.1}s, the longest {:.1}s; the suite's wall \
             time 150.0s",
            length.as_secs_f64(),
            length.as_secs_f64()
        )),
        "{md}"
    );
    let text = report::text(&records, None);
    assert!(
        text.ends_with("0 deviation(s), 0 not observable\n"),
        "{text}"
    );
}

/// Two clusters (or one before and after an upgrade) side by side: `compare` pairs the
/// conformance cases by name and says which behaviour changed verdict, and compares the
/// moments of those it saw on both sides.
#[test]
fn two_conformance_runs_compare_behaviour_by_behaviour() {
    use crate::compare::{Change, Tolerance, compare};
    use crate::series::Series;
    let judged = |mut r: RunRecord| {
        let vs = verdicts(&r);
        r.verdicts.extend(vs);
        Series::single(r)
    };
    let before = record("kubelet-stop-past-toleration.json");
    let mut after = before.clone();
    told_ten_seconds(&mut after);
    let cmp = compare(
        &[judged(before)],
        &[judged(after)],
        &Tolerance::default(),
        ("before", "after"),
    );
    let e = &cmp.experiments[0];
    let show: String = e
        .expectations
        .iter()
        .map(|x| format!("{:?} {}\n", x.change, x.name))
        .collect();
    let regressed: Vec<_> = e
        .expectations
        .iter()
        .filter(|x| x.change == Change::Regressed)
        .collect();
    assert!(!regressed.is_empty(), "{show}");
    assert!(
        regressed
            .iter()
            .all(|x| x.name.starts_with(PREFIX) && x.name.contains("evicted")
                || x.name.contains("replaced")),
        "{show}"
    );
    assert!(
        e.expectations
            .iter()
            .filter(|x| x.name.contains("goes Unknown"))
            .all(|x| x.change != Change::Regressed),
        "{show}"
    );
    assert!(
        e.transitions
            .iter()
            .any(|t| t.key.starts_with(PREFIX) && t.key.contains("evicted")),
        "the moments of the cases are compared: {:?}",
        e.transitions.iter().map(|t| &t.key).collect::<Vec<_>>()
    );
    assert_eq!(cmp.exit_code(), 1);
}

/// A reboot shorter than the grace period (kind, over SSH): the node stays Ready, no pod
/// is evicted or replaced, and every pod's containers restart in place once it is back,
/// each a passing case.
#[test]
fn a_short_reboot_keeps_the_node_ready_and_restarts_every_pod_in_place() {
    let vs = verdicts(&record("kind/ssh-reboot.json"));
    let text = show(&vs);
    println!("{text}");
    for behaviour in [
        "the node stays Ready: it answered again within the grace period: target `victim`",
        "the pod's containers restart in place once its machine is back: Deployment faultline-lab/web",
        "the pod's containers restart in place once its machine is back: DaemonSet faultline-lab/agent",
        "the pod is not evicted",
        "the pod is not replaced",
    ] {
        assert!(
            vs.iter()
                .any(|v| v.name.contains(behaviour) && v.outcome == Outcome::Passed),
            "{behaviour}: {text}"
        );
    }
    assert!(vs.iter().all(|v| v.outcome == Outcome::Passed), "{text}");
    assert!(!vs.iter().any(|v| v.name.contains("not Ready")), "{text}");
}
