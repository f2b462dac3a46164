//! Prints the cluster as timeline entries, as they come.
//!
//! ```text
//! cargo run --example watch_timeline -- target/lab/kubeconfig faultline-lab [--poll 2]
//! ```
//!
//! Nodes are always watched; pods of the given namespace (default `default`) too.
//! Stop with Ctrl-C.

use std::path::PathBuf;
use std::time::Duration;

use faultline::cluster;
use faultline::observe::{Clock, Namespaces, ObserveMode, Scope, observe};
use faultline::timeline::format_offset_ms;
use futures::StreamExt;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let kubeconfig = args.next().map(PathBuf::from);
    let namespace = args.next().unwrap_or_else(|| "default".to_string());
    let mode = match (args.next().as_deref(), args.next()) {
        (Some("--poll"), Some(secs)) => ObserveMode::Poll {
            interval: Duration::from_secs(secs.parse()?),
        },
        _ => ObserveMode::Watch,
    };
    let client = cluster::connect(kubeconfig.as_deref(), None).await?;
    println!("cluster {}", cluster::cluster_version(&client).await?);
    let scope = Scope {
        namespaces: Namespaces::Only(vec![namespace]),
        workloads: Vec::new(),
    };
    let mut entries = observe(client, &scope, Clock::start(), mode);
    while let Some(entry) = entries.next().await {
        println!(
            "{:>9} {}",
            format_offset_ms(entry.offset_ms),
            serde_json::to_string(&entry.event)?
        );
    }
    Ok(())
}
