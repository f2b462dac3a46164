//! JUnit XML: one test suite per experiment, one test case per expectation, so CI systems
//! show each expectation as a test with its message.

use std::path::Path;

use junit_report::{Duration as JDuration, OffsetDateTime, Report, TestCase, TestSuite};

use super::ReportError;
use super::terminal;
use crate::judge::Outcome;
use crate::record::{RunOutcome, RunRecord};
use crate::sanitize::cdata;

/// Renders the record as JUnit XML.
pub fn render(record: &RunRecord) -> String {
    let exp = &record.experiment;
    let suite_name = cdata(&exp.name);
    let interrupted = record.outcome == RunOutcome::Interrupted;
    let figures = terminal::figures_text(record);
    let mut suite = TestSuite::new(&suite_name);
    let started = record.started_at;
    if let Ok(ts) = OffsetDateTime::from_unix_timestamp(started.timestamp()) {
        suite.set_timestamp(ts);
    }
    let explanation = crate::explain::explain(record);
    for v in &record.verdicts {
        let name = cdata(&v.name);
        let mut full = super::verdict_message(record, v);
        if v.outcome == Outcome::Failed {
            for line in super::model_lines(record, &explanation, v) {
                full.push('\n');
                full.push_str(&line);
            }
        }
        let message = cdata(&full);
        let secs = v.measured_ms.unwrap_or(0).max(0) as f64 / 1000.0;
        let time = JDuration::seconds_f64(secs);
        let mut case = match v.outcome {
            Outcome::Passed => TestCase::success(&name, time),
            Outcome::Failed => TestCase::failure(&name, time, "expectation", &message),
            Outcome::Undecidable => TestCase::error(&name, time, "undecidable", &message),
            Outcome::Error => TestCase::error(&name, time, "error", &message),
            Outcome::Skipped => TestCase::skipped_with_cause(&name, "skipped", &message),
            Outcome::Pending => TestCase::error(
                &name,
                time,
                "interrupted",
                &cdata(&format!("interrupted before this was decided: {full}")),
            ),
        };
        case.set_classname(&suite_name);
        let mut out = format!("since `{}`: {full}\n", v.since);
        for m in &v.members {
            let at = m
                .at_ms
                .map(crate::judge::format_relative)
                .unwrap_or_else(|| "-".into());
            out.push_str(&format!("  {} {}: {}\n", m.member, at, m.note));
        }
        out.push_str(&figures);
        for line in super::timer_lines(record) {
            out.push_str(&format!("timer {line}\n"));
        }
        case.set_system_out(&cdata(&out));
        suite.add_testcase(case);
    }
    if let Some(t) = &record.aborted {
        let mut case = TestCase::error(
            &cdata(&format!("abort: {}", t.condition)),
            JDuration::ZERO,
            "aborted",
            &cdata(&format!(
                "tripped at {}: {}; the run stopped and every fault was undone at once",
                crate::timeline::format_offset_ms(t.at_ms),
                t.value
            )),
        );
        case.set_classname(&suite_name);
        suite.add_testcase(case);
    }
    if let Some(r) = &record.restored {
        let name = "cluster restored";
        let waited = format!(
            "waited {:.1}s for the cluster to settle",
            r.waited_ms as f64 / 1000.0
        );
        let mut case = if r.ok {
            TestCase::success(name, JDuration::milliseconds(r.waited_ms as i64))
        } else {
            TestCase::failure(
                name,
                JDuration::milliseconds(r.waited_ms as i64),
                "not restored",
                &cdata(&format!("{}; {waited}", r.differences.join("; "))),
            )
        };
        case.set_classname(&suite_name);
        let mut out = format!(
            "compared with before the first fault: {}\n{waited}\n",
            r.compared
        );
        for d in &r.differences {
            out.push_str(&format!("  differs: {d}\n"));
        }
        for line in super::safety_lines(record) {
            out.push_str(&format!("{line}\n"));
        }
        case.set_system_out(&cdata(&out));
        suite.add_testcase(case);
    }
    for (i, err) in record.errors.iter().enumerate() {
        let name = match err.split_once(':') {
            Some((head, _)) if head.starts_with("step") => cdata(head),
            _ if i == 0 => "setup".to_string(),
            _ => format!("setup #{}", i + 1),
        };
        let mut case = TestCase::error(&name, JDuration::ZERO, "error", &cdata(err));
        case.set_classname(&suite_name);
        suite.add_testcase(case);
    }
    let skipped = matches!(record.outcome, RunOutcome::Skipped { .. });
    for step in record.steps_not_run().into_iter().filter(|_| !skipped) {
        let why = record
            .stopped_early
            .as_deref()
            .unwrap_or("the run ended before it was due");
        let mut case = TestCase::skipped_with_cause(
            &cdata(&format!("step `{}`", step.name)),
            "not run",
            &cdata(&format!("not run: {why}")),
        );
        case.set_classname(&suite_name);
        suite.add_testcase(case);
    }
    if let RunOutcome::Error { message } = &record.outcome
        && record.errors.is_empty()
        && record.aborted.is_none()
    {
        let mut case = TestCase::error("run", JDuration::ZERO, "error", &cdata(message));
        case.set_classname(&suite_name);
        suite.add_testcase(case);
    }
    let any_pending = record
        .verdicts
        .iter()
        .any(|v| v.outcome == Outcome::Pending);
    if interrupted && !any_pending {
        let mut case = TestCase::error(
            "run",
            JDuration::ZERO,
            "interrupted",
            "interrupted before observation finished",
        );
        case.set_classname(&suite_name);
        suite.add_testcase(case);
    }
    suite.set_system_out(&cdata(&terminal::timeline_text(record)));
    let mut report = Report::new();
    report.add_testsuite(suite);
    if record
        .figures
        .rows()
        .iter()
        .any(|(_, value)| value.is_some())
    {
        report.add_testsuite(figures_suite(record, &suite_name));
    }
    let score = record.score();
    let properties = vec![
        ("score".to_string(), score.value_text()),
        ("score.explained".to_string(), score.explain()),
    ];
    let timed = with_suite_time(
        xml(&report, &exp.name),
        0,
        wall_secs(record.started_at, record.finished_at),
    );
    with_properties(timed, &[(0, properties)])
}

/// Seconds from `started` to `finished` (never negative): a run's wall time, what a CI
/// step waited for it.
pub(crate) fn wall_secs(
    started: chrono::DateTime<chrono::Utc>,
    finished: chrono::DateTime<chrono::Utc>,
) -> f64 {
    (finished - started).num_milliseconds().max(0) as f64 / 1000.0
}

/// The XML with the `time` of suite `index` set to `secs`. The `junit-report` crate
/// writes a suite's time as the sum of its cases' times: for an experiment that is the
/// sum of measured expectation times (23 s for a 2-minute run), not how long it took.
/// Its writer escapes `"` in attribute values, so ` time="` can only start the attribute.
pub(crate) fn with_suite_time(xml: String, index: usize, secs: f64) -> String {
    let Some(start) = xml.match_indices("<testsuite ").nth(index).map(|(i, _)| i) else {
        return xml;
    };
    let Some(tag_end) = xml[start..].find('>').map(|e| start + e) else {
        return xml;
    };
    const ATTRIBUTE: &str = " time=\"";
    let Some(value) = xml[start..tag_end]
        .find(ATTRIBUTE)
        .map(|i| start + i + ATTRIBUTE.len())
    else {
        return xml;
    };
    let Some(value_end) = xml[value..tag_end].find('"').map(|e| value + e) else {
        return xml;
    };
    let mut out = xml;
    out.replace_range(value..value_end, &format!("{secs:.3}"));
    out
}

/// The report as XML. Writing into memory only fails if the writer itself breaks; then
/// it is still a report CI can read, with one error case, rather than none.
pub(crate) fn xml(report: &Report, name: &str) -> String {
    let mut buf = Vec::new();
    match report.write_xml(&mut buf) {
        Ok(()) => String::from_utf8_lossy(&buf).into_owned(),
        Err(e) => format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<testsuites><testsuite name=\"{name}\" tests=\"1\" errors=\"1\" failures=\"0\"><testcase name=\"report\" classname=\"{name}\"><error type=\"error\" message=\"{msg}\"/></testcase></testsuite></testsuites>\n",
            name = crate::sanitize::html(name),
            msg = crate::sanitize::html(&format!("could not write JUnit XML: {e}")),
        ),
    }
}

/// Suite properties `(suite index, [(name, value)])`, as JUnit's `<properties>` first in
/// each suite: the `junit-report` crate writes none, so they are put in after its XML.
/// Its writer escapes `>` in attribute values, so the first `>` after `<testsuite ` ends
/// the start tag.
pub(crate) fn with_properties(xml: String, props: &[(usize, Vec<(String, String)>)]) -> String {
    let mut starts: Vec<usize> = xml.match_indices("<testsuite ").map(|(i, _)| i).collect();
    let mut out = xml;
    // From the last suite back, so earlier positions stay valid.
    starts.reverse();
    let count = starts.len();
    for (i, start) in starts.into_iter().enumerate() {
        let index = count - 1 - i;
        let Some((_, list)) = props.iter().find(|(n, _)| *n == index) else {
            continue;
        };
        let Some(end) = out[start..].find('>').map(|e| start + e) else {
            continue;
        };
        let block: String = list
            .iter()
            .map(|(n, v)| {
                format!(
                    "<property name=\"{}\" value=\"{}\"/>",
                    crate::sanitize::html(n),
                    crate::sanitize::html(v)
                )
            })
            .collect();
        let block = format!("<properties>{block}</properties>");
        if out[..end].ends_with('/') {
            // An empty suite, `<testsuite …/>`: open it to hold the properties.
            out.replace_range(end - 1..=end, &format!(">{block}</testsuite>"));
        } else {
            out.insert_str(end + 1, &block);
        }
    }
    out
}

/// The recovery figures as a second suite, one test case per stage observed whose time is
/// the figure, so CI's test-time charts track them across runs. A stage not observed is left
/// out (the JSON, HTML and terminal reports say so): as skipped tests, a run with few faults
/// showed dozens of skips on CI dashboards, issue 25.
fn figures_suite(record: &RunRecord, experiment_suite: &str) -> TestSuite {
    let name = format!("{experiment_suite} recovery figures");
    let mut suite = TestSuite::new(&name);
    let from = record
        .figures
        .fault_step
        .as_deref()
        .unwrap_or("the first fault");
    for (stage, value) in record.figures.rows() {
        let Some(ms) = value else { continue };
        let mut case = TestCase::success(stage, JDuration::milliseconds(ms.max(0)));
        case.set_classname(&name);
        case.set_system_out(&cdata(&format!(
            "{stage}: {:.1}s after `{from}`",
            ms as f64 / 1000.0
        )));
        suite.add_testcase(case);
    }
    suite
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
                 (evicted): predicted +42.7s … +55.1s (its toleration, 30s after the taint); \
                 observed +52.1s: inside"
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
