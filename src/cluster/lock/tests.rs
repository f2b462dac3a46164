use std::time::{Duration, Instant};

use super::liveness::{FirstSight, Here, Look, Watched, first_sight, gone_from_here};
use super::*;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("time")
}

fn here() -> Here {
    Here {
        host: "runner".into(),
        pid: 100,
        pid_namespace: Some("boot-1:pid:[4026531836]".into()),
    }
}

/// A Lease renewed at `renewed` by its holder `identity`, from the PID namespace `ns`.
fn held(identity: &str, renewed: Timestamp, ns: Option<&str>) -> Lease {
    let mut l = lease(identity, "faultline run reboot", renewed, Some("7".into()));
    let annotations = l.metadata.annotations.get_or_insert_with(Default::default);
    annotations.remove(PID_NAMESPACE_ANNOTATION);
    if let Some(ns) = ns {
        annotations.insert(PID_NAMESPACE_ANNOTATION.into(), ns.into());
    }
    l
}

#[test]
fn a_fresh_renewal_refuses_at_once_and_a_stale_one_is_only_watched() {
    let l = held("elsewhere/1/run-a", at(0), None);
    match first_sight(&l, at(30), &here()) {
        FirstSight::Live(h) => {
            assert_eq!(h.identity, "elsewhere/1/run-a");
            assert_eq!(h.running, "faultline run reboot");
            assert_eq!(h.renewed, Some(at(0)));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        first_sight(&l, at(60), &here()),
        FirstSight::Live(_)
    ));
    // Stale by this machine's clock: not dead, only unsure (this clock may be ahead).
    assert!(matches!(
        first_sight(&l, at(61), &here()),
        FirstSight::Unsure(_)
    ));
    // A Lease with no holder was released: free.
    let mut blank = l.clone();
    blank.spec = Some(LeaseSpec::default());
    assert_eq!(first_sight(&blank, at(0), &here()), FirstSight::Free(None));
}

/// Issue 69, item 1: a second runner whose clock is five minutes ahead read a live
/// holder's fresh renewal as five minutes old and took the lock over at once.
#[test]
fn a_reader_five_minutes_ahead_does_not_call_a_live_holder_dead() {
    let renewed = at(0);
    let l = held("ci-runner-a/4242/fl1", renewed, None);
    let five_minutes_ahead = at(300 + 10);
    assert!(
        matches!(
            first_sight(&l, five_minutes_ahead, &here()),
            FirstSight::Unsure(_)
        ),
        "a renewal that looks old is watched, never taken as death"
    );
    // Behind by five minutes, the renewal lies in the future: watched too.
    assert!(matches!(
        first_sight(&l, at(-300), &here()),
        FirstSight::Unsure(_)
    ));
    // A few seconds of skew is normal: still fresh.
    assert!(matches!(
        first_sight(&l, at(-3), &here()),
        FirstSight::Live(_)
    ));
}

#[test]
fn a_watched_lease_is_dead_only_after_its_whole_duration_unchanged_on_this_clock() {
    let l = held("elsewhere/1/run-a", at(0), None);
    let t0 = Instant::now();
    let watched = Watched::start(&l, t0);
    assert_eq!(watched.duration(), Duration::from_secs(60));
    assert_eq!(
        watched.look(Some("7"), t0 + Duration::from_secs(59)),
        Look::Unchanged
    );
    assert_eq!(
        watched.look(Some("7"), t0 + Duration::from_secs(61)),
        Look::Expired
    );
    // Any write (a renewal) in between: alive, whatever its timestamps say.
    assert_eq!(
        watched.look(Some("8"), t0 + Duration::from_secs(61)),
        Look::Written
    );
    assert_eq!(
        watched.look(None, t0 + Duration::from_secs(1)),
        Look::Written
    );
}

/// Issue 69, item 1: a holder in another PID namespace on the same host name (`docker run
/// --network host`, `unshare -p`), or anywhere without `/proc`, was called dead because
/// its pid named nothing here.
#[test]
fn only_a_holder_of_this_pid_namespace_is_looked_up_by_pid() {
    let here = Here::current();
    let Some(ours) = here.pid_namespace.clone() else {
        panic!("this test runs where /proc is this process's own: {here:?}");
    };
    let mut child = std::process::Command::new("true").spawn().expect("true");
    let ended = child.id();
    child.wait().expect("wait");
    let holder = |identity: String, ns: Option<&str>| Holder {
        identity,
        running: "faultline run reboot".into(),
        since: None,
        renewed: None,
        pid_namespace: ns.map(str::to_string),
        api_undos: None,
    };
    let host = &here.host;
    // Same host, same namespace, its process gone: dead at once.
    assert!(gone_from_here(
        &holder(format!("{host}/{ended}/fl1"), Some(&ours)),
        &here
    ));
    // A live process that is not faultline: a pid reused since.
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep");
    assert!(gone_from_here(
        &holder(format!("{host}/{}/fl1", sleeper.id()), Some(&ours)),
        &here
    ));
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    // Another PID namespace on the same host name, or one that did not say: not provable.
    assert!(!gone_from_here(
        &holder(format!("{host}/{ended}/fl1"), Some("boot-1:pid:[1]")),
        &here
    ));
    assert!(!gone_from_here(
        &holder(format!("{host}/{ended}/fl1"), None),
        &here
    ));
    // This process itself, another machine's holder, nonsense: not gone.
    assert!(!gone_from_here(
        &holder(format!("{host}/{}/fl1", std::process::id()), Some(&ours)),
        &here
    ));
    assert!(!gone_from_here(
        &holder(format!("elsewhere-{host}/{ended}/fl1"), Some(&ours)),
        &here
    ));
    assert!(!gone_from_here(
        &holder("no-pid-here".into(), Some(&ours)),
        &here
    ));
    // Where this process cannot tell its namespace (no /proc of its own), never.
    let blind = Here {
        pid_namespace: None,
        ..here.clone()
    };
    assert!(!gone_from_here(
        &holder(format!("{host}/{ended}/fl1"), Some(&ours)),
        &blind
    ));
    // Through a Lease: a holder of this namespace whose process ended is free to take.
    let l = held(
        &format!("{host}/{ended}/fl1"),
        Timestamp::now(),
        Some(&ours),
    );
    assert!(matches!(
        first_sight(&l, Timestamp::now(), &here),
        FirstSight::Free(Some(_))
    ));
}

#[test]
fn the_refusal_names_the_holder_and_what_it_runs() {
    let e = LockError::Held {
        cluster: "kind".into(),
        holder: Holder {
            identity: "laptop/4242/fl2026".into(),
            running: "faultline run reboot".into(),
            since: Some(at(0)),
            renewed: Some(at(15)),
            pid_namespace: None,
            api_undos: None,
        },
    };
    let text = e.to_string();
    assert!(
        text.contains("laptop/4242/fl2026 (faultline run reboot)"),
        "{text}"
    );
    assert!(
        text.contains("once it has not been renewed for 60s"),
        "{text}"
    );
}

#[test]
fn a_holder_gives_up_well_before_anyone_may_take_over() {
    // A reader takes over only after watching the Lease unchanged for LEASE_SECONDS,
    // which starts no sooner than the holder's last renewal.
    let lease = Duration::from_secs(u64::from(LEASE_SECONDS.unsigned_abs()));
    assert!(GIVE_UP_AFTER + RENEW_EVERY <= lease, "{GIVE_UP_AFTER:?}");
}
