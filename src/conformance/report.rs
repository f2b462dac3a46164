//! The conformance report: one table for a suite's runs, behaviour × verdict × observed ×
//! window × rule, under the cluster's timers and where each came from, with each
//! deviation's likely cause; in Markdown (`conformance.md`) and as the terminal prints it.

use std::fmt::Write;

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

/// Table cells never break the table: pipes and newlines escaped.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The Markdown report of a suite's records.
pub fn markdown(records: &[RunRecord]) -> String {
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

/// The report as the terminal prints it: a line per case, then the tally.
pub fn text(records: &[RunRecord]) -> String {
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
    let _ = writeln!(
        out,
        "conformance: {} as Kubernetes specifies, {} deviation(s), {} not observable",
        t.passed, t.failed, t.skipped
    );
    out
}
