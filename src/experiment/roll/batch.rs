//! The batches of a rolling step: its nodes, in roll order, taken `maxUnavailable` at a
//! time, a batch never holding two nodes of one zone for an `order: zone` roll unless it
//! says `sameZone: allow`.

use std::collections::BTreeMap;

use super::node_target;
use crate::experiment::model::{Roll, RollOrder};

/// Where a node's zone comes from: `None` when the zones are not known (an offline check
/// on the files alone); else a node's zone, `None` for a node without one (the nodes
/// without a zone count as one zone, as [`super::order_nodes`] groups them).
pub(crate) type Zones<'a> = Option<&'a dyn Fn(&str) -> Option<String>>;

/// `nodes` (in roll order) cut into batches: a batch ends when it has `maxUnavailable`
/// nodes, or, for an `order: zone` roll that keeps zones apart, when the next node is in a
/// zone the batch already has (the batch is smaller then). Zones not known: by count
/// alone, unless `targets` already holds this roll's batches (a rehearsal on a record, whose
/// run cut them knowing the zones), which are taken as they are.
pub(crate) fn batches(
    roll: &Roll,
    target: &str,
    nodes: &[String],
    targets: &BTreeMap<String, Vec<String>>,
    zones: Zones<'_>,
) -> Vec<Vec<String>> {
    let n = roll.max_unavailable.max(1) as usize;
    let apart = roll.order == RollOrder::Zone && !roll.same_zone;
    let zone_of = match zones {
        Some(z) if apart => Some(z),
        None if apart => {
            if let Some(known) = known_batches(target, nodes, targets, n) {
                return known;
            }
            None
        }
        _ => None,
    };
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut zones_in: Vec<Option<String>> = Vec::new();
    for node in nodes {
        let zone = zone_of.map(|z| z(node));
        let full = out.last().is_none_or(|b| b.len() >= n);
        let clash = zone.is_some() && zones_in.contains(&zone.clone().flatten());
        if full || clash {
            out.push(Vec::new());
            zones_in.clear();
        }
        if let Some(z) = zone {
            zones_in.push(z);
        }
        if let Some(batch) = out.last_mut() {
            batch.push(node.clone());
        }
    }
    out
}

/// The batches `targets` already holds for a roll of `nodes` on `target`: one-node or
/// more targets named as a batch's ([`node_target`] of its nodes joined by commas), each of
/// at most `n` nodes, covering `nodes` exactly once; in the order of their first nodes.
fn known_batches(
    target: &str,
    nodes: &[String],
    targets: &BTreeMap<String, Vec<String>>,
    n: usize,
) -> Option<Vec<Vec<String>>> {
    let mut found: Vec<Vec<String>> = targets
        .iter()
        .filter(|(name, batch)| {
            !batch.is_empty()
                && batch.len() <= n
                && **name == node_target(target, &batch.join(","))
                && batch.iter().all(|b| nodes.contains(b))
        })
        .map(|(_, batch)| batch.clone())
        .collect();
    let mut covered: Vec<&String> = found.iter().flatten().collect();
    covered.sort();
    let mut all: Vec<&String> = nodes.iter().collect();
    all.sort();
    if covered != all {
        return None;
    }
    let position = |node: &String| nodes.iter().position(|n| n == node);
    found.sort_by_key(|b| b.first().and_then(position));
    Some(found)
}
