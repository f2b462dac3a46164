//! Two sides' rolls node by node: for each roll of the same name on both sides, each node
//! of it on both, each recovery stage measured from the node's own step (drained,
//! NotReady, Ready again, workloads available), compared as recovery figures are
//! (the baseline's spread widened by the tolerance of the stage's key, the noise floor),
//! so a comparison names the node and the stage that got slower.

use crate::judge::RollNode;
use crate::record::RunRecord;
use crate::series::{Series, Spread};

use super::figure::{FigureDiff, FigureKind};
use super::tolerance::Tolerance;

/// One roll on both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct RollDiff {
    /// The rolling step's name.
    pub roll: String,
    /// Each node on both sides, in now's roll order.
    pub nodes: Vec<RollNodeDiff>,
    /// Nodes rolled on one side only (a node added or removed between the runs): listed,
    /// not compared.
    pub one_side_only: Vec<String>,
}

/// One node of a roll on both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct RollNodeDiff {
    /// The node.
    pub node: String,
    /// Each stage (key `drained`, `node_not_ready`, `node_ready_again`,
    /// `workloads_available`), ms after the node's own step.
    pub stages: Vec<FigureDiff>,
}

/// The rolls of the same name on both sides, compared node by node under `tol`.
pub(super) fn roll_diffs(baseline: &Series, now: &Series, tol: &Tolerance) -> Vec<RollDiff> {
    let names =
        |s: &Series| -> Vec<String> { s.first().rolls.iter().map(|r| r.roll.clone()).collect() };
    let before = names(baseline);
    names(now)
        .into_iter()
        .filter(|r| before.contains(r))
        .map(|roll| {
            let nodes_of = |s: &Series| -> Vec<String> {
                let mut nodes: Vec<String> = Vec::new();
                for r in s.runs() {
                    for n in r
                        .rolls
                        .iter()
                        .filter(|x| x.roll == roll)
                        .flat_map(|x| &x.nodes)
                    {
                        if !nodes.contains(&n.node) {
                            nodes.push(n.node.clone());
                        }
                    }
                }
                nodes
            };
            let (b_nodes, n_nodes) = (nodes_of(baseline), nodes_of(now));
            let one_side_only = n_nodes
                .iter()
                .filter(|n| !b_nodes.contains(n))
                .chain(b_nodes.iter().filter(|n| !n_nodes.contains(n)))
                .cloned()
                .collect();
            let nodes = n_nodes
                .iter()
                .filter(|n| b_nodes.contains(n))
                .map(|node| RollNodeDiff {
                    node: node.clone(),
                    stages: stages(baseline, now, &roll, node, tol),
                })
                .collect();
            RollDiff {
                roll,
                nodes,
                one_side_only,
            }
        })
        .collect()
}

/// Each stage of `node` in `roll` on both sides.
fn stages(
    baseline: &Series,
    now: &Series,
    roll: &str,
    node: &str,
    tol: &Tolerance,
) -> Vec<FigureDiff> {
    let keys = RollNode::default().stages();
    keys.iter()
        .enumerate()
        .map(|(i, (key, label, _))| {
            let spread = |s: &Series| {
                Spread::of(
                    s.runs()
                        .iter()
                        .map(|r| stage_of(r, roll, node, i).map(|ms| ms as f64)),
                )
            };
            let allowance = tol.for_key(key);
            FigureDiff::new(
                key,
                &format!("roll `{roll}`, {node}: {label}"),
                FigureKind::Recovery,
                spread(baseline),
                spread(now),
                |median| allowance.ms(median),
                Some(tol.noise_floor),
            )
        })
        // A stage observed on neither side (a reboot drains nothing) says nothing.
        .filter(|d| d.movement != super::Movement::Neither)
        .collect()
}

/// Stage `i` (in [`RollNode::stages`] order) of `node` in `roll` of one run.
fn stage_of(r: &RunRecord, roll: &str, node: &str, i: usize) -> Option<i64> {
    r.rolls
        .iter()
        .filter(|x| x.roll == roll)
        .flat_map(|x| &x.nodes)
        .find(|n| n.node == node)
        .and_then(|n| n.stages()[i].2)
}

#[cfg(test)]
mod tests;
