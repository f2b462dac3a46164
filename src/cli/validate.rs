//! `faultline validate`: check experiment files without a cluster, and the blast-radius
//! interlocks as far as a file alone decides them. Each file's verdict is decided first
//! ([`FileVerdict`]), then printed as text for people or as JSON for tools.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::place::Place;
use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, NamespaceArg, ValidateFormat};
use crate::experiment::model::Experiment;

/// What `validate` decided about one file.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FileVerdict {
    /// The file.
    file: PathBuf,
    /// The verdict.
    status: Status,
    /// The experiment's name, when the file parsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// Its steps and expectations, counted, when the file parsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    steps: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expectations: Option<usize>,
    /// Why it is not `ok`, one sentence each (a refusal's or a skip's reasons).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reasons: Vec<String>,
    /// Problems at their place in the file (`invalid`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    problems: Vec<Place>,
    /// Things to look at in a valid file too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<Place>,
    /// Refused by what an offline `plan -i` finds (said as a list), not by an interlock.
    #[serde(skip)]
    by_plan: bool,
}

/// A file's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Status {
    /// Valid, and nothing refuses it.
    Ok,
    /// Valid, but a run on the inventory's cluster skips it (a capability it lacks).
    Skipped,
    /// Not valid: problems at their places.
    Invalid,
    /// Valid, but an interlock, the inventory's transports or an offline plan refuse it.
    Refused,
    /// Valid, but it cannot run in the namespace `-n` names.
    NamespaceRefused,
}

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
    format: ValidateFormat,
) -> i32 {
    let inventory = match inventory.map(crate::inventory::Inventory::load).transpose() {
        Ok(inv) => inv,
        Err(e) => {
            fail!("{e}");
            return EXIT_ERROR;
        }
    };
    let results = crate::experiment::load_all_checked(paths);
    if results.is_empty() {
        fail!("no experiment files found in {}", super::show_paths(paths));
        return EXIT_FAILED;
    }
    let ns = namespace.namespace.as_deref();
    let verdicts: Vec<FileVerdict> = results
        .iter()
        .map(|(path, checked)| {
            let mut v = match &checked.result {
                Ok(exp) => judge(path, exp, inventory.as_ref(), ns),
                Err(diagnostics) => FileVerdict {
                    problems: diagnostics.iter().map(Place::from).collect(),
                    ..FileVerdict::new(path, Status::Invalid, None)
                },
            };
            v.warnings = checked.warnings.iter().map(Place::from).collect();
            (v, checked)
        })
        .map(|(v, checked)| {
            if format == ValidateFormat::Text {
                print_text(&v, checked, ns);
            }
            v
        })
        .collect();
    let count = |s: Status| verdicts.iter().filter(|v| v.status == s).count();
    let bad = count(Status::Invalid) + count(Status::Refused);
    let refused_namespace = count(Status::NamespaceRefused);
    match format {
        ValidateFormat::Text => {
            // A file that cannot run in the namespace is not counted valid, or the line
            // would say "2 valid" above an exit code that says otherwise.
            let elsewhere = ns
                .filter(|_| refused_namespace > 0)
                .map(|ns| format!(", {refused_namespace} cannot run with -n {ns}"))
                .unwrap_or_default();
            println!(
                "{} file(s), {} valid, {} invalid{elsewhere}",
                verdicts.len(),
                verdicts.len() - bad - refused_namespace,
                bad
            );
        }
        ValidateFormat::Json => match serde_json::to_string_pretty(&verdicts) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                fail!("cannot write the verdicts as JSON: {e}");
                return EXIT_ERROR;
            }
        },
    }
    if refused_namespace > 0 {
        EXIT_ERROR
    } else if bad == 0 {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}

impl FileVerdict {
    fn new(path: &Path, status: Status, exp: Option<&Experiment>) -> FileVerdict {
        FileVerdict {
            file: path.to_path_buf(),
            status,
            name: exp.map(|e| e.name.clone()),
            steps: exp.map(|e| e.steps.len()),
            expectations: exp.map(|e| e.expectations.len()),
            reasons: Vec::new(),
            problems: Vec::new(),
            warnings: Vec::new(),
            by_plan: false,
        }
    }

    fn because(self, reasons: Vec<String>) -> FileVerdict {
        FileVerdict { reasons, ..self }
    }
}

/// The verdict on a file that parsed: skipped on this cluster, refused (an interlock, the
/// transports, an offline plan, the namespace), or ok.
fn judge(
    path: &Path,
    exp: &Experiment,
    inventory: Option<&crate::inventory::Inventory>,
    namespace: Option<&str>,
) -> FileVerdict {
    let verdict = |status| FileVerdict::new(path, status, Some(exp));
    // What a run on this cluster skips is said before anything else.
    if let Some(missing) = inventory
        .and_then(|inv| crate::capability::missing(&exp.requires, &inv.cluster().capabilities()))
    {
        return verdict(Status::Skipped).because(vec![missing.explained().to_string()]);
    }
    // The blast radius as far as the file alone decides it: targets that name their
    // nodes, step times without cluster timers; then what the transports can carry out.
    let interlocks = crate::run::preflight::safety::check_offline(exp, None).and_then(|()| {
        inventory.map_or(Ok(()), |inv| {
            crate::run::preflight::safety::check_transport(exp, inv)
        })
    });
    if let Err(e) = interlocks {
        return verdict(Status::Refused).because(vec![e.to_string()]);
    }
    // What `plan -i` finds a run would not get past refuses the file too.
    let problems = inventory
        .map(|inv| super::plan::offline_problems(exp, inv))
        .unwrap_or_default();
    if !problems.is_empty() {
        return FileVerdict {
            by_plan: true,
            ..verdict(Status::Refused).because(problems.iter().map(|p| p.line()).collect())
        };
    }
    match namespace.map(|ns| super::namespace::moved_to(exp.clone(), ns)) {
        Some(Err(e)) => verdict(Status::NamespaceRefused).because(vec![e.to_string()]),
        _ => verdict(Status::Ok),
    }
}

/// The verdict for a person, as `validate` always printed it.
fn print_text(v: &FileVerdict, checked: &crate::experiment::Checked, namespace: Option<&str>) {
    for w in checked.warnings.iter() {
        println!("{}", w.as_warning());
    }
    let file = v.file.display();
    let name = v.name.as_deref().unwrap_or_default();
    match v.status {
        Status::Invalid => {
            if let Err(diagnostics) = &checked.result {
                println!("{diagnostics}");
            }
        }
        Status::Skipped => println!(
            "{file}: ok, but a run on this cluster skips it ({name}): {}",
            v.reasons.join("; ")
        ),
        Status::Refused if v.by_plan => {
            println!("{file}: refused on this inventory:");
            for r in &v.reasons {
                println!("  {r}");
            }
        }
        Status::Refused | Status::NamespaceRefused => {
            println!("{file}: refused: {}", v.reasons.join("; "));
        }
        Status::Ok => println!(
            "{file}: ok ({name}: {} step(s), {} expectation(s){})",
            v.steps.unwrap_or_default(),
            v.expectations.unwrap_or_default(),
            namespace
                .map(|ns| format!(", in namespace {ns}"))
                .unwrap_or_default()
        ),
    }
}
