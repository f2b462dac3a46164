//! A series: every run of one experiment made by one `faultline run --repeat N`, kept
//! whole, so each figure can be reported as a spread and each verdict run by run.
//!
//! On disk a series of one run is a plain run record (what `run` has always written), and
//! a series of more is a series file:
//!
//! ```json
//! {"faultline_version": "0.1.0", "experiment": "reboot", "repeat": 3,
//!  "spread": {…derived, for tools; ignored when read…}, "runs": [{run record}, …]}
//! ```
//!
//! [`Series::load`] reads either shape, so `report`, `rehearse` and `compare` take whatever
//! `run` wrote, and records written before series existed.

pub mod spread;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::experiment::model::Experiment;
use crate::record::{RecordError, RunRecord, Scored};

pub use spread::{ExpectationSpread, FigureSpread, Reliability, SeriesSpread, Spread};

/// The runs of one experiment, in the order they were made; never empty. Each record is
/// shared (`Arc`) with whatever else holds it, such as the event that announced its end:
/// at 30,000 pods a copy of a record is tens of MB.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    runs: Vec<Arc<RunRecord>>,
}

/// Reading a series, or a directory of them, failed.
#[derive(Debug, thiserror::Error)]
pub enum SeriesError {
    /// A file could not be read or is not a record.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A series file with no runs in it.
    #[error("{0}: a series file with no runs")]
    Empty(PathBuf),
    /// A series file whose runs are of different experiments.
    #[error(
        "{path}: a series holds runs of `{first}` and of `{other}`; one series is one experiment"
    )]
    Mixed {
        /// The file.
        path: PathBuf,
        /// The first run's experiment.
        first: String,
        /// Another run's experiment.
        other: String,
    },
    /// Two files of one directory hold runs of the same experiment.
    #[error(
        "{dir}: two records of experiment `{experiment}` ({first} and {second}); keep one per directory"
    )]
    Duplicate {
        /// The directory.
        dir: PathBuf,
        /// The experiment.
        experiment: String,
        /// One file.
        first: String,
        /// The other.
        second: String,
    },
    /// A directory with no `.json` record in it.
    #[error("{0}: no run records (*.json) in this directory")]
    NoRecords(PathBuf),
    /// A directory that could not be listed.
    #[error("{path}: {source}")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// The series file as written: the runs with what they add up to.
#[derive(Serialize)]
struct SeriesOut<'a> {
    faultline_version: &'a str,
    experiment: &'a str,
    repeat: usize,
    spread: SeriesSpread,
    runs: Vec<Scored<'a>>,
}

/// The series file as read: only the runs; everything else is derived from them.
#[derive(Deserialize)]
struct SeriesIn {
    runs: Vec<RunRecord>,
}

/// Just enough of a JSON file to tell a series file from a run record.
#[derive(Deserialize)]
struct Shape {
    #[serde(default)]
    runs: Option<serde::de::IgnoredAny>,
}

impl Series {
    /// The series of `runs`; `None` when there is none.
    pub fn new(runs: Vec<RunRecord>) -> Option<Series> {
        Series::shared(runs.into_iter().map(Arc::new).collect())
    }

    /// The series of `runs`, shared with their other holders; `None` when there is none.
    pub fn shared(runs: Vec<Arc<RunRecord>>) -> Option<Series> {
        (!runs.is_empty()).then_some(Series { runs })
    }

    /// A series of one run.
    pub fn single(record: RunRecord) -> Series {
        Series {
            runs: vec![Arc::new(record)],
        }
    }

    /// Every run, in order.
    pub fn runs(&self) -> &[Arc<RunRecord>] {
        &self.runs
    }

    /// The first run (every series has one).
    pub fn first(&self) -> &RunRecord {
        &self.runs[0]
    }

    /// The experiment (of the first run; a series is of one experiment).
    pub fn experiment(&self) -> &Experiment {
        &self.first().experiment
    }

    /// The experiment's name.
    pub fn name(&self) -> &str {
        &self.experiment().name
    }

    /// Whether the series holds more than one run.
    pub fn is_repeated(&self) -> bool {
        self.runs.len() > 1
    }

    /// What the runs add up to.
    pub fn spread(&self) -> SeriesSpread {
        SeriesSpread::of(&self.runs)
    }

    /// The worst exit code of its runs (see [`RunRecord::exit_code`]).
    pub fn exit_code(&self) -> i32 {
        self.runs.iter().map(|r| r.exit_code()).max().unwrap_or(0)
    }

    /// Reads a run record or a series file.
    pub fn load(path: &Path) -> Result<Series, SeriesError> {
        let text = std::fs::read_to_string(path).map_err(|source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let json = |source| RecordError::not_a_record(path, &text, source);
        let shape: Shape = serde_json::from_str(&text).map_err(json)?;
        if shape.runs.is_none() {
            let record: RunRecord = serde_json::from_str(&text).map_err(json)?;
            return Ok(Series::single(record));
        }
        let file: SeriesIn = serde_json::from_str(&text).map_err(json)?;
        let series = Series::new(file.runs).ok_or_else(|| SeriesError::Empty(path.into()))?;
        if let Some(other) = series
            .runs
            .iter()
            .find(|r| r.experiment.name != series.name())
        {
            return Err(SeriesError::Mixed {
                path: path.to_path_buf(),
                first: series.name().to_string(),
                other: other.experiment.name.clone(),
            });
        }
        Ok(series)
    }

    /// The series as pretty JSON: a run record for one run, a series file for more.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        if !self.is_repeated() {
            return self.first().to_json();
        }
        serde_json::to_string_pretty(&self.series_out())
    }

    /// The series file of more than one run, as written.
    fn series_out(&self) -> SeriesOut<'_> {
        SeriesOut {
            faultline_version: &self.first().faultline_version,
            experiment: self.name(),
            repeat: self.runs.len(),
            spread: self.spread(),
            runs: self.runs.iter().map(|r| r.with_score()).collect(),
        }
    }

    /// Writes [`Series::to_json`] to `path` (and a newline), streamed into the file.
    pub fn save(&self, path: &Path) -> Result<(), RecordError> {
        if !self.is_repeated() {
            return self.first().save(path);
        }
        crate::record::write_json(path, &self.series_out())
    }
}

/// Reads what `path` names: one record or series file, or every `*.json` in a directory
/// (a report directory), one series per experiment, sorted by experiment name.
pub fn load_all(path: &Path) -> Result<Vec<Series>, SeriesError> {
    if !path.is_dir() {
        return Ok(vec![Series::load(path)?]);
    }
    let read_dir = |source| SeriesError::ReadDir {
        path: path.to_path_buf(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(read_dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_dir)?;
    files.retain(|p| p.extension().is_some_and(|x| x == "json") && p.is_file());
    files.sort();
    if files.is_empty() {
        return Err(SeriesError::NoRecords(path.to_path_buf()));
    }
    let mut by_name: BTreeMap<String, (PathBuf, Series)> = BTreeMap::new();
    for file in files {
        let series = Series::load(&file)?;
        let name = series.name().to_string();
        if let Some((first, _)) = by_name.get(&name) {
            return Err(SeriesError::Duplicate {
                dir: path.to_path_buf(),
                experiment: name,
                first: file_name(first),
                second: file_name(&file),
            });
        }
        by_name.insert(name, (file, series));
    }
    Ok(by_name.into_values().map(|(_, s)| s).collect())
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}
