//! Benchmark figures for fan-out: one step on many nodes at once, read from the run record
//! of `fixtures/bench/fanout.yaml` (`ci/bench-fanout` runs it on the netns lab with
//! `LAB_WORKERS=20` and calls this).
//!
//! The `stamp` step runs `date +%s.%N` on every worker; the lab's nodes are network
//! namespaces on one kernel, so their clocks are the runner's and each output is the
//! instant that node's command started. Printed, one `figure <name> <value> <unit>` line
//! each, for the step named on the command line (default `stamp`), with `<step>` its name
//! in snake case:
//! - `fanout_<step>_nodes`: how many nodes the step acted on;
//! - `fanout_<step>_issue_error_ms`: the step's first `issued` entry after its scheduled
//!   offset (what the scheduler adds);
//! - `fanout_<step>_issue_spread_ms`: first to last node's `issued` entry;
//! - `fanout_<step>_start_spread_ms`: first to last node's command start, on the nodes
//!   (only for a step whose output is a `date +%s.%N` stamp);
//! - `fanout_<step>_start_error_ms` and `fanout_<step>_last_start_error_ms`: the first and
//!   the last node's command start after the scheduled instant (the same);
//! - `fanout_<step>_done_ms`: the scheduled instant to the last node's `finished` entry;
//! - `fanout_<step>_armed_lead_ms`: how long before the scheduled offset the step's nodes
//!   were armed (negative: after it).
//!
//! `cargo run --release --example bench_fanout -- RECORD.json [STEP ...]`

use std::process::ExitCode;

use faultline::record::RunRecord;
use faultline::timeline::{Event, StepPhase};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: bench_fanout RECORD.json [STEP ...]");
        return ExitCode::from(2);
    };
    let record = match RunRecord::load(std::path::Path::new(&path)) {
        Ok(record) => record,
        Err(e) => {
            eprintln!("bench_fanout: {e}");
            return ExitCode::from(2);
        }
    };
    let mut steps: Vec<String> = args.collect();
    if steps.is_empty() {
        steps.push("stamp".to_string());
    }
    let mut ok = true;
    for step in &steps {
        match figures(&record, step) {
            Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
            Err(e) => {
                eprintln!("bench_fanout: step `{step}`: {e}");
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What the timeline says about one step.
#[derive(Default)]
struct StepEntries {
    due_ms: Option<i64>,
    armed: Vec<i64>,
    issued: Vec<i64>,
    finished: Vec<i64>,
    /// Node-side start instants, seconds since the epoch, from `date +%s.%N` outputs.
    started_s: Vec<f64>,
}

fn collect(record: &RunRecord, step: &str) -> StepEntries {
    let mut out = StepEntries::default();
    for entry in &record.timeline.entries {
        match &entry.event {
            Event::Schedule {
                step: s,
                due_ms: Some(due),
                ..
            } if s == step => out.due_ms = Some(*due),
            Event::Step { step: s, phase, .. } if s == step => match phase {
                StepPhase::Armed { .. } => out.armed.push(entry.offset_ms),
                StepPhase::Issued => out.issued.push(entry.offset_ms),
                StepPhase::Finished { output, .. } => {
                    out.finished.push(entry.offset_ms);
                    if let Ok(s) = output.trim().parse::<f64>() {
                        out.started_s.push(s);
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    out
}

fn figures(record: &RunRecord, step: &str) -> Result<Vec<String>, String> {
    let seen = collect(record, step);
    let due_ms = seen
        .due_ms
        .ok_or("no scheduled offset on the timeline (is it a timed step?)")?;
    let first_issued = *seen.issued.iter().min().ok_or("never issued")?;
    let last_issued = *seen.issued.iter().max().ok_or("never issued")?;
    let name = step.replace([' ', '-'], "_");
    let figure = |what: &str, value: String, unit: &str| {
        format!("figure fanout_{name}_{what} {value} {unit}")
    };
    let mut lines = vec![
        figure("nodes", seen.issued.len().to_string(), "nodes"),
        figure("issue_error_ms", (first_issued - due_ms).to_string(), "ms"),
        figure(
            "issue_spread_ms",
            (last_issued - first_issued).to_string(),
            "ms",
        ),
    ];
    if let Some(zero) = record.timeline.zero
        && !seen.started_s.is_empty()
        && seen.started_s.len() == seen.issued.len()
    {
        let scheduled_s = (zero.timestamp_micros() as f64 + due_ms as f64 * 1000.0) / 1e6;
        let first = seen.started_s.iter().copied().fold(f64::INFINITY, f64::min);
        let last = seen
            .started_s
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        let ms = |s: f64| format!("{:.1}", s * 1000.0);
        lines.push(figure("start_spread_ms", ms(last - first), "ms"));
        lines.push(figure("start_error_ms", ms(first - scheduled_s), "ms"));
        lines.push(figure("last_start_error_ms", ms(last - scheduled_s), "ms"));
    }
    if let Some(last) = seen.finished.iter().max() {
        lines.push(figure("done_ms", (last - due_ms).to_string(), "ms"));
    }
    if let Some(armed) = seen.armed.iter().min() {
        lines.push(figure("armed_lead_ms", (due_ms - armed).to_string(), "ms"));
    }
    Ok(lines)
}
