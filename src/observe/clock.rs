//! The run's time zero, so every entry carries a monotonic offset and a wall-clock time
//! that agree with each other.

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// Time zero of a run: a monotonic instant and the wall-clock time it corresponds to.
///
/// Offsets come from the monotonic clock (immune to NTP steps during a long run); the wall
/// time of an entry is `wall_zero + offset`, so the two never disagree in a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    zero: Instant,
    wall_zero: DateTime<Utc>,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn start() -> Self {
        Clock {
            zero: Instant::now(),
            wall_zero: Utc::now(),
        }
    }

    /// A clock with an explicit zero (e.g. shared with the runner, or zero in the future
    /// so setup entries get negative offsets).
    pub fn new(zero: Instant, wall_zero: DateTime<Utc>) -> Self {
        Clock { zero, wall_zero }
    }

    /// Wall-clock time of offset zero.
    pub fn wall_zero(&self) -> DateTime<Utc> {
        self.wall_zero
    }

    /// Milliseconds since zero (negative before it).
    pub fn offset_ms(&self) -> i64 {
        self.offset_of(Instant::now())
    }

    /// The offset of an earlier (or later) moment on the same monotonic clock.
    pub fn offset_of(&self, at: Instant) -> i64 {
        if at >= self.zero {
            i64::try_from(at.duration_since(self.zero).as_millis()).unwrap_or(i64::MAX)
        } else {
            -i64::try_from(self.zero.duration_since(at).as_millis()).unwrap_or(i64::MAX)
        }
    }

    /// Wall-clock time for an offset, at millisecond precision.
    pub fn wall_at(&self, offset_ms: i64) -> DateTime<Utc> {
        self.wall_zero + chrono::Duration::milliseconds(offset_ms)
    }

    /// Wall-clock time now, consistent with [`Clock::offset_ms`].
    pub fn wall(&self) -> DateTime<Utc> {
        self.wall_at(self.offset_ms())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn offsets_follow_the_monotonic_clock_and_wall_agrees() {
        let wall_zero = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .map(|d| d.with_timezone(&Utc))
            .unwrap_or_default();
        let clock = Clock::new(
            Instant::now() + std::time::Duration::from_secs(2),
            wall_zero,
        );
        assert_eq!(clock.offset_ms(), -2000);
        tokio::time::advance(std::time::Duration::from_millis(3500)).await;
        assert_eq!(clock.offset_ms(), 1500);
        assert_eq!(
            clock.offset_of(Instant::now() - std::time::Duration::from_millis(700)),
            800
        );
        assert_eq!(clock.wall().to_rfc3339(), "2026-01-01T00:00:01.500+00:00");
    }
}
