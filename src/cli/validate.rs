//! `faultline validate`: check experiment files without a cluster, and the blast-radius
//! interlocks as far as a file alone decides them.

use std::path::{Path, PathBuf};

use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, NamespaceArg};

/// Validates every file, printing every problem as `file:line:column: message`, and the
/// warnings of the files (which do not make a file invalid). With `-n`, also checks that
/// each valid experiment can be moved to that namespace: one that cannot is said why and
/// makes the exit code 2, as `run -n` would refuse it before anything runs.
///
/// With an inventory, also refuses the steps its transports cannot carry out, and what an
/// offline `plan -i` finds a run would not get past (a step no node can carry out, a
/// target no node can be, the only API server's node faulted, an expectation the node
/// failure model says cannot hold).
pub(super) fn validate(
    paths: &[PathBuf],
    namespace: &NamespaceArg,
    inventory: Option<&Path>,
) -> i32 {
    let inventory = match inventory.map(crate::inventory::Inventory::load).transpose() {
        Ok(inv) => inv,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_ERROR;
        }
    };
    let results = crate::experiment::load_all_checked(paths);
    if results.is_empty() {
        eprintln!("no experiment files found in {}", super::show_paths(paths));
        return EXIT_FAILED;
    }
    let mut bad = 0;
    let mut refused_namespace = 0;
    for (path, checked) in &results {
        for w in checked.warnings.iter() {
            println!("{}", w.as_warning());
        }
        match &checked.result {
            // The blast radius as far as the file alone decides it: targets that name
            // their nodes, step times without cluster timers.
            Ok(exp)
                if let Some(missing) = inventory.as_ref().and_then(|inv| {
                    crate::capability::missing(&exp.requires, &inv.cluster().capabilities())
                }) =>
            {
                println!(
                    "{}: ok, but a run on this cluster skips it ({}): {}",
                    path.display(),
                    exp.name,
                    missing.explained()
                );
            }
            Ok(exp) => {
                let problems = inventory
                    .as_ref()
                    .map(|inv| super::plan::offline_problems(exp, inv))
                    .unwrap_or_default();
                match crate::run::preflight::safety::check_offline(exp, None).and_then(|()| {
                    inventory.as_ref().map_or(Ok(()), |inv| {
                        crate::run::preflight::safety::check_transport(exp, inv)
                    })
                }) {
                    // What `plan -i` finds a run would not get past refuses the file too.
                    Ok(()) if !problems.is_empty() => {
                        bad += 1;
                        println!("{}: refused on this inventory:", path.display());
                        for p in &problems {
                            println!("  {}", p.line());
                        }
                    }
                    Ok(()) => match namespace.namespace.as_deref() {
                        None => println!(
                            "{}: ok ({}: {} step(s), {} expectation(s))",
                            path.display(),
                            exp.name,
                            exp.steps.len(),
                            exp.expectations.len()
                        ),
                        Some(ns) => match super::namespace::moved_to(exp.clone(), ns) {
                            Ok(_) => println!(
                                "{}: ok ({}: {} step(s), {} expectation(s), in namespace {ns})",
                                path.display(),
                                exp.name,
                                exp.steps.len(),
                                exp.expectations.len()
                            ),
                            Err(e) => {
                                refused_namespace += 1;
                                println!("{}: refused: {e}", path.display());
                            }
                        },
                    },
                    Err(e) => {
                        bad += 1;
                        println!("{}: refused: {e}", path.display());
                    }
                }
            }
            Err(diagnostics) => {
                bad += 1;
                println!("{diagnostics}");
            }
        }
    }
    println!(
        "{} file(s), {} valid, {} invalid",
        results.len(),
        results.len() - bad,
        bad
    );
    if refused_namespace > 0 {
        println!(
            "{refused_namespace} file(s) cannot run with -n {}",
            namespace.namespace.as_deref().unwrap_or_default()
        );
        EXIT_ERROR
    } else if bad == 0 {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}
