//! Reporters as subscribers of a run's events (`crate::events`).
//!
//! Each reporter runs on a thread of its own, fed by its own queue, so that none can stop,
//! slow or crash the run, nor another reporter: a write that fails (`faultline run | head`,
//! a terminal that hung up, a full disk) ends that reporter alone, which says so on stderr
//! if stderr still works; a reporter that panics is caught the same way. The run goes on,
//! undoes its faults and exits with its own code. A required reporter (the report files,
//! the Markdown summary) that failed makes the command's exit code an error; the terminal
//! view and the events file are views, and do not.

use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use crate::events::{EventSink, RunEvent};

/// Something that shows or keeps what a run does.
pub trait Reporter: Send + 'static {
    /// Its name, for the line that says it stopped.
    fn name(&self) -> &'static str;
    /// Whether its failure makes the command fail (files a CI step relies on), or is only
    /// said (a view).
    fn required(&self) -> bool;
    /// Handles one event; an error ends this reporter.
    fn handle(&mut self, event: &RunEvent) -> std::io::Result<()>;
    /// After the last event: lines to show the person (files written), or an error.
    fn finish(&mut self) -> std::io::Result<Vec<String>> {
        Ok(Vec::new())
    }
}

/// How one reporter ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The reporter.
    pub name: &'static str,
    /// Whether its failure fails the command.
    pub required: bool,
    /// What it has to say at the end, or why it stopped.
    pub result: Result<Vec<String>, String>,
}

/// The running reporters.
pub struct Reporters {
    sink: EventSink,
    ended: Receiver<Ended>,
    count: usize,
}

impl Reporters {
    /// Starts each reporter on its own thread.
    pub fn start(reporters: Vec<Box<dyn Reporter>>) -> Reporters {
        let (ended_tx, ended) = channel();
        let mut queues = Vec::with_capacity(reporters.len());
        let count = reporters.len();
        for mut reporter in reporters {
            let (tx, rx) = channel::<Arc<RunEvent>>();
            queues.push(tx);
            let ended_tx = ended_tx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("report-{}", reporter.name()))
                .spawn(move || {
                    let ended = serve(&mut *reporter, &rx);
                    let _ = ended_tx.send(ended);
                });
            if let Err(e) = spawned {
                let _ = writeln!(
                    std::io::stderr(),
                    "faultline: could not start a reporter thread: {e}"
                );
            }
        }
        Reporters {
            sink: EventSink::new(queues),
            ended,
            count,
        }
    }

    /// Where the run sends its events.
    pub fn sink(&self) -> EventSink {
        self.sink.clone()
    }

    /// No more events: waits up to `wait` for every reporter to finish its queue and
    /// returns how each ended. A reporter still blocked then (a terminal nobody reads) is
    /// left behind: the process exits without it.
    pub fn finish(self, wait: Duration) -> Vec<Ended> {
        let Reporters { sink, ended, count } = self;
        drop(sink);
        let deadline = Instant::now() + wait;
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            match ended.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(e) => out.push(e),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        out
    }
}

/// One reporter's thread: every event until the queue closes or the reporter fails.
fn serve(reporter: &mut dyn Reporter, events: &Receiver<Arc<RunEvent>>) -> Ended {
    let name = reporter.name();
    let required = reporter.required();
    let fail = |why: String| {
        let _ = writeln!(
            std::io::stderr(),
            "faultline: the {name} reporter stopped ({why}); the run goes on"
        );
        Ended {
            name,
            required,
            result: Err(why),
        }
    };
    for event in events {
        match std::panic::catch_unwind(AssertUnwindSafe(|| reporter.handle(&event))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return fail(e.to_string()),
            Err(_) => return fail("it panicked".into()),
        }
    }
    match std::panic::catch_unwind(AssertUnwindSafe(|| reporter.finish())) {
        Ok(Ok(lines)) => Ended {
            name,
            required,
            result: Ok(lines),
        },
        Ok(Err(e)) => fail(e.to_string()),
        Err(_) => fail("it panicked".into()),
    }
}

/// The live view: a header per run, each timeline entry as a line, the summary when the
/// run ends, and the spread of a repeated series.
pub struct Terminal<W: Write + Send + 'static> {
    out: W,
    colour: bool,
}

impl<W: Write + Send + 'static> Terminal<W> {
    /// A live view writing to `out`, coloured when `colour`.
    pub fn new(out: W, colour: bool) -> Self {
        Terminal { out, colour }
    }
}

impl<W: Write + Send + 'static> Reporter for Terminal<W> {
    fn name(&self) -> &'static str {
        "terminal"
    }
    fn required(&self) -> bool {
        false
    }
    fn handle(&mut self, event: &RunEvent) -> std::io::Result<()> {
        match event {
            RunEvent::RunStarted {
                experiment,
                source,
                run: Some(i),
                of,
            } => writeln!(
                self.out,
                "== {experiment} (run {i} of {of}; {})",
                source.display()
            )?,
            RunEvent::RunStarted {
                experiment, source, ..
            } => writeln!(self.out, "== {experiment} ({})", source.display())?,
            RunEvent::Entry { entry, .. } => {
                writeln!(self.out, "  {}", super::terminal::entry_line(entry))?;
            }
            RunEvent::RunFinished(record) => {
                writeln!(
                    self.out,
                    "{}",
                    super::terminal::summary(record, self.colour)
                )?;
            }
            RunEvent::SeriesFinished(series) if series.is_repeated() => {
                writeln!(
                    self.out,
                    "== {}: {} runs",
                    series.name(),
                    series.runs().len()
                )?;
                writeln!(self.out, "{}", super::series::terminal::summary(series))?;
            }
            RunEvent::SeriesFinished(_) => {}
        }
        self.out.flush()
    }
}

/// `--events FILE`: each timeline entry as one flushed JSON line.
pub struct EventsFile {
    file: super::events::EventsFile,
}

impl EventsFile {
    /// Creates (or truncates) the file.
    pub fn create(path: &std::path::Path) -> std::io::Result<Self> {
        Ok(EventsFile {
            file: super::events::EventsFile::create(path)?,
        })
    }
}

impl Reporter for EventsFile {
    fn name(&self) -> &'static str {
        "events file"
    }
    fn required(&self) -> bool {
        false
    }
    fn handle(&mut self, event: &RunEvent) -> std::io::Result<()> {
        if let RunEvent::Entry {
            experiment,
            run,
            entry,
        } = event
        {
            self.file.write(experiment, *run, entry)?;
        }
        Ok(())
    }
}

/// The report files of each experiment (JUnit, JSON, HTML), written when its series ends.
pub struct Files {
    dir: PathBuf,
    written: Vec<String>,
}

impl Files {
    /// Report files under `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Files {
            dir,
            written: Vec::new(),
        }
    }
}

impl Reporter for Files {
    fn name(&self) -> &'static str {
        "report files"
    }
    fn required(&self) -> bool {
        true
    }
    fn handle(&mut self, event: &RunEvent) -> std::io::Result<()> {
        if let RunEvent::SeriesFinished(series) = event {
            let paths = super::write_series(series, &self.dir).map_err(std::io::Error::other)?;
            self.written
                .extend(paths.iter().map(|p| format!("wrote {}", p.display())));
        }
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<Vec<String>> {
        Ok(std::mem::take(&mut self.written))
    }
}

/// `--summary FILE`: a Markdown section per experiment, appended when its series ends.
pub struct Summary {
    path: PathBuf,
    appended: bool,
}

impl Summary {
    /// Appends to `path`.
    pub fn new(path: PathBuf) -> Self {
        Summary {
            path,
            appended: false,
        }
    }
}

impl Reporter for Summary {
    fn name(&self) -> &'static str {
        "summary"
    }
    fn required(&self) -> bool {
        true
    }
    fn handle(&mut self, event: &RunEvent) -> std::io::Result<()> {
        if let RunEvent::SeriesFinished(series) = event {
            let section = if series.is_repeated() {
                super::series::markdown::render(series)
            } else {
                super::markdown::render(series.first())
            };
            super::markdown::append_section(&section, &self.path).map_err(std::io::Error::other)?;
            self.appended = true;
        }
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<Vec<String>> {
        Ok(if self.appended {
            vec![format!("appended the summary to {}", self.path.display())]
        } else {
            Vec::new()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{Entry, Event};

    /// Output that fails from its `fail_at`-th line on, as a pipe whose reader left.
    pub(crate) struct ClosingPipe {
        lines: usize,
        fail_at: usize,
    }

    impl Write for ClosingPipe {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.lines + 1 >= self.fail_at {
                return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
            }
            self.lines += buf.iter().filter(|b| **b == b'\n').count();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Counts what it saw, and panics at the event named.
    struct Counter {
        seen: Arc<std::sync::Mutex<usize>>,
        panic_at: Option<usize>,
    }

    impl Reporter for Counter {
        fn name(&self) -> &'static str {
            "counter"
        }
        fn required(&self) -> bool {
            true
        }
        fn handle(&mut self, _: &RunEvent) -> std::io::Result<()> {
            let seen = {
                let mut seen = self.seen.lock().unwrap();
                *seen += 1;
                *seen
            };
            if Some(seen) == self.panic_at {
                panic!("reporter bug");
            }
            Ok(())
        }
    }

    fn note(i: usize) -> RunEvent {
        RunEvent::Entry {
            experiment: "e".into(),
            run: None,
            entry: Entry {
                offset_ms: i as i64,
                wall: chrono::Utc::now(),
                event: Event::Note {
                    message: format!("line {i}"),
                },
            },
        }
    }

    #[test]
    fn a_terminal_whose_pipe_closes_stops_alone_and_the_others_see_everything() {
        for fail_at in [1, 100] {
            let seen = Arc::new(std::sync::Mutex::new(0));
            let reporters = Reporters::start(vec![
                Box::new(Terminal::new(ClosingPipe { lines: 0, fail_at }, false)),
                Box::new(Counter {
                    seen: seen.clone(),
                    panic_at: None,
                }),
            ]);
            let sink = reporters.sink();
            for i in 0..300 {
                sink.send(note(i));
            }
            drop(sink);
            let ended = reporters.finish(Duration::from_secs(10));
            assert_eq!(ended.len(), 2, "fail_at {fail_at}");
            let terminal = ended.iter().find(|e| e.name == "terminal").unwrap();
            assert!(
                terminal.result.as_ref().is_err_and(|e| e.contains("pipe")),
                "fail_at {fail_at}: {terminal:?}"
            );
            assert_eq!(*seen.lock().unwrap(), 300, "fail_at {fail_at}");
        }
    }

    #[test]
    fn a_reporter_that_panics_is_ended_not_the_process() {
        let seen = Arc::new(std::sync::Mutex::new(0));
        let reporters = Reporters::start(vec![Box::new(Counter {
            seen: seen.clone(),
            panic_at: Some(3),
        })]);
        let sink = reporters.sink();
        for i in 0..10 {
            sink.send(note(i));
        }
        drop(sink);
        let ended = reporters.finish(Duration::from_secs(10));
        assert_eq!(ended[0].result, Err("it panicked".to_string()));
        assert!(ended[0].required);
        assert_eq!(*seen.lock().unwrap(), 3);
    }

    #[test]
    fn a_reporter_blocked_forever_does_not_hold_the_end() {
        struct Stuck;
        impl Reporter for Stuck {
            fn name(&self) -> &'static str {
                "stuck"
            }
            fn required(&self) -> bool {
                false
            }
            fn handle(&mut self, _: &RunEvent) -> std::io::Result<()> {
                std::thread::sleep(Duration::from_secs(3600));
                Ok(())
            }
        }
        let reporters = Reporters::start(vec![Box::new(Stuck)]);
        reporters.sink().send(note(1));
        let started = Instant::now();
        let ended = reporters.finish(Duration::from_millis(200));
        assert!(ended.is_empty());
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
