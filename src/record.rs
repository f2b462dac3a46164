//! The run record: everything one run produced, in one serializable value.
//!
//! Reporters are functions of a record, so a report can be re-rendered later from the JSON
//! (`faultline report run.json`) exactly as it was written at the end of the run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::experiment::model::{ClusterTimers, Experiment};
use crate::judge::{Figures, Outcome, RollFigures, Verdict};
use crate::timeline::Timeline;
use crate::timers::TimerSource;

/// One run of one experiment, from plan to verdicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Version of faultline that ran it, so old records can be read with the right eyes.
    pub faultline_version: String,
    /// Unique id of the run.
    pub run_id: String,
    /// The experiment as validated.
    pub experiment: Experiment,
    /// Which cluster, with the timers bounds were resolved against.
    pub cluster: ClusterInfo,
    /// Target name → node names, as resolved at the start of the run.
    pub targets: BTreeMap<String, Vec<String>>,
    /// When the run started.
    pub started_at: DateTime<Utc>,
    /// When the run finished.
    pub finished_at: DateTime<Utc>,
    /// Everything observed.
    pub timeline: Timeline,
    /// Offset on the timeline at which the experiment started (`at: 0s`), once the
    /// observer had synced; `None` when no step could start. Lets `rehearse` replay the
    /// schedule against this timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<i64>,
    /// Offset at which observation ended: verdicts were judged on the timeline up to here,
    /// never on what undo and teardown did afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_until_ms: Option<i64>,
    /// Why the run ended before its plan did (a signal, a failed expectation, a step that
    /// failed or gave up waiting), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<String>,
    /// One verdict per expectation.
    pub verdicts: Vec<Verdict>,
    /// Recovery figures.
    pub figures: Figures,
    /// Each rolling step's figures, node by node, and the probes over it; empty for a run
    /// without rolls and in records written before they were measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rolls: Vec<RollFigures>,
    /// How the run as a whole ended.
    pub outcome: RunOutcome,
    /// Step failures and setup errors; each becomes a JUnit error case.
    pub errors: Vec<String>,
    /// The abort condition that stopped the run, if one did: its JUnit error case, the
    /// reports' banner, exit code 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<crate::judge::Tripped>,
    /// The cluster after the last undo compared with before the first fault: the JUnit
    /// case "cluster restored". `None` when the run never got to its first step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<RestoredCheck>,
    /// What watching and judging cost faultline itself during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub costs: Option<RunCosts>,
}

/// The cluster after the last undo compared with its snapshot from before the first fault,
/// after a bounded wait for it to settle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoredCheck {
    /// Nothing differs.
    pub ok: bool,
    /// What differs (or why the cluster could not be read), one line each.
    pub differences: Vec<String>,
    /// How long faultline waited for the cluster to settle, ms.
    pub waited_ms: u64,
    /// What was compared, in words.
    pub compared: String,
}

/// What a run cost faultline itself: how long the observer took to see the cluster, and
/// how long each live judgement took. Users pointing faultline at a big cluster read it to
/// size a run; `ci/bench` reads it for `docs/performance.md`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCosts {
    /// From the observer's start until every source's first list was complete (or the
    /// wait for it gave up), ms.
    pub initial_sync_ms: u64,
    /// Live judgements made while the run went on (one per wake of the runner's loop).
    pub ticks: u64,
    /// Median time one live judgement took, µs.
    pub tick_p50_us: u64,
    /// 99th percentile, µs.
    pub tick_p99_us: u64,
    /// Longest, µs.
    pub tick_max_us: u64,
    /// Median CPU time one live judgement took, µs: its cost to faultline, apart from the
    /// wait for a core that a busy machine adds to the wall time above.
    #[serde(default)]
    pub tick_cpu_p50_us: u64,
    /// 99th percentile of the CPU time, µs.
    #[serde(default)]
    pub tick_cpu_p99_us: u64,
    /// Longest CPU time, µs.
    #[serde(default)]
    pub tick_cpu_max_us: u64,
    /// Entries on the timeline when observation ended.
    pub entries: u64,
    /// Pods the observer's first lists showed.
    #[serde(default)]
    pub pods_listed: u64,
    /// Of those, pods the record counts instead of listing: not touched by the experiment
    /// and unchanged through the run (a note on the timeline says so).
    #[serde(default)]
    pub pods_left_out: u64,
}

impl RunCosts {
    /// Fills the tick figures from each tick's duration, µs (any order).
    pub fn with_ticks(mut self, micros: Vec<u64>) -> Self {
        self.ticks = micros.len() as u64;
        [self.tick_p50_us, self.tick_p99_us, self.tick_max_us] = quantiles(micros);
        self
    }

    /// Fills the tick CPU figures from each tick's CPU time, µs (any order).
    pub fn with_tick_cpu(mut self, micros: Vec<u64>) -> Self {
        [
            self.tick_cpu_p50_us,
            self.tick_cpu_p99_us,
            self.tick_cpu_max_us,
        ] = quantiles(micros);
        self
    }
}

/// Median, 99th percentile and largest of `micros` (0 for none).
fn quantiles(mut micros: Vec<u64>) -> [u64; 3] {
    micros.sort_unstable();
    let at = |q: f64| {
        let i = ((micros.len() as f64 * q).ceil() as usize).saturating_sub(1);
        micros.get(i).copied().unwrap_or(0)
    };
    [at(0.50), at(0.99), micros.last().copied().unwrap_or(0)]
}

/// The cluster a run was made against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// Name from the inventory.
    pub name: String,
    /// kubeconfig context used.
    pub context: Option<String>,
    /// API server version (`v1.33.1`).
    pub server_version: Option<String>,
    /// Node-lifecycle timers bounds resolved against.
    pub timers: ClusterTimers,
    /// Where each timer came from (the cluster, the inventory, or an assumed default);
    /// empty in records written before faultline said so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timer_sources: Vec<TimerSource>,
    /// Capabilities the cluster has (e.g. `containers`).
    pub capabilities: Vec<String>,
    /// The nodes' Lease duration (the kubelet's `nodeLeaseDurationSeconds`), read from a
    /// Lease at the start; absent in records written before it was read, or unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_lease_seconds: Option<u64>,
}

/// How the run as a whole ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RunOutcome {
    /// Every expectation passed (or was skipped).
    Passed,
    /// At least one expectation failed or was undecidable.
    Failed,
    /// The run could not be carried out.
    Error {
        /// Why.
        message: String,
    },
    /// Stopped by a signal before it finished.
    Interrupted,
    /// Not run: the cluster lacks a capability the experiment requires (`requires:`), so
    /// it could prove nothing here. Nothing on the cluster was touched; exit 0.
    Skipped {
        /// Which capability, what it is and how a cluster gets it.
        reason: String,
    },
}

/// Reading or writing a record failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is another of faultline's files (or not JSON at all), named as such: the
    /// parser's "expected value at line 1 column 1" would not say what was passed.
    #[error(
        "{path} is {kind}, not a run record: `report`, `explain` and `compare` read the \
         .json a run wrote (reports/<experiment>.json){hint}"
    )]
    OtherKind {
        /// The file.
        path: PathBuf,
        /// What it looks like: "an experiment file", "an inventory", "not JSON".
        kind: &'static str,
        /// What to do with it instead, with its leading `; `.
        hint: &'static str,
    },
    /// The file is not a run record.
    #[error("{path}: not a faultline run record: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
}

impl RecordError {
    /// The error for `text` (read from `path`) that did not parse as a record: what the
    /// file is when it is plainly not JSON, else the parser's own words.
    pub(crate) fn not_a_record(path: &Path, text: &str, source: serde_json::Error) -> RecordError {
        let path = path.to_path_buf();
        if text.trim_start().starts_with(['{', '[']) {
            return RecordError::Json { path, source };
        }
        let yaml = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
        let has_key = |key: &str| yaml && text.lines().any(|l| l.starts_with(key));
        let (kind, hint) = if has_key("steps:") || has_key("expect:") {
            (
                "an experiment file",
                "; run it with `faultline run`, or replay it over a record with `faultline \
                 rehearse EXPERIMENT --record RECORD`",
            )
        } else if has_key("nodes:") {
            ("an inventory", "")
        } else {
            ("not JSON", "")
        };
        RecordError::OtherKind { path, kind, hint }
    }
}

/// Process exit code of a run that ended with `outcome`: 0 passed, 1 an expectation
/// failed, 2 the run could not be carried out, was interrupted, or a step failed (CI must
/// tell "the cluster misbehaved" from "the test did not run").
pub fn exit_code(outcome: &RunOutcome, verdicts: &[Verdict], errors: &[String]) -> i32 {
    // An abort is an error outcome with no step error behind it: 2 below.
    if !errors.is_empty() {
        return 2;
    }
    match outcome {
        RunOutcome::Passed | RunOutcome::Skipped { .. } => 0,
        RunOutcome::Failed => {
            if verdicts.iter().any(|v| v.outcome == Outcome::Failed) {
                1
            } else if verdicts
                .iter()
                .any(|v| matches!(v.outcome, Outcome::Error | Outcome::Pending))
            {
                2
            } else {
                1
            }
        }
        RunOutcome::Error { .. } | RunOutcome::Interrupted => 2,
    }
}

impl RunOutcome {
    /// The outcome as one lower-case word, as events and summaries write it.
    pub fn word(&self) -> &'static str {
        match self {
            RunOutcome::Passed => "passed",
            RunOutcome::Failed => "failed",
            RunOutcome::Error { .. } => "error",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::Skipped { .. } => "skipped",
        }
    }

    /// The outcome a finished run's verdicts and errors add up to.
    pub fn from_verdicts(verdicts: &[Verdict], errors: &[String]) -> Self {
        if let Some(first) = errors.first() {
            return RunOutcome::Error {
                message: first.clone(),
            };
        }
        if verdicts.iter().any(|v| v.outcome == Outcome::Pending) {
            return RunOutcome::Interrupted;
        }
        if verdicts
            .iter()
            .all(|v| matches!(v.outcome, Outcome::Passed | Outcome::Skipped))
        {
            RunOutcome::Passed
        } else {
            RunOutcome::Failed
        }
    }
}

impl RunRecord {
    /// Time zero of every report of the run, as an offset on its timeline: the
    /// experiment's `at: 0s` as the record keeps it (`start_ms`, the offset its started
    /// entry also carries, which the judge counts its messages from), else where that
    /// entry is (records from before `start_ms`), else the timeline's own zero (the
    /// experiment never started). Read in O(1) when the record has `start_ms`: reporters
    /// ask for it often, and the started entry sits after the first sync's thousands of
    /// entries.
    pub fn zero_ms(&self) -> i64 {
        self.start_ms
            .or_else(|| self.timeline.zero_ms())
            .unwrap_or(0)
    }

    /// The wall-clock time of [`RunRecord::zero_ms`], when the timeline says when its
    /// own zero was.
    pub fn zero_wall(&self) -> Option<DateTime<Utc>> {
        self.timeline
            .zero
            .map(|z| z + chrono::Duration::milliseconds(self.zero_ms()))
    }

    /// The same observations judged against `experiment` (another belief about the same
    /// run), up to where observation ended: verdicts, experiment and outcome replaced.
    pub fn judged_against(&mut self, experiment: Experiment) {
        let until_ms = self
            .observed_until_ms
            .unwrap_or_else(|| self.timeline.end_ms());
        self.verdicts = crate::judge::judge_until(
            &experiment,
            &self.targets,
            &self.cluster.timers,
            &self.cluster.capabilities,
            &self.timeline.until(until_ms),
            crate::judge::Observed {
                until_ms,
                complete: true,
            },
        );
        self.experiment = experiment;
        self.outcome = RunOutcome::from_verdicts(&self.verdicts, &self.errors);
    }

    /// The mark a report puts after an expectation whose bounds rest on an assumed timer
    /// (` [ASSUMED: grace = 50s]`), or nothing; nothing for records that do not say where
    /// their timers came from.
    pub fn assumed_mark(&self, expectation: &str) -> String {
        self.experiment
            .expectations
            .iter()
            .find(|e| e.name == expectation)
            .map(|e| {
                crate::timers::assumed_mark_all(
                    &e.check.bounds(),
                    &self.cluster.timer_sources,
                    crate::timers::BoundUse::Expectation,
                )
            })
            .unwrap_or_default()
    }

    /// The expectation a verdict judged (by name): what every reporter and `explain` look
    /// up to describe it.
    pub fn expectation_of(
        &self,
        v: &crate::judge::Verdict,
    ) -> Option<&crate::experiment::model::Expectation> {
        self.experiment
            .expectations
            .iter()
            .find(|e| e.name == v.name)
    }

    /// The experiment's steps that were never issued, in file order: a report lists them
    /// so a run that stopped early does not hide what it did not do.
    pub fn steps_not_run(&self) -> Vec<&crate::experiment::model::Step> {
        self.experiment
            .steps
            .iter()
            .filter(|s| self.timeline.step_issued_ms(&s.name).is_none())
            .collect()
    }

    /// Process exit code: 0 passed, 1 an expectation failed, 2 the run could not be carried
    /// out, was interrupted, or a step failed (CI must tell "the cluster misbehaved" from
    /// "the test did not run").
    pub fn exit_code(&self) -> i32 {
        exit_code(&self.outcome, &self.verdicts, &self.errors)
    }

    /// The run's resilience score (see [`crate::judge::score`]): derived from the verdicts and
    /// the experiment's weights, never stored apart from them.
    pub fn score(&self) -> crate::judge::Score {
        crate::judge::score(&self.experiment, &self.verdicts)
    }

    /// Reads a record written by [`RunRecord::save`].
    pub fn load(path: &Path) -> Result<Self, RecordError> {
        let text = std::fs::read_to_string(path).map_err(|source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| RecordError::not_a_record(path, &text, source))
    }

    /// Writes the record as pretty JSON.
    pub fn save(&self, path: &Path) -> Result<(), RecordError> {
        write_json(path, &self.with_score())
    }

    /// The record as pretty JSON, with its resilience score beside the verdicts for tools
    /// that read the file (`jq .score.value`); loading ignores it and derives it again.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(&self.with_score())
    }

    /// The record with its score, as it is written to JSON.
    pub fn with_score(&self) -> Scored<'_> {
        Scored {
            record: self,
            score: self.score(),
        }
    }
}

/// A record as written to JSON: its fields, then `score`.
#[derive(Debug, Serialize)]
pub struct Scored<'a> {
    /// The record.
    #[serde(flatten)]
    pub record: &'a RunRecord,
    /// Its resilience score.
    pub score: crate::judge::Score,
}

/// Writes `value` as pretty JSON and a final newline to `path`, as records and series are
/// saved: streamed through a buffer into the file, never held whole as text (at 30,000 pods
/// a record's JSON is tens of MB).
pub(crate) fn write_json(path: &Path, value: &impl Serialize) -> Result<(), RecordError> {
    use std::io::Write;
    let io = |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    serde_json::to_writer_pretty(&mut out, value).map_err(|source| {
        if source.is_io() {
            io(std::io::Error::from(source))
        } else {
            RecordError::Json {
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    out.write_all(b"\n").map_err(io)?;
    out.flush().map_err(io)
}
