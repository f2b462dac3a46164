//! What the observer said last of the cluster, read across the end of observation.
//!
//! Once observation ends, the run's index stops taking what is stamped after its end, so
//! that the final verdicts are judged on it as it stands (no second index of the timeline
//! built for them). What comes after (the undo, the cluster settling, teardown) is filed in
//! a second, small index. The "cluster restored" check needs the latest of both: this view
//! reads a node or a pod from the later index when that one has seen it, else from the
//! earlier.

use crate::timeline::{GapPhase, NodeState, PodId, PodState};

use super::TimelineIndex;

/// The latest state of the cluster over the index of what was observed and, once
/// observation ended, the index of what came after.
pub(crate) struct Latest<'a> {
    observed: &'a TimelineIndex,
    after: Option<&'a TimelineIndex>,
}

impl<'a> Latest<'a> {
    /// The view over `observed`, then `after` (every entry of which is stamped later).
    pub(crate) fn new(observed: &'a TimelineIndex, after: Option<&'a TimelineIndex>) -> Self {
        Latest { observed, after }
    }

    fn both(&self) -> impl Iterator<Item = &'a TimelineIndex> {
        std::iter::once(self.observed).chain(self.after)
    }

    /// Whether the observer's state is the cluster's, as far as it can tell: it said that
    /// every source completed its first list, and no source is in an observation gap now.
    pub(crate) fn observer_in_sight(&self) -> bool {
        self.both().any(TimelineIndex::observer_ready) && self.open_gaps().is_empty()
    }

    /// Whether the observer's state of one `source` (its name on gap entries) is the
    /// cluster's: every first list is in, and no gap of that source is open.
    pub(crate) fn source_in_sight(&self, source: &str) -> bool {
        self.both().any(TimelineIndex::observer_ready) && !self.open_gaps().contains(&source)
    }

    /// The sources whose gap is open now.
    fn open_gaps(&self) -> Vec<&'a str> {
        let mut open: Vec<&str> = Vec::new();
        for (source, phase) in self.both().flat_map(TimelineIndex::gap_phases) {
            match phase {
                GapPhase::Began => open.push(source),
                GapPhase::Ended => open.retain(|s| *s != source),
            }
        }
        open
    }

    /// Node `name` as last observed: `None` if it was never seen, `Some(None)` if it was
    /// last seen gone (what a fault's proof reads of its Node object).
    pub(crate) fn node(&self, name: &str) -> Option<Option<&'a NodeState>> {
        self.after
            .and_then(|a| a.last_node(name))
            .or_else(|| self.observed.last_node(name))
    }

    /// Every node as last observed, without the ones last seen gone.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = (&'a String, &'a NodeState)> {
        let after = self.after;
        self.observed
            .last_nodes()
            .filter(move |(name, _)| !after.is_some_and(|a| a.has_node(name)))
            .chain(after.into_iter().flat_map(TimelineIndex::last_nodes))
    }

    /// Every pod as last observed, without the ones last seen gone.
    pub(crate) fn pods(&self) -> impl Iterator<Item = (&'a PodId, &'a PodState)> {
        let after = self.after;
        self.observed
            .last_pods()
            .filter(move |(pod, _)| !after.is_some_and(|a| a.has_pod(pod)))
            .chain(after.into_iter().flat_map(TimelineIndex::last_pods))
    }
}
