//! `faultline job`: the whole life of the Helm chart's Job (and CronJob) pod, as its PID 1.
//!
//! The pod used to run a shell that called `faultline restore`, chose a baseline and then
//! started `faultline run`, handing signals on. A shell loses signals in the gaps: a
//! SIGTERM while `restore` ran was handed to `restore` (which ignores its first signal on
//! purpose, being the undo), and the shell then started the run anyway, which Kubernetes
//! SIGKILLed at the grace; one between `&` and `child=$!`, or while the baseline was
//! chosen, went nowhere. Here one process listens for signals from its first moment to
//! its last: a signal during the restore lets the restore finish and runs nothing after
//! it; one before the run starts runs nothing; one during the run cuts it short and
//! undoes, as any run's.
//!
//! Before anything, what the Job runs is checked against the release's pins
//! ([`pins`]): a ConfigMap changed since `helm install`/`upgrade` runs nothing.

pub(crate) mod pins;

use std::path::{Path, PathBuf};

use clap::{Args, Parser, ValueEnum};
use tokio_util::sync::CancellationToken;

use super::{Cli, Command, EXIT_ERROR, EXIT_OK};

/// What the Job's pod does (`job.command` in the chart's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JobCommand {
    /// Restore what an earlier run left, then run the experiments.
    Run,
    /// Undo what the journal on the reports volume holds.
    Restore,
    /// Check the cluster, the nodes and the permissions.
    Doctor,
    /// Print what a run would do.
    Plan,
    /// Check the experiments.
    Validate,
}

/// `faultline job`'s arguments: where the chart mounts things, and what it pinned.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// What to do.
    #[arg(value_enum)]
    pub command: JobCommand,
    /// Where the chart mounts the experiments, their manifests and the inventory.
    #[arg(long, value_name = "DIR", default_value = "/etc/faultline")]
    pub config: PathBuf,
    /// The reports volume: each run's reports in a directory of its own, the journal.
    #[arg(long, value_name = "DIR", default_value = "/reports")]
    pub reports: PathBuf,
    /// The name of this run's reports directory, after its UTC time (the pod's name).
    #[arg(long, env = "POD_NAME", default_value = "faultline")]
    pub name: String,
    /// The digests the release pinned (`PATH sha256:HEX` per line, from the chart):
    /// nothing runs when a mounted file differs. Unset: nothing is checked (said so).
    #[arg(long, env = "FAULTLINE_PINNED", hide_env_values = true)]
    pub pinned: Option<String>,
    /// Compare the run with the previous one kept on the reports volume (`--baseline`).
    #[arg(long, env = "FAULTLINE_COMPARE", default_value_t = false, action = clap::ArgAction::Set)]
    pub compare_with_previous: bool,
    /// Arguments of that comparison (e.g. `--tolerance 10%`), space-separated.
    #[arg(long, env = "FAULTLINE_COMPARE_ARGS", default_value = "")]
    pub compare_args: String,
    /// The reports volume is an emptyDir (the chart's `reports.persistence.enabled:
    /// false`): the journal dies with the pod, which is said before a run.
    #[arg(long, env = "FAULTLINE_REPORTS_EPHEMERAL", default_value_t = false, action = clap::ArgAction::Set)]
    pub ephemeral_reports: bool,
    /// More arguments to the command (the chart's `job.extraArgs`).
    #[arg(last = true)]
    pub args: Vec<String>,
}

/// The mounts under `--config`, as the chart names them.
const DIRS: [&str; 3] = ["experiments", "manifests", "inventory"];

impl JobArgs {
    fn inventory(&self) -> PathBuf {
        self.config.join("inventory/inventory.yaml")
    }

    fn experiments(&self) -> PathBuf {
        self.config.join("experiments")
    }

    fn journal(&self) -> PathBuf {
        self.reports.join("journal.json")
    }
}

/// A line of the Job's log, as the shell wrote them (`=== …`).
fn log(line: &str) {
    say!("=== {line}");
}

/// Runs the Job's command; returns the pod's exit code.
pub(super) async fn job(args: JobArgs) -> i32 {
    // First of all: from here to the exit, no signal goes unheard.
    let cancel = CancellationToken::new();
    if let Err(e) = crate::run::signals::install(cancel.clone()) {
        fail!("cannot install signal handlers, refusing to run without them: {e}");
        return EXIT_ERROR;
    }
    match &args.pinned {
        Some(text) => {
            let verified =
                pins::Pins::parse(text).and_then(|p| p.verify(&args.config, &DIRS).map(|()| p));
            match verified {
                Ok(p) => log(&format!(
                    "{} file(s) under {} are the release's (pinned digests)",
                    p.len(),
                    args.config.display()
                )),
                Err(e) => {
                    fail!("{e}");
                    return EXIT_ERROR;
                }
            }
        }
        None => say_err!(
            "warning: no pins (FAULTLINE_PINNED): what {} holds is run unchecked",
            args.config.display()
        ),
    }
    let code = match args.command {
        JobCommand::Run => run(&args, &cancel).await,
        JobCommand::Restore => restore(&args, &cancel).await,
        JobCommand::Doctor => {
            let (inv, exps) = (args.inventory(), args.experiments());
            inner(&["doctor", "-i", path(&inv), path(&exps)], &args, &cancel).await
        }
        JobCommand::Plan => {
            let (inv, exps) = (args.inventory(), args.experiments());
            inner(&["plan", "-i", path(&inv), path(&exps)], &args, &cancel).await
        }
        JobCommand::Validate => {
            let exps = args.experiments();
            inner(&["validate", path(&exps)], &args, &cancel).await
        }
    };
    log(&format!(
        "faultline {} exited {code}",
        args.command
            .to_possible_value()
            .map_or("job".into(), |v| v.get_name().to_string())
    ));
    code
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

/// Runs `faultline ARGV… -- EXTRA…` in this process, with `cancel` for a run.
async fn inner(argv: &[&str], args: &JobArgs, cancel: &CancellationToken) -> i32 {
    inner_with(argv, &args.args, cancel).await
}

/// [`inner`] with the extra arguments given.
async fn inner_with(argv: &[&str], extra: &[String], cancel: &CancellationToken) -> i32 {
    let words = std::iter::once("faultline")
        .chain(argv.iter().copied())
        .chain(extra.iter().map(String::as_str));
    let cli = match Cli::try_parse_from(words) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return EXIT_ERROR;
        }
    };
    match cli.command {
        Command::Run(run) => super::run::run_with(*run, Some(cancel.clone())).await,
        other => Box::pin(super::command(Cli { command: other })).await,
    }
}

/// `job restore`: undoes what the journal on the reports volume holds.
async fn restore(args: &JobArgs, cancel: &CancellationToken) -> i32 {
    restore_with(args, &args.args, cancel).await
}

/// `faultline restore` of the reports volume's journal, the pinned experiments given for
/// the `run` undos it may hold, with `extra` arguments.
async fn restore_with(args: &JobArgs, extra: &[String], cancel: &CancellationToken) -> i32 {
    let (inv, journal, exps) = (args.inventory(), args.journal(), args.experiments());
    let argv = [
        "restore",
        "-i",
        path(&inv),
        "--journal",
        path(&journal),
        "--experiments",
        path(&exps),
    ];
    inner_with(&argv, extra, cancel).await
}

/// Whether the journal at `path` holds a fault of any cluster.
fn holds_faults(path: &Path) -> bool {
    crate::journal::Journal::open(path).is_ok_and(|j| j.holds_any())
}

/// `job run`: restores what an earlier run left (or runs nothing), chooses the previous
/// run as the baseline, runs, and prints the summary and JUnit to the log.
async fn run(args: &JobArgs, cancel: &CancellationToken) -> i32 {
    if args.ephemeral_reports {
        say_err!(
            "warning: the reports volume is an emptyDir (reports.persistence.enabled=false): \
             the fault journal dies with this pod, so a run killed here (SIGKILL, a node lost \
             under the pod) leaves nothing for the next Job to restore; node-side faults still \
             end by their timers, and API-side ones (cordon, drain, taint) are kept on the \
             cluster lock, which the next run or `faultline restore` against the cluster \
             undoes"
        );
    }
    // A run killed before it could undo (SIGKILL, a node lost under the pod) left its
    // faults in the journal on the volume: they are restored first, or nothing runs.
    if holds_faults(&args.journal()) {
        log(&format!(
            "the journal {} holds faults an earlier run left: faultline restore first",
            args.journal().display()
        ));
        let code = restore_with(args, &[], cancel).await;
        log(&format!("faultline restore exited {code}"));
        if code != EXIT_OK {
            log("not running: the faults left behind are not all restored");
            return EXIT_ERROR;
        }
    }
    if stopped(cancel) {
        return EXIT_ERROR;
    }
    let out = args.reports.join(format!(
        "{}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%SZ"),
        args.name
    ));
    if let Err(e) = std::fs::create_dir_all(&out) {
        fail!(
            "{}: cannot create the reports directory: {e}",
            out.display()
        );
        return EXIT_ERROR;
    }
    // The previous run's reports on the volume are this run's baseline.
    let baseline = args
        .compare_with_previous
        .then(|| previous_run(&args.reports, &out))
        .flatten();
    if args.compare_with_previous {
        match &baseline {
            Some(b) => log(&format!(
                "comparing with the previous run in {}",
                b.display()
            )),
            None => log("no earlier run on the reports volume: nothing to compare with yet"),
        }
    }
    if stopped(cancel) {
        let _ = std::fs::remove_dir(&out);
        return EXIT_ERROR;
    }
    let (inv, exps, journal) = (args.inventory(), args.experiments(), args.journal());
    let summary = out.join("summary.md");
    let mut argv: Vec<String> = [
        "run",
        path(&exps),
        "-i",
        path(&inv),
        "--yes",
        "--out",
        path(&out),
        "--summary",
        path(&summary),
        "--journal",
        path(&journal),
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    if let Some(b) = &baseline {
        argv.extend(["--baseline".to_string(), b.display().to_string()]);
        argv.extend(args.compare_args.split_whitespace().map(str::to_string));
    }
    argv.extend(args.args.iter().cloned());
    let words: Vec<&str> = argv.iter().map(String::as_str).collect();
    log(&format!("starting: faultline {}", words.join(" ")));
    let code = inner_with(&words, &[], cancel).await;
    print_reports(&out, &summary);
    code
}

/// Whether a signal came: then it is said that nothing runs.
fn stopped(cancel: &CancellationToken) -> bool {
    let stopped = cancel.is_cancelled();
    if stopped {
        log("stopped by a signal before the run started: nothing was run");
    }
    stopped
}

/// The newest directory of `reports` other than `this` that holds a run record.
fn previous_run(reports: &Path, this: &Path) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(reports)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p != this)
        .filter(|p| {
            std::fs::read_dir(p).is_ok_and(|mut files| {
                files.any(|f| f.is_ok_and(|f| f.path().extension().is_some_and(|x| x == "json")))
            })
        })
        .collect();
    dirs.sort();
    dirs.pop()
}

/// The summary and each JUnit file of the run, to the log.
fn print_reports(out: &Path, summary: &Path) {
    log(&format!("summary ({})", summary.display()));
    if let Ok(text) = std::fs::read_to_string(summary) {
        say!("{text}");
    }
    let mut junit: Vec<PathBuf> = std::fs::read_dir(out)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    junit.retain(|p| p.to_string_lossy().ends_with(".junit.xml"));
    junit.sort();
    for f in junit {
        log(&format!("JUnit {}", f.display()));
        if let Ok(text) = std::fs::read_to_string(&f) {
            say!("{text}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 69, item 3: a SIGTERM while the shell chose the baseline went nowhere, and the
    /// run started anyway. Here a signal at any moment before the run (its token cancelled,
    /// as the listener cancels it) runs nothing, the baseline chosen or not.
    #[tokio::test]
    async fn a_signal_before_the_run_starts_runs_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reports = dir.path().join("reports");
        let previous = reports.join("20261201T030000Z-a");
        std::fs::create_dir_all(&previous).expect("mkdir");
        std::fs::write(previous.join("x.json"), "{}").expect("write");
        let args = JobArgs {
            command: JobCommand::Run,
            config: dir.path().join("etc"),
            reports: reports.clone(),
            name: "p".into(),
            pinned: None,
            compare_with_previous: true,
            compare_args: String::new(),
            ephemeral_reports: false,
            args: Vec::new(),
        };
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert_eq!(run(&args, &cancel).await, EXIT_ERROR);
        let made: Vec<_> = std::fs::read_dir(&reports)
            .expect("ls")
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name())
            .collect();
        // Only the previous run's directory: none was made for a run that never began.
        assert_eq!(made.len(), 1, "{made:?}");
    }

    #[test]
    fn the_previous_run_is_the_newest_directory_with_a_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        for (d, record) in [
            ("20261201T030000Z-a", true),
            ("20261202T030000Z-b", true),
            ("20261203T030000Z-c", false),
        ] {
            std::fs::create_dir_all(r.join(d)).expect("mkdir");
            if record {
                std::fs::write(r.join(d).join("x.json"), "{}").expect("write");
            }
        }
        let this = r.join("20261204T030000Z-d");
        std::fs::create_dir_all(&this).expect("mkdir");
        std::fs::write(this.join("x.json"), "{}").expect("write");
        assert_eq!(previous_run(r, &this), Some(r.join("20261202T030000Z-b")));
        assert_eq!(previous_run(&r.join("absent"), &this), None);
    }
}
