//! `faultline run`: interlocks, confirmation, the run itself, reports, exit code.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{EXIT_ERROR, EXIT_OK, ObserveArg, RunArgs};
use crate::compare::Tolerance;
use crate::experiment::model::Experiment;
use crate::observe::ObserveMode;
use crate::report;
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
    if overwritten_by_reports(path, &args.reports) {
        eprintln!(
            "--baseline {}: this run writes its reports there ({}) and would overwrite the baseline; give --reports another directory",
            path.display(),
            args.reports.display()
        );
        return Err(());
    }
    let tolerance = super::compare::tolerance(&args.tolerance).ok_or(())?;
    let sets = super::compare::load(path).ok_or(())?;
    let mut names = crate::compare::expectation_names(&[&sets]);
    names.extend(
        experiments
            .iter()
            .flat_map(|e| e.expectations.iter().map(|x| x.name.clone())),
    );
    if let Err(e) = tolerance.check_keys(names.iter().map(String::as_str)) {
        eprintln!("{e}");
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
    let Some(mut experiments) = super::load_experiments(&args.paths) else {
        return EXIT_ERROR;
    };
    if !args.tag.is_empty() {
        experiments.retain(|e| e.tags.iter().any(|t| args.tag.contains(t)));
        if experiments.is_empty() {
            eprintln!(
                "no experiment carries any of the tags {}",
                args.tag.join(", ")
            );
            return EXIT_ERROR;
        }
    }
    let Ok(baseline) = baseline(&args, &experiments) else {
        return EXIT_ERROR;
    };
    let Some(mut inventory) = super::load_inventory(&args.inventory, &args.api) else {
        return EXIT_ERROR;
    };
    if args.insecure_ignore_host_keys {
        inventory.set_insecure_ignore_host_keys(true);
    }
    let journal_path = match super::journal_path(args.journal.clone()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_ERROR;
        }
    };
    let settings = RunSettings {
        observe_mode: match args.observe {
            ObserveArg::Watch => ObserveMode::Watch,
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
    if !confirmed(&experiments, &settings, args.yes).await {
        return EXIT_ERROR;
    }

    let cancel = CancellationToken::new();
    if let Err(e) = signals::install(cancel.clone()) {
        eprintln!("cannot install signal handlers, refusing to run without them: {e}");
        return EXIT_ERROR;
    }
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let events = match &args.events {
        Some(path) => match report::events::EventsFile::create(path) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("{}: cannot write the events file: {e}", path.display());
                return EXIT_ERROR;
            }
        },
        None => None,
    };
    let mut worst = EXIT_OK;
    let mut done: Vec<Series> = Vec::new();
    let repeat = args.repeat;
    for exp in &experiments {
        let mut runs = Vec::new();
        for i in 1..=repeat {
            if cancel.is_cancelled() {
                break;
            }
            let events = events.clone();
            let name = exp.name.clone();
            let index = (repeat > 1).then_some(i);
            let live: crate::run::shared_timeline::LiveView = Arc::new(move |entry| {
                println!("  {}", report::terminal::entry_line(entry));
                if let Some(events) = &events {
                    events.write(&name, index, entry);
                }
            });
            match index {
                Some(i) => println!(
                    "== {} (run {i} of {repeat}; {})",
                    exp.name,
                    exp.source.display()
                ),
                None => println!("== {} ({})", exp.name, exp.source.display()),
            }
            let record = run_experiment(exp, &settings, cancel.clone(), Some(live.clone())).await;
            println!("{}", report::terminal::summary(&record, colour));
            runs.push(record);
        }
        let Some(series) = Series::new(runs) else {
            break;
        };
        if series.is_repeated() {
            println!("== {}: {} runs", exp.name, series.runs().len());
            println!("{}", report::series::terminal::summary(&series));
        }
        match report::write_series(&series, &args.reports) {
            Ok(paths) => {
                for p in paths {
                    println!("wrote {}", p.display());
                }
            }
            Err(e) => {
                eprintln!("cannot write reports: {e}");
                worst = worst.max(EXIT_ERROR);
            }
        }
        if let Some(summary) = &args.summary {
            let section = if series.is_repeated() {
                report::series::markdown::render(&series)
            } else {
                report::markdown::render(series.first())
            };
            match report::markdown::append_section(&section, summary) {
                Ok(()) => println!("appended the summary to {}", summary.display()),
                Err(e) => {
                    eprintln!("cannot write the summary: {e}");
                    worst = worst.max(EXIT_ERROR);
                }
            }
        }
        worst = worst.max(series.exit_code());
        done.push(series);
    }
    if let Some(b) = baseline
        && !done.is_empty()
    {
        println!("== compared with the baseline {}", b.label);
        let code = super::compare::compare_and_report(
            &b.sets,
            &done,
            &b.tolerance,
            (&b.label, "this run"),
            Some(&args.reports),
            args.summary.as_deref(),
        );
        worst = worst.max(code);
    }
    worst
}

/// Asks on a terminal; without one, only `--yes` proceeds.
async fn confirmed(experiments: &[Experiment], settings: &RunSettings, yes: bool) -> bool {
    if yes {
        return true;
    }
    if !std::io::stdin().is_terminal() {
        eprintln!(
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
