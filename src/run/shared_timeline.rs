//! The run's shared timeline: the observer and the runner append to it, the judge reads
//! snapshots of it while the run goes on, and every entry is sent to the run's events as
//! it lands (never to a reporter directly: sending cannot block or fail).

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::events::RunEvents;
use crate::judge::TimelineIndex;
use crate::timeline::{Entry, Event, Timeline};

/// The farthest ahead of time zero an offset is turned into an instant: offsets from a
/// cluster or a record that reach past it are held there instead of overflowing the clock.
const FAR_FUTURE_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

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
    events: RunEvents,
}

impl SharedTimeline {
    /// A recorder whose time zero is now, sending each entry to `events`.
    pub(crate) fn start(events: RunEvents) -> Self {
        Self::start_at(Utc::now(), events)
    }

    /// A recorder whose time zero is now on tokio's clock and `wall_zero` on the wall
    /// (a rehearsal's is the record's).
    pub(crate) fn start_at(wall_zero: DateTime<Utc>, events: RunEvents) -> Self {
        SharedTimeline {
            inner: Arc::new(Mutex::new(Filed {
                timeline: Timeline::new(wall_zero),
                index: TimelineIndex::new(),
            })),
            grew: Arc::new(Notify::new()),
            zero: Instant::now(),
            wall_zero,
            events,
        }
    }

    /// The instant of offset `ms` (clamped between time zero and far in the future).
    pub(crate) fn instant_at(&self, ms: i64) -> Instant {
        let ms = ms.max(0).unsigned_abs().min(FAR_FUTURE_MS);
        self.zero + std::time::Duration::from_millis(ms)
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
            wall: self.wall_zero + chrono::Duration::milliseconds(offset_ms),
            event,
        };
        self.push(entry);
        offset_ms
    }

    /// Records an entry stamped elsewhere (by the observer), keeping the order of offsets.
    pub(crate) fn push(&self, entry: Entry) {
        self.events.entry(&entry);
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

    /// A copy of the timeline up to `end` (all of it for `None`), without copying the rest.
    pub(crate) fn snapshot_until(&self, end: Option<i64>) -> Timeline {
        let filed = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match end {
            Some(end) => filed.timeline.until(end),
            None => filed.timeline.clone(),
        }
    }

    /// The timeline itself, moved out when no other handle is left (the run is over), else
    /// copied.
    pub(crate) fn into_timeline(self) -> Timeline {
        match Arc::try_unwrap(self.inner) {
            Ok(filed) => {
                filed
                    .into_inner()
                    .unwrap_or_else(PoisonError::into_inner)
                    .timeline
            }
            Err(shared) => shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .timeline
                .clone(),
        }
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
        let rec = SharedTimeline::start(RunEvents::default());
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
    fn every_entry_is_sent_to_the_events() {
        let (tx, rx) = std::sync::mpsc::channel();
        let events = crate::events::EventSink::new(vec![tx]).for_run("e", None);
        let rec = SharedTimeline::start(events);
        rec.note("one");
        rec.note("two");
        assert_eq!(rx.try_iter().count(), 2);
        assert_eq!(rec.snapshot().entries.len(), 2);
    }

    #[test]
    fn offsets_far_away_or_before_zero_become_instants_without_overflow() {
        let rec = SharedTimeline::start(RunEvents::default());
        assert_eq!(rec.instant_at(-5), rec.zero());
        assert!(rec.instant_at(i64::MAX) > rec.zero());
    }
}
