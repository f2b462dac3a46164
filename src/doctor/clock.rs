//! The node's clock against the runner's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{CHECK_TIMEOUT, CheckKind, Finding, Status};
use crate::execute::{Executor, NodeOp};

/// A node clock further off than this is worth a warning.
const CLOCK_WARN: Duration = Duration::from_secs(1);
/// A node clock further off than this fails the check.
const CLOCK_FAIL: Duration = Duration::from_secs(5);

/// The node's clock against this machine's, to within half the command's round trip.
pub(super) async fn finding(executor: &Executor, name: &str) -> Finding {
    let f = |status, detail: String| Finding::node(name, CheckKind::Clock, status, detail);
    let now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    };
    let before = now();
    let out = executor
        .perform(name, &NodeOp::Run("date -u +%s.%N".into()), CHECK_TIMEOUT)
        .await;
    let after = now();
    let text = match out {
        Ok(o) => o.output,
        Err(e) => return f(Status::Fail, format!("cannot read the node's clock: {e}")),
    };
    let Some(remote) = parse_epoch(&text) else {
        return f(
            Status::Fail,
            format!("`date -u +%s.%N` printed `{}`", text.trim()),
        );
    };
    let offset = remote.seconds - (before + after) / 2.0;
    let within = (after - before) / 2.0 + remote.resolution;
    let beyond = (offset.abs() - within).max(0.0);
    let detail = format!(
        "{:+.3} s from this machine's (±{:.3} s); faultline compares the Ready \
         lastTransitionTime a node writes with its own clock",
        offset, within
    );
    if beyond > CLOCK_FAIL.as_secs_f64() {
        f(Status::Fail, detail)
    } else if beyond > CLOCK_WARN.as_secs_f64() {
        f(Status::Warn, detail)
    } else {
        f(Status::Pass, detail)
    }
}

/// Seconds since the epoch as `date +%s.%N` prints them, and the resolution (1 s where
/// `%N` is not supported and comes back as text).
struct Epoch {
    seconds: f64,
    resolution: f64,
}

fn parse_epoch(text: &str) -> Option<Epoch> {
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    if let Ok(seconds) = line.parse::<f64>() {
        return Some(Epoch {
            seconds,
            resolution: 0.0,
        });
    }
    let whole = line.split('.').next()?.parse::<f64>().ok()?;
    Some(Epoch {
        seconds: whole,
        resolution: 1.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_with_and_without_nanoseconds() {
        let e = parse_epoch("1700000000.250000000\n").expect("parsed");
        assert!((e.seconds - 1_700_000_000.25).abs() < 1e-6);
        assert_eq!(e.resolution, 0.0);
        let busybox = parse_epoch("1700000000.%N\n").expect("parsed");
        assert_eq!(busybox.seconds, 1_700_000_000.0);
        assert_eq!(busybox.resolution, 1.0);
        assert!(parse_epoch("date: invalid").is_none());
    }
}
