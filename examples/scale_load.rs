//! Loads the scale lab (`ci/lab/scale-up`) with nodes and pods, and churns it.
//!
//! ```text
//! cargo run --release --example scale_load -- --nodes 1000 --pods 30000
//! cargo run --release --example scale_load -- --churn --rate 50 --flap 5 --duration 120
//! ```
//!
//! Load: registers `--nodes` Node objects (`scale-node-NNNN`, which the lab's one kwok then
//! plays: kwok does not create Node objects, a kubelet would), one `default` ServiceAccount
//! per namespace (the controller-manager would; the lab has none), and `--pods` pods spread
//! round-robin over the nodes and `--namespaces` namespaces (`scale-N`), created already bound
//! (`spec.nodeName`, the lab has no scheduler) with `--concurrency` requests in flight. Then
//! it waits until every pod is Running and Ready and prints `figure` lines. Existing objects
//! are kept (AlreadyExists counts as done), so loading 10,000 pods after 3,000 adds 7,000.
//! When the count of Running pods has not moved for 60 s, the pods still Pending are deleted
//! and replaced under a new name (`p-N-r1`): under load kwok 0.8 sometimes gives a pod two
//! IPs of one family, the API server refuses that status, and kwok never plays the pod
//! again. (A next, larger load creates `p-N` once more, so a lab grown step by step can hold
//! a few more pods than its size.)
//!
//! Churn (`--churn`): every second deletes `--rate` pods and creates as many replacements
//! under new names (as a ReplicaSet would), and every `--flap-every` seconds toggles a taint on
//! `--flap` nodes (its own taint only: their other taints are kept); runs for `--duration`
//! seconds (0: until killed, SIGTERM or Ctrl-C) and prints what it achieved. It leaves the
//! flapping nodes' taints as it found them (a run measured beside it checks that the cluster
//! is restored), and exits non-zero when it could not. Meant to run beside a measurement (`bench_observe`, `faultline run`).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount, Taint};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::json;

/// Command line.
#[derive(Parser, Debug)]
#[command(about = "Load the scale lab with nodes and pods; --churn keeps it busy")]
struct Args {
    /// The scale lab's kubeconfig.
    #[arg(long, default_value = "target/scale/kubeconfig")]
    kubeconfig: PathBuf,
    /// Node objects to register (kwok plays them).
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Pods to create (and wait for).
    #[arg(long, default_value_t = 30_000)]
    pods: usize,
    /// Namespaces the pods are spread over (`scale-0` ...).
    #[arg(long, default_value_t = 10)]
    namespaces: usize,
    /// Requests in flight (the API server allows 200 mutating ones by default).
    #[arg(long, default_value_t = 150)]
    concurrency: usize,
    /// Give up waiting for Running after this many seconds.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// Churn instead of load (the lab must be loaded already).
    #[arg(long)]
    churn: bool,
    /// Churn: pods deleted (and as many created) per second.
    #[arg(long, default_value_t = 50)]
    rate: u64,
    /// Churn: nodes whose taint is toggled.
    #[arg(long, default_value_t = 5)]
    flap: usize,
    /// Churn: seconds between two toggles of the flapping nodes.
    #[arg(long, default_value_t = 10)]
    flap_every: u64,
    /// Churn: seconds to run (0: until killed).
    #[arg(long, default_value_t = 0)]
    duration: u64,
}

/// Label every loaded pod carries (what waits and churn select).
const APP: &str = "faultline-scale";
/// The taint churn toggles.
const FLAP_TAINT: &str = "faultline.dev/scale-flap";

fn node_name(i: usize) -> String {
    format!("scale-node-{i:04}")
}

fn namespace_name(i: usize) -> String {
    format!("scale-{i}")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.nodes == 0 || args.namespaces == 0 || args.concurrency == 0 {
        bail!("--nodes, --namespaces and --concurrency must be at least 1");
    }
    if args.nodes > 16_384 {
        bail!("--nodes at most 16384 (each node's podCIDR is a /24 of 10.64.0.0/10)");
    }
    let client = faultline::cluster::connect(Some(&args.kubeconfig), None)
        .await
        .with_context(|| format!("connecting with {}", args.kubeconfig.display()))?;
    if args.churn {
        churn(&client, &args).await
    } else {
        load(&client, &args).await
    }
}

/// Creates `obj` through `api`, retrying what the API server asks to retry (429, 5xx,
/// connection errors); AlreadyExists is success.
async fn create_retrying<K>(api: &Api<K>, obj: &K) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let mut delay = Duration::from_millis(50);
    for _ in 0..20 {
        match api.create(&PostParams::default(), obj).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
            Err(kube::Error::Api(s)) if s.code != 429 && s.code < 500 => {
                bail!("create refused: {} ({})", s.message, s.code)
            }
            Err(_) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
    }
    bail!("create still failing after 20 attempts")
}

fn node_object(i: usize) -> anyhow::Result<Node> {
    let name = node_name(i);
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/worker": "",
                "type": "kwok"
            }
        },
        "spec": {
            "podCIDR": format!("10.{}.{}.0/24", 64 + i / 256, i % 256),
        },
        "status": {
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "250"},
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "250"}
        }
    }))?)
}

fn pod_object(name: &str, namespace: &str, node: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": APP}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
            }],
            "tolerations": [{"key": FLAP_TAINT, "operator": "Exists"}]
        }
    }))?)
}

/// Runs `make(i)` for every i in `0..n` with `concurrency` in flight; returns the time taken.
async fn fan_out<F, Fut>(n: usize, concurrency: usize, make: F) -> anyhow::Result<Duration>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let t0 = Instant::now();
    futures::stream::iter((0..n).map(make))
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(t0.elapsed())
}

async fn load(client: &Client, args: &Args) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let nodes: Api<Node> = Api::all(client.clone());
    let took = fan_out(args.nodes, args.concurrency, |i| {
        let nodes = nodes.clone();
        async move { create_retrying(&nodes, &node_object(i)?).await }
    })
    .await?;
    eprintln!(
        "scale_load: {} nodes registered in {:.1}s",
        args.nodes,
        took.as_secs_f64()
    );
    println!("figure load_nodes_register {:.1} s", took.as_secs_f64());

    for n in 0..args.namespaces {
        let ns = namespace_name(n);
        let nsapi: Api<Namespace> = Api::all(client.clone());
        let obj = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        create_retrying(&nsapi, &obj).await?;
        let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
        let obj = ServiceAccount {
            metadata: ObjectMeta {
                name: Some("default".to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        create_retrying(&sa, &obj).await?;
    }

    // Count pods Running and Ready while they are created: the wait starts with the first.
    let ready = Arc::new(AtomicU64::new(0));
    let counter = tokio::spawn(count_ready(client.clone(), ready.clone()));

    let created =
        fan_out(args.pods, args.concurrency, |i| {
            let api: Api<Pod> =
                Api::namespaced(client.clone(), &namespace_name(i % args.namespaces));
            let node = node_name(i % args.nodes);
            async move {
                create_retrying(&api, &pod_object(&format!("p-{i}"), api_ns(&api), &node)?).await
            }
        })
        .await?;
    eprintln!(
        "scale_load: {} pods created in {:.1}s ({:.0}/s)",
        args.pods,
        created.as_secs_f64(),
        args.pods as f64 / created.as_secs_f64()
    );
    println!("figure load_pods_create {:.1} s", created.as_secs_f64());
    println!(
        "figure load_pods_create_rate {:.0} pods/s",
        args.pods as f64 / created.as_secs_f64()
    );

    let deadline = t0 + Duration::from_secs(args.timeout);
    let mut last_print = Instant::now();
    let (mut last_n, mut last_progress) = (0, Instant::now());
    loop {
        let n = ready.load(Ordering::Relaxed);
        if n >= args.pods as u64 {
            break;
        }
        if n != last_n {
            (last_n, last_progress) = (n, Instant::now());
        } else if last_progress.elapsed() > STUCK {
            recreate_stuck(client, args).await?;
            last_progress = Instant::now();
        }
        if Instant::now() > deadline {
            bail!(
                "only {n} of {} pods Running and Ready after {}s",
                args.pods,
                args.timeout
            );
        }
        if last_print.elapsed() > Duration::from_secs(10) {
            eprintln!("scale_load: {n}/{} pods Running and Ready", args.pods);
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    counter.abort();
    let all = t0.elapsed();
    eprintln!(
        "scale_load: {} nodes, {} pods Running and Ready {:.1}s after the start",
        args.nodes,
        args.pods,
        all.as_secs_f64()
    );
    println!("figure load_pods_running {:.1} s", all.as_secs_f64());
    Ok(())
}

/// How long loading may make no progress before pods still Pending are recreated.
const STUCK: Duration = Duration::from_secs(60);

/// Recreates the loaded pods still Pending: under load, kwok 0.8 sometimes gives a pod two
/// IPs of one family, the API server refuses its status, and kwok never retries; the pod
/// stays Pending for good. A new pod, under a new name, is played like any other.
async fn recreate_stuck(client: &Client, args: &Args) -> anyhow::Result<()> {
    let all: Api<Pod> = Api::all(client.clone());
    let lp = kube::api::ListParams::default()
        .labels(&format!("app={APP}"))
        .fields("status.phase=Pending");
    let stuck: Vec<(String, String, String)> = all
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter_map(|p| Some((p.metadata.namespace?, p.metadata.name?, p.spec?.node_name?)))
        .collect();
    eprintln!(
        "scale_load: no progress for {}s: recreating {} pod(s) still Pending",
        STUCK.as_secs(),
        stuck.len()
    );
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    fan_out(stuck.len(), args.concurrency, |i| {
        let (ns, name, node) = stuck[i].clone();
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let force = force.clone();
        async move {
            match api.delete(&name, &force).await {
                Ok(_) | Err(kube::Error::Api(_)) => {}
                Err(e) => return Err(e.into()),
            }
            // The replacement gets a new name: kwok, behind under load, deletes a pod it saw
            // deleted by name, and took a replacement of the same name with it (193 of 1,000
            // pods loaded at once vanished so, their replacements created and then gone).
            create_retrying(&api, &pod_object(&replacement_name(&name), &ns, &node)?).await
        }
    })
    .await?;
    Ok(())
}

/// The name of a stuck pod's replacement: `NAME-rN`, N one more than the name's own.
fn replacement_name(name: &str) -> String {
    match name.rsplit_once("-r") {
        Some((base, n)) if n.parse::<u32>().is_ok() => {
            format!("{base}-r{}", n.parse::<u32>().unwrap_or(0) + 1)
        }
        _ => format!("{name}-r1"),
    }
}

fn api_ns(api: &Api<Pod>) -> &str {
    api.namespace().unwrap_or_default()
}

/// Keeps `ready` equal to the number of loaded pods that are Running and Ready (one
/// cluster-wide watch with the loader's label).
async fn count_ready(client: Client, ready: Arc<AtomicU64>) {
    let api: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().labels(&format!("app={APP}"));
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut init: Option<HashSet<(String, String)>> = None;
    let mut stream = watcher(api, config).boxed();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(p)) => {
                if is_ready(&p) {
                    seen.insert(key(&p));
                } else {
                    seen.remove(&key(&p));
                }
            }
            Ok(watcher::Event::Delete(p)) => {
                seen.remove(&key(&p));
            }
            Ok(watcher::Event::Init) => init = Some(HashSet::new()),
            Ok(watcher::Event::InitApply(p)) => {
                if is_ready(&p) {
                    init.get_or_insert_with(HashSet::new).insert(key(&p));
                }
            }
            Ok(watcher::Event::InitDone) => seen = init.take().unwrap_or_default(),
            Err(e) => eprintln!("scale_load: watch error (retrying): {e}"),
        }
        ready.store(seen.len() as u64, Ordering::Relaxed);
    }
}

fn key(p: &Pod) -> (String, String) {
    (
        p.metadata.namespace.clone().unwrap_or_default(),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

fn is_ready(p: &Pod) -> bool {
    let Some(status) = &p.status else {
        return false;
    };
    p.metadata.deletion_timestamp.is_none()
        && status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Deletes and recreates pods at `--rate` per second and toggles a taint on `--flap` nodes.
async fn churn(client: &Client, args: &Args) -> anyhow::Result<()> {
    // The pods to churn, as they are now (earlier churn renamed some).
    let all: Api<Pod> = Api::all(client.clone());
    let mut slots: Vec<(String, String)> = Vec::new();
    let mut continue_token: Option<String> = None;
    loop {
        let mut lp = kube::api::ListParams::default()
            .labels(&format!("app={APP}"))
            .limit(5000);
        if let Some(t) = &continue_token {
            lp = lp.continue_token(t);
        }
        let list = all.list_metadata(&lp).await?;
        for p in list.items {
            if p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            slots.push((
                p.metadata.namespace.unwrap_or_default(),
                p.metadata.name.unwrap_or_default(),
            ));
        }
        continue_token = list.metadata.continue_.filter(|t| !t.is_empty());
        if continue_token.is_none() {
            break;
        }
    }
    if slots.is_empty() {
        bail!("no pods labelled app={APP} to churn: load the lab first");
    }
    let node_count = args.nodes.max(1);
    eprintln!(
        "scale_load: churning {} pods at {}/s, flapping {} nodes every {}s",
        slots.len(),
        args.rate,
        args.flap,
        args.flap_every
    );
    let t0 = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut cursor = 0usize;
    let mut generation = 0u64;
    let mut flapped = false;
    let mut last_flap = Instant::now() - Duration::from_secs(args.flap_every);
    let mut inflight = tokio::task::JoinSet::new();
    // What the flapping nodes carry now: churn leaves them so (a run measured beside it
    // compares the cluster before and after, and must find it as it was).
    let nodes: Api<Node> = Api::all(client.clone());
    let flap_nodes: Vec<String> = (0..args.flap.min(node_count)).map(node_name).collect();
    let mut had_flap_taint = Vec::with_capacity(flap_nodes.len());
    for node in &flap_nodes {
        had_flap_taint.push(has_flap_taint(&nodes.get(node).await?));
    }
    // Stopped by a signal (a benchmark script ending it), churn still prints its figures.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
        if args.duration > 0 && t0.elapsed() >= Duration::from_secs(args.duration) {
            break;
        }
        generation += 1;
        for _ in 0..args.rate {
            let slot = cursor % slots.len();
            cursor += 1;
            let (ns, old) = slots[slot].clone();
            // A replacement gets a new name, as a ReplicaSet's pod would.
            let base = old.split('-').take(2).collect::<Vec<_>>().join("-");
            let new = format!("{base}-g{generation}");
            let node = node_name(cursor.wrapping_mul(7919) % node_count);
            slots[slot].1 = new.clone();
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            let done = done.clone();
            let failed = failed.clone();
            // Bounded: a slow API server makes churn fall behind, not pile up.
            if inflight.len() >= args.concurrency {
                inflight.join_next().await;
            }
            inflight.spawn(async move {
                let deleted = match api.delete(&old, &DeleteParams::default()).await {
                    Ok(_) => true,
                    Err(kube::Error::Api(s)) if s.code == 404 => true,
                    Err(_) => false,
                };
                let created = match pod_object(&new, &ns, &node) {
                    Ok(pod) => create_retrying(&api, &pod).await.is_ok(),
                    Err(_) => false,
                };
                if deleted && created {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        if args.flap > 0 && last_flap.elapsed() >= Duration::from_secs(args.flap_every) {
            last_flap = Instant::now();
            flapped = !flapped;
            for node in &flap_nodes {
                if let Err(e) = set_flap_taint(&nodes, node, flapped).await {
                    eprintln!("scale_load: flap {node}: {e:#}");
                }
            }
        }
        let secs = t0.elapsed().as_secs();
        if secs > 0 && secs.is_multiple_of(10) {
            eprintln!(
                "scale_load: churn {}s: {} pods replaced, {} failed",
                secs,
                done.load(Ordering::Relaxed),
                failed.load(Ordering::Relaxed)
            );
        }
    }
    while inflight.join_next().await.is_some() {}
    let secs = t0.elapsed().as_secs_f64();
    let mut unrestored = Vec::new();
    for (node, had) in flap_nodes.iter().zip(had_flap_taint) {
        if let Err(e) = set_flap_taint(&nodes, node, had).await {
            eprintln!("scale_load: could not put {node}'s taints back: {e:#}");
            unrestored.push(node.as_str());
        }
    }
    println!(
        "figure churn_pods_replaced_rate {:.1} pods/s",
        done.load(Ordering::Relaxed) as f64 / secs
    );
    println!(
        "figure churn_failures {} count",
        failed.load(Ordering::Relaxed)
    );
    if !unrestored.is_empty() {
        bail!(
            "churn left the flap taint changed on {}",
            unrestored.join(", ")
        );
    }
    Ok(())
}

fn has_flap_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == FLAP_TAINT))
}

/// Puts [`FLAP_TAINT`] on `node` (`on`) or takes it off, leaving every other taint as it is
/// (the API server's `node.kubernetes.io/not-ready` among them): the node is read, its taint
/// list changed and written back with the resourceVersion read, again on a conflict.
async fn set_flap_taint(nodes: &Api<Node>, node: &str, on: bool) -> anyhow::Result<()> {
    for _ in 0..10 {
        let current = nodes.get(node).await?;
        if has_flap_taint(&current) == on {
            return Ok(());
        }
        let mut taints: Vec<Taint> = current
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        taints.retain(|t| t.key != FLAP_TAINT);
        if on {
            taints.push(Taint {
                key: FLAP_TAINT.to_string(),
                effect: "NoSchedule".to_string(),
                ..Taint::default()
            });
        }
        let patch = json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "spec": {"taints": taints}
        });
        match nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    bail!("still conflicting after 10 attempts")
}
