//! `faultline validate` says every problem of a file in one pass: the unknown keys and
//! the problems of the rest of the file together, in file order, each once (issue 47,
//! item 9), through the built binary, as text and as JSON.

use std::path::Path;
use std::process::{Command, Output};

const FIXTURE: &str = "fixtures/experiments/invalid/86-unknown-keys-and-other-problems.yaml";

fn validate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_faultline"))
        .arg("validate")
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("FAULTLINE_INVENTORY")
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("faultline runs")
}

#[test]
fn unknown_keys_and_the_other_problems_come_in_one_json_verdict_in_file_order() {
    let out = validate(&[FIXTURE, "-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let verdicts: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let v = &verdicts[0];
    assert_eq!(v["status"], "invalid");
    let problems = v["problems"].as_array().expect("problems");
    let at: Vec<(u64, u64)> = problems
        .iter()
        .map(|p| {
            (
                p["line"].as_u64().unwrap_or(0),
                p["column"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let mut sorted = at.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(at, sorted, "in file order, each once: {problems:?}");
    let messages: Vec<&str> = problems
        .iter()
        .filter_map(|p| p["message"].as_str())
        .collect();
    let unknown = messages
        .iter()
        .filter(|m| m.starts_with("unknown key"))
        .count();
    assert_eq!(unknown, 4, "{messages:?}");
    for other in [
        "`0` has no unit",
        "duplicate step name `stop`",
        "unknown target `nobody`",
        "`Terminating` is a pod state, not a node state",
        "duplicate expectation name `down`",
    ] {
        assert!(messages.contains(&other), "{other} missing: {messages:?}");
    }
}

#[test]
fn the_text_says_each_problem_at_its_file_line_and_column() {
    let out = validate(&[FIXTURE]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    for place in [
        "3:1: unknown key `hypothesis`",
        "8:9: `0` has no unit",
        "13:5: unknown key `timout`",
    ] {
        assert!(
            text.contains(&format!("{FIXTURE}:{place}")),
            "{place}: {text}"
        );
    }
    assert!(text.contains("0 valid, 1 invalid"), "{text}");
}
