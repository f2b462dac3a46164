//! A run as a stream of typed events, and the sink it is sent into.
//!
//! The run loop emits what happens (every timeline entry as it lands: a transition
//! observed, a step issued or undone, a verdict decided; then the finished record) and
//! knows no reporter. Reporters subscribe (`report::subscribe`), each on its own thread
//! with its own queue: sending never blocks, never fails and never runs a reporter's code
//! on the run's task, so a closed pipe, a hung-up terminal, a full disk or a slow reader
//! can never stop, slow or crash a run, nor keep it from undoing its faults.
//!
//! This module sits below both `run` and `report`: they meet here and nowhere else.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use crate::explain::Explanation;
use crate::focus::Focus;
use crate::record::RunRecord;
use crate::series::Series;
use crate::timeline::Entry;

/// One thing a reporter may want to show or keep.
#[derive(Debug)]
// Each event is built once and shared by every subscriber through an `Arc`.
#[allow(clippy::large_enum_variant)]
pub enum RunEvent {
    /// A run of an experiment begins (before its interlocks and setup).
    RunStarted {
        /// The experiment's name.
        experiment: String,
        /// Its file.
        source: PathBuf,
        /// Which run of a `--repeat` (1 is the first); `None` when not repeated.
        run: Option<u32>,
        /// How many runs the repeat asks for.
        of: u32,
    },
    /// What of the cluster the run's experiment touches, known once its targets are
    /// resolved, before its timeline opens: the terminal lists the first lists' pods it
    /// touches and counts the others.
    Focus {
        /// The experiment's name.
        experiment: String,
        /// Which run of a `--repeat`; `None` when not repeated.
        run: Option<u32>,
        /// What the experiment touches.
        focus: Arc<Focus>,
    },
    /// An entry landed on the run's timeline.
    Entry {
        /// The experiment's name.
        experiment: String,
        /// Which run of a `--repeat`; `None` when not repeated.
        run: Option<u32>,
        /// The entry.
        entry: Entry,
    },
    /// What a run waits for changed (sent by its loop, not kept on the timeline: it is a
    /// forecast, not an observation). What a live status line shows.
    Progress {
        /// The experiment's name.
        experiment: String,
        /// Which run of a `--repeat`; `None` when not repeated.
        run: Option<u32>,
        /// What it waits for.
        progress: Progress,
    },
    /// A run ended (its faults undone, or left to `faultline restore` as its record says).
    /// The record is shared with the series it ends up in, not copied.
    RunFinished(Arc<RunRecord>),
    /// Every run of one experiment ended. Shared, not copied: at 30,000 pods one copy of
    /// its records costs tens of MB.
    SeriesFinished(Arc<FinishedSeries>),
}

/// A series that ended, with what every reporter of it needs computed once: the node
/// failure model's comparison of its first run (`faultline explain`, which runs the
/// model), shown by the JUnit, HTML and Markdown reports of a single run.
#[derive(Debug)]
pub struct FinishedSeries {
    /// The runs.
    pub series: Series,
    /// The model's comparison of the first run.
    pub explanation: Explanation,
}

impl FinishedSeries {
    /// `series` with its first run explained.
    pub fn of(series: Series) -> FinishedSeries {
        let explanation = crate::explain::explain(series.first());
        FinishedSeries {
            series,
            explanation,
        }
    }
}

/// What a run waits for at one moment, in offsets of its timeline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Where observation is expected to end. Before the last step was issued, the planned
    /// end with every wait at its longest; it moves as steps are issued.
    pub observe_until_ms: Option<i64>,
    /// The expectations not decided yet, in the experiment's order.
    pub open: Vec<OpenExpectation>,
}

/// An expectation not decided yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenExpectation {
    /// Its name.
    pub name: String,
    /// The offset by which its largest bound has passed (its `since` step issued plus the
    /// bound); `None` while its step waits, or when only the end of observation decides it
    /// (`never`, `stays` until the end).
    pub deadline_ms: Option<i64>,
}

/// Where events go: one queue per subscriber. Cloning shares the queues; a sink with no
/// subscriber drops what it is sent.
#[derive(Clone, Default)]
pub struct EventSink {
    queues: Arc<Vec<Sender<Arc<RunEvent>>>>,
}

impl EventSink {
    /// A sink feeding `queues`, one per subscriber.
    pub fn new(queues: Vec<Sender<Arc<RunEvent>>>) -> Self {
        EventSink {
            queues: Arc::new(queues),
        }
    }

    /// A sink that drops everything (a rehearsal, a test).
    pub fn none() -> Self {
        EventSink::default()
    }

    /// Sends `event` to every subscriber still listening. Never blocks and never fails: a
    /// subscriber that stopped (its reporter failed) is skipped.
    pub fn send(&self, event: RunEvent) {
        if self.queues.is_empty() {
            return;
        }
        let event = Arc::new(event);
        for queue in self.queues.iter() {
            let _ = queue.send(event.clone());
        }
    }

    /// The sink for one run of `experiment`: timeline entries are tagged with it.
    pub fn for_run(&self, experiment: &str, run: Option<u32>) -> RunEvents {
        RunEvents {
            sink: self.clone(),
            experiment: experiment.to_string(),
            run,
        }
    }
}

/// The sink of one run: what the run's timeline sends each entry to.
#[derive(Clone, Default)]
pub struct RunEvents {
    sink: EventSink,
    experiment: String,
    run: Option<u32>,
}

impl RunEvents {
    /// Sends one timeline entry.
    pub(crate) fn entry(&self, entry: &Entry) {
        if self.sink.queues.is_empty() {
            return;
        }
        self.sink.send(RunEvent::Entry {
            experiment: self.experiment.clone(),
            run: self.run,
            entry: entry.clone(),
        });
    }

    /// Sends what the run's experiment touches.
    pub(crate) fn focus(&self, focus: &Arc<Focus>) {
        if self.sink.queues.is_empty() {
            return;
        }
        self.sink.send(RunEvent::Focus {
            experiment: self.experiment.clone(),
            run: self.run,
            focus: Arc::clone(focus),
        });
    }

    /// Sends what the run waits for now.
    pub(crate) fn progress(&self, progress: Progress) {
        if self.sink.queues.is_empty() {
            return;
        }
        self.sink.send(RunEvent::Progress {
            experiment: self.experiment.clone(),
            run: self.run,
            progress,
        });
    }

    /// Sends the run's record, once it is final.
    pub(crate) fn finished(&self, record: &Arc<RunRecord>) {
        if self.sink.queues.is_empty() {
            return;
        }
        self.sink.send(RunEvent::RunFinished(Arc::clone(record)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Event;

    #[test]
    fn a_subscriber_that_went_away_does_not_stop_the_others() {
        let (gone_tx, gone_rx) = std::sync::mpsc::channel();
        let (kept_tx, kept_rx) = std::sync::mpsc::channel();
        drop(gone_rx);
        let sink = EventSink::new(vec![gone_tx, kept_tx]);
        let run = sink.for_run("e", Some(2));
        run.entry(&Entry {
            offset_ms: 5,
            wall: chrono::Utc::now(),
            event: Event::Note {
                message: "hello".into(),
            },
        });
        match &*kept_rx.try_recv().expect("delivered") {
            RunEvent::Entry {
                experiment, run, ..
            } => assert_eq!((experiment.as_str(), *run), ("e", Some(2))),
            other => panic!("{other:?}"),
        }
    }
}
