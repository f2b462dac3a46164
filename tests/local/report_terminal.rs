//! Terminal lines and the summary table.

use crate::judge_support::*;
use faultline::report::terminal::summary;
use faultline::report::text::entry_line;

#[test]
fn entry_lines_read_as_changes() {
    let t = timeline("kubelet-stop");
    let lines: Vec<String> = t.entries.iter().map(|e| entry_line(e, Some(0))).collect();
    assert!(lines.contains(&"+21.3s node lab-worker-2 Ready True→Unknown, +taint unreachable:NoSchedule, +taint unreachable:NoExecute".to_string()), "{lines:#?}");
    assert!(
        lines
            .contains(&"+0.0s step `stop kubelet` kubelet-stop on lab-worker-2 issued".to_string())
    );
    assert!(
        lines.contains(
            &"+31.5s pod faultline-lab/web-5d9c-fffff Terminating on lab-worker-2".to_string()
        ),
        "{lines:#?}"
    );
    assert!(
        lines.contains(
            &"+31.7s pod faultline-lab/web-5d9c-ccccc scheduled on lab-worker-1".to_string()
        ),
        "{lines:#?}"
    );
    assert!(
        lines.contains(
            &"+95.0s pod faultline-lab/agent-x2 restarts 0→1 on lab-worker-2".to_string()
        ),
        "{lines:#?}"
    );
    assert!(
        lines.contains(
            &"+93.0s pod faultline-lab/db-0 deleted (was Running on lab-worker-2)".to_string()
        ),
        "{lines:#?}"
    );
    assert!(lines.contains(&"+92.0s node lab-worker-2 Ready Unknown→True, -taint unreachable:NoSchedule, -taint unreachable:NoExecute".to_string()));
}

#[test]
fn entry_lines_count_from_time_zero_and_say_setup_before_it_is_known() {
    let t = timeline("kubelet-stop");
    let issued = t
        .entries
        .iter()
        .find(|e| {
            entry_line(e, Some(0)).contains("`stop kubelet` kubelet-stop on lab-worker-2 issued")
        })
        .expect("the step's entry");
    assert!(entry_line(issued, Some(-2_500)).starts_with("+2.5s step `stop kubelet`"));
    assert!(entry_line(issued, Some(500)).starts_with("-0.5s step `stop kubelet`"));
    assert!(entry_line(issued, None).starts_with("setup step `stop kubelet`"));
}

#[test]
fn gap_entries_are_named() {
    let t = timeline("kubelet-stop-gap");
    let lines: Vec<String> = t.entries.iter().map(|e| entry_line(e, Some(0))).collect();
    assert!(
        lines.contains(
            &"+41.2s lost sight of pods: watch error: connection reset by peer".to_string()
        ),
        "{lines:#?}"
    );
}

#[test]
fn summary_lists_outcomes_figures_targets_and_verdict() {
    let rec = record();
    let plain = summary(&rec, false);
    assert!(!plain.contains('\u{1b}'));
    assert!(plain.contains("down: lab-worker-2"));
    let row = plain
        .lines()
        .find(|l| l.contains("web evicted between"))
        .expect("row");
    assert!(row.trim_start().starts_with("FAIL"), "{row}");
    assert!(row.contains("+52.0s") && row.contains("too late"), "{row}");
    assert!(plain.contains("SKIP"));
    assert!(
        plain.contains("first eviction             31.5s"),
        "{plain}"
    );
    assert_eq!(
        plain.lines().last(),
        Some("FAILED: 1 passed, 1 failed, 0 undecidable, 1 skipped, 1 errors")
    );
    // 1 passed of 3 counted (failed and error count, skipped does not).
    assert!(
        plain.contains(
            "resilience score: 33.3 (1 of 3 counted expectations held; 1 skipped, not counted)"
        ),
        "{plain}"
    );
    let coloured = summary(&rec, true);
    assert!(coloured.contains("\u{1b}[31mFAIL"), "{coloured:?}");
}

#[test]
fn a_comparison_lists_every_regression_one_per_line_and_ends_with_the_verdict() {
    use crate::records_support::*;
    use faultline::compare::{Tolerance, compare};
    use faultline::series::Series;
    let base = fixture("kubelet-stop-past-toleration");
    let now = upgraded(base.clone(), "v1.34.1", 10_000);
    let c = compare(
        &[Series::single(base)],
        &[Series::single(now)],
        &Tolerance::default(),
        ("old", "new"),
    );
    let text = faultline::report::compare::terminal::render(&c);
    assert!(
        text.contains(
            "  changed:     Kubernetes v1.33.13 → v1.34.1; node-monitor grace period 20s → 30s\n"
        ),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("node NotReady"))
        .unwrap();
    assert!(
        row.contains(" 19.2s")
            && row.contains(" 29.2s")
            && row.contains("+10.0s")
            && row.ends_with("SLOWER"),
        "{row}"
    );
    let list: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "== regressions, one per line")
        .collect();
    let cells = |l: &str| -> Vec<String> {
        l.split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect()
    };
    assert_eq!(
        list.iter().skip(1).map(|l| cells(l)).collect::<Vec<_>>(),
        [
            vec![
                "experiment",
                "figure",
                "baseline (median)",
                "now (median)",
                "change"
            ],
            vec![
                "kubelet-stop-past-toleration",
                "node NotReady",
                "19.2s",
                "29.2s",
                "+10.0s (+52.1%) SLOWER"
            ],
            vec![
                "kubelet-stop-past-toleration",
                "unreachable taint",
                "19.2s",
                "29.2s",
                "+10.0s (+52.0%) SLOWER"
            ],
            vec![
                "kubelet-stop-past-toleration",
                "transition: node goes Unknown within the grace period",
                "19.2s",
                "29.2s",
                "+10.0s (+52.1%) SLOWER"
            ],
            vec![
                "kubelet-stop-past-toleration",
                "transition: node gets the unreachable NoExecute taint",
                "21.3s",
                "31.3s",
                "+10.0s (+46.9%) SLOWER"
            ],
            vec!["REGRESSED: 4 regression(s) beyond the tolerance and the noise floor"],
        ],
        "{text}"
    );
}

#[test]
fn a_series_summary_names_what_was_flaky() {
    use crate::records_support::*;
    use faultline::judge::Outcome;
    let r = fixture("kubelet-stop-within-toleration");
    let s = series(vec![
        with_node_not_ready(r.clone(), 18_100),
        with_outcome(r.clone(), "nothing on the node is evicted", Outcome::Failed),
        with_node_not_ready(r.clone(), 20_600),
    ]);
    let text = faultline::report::series::terminal::summary(&s);
    assert!(
        text.contains("  node NotReady              18.1s / 19.8s / 20.6s\n"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.contains("nothing on the node is evicted"))
        .unwrap();
    assert!(
        row.trim_start().starts_with("FLAKY") && row.contains("PASS FAIL PASS"),
        "{row}"
    );
    assert_eq!(
        text.lines().last(),
        Some(
            "FLAKY: 1 expectation(s) held in some runs only: nothing on the node is evicted (flaky: held in 2 of 3 runs)"
        )
    );
}
