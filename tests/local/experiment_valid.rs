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
