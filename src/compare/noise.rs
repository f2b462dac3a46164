//! `--noise-floor`: the smallest change of a figure's median that `compare` will call a
//! change at all, whatever the tolerance says.
//!
//! The tolerance widens the baseline's spread; the noise floor looks at the move itself
//! (now's median minus the baseline's). A move is noise when it is under the absolute
//! floor **or** under the relative one: `+0.9s` is the observer's own latency however large
//! a percentage it is of a sub-second baseline, and `+3s` on a 300 s figure (1 %) is the
//! node-monitor period's cadence, not a slower cluster. Noise is neither a regression nor
//! an improvement. Default: 1 s and 20 %. Each `--noise-floor` value sets one part (`2s`
//! or `25%`); the part not given keeps its default, and `0s` or `0%` switches a part off.
//! The floor applies to times (recovery figures, observed transitions), not to the score,
//! whose tolerance is already in points.

/// One part of the noise floor given twice (`--noise-floor 1s --noise-floor 2s`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--noise-floor gives the {part} floor twice")]
pub struct FloorTwice {
    /// `absolute` or `relative`.
    pub part: &'static str,
}

/// The smallest move of a figure's median that counts as a change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseFloor {
    /// Milliseconds: a move smaller than this is noise.
    pub absolute_ms: i64,
    /// A fraction of the baseline's median (0.2 = 20 %): a move smaller than this is noise.
    pub relative: f64,
}

impl Default for NoiseFloor {
    fn default() -> Self {
        NoiseFloor::DEFAULT
    }
}

/// One `--noise-floor` value, parsed: which part of the floor it sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoiseFloorPart {
    /// Milliseconds.
    Absolute(i64),
    /// A fraction of the baseline's median.
    Relative(f64),
}

impl NoiseFloor {
    /// 1 s and 20 %: under a second is the observer's latency; under a fifth of the
    /// baseline is within what the lab's repeated runs spread by on their own.
    pub const DEFAULT: NoiseFloor = NoiseFloor {
        absolute_ms: 1_000,
        relative: 0.20,
    };

    /// No floor: every move beyond the tolerance counts.
    pub const NONE: NoiseFloor = NoiseFloor {
        absolute_ms: 0,
        relative: 0.0,
    };

    /// The floor made of `parts` over the default: each part at most once.
    pub fn from_parts(parts: &[NoiseFloorPart]) -> Result<NoiseFloor, FloorTwice> {
        let mut floor = NoiseFloor::DEFAULT;
        let (mut absolute, mut relative) = (false, false);
        for part in parts {
            let (seen, name) = match part {
                NoiseFloorPart::Absolute(ms) => {
                    floor.absolute_ms = *ms;
                    (&mut absolute, "absolute")
                }
                NoiseFloorPart::Relative(r) => {
                    floor.relative = *r;
                    (&mut relative, "relative")
                }
            };
            if std::mem::replace(seen, true) {
                return Err(FloorTwice { part: name });
            }
        }
        Ok(floor)
    }

    /// Whether a move of `delta_ms` (now's median minus the baseline's) that is
    /// `delta_pct` % of the baseline's median is noise. Without a percentage (a baseline
    /// median of 0) only the absolute part decides.
    pub fn is_noise(&self, delta_ms: f64, delta_pct: Option<f64>) -> bool {
        let under_absolute = delta_ms.abs() < self.absolute_ms as f64;
        let under_relative = delta_pct.is_some_and(|p| p.abs() < 100.0 * self.relative);
        under_absolute || under_relative
    }

    /// The floor in words: `under 1s or under 20% of the baseline's median`, `none`.
    pub fn text(&self) -> String {
        let abs = format!("under {}", seconds(self.absolute_ms));
        let rel = format!(
            "under {}% of the baseline's median",
            trim(self.relative * 100.0)
        );
        match (self.absolute_ms > 0, self.relative > 0.0) {
            (true, true) => format!("{abs} or {rel}"),
            (true, false) => abs,
            (false, true) => rel,
            (false, false) => "none".to_string(),
        }
    }
}

/// Why a `--noise-floor` value was refused; each message says what to write instead.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FloorError {
    /// A percentage outside 0% to 1000%, or not a number.
    #[error("`{0}` is not a percentage from 0% to 1000%")]
    Percentage(String),
    /// A bare number.
    #[error("`{0}` has no unit: write a percentage ({0}%) or a duration ({0}s)")]
    NoUnit(String),
    /// Neither a percentage nor a duration (the duration parser's reason).
    #[error("{0}; write a percentage (20%) or a duration (1s)")]
    Neither(String),
}

/// Parses one `--noise-floor` value: `2s` (any duration) or `25%`.
pub fn parse_floor(text: &str) -> Result<NoiseFloorPart, FloorError> {
    let value = text.trim();
    if let Some(pct) = value.strip_suffix('%') {
        return match pct.trim().parse::<f64>() {
            Ok(p) if p.is_finite() && (0.0..=1000.0).contains(&p) => {
                Ok(NoiseFloorPart::Relative(p / 100.0))
            }
            _ => Err(FloorError::Percentage(value.to_string())),
        };
    }
    if value.parse::<f64>().is_ok() {
        return Err(FloorError::NoUnit(value.to_string()));
    }
    let d = crate::experiment::parse_duration(value)
        .map_err(|why| FloorError::Neither(why.to_string()))?;
    Ok(NoiseFloorPart::Absolute(
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
    ))
}

fn seconds(ms: i64) -> String {
    format!("{}s", trim(ms as f64 / 1000.0))
}

fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_under_either_floor_is_noise() {
        let f = NoiseFloor::DEFAULT;
        // Sub-second: noise however large the percentage.
        assert!(f.is_noise(900.0, Some(2_582.6)));
        // Under a fifth of the baseline: noise however many seconds.
        assert!(f.is_noise(-9_900.0, Some(-18.0)));
        // Over both: a change.
        assert!(!f.is_noise(11_200.0, Some(29.4)));
        // A baseline median of 0 has no percentage: the absolute part decides.
        assert!(!f.is_noise(1_500.0, None));
        assert!(!NoiseFloor::NONE.is_noise(1.0, Some(0.1)));
    }

    #[test]
    fn each_value_sets_one_part_and_keeps_the_other() {
        let parts = [parse_floor("2s").unwrap()];
        let f = NoiseFloor::from_parts(&parts).unwrap();
        assert_eq!(f.absolute_ms, 2_000);
        assert_eq!(f.relative, 0.20);
        let parts = [parse_floor("0%").unwrap(), parse_floor("500ms").unwrap()];
        let f = NoiseFloor::from_parts(&parts).unwrap();
        assert_eq!(f.text(), "under 0.5s");
        assert_eq!(
            NoiseFloor::DEFAULT.text(),
            "under 1s or under 20% of the baseline's median"
        );
        let twice = [parse_floor("1s").unwrap(), parse_floor("2s").unwrap()];
        assert_eq!(
            NoiseFloor::from_parts(&twice).unwrap_err().to_string(),
            "--noise-floor gives the absolute floor twice"
        );
    }

    #[test]
    fn bad_values_say_what_to_write() {
        assert_eq!(
            parse_floor("20").unwrap_err().to_string(),
            "`20` has no unit: write a percentage (20%) or a duration (20s)"
        );
        assert_eq!(
            parse_floor("-5%"),
            Err(FloorError::Percentage("-5%".to_string()))
        );
        assert!(
            parse_floor("-5%")
                .unwrap_err()
                .to_string()
                .contains("0% to 1000%")
        );
        assert!(
            parse_floor("soon")
                .unwrap_err()
                .to_string()
                .ends_with("write a percentage (20%) or a duration (1s)")
        );
    }
}
