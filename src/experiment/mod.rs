//! The experiment file format: types, parsing, and validation with file:line:column.

pub mod model;
