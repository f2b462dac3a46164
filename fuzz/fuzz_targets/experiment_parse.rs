//! Experiment files are user input: `parse` must answer any UTF-8 text with an experiment
//! or diagnostics, never a panic or a hang. Run bounded with `ci/fuzz` (seeds the corpus from
//! `fixtures/experiments/` and `experiments/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = faultline::experiment::parse(text, std::path::Path::new("fuzz.yaml"));
});
