//! `--events FILE`: the run's timeline as JSON Lines, one entry per line, written and
//! flushed as each entry lands, so other tools can follow a run while it goes
//! (`tail -f`). The schema is in `docs/events.md`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::timeline::Entry;

/// One line of an events file: a timeline entry and the experiment whose run it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    /// The experiment's name.
    pub experiment: String,
    /// Which run of the experiment (1 is the first) under `run --repeat N` with N > 1;
    /// absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// The entry: `offset_ms`, `wall` and `event` (tagged by `type`).
    #[serde(flatten)]
    pub entry: Entry,
}

/// An events file being written; clones share it.
#[derive(Clone)]
pub struct EventsFile {
    out: Arc<Mutex<BufWriter<File>>>,
}

impl EventsFile {
    /// Creates (or truncates) the file.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        Ok(EventsFile {
            out: Arc::new(Mutex::new(BufWriter::new(File::create(path)?))),
        })
    }

    /// Writes one entry of `experiment`'s run (`run`: which one, when repeated) and flushes
    /// it. A write that fails ends the reporter writing it (`report::subscribe`); the run
    /// goes on: the file is a view, not the record.
    pub fn write(&self, experiment: &str, run: Option<u32>, entry: &Entry) -> std::io::Result<()> {
        let line = EventLine {
            experiment: experiment.to_string(),
            run,
            entry: entry.clone(),
        };
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        serde_json::to_writer(&mut *out, &line)
            .map_err(std::io::Error::other)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{Event, RunPhase};

    #[test]
    fn each_entry_is_one_flushed_json_line_that_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let file = EventsFile::create(&path).unwrap();
        let entry = |offset_ms, event| Entry {
            offset_ms,
            wall: chrono::Utc::now(),
            event,
        };
        let started = entry(
            10,
            Event::Run {
                phase: RunPhase::Started { zero_ms: None },
            },
        );
        file.write("reboot", None, &started).unwrap();
        // Flushed: readable before the writer is dropped.
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1);
        let verdict = entry(
            20,
            Event::Verdict {
                name: "node unknown".into(),
                outcome: crate::judge::Outcome::Passed,
                message: "at +41.2s".into(),
            },
        );
        file.write("reboot", None, &verdict).unwrap();
        let lines: Vec<EventLine> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0].entry, started);
        assert_eq!(lines[1].entry, verdict);
        assert!(lines.iter().all(|l| l.experiment == "reboot"));
        let raw: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .nth(1)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(raw["event"]["type"], "verdict");
        assert_eq!(raw["offset_ms"], 20);
        let ended = entry(
            30,
            Event::Run {
                phase: RunPhase::Ended {
                    outcome: "passed".into(),
                    exit_code: 0,
                },
            },
        );
        file.write("reboot", None, &ended).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let last = text.lines().last().unwrap();
        let raw: serde_json::Value = serde_json::from_str(last).unwrap();
        assert_eq!(raw["event"]["phase"], "ended", "{last}");
        assert_eq!(raw["event"]["exit_code"], 0, "{last}");
        let back: EventLine = serde_json::from_str(last).unwrap();
        assert_eq!(back.entry, ended);
        assert!(
            raw.get("run").is_none(),
            "no run number unless repeated: {last}"
        );
        file.write("reboot", Some(2), &ended).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let last = text.lines().last().unwrap();
        let raw: serde_json::Value = serde_json::from_str(last).unwrap();
        assert_eq!(raw["run"], 2, "{last}");
        let back: EventLine = serde_json::from_str(last).unwrap();
        assert_eq!(back.run, Some(2));
    }
}
