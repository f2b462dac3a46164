//! A rolling step's settings (`roll:` and `sequence:` of a step): how it goes through the
//! nodes of its target, how many at a time, and what it does to each.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Action, Bound};

/// How a rolling step goes through its target's nodes: `max_unavailable` at a time (a
/// batch), in `order`, the next batch's step issued once every node of the batch before is
/// seen Ready again and `settle` has passed; a node not Ready within `timeout` of its step
/// stops the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roll {
    /// In which order the nodes are taken.
    pub order: RollOrder,
    /// How long after a node is seen Ready again the next node's step is issued.
    pub settle: Bound,
    /// How long a node may take to be Ready again, from its step's issue, before the run
    /// stops instead of taking the next node down.
    pub timeout: Duration,
    /// `maxUnavailable`: how many nodes are taken at once (a batch), at least 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub max_unavailable: u32,
    /// `sameZone: allow`: with `order: zone`, a batch may hold two nodes of one zone. By
    /// default it never does, and is smaller than `max_unavailable` when the zones left
    /// are fewer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub same_zone: bool,
    /// `sequence:`: the actions done to each node (batch) in turn, each once the one
    /// before finished (after a reboot or power cycle, once the node is Ready again).
    /// Empty: the step's own action alone. When given, the step's `action` is its first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sequence: Vec<RollAction>,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// One action of a rolling step's `sequence`, with its own timeout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RollAction {
    /// What it does.
    pub action: Action,
    /// Upper bound on how long the action itself may take.
    pub timeout: Duration,
}

/// The order of a rolling step's nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RollOrder {
    /// By node name.
    Name,
    /// Zones interleaved (`topology.kubernetes.io/zone`), by name within a zone: two
    /// nodes one after the other are in different zones whenever the zones allow it.
    Zone,
    /// Worker nodes first, then control-plane nodes (`node-role.kubernetes.io/control-plane`
    /// or `master` label), by name within each group: the order an upgrade that does the
    /// workers before the control plane takes.
    Role,
    /// The nodes in the order the experiment lists them; the list must name every node
    /// of the target, each once (checked where the target is resolved).
    List(Vec<String>),
}

impl RollOrder {
    /// The word an experiment writes: `name`, `zone`, `role`; `list` for a list of nodes.
    pub fn word(&self) -> &'static str {
        match self {
            RollOrder::Name => "name",
            RollOrder::Zone => "zone",
            RollOrder::Role => "role",
            RollOrder::List(_) => "list",
        }
    }
}
