//! The API server's own floor for a first sync: how long a bare client takes to read every
//! node and pod of a cluster, streamed (`sendInitialEvents`) and in pages of 500, decoding only
//! names, namespaces and node names. `ci/bench-scale` runs it beside `faultline run` so the
//! run's own sync is a ratio to what the API server can serve on the same machine at the same
//! moment, not an absolute figure that the machine's load moves.
//!
//! ```text
//! cargo run --release --example bare_sync -- --kubeconfig target/scale/kubeconfig --label 30000pods
//! ```
//!
//! Prints `figure bare_sync_{streamed,paged}_<label> <s> s` and the counts it read.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use futures::TryStreamExt;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::core::Request;
use serde::Deserialize;

#[derive(Parser)]
struct Args {
    /// Kubeconfig of the cluster (the scale lab's by default).
    #[arg(long, default_value = "target/scale/kubeconfig")]
    kubeconfig: PathBuf,
    /// Suffix of the figures' names (e.g. `30000pods`).
    #[arg(long, default_value = "now")]
    label: String,
    /// `streamed`, `paged` or `both`.
    #[arg(long, default_value = "both")]
    lists: String,
}

/// What a bare client decodes of an object: enough to count it and place it (decoded as a
/// client would, not read further).
#[derive(Clone, Deserialize)]
#[allow(dead_code)]
struct Bare {
    metadata: BareMeta,
    #[serde(default)]
    spec: Option<BareSpec>,
}

#[derive(Clone, Deserialize)]
#[allow(dead_code)]
struct BareMeta {
    #[serde(default)]
    name: String,
}

#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct BareSpec {
    #[serde(default)]
    node_name: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (streamed, paged) = match args.lists.as_str() {
        "both" => (true, true),
        "streamed" => (true, false),
        "paged" => (false, true),
        other => bail!("--lists is `both`, `streamed` or `paged`, not `{other}`"),
    };
    let client = faultline::cluster::connect(Some(&args.kubeconfig), None)
        .await
        .with_context(|| format!("connecting with {}", args.kubeconfig.display()))?;
    if streamed {
        let t0 = Instant::now();
        let (mut nodes_retries, mut pods_retries) = (0, 0);
        let nodes = read_streamed_again(&client, "/api/v1/nodes", &mut nodes_retries).await?;
        let pods = read_streamed_again(&client, "/api/v1/pods", &mut pods_retries).await?;
        let retries = nodes_retries + pods_retries;
        println!(
            "figure bare_sync_streamed_{} {:.2} s",
            args.label,
            t0.elapsed().as_secs_f64()
        );
        println!(
            "figure bare_sync_streamed_retries_{} {retries} count",
            args.label
        );
        eprintln!("bare_sync: streamed {nodes} nodes and {pods} pods");
    }
    if paged {
        let t0 = Instant::now();
        let nodes = read_paged(&client, "/api/v1/nodes").await?;
        let pods = read_paged(&client, "/api/v1/pods").await?;
        println!(
            "figure bare_sync_paged_{} {:.2} s",
            args.label,
            t0.elapsed().as_secs_f64()
        );
        eprintln!("bare_sync: paged {nodes} nodes and {pods} pods");
    }
    Ok(())
}

/// [`read_streamed`], started again (at most [`STREAM_TRIES`] times in all) when the API
/// server ends the stream before its initial events are over, as it did for the 5,000
/// nodes of a 100,000-pod lab under load (2026-11-30). A client that syncs does the same
/// (kube's watcher starts over), so the time of the failed tries stays in the floor;
/// `retries` counts them (one counter per read: each read has its own tries).
async fn read_streamed_again(
    client: &kube::Client,
    path: &str,
    retries: &mut u32,
) -> anyhow::Result<usize> {
    loop {
        match read_streamed(client, path).await {
            Err(e) if *retries + 1 < STREAM_TRIES && e.to_string().contains(ENDED_EARLY) => {
                eprintln!("bare_sync: {e}; reading it again");
                *retries += 1;
            }
            other => return other,
        }
    }
}

/// How many times in all a streamed read is tried.
const STREAM_TRIES: u32 = 3;

/// The error of a stream that ended before its initial events did.
const ENDED_EARLY: &str = "the stream ended before its initial events did";

/// Reads `path`'s objects as one streaming watch, up to the bookmark that ends its initial
/// events; returns how many it read.
async fn read_streamed(client: &kube::Client, path: &str) -> anyhow::Result<usize> {
    let request = Request::new(path).watch(&WatchParams::streaming_lists(), "")?;
    let mut events = std::pin::pin!(client.request_events::<Bare>(request).await?);
    let mut count = 0;
    while let Some(event) = events.try_next().await? {
        match event {
            WatchEvent::Added(_) | WatchEvent::Modified(_) => count += 1,
            WatchEvent::Bookmark(b) => {
                if b.metadata
                    .annotations
                    .contains_key("k8s.io/initial-events-end")
                {
                    return Ok(count);
                }
            }
            WatchEvent::Deleted(_) => {}
            WatchEvent::Error(e) => bail!("{path}: streaming list refused: {e:?}"),
        }
    }
    bail!("{path}: {ENDED_EARLY}")
}

/// Reads `path`'s objects in pages of 500 (kube's watcher default); returns how many.
async fn read_paged(client: &kube::Client, path: &str) -> anyhow::Result<usize> {
    let mut count = 0;
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(500);
        if let Some(t) = token.take() {
            params = params.continue_token(&t);
        }
        let page: ObjectList<Bare> = client.request(Request::new(path).list(&params)?).await?;
        count += page.items.len();
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(t) => token = Some(t),
            None => return Ok(count),
        }
    }
}
