//! A file's diagnostic as the JSON outputs carry it: `validate -o json` and a plan's
//! file warnings (`plan -o json`), in one shape.

use serde::Serialize;

use crate::experiment::diagnostic::Diagnostic;

/// A diagnostic as JSON carries it (`validate -o json`, and a plan's file warnings).
#[derive(Debug, Serialize)]
pub(super) struct Place {
    /// 1-based; 0 when about the whole file.
    line: u32,
    /// 1-based; 0 when no position is known.
    column: u32,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

impl From<&Diagnostic> for Place {
    fn from(d: &Diagnostic) -> Place {
        Place {
            line: d.line,
            column: d.column,
            message: d.message.clone(),
            hint: d.hint.clone(),
        }
    }
}
