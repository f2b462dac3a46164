//! Terminal output: the live line per timeline entry while a run goes on, and the summary
//! table at its end.

use crate::judge::Outcome;
use crate::record::{RunOutcome, RunRecord};
use crate::timeline::{
    ConditionStatus, Entry, Event, GapPhase, NodeState, PodState, RunPhase, StepPhase,
    WorkloadState, format_offset_ms,
};

use super::{figure_text, measured_text, outcome_word, tally};
use crate::sanitize::clean;

const RESET: &str = "\u{1b}[0m";

fn paint(text: &str, code: &str, colour: bool) -> String {
    if colour {
        format!("\u{1b}[{code}m{text}{RESET}")
    } else {
        text.to_string()
    }
}

fn outcome_colour(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "32",
        Outcome::Failed => "31;1",
        Outcome::Undecidable => "35",
        Outcome::Skipped => "33",
        Outcome::Error => "31",
        Outcome::Pending => "36",
    }
}

/// The end-of-run summary: expectations, figures, targets and a one-line verdict; of an
/// experiment the cluster could not run, that it was skipped and why.
pub fn summary(record: &RunRecord, colour: bool) -> String {
    let exp = &record.experiment;
    let mut out = format!(
        "experiment {} on cluster {}\n",
        clean(&exp.name),
        clean(&record.cluster.name)
    );
    if let RunOutcome::Skipped { reason } = &record.outcome {
        out.push_str(&paint(
            &format!(
                "SKIPPED ({} expectation(s) not run): {}",
                record.verdicts.len(),
                clean(reason)
            ),
            "33",
            colour,
        ));
        out.push('\n');
        return out;
    }
    out.push_str("targets:\n");
    for (target, nodes) in &record.targets {
        out.push_str(&format!(
            "  {}: {}\n",
            clean(target),
            clean(&nodes.join(", "))
        ));
    }
    let timers = super::timer_lines(record);
    if !timers.is_empty() {
        out.push_str("timers:\n");
        for line in timers {
            out.push_str(&format!("  {}\n", clean(&line)));
        }
    }
    out.push_str("expectations:\n");
    let width = record
        .verdicts
        .iter()
        .map(|v| v.name.chars().count())
        .max()
        .unwrap_or(0);
    for v in &record.verdicts {
        let word = outcome_word(v.outcome);
        let measured = measured_text(v.measured_ms);
        out.push_str(&format!(
            "  {} {:<width$}  {:>8}  {}\n",
            paint(&format!("{word:<11}"), outcome_colour(v.outcome), colour),
            clean(&v.name),
            measured,
            clean(&super::verdict_message(record, v)),
        ));
    }
    out.push_str(&figures_text(record));
    let safety = super::safety_lines(record);
    if !safety.is_empty() {
        out.push_str("safety:\n");
        for line in safety {
            out.push_str(&format!("  {}\n", clean(&line)));
        }
    }
    for err in &record.errors {
        out.push_str(&format!(
            "{} {}\n",
            paint("error:", "31", colour),
            clean(err)
        ));
    }
    let score = record.score();
    out.push_str(&format!(
        "resilience score: {} ({})\n",
        score.value_text(),
        score.explain()
    ));
    let tally = tally(record);
    let line = match &record.outcome {
        RunOutcome::Passed => paint(&format!("PASSED: {tally}"), "32;1", colour),
        RunOutcome::Failed => paint(&format!("FAILED: {tally}"), "31;1", colour),
        RunOutcome::Error { message } => paint(
            &format!("ERROR: {} ({tally})", clean(message)),
            "31;1",
            colour,
        ),
        RunOutcome::Interrupted => paint(&format!("INTERRUPTED: {tally}"), "33;1", colour),
        RunOutcome::Skipped { reason } => {
            paint(&format!("SKIPPED: {}", clean(reason)), "33", colour)
        }
    };
    out.push_str(&line);
    out.push('\n');
    out
}

/// The recovery figures as text lines.
pub fn figures_text(record: &RunRecord) -> String {
    let f = &record.figures;
    let Some(step) = &f.fault_step else {
        return "recovery figures: no fault step ran\n".to_string();
    };
    let mut out = format!("recovery figures (from `{}`):\n", clean(step));
    for (label, value) in f.rows() {
        out.push_str(&format!("  {label:<26} {}\n", figure_text(value)));
    }
    out
}

/// The whole timeline as text, one entry per line.
pub fn timeline_text(record: &RunRecord) -> String {
    record
        .timeline
        .entries
        .iter()
        .map(|e| entry_line(e) + "\n")
        .collect()
}

/// One timeline entry as a line for the live view:
/// `+21.3s node lab-worker-2 Ready True→Unknown, +taint unreachable:NoExecute`.
pub fn entry_line(entry: &Entry) -> String {
    let at = format_offset_ms(entry.offset_ms);
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
            pod_change(before.as_ref(), after.as_ref())
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
        Event::Probe { name, up, detail } => {
            format!(
                "probe {name} {} ({detail})",
                if *up { "Up" } else { "Down" }
            )
        }
        Event::Run { phase } => match phase {
            RunPhase::ObserverReady { sources } => {
                format!("observer ready: the first lists of its {sources} sources are in")
            }
            RunPhase::Started => "experiment starts (observer synced)".to_string(),
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
            format_offset_ms(*due),
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
            format_offset_ms(*deadline_ms)
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
