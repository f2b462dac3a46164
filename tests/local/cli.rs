//! Running the faultline binary from the repository root, as the CLI tests do.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The repository root: relative paths in the commands resolve from it.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `faultline ARGS` from the repository root, its output echoed for a failing test's log.
pub(crate) fn faultline(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("faultline runs");
    println!("{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}
