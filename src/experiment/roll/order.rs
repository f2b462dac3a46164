//! The order a rolling step takes its target's nodes in (`order:` of `roll:`): by name,
//! zones interleaved, workers before the control plane, or as the experiment lists them.
//!
//! `name` and a list are applied by [`roll_nodes`] alone, from the experiment; `zone` and
//! `role` need what only the cluster knows (a node's zone, its role), so the run puts the
//! target's nodes in that order first ([`order_nodes`]), and the run's record keeps them
//! so, for a rehearsal to take them in the same order.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::experiment::model::{Experiment, Roll, RollOrder};

/// What the run knows of a node, for the orders that need the cluster.
pub(crate) struct NodeFacts<'a> {
    /// A node's zone (`None`: a node without one; those make one group).
    pub zone_of: &'a dyn Fn(&str) -> Option<String>,
    /// Whether a node is a control-plane node (by its role label).
    pub is_control_plane: &'a dyn Fn(&str) -> bool,
}

/// Why a rolling step's order does not fit the nodes its target resolved to: the run
/// refuses it before any fault, rather than drop, add or guess a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OrderError {
    /// The list names a node the target did not resolve to.
    #[error(
        "step `{step}`: `roll.order` lists node `{node}`, which is not one of target \
         `{target}`'s nodes ({nodes}); list only the target's nodes"
    )]
    NotInTarget {
        /// The rolling step.
        step: String,
        /// Its target.
        target: String,
        /// The node listed.
        node: String,
        /// The target's nodes, joined by `, `.
        nodes: String,
    },
    /// The list names a node twice.
    #[error("step `{step}`: `roll.order` lists node `{node}` more than once")]
    Twice {
        /// The rolling step.
        step: String,
        /// The node listed twice.
        node: String,
    },
    /// The target resolved to nodes the list does not name.
    #[error(
        "step `{step}`: target `{target}` resolved to {missing}, which `roll.order` does not \
         list; list every node of the target in the place it goes, or narrow the target"
    )]
    NotListed {
        /// The rolling step.
        step: String,
        /// Its target.
        target: String,
        /// The nodes left out, joined by `, `.
        missing: String,
    },
    /// Two rolls on one target ask for two orders only the cluster can give: the target
    /// holds its nodes in one order.
    #[error(
        "steps `{first}` (`order: {first_order}`) and `{second}` (`order: {second_order}`) \
         roll through target `{target}` in two different orders; give one of them a target \
         of its own"
    )]
    TwoOrders {
        /// The target.
        target: String,
        /// The first rolling step.
        first: String,
        /// Its order.
        first_order: &'static str,
        /// The second rolling step.
        second: String,
        /// Its order.
        second_order: &'static str,
    },
}

/// Puts the nodes of each target a rolling step with `order: zone` or `order: role` goes
/// through in that order, and checks each `order:` list against its target's nodes.
///
/// `zone`: zones taken in turn (by zone name), nodes by name within a zone, so two nodes
/// one after the other are in different zones whenever another zone still has nodes left.
/// `role`: the worker nodes by name, then the control-plane nodes by name (zones are not
/// interleaved within a group). A list must name every node of the target, each once
/// ([`OrderError`]); [`roll_nodes`] applies it. Targets of `order: name` rolls are left as
/// they are: [`roll_nodes`] sorts those itself.
pub(crate) fn order_nodes(
    exp: &Experiment,
    targets: &mut BTreeMap<String, Vec<String>>,
    facts: &NodeFacts<'_>,
) -> Result<(), OrderError> {
    // Target → the first roll that put its nodes in a cluster-given order.
    let mut ordered: BTreeMap<&str, (&str, &RollOrder)> = BTreeMap::new();
    for step in &exp.steps {
        let (Some(roll), Some(target)) = (&step.roll, &step.target) else {
            continue;
        };
        let Some(nodes) = targets.get_mut(target) else {
            continue;
        };
        match &roll.order {
            RollOrder::Name => {}
            RollOrder::List(list) => check_list(&step.name, target, nodes, list)?,
            order @ (RollOrder::Zone | RollOrder::Role) => {
                if let Some((first, first_order)) = ordered.get(target.as_str()) {
                    if *first_order != order {
                        return Err(OrderError::TwoOrders {
                            target: target.clone(),
                            first: first.to_string(),
                            first_order: first_order.word(),
                            second: step.name.clone(),
                            second_order: order.word(),
                        });
                    }
                    continue;
                }
                ordered.insert(target, (&step.name, order));
                *nodes = match order {
                    RollOrder::Zone => interleave_zones(nodes, facts.zone_of),
                    _ => workers_first(nodes, facts.is_control_plane),
                };
            }
        }
    }
    Ok(())
}

/// That `list` names every one of `nodes`, each once, and nothing else.
fn check_list(
    step: &str,
    target: &str,
    nodes: &[String],
    list: &[String],
) -> Result<(), OrderError> {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for node in list {
        if !nodes.contains(node) {
            return Err(OrderError::NotInTarget {
                step: step.to_string(),
                target: target.to_string(),
                node: node.clone(),
                nodes: if nodes.is_empty() {
                    "none".to_string()
                } else {
                    nodes.join(", ")
                },
            });
        }
        if !seen.insert(node) {
            return Err(OrderError::Twice {
                step: step.to_string(),
                node: node.clone(),
            });
        }
    }
    let missing: Vec<&str> = nodes
        .iter()
        .map(String::as_str)
        .filter(|n| !seen.contains(n))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(OrderError::NotListed {
        step: step.to_string(),
        target: target.to_string(),
        missing: missing.join(", "),
    })
}

/// `nodes` with the zones interleaved, as [`order_nodes`] describes.
pub(super) fn interleave_zones(
    nodes: &[String],
    zone_of: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut by_zone: BTreeMap<Option<String>, Vec<String>> = BTreeMap::new();
    for n in nodes {
        by_zone.entry(zone_of(n)).or_default().push(n.clone());
    }
    let mut queues: Vec<VecDeque<String>> = by_zone
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

/// `nodes` workers first, then control-plane nodes, by name within each.
fn workers_first(nodes: &[String], is_control_plane: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out = nodes.to_vec();
    out.sort_by_cached_key(|n| (is_control_plane(n), n.clone()));
    out.dedup();
    out
}

/// The nodes a rolling step goes through, in order: its target's, by name for `order:
/// name`, in the list's order for a list (a node the list does not name, which only an
/// offline check that did not refuse it can see, after those it names), as given (ordered
/// by [`order_nodes`]) for `order: zone` and `order: role`.
pub(crate) fn roll_nodes(roll: &Roll, nodes: &[String]) -> Vec<String> {
    let mut nodes = nodes.to_vec();
    match &roll.order {
        RollOrder::Name => {
            nodes.sort();
            nodes.dedup();
        }
        RollOrder::List(list) => {
            nodes.sort_by_key(|n| list.iter().position(|l| l == n).unwrap_or(usize::MAX));
        }
        RollOrder::Zone | RollOrder::Role => {}
    }
    nodes
}
