//! An API server that cannot be reached must show up on the timeline as one gap per
//! source, never as invented state changes and never as silence. Uses a real client
//! against a closed local port (no API mock): every request fails at connect.

use std::time::Duration;

use faultline::observe::{Clock, Namespaces, ObserveMode, Scope, observe};
use faultline::timeline::{Event, GapPhase};
use futures::StreamExt;

fn unreachable_client() -> kube::Client {
    // Port 9 (discard) on loopback: nothing listens there in the test environment.
    let url = "http://127.0.0.1:9"
        .parse()
        .unwrap_or_else(|e| panic!("static URL: {e}"));
    let config = kube::Config::new(url);
    kube::Client::try_from(config).unwrap_or_else(|e| panic!("{e}"))
}

async fn gaps_seen(mode: ObserveMode, how_long: Duration) -> Vec<Event> {
    let scope = Scope {
        namespaces: Namespaces::Only(vec!["ns-a".to_string()]),
        workloads: Vec::new(),
    };
    let entries = observe(unreachable_client(), &scope, Clock::start(), mode);
    entries
        .take_until(tokio::time::sleep(how_long))
        .map(|e| e.event)
        .collect()
        .await
}

fn assert_one_gap_per_source(events: &[Event]) {
    let mut sources: Vec<&str> = events
        .iter()
        .map(|e| match e {
            Event::Gap {
                source,
                phase: GapPhase::Began,
                reason,
            } => {
                assert!(!reason.is_empty());
                source.as_str()
            }
            other => panic!("only gap openings expected, got {other:?}"),
        })
        .collect();
    sources.sort();
    // ReplicaSets only feed owner resolution; their gaps are not recorded.
    assert_eq!(sources, vec!["nodes", "pods/ns-a"], "{events:#?}");
}

#[tokio::test]
async fn poll_mode_opens_one_gap_per_source_while_the_api_is_unreachable() {
    let events = gaps_seen(
        ObserveMode::Poll {
            interval: Duration::from_millis(100),
        },
        Duration::from_millis(800),
    )
    .await;
    assert_one_gap_per_source(&events);
}

#[tokio::test]
async fn watch_mode_opens_one_gap_per_source_while_the_api_is_unreachable() {
    let events = gaps_seen(ObserveMode::Watch, Duration::from_millis(2500)).await;
    assert_one_gap_per_source(&events);
}
