//! Recorded API objects under `fixtures/api/`, loaded for unit tests.

use serde::de::DeserializeOwned;

/// Parses `fixtures/api/<name>`; panics only in tests, on a broken fixture.
pub(crate) fn load<T: DeserializeOwned>(name: &str) -> T {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/api")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}
