//! What every reporter says the same way: an outcome's word, a verdict's message, the
//! model's lines for a failed expectation, the timers, the safety lines, the counts, the
//! recovery figures, a run's length and each timeline entry as a line. Reporters import
//! these from here, never from one another, so each renders from the record alone.

use crate::judge::Outcome;
use crate::record::{RunOutcome, RunRecord};
use crate::sanitize::clean;
use crate::timeline::{
    ConditionStatus, Entry, Event, GapPhase, NodeState, PodState, RunPhase, StepPhase,
    WorkloadState, format_offset_ms,
};

/// An expectation's outcome as one upper-case word, the same in every report.
pub fn outcome_word(o: Outcome) -> &'static str {
    o.word()
}

/// A verdict's message, with the mark of an expectation whose bounds rest on an assumed
/// timer (` [ASSUMED: grace = 50s]`): every report shows it the same way.
pub fn verdict_message(record: &RunRecord, v: &crate::judge::Verdict) -> String {
    format!("{}{}", v.message, record.assumed_mark(&v.name))
}

/// What the node failure model predicted for the transitions a verdict's expectation is
/// about, each beside what was observed and, for a deviation, its cause: one line each,
/// for a failed case's message (empty when the model predicts nothing for them).
pub fn model_lines(
    record: &RunRecord,
    explanation: &crate::explain::Explanation,
    v: &crate::judge::Verdict,
) -> Vec<String> {
    let Some(expectation) = record.expectation_of(v) else {
        return Vec::new();
    };
    crate::explain::related(explanation, record, expectation)
        .into_iter()
        .map(|i| format!("the node failure model: {}", i.line()))
        .collect()
}

/// One line per timer the run resolved its bounds against, with where it came from
/// (`nodeMonitorGracePeriod 20s (cluster: …)`); none for records that do not say.
pub fn timer_lines(record: &RunRecord) -> Vec<String> {
    record
        .cluster
        .timer_sources
        .iter()
        .map(crate::timers::TimerSource::line)
        .collect()
}

/// A verdict's measured time, or `-` when nothing was measured: a duration after its
/// `since` step (`19.2s`), written without the `+` that marks a moment from time zero.
pub fn measured_text(ms: Option<i64>) -> String {
    ms.map(span_text).unwrap_or_else(|| "-".into())
}

/// A recovery figure, or `not observed`: a duration after the fault step, as
/// [`measured_text`] writes one.
pub fn figure_text(ms: Option<i64>) -> String {
    ms.map(span_text).unwrap_or_else(|| "not observed".into())
}

/// A duration in seconds with one decimal (`19.2s`, `-0.4s`), as the bounds are written.
fn span_text(ms: i64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// A moment of the run's timeline as every report writes it: from time zero, the
/// experiment's `at: 0s` (`+19.4s`; `-0.6s` before it).
pub fn at_text(record: &RunRecord, offset_ms: i64) -> String {
    format_offset_ms(offset_ms - record.zero_ms())
}

/// What `+0.0s` is, for the head of a report: `time zero +0.0s = 2026-11-23
/// 15:10:42.184 UTC, the experiment's \`at: 0s\``. Every moment (`+19.4s`) counts from
/// it; a measured time or a figure (`19.2s`) is a duration after its step.
pub fn time_zero_line(record: &RunRecord) -> String {
    let wall = record.zero_wall().map_or_else(
        || "not recorded".to_string(),
        |w| w.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string(),
    );
    format!("time zero +0.0s = {wall}, the experiment's `at: 0s`")
}

/// How a run ended, counted the one way every reporter counts it (the terminal's last
/// line, Markdown, and JUnit's `tests`/`failures`/`errors`/`skipped`): each expectation
/// by its outcome, the check that the cluster was left as it was found (passed or failed),
/// and what is not an expectation but must show as an error in CI — each step or setup
/// error, an abort, a run that ended in error or was interrupted with nothing to say so.
/// Steps that never ran are not counted: they are said in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tally {
    /// Expectations that held, and a cluster restored as it was.
    pub passed: usize,
    /// Expectations that did not, and a cluster not restored.
    pub failed: usize,
    /// Expectations the timeline could not decide.
    pub undecidable: usize,
    /// Expectations not judged (the run was skipped, or their step never ran).
    pub skipped: usize,
    /// Expectations in error or left pending by an interruption, step and setup
    /// errors, an abort, and a run error or interruption no other entry reports.
    pub errors: usize,
}

impl Tally {
    /// Counts `record`.
    pub(crate) fn of(record: &RunRecord) -> Tally {
        let count = |o: Outcome| record.verdicts.iter().filter(|v| v.outcome == o).count();
        let restored = record.restored.as_ref().is_some_and(|r| r.ok);
        let not_restored = record.restored.as_ref().is_some_and(|r| !r.ok);
        Tally {
            passed: count(Outcome::Passed) + usize::from(restored),
            failed: count(Outcome::Failed) + usize::from(not_restored),
            undecidable: count(Outcome::Undecidable),
            skipped: count(Outcome::Skipped),
            errors: count(Outcome::Error)
                + count(Outcome::Pending)
                + record.errors.len()
                + usize::from(record.aborted.is_some())
                + usize::from(run_error(record).is_some()),
        }
    }

    /// Every entry counted: what JUnit calls `tests`.
    #[cfg(test)]
    pub(crate) fn total(&self) -> usize {
        self.passed + self.failed + self.undecidable + self.skipped + self.errors
    }
}

/// The run's own error, when no expectation, step error or abort already says the run did
/// not end well: a run error with nothing else to show it, or an interruption before any
/// expectation was pending. JUnit shows it as a `run` test case, the terminal counts it.
pub(crate) fn run_error(record: &RunRecord) -> Option<(&'static str, String)> {
    match &record.outcome {
        RunOutcome::Error { message } if record.errors.is_empty() && record.aborted.is_none() => {
            Some(("error", message.clone()))
        }
        RunOutcome::Interrupted
            if !record
                .verdicts
                .iter()
                .any(|v| v.outcome == Outcome::Pending) =>
        {
            Some((
                "interrupted",
                "interrupted before observation finished".to_string(),
            ))
        }
        _ => None,
    }
}

/// How many ended each way ([`Tally`]): `3 passed, 1 failed, 0 undecidable, …`.
pub fn tally(record: &RunRecord) -> String {
    let t = Tally::of(record);
    format!(
        "{} passed, {} failed, {} undecidable, {} skipped, {} errors",
        t.passed, t.failed, t.undecidable, t.skipped, t.errors
    )
}

/// The safety of the run in words, one line each: the abort condition that stopped it,
/// each fault's proof that it took effect (or not), and whether the cluster was left as
/// it was found. Every reporter shows these.
pub fn safety_lines(record: &RunRecord) -> Vec<String> {
    use crate::timeline::{Event, StepPhase};
    let mut out = Vec::new();
    let zero = record.zero_ms();
    if let Some(t) = &record.aborted {
        out.push(format!(
            "ABORTED at {}: {} ({}); every fault was undone at once",
            at_text(record, t.at_ms),
            t.condition,
            t.value
        ));
    }
    for e in &record.timeline.entries {
        let Event::Step {
            step, node, phase, ..
        } = &e.event
        else {
            continue;
        };
        let on = node
            .as_deref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default();
        let said = match phase {
            StepPhase::Confirmed { evidence } => format!("took effect: {evidence}"),
            StepPhase::NotConfirmed { evidence } => format!("DID NOT TAKE EFFECT: {evidence}"),
            StepPhase::Reverted { evidence } => {
                format!("UNDONE BY SOMETHING ELSE: {evidence}")
            }
            _ => continue,
        };
        out.push(format!(
            "{} fault of `{step}`{on} {said}",
            format_offset_ms(e.offset_ms - zero)
        ));
    }
    match &record.restored {
        Some(r) if r.ok => out.push(format!(
            "cluster restored: {} (settled after {:.1}s)",
            r.compared,
            r.waited_ms as f64 / 1000.0
        )),
        Some(r) => out.push(format!(
            "cluster NOT restored after waiting {:.1}s: {}",
            r.waited_ms as f64 / 1000.0,
            r.differences.join("; ")
        )),
        None => {}
    }
    out
}

/// A run's length: `42.0s`, or `3m 05s` from a minute on.
pub(crate) fn duration_text(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        let s = ms / 1000;
        format!("{}m {:02}s", s / 60, s % 60)
    }
}

/// The recovery figures as text lines.
pub fn figures_text(record: &RunRecord) -> String {
    let f = &record.figures;
    let Some(step) = &f.fault_step else {
        return "recovery figures: no fault step ran\n".to_string();
    };
    let mut out = format!("recovery figures (after `{}`):\n", clean(step));
    for (label, value) in f.rows() {
        out.push_str(&format!("  {label:<26} {}\n", figure_text(value)));
    }
    out
}

/// The whole timeline as text, one entry per line.
pub fn timeline_text(record: &RunRecord) -> String {
    // Found once: the record's zero is a search of its timeline.
    let zero = Some(record.zero_ms());
    record
        .timeline
        .entries
        .iter()
        .map(|e| entry_line(e, zero) + "\n")
        .collect()
}

/// One timeline entry as a line for the live view and the reports' timelines:
/// `+21.3s node lab-worker-2 Ready True→Unknown, +taint unreachable:NoExecute`, its moment
/// counted from time zero at offset `zero_ms`; `setup` in place of the moment before the
/// experiment started, while time zero is not known yet (`None`).
pub fn entry_line(entry: &Entry, zero_ms: Option<i64>) -> String {
    let from_zero = |ms: i64| format_offset_ms(ms - zero_ms.unwrap_or(0));
    let at = match zero_ms {
        Some(z) => format_offset_ms(entry.offset_ms - z),
        None => "setup".to_string(),
    };
    let what = match &entry.event {
        Event::Node {
            name,
            before,
            after,
        } => format!(
            "node {name} {}",
            node_change(before.as_ref(), after.as_ref())
        ),
        Event::Pod { pod, before, after } => format!(
            "pod {}/{} {}",
            pod.namespace,
            pod.name,
            pod_change(before.as_deref(), after.as_deref())
        ),
        Event::Workload {
            workload,
            before,
            after,
        } => format!(
            "{workload} {}",
            workload_change(before.as_ref(), after.as_ref())
        ),
        Event::Step {
            step,
            action,
            node,
            phase,
        } => {
            let on = node
                .as_ref()
                .map(|n| format!(" on {n}"))
                .unwrap_or_default();
            let what = match phase {
                StepPhase::Armed {
                    journal_id,
                    self_restore,
                    ends_by_timer_in_secs,
                } => format!(
                    "journaled as {journal_id}{}{}",
                    if *self_restore {
                        ", self-restore armed on the node"
                    } else {
                        ""
                    },
                    ends_by_timer_in_secs
                        .map(|s| format!(
                            "; only its timer can end this fault, in {s}s (it cuts the node \
                             off from faultline: Ctrl-C and the safety net cannot reach it \
                             sooner)"
                        ))
                        .unwrap_or_default()
                ),
                StepPhase::Issued => "issued".to_string(),
                StepPhase::Finished {
                    exit_status,
                    output,
                } => {
                    let status = exit_status
                        .map(|s| format!(" (exit {s})"))
                        .unwrap_or_default();
                    let first = output.lines().next().unwrap_or("");
                    if first.is_empty() {
                        format!("finished{status}")
                    } else {
                        format!("finished{status}: {first}")
                    }
                }
                StepPhase::Failed { error } => format!("FAILED: {error}"),
                StepPhase::Confirmed { evidence } => format!("took effect: {evidence}"),
                StepPhase::NotConfirmed { evidence } => {
                    format!("DID NOT TAKE EFFECT: {evidence}")
                }
                StepPhase::Reverted { evidence } => {
                    format!("UNDONE BY SOMETHING ELSE: {evidence}")
                }
                StepPhase::Undo { ok, detail } => {
                    format!("undo {}: {detail}", if *ok { "ok" } else { "FAILED" })
                }
            };
            format!("step `{step}` {action}{on} {what}")
        }
        Event::Gap {
            source,
            phase,
            reason,
        } => match phase {
            GapPhase::Began => format!("lost sight of {source}: {reason}"),
            GapPhase::Ended => format!("regained sight of {source} ({reason})"),
        },
        Event::Probe {
            name, up, detail, ..
        } => {
            format!(
                "probe {name} {} ({detail})",
                if *up { "Up" } else { "Down" }
            )
        }
        Event::Run { phase } => match phase {
            RunPhase::ObserverReady { sources } => {
                format!("observer ready: the first lists of its {sources} sources are in")
            }
            RunPhase::Started { zero_ms: start } => {
                match start.map_or(0, |z| z - entry.offset_ms) {
                    ahead if ahead > 50 => format!(
                        "observer synced; the experiment starts {:.1}s later (time zero), once \
                         its first nodes are armed",
                        ahead as f64 / 1000.0
                    ),
                    _ => "experiment starts (observer synced): time zero".to_string(),
                }
            }
            RunPhase::ObservationEnded { reason, .. } => format!(
                "observation ends: {reason}; what follows (undo, teardown) is recorded, not judged"
            ),
            RunPhase::Ended { outcome, exit_code } => {
                format!("run ended: {outcome} (exit code {exit_code})")
            }
        },
        Event::Schedule {
            step,
            due_ms: Some(due),
            ..
        } => format!(
            "next: step `{step}` at {} (in {:.1}s)",
            from_zero(*due),
            (due - entry.offset_ms).max(0) as f64 / 1000.0
        ),
        Event::Schedule { step, wait, .. } => format!("next: step `{step}` {wait}"),
        Event::Interlock {
            step,
            down,
            rule,
            deadline_ms,
        } => format!(
            "step `{step}` waits: {rule}; down: {} (gives up at {})",
            down.iter()
                .map(|d| format!("{} ({})", d.node, d.why))
                .collect::<Vec<_>>()
                .join(", "),
            from_zero(*deadline_ms)
        ),
        Event::Endpoint { from, to, reason } => {
            format!("API endpoint {from} left ({reason}); now observing and acting through {to}")
        }
        Event::Verdict {
            name,
            outcome,
            message,
        } => format!("{} {name}: {message}", outcome.word()),
        Event::Api { up, detail } => format!(
            "API {} ({detail})",
            if *up { "answers" } else { "unreachable" }
        ),
        Event::Query {
            name,
            value: Some(v),
            detail,
        } => format!("query {name}: {v} ({detail})"),
        Event::Query {
            name,
            value: None,
            detail,
        } => format!("query {name}: no data ({detail})"),
        Event::Abort { condition, value } => {
            format!("ABORT: {condition}: {value}; every fault is undone now")
        }
        Event::Restored {
            ok: true,
            waited_ms,
            ..
        } => format!(
            "cluster restored: as before the first fault (settled after {:.1}s)",
            *waited_ms as f64 / 1000.0
        ),
        Event::Restored {
            ok: false,
            differences,
            waited_ms,
        } => format!(
            "cluster NOT restored after {:.1}s: {}",
            *waited_ms as f64 / 1000.0,
            differences.join("; ")
        ),
        Event::Note { message } => format!("note: {message}"),
    };
    clean(&format!("{at} {what}"))
}

fn ready_word(s: ConditionStatus) -> &'static str {
    match s {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}

fn node_summary(s: &NodeState) -> String {
    crate::judge::labels::node_label(Some(s))
}

fn node_change(before: Option<&NodeState>, after: Option<&NodeState>) -> String {
    match (before, after) {
        (None, Some(a)) => format!("seen: {}", node_summary(a)),
        (Some(_), None) => "deleted".to_string(),
        (None, None) => "absent".to_string(),
        (Some(b), Some(a)) => {
            let mut parts = Vec::new();
            if b.ready != a.ready {
                parts.push(format!(
                    "Ready {}→{}",
                    ready_word(b.ready),
                    ready_word(a.ready)
                ));
            }
            for t in a.taints.iter().filter(|t| !b.taints.contains(t)) {
                parts.push(format!("+taint {}:{}", short(&t.key), t.effect));
            }
            for t in b.taints.iter().filter(|t| !a.taints.contains(t)) {
                parts.push(format!("-taint {}:{}", short(&t.key), t.effect));
            }
            if b.unschedulable != a.unschedulable {
                parts.push(
                    if a.unschedulable {
                        "cordoned"
                    } else {
                        "uncordoned"
                    }
                    .to_string(),
                );
            }
            if parts.is_empty() {
                format!("unchanged ({})", node_summary(a))
            } else {
                parts.join(", ")
            }
        }
    }
}

fn short(key: &str) -> &str {
    key.strip_prefix("node.kubernetes.io/").unwrap_or(key)
}

fn pod_change(before: Option<&PodState>, after: Option<&PodState>) -> String {
    let on = |s: &PodState| {
        s.node
            .as_ref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default()
    };
    match (before, after) {
        (None, Some(a)) => format!("created: {}{}", a.phase, on(a)),
        (Some(b), None) => format!("deleted (was {}{})", b.phase, on(b)),
        (None, None) => "absent".to_string(),
        (Some(b), Some(a)) => {
            let mut parts = Vec::new();
            if b.phase != a.phase {
                parts.push(format!("{}→{}", b.phase, a.phase));
            }
            if b.ready != a.ready {
                parts.push(if a.ready { "Ready" } else { "not Ready" }.to_string());
            }
            if !b.terminating && a.terminating {
                parts.push("Terminating".to_string());
            }
            if b.node != a.node {
                parts.push(format!("scheduled{}", on(a)));
            }
            if b.restarts != a.restarts {
                parts.push(format!("restarts {}→{}", b.restarts, a.restarts));
            }
            if parts.is_empty() {
                format!("unchanged ({}{})", a.phase, on(a))
            } else {
                format!(
                    "{}{}",
                    parts.join(", "),
                    if b.node == a.node {
                        on(a)
                    } else {
                        String::new()
                    }
                )
            }
        }
    }
}

fn workload_change(before: Option<&WorkloadState>, after: Option<&WorkloadState>) -> String {
    match (before, after) {
        (_, Some(a)) => {
            let was = before
                .map(|b| format!(" (was {}/{})", b.available, b.desired))
                .unwrap_or_default();
            format!(
                "available {}/{}, ready {}{was}",
                a.available, a.desired, a.ready
            )
        }
        (Some(_), None) => "deleted".to_string(),
        (None, None) => "absent".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_seconds_then_minutes() {
        assert_eq!(duration_text(42_049), "42.0s");
        assert_eq!(duration_text(185_900), "3m 05s");
        assert_eq!(duration_text(-5), "0.0s");
    }
}
