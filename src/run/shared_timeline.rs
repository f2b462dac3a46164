//! The run's shared timeline: the observer and the runner append to it, the judge reads
//! snapshots of it while the run goes on, and every entry is sent to the run's events as
//! it lands (never to a reporter directly: sending cannot block or fail).

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::events::RunEvents;
use crate::judge::{Latest, TimelineIndex};
use crate::timeline::{Entry, Event, Timeline};

/// The farthest ahead of time zero an offset is turned into an instant: offsets from a
/// cluster or a record that reach past it are held there instead of overflowing the clock.
const FAR_FUTURE_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// The timeline and the judge's index of it, updated together.
#[derive(Default)]
struct Filed {
    timeline: Timeline,
    /// Every entry while observation goes on; once it ended, only those stamped up to its
    /// end: what the final verdicts are judged on.
    index: TimelineIndex,
    /// Whether observation ended, and where what came after it is filed.
    ended: Option<Ended>,
}

/// Observation is over: the offset it reached, and the entries stamped after it (undo,
/// the restored check, teardown) filed apart, so the index up to it stays as it was while
/// the observer's latest word stays readable (`latest_view`).
struct Ended {
    until_ms: i64,
    /// `None` when the index already held entries stamped after `until_ms` when
    /// observation ended (a rehearsal whose record ended earlier): the final verdicts are
    /// then judged on an index of the timeline up to `until_ms`, built for them, and every
    /// entry goes on being filed in the index.
    after: Option<TimelineIndex>,
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
                ended: None,
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

    /// Sends what the run waits for to the run's events (not onto the timeline).
    pub(crate) fn progress(&self, progress: crate::events::Progress) {
        self.events.progress(progress);
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
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let filed = &mut *guard;
        match &mut filed.ended {
            Some(Ended {
                until_ms,
                after: Some(after),
            }) if entry.offset_ms > *until_ms => after.insert(&entry),
            _ => filed.index.insert(&entry),
        }
        filed.timeline.insert(entry);
        drop(guard);
        self.grew.notify_one();
    }

    /// Resolves once an entry was appended since the last call returned (an entry appended
    /// while nobody waited is not lost: it wakes the next call at once).
    pub(crate) async fn grown(&self) {
        self.grew.notified().await;
    }

    /// Runs `f` over the judge's index of the timeline as it stands, without copying it;
    /// appends wait meanwhile. Once observation ended, the index holds what was stamped up
    /// to its end only: the run's loop judges with it, and nothing after.
    pub(crate) fn judge_view<R>(&self, f: impl FnOnce(&TimelineIndex) -> R) -> R {
        f(&self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .index)
    }

    /// Ends observation now, or at `horizon` if that came first; returns that offset.
    /// From here on entries stamped after it are filed apart from the index the final
    /// verdicts are judged on ([`SharedTimeline::observed_view`]), which is then, without
    /// a copy, the index of the timeline up to that offset. Ending it twice keeps the first.
    pub(crate) fn end_observation(&self, horizon: Option<i64>) -> i64 {
        let mut filed = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(ended) = &filed.ended {
            return ended.until_ms;
        }
        // Under the lock: an entry filed before was stamped before now.
        let until_ms = self.offset_ms().min(horizon.unwrap_or(i64::MAX));
        let clean = filed.index.is_empty() || filed.index.end_ms() <= until_ms;
        filed.ended = Some(Ended {
            until_ms,
            after: clean.then(TimelineIndex::new),
        });
        until_ms
    }

    /// Runs `f` over the index of what was observed (the timeline up to where observation
    /// ended; all of it if it never ended) and that offset: what the final verdicts and the
    /// recovery figures are judged on. No copy of the timeline or of the index is made,
    /// except when the index reached past the end already when it ended (see `Ended`).
    pub(crate) fn observed_view<R>(&self, f: impl FnOnce(&TimelineIndex, i64) -> R) -> R {
        let filed = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match &filed.ended {
            None => f(&filed.index, filed.index.end_ms()),
            Some(Ended {
                until_ms,
                after: Some(_),
            }) => f(&filed.index, *until_ms),
            Some(Ended {
                until_ms,
                after: None,
            }) => {
                let mut index = TimelineIndex::new();
                for entry in filed
                    .timeline
                    .entries
                    .iter()
                    .take_while(|e| e.offset_ms <= *until_ms)
                {
                    index.insert(entry);
                }
                f(&index, *until_ms)
            }
        }
    }

    /// Runs `f` over what the observer said last, entries after the end of observation
    /// included: what the "cluster restored" check reads after the last undo.
    pub(crate) fn latest_view<R>(&self, f: impl FnOnce(&Latest<'_>) -> R) -> R {
        let filed = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let after = filed.ended.as_ref().and_then(|e| e.after.as_ref());
        f(&Latest::new(&filed.index, after))
    }

    /// Records a free-form note.
    pub(crate) fn note(&self, message: impl Into<String>) {
        self.record(Event::Note {
            message: message.into(),
        });
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

    /// The timeline moved out (as [`SharedTimeline::into_timeline`]), with what stamps the
    /// run's last entries on it: what the run decides once its record exists (the
    /// conformance verdicts, its end) is put on the record's timeline and sent to the
    /// run's events as every other entry.
    pub(crate) fn into_parts(self) -> (Timeline, Stamp) {
        let stamp = Stamp {
            zero: self.zero,
            wall_zero: self.wall_zero,
            events: self.events.clone(),
        };
        (self.into_timeline(), stamp)
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

/// Stamps entries on a timeline moved out of its [`SharedTimeline`], on the same clock,
/// and sends each to the run's events.
pub(crate) struct Stamp {
    zero: Instant,
    wall_zero: DateTime<Utc>,
    events: RunEvents,
}

impl Stamp {
    /// Records an event that happens now on `timeline`.
    pub(crate) fn record(&self, timeline: &mut Timeline, event: Event) {
        let offset_ms = i64::try_from(self.zero.elapsed().as_millis()).unwrap_or(i64::MAX);
        let entry = Entry {
            offset_ms,
            wall: self.wall_zero + chrono::Duration::milliseconds(offset_ms),
            event,
        };
        self.events.entry(&entry);
        timeline.insert(entry);
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

    /// Every recorded run of `fixtures/records/`.
    fn recorded_runs() -> Vec<crate::record::RunRecord> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/records");
        let mut records: Vec<_> = std::fs::read_dir(&dir)
            .expect("fixtures/records")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .map(|p| crate::record::RunRecord::load(&p).expect("record"))
            .collect();
        records.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        assert!(records.len() >= 4, "the recorded runs");
        records
    }

    /// What the final judgement reads, compared with the reference: the timeline up to
    /// `until` filed from scratch and judged.
    fn assert_observed_view_is_the_prefix(
        rec: &SharedTimeline,
        record: &crate::record::RunRecord,
        until: i64,
    ) {
        let observed = crate::judge::Observed {
            until_ms: until,
            complete: true,
        };
        let (verdicts, figures, len, seen_until) = rec.observed_view(|index, until_ms| {
            (
                crate::judge::judge_index(
                    &record.experiment,
                    &record.targets,
                    &record.cluster.timers,
                    &record.cluster.capabilities,
                    index,
                    observed,
                ),
                crate::judge::figures_of(&record.experiment, &record.targets, index),
                index.len(),
                until_ms,
            )
        });
        let prefix = rec.snapshot().until(until);
        assert_eq!(seen_until, until, "{}", record.run_id);
        assert_eq!(len, prefix.entries.len(), "{}", record.run_id);
        assert_eq!(
            verdicts,
            crate::judge::judge_until(
                &record.experiment,
                &record.targets,
                &record.cluster.timers,
                &record.cluster.capabilities,
                &prefix,
                observed,
            ),
            "{}",
            record.run_id
        );
        assert_eq!(
            figures,
            crate::judge::figures(&record.experiment, &record.targets, &prefix),
            "{}",
            record.run_id
        );
    }

    /// The latest word on the cluster, compared with an index of the whole timeline.
    fn assert_latest_is_the_whole(rec: &SharedTimeline, what: &str) {
        let whole = TimelineIndex::of(&rec.snapshot());
        let reference = Latest::new(&whole, None);
        let (nodes, pods, in_sight) = rec.latest_view(|latest| {
            (
                latest
                    .nodes()
                    .map(|(n, s)| (n.clone(), s.clone()))
                    .collect::<std::collections::BTreeMap<_, _>>(),
                latest
                    .pods()
                    .map(|(p, s)| (p.clone(), s.clone()))
                    .collect::<std::collections::BTreeMap<_, _>>(),
                latest.observer_in_sight(),
            )
        });
        let want_nodes: std::collections::BTreeMap<_, _> = reference
            .nodes()
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect();
        let want_pods: std::collections::BTreeMap<_, _> = reference
            .pods()
            .map(|(p, s)| (p.clone(), s.clone()))
            .collect();
        assert_eq!(nodes, want_nodes, "{what}: nodes");
        assert_eq!(pods, want_pods, "{what}: pods");
        assert_eq!(in_sight, reference.observer_in_sight(), "{what}: in sight");
    }

    #[tokio::test(start_paused = true)]
    async fn the_final_judgement_reads_the_live_index_as_it_was_when_observation_ended() {
        for record in recorded_runs() {
            let entries = &record.timeline.entries;
            // Observation ends halfway through the record: the rest (and one entry stamped
            // before the end that lands late, as an observer's may) arrives after.
            let until = entries[entries.len() / 2].offset_ms;
            let (before, after): (Vec<_>, Vec<_>) =
                entries.iter().partition(|e| e.offset_ms <= until);
            let rec = SharedTimeline::start(RunEvents::default());
            let (late, early) = before.split_last().expect("entries before the end");
            for e in early {
                rec.push((*e).clone());
            }
            tokio::time::advance(std::time::Duration::from_secs(30 * 24 * 3600)).await;
            assert_eq!(rec.end_observation(Some(until)), until);
            assert_eq!(rec.end_observation(None), until, "the first end stays");
            for e in after.iter().chain([late]) {
                rec.push((*e).clone());
            }
            assert_observed_view_is_the_prefix(&rec, &record, until);
            assert_latest_is_the_whole(&rec, &record.run_id);
            assert_eq!(rec.snapshot().entries, *entries, "{}", record.run_id);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_index_already_past_the_end_is_judged_on_the_prefix_filed_for_it() {
        // A rehearsal: its record ended before the loop noticed, so entries stamped after
        // the end were filed already when observation ended.
        for record in recorded_runs() {
            let entries = &record.timeline.entries;
            let until = entries[entries.len() / 2].offset_ms;
            let rec = SharedTimeline::start(RunEvents::default());
            for e in entries {
                rec.push(e.clone());
            }
            tokio::time::advance(std::time::Duration::from_secs(30 * 24 * 3600)).await;
            assert_eq!(rec.end_observation(Some(until)), until);
            assert_observed_view_is_the_prefix(&rec, &record, until);
            assert_latest_is_the_whole(&rec, &record.run_id);
        }
    }

    #[test]
    fn a_run_that_never_ended_observation_is_judged_on_all_of_it() {
        let rec = SharedTimeline::start(RunEvents::default());
        rec.push(note_at(10, "a"));
        rec.push(note_at(30, "b"));
        assert_eq!(
            rec.observed_view(|index, until| (index.len(), until)),
            (2, 30)
        );
    }

    #[test]
    fn offsets_far_away_or_before_zero_become_instants_without_overflow() {
        let rec = SharedTimeline::start(RunEvents::default());
        assert_eq!(rec.instant_at(-5), rec.zero());
        assert!(rec.instant_at(i64::MAX) > rec.zero());
    }
}
