//! Experiment files are user input: `parse` must answer any UTF-8 text with an experiment
//! or diagnostics, never a panic. Run with `cargo +nightly fuzz run experiment_parse`
//! (seed the corpus from `fixtures/experiments/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = faultline::experiment::parse(text, std::path::Path::new("fuzz.yaml"));
});
