//! One figure on both sides of a comparison: the baseline's spread, now's, the delta, and
//! where now lies against the baseline's spread widened by the allowance, and whether the
//! move clears the noise floor.

use crate::compare::noise::NoiseFloor;
use crate::series::Spread;

/// Where now's median lies against the baseline's spread widened by the allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Movement {
    /// Inside the band: no change beyond the baseline's own spread and the tolerance.
    Within,
    /// Beyond the band the bad way (a time later, a score lower): a regression.
    Worse,
    /// Beyond the band the good way (a time earlier, a score higher).
    Better,
    /// Beyond the band, but the median moved by less than the noise floor: neither a
    /// regression nor an improvement.
    Noise,
    /// Observed in the baseline, in no run now: a regression.
    Lost,
    /// Observed now, in no baseline run.
    Appeared,
    /// Observed on neither side.
    Neither,
}

impl Movement {
    /// Whether this counts as a regression.
    pub fn regressed(self) -> bool {
        matches!(self, Movement::Worse | Movement::Lost)
    }
}

/// What a figure measures, which says which way is worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FigureKind {
    /// A recovery figure: ms after the fault step; later is worse.
    Recovery,
    /// An expectation's observed transition: ms after its `since` step; later is worse.
    Transition,
    /// The resilience score: lower is worse.
    Score,
}

/// One figure on both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureDiff {
    /// `node_not_ready`, the expectation's name, or `score`: what `--tolerance` names.
    pub key: String,
    /// How reports name it.
    pub label: String,
    /// What it measures.
    pub kind: FigureKind,
    /// The baseline's spread.
    pub baseline: Spread,
    /// Now's spread.
    pub now: Spread,
    /// Now's median minus the baseline's (ms, or score points).
    pub delta: Option<f64>,
    /// `delta` as a percentage of the baseline's median.
    pub delta_pct: Option<f64>,
    /// The allowance the baseline's band was widened by (ms, or score points).
    pub allowance: Option<f64>,
    /// Where now lies against the band.
    pub movement: Movement,
    /// The noise floor the move was held against (`None`: the score, which has none).
    pub noise_floor: Option<NoiseFloor>,
}

impl FigureDiff {
    pub(super) fn new(
        key: &str,
        label: &str,
        kind: FigureKind,
        baseline: Spread,
        now: Spread,
        allowance: impl Fn(f64) -> f64,
        noise_floor: Option<NoiseFloor>,
    ) -> FigureDiff {
        let higher_is_worse = kind != FigureKind::Score;
        let (delta, delta_pct, allow, movement) =
            match (baseline.min, baseline.median, baseline.max, now.median) {
                (Some(lo), Some(mid), Some(hi), Some(n)) => {
                    let allow = allowance(mid);
                    let movement = if n > hi + allow {
                        if higher_is_worse {
                            Movement::Worse
                        } else {
                            Movement::Better
                        }
                    } else if n < lo - allow {
                        if higher_is_worse {
                            Movement::Better
                        } else {
                            Movement::Worse
                        }
                    } else {
                        Movement::Within
                    };
                    let delta = n - mid;
                    let pct = (mid != 0.0).then(|| 100.0 * delta / mid.abs());
                    let noise = noise_floor.is_some_and(|f| f.is_noise(delta, pct));
                    let movement = if movement != Movement::Within && noise {
                        Movement::Noise
                    } else {
                        movement
                    };
                    (Some(delta), pct, Some(allow), movement)
                }
                (Some(_), _, _, None) => (None, None, None, Movement::Lost),
                (None, _, _, Some(_)) => (None, None, None, Movement::Appeared),
                _ => (None, None, None, Movement::Neither),
            };
        FigureDiff {
            key: key.to_string(),
            label: label.to_string(),
            kind,
            baseline,
            now,
            delta,
            delta_pct,
            allowance: allow,
            movement,
            noise_floor,
        }
    }

    /// The side's spread as text (ms as `+19.8s`, the score as `87.5`).
    pub fn spread_text(&self, spread: &Spread) -> String {
        match self.kind {
            FigureKind::Score => spread.score_text(),
            _ => spread.ms_text(),
        }
    }

    /// The delta as text: `+10.0s`, `-2.5` (points), or `-` when there is none.
    pub fn delta_text(&self) -> String {
        match (self.delta, self.kind) {
            (None, _) => "-".to_string(),
            (Some(d), FigureKind::Score) => format!("{d:+.1}"),
            (Some(d), _) => crate::timeline::format_offset_ms(d.round() as i64),
        }
    }

    /// The delta as a percentage: `+22.1%`, or `-`.
    pub fn delta_pct_text(&self) -> String {
        self.delta_pct
            .map_or_else(|| "-".to_string(), |p| format!("{p:+.1}%"))
    }

    /// The movement in words: `within spread`, `SLOWER`, `faster`, `LOWER`, `higher`,
    /// `noise`, `NO LONGER OBSERVED`, `newly observed`, `not observed`. Regressions in
    /// capitals.
    pub fn movement_text(&self) -> &'static str {
        let score = self.kind == FigureKind::Score;
        match self.movement {
            Movement::Within => "within spread",
            Movement::Worse if score => "LOWER",
            Movement::Worse => "SLOWER",
            Movement::Better if score => "higher",
            Movement::Better => "faster",
            Movement::Noise => "noise",
            Movement::Lost => "NO LONGER OBSERVED",
            Movement::Appeared => "newly observed",
            Movement::Neither => "not observed",
        }
    }

    /// Why it is (or is not) a regression, in one sentence with the numbers.
    pub fn explain(&self) -> String {
        let unit = |x: f64| match self.kind {
            FigureKind::Score => format!("{x:.1} points"),
            _ => format!("{:.1}s", x / 1000.0),
        };
        let b = self.spread_text(&self.baseline);
        let n = self.spread_text(&self.now);
        match (self.movement, self.allowance) {
            (Movement::Lost, _) => format!("baseline {b}; not observed in any run now"),
            (Movement::Appeared, _) => format!("not observed in the baseline; now {n}"),
            (Movement::Neither, _) => "observed on neither side".to_string(),
            (m, Some(allow)) => {
                let (lo, hi) = (
                    self.baseline.min.unwrap_or_default() - allow,
                    self.baseline.max.unwrap_or_default() + allow,
                );
                let band = match self.kind {
                    FigureKind::Score => format!("[{lo:.1}, {hi:.1}]"),
                    _ => format!("[{:.1}s, {:.1}s]", lo / 1000.0, hi / 1000.0),
                };
                let where_ = match m {
                    Movement::Within => "inside",
                    _ if now_above(self) => "above",
                    _ => "below",
                };
                let mut text = format!(
                    "baseline {b}, now {n} ({} {}): now's median is {where_} the baseline's spread widened by {} {band}",
                    self.delta_text(),
                    self.delta_pct_text(),
                    unit(allow),
                );
                if let (Movement::Noise, Some(floor)) = (m, self.noise_floor) {
                    text.push_str(&format!(
                        ", but moved by less than the noise floor ({}): noise, not a change",
                        floor.text()
                    ));
                }
                text
            }
            (_, None) => format!("baseline {b}, now {n}"),
        }
    }
}

fn now_above(f: &FigureDiff) -> bool {
    f.delta.is_some_and(|d| d > 0.0)
}
