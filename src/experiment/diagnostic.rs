//! Problems found in an experiment file, each pinned to `path:line:column`.
//!
//! Authors fix experiments in an editor; a message that names the exact place and says what
//! to write instead saves a run against a real cluster that would fail for a typo.

use std::fmt;
use std::path::PathBuf;

/// One problem in an experiment file, with the place it is at and, when one is known, a fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The experiment file.
    pub path: PathBuf,
    /// 1-based line of the offending key or value (0: about the whole file, e.g. missing).
    pub line: u32,
    /// 1-based column of the offending key or value (0 when no position is known).
    pub column: u32,
    /// What is wrong.
    pub message: String,
    /// What to write instead, when faultline can tell.
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Line 0: about the whole file (missing, unreadable, another kind of file), where
        // a made-up `:0:0` would send an editor nowhere.
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)?;
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.path.display(),
                self.line,
                self.column,
                self.message
            )?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl Diagnostic {
    /// This diagnostic shown as a warning: `path:line:column: warning: message`.
    pub fn as_warning(&self) -> impl fmt::Display + '_ {
        struct Warning<'a>(&'a Diagnostic);
        impl fmt::Display for Warning<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let shown = Diagnostic {
                    message: format!("warning: {}", self.0.message),
                    ..self.0.clone()
                };
                shown.fmt(f)
            }
        }
        Warning(self)
    }
}

/// Every problem found in one experiment file, in file order, so an author fixes them all
/// in one pass instead of one per run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Whether no problem was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many problems were found.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The problems, in file order.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_prints_one_problem_per_line_with_hint_indented() {
        let d = Diagnostics(vec![
            Diagnostic {
                path: PathBuf::from("e.yaml"),
                line: 3,
                column: 7,
                message: "unknown target `x`".into(),
                hint: Some("known targets: victim".into()),
            },
            Diagnostic {
                path: PathBuf::from("e.yaml"),
                line: 9,
                column: 1,
                message: "bad".into(),
                hint: None,
            },
        ]);
        assert_eq!(
            d.to_string(),
            "e.yaml:3:7: unknown target `x`\n  hint: known targets: victim\ne.yaml:9:1: bad"
        );
        assert_eq!(d.0[1].as_warning().to_string(), "e.yaml:9:1: warning: bad");
    }

    #[test]
    fn a_problem_of_the_whole_file_has_no_made_up_position() {
        let d = Diagnostic {
            path: PathBuf::from("gone.yaml"),
            line: 0,
            column: 0,
            message: "no such file".into(),
            hint: None,
        };
        assert_eq!(d.to_string(), "gone.yaml: no such file");
    }
}
