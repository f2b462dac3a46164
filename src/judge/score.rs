//! The resilience score of a run: one number, 0 to 100, for "how much of what we believe
//! about this cluster did the run show to hold", so runs can be compared at a glance.
//!
//! The formula (documented in the README, "The resilience score"):
//!
//! ```text
//! score = 100 × Σ weight of passed expectations / Σ weight of counted expectations
//! ```
//!
//! - Counted: passed, failed, undecidable, error and pending (interrupted) expectations. A
//!   belief counts as held only when the run showed it to hold: an observation gap or a step
//!   that never ran proves nothing, so it scores like a failure (excluding it would let a run
//!   that saw nothing score 100).
//! - Not counted: skipped expectations (the cluster lacks a capability: kwok runs no
//!   containers). They say nothing about the cluster's behaviour, and counting them would
//!   make the lab and kind incomparable.
//! - Weights come from each expectation's `weight:` (default 1).
//! - No counted expectation at all: no score (`n/a`), not 0 and not 100.
//!
//! Step errors do not count separately: a step that failed leaves its expectations
//! undecided or in error, which the formula already counts.

use serde::{Deserialize, Serialize};

use crate::experiment::model::{DEFAULT_WEIGHT, Experiment};

use super::{Outcome, Verdict};

/// A run's resilience score with the sums it is made of, so a report can say why.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// 0–100, rounded to one decimal; `None` when no expectation was counted.
    pub value: Option<f64>,
    /// Σ weight of the expectations that passed.
    pub passed_weight: f64,
    /// Σ weight of the expectations counted (everything but skipped).
    pub counted_weight: f64,
    /// How many expectations were counted.
    pub counted: usize,
    /// How many passed.
    pub passed: usize,
    /// How many were skipped (not counted).
    pub skipped: usize,
}

impl Score {
    /// The score as text: `87.5` or `n/a`.
    pub fn value_text(&self) -> String {
        value_text(self.value)
    }

    /// What the score is made of, in words: `7 of 8 expectations held (weighted 7 of 8);
    /// 1 skipped, not counted`.
    pub fn explain(&self) -> String {
        let mut out = format!(
            "{} of {} counted expectation{} held",
            self.passed,
            self.counted,
            if self.counted == 1 { "" } else { "s" }
        );
        if self.passed_weight != self.passed as f64 || self.counted_weight != self.counted as f64 {
            out.push_str(&format!(
                " (weighted {} of {})",
                number(self.passed_weight),
                number(self.counted_weight)
            ));
        }
        if self.skipped > 0 {
            out.push_str(&format!("; {} skipped, not counted", self.skipped));
        }
        out
    }
}

/// A score value as text: `87.5`, `100`, or `n/a`.
pub fn value_text(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_string(), number)
}

/// A number with at most one decimal, without a trailing `.0`.
fn number(x: f64) -> String {
    let rounded = (x * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.0}")
    } else {
        format!("{rounded:.1}")
    }
}

/// Scores `verdicts`, weighting each by its expectation's `weight` in `exp` (1 for a
/// verdict whose expectation is not in `exp`).
pub fn score(exp: &Experiment, verdicts: &[Verdict]) -> Score {
    let weight = |name: &str| {
        exp.expectations
            .iter()
            .find(|e| e.name == name)
            .map_or(DEFAULT_WEIGHT, |e| e.weight)
    };
    let mut s = Score {
        value: None,
        passed_weight: 0.0,
        counted_weight: 0.0,
        counted: 0,
        passed: 0,
        skipped: 0,
    };
    for v in verdicts {
        match v.outcome {
            Outcome::Skipped => s.skipped += 1,
            Outcome::Passed => {
                s.passed += 1;
                s.counted += 1;
                s.passed_weight += weight(&v.name);
                s.counted_weight += weight(&v.name);
            }
            Outcome::Failed | Outcome::Undecidable | Outcome::Error | Outcome::Pending => {
                s.counted += 1;
                s.counted_weight += weight(&v.name);
            }
        }
    }
    if s.counted_weight > 0.0 {
        s.value = Some((1000.0 * s.passed_weight / s.counted_weight).round() / 10.0);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(name: &str, outcome: Outcome) -> Verdict {
        Verdict {
            name: name.into(),
            outcome,
            message: String::new(),
            measured_ms: None,
            since: "stop".into(),
            members: Vec::new(),
        }
    }

    fn experiment(weights: &[(&str, f64)]) -> Experiment {
        let text = format!(
            "name: e\ndescription: d\ntargets:\n  victim: {{role: worker, count: 1}}\nsteps:\n  - {{name: stop, at: 0s, do: cordon, target: victim}}\nexpect:\n{}",
            weights
                .iter()
                .map(|(n, w)| format!(
                    "  - {{name: {n}, node: victim, becomes: Unschedulable, within: 5s, weight: {w}}}\n"
                ))
                .collect::<String>()
        );
        crate::experiment::parse(&text, std::path::Path::new("e.yaml")).unwrap()
    }

    #[test]
    fn passed_over_counted_with_skipped_left_out() {
        let exp = experiment(&[("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)]);
        let s = score(
            &exp,
            &[
                verdict("a", Outcome::Passed),
                verdict("b", Outcome::Passed),
                verdict("c", Outcome::Failed),
                verdict("d", Outcome::Skipped),
            ],
        );
        assert_eq!(s.value, Some(66.7));
        assert_eq!((s.passed, s.counted, s.skipped), (2, 3, 1));
        assert_eq!(
            s.explain(),
            "2 of 3 counted expectations held; 1 skipped, not counted"
        );
    }

    #[test]
    fn undecidable_error_and_pending_count_as_not_held() {
        let exp = experiment(&[("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)]);
        let s = score(
            &exp,
            &[
                verdict("a", Outcome::Passed),
                verdict("b", Outcome::Undecidable),
                verdict("c", Outcome::Error),
                verdict("d", Outcome::Pending),
            ],
        );
        assert_eq!(s.value, Some(25.0));
        assert_eq!(s.value_text(), "25");
    }

    #[test]
    fn weights_scale_each_expectation() {
        let exp = experiment(&[("major", 3.0), ("minor", 0.5)]);
        let s = score(
            &exp,
            &[
                verdict("major", Outcome::Passed),
                verdict("minor", Outcome::Failed),
            ],
        );
        // 100 × 3 / 3.5
        assert_eq!(s.value, Some(85.7));
        assert_eq!(
            s.explain(),
            "1 of 2 counted expectations held (weighted 3 of 3.5)"
        );
        let s = score(
            &exp,
            &[
                verdict("major", Outcome::Failed),
                verdict("minor", Outcome::Passed),
            ],
        );
        assert_eq!(s.value, Some(14.3));
    }

    #[test]
    fn nothing_counted_is_no_score() {
        let exp = experiment(&[("a", 1.0)]);
        let s = score(&exp, &[verdict("a", Outcome::Skipped)]);
        assert_eq!(s.value, None);
        assert_eq!(s.value_text(), "n/a");
        assert_eq!(score(&exp, &[]).value, None);
    }

    #[test]
    fn all_passed_is_100() {
        let exp = experiment(&[("a", 2.0)]);
        let s = score(&exp, &[verdict("a", Outcome::Passed)]);
        assert_eq!(s.value_text(), "100");
    }
}
