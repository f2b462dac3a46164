//! What a run's record keeps of the cluster's first lists.
//!
//! On a cluster of 150,000 pods the first lists put one `seen` entry per pod on the
//! timeline, before the experiment starts. The run judges on all of them, live. The record
//! (and every report written from it: JSON, JUnit, HTML) keeps only the pods the experiment
//! touches (on its targets' nodes, of a workload its expectations, aborts, probes, targets
//! or steps name, in a namespace whose pods a step picks by label) and every pod that
//! changed during the run; the other pods, seen once and never again, are counted instead
//! of listed. A record judged again (`rehearse`, `explain`, `compare`) reads what decided
//! its verdicts: a pod the experiment does not touch cannot move one.

use std::collections::{BTreeSet, HashSet};

pub(crate) use crate::focus::Focus;
use crate::timeline::{Entry, Event, PodId, PodState, RunPhase, Timeline};

/// Pods of the first lists a record counts instead of listing.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeftOut {
    /// Pods left out.
    pub(crate) pods: u64,
    /// Namespaces they were in.
    pub(crate) namespaces: u64,
    /// Pods the first lists showed.
    pub(crate) listed: u64,
}

/// Drops from `timeline` the first lists' `seen` entries of pods that `focus` does not touch
/// and that have no other entry; puts a note saying how many, just before the observer's
/// `observer-ready` entry. A timeline without that entry (the observer never synced) is
/// kept whole.
pub(crate) fn leave_out_untouched(timeline: &mut Timeline, focus: &Focus) -> LeftOut {
    let Some(ready) = timeline.entries.iter().position(|e| {
        matches!(
            e.event,
            Event::Run {
                phase: RunPhase::ObserverReady { .. }
            }
        )
    }) else {
        return LeftOut::default();
    };
    // Pods with an entry besides their first sighting: what changed stays on the timeline.
    let mut changed: HashSet<&str> = HashSet::new();
    for (i, e) in timeline.entries.iter().enumerate() {
        if let Event::Pod { pod, .. } = &e.event
            && (i > ready || first_seen(e).is_none())
        {
            changed.insert(pod.uid.as_str());
        }
    }
    let mut drop = vec![false; ready];
    let mut left_out = LeftOut::default();
    let mut namespaces: BTreeSet<&str> = BTreeSet::new();
    for (i, e) in timeline.entries[..ready].iter().enumerate() {
        let Some((pod, state)) = first_seen(e) else {
            continue;
        };
        left_out.listed += 1;
        if !changed.contains(pod.uid.as_str()) && !focus.touches(pod, state) {
            drop[i] = true;
            left_out.pods += 1;
            namespaces.insert(pod.namespace.as_str());
        }
    }
    left_out.namespaces = namespaces.len() as u64;
    if left_out.pods == 0 {
        return left_out;
    }
    let at = &timeline.entries[ready];
    let note = Entry {
        offset_ms: at.offset_ms,
        wall: at.wall,
        event: Event::Note {
            message: format!(
                "record: {} of the {} pods in the first lists are counted, not listed: in {} \
                 namespaces, not on a target's node, of no workload the experiment names, \
                 and unchanged through the run",
                left_out.pods, left_out.listed, left_out.namespaces
            ),
        },
    };
    let mut index = 0;
    timeline.entries.retain(|_| {
        let keep = !drop.get(index).copied().unwrap_or(false);
        index += 1;
        keep
    });
    let ready = ready - usize::try_from(left_out.pods).unwrap_or(0);
    timeline.entries.insert(ready, note);
    left_out
}

/// The pod and its state, when `entry` is a pod's first sighting.
fn first_seen(entry: &Entry) -> Option<(&PodId, &PodState)> {
    match &entry.event {
        Event::Pod {
            pod,
            before: None,
            after: Some(state),
        } => Some((pod, state)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
