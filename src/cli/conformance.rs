//! `faultline conformance`: runs a conformance suite (the shipped one unless experiment
//! paths are given) as `faultline run` does, then writes one conformance report over its
//! runs (`conformance.md` beside the other reports) and prints it.

use std::path::{Path, PathBuf};

use super::{EXIT_ERROR, RunArgs};
use crate::conformance::report;
use crate::record::RunRecord;

/// The shipped suite, built into the binary so that an installed faultline carries it:
/// each file at its path from the repository's root (the experiments name their
/// manifests relative to themselves).
const SUITE: &[(&str, &str)] = &[
    (
        "experiments/conformance/kubelet-stop.yaml",
        include_str!("../../experiments/conformance/kubelet-stop.yaml"),
    ),
    (
        "experiments/conformance/partition-healed.yaml",
        include_str!("../../experiments/conformance/partition-healed.yaml"),
    ),
    (
        "experiments/conformance/reboot.yaml",
        include_str!("../../experiments/conformance/reboot.yaml"),
    ),
    (
        "fixtures/lab/00-namespace.yaml",
        include_str!("../../fixtures/lab/00-namespace.yaml"),
    ),
    (
        "fixtures/lab/web-deployment.yaml",
        include_str!("../../fixtures/lab/web-deployment.yaml"),
    ),
    (
        "fixtures/lab/db-statefulset.yaml",
        include_str!("../../fixtures/lab/db-statefulset.yaml"),
    ),
    (
        "fixtures/lab/agent-daemonset.yaml",
        include_str!("../../fixtures/lab/agent-daemonset.yaml"),
    ),
];

/// Writes the shipped suite under `<out>/suite`; returns the directory of its experiments.
fn write_suite(out: &Path) -> std::io::Result<PathBuf> {
    let root = out.join("suite");
    for (path, text) in SUITE {
        let file = root.join(path);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&file, text)?;
    }
    Ok(root.join("experiments/conformance"))
}

/// Runs the suite, writes and prints the conformance report; the exit code is the run's.
pub(super) async fn conformance(mut args: RunArgs) -> i32 {
    if args.paths.is_empty() {
        match write_suite(&args.out) {
            Ok(dir) => args.paths = vec![dir],
            Err(e) => {
                fail!(
                    "cannot write the conformance suite under {}: {e}",
                    args.out.display()
                );
                return EXIT_ERROR;
            }
        }
    }
    let names: Vec<String> = crate::experiment::load_all(&args.paths)
        .into_iter()
        .filter_map(|(_, e)| e.ok())
        .filter(|e| e.conformance)
        .map(|e| e.name)
        .collect();
    if names.is_empty() && !args.dry_run {
        fail!("no experiment with `expect: conformance` among the paths given");
        return EXIT_ERROR;
    }
    let out = args.out.clone();
    let dry_run = args.dry_run;
    let started = std::time::Instant::now();
    let code = super::run::run(args).await;
    let wall = started.elapsed();
    if dry_run {
        return code;
    }
    let records: Vec<RunRecord> = names
        .iter()
        .filter_map(|n| {
            let path = out.join(format!("{}.json", crate::report::file_stem(n)));
            RunRecord::load(&path).ok()
        })
        .collect();
    if records.is_empty() {
        // The runs refused or failed before recording anything: what they said is above.
        fail!("no conformance run was recorded: no conformance report");
        return code.max(EXIT_ERROR);
    }
    let path = out.join("conformance.md");
    if let Err(e) = std::fs::write(&path, report::markdown(&records, Some(wall))) {
        fail!("cannot write {}: {e}", path.display());
        return code.max(EXIT_ERROR);
    }
    say!("{}", report::text(&records, Some(wall)));
    say!("conformance report: {}", path.display());
    code
}
