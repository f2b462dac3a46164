//! JUnit output, parsed back with a strict XML parser.

use crate::judge_support::*;
use faultline::judge::Outcome;
use faultline::record::RunOutcome;
use faultline::report::junit;
use faultline::timeline::{Entry, Event};

/// The test cases of the experiment's suite (the only one).
fn cases<'a>(doc: &'a roxmltree::Document) -> Vec<roxmltree::Node<'a, 'a>> {
    suite_cases(doc, 0)
}

fn suite_cases<'a>(doc: &'a roxmltree::Document, index: usize) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .nth(index)
        .map(|suite| {
            suite
                .children()
                .filter(|n| n.has_tag_name("testcase"))
                .collect()
        })
        .unwrap_or_default()
}

fn child<'a>(n: roxmltree::Node<'a, 'a>, tag: &str) -> Option<roxmltree::Node<'a, 'a>> {
    n.children().find(|c| c.has_tag_name(tag))
}

#[test]
fn one_case_per_verdict_with_counts() {
    let rec = record();
    let xml = junit::render(&rec);
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("suite");
    assert_eq!(
        suite.attribute("name"),
        Some("kubelet-stop-past-toleration")
    );
    assert_eq!(suite.attribute("tests"), Some("4"));
    assert_eq!(suite.attribute("failures"), Some("1"));
    assert_eq!(
        suite.attribute("errors"),
        Some("1"),
        "the never-run `reboot` since step"
    );
    assert!(
        suite
            .attribute("timestamp")
            .is_some_and(|t| t.starts_with("2026-11-22T09:59:00"))
    );
    let cases = cases(&doc);
    let names: Vec<&str> = cases.iter().filter_map(|c| c.attribute("name")).collect();
    assert_eq!(
        names,
        vec![
            "node unknown within 30s",
            "web evicted between 30s and 40s",
            "agent restarts",
            "node ready after reboot",
        ],
        "a step never issued is said in the suite's output, not counted as a case"
    );
    assert!(
        cases
            .iter()
            .all(|c| c.attribute("classname") == Some("kubelet-stop-past-toleration"))
    );
    assert_eq!(
        cases[0].attribute("time"),
        Some("0"),
        "a case is a judgement: the measured time is in its output"
    );
    let measured = child(cases[0], "system-out")
        .and_then(|n| n.text())
        .unwrap_or_default();
    assert!(measured.contains("measured: 21.3s after"), "{measured}");
    assert!(child(cases[0], "failure").is_none() && child(cases[0], "error").is_none());
    let failure = child(cases[1], "failure").expect("failure");
    assert_eq!(failure.attribute("type"), Some("expectation"));
    // The verdict's message, then what the node failure model predicted for the pods it
    // is about: the belief (30–40 s) was wrong, the cluster did what the model says.
    let message = failure.attribute("message").unwrap_or_default();
    assert!(
        message.starts_with(rec.verdicts[1].message.as_str()),
        "{message}"
    );
    assert!(
        message.contains(
            "the node failure model: faultline-lab/web-5d9c-aaaaa Terminating (evicted): \
             predicted +45.0s … +61.3s (its toleration, 30s after the taint); observed +52.0s: \
             inside"
        ),
        "{message}"
    );
    let skipped = child(cases[2], "skipped").expect("skipped");
    assert!(
        skipped
            .attribute("message")
            .is_some_and(|m| m.contains("kwok runs no containers"))
    );
    let error = child(cases[3], "error").expect("error");
    assert_eq!(error.attribute("message"), Some("step `reboot` never ran"));
    let out = child(suite, "system-out")
        .and_then(|n| n.text())
        .expect("timeline in system-out");
    assert!(
        out.contains("+21.3s node lab-worker-2 Ready True→Unknown"),
        "{out}"
    );
    let case_out = child(cases[1], "system-out")
        .and_then(|n| n.text())
        .expect("case out");
    assert!(
        case_out.contains("first eviction"),
        "figures in case output: {case_out}"
    );
}

#[test]
fn step_errors_and_interruptions_become_error_cases() {
    let mut rec = record();
    rec.errors = vec!["step `stop kubelet`: ssh: connection refused".into()];
    rec.verdicts[0].outcome = Outcome::Pending;
    rec.outcome = RunOutcome::Interrupted;
    let xml = junit::render(&rec);
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let cases = cases(&doc);
    assert_eq!(cases.len(), 5);
    let err = child(cases[0], "error").expect("pending → error");
    assert_eq!(err.attribute("type"), Some("interrupted"));
    let step = cases[4];
    assert_eq!(step.attribute("name"), Some("step `stop kubelet`"));
    assert!(child(step, "error").is_some());
}

#[test]
fn steps_never_issued_are_said_in_the_suite_output_not_counted() {
    let mut rec = record();
    rec.stopped_early = Some("step `wait` waited 30s for node n is Gone".into());
    let xml = junit::render(&rec);
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let cases = cases(&doc);
    assert!(
        cases.iter().all(|c| !c
            .attribute("name")
            .unwrap_or_default()
            .starts_with("step `")),
        "no step has a case of its own: the terminal does not count steps"
    );
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("suite");
    let out = child(suite, "system-out")
        .and_then(|n| n.text())
        .unwrap_or_default();
    assert!(
        out.contains("step `reboot` not run: step `wait` waited 30s for node n is Gone"),
        "{out}"
    );
}

#[test]
fn hostile_text_stays_well_formed() {
    let mut rec = record();
    let hostile = "\u{1b}[31mred\u{1b}[0m nul:\0 bell:\u{7} end:]]> tag:<script>alert(1)</script> repl:\u{fffd}\u{fffe} amp:&";
    rec.experiment.name = format!("exp {hostile}");
    rec.verdicts[1].message = hostile.to_string();
    rec.verdicts[0].name = hostile.to_string();
    rec.errors = vec![format!("setup failed: {hostile}")];
    let wall = rec.timeline.entries[0].wall;
    rec.timeline.entries.push(Entry {
        offset_ms: 130000,
        wall,
        event: Event::Note {
            message: hostile.to_string(),
        },
    });
    let xml = junit::render(&rec);
    assert!(!xml.contains('\u{1b}') && !xml.contains('\0') && !xml.contains('\u{7}'));
    let doc = roxmltree::Document::parse(&xml).expect("hostile text must not break the XML");
    assert!(doc.descendants().all(|n| !n.has_tag_name("script")));
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .expect("failure");
    let msg = failure.attribute("message").expect("message");
    assert!(msg.starts_with("red nul: bell: end:]]"), "{msg}");
    assert!(
        msg.contains("<script>alert(1)</script>"),
        "kept as text: {msg}"
    );
    let out = doc
        .descendants()
        .filter(|n| n.has_tag_name("system-out"))
        .filter_map(|n| n.text())
        .collect::<String>();
    assert!(
        out.contains("note: red nul: bell: end:]] > tag:<script>"),
        "{out}"
    );
    let setup = cases(&doc)
        .into_iter()
        .find(|c| c.attribute("name") == Some("setup"));
    assert!(setup.is_some(), "a setup error case");
}

#[test]
fn write_creates_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.junit.xml");
    junit::write(&record(), &path).expect("write");
    let text = std::fs::read_to_string(&path).expect("read");
    roxmltree::Document::parse(&text).expect("well-formed");
}

/// The suite's properties as (name, value).
fn properties(xml: &str) -> Vec<(String, String)> {
    let doc = roxmltree::Document::parse(xml).expect("well-formed");
    doc.descendants()
        .filter(|n| n.has_tag_name("property"))
        .map(|p| {
            (
                p.attribute("name").unwrap_or_default().to_string(),
                p.attribute("value").unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn recovery_figures_are_suite_properties_not_test_times() {
    let mut rec = record();
    rec.figures.node_not_ready_ms = Some(21_300);
    rec.figures.first_eviction_ms = None;
    let xml = faultline::report::junit::render(&rec);
    let doc = roxmltree::Document::parse(&xml).expect("well-formed");
    let suites = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .count();
    assert_eq!(
        suites, 1,
        "no suite of figures whose case times CI would add up"
    );
    let props = properties(&xml);
    let observed = rec
        .figures
        .rows()
        .iter()
        .filter(|(_, v)| v.is_some())
        .count();
    assert!(observed < 7, "the fixture leaves some stages unobserved");
    let figures: Vec<&(String, String)> = props
        .iter()
        .filter(|(n, _)| n.starts_with("recovery.") && n != "recovery.from")
        .collect();
    assert_eq!(figures.len(), observed, "one property per stage observed");
    assert!(
        props.contains(&("recovery.node-notready".into(), "21.300".into())),
        "{props:?}"
    );
    assert!(
        !props.iter().any(|(n, _)| n == "recovery.first-eviction"),
        "a stage not observed is left out"
    );
}

#[test]
fn the_score_is_a_property_of_the_experiment_suite() {
    let xml = junit::render(&record());
    let doc = roxmltree::Document::parse(&xml).expect("well-formed");
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("suite");
    let properties = suite
        .first_element_child()
        .filter(|n| n.has_tag_name("properties"))
        .expect("<properties> first in the suite");
    let value = |name: &str| {
        properties
            .children()
            .find(|p| p.attribute("name") == Some(name))
            .and_then(|p| p.attribute("value"))
            .map(str::to_string)
    };
    assert_eq!(value("score").as_deref(), Some("33.3"));
    assert_eq!(
        value("score.explained").as_deref(),
        Some("1 of 3 counted expectations held; 1 skipped, not counted")
    );
    assert_eq!(
        cases(&doc).len(),
        4,
        "the properties add no test case: {xml}"
    );
}

/// Every `<testcase>` of every suite as (suite, case, kind, message).
fn all_cases(xml: &str) -> Vec<(String, String, String, String)> {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
    let mut out = Vec::new();
    for suite in doc.descendants().filter(|n| n.has_tag_name("testsuite")) {
        for case in suite.children().filter(|n| n.has_tag_name("testcase")) {
            let result = case.children().find(|c| {
                c.has_tag_name("failure") || c.has_tag_name("error") || c.has_tag_name("skipped")
            });
            let (kind, message) = match result {
                Some(r) => (
                    r.tag_name().name().to_string(),
                    r.attribute("message").unwrap_or_default().to_string(),
                ),
                None => ("passed".to_string(), String::new()),
            };
            out.push((
                suite.attribute("name").unwrap_or_default().to_string(),
                case.attribute("name").unwrap_or_default().to_string(),
                kind,
                message,
            ));
        }
    }
    out
}

#[test]
fn a_comparison_has_a_case_per_figure_failed_when_it_regressed() {
    use crate::records_support::*;
    use faultline::compare::{Tolerance, compare};
    use faultline::series::Series;
    let base = fixture("kubelet-stop-within-toleration");
    let now = upgraded(base.clone(), "v1.34.1", 10_000);
    let c = compare(
        &[Series::single(base)],
        &[Series::single(now)],
        &Tolerance::default(),
        ("v1.33", "v1.34"),
    );
    let xml = faultline::report::compare::junit::render(&c);
    let cases = all_cases(&xml);
    let suite = "compare kubelet-stop-within-toleration";
    assert!(cases.iter().all(|(s, ..)| s == suite), "{cases:?}");
    // 8 expectations, 7 recovery figures, 4 transitions, the score.
    assert_eq!(cases.len(), 8 + 7 + 4 + 1, "{cases:#?}");
    let failed: Vec<&str> = cases
        .iter()
        .filter(|(_, _, k, _)| k == "failure")
        .map(|(_, n, _, _)| n.as_str())
        .collect();
    assert_eq!(
        failed,
        [
            "figure: node NotReady",
            "figure: unreachable taint",
            "transition: node goes Unknown within the grace period",
        ]
    );
    let (_, _, _, message) = cases
        .iter()
        .find(|(_, n, ..)| n == "figure: node NotReady")
        .unwrap();
    assert!(
        message.starts_with("SLOWER: baseline 19.8s, now 29.8s (+10.0s +50.6%)"),
        "{message}"
    );
    let skipped: Vec<&str> = cases
        .iter()
        .filter(|(_, _, k, _)| k == "skipped")
        .map(|(_, n, _, _)| n.as_str())
        .collect();
    assert_eq!(
        skipped,
        [
            "verdict: no container restarts",
            "figure: first eviction",
            "figure: replacement scheduled",
            "figure: replacement Ready",
        ]
    );
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let props: Vec<(&str, &str)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("property"))
        .map(|p| (p.attribute("name").unwrap(), p.attribute("value").unwrap()))
        .collect();
    assert!(props.contains(&("baseline", "v1.33")), "{props:?}");
    assert!(props.contains(&("score.now", "100")), "{props:?}");
    assert!(
        props
            .iter()
            .any(|(n, v)| *n == "now.cluster" && v.contains("Kubernetes v1.34.1")),
        "{props:?}"
    );
}

#[test]
fn a_comparison_of_nothing_is_an_error_case_and_one_side_only_is_skipped() {
    use crate::records_support::*;
    use faultline::compare::{Tolerance, compare};
    use faultline::series::Series;
    let c = compare(
        &[Series::single(fixture("node-deleted"))],
        &[Series::single(fixture("kubelet-stop-within-toleration"))],
        &Tolerance::default(),
        ("a", "b"),
    );
    let cases = all_cases(&faultline::report::compare::junit::render(&c));
    let kinds: Vec<(&str, &str)> = cases
        .iter()
        .map(|(s, _, k, _)| (s.as_str(), k.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("compare kubelet-stop-within-toleration", "skipped"),
            ("compare node-deleted", "skipped"),
            ("compare", "error"),
        ]
    );
    assert!(cases[2].3.starts_with("NOTHING COMPARED"), "{cases:?}");
}

#[test]
fn a_series_has_one_case_per_expectation_and_a_flaky_one_fails_saying_so() {
    use crate::records_support::*;
    use faultline::judge::Outcome;
    let r = fixture("kubelet-stop-within-toleration");
    let s = series(vec![
        r.clone(),
        with_outcome(r.clone(), "nothing on the node is evicted", Outcome::Failed),
        with_node_not_ready(r.clone(), 18_100),
    ]);
    let xml = faultline::report::series::junit::render(&s);
    let cases = all_cases(&xml);
    let experiment: Vec<_> = cases
        .iter()
        .filter(|(suite, ..)| suite == "kubelet-stop-within-toleration")
        .collect();
    assert_eq!(experiment.len(), 8, "one case per expectation, not per run");
    let (_, _, kind, message) = experiment
        .iter()
        .find(|(_, n, ..)| n == "nothing on the node is evicted")
        .unwrap();
    assert_eq!(kind, "failure");
    assert!(
        message.starts_with("flaky: held in 2 of 3 runs; run 2: FAIL made Failed by the test"),
        "{message}"
    );
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let flaky = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(flaky.attribute("type"), Some("flaky"));
    assert!(
        cases
            .iter()
            .all(|(suite, ..)| !suite.ends_with("recovery figures")),
        "the figures are properties, not a suite of timed cases"
    );
    let props = properties(&xml);
    assert!(
        props.contains(&("recovery.node-notready.median".into(), "19.755".into())),
        "{props:?}"
    );
    let score = doc
        .descendants()
        .find(|n| n.has_tag_name("property") && n.attribute("name") == Some("score.runs"))
        .unwrap();
    assert_eq!(score.attribute("value"), Some("100, 85.7, 100"));
}

#[test]
fn an_abort_and_the_restored_check_are_cases_with_the_condition_instant_and_value() {
    let mut rec = record();
    rec.aborted = Some(faultline::judge::Tripped {
        condition: "a node that is not a target goes NotReady".into(),
        at_ms: 34_200,
        value: "node lab-worker-3 left Ready at +34.2s: Ready Unknown".into(),
    });
    rec.outcome = RunOutcome::Error {
        message: "aborted".into(),
    };
    rec.restored = Some(faultline::record::RestoredCheck {
        ok: false,
        differences: vec![
            "node lab-worker-1 is cordoned (it was schedulable)".into(),
            "node lab-worker-3 has taint faultline.dev/test:NoSchedule (it did not)".into(),
        ],
        waited_ms: 40_000,
        compared: "3 node(s) Ready and schedulable as before".into(),
    });
    let xml = junit::render(&rec);
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let found = cases(&doc);
    let abort = found
        .iter()
        .find(|c| c.attribute("name") == Some("abort: a node that is not a target goes NotReady"))
        .expect("an abort case");
    let error = child(*abort, "error").expect("an error");
    assert_eq!(
        error.attribute("message"),
        Some(
            "tripped at +34.2s: node lab-worker-3 left Ready at +34.2s: Ready Unknown; the run \
             stopped and every fault was undone at once"
        )
    );
    assert!(
        !found.iter().any(|c| c.attribute("name") == Some("run")),
        "the abort case says why the run ended"
    );
    let restored = found
        .iter()
        .find(|c| c.attribute("name") == Some("cluster restored"))
        .expect("a cluster restored case");
    let failure = child(*restored, "failure").expect("a failure");
    let message = failure.attribute("message").unwrap();
    assert!(message.contains("lab-worker-1 is cordoned"), "{message}");
    assert!(
        message.contains("faultline.dev/test:NoSchedule"),
        "{message}"
    );
    assert!(
        message.ends_with("waited 40.0s for the cluster to settle"),
        "{message}"
    );

    rec.restored = Some(faultline::record::RestoredCheck {
        ok: true,
        differences: Vec::new(),
        waited_ms: 1_500,
        compared: "3 node(s)".into(),
    });
    let xml = junit::render(&rec);
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let restored = cases(&doc)
        .into_iter()
        .find(|c| c.attribute("name") == Some("cluster restored"))
        .expect("a cluster restored case");
    assert!(child(restored, "failure").is_none() && child(restored, "error").is_none());
    assert_eq!(
        restored.attribute("time"),
        Some("0"),
        "a judgement, not a duration"
    );
}

/// The `time` of the first suite and the sum of its cases' times, in seconds.
fn suite_and_case_times(xml: &str) -> (f64, f64) {
    let doc = roxmltree::Document::parse(xml).expect(xml);
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("a suite");
    let secs = |n: roxmltree::Node| -> f64 {
        n.attribute("time")
            .expect("a time")
            .parse()
            .expect("seconds")
    };
    let cases: f64 = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .map(secs)
        .sum();
    (secs(suite), cases)
}

#[test]
fn the_suite_time_is_the_run_s_wall_time_and_cases_take_none() {
    use crate::records_support::*;
    let r = fixture("kubelet-stop-past-toleration");
    // 15:10:41.582 to 15:13:05.151 in the record.
    let (suite, cases) = suite_and_case_times(&junit::render(&r));
    assert_eq!(suite, 143.568);
    assert_eq!(
        cases, 0.0,
        "a dashboard summing test times sums the runs' wall times, not the figures"
    );
}

#[test]
fn a_series_suite_lasts_from_the_first_run_s_start_to_the_last_run_s_end() {
    use crate::records_support::*;
    let first = fixture("kubelet-stop-within-toleration");
    let mut second = first.clone();
    let later = chrono::Duration::seconds(100);
    second.started_at += later;
    second.finished_at += later;
    let xml = faultline::report::series::junit::render(&series(vec![first.clone(), second]));
    let (suite, _) = suite_and_case_times(&xml);
    let expected =
        (first.finished_at - first.started_at + later).num_milliseconds() as f64 / 1000.0;
    assert_eq!(suite, expected);
}
