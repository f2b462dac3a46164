//! One kind of object followed through the API server: a first list (streamed, or read in
//! pages), then one watch from the version that list ended at, opened again from the last
//! version read whenever the server ends it, and a relist whenever sight was lost.
//!
//! kube-runtime's `watcher` does the same job, and the observer used it until measured side
//! by side with a bare client (`bench_observe --twin watcher`): at 30,000 pods its layers
//! (a state machine stepped per event, a timer armed and dropped per event, a backoff
//! wrapper, a boxed stream under another) added as much to the tail of a delivery as all of
//! faultline's decoding and recording. This loop reads the same `Api::watch` events with
//! nothing in between; what each event means is decided by pure functions, tested alone.

use std::fmt::Debug;
use std::pin::Pin;
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::runtime::watcher::DefaultBackoff;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::time::{Instant, Sleep};

use super::recorder::Seen;
use crate::cluster::failover::silent_since;

/// Objects per page of a paged first list: client-go's pager default, as kube's watcher.
const PAGE_SIZE: u32 = 500;

/// A watch that delivers nothing at all (not even a bookmark, which the API server sends
/// about once a minute) for this long is taken as dead and opened again from its version:
/// a connection can die without either side hearing it.
const IDLE: Duration = Duration::from_secs(295);

/// A relist this soon after the last one waits its backoff first: a watch that breaks as
/// soon as it opens must not turn into a loop of full lists.
const RELIST_CALM: Duration = Duration::from_secs(10);

/// The bookmark annotation that ends a streamed first list.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

type Events<K> = BoxStream<'static, Result<WatchEvent<K>, kube::Error>>;

/// What the follower yields: what was seen, and for a failure since when the source had
/// really been blind (a failover's abandonment knows; see [`silent_since`]).
pub(crate) type Sighting<K> = (Seen<K>, Option<Instant>);

/// `api`'s objects (those matching `field_selector`), followed for as long as the stream is
/// polled. A first list opens with `Init`, carries each object as `InitApply` and closes with
/// `InitDone`; then changes come as `Applied` and `Deleted`. A failure is one `Failed`, and
/// after it everything is listed again: a resumed watch would deliver what was missed after
/// the gap, stamped too late, where a relist's difference belongs inside it.
pub(crate) fn follow<K>(
    api: Api<K>,
    field_selector: Option<String>,
    streamed: bool,
) -> impl futures::Stream<Item = Sighting<K>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let follower = Follower::new(api, field_selector, streamed);
    stream::unfold(follower, |mut follower| async move {
        let sighting = follower.step().await;
        Some((sighting, follower))
    })
}

/// Where the follower is.
enum Phase<K> {
    /// A list is due, after `wait` (the backoff of a failed attempt).
    List { wait: Option<Duration> },
    /// A page read: its objects handed out one by one, then the next page, or the end.
    Page {
        objects: std::vec::IntoIter<K>,
        next: Option<String>,
        version: String,
    },
    /// The first list as a streaming watch (`sendInitialEvents`), up to its end bookmark;
    /// the same watch then goes on live.
    Streaming { events: Events<K> },
    /// Listed, or a live watch ended: a watch from `version` is to be opened.
    Resume { version: String },
    /// The live watch, and the last version it delivered.
    Live { version: String, events: Events<K> },
}

/// What one event of a watch means for the follower.
#[derive(Debug)]
pub(crate) enum Meaning<K> {
    /// Hand this on: a change of the live watch, or an object of the first list.
    Yield(Seen<K>),
    /// Nothing to hand on (a bookmark in the middle, a deletion during a first list).
    Nothing,
    /// The streamed first list is complete at this version ([`initial_event`] only).
    ListedAt(String),
    /// The server reported an error on the watch: sight is lost.
    Lost(kube::Error),
}

/// What an event of the live watch means (never [`Meaning::ListedAt`]); `version` becomes
/// the last version read.
pub(crate) fn live_event<K: Resource>(event: WatchEvent<K>, version: &mut String) -> Meaning<K> {
    match event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
            note_version(&o, version);
            Meaning::Yield(Seen::Applied(o))
        }
        WatchEvent::Deleted(o) => {
            note_version(&o, version);
            Meaning::Yield(Seen::Deleted(o))
        }
        WatchEvent::Bookmark(b) => {
            *version = b.metadata.resource_version;
            Meaning::Nothing
        }
        WatchEvent::Error(status) => Meaning::Lost(kube::Error::Api(status)),
    }
}

/// What an event of a streamed first list means.
pub(crate) fn initial_event<K>(event: WatchEvent<K>) -> Meaning<K> {
    match event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => Meaning::Yield(Seen::InitApply(o)),
        // The API server sends none while it streams the current state.
        WatchEvent::Deleted(_) => Meaning::Nothing,
        WatchEvent::Bookmark(b) if b.metadata.annotations.contains_key(INITIAL_EVENTS_END) => {
            Meaning::ListedAt(b.metadata.resource_version)
        }
        WatchEvent::Bookmark(_) => Meaning::Nothing,
        WatchEvent::Error(status) => Meaning::Lost(kube::Error::Api(status)),
    }
}

fn note_version<K: Resource>(object: &K, version: &mut String) {
    if let Some(v) = object
        .meta()
        .resource_version
        .as_deref()
        .filter(|v| !v.is_empty())
    {
        v.clone_into(version);
    }
}

/// The follower's state between two items.
struct Follower<K> {
    api: Api<K>,
    field_selector: Option<String>,
    streamed: bool,
    phase: Phase<K>,
    /// Waits between failed lists (kube's: 0.8 s doubling to 30 s, with jitter, reset
    /// after two quiet minutes).
    backoff: DefaultBackoff,
    /// When the last list completed.
    listed_at: Option<Instant>,
    /// How long the current watch has been silent.
    silence: Silence,
}

/// How long a watch has been silent, checked by one timer armed once per idle period
/// rather than once per event (as a timeout around each `next` would).
struct Silence {
    last_heard: Instant,
    timer: Pin<Box<Sleep>>,
}

impl Silence {
    fn new() -> Self {
        Silence {
            last_heard: Instant::now(),
            timer: Box::pin(tokio::time::sleep(IDLE)),
        }
    }

    /// A watch was just opened: its silence counts from now.
    fn restart(&mut self) {
        self.last_heard = Instant::now();
        self.timer.as_mut().reset(self.last_heard + IDLE);
    }

    /// The next item of `events`, or `None` when it ended or stayed silent for [`IDLE`].
    async fn next<S: futures::Stream + Unpin>(&mut self, events: &mut S) -> Option<S::Item> {
        loop {
            tokio::select! {
                biased;
                item = events.next() => {
                    self.last_heard = Instant::now();
                    return item;
                }
                () = &mut self.timer => {
                    let quiet_until = self.last_heard + IDLE;
                    if Instant::now() >= quiet_until {
                        self.restart();
                        return None;
                    }
                    self.timer.as_mut().reset(quiet_until);
                }
            }
        }
    }
}

impl<K> Follower<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn new(api: Api<K>, field_selector: Option<String>, streamed: bool) -> Self {
        Follower {
            api,
            field_selector,
            streamed,
            phase: Phase::List { wait: None },
            backoff: DefaultBackoff::default(),
            listed_at: None,
            silence: Silence::new(),
        }
    }

    /// The next thing seen; loops over what yields nothing (pages fetched, watches opened,
    /// bookmarks).
    async fn step(&mut self) -> Sighting<K> {
        loop {
            let phase = std::mem::replace(&mut self.phase, Phase::List { wait: None });
            match phase {
                Phase::List { wait } => {
                    if let Some(wait) = wait {
                        tokio::time::sleep(wait).await;
                    }
                    match self.start_list().await {
                        Ok(()) => return (Seen::Init, None),
                        Err(e) => return self.failed_list(e),
                    }
                }
                Phase::Page {
                    mut objects,
                    next,
                    version,
                } => {
                    if let Some(object) = objects.next() {
                        self.phase = Phase::Page {
                            objects,
                            next,
                            version,
                        };
                        return (Seen::InitApply(object), None);
                    }
                    match next {
                        None => {
                            self.listed();
                            self.phase = Phase::Resume { version };
                            return (Seen::InitDone, None);
                        }
                        Some(token) => {
                            if let Err(e) = self.read_page(Some(token)).await {
                                return self.failed_list(e);
                            }
                        }
                    }
                }
                Phase::Streaming { mut events } => match self.silence.next(&mut events).await {
                    None => {
                        return self.failed_list(ended("the streamed list ended before its end"));
                    }
                    Some(Err(e)) => return self.failed_list(e),
                    Some(Ok(event)) => match initial_event(event) {
                        Meaning::Yield(seen) => {
                            self.phase = Phase::Streaming { events };
                            return (seen, None);
                        }
                        Meaning::Nothing => self.phase = Phase::Streaming { events },
                        Meaning::ListedAt(version) => {
                            self.listed();
                            self.phase = Phase::Live { version, events };
                            return (Seen::InitDone, None);
                        }
                        Meaning::Lost(e) => return self.failed_list(e),
                    },
                },
                Phase::Resume { version } => {
                    let params = self.watch_params(false);
                    match self.api.watch(&params, &version).await {
                        Ok(events) => {
                            self.silence.restart();
                            self.phase = Phase::Live {
                                version,
                                events: events.boxed(),
                            };
                        }
                        Err(e) => return self.lost(e),
                    }
                }
                Phase::Live {
                    mut version,
                    mut events,
                } => match self.silence.next(&mut events).await {
                    // Ended by the server (its timeout) or found idle: resumed, no gap.
                    None => self.phase = Phase::Resume { version },
                    Some(Err(e)) => return self.lost(e),
                    Some(Ok(event)) => match live_event(event, &mut version) {
                        Meaning::Yield(seen) => {
                            self.phase = Phase::Live { version, events };
                            return (seen, None);
                        }
                        // `ListedAt` ends a streamed first list; a live watch has none.
                        Meaning::Nothing | Meaning::ListedAt(_) => {
                            self.phase = Phase::Live { version, events };
                        }
                        Meaning::Lost(e) => return self.lost(e),
                    },
                },
            }
        }
    }

    /// Opens a list: the streaming watch, or the first page.
    async fn start_list(&mut self) -> Result<(), kube::Error> {
        if self.streamed {
            let params = self.watch_params(true);
            let events = self.api.watch(&params, "0").await?;
            self.silence.restart();
            self.phase = Phase::Streaming {
                events: events.boxed(),
            };
            Ok(())
        } else {
            self.read_page(None).await
        }
    }

    /// Reads one page of a paged list into [`Phase::Page`].
    async fn read_page(&mut self, token: Option<String>) -> Result<(), kube::Error> {
        let mut params = ListParams::default().limit(PAGE_SIZE);
        if let Some(f) = &self.field_selector {
            params = params.fields(f);
        }
        params.continue_token = token;
        let list = self.api.list(&params).await?;
        let version = list.metadata.resource_version.filter(|v| !v.is_empty());
        let next = list.metadata.continue_.filter(|t| !t.is_empty());
        let Some(version) = version else {
            return Err(ended("the API server's list carried no resource version"));
        };
        self.phase = Phase::Page {
            objects: list.items.into_iter(),
            next,
            version,
        };
        Ok(())
    }

    fn watch_params(&self, initial: bool) -> WatchParams {
        let mut params = if initial {
            WatchParams::streaming_lists()
        } else {
            WatchParams::default()
        };
        if let Some(f) = &self.field_selector {
            params = params.fields(f);
        }
        params
    }

    fn listed(&mut self) {
        self.listed_at = Some(Instant::now());
    }

    /// A list failed: told, and tried again after the backoff.
    fn failed_list(&mut self, e: kube::Error) -> Sighting<K> {
        self.phase = Phase::List {
            wait: self.backoff.next(),
        };
        failure(&e)
    }

    /// Sight was lost after a list: told, and listed again at once (after the backoff when
    /// the last list was only moments ago).
    fn lost(&mut self, e: kube::Error) -> Sighting<K> {
        let calm = self.listed_at.is_none_or(|at| at.elapsed() >= RELIST_CALM);
        self.phase = Phase::List {
            wait: if calm { None } else { self.backoff.next() },
        };
        failure(&e)
    }
}

fn failure<K>(e: &kube::Error) -> Sighting<K> {
    (Seen::Failed(e.to_string()), silent_since(e))
}

/// An error of the follower's own, as the client's error type.
fn ended(what: &str) -> kube::Error {
    kube::Error::Service(what.to_string().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use kube::core::watch::{Bookmark, BookmarkMeta};
    use kube::core::{Status, TypeMeta};

    fn node(name: &str, version: Option<&str>) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.to_string());
        n.metadata.resource_version = version.map(str::to_string);
        n
    }

    fn bookmark(version: &str, end: bool) -> Bookmark {
        let mut annotations = std::collections::BTreeMap::new();
        if end {
            annotations.insert(INITIAL_EVENTS_END.to_string(), "true".to_string());
        }
        Bookmark {
            types: TypeMeta::default(),
            metadata: BookmarkMeta {
                resource_version: version.to_string(),
                annotations,
            },
        }
    }

    fn gone() -> WatchEvent<Node> {
        WatchEvent::Error(Box::new(
            Status::failure("too old resource version", "Expired").with_code(410),
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_silent_for_the_idle_period_ends_and_one_that_speaks_goes_on() {
        let mut silence = Silence::new();
        let start = Instant::now();
        let mut never = stream::pending::<u32>();
        assert_eq!(silence.next(&mut never).await, None);
        assert_eq!(start.elapsed(), IDLE, "ended only after the idle period");

        // One item a little under the idle period apart, five times: never taken as dead.
        let start = Instant::now();
        silence.restart();
        let step = IDLE - Duration::from_secs(5);
        let mut slow = stream::iter(1..=5u32)
            .then(|i| async move {
                tokio::time::sleep(step).await;
                i
            })
            .boxed();
        for i in 1..=5 {
            assert_eq!(silence.next(&mut slow).await, Some(i));
        }
        assert_eq!(start.elapsed(), step * 5);
        // Then it ends as a stream does, at once.
        assert_eq!(silence.next(&mut slow).await, None);
        assert_eq!(start.elapsed(), step * 5);
    }

    #[test]
    fn a_live_change_is_handed_on_and_its_version_kept_for_the_resume() {
        let mut version = "10".to_string();
        let m = live_event(WatchEvent::Modified(node("a", Some("11"))), &mut version);
        assert!(
            matches!(m, Meaning::Yield(Seen::Applied(n)) if n.metadata.name.as_deref() == Some("a"))
        );
        assert_eq!(version, "11");
        let m = live_event(WatchEvent::Deleted(node("a", Some("12"))), &mut version);
        assert!(matches!(m, Meaning::Yield(Seen::Deleted(_))));
        assert_eq!(version, "12");
        // An object without a version (never sent by a server) leaves the last one.
        live_event(WatchEvent::Added(node("b", None)), &mut version);
        assert_eq!(version, "12");
    }

    #[test]
    fn a_bookmark_moves_the_live_version_and_hands_nothing_on() {
        let mut version = "10".to_string();
        let m = live_event::<Node>(WatchEvent::Bookmark(bookmark("40", false)), &mut version);
        assert!(matches!(m, Meaning::Nothing));
        assert_eq!(version, "40");
    }

    #[test]
    fn an_error_on_the_watch_is_sight_lost_with_the_servers_words() {
        let mut version = "10".to_string();
        let Meaning::Lost(e) = live_event(gone(), &mut version) else {
            panic!("a 410 on the live watch must be sight lost");
        };
        assert!(e.to_string().contains("too old resource version"), "{e}");
        assert!(matches!(initial_event(gone()), Meaning::Lost(_)));
    }

    #[test]
    fn a_streamed_list_ends_at_the_bookmark_that_says_so_and_not_before() {
        assert!(matches!(
            initial_event(WatchEvent::Added(node("a", Some("5")))),
            Meaning::Yield(Seen::InitApply(_))
        ));
        assert!(matches!(
            initial_event::<Node>(WatchEvent::Bookmark(bookmark("6", false))),
            Meaning::Nothing
        ));
        assert!(matches!(
            initial_event::<Node>(WatchEvent::Deleted(node("a", Some("7")))),
            Meaning::Nothing
        ));
        let Meaning::ListedAt(v) = initial_event::<Node>(WatchEvent::Bookmark(bookmark("9", true)))
        else {
            panic!("the end bookmark must complete the list");
        };
        assert_eq!(v, "9");
    }
}
