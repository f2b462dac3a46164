//! Every file under `fixtures/experiments/valid/` must parse: they are the examples the
//! documentation points to, so a format change that breaks them is caught here.

use std::path::PathBuf;

#[test]
fn every_valid_example_parses() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/experiments/valid");
    let results = faultline::experiment::load_all(std::slice::from_ref(&dir));
    assert!(
        results.len() >= 3,
        "expected at least 3 valid examples, found {}",
        results.len()
    );
    for (path, result) in results {
        if let Err(d) = result {
            panic!("{} should be valid:\n{d}", path.display());
        }
    }
}

#[test]
fn load_all_takes_files_and_directories_and_reports_unreadable_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = "name: a\ndescription: x\ntargets: {v: {role: worker}}\nsteps: [{do: reboot, at: 0s, target: v}]\nexpect: [{name: e, node: v, eventually: Ready}]\n";
    std::fs::write(dir.path().join("b.yml"), good).expect("write");
    std::fs::write(dir.path().join("a.yaml"), good).expect("write");
    std::fs::write(dir.path().join("notes.txt"), "not an experiment").expect("write");
    std::fs::create_dir(dir.path().join("sub.yaml")).expect("mkdir");
    let missing = dir.path().join("missing.yaml");
    let results = faultline::experiment::load_all(&[dir.path().to_path_buf(), missing.clone()]);
    let names: Vec<PathBuf> = results.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(
        names,
        vec![
            dir.path().join("a.yaml"),
            dir.path().join("b.yml"),
            missing.clone()
        ]
    );
    assert!(results[0].1.is_ok() && results[1].1.is_ok());
    let err = results[2].1.as_ref().expect_err("missing file is an error");
    assert_eq!(err.len(), 1);
    assert_eq!(
        err.to_string(),
        format!("{}: no such file", missing.display())
    );
}

/// Truncating or corrupting a valid file anywhere must give diagnostics, never a panic:
/// experiment files are user input.
#[test]
fn mangled_files_never_panic() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/experiments/valid");
    let path = dir.join("kubelet-stop-past-toleration.yaml");
    let text = std::fs::read_to_string(&path).expect("fixture");
    let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    for &cut in boundaries.iter().step_by(3) {
        let _ = faultline::experiment::parse(&text[..cut], &path);
        let mut swapped = String::from(&text[..cut]);
        swapped.push_str("\u{9}: [");
        swapped.push_str(&text[cut..]);
        let _ = faultline::experiment::parse(&swapped, &path);
    }
}

/// The shipped experiment library must always validate (what `faultline validate
/// experiments/` checks in CI).
#[test]
fn every_shipped_experiment_validates() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
    let results = faultline::experiment::load_all(&[dir]);
    assert!(!results.is_empty(), "no experiments shipped");
    for (path, result) in results {
        if let Err(d) = result {
            panic!("{} does not validate:\n{d}", path.display());
        }
    }
}

/// The shipped conformance suite validates, writes no expectation, and asks for
/// conformance (what `faultline conformance` runs).
#[test]
fn the_conformance_suite_validates_with_no_bound_written() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/conformance");
    let results = faultline::experiment::load_all(&[dir]);
    assert!(results.len() >= 2, "{results:?}");
    for (path, result) in results {
        let e = result.unwrap_or_else(|d| panic!("{}:\n{d}", path.display()));
        assert!(e.conformance, "{}", path.display());
        assert!(e.expectations.is_empty(), "{}", path.display());
    }
}

const CONFORMANCE_BASE: &str =
    "name: c\ndescription: d\nnamespace: n\ntargets:\n  v: {role: worker, count: 1}\n";

fn conformance_errors(body: &str) -> String {
    let text = format!("{CONFORMANCE_BASE}{body}");
    match faultline::experiment::parse(&text, std::path::Path::new("c.yaml")) {
        Ok(e) => format!(
            "ok conformance={} expectations={}",
            e.conformance,
            e.expectations.len()
        ),
        Err(d) => d.to_string(),
    }
}

#[test]
fn expect_conformance_is_a_word_or_an_item_beside_expectations() {
    let steps = "steps:\n  - {name: stop, at: 0s, do: kubelet-stop, target: v}\n  - {name: start, at: 60s, do: kubelet-start, target: v}\n";
    assert_eq!(
        conformance_errors(&format!("{steps}expect: conformance\n")),
        "ok conformance=true expectations=0"
    );
    assert_eq!(
        conformance_errors(&format!(
            "{steps}expect:\n  - conformance: true\n  - {{name: down, node: v, becomes: Unknown, within: 60s}}\n"
        )),
        "ok conformance=true expectations=1"
    );
    // A misspelt word, at its place.
    let e = conformance_errors(&format!("{steps}expect: conformanse\n"));
    assert!(
        e.contains("c.yaml:9:9") && e.contains("`expect: conformanse` is not known"),
        "{e}"
    );
    // The item stands alone.
    let e = conformance_errors(&format!(
        "{steps}expect:\n  - {{conformance: true, name: x}}\n"
    ));
    assert!(
        e.contains("c.yaml:10:5") && e.contains("stands alone"),
        "{e}"
    );
    // No fault the model covers: said, with the ones it does.
    let e = conformance_errors(
        "steps:\n  - {name: cordon, at: 0s, do: cordon, target: v}\nexpect: conformance\n",
    );
    assert!(
        e.contains("judges nothing here") && e.contains("kubelet-stop"),
        "{e}"
    );
}
