//! The run's shared timeline: the observer and the runner append to it, the judge reads
//! snapshots of it while the run goes on, and a live view sees every entry as it lands.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::judge::TimelineIndex;
use crate::timeline::{Entry, Event, Timeline};

/// A live-view callback: called once per entry, in order.
pub(crate) type LiveView = Arc<dyn Fn(&Entry) + Send + Sync>;

/// The timeline and the judge's index of it, updated together.
#[derive(Default)]
struct Filed {
    timeline: Timeline,
    index: TimelineIndex,
}

/// One timeline for the whole run: the observer and the runner append, the judge reads the
/// index kept beside it (each entry filed once, as it lands).
#[derive(Clone)]
pub(crate) struct SharedTimeline {
    inner: Arc<Mutex<Filed>>,
    grew: Arc<Notify>,
    zero: Instant,
    wall_zero: DateTime<Utc>,
    live: Option<LiveView>,
}

impl SharedTimeline {
    /// A recorder whose time zero is now.
    pub(crate) fn start(live: Option<LiveView>) -> Self {
        let wall_zero = Utc::now();
        SharedTimeline {
            inner: Arc::new(Mutex::new(Filed {
                timeline: Timeline::new(wall_zero),
                index: TimelineIndex::new(),
            })),
            grew: Arc::new(Notify::new()),
            zero: Instant::now(),
            wall_zero,
            live,
        }
    }

    /// Monotonic time zero.
    pub(crate) fn zero(&self) -> Instant {
        self.zero
    }

    /// Wall-clock time zero.
    pub(crate) fn wall_zero(&self) -> DateTime<Utc> {
        self.wall_zero
    }

    /// Milliseconds since time zero, monotonic.
    pub(crate) fn offset_ms(&self) -> i64 {
        i64::try_from(self.zero.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// Records an event that happens now; returns its offset.
    pub(crate) fn record(&self, event: Event) -> i64 {
        let offset_ms = self.offset_ms();
        let entry = Entry {
            offset_ms,
            wall: Utc::now(),
            event,
        };
        self.push(entry);
        offset_ms
    }

    /// Records an entry stamped elsewhere (by the observer), keeping the order of offsets.
    pub(crate) fn push(&self, entry: Entry) {
        if let Some(live) = &self.live {
            live(&entry);
        }
        let mut filed = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        filed.index.insert(&entry);
        filed.timeline.insert(entry);
        drop(filed);
        self.grew.notify_one();
    }

    /// Resolves once an entry was appended since the last call returned (an entry appended
    /// while nobody waited is not lost: it wakes the next call at once).
    pub(crate) async fn grown(&self) {
        self.grew.notified().await;
    }

    /// Runs `f` over the judge's index of the timeline as it stands, without copying it;
    /// appends wait meanwhile.
    pub(crate) fn judge_view<R>(&self, f: impl FnOnce(&TimelineIndex) -> R) -> R {
        f(&self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .index)
    }

    /// Records a free-form note.
    pub(crate) fn note(&self, message: impl Into<String>) {
        self.record(Event::Note {
            message: message.into(),
        });
    }

    /// A copy of the timeline so far.
    pub(crate) fn snapshot(&self) -> Timeline {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .timeline
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note_at(ms: i64, text: &str) -> Entry {
        Entry {
            offset_ms: ms,
            wall: Utc::now(),
            event: Event::Note {
                message: text.into(),
            },
        }
    }

    #[test]
    fn late_stamped_entries_are_placed_in_offset_order() {
        let rec = SharedTimeline::start(None);
        rec.push(note_at(10, "a"));
        rec.push(note_at(30, "c"));
        rec.push(note_at(20, "b"));
        rec.push(note_at(30, "d"));
        let order: Vec<_> = rec
            .snapshot()
            .entries
            .iter()
            .map(|e| match &e.event {
                Event::Note { message } => message.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
    }

    #[test]
    fn live_view_sees_every_entry() {
        let seen = Arc::new(Mutex::new(0));
        let counter = seen.clone();
        let rec = SharedTimeline::start(Some(Arc::new(move |_| *counter.lock().unwrap() += 1)));
        rec.note("one");
        rec.note("two");
        assert_eq!(*seen.lock().unwrap(), 2);
        assert_eq!(rec.snapshot().entries.len(), 2);
    }
}
