//! Figures from one run record (`faultline run` writes it as `<experiment>.json`), for the
//! benchmark scripts: what the run says it cost, and whether its start was clean.
//!
//! Printed, one `figure <name><suffix> <value> <unit>` line each:
//! - `run_initial_sync_ms`: the observer's start to its first lists complete;
//! - `run_tick_p50_us`, `run_tick_p99_us`, `run_ticks`: the live judgements;
//! - `run_tick_cpu_p50_us`, `run_tick_cpu_p99_us`: their CPU time (the wait for a core left out);
//! - `run_pods_listed`, `run_pods_left_out`: pods of the first lists, and those the record
//!   counts instead of listing;
//! - `run_entries`: the timeline's length when observation ended;
//! - `run_pods_first_seen_after_start`: pods whose first entry comes after the experiment
//!   started (within WINDOW seconds of it, when given; or, as `@EPOCH`, before that wall
//!   time, in seconds since 1970: the moment a benchmark started creating pods). Over a
//!   stretch where nothing creates pods it must be 0: more means the run started before the
//!   pod lists had landed and existing pods were recorded as created during it.
//!
//! `cargo run --release --example record_costs -- RECORD.json [SUFFIX [WINDOW|@EPOCH]]`

use std::process::ExitCode;

use faultline::record::RunRecord;
use faultline::timeline::Event;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: record_costs RECORD.json [SUFFIX]");
        return ExitCode::from(2);
    };
    let suffix = args.next().unwrap_or_default();
    // Entries count while `inside(offset_ms, wall)` holds.
    let (window_ms, until_wall) = match args.next() {
        None => (i64::MAX, None),
        Some(w) => match w.strip_prefix('@') {
            Some(epoch) => match epoch.parse::<f64>() {
                Ok(s) => (i64::MAX, Some((s * 1e6) as i64)),
                Err(e) => {
                    eprintln!("record_costs: @EPOCH is seconds since 1970: {e}");
                    return ExitCode::from(2);
                }
            },
            None => match w.parse::<i64>() {
                Ok(seconds) => (seconds.saturating_mul(1000), None),
                Err(e) => {
                    eprintln!("record_costs: WINDOW is a number of seconds: {e}");
                    return ExitCode::from(2);
                }
            },
        },
    };
    let record = match RunRecord::load(std::path::Path::new(&path)) {
        Ok(record) => record,
        Err(e) => {
            eprintln!("record_costs: {e}");
            return ExitCode::from(2);
        }
    };
    let figure = |name: &str, value: String, unit: &str| {
        println!("figure {name}{suffix} {value} {unit}");
    };
    if let Some(costs) = &record.costs {
        figure(
            "run_initial_sync_ms",
            costs.initial_sync_ms.to_string(),
            "ms",
        );
        figure("run_ticks", costs.ticks.to_string(), "ticks");
        figure("run_tick_p50_us", costs.tick_p50_us.to_string(), "us");
        figure("run_tick_p99_us", costs.tick_p99_us.to_string(), "us");
        figure(
            "run_tick_cpu_p50_us",
            costs.tick_cpu_p50_us.to_string(),
            "us",
        );
        figure(
            "run_tick_cpu_p99_us",
            costs.tick_cpu_p99_us.to_string(),
            "us",
        );
        figure("run_pods_listed", costs.pods_listed.to_string(), "pods");
        figure("run_pods_left_out", costs.pods_left_out.to_string(), "pods");
        figure("run_entries", costs.entries.to_string(), "entries");
    }
    if let Some(start) = record.start_ms {
        let late = record
            .timeline
            .entries
            .iter()
            .filter(|e| e.offset_ms > start && e.offset_ms - start <= window_ms)
            .filter(|e| until_wall.is_none_or(|u| e.wall.timestamp_micros() < u))
            .filter(|e| matches!(e.event, Event::Pod { before: None, .. }))
            .count();
        figure("run_pods_first_seen_after_start", late.to_string(), "pods");
    }
    ExitCode::SUCCESS
}
