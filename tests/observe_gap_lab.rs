//! Nothing is lost silently: on the lab, the observer's connection to the API server is
//! cut (through a TCP proxy this test controls, the API itself is real), a pod is deleted
//! while the observer is blind, and the connection comes back. The timeline must show the
//! gap opening, the deletion recovered, and the gap closing, in both modes.
//! `#[ignore]`d: `ci/test` runs them on the lab with `FAULTLINE_LAB_DIR` set.

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::Duration;

use faultline::cluster;
use faultline::observe::{Clock, Namespaces, ObserveMode, Scope, observe};
use faultline::timeline::{Entry, Event, GapPhase};
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// A TCP proxy to the API server that can be switched off (closing every connection) and on.
struct Proxy {
    addr: SocketAddr,
    upstream: String,
    task: Option<JoinHandle<()>>,
}

impl Proxy {
    async fn start(bind_host: &str, upstream: String) -> Proxy {
        let listener = TcpListener::bind((bind_host, 0))
            .await
            .unwrap_or_else(|e| panic!("binding proxy: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let task = tokio::spawn(serve(listener, upstream.clone()));
        Proxy {
            addr,
            upstream,
            task: Some(task),
        }
    }

    fn down(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }

    async fn up(&mut self) {
        let listener = TcpListener::bind(self.addr)
            .await
            .unwrap_or_else(|e| panic!("rebinding proxy: {e}"));
        self.task = Some(tokio::spawn(serve(listener, self.upstream.clone())));
    }
}

async fn serve(listener: TcpListener, upstream: String) {
    // Dropping the set (when this task is aborted) aborts every proxied connection.
    let mut conns = JoinSet::new();
    while let Ok((mut client, _)) = listener.accept().await {
        let upstream = upstream.clone();
        conns.spawn(async move {
            if let Ok(mut server) = TcpStream::connect(&upstream).await {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            }
        });
    }
}

/// The lab's kubeconfig. These tests are `#[ignore]`d: `ci/test` runs them with
/// `--ignored` after `ci/lab/up`, and then a missing lab is a failure, not a skip.
fn kubeconfig() -> Option<PathBuf> {
    let dir = std::env::var_os("FAULTLINE_LAB_DIR").expect(
        "FAULTLINE_LAB_DIR must point at the lab's output directory (ci/lab/up writes target/lab)",
    );
    Some(PathBuf::from(dir).join("kubeconfig"))
}

/// A client that reaches the API server only through the proxy.
async fn proxied_client(kc: &PathBuf) -> (kube::Client, Proxy) {
    let file = Kubeconfig::read_from(kc).unwrap_or_else(|e| panic!("{e}"));
    let mut config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let url = config.cluster_url.clone();
    let host = url.host().unwrap_or("127.0.0.1").to_string();
    let port = url.port_u16().unwrap_or(443);
    // Bind on the server's own address so its certificate still matches.
    let proxy = Proxy::start(&host, format!("{host}:{port}")).await;
    let proxied = format!(
        "{}://{}:{}",
        url.scheme_str().unwrap_or("https"),
        host,
        proxy.addr.port()
    );
    config.cluster_url = proxied.parse().unwrap_or_else(|e| panic!("{e}"));
    (
        kube::Client::try_from(config).unwrap_or_else(|e| panic!("{e}")),
        proxy,
    )
}

async fn next_until(
    entries: &mut BoxStream<'static, Entry>,
    seen: &mut Vec<Entry>,
    what: &str,
    pred: impl Fn(&[Entry]) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while !pred(seen) {
        match tokio::time::timeout_at(deadline, entries.next()).await {
            Ok(Some(e)) => seen.push(e),
            Ok(None) => panic!("observer stream ended while waiting for {what}"),
            Err(_) => panic!("timed out waiting for {what}; saw {seen:#?}"),
        }
    }
}

fn manifest(ns: &str) -> String {
    let pod = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  nodeSelector:\n    type: kwok\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n"
        )
    };
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n{}{}",
        pod("keep"),
        pod("lost")
    )
}

fn is_pod(e: &Entry, name: &str) -> bool {
    matches!(&e.event, Event::Pod { pod, .. } if pod.name == name)
}

async fn blind_deletion(mode: ObserveMode, prefix: &str) {
    let Some(kc) = kubeconfig() else { return };
    let direct = cluster::connect(Some(&kc), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (proxied, mut proxy) = proxied_client(&kc).await;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let ns = format!("{prefix}-{}", secs % 100_000);
    let source = format!("pods/{ns}");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("pods.yaml");
    std::fs::write(&path, manifest(&ns)).unwrap_or_else(|e| panic!("{e}"));
    let applied = cluster::apply_manifests(&direct, &[path])
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let scope = Scope {
        namespaces: Namespaces::Only(vec![ns.clone()]),
        workloads: Vec::new(),
    };
    // A failure must still remove the test namespace.
    let outcome = AssertUnwindSafe(async {
    let mut entries = observe(proxied, &scope, Clock::start(), mode);
    let mut seen = Vec::new();
    next_until(&mut entries, &mut seen, "both pods Running", |s| {
        ["keep", "lost"].iter().all(|n| {
            s.iter().any(|e| {
                is_pod(e, n)
                    && matches!(&e.event, Event::Pod { after: Some(p), .. } if p.phase == "Running")
            })
        })
    })
    .await;

    proxy.down();
    let gap_began = |s: &[Entry]| {
        s.iter().any(|e| {
            matches!(&e.event, Event::Gap { source: src, phase: GapPhase::Began, .. } if *src == source)
        })
    };
    next_until(&mut entries, &mut seen, "the pods gap to open", gap_began).await;
    let began_at = seen.len();

    // While the observer is blind, the pod goes away for good.
    let pods: Api<Pod> = Api::namespaced(direct.clone(), &ns);
    pods.delete(
        "lost",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..100 {
        if pods.get_opt("lost").await.ok().flatten().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    proxy.up().await;
    next_until(&mut entries, &mut seen, "the deletion and the gap's end", |s| {
        let deleted = s[began_at..]
            .iter()
            .any(|e| is_pod(e, "lost") && matches!(&e.event, Event::Pod { after: None, .. }));
        let ended = s[began_at..].iter().any(|e| {
            matches!(&e.event, Event::Gap { source: src, phase: GapPhase::Ended, .. } if *src == source)
        });
        deleted && ended
    })
    .await;
    // The recovered deletion lies inside the gap: its time is only known to be in there.
    let deleted_at = seen
        .iter()
        .position(|e| is_pod(e, "lost") && matches!(&e.event, Event::Pod { after: None, .. }));
    let ended_at = seen.iter().position(|e| {
        matches!(&e.event, Event::Gap { source: src, phase: GapPhase::Ended, .. } if *src == source)
    });
    assert!(deleted_at < ended_at, "{seen:#?}");
    // Nothing was invented for the pod that did not change.
    assert!(
        !seen[began_at..].iter().any(|e| is_pod(e, "keep")),
        "{seen:#?}"
    );
    })
    .catch_unwind()
    .await;
    if let Err(panic) = outcome {
        let _ = cluster::delete_objects(&direct, &applied).await;
        std::panic::resume_unwind(panic);
    }
    cluster::delete_objects(&direct, &applied)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
#[ignore = "needs the lab: ci/test runs it after ci/lab/up"]
async fn watch_mode_recovers_a_deletion_that_happened_during_a_gap() {
    blind_deletion(ObserveMode::Watch, "faultline-gap-watch").await;
}

#[tokio::test]
#[ignore = "needs the lab: ci/test runs it after ci/lab/up"]
async fn poll_mode_recovers_a_deletion_that_happened_during_a_gap() {
    blind_deletion(
        ObserveMode::Poll {
            interval: Duration::from_millis(300),
        },
        "faultline-gap-poll",
    )
    .await;
}
