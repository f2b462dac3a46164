//! `--tolerance`: how far a figure may move before `compare` calls it a change.
//!
//! Each `--tolerance` value is `[KEY=]VALUE`:
//! - `10%`: relative to the baseline's median; `2s` (any duration: `500ms`, `1m`): absolute.
//!   Without a key it sets the overall tolerance; with `KEY=` that of one figure: a recovery
//!   figure's key (`node_not_ready`, see [`Figures::KEYS`]) or an expectation's name (its
//!   observed transition time). A key's tolerance replaces the overall one for it.
//! - `score=N`: the score may drop by N points (default 0).
//!
//! A figure's allowance is the larger of its relative part × the baseline median and its
//! absolute part. Default (no overall value given): 10 % or 1 s, whichever is larger. Once
//! an overall or per-key value is given, a part it does not give is 0: `--tolerance 5%`
//! means 5 % and nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::compare::noise::NoiseFloor;
use crate::judge::Figures;

/// The key of the score's tolerance.
pub const SCORE_KEY: &str = "score";

/// How far one figure may move: the larger of `relative` × the baseline median and
/// `absolute_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Allowance {
    /// A fraction of the baseline's median (0.1 = 10 %).
    pub relative: f64,
    /// Milliseconds.
    pub absolute_ms: i64,
}

impl Allowance {
    /// The default overall allowance: 10 % or 1 s, whichever is larger. Sub-second
    /// figures move by the observer's own latency; longer ones by a share of their timers.
    pub const DEFAULT: Allowance = Allowance {
        relative: 0.10,
        absolute_ms: 1_000,
    };

    /// The allowance in ms for a figure whose baseline median is `median_ms`.
    pub fn ms(&self, median_ms: f64) -> f64 {
        (self.relative * median_ms.abs()).max(self.absolute_ms as f64)
    }

    /// `10% or 1s, whichever is larger`, `2s`, `5%`, `none`.
    pub fn text(&self) -> String {
        let pct = format!("{}%", trim(self.relative * 100.0));
        let abs = format!("{}s", trim(self.absolute_ms as f64 / 1000.0));
        match (self.relative > 0.0, self.absolute_ms > 0) {
            (true, true) => format!("{pct} or {abs}, whichever is larger"),
            (true, false) => pct,
            (false, true) => abs,
            (false, false) => "none".to_string(),
        }
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What one `--tolerance` value sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Part {
    /// A fraction of the baseline median.
    Relative(f64),
    /// An absolute duration.
    Absolute(Duration),
    /// Score points.
    Points(f64),
}

/// One `--tolerance` value, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToleranceSpec {
    /// The figure or expectation it applies to; `None`: overall.
    pub key: Option<String>,
    /// What it sets.
    pub part: Part,
}

/// A `--tolerance` value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToleranceError {
    /// The value does not parse.
    #[error("--tolerance `{text}`: {why}")]
    Syntax {
        /// The value as written.
        text: String,
        /// What is wrong, and how to write it.
        why: String,
    },
    /// One part given twice for the same key.
    #[error("--tolerance gives the {part} tolerance of {whom} twice")]
    Twice {
        /// `relative`, `absolute` or `score`.
        part: &'static str,
        /// `node_not_ready`, or `everything` for the overall one.
        whom: String,
    },
    /// A key that names neither a figure (or a roll's stage) nor an expectation of either side.
    #[error(
        "--tolerance `{key}=…`: no recovery figure or expectation of that name; figures are {figures}, `score`, or an expectation's name"
    )]
    UnknownKey {
        /// The key.
        key: String,
        /// The figure keys.
        figures: String,
    },
}

/// Parses one `--tolerance` value (as clap's value parser).
pub fn parse_spec(text: &str) -> Result<ToleranceSpec, ToleranceError> {
    let err = |why: String| ToleranceError::Syntax {
        text: text.to_string(),
        why,
    };
    let (key, value) = match text.rsplit_once('=') {
        Some((k, v)) => {
            let k = k.trim();
            if k.is_empty() {
                return Err(err("the key before `=` is empty".into()));
            }
            (Some(k.to_string()), v.trim())
        }
        None => (None, text.trim()),
    };
    if value.is_empty() {
        return Err(err(
            "no value; write e.g. 10%, 2s or node_not_ready=2s".into()
        ));
    }
    if key.as_deref() == Some(SCORE_KEY) {
        return match value.parse::<f64>() {
            Ok(p) if p.is_finite() && (0.0..=100.0).contains(&p) => Ok(ToleranceSpec {
                key,
                part: Part::Points(p),
            }),
            _ => Err(err(format!(
                "the score's tolerance is in points from 0 to 100, e.g. score=5, not `{value}`"
            ))),
        };
    }
    if let Some(pct) = value.strip_suffix('%') {
        return match pct.trim().parse::<f64>() {
            Ok(p) if p.is_finite() && (0.0..=1000.0).contains(&p) => Ok(ToleranceSpec {
                key,
                part: Part::Relative(p / 100.0),
            }),
            _ => Err(err(format!(
                "`{value}` is not a percentage from 0% to 1000%"
            ))),
        };
    }
    if value.parse::<f64>().is_ok() {
        return Err(err(format!(
            "`{value}` has no unit: write a percentage ({value}%) or a duration ({value}s)"
        )));
    }
    match crate::experiment::parse_duration(value) {
        Ok(d) => Ok(ToleranceSpec {
            key,
            part: Part::Absolute(d),
        }),
        Err(why) => Err(err(format!(
            "{why}; write a percentage (10%) or a duration (2s)"
        ))),
    }
}

/// Every tolerance of one comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Tolerance {
    /// For every figure without its own.
    pub overall: Allowance,
    /// Per figure key or expectation name.
    pub per_key: BTreeMap<String, Allowance>,
    /// Score points the score may drop by.
    pub score_points: f64,
    /// The smallest move of a time's median that counts at all (`--noise-floor`).
    pub noise_floor: NoiseFloor,
}

/// The stages of a roll's node that are no recovery figure of a run (the others share
/// the figures' keys: `node_not_ready`, `node_ready_again`, `workloads_available`).
const ROLL_ONLY_KEYS: [&str; 1] = ["drained"];

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            overall: Allowance::DEFAULT,
            per_key: BTreeMap::new(),
            score_points: 0.0,
            noise_floor: NoiseFloor::DEFAULT,
        }
    }
}

impl Tolerance {
    /// Combines parsed values: see the module's documentation.
    pub fn from_specs(specs: &[ToleranceSpec]) -> Result<Tolerance, ToleranceError> {
        let mut overall: Option<(Option<f64>, Option<i64>)> = None;
        let mut per_key: BTreeMap<String, (Option<f64>, Option<i64>)> = BTreeMap::new();
        let mut score: Option<f64> = None;
        for spec in specs {
            let whom = || match &spec.key {
                Some(k) => format!("`{k}`"),
                None => "every figure".to_string(),
            };
            let slot = match &spec.key {
                None => overall.get_or_insert((None, None)),
                Some(k) => per_key.entry(k.clone()).or_insert((None, None)),
            };
            match spec.part {
                Part::Relative(r) => {
                    if slot.0.replace(r).is_some() {
                        return Err(ToleranceError::Twice {
                            part: "relative",
                            whom: whom(),
                        });
                    }
                }
                Part::Absolute(d) => {
                    let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
                    if slot.1.replace(ms).is_some() {
                        return Err(ToleranceError::Twice {
                            part: "absolute",
                            whom: whom(),
                        });
                    }
                }
                Part::Points(p) => {
                    if score.replace(p).is_some() {
                        return Err(ToleranceError::Twice {
                            part: "score",
                            whom: "the score".into(),
                        });
                    }
                }
            }
        }
        per_key.remove(SCORE_KEY);
        let allowance = |(r, a): (Option<f64>, Option<i64>)| Allowance {
            relative: r.unwrap_or(0.0),
            absolute_ms: a.unwrap_or(0),
        };
        Ok(Tolerance {
            overall: overall.map_or(Allowance::DEFAULT, allowance),
            per_key: per_key
                .into_iter()
                .map(|(k, v)| (k, allowance(v)))
                .collect(),
            score_points: score.unwrap_or(0.0),
            noise_floor: NoiseFloor::DEFAULT,
        })
    }

    /// The same tolerances with another noise floor.
    pub fn with_noise_floor(self, noise_floor: NoiseFloor) -> Tolerance {
        Tolerance {
            noise_floor,
            ..self
        }
    }

    /// The allowance for a figure key or expectation name.
    pub fn for_key(&self, key: &str) -> Allowance {
        self.per_key.get(key).copied().unwrap_or(self.overall)
    }

    /// Checks that every per-key tolerance names a recovery figure, a roll's stage, or one
    /// of `expectations` (the names on either side), so a typo is an error rather than a
    /// silent default.
    pub fn check_keys<'a>(
        &self,
        expectations: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), ToleranceError> {
        let known: BTreeSet<&str> = Figures::KEYS
            .iter()
            .map(|(k, _)| *k)
            .chain(ROLL_ONLY_KEYS)
            .chain(expectations)
            .collect();
        match self.per_key.keys().find(|k| !known.contains(k.as_str())) {
            None => Ok(()),
            Some(key) => Err(ToleranceError::UnknownKey {
                key: key.clone(),
                figures: Figures::KEYS
                    .iter()
                    .map(|(k, _)| *k)
                    .chain(ROLL_ONLY_KEYS)
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// The tolerances in words, for reports: `10% or 1s, whichever is larger;
    /// node_not_ready: 2s; score: 0 points`.
    pub fn text(&self) -> String {
        let mut parts = vec![self.overall.text()];
        for (k, a) in &self.per_key {
            parts.push(format!("{k}: {}", a.text()));
        }
        parts.push(format!("score: {} points", trim(self.score_points)));
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(values: &[&str]) -> Result<Tolerance, ToleranceError> {
        let specs: Result<Vec<_>, _> = values.iter().map(|v| parse_spec(v)).collect();
        Tolerance::from_specs(&specs?)
    }

    #[test]
    fn default_is_ten_percent_or_a_second() {
        let t = parse_all(&[]).unwrap();
        assert_eq!(t.overall, Allowance::DEFAULT);
        assert_eq!(t.for_key("node_not_ready").ms(45_000.0), 4_500.0);
        assert_eq!(t.for_key("node_ready_again").ms(343.0), 1_000.0);
        assert_eq!(t.score_points, 0.0);
        assert_eq!(t.text(), "10% or 1s, whichever is larger; score: 0 points");
    }

    #[test]
    fn an_overall_value_replaces_the_default_whole() {
        let t = parse_all(&["5%"]).unwrap();
        assert_eq!(
            t.overall,
            Allowance {
                relative: 0.05,
                absolute_ms: 0
            }
        );
        let t = parse_all(&["5%", "500ms"]).unwrap();
        assert_eq!(t.overall.ms(20_000.0), 1_000.0);
        assert_eq!(t.overall.ms(2_000.0), 500.0);
    }

    #[test]
    fn a_key_replaces_the_overall_for_that_figure() {
        let t = parse_all(&["20%", "node_not_ready=2s", "score=5"]).unwrap();
        assert_eq!(t.for_key("node_not_ready").ms(45_000.0), 2_000.0);
        assert_eq!(t.for_key("first_eviction").ms(45_000.0), 9_000.0);
        assert_eq!(t.score_points, 5.0);
        let t = parse_all(&["web pods go Terminating=3s"]).unwrap();
        assert_eq!(
            t.for_key("web pods go Terminating").absolute_ms,
            3_000,
            "expectation names may hold spaces"
        );
    }

    #[test]
    fn bad_values_say_what_to_write() {
        let e = parse_spec("10").unwrap_err().to_string();
        assert_eq!(
            e,
            "--tolerance `10`: `10` has no unit: write a percentage (10%) or a duration (10s)"
        );
        let e = parse_spec("fast").unwrap_err().to_string();
        assert!(e.starts_with("--tolerance `fast`: "), "{e}");
        assert!(
            e.ends_with("write a percentage (10%) or a duration (2s)"),
            "{e}"
        );
        let e = parse_spec("-5%").unwrap_err().to_string();
        assert!(e.contains("not a percentage from 0% to 1000%"), "{e}");
        let e = parse_spec("score=5s").unwrap_err().to_string();
        assert!(e.contains("in points from 0 to 100, e.g. score=5"), "{e}");
        let e = parse_spec("=5s").unwrap_err().to_string();
        assert!(e.contains("the key before `=` is empty"), "{e}");
        let e = parse_spec("node_not_ready=").unwrap_err().to_string();
        assert!(e.contains("no value"), "{e}");
        let e = parse_all(&["5%", "10%"]).unwrap_err().to_string();
        assert_eq!(
            e,
            "--tolerance gives the relative tolerance of every figure twice"
        );
        let e = parse_all(&["node_not_ready=1s", "node_not_ready=2s"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--tolerance gives the absolute tolerance of `node_not_ready` twice"
        );
    }

    #[test]
    fn unknown_keys_are_errors_once_the_names_are_known() {
        let t = parse_all(&["node_not_redy=2s"]).unwrap();
        let e = t.check_keys(["node goes Unknown"]).unwrap_err().to_string();
        assert!(
            e.starts_with("--tolerance `node_not_redy=…`: no recovery figure"),
            "{e}"
        );
        assert!(
            e.contains("`node_not_ready`") && e.contains("`drained`"),
            "{e}"
        );
        let t = parse_all(&["node goes Unknown=2s", "first_eviction=5%"]).unwrap();
        assert_eq!(t.check_keys(["node goes Unknown"]), Ok(()));
        // A roll's stage that is no run figure is a key too.
        let t = parse_all(&["drained=5s"]).unwrap();
        assert_eq!(t.check_keys([]), Ok(()));
    }
}
