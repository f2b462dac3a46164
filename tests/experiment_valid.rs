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
