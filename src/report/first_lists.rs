//! The terminal's view of the observer's first lists: on a cluster of 150,000 pods, a line
//! per pod would bury the run. The pods the experiment touches are listed as they land; the
//! others are counted, and one line says how many once the lists are in. (Every entry still
//! reaches the record's judge, and `--events FILE` writes each one.)

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::focus::Focus;
use crate::timeline::{Entry, Event, RunPhase};

/// What the terminal does with one entry.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Print it.
    Show,
    /// Count it, print nothing.
    Hide,
    /// Print this line, then the entry: the first lists are in.
    SummaryFirst(String),
}

/// The first lists of one run, as the terminal shows them.
#[derive(Debug, Default)]
pub(crate) struct FirstLists {
    focus: Option<Arc<Focus>>,
    /// The observer's `observer-ready` entry has not landed yet.
    open: bool,
    hidden: u64,
    namespaces: BTreeSet<String>,
}

impl FirstLists {
    /// A run begins: nothing known of what it touches yet (everything is shown).
    pub(crate) fn begin(&mut self) {
        *self = FirstLists {
            open: true,
            ..FirstLists::default()
        };
    }

    /// What the run's experiment touches.
    pub(crate) fn focus(&mut self, focus: Arc<Focus>) {
        self.focus = Some(focus);
    }

    /// Whether to print `entry`.
    pub(crate) fn admit(&mut self, entry: &Entry) -> Admit {
        if !self.open {
            return Admit::Show;
        }
        match &entry.event {
            Event::Pod {
                pod,
                before: None,
                after: Some(state),
            } => match &self.focus {
                Some(focus) if !focus.touches(pod, state) => {
                    self.hidden += 1;
                    if !self.namespaces.contains(&pod.namespace) {
                        self.namespaces.insert(pod.namespace.clone());
                    }
                    Admit::Hide
                }
                _ => Admit::Show,
            },
            Event::Run {
                phase: RunPhase::ObserverReady { .. },
            } => {
                self.open = false;
                if self.hidden == 0 {
                    return Admit::Show;
                }
                Admit::SummaryFirst(format!(
                    "setup first lists: {} more pods in {} namespaces, not on a target's node \
                     and of no workload the experiment names: counted, not listed",
                    self.hidden,
                    self.namespaces.len()
                ))
            }
            _ => Admit::Show,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{PodId, PodState};

    fn seen(name: &str, node: &str) -> Entry {
        Entry {
            offset_ms: -5,
            wall: chrono::DateTime::UNIX_EPOCH,
            event: Event::Pod {
                pod: Arc::new(PodId {
                    namespace: format!("ns-{name}"),
                    name: name.into(),
                    uid: name.into(),
                }),
                before: None,
                after: Some(PodState::running_on(Some(node)).into()),
            },
        }
    }

    fn ready() -> Entry {
        Entry {
            offset_ms: -1,
            wall: chrono::DateTime::UNIX_EPOCH,
            event: Event::Run {
                phase: RunPhase::ObserverReady { sources: 3 },
            },
        }
    }

    fn focus_on(node: &str) -> Arc<Focus> {
        let exp = crate::experiment::parse(
            "name: e\ndescription: d\ntargets: {v: {names: [w1]}}\nsteps:\n  - {name: cordon, at: 0s, do: cordon, target: v}\nexpect:\n  - {name: c, node: v, becomes: Unschedulable, within: 10s}\n",
            std::path::Path::new("e.yaml"),
        )
        .unwrap_or_else(|d| panic!("{d}"));
        Arc::new(Focus::of(&exp, [&vec![node.to_string()]]))
    }

    #[test]
    fn pods_the_experiment_does_not_touch_are_counted_in_one_line_when_the_lists_are_in() {
        let mut view = FirstLists::default();
        view.begin();
        view.focus(focus_on("w1"));
        assert_eq!(view.admit(&seen("a", "w1")), Admit::Show);
        assert_eq!(view.admit(&seen("b", "w2")), Admit::Hide);
        assert_eq!(view.admit(&seen("c", "w3")), Admit::Hide);
        match view.admit(&ready()) {
            Admit::SummaryFirst(line) => assert!(
                line.starts_with("setup first lists: 2 more pods in 2 namespaces"),
                "{line}"
            ),
            other => panic!("{other:?}"),
        }
        // A pod created during the run is shown, touched or not.
        assert_eq!(view.admit(&seen("d", "w2")), Admit::Show);
    }

    #[test]
    fn without_a_focus_every_pod_is_shown() {
        let mut view = FirstLists::default();
        view.begin();
        assert_eq!(view.admit(&seen("b", "w2")), Admit::Show);
        assert_eq!(view.admit(&ready()), Admit::Show);
    }
}
