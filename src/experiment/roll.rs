//! Rolling steps (`roll:`): one step that does its action to every node of its target in
//! turn, expanded, once the target is resolved to nodes, into one step per node.
//!
//! Node `i + 1`'s step is gated on node `i`: `when: {node: <node i>, is: Ready, since: <node
//! i's step>}` with the roll's `settle` as `delay` and its `timeout` as the step's timeout,
//! the form a roll written by hand takes (`experiments/rolling-reboot.yaml`). So the loop,
//! the run-time interlock (which holds a step until the node before it is seen back), the
//! journal, the undo and the reports see ordinary steps. Each node gets a target of its
//! own, `<target>@<node>`: a name no experiment can write (targets are DNS-1123 labels).
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

/// The one-node target a rolling step's expansion gives `node` of `target`.
pub(crate) fn node_target(target: &str, node: &str) -> String {
    format!("{target}@{node}")
}

/// The name of the step a rolling step named `step` expands to on `node`.
pub(crate) fn node_step(step: &str, node: &str) -> String {
    format!("{step} ({node})")
}

/// The roll and node a step of an expanded roll stands for, `(roll, node)`: a step named
/// `<roll> (<node>)` ([`node_step`]) on the target `<target>@<node>` ([`node_target`]), a
/// pairing no experiment can write by hand. Reports group a record's steps by it.
pub(crate) fn roll_member(step: &Step) -> Option<(&str, &str)> {
    let (_, node) = step.target.as_deref()?.split_once('@')?;
    let roll = step
        .name
        .strip_suffix(')')?
        .strip_suffix(node)?
        .strip_suffix(" (")?;
    (!roll.is_empty() && !node.is_empty()).then_some((roll, node))
}

/// Whether the experiment has a rolling step.
pub(crate) fn has_rolls(exp: &Experiment) -> bool {
    exp.steps.iter().any(|s| s.roll.is_some())
}

/// Puts the nodes of each target a rolling step with `order: zone` goes through in that
/// order: zones taken in turn (by zone name), nodes by name within a zone, so two nodes one
/// after the other are in different zones whenever another zone still has nodes left.
/// `zone_of` gives a node's zone (none: the nodes without a zone make one group). Targets
/// of `order: name` rolls are left as they are: [`expand`] sorts those itself.
pub(crate) fn order_nodes(
    exp: &Experiment,
    targets: &mut BTreeMap<String, Vec<String>>,
    zone_of: &dyn Fn(&str) -> Option<String>,
) {
    for step in &exp.steps {
        let (Some(roll), Some(target)) = (&step.roll, &step.target) else {
            continue;
        };
        if roll.order != RollOrder::Zone {
            continue;
        }
        if let Some(nodes) = targets.get_mut(target) {
            *nodes = interleave_zones(nodes, zone_of);
        }
    }
}

/// `nodes` with the zones interleaved, as [`order_nodes`] describes.
fn interleave_zones(nodes: &[String], zone_of: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut by_zone: BTreeMap<Option<String>, Vec<String>> = BTreeMap::new();
    for n in nodes {
        by_zone.entry(zone_of(n)).or_default().push(n.clone());
    }
    let mut queues: Vec<std::collections::VecDeque<String>> = by_zone
        .into_values()
        .map(|mut v| {
            v.sort();
            v.dedup();
            v.into()
        })
        .collect();
    let mut out = Vec::with_capacity(nodes.len());
    while queues.iter().any(|q| !q.is_empty()) {
        for q in &mut queues {
            if let Some(n) = q.pop_front() {
                out.push(n);
            }
        }
    }
    out
}

/// The nodes a rolling step goes through, in order: its target's, by name for `order:
/// name`, as given (ordered by [`order_nodes`]) for `order: zone`.
pub(crate) fn roll_nodes(roll: &Roll, nodes: &[String]) -> Vec<String> {
    let mut nodes = nodes.to_vec();
    if roll.order == RollOrder::Name {
        nodes.sort();
        nodes.dedup();
    }
    nodes
}

/// The experiment with every rolling step whose target `targets` resolves expanded into
/// one step per node (module doc), and `targets` with each node's own target added. A
/// rolling step whose target is not resolved (an offline check that cannot resolve it)
/// stays one step. References to a rolling step are to its first node's step for the
/// moment it is issued (`since`, `until`, a `when:`'s `since`) and to its last node's for
/// the moment it finished (`after`). An experiment without rolling steps comes back as it is.
pub(crate) fn expand(
    exp: &Experiment,
    targets: &BTreeMap<String, Vec<String>>,
) -> (Experiment, BTreeMap<String, Vec<String>>) {
    let mut targets = targets.clone();
    if !has_rolls(exp) {
        return (exp.clone(), targets);
    }
    let mut out = exp.clone();
    out.steps.clear();
    // Roll name → (first node's step, last node's step).
    let mut renamed: BTreeMap<String, (String, String)> = BTreeMap::new();
    for step in &exp.steps {
        let mut step = step.clone();
        rename_step_refs(&mut step, &renamed);
        let nodes = match (&step.roll, &step.target) {
            (Some(roll), Some(target)) => targets
                .get(target)
                .map(|nodes| roll_nodes(roll, nodes))
                .filter(|n| !n.is_empty()),
            _ => None,
        };
        let (Some(roll), Some(target), Some(nodes)) =
            (step.roll.clone(), step.target.clone(), nodes)
        else {
            // Not a roll, or one whose nodes are not known here: it stays as written.
            out.steps.push(step);
            continue;
        };
        let mut previous: Option<(String, String)> = None;
        for node in &nodes {
            let name = node_step(&step.name, node);
            let own = node_target(&target, node);
            targets.insert(own.clone(), vec![node.clone()]);
            if !out.targets.iter().any(|t| t.name == own) {
                out.targets.push(TargetSpec {
                    name: own.clone(),
                    selector: NodeSelector {
                        names: vec![node.clone()],
                        ..NodeSelector::default()
                    },
                    count: Some(1),
                });
            }
            let (at, timeout) = match &previous {
                None => (step.at.clone(), step.timeout),
                Some((prev_step, prev_target)) => (
                    StepTime::When {
                        subject: Subject::Node {
                            target: prev_target.clone(),
                        },
                        state: StateMatch::Node(NodeStateMatch::Ready),
                        delay: roll.settle.clone(),
                        since: Some(prev_step.clone()),
                    },
                    roll.timeout,
                ),
            };
            out.steps.push(Step {
                name: name.clone(),
                at,
                action: step.action.clone(),
                target: Some(own.clone()),
                timeout,
                roll: None,
            });
            previous = Some((name, own));
        }
        let first = node_step(&step.name, &nodes[0]);
        let last = node_step(&step.name, &nodes[nodes.len() - 1]);
        renamed.insert(step.name.clone(), (first, last));
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
    format!(
        "rolls through `{target}` one node at a time, by {}{}; the next node once the one \
         before is Ready again + {}, giving up after {}",
        roll.order.word(),
        if roll.order == RollOrder::Zone {
            " (zones interleaved)"
        } else {
            ""
        },
        roll.settle,
        super::model::format_secs(roll.timeout),
    )
}

#[cfg(test)]
mod tests;
