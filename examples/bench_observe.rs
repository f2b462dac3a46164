//! Observation latency: how long after a change was written faultline's observer delivers it.
//!
//! ```text
//! cargo run --release --example bench_observe -- --kubeconfig target/scale/kubeconfig --changes 300
//! ```
//!
//! A separate client makes `--changes` changes, one every `--every-ms`, alternating between a
//! node taint (each change sets a taint unique to it on one of the lab's nodes, beside the
//! taints the node had, which it has again at the end) and a pod
//! deletion (pods this program created for the purpose in namespace `bench-observe`, bound
//! to the lab's nodes and Running before the first change). For each change it records the
//! instant the write's response returned; two observers run side by side in the same process
//! on the same changes, `observe(.., ObserveMode::Watch)` and `ObserveMode::Poll` every
//! `--poll-interval` seconds, each with its own client, and each entry is stamped with the
//! instant the observer's stream delivered it (same monotonic clock). Latency = delivery -
//! response. Both observers watch the scope faultline would with `observe.namespaces: all`
//! (`--scope all`, the default) or only the bench namespace (`--scope bench`).
//!
//! Beside the watching observer, a **bare reference watch** runs in the same process on its own
//! client: the same scope (every node; every pod, or the bench namespace's), from the current
//! resource version, each event decoded only as far as a name, a deletion mark and taint keys.
//! It is what a minimal client gets from the API server, with none of faultline's decoding,
//! reducing or timeline. So the watch latency splits in two: `latency_reference_<label>_*` is
//! the API server (and the machine) from the write's response to a bare client's delivery, and
//! `latency_watch_beyond_reference_<label>_*` is what faultline's observer adds after that, per
//! change (signed, p50/p99/max). Under churn on a small machine the first is the API server
//! serving its writes; the second is faultline's own, over a floor: a **twin** of the
//! reference (the same bare watch on a third connection) gives
//! `latency_twin_beyond_reference_<label>_*`, how far two identical bare clients differ. What
//! faultline's observer adds beyond that floor is its own decoding, reducing and stamping.
//! The twin's watches are opened before the reference's, as faultline's are: a watch opened
//! right behind the reference's lags it less (`--twin-after-reference`, measured in
//! docs/performance.md), so a twin there would be a floor no other client stands on.
//!
//! `--observers watch` (or `poll`) runs one observer alone. `ci/bench-scale` measures each
//! alone: a run has one observer, and at 30,000 pods the poller lists every pod every two
//! seconds in this same process (decoding about 100 MB on the same two runtime threads as the
//! watch and the writer) and loads the API server, which is not what a watching run costs.
//!
//! Prints `figure latency_<mode>_<label>_{p50,p99,max} <ms> ms` and `..._missed <n> count`
//! (changes an observer never delivered), `<label>` from `--label` (e.g. `idle`, `churn`).
//! Latencies are signed: a watch event can be delivered before the writer has read its own
//! response (both come from the same API server write), which shows as a small negative
//! number. Figures are printed, never asserted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use faultline::observe::{Clock, Namespaces, ObserveMode, Scope, observe};
use faultline::timeline::{Event, RunPhase};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount, Taint};
use kube::api::{
    DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::json;
use tokio::time::Instant;

/// Command line.
#[derive(Parser, Debug)]
#[command(about = "Observation latency of faultline's observer, watch and poll side by side")]
struct Args {
    /// Kubeconfig of the cluster (the scale lab's by default).
    #[arg(long, default_value = "target/scale/kubeconfig")]
    kubeconfig: PathBuf,
    /// Changes to make (half taints, half pod deletions); at least 200 for a p99.
    #[arg(long, default_value_t = 300)]
    changes: usize,
    /// Milliseconds between two changes.
    #[arg(long, default_value_t = 50)]
    every_ms: u64,
    /// Seconds between two lists of the polling observer.
    #[arg(long, default_value_t = 2)]
    poll_interval: u64,
    /// What both observers watch: `all` namespaces or only `bench` (`bench-observe`).
    #[arg(long, default_value = "all")]
    scope: String,
    /// Figure name part saying under which load this ran (`idle`, `churn`).
    #[arg(long, default_value = "idle")]
    label: String,
    /// Nodes whose taints are changed (the first N nodes of the cluster, by name). Enough
    /// that a node's taint stays longer than a poll interval, or polling misses changes
    /// by design rather than by lateness.
    #[arg(long, default_value_t = 100)]
    taint_nodes: usize,
    /// Which observers run: `both` side by side (on the same changes), or `watch` or `poll`
    /// alone (as a run has one).
    #[arg(long, default_value = "both")]
    observers: String,
    /// Each watching client (faultline's observer, the reference, the twin) on a runtime
    /// and a thread of its own, as if each were its own process; by default all three
    /// share this program's one runtime (two workers on two cores) with the writer.
    #[arg(long)]
    isolated: bool,
    /// The twin's kind: `bare` (the reference's own watch on a third connection) or
    /// `watcher`: kube-runtime's `watcher` with k8s-openapi's full decode, what a client
    /// built on kube-runtime gets, faultline's observer included. Its spread beyond the
    /// reference against the bare twin's is what that layer adds before faultline's own.
    /// `watcher-bare`: the same `watcher` with the bare decode, to tell the layer from
    /// the decoding.
    #[arg(long, default_value = "bare")]
    twin: String,
    /// Open the twin's watches right after the reference's, as this bench did until
    /// 2026-12-02, instead of before them. By default the twin stands to the reference where
    /// faultline's observer stands: its watches were opened earlier. Opened right behind the
    /// reference's, the same bare watch lags the reference less at p99 (docs/performance.md,
    /// 2026-12-02), a head start faultline's observer never gets; this flag gives that
    /// comparison again, for rows measured before the change.
    #[arg(long)]
    twin_after_reference: bool,
}

const NAMESPACE: &str = "bench-observe";
const TAINT_PREFIX: &str = "bench.faultline.dev/c";

/// One change, as the observer should report it.
#[derive(Debug, Clone)]
enum Change {
    /// Node `node` got taint `TAINT_PREFIX<i>` (and lost the previous one).
    Taint { node: String, key: String },
    /// Pod `name` was deleted (seen as Terminating or gone).
    PodDelete { name: String },
}

/// When each observer delivered what: (instant, event).
type Seen = Arc<Mutex<Vec<(Instant, Event)>>>;

/// The first delivery of each change: a bench taint on a node, a bench pod deleted.
#[derive(Default)]
struct Deliveries {
    /// (node, taint key) → first instant the taint was delivered present.
    taints: HashMap<(String, String), Instant>,
    /// pod name → first instant it was delivered Terminating or gone.
    pods: HashMap<String, Instant>,
}

impl Deliveries {
    fn taint(&mut self, node: &str, key: &str, at: Instant) {
        if key.starts_with(TAINT_PREFIX) {
            self.taints
                .entry((node.to_string(), key.to_string()))
                .or_insert(at);
        }
    }

    fn pod_gone(&mut self, name: &str, at: Instant) {
        self.pods.entry(name.to_string()).or_insert(at);
    }

    /// When `change` was first delivered, if it was.
    fn of(&self, change: &Change) -> Option<Instant> {
        match change {
            Change::Taint { node, key } => self.taints.get(&(node.clone(), key.clone())).copied(),
            Change::PodDelete { name } => self.pods.get(name).copied(),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.changes < 2 {
        bail!("--changes must be at least 2");
    }
    if args.poll_interval == 0 || args.taint_nodes == 0 {
        bail!("--poll-interval and --taint-nodes must be at least 1");
    }
    let namespaces = match args.scope.as_str() {
        "all" => Namespaces::All,
        "bench" => Namespaces::Only(vec![NAMESPACE.to_string()]),
        other => bail!("--scope is `all` or `bench`, not `{other}`"),
    };
    if !matches!(args.twin.as_str(), "bare" | "watcher" | "watcher-bare") {
        bail!(
            "--twin is `bare`, `watcher` or `watcher-bare`, not `{}`",
            args.twin
        );
    }
    if args.twin != "bare" && args.isolated {
        bail!("--twin watcher runs on the shared runtime: not with --isolated");
    }
    let (run_watch, run_poll) = match args.observers.as_str() {
        "both" => (true, true),
        "watch" => (true, false),
        "poll" => (false, true),
        other => bail!("--observers is `both`, `watch` or `poll`, not `{other}`"),
    };
    let connect = || faultline::cluster::connect(Some(&args.kubeconfig), None);
    let writer = connect()
        .await
        .with_context(|| format!("connecting with {}", args.kubeconfig.display()))?;

    let nodes = pick_nodes(&writer, args.taint_nodes).await?;
    let pod_changes = args.changes / 2;
    let pods = prepare_pods(&writer, &nodes, pod_changes).await?;

    // Both observers start now and get to their initial state before the first change.
    let scope = Scope {
        namespaces,
        workloads: Vec::new(),
    };
    let clock = Clock::start();
    let watch_seen: Seen = Arc::default();
    let poll_seen: Seen = Arc::default();
    let (watch_ready, mut watch_ready_rx) = tokio::sync::watch::channel(!run_watch);
    let (poll_ready, mut poll_ready_rx) = tokio::sync::watch::channel(!run_poll);
    let mut tasks = Vec::new();
    if run_watch && args.isolated {
        let (kubeconfig, scope, seen) =
            (args.kubeconfig.clone(), scope.clone(), watch_seen.clone());
        on_own_thread(move || async move {
            match faultline::cluster::connect(Some(&kubeconfig), None).await {
                Ok(client) => {
                    collect(
                        observe(client, &scope, clock, ObserveMode::Watch),
                        seen,
                        watch_ready,
                    )
                    .await
                }
                Err(e) => eprintln!("bench_observe: connecting faultline's observer: {e}"),
            }
        });
    } else if run_watch {
        tasks.push(tokio::spawn(collect(
            observe(connect().await?, &scope, clock, ObserveMode::Watch),
            watch_seen.clone(),
            watch_ready,
        )));
    }
    if run_poll {
        tasks.push(tokio::spawn(collect(
            observe(
                connect().await?,
                &scope,
                clock,
                ObserveMode::Poll {
                    interval: Duration::from_secs(args.poll_interval),
                },
            ),
            poll_seen.clone(),
            poll_ready,
        )));
    }
    let sync_t0 = Instant::now();
    watch_ready_rx.wait_for(|r| *r).await?;
    let watch_sync = sync_t0.elapsed();
    poll_ready_rx.wait_for(|r| *r).await?;
    eprintln!(
        "bench_observe: observers synced (watch {:.2}s); making {} changes every {} ms",
        watch_sync.as_secs_f64(),
        args.changes,
        args.every_ms
    );
    // The bare reference watch, beside the watching observer (not beside the poller alone).
    let reference_seen: Arc<Mutex<Deliveries>> = Arc::default();
    // Its twin, a second bare watch on its own connection: how far two identical bare
    // clients differ is the floor under "beyond the reference" (the API server serves each
    // watch connection in turn, and this process schedules each on a shared runtime).
    let twin_seen: Arc<Mutex<Deliveries>> = Arc::default();
    let reference_restarts: Arc<AtomicUsize> = Arc::default();
    let twin_restarts: Arc<AtomicUsize> = Arc::default();
    if run_watch {
        let pods_path = match args.scope.as_str() {
            "bench" => format!("/api/v1/namespaces/{NAMESPACE}/pods"),
            _ => "/api/v1/pods".to_string(),
        };
        let mut order = [
            (&reference_seen, &reference_restarts),
            (&twin_seen, &twin_restarts),
        ];
        if !args.twin_after_reference {
            order.reverse();
        }
        for (seen, restarts) in order {
            if args.twin == "watcher" && Arc::ptr_eq(seen, &twin_seen) {
                let client = connect().await?;
                tasks.extend(start_watcher_twin::<Node, Pod>(client, seen.clone()).await);
            } else if args.twin == "watcher-bare" && Arc::ptr_eq(seen, &twin_seen) {
                let client = connect().await?;
                let twin = start_watcher_twin::<Thin<Node>, Thin<Pod>>(client, seen.clone());
                tasks.extend(twin.await);
            } else if args.isolated {
                let (kubeconfig, path) = (args.kubeconfig.clone(), pods_path.clone());
                let (seen, restarts) = (seen.clone(), restarts.clone());
                let (started, established) = tokio::sync::oneshot::channel();
                on_own_thread(move || async move {
                    let opened = async {
                        let client = faultline::cluster::connect(Some(&kubeconfig), None).await?;
                        start_reference(client, &path, seen, restarts).await
                    };
                    match opened.await {
                        Ok(watches) => {
                            let _ = started.send(Ok(()));
                            for watch in watches {
                                let _ = watch.await;
                            }
                        }
                        Err(e) => {
                            let _ = started.send(Err(e));
                        }
                    }
                });
                established.await??;
            } else {
                tasks.extend(
                    start_reference(connect().await?, &pods_path, seen.clone(), restarts.clone())
                        .await?,
                );
            }
        }
    }
    // A short pause so the initial state is behind us.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let node_api: Api<Node> = Api::all(writer.clone());
    // The taints each node has now: every change keeps them, and they are put back at the
    // end (a run measured on the same cluster compares it before and after).
    let mut original: HashMap<String, Vec<Taint>> = HashMap::new();
    for node in &nodes {
        let n = node_api.get(node).await?;
        original.insert(
            node.clone(),
            n.spec.and_then(|s| s.taints).unwrap_or_default(),
        );
    }
    let pod_api: Api<Pod> = Api::namespaced(writer.clone(), NAMESPACE);
    let mut made: Vec<(Change, Instant)> = Vec::with_capacity(args.changes);
    let mut ticker = tokio::time::interval(Duration::from_millis(args.every_ms.max(1)));
    let mut pods_left = pods.into_iter();
    let mut round_trips: Vec<f64> = Vec::with_capacity(args.changes);
    for i in 0..args.changes {
        ticker.tick().await;
        let sent = Instant::now();
        let change = if i % 2 == 1
            && let Some(name) = pods_left.next()
        {
            pod_api
                .delete(&name, &DeleteParams::default())
                .await
                .with_context(|| format!("deleting pod {name}"))?;
            Change::PodDelete { name }
        } else {
            let node = nodes[i % nodes.len()].clone();
            let key = format!("{TAINT_PREFIX}{i}");
            let mut taints = original[&node].clone();
            taints.push(Taint {
                key: key.clone(),
                effect: "NoSchedule".to_string(),
                ..Taint::default()
            });
            let patch = json!({"spec": {"taints": taints}});
            node_api
                .patch(&node, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("tainting node {node}"))?;
            Change::Taint { node, key }
        };
        let returned = Instant::now();
        round_trips.push(returned.duration_since(sent).as_secs_f64() * 1e3);
        made.push((change, returned));
    }
    // Long enough for the poller's next list after the last change, and a margin.
    tokio::time::sleep(Duration::from_secs(args.poll_interval * 2 + 3)).await;
    for task in &tasks {
        task.abort();
    }

    // Leave the nodes with the taints they had.
    for node in &nodes {
        let patch = json!({"spec": {"taints": original[node]}});
        let _ = node_api
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
    }

    if run_watch {
        println!(
            "figure observe_sync_watch_{} {:.2} s",
            args.label,
            watch_sync.as_secs_f64()
        );
    }
    if run_watch {
        round_trips.sort_by(f64::total_cmp);
        println!(
            "figure write_rtt_{}_p50 {:.1} ms",
            args.label,
            percentile(&round_trips, 50.0)
        );
        println!(
            "figure write_rtt_{}_p99 {:.1} ms",
            args.label,
            percentile(&round_trips, 99.0)
        );
    }
    let reference = reference_seen
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?;
    if run_watch {
        let (values, missed) = latencies(&made, &reference);
        let name = format!("latency_reference_{}", args.label);
        print_spread(&name, values);
        println!("figure {name}_missed {missed} count");
        println!(
            "figure {name}_restarts {} count",
            reference_restarts.load(Ordering::Relaxed)
        );
        println!(
            "figure latency_twin_{}_restarts {} count",
            args.label,
            twin_restarts.load(Ordering::Relaxed)
        );
    }
    let twin = twin_seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    // "Beyond the reference" of faultline and of the twin over the same changes: those
    // the reference, the twin and faultline's watch all delivered.
    let watch_delivered = if run_watch {
        deliveries(&watch_seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?)
    } else {
        Deliveries::default()
    };
    let common: Vec<(Change, Instant)> = made
        .iter()
        .filter(|(c, _)| {
            reference.of(c).is_some() && twin.of(c).is_some() && watch_delivered.of(c).is_some()
        })
        .cloned()
        .collect();
    if run_watch {
        print_spread(
            &format!("latency_twin_beyond_reference_{}", args.label),
            beyond(&common, &twin, &reference),
        );
    }
    for (mode, seen, ran) in [
        ("watch", &watch_seen, run_watch),
        ("poll", &poll_seen, run_poll),
    ] {
        if !ran {
            continue;
        }
        let seen = seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let delivered = deliveries(&seen);
        let (values, missed) = latencies(&made, &delivered);
        let name = format!("latency_{mode}_{}", args.label);
        print_spread(&name, values);
        println!("figure {name}_missed {missed} count");
        if mode == "watch" {
            print_spread(
                &format!("latency_watch_beyond_reference_{}", args.label),
                beyond(&common, &delivered, &reference),
            );
            // The same split by what changed (a node's taint, a pod's deletion): each
            // arrives on its own watch, so a tail on one side only says which.
            for (kind, is_kind) in [
                (
                    "taints",
                    (|c: &Change| matches!(c, Change::Taint { .. })) as fn(&Change) -> bool,
                ),
                ("pods", |c: &Change| matches!(c, Change::PodDelete { .. })),
            ] {
                let of_kind: Vec<(Change, Instant)> =
                    common.iter().filter(|(c, _)| is_kind(c)).cloned().collect();
                print_spread(
                    &format!("latency_twin_beyond_reference_{kind}_{}", args.label),
                    beyond(&of_kind, &twin, &reference),
                );
                print_spread(
                    &format!("latency_watch_beyond_reference_{kind}_{}", args.label),
                    beyond(&of_kind, &delivered, &reference),
                );
            }
        }
    }
    Ok(())
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Forwards every entry with its delivery instant; `ready` turns true once the initial
/// state of nodes and of the bench pods was delivered (each source's initial list arrives
/// as one batch, so the first entry of each is the end of its sync).
async fn collect(
    mut entries: futures::stream::BoxStream<'static, faultline::timeline::Entry>,
    seen: Seen,
    ready: tokio::sync::watch::Sender<bool>,
) {
    while let Some(entry) = entries.next().await {
        let at = Instant::now();
        // Synced once every first list is in. Not at the first node and the first bench pod
        // seen: a streamed first list delivers each object as it arrives, and changes made
        // while the rest of 150,000 pods still stream in would be timed behind the list.
        if matches!(
            entry.event,
            Event::Run {
                phase: RunPhase::ObserverReady { .. }
            }
        ) && !*ready.borrow()
        {
            let _ = ready.send(true);
        }
        if let Ok(mut s) = seen.lock() {
            s.push((at, entry.event));
        }
    }
}

/// First deliveries of the changes among what an observer delivered.
fn deliveries(seen: &[(Instant, Event)]) -> Deliveries {
    let mut out = Deliveries::default();
    for (at, event) in seen {
        match event {
            Event::Node {
                name,
                after: Some(state),
                ..
            } => {
                for t in &state.taints {
                    out.taint(name, &t.key, *at);
                }
            }
            Event::Pod { pod, after, .. }
                if pod.namespace == NAMESPACE && after.as_ref().is_none_or(|s| s.terminating) =>
            {
                out.pod_gone(&pod.name, *at);
            }
            _ => {}
        }
    }
    out
}

/// Signed milliseconds from `from` to `to` (negative when `to` came first).
fn signed_ms(from: Instant, to: Instant) -> f64 {
    if to >= from {
        to.duration_since(from).as_secs_f64() * 1e3
    } else {
        -(from.duration_since(to).as_secs_f64() * 1e3)
    }
}

/// Latency in ms of each change delivered, from the write's response, and how many never were.
fn latencies(made: &[(Change, Instant)], delivered: &Deliveries) -> (Vec<f64>, usize) {
    let mut out = Vec::new();
    let mut missed = 0;
    for (change, written) in made {
        // Signed: a watch event can arrive before the writer has read its own response.
        match delivered.of(change) {
            Some(at) => out.push(signed_ms(*written, at)),
            None => missed += 1,
        }
    }
    (out, missed)
}

/// Per change both delivered: how much later the observer delivered it than the reference.
fn beyond(made: &[(Change, Instant)], observer: &Deliveries, reference: &Deliveries) -> Vec<f64> {
    made.iter()
        .filter_map(|(change, _)| Some(signed_ms(reference.of(change)?, observer.of(change)?)))
        .collect()
}

/// Prints `figure <name>_{p50,p99,max,count}` of `values` (sorted here).
fn print_spread(name: &str, mut values: Vec<f64>) {
    values.sort_by(f64::total_cmp);
    if values.is_empty() {
        return;
    }
    println!("figure {name}_p50 {:.1} ms", percentile(&values, 50.0));
    println!("figure {name}_p99 {:.1} ms", percentile(&values, 99.0));
    println!(
        "figure {name}_max {:.1} ms",
        values.last().copied().unwrap_or_default()
    );
    println!("figure {name}_count {} count", values.len());
}

/// A watched object decoded only as far as the reference needs: what a bare client reads.
#[derive(Clone, Deserialize)]
struct Bare {
    metadata: BareMeta,
    #[serde(default)]
    spec: Option<BareSpec>,
}

#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BareMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
}

#[derive(Clone, Deserialize)]
struct BareSpec {
    #[serde(default)]
    taints: Option<Vec<BareTaint>>,
}

#[derive(Clone, Deserialize)]
struct BareTaint {
    key: String,
}

/// The resource version a watch of `api`'s kind starts from to see only what changes next.
async fn current_version<K>(api: Api<K>) -> anyhow::Result<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .list_metadata(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default())
}

/// What the watcher twin reads of a node or a pod, decoded fully (k8s-openapi's types) or
/// as a bare client does ([`Thin`]).
trait Watched:
    kube::Resource<DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The keys of a node's taints.
    fn taint_keys(&self) -> Vec<String>;
}

impl Watched for Node {
    fn taint_keys(&self) -> Vec<String> {
        let taints = self.spec.as_ref().and_then(|s| s.taints.as_ref());
        taints
            .map(|ts| ts.iter().map(|t| t.key.clone()).collect())
            .unwrap_or_default()
    }
}

impl Watched for Pod {
    fn taint_keys(&self) -> Vec<String> {
        Vec::new()
    }
}

/// `K` decoded as the bare reference decodes it (name, namespace, version, deletion mark,
/// taint keys), but as a `kube::Resource`, so kube-runtime's `watcher` can follow it
/// (`--twin watcher-bare`): the watcher layer's cost without a full decode.
#[derive(Clone, Debug)]
struct Thin<K> {
    meta: ObjectMeta,
    taints: Vec<String>,
    kind: std::marker::PhantomData<K>,
}

impl<K: kube::Resource<DynamicType = ()>> kube::Resource for Thin<K> {
    type DynamicType = ();
    type Scope = K::Scope;
    fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> std::borrow::Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> std::borrow::Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

impl<'de, K> Deserialize<'de> for Thin<K> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bare = Bare::deserialize(deserializer)?;
        let deletion_timestamp = bare
            .metadata
            .deletion_timestamp
            .map(|t| {
                t.parse()
                    .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)
            })
            .transpose()
            .map_err(serde::de::Error::custom)?;
        Ok(Thin {
            meta: ObjectMeta {
                name: Some(bare.metadata.name),
                namespace: bare.metadata.namespace,
                resource_version: bare.metadata.resource_version,
                deletion_timestamp,
                ..ObjectMeta::default()
            },
            taints: bare
                .spec
                .and_then(|s| s.taints)
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.key)
                .collect(),
            kind: std::marker::PhantomData,
        })
    }
}

impl<K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static> Watched
    for Thin<K>
{
    fn taint_keys(&self) -> Vec<String> {
        self.taints.clone()
    }
}

/// The twin as kube-runtime's `watcher` over every node (`N`) and pod (`P`); returns once
/// its first lists are in, so it is watching before the first change.
async fn start_watcher_twin<N: Watched, P: Watched>(
    client: Client,
    into: Arc<Mutex<Deliveries>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    use kube::runtime::watcher;
    let (nodes_in, nodes_ready) = tokio::sync::oneshot::channel::<()>();
    let (pods_in, pods_ready) = tokio::sync::oneshot::channel::<()>();
    let nodes_into = into.clone();
    let mut nodes = watcher(Api::<N>::all(client.clone()), watcher::Config::default()).boxed();
    let mut pods = watcher(Api::<P>::all(client), watcher::Config::default()).boxed();
    let tasks = vec![
        tokio::spawn(async move {
            let mut ready = Some(nodes_in);
            while let Some(Ok(event)) = nodes.next().await {
                let at = Instant::now();
                match event {
                    watcher::Event::InitDone => {
                        ready.take().map(|r| r.send(()));
                    }
                    watcher::Event::Apply(n) => {
                        let Ok(mut d) = nodes_into.lock() else { return };
                        let name = n.meta().name.clone().unwrap_or_default();
                        for key in n.taint_keys() {
                            d.taint(&name, &key, at);
                        }
                    }
                    _ => {}
                }
            }
        }),
        tokio::spawn(async move {
            let mut ready = Some(pods_in);
            while let Some(Ok(event)) = pods.next().await {
                let at = Instant::now();
                let (pod, deleted) = match event {
                    watcher::Event::InitDone => {
                        ready.take().map(|r| r.send(()));
                        continue;
                    }
                    watcher::Event::Apply(p) => (p, false),
                    watcher::Event::Delete(p) => (p, true),
                    _ => continue,
                };
                let meta = pod.meta();
                if meta.namespace.as_deref() == Some(NAMESPACE)
                    && (deleted || meta.deletion_timestamp.is_some())
                {
                    let Ok(mut d) = into.lock() else { return };
                    d.pod_gone(meta.name.as_deref().unwrap_or_default(), at);
                }
            }
        }),
    ];
    let _ = nodes_ready.await;
    let _ = pods_ready.await;
    tasks
}

/// Runs what `work` makes on a runtime of its own, on a thread of its own (`--isolated`):
/// a watching client scheduled apart from the others, as in a process of its own. The
/// thread ends with the program.
fn on_own_thread<F, Fut>(work: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    std::thread::spawn(move || {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(work()),
            Err(e) => eprintln!("bench_observe: a runtime of its own: {e}"),
        }
    });
}

/// Opens the reference's two watches (nodes, and pods of `pods_path`) from the current
/// resource version; returns once both are established, with the tasks reading them. The
/// API server closes a watcher it finds slow to read ("Forcing watcher close due to
/// unresponsiveness", seen on two shared cores under churn): each watch then opens again from
/// the last version it read, as any client does, and `restarts` counts how often. Before,
/// a closed reference stopped delivering, and "beyond the reference" compared faultline's
/// observer (which reopens) with a twin over fewer changes.
async fn start_reference(
    client: Client,
    pods_path: &str,
    into: Arc<Mutex<Deliveries>>,
    restarts: Arc<AtomicUsize>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let node_rv = current_version(Api::<Node>::all(client.clone())).await?;
    let pod_rv = current_version(Api::<Pod>::all(client.clone())).await?;
    let mut tasks = Vec::new();
    for (path, rv) in [
        ("/api/v1/nodes".to_string(), node_rv),
        (pods_path.to_string(), pod_rv),
    ] {
        let first = open_bare(&client, &path, &rv).await?;
        tasks.push(tokio::spawn(follow_bare(
            client.clone(),
            path,
            rv,
            first,
            into.clone(),
            restarts.clone(),
        )));
    }
    Ok(tasks)
}

type BareEvents = futures::stream::BoxStream<'static, Result<WatchEvent<Bare>, kube::Error>>;

/// A bare watch of `path` from resource version `rv`.
async fn open_bare(client: &Client, path: &str, rv: &str) -> anyhow::Result<BareEvents> {
    let request = kube::core::Request::new(path).watch(&WatchParams::default(), rv)?;
    Ok(client.request_events::<Bare>(request).await?.boxed())
}

/// Reads `events` into `into`, and opens the watch again from the last version read
/// whenever it ends; stops when it cannot be resumed (the version is gone: 410) or when
/// aborted.
async fn follow_bare(
    client: Client,
    path: String,
    mut rv: String,
    mut events: BareEvents,
    into: Arc<Mutex<Deliveries>>,
    restarts: Arc<AtomicUsize>,
) {
    loop {
        while let Some(Ok(event)) = events.next().await {
            let at = Instant::now();
            let (obj, deleted) = match event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
                WatchEvent::Deleted(o) => (o, true),
                WatchEvent::Bookmark(b) => {
                    rv = b.metadata.resource_version;
                    continue;
                }
                WatchEvent::Error(e) if e.code == 410 => return,
                WatchEvent::Error(_) => continue,
            };
            if let Some(v) = &obj.metadata.resource_version {
                rv.clone_from(v);
            }
            let Ok(mut d) = into.lock() else { return };
            match obj.metadata.namespace.as_deref() {
                None => {
                    for t in obj.spec.and_then(|s| s.taints).unwrap_or_default() {
                        d.taint(&obj.metadata.name, &t.key, at);
                    }
                }
                Some(NAMESPACE) if deleted || obj.metadata.deletion_timestamp.is_some() => {
                    d.pod_gone(&obj.metadata.name, at);
                }
                Some(_) => {}
            }
        }
        restarts.fetch_add(1, Ordering::Relaxed);
        events = loop {
            match open_bare(&client, &path, &rv).await {
                Ok(e) => break e,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
    }
}

/// The first `n` nodes by name; their taints get changed.
async fn pick_nodes(client: &Client, n: usize) -> anyhow::Result<Vec<String>> {
    let api: Api<Node> = Api::all(client.clone());
    let mut names: Vec<String> = api
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    if names.is_empty() {
        bail!("the cluster has no nodes (run scale_load first)");
    }
    names.sort();
    names.truncate(n);
    Ok(names)
}

/// Creates `n` pods in the bench namespace, bound to `nodes`, and waits until they are
/// Running (the cluster's kubelets, kwok in the lab, make them so). Returns their names.
async fn prepare_pods(client: &Client, nodes: &[String], n: usize) -> anyhow::Result<Vec<String>> {
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    ignore_exists(ns_api.create(&PostParams::default(), &ns).await)?;
    let sa_api: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("default".to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    ignore_exists(sa_api.create(&PostParams::default(), &sa).await)?;
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    // Fresh names each run: pods of an earlier run may still be going away.
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let names: Vec<String> = (0..n).map(|i| format!("b{run}-{i}")).collect();
    futures::stream::iter(names.iter().enumerate().map(|(i, name)| {
        let api = api.clone();
        let pod: Result<Pod, _> = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "nodeName": nodes[i % nodes.len()],
                "automountServiceAccountToken": false,
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
                "tolerations": [{"operator": "Exists"}]
            }
        }));
        async move {
            let pod = pod?;
            api.create(&PostParams::default(), &pod).await?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(50)
    .collect::<Vec<_>>()
    .await
    .into_iter()
    .collect::<anyhow::Result<Vec<()>>>()?;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let running = api
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|p| {
                names.contains(&p.metadata.name.clone().unwrap_or_default())
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
            .count();
        if running == n {
            return Ok(names);
        }
        if Instant::now() > deadline {
            bail!("only {running} of {n} bench pods Running after 300 s");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn ignore_exists<T>(r: Result<T, kube::Error>) -> anyhow::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
