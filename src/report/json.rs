//! JSON: the whole run record, so any report can be re-rendered later and other tools can
//! read a run without parsing JUnit.

use std::path::Path;

use super::files::ReportError;
use crate::record::RunRecord;

/// Writes the record as pretty JSON (read back with [`RunRecord::load`]).
pub fn write(record: &RunRecord, path: &Path) -> Result<(), ReportError> {
    record.save(path).map_err(ReportError::Record)
}
