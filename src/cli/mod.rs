//! The command line: argument parsing and one module per command. Each command returns
//! its process exit code; errors are printed here, at the edge, with their context.

/// `println!` for commands that must go on when their output is gone (`restore`, whose
/// undo must not stop at a closed pipe): a failed write is dropped, never a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that drops a failed write, as [`say!`] does.
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// The line a command ends on when it cannot do what was asked (exit 2, or a file that
/// is not valid): on stderr, always after the one prefix `error: `, as clap's own.
macro_rules! fail {
    ($($arg:tt)*) => {{
        say_err!("error: {}", format_args!($($arg)*));
    }};
}

mod compare;
mod completion;
mod conformance;
mod doctor;
mod explain;
mod init;
mod inventory;
mod job;
mod list;
mod namespace;
mod place;
mod plan;
mod plan_flags;
mod plan_json;
mod plan_predicted;
mod plan_roll_predicted;
mod plan_verdict;
mod preflight;
mod rbac;
mod rehearse;
mod rehearse_json;
mod report;
mod restore;
mod restore_json;
mod run;
mod stop_runs;
mod validate;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Exit code: everything held.
pub const EXIT_OK: i32 = 0;
/// Exit code: an expectation failed (or a file did not validate).
pub const EXIT_FAILED: i32 = 1;
/// Exit code: the experiment could not run (bad input, cluster unreachable, refused).
pub const EXIT_ERROR: i32 = 2;

/// faultline: take Kubernetes nodes down on purpose and prove, with timestamps, how the
/// cluster reacted.
#[derive(Debug, Parser)]
#[command(name = "faultline", version, about, long_about = None, max_term_width = 80)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run experiments: inject the faults, watch the cluster, judge, undo, write reports.
    Run(Box<RunArgs>),
    /// Judge the cluster against what Kubernetes specifies for node failure, with no bound
    /// written by hand: runs the conformance suite (the shipped one unless experiment
    /// paths are given; each with `expect: conformance`) as `run` does, and writes one
    /// conformance report, `conformance.md`, beside the other reports.
    #[command(mut_arg("paths", |a| a.required(false)))]
    Conformance(Box<RunArgs>),
    /// Check experiment files without a cluster; every problem as file:line:column.
    Validate {
        /// Experiment files or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Check also that each experiment can run in this namespace (`run -n`).
        #[command(flatten)]
        namespace: NamespaceArg,
        /// Check also that the inventory's transports can carry out every step (a node
        /// reached through the API cannot be reached while its kubelet is stopped), and
        /// what an offline `plan -i` finds a run would not get past.
        #[arg(long, short, env = "FAULTLINE_INVENTORY")]
        inventory: Option<PathBuf>,
        /// Text for people, JSON for tools (one object per file: status, problems at
        /// their line and column, warnings, reasons).
        #[arg(long, short = 'o', value_enum, default_value_t = ValidateFormat::Text)]
        output: ValidateFormat,
    },
    /// Print everything a run would do, touching nothing: what setup applies, the resolved
    /// targets, each step's time and exact command, the expectations, what teardown
    /// deletes. Without an inventory (or without an API that answers) the plan is offline:
    /// targets as their selectors, timers from the inventory or assumed (marked).
    Plan {
        /// Experiment files or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// How to reach the cluster and its nodes (optional: without it the plan is offline
        /// and shows no node commands).
        #[arg(long, short, env = "FAULTLINE_INVENTORY")]
        inventory: Option<PathBuf>,
        /// Kubeconfig and context overriding the inventory's.
        #[command(flatten)]
        api: ApiArgs,
        /// Namespace in place of the experiments' own.
        #[command(flatten)]
        namespace: NamespaceArg,
        /// Text for people, JSON for tools (one object per experiment: the steps in time
        /// order with their commands, the model's predictions, the verdict).
        #[arg(long, short = 'o', value_enum, default_value_t = PlanFormat::Text)]
        output: PlanFormat,
    },
    /// Check everything a run relies on, per node and for the cluster, before breaking
    /// anything: transport, host key, authentication, sudo, the kubelet unit, the commands
    /// the experiments run, the power driver, the self-restore, the node clock, the API,
    /// its permissions and the node-lifecycle timers in force. Exit 1 on any failure.
    Doctor {
        /// Experiment files or directories: check what they would do (default: every
        /// command the inventory configures).
        paths: Vec<PathBuf>,
        /// How to reach the cluster and its nodes.
        #[arg(long, short, env = "FAULTLINE_INVENTORY")]
        inventory: PathBuf,
        /// Kubeconfig and context overriding the inventory's.
        #[command(flatten)]
        api: ApiArgs,
        /// Namespace in place of the experiments' own.
        #[command(flatten)]
        namespace: NamespaceArg,
        /// A table for people or JSON for tools.
        #[arg(long, short = 'o', value_enum, default_value_t = DoctorOutput::Text)]
        output: DoctorOutput,
        /// Skip SSH host key verification (the host-key check then says so).
        #[arg(long)]
        insecure_ignore_host_keys: bool,
    },
    /// Print the RBAC rules of faultline's two ServiceAccounts: the observer (read-only,
    /// the same for every experiment) and the actor (exactly what these experiments' faults,
    /// setup and probes do beyond reading), as Kubernetes objects or as the Helm chart's values.
    Rbac {
        /// Experiment files or directories (needed for the actor).
        paths: Vec<PathBuf>,
        /// Only this ServiceAccount's rules (default: both).
        #[arg(long, value_enum)]
        role: Option<crate::rbac::RbacRole>,
        /// ClusterRole and Role objects, or values for `helm install -f`.
        #[arg(long, short = 'o', value_enum, default_value_t = RbacOutput::Manifests)]
        output: RbacOutput,
        /// Prefix of the objects' names (`<prefix>-observer`, `<prefix>-actor`).
        #[arg(long, default_value = "faultline")]
        name: String,
        /// Namespace in place of the experiments' own.
        #[command(flatten)]
        namespace: NamespaceArg,
        /// The inventory the run will use: with the API transport (`transport: pod`) the
        /// actor also gets what its node-access pods need.
        #[arg(long, short, env = "FAULTLINE_INVENTORY")]
        inventory: Option<PathBuf>,
        /// The setup's namespaces and the node-access pods' are made before faultline runs
        /// (as the chart does): the actor gets no `create namespaces`. Implied by `-o values`.
        #[arg(long)]
        namespaces_exist: bool,
        /// The only nodes the actor may change (cordon, drain, taint, delete), by name
        /// (comma-separated): its `patch nodes` is granted on these alone, and a run
        /// refuses a step whose target resolves to another node. Default: every node.
        #[arg(long, value_delimiter = ',', value_name = "NODE,...")]
        nodes: Vec<String>,
    },
    /// The Helm chart's Job as its PID 1: check the release's pins, restore what an
    /// earlier run left, run (or restore, doctor, plan, validate); no signal unheard.
    Job(job::JobArgs),
    /// Undo every fault a crashed or killed run left behind (from the fault journal).
    Restore {
        /// How to reach the cluster and its nodes.
        #[arg(long, short, env = "FAULTLINE_INVENTORY")]
        inventory: PathBuf,
        /// The fault journal (default: $XDG_STATE_HOME/faultline/journal.json).
        #[arg(long, env = "FAULTLINE_JOURNAL")]
        journal: Option<PathBuf>,
        /// Experiments (files or directories) whose `run` steps' `undo:` commands a
        /// journal others can write (a shared volume) may ask for; without them such a
        /// journal's shell undos are refused. A journal only you can write needs none.
        #[arg(long, value_name = "PATH", num_args = 1..)]
        experiments: Vec<PathBuf>,
        /// Kubeconfig and context overriding the inventory's.
        #[command(flatten)]
        api: ApiArgs,
        /// Skip SSH host key verification, as `run` and `doctor` can (a node whose key
        /// changed, a rebuilt lab).
        #[arg(long)]
        insecure_ignore_host_keys: bool,
        /// Text for people, JSON for tools (one object: the journal's faults, each undo,
        /// the node-access pods deleted, the comparison with the snapshot, the outcome).
        #[arg(long, short = 'o', value_enum, default_value_t = RestoreFormat::Text)]
        output: RestoreFormat,
    },
    /// Write an inventory for a kind or k3d cluster, read from its API and Docker.
    #[command(subcommand)]
    Inventory(InventoryCommand),
    /// Run an experiment's schedule and expectations over a recorded run's timeline, with
    /// a virtual clock and no cluster: when each step would fire, and every verdict.
    Rehearse {
        /// The experiment file.
        experiment: PathBuf,
        /// A run record (the .json a run wrote) whose observations are replayed; of a
        /// series (`run --repeat`), every run in turn unless `--run` picks one.
        #[arg(long)]
        record: PathBuf,
        /// Of a series, rehearse only this run (1 is the first).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        run: Option<u32>,
        /// The namespace the recorded run used in place of the experiment's own (a record
        /// of `run -n NAME`).
        #[command(flatten)]
        namespace: NamespaceArg,
        /// Judge every expectation to the end instead of stopping at the first failure,
        /// as `run --keep-going` does.
        #[arg(long)]
        keep_going: bool,
        /// Text for people, JSON for tools (one object per rehearsed run: the steps, how
        /// it ended, each expectation's verdict beside the recorded one).
        #[arg(long, short = 'o', value_enum, default_value_t = RehearseFormat::Text)]
        output: RehearseFormat,
    },
    /// Compare two sets of runs (e.g. before and after an upgrade): verdicts, recovery
    /// figures, observed transition times and scores, with spreads where runs were repeated.
    /// Exit code 1 when something regressed beyond the tolerance.
    Compare(CompareArgs),
    /// Render saved run records or series (the .json a run wrote) again.
    Report(ReportArgs),
    /// Explain recorded runs with the node failure model: each transition it predicts for
    /// the silenced nodes and their pods (window and rule) beside what the run saw, and for
    /// each deviation the most likely cause, or "outside the model". Exit 1 when a
    /// deviation has no cause the model can name.
    Explain {
        /// Run records or series (the .json a run wrote), or directories of them.
        #[arg(required = true)]
        records: Vec<PathBuf>,
        /// Text for people, JSON for tools.
        #[arg(long, short = 'o', value_enum, default_value_t = ExplainFormat::Text)]
        output: ExplainFormat,
    },
    /// List experiments (default: the repository's `experiments/`): what each does, its
    /// faults, tags and what the cluster must offer.
    List {
        /// Directories or experiment files (default: `experiments`).
        paths: Vec<PathBuf>,
        /// Text for people, JSON for tools.
        #[arg(long, short = 'o', value_enum, default_value_t = ListFormat::Text)]
        output: ListFormat,
    },
    /// Start an experiment from a commented template for one kind of fault: a file that
    /// validates, with TODOs where your cluster differs.
    Init {
        /// The kind of fault.
        #[arg(value_enum)]
        fault: init::Starter,
        /// The file to write (never over an existing one); without it, the template goes
        /// to stdout.
        file: Option<PathBuf>,
    },
    /// Print a shell completion script: `source <(faultline completion bash)`, or save it
    /// where your shell loads completions from.
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The Helm chart's pre-delete and pre-upgrade hook: stops the release's running runs
    /// (deletes their Jobs) and waits until their pods are gone, so each undoes its faults
    /// while its ServiceAccount and rules still exist. Inside the cluster only.
    #[command(hide = true)]
    StopRuns {
        /// The release's namespace.
        #[arg(long)]
        namespace: String,
        /// The label selector of the release's run pods.
        #[arg(long)]
        selector: String,
        /// How long to wait for the runs to end (their pods' grace period and a margin).
        #[arg(long, value_parser = parse_interval, default_value = "210s")]
        timeout: Duration,
    },
}

/// Arguments of `faultline run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Experiment files or directories of them (run one after another).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// How to reach the cluster and its nodes (with `--dry-run` optional: without it the
    /// plan is offline, as `faultline plan` without `-i`).
    #[arg(
        long,
        short,
        env = "FAULTLINE_INVENTORY",
        required_unless_present = "dry_run"
    )]
    pub inventory: Option<PathBuf>,
    /// Kubeconfig and context overriding the inventory's.
    #[command(flatten)]
    pub api: ApiArgs,
    /// Namespace in place of the experiments' own.
    #[command(flatten)]
    pub namespace: NamespaceArg,
    /// Directory the reports are written to (`<experiment>.junit.xml`, `.json`, `.html`).
    /// `--reports` is the old spelling.
    #[arg(
        long = "out",
        alias = "reports",
        value_name = "DIR",
        default_value = "reports"
    )]
    pub out: PathBuf,
    /// Follow the cluster with watches or by polling.
    #[arg(long, value_enum, default_value_t = ObserveArg::Watch)]
    pub observe: ObserveArg,
    /// Poll interval with `--observe poll`, e.g. `2s`.
    #[arg(long, default_value = "2s", value_parser = parse_interval)]
    pub interval: Duration,
    /// Print the plan and the exact commands, touch nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (needed when stdin is not a terminal, as in CI).
    #[arg(long, short)]
    pub yes: bool,
    /// Kube contexts the run may use; any other refuses to start. Repeatable.
    #[arg(
        long = "allow-context",
        env = "FAULTLINE_ALLOW_CONTEXTS",
        value_delimiter = ','
    )]
    pub allow_contexts: Vec<String>,
    /// The fault journal (default: $XDG_STATE_HOME/faultline/journal.json).
    #[arg(long, env = "FAULTLINE_JOURNAL")]
    pub journal: Option<PathBuf>,
    /// Start even though the journal holds unrestored faults for this cluster.
    #[arg(long)]
    pub ignore_journal: bool,
    /// Keep observing after an expectation has already failed.
    #[arg(long)]
    pub keep_going: bool,
    /// Skip SSH host key verification. Dangerous: anyone on the path can pose as a node.
    #[arg(long)]
    pub insecure_ignore_host_keys: bool,
    /// How long after a run's planned end a node undoes a fault by itself if faultline
    /// died (self-restore armed on the node before each fault).
    #[arg(long, default_value = "2m", value_parser = parse_interval)]
    pub restore_margin: Duration,
    /// Only run experiments carrying this tag. Repeatable.
    #[arg(long)]
    pub tag: Vec<String>,
    /// Write every timeline entry to this file as it happens, one JSON object per line
    /// (JSON Lines, flushed per entry; schema in docs/events.md), for tools that follow a
    /// run while it goes.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Append a Markdown section per experiment run to this file (created if missing), e.g.
    /// `--summary "$GITHUB_STEP_SUMMARY"`.
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// Run each experiment this many times, one after another; reports give every verdict
    /// per run and each figure as min / median / max, and the JSON keeps every run.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// After the runs, compare them with this baseline (a report directory or a record
    /// file, as `faultline compare` takes); the comparison is printed and written to
    /// `<reports>/compare.{md,html,junit.xml}`, and a regression makes the exit code 1.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// Tolerance of the `--baseline` comparison, as `faultline compare --tolerance`.
    #[arg(long, value_name = "[KEY=]VALUE", requires = "baseline", value_parser = parse_tolerance)]
    pub tolerance: Vec<crate::compare::ToleranceSpec>,
    /// Noise floor of the `--baseline` comparison, as `faultline compare --noise-floor`
    /// (default 1s and 20%).
    #[arg(long, value_name = "VALUE", requires = "baseline", value_parser = crate::compare::parse_floor)]
    pub noise_floor: Vec<crate::compare::NoiseFloorPart>,
}

/// Arguments of `faultline report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run record or series files (a `reports/<experiment>.json`), or report directories
    /// (every `*.json` in them).
    #[arg(required = true)]
    pub records: Vec<PathBuf>,
    /// What to render. `--format` is the old spelling.
    #[arg(long, short = 'o', alias = "format", value_enum, default_value_t = ReportFormat::Text)]
    pub output: ReportFormat,
    /// Where to write it: a file for one record; a directory (`<experiment>.<ext>` in it)
    /// for several, or when it is one. Default: stdout.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
}

/// Arguments of `faultline compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline: a run record or series file (a `reports/<experiment>.json`), or a
    /// report directory (every `*.json` in it, one per experiment).
    pub baseline: PathBuf,
    /// The runs compared with it, in the same forms.
    pub now: PathBuf,
    /// How far a figure may move beyond the baseline's spread before it counts as a change:
    /// `10%` (of the baseline's median), `2s`, per figure `node_not_ready=2s` or per
    /// expectation `NAME=5%`, and `score=5` (points). Repeatable. Default: 10% or 1s,
    /// whichever is larger; score 0.
    #[arg(long, value_name = "[KEY=]VALUE", value_parser = parse_tolerance)]
    pub tolerance: Vec<crate::compare::ToleranceSpec>,
    /// The smallest move of a time's median that counts as a change at all: `2s` (a move
    /// under it is noise) or `25%` (of the baseline's median). Give each part at most once;
    /// the other keeps its default, `0s`/`0%` switches a part off. Default: 1s and 20%.
    #[arg(long, value_name = "VALUE", value_parser = crate::compare::parse_floor)]
    pub noise_floor: Vec<crate::compare::NoiseFloorPart>,
    /// Also write compare.md, compare.html and compare.junit.xml into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Append the comparison as Markdown to this file (created if missing), e.g.
    /// `--summary "$GITHUB_STEP_SUMMARY"`.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// How the comparison is printed: `text`, or `json` (one object: both sides, each
    /// experiment's figures, transitions and roll stages, the regressions, the exit code).
    #[arg(long, short = 'o', value_enum, default_value_t = CompareFormat::Text)]
    pub output: CompareFormat,
}

fn parse_tolerance(text: &str) -> Result<crate::compare::ToleranceSpec, String> {
    // clap prefixes the value already: say only what is wrong.
    crate::compare::parse_spec(text).map_err(|e| match e {
        crate::compare::ToleranceError::Syntax { why, .. } => why,
        other => other.to_string(),
    })
}

/// kubectl's flags for choosing the cluster; `KUBECONFIG` is read too. Precedence:
/// `--kubeconfig` > `KUBECONFIG` > the inventory's `cluster.kubeconfig` > ~/.kube/config,
/// and `--context` > the inventory's `cluster.context` > the current context.
#[derive(Debug, Clone, Default, Args)]
pub struct ApiArgs {
    /// Kubeconfig file (overrides KUBECONFIG and the inventory's).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kube context (overrides the inventory's); the allow-lists still apply to it.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

impl ApiArgs {
    /// The flags together with this process's `KUBECONFIG`.
    pub fn overrides(&self) -> crate::cluster::ApiOverrides {
        crate::cluster::ApiOverrides::from_flags_and_env(
            self.kubeconfig.clone(),
            self.context.clone(),
        )
    }
}

/// kubectl's `-n/--namespace`: the namespace an experiment's workloads are in, in place of
/// its own `namespace:`, so one experiment file serves several copies of an application.
#[derive(Debug, Clone, Default, Args)]
pub struct NamespaceArg {
    /// Namespace in place of each experiment's `namespace:` (wherever the experiment uses
    /// that namespace: its default and references naming it).
    #[arg(long, short = 'n', value_name = "NAME")]
    pub namespace: Option<String>,
}

/// `faultline inventory …`: one subcommand per local-cluster tool.
#[derive(Debug, Subcommand)]
pub enum InventoryCommand {
    /// A kind cluster: nodes from the API and the `io.x-k8s.kind.cluster` containers,
    /// timers from the kube-controller-manager and kube-apiserver static pods.
    Kind(KindInventoryArgs),
    /// A k3d cluster: nodes from the API and the `k3d.cluster` containers, timers from the
    /// k3s server's command line.
    K3d(InventoryArgs),
}

/// Arguments of `faultline inventory kind|k3d`.
#[derive(Debug, Args)]
pub struct InventoryArgs {
    /// Cluster name (default: from a `kind-NAME` / `k3d-NAME` context, else `kind` /
    /// `k3s-default`).
    #[arg(long)]
    pub name: Option<String>,
    /// Where to write the inventory (default: stdout). `-o` is the old spelling (`-o`
    /// names a format everywhere else).
    #[arg(long, short_alias = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Kubeconfig and context to read the cluster through.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of `faultline inventory kind`: the common ones, and how nodes are reached.
#[derive(Debug, Args)]
pub struct KindInventoryArgs {
    /// Name, output, kubeconfig and context, as for k3d.
    #[command(flatten)]
    pub common: InventoryArgs,
    /// How faultline reaches the nodes: `exec` (the `kind` profile: `docker exec`), `ssh`
    /// (the `kubeadm` profile over SSH to each node container's address, as root; power
    /// stays with Docker; needs an sshd in the node image, as ci/kind/build's has), or `pod`
    /// (the `kubeadm` profile through a privileged pod and the API's exec: nothing but the
    /// API).
    #[arg(long, value_enum, default_value_t = NodeTransportArg::Exec)]
    pub transport: NodeTransportArg,
    /// With `--transport ssh`: the private key authorized for root on every node.
    #[arg(long, value_name = "FILE", required_if_eq("transport", "ssh"))]
    pub identity_file: Option<PathBuf>,
    /// With `--transport ssh`: the known_hosts file holding every node's host key by its
    /// address (faultline always checks host keys).
    #[arg(long, value_name = "FILE", required_if_eq("transport", "ssh"))]
    pub known_hosts: Option<PathBuf>,
}

/// How `faultline inventory kind` has nodes reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NodeTransportArg {
    /// `docker exec` into each node container (the `kind` profile).
    Exec,
    /// SSH to each node container's address (the `kubeadm` profile).
    Ssh,
    /// A privileged pod on the node and the API's exec (the `kubeadm` profile).
    Pod,
}

/// Observation modes on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ObserveArg {
    /// Kubernetes watches (default): first lists streamed when the API server serves
    /// streaming lists, in pages otherwise.
    Watch,
    /// Watches, first lists in pages of 500 (every API server serves them).
    WatchPaged,
    /// Watches, first lists streamed (`sendInitialEvents`; needs the `WatchList` gate).
    WatchStreamed,
    /// Periodic lists.
    Poll,
}

/// How `faultline rbac` prints the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RbacOutput {
    /// ClusterRole and Role objects, ready for `kubectl apply -f -`.
    Manifests,
    /// The Helm chart's `rbac:` values (`helm install -f`).
    Values,
}

/// How `faultline explain` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExplainFormat {
    /// One line per predicted transition, with the observation and any cause.
    Text,
    /// One JSON object per run: the assumptions and every explained transition.
    Json,
}

/// How `faultline validate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ValidateFormat {
    /// `file:line:column: message` per problem, `file: ok (…)` per valid file.
    Text,
    /// One JSON array, an object per file.
    Json,
}

/// How `faultline plan` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    /// The plan for people, as `run --dry-run` prints it.
    Text,
    /// One JSON array, an object per experiment (docs/reading-results.md).
    Json,
}

/// How `faultline rehearse` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RehearseFormat {
    /// Steps, how it ended and the verdicts beside the recorded ones, for people.
    Text,
    /// One JSON array, an object per rehearsed run (docs/reading-results.md).
    Json,
}

/// How `faultline restore` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RestoreFormat {
    /// What it found and did, said as it goes, for people.
    Text,
    /// One JSON object at the end, progress on stderr (docs/reading-results.md).
    Json,
}

/// How `faultline compare` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// Both sides, per experiment the verdicts and every figure in columns, the regressions.
    Text,
    /// One JSON object, for tools.
    Json,
}

/// How `faultline list` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// One block per experiment, 80 columns wide.
    Text,
    /// One JSON array: name, file, summary, tags, faults, requires.
    Json,
}

/// How `faultline doctor` prints its findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DoctorOutput {
    /// One row per check, failures repeated at the end (`table` is the old name).
    #[value(alias = "table")]
    Text,
    /// One JSON object: findings, timers, summary.
    Json,
}

/// Formats `faultline report` renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// The summary table, as a run prints it (`terminal` is the old name).
    #[value(alias = "terminal")]
    Text,
    /// JUnit XML.
    Junit,
    /// Self-contained HTML with the timeline picture.
    Html,
    /// A Markdown section for a CI job summary or a pull request comment.
    Markdown,
    /// The run record itself.
    Json,
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = crate::experiment::parse_duration(text).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(100) {
        return Err("the poll interval must be at least 100ms".into());
    }
    Ok(d)
}

/// Whether the command only reads and prints: such a command ends quietly, as `cat` does,
/// when the reader of its output goes away (`faultline validate … | head`). `run` and
/// `restore` never do: they keep going, without their output, until their faults are
/// undone (`report::subscribe`).
fn only_reads(command: &Command) -> bool {
    !matches!(
        command,
        Command::Run(_) | Command::Conformance(_) | Command::Restore { .. } | Command::Job(_)
    )
}

/// Gives SIGPIPE its default action back (Rust ignores it), so that a write to a closed
/// pipe ends the process silently instead of panicking in `println!`.
fn die_quietly_on_closed_pipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL at start-up, before any thread of
    // ours writes anything; no handler code runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Runs the parsed command line and returns the process exit code.
pub async fn main(cli: Cli) -> i32 {
    if only_reads(&cli.command) {
        die_quietly_on_closed_pipe();
    }
    let code = command(cli).await;
    // A node-access pod let go in a run's last moments is deleted by a task spawned then;
    // the process exits right after this, and a task not run by then never is.
    if !crate::execute::pod::send_pending_deletions(PENDING_DELETIONS_WAIT).await {
        tracing::warn!(
            "node-access pods still being deleted after {} s: each ends at its own \
             deadline, and `faultline restore` deletes them",
            PENDING_DELETIONS_WAIT.as_secs()
        );
    }
    code
}

/// How long the process waits at exit for node-access pod deletions still being sent.
const PENDING_DELETIONS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs the command `cli` names; returns its exit code.
async fn command(cli: Cli) -> i32 {
    match cli.command {
        Command::Run(args) => run::run(*args).await,
        Command::Conformance(args) => conformance::conformance(*args).await,
        Command::Job(args) => job::job(args).await,
        Command::Validate {
            paths,
            namespace,
            inventory,
            output,
        } => validate::validate(&paths, &namespace, inventory.as_deref(), output),
        Command::Plan {
            paths,
            inventory,
            api,
            namespace,
            output,
        } => plan::plan(&paths, inventory.as_deref(), &api, &namespace, output).await,
        Command::Rbac {
            paths,
            role,
            output,
            name,
            namespace,
            inventory,
            namespaces_exist,
            nodes,
        } => rbac::rbac(
            &paths,
            role,
            (output, namespaces_exist || output == RbacOutput::Values),
            (&name, &namespace),
            (inventory.as_deref(), &nodes),
        ),
        Command::Restore {
            inventory,
            journal,
            experiments,
            api,
            insecure_ignore_host_keys,
            output,
        } => {
            restore::restore(
                &inventory,
                journal,
                &experiments,
                &api,
                insecure_ignore_host_keys,
                output,
            )
            .await
        }
        Command::Doctor {
            paths,
            inventory,
            api,
            namespace,
            output,
            insecure_ignore_host_keys,
        } => {
            doctor::doctor(
                &inventory,
                &paths,
                &api,
                &namespace,
                output,
                insecure_ignore_host_keys,
            )
            .await
        }
        Command::Inventory(which) => inventory::inventory(which).await,
        Command::Report(args) => report::report(&args),
        Command::Explain { records, output } => explain::explain(&records, output),
        Command::List { paths, output } => list::list(&paths, output),
        Command::Init { fault, file } => init::init(fault, file.as_deref()),
        Command::Completion { shell } => completion::completion(shell),
        Command::Rehearse {
            experiment,
            record,
            run,
            namespace,
            keep_going,
            output,
        } => rehearse::run(&experiment, &record, run, &namespace, keep_going, output),
        Command::Compare(args) => compare::compare(&args),
        Command::StopRuns {
            namespace,
            selector,
            timeout,
        } => stop_runs::stop_runs(&namespace, &selector, timeout).await,
    }
}

/// Loads and validates experiment files, printing every diagnostic, and with `-n` moves
/// each experiment to that namespace (or refuses it, said why); `None` if any failed.
fn load_experiments_in(
    paths: &[PathBuf],
    namespace: &NamespaceArg,
) -> Option<Vec<crate::experiment::model::Experiment>> {
    let mut ok = Vec::new();
    let mut failed = false;
    for (path, checked) in crate::experiment::load_all_checked(paths) {
        // Warnings (an expectation on a workload setup never creates) before anything runs.
        for warning in checked.warnings.iter() {
            eprintln!("{}", warning.as_warning());
        }
        match checked.result.map_err(|d| d.to_string()).and_then(|exp| {
            match namespace.namespace.as_deref() {
                Some(ns) => namespace::moved_to(exp, ns).map_err(|e| e.to_string()),
                None => Ok(exp),
            }
        }) {
            Ok(exp) => ok.push(exp),
            Err(diagnostics) => {
                eprintln!("{diagnostics}");
                fail!("{}: not valid", path.display());
                failed = true;
            }
        }
    }
    if ok.is_empty() && !failed {
        fail!("no experiment files found in {}", show_paths(paths));
        return None;
    }
    (!failed).then_some(ok)
}

/// Loads the inventory and puts the command line's kubeconfig and context in place of its
/// own, printing its error.
fn load_inventory(path: &std::path::Path, api: &ApiArgs) -> Option<crate::inventory::Inventory> {
    load_inventory_and_access(path, api).map(|(inv, _)| inv)
}

/// [`load_inventory`], also returning which kubeconfig and context won and why, for
/// messages that must say where a setting came from.
fn load_inventory_and_access(
    path: &std::path::Path,
    api: &ApiArgs,
) -> Option<(crate::inventory::Inventory, crate::cluster::ApiAccess)> {
    match crate::inventory::Inventory::load(path) {
        Ok(mut inv) => {
            let access = inv.apply_api_overrides(&api.overrides());
            Some((inv, access))
        }
        Err(e) => {
            fail!("{e}");
            None
        }
    }
}

/// The journal path: given, or the default location (the invoking user's under sudo).
fn journal_path(given: Option<PathBuf>) -> Result<PathBuf, String> {
    journal_location(given).map(|l| l.path)
}

/// The journal's location: `--journal` when given, else the default one, with whose it is
/// when sudo chose it, so that commands can say which file they read.
fn journal_location(given: Option<PathBuf>) -> Result<crate::journal::Location, String> {
    match given {
        Some(path) => Ok(crate::journal::Location {
            path,
            owner: None,
            sudo_user: None,
        }),
        None => crate::journal::Journal::default_location().map_err(|e| e.to_string()),
    }
}

fn show_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `FAULTLINE_INVENTORY` stands for `-i` wherever `-i` exists (issue 47): a command
    /// given `-i` later reads the variable without anyone remembering to add it.
    #[test]
    fn every_inventory_flag_reads_the_inventory_variable() {
        fn walk(cmd: &clap::Command, path: &str, found: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                if arg.get_short() == Some('i') || arg.get_long() == Some("inventory") {
                    assert_eq!(
                        arg.get_env().and_then(|e| e.to_str()),
                        Some("FAULTLINE_INVENTORY"),
                        "`{path} -i` does not read FAULTLINE_INVENTORY"
                    );
                    found.push(path.to_string());
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), found);
            }
        }
        let mut found = Vec::new();
        walk(&super::Cli::command(), "faultline", &mut found);
        for command in ["validate", "plan", "run", "doctor", "rbac", "restore"] {
            assert!(
                found.contains(&format!("faultline {command}")),
                "{command} has no -i: {found:?}"
            );
        }
    }
}
