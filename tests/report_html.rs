//! The HTML page: lanes for every object, step lines, hatched gaps, escaped text.

mod judge_support;

use faultline::report::html;
use judge_support::*;

#[test]
fn one_lane_per_node_pod_and_workload() {
    let page = html::render(&record());
    // 2 nodes, 9 pod identities (db-0 twice: two UIDs), 3 workloads.
    assert_eq!(page.matches("<g class=\"lane\">").count(), 14);
    assert!(page.contains(">node lab-worker-2</text>"));
    assert!(page.contains(">pod db-0 (u-db-0)</text>"));
    assert!(
        page.contains(">pod db-0 (u-db-0-n)</text>"),
        "same name, new UID: its own lane"
    );
    assert!(page.contains(">faultline-lab/deployment/web</text>"));
    assert_eq!(
        page.matches("<g class=\"step\">").count(),
        2,
        "stop and start kubelet"
    );
    assert!(page.contains("fill=\"#d64541\""), "an Unknown segment");
    assert!(page.contains("fill=\"#9a9a9a\""), "a Terminating segment");
    assert!(!page.contains("class=\"gap\""));
    assert!(!page.contains("<script"), "no scripts at all");
    assert!(page.contains("web evicted between 30s and 40s"));
    assert!(page.contains("first eviction"));
    assert!(
        page.contains("resilience score <b>33.3</b>"),
        "the score in the header"
    );
}

#[test]
fn gaps_are_hatched() {
    let mut rec = record();
    rec.timeline = timeline("kubelet-stop-gap");
    let page = html::render(&rec);
    assert_eq!(page.matches("class=\"gap\"").count(), 1);
    assert!(page.contains("fill=\"url(#hatch)\""));
    assert!(page.contains("no observation of pods: watch error: connection reset by peer"));
}

#[test]
fn endpoint_switches_and_the_end_of_observation_are_marked() {
    let mut rec = record();
    let wall = rec.timeline.entries[0].wall;
    let at = |offset_ms, event| faultline::timeline::Entry {
        offset_ms,
        wall,
        event,
    };
    rec.timeline.entries.push(at(
        100_000,
        faultline::timeline::Event::Endpoint {
            from: "https://10.0.0.1:6443".into(),
            to: "https://10.0.0.2:6443".into(),
            reason: "2 health checks in a row failed".into(),
        },
    ));
    rec.timeline.entries.push(at(
        110_000,
        faultline::timeline::Event::Run {
            phase: faultline::timeline::RunPhase::ObservationEnded {
                reason: "observation ended at its planned end".into(),
                early: false,
            },
        },
    ));
    let page = html::render(&rec);
    assert_eq!(page.matches("class=\"switch\"").count(), 1);
    assert!(
        page.contains("API endpoint https://10.0.0.1:6443 left (2 health checks in a row failed)")
    );
    assert_eq!(page.matches("class=\"observation-end\"").count(), 1);
}

#[test]
fn hostile_names_are_escaped() {
    let mut rec = record();
    rec.experiment.name = "<script>alert('x')</script>".into();
    rec.verdicts[0].message = "\"><img src=x onerror=alert(1)>".into();
    rec.targets
        .insert("evil".into(), vec!["<b>node</b>".into()]);
    let page = html::render(&rec);
    assert!(!page.contains("<script"));
    assert!(!page.contains("<img"));
    assert!(!page.contains("<b>node"));
    assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
}
