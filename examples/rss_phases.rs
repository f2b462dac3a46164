//! Where a `faultline run`'s memory grew, phase by phase: its RSS samples (taken beside it
//! by `ci/bench-scale` every 100 ms from `/proc/PID/status`) cut at the moments its own
//! timeline names.
//!
//! ```text
//! cargo run --release --example rss_phases -- RECORD.json SAMPLES.txt [SUFFIX]
//! ```
//!
//! SAMPLES.txt holds one line per sample, `EPOCH_SECONDS VMRSS_KB VMHWM_KB`. The phases,
//! each ending at the wall time of the timeline entry that closes it:
//! - `sync`: the launch to `run`/`observer-ready` (every first list in, the readiness wait);
//! - `snapshot`: to `run`/`started` (the probes and the cluster snapshot before the first fault);
//! - `steps`: to `run`/`observation-ended` (the steps, their proofs, the abort sampling);
//! - `restore`: to the `restored` entry (undo, the safety net, the restored check);
//! - `teardown`: to `run`/`ended` (teardown, the final verdicts);
//! - `exit`: to the last sample (the record and the reports written).
//!
//! Printed, one `figure rss_<phase>_max<SUFFIX> <MB> MB` line per phase (the highest RSS
//! sampled in it) and `figure rss_<phase>_end<SUFFIX> <MB> MB` (the RSS at its end), then
//! `figure rss_hwm<SUFFIX>` (the last VmHWM sampled), and `figure reports_written_s<SUFFIX>`:
//! from the run's `ended` entry to the last sample, the time the record and the reports
//! took to be written (within the 100 ms between samples).

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use faultline::record::RunRecord;
use faultline::timeline::{Event, RunPhase};

/// One sample: wall time, VmRSS and VmHWM in KiB.
struct Sample {
    at: f64,
    rss_kb: u64,
    hwm_kb: u64,
}

fn parse_samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            Some(Sample {
                at: f.next()?.parse().ok()?,
                rss_kb: f.next()?.parse().ok()?,
                hwm_kb: f.next()?.parse().ok()?,
            })
        })
        .collect()
}

fn epoch(t: DateTime<Utc>) -> f64 {
    t.timestamp_micros() as f64 / 1e6
}

/// The phase names and the wall time each ends at (`None`: the record has no such entry).
fn boundaries(record: &RunRecord) -> Vec<(&'static str, Option<f64>)> {
    let find = |pred: &dyn Fn(&Event) -> bool| {
        record
            .timeline
            .entries
            .iter()
            .find(|e| pred(&e.event))
            .map(|e| epoch(e.wall))
    };
    vec![
        (
            "sync",
            find(&|e| {
                matches!(
                    e,
                    Event::Run {
                        phase: RunPhase::ObserverReady { .. }
                    }
                )
            }),
        ),
        (
            "snapshot",
            find(&|e| {
                matches!(
                    e,
                    Event::Run {
                        phase: RunPhase::Started { .. }
                    }
                )
            }),
        ),
        (
            "steps",
            find(&|e| {
                matches!(
                    e,
                    Event::Run {
                        phase: RunPhase::ObservationEnded { .. }
                    }
                )
            }),
        ),
        ("restore", find(&|e| matches!(e, Event::Restored { .. }))),
        (
            "teardown",
            find(&|e| {
                matches!(
                    e,
                    Event::Run {
                        phase: RunPhase::Ended { .. }
                    }
                )
            }),
        ),
        ("exit", Some(f64::INFINITY)),
    ]
}

fn mb(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(record_path), Some(samples_path)) = (args.first(), args.get(1)) else {
        eprintln!("usage: rss_phases RECORD.json SAMPLES.txt [SUFFIX]");
        return ExitCode::from(2);
    };
    let suffix = args.get(2).cloned().unwrap_or_default();
    let record = match RunRecord::load(std::path::Path::new(record_path)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rss_phases: {e}");
            return ExitCode::from(2);
        }
    };
    let samples = match std::fs::read_to_string(samples_path) {
        Ok(text) => parse_samples(&text),
        Err(e) => {
            eprintln!("rss_phases: {samples_path}: {e}");
            return ExitCode::from(2);
        }
    };
    if samples.is_empty() {
        eprintln!("rss_phases: no samples in {samples_path}");
        return ExitCode::from(2);
    }
    let mut from = f64::NEG_INFINITY;
    let phases = boundaries(&record);
    // The record and the reports are written after the run's `ended` entry; the process is
    // gone at most one sampling interval (100 ms) after its last sample.
    let ended = phases
        .iter()
        .find(|(phase, _)| *phase == "teardown")
        .and_then(|(_, end)| *end);
    if let (Some(ended), Some(last)) = (ended, samples.last()) {
        println!("figure reports_written_s{suffix} {:.2} s", last.at - ended);
    }
    for (phase, end) in phases {
        let Some(end) = end else {
            eprintln!("rss_phases: the record has no end for phase {phase}; skipped");
            continue;
        };
        let inside: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.at > from && s.at <= end)
            .collect();
        from = end;
        let (Some(max), Some(last)) = (inside.iter().map(|s| s.rss_kb).max(), inside.last()) else {
            continue;
        };
        println!("figure rss_{phase}_max{suffix} {} MB", mb(max));
        println!("figure rss_{phase}_end{suffix} {} MB", mb(last.rss_kb));
    }
    if let Some(last) = samples.last() {
        println!("figure rss_hwm{suffix} {} MB", mb(last.hwm_kb));
    }
    ExitCode::SUCCESS
}
