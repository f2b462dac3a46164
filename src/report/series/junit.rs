//! JUnit of a series: one test case per expectation over all runs, so CI shows one test
//! per belief whatever `--repeat` was. It passes when the expectation held in every counted
//! run; held in some runs only, it fails as `flaky` and says in which runs; held in none,
//! it fails (or is an error when no run failed it, only left it undecided). A case takes
//! no time (it is a judgement): the suite's time is the series' wall time, and the
//! recovery figures (min / median / max) and the score are suite properties.

use junit_report::{Duration as JDuration, OffsetDateTime, Report, TestCase, TestSuite};

use crate::judge::Outcome;
use crate::report::junit_xml::{wall_secs, with_properties, with_suite_time, xml};
use crate::sanitize::cdata;
use crate::series::{ExpectationSpread, Reliability, Series};

use super::{outcomes_text, scores_text};

/// Renders the series as JUnit XML.
pub fn render(series: &Series) -> String {
    let spread = series.spread();
    let suite_name = cdata(series.name());
    let mut suite = TestSuite::new(&suite_name);
    if let Ok(ts) = OffsetDateTime::from_unix_timestamp(series.first().started_at.timestamp()) {
        suite.set_timestamp(ts);
    }
    for e in &spread.expectations {
        let mut case = expectation_case(series, e);
        case.set_classname(&suite_name);
        suite.add_testcase(case);
    }
    for (i, run) in series.runs().iter().enumerate() {
        for err in &run.errors {
            let mut case = TestCase::error(
                &cdata(&format!("run {}: {}", i + 1, head(err))),
                JDuration::ZERO,
                "error",
                &cdata(err),
            );
            case.set_classname(&suite_name);
            suite.add_testcase(case);
        }
    }
    let mut report = Report::new();
    report.add_testsuite(suite);
    let text = |x: Option<f64>| crate::judge::score::value_text(x);
    let mut properties = vec![
        ("runs".to_string(), spread.runs.to_string()),
        ("score".to_string(), text(spread.score.median)),
        ("score.min".to_string(), text(spread.score.min)),
        ("score.max".to_string(), text(spread.score.max)),
        ("score.runs".to_string(), scores_text(&spread.scores)),
    ];
    // A stage observed in no run is left out, as in one run's report.
    let secs = |ms: Option<f64>| ms.map(|ms| format!("{:.3}", ms / 1000.0));
    for f in &spread.figures {
        let key = format!("recovery.{}", f.label.to_lowercase().replace(' ', "-"));
        for (which, value) in [
            ("min", f.spread.min),
            ("median", f.spread.median),
            ("max", f.spread.max),
        ] {
            if let Some(v) = secs(value) {
                properties.push((format!("{key}.{which}"), v));
            }
        }
    }
    // The suite lasted from the first run's start to the last run's end.
    let last = series.runs().last().map_or(series.first(), |r| &**r);
    let timed = with_suite_time(
        xml(&report, series.name()),
        0,
        wall_secs(series.first().started_at, last.finished_at),
    );
    with_properties(timed, &[(0, properties)])
}

/// The part of an error before its first `:` (`step `stop``), or `setup`.
fn head(err: &str) -> &str {
    match err.split_once(':') {
        Some((h, _)) if h.starts_with("step") => h,
        _ => "setup",
    }
}

fn expectation_case(series: &Series, e: &ExpectationSpread) -> TestCase {
    let name = cdata(&e.name);
    let time = JDuration::ZERO;
    // Each run's verdict, for the case's output and for the message of the first that
    // did not pass.
    let per_run: Vec<(usize, Outcome, String)> = series
        .runs()
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let v = r.verdicts.iter().find(|v| v.name == e.name)?;
            Some((i + 1, v.outcome, v.message.clone()))
        })
        .collect();
    let first_not_passed = per_run
        .iter()
        .find(|(_, o, _)| !matches!(o, Outcome::Passed | Outcome::Skipped));
    let why = first_not_passed
        .map(|(i, o, m)| format!("run {i}: {} {m}", crate::report::text::outcome_word(*o)))
        .unwrap_or_default();
    let mut case = match e.reliability {
        Reliability::Held => TestCase::success(&name, time),
        Reliability::Skipped => {
            let message = per_run.first().map(|(_, _, m)| m.as_str()).unwrap_or("");
            TestCase::skipped_with_cause(&name, "skipped", &cdata(message))
        }
        Reliability::Flaky => TestCase::failure(
            &name,
            time,
            "flaky",
            &cdata(&format!("{}; {why}", e.summary())),
        ),
        Reliability::NotHeld if e.outcomes.contains(&Outcome::Failed) => TestCase::failure(
            &name,
            time,
            "expectation",
            &cdata(&format!("{}; {why}", e.summary())),
        ),
        Reliability::NotHeld => TestCase::error(
            &name,
            time,
            "undecided",
            &cdata(&format!("{}; {why}", e.summary())),
        ),
    };
    let mut out = format!(
        "{}: {}\nmeasured (min / median / max): {}\n",
        e.summary(),
        outcomes_text(&e.outcomes),
        e.measured.ms_text()
    );
    for (i, o, m) in &per_run {
        out.push_str(&format!(
            "  run {i}: {} {m}\n",
            crate::report::text::outcome_word(*o)
        ));
    }
    case.set_system_out(&cdata(&out));
    case
}
