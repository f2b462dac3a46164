//! The diagnostics corpus: every `fixtures/experiments/invalid/NN-name.yaml` must be rejected
//! with exactly the diagnostics listed in `NN-name.expected` (`line:column: message`, one
//! per line). Adding a pair of files adds a case; a message that drifts fails here.

use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/experiments/invalid")
}

/// Compares one broken file with its expectation; `Err` describes the mismatch.
fn check(yaml: &Path) -> Result<(), String> {
    let expected_path = yaml.with_extension("expected");
    let expected = std::fs::read_to_string(&expected_path)
        .map_err(|e| format!("{}: no .expected file ({e})", yaml.display()))?;
    let expected: Vec<&str> = expected
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    let got: Vec<String> = match faultline::experiment::load(yaml) {
        Ok(_) => return Err(format!("{}: parsed as valid", yaml.display())),
        Err(d) => d
            .iter()
            .map(|d| {
                assert_eq!(d.path, yaml, "diagnostic names another file");
                format!("{}:{}: {}", d.line, d.column, d.message)
            })
            .collect(),
    };
    if got != expected {
        return Err(format!(
            "{}:\n  expected:\n    {}\n  got:\n    {}",
            yaml.display(),
            expected.join("\n    "),
            got.join("\n    ")
        ));
    }
    Ok(())
}

#[test]
fn every_broken_file_gets_exactly_its_expected_diagnostics() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("corpus directory exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 35, "corpus has only {} files", files.len());
    let failures: Vec<String> = files.iter().filter_map(|f| check(f).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} corpus files failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn every_expected_file_has_its_experiment() {
    for entry in std::fs::read_dir(corpus_dir()).expect("corpus directory exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|x| x == "expected") {
            assert!(
                path.with_extension("yaml").is_file(),
                "{} has no .yaml",
                path.display()
            );
        }
    }
}

#[test]
fn display_carries_path_position_and_hint() {
    let yaml = corpus_dir().join("10-unknown-action.yaml");
    let d = faultline::experiment::load(&yaml).expect_err("corpus file is invalid");
    assert_eq!(
        d.to_string(),
        format!(
            "{}:8:9: unknown action `kubelet_stop`\n  hint: did you mean `kubelet-stop`?",
            yaml.display()
        )
    );
}
