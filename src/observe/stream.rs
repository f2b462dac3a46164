//! Sources (watchers or poll loops) merged into one stream of stamped timeline entries.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use tokio::time::Instant;

use super::clock::Clock;
use super::follow::follow;
use super::ready::FirstLists;
use super::recorder::{ALL_NAMESPACES, Observation, Recorder, Seen};
use super::reduce::Workload;
use crate::cluster::lean::Lean;
use crate::experiment::model::{Action, Experiment, StepTime, Subject, WorkloadKind, WorkloadRef};
use crate::timeline::Entry;

/// What the observer looks at. Nodes are always watched, all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// Namespaces whose pods (and ReplicaSets, for owner resolution) are watched.
    pub namespaces: Namespaces,
    /// Workloads whose replica counts are recorded.
    pub workloads: Vec<WorkloadRef>,
}

impl Scope {
    /// What the observer must watch for this experiment: the namespaces and workloads that its
    /// targets, steps and expectations name.
    pub fn of(exp: &Experiment) -> Scope {
        let mut workloads: BTreeSet<WorkloadRef> = BTreeSet::new();
        let add_subject = |s: &Subject, w: &mut BTreeSet<WorkloadRef>| match s {
            Subject::Pods(p) => {
                w.insert(p.workload.clone());
            }
            Subject::Workload(r) => {
                w.insert(r.clone());
            }
            Subject::Node { .. } | Subject::Probe { .. } => {}
        };
        for e in &exp.expectations {
            add_subject(&e.subject, &mut workloads);
        }
        for s in &exp.steps {
            if let StepTime::When { subject, .. } = &s.at {
                add_subject(subject, &mut workloads);
            }
            if let Action::DeletePods { pods, .. } = &s.action
                && let Some(w) = &pods.workload
            {
                workloads.insert(w.clone());
            }
        }
        for t in &exp.targets {
            if let Some(w) = &t.selector.running_pods_of {
                workloads.insert(w.clone());
            }
        }
        for c in &exp.abort.conditions {
            if let crate::experiment::model::AbortKind::PodsNotReady { workload, .. } = &c.kind {
                workloads.insert(workload.clone());
            }
        }
        let namespaces = if exp.observe.all_namespaces {
            Namespaces::All
        } else {
            let mut names: BTreeSet<String> = exp.observe.namespaces.iter().cloned().collect();
            names.extend(workloads.iter().map(|w| w.namespace.clone()));
            // The model judges every pod on a faulted node: those of the experiment's own
            // namespace at least, whether an expectation names their workload or not.
            if exp.conformance {
                names.insert(exp.namespace.clone());
            }
            Namespaces::Only(names.into_iter().collect())
        };
        Scope {
            namespaces,
            workloads: workloads.into_iter().collect(),
        }
    }
}

/// Which namespaces' pods the observer watches: a few named ones (one watch each, what an
/// experiment about its own workloads needs) or all of them through one cluster-wide watch
/// (`observe.namespaces: all`, for clusters where anything anywhere may matter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Namespaces {
    /// These namespaces only (none: nodes and workloads only).
    Only(Vec<String>),
    /// Every namespace, with one list+watch per kind (`Api::all`), never one per namespace.
    All,
}

impl Default for Namespaces {
    fn default() -> Self {
        Namespaces::Only(Vec::new())
    }
}

/// How the cluster is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObserveMode {
    /// Watches: entries arrive as the API server sends them. Each first list is streamed
    /// when the API server serves streaming lists, else read in pages; [`resolve_first_lists`]
    /// asks the server once at run start (unresolved, it is read in pages).
    Watch,
    /// Watches whose first list is read in pages of 500 (kube's watcher default): every
    /// API server serves them.
    WatchPaged,
    /// Watches whose first list is one streaming watch (`sendInitialEvents`, Kubernetes'
    /// `WatchList`: on by default in 1.32 and from 1.34, off in 1.33): no page is decoded
    /// whole, and no round trip per page.
    WatchStreamed,
    /// Lists every `interval`: for clusters or proxies where long watches are unreliable.
    /// Transitions are only seen at poll resolution.
    Poll {
        /// Time between lists.
        interval: Duration,
    },
}

/// `mode` with [`ObserveMode::Watch`] made definite: streamed first lists when the API
/// server serves them (one watch on no node with `sendInitialEvents` tells: a server
/// without the `WatchList` gate refuses it with 422), paged otherwise. Other modes are
/// returned as they are.
pub async fn resolve_first_lists(client: &Client, mode: ObserveMode) -> ObserveMode {
    if mode != ObserveMode::Watch {
        return mode;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let probe = kube::api::WatchParams::streaming_lists()
        .fields("metadata.name=faultline-streaming-list-probe")
        .timeout(1);
    match tokio::time::timeout(Duration::from_secs(5), nodes.watch(&probe, "0")).await {
        Ok(Ok(_served)) => ObserveMode::WatchStreamed,
        _ => ObserveMode::WatchPaged,
    }
}

/// The cluster as a stream of timeline entries, stamped with `clock` when received.
///
/// The first entries are the initial state (`before: None`), closed by one
/// `run`/`observer-ready` entry once every source has answered its first list; afterwards
/// only reduced-state changes are emitted, and every lost-sight period is bracketed by `Gap` entries with the
/// changes recovered from the relist in between. The stream never ends on its own: drop it
/// to stop observing.
pub fn observe(
    client: Client,
    scope: &Scope,
    clock: Clock,
    mode: ObserveMode,
) -> BoxStream<'static, Entry> {
    let sources = sources(&client, scope, mode);
    let first_lists = FirstLists::new(sources.len());
    let tagged = sources
        .into_iter()
        .enumerate()
        .map(|(index, source)| source.map(move |sighting| (index, sighting)).boxed());
    stream::select_all(tagged)
        .scan(
            (Recorder::new(), first_lists),
            move |(recorder, first_lists), (index, (observation, blind_since))| {
                let ready = first_lists.note(index, &observation);
                let mut events = recorder.record(observation);
                // After the events of the list that completed it: the state before the
                // run is then all on the timeline.
                events.extend(ready);
                // A failure whose endpoint went silent earlier (faultline moved away from it)
                // opens its gap when sight was really lost: whatever the endpoint would have
                // sent after its last answer was never seen.
                let at = blind_since.map(|since| clock.offset_of(since).min(clock.offset_ms()));
                let stamped: Vec<Entry> = events
                    .into_iter()
                    .map(|event| {
                        let offset_ms = at.unwrap_or_else(|| clock.offset_ms());
                        Entry {
                            offset_ms,
                            wall: clock.wall_at(offset_ms),
                            event,
                        }
                    })
                    .collect();
                futures::future::ready(Some(stream::iter(stamped)))
            },
        )
        .flatten()
        .boxed()
}

/// An observation and, for a failure, since when the source had really been blind.
type Sighting = (Observation, Option<Instant>);

fn sources(client: &Client, scope: &Scope, mode: ObserveMode) -> Vec<BoxStream<'static, Sighting>> {
    // Pods and nodes are decoded only as far as the reducers read them (`lean`).
    let mut out = vec![source(
        Api::<Lean<Node>>::all(client.clone()),
        None,
        mode,
        |s| Observation::Node(map_seen(s, |l| l.0)),
    )];
    let namespaced: &[String] = match &scope.namespaces {
        Namespaces::Only(list) => list,
        Namespaces::All => {
            // One source per kind for the whole cluster; the recorder reads each object's
            // own namespace, and the empty name means "all" as in the API's own paths.
            out.push(source(
                Api::<Lean<Pod>>::all(client.clone()),
                None,
                mode,
                |s| Observation::Pod(ALL_NAMESPACES.to_string(), map_seen(s, |l| l.0)),
            ));
            out.push(source(
                Api::<Lean<ReplicaSet>>::all(client.clone()),
                None,
                mode,
                |s| Observation::ReplicaSet(ALL_NAMESPACES.to_string(), map_seen(s, |l| l.0)),
            ));
            &[]
        }
    };
    for ns in namespaced {
        let pods_ns = ns.clone();
        out.push(source(
            Api::<Lean<Pod>>::namespaced(client.clone(), ns),
            None,
            mode,
            move |s| Observation::Pod(pods_ns.clone(), map_seen(s, |l| l.0)),
        ));
        let rs_ns = ns.clone();
        out.push(source(
            Api::<Lean<ReplicaSet>>::namespaced(client.clone(), ns),
            None,
            mode,
            move |s| Observation::ReplicaSet(rs_ns.clone(), map_seen(s, |l| l.0)),
        ));
    }
    for wref in &scope.workloads {
        let field = Some(format!("metadata.name={}", wref.name));
        let w = wref.clone();
        let stream = match wref.kind {
            WorkloadKind::Deployment => source(
                Api::<Deployment>::namespaced(client.clone(), &wref.namespace),
                field,
                mode,
                move |s| Observation::Workload(w.clone(), map_seen(s, Workload::Deployment)),
            ),
            WorkloadKind::StatefulSet => source(
                Api::<StatefulSet>::namespaced(client.clone(), &wref.namespace),
                field,
                mode,
                move |s| Observation::Workload(w.clone(), map_seen(s, Workload::StatefulSet)),
            ),
            WorkloadKind::DaemonSet => source(
                Api::<DaemonSet>::namespaced(client.clone(), &wref.namespace),
                field,
                mode,
                move |s| Observation::Workload(w.clone(), map_seen(s, Workload::DaemonSet)),
            ),
        };
        out.push(stream);
    }
    out
}

fn map_seen<T, U>(seen: Seen<T>, f: impl Fn(T) -> U) -> Seen<U> {
    match seen {
        Seen::Applied(t) => Seen::Applied(f(t)),
        Seen::Deleted(t) => Seen::Deleted(f(t)),
        Seen::Init => Seen::Init,
        Seen::InitApply(t) => Seen::InitApply(f(t)),
        Seen::InitDone => Seen::InitDone,
        Seen::Failed(r) => Seen::Failed(r),
    }
}

/// One source in the chosen mode, mapped to observations.
fn source<K, F>(
    api: Api<K>,
    field_selector: Option<String>,
    mode: ObserveMode,
    wrap: F,
) -> BoxStream<'static, Sighting>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    F: Fn(Seen<K>) -> Observation + Send + 'static,
{
    match mode {
        ObserveMode::Watch | ObserveMode::WatchPaged => follow(api, field_selector, false)
            .map(move |(seen, since)| (wrap(seen), since))
            .boxed(),
        ObserveMode::WatchStreamed => follow(api, field_selector, true)
            .map(move |(seen, since)| (wrap(seen), since))
            .boxed(),
        ObserveMode::Poll { interval } => poll(api, field_selector, interval)
            .map(move |seen| (wrap(seen), None))
            .boxed(),
    }
}

/// Lists every `interval` (the first list at once); each list is reported as a relist.
pub(crate) fn poll<K>(
    api: Api<K>,
    field_selector: Option<String>,
    interval: Duration,
) -> impl futures::Stream<Item = Seen<K>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut params = ListParams::default();
    if let Some(f) = field_selector {
        params = params.fields(&f);
    }
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    stream::unfold(
        (api, params, ticker),
        |(api, params, mut ticker)| async move {
            ticker.tick().await;
            let batch: Vec<Seen<K>> = match api.list(&params).await {
                Ok(list) => std::iter::once(Seen::Init)
                    .chain(list.items.into_iter().map(Seen::InitApply))
                    .chain(std::iter::once(Seen::InitDone))
                    .collect(),
                Err(e) => vec![Seen::Failed(e.to_string())],
            };
            Some((stream::iter(batch), (api, params, ticker)))
        },
    )
    .flatten()
}
