use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use super::*;

/// A sink that keeps every event, and a way to read them.
fn collector() -> (ProbeSink, Arc<Mutex<Vec<Event>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    (Arc::new(move |e| s.lock().unwrap().push(e)), seen)
}

fn results(seen: &Arc<Mutex<Vec<Event>>>) -> Vec<(bool, String)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::Probe { up, detail, .. } => Some((*up, detail.clone())),
            _ => None,
        })
        .collect()
}

/// Waits (up to 10 s) until the sink holds `n` probe events.
async fn until_events(seen: &Arc<Mutex<Vec<Event>>>, n: usize) {
    for _ in 0..200 {
        if results(seen).len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("only {:?} after 10s", results(seen));
}

fn spec(name: &str, kind: ProbeKind, timeout_ms: u64) -> ProbeSpec {
    ProbeSpec {
        name: name.into(),
        kind,
        interval: Duration::from_millis(40),
        timeout: Duration::from_millis(timeout_ms),
    }
}

fn no_executor() -> Arc<Executor> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/inventory/lab.yaml");
    let inv = crate::inventory::Inventory::load(&path).expect("fixture inventory loads");
    Arc::new(Executor::new(inv))
}

/// No exec pods and no cluster: what probes see outside a run.
static NO_PODS: std::sync::LazyLock<BTreeMap<String, String>> =
    std::sync::LazyLock::new(BTreeMap::new);

fn ctx<'a>(
    targets: &'a BTreeMap<String, Vec<String>>,
    internal_ips: &'a BTreeMap<String, String>,
) -> ProbeContext<'a> {
    ProbeContext {
        targets,
        internal_ips,
        exec_pods: &NO_PODS,
        executor: no_executor(),
        client: None,
    }
}

#[test]
fn an_exec_probe_without_a_chosen_pod_is_refused() {
    let kind = ProbeKind::Exec {
        command: vec!["true".into()],
        workload: crate::experiment::model::WorkloadRef {
            kind: crate::experiment::model::WorkloadKind::Deployment,
            namespace: "ns".into(),
            name: "web".into(),
        },
        on: "victim".into(),
        container: None,
    };
    let (sink, _) = collector();
    let err = Probes::start(
        &[spec("shell", kind, 100)],
        ctx(&BTreeMap::new(), &BTreeMap::new()),
        sink,
    )
    .err()
    .expect("no pod, no probe");
    assert_eq!(err.to_string(), "probe `shell`: no pod was chosen for it");
}

#[tokio::test]
async fn a_local_command_probe_records_only_changes() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("code");
    std::fs::write(&flag, "0").unwrap();
    let command = format!("exit $(cat {})", flag.display());
    let (sink, seen) = collector();
    let probes = Probes::start(
        &[spec(
            "local",
            ProbeKind::Command { command, on: None },
            2000,
        )],
        ctx(&BTreeMap::new(), &BTreeMap::new()),
        sink,
    )
    .unwrap();
    until_events(&seen, 1).await;
    // Several more tries pass while the result stays the same: nothing new is recorded.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(results(&seen), vec![(true, "exit 0".to_string())]);
    std::fs::write(&flag, "1").unwrap();
    until_events(&seen, 2).await;
    // Down for several tries: each failed one is counted, though none is recorded.
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(&flag, "0").unwrap();
    until_events(&seen, 3).await;
    probes.stop().await;
    assert_eq!(
        results(&seen),
        vec![
            (true, "exit 0".to_string()),
            (false, "exit 1".to_string()),
            (true, "exit 0".to_string())
        ]
    );
    let counts: Vec<Option<u64>> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::Probe { failed, .. } => Some(*failed),
            _ => None,
        })
        .collect();
    assert_eq!(counts[..2], [Some(0), Some(1)]);
    let spell = counts[2].expect("counted");
    assert!(
        spell >= 3,
        "300 ms down at one try per 40 ms: {spell} failed tries"
    );
}

#[tokio::test]
async fn a_command_slower_than_its_timeout_is_down() {
    let (sink, seen) = collector();
    let kind = ProbeKind::Command {
        command: "sleep 5".into(),
        on: None,
    };
    let probes = Probes::start(
        &[spec("slow", kind, 100)],
        ctx(&BTreeMap::new(), &BTreeMap::new()),
        sink,
    )
    .unwrap();
    until_events(&seen, 1).await;
    probes.stop().await;
    assert_eq!(
        results(&seen),
        vec![(false, "timed out after 0.1s".to_string())]
    );
}

#[test]
fn a_command_probe_on_a_target_of_two_nodes_is_refused() {
    let kind = ProbeKind::Command {
        command: "true".into(),
        on: Some("pair".into()),
    };
    let targets = BTreeMap::from([("pair".to_string(), vec!["a".into(), "b".into()])]);
    let (sink, _) = collector();
    let err = Probes::start(
        &[spec("p", kind, 100)],
        ctx(&targets, &BTreeMap::new()),
        sink,
    )
    .err()
    .expect("two nodes are refused");
    assert_eq!(
        err.to_string(),
        "probe `p`: target `pair` resolved to 2 nodes; a probe runs on exactly one"
    );
}

#[test]
fn an_http_probe_through_a_node_without_an_internal_ip_is_refused() {
    let kind = ProbeKind::Http {
        url: "http://{internalIP:entry}:30080/".into(),
        expect_status: None,
        insecure: false,
        ca_file: None,
    };
    let (sink, _) = collector();
    let err = Probes::start(
        &[spec("web", kind, 100)],
        ctx(
            &BTreeMap::from([("entry".to_string(), vec!["n1".to_string()])]),
            &BTreeMap::new(),
        ),
        sink,
    )
    .err()
    .expect("no address, no probe");
    assert_eq!(
        err.to_string(),
        "probe `web`: node `n1` (target `entry`) has no InternalIP address"
    );
}

/// A one-thread HTTP server on 127.0.0.1 answering every request with `status`.
fn serve(status: Arc<AtomicU16>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let code = status.load(Ordering::SeqCst);
            let _ = write!(
                stream,
                "HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    port
}

#[tokio::test]
async fn an_http_probe_through_a_target_node_sees_up_then_down() {
    let status = Arc::new(AtomicU16::new(200));
    let port = serve(status.clone());
    let kind = ProbeKind::Http {
        url: format!("http://{{internalIP:entry}}:{port}/livez"),
        expect_status: None,
        insecure: false,
        ca_file: None,
    };
    let (sink, seen) = collector();
    let probes = Probes::start(
        &[spec("web", kind, 2000)],
        ctx(
            &BTreeMap::from([("entry".to_string(), vec!["n1".to_string()])]),
            &BTreeMap::from([("n1".to_string(), "127.0.0.1".to_string())]),
        ),
        sink,
    )
    .unwrap();
    until_events(&seen, 1).await;
    status.store(503, Ordering::SeqCst);
    until_events(&seen, 2).await;
    probes.stop().await;
    assert_eq!(
        results(&seen),
        vec![
            (true, "HTTP 200".to_string()),
            (false, "HTTP 503".to_string())
        ]
    );
}

#[tokio::test]
async fn an_expected_status_other_than_2xx_is_up() {
    let status = Arc::new(AtomicU16::new(401));
    let port = serve(status);
    let probe =
        http::HttpProbe::new(&format!("http://127.0.0.1:{port}/"), Some(401), false, None).unwrap();
    assert_eq!(
        probe.attempt(Duration::from_secs(2)).await,
        TryResult::new(true, "HTTP 401")
    );
    let any_2xx =
        http::HttpProbe::new(&format!("http://127.0.0.1:{port}/"), None, true, None).unwrap();
    assert!(!any_2xx.attempt(Duration::from_secs(2)).await.up);
}

#[tokio::test]
async fn a_refused_connection_is_down_with_the_reason() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let probe =
        http::HttpProbe::new(&format!("http://127.0.0.1:{port}/"), None, false, None).unwrap();
    let r = probe.attempt(Duration::from_secs(2)).await;
    assert!(!r.up);
    assert!(r.detail.contains("refused"), "{}", r.detail);
}

#[test]
fn details_are_one_short_clean_line() {
    let r = TryResult::new(
        false,
        format!("exit 1:\x1b[31m bad\nthing {}", "x".repeat(400)),
    );
    assert!(r.detail.starts_with("exit 1: bad thing xx"), "{}", r.detail);
    assert_eq!(r.detail.chars().count(), MAX_DETAIL);
}

#[tokio::test]
async fn a_probe_flooding_its_stderr_keeps_only_a_bounded_tail() {
    // 8 MiB on stderr, then the line the verdict names: all of it is read (the command
    // exits), and only the last MAX_OUTPUT bytes are held.
    let (mut writer, reader) = tokio::io::duplex(64 * 1024);
    let feed = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..128 {
            writer.write_all(&chunk).await.unwrap();
        }
        writer.write_all(b"\nthe last word\n").await.unwrap();
    });
    let kept = super::read_capped(reader).await;
    feed.await.unwrap();
    assert!(kept.len() <= crate::execute::MAX_OUTPUT, "{}", kept.len());
    assert!(kept.ends_with("the last word\n"), "{kept:?}");
    // Through a real command: it finishes, Down, with the failing line.
    let result = super::command::local(
        "head -c 8000000 /dev/zero | tr '\\0' x >&2; echo >&2; echo 'disk full' >&2; exit 1",
        Duration::from_secs(20),
    )
    .await;
    assert!(!result.up);
    assert!(result.detail.starts_with("exit 1"), "{}", result.detail);
}
