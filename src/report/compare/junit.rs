//! A comparison as JUnit, for CI: one suite per experiment (`compare <experiment>`), one
//! case per expectation's verdicts, per recovery figure, per observed transition and for
//! the score, failed when it regressed beyond the tolerance, with baseline, now and delta
//! in its message; the time of a figure's case is now's median. An experiment on one side
//! only is a suite with one skipped case; a comparison of nothing is one error case.

use junit_report::{Duration as JDuration, Report, TestCase, TestSuite};

use crate::compare::{Change, Comparison, ExperimentDiff, FigureDiff, FigureKind, Presence};
use crate::report::junit_xml::{with_properties, xml};
use crate::sanitize::cdata;

use super::{change_text, side_text, verdict_line};

/// Renders the comparison as JUnit XML.
pub fn render(cmp: &Comparison) -> String {
    let mut report = Report::new();
    let mut properties = Vec::new();
    let sides = vec![
        ("baseline".to_string(), cmp.baseline.label.clone()),
        ("baseline.cluster".to_string(), side_text(&cmp.baseline)),
        ("now".to_string(), cmp.now.label.clone()),
        ("now.cluster".to_string(), side_text(&cmp.now)),
        ("tolerance".to_string(), cmp.tolerance.text()),
    ];
    for (i, e) in cmp.experiments.iter().enumerate() {
        report.add_testsuite(suite(e));
        let mut props = sides.clone();
        props.push((
            "score.baseline".to_string(),
            e.score.spread_text(&e.score.baseline),
        ));
        props.push(("score.now".to_string(), e.score.spread_text(&e.score.now)));
        properties.push((i, props));
    }
    if cmp.in_common() == 0 {
        let mut suite = TestSuite::new("compare");
        let mut case = TestCase::error(
            "comparison",
            JDuration::ZERO,
            "nothing compared",
            &cdata(&verdict_line(cmp)),
        );
        case.set_classname("compare");
        suite.add_testcase(case);
        properties.push((cmp.experiments.len(), sides));
        report.add_testsuite(suite);
    }
    with_properties(xml(&report, "compare"), &properties)
}

fn suite(e: &ExperimentDiff) -> TestSuite {
    let name = cdata(&format!("compare {}", e.name));
    let mut suite = TestSuite::new(&name);
    let mut add = |mut case: TestCase| {
        case.set_classname(&name);
        suite.add_testcase(case);
    };
    match e.presence {
        Presence::BaselineOnly | Presence::NowOnly => {
            let side = if e.presence == Presence::BaselineOnly {
                "only in the baseline"
            } else {
                "only now"
            };
            add(TestCase::skipped_with_cause(
                "experiment",
                "one side only",
                &cdata(&format!("{}: {side}, not compared", e.name)),
            ));
            return suite;
        }
        Presence::Both => {}
    }
    for x in &e.expectations {
        let case_name = cdata(&format!("verdict: {}", x.name));
        let text = cdata(&change_text(x));
        let mut case = match x.change {
            Change::Regressed => TestCase::failure(&case_name, JDuration::ZERO, "regressed", &text),
            Change::Skipped | Change::OneSideOnly => {
                TestCase::skipped_with_cause(&case_name, x.change.word(), &text)
            }
            Change::Unchanged | Change::Improved => TestCase::success(&case_name, JDuration::ZERO),
        };
        case.set_system_out(&text);
        add(case);
    }
    for f in e
        .figures
        .iter()
        .chain(&e.transitions)
        .chain(e.roll_stages())
        .chain(std::iter::once(&e.score))
    {
        add(figure_case(f));
    }
    suite
}

fn figure_case(f: &FigureDiff) -> TestCase {
    let name = cdata(&match f.kind {
        FigureKind::Recovery => format!("figure: {}", f.label),
        FigureKind::Transition => format!("transition: {}", f.label),
        FigureKind::Score => "score".to_string(),
    });
    let time = match (f.kind, f.now.median) {
        (FigureKind::Score, _) | (_, None) => JDuration::ZERO,
        (_, Some(ms)) => JDuration::milliseconds(ms.max(0.0) as i64),
    };
    let explain = cdata(&f.explain());
    let mut case = if f.movement.regressed() {
        TestCase::failure(
            &name,
            time,
            "regressed",
            &cdata(&format!("{}: {}", f.movement_text(), f.explain())),
        )
    } else if f.movement == crate::compare::Movement::Neither {
        TestCase::skipped_with_cause(&name, "not observed", &explain)
    } else {
        TestCase::success(&name, time)
    };
    case.set_system_out(&explain);
    case
}
