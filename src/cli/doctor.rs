//! `faultline doctor -i INVENTORY [EXPERIMENT…]`: every check a run relies on, as a table
//! (or JSON), exit 1 on any failure.

use std::path::{Path, PathBuf};

use super::{ApiArgs, DoctorOutput, EXIT_ERROR, EXIT_FAILED, EXIT_OK, NamespaceArg};
use crate::doctor;

/// Loads the inventory and the experiments (if any), examines, prints, and returns the
/// exit code: 0 nothing failed, 1 a check failed, 2 the input could not be read.
pub(super) async fn doctor(
    inventory: &Path,
    paths: &[PathBuf],
    api: &ApiArgs,
    namespace: &NamespaceArg,
    output: DoctorOutput,
    insecure_ignore_host_keys: bool,
) -> i32 {
    let experiments = if paths.is_empty() {
        Vec::new()
    } else {
        match super::load_experiments_in(paths, namespace) {
            Some(e) => e,
            None => return EXIT_ERROR,
        }
    };
    let Some(mut inventory) = super::load_inventory(inventory, api) else {
        return EXIT_ERROR;
    };
    if insecure_ignore_host_keys {
        inventory.set_insecure_ignore_host_keys(true);
    }
    let exam = doctor::examine(&inventory, &experiments).await;
    // The refused permissions as rules ready to paste: `rbac` writes them, from doctor's
    // findings, so doctor itself never reaches up into it.
    let rules = (!exam.missing.is_empty()).then(|| crate::rbac::paste_ready(&exam.missing));
    match output {
        DoctorOutput::Text => crate::report::colour::print_styled(&crate::report::colour::doctor(
            &doctor::report::table(&exam, rules.as_deref()),
        )),
        DoctorOutput::Json => println!("{}", doctor::report::json(&exam, rules.as_deref())),
    }
    if exam.failed() { EXIT_FAILED } else { EXIT_OK }
}
