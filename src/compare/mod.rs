//! Two sets of runs side by side: "did the upgrade change how failover behaves?"
//!
//! A pure function: the baseline's series and the new series in, a typed [`Comparison`]
//! out; reporters (`report::compare`) render it and `cli` turns it into an exit code.
//!
//! What is compared, per experiment present on both sides:
//! - **Verdicts**: each expectation's [`Reliability`] over the side's runs (held in every
//!   counted run, flaky, held in none). Lower now than in the baseline is a regression;
//!   skipped on either side is not compared.
//! - **Recovery figures** (`node_not_ready`, …) and **observed transition times** (the
//!   measured time of every `becomes` expectation: when its subject reached the state, ms
//!   after its `since` step). Each side is a spread (min / median / max over its runs;
//!   one run is a spread of one). Now's median is compared with the baseline's
//!   `[min − allowance, max + allowance]`: above it is slower (a regression), below it is
//!   faster (reported, not a regression), inside it is within the baseline's own spread.
//!   Beyond the band but moved (median to median) by less than the noise floor
//!   ([`NoiseFloor`]: 1 s or 20 % by default) is noise: neither slower nor faster.
//!   Observed in the baseline and in no run now is a regression (a stage that stopped
//!   happening is infinitely late); observed only now is reported.
//! - **Rolls** (`roll:` steps): for a roll of the same name on both sides, each node on
//!   both, each stage measured from the node's own step, compared as recovery figures are
//!   (the stage's key takes its `--tolerance`): the node and the stage that got slower.
//! - **Score**: now's median below the baseline's min minus the score tolerance is a
//!   regression.
//!
//! Experiments on one side only are listed, not compared, and are not errors.

mod figure;
pub mod noise;
mod roll;
mod sides;
pub mod tolerance;

use crate::series::{ExpectationSpread, Series, SeriesSpread, Spread};

pub use figure::{FigureDiff, FigureKind, Movement};
pub use noise::{FloorError, FloorTwice, NoiseFloor, NoiseFloorPart, parse_floor};
pub use roll::{RollDiff, RollNodeDiff};
pub use sides::{ClusterSummary, Side, TIMER_LABELS, timer_rows};
pub use tolerance::{Allowance, Tolerance, ToleranceError, ToleranceSpec, parse_spec};

/// Everything two sets of runs show side by side.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The runs compared against.
    pub baseline: Side,
    /// The runs compared.
    pub now: Side,
    /// The tolerances applied.
    pub tolerance: Tolerance,
    /// Every experiment of either side: those on both first, in now's order.
    pub experiments: Vec<ExperimentDiff>,
}

/// Which sides hold an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Both: compared.
    Both,
    /// The baseline only.
    BaselineOnly,
    /// Now only.
    NowOnly,
}

/// One experiment on both sides (or one).
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentDiff {
    /// The experiment's name.
    pub name: String,
    /// Which sides hold it.
    pub presence: Presence,
    /// Runs on each side (baseline, now).
    pub runs: (usize, usize),
    /// Each expectation of either side.
    pub expectations: Vec<ExpectationDiff>,
    /// Each recovery figure.
    pub figures: Vec<FigureDiff>,
    /// Each `becomes` expectation's observed transition time.
    pub transitions: Vec<FigureDiff>,
    /// Each roll of the same name on both sides, node by node.
    pub rolls: Vec<RollDiff>,
    /// The resilience score.
    pub score: FigureDiff,
}

/// What became of one expectation's verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Held as reliably as before.
    Unchanged,
    /// Held less reliably than before (held → flaky or not held, flaky → not held).
    Regressed,
    /// Held more reliably than before.
    Improved,
    /// Only on one side.
    OneSideOnly,
    /// Skipped on at least one side.
    Skipped,
}

impl Change {
    /// The change as words for reports.
    pub fn word(self) -> &'static str {
        match self {
            Change::Unchanged => "unchanged",
            Change::Regressed => "REGRESSED",
            Change::Improved => "improved",
            Change::OneSideOnly => "one side only",
            Change::Skipped => "not compared (skipped)",
        }
    }
}

/// One expectation on both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectationDiff {
    /// Its name.
    pub name: String,
    /// Its verdicts in the baseline; `None`: not there.
    pub baseline: Option<ExpectationSpread>,
    /// Its verdicts now; `None`: not there.
    pub now: Option<ExpectationSpread>,
    /// What changed.
    pub change: Change,
}

impl ExperimentDiff {
    /// Every roll stage compared, each labelled ``roll `<roll>`, <node>: <stage>``, in roll
    /// and node order: what the reports list after the recovery figures.
    pub fn roll_stages(&self) -> impl Iterator<Item = &FigureDiff> {
        self.rolls
            .iter()
            .flat_map(|r| r.nodes.iter().flat_map(|n| &n.stages))
    }
}

impl Comparison {
    /// Every figure, transition and score diff of the experiments on both sides.
    pub fn figure_diffs(&self) -> impl Iterator<Item = (&ExperimentDiff, &FigureDiff)> {
        self.experiments
            .iter()
            .filter(|e| e.presence == Presence::Both)
            .flat_map(|e| {
                e.figures
                    .iter()
                    .chain(&e.transitions)
                    .chain(std::iter::once(&e.score))
                    .map(move |f| (e, f))
            })
    }

    /// How many verdicts, figures, transitions and scores regressed.
    pub fn regressions(&self) -> usize {
        let verdicts = self
            .experiments
            .iter()
            .flat_map(|e| &e.expectations)
            .filter(|x| x.change == Change::Regressed)
            .count();
        let figures = self
            .figure_diffs()
            .filter(|(_, f)| f.movement.regressed())
            .count();
        let rolls = self
            .roll_stage_diffs()
            .filter(|(.., f)| f.movement.regressed())
            .count();
        verdicts + figures + rolls
    }

    /// Every roll stage compared: `(experiment, roll, node, stage)`.
    pub fn roll_stage_diffs(
        &self,
    ) -> impl Iterator<Item = (&ExperimentDiff, &RollDiff, &RollNodeDiff, &FigureDiff)> {
        self.experiments.iter().flat_map(|e| {
            e.rolls.iter().flat_map(move |r| {
                r.nodes
                    .iter()
                    .flat_map(move |n| n.stages.iter().map(move |f| (e, r, n, f)))
            })
        })
    }

    /// How many experiments are on both sides.
    pub fn in_common(&self) -> usize {
        self.experiments
            .iter()
            .filter(|e| e.presence == Presence::Both)
            .count()
    }

    /// Process exit code: 0 nothing regressed beyond the tolerance, 1 something did, 2
    /// nothing could be compared (no experiment on both sides: a comparison that compared
    /// nothing must not pass).
    pub fn exit_code(&self) -> i32 {
        if self.in_common() == 0 {
            2
        } else if self.regressions() > 0 {
            1
        } else {
            0
        }
    }

    /// What differs between the sides' clusters, in words: `Kubernetes v1.31.4 → v1.33.13`,
    /// `node-monitor grace period 40s → 50s`. Compares the first cluster of each side.
    pub fn cluster_changes(&self) -> Vec<String> {
        let (Some(b), Some(n)) = (self.baseline.clusters.first(), self.now.clusters.first()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if b.name != n.name {
            out.push(format!("cluster {} → {}", b.name, n.name));
        }
        if b.server_version != n.server_version {
            let v = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
            out.push(format!(
                "Kubernetes {} → {}",
                v(&b.server_version),
                v(&n.server_version)
            ));
        }
        for ((label, before), (_, after)) in
            timer_rows(&b.timers).into_iter().zip(timer_rows(&n.timers))
        {
            if before != after {
                out.push(format!("{label} {before} → {after}"));
            }
        }
        out
    }
}

/// Compares `now` with `baseline` (each a set of series, one per experiment) under
/// `tolerance`. `labels` name the sides in reports.
pub fn compare(
    baseline: &[Series],
    now: &[Series],
    tolerance: &Tolerance,
    labels: (&str, &str),
) -> Comparison {
    let mut experiments = Vec::new();
    for n in now {
        let diff = match baseline.iter().find(|b| b.name() == n.name()) {
            Some(b) => experiment(b, n, tolerance),
            None => one_side(n, Presence::NowOnly),
        };
        experiments.push(diff);
    }
    for b in baseline {
        if !now.iter().any(|n| n.name() == b.name()) {
            experiments.push(one_side(b, Presence::BaselineOnly));
        }
    }
    // Experiments on both sides first, each group in the order met.
    experiments.sort_by_key(|e| e.presence != Presence::Both);
    Comparison {
        baseline: sides::side(labels.0, baseline),
        now: sides::side(labels.1, now),
        tolerance: tolerance.clone(),
        experiments,
    }
}

fn one_side(s: &Series, presence: Presence) -> ExperimentDiff {
    let runs = s.runs().len();
    let spread = s.spread();
    let empty = Spread::of([]);
    let (b, n) = match presence {
        Presence::BaselineOnly => (spread.score, empty),
        _ => (empty, spread.score),
    };
    ExperimentDiff {
        name: s.name().to_string(),
        presence,
        runs: if presence == Presence::BaselineOnly {
            (runs, 0)
        } else {
            (0, runs)
        },
        expectations: Vec::new(),
        figures: Vec::new(),
        transitions: Vec::new(),
        rolls: Vec::new(),
        score: FigureDiff::new(
            tolerance::SCORE_KEY,
            "score",
            FigureKind::Score,
            b,
            n,
            |_| 0.0,
            None,
        ),
    }
}

fn experiment(baseline: &Series, now: &Series, tol: &Tolerance) -> ExperimentDiff {
    let b = baseline.spread();
    let n = now.spread();
    let expectations = expectation_diffs(&b, &n);
    let figures = b
        .figures
        .iter()
        .zip(&n.figures)
        .map(|(fb, fnow)| {
            let allowance = tol.for_key(fb.key);
            FigureDiff::new(
                fb.key,
                fb.label,
                FigureKind::Recovery,
                fb.spread,
                fnow.spread,
                |median| allowance.ms(median),
                Some(tol.noise_floor),
            )
        })
        .collect();
    let transitions = b
        .expectations
        .iter()
        .filter_map(|eb| {
            let en = n.expectations.iter().find(|e| e.name == eb.name)?;
            (eb.transition || en.transition).then(|| {
                let allowance = tol.for_key(&eb.name);
                FigureDiff::new(
                    &eb.name,
                    &eb.name,
                    FigureKind::Transition,
                    eb.measured,
                    en.measured,
                    |median| allowance.ms(median),
                    Some(tol.noise_floor),
                )
            })
        })
        .collect();
    let points = tol.score_points;
    ExperimentDiff {
        name: now.name().to_string(),
        presence: Presence::Both,
        runs: (baseline.runs().len(), now.runs().len()),
        expectations,
        figures,
        transitions,
        rolls: roll::roll_diffs(baseline, now, tol),
        score: FigureDiff::new(
            tolerance::SCORE_KEY,
            "score",
            FigureKind::Score,
            b.score,
            n.score,
            |_| points,
            None,
        ),
    }
}

fn expectation_diffs(b: &SeriesSpread, n: &SeriesSpread) -> Vec<ExpectationDiff> {
    let mut names: Vec<&str> = b.expectations.iter().map(|e| e.name.as_str()).collect();
    for e in &n.expectations {
        if !names.contains(&e.name.as_str()) {
            names.push(&e.name);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let eb = b.expectations.iter().find(|e| e.name == name).cloned();
            let en = n.expectations.iter().find(|e| e.name == name).cloned();
            let change = match (&eb, &en) {
                (Some(x), Some(y)) => match (x.reliability.rank(), y.reliability.rank()) {
                    (Some(rb), Some(rn)) if rn < rb => Change::Regressed,
                    (Some(rb), Some(rn)) if rn > rb => Change::Improved,
                    (Some(_), Some(_)) => Change::Unchanged,
                    _ => Change::Skipped,
                },
                _ => Change::OneSideOnly,
            };
            ExpectationDiff {
                name: name.to_string(),
                baseline: eb,
                now: en,
                change,
            }
        })
        .collect()
}

/// Every expectation name of either side, for checking `--tolerance` keys.
pub fn expectation_names(sets: &[&[Series]]) -> Vec<String> {
    let mut names: Vec<String> = sets
        .iter()
        .flat_map(|s| s.iter())
        .flat_map(|s| s.experiment().expectations.iter().map(|e| e.name.clone()))
        .collect();
    names.sort();
    names.dedup();
    names
}
