//! When the cluster's state before the run is all on the timeline: every source of the
//! observer has delivered its first complete list.
//!
//! The runner starts the experiment only after this. Waiting for the target nodes alone is
//! not enough on a big cluster: a list of 30,000 pods lands seconds after the nodes, and a
//! step issued before it would see every existing pod recorded as created during the run.
//! A source that fails before its first list (a gap opens for it) is waited for: its
//! watcher retries, and the runner gives up waiting after a bound of its own.

use super::recorder::{Observation, Seen};
use crate::timeline::{Event, RunPhase};

/// Which sources have completed their first list, to say once when the last one has.
#[derive(Debug)]
pub(crate) struct FirstLists {
    listed: Vec<bool>,
    remaining: usize,
}

impl FirstLists {
    /// Waits for `sources` sources.
    pub(crate) fn new(sources: usize) -> Self {
        FirstLists {
            listed: vec![false; sources],
            remaining: sources,
        }
    }

    /// Takes one report from source `index`; returns the readiness event the moment the
    /// last source has completed its first list.
    pub(crate) fn note(&mut self, index: usize, observation: &Observation) -> Option<Event> {
        if !ends_a_list(observation) {
            return None;
        }
        let listed = self.listed.get_mut(index)?;
        if *listed {
            return None;
        }
        *listed = true;
        self.remaining -= 1;
        (self.remaining == 0).then(|| Event::Run {
            phase: RunPhase::ObserverReady {
                sources: u32::try_from(self.listed.len()).unwrap_or(u32::MAX),
            },
        })
    }
}

fn ends_a_list(observation: &Observation) -> bool {
    fn done<T>(seen: &Seen<T>) -> bool {
        matches!(seen, Seen::InitDone)
    }
    match observation {
        Observation::Node(s) => done(s),
        Observation::Pod(_, s) => done(s),
        Observation::ReplicaSet(_, s) => done(s),
        Observation::Workload(_, s) => done(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Pod};

    fn is_ready(event: Option<Event>, sources: u32) -> bool {
        event
            == Some(Event::Run {
                phase: RunPhase::ObserverReady { sources },
            })
    }

    #[test]
    fn ready_once_when_the_last_source_has_listed() {
        let mut lists = FirstLists::new(2);
        assert_eq!(lists.note(0, &Observation::Node(Seen::Init)), None);
        assert_eq!(lists.note(0, &Observation::Node(Seen::InitDone)), None);
        // The same source listing again does not count twice.
        assert_eq!(lists.note(0, &Observation::Node(Seen::InitDone)), None);
        let pods = |s: Seen<Pod>| Observation::Pod("web".into(), s);
        assert_eq!(lists.note(1, &pods(Seen::Init)), None);
        assert!(is_ready(lists.note(1, &pods(Seen::InitDone)), 2));
        // Said once: a later relist is not readiness again.
        assert_eq!(lists.note(1, &pods(Seen::InitDone)), None);
    }

    #[test]
    fn a_source_that_fails_is_waited_for_until_it_lists() {
        let mut lists = FirstLists::new(2);
        let pods = |s: Seen<Pod>| Observation::Pod(String::new(), s);
        assert_eq!(lists.note(1, &pods(Seen::Failed("forbidden".into()))), None);
        assert_eq!(
            lists.note(0, &Observation::Node(Seen::<Node>::InitDone)),
            None
        );
        assert!(is_ready(lists.note(1, &pods(Seen::InitDone)), 2));
    }
}
