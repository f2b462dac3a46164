//! The experiment file format: types, parsing, and validation with file:line:column.
//!
//! `experiment file → validated plan` is the first stage of a run; nothing later reads YAML.
//! Entry points: [`parse`], [`load`], [`load_all`], and [`parse_bound`] for bound strings.

pub(crate) mod bound;
mod cluster_timers;
pub(crate) mod diagnostic;
pub(crate) mod fault;
mod keys;
pub(crate) mod manifest;
pub mod model;
mod raw;
pub(crate) mod roll;
mod states;
mod suggest;
pub(crate) mod url_template;
mod validate;

use std::path::{Path, PathBuf};

use serde_saphyr::MessageFormatter;

pub use bound::{parse_bound, parse_duration};
pub use diagnostic::{Diagnostic, Diagnostics};
pub use model::Experiment;

/// Parses and validates one experiment; `path` is used in messages and to resolve manifests.
pub fn parse(text: &str, path: &Path) -> Result<Experiment, Diagnostics> {
    check(text, path).result
}

/// An experiment file checked: the experiment or every problem found, and the warnings
/// (what the file alone cannot prove wrong but that will likely fail a run).
#[derive(Debug, Clone)]
pub struct Checked {
    /// The experiment, or every problem found in file order.
    pub result: Result<Experiment, Diagnostics>,
    /// Things to look at even in a valid file, in file order.
    pub warnings: Diagnostics,
}

impl Checked {
    fn failed(diagnostics: Vec<Diagnostic>) -> Self {
        Checked {
            result: Err(Diagnostics(diagnostics)),
            warnings: Diagnostics::default(),
        }
    }
}

/// [`parse`] with the warnings kept.
pub fn check(text: &str, path: &Path) -> Checked {
    // The file as a plain tree first: another kind of file is named for what it is, and
    // every unknown key is found at once (serde's typed parse would stop at the first).
    let mut unknown = Vec::new();
    match serde_saphyr::from_str::<keys::Node>(text) {
        Ok(tree) => {
            if let Some(d) = keys::other_kind_of_file(&tree, path) {
                return Checked::failed(vec![d]);
            }
            unknown = keys::unknown_keys(&tree, path);
        }
        Err(_) => {
            // A manifest of several documents is still a manifest; anything else that
            // does not read as a tree gets the typed parse's own message below.
            if let Ok(docs) = serde_saphyr::from_multiple::<keys::Node>(text)
                && let Some(d) = docs
                    .first()
                    .and_then(|first| keys::other_kind_of_file(first, path))
            {
                return Checked::failed(vec![d]);
            }
        }
    }
    // The typed parse skips the unknown keys, so the rest of the file is validated in the
    // same pass and every problem is said at once, the unknown keys among them.
    let raw: raw::RawExperiment = match serde_saphyr::from_str(text) {
        Ok(raw) => raw,
        Err(e) => {
            let stop = syntax_diagnostic(&e, path, text);
            // The typed parse stopping on the line of an unknown key (a state's own
            // keys are read by hand) says that key again: it is said once.
            let again = unknown.iter().any(|u| u.line == stop.line);
            return Checked::failed(merged(
                unknown,
                (!again).then_some(stop).into_iter().collect(),
            ));
        }
    };
    let (result, warnings) = validate::Validator::new(path).experiment(raw);
    let result = match result {
        Ok(exp) if unknown.is_empty() => Ok(exp),
        Ok(_) => Err(Diagnostics(unknown)),
        Err(problems) => Err(Diagnostics(merged(unknown, problems))),
    };
    Checked {
        result,
        warnings: Diagnostics(warnings),
    }
}

/// The unknown keys (in file order) placed among the other problems (in the order the
/// validator found them), each before the first problem later in the file; a problem said
/// twice at one place is said once.
fn merged(unknown: Vec<Diagnostic>, problems: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = Vec::with_capacity(unknown.len() + problems.len());
    let mut unknown = unknown.into_iter().peekable();
    for p in problems {
        while let Some(u) = unknown.next_if(|u| (u.line, u.column) <= (p.line, p.column)) {
            out.push(u);
        }
        out.push(p);
    }
    out.extend(unknown);
    let mut seen = std::collections::HashSet::new();
    out.retain(|d| seen.insert((d.line, d.column, d.message.clone())));
    out
}

/// The largest experiment, inventory or setup manifest faultline reads: far above any real
/// one (the shipped ones are a few KiB; a ConfigMap holds 1 MiB), and read no further, so
/// a wrong path (`/dev/zero`, a log, a FIFO) is an error at once rather than memory spent
/// before the YAML parser's own limits start.
pub const MAX_INPUT_BYTES: u64 = 4 * 1024 * 1024;

/// Reads a text file faultline takes as input, at most [`MAX_INPUT_BYTES`] of it: larger
/// is an error (`InvalidData`) saying so.
pub fn read_input(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let mut text = String::new();
    file.take(MAX_INPUT_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} MiB: not an experiment, inventory or manifest (read no further)",
                MAX_INPUT_BYTES / (1024 * 1024)
            ),
        ));
    }
    Ok(text)
}

/// Reads and validates one experiment file; a file that cannot be read is a diagnostic too.
pub fn load(path: &Path) -> Result<Experiment, Diagnostics> {
    load_checked(path).result
}

/// [`load`] with the warnings kept.
pub fn load_checked(path: &Path) -> Checked {
    match read_input(path) {
        Ok(text) => check(&text, path),
        Err(e) => Checked::failed(vec![Diagnostic {
            path: path.to_path_buf(),
            line: 0,
            column: 0,
            message: match e.kind() {
                std::io::ErrorKind::NotFound => "no such file".to_owned(),
                _ => format!("cannot read the file: {e}"),
            },
            hint: None,
        }]),
    }
}

/// Loads every experiment named: a file as itself, a directory as every `*.yaml`/`*.yml`
/// directly in it (sorted, not recursive), so `faultline validate experiments/` checks a
/// whole suite and reports every broken file at once.
pub fn load_all(paths: &[PathBuf]) -> Vec<(PathBuf, Result<Experiment, Diagnostics>)> {
    load_all_checked(paths)
        .into_iter()
        .map(|(path, checked)| (path, checked.result))
        .collect()
}

/// [`load_all`] with the warnings kept.
pub fn load_all_checked(paths: &[PathBuf]) -> Vec<(PathBuf, Checked)> {
    let mut out = Vec::new();
    for path in paths {
        if !path.is_dir() {
            out.push((path.clone(), load_checked(path)));
            continue;
        }
        match std::fs::read_dir(path) {
            Ok(entries) => {
                let mut files: Vec<PathBuf> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| {
                        p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml")
                    })
                    .collect();
                files.sort();
                for f in files {
                    let checked = load_checked(&f);
                    out.push((f, checked));
                }
            }
            Err(e) => out.push((
                path.clone(),
                Checked::failed(vec![Diagnostic {
                    path: path.clone(),
                    line: 0,
                    column: 0,
                    message: format!("cannot read the directory: {e}"),
                    hint: None,
                }]),
            )),
        }
    }
    out
}

/// Plain words for the parser's "expected <event>" messages about a value of the wrong shape.
fn expected_shape(raw: &str) -> Option<&'static str> {
    Some(match raw {
        "expected sequence start" => "expected a list here",
        "expected mapping start" => "expected a mapping (key: value) here",
        "expected string scalar" => "expected a single value (string) here",
        "invalid boolean" => "expected true or false here",
        "invalid i64" | "invalid u32" | "invalid u64" => "expected a whole number here",
        "invalid floating point" | "invalid f64" => "expected a number here",
        _ => return None,
    })
}

/// Turns a YAML syntax or type error into a diagnostic, rewording the library's messages
/// where they speak about its API rather than about the file.
fn syntax_diagnostic(e: &serde_saphyr::Error, path: &Path, text: &str) -> Diagnostic {
    let (line, column) = e
        .location()
        .map(|l| {
            (
                u32::try_from(l.line()).unwrap_or(u32::MAX),
                u32::try_from(l.column()).unwrap_or(u32::MAX),
            )
        })
        .unwrap_or((0, 0));
    let raw = serde_saphyr::DefaultMessageFormatter
        .format_message(e.without_snippet())
        .to_string();
    let (message, hint) = if let Some(rest) = raw.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest);
        (format!("duplicate key `{key}`"), None)
    } else if raw.starts_with("multiple YAML documents") {
        (
            "an experiment file holds exactly one YAML document".to_owned(),
            Some("put each experiment in its own file".to_owned()),
        )
    } else if let Some(what) = expected_shape(&raw) {
        (what.to_owned(), None)
    } else if raw.starts_with("tabs disallowed") {
        (raw, Some("indent with spaces".to_owned()))
    } else if misindented(&raw) {
        let hint = indent_hint(text, line);
        (raw, hint)
    } else {
        (raw, None)
    };
    Diagnostic {
        path: path.to_path_buf(),
        line,
        column,
        message,
        hint,
    }
}

/// Whether the parser's message is one a line indented differently from its neighbours
/// produces (the parser speaks of its own state, not of the indentation).
fn misindented(raw: &str) -> bool {
    raw.starts_with("mapping values are not allowed")
        || raw.contains("did not find expected '-' indicator")
        || raw.contains("did not find expected key")
}

/// The hint for a misindented `line` (1-based): how far it and the line above it are
/// indented, so the author sees which one to move.
fn indent_hint(text: &str, line: u32) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let at = usize::try_from(line).ok()?.checked_sub(1)?;
    let indent = |l: &str| l.len() - l.trim_start_matches(' ').len();
    let here = lines.get(at)?;
    let above = lines[..at]
        .iter()
        .rposition(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))?;
    Some(format!(
        "line {line} is indented by {} space(s), line {} above it by {}: the keys of one \
         mapping, and the items of one list, start in the same column",
        indent(here),
        above + 1,
        indent(lines[above])
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misindented_line_gets_a_hint_naming_both_indents() {
        let text =
            "name: m\ndescription: d\ntargets:\n  victim:\n    role: worker\n     count: 1\n";
        let checked = check(text, Path::new("m.yaml"));
        let d = checked.result.expect_err("misindented");
        let hint = d
            .iter()
            .next()
            .and_then(|d| d.hint.clone())
            .unwrap_or_default();
        assert!(
            hint.contains("indented by 5 space(s), line 5 above it by 4"),
            "{hint}"
        );
    }

    fn problems(text: &str) -> Vec<String> {
        match check(text, Path::new("x.yaml")).result {
            Ok(_) => Vec::new(),
            Err(d) => d
                .iter()
                .map(|d| format!("{}:{}: {}", d.line, d.column, d.message))
                .collect(),
        }
    }

    #[test]
    fn unknown_keys_and_the_other_problems_are_said_in_one_pass_in_file_order() {
        let got = problems(
            "name: m\ndescription: d\nnmae: x\ntargets:\n  victim: {role: worker, count: 1}\n\
             steps:\n  - {name: s, at: 0, do: cordon, target: victim, timout: 5s}\n\
             expect:\n  - {name: e, node: nobody, becomes: Unschedulable, within: 5s}\n",
        );
        assert_eq!(
            got,
            vec![
                "3:1: unknown key `nmae` at the top level",
                "7:19: `0` has no unit",
                "7:50: unknown key `timout` in a step",
                "9:21: unknown target `nobody`",
            ]
        );
    }

    #[test]
    fn where_the_typed_parse_stops_the_unknown_keys_are_still_said_and_once() {
        // A state's keys are read by hand, and the typed parse stops at the unknown one:
        // the key is said once, with the unknown key found earlier in the file.
        let got = problems(
            "name: m\ndescription: d\nnmae: x\ntargets:\n  victim: {role: worker, count: 1}\n\
             steps:\n  - {name: s, at: 0s, do: cordon, target: victim}\n\
             expect:\n  - {name: e, node: victim, becomes: {taint: k}, within: 5s}\n",
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].starts_with("3:1: unknown key `nmae`"), "{got:?}");
        assert!(got[1].contains("unknown key `taint` in a state"), "{got:?}");
        // A value of the wrong type stops the typed parse too: both are said.
        let got = problems(
            "name: m\ndescription: d\nnmae: x\ntargets:\n  victim: {role: worker, count: many}\n\
             steps:\n  - {name: s, at: 0s, do: cordon, target: victim}\n",
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].starts_with("3:1: unknown key `nmae`"), "{got:?}");
        assert!(got[1].starts_with("5:"), "{got:?}");
    }

    const BODY: &str = "name: ns\ndescription: d\ntargets:\n  victim: {role: worker, count: 1}\nsteps:\n  - {name: stop, at: 0s, do: cordon, target: victim}\nexpect:\n  - {name: cordoned, node: victim, becomes: Unschedulable, within: 5s}\n";

    fn with_observe(observe: &str) -> Result<Experiment, Diagnostics> {
        parse(&format!("{BODY}{observe}"), Path::new("x.yaml"))
    }

    #[test]
    fn observe_namespaces_is_all_or_a_list() {
        let all = with_observe("observe:\n  namespaces: all\n").map(|e| e.observe);
        let all = all.unwrap_or_else(|d| panic!("{d}"));
        assert!(all.all_namespaces);
        assert!(all.namespaces.is_empty());

        let list = with_observe("observe:\n  namespaces: [web, db]\n").map(|e| e.observe);
        let list = list.unwrap_or_else(|d| panic!("{d}"));
        assert!(!list.all_namespaces);
        assert_eq!(list.namespaces, vec!["web".to_string(), "db".to_string()]);

        let none = with_observe("").map(|e| e.observe);
        let none = none.unwrap_or_else(|d| panic!("{d}"));
        assert!(!none.all_namespaces && none.namespaces.is_empty());
    }

    #[test]
    fn another_word_for_namespaces_is_an_error_at_its_place() {
        let Err(d) = with_observe("observe:\n  namespaces: every\n") else {
            panic!("`namespaces: every` parsed");
        };
        let d = &d.0[0];
        assert_eq!((d.line, d.column), (10, 15));
        assert_eq!(
            d.message,
            "`namespaces` is `all` or a list of namespaces, not `every`"
        );
        assert!(
            d.hint
                .as_deref()
                .is_some_and(|h| h.contains("namespaces: all"))
        );
    }
}

#[cfg(test)]
mod input_tests {
    use super::*;

    /// Issue 69, item 5: an experiment or inventory path that named something huge (a
    /// log, `/dev/zero`) was read whole before the YAML parser's limits applied.
    #[test]
    fn an_input_past_the_limit_is_refused_without_being_read_whole() {
        let e = read_input(Path::new("/dev/zero")).expect_err("endless");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("larger than 4 MiB"), "{e}");
        let checked = load_checked(Path::new("/dev/zero"));
        let said = checked.result.expect_err("refused").to_string();
        assert!(said.contains("larger than 4 MiB"), "{said}");
        let inv = crate::inventory::Inventory::load("/dev/zero").expect_err("refused");
        assert!(inv.to_string().contains("larger than 4 MiB"), "{inv}");
        assert!(read_input(Path::new("experiments/reboot.yaml")).is_ok());
    }
}
