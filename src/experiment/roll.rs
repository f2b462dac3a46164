//! Rolling steps (`roll:`): one step that does its action (or each action of its
//! `sequence:`) to every node of its target in turn, `maxUnavailable` nodes at a time,
//! expanded, once the target is resolved to nodes, into one step per batch (per action).
//!
//! Batch `i + 1`'s first step is gated on batch `i`: `when: {node: <batch i>, is: Ready,
//! since: <batch i's last step>}` with the roll's `settle` as `delay` and its `timeout` as
//! the step's timeout, the form a roll written by hand takes
//! (`experiments/rolling-reboot.yaml`); a node target is Ready once every node of it is, so
//! a batch waits for the slowest of the one before. Within a batch each action of a
//! sequence comes `after:` the one before, or once the batch is Ready again after a reboot
//! ([`sequence`]). So the loop, the run-time interlock (which holds a step until the nodes
//! it waits on are seen back), the journal, the undo and the reports see ordinary steps.
//! Each batch gets a target of its own, `<target>@<node>` (`<target>@<n1>,<n2>` for more
//! than one node): a name no experiment can write (targets are DNS-1123 labels).
//!
//! The expansion is done where the targets are known: by the run after resolving them
//! (`run::preflight::prepare::resolve`, which orders them first, see [`order_nodes`]), by
//! the blast-radius check on the targets the files alone resolve, and by a rehearsal on
//! the record's targets. A run's record holds the expanded experiment.

use std::collections::BTreeMap;

use super::model::{
    Experiment, NodeSelector, NodeStateMatch, Roll, RollOrder, StateMatch, Step, StepTime, Subject,
    TargetSpec, Until,
};
#[cfg(test)]
use order::interleave_zones;
pub(crate) use order::{NodeFacts, OrderError, order_nodes, roll_nodes};

/// The one-node target a rolling step's expansion gives `node` of `target`.
pub(crate) fn node_target(target: &str, node: &str) -> String {
    format!("{target}@{node}")
}

/// The name of the step a rolling step named `step` expands to on `node`.
pub(crate) fn node_step(step: &str, node: &str) -> String {
    format!("{step} ({node})")
}

/// The roll and nodes a step of an expanded roll stands for, `(roll, nodes)`: a step
/// named `<roll> (<nodes>)` ([`node_step`]; a sequence's steps go on with ` <action>`) on
/// the target `<target>@<nodes>` ([`node_target`]), the nodes one, or a batch of
/// `maxUnavailable` joined by `,` in the target and `, ` in the name: a pairing no
/// experiment can write by hand. Reports group a record's steps by it.
pub(crate) fn roll_member(step: &Step) -> Option<(&str, Vec<&str>)> {
    let (_, batch) = step.target.as_deref()?.split_once('@')?;
    let nodes: Vec<&str> = batch.split(',').collect();
    if nodes.iter().any(|n| n.is_empty()) {
        return None;
    }
    let written = format!(" ({})", nodes.join(", "));
    let at = step.name.rfind(&written)?;
    let rest = &step.name[at + written.len()..];
    let roll = &step.name[..at];
    (!roll.is_empty() && (rest.is_empty() || rest.starts_with(' '))).then_some((roll, nodes))
}

/// Whether the experiment has a rolling step.
pub(crate) fn has_rolls(exp: &Experiment) -> bool {
    exp.steps.iter().any(|s| s.roll.is_some())
}

/// The experiment with every rolling step whose target `targets` resolves expanded (module
/// doc), the zones not known (batches cut by count alone, or as `targets` already holds
/// them: see [`batch::batches`]). See [`expand_in_zones`].
pub(crate) fn expand(
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
) -> (Experiment, BTreeMap<String, Vec<String>>) {
    expand_in_zones(exp, targets, None)
}

/// The experiment with every rolling step whose target `targets` resolves expanded into
/// its steps, batch by batch ([`batch::batches`], with `zones`), action by action (module
/// doc), and `targets` with each batch's own target added. A rolling step whose target is
/// not resolved (an offline check that cannot resolve it) stays one step. References to a
/// rolling step are to its first step for the moment it is issued (`since`, `until`, a
/// `when:`'s `since`) and to its last for the moment it finished (`after`). An experiment
/// without rolling steps comes back as it is.
pub(crate) fn expand_in_zones(
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
    zones: batch::Zones<'_>,
) -> (Experiment, BTreeMap<String, Vec<String>>) {
    let given = targets;
    let mut targets = targets.clone();
    if !has_rolls(exp) {
        return (exp.clone(), targets);
    }
    let mut out = exp.clone();
    out.steps.clear();
    // Roll name → (its first step, its last step).
    let mut renamed: BTreeMap<String, (String, String)> = BTreeMap::new();
    for step in &exp.steps {
        let mut step = step.clone();
        rename_step_refs(&mut step, &renamed);
        let batches = match (&step.roll, &step.target) {
            (Some(roll), Some(target)) => given
                .get(target)
                .map(|nodes| roll_nodes(roll, nodes))
                .filter(|n| !n.is_empty())
                .map(|nodes| batch::batches(roll, target, &nodes, given, zones)),
            _ => None,
        };
        let (Some(roll), Some(target), Some(batches)) =
            (step.roll.clone(), step.target.clone(), batches)
        else {
            // Not a roll, or one whose nodes are not known here: it stays as written.
            out.steps.push(step);
            continue;
        };
        let actions = sequence::actions(&step, &roll);
        let mut previous: Option<(String, String)> = None;
        let mut first: Option<String> = None;
        for nodes in &batches {
            let own = node_target(&target, &nodes.join(","));
            targets.insert(own.clone(), nodes.clone());
            if !out.targets.iter().any(|t| t.name == own) {
                out.targets.push(TargetSpec {
                    name: own.clone(),
                    selector: NodeSelector {
                        names: nodes.clone(),
                        ..NodeSelector::default()
                    },
                    count: Some(u32::try_from(nodes.len()).unwrap_or(u32::MAX)),
                });
            }
            let (at, timeout) = match &previous {
                None => (step.at.clone(), None),
                Some((prev_step, prev_target)) => (
                    StepTime::When {
                        subject: Subject::Node {
                            target: prev_target.clone(),
                        },
                        state: StateMatch::Node(NodeStateMatch::Ready),
                        delay: roll.settle.clone(),
                        since: Some(prev_step.clone()),
                    },
                    Some(roll.timeout),
                ),
            };
            let base = node_step(&step.name, &nodes.join(", "));
            let steps = sequence::steps(&base, &own, &actions, at, timeout, &roll);
            first.get_or_insert_with(|| steps[0].name.clone());
            let last = steps[steps.len() - 1].name.clone();
            out.steps.extend(steps);
            previous = Some((last, own));
        }
        if let (Some(first), Some((last, _))) = (first, previous) {
            renamed.insert(step.name.clone(), (first, last));
        }
    }
    for e in &mut out.expectations {
        if let Some((first, _)) = renamed.get(&e.since) {
            e.since = first.clone();
        }
        if let super::model::Check::Stays {
            until: Until::Step(s),
            ..
        }
        | super::model::Check::Never {
            until: Until::Step(s),
            ..
        } = &mut e.check
            && let Some((first, _)) = renamed.get(s.as_str())
        {
            *s = first.clone();
        }
    }
    (out, targets)
}

/// A step's references to expanded rolls, to the steps that stand for them now.
fn rename_step_refs(step: &mut Step, renamed: &BTreeMap<String, (String, String)>) {
    match &mut step.at {
        StepTime::AfterStep { step: prev, .. } => {
            if let Some((_, last)) = renamed.get(prev.as_str()) {
                *prev = last.clone();
            }
        }
        StepTime::When {
            since: Some(since), ..
        } => {
            if let Some((first, _)) = renamed.get(since.as_str()) {
                *since = first.clone();
            }
        }
        StepTime::Offset(_) | StepTime::When { since: None, .. } => {}
    }
}

/// A rolling step in words, for `plan` (which shows it as one step where its nodes are
/// not known): "rolls through `workers` one node at a time, by name; the next node once
/// the one before is Ready again + 30s, giving up after 10m".
pub(crate) fn describe(roll: &Roll, target: &str) -> String {
    let order = match (&roll.order, roll.same_zone) {
        (RollOrder::Zone, false) if roll.max_unavailable > 1 => {
            "by zone (zones interleaved, never two nodes of one zone at once)".to_string()
        }
        (RollOrder::Zone, _) => "by zone (zones interleaved)".to_string(),
        (RollOrder::Name, _) => "by name".to_string(),
        (RollOrder::Role, _) => {
            "by role (workers first, then the control plane, by name within each)".to_string()
        }
        (RollOrder::List(list), _) => format!("in the order listed ({})", list.join(", ")),
    };
    let sequence = if roll.sequence.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = roll
            .sequence
            .iter()
            .map(|a| super::fault::action_name(&a.action))
            .collect();
        format!(", doing {} to each", names.join(" → "))
    };
    let (at_a_time, next) = match roll.max_unavailable {
        1 => ("one node at a time".to_string(), "node once the one"),
        n => (format!("{n} nodes at a time"), "nodes once every one"),
    };
    format!(
        "rolls through `{target}` {at_a_time}, {order}{sequence}; the next {next} \
         before is Ready again + {}, giving up after {}",
        roll.settle,
        super::model::format_secs(roll.timeout),
    )
}

mod batch;
mod order;
mod sequence;

#[cfg(test)]
mod order_tests;
#[cfg(test)]
mod sequence_tests;
#[cfg(test)]
mod tests;
