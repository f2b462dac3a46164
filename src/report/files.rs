//! Writing a report to its file, and how that fails: what every reporter that writes a
//! file shares, so none of them reaches back into `report/mod.rs`, which writes the set.

use std::path::{Path, PathBuf};

use crate::record::RecordError;

/// Writing a report failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The record could not be saved.
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// Writes `text` to `path`.
pub(crate) fn write_text(path: &Path, text: &str) -> Result<(), ReportError> {
    std::fs::write(path, text).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })
}
