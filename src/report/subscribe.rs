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

use super::first_lists::Admit;
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
    /// How long it may wait for an event before [`Reporter::tick`] is called (`None`:
    /// forever): a live view redraws its clock while nothing happens.
    fn tick_every(&self) -> Option<Duration> {
        None
    }
    /// No event came for [`Reporter::tick_every`]; an error ends this reporter.
    fn tick(&mut self) -> std::io::Result<()> {
        Ok(())
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
    let every = reporter.tick_every();
    loop {
        let next = match every {
            None => events.recv().map(Some).map_err(|_| ()),
            Some(every) => match events.recv_timeout(every) {
                Ok(event) => Ok(Some(event)),
                Err(RecvTimeoutError::Timeout) => Ok(None),
                Err(RecvTimeoutError::Disconnected) => Err(()),
            },
        };
        let Ok(next) = next else { break };
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| match &next {
            Some(event) => reporter.handle(event),
            None => reporter.tick(),
        }));
        match result {
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

/// The time, as the live view reads it (a fixed clock in tests).
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The live view: a header per run, each timeline entry as a line, the summary when the
/// run ends, and the spread of a repeated series; below the lines, what the run waits for
/// (see [`super::progress`]); after several experiments, their overview.
pub struct Terminal<W: Write + Send + 'static> {
    out: W,
    colour: bool,
    status: super::progress::Status,
    live: super::progress::Live,
    clock: Clock,
    overview: Vec<super::overview::Row>,
    first_lists: super::first_lists::FirstLists,
}

impl<W: Write + Send + 'static> Terminal<W> {
    /// A live view writing plain lines to `out`, coloured when `colour`.
    pub fn new(out: W, colour: bool) -> Self {
        Self::with_clock(
            out,
            colour,
            super::progress::Display::Plain,
            indicatif::ProgressDrawTarget::hidden(),
            Arc::new(Instant::now),
        )
    }

    /// The live view of `faultline run`: a status line redrawn in place when `out` is a
    /// terminal (`is_terminal`), plain lines otherwise.
    pub fn live(out: W, colour: bool, is_terminal: bool) -> Self {
        Self::with_clock(
            out,
            colour,
            super::progress::Display::for_output(is_terminal),
            indicatif::ProgressDrawTarget::stdout(),
            Arc::new(Instant::now),
        )
    }

    /// A live view shown as `display` (a bar drawn to `target`), reading the time from
    /// `clock`.
    pub fn with_clock(
        out: W,
        colour: bool,
        display: super::progress::Display,
        target: indicatif::ProgressDrawTarget,
        clock: Clock,
    ) -> Self {
        let now = clock();
        Terminal {
            out,
            colour,
            status: super::progress::Status::default(),
            live: super::progress::Live::new(display, target, now),
            clock,
            overview: Vec::new(),
            first_lists: Default::default(),
        }
    }

    /// The status line as last drawn (empty when plain lines are shown).
    pub fn drawn(&self) -> String {
        self.live.drawn()
    }

    fn print(&mut self, text: String) -> std::io::Result<()> {
        let now = (self.clock)();
        self.live.print(&mut self.out, &text, now)
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
        let now = (self.clock)();
        match event {
            RunEvent::RunStarted {
                experiment,
                source,
                run: Some(i),
                of,
            } => {
                self.status.begin();
                self.first_lists.begin();
                self.print(format!(
                    "== {experiment} (run {i} of {of}; {})\n",
                    source.display()
                ))?;
            }
            RunEvent::RunStarted {
                experiment, source, ..
            } => {
                self.status.begin();
                self.first_lists.begin();
                self.print(format!("== {experiment} ({})\n", source.display()))?;
            }
            RunEvent::Focus { focus, .. } => self.first_lists.focus(Arc::clone(focus)),
            RunEvent::Entry { entry, .. } => {
                self.status.entry(entry, now);
                match self.first_lists.admit(entry) {
                    Admit::Hide => {}
                    admit => {
                        if let Admit::SummaryFirst(summary) = admit {
                            self.print(format!("  {summary}\n"))?;
                        }
                        let line = super::text::entry_line(entry, self.status.zero_ms());
                        self.print(format!("  {line}\n"))?;
                    }
                }
            }
            RunEvent::Progress { progress, .. } => self.status.progress(progress.clone()),
            RunEvent::RunFinished(record) => {
                self.status.end();
                let summary = super::terminal::summary(record, self.colour);
                self.print(format!("{summary}\n"))?;
            }
            RunEvent::SeriesFinished(finished) => {
                let series = &finished.series;
                self.overview.push(super::overview::Row::of(series));
                if series.is_repeated() {
                    let summary = super::series::terminal::summary(series);
                    self.print(format!(
                        "== {}: {} runs\n{summary}\n",
                        series.name(),
                        series.runs().len()
                    ))?;
                }
            }
        }
        self.tick()
    }
    fn tick_every(&self) -> Option<Duration> {
        Some(super::progress::REDRAW)
    }
    fn tick(&mut self) -> std::io::Result<()> {
        let now = (self.clock)();
        let line = self.status.line(now);
        self.live.show(&mut self.out, line.as_deref(), now)
    }
    /// Takes the status line away; after several experiments, their overview.
    fn finish(&mut self) -> std::io::Result<Vec<String>> {
        self.live.clear();
        if self.overview.len() < 2 {
            return Ok(Vec::new());
        }
        Ok(super::overview::terminal(&self.overview)
            .lines()
            .map(str::to_string)
            .collect())
    }
}

/// `--events FILE`: each timeline entry as one flushed JSON line.
pub struct EventsFile {
    file: super::events_file::EventsFile,
}

impl EventsFile {
    /// Creates (or truncates) the file.
    pub fn create(path: &std::path::Path) -> std::io::Result<Self> {
        Ok(EventsFile {
            file: super::events_file::EventsFile::create(path)?,
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
        if let RunEvent::SeriesFinished(finished) = event {
            let paths = super::write_series(&finished.series, &finished.explanation, &self.dir)
                .map_err(std::io::Error::other)?;
            self.written
                .extend(paths.iter().map(|p| format!("wrote {}", p.display())));
        }
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<Vec<String>> {
        Ok(std::mem::take(&mut self.written))
    }
}

/// `--summary FILE`: a Markdown section per experiment, written when its series ends;
/// after several, their overview on top of this run's part of the file (what came before
/// it, from other runs or CI steps, is kept).
pub struct Summary {
    path: PathBuf,
    /// Where this run's part of the file starts, once written.
    start: Option<u64>,
    sections: Vec<String>,
    overview: Vec<super::overview::Row>,
}

impl Summary {
    /// Writes after what `path` already holds.
    pub fn new(path: PathBuf) -> Self {
        Summary {
            path,
            start: None,
            sections: Vec::new(),
            overview: Vec::new(),
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
        if let RunEvent::SeriesFinished(finished) = event {
            let series = &finished.series;
            let section = if series.is_repeated() {
                super::series::markdown::render(series)
            } else {
                super::markdown::render_explained(series.first(), &finished.explanation)
            };
            self.overview.push(super::overview::Row::of(series));
            // A pipe or a terminal (`--summary /dev/stdout`) cannot be rewritten: each
            // section is appended as it comes, without the overview.
            let regular = std::fs::metadata(&self.path).map_or(true, |m| m.is_file());
            if !regular {
                super::markdown::append_section(&section, &self.path)
                    .map_err(std::io::Error::other)?;
                self.start = Some(0);
                return Ok(());
            }
            self.sections.push(section);
            let mut part = String::new();
            if self.overview.len() > 1 {
                part.push_str(&super::overview::markdown(&self.overview));
                part.push('\n');
            }
            part.push_str(&self.sections.join("\n"));
            let start = super::markdown::write_own_part(&part, &self.path, self.start)
                .map_err(std::io::Error::other)?;
            self.start = Some(start);
        }
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<Vec<String>> {
        Ok(if self.start.is_some() {
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

    /// Output kept for the test to read.
    #[derive(Clone, Default)]
    struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// A clock that moves only when the test says, ms after its start.
    fn test_clock() -> (Clock, Arc<std::sync::atomic::AtomicU64>) {
        let start = Instant::now();
        let ms = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let read = ms.clone();
        let clock: Clock = Arc::new(move || {
            start + Duration::from_millis(read.load(std::sync::atomic::Ordering::SeqCst))
        });
        (clock, ms)
    }

    /// A run announced, started at +0.5s and observing until +120.5s, fed to `view`.
    fn observing<W: Write + Send + 'static>(view: &mut Terminal<W>) {
        use crate::events::Progress;
        use crate::timeline::RunPhase;
        view.handle(&RunEvent::RunStarted {
            experiment: "e".into(),
            source: "e.yaml".into(),
            run: None,
            of: 1,
        })
        .unwrap();
        view.handle(&RunEvent::Entry {
            experiment: "e".into(),
            run: None,
            entry: Entry {
                offset_ms: 0,
                wall: chrono::Utc::now(),
                event: Event::Run {
                    phase: RunPhase::Started { zero_ms: None },
                },
            },
        })
        .unwrap();
        view.handle(&RunEvent::Progress {
            experiment: "e".into(),
            run: None,
            progress: Progress {
                observe_until_ms: Some(120_000),
                open: Vec::new(),
            },
        })
        .unwrap();
    }

    #[test]
    fn plain_output_says_what_the_run_waits_for_after_fifteen_silent_seconds() {
        let (clock, ms) = test_clock();
        let out = Shared::default();
        let mut view = Terminal::with_clock(
            out.clone(),
            false,
            crate::report::progress::Display::Plain,
            indicatif::ProgressDrawTarget::hidden(),
            clock,
        );
        observing(&mut view);
        for at in [5_000, 14_000, 15_000, 16_000, 29_000, 30_000] {
            ms.store(at, std::sync::atomic::Ordering::SeqCst);
            view.tick().unwrap();
        }
        let text = out.text();
        let waiting: Vec<&str> = text.lines().filter(|l| l.contains("waiting")).collect();
        assert_eq!(
            waiting,
            [
                "  waiting: observing 0:15 / 2:00",
                "  waiting: observing 0:30 / 2:00"
            ],
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(view.drawn().is_empty());
    }

    #[test]
    fn on_a_terminal_the_status_line_is_redrawn_and_lines_print_as_before() {
        let (clock, ms) = test_clock();
        let out = Shared::default();
        let mut view = Terminal::with_clock(
            out.clone(),
            false,
            crate::report::progress::Display::Bar,
            indicatif::ProgressDrawTarget::hidden(),
            clock,
        );
        observing(&mut view);
        ms.store(41_000, std::sync::atomic::Ordering::SeqCst);
        view.tick().unwrap();
        assert_eq!(view.drawn(), "observing 0:41 / 2:00");
        ms.store(100_000, std::sync::atomic::Ordering::SeqCst);
        view.tick().unwrap();
        assert_eq!(view.drawn(), "observing 1:40 / 2:00");
        let text = out.text();
        assert!(
            text.starts_with("== e (e.yaml)\n  +0.0s experiment starts"),
            "{text}"
        );
        assert!(!text.contains("waiting"), "{text}");
        assert_eq!(view.finish().unwrap(), Vec::<String>::new());
    }

    #[test]
    fn several_experiments_end_with_their_overview() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/records");
        let mut view = Terminal::new(Shared::default(), false);
        assert!(view.finish().unwrap().is_empty());
        for name in ["node-deleted", "kubelet-stop-past-toleration"] {
            let record = crate::record::RunRecord::load(&dir.join(format!("{name}.json")))
                .expect("a committed record");
            let series = crate::series::Series::single(record);
            view.handle(&RunEvent::SeriesFinished(Arc::new(
                crate::events::FinishedSeries::of(series),
            )))
            .unwrap();
        }
        let lines = view.finish().unwrap();
        assert_eq!(lines[0], "== overview");
        assert!(lines[1].contains("outcome") && lines[1].contains("slowest figure"));
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(lines[4].starts_with("2 experiments:"), "{lines:#?}");
    }
}
