//! `faultline list`: the experiments in a directory (the repository's `experiments/` by
//! default), one block each — name, what it does in a sentence, its tags, the faults it
//! makes and what the cluster must offer — so a new user finds the experiment to start
//! from without opening every file.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, ListFormat};
use crate::experiment::model::Experiment;

/// Where `list` looks when given no path: the repository's shipped experiments.
const SHIPPED: &str = "experiments";

/// Width the human listing wraps its sentences to.
const WIDTH: usize = 80;

/// One experiment as `list` shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    /// The experiment's name.
    name: String,
    /// Its file.
    file: PathBuf,
    /// The first sentence of its description.
    summary: String,
    /// Its tags.
    tags: Vec<String>,
    /// The faults its steps make, by action name, in step order, once each.
    faults: Vec<&'static str>,
    /// What the cluster must offer (`requires:`), the experiment's and its expectations'.
    requires: Vec<String>,
}

impl Listed {
    fn of(exp: &Experiment) -> Listed {
        let mut faults = Vec::new();
        for action in exp.steps.iter().flat_map(|s| s.actions()) {
            let name = crate::experiment::fault::action_name(action);
            if !faults.contains(&name) {
                faults.push(name);
            }
        }
        let mut requires = exp.requires.clone();
        for r in exp.expectations.iter().flat_map(|e| e.requires.iter()) {
            if !requires.contains(r) {
                requires.push(r.clone());
            }
        }
        Listed {
            name: exp.name.clone(),
            file: exp.source.clone(),
            summary: first_sentence(&exp.description),
            tags: exp.tags.clone(),
            faults,
            requires,
        }
    }

    /// The block for a person: the name, the sentence wrapped, then its file, faults,
    /// needs and tags, a line each.
    fn show(&self) -> String {
        let mut out = format!("{}\n", self.name);
        let indent = textwrap::Options::new(WIDTH)
            .initial_indent("  ")
            .subsequent_indent("  ");
        if !self.summary.is_empty() {
            out.push_str(&textwrap::fill(&self.summary, &indent));
            out.push('\n');
        }
        let mut facts = vec![
            format!("file: {}", self.file.display()),
            format!("faults: {}", self.faults.join(", ")),
        ];
        if !self.requires.is_empty() {
            facts.push(format!("needs: {}", self.requires.join(", ")));
        }
        if !self.tags.is_empty() {
            facts.push(format!("tags: {}", self.tags.join(", ")));
        }
        let fact = indent.clone().subsequent_indent("    ");
        for line in facts {
            out.push_str(&textwrap::fill(&line, &fact));
            out.push('\n');
        }
        out
    }
}

/// The description's first sentence, on one line.
fn first_sentence(description: &str) -> String {
    let flat = description.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.find(". ") {
        Some(end) => flat[..=end].to_string(),
        None => flat,
    }
}

/// Lists the experiments under `paths` (default `experiments/`); exit 1 when a file does
/// not validate (it is named, with its first problem), 2 when there is nothing to list.
pub(super) fn list(paths: &[PathBuf], format: ListFormat) -> i32 {
    let paths = if paths.is_empty() {
        if !Path::new(SHIPPED).is_dir() {
            fail!(
                "no `{SHIPPED}/` directory here; give the experiments' directory \
                 (`faultline list PATH`), or run it from faultline's repository"
            );
            return EXIT_ERROR;
        }
        vec![PathBuf::from(SHIPPED)]
    } else {
        paths.to_vec()
    };
    let mut listed = Vec::new();
    let mut invalid = 0;
    for (path, checked) in crate::experiment::load_all_checked(&paths) {
        match checked.result {
            Ok(exp) => listed.push(Listed::of(&exp)),
            Err(d) => {
                invalid += 1;
                fail!(
                    "{}: not valid ({} problem(s); `faultline validate` it)",
                    path.display(),
                    d.len()
                );
            }
        }
    }
    if listed.is_empty() && invalid == 0 {
        fail!("no experiment files found in {}", super::show_paths(&paths));
        return EXIT_ERROR;
    }
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    match format {
        ListFormat::Text => {
            for (i, l) in listed.iter().enumerate() {
                if i > 0 {
                    say!();
                }
                say!("{}", l.show().trim_end());
            }
        }
        ListFormat::Json => match serde_json::to_string_pretty(&listed) {
            Ok(text) => say!("{text}"),
            Err(e) => {
                fail!("cannot write the list as JSON: {e}");
                return EXIT_ERROR;
            }
        },
    }
    if invalid > 0 { EXIT_FAILED } else { EXIT_OK }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sentence_is_one_line() {
        assert_eq!(
            first_sentence("Reboot a worker (about 10 s\n down). The node stops."),
            "Reboot a worker (about 10 s down)."
        );
        assert_eq!(first_sentence("No full stop"), "No full stop");
    }

    #[test]
    fn a_listed_experiment_fits_80_columns_and_names_its_faults_and_needs() {
        let checked = crate::experiment::check(
            super::super::init::Starter::Reboot.template(),
            Path::new("reboot.yaml"),
        );
        let listed = Listed::of(&checked.result.expect("valid"));
        let shown = listed.show();
        assert!(shown.lines().all(|l| l.chars().count() <= WIDTH), "{shown}");
        assert!(shown.contains("faults: reboot"), "{shown}");
        assert!(shown.contains("needs: containers"), "{shown}");
    }
}
