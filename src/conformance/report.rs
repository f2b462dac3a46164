//! The conformance report: one table for a suite's runs, behaviour × verdict × observed ×
//! window × rule, under the cluster's timers and where each came from, with each
//! deviation's likely cause; in Markdown (`conformance.md`) and as the terminal prints it.

use std::fmt::Write;
use std::time::Duration;

use super::{Case, cases};
use crate::outcome::Outcome;
use crate::record::RunRecord;

/// Counts of a suite's cases by outcome.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Inside their window.
    pub passed: usize,
    /// Deviations from what Kubernetes specifies.
    pub failed: usize,
    /// Not observable on this run (said why).
    pub skipped: usize,
}

/// The tally of every conformance case of `records`.
pub fn tally(records: &[RunRecord]) -> Tally {
    let mut t = Tally::default();
    for c in records.iter().flat_map(cases) {
        match c.outcome {
            Outcome::Passed => t.passed += 1,
            Outcome::Failed => t.failed += 1,
            _ => t.skipped += 1,
        }
    }
    t
}

/// How long a suite took: each run's own length, their sum, the longest, and the
/// suite's wall time when the caller measured it. The suite runs its experiments one
/// after another today, so its wall time is their sum (plus setup between them); running
/// independent ones at once on different nodes would bring it towards the longest.
fn timing(records: &[RunRecord], wall: Option<Duration>) -> String {
    let lengths: Vec<Duration> = records
        .iter()
        .map(|r| (r.finished_at - r.started_at).to_std().unwrap_or_default())
        .collect();
    let sum: Duration = lengths.iter().sum();
    let longest = lengths.iter().max().copied().unwrap_or_default();
    let secs = |d: Duration| format!("{:.1}s", d.as_secs_f64());
    let mut line = format!(
        "{} run(s): sum of their lengths {}, the longest {}",
        records.len(),
        secs(sum),
        secs(longest)
    );
    if let Some(w) = wall {
        line.push_str(&format!(
            "; the suite's wall time {} (run one after another)",
            secs(w)
        ));
    }
    line
}

/// Table cells never break the table: pipes and newlines escaped.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The Markdown report of a suite's records; `wall`: how long the whole suite took.
pub fn markdown(records: &[RunRecord], wall: Option<Duration>) -> String {
    let mut out = String::from("# Conformance: node failure\n\n");
    let Some(first) = records.first() else {
        out.push_str("No run was recorded.\n");
        return out;
    };
    let t = tally(records);
    let _ = writeln!(
        out,
        "Cluster `{}`{}: {} behaviour(s) as Kubernetes specifies, {} deviation(s), {} not \
         observable.\n",
        first.cluster.name,
        first
            .cluster
            .server_version
            .as_deref()
            .map(|v| format!(" ({v})"))
            .unwrap_or_default(),
        t.passed,
        t.failed,
        t.skipped
    );
    let _ = writeln!(out, "Time: {}.\n", timing(records, wall));
    out.push_str("## The cluster's timers\n\n| timer | value | from |\n|---|---|---|\n");
    if first.cluster.timer_sources.is_empty() {
        // Records written before timer sources were kept: the values, without their origin.
        let t = &first.cluster.timers;
        for (name, value) in [
            ("nodeMonitorPeriod", t.node_monitor_period),
            ("nodeMonitorGracePeriod", t.node_monitor_grace_period),
            (
                "defaultUnreachableTolerationSeconds",
                t.default_unreachable_toleration,
            ),
        ] {
            let _ = writeln!(
                out,
                "| {name} | {} | not in the record |",
                crate::timers::show(value)
            );
        }
    }
    for s in &first.cluster.timer_sources {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            cell(&s.timer.to_string()),
            cell(&crate::timers::show(s.value)),
            cell(&format!("{:?}: {}", s.origin, s.detail))
        );
    }
    for r in records {
        let cs = cases(r);
        let _ = writeln!(
            out,
            "\n## {} (run {})\n\n| behaviour | subject | verdict | observed | window | rule |\n|---|---|---|---|---|---|",
            r.experiment.name, r.run_id
        );
        for c in &cs {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} ({}) |",
                cell(&c.behaviour),
                cell(&c.subject),
                c.outcome.word(),
                cell(&c.observed),
                cell(&c.window),
                cell(&c.rule),
                cell(c.source)
            );
        }
        let deviations: Vec<&Case> = cs.iter().filter(|c| c.outcome == Outcome::Failed).collect();
        if !deviations.is_empty() {
            out.push_str("\nDeviations, with the model's likely cause:\n\n");
            for c in deviations {
                let _ = writeln!(
                    out,
                    "- {} ({}): {}: {}",
                    c.behaviour,
                    c.subject,
                    c.fit,
                    c.cause.as_deref().unwrap_or("no cause named")
                );
            }
        }
        for c in cs.iter().filter(|c| c.outcome == Outcome::Skipped) {
            let _ = writeln!(
                out,
                "\n- not observable: {} ({}): its window {} reaches past what the run observed",
                c.behaviour, c.subject, c.window
            );
        }
    }
    out
}

/// The report as the terminal prints it: a line per case, then the timing and the tally.
pub fn text(records: &[RunRecord], wall: Option<Duration>) -> String {
    let mut out = String::new();
    for r in records {
        let _ = writeln!(
            out,
            "conformance of {} on {}:",
            r.experiment.name, r.cluster.name
        );
        for c in cases(r) {
            let _ = writeln!(
                out,
                "  {:<4} {}: {}: {} (window {}; {})",
                c.outcome.word(),
                c.behaviour,
                c.subject,
                c.observed,
                c.window,
                c.source
            );
            if let (Outcome::Failed, Some(cause)) = (c.outcome, &c.cause) {
                let _ = writeln!(out, "       likely cause: {cause}");
            }
        }
    }
    let t = tally(records);
    let _ = writeln!(out, "time: {}", timing(records, wall));
    let _ = writeln!(
        out,
        "conformance: {} as Kubernetes specifies, {} deviation(s), {} not observable",
        t.passed, t.failed, t.skipped
    );
    out
}
