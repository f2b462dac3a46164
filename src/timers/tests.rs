use std::time::Duration;

use super::*;
use crate::experiment::parse_bound;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn reading(value: u64, source: &str) -> Reading {
    Reading {
        value: secs(value),
        source: source.into(),
    }
}

#[test]
fn the_cluster_wins_then_the_inventory_then_an_assumed_default() {
    let mut readings = ClusterReadings::default();
    readings.offer(Timer::NodeMonitorGracePeriod, reading(20, "kcm flag"));
    // A later, less direct source does not replace the first.
    readings.offer(Timer::NodeMonitorGracePeriod, reading(99, "elsewhere"));
    let stated = StatedTimers {
        node_monitor_grace_period: Some(secs(40)),
        default_unreachable_toleration: Some(secs(60)),
        ..StatedTimers::default()
    };
    let t = TimersInForce::resolve(&readings, &stated, Some("v1.31.4"));
    assert_eq!(t.timers.node_monitor_grace_period, secs(20));
    assert_eq!(t.timers.default_unreachable_toleration, secs(60));
    // v1.31: grace default would be 40 s, the period 5 s.
    assert_eq!(t.timers.node_monitor_period, secs(5));
    assert_eq!(t.timers.default_not_ready_toleration, secs(300));

    let grace = t.source(Timer::NodeMonitorGracePeriod).expect("grace");
    assert_eq!(grace.origin, Origin::Cluster);
    assert_eq!(grace.detail, "kcm flag");
    assert!(grace.disagrees(), "the inventory says 40s, the cluster 20s");
    assert!(
        grace.line().contains("the inventory states 40s"),
        "{}",
        grace.line()
    );
    assert_eq!(
        t.source(Timer::DefaultUnreachableTolerationSeconds)
            .map(|s| s.origin),
        Some(Origin::Inventory)
    );
    let period = t.source(Timer::NodeMonitorPeriod).expect("period");
    assert_eq!(period.origin, Origin::Assumed);
    assert!(
        period.detail.contains("upstream default of v1.31"),
        "{}",
        period.detail
    );
    assert_eq!(
        t.assumed(),
        [
            Timer::NodeMonitorPeriod,
            Timer::DefaultNotReadyTolerationSeconds
        ]
    );
    assert_eq!(t.disagreements().len(), 1);

    let mut agreeing = ClusterReadings::default();
    agreeing.offer(Timer::NodeMonitorGracePeriod, reading(40, "kcm flag"));
    let t = TimersInForce::resolve(&agreeing, &stated, Some("v1.31.4"));
    let grace = t.source(Timer::NodeMonitorGracePeriod).expect("grace");
    assert!(!grace.disagrees());
    assert!(
        grace.line().ends_with("; the inventory states the same"),
        "{}",
        grace.line()
    );
}

#[test]
fn nothing_known_is_all_assumed_with_the_current_defaults() {
    let t = TimersInForce::resolve(&ClusterReadings::default(), &StatedTimers::default(), None);
    assert_eq!(t.timers, ClusterTimers::default());
    assert_eq!(t.assumed().len(), 4);
    assert!(t.disagreements().is_empty());
}

#[test]
fn bounds_on_assumed_timers_are_marked_and_toleration_depends_on_the_use() {
    let mut readings = ClusterReadings::default();
    readings.offer(Timer::NodeMonitorPeriod, reading(2, "kcm"));
    let t = TimersInForce::resolve(&readings, &StatedTimers::default(), Some("v1.33.1"));
    let b = parse_bound("grace + toleration + 30s").expect("bound");
    assert_eq!(
        assumed_mark(&b, &t.sources, BoundUse::Schedule),
        " [ASSUMED: grace = 50s, toleration = 5m]"
    );
    // In an expectation `toleration` is each pod's own, read from the pod.
    assert_eq!(
        assumed_mark(&b, &t.sources, BoundUse::Expectation),
        " [ASSUMED: grace = 50s]"
    );
    let monitor = parse_bound("3 * monitor + 10s").expect("bound");
    assert_eq!(assumed_mark(&monitor, &t.sources, BoundUse::Schedule), "");
    assert_eq!(
        assumed_mark(
            &parse_bound("90s").expect("bound"),
            &t.sources,
            BoundUse::Schedule
        ),
        ""
    );
}

#[test]
fn durations_read_the_way_people_write_them() {
    assert_eq!(show(secs(20)), "20s");
    assert_eq!(show(secs(300)), "5m");
    assert_eq!(show(secs(90)), "1m30s");
    assert_eq!(show(Duration::from_millis(1500)), "1500ms");
    assert_eq!(show(Duration::ZERO), "0s");
}

#[test]
fn sources_survive_a_round_trip_through_json() {
    let t = TimersInForce::resolve(
        &ClusterReadings::default(),
        &StatedTimers {
            node_monitor_period: Some(secs(2)),
            ..StatedTimers::default()
        },
        Some("v1.33.1"),
    );
    let text = serde_json::to_string(&t.sources).expect("json");
    assert!(text.contains("\"origin\":\"inventory\""), "{text}");
    assert!(text.contains("\"timer\":\"nodeMonitorPeriod\""), "{text}");
    let back: Vec<TimerSource> = serde_json::from_str(&text).expect("back");
    assert_eq!(back, t.sources);
}
