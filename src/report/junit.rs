//! JUnit XML: one test suite per experiment, one test case per expectation, so CI systems
//! show each expectation as a test with its message.

use std::path::Path;

use junit_report::{Duration as JDuration, OffsetDateTime, Report, TestCase, TestSuite};

use super::files::ReportError;
use super::junit_xml::{wall_secs, with_properties, with_suite_time, xml};
use super::text;
use crate::judge::Outcome;
use crate::record::{RunOutcome, RunRecord};
use crate::sanitize::cdata;

/// Renders the record as JUnit XML: one suite, whose `time` is the run's wall time and
/// whose counts are the terminal's ([`text::Tally`]). A test case is a judgement, not a
/// duration: each takes no time, and what was measured (an expectation's transition, the
/// recovery figures) is in its output and the suite's properties, so a CI dashboard that
/// sums test times shows how long the runs took.
pub fn render(record: &RunRecord) -> String {
    render_explained(record, &crate::explain::explain(record))
}

/// [`render`] with the node failure model's comparison of `record` already made
/// (`explain`), by whoever renders the other reports of the run from it too.
pub(crate) fn render_explained(
    record: &RunRecord,
    explanation: &crate::explain::Explanation,
) -> String {
    let exp = &record.experiment;
    let suite_name = cdata(&exp.name);
    let figures = text::figures_text(record);
    let mut suite = TestSuite::new(&suite_name);
    let started = record.started_at;
    if let Ok(ts) = OffsetDateTime::from_unix_timestamp(started.timestamp()) {
        suite.set_timestamp(ts);
    }
    let mut add = |mut case: TestCase| {
        case.set_classname(&suite_name);
        suite.add_testcase(case);
    };
    for v in &record.verdicts {
        let name = cdata(&v.name);
        let mut full = text::verdict_message(record, v);
        if v.outcome == Outcome::Failed {
            for line in text::model_lines(record, explanation, v) {
                full.push('\n');
                full.push_str(&line);
            }
        }
        let mut case = judged_case(v.outcome, &name, &full);
        let mut out = format!("since `{}`: {full}\n", v.since);
        if let Some(ms) = v.measured_ms {
            out.push_str(&format!(
                "measured: {} after `{}`\n",
                text::measured_text(Some(ms)),
                v.since
            ));
        }
        for m in &v.members {
            let at = text::measured_text(m.at_ms);
            out.push_str(&format!("  {} {}: {}\n", m.member, at, m.note));
        }
        out.push_str(&figures);
        for line in text::timer_lines(record) {
            out.push_str(&format!("timer {line}\n"));
        }
        case.set_system_out(&cdata(&out));
        add(case);
    }
    if let Some(t) = &record.aborted {
        add(TestCase::error(
            &cdata(&format!("abort: {}", t.condition)),
            JDuration::ZERO,
            "aborted",
            &cdata(&format!(
                "tripped at {}: {}; the run stopped and every fault was undone at once",
                text::at_text(record, t.at_ms),
                t.value
            )),
        ));
    }
    if let Some(r) = &record.restored {
        let name = "cluster restored";
        let waited = format!(
            "waited {:.1}s for the cluster to settle",
            r.waited_ms as f64 / 1000.0
        );
        let mut case = if r.ok {
            TestCase::success(name, JDuration::ZERO)
        } else {
            TestCase::failure(
                name,
                JDuration::ZERO,
                "not restored",
                &cdata(&format!("{}; {waited}", r.differences.join("; "))),
            )
        };
        let mut out = format!(
            "compared with before the first fault: {}\n{waited}\n",
            r.compared
        );
        for d in &r.differences {
            out.push_str(&format!("  differs: {d}\n"));
        }
        for line in text::safety_lines(record) {
            out.push_str(&format!("{line}\n"));
        }
        case.set_system_out(&cdata(&out));
        add(case);
    }
    for (i, err) in record.errors.iter().enumerate() {
        let name = match err.split_once(':') {
            Some((head, _)) if head.starts_with("step") => cdata(head),
            _ if i == 0 => "setup".to_string(),
            _ => format!("setup #{}", i + 1),
        };
        add(TestCase::error(
            &name,
            JDuration::ZERO,
            "error",
            &cdata(err),
        ));
    }
    if let Some((kind, message)) = text::run_error(record) {
        add(TestCase::error(
            "run",
            JDuration::ZERO,
            kind,
            &cdata(&message),
        ));
    }
    suite.set_system_out(&cdata(&suite_out(record)));
    let mut report = Report::new();
    report.add_testsuite(suite);
    let score = record.score();
    let mut properties = vec![
        ("score".to_string(), score.value_text()),
        ("score.explained".to_string(), score.explain()),
    ];
    if let Some(zero) = record.zero_wall() {
        // What every `+` moment of the messages and the timeline counts from.
        properties.push(("time_zero".to_string(), zero.to_rfc3339()));
    }
    properties.extend(figure_properties(record));
    let mut all_properties = vec![(0, properties)];
    for (i, roll) in record.rolls.iter().enumerate() {
        let (suite, properties) = roll_suite(record, roll);
        report.add_testsuite(suite);
        all_properties.push((i + 1, properties));
    }
    let timed = with_suite_time(
        xml(&report, &exp.name),
        0,
        wall_secs(record.started_at, record.finished_at),
    );
    with_properties(timed, &all_properties)
}

/// A judged case: passed, failed (`expectation`), an error (undecidable, not evaluable,
/// interrupted before it was decided) or skipped, with `full` as its message.
fn judged_case(outcome: Outcome, name: &str, full: &str) -> TestCase {
    let message = cdata(full);
    let none = JDuration::ZERO;
    match outcome {
        Outcome::Passed => TestCase::success(name, none),
        Outcome::Failed => TestCase::failure(name, none, "expectation", &message),
        Outcome::Undecidable => TestCase::error(name, none, "undecidable", &message),
        Outcome::Error => TestCase::error(name, none, "error", &message),
        Outcome::Skipped => TestCase::skipped_with_cause(name, "skipped", &message),
        Outcome::Pending => TestCase::error(
            name,
            none,
            "interrupted",
            &cdata(&format!("interrupted before this was decided: {full}")),
        ),
    }
}

/// One case per expectation about `node` (a member on it: the node itself, or a pod on it
/// at the expectation's `since`), `<node>: <expectation>`: the worst of its members' own
/// outcomes there, with their notes. An expectation with no member on the node, or from a
/// record written before members kept their outcome, gives none.
fn node_expectation_cases(record: &RunRecord, node: &str) -> Vec<(Outcome, String, String)> {
    let rank = |o: Outcome| match o {
        Outcome::Failed => 5,
        Outcome::Error => 4,
        Outcome::Undecidable => 3,
        Outcome::Pending => 2,
        Outcome::Skipped => 1,
        Outcome::Passed => 0,
    };
    record
        .verdicts
        .iter()
        .filter_map(|v| {
            let on: Vec<_> = v
                .members
                .iter()
                .filter(|m| m.node.as_deref() == Some(node))
                .filter_map(|m| Some((m.outcome?, m)))
                .collect();
            let worst = on.iter().map(|(o, _)| *o).max_by_key(|o| rank(*o))?;
            let notes: Vec<String> = on
                .iter()
                .map(|(o, m)| format!("{}: {} ({})", m.member, m.note, o.word()))
                .collect();
            Some((
                worst,
                format!("{node}: {}", v.name),
                format!("since `{}`: {}", v.since, notes.join("; ")),
            ))
        })
        .collect()
}

/// A roll as a suite of its own, `<experiment> / roll <roll>`: one case per node, passed
/// when the node was Ready again within the roll's timeout of its step (failed when not,
/// skipped when its step never ran or observation ended first), then one per expectation
/// about that node ([`node_expectation_cases`]). Its figures are in the
/// case's output and the suite's properties (`<node>.<stage>` in seconds after its step),
/// never as case times.
fn roll_suite(
    record: &RunRecord,
    roll: &crate::judge::RollFigures,
) -> (TestSuite, Vec<(String, String)>) {
    use super::roll_text::{HEADS, node_verdict, probe_line, row};
    let suite_name = cdata(&format!("{} / roll {}", record.experiment.name, roll.roll));
    let mut suite = TestSuite::new(&suite_name);
    let mut properties = vec![(
        "roll.timeout".to_string(),
        roll.timeout_ms.map_or_else(
            || "unknown".to_string(),
            |ms| format!("{:.3}", ms as f64 / 1000.0),
        ),
    )];
    for n in &roll.nodes {
        let name = cdata(&format!("{} back within the roll's timeout", n.node));
        let (verdict, words) = node_verdict(roll, n);
        let message = cdata(&words);
        let mut case = match verdict {
            Some(true) => TestCase::success(&name, JDuration::ZERO),
            Some(false) => TestCase::failure(&name, JDuration::ZERO, "late", &message),
            None => TestCase::skipped_with_cause(&name, "not decided", &message),
        };
        case.set_classname(&suite_name);
        let cells = row(record, n);
        let mut out = format!("step `{}`: {words}\n", n.step);
        for (head, cell) in HEADS.iter().zip(&cells).skip(1) {
            out.push_str(&format!("{head}: {cell}\n"));
        }
        case.set_system_out(&cdata(&out));
        suite.add_testcase(case);
        for (outcome, name, full) in node_expectation_cases(record, &n.node) {
            let mut case = judged_case(outcome, &cdata(&name), &full);
            case.set_classname(&suite_name);
            suite.add_testcase(case);
        }
        for (key, _, value) in n.stages() {
            if let Some(ms) = value {
                properties.push((
                    format!("{}.{key}", n.node),
                    format!("{:.3}", ms as f64 / 1000.0),
                ));
            }
        }
    }
    let mut probes: String = roll.probes.iter().map(|p| probe_line(p) + "\n").collect();
    if let Some(note) = super::roll_text::probes_note(&roll.probes) {
        probes.push_str(note);
        probes.push('\n');
    }
    if !probes.is_empty() {
        suite.set_system_out(&cdata(&probes));
    }
    for p in &roll.probes {
        properties.push((
            format!("probe.{}.downtime", p.probe),
            format!("{:.3}", p.downtime_ms as f64 / 1000.0),
        ));
        properties.push((
            format!("probe.{}.longest", p.probe),
            format!("{:.3}", p.longest_ms as f64 / 1000.0),
        ));
        if let Some(n) = p.failed_requests {
            properties.push((format!("probe.{}.failed", p.probe), n.to_string()));
        }
    }
    (suite, properties)
}

/// The suite's own output: the timeline and the steps that never ran, with why.
fn suite_out(record: &RunRecord) -> String {
    let mut out = text::timeline_text(record);
    if !matches!(record.outcome, RunOutcome::Skipped { .. }) {
        let why = record
            .stopped_early
            .as_deref()
            .unwrap_or("the run ended before it was due");
        for step in record.steps_not_run() {
            out.push_str(&format!("step `{}` not run: {why}\n", step.name));
        }
    }
    out
}

/// The recovery figures as suite properties, `recovery.<stage>` in seconds after the fault
/// step (`recovery.node-notready` = `19.210`), each stage observed: what CI can chart
/// across runs without counting it as test time.
fn figure_properties(record: &RunRecord) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(step) = &record.figures.fault_step {
        out.push(("recovery.from".to_string(), step.clone()));
    }
    for (stage, value) in record.figures.rows() {
        let Some(ms) = value else { continue };
        let key = stage.to_lowercase().replace(' ', "-");
        out.push((
            format!("recovery.{key}"),
            format!("{:.3}", ms as f64 / 1000.0),
        ));
    }
    out
}

/// Writes the JUnit XML to `path`.
pub fn write(record: &RunRecord, path: &Path) -> Result<(), ReportError> {
    let xml = render(record);
    std::fs::write(path, xml).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A roll is a suite of its own, one case per node, the slow node's case failed,
    /// its figures as properties and no case timed; the experiment's suite keeps its counts.
    #[test]
    fn a_roll_is_a_suite_with_a_case_per_node() {
        let plain = crate::report::roll_text::tests::rolled_record([40, 95, 42]);
        let late = crate::report::roll_text::tests::rolled_record([40, 360, 42]);
        let xml = render(&late);
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
        let suites: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testsuite"))
            .collect();
        assert_eq!(suites.len(), 2, "{xml}");
        let roll = suites[1];
        assert_eq!(
            roll.attribute("name"),
            Some(format!("{} / roll roll reboots", late.experiment.name).as_str())
        );
        assert_eq!(roll.attribute("tests"), Some("3"));
        assert_eq!(roll.attribute("failures"), Some("1"));
        let cases: Vec<_> = roll
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        let names: Vec<_> = cases.iter().filter_map(|c| c.attribute("name")).collect();
        assert_eq!(
            names,
            [
                "w1 back within the roll's timeout",
                "w2 back within the roll's timeout",
                "w3 back within the roll's timeout"
            ]
        );
        assert!(
            cases.iter().all(|c| c.attribute("time") == Some("0")),
            "{xml}"
        );
        let failed = cases[1]
            .children()
            .find(|n| n.has_tag_name("failure"))
            .expect("w2 failed");
        assert!(
            failed
                .attribute("message")
                .is_some_and(|m| m.contains("360.0s after its step")),
            "{xml}"
        );
        let props: std::collections::BTreeMap<_, _> = roll
            .descendants()
            .filter(|n| n.has_tag_name("property"))
            .filter_map(|p| Some((p.attribute("name")?, p.attribute("value")?)))
            .collect();
        assert_eq!(props.get("w2.node_ready_again"), Some(&"360.000"));
        assert_eq!(props.get("w1.node_not_ready"), Some(&"20.000"));
        assert_eq!(props.get("roll.timeout"), Some(&"300.000"));
        assert_eq!(props.get("probe.web.downtime"), Some(&"6.000"));
        // The experiment's own suite counts as before; in time, no roll case fails.
        assert_eq!(suites[0].attribute("failures"), Some("0"));
        assert!(!render(&plain).contains("type=\"late\""));
    }

    #[test]
    fn a_failed_case_carries_what_the_model_predicted_and_what_was_seen() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/records/kubelet-stop-past-toleration.json");
        let mut record = RunRecord::load(&path).unwrap();
        let failed = "web pods on the node go Terminating after their own toleration";
        for v in &mut record.verdicts {
            if v.name == failed {
                v.outcome = Outcome::Failed;
                v.message = "a belief the run contradicted".into();
            }
        }
        let xml = render(&record);
        let message = xml
            .split("<testcase")
            .find(|case| case.contains(failed))
            .unwrap_or_default();
        assert!(
            message.contains(
                "the node failure model: faultline-lab/web-7f95d99b4-7r6q8 Terminating \
                 (evicted): predicted +42.1s … +54.5s (its toleration, 30s after the taint); \
                 observed +51.5s: inside"
            ),
            "{message}"
        );
        // Passed cases carry no model lines.
        assert_eq!(
            xml.matches("the node failure model").count(),
            message.matches("the node failure model").count(),
            "{xml}"
        );
    }

    /// Every committed record: JUnit counts what the terminal counts, its cases take no
    /// time (a dashboard summing test times sums runs' wall times), the suite lasts the
    /// run, steps that never ran are said in the suite's output and not as cases, and
    /// each observed recovery figure is a suite property.
    #[test]
    fn junit_counts_as_the_terminal_and_times_only_the_run() {
        let mut dirs =
            vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/records")];
        let mut seen = 0;
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let Ok(record) = RunRecord::load(&path) else {
                    continue;
                };
                seen += 1;
                let xml = render(&record);
                let doc = roxmltree::Document::parse(&xml).unwrap();
                let suites: Vec<_> = doc
                    .descendants()
                    .filter(|n| n.has_tag_name("testsuite"))
                    .collect();
                // The experiment's own suite, whose counts are the terminal's; beside it a
                // suite per roll, of the roll's nodes.
                assert_eq!(suites.len(), 1 + record.rolls.len(), "{}", path.display());
                let name = record.experiment.name.as_str();
                let suite = *suites
                    .iter()
                    .find(|s| s.attribute("name") == Some(name))
                    .unwrap_or_else(|| panic!("{}: no suite {name}", path.display()));
                assert!(
                    suites
                        .iter()
                        .filter(|s| s.attribute("name") != Some(name))
                        .all(|s| s
                            .attribute("name")
                            .is_some_and(|n| n.starts_with(&format!("{name} / roll ")))),
                    "{}",
                    path.display()
                );
                let attr =
                    |name: &str| -> usize { suite.attribute(name).unwrap_or("0").parse().unwrap() };
                let tally = super::text::Tally::of(&record);
                let shown = path.display();
                assert_eq!(attr("tests"), tally.total(), "{shown}");
                assert_eq!(attr("failures"), tally.failed, "{shown}");
                assert_eq!(attr("errors"), tally.undecidable + tally.errors, "{shown}");
                // junit-report writes no `skipped` attribute: the cases say it.
                let skipped = suite
                    .descendants()
                    .filter(|n| n.has_tag_name("skipped"))
                    .count();
                assert_eq!(skipped, tally.skipped, "{shown}");
                let case_time: f64 = suite
                    .children()
                    .filter(|n| n.has_tag_name("testcase"))
                    .map(|c| c.attribute("time").unwrap_or("0").parse::<f64>().unwrap())
                    .sum();
                assert_eq!(case_time, 0.0, "{shown}");
                let suite_time: f64 = suite.attribute("time").unwrap().parse().unwrap();
                let wall = wall_secs(record.started_at, record.finished_at);
                assert!(
                    (suite_time - wall).abs() < 0.001,
                    "{shown}: {suite_time} vs {wall}"
                );
                let properties: Vec<(&str, &str)> = suite
                    .descendants()
                    .filter(|n| n.has_tag_name("property"))
                    .map(|p| (p.attribute("name").unwrap(), p.attribute("value").unwrap()))
                    .collect();
                for (stage, value) in record.figures.rows() {
                    let key = format!("recovery.{}", stage.to_lowercase().replace(' ', "-"));
                    let got = properties.iter().find(|(n, _)| *n == key).map(|(_, v)| *v);
                    let want = value.map(|ms| format!("{:.3}", ms as f64 / 1000.0));
                    assert_eq!(got, want.as_deref(), "{shown}: {key}");
                }
                let out = suite
                    .children()
                    .find(|n| n.has_tag_name("system-out"))
                    .and_then(|n| n.text())
                    .unwrap_or_default();
                if !matches!(record.outcome, RunOutcome::Skipped { .. }) {
                    for step in record.steps_not_run() {
                        assert!(
                            out.contains(&format!("step `{}` not run: ", step.name)),
                            "{shown}: {out}"
                        );
                    }
                }
            }
        }
        assert!(seen >= 10, "only {seen} records read");
    }

    #[test]
    fn properties_go_first_in_the_right_suite() {
        let xml = "<testsuites><testsuite id=\"0\" name=\"a&gt;b\"><testcase name=\"x\"/></testsuite><testsuite id=\"1\" name=\"c\"/></testsuites>".to_string();
        let out = with_properties(
            xml,
            &[
                (0, vec![("score".into(), "87.5".into())]),
                (1, vec![("k".into(), "<\"v\">".into())]),
            ],
        );
        let doc = roxmltree::Document::parse(&out).expect(&out);
        let suites: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testsuite"))
            .collect();
        let first = suites[0].first_element_child().unwrap();
        assert!(first.has_tag_name("properties"), "{out}");
        let prop = first.first_element_child().unwrap();
        assert_eq!(prop.attribute("name"), Some("score"));
        assert_eq!(prop.attribute("value"), Some("87.5"));
        let second = suites[1].first_element_child().unwrap();
        assert_eq!(
            second.first_element_child().unwrap().attribute("value"),
            Some("<\"v\">")
        );
    }

    #[test]
    fn the_suite_time_set_is_that_suite_s_alone() {
        let xml = "<testsuites><testsuite id=\"0\" name=\"a time=&quot;\" timestamp=\"t\" time=\"23.5\"><testcase name=\"x\" time=\"23.5\"/></testsuite><testsuite id=\"1\" name=\"c\" time=\"4\"/></testsuites>".to_string();
        let out = with_suite_time(xml, 0, 130.25);
        let doc = roxmltree::Document::parse(&out).expect(&out);
        let times: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testsuite") || n.has_tag_name("testcase"))
            .map(|n| n.attribute("time"))
            .collect();
        assert_eq!(times, [Some("130.250"), Some("23.5"), Some("4")], "{out}");
        assert_eq!(
            with_suite_time("<testsuites/>".into(), 0, 1.0),
            "<testsuites/>"
        );
    }
}
