//! Spread over repeated runs: each figure and measured time as min / median / max, each
//! expectation's verdicts run by run and whether it held in all, some or none of them.
//!
//! One run is one sample: the node-Unknown figure depends on where the last heartbeat before
//! the fault fell in its interval, so it moves by up to that interval from run to run. The
//! spread is what a second sample is compared with.

use serde::Serialize;

use crate::experiment::model::Check;
use crate::judge::{Outcome, score::value_text};
use crate::record::RunRecord;

/// Min / median / max of one quantity over the runs where it was observed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Runs looked at.
    pub runs: usize,
    /// Runs in which the quantity was observed.
    pub observed: usize,
    /// Smallest observed value.
    pub min: Option<f64>,
    /// Median of the observed values (the mean of the middle two for an even count).
    pub median: Option<f64>,
    /// Largest observed value.
    pub max: Option<f64>,
}

impl Spread {
    /// The spread of `samples`, one per run, `None` where the run did not observe it.
    pub fn of(samples: impl IntoIterator<Item = Option<f64>>) -> Spread {
        let mut runs = 0;
        let mut values: Vec<f64> = Vec::new();
        for s in samples {
            runs += 1;
            if let Some(v) = s.filter(|v| v.is_finite()) {
                values.push(v);
            }
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = match n {
            0 => None,
            _ if n % 2 == 1 => Some(values[n / 2]),
            _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
        };
        Spread {
            runs,
            observed: n,
            min: values.first().copied(),
            median,
            max: values.last().copied(),
        }
    }

    /// The spread of millisecond samples.
    pub fn of_ms(samples: impl IntoIterator<Item = Option<i64>>) -> Spread {
        Spread::of(samples.into_iter().map(|s| s.map(|v| v as f64)))
    }

    /// Whether more than one distinct value was observed.
    pub fn varies(&self) -> bool {
        self.min != self.max
    }

    /// A millisecond spread as text: `19.8s` for one value (or equal values),
    /// `18.1s / 19.2s / 20.6s` for min / median / max, `not observed`, and `(in 3 of 5 runs)`
    /// when some runs did not observe it.
    pub fn ms_text(&self) -> String {
        self.text(|v| format!("{:.1}s", v.round() / 1000.0))
    }

    /// A score spread as text, as [`Spread::ms_text`] with score values.
    pub fn score_text(&self) -> String {
        self.text(|v| value_text(Some(v)))
    }

    fn text(&self, show: impl Fn(f64) -> String) -> String {
        let (Some(min), Some(median), Some(max)) = (self.min, self.median, self.max) else {
            return "not observed".to_string();
        };
        let (min, median, max) = (show(min), show(median), show(max));
        // Values that differ by less than the text shows read as one.
        let mut out = if min == max {
            median
        } else {
            format!("{min} / {median} / {max}")
        };
        if self.observed < self.runs {
            out.push_str(&format!(" (in {} of {} runs)", self.observed, self.runs));
        }
        out
    }
}

/// Whether an expectation held over a series of runs (skipped runs left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reliability {
    /// Passed in no counted run.
    NotHeld,
    /// Passed in some counted runs, not in others: the belief is not reliable.
    Flaky,
    /// Passed in every counted run.
    Held,
    /// Skipped in every run: nothing to say.
    Skipped,
}

impl Reliability {
    /// Of the outcomes of one expectation, one per run. Undecidable, error and pending
    /// count as not passed, as in the score: a belief holds only where it was shown to.
    pub fn of(outcomes: &[Outcome]) -> Reliability {
        let counted = outcomes.iter().filter(|o| **o != Outcome::Skipped).count();
        let passed = outcomes.iter().filter(|o| **o == Outcome::Passed).count();
        match (counted, passed) {
            (0, _) => Reliability::Skipped,
            (_, 0) => Reliability::NotHeld,
            (c, p) if c == p => Reliability::Held,
            _ => Reliability::Flaky,
        }
    }

    /// How good it is, for comparing two series: held 2, flaky 1, not held 0; `None` when
    /// skipped (nothing to compare).
    pub fn rank(self) -> Option<u8> {
        match self {
            Reliability::Held => Some(2),
            Reliability::Flaky => Some(1),
            Reliability::NotHeld => Some(0),
            Reliability::Skipped => None,
        }
    }

    /// One word for reports.
    pub fn word(self) -> &'static str {
        match self {
            Reliability::Held => "held",
            Reliability::Flaky => "flaky",
            Reliability::NotHeld => "not held",
            Reliability::Skipped => "skipped",
        }
    }
}

/// One expectation over the runs of a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExpectationSpread {
    /// The expectation's name.
    pub name: String,
    /// Its outcome in each run, in run order.
    pub outcomes: Vec<Outcome>,
    /// Whether it held in every, some or no run.
    pub reliability: Reliability,
    /// How many counted runs it passed in, and how many were counted.
    pub passed: usize,
    /// Runs counted (not skipped).
    pub counted: usize,
    /// Its measured time (ms after its `since` step) over the runs that measured one.
    pub measured: Spread,
    /// Whether its measured time is the moment of a transition (a `becomes` check), the
    /// time `compare` follows; other checks measure the start of a hold or a violation.
    pub transition: bool,
}

impl ExpectationSpread {
    /// `held in 5 of 5 runs`, `flaky: held in 4 of 5 runs`, `skipped in every run`.
    pub fn summary(&self) -> String {
        match self.reliability {
            Reliability::Skipped => "skipped in every run".to_string(),
            Reliability::Flaky => {
                format!("flaky: held in {} of {} runs", self.passed, self.counted)
            }
            _ => format!("held in {} of {} runs", self.passed, self.counted),
        }
    }
}

/// One recovery figure over the runs of a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FigureSpread {
    /// Its key (`node_not_ready`), as `--tolerance` names it.
    pub key: &'static str,
    /// Its label in reports (`node NotReady`).
    pub label: &'static str,
    /// Its values, ms after the fault step.
    pub spread: Spread,
}

/// What a series of runs adds up to: written into the series file (`spread`) for tools,
/// and shown by every report of a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesSpread {
    /// How many runs.
    pub runs: usize,
    /// The resilience score over the runs.
    pub score: Spread,
    /// Each run's score, in run order.
    pub scores: Vec<Option<f64>>,
    /// Each expectation, in the experiment's order.
    pub expectations: Vec<ExpectationSpread>,
    /// Each recovery figure, in the order the reaction unfolds.
    pub figures: Vec<FigureSpread>,
}

impl SeriesSpread {
    /// The spread of `runs` (of one experiment; the first run's expectations set the rows).
    pub fn of<R: std::borrow::Borrow<RunRecord>>(runs: &[R]) -> SeriesSpread {
        let runs: Vec<&RunRecord> = runs.iter().map(std::borrow::Borrow::borrow).collect();
        let scores: Vec<Option<f64>> = runs.iter().map(|r| r.score().value).collect();
        let names: Vec<String> = match runs.first() {
            Some(first) => first.verdicts.iter().map(|v| v.name.clone()).collect(),
            None => Vec::new(),
        };
        let expectations = names
            .into_iter()
            .map(|name| {
                let verdicts: Vec<_> = runs
                    .iter()
                    .map(|r| r.verdicts.iter().find(|v| v.name == name))
                    .collect();
                let outcomes: Vec<Outcome> = verdicts
                    .iter()
                    .map(|v| v.map_or(Outcome::Error, |v| v.outcome))
                    .collect();
                let transition = runs.first().is_some_and(|r| is_transition(r, &name));
                ExpectationSpread {
                    reliability: Reliability::of(&outcomes),
                    passed: outcomes.iter().filter(|o| **o == Outcome::Passed).count(),
                    counted: outcomes.iter().filter(|o| **o != Outcome::Skipped).count(),
                    measured: Spread::of_ms(verdicts.iter().map(|v| v.and_then(|v| v.measured_ms))),
                    transition,
                    name,
                    outcomes,
                }
            })
            .collect();
        let figures = crate::judge::Figures::KEYS
            .iter()
            .enumerate()
            .map(|(i, (key, label))| FigureSpread {
                key,
                label,
                spread: Spread::of_ms(runs.iter().map(|r| r.figures.values()[i])),
            })
            .collect();
        SeriesSpread {
            runs: runs.len(),
            score: Spread::of(scores.iter().copied()),
            scores,
            expectations,
            figures,
        }
    }

    /// The expectations that held in some runs and not in others.
    pub fn flaky(&self) -> impl Iterator<Item = &ExpectationSpread> {
        self.expectations
            .iter()
            .filter(|e| e.reliability == Reliability::Flaky)
    }
}

/// Whether the expectation `name` of the record's experiment is a `becomes` check or a
/// conformance case, whose measured time is the moment of the transition it expects.
pub fn is_transition(record: &RunRecord, name: &str) -> bool {
    // A conformance case is one transition the model predicted, measured when seen.
    (record.experiment.conformance && name.starts_with(crate::conformance::PREFIX))
        || record
            .experiment
            .expectations
            .iter()
            .find(|e| e.name == name)
            .is_some_and(|e| matches!(e.check, Check::Becomes { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_median_max_over_observed_runs() {
        let s = Spread::of_ms([Some(20_600), None, Some(18_100), Some(19_200)]);
        assert_eq!((s.runs, s.observed), (4, 3));
        assert_eq!(
            (s.min, s.median, s.max),
            (Some(18_100.0), Some(19_200.0), Some(20_600.0))
        );
        assert_eq!(s.ms_text(), "18.1s / 19.2s / 20.6s (in 3 of 4 runs)");
        let even = Spread::of_ms([Some(10), Some(20), Some(40), Some(30)]);
        assert_eq!(even.median, Some(25.0));
        let one = Spread::of_ms([Some(19_755)]);
        assert_eq!(one.ms_text(), "19.8s");
        assert!(!one.varies());
        let close = Spread::of_ms([Some(27_701), Some(27_720)]);
        assert!(close.varies());
        assert_eq!(close.ms_text(), "27.7s", "no 27.7s / 27.7s / 27.7s");
        let none = Spread::of_ms([None, None]);
        assert_eq!(none.ms_text(), "not observed");
        assert_eq!(none.median, None);
    }

    #[test]
    fn reliability_from_outcomes() {
        use Outcome::*;
        assert_eq!(Reliability::of(&[Passed, Passed]), Reliability::Held);
        assert_eq!(
            Reliability::of(&[Passed, Passed, Failed, Passed, Passed]),
            Reliability::Flaky
        );
        assert_eq!(Reliability::of(&[Passed, Undecidable]), Reliability::Flaky);
        assert_eq!(Reliability::of(&[Failed, Error]), Reliability::NotHeld);
        assert_eq!(Reliability::of(&[Skipped, Skipped]), Reliability::Skipped);
        assert_eq!(Reliability::of(&[Skipped, Passed]), Reliability::Held);
        assert!(Reliability::Held.rank() > Reliability::Flaky.rank());
        assert!(Reliability::Flaky.rank() > Reliability::NotHeld.rank());
        assert_eq!(Reliability::Skipped.rank(), None);
    }
}
