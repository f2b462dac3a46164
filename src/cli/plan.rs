//! `faultline plan` (and `run --dry-run`): the resolved targets and the exact commands,
//! with every interlock checked, touching nothing. Without a reachable API the plan is
//! still printed, offline: targets as their selectors with the inventory's candidate
//! nodes, timers from the inventory or assumed (marked), so an experiment can be reviewed
//! away from the cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::plan_json::{
    CommandDoc, ExpectationDoc, PlanDoc, PlanStatus, Rendered, Sink, StepDoc, TargetDoc,
};
use super::plan_predicted::KnownNodes;
use super::plan_verdict::{self, Problem};
use super::{EXIT_ERROR, EXIT_OK, PlanFormat};
use crate::cluster::ClusterError;
use crate::execute::Executor;
use crate::experiment::fault::{self, Via, action_name};
use crate::experiment::model::{Action, Experiment, NodeRole, StepTime, TargetSpec};
use crate::inventory::Inventory;
use crate::run::RunSettings;
use crate::run::floor::schedule;
use crate::run::preflight::prepare::{Prepared, RunError, prepare, resolve};
use crate::timeline::format_offset_ms;
use crate::timers::{BoundUse, ClusterReadings, TimersInForce, assumed_mark, assumed_mark_all};

/// Commands shown per unresolved target at most; the rest are counted.
const CANDIDATES_SHOWN: usize = 5;

/// `faultline plan`: loads the files and the inventory, prints each plan; without an
/// inventory, the offline plan (no cluster is asked, no node command shown).
pub(super) async fn plan(
    paths: &[PathBuf],
    inventory: Option<&Path>,
    api: &super::ApiArgs,
    namespace: &super::NamespaceArg,
    format: PlanFormat,
) -> i32 {
    let Some(experiments) = super::load_experiments_in(paths, namespace) else {
        return EXIT_ERROR;
    };
    let mut sink = Sink::new(format);
    let Some(inventory) = inventory else {
        let code = without_inventory(&experiments, &mut sink);
        return sink.finish(code);
    };
    let Some(inventory) = super::load_inventory(inventory, api) else {
        return EXIT_ERROR;
    };
    let journal_path = match super::journal_path(None) {
        Ok(p) => p,
        Err(e) => {
            fail!("{e}");
            return EXIT_ERROR;
        }
    };
    let settings = RunSettings {
        ignore_journal: true,
        ..RunSettings::new(inventory, journal_path)
    };
    let code = plans(&experiments, &settings, &mut sink).await;
    sink.finish(code)
}

/// Prints the plan of every experiment as text (`run --dry-run`, a run's own plan).
pub(super) async fn print_plans(experiments: &[Experiment], settings: &RunSettings) -> i32 {
    plans(experiments, settings, &mut Sink::new(PlanFormat::Text)).await
}

/// The plan of every experiment, into `sink`; an error exit if any interlock refuses one.
/// An API that cannot be reached gives the offline plan, not a refusal.
async fn plans(experiments: &[Experiment], settings: &RunSettings, sink: &mut Sink) -> i32 {
    let mut code = EXIT_OK;
    let capabilities = settings.inventory.cluster().capabilities();
    for exp in experiments {
        // What a run would skip is said before anything is asked of the cluster.
        if let Some(missing) = crate::capability::missing(&exp.requires, &capabilities) {
            sink.skipped(exp, missing.explained().to_string());
            continue;
        }
        let mut prepared = match prepare(exp, settings).await {
            Ok(p) if p.cluster.server_version.is_some() => p,
            Ok(p) => {
                if refused_offline(exp, settings, sink) {
                    code = EXIT_ERROR;
                    continue;
                }
                let problems = sink.plan(offline(
                    exp,
                    settings,
                    &p.executor,
                    "the API server does not answer",
                ));
                code = code.max(plan_verdict::exit_code(&problems));
                continue;
            }
            Err(RunError::Cluster(e)) => {
                if refused_offline(exp, settings, sink) {
                    code = EXIT_ERROR;
                    continue;
                }
                let executor = Executor::new(settings.inventory.clone());
                let problems = sink.plan(offline(exp, settings, &executor, &e.to_string()));
                code = code.max(plan_verdict::exit_code(&problems));
                continue;
            }
            Err(e) => {
                sink.refused(exp, e.to_string());
                code = EXIT_ERROR;
                continue;
            }
        };
        match resolve(exp, &mut prepared, &settings.inventory).await {
            Ok(expanded) => {
                let problems = sink.plan(render(&expanded, &online(&prepared)));
                code = code.max(plan_verdict::exit_code(&problems));
            }
            // Targets chosen by the pods of a workload that setup has not applied yet can
            // only be resolved by a run; the rest of the plan still stands.
            Err(RunError::Cluster(e @ ClusterError::TargetUnsatisfied { .. }))
                if !exp.setup.manifests.is_empty() =>
            {
                let mut view = online(&prepared);
                view.targets = Targets::Selectors(candidates(exp, &settings.inventory));
                let problems = sink.plan(render(exp, &view));
                code = code.max(plan_verdict::exit_code(&problems));
                sink.note(format!(
                    "targets are resolved after setup applies its manifests ({e})"
                ));
            }
            Err(e) => {
                sink.refused(exp, e.to_string());
                code = EXIT_ERROR;
            }
        }
    }
    code
}

/// What an offline plan of `exp` on `inventory` finds that a run would not get past, for
/// `validate -i`: the same checks as `plan`, without the API.
pub(super) fn offline_problems(exp: &Experiment, inventory: &Inventory) -> Vec<Problem> {
    let settings = RunSettings::new(inventory.clone(), PathBuf::new());
    let executor = Executor::new(inventory.clone());
    offline(exp, &settings, &executor, "validate reads files only").problems
}

/// The plans when no inventory is given: which cluster, how its nodes are reached and its
/// timers are unknown, so the plan is offline, every timer is assumed (and marked), and the
/// steps name what they do but no command.
pub(super) fn print_without_inventory(experiments: &[Experiment]) -> i32 {
    without_inventory(experiments, &mut Sink::new(PlanFormat::Text))
}

/// [`print_without_inventory`] into `sink`.
fn without_inventory(experiments: &[Experiment], sink: &mut Sink) -> i32 {
    let inventory = match Inventory::parse(NO_INVENTORY, Path::new("(no inventory)")) {
        Ok(inv) => inv,
        Err(e) => {
            fail!("{e}");
            return EXIT_ERROR;
        }
    };
    let settings = RunSettings::new(inventory, PathBuf::new());
    let executor = Executor::new(settings.inventory.clone());
    let mut code = EXIT_OK;
    for exp in experiments {
        if let Err(e) = crate::run::preflight::safety::check_offline(exp, None) {
            sink.refused(exp, e.to_string());
            code = EXIT_ERROR;
            continue;
        }
        let view = offline_view(&settings, &executor, "no inventory (-i) given", exp, false);
        let problems = sink.plan(render(exp, &view));
        code = code.max(plan_verdict::exit_code(&problems));
    }
    code
}

/// The inventory a plan without `-i` is made with: a cluster and no nodes.
const NO_INVENTORY: &str = "cluster: {name: unknown}\nnodes: []\n";

/// Without the API, the interlocks the files alone decide (`safety::check_offline`):
/// what a run would refuse is refused here too, and said on stderr.
fn refused_offline(exp: &Experiment, settings: &RunSettings, sink: &mut Sink) -> bool {
    match crate::run::preflight::safety::check_offline(exp, Some(&settings.inventory)) {
        Ok(()) => false,
        Err(e) => {
            sink.refused(exp, e.to_string());
            true
        }
    }
}

/// Targets as a plan shows them.
enum Targets {
    /// Resolved through the API: target → nodes.
    Resolved(BTreeMap<String, Vec<String>>),
    /// Not resolved: target → the inventory's nodes it could pick.
    Selectors(BTreeMap<String, Vec<String>>),
}

/// What a plan is rendered from, whether the API answered or not.
struct View<'a> {
    cluster: String,
    context: String,
    /// The API server's version, or why the API was not asked.
    reached: Result<String, String>,
    timers: TimersInForce,
    misses: Vec<String>,
    capabilities: Vec<String>,
    targets: Targets,
    executor: &'a Executor,
    /// Whether an inventory was given: without one no node command can be shown.
    inventory_given: bool,
    /// Every node and the nodes' Lease duration, when read through the API.
    cluster_nodes: Option<(
        &'a [crate::failure_model::ModelNode],
        Option<std::time::Duration>,
    )>,
}

fn online(p: &Prepared) -> View<'_> {
    View {
        cluster: p.cluster.name.clone(),
        context: p
            .cluster
            .context
            .clone()
            .unwrap_or_else(|| "default".into()),
        reached: Ok(p
            .cluster
            .server_version
            .clone()
            .unwrap_or_else(|| "version unknown".into())),
        timers: TimersInForce {
            timers: p.cluster.timers,
            sources: p.cluster.timer_sources.clone(),
        },
        misses: p.timer_misses.clone(),
        capabilities: p.cluster.capabilities.clone(),
        targets: Targets::Resolved(p.targets.clone()),
        executor: &p.executor,
        inventory_given: true,
        cluster_nodes: (!p.model_nodes.is_empty()).then(|| {
            (
                p.model_nodes.as_slice(),
                p.cluster
                    .node_lease_seconds
                    .map(std::time::Duration::from_secs),
            )
        }),
    }
}

/// The plan without the API: what the files alone say.
fn offline(exp: &Experiment, settings: &RunSettings, executor: &Executor, why: &str) -> Rendered {
    render(exp, &offline_view(settings, executor, why, exp, true))
}

/// The view of an offline plan; `inventory_given` false for `plan` without `-i`.
fn offline_view<'a>(
    settings: &RunSettings,
    executor: &'a Executor,
    why: &str,
    exp: &Experiment,
    inventory_given: bool,
) -> View<'a> {
    let inv = &settings.inventory;
    let timers = TimersInForce::resolve(&ClusterReadings::default(), &inv.stated_timers(), None);
    View {
        cluster: inv.cluster().name.clone(),
        context: crate::run::preflight::prepare::effective_context(inv)
            .unwrap_or_else(|| "default".into()),
        reached: Err(why.to_string()),
        timers,
        misses: vec![format!("not read from the cluster: {why}")],
        capabilities: inv.cluster().capabilities(),
        targets: Targets::Selectors(if inventory_given {
            candidates(exp, inv)
        } else {
            stand_ins(exp)
        }),
        executor,
        inventory_given,
        cluster_nodes: None,
    }
}

/// Without an inventory no node is known: each target gets one stand-in (`a node of
/// `victim``), so the model still predicts, from the assumed timers, what the cluster
/// should do about it.
fn stand_ins(exp: &Experiment) -> BTreeMap<String, Vec<String>> {
    exp.targets
        .iter()
        .map(|t| (t.name.clone(), vec![format!("a node of `{}`", t.name)]))
        .collect()
}

/// For each target, the inventory's nodes it could resolve to: those with its names, and
/// with its role where the inventory lists roles. Labels and running pods need the API.
fn candidates(exp: &Experiment, inv: &Inventory) -> BTreeMap<String, Vec<String>> {
    exp.targets
        .iter()
        .map(|t| {
            let s = &t.selector;
            let nodes = inv
                .nodes()
                .iter()
                .filter(|n| s.names.is_empty() || s.names.contains(&n.name))
                .filter(|n| match s.role {
                    None => true,
                    Some(_) if n.roles.is_empty() => true,
                    Some(NodeRole::ControlPlane) => n.roles.iter().any(|r| r == "control-plane"),
                    Some(NodeRole::Worker) => !n.roles.iter().any(|r| r == "control-plane"),
                })
                .map(|n| n.name.clone())
                .collect();
            (t.name.clone(), nodes)
        })
        .collect()
}

/// A target's selector in words: `role worker, running pods of statefulset/db, 1 node`.
fn selector_text(t: &TargetSpec) -> String {
    let s = &t.selector;
    let mut parts = Vec::new();
    if !s.names.is_empty() {
        parts.push(format!("named {}", s.names.join(", ")));
    }
    if let Some(role) = s.role {
        parts.push(match role {
            NodeRole::Worker => "role worker".to_string(),
            NodeRole::ControlPlane => "role control-plane".to_string(),
        });
    }
    for (k, v) in &s.labels {
        parts.push(format!("label {k}={v}"));
    }
    if let Some(w) = &s.running_pods_of {
        parts.push(format!("running pods of {w}"));
    }
    if !s.exclude_targets.is_empty() {
        parts.push(format!("not in {}", s.exclude_targets.join(", ")));
    }
    parts.push(match t.count {
        Some(1) => "1 node".to_string(),
        Some(n) => format!("{n} nodes"),
        None => "every match".to_string(),
    });
    parts.join(", ")
}

/// What an action carried out through the Kubernetes API does, in words (not its Rust
/// spelling).
fn through_api_words(action: &crate::experiment::model::Action) -> String {
    use crate::experiment::model::Action;
    let pods = |p: &crate::experiment::model::PodSelector| {
        let mut what = match &p.workload {
            Some(w) => format!("the pods of {w}"),
            None => {
                let labels: Vec<String> =
                    p.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("the pods labelled {} in {}", labels.join(","), p.namespace)
            }
        };
        if let Some(on) = &p.on {
            what.push_str(&format!(" on target `{on}`"));
        }
        what
    };
    let taint = |t: &crate::experiment::model::TaintSpec| match &t.value {
        Some(v) => format!("{}={v}:{}", t.key, t.effect),
        None => format!("{}:{}", t.key, t.effect),
    };
    match action {
        Action::Cordon => "the node marked unschedulable".into(),
        Action::Uncordon => "the node marked schedulable again".into(),
        Action::Drain { on_timeout } => format!(
            "cordon, then each pod evicted through the Eviction API (PodDisruptionBudgets \
             honoured); still held at the timeout: {}",
            on_timeout.word()
        ),
        Action::DeleteNode => "the Node object deleted".into(),
        Action::DeletePods { pods: p, force } => format!(
            "{} deleted{}",
            pods(p),
            if *force {
                " (forced: grace period 0)"
            } else {
                ""
            }
        ),
        Action::DeletePvc {
            namespace,
            name,
            remove_finalizers,
        } => format!(
            "PersistentVolumeClaim {namespace}/{name} deleted{}",
            if *remove_finalizers {
                ", its finalizers removed first"
            } else {
                ""
            }
        ),
        Action::Taint(t) => format!("taint {} added", taint(t)),
        Action::Untaint(t) => format!("taint {} removed", taint(t)),
        other => fault::action_name(other).to_string(),
    }
}

/// The plan as text: cluster, timers, targets, then each step with its time and exact
/// command, the expectations, and how long observation lasts.
/// The plan's text and what it found that a run would not get past (the text ends with
/// it, as the verdict).
fn render(exp: &Experiment, v: &View<'_>) -> Rendered {
    let mut problems = Vec::new();
    let mut doc = PlanDoc {
        cluster: v.inventory_given.then(|| v.cluster.clone()),
        context: v.inventory_given.then(|| v.context.clone()),
        server_version: v.reached.as_ref().ok().cloned(),
        offline: v.reached.as_ref().err().cloned(),
        timers: v.timers.sources.iter().map(Into::into).collect(),
        ..PlanDoc::of(exp, PlanStatus::Planned)
    };
    let mut out = match &v.reached {
        Err(why) if !v.inventory_given => format!(
            "plan for {}, OFFLINE: {why}: the cluster, its nodes and their commands are not known\n",
            exp.name
        ),
        Ok(version) => format!(
            "plan for {} on cluster {} (context {}, {version})\n",
            exp.name, v.cluster, v.context
        ),
        Err(why) => format!(
            "plan for {} on cluster {} (context {}), OFFLINE: {why}\n",
            exp.name, v.cluster, v.context
        ),
    };
    let sources = &v.timers.sources;
    out.push_str("timers:\n");
    // Timers assumed for one reason: the reason once, not on each line.
    let assumed: Vec<_> = sources
        .iter()
        .filter(|s| s.origin == crate::timers::Origin::Assumed)
        .collect();
    let shared = (assumed.len() > 1 && assumed.iter().all(|s| s.detail == assumed[0].detail))
        .then(|| assumed[0].detail.clone());
    for s in sources {
        let line = match &shared {
            Some(_) if s.origin == crate::timers::Origin::Assumed => s.short_line(),
            _ => s.line(),
        };
        out.push_str(&format!("  {line}\n"));
    }
    if let Some(detail) = &shared {
        out.push_str(&format!("  (ASSUMED: {detail})\n"));
    }
    if !v.timers.assumed().is_empty() && !v.misses.is_empty() {
        let line = format!("ASSUMED timers were not read: {}", v.misses.join("; "));
        out.push_str(&format!("  ({line})\n"));
        doc.warnings.push(line);
    }
    let (targets, resolved) = match &v.targets {
        Targets::Resolved(t) => (t, true),
        Targets::Selectors(t) => (t, false),
    };
    out.push_str("targets:\n");
    for spec in &exp.targets {
        let nodes = targets.get(&spec.name).cloned().unwrap_or_default();
        doc.targets.push(TargetDoc {
            name: spec.name.clone(),
            selector: selector_text(spec),
            resolved,
            nodes: if v.inventory_given {
                nodes.clone()
            } else {
                Vec::new()
            },
        });
        if resolved {
            out.push_str(&format!("  {}: {}\n", spec.name, nodes.join(", ")));
        } else if !v.inventory_given {
            out.push_str(&format!(
                "  {}: {} (resolved when a run starts)\n",
                spec.name,
                selector_text(spec)
            ));
        } else {
            out.push_str(&format!(
                "  {}: {} (resolved when the API is reachable; in the inventory: {})\n",
                spec.name,
                selector_text(spec),
                if nodes.is_empty() {
                    "no node matches".to_string()
                } else {
                    nodes.join(", ")
                }
            ));
        }
    }
    let plan = schedule::Plan {
        exp,
        targets,
        timers: &v.timers.timers,
        capabilities: &v.capabilities,
        keep_going: false,
    };
    let (projected, observation_end) = schedule::project(plan);
    doc.observation_ends_ms = observation_end;
    out.push_str(&setup_text(exp));
    out.push_str("steps (offsets from the start, actions taking no time):\n");
    // In time order: the steps the schedule places by their offsets, then those that wait
    // for something observed, each group in file order.
    let mut in_time: Vec<(&crate::experiment::model::Step, &schedule::Projected)> =
        exp.steps.iter().zip(&projected).collect();
    in_time.sort_by_key(|(_, p)| (p.at_ms.is_none(), p.at_ms));
    for (step, projected) in in_time {
        let at = projected.at_ms.map_or_else(
            || "     ?".to_string(),
            |ms| format!("{:>6}", format_offset_ms(ms)),
        );
        let bound = match &step.at {
            StepTime::Offset(b) => b,
            StepTime::AfterStep { delay, .. } | StepTime::When { delay, .. } => delay,
        };
        let when = format!(
            "{}{}",
            schedule::describe_step_time(step, &v.timers.timers),
            assumed_mark(bound, sources, BoundUse::Schedule)
        );
        out.push_str(&format!(
            "  {at}  {} ({when}): {}\n",
            step.name,
            action_name(&step.action)
        ));
        let mut step_doc = StepDoc {
            name: step.name.clone(),
            action: action_name(&step.action),
            at_ms: projected.at_ms,
            when,
            target: step.target.clone(),
            commands: Vec::new(),
            more_candidates: 0,
            notes: Vec::new(),
        };
        // A roll whose nodes are not known here stays one step: say how it goes on.
        if let (Some(roll), Some(target)) = (&step.roll, &step.target) {
            let how = crate::experiment::roll::describe(roll, target);
            out.push_str(&format!("            {how}\n"));
            step_doc.notes.push(how);
        }
        // What ends it if faultline is killed: no timer on a node for an API-side fault.
        if let Some(undo) = fault::inverse(&step.action)
            && matches!(
                fault::info(&undo).via,
                fault::Via::NodeApi | fault::Via::ClusterApi
            )
        {
            let note = format!(
                "if faultline is killed: no timer on the node ends it; the next faultline run \
                 or `restore` against this cluster does (its `{}` is kept on the cluster lock)",
                action_name(&undo)
            );
            out.push_str(&format!("            {note}\n"));
            step_doc.notes.push(note);
        }
        // Without an inventory the stand-ins have no command: say where it comes from.
        let nodes = if v.inventory_given {
            step.nodes(targets)
        } else {
            &[]
        };
        if !resolved && !nodes.is_empty() {
            out.push_str(&format!(
                "            on the node(s) target `{}` resolves to; as on each candidate:\n",
                step.target.as_deref().unwrap_or_default()
            ));
        }
        // A step none of whose nodes can carry it out: the run could not.
        let cannot: Vec<String> = nodes
            .iter()
            .filter_map(|n| {
                command_of(v.executor, &step.action, n)
                    .strip_prefix(CANNOT_RUN)
                    .map(str::to_string)
            })
            .collect();
        if v.inventory_given && !nodes.is_empty() && cannot.len() == nodes.len() {
            problems.push(Problem::CannotRun {
                step: step.name.clone(),
                why: cannot[0].clone(),
            });
        }
        let shown = if resolved {
            nodes.len()
        } else {
            CANDIDATES_SHOWN
        };
        for node in nodes.iter().take(shown) {
            let command = command_of(v.executor, &step.action, node);
            out.push_str(&format!("            {node}: {command}\n"));
            let undo = undo_through_api(v.executor, &step.action, node);
            if let Some(how) = undo {
                out.push_str(&format!("              {how}\n"));
            }
            let cannot_run = command.strip_prefix(CANNOT_RUN).map(str::to_string);
            step_doc.commands.push(CommandDoc {
                node: node.clone(),
                command: cannot_run.is_none().then_some(command),
                cannot_run,
                undo: undo.map(str::to_string),
            });
        }
        if nodes.len() > shown {
            step_doc.more_candidates = nodes.len() - shown;
            out.push_str(&format!(
                "            … and {} more candidate(s)\n",
                nodes.len() - shown
            ));
        }
        if nodes.is_empty() {
            let note = match &step.target {
                Some(t)
                    if fault::info(&step.action).via.needs_node_access() && !v.inventory_given =>
                {
                    format!("on target `{t}`'s node(s); the command comes from the inventory (-i)")
                }
                Some(t) if fault::info(&step.action).via.needs_node_access() => {
                    let problem = Problem::NoNode { target: t.clone() };
                    if !problems.contains(&problem) {
                        problems.push(problem);
                    }
                    format!("no node of the inventory can be target `{t}`")
                }
                _ => format!("via the API: {}", through_api_words(&step.action)),
            };
            out.push_str(&format!("            {note}\n"));
            step_doc.notes.push(note);
        }
        doc.steps.push(step_doc);
    }
    let nodes: Vec<String> = v
        .executor
        .inventory()
        .nodes()
        .iter()
        .map(|n| n.name.clone())
        .collect();
    let known = match v.cluster_nodes {
        Some((nodes, lease)) => KnownNodes::Cluster { nodes, lease },
        None if !v.inventory_given => KnownNodes::StandIns,
        None => KnownNodes::Inventory(&nodes),
    };
    let predicted = super::plan_predicted::predicted(
        exp,
        (targets, resolved),
        &projected,
        &v.timers.timers,
        known,
    );
    if let Some(p) = &predicted {
        out.push_str(&p.section());
        doc.predictions = p.predictions.clone();
        doc.prediction_assumptions = p.assumed.clone();
        doc.roll_predictions = p.rolls.clone();
    }
    if !exp.expectations.is_empty() {
        out.push_str("expectations:\n");
        for e in &exp.expectations {
            out.push_str(&format!(
                "  {}: {} after `{}`{}\n",
                e.name,
                crate::judge::describe_check(&e.check, &v.timers.timers),
                e.since,
                assumed_mark_all(&e.check.bounds(), sources, BoundUse::Expectation)
            ));
            let flag = predicted.as_ref().and_then(|p| {
                super::plan_flags::flag(
                    p,
                    exp,
                    e,
                    (targets, resolved),
                    (&projected, observation_end),
                    &v.timers.timers,
                )
            });
            doc.expectations.push(ExpectationDoc {
                name: e.name.clone(),
                check: crate::judge::describe_check(&e.check, &v.timers.timers),
                since: e.since.clone(),
                cannot_hold: flag.clone(),
            });
            if let Some(flag) = flag {
                out.push_str(&format!("    ! the node failure model: {flag}\n"));
                problems.push(Problem::CannotHold {
                    expectation: e.name.clone(),
                    why: format!("the node failure model: {flag}"),
                });
            }
        }
    }
    let length = match &exp.observe.after_last_step {
        Some(b) => format!(
            "`observe.for: {b}` after the last step{}",
            assumed_mark(b, sources, BoundUse::Schedule)
        ),
        None if exp.conformance => "after the last step, until every expectation's bound and \
            every window of the node failure model has passed, plus a margin"
            .to_string(),
        None => "after the last step, until every expectation's bound has passed, plus a margin"
            .to_string(),
    };
    // `expect: conformance` is judged on the whole observation: it never ends early.
    let early = if exp.conformance {
        "; `expect: conformance` judges every transition the model predicts above, so it \
         does not end sooner"
    } else {
        ", or once every expectation is decided"
    };
    match observation_end {
        Some(end) => out.push_str(&format!(
            "observation: ends at {} ({length}){early}\n",
            format_offset_ms(end)
        )),
        None => out.push_str(&format!(
            "observation: {length}; when depends on the steps that wait for an observed state\n"
        )),
    }
    out.push_str(&teardown_text(exp));
    if exp.abort.conditions.is_empty() {
        out.push_str("abort conditions: none (all switched off)\n");
    } else {
        out.push_str("abort conditions (the run stops and undoes every fault when one trips):\n");
        for c in &exp.abort.conditions {
            out.push_str(&format!("  {}\n", c.name));
        }
    }
    // Resolved targets went through the run's own check already (a refusal is no plan).
    if !resolved && v.inventory_given {
        problems.extend(plan_verdict::own_feet_offline(
            exp,
            v.executor.inventory(),
            targets,
        ));
    }
    out.push_str(&plan_verdict::text(&problems));
    Rendered {
        text: out,
        doc: doc.judged(&problems),
        problems,
    }
}

/// How the executor starts a command it cannot carry out on a node.
const CANNOT_RUN: &str = "cannot run: ";

/// What setup applies, object by object as the manifests name them, before the first step.
fn setup_text(exp: &Experiment) -> String {
    if exp.setup.manifests.is_empty() {
        return "setup: nothing applied (no setup.manifests)\n".to_string();
    }
    let mut out = format!(
        "setup (server-side applied in this order, then waited for up to {}s to be ready):\n",
        exp.setup.wait_timeout.as_secs()
    );
    for line in manifest_objects(exp) {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// What teardown deletes after the run.
fn teardown_text(exp: &Experiment) -> String {
    match (
        exp.setup.manifests.is_empty(),
        exp.teardown.delete_manifests,
    ) {
        (true, _) => "teardown: nothing to delete (no setup)\n".to_string(),
        (false, false) => {
            "teardown: nothing deleted; the setup objects stay (teardown.deleteManifests is off)\n"
                .to_string()
        }
        (false, true) => {
            let mut out =
                "teardown (deleted in reverse order, waited for to be gone):\n".to_string();
            for line in manifest_objects(exp).iter().rev() {
                out.push_str(&format!("  {line}\n"));
            }
            out
        }
    }
}

/// `Kind namespace/name (file)` for every object of the setup manifests, in order; a file
/// that cannot be read or parsed is one line saying so (a run would fail on it).
fn manifest_objects(exp: &Experiment) -> Vec<String> {
    let mut lines = Vec::new();
    for file in &exp.setup.manifests {
        let shown = file.display();
        let objects = std::fs::read_to_string(file)
            .map_err(|e| format!("{shown}: cannot read: {e}"))
            .and_then(|text| {
                crate::experiment::manifest::parse_manifest(file, &text).map_err(|e| e.to_string())
            });
        match objects {
            Ok(objects) => {
                for obj in objects {
                    let kind = obj.types.as_ref().map_or("?", |t| t.kind.as_str());
                    let name = obj.metadata.name.as_deref().unwrap_or("?");
                    let at = match &obj.metadata.namespace {
                        Some(ns) => format!("{ns}/{name}"),
                        None => name.to_string(),
                    };
                    lines.push(format!("{kind} {at} ({shown})"));
                }
            }
            Err(e) => lines.push(format!("ERROR {e}")),
        }
    }
    lines
}

/// How the undo of `action` reaches `node` when the fault cuts the node's API transport
/// (the undo is then armed on the node before the fault): by its undo watcher when
/// faultline asks, or, when the fault cuts the node off from the API server itself, by
/// the node's timer alone. `None` for every other fault and transport.
fn undo_through_api(executor: &Executor, action: &Action, node: &str) -> Option<&'static str> {
    if !crate::run::floor::host_timed::cuts_transport(executor, node, action) {
        return None;
    }
    let watched = fault::inverse(action)
        .and_then(|undo| fault::node_op(&undo))
        .is_some_and(|op| crate::run::floor::host_timed::watched(executor, node, &op));
    Some(if watched {
        "undone by its timer on the node, or sooner by the undo watcher beside it when \
         faultline asks (Ctrl-C, the safety net)"
    } else {
        "undone only by its timer on the node: it cuts the node off from the API server, \
         so neither Ctrl-C nor the safety net can end it sooner"
    })
}

fn command_of(executor: &Executor, action: &Action, node: &str) -> String {
    if let Via::Power(power) = fault::info(action).via {
        return executor.describe_power(node, power);
    }
    match fault::node_op(action) {
        Some(op) => executor.describe(node, &op),
        None => format!("API: {} node/{node}", action_name(action)),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
