//! Truth series: a member's state history reduced to "does the predicate hold?" at each
//! observed change, plus the observation gaps that make some of those times uncertain.
//!
//! Reducing every subject kind (node, pod, workload) to the same shape lets the checks be
//! written once, whatever the expectation is about.

/// One observed change of a member: when, whether the predicate holds from then on, and a
/// short description of the actual state for messages.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Point {
    /// Offset of the change, ms since the run's time zero.
    pub at: i64,
    /// Whether the expectation's state holds from this offset on.
    pub holds: bool,
    /// What the member actually was, e.g. `Terminating` or `gone`.
    pub label: String,
}

/// A member's predicate over time; before the first point nothing was seen and the
/// predicate counts as not holding.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Truth {
    /// Changes in timeline order.
    pub points: Vec<Point>,
}

impl Truth {
    /// The point in force at `t` (the last one at or before it).
    pub(super) fn at(&self, t: i64) -> Option<&Point> {
        self.points.iter().take_while(|p| p.at <= t).last()
    }

    /// Whether the predicate holds at `t`.
    pub(super) fn holds_at(&self, t: i64) -> bool {
        self.at(t).is_some_and(|p| p.holds)
    }

    /// The first offset ≥ `t0` where the predicate holds (`t0` itself if it already holds).
    pub(super) fn first_true_from(&self, t0: i64) -> Option<i64> {
        if self.holds_at(t0) {
            return Some(t0);
        }
        self.points
            .iter()
            .find(|p| p.at > t0 && p.holds)
            .map(|p| p.at)
    }

    /// The first change in `(from, until)` after which the predicate no longer holds.
    pub(super) fn first_false_between(&self, from: i64, until: i64) -> Option<&Point> {
        self.points
            .iter()
            .find(|p| p.at > from && p.at < until && !p.holds)
    }
}

/// A stretch of time in which the observer saw nothing (or only part of the cluster).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Gap {
    /// Offset at which sight was lost.
    pub began: i64,
    /// Offset at which sight was regained (the timeline end if it never was).
    pub ended: i64,
    /// Whether a relist ended the gap, so the states right after it are the cluster's
    /// (a resumed watch replays events after the gap's end instead).
    pub closed: bool,
    /// Which watch lost sight and why.
    pub reason: String,
}

/// The gap a change observed at `t` may really have happened in: sight was lost before `t`
/// and regained at or after it.
pub(super) fn gap_hiding(gaps: &[Gap], t: i64) -> Option<&Gap> {
    gaps.iter().find(|g| g.began < t && t <= g.ended)
}

/// The first gap that overlaps the interval `[from, until]`.
pub(super) fn gap_overlapping(gaps: &[Gap], from: i64, until: i64) -> Option<&Gap> {
    gaps.iter().find(|g| g.began < until && g.ended > from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn truth(points: &[(i64, bool)]) -> Truth {
        Truth {
            points: points
                .iter()
                .map(|&(at, holds)| Point {
                    at,
                    holds,
                    label: String::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn first_true_is_t0_when_already_true() {
        let t = truth(&[(-5, true), (10, false), (20, true)]);
        assert_eq!(t.first_true_from(0), Some(0));
        assert_eq!(t.first_true_from(15), Some(20));
        assert_eq!(t.first_true_from(25), Some(25));
    }

    #[test]
    fn nothing_seen_means_not_holding() {
        let t = truth(&[(10, true)]);
        assert!(!t.holds_at(5));
        assert_eq!(t.first_true_from(0), Some(10));
    }

    #[test]
    fn first_false_is_strictly_inside() {
        let t = truth(&[(0, true), (10, false), (20, true)]);
        assert_eq!(t.first_false_between(0, 10), None);
        assert_eq!(t.first_false_between(0, 11).map(|p| p.at), Some(10));
    }

    #[test]
    fn gap_hides_a_change_seen_at_its_end() {
        let g = vec![Gap {
            began: 10,
            ended: 20,
            closed: true,
            reason: String::new(),
        }];
        assert!(gap_hiding(&g, 20).is_some());
        assert!(gap_hiding(&g, 10).is_none());
        assert!(gap_overlapping(&g, 0, 11).is_some());
        assert!(gap_overlapping(&g, 20, 30).is_none());
    }
}
