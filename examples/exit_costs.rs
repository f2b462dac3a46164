//! What each thing a run does after its end costs in memory, measured on a real record:
//! the heap allocated (live, and at its highest) while the record is copied, written as
//! JSON, rendered as HTML and JUnit, and written as the report files. Built with the
//! counting allocator of `faultline::heap_samples` (issue 29: the end of a run was its
//! peak at 30,000 pods).
//!
//! ```text
//! cargo run --release --features heap-samples --example exit_costs -- RECORD.json [OUT_DIR]
//! ```
//!
//! Prints `figure exit_<what>_peak <MB> MB` (the highest heap above what was live before
//! it, while it ran) and `figure exit_<what>_kept <MB> MB` (what it left allocated).

use std::process::ExitCode;

use faultline::heap_samples::{self, Counting};
use faultline::record::RunRecord;

#[global_allocator]
static HEAP: Counting = Counting;

fn mb(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// Runs `f`, prints how far the heap rose above where it was while it ran and what it
/// kept, and returns what it made.
fn measure<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let before = heap_samples::live_bytes();
    heap_samples::reset_peak();
    let out = f();
    let peak = heap_samples::peak_bytes().saturating_sub(before);
    let kept = heap_samples::live_bytes().saturating_sub(before);
    println!("figure exit_{what}_peak {} MB", mb(peak));
    println!("figure exit_{what}_kept {} MB", mb(kept));
    out
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: exit_costs RECORD.json [OUT_DIR]");
        return ExitCode::from(2);
    };
    let out_dir = std::path::PathBuf::from(args.get(1).cloned().unwrap_or_else(|| {
        std::env::temp_dir()
            .join("faultline-exit-costs")
            .display()
            .to_string()
    }));
    let record = match measure("load", || RunRecord::load(std::path::Path::new(path))) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("exit_costs: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "figure exit_entries {} entries",
        record.timeline.entries.len()
    );
    let copy = measure("record_clone", || record.clone());
    drop(copy);
    let json = measure("json_text", || record.to_json().map(|t| t.len()));
    if let Ok(len) = json {
        println!("figure exit_json_bytes {} MB", mb(len));
    }
    let html = measure("html_render", || {
        faultline::report::html::render(&record).len()
    });
    println!("figure exit_html_bytes {} MB", mb(html));
    let junit = measure("junit_render", || {
        faultline::report::junit::render(&record).len()
    });
    println!("figure exit_junit_bytes {} MB", mb(junit));
    let written = measure("report_files", || {
        faultline::report::write_all(&record, &out_dir)
    });
    if let Err(e) = written {
        eprintln!("exit_costs: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
