//! Interlocks checked before anything touches a cluster: the blast radius of the plan and
//! the kube context it is about to run against.
//!
//! The blast radius is checked on the schedule as it runs, in time order: steps run when
//! their time comes, not in the order they are written. Each fault gives its nodes an
//! outage, from the moment its step may be issued to the moment the step that brings the
//! node back may be issued at the latest (or the end of the run, when the safety net
//! undoes what is left); at no moment may more nodes be out than the experiment allows,
//! nor half or more of the control plane. A step gated on a node being Ready again after
//! its fault (`when: {node: N, is: Ready, since: <the fault>}`) is never issued while
//! that outage lasts, whatever the times say: the two are not counted together, and the
//! run checks it again from what it sees when the step is due.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::ResolvedTargets;
use crate::experiment::fault::{self, Proof};
use crate::experiment::model::{
    BoundSymbol, ClusterTimers, Experiment, NodeRole, NodeStateMatch, StateMatch, StepTime,
    Subject, TargetSpec,
};
use crate::inventory::Inventory;
use crate::run::floor::schedule::resolve_cluster_bound;
use crate::timeline::format_offset_ms;
use crate::timers::{ClusterReadings, TimersInForce};

/// Why a plan is refused before it starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SafetyError {
    /// Steps the nodes' transport cannot carry out (`crate::run::floor::host_timed`).
    #[error("{0}")]
    TransportCannot(String),
    /// More nodes would be down at once than the experiment allows.
    #[error(
        "{} would have {down} nodes down at once ({nodes}) {}; the experiment allows {limit}.{notes} \
         Raise `safety.maxNodesDown` in the experiment if that is really intended",
        step_list(.steps),
        interval(*.from_ms, *.until_ms)
    )]
    TooManyNodesDown {
        /// The steps whose faults are in effect then, in file order.
        steps: Vec<String>,
        /// How many would be down.
        down: usize,
        /// Which.
        nodes: String,
        /// The limit.
        limit: u32,
        /// Offset from the start at which too many are down first.
        from_ms: i64,
        /// Offset at which that ends; `None`: not before the end of the run.
        until_ms: Option<i64>,
        /// How the times were counted, when not as written: empty, or sentences each
        /// starting with a space.
        notes: String,
    },
    /// A fault on a control-plane node without the experiment's explicit permission.
    #[error(
        "step `{step}` does {action} on control-plane node {node}; set `safety.allowControlPlane: true` \
         in the experiment to allow faults on control-plane nodes"
    )]
    ControlPlaneNotAllowed {
        /// Step.
        step: String,
        /// Action name.
        action: &'static str,
        /// Node.
        node: String,
    },
    /// The plan would take down half or more of the control plane (and with it etcd quorum).
    #[error(
        "{} would have {down} of {total} control-plane nodes down at once ({nodes}) {}, losing etcd quorum; \
         faultline never does that unless the experiment sets `safety.allowQuorumLoss: true`.{notes}",
        step_list(.steps),
        interval(*.from_ms, *.until_ms)
    )]
    QuorumLoss {
        /// The steps whose faults are in effect on control-plane nodes then, in file order.
        steps: Vec<String>,
        /// Control-plane nodes down.
        down: usize,
        /// Control-plane nodes in the cluster.
        total: usize,
        /// Which are down.
        nodes: String,
        /// Offset from the start at which the majority is lost first.
        from_ms: i64,
        /// Offset at which that ends; `None`: not before the end of the run.
        until_ms: Option<i64>,
        /// How the times were counted, as in [`SafetyError::TooManyNodesDown`].
        notes: String,
    },
    /// The kube context is not on an allow-list.
    #[error(
        "kube context `{context}` is not on {} ({allowed}); refusing to start. {}",
        .list.name(),
        .list.fix(context)
    )]
    ContextNotAllowed {
        /// Context in use.
        context: String,
        /// The list.
        allowed: String,
        /// Which list refused it.
        list: AllowList,
    },
}

/// "step `a`", "steps `a` and `b`", "steps `a`, `b` and `c`".
fn step_list(steps: &[String]) -> String {
    let quoted: Vec<String> = steps.iter().map(|s| format!("`{s}`")).collect();
    match quoted.as_slice() {
        [] => "the plan".to_string(),
        [one] => format!("step {one}"),
        [init @ .., last] => format!("steps {} and {last}", init.join(", ")),
    }
}

/// "from +20.0s to +60.0s", "at +60.0s", "from +60.0s to the end of the run".
fn interval(from_ms: i64, until_ms: Option<i64>) -> String {
    match until_ms {
        Some(until) if until == from_ms => format!("at {}", format_offset_ms(from_ms)),
        Some(until) => format!(
            "from {} to {}",
            format_offset_ms(from_ms),
            format_offset_ms(until)
        ),
        None => format!(
            "from {} to the end of the run (when the safety net undoes what is left)",
            format_offset_ms(from_ms)
        ),
    }
}

/// Checks that the plan never has more nodes down at once than allowed, touches a
/// control-plane node only with permission, and never takes the control plane's majority.
///
/// `control_plane` holds the names of every control-plane node in the cluster; `timers`
/// are the cluster's, for step times such as `at: grace + 30s`. The schedule is
/// simulated in time order, as [`outages`] describes.
pub(crate) fn check_blast_radius(
    exp: &Experiment,
    targets: &ResolvedTargets,
    control_plane: &BTreeSet<String>,
    timers: &ClusterTimers,
) -> Result<(), SafetyError> {
    check(exp, targets, control_plane, timers, true)
}

/// The interlocks as far as the files alone decide them, for `plan` without an API and
/// `validate`: on the targets that name their nodes ([`resolve_named_targets`]; the
/// others are left out, so what is refused here a run refuses too), with the inventory's
/// control-plane nodes (its `roles`) for the permission. Quorum is not checked: the
/// inventory need not list every control-plane node.
///
/// With an inventory the step times resolve against the timers it states (else the
/// upstream defaults, as the offline plan shows them). Without one, an experiment whose
/// step times use a timer (`grace`, `monitor`, `toleration`) is not checked: that is for
/// `plan`, which knows the cluster's.
/// Refuses the steps the inventory's transports cannot carry out, each with its reason.
pub(crate) fn check_transport(exp: &Experiment, inv: &Inventory) -> Result<(), SafetyError> {
    let refused = crate::run::floor::host_timed::refusals(exp, inv);
    if refused.is_empty() {
        return Ok(());
    }
    Err(SafetyError::TransportCannot(
        refused
            .iter()
            .map(|r| format!("step `{}` cannot be carried out: {}", r.step, r.reason))
            .collect::<Vec<_>>()
            .join("; "),
    ))
}

pub(crate) fn check_offline(exp: &Experiment, inv: Option<&Inventory>) -> Result<(), SafetyError> {
    let timers = match inv {
        Some(inv) => {
            TimersInForce::resolve(&ClusterReadings::default(), &inv.stated_timers(), None).timers
        }
        None if step_times_use_timers(exp) => return Ok(()),
        None => ClusterTimers::default(),
    };
    let present = |name: &str, role: Option<NodeRole>| match inv {
        None => true,
        Some(inv) => inv.nodes().iter().any(|n| {
            n.name == name
                && match role {
                    None => true,
                    Some(_) if n.roles.is_empty() => true,
                    Some(NodeRole::ControlPlane) => n.roles.iter().any(|r| r == "control-plane"),
                    Some(NodeRole::Worker) => !n.roles.iter().any(|r| r == "control-plane"),
                }
        }),
    };
    if let Some(inv) = inv {
        check_transport(exp, inv)?;
    }
    let targets = resolve_named_targets(&exp.targets, &present);
    let control_plane: BTreeSet<String> = inv
        .map(|inv| {
            inv.nodes()
                .iter()
                .filter(|n| n.roles.iter().any(|r| r == "control-plane"))
                .map(|n| n.name.clone())
                .collect()
        })
        .unwrap_or_default();
    check(exp, &targets, &control_plane, &timers, false)
}

/// Whether any step's time refers to a cluster timer.
fn step_times_use_timers(exp: &Experiment) -> bool {
    exp.steps.iter().any(|s| {
        let bound = match &s.at {
            StepTime::Offset(b) => b,
            StepTime::AfterStep { delay, .. } | StepTime::When { delay, .. } => delay,
        };
        bound
            .terms
            .iter()
            .any(|t| !matches!(t.symbol, BoundSymbol::Fixed(_)))
    })
}

/// The targets the experiment resolves without the API: those that name their nodes and
/// select by nothing only the cluster knows (labels, running pods), resolved as a run
/// resolves them: the named nodes `present` accepts (with the target's role), less those
/// of the targets it excludes, the first `count` by name. A target that cannot be
/// resolved so, or that would match too few nodes (a run refuses it), is left out, and
/// with it every target that excludes it.
pub(crate) fn resolve_named_targets(
    specs: &[TargetSpec],
    present: &dyn Fn(&str, Option<NodeRole>) -> bool,
) -> ResolvedTargets {
    let mut resolved = ResolvedTargets::new();
    for spec in specs {
        let sel = &spec.selector;
        if sel.names.is_empty() || !sel.labels.is_empty() || sel.running_pods_of.is_some() {
            continue;
        }
        let Some(excluded) = sel
            .exclude_targets
            .iter()
            .map(|t| resolved.get(t))
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let mut nodes: Vec<String> = sel
            .names
            .iter()
            .filter(|n| present(n, sel.role))
            .filter(|n| !excluded.iter().any(|ex| ex.contains(n)))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let needed = spec.count.map(|c| c as usize).unwrap_or(1).max(1);
        if nodes.len() < needed {
            continue;
        }
        if let Some(c) = spec.count {
            nodes.truncate(c as usize);
        }
        resolved.insert(spec.name.clone(), nodes);
    }
    resolved
}

/// The control-plane permission, then the schedule walked in time order: at each moment a
/// node may go out, how many are out and how much of the control plane (`quorum`: only
/// when `control_plane` is the whole of it). The first moment refused is reported with
/// the steps behind it and how long it lasts.
fn check(
    exp: &Experiment,
    targets: &ResolvedTargets,
    control_plane: &BTreeSet<String>,
    timers: &ClusterTimers,
    quorum: bool,
) -> Result<(), SafetyError> {
    // A rolling step is checked as the run does it: one step per node, each gated on
    // the node before it being Ready again (`experiment::roll`).
    let (expanded, targets) = crate::experiment::roll::expand(exp, targets);
    let (exp, targets) = (&expanded, &targets);
    for step in &exp.steps {
        let action = fault::info(&step.action);
        if !action.takes_node_down || exp.safety.allow_control_plane {
            continue;
        }
        if let Some(node) = step
            .nodes(targets)
            .iter()
            .find(|n| control_plane.contains(*n))
        {
            return Err(SafetyError::ControlPlaneNotAllowed {
                step: step.name.clone(),
                action: action.name,
                node: node.clone(),
            });
        }
    }
    let limit = exp.safety.max_nodes_down.unwrap_or(1);
    let outages = outages(exp, targets, timers);
    let too_many = |down: &[&Outage]| nodes_of(down.iter().copied()).len() > limit as usize;
    let loses_quorum = |down: &[&Outage]| {
        let cp = nodes_of(on_control_plane(down, control_plane).into_iter()).len();
        quorum && !exp.safety.allow_quorum_loss && cp > 0 && cp * 2 >= control_plane.len()
    };
    let mut starts: Vec<Moment> = outages.iter().map(|o| o.from).collect();
    starts.sort();
    starts.dedup();
    for at in starts {
        if let Some(down) = refused_at(&outages, at, &too_many) {
            let until = until_ms(&outages, at, &too_many);
            let nodes = nodes_of(down.iter().copied());
            return Err(SafetyError::TooManyNodesDown {
                steps: step_names(exp, &down),
                down: nodes.len(),
                nodes: nodes.into_iter().collect::<Vec<_>>().join(", "),
                limit,
                from_ms: at.ms,
                until_ms: until,
                notes: notes(&down),
            });
        }
        if let Some(down) = refused_at(&outages, at, &loses_quorum) {
            let until = until_ms(&outages, at, &loses_quorum);
            let down = on_control_plane(&down, control_plane);
            let nodes = nodes_of(down.iter().copied());
            return Err(SafetyError::QuorumLoss {
                steps: step_names(exp, &down),
                down: nodes.len(),
                total: control_plane.len(),
                nodes: nodes.into_iter().collect::<Vec<_>>().join(", "),
                from_ms: at.ms,
                until_ms: until,
                notes: notes(&down),
            });
        }
    }
    Ok(())
}

/// A moment of the simulated schedule: an offset from the start, then, among things at
/// the same offset, the order they happen in. The runner issues the steps due at one
/// offset in file order, so a step with a fixed offset takes its index; a moment counted
/// at its worst comes first (a fault) or last (a return) among those at its offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Moment {
    ms: i64,
    order: i64,
}

impl Moment {
    /// Before anything else at `ms`.
    fn first(ms: i64) -> Self {
        Moment {
            ms,
            order: i64::MIN,
        }
    }

    /// After everything else at `ms`.
    fn last(ms: i64) -> Self {
        Moment {
            ms,
            order: i64::MAX,
        }
    }
}

/// When a step may be issued, in milliseconds from the start.
#[derive(Debug, Clone)]
struct Issue {
    /// At the earliest.
    earliest: i64,
    /// At the latest; `None`: no bound (it waits on a step that has none).
    latest: Option<i64>,
    /// Its time is written as an offset (`at:`): earliest and latest are that offset.
    fixed: bool,
    /// The steps it follows, directly or not (`after:`, and a `when:`'s `since`).
    follows: BTreeSet<usize>,
}

/// When each step may be issued. An `at:` step is placed at its offset. A step
/// `after:` another comes its delay after that step finished, and an action takes from
/// no time to its `timeout`. A `when:` step comes its delay after its condition is first
/// seen, which is from the moment its `since` step was issued (a condition that already
/// holds counts) to that moment plus its own `timeout` (after which the step gives up and
/// the run ends).
///
/// Not counted: the runner issues one step at a time, so a step may also wait for an
/// earlier action still running. That moves later steps with it, in the same order, so it
/// changes no overlap between steps placed in time by their offsets.
fn issue_times(exp: &Experiment, timers: &ClusterTimers) -> Vec<Issue> {
    let index: BTreeMap<&str, usize> = exp
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    let mut issues: Vec<Option<Issue>> = vec![None; exp.steps.len()];
    for i in 0..exp.steps.len() {
        issue_of(exp, timers, &index, &mut issues, i, &mut BTreeSet::new());
    }
    issues
        .into_iter()
        .map(|i| i.expect("every step was placed"))
        .collect()
}

/// Places step `i`, and first the steps it follows; `placing` guards against a cycle,
/// which validation rules out (a step it cannot place has no latest time).
fn issue_of(
    exp: &Experiment,
    timers: &ClusterTimers,
    index: &BTreeMap<&str, usize>,
    issues: &mut Vec<Option<Issue>>,
    i: usize,
    placing: &mut BTreeSet<usize>,
) -> Issue {
    if let Some(known) = &issues[i] {
        return known.clone();
    }
    let unplaced = Issue {
        earliest: 0,
        latest: None,
        fixed: false,
        follows: BTreeSet::new(),
    };
    if !placing.insert(i) {
        return unplaced;
    }
    let step = &exp.steps[i];
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let mut after = |name: &str, placing: &mut BTreeSet<usize>| {
        index
            .get(name)
            .map(|&p| (p, issue_of(exp, timers, index, issues, p, placing)))
    };
    let issue = match &step.at {
        StepTime::Offset(b) => {
            let at = ms(resolve_cluster_bound(b, timers));
            Issue {
                earliest: at,
                latest: Some(at),
                fixed: true,
                follows: BTreeSet::new(),
            }
        }
        StepTime::AfterStep { step: prev, delay } => {
            let delay = ms(resolve_cluster_bound(delay, timers));
            match after(prev, placing) {
                Some((p, prev)) => {
                    let took = ms(exp.steps[p].timeout);
                    let mut follows = prev.follows.clone();
                    follows.insert(p);
                    Issue {
                        earliest: prev.earliest.saturating_add(delay),
                        latest: prev
                            .latest
                            .map(|l| l.saturating_add(took).saturating_add(delay)),
                        fixed: false,
                        follows,
                    }
                }
                None => unplaced,
            }
        }
        StepTime::When { delay, since, .. } => {
            let delay = ms(resolve_cluster_bound(delay, timers));
            let waits = ms(step.timeout);
            let from = match since {
                None => Some((
                    Issue {
                        earliest: 0,
                        latest: Some(0),
                        fixed: true,
                        follows: BTreeSet::new(),
                    },
                    None,
                )),
                Some(s) => after(s, placing).map(|(p, issue)| (issue, Some(p))),
            };
            match from {
                Some((from, p)) => {
                    let mut follows = from.follows.clone();
                    follows.extend(p);
                    Issue {
                        earliest: from.earliest.saturating_add(delay),
                        latest: from
                            .latest
                            .map(|l| l.saturating_add(waits).saturating_add(delay)),
                        fixed: false,
                        follows,
                    }
                }
                None => unplaced,
            }
        }
    };
    placing.remove(&i);
    issues[i] = Some(issue.clone());
    issue
}

/// Whether step `later` is issued after step `earlier` whatever the timing: it follows
/// it, or follows a step with a later offset (or the same offset, written after it), or
/// cannot come before `earlier` may come at its latest.
fn certainly_after(issues: &[Issue], later: usize, earlier: usize) -> bool {
    let l = &issues[later];
    let e = &issues[earlier];
    let key = |i: usize| (issues[i].earliest, i);
    l.follows.contains(&earlier)
        || (e.fixed
            && std::iter::once(later)
                .chain(l.follows.iter().copied())
                .any(|d| issues[d].fixed && key(d) > key(earlier)))
        || e.latest.is_some_and(|latest| l.earliest > latest)
}

/// One node out of service because of one fault step, as planned at its worst.
#[derive(Debug, Clone)]
struct Outage {
    /// The fault's step (index).
    step: usize,
    /// The node.
    node: String,
    /// When it may go out, at the earliest.
    from: Moment,
    /// When it is back, at the latest; `None`: at the end of the run.
    to: Option<Moment>,
    /// A time was counted at its worst (a step placed after another or an observed state).
    worst_case: bool,
    /// A reboot, counted as [`outages`] says.
    reboot: bool,
    /// Brought back by a power-on: counted down until the node has had time to boot.
    booting: bool,
    /// A `run` with an undo or a `NoExecute` taint: counted down though faultline cannot
    /// see the node go out.
    by_parameters: bool,
    /// The steps issued only once this node is seen back from this outage: those gated on
    /// it being Ready again (`when: {node: N, is: Ready, since: S}`, `S` the fault's step or
    /// the step bringing the node back from it), and every step that follows one of them.
    /// Such a step and this outage are never in effect together, whatever their times.
    back_before: BTreeSet<usize>,
    /// The steps this outage's step follows (its [`Issue::follows`]).
    follows: BTreeSet<usize>,
}

/// How long faultline waits for a rebooted node to answer with a new boot id: a reboot
/// not back by then is a step error that ends the run.
fn reboot_bound() -> std::time::Duration {
    crate::run::floor::proofs::within(Proof::BootIdChanged)
}

/// Every node's outages, at their worst. A fault takes its nodes out from the moment its
/// step may be issued at the earliest. The node is back once a step that undoes that
/// fault on it (`kubelet-start` after `kubelet-stop`, `heal` after `partition`, …; any
/// step that brings a node back after a fault nothing undoes, such as `delete-node`), and
/// that is certainly issued after the fault, is issued, at the latest; when none is, at
/// the end of the run, when the safety net undoes what is left.
///
/// A reboot brings the node back by itself, but faultline cannot know when: it counts as
/// down until faultline stops waiting for the node to answer with a new boot id, the
/// step's `timeout` plus the reboot's proof bound (10 min) after its latest issue, when
/// the run ends anyway if the node has not answered.
fn outages(exp: &Experiment, targets: &ResolvedTargets, timers: &ClusterTimers) -> Vec<Outage> {
    let issues = issue_times(exp, timers);
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let order = |i: usize| i64::try_from(i).unwrap_or(i64::MAX);
    let mut out = Vec::new();
    for (f, fault_step) in exp.steps.iter().enumerate() {
        let info = fault::info(&fault_step.action);
        if !fault::counts_as_down(&fault_step.action) {
            continue;
        }
        let issue = &issues[f];
        let from = if issue.fixed {
            Moment {
                ms: issue.earliest,
                order: order(f),
            }
        } else {
            Moment::first(issue.earliest)
        };
        for node in fault_step.nodes(targets) {
            let mut booting = false;
            let (to, worst_case) = if info.restarts_machine {
                let back = issue.latest.map(|l| {
                    Moment::last(
                        l.saturating_add(ms(fault_step.timeout))
                            .saturating_add(ms(reboot_bound())),
                    )
                });
                (back, !issue.fixed)
            } else {
                let no_inverse = fault::inverse(&fault_step.action).is_none();
                let back = exp
                    .steps
                    .iter()
                    .enumerate()
                    .filter(|(b, step)| {
                        fault::info(&step.action).brings_node_back
                            && step.nodes(targets).contains(node)
                            && (no_inverse || fault::undoes(&step.action, &fault_step.action))
                            && certainly_after(&issues, *b, f)
                    })
                    .filter_map(|(b, step)| {
                        let i = &issues[b];
                        let mut at = i.latest?;
                        // A power-on starts the machine: the node is back once it has
                        // booted, which faultline waits for as long as for a reboot.
                        let boots = fault::info(&step.action).restarts_machine;
                        if boots {
                            at = at
                                .saturating_add(ms(step.timeout))
                                .saturating_add(ms(reboot_bound()));
                        }
                        Some(if i.fixed && !boots {
                            (
                                Moment {
                                    ms: at,
                                    order: order(b),
                                },
                                false,
                                boots,
                            )
                        } else {
                            (Moment::last(at), !i.fixed, boots)
                        })
                    })
                    .min();
                booting = back.is_some_and(|(_, _, boots)| boots);
                (
                    back.map(|(m, _, _)| m),
                    !issue.fixed || back.is_some_and(|(_, worst, _)| worst),
                )
            };
            out.push(Outage {
                step: f,
                node: node.clone(),
                from,
                to,
                worst_case,
                reboot: info.restarts_machine,
                booting,
                by_parameters: !info.takes_node_down,
                back_before: gated_on_return(exp, targets, &issues, f, node),
                follows: issue.follows.clone(),
            });
        }
    }
    out
}

/// The outages in effect at `at`.
fn down_at(outages: &[Outage], at: Moment) -> Vec<&Outage> {
    outages
        .iter()
        .filter(|o| o.from <= at && o.to.is_none_or(|to| at < to))
        .collect()
}

/// The steps issued only once `node` is seen back from the fault of step `f` (see
/// [`Outage::back_before`]): a step whose `when:` waits for a target holding that node to
/// be Ready (every node of it is, then: that one node, or a roll's batch), judged from `f`
/// or from a step that brings the node back from `f` (and comes certainly after it), and
/// every step that follows such a step.
///
/// Judged from another step, Ready may already hold before the fault took the node out
/// (a state holding when it is judged from counts), so that gate is counted at its worst,
/// as any other. A run checks the interlock again when each step is due
/// ([`crate::run::floor::interlock`]), from the nodes it sees down then.
fn gated_on_return(
    exp: &Experiment,
    targets: &ResolvedTargets,
    issues: &[Issue],
    f: usize,
    node: &str,
) -> BTreeSet<usize> {
    let fault_step = &exp.steps[f];
    let no_inverse = fault::inverse(&fault_step.action).is_none();
    let judged_from_return = |since: &str| {
        since == fault_step.name
            || exp.steps.iter().enumerate().any(|(b, step)| {
                step.name == since
                    && fault::info(&step.action).brings_node_back
                    && step.nodes(targets).iter().any(|n| n == node)
                    && (no_inverse || fault::undoes(&step.action, &fault_step.action))
                    && certainly_after(issues, b, f)
            })
    };
    let gates: BTreeSet<usize> = exp
        .steps
        .iter()
        .enumerate()
        .filter(|(_, step)| match &step.at {
            StepTime::When {
                subject: Subject::Node { target },
                state: StateMatch::Node(NodeStateMatch::Ready),
                since: Some(since),
                ..
            } => {
                targets
                    .get(target)
                    .is_some_and(|n| n.iter().any(|n| n == node))
                    && judged_from_return(since)
            }
            _ => false,
        })
        .map(|(g, _)| g)
        .collect();
    (0..exp.steps.len())
        .filter(|h| gates.contains(h) || issues[*h].follows.iter().any(|g| gates.contains(g)))
        .collect()
}

/// Beyond this many steps that end outages by their gates in effect at one moment, every
/// outage in effect is counted together (the old worst case) rather than each way the
/// gates may have been passed.
const MAX_GATES_AT_ONCE: usize = 12;

/// The worst set of outages in effect at `at` that `refused` refuses, if any. Outages in
/// effect at one moment by their times may still exclude each other: a step gated on a
/// node being back ([`Outage::back_before`]) is never issued while that node is still out.
/// So each way the gated steps may stand then (issued or not, a step issued only with
/// those it follows) is a set of outages of its own; the refused one with the most nodes
/// is returned.
fn refused_at<'a>(
    outages: &'a [Outage],
    at: Moment,
    refused: &dyn Fn(&[&Outage]) -> bool,
) -> Option<Vec<&'a Outage>> {
    let down = down_at(outages, at);
    let gates: Vec<usize> = down
        .iter()
        .map(|o| o.step)
        .filter(|s| down.iter().any(|o| o.back_before.contains(s)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if gates.is_empty() || gates.len() > MAX_GATES_AT_ONCE {
        return refused(&down).then_some(down);
    }
    let follows = |s: usize| {
        down.iter()
            .find(|o| o.step == s)
            .map(|o| &o.follows)
            .expect("a gate is the step of an outage in effect")
    };
    (0u32..1 << gates.len())
        .filter_map(|mask| {
            let issued: BTreeSet<usize> = gates
                .iter()
                .enumerate()
                .filter(|(bit, _)| mask & (1 << bit) != 0)
                .map(|(_, g)| *g)
                .collect();
            let consistent = issued.iter().all(|g| {
                gates
                    .iter()
                    .all(|e| !follows(*g).contains(e) || issued.contains(e))
            });
            if !consistent {
                return None;
            }
            let set: Vec<&Outage> = down
                .iter()
                .copied()
                .filter(|o| !gates.contains(&o.step) || issued.contains(&o.step))
                .filter(|o| o.back_before.is_disjoint(&issued))
                .collect();
            refused(&set).then_some(set)
        })
        .collect::<Vec<_>>()
        .into_iter()
        // The first of those with the most nodes (`max_by_key` keeps the last).
        .rev()
        .max_by_key(|set| nodes_of(set.iter().copied()).len())
}

/// The offset at which `refused` stops holding after `at`, where it holds; `None`: it
/// holds to the end of the run.
fn until_ms(outages: &[Outage], at: Moment, refused: &dyn Fn(&[&Outage]) -> bool) -> Option<i64> {
    let mut changes: Vec<Moment> = outages
        .iter()
        .flat_map(|o| [Some(o.from), o.to])
        .flatten()
        .filter(|m| *m > at)
        .collect();
    changes.sort();
    changes
        .into_iter()
        .find(|m| refused_at(outages, *m, refused).is_none())
        .map(|m| m.ms)
}

/// The outages of `down` on control-plane nodes.
fn on_control_plane<'a>(down: &[&'a Outage], control_plane: &BTreeSet<String>) -> Vec<&'a Outage> {
    down.iter()
        .copied()
        .filter(|o| control_plane.contains(&o.node))
        .collect()
}

fn nodes_of<'a>(down: impl Iterator<Item = &'a Outage>) -> BTreeSet<String> {
    down.map(|o| o.node.clone()).collect()
}

/// The names of the steps behind `down`, in file order.
fn step_names(exp: &Experiment, down: &[&Outage]) -> Vec<String> {
    let steps: BTreeSet<usize> = down.iter().map(|o| o.step).collect();
    steps
        .into_iter()
        .map(|i| exp.steps[i].name.clone())
        .collect()
}

/// How the times of `down` were counted, where not simply as written.
fn notes(down: &[&Outage]) -> String {
    let mut notes = String::new();
    if down.iter().any(|o| o.worst_case) {
        notes.push_str(
            " Steps placed after another step or an observed state are counted at their worst: \
             a fault as early as it can come, a return as late.",
        );
    }
    if down.iter().any(|o| o.booting) {
        notes.push_str(&format!(
            " A node powered on counts as down until it has had time to boot: its power-on's \
             timeout plus {}.",
            crate::timeline::format_secs(reboot_bound())
        ));
    }
    if down.iter().any(|o| o.by_parameters) {
        notes.push_str(
            " A `run` with an `undo` counts as down until the end of the run (faultline cannot \
             read what a command does), and a `NoExecute` taint until its `untaint`.",
        );
    }
    if down.iter().any(|o| o.reboot) {
        notes.push_str(&format!(
            " A reboot counts as down until faultline stops waiting for the node to answer \
             again: its step's timeout plus {}.",
            crate::timeline::format_secs(reboot_bound())
        ));
    }
    notes
}

/// Refuses a context that is not on a non-empty allow-list. An empty list allows any
/// context (the inventory pins one anyway).
pub(crate) fn check_context(
    context: &str,
    allowed: &[String],
    list: AllowList,
) -> Result<(), SafetyError> {
    if allowed.is_empty() || allowed.iter().any(|a| a == context) {
        Ok(())
    } else {
        Err(SafetyError::ContextNotAllowed {
            context: context.to_string(),
            allowed: allowed.join(", "),
            list,
        })
    }
}

/// The two allow-lists a run's kube context must pass, so a refusal says which to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AllowList {
    /// The operator's, on the command line (`--allow-context`).
    CommandLine,
    /// The inventory's `cluster.allowedContexts`.
    Inventory,
}

impl AllowList {
    fn name(self) -> &'static str {
        match self {
            AllowList::CommandLine => "the command line's allow-list (--allow-context)",
            AllowList::Inventory => "the inventory's allow-list (cluster.allowedContexts)",
        }
    }

    fn fix(self, context: &str) -> String {
        match self {
            AllowList::CommandLine => {
                format!("Add --allow-context {context} if this is the cluster you mean")
            }
            AllowList::Inventory => format!(
                "Add `{context}` to the inventory's cluster.allowedContexts if this is the \
                 cluster you mean"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
