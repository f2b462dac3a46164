//! The live status of a run: what it waits for and how long is left (the end of
//! observation, the next step, the slowest expectation still open), kept from the run's
//! events, and how it is shown: one line redrawn in place on a terminal, plain lines
//! elsewhere (CI, `| tee`, `| head`), with a "waiting" line when nothing else was printed
//! for a while, so a CI log never goes silent for the minutes a run observes.
//!
//! Everything here takes the time as an argument, so what is shown and when is tested
//! without a terminal and without waiting.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::events::Progress;
use crate::timeline::{Entry, Event, RunPhase, StepPhase};

/// At most this often, a plain "waiting" line while nothing else is printed.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// How often the live view looks at the time again (redraws its line, or checks whether a
/// "waiting" line is due).
pub const REDRAW: Duration = Duration::from_secs(1);

/// How the live view shows itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// One status line redrawn in place below the printed lines.
    Bar,
    /// Plain lines only, never an escape code, and a "waiting" line after
    /// [`HEARTBEAT`] of silence.
    Plain,
}

impl Display {
    /// The display for an output that is, or is not, a terminal.
    pub fn for_output(is_terminal: bool) -> Display {
        if is_terminal {
            Display::Bar
        } else {
            Display::Plain
        }
    }
}

/// A step not issued yet, as its last schedule entry said.
#[derive(Debug, Clone)]
struct Waiting {
    due_ms: Option<i64>,
    wait: String,
}

/// What one run waits for, kept from its events.
#[derive(Debug, Default)]
pub struct Status {
    /// The instant of the run's offset 0, as well as entries received tell it.
    zero: Option<Instant>,
    /// A run was announced and has not finished.
    running: bool,
    /// Time zero (the experiment's `at: 0s`) as an offset, once it started.
    started_ms: Option<i64>,
    observation_over: bool,
    progress: Progress,
    waiting: BTreeMap<String, Waiting>,
    decided: BTreeSet<String>,
}

impl Status {
    /// A run begins (its interlocks and setup come first): forget the last one.
    pub fn begin(&mut self) {
        *self = Status {
            running: true,
            ..Status::default()
        };
    }

    /// Time zero of the run's lines, once the experiment started: the offset of its
    /// `at: 0s`.
    pub fn zero_ms(&self) -> Option<i64> {
        self.started_ms
    }

    /// The run ended: nothing to wait for.
    pub fn end(&mut self) {
        self.running = false;
    }

    /// A timeline entry of the run, received at `now`.
    pub fn entry(&mut self, entry: &Entry, now: Instant) {
        // Entries reach us after they were stamped, never before: the earliest zero they
        // point at is the closest.
        let offset = Duration::from_millis(entry.offset_ms.max(0).unsigned_abs());
        if let Some(zero) = now.checked_sub(offset) {
            self.zero = Some(self.zero.map_or(zero, |z| z.min(zero)));
        }
        match &entry.event {
            Event::Run {
                phase: RunPhase::Started { zero_ms },
            } => self.started_ms = Some(zero_ms.unwrap_or(entry.offset_ms)),
            Event::Run {
                phase: RunPhase::ObservationEnded { .. },
            } => self.observation_over = true,
            Event::Schedule { step, wait, due_ms } => {
                self.waiting.insert(
                    step.clone(),
                    Waiting {
                        due_ms: *due_ms,
                        wait: wait.clone(),
                    },
                );
            }
            // Due, but held back by the interlock: no longer "now".
            Event::Interlock {
                step,
                down,
                deadline_ms,
                ..
            } => {
                let nodes: Vec<&str> = down
                    .iter()
                    .filter(|d| d.why != crate::timeline::DownNode::OWN)
                    .map(|d| d.node.as_str())
                    .collect();
                self.waiting.insert(
                    step.clone(),
                    Waiting {
                        due_ms: None,
                        wait: format!(
                            "waits for {} to come back (interlock; gives up at {})",
                            nodes.join(", "),
                            crate::timeline::format_offset_ms(*deadline_ms)
                        ),
                    },
                );
            }
            Event::Step {
                step,
                phase: StepPhase::Issued,
                ..
            } => {
                self.waiting.remove(step);
            }
            Event::Verdict { name, .. } => {
                self.decided.insert(name.clone());
            }
            _ => {}
        }
    }

    /// What the run's loop says it waits for now.
    pub fn progress(&mut self, progress: Progress) {
        self.progress = progress;
    }

    /// The status line at `now`, or `None` when no run is going on.
    pub fn line(&self, now: Instant) -> Option<String> {
        if !self.running {
            return None;
        }
        let Some(started) = self.started_ms else {
            return Some("preparing: setup, and a first full view of the cluster".to_string());
        };
        if self.observation_over {
            return Some(
                "observation over: undoing what is still broken, checking the cluster, tearing down"
                    .to_string(),
            );
        }
        let now_ms = self.offset_at(now).unwrap_or(started).max(started);
        let mut parts = vec![match self.progress.observe_until_ms {
            Some(end) => format!(
                "observing {} / {}",
                clock_text(now_ms - started),
                clock_text(end - started)
            ),
            None => format!("observing {}", clock_text(now_ms - started)),
        }];
        if let Some(next) = self.next_step(now_ms) {
            parts.push(next);
        }
        if let Some(open) = self.slowest_open(now_ms) {
            parts.push(open);
        }
        Some(parts.join(" · "))
    }

    /// The run's offset at `now`.
    fn offset_at(&self, now: Instant) -> Option<i64> {
        let zero = self.zero?;
        Some(i64::try_from(now.saturating_duration_since(zero).as_millis()).unwrap_or(i64::MAX))
    }

    /// The step due first, or the first one waiting on something else.
    fn next_step(&self, now_ms: i64) -> Option<String> {
        let timed = self
            .waiting
            .iter()
            .filter_map(|(step, w)| Some((w.due_ms?, step)))
            .min();
        if let Some((due, step)) = timed {
            let when = if due <= now_ms {
                "now".to_string()
            } else {
                format!("in {}", clock_text(due - now_ms))
            };
            return Some(format!("next: step \"{step}\" {when}"));
        }
        let (step, w) = self.waiting.iter().next()?;
        Some(format!("next: step \"{step}\" {}", w.wait))
    }

    /// The open expectation whose bound passes last, with the time left to it; else the
    /// first one only the end of observation decides.
    fn slowest_open(&self, now_ms: i64) -> Option<String> {
        let open: Vec<_> = self
            .progress
            .open
            .iter()
            .filter(|o| !self.decided.contains(&o.name))
            .collect();
        let bounded = open
            .iter()
            .filter_map(|o| Some((o.deadline_ms?, &o.name)))
            .max();
        if let Some((deadline, name)) = bounded {
            return Some(format!(
                "waiting for: {name} (≤ {})",
                seconds_text((deadline - now_ms).max(0))
            ));
        }
        let first = open.first()?;
        let more = match open.len() - 1 {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        Some(format!(
            "waiting for: {}{more} (decided when observation ends)",
            first.name
        ))
    }
}

/// `0:41`, `12:05`: minutes and seconds.
fn clock_text(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    format!("{}:{:02}", s / 60, s % 60)
}

/// `50s`, or `2m 05s` from a minute on.
fn seconds_text(ms: i64) -> String {
    let s = (ms.max(0) + 999) / 1000;
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m {:02}s", s / 60, s % 60)
    }
}

/// Where the live view writes, as [`Display`] chose.
pub enum Live {
    /// The status line, redrawn in place; printed lines go above it.
    Bar(ProgressBar),
    /// Plain lines; `last` is when the last one was printed.
    Plain {
        /// When the last line was printed.
        last: Instant,
    },
}

impl Live {
    /// A live view as `display` says; a bar draws to `target` (the terminal; hidden in
    /// tests).
    pub fn new(display: Display, target: ProgressDrawTarget, now: Instant) -> Live {
        match display {
            Display::Plain => Live::Plain { last: now },
            Display::Bar => {
                let bar = ProgressBar::with_draw_target(None, target);
                // `wide_msg` cuts the line at the terminal's width: a line that wrapped
                // could not be redrawn in place.
                if let Ok(style) = ProgressStyle::with_template("{spinner} {wide_msg}") {
                    bar.set_style(style);
                }
                Live::Bar(bar)
            }
        }
    }

    /// Writes `text` (whole lines) to `out`, above the status line if there is one.
    pub fn print(&mut self, out: &mut impl Write, text: &str, now: Instant) -> std::io::Result<()> {
        match self {
            Live::Bar(bar) => bar.suspend(|| {
                out.write_all(text.as_bytes())?;
                out.flush()
            }),
            Live::Plain { last } => {
                *last = now;
                out.write_all(text.as_bytes())?;
                out.flush()
            }
        }
    }

    /// Shows `status` at `now`: the bar redrawn with it, or, in plain lines, a "waiting"
    /// line when nothing was printed for [`HEARTBEAT`].
    pub fn show(
        &mut self,
        out: &mut impl Write,
        status: Option<&str>,
        now: Instant,
    ) -> std::io::Result<()> {
        match self {
            Live::Bar(bar) => {
                bar.set_message(status.unwrap_or_default().to_string());
                bar.tick();
                Ok(())
            }
            Live::Plain { last } => match status {
                Some(status) if now.saturating_duration_since(*last) >= HEARTBEAT => {
                    let line = format!("  waiting: {}\n", crate::sanitize::clean(status));
                    self.print(out, &line, now)
                }
                _ => Ok(()),
            },
        }
    }

    /// The status line as last drawn (empty in plain lines).
    pub fn drawn(&self) -> String {
        match self {
            Live::Bar(bar) => bar.message(),
            Live::Plain { .. } => String::new(),
        }
    }

    /// Takes the status line away for good (the end of the output).
    pub fn clear(&mut self) {
        if let Live::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::OpenExpectation;

    fn at(offset_ms: i64, event: Event) -> Entry {
        Entry {
            offset_ms,
            wall: chrono::Utc::now(),
            event,
        }
    }

    /// A run started at +0.6s whose second step is due at +80.6s, with two open
    /// expectations, seen at its offset `now_ms`.
    fn observing(now_ms: i64) -> (Status, Instant) {
        let zero = Instant::now();
        let t = |ms: i64| zero + Duration::from_millis(ms as u64);
        let mut s = Status::default();
        s.begin();
        s.entry(
            &at(
                600,
                Event::Run {
                    phase: RunPhase::Started { zero_ms: None },
                },
            ),
            t(600),
        );
        s.entry(
            &at(
                600,
                Event::Schedule {
                    step: "start kubelet".into(),
                    wait: "due at +80.6s".into(),
                    due_ms: Some(80_600),
                },
            ),
            t(610),
        );
        s.progress(Progress {
            observe_until_ms: Some(120_600),
            open: vec![
                OpenExpectation {
                    name: "node NotReady".into(),
                    deadline_ms: Some(30_700),
                },
                OpenExpectation {
                    name: "replacement Ready".into(),
                    deadline_ms: Some(80_700),
                },
                OpenExpectation {
                    name: "agents never evicted".into(),
                    deadline_ms: None,
                },
            ],
        });
        (s, t(now_ms))
    }

    #[test]
    fn a_step_held_by_the_interlock_is_not_due_now_but_waits_for_the_nodes_down() {
        let (mut s, now) = observing(90_600);
        s.entry(
            &at(
                90_000,
                Event::Interlock {
                    step: "start kubelet".into(),
                    down: vec![
                        crate::timeline::DownNode {
                            node: "w1".into(),
                            why: "seen unreachable, Ready=Unknown".into(),
                        },
                        crate::timeline::DownNode {
                            node: "w2".into(),
                            why: crate::timeline::DownNode::OWN.into(),
                        },
                    ],
                    rule: "2 nodes would be down at once".into(),
                    deadline_ms: 690_000,
                },
            ),
            now,
        );
        let line = s.line(now).expect("a run is going on");
        assert!(
            line.contains(
                "next: step \"start kubelet\" waits for w1 to come back (interlock; gives up at +690.0s)"
            ),
            "{line}"
        );
    }

    #[test]
    fn the_line_says_the_end_the_next_step_and_the_slowest_open_expectation() {
        let (s, now) = observing(41_600);
        assert_eq!(
            s.line(now).as_deref(),
            Some(
                "observing 0:41 / 2:00 · next: step \"start kubelet\" in 0:39 · waiting for: replacement Ready (≤ 40s)"
            )
        );
    }

    #[test]
    fn decided_and_issued_things_leave_the_line() {
        let (mut s, now) = observing(81_000);
        for (ms, event) in [
            (
                80_600,
                Event::Step {
                    step: "start kubelet".into(),
                    action: "kubelet-start".into(),
                    node: Some("w2".into()),
                    phase: StepPhase::Issued,
                },
            ),
            (
                80_700,
                Event::Verdict {
                    name: "replacement Ready".into(),
                    outcome: crate::judge::Outcome::Passed,
                    message: String::new(),
                },
            ),
            (
                80_800,
                Event::Verdict {
                    name: "node NotReady".into(),
                    outcome: crate::judge::Outcome::Passed,
                    message: String::new(),
                },
            ),
        ] {
            s.entry(&at(ms, event), now);
        }
        assert_eq!(
            s.line(now).as_deref(),
            Some(
                "observing 1:20 / 2:00 · waiting for: agents never evicted (decided when observation ends)"
            )
        );
        s.entry(
            &at(
                120_600,
                Event::Run {
                    phase: RunPhase::ObservationEnded {
                        reason: "planned end".into(),
                        early: false,
                    },
                },
            ),
            now,
        );
        assert!(s.line(now).unwrap().starts_with("observation over"));
        s.end();
        assert_eq!(s.line(now), None);
    }

    #[test]
    fn before_the_start_the_run_is_preparing() {
        let mut s = Status::default();
        assert_eq!(s.line(Instant::now()), None);
        s.begin();
        assert!(s.line(Instant::now()).unwrap().starts_with("preparing"));
    }

    #[test]
    fn a_terminal_gets_a_bar_anything_else_plain_lines() {
        assert_eq!(Display::for_output(true), Display::Bar);
        assert_eq!(Display::for_output(false), Display::Plain);
    }

    #[test]
    fn plain_lines_say_waiting_only_after_fifteen_silent_seconds() {
        let start = Instant::now();
        let mut live = Live::new(Display::Plain, ProgressDrawTarget::hidden(), start);
        let mut out = Vec::new();
        let status = Some("observing 0:14 / 2:00");
        live.show(&mut out, status, start + Duration::from_secs(14))
            .unwrap();
        assert!(out.is_empty());
        live.print(
            &mut out,
            "  +14.0s a line\n",
            start + Duration::from_secs(14),
        )
        .unwrap();
        // 15 s after the last line printed, not after the start.
        live.show(&mut out, status, start + Duration::from_secs(28))
            .unwrap();
        live.show(&mut out, status, start + Duration::from_secs(29))
            .unwrap();
        live.show(&mut out, None, start + Duration::from_secs(40))
            .unwrap();
        live.show(&mut out, status, start + Duration::from_secs(44))
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "  +14.0s a line\n  waiting: observing 0:14 / 2:00\n  waiting: observing 0:14 / 2:00\n"
        );
        assert!(!text.contains('\u{1b}'));
    }

    #[test]
    fn a_bar_draws_the_status_and_prints_lines_above_it() {
        let now = Instant::now();
        let mut live = Live::new(Display::Bar, ProgressDrawTarget::hidden(), now);
        let mut out = Vec::new();
        live.show(&mut out, Some("observing 0:41 / 2:00"), now)
            .unwrap();
        live.print(&mut out, "  +41.0s a line\n", now).unwrap();
        assert_eq!(live.drawn(), "observing 0:41 / 2:00");
        assert_eq!(String::from_utf8(out).unwrap(), "  +41.0s a line\n");
        live.clear();
    }

    #[test]
    fn times_read_as_a_clock_and_as_seconds_left() {
        assert_eq!(clock_text(41_999), "0:41");
        assert_eq!(clock_text(725_000), "12:05");
        assert_eq!(seconds_text(49_001), "50s");
        assert_eq!(seconds_text(125_000), "2m 05s");
        assert_eq!(seconds_text(-5), "0s");
    }
}
