//! JUnit output, parsed back with a strict XML parser.

mod judge_support;

use faultline::judge::Outcome;
use faultline::record::RunOutcome;
use faultline::report::junit;
use faultline::timeline::{Entry, Event};
use judge_support::*;

/// The test cases of the experiment's suite (the first one; the second holds the figures).
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
    assert_eq!(suite.attribute("tests"), Some("5"));
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
            "step `reboot`"
        ]
    );
    let not_run = child(cases[4], "skipped").expect("a step never issued is a skipped case");
    assert_eq!(not_run.attribute("type"), Some("not run"));
    assert!(
        cases
            .iter()
            .all(|c| c.attribute("classname") == Some("kubelet-stop-past-toleration"))
    );
    assert_eq!(cases[0].attribute("time"), Some("21.3"));
    assert!(child(cases[0], "failure").is_none() && child(cases[0], "error").is_none());
    let failure = child(cases[1], "failure").expect("failure");
    assert_eq!(failure.attribute("type"), Some("expectation"));
    assert_eq!(
        failure.attribute("message"),
        Some(rec.verdicts[1].message.as_str())
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
    assert_eq!(cases.len(), 6);
    let err = child(cases[0], "error").expect("pending → error");
    assert_eq!(err.attribute("type"), Some("interrupted"));
    let step = cases[4];
    assert_eq!(step.attribute("name"), Some("step `stop kubelet`"));
    assert!(child(step, "error").is_some());
}

#[test]
fn steps_never_issued_are_skipped_cases_that_say_why() {
    let mut rec = record();
    rec.stopped_early = Some("step `wait` waited 30s for node n is Gone".into());
    let xml = junit::render(&rec);
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let cases = cases(&doc);
    let step = cases
        .iter()
        .find(|c| c.attribute("name") == Some("step `reboot`"))
        .expect("the never-issued step has a case");
    let skipped = child(*step, "skipped").expect("skipped");
    assert_eq!(
        skipped.attribute("message"),
        Some("not run: step `wait` waited 30s for node n is Gone")
    );
    assert!(
        cases
            .iter()
            .all(|c| c.attribute("name") != Some("step `stop kubelet`")),
        "steps that ran have no case of their own"
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

#[test]
fn recovery_figures_are_a_second_suite_with_their_times() {
    let mut rec = record();
    rec.figures.node_not_ready_ms = Some(21_300);
    rec.figures.first_eviction_ms = None;
    let xml = faultline::report::junit::render(&rec);
    let doc = roxmltree::Document::parse(&xml).expect("well-formed");
    let figures = suite_cases(&doc, 1);
    assert_eq!(figures.len(), 7, "one case per recovery stage");
    let not_ready = figures
        .iter()
        .find(|c| c.attribute("name") == Some("node NotReady"))
        .expect("node NotReady case");
    assert_eq!(not_ready.attribute("time"), Some("21.3"));
    let eviction = figures
        .iter()
        .find(|c| c.attribute("name") == Some("first eviction"))
        .expect("first eviction case");
    assert!(
        child(*eviction, "skipped").is_some(),
        "a stage not observed is skipped"
    );
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
    assert_eq!(restored.attribute("time"), Some("1.5"));
}
