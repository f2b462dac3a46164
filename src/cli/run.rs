//! `faultline run`: interlocks, confirmation, the run itself, reports, exit code.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{EXIT_ERROR, EXIT_OK, ObserveArg, RunArgs};
use crate::compare::Tolerance;
use crate::events::{FinishedSeries, RunEvent};
use crate::experiment::model::Experiment;
use crate::observe::ObserveMode;
use crate::report::subscribe::{self, Reporter, Reporters};
use crate::run::{RunSettings, run_experiment, signals};
use crate::series::Series;

/// What `--baseline` compares with, loaded and checked before anything is run, so a wrong
/// path or tolerance is an error now rather than after an hour of runs.
struct Baseline {
    label: String,
    sets: Vec<Series>,
    tolerance: Tolerance,
}

fn baseline(args: &RunArgs, experiments: &[Experiment]) -> Result<Option<Baseline>, ()> {
    let Some(path) = &args.baseline else {
        return Ok(None);
    };
    if overwritten_by_reports(path, &args.out) {
        fail!(
            "--baseline {}: this run writes its reports there ({}) and would overwrite the baseline; give --out another directory",
            path.display(),
            args.out.display()
        );
        return Err(());
    }
    let tolerance =
        super::compare::tolerance_with_floor(&args.tolerance, &args.noise_floor).ok_or(())?;
    let sets = super::compare::load(path).ok_or(())?;
    let mut names = crate::compare::expectation_names(&[&sets]);
    names.extend(
        experiments
            .iter()
            .flat_map(|e| e.expectations.iter().map(|x| x.name.clone())),
    );
    if let Err(e) = tolerance.check_keys(names.iter().map(String::as_str)) {
        fail!("{e}");
        return Err(());
    }
    Ok(Some(Baseline {
        label: path.display().to_string(),
        sets,
        tolerance,
    }))
}

/// Whether the baseline (a directory, or a file) is, or is in, the reports directory.
fn overwritten_by_reports(baseline: &std::path::Path, reports: &std::path::Path) -> bool {
    let (Ok(baseline), Ok(reports)) = (baseline.canonicalize(), reports.canonicalize()) else {
        return false;
    };
    baseline == reports || baseline.parent() == Some(reports.as_path())
}

/// Runs every experiment named, one after another (each `--repeat` times); the exit code
/// is the worst of them, and of the `--baseline` comparison.
pub(super) async fn run(args: RunArgs) -> i32 {
    run_with(args, None).await
}

/// [`run`], cancelled by `cancel` when given (the caller listens for signals already:
/// `faultline job`), else by this process's signals, listened for from the confirmation on.
pub(super) async fn run_with(args: RunArgs, cancel: Option<CancellationToken>) -> i32 {
    let Some(mut experiments) = super::load_experiments_in(&args.paths, &args.namespace) else {
        return EXIT_ERROR;
    };
    if !args.tag.is_empty() {
        experiments.retain(|e| e.tags.iter().any(|t| args.tag.contains(t)));
        if experiments.is_empty() {
            fail!(
                "no experiment carries any of the tags {}",
                args.tag.join(", ")
            );
            return EXIT_ERROR;
        }
    }
    let Ok(baseline) = baseline(&args, &experiments) else {
        return EXIT_ERROR;
    };
    let Some(inventory_path) = args.inventory.as_deref() else {
        // Only `--dry-run` goes without an inventory (clap asks for it otherwise): the
        // offline plan, as `faultline plan` without `-i`.
        return super::plan::print_without_inventory(&experiments);
    };
    let Some((mut inventory, access)) = super::load_inventory_and_access(inventory_path, &args.api)
    else {
        return EXIT_ERROR;
    };
    if args.insecure_ignore_host_keys {
        inventory.set_insecure_ignore_host_keys(true);
    }
    let journal_path = match super::journal_path(args.journal.clone()) {
        Ok(p) => p,
        Err(e) => {
            fail!("{e}");
            return EXIT_ERROR;
        }
    };
    let settings = RunSettings {
        observe_mode: match args.observe {
            ObserveArg::Watch => ObserveMode::Watch,
            ObserveArg::WatchPaged => ObserveMode::WatchPaged,
            ObserveArg::WatchStreamed => ObserveMode::WatchStreamed,
            ObserveArg::Poll => ObserveMode::Poll {
                interval: args.interval,
            },
        },
        allowed_contexts: args.allow_contexts.clone(),
        ignore_journal: args.ignore_journal,
        keep_going: args.keep_going,
        restore_margin: args.restore_margin,
        ..RunSettings::new(inventory, journal_path)
    };

    if args.dry_run {
        return super::plan::print_plans(&experiments, &settings).await;
    }
    // Experiments the cluster lacks a capability for are skipped without a word to the
    // cluster; when that is all of them, nothing is asked or confirmed.
    let capabilities = settings.inventory.cluster().capabilities();
    let any_runs = experiments
        .iter()
        .any(|e| crate::capability::missing(&e.requires, &capabilities).is_none());
    // A cluster that cannot be reached is a mistake in the configuration: one line, before
    // the confirmation, the reporters and any node.
    if any_runs {
        if let Err(e) =
            super::preflight::check_cluster(&settings.inventory, &access, &args.api).await
        {
            fail!("{e}");
            return EXIT_ERROR;
        }
        if !confirmed(&experiments, &settings, args.yes).await {
            return EXIT_ERROR;
        }
    }

    let cancel = match cancel {
        Some(cancel) => cancel,
        None => {
            let cancel = CancellationToken::new();
            if let Err(e) = signals::install(cancel.clone()) {
                fail!("cannot install signal handlers, refusing to run without them: {e}");
                return EXIT_ERROR;
            }
            cancel
        }
    };
    let Some(reporters) = reporters(&args) else {
        return EXIT_ERROR;
    };
    // From here on nothing writes to stdout but the terminal reporter, on its own thread:
    // a pipe that closes or a terminal that hangs up ends that reporter, never the run.
    let sink = reporters.sink();
    let mut worst = EXIT_OK;
    // Kept only to compare with a baseline; otherwise the reporters hold the last copy.
    let mut done: Vec<Arc<FinishedSeries>> = Vec::new();
    let repeat = args.repeat;
    for exp in &experiments {
        let mut runs = Vec::new();
        for i in 1..=repeat {
            if cancel.is_cancelled() {
                break;
            }
            let index = (repeat > 1).then_some(i);
            sink.send(RunEvent::RunStarted {
                experiment: exp.name.clone(),
                source: exp.source.clone(),
                run: index,
                of: repeat,
            });
            let events = sink.for_run(&exp.name, index);
            let record = run_experiment(exp, &settings, cancel.clone(), events).await;
            // A cluster that lacks what the experiment needs lacks it the next time too.
            let skipped = matches!(record.outcome, crate::record::RunOutcome::Skipped { .. });
            runs.push(record);
            if skipped {
                break;
            }
        }
        let Some(series) = Series::shared(runs) else {
            break;
        };
        worst = worst.max(series.exit_code());
        let series = Arc::new(FinishedSeries::of(series));
        sink.send(RunEvent::SeriesFinished(Arc::clone(&series)));
        if baseline.is_some() {
            done.push(series);
        }
    }
    drop(sink);
    let mut ended = reporters.finish(REPORTERS_WAIT);
    // The terminal's own last lines (the overview of several experiments) come last.
    ended.sort_by_key(|e| e.name == "terminal");
    for ended in ended {
        match ended.result {
            Ok(lines) => {
                for line in lines {
                    say(&line);
                }
            }
            Err(_) if ended.required => worst = worst.max(EXIT_ERROR),
            Err(_) => {}
        }
    }
    if let Some(b) = baseline
        && !done.is_empty()
    {
        // The reporters are done: the series are ours alone again (else copied).
        let done: Vec<Series> = done
            .into_iter()
            .map(|s| Arc::try_unwrap(s).map_or_else(|shared| shared.series.clone(), |s| s.series))
            .collect();
        say(&format!("== compared with the baseline {}", b.label));
        let code = super::compare::compare_and_report(
            &b.sets,
            &done,
            &b.tolerance,
            (&b.label, "this run"),
            Some(&args.out),
            args.summary.as_deref(),
            false,
        );
        worst = worst.max(code);
    }
    worst
}

/// How long, after the last run, the reporters get to finish what is queued (a terminal
/// nobody reads any more is left behind after that).
const REPORTERS_WAIT: Duration = Duration::from_secs(30);

/// The reporters this run's arguments ask for, started; `None` (said why) when one cannot
/// be created.
fn reporters(args: &RunArgs) -> Option<Reporters> {
    let is_terminal = std::io::stdout().is_terminal();
    let colour = crate::report::colour::stdout_takes_colour();
    let mut list: Vec<Box<dyn Reporter>> = vec![Box::new(subscribe::Terminal::live(
        std::io::stdout(),
        colour,
        is_terminal,
    ))];
    if let Some(path) = &args.events {
        match subscribe::EventsFile::create(path) {
            Ok(f) => list.push(Box::new(f)),
            Err(e) => {
                fail!("{}: cannot write the events file: {e}", path.display());
                return None;
            }
        }
    }
    list.push(Box::new(subscribe::Files::new(args.out.clone())));
    if let Some(summary) = &args.summary {
        list.push(Box::new(subscribe::Summary::new(summary.clone())));
    }
    Some(Reporters::start(list))
}

/// One line to stdout after the runs, dropped if stdout is gone.
fn say(line: &str) {
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// Asks on a terminal; without one, only `--yes` proceeds.
async fn confirmed(experiments: &[Experiment], settings: &RunSettings, yes: bool) -> bool {
    if yes {
        return true;
    }
    if !std::io::stdin().is_terminal() {
        fail!(
            "refusing to inject faults without confirmation: stdin is not a terminal; pass --yes (as CI does)"
        );
        return false;
    }
    if super::plan::print_plans(experiments, settings).await != EXIT_OK {
        return false;
    }
    print!("Inject these faults? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim(), "y" | "Y" | "yes")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use crate::report::subscribe::{Reporters, Terminal};
    use crate::run::worlds::scripted::{Harness, LoopEnd, STOP_START, Scripted, index_of};
    use crate::timeline::Event;

    #[tokio::test(start_paused = true)]
    async fn output_that_fails_at_the_first_or_hundredth_line_does_not_stop_the_undo() {
        /// Stdout whose reader left after `lines` lines.
        struct ClosedAfter(usize);
        impl std::io::Write for ClosedAfter {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.0 == 0 {
                    return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
                }
                self.0 = self
                    .0
                    .saturating_sub(buf.iter().filter(|b| **b == b'\n').count());
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        for lines in [0, 99] {
            let h = Harness::new(STOP_START);
            let reporters =
                Reporters::start(vec![Box::new(Terminal::new(ClosedAfter(lines), false))]);
            let events = reporters.sink().for_run("scripted", None);
            let mut world = Scripted::default();
            // Enough entries for a hundredth line while the kubelet is away.
            world.during.insert(
                "stop".into(),
                (0..120)
                    .map(|i| Event::Note {
                        message: format!("line {i}"),
                    })
                    .collect(),
            );
            let out = h.run(&mut world, CancellationToken::new(), events).await;
            let ended = reporters.finish(Duration::from_secs(10));
            assert!(
                ended[0].result.is_err(),
                "{lines}: the terminal reporter saw its pipe close"
            );
            let calls = world.calls();
            assert_eq!(
                out.end,
                Some(LoopEnd::Observed { all_decided: false }),
                "{lines}: {:?}",
                out.errors
            );
            assert!(
                index_of(&calls, "act start on a") < index_of(&calls, "disarm a"),
                "{lines}"
            );
            assert_eq!(
                out.end,
                Some(LoopEnd::Observed { all_decided: false }),
                "{lines}"
            );
            assert_eq!(h.journaled(), 0, "{lines}");
        }
    }
}
