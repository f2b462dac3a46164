//! What one live judgement costs over a recorded run: the expectations judged on the
//! run's index, and the abort conditions checked, as each tick of the run loop does.
//! A measurement made by hand, outside the run loop (which prints nothing itself).
//!
//! ```text
//! cargo run --release --example tick_cost -- RECORD.json
//! ```
//!
//! Prints `figure tick_{judge,aborts}_us <µs> us`, each the mean of 200 rounds.

use std::process::ExitCode;

use faultline::judge::{self, Observed, TimelineIndex};
use faultline::record::RunRecord;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: tick_cost RECORD.json");
        return ExitCode::from(2);
    };
    let record = match RunRecord::load(std::path::Path::new(&path)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tick_cost: {e}");
            return ExitCode::from(2);
        }
    };
    let index = TimelineIndex::of(&record.timeline);
    let start = record.start_ms.unwrap_or(0);
    let now = start + 3_000;
    let mean_us = |f: &dyn Fn()| {
        let t0 = std::time::Instant::now();
        for _ in 0..200 {
            f();
        }
        t0.elapsed().as_secs_f64() * 1e6 / 200.0
    };
    let judged = mean_us(&|| {
        std::hint::black_box(judge::judge_index(
            &record.experiment,
            &record.targets,
            &record.cluster.timers,
            &record.cluster.capabilities,
            &index,
            Observed {
                until_ms: now,
                complete: false,
            },
        ));
    });
    let aborts = mean_us(&|| {
        std::hint::black_box(judge::check_aborts(
            &record.experiment.abort,
            &record.targets,
            &record.cluster.timers,
            &index,
            start,
            now,
        ));
    });
    println!("figure tick_judge_us {judged:.0} us");
    println!("figure tick_aborts_us {aborts:.0} us");
    ExitCode::SUCCESS
}
