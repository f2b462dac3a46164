//! The HTML page: lanes for every object, step lines, hatched gaps, escaped text.

use crate::judge_support::*;
use faultline::report::html;

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

/// The x of the dashed line of step `step` in one SVG picture.
fn step_x(svg: &str, step: &str) -> f64 {
    let label = format!(">{step} +0.0s</text>");
    let at = svg
        .find(&label)
        .unwrap_or_else(|| panic!("no {label} in the picture"));
    let group = svg[..at].rfind("<g class=\"step\">").expect("its group");
    let x1 = &svg[group..at];
    let start = x1.find("x1=\"").unwrap() + 4;
    let end = start + x1[start..].find('"').unwrap();
    x1[start..end].parse().unwrap()
}

#[test]
fn a_comparison_draws_both_timelines_on_one_axis_from_their_fault_step() {
    use crate::records_support::*;
    use faultline::compare::{Tolerance, compare};
    use faultline::series::Series;
    let base = fixture("kubelet-stop-within-toleration");
    // The same run, its setup 7 s slower: every offset later, the fault step too.
    let mut now = upgraded(base.clone(), "v1.34.1", 10_000);
    for e in &mut now.timeline.entries {
        e.offset_ms += 7_000;
    }
    now.start_ms = now.start_ms.map(|s| s + 7_000);
    now.observed_until_ms = now.observed_until_ms.map(|s| s + 7_000);
    now.experiment.name = base.experiment.name.clone();
    now.run_id = "<now>".into();
    let (b, n) = (vec![Series::single(base)], vec![Series::single(now)]);
    let c = compare(&b, &n, &Tolerance::default(), ("a&b", "now"));
    let page = faultline::report::compare::html::render(&c, &b, &n);
    let svgs: Vec<&str> = page.split("<svg ").skip(1).collect();
    assert_eq!(svgs.len(), 2, "the two timelines");
    let (xb, xn) = (
        step_x(svgs[0], "stop kubelet"),
        step_x(svgs[1], "stop kubelet"),
    );
    assert!(
        (xb - xn).abs() < 0.11,
        "time zero is each run's fault step: {xb} vs {xn}"
    );
    assert!(page.find("<h3>baseline: run 1") < page.find("<h3>now: run 1"));
    assert!(page.contains("&lt;now&gt;") && !page.contains("<now>"));
    assert!(page.contains("baseline <b>a&amp;b</b>"));
    assert!(
        page.contains("<tr class=\"Failed\""),
        "a regressed row is marked"
    );
    assert!(page.contains("SLOWER"));
    assert!(!page.contains("<script"));
}

#[test]
fn a_series_page_has_a_column_per_run_and_every_runs_timeline() {
    use crate::records_support::*;
    use faultline::judge::Outcome;
    let r = fixture("kubelet-stop-within-toleration");
    let s = series(vec![
        r.clone(),
        with_outcome(r.clone(), "nothing on the node is evicted", Outcome::Failed),
        r.clone(),
    ]);
    let page = faultline::report::series::html::render(&s);
    assert_eq!(page.matches("<th>run ").count(), 3);
    assert_eq!(page.matches("<details").count(), 3);
    assert_eq!(page.matches("<details open>").count(), 1);
    assert_eq!(page.matches("<svg ").count(), 3);
    assert!(page.contains("<td class=\"Failed\">FAIL"));
    assert!(page.contains("flaky: held in 2 of 3 runs"));
    assert!(page.contains("class=\"outcome Undecidable\">FLAKY: "));
}

/// The node failure model's windows are drawn on the lanes of the node and the pods it
/// predicts for, each outlined with its comparison in the tooltip; a deviation in red.
#[test]
fn the_model_s_predicted_windows_are_drawn_on_their_lanes() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/records/kubelet-stop-past-toleration.json");
    let rec = faultline::record::RunRecord::load(&path).expect("record");
    let page = html::render(&rec);
    let outlines = page.matches("<rect class=\"predicted\"").count();
    let explanation = faultline::explain::explain(&rec);
    let bounded = explanation
        .items
        .iter()
        .filter(|i| {
            matches!(
                i.prediction.window,
                faultline::failure_model::Window::Between {
                    latest: Some(_),
                    ..
                }
            )
        })
        .count();
    assert!(bounded >= 6, "{bounded}");
    assert_eq!(outlines, bounded, "one outline per bounded window");
    assert!(page.contains(
        "<title>lab-worker-2 Unknown: predicted +10.1s … +22.4s (grace period after the last \
         lease renewal, at the next monitor pass); observed +19.4s: inside</title>"
    ));
    assert!(!page.contains("data-fit=\"Missing\""), "every window held");
    assert!(
        page.contains("the node failure model predicts"),
        "the legend says so"
    );
}
