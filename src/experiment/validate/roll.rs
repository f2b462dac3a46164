//! `roll:` and `sequence:` of a step: a rolling step's settings, and the actions it does to
//! each node (batch) in turn.

use std::time::Duration;

use super::{DEFAULT_ROLL_TIMEOUT, DEFAULT_TIMEOUT};
use super::{Validator, at, is_dns_subdomain, pos};
use crate::experiment::fault;
use crate::experiment::model::*;
use crate::experiment::raw::*;
use crate::experiment::suggest::closest;

/// One action of a rolling step with where it was written (`None`: the step's own `do:`,
/// whose problems are reported at `roll:`).
pub(super) type Placed = (Action, Option<(u32, u32)>);

impl Validator<'_> {
    /// `roll:` of a step doing `actions` to each node in turn: only actions on nodes, and
    /// a fault held until its undo only when a later action of the sequence undoes it (the
    /// roll waits for each node to be Ready again before the next, for ever otherwise);
    /// `maxUnavailable` nodes at a time, no more than `safety.maxNodesDown`.
    pub(super) fn roll(&mut self, roll: &S<RawRoll>, actions: &[Placed]) -> Option<Roll> {
        let r = &roll.value;
        let mut ok = true;
        for (i, (action, place)) in actions.iter().enumerate() {
            let name = fault::action_name(action);
            let in_sequence = place.is_some();
            let place = place.unwrap_or(pos(at(roll)));
            if !fault::info(action).via.needs_target() {
                self.report(
                    place,
                    format!(
                        "`roll` goes through the nodes of a target one at a time; `do: {name}` \
                         acts through the API on no node"
                    ),
                    Some("a rolling step does a node fault: reboot, kubelet-restart, …".into()),
                );
                ok = false;
                continue;
            }
            if !fault::counts_as_down(action) {
                continue;
            }
            let Some(undo) = fault::inverse(action) else {
                continue;
            };
            if actions[i + 1..]
                .iter()
                .any(|(later, _)| fault::undoes(later, action))
            {
                continue;
            }
            let undo = fault::action_name(&undo);
            if !in_sequence {
                self.report(
                    place,
                    format!(
                        "`roll` waits for each node to be Ready again before the next; `do: \
                         {name}` keeps its node down until `{undo}`, so the roll would never go on"
                    ),
                    Some(format!(
                        "roll a fault that ends by itself (reboot, kubelet-restart), or a \
                         `sequence:` that repairs it: `- do: {name}`, …, `- do: {undo}`"
                    )),
                );
            } else {
                self.report(
                    place,
                    format!(
                        "`do: {name}` keeps its node down until `{undo}`, and no later action \
                         of the sequence does that, so the roll would never go on to the next \
                         node"
                    ),
                    Some(format!("add `- do: {undo}` after it")),
                );
            }
            ok = false;
        }
        let max_unavailable = match &r.max_unavailable {
            None => Some(1),
            Some(m) => match u32::try_from(m.value) {
                Ok(n) if n >= 1 => {
                    if n > self.max_nodes_down {
                        self.err(
                            m,
                            format!(
                                "`maxUnavailable: {n}` takes {n} nodes down at once; \
                                 `safety.maxNodesDown` allows {}, and the run would hold every \
                                 batch back for ever",
                                self.max_nodes_down
                            ),
                            Some(&format!(
                                "raise `safety.maxNodesDown` to at least {n}, or lower \
                                 `maxUnavailable`"
                            )),
                        );
                        None
                    } else {
                        Some(n)
                    }
                }
                _ => {
                    self.err(m, "`maxUnavailable` is at least 1", None);
                    None
                }
            },
        };
        let order = self.roll_order(r.order.as_ref());
        let same_zone = match &r.same_zone {
            None => Some(false),
            Some(z) => match z.value.as_str() {
                "allow" => Some(true),
                "deny" => Some(false),
                other => {
                    self.err(
                        z,
                        format!("unknown `sameZone` `{other}`"),
                        Some(
                            "`deny` (the default: a batch never holds two nodes of one zone) or \
                             `allow`",
                        ),
                    );
                    None
                }
            },
        };
        if let (Some(z), Some(o)) = (&r.same_zone, &order)
            && *o != RollOrder::Zone
        {
            self.err(
                z,
                "`sameZone` only applies to `order: zone`",
                Some("write `order: zone`, or leave `sameZone` out"),
            );
            ok = false;
        }
        let settle = match &r.settle {
            Some(b) => self.bound(b, true),
            None => Some(Bound::fixed(Duration::ZERO)),
        };
        let timeout = match &r.timeout {
            Some(t) => self.plain(t),
            None => Some(DEFAULT_ROLL_TIMEOUT),
        };
        if !ok {
            return None;
        }
        Some(Roll {
            order: order?,
            settle: settle?,
            timeout: timeout?,
            max_unavailable: max_unavailable?,
            same_zone: same_zone?,
            sequence: Vec::new(),
        })
    }

    /// `order:` of a roll: a word (`name`, the default, `zone`, `role`) or a list of node
    /// names, each a node name and listed once. Whether the list names exactly the
    /// target's nodes is known once the target is resolved (`roll::order_nodes`).
    fn roll_order(&mut self, order: Option<&S<RawOrder>>) -> Option<RollOrder> {
        let Some(o) = order else {
            return Some(RollOrder::Name);
        };
        let list = match &o.value {
            RawOrder::Word(w) => {
                return match w.as_str() {
                    "name" => Some(RollOrder::Name),
                    "zone" => Some(RollOrder::Zone),
                    "role" => Some(RollOrder::Role),
                    other => {
                        let hint = match closest(other, &["name", "zone", "role"]) {
                            Some(c) => format!("did you mean `{c}`?"),
                            None => "orders: name (the default), zone, role, or a list of the \
                                     target's nodes"
                                .to_string(),
                        };
                        self.report(
                            pos(at(o)),
                            format!("unknown roll order `{other}`"),
                            Some(hint),
                        );
                        None
                    }
                };
            }
            RawOrder::List(list) => list,
        };
        if list.is_empty() {
            self.err(
                o,
                "`order` lists no node",
                Some("list every node of the target, in the order to take them, or write `order: name`"),
            );
            return None;
        }
        let mut ok = true;
        for (i, node) in list.iter().enumerate() {
            if !is_dns_subdomain(&node.value) {
                self.err(
                    node,
                    format!("`{}` in `order` is not a valid Kubernetes node name", node.value),
                    Some("node names are DNS-1123 subdomains: dot-separated parts of a-z, 0-9 and -, each starting and ending with a letter or digit, at most 253 characters"),
                );
                ok = false;
            } else if let Some(first) = list[..i].iter().find(|n| n.value == node.value) {
                let (line, column) = pos(at(first));
                self.err(
                    node,
                    format!(
                        "`order` lists node `{}` twice (first at {line}:{column})",
                        node.value
                    ),
                    Some("a roll takes each node once: list it once, where it goes"),
                );
                ok = false;
            }
        }
        ok.then(|| RollOrder::List(list.iter().map(|n| n.value.clone()).collect()))
    }

    /// A roll's `order:` list against a target that names its nodes (`names:`): the run
    /// resolves such a target to some of those names, so a node listed that is not one of
    /// them is refused here, where it is written. Whether the list names every node the
    /// target resolves to is known only once it is resolved (`roll::order_nodes`).
    pub(super) fn roll_orders_fit_named_targets(
        &mut self,
        raw: &RawExperiment,
        targets: &[TargetSpec],
    ) {
        let Some(steps) = &raw.steps else {
            return;
        };
        for step in &steps.value {
            let s = &step.value;
            let (Some(target), Some(roll)) = (&s.target, &s.roll) else {
                continue;
            };
            let Some(RawOrder::List(list)) = roll.value.order.as_ref().map(|o| &o.value) else {
                continue;
            };
            let Some(spec) = targets.iter().find(|t| t.name == target.value) else {
                continue;
            };
            let names = &spec.selector.names;
            if names.is_empty() {
                continue;
            }
            for node in list {
                if !names.contains(&node.value) {
                    self.err(
                        node,
                        format!(
                            "`order` lists node `{}`, which target `{}` cannot resolve to: it \
                             names only {}",
                            node.value,
                            target.value,
                            names.join(", ")
                        ),
                        Some("list only the target's nodes, each once"),
                    );
                }
            }
        }
    }

    /// A step with `sequence:`: a rolling step doing each action of the list to each node
    /// in turn. The step takes no `do:` (nor the keys of one): each entry is written as a
    /// step's action is, with its own `timeout` (the step's when absent).
    pub(super) fn sequence_step(
        &mut self,
        step: &S<RawStep>,
        sequence: &S<Vec<S<RawStep>>>,
        name: &str,
        time: Option<StepTime>,
    ) -> Option<Step> {
        let s = &step.value;
        if let Some(d) = &s.do_ {
            self.err(
                d,
                "a step takes `do` or `sequence`, not both",
                Some("put this action in the sequence"),
            );
        }
        self.sequence_stray_keys(s);
        let target = s.target.as_ref().map(|t| self.target_ref(t));
        if s.target.is_none() {
            self.err(
                sequence,
                "a step with `sequence` acts on nodes and needs a `target`",
                None,
            );
        }
        let Some(roll) = &s.roll else {
            self.err(
                sequence,
                "`sequence` goes with `roll`: it is what a rolling step does to each node",
                Some("add `roll: {}`, or write one step per action, each `after:` the one before"),
            );
            return None;
        };
        if sequence.value.is_empty() {
            self.err(
                sequence,
                "`sequence` is empty",
                Some("list at least one action"),
            );
            return None;
        }
        let step_timeout = match &s.timeout {
            Some(t) => self.plain(t),
            None => Some(DEFAULT_TIMEOUT),
        };
        let mut actions: Vec<Placed> = Vec::new();
        let mut timeouts = Vec::new();
        let mut ok = true;
        for entry in &sequence.value {
            self.entry_stray_keys(&entry.value);
            let (kind, action) = self.step_action(entry);
            let timeout = match &entry.value.timeout {
                Some(t) => self.plain(t),
                None => step_timeout,
            };
            match (kind, action, timeout) {
                (Some(_), Some(action), Some(timeout)) => {
                    let place = entry.value.do_.as_ref().map(|d| pos(at(d)));
                    actions.push((action, place));
                    timeouts.push(timeout);
                }
                _ => ok = false,
            }
        }
        if !ok {
            // Still check the roll's own keys, and the actions on no node; whether a held
            // fault is repaired waits for every action to be readable.
            let api: Vec<Placed> = actions
                .into_iter()
                .filter(|(a, _)| !fault::info(a).via.needs_target())
                .collect();
            self.roll(roll, &api);
            return None;
        }
        let mut roll = self.roll(roll, &actions)?;
        roll.sequence = actions
            .iter()
            .zip(&timeouts)
            .map(|((action, _), timeout)| RollAction {
                action: action.clone(),
                timeout: *timeout,
            })
            .collect();
        let first = roll.sequence.first()?.clone();
        Some(Step {
            name: name.to_owned(),
            at: time?,
            action: first.action,
            target,
            timeout: first.timeout,
            roll: Some(roll),
        })
    }

    /// The keys of an action written on a step whose actions are in its `sequence`.
    fn sequence_stray_keys(&mut self, s: &RawStep) {
        let keys: [(Option<(u32, u32)>, &str); 8] = [
            (s.command.as_ref().map(|v| pos(at(v))), "command"),
            (s.undo.as_ref().map(|v| pos(at(v))), "undo"),
            (s.pods.as_ref().map(|v| pos(at(v))), "pods"),
            (s.force.as_ref().map(|v| pos(at(v))), "force"),
            (s.pvc.as_ref().map(|v| pos(at(v))), "pvc"),
            (
                s.remove_finalizers.as_ref().map(|v| pos(at(v))),
                "removeFinalizers",
            ),
            (s.on_timeout.as_ref().map(|v| pos(at(v))), "onTimeout"),
            (s.taint.as_ref().map(|v| pos(at(v))), "taint"),
        ];
        for (place, key) in keys {
            if let Some(place) = place {
                self.report(
                    place,
                    format!("`{key}` belongs to an action: with `sequence`, write it in its entry"),
                    None,
                );
            }
        }
    }

    /// The keys of a step that an entry of a `sequence:` does not take: when and where it
    /// runs is the rolling step's.
    fn entry_stray_keys(&mut self, e: &RawStep) {
        let keys: [(Option<(u32, u32)>, &str); 8] = [
            (e.name.as_ref().map(|v| pos(at(v))), "name"),
            (e.at.as_ref().map(|v| pos(at(v))), "at"),
            (e.after.as_ref().map(|v| pos(at(v))), "after"),
            (e.when.as_ref().map(|v| pos(at(v))), "when"),
            (e.delay.as_ref().map(|v| pos(at(v))), "delay"),
            (e.target.as_ref().map(|v| pos(at(v))), "target"),
            (e.roll.as_ref().map(|v| pos(at(v))), "roll"),
            (e.sequence.as_ref().map(|v| pos(at(v))), "sequence"),
        ];
        for (place, key) in keys {
            if let Some(place) = place {
                self.report(
                    place,
                    format!(
                        "`{key}` is not an action's key: an entry of `sequence` takes `do`, the \
                         keys of its action and `timeout`"
                    ),
                    Some(
                        "each action runs once the one before it finished, on the rolling \
                         step's nodes"
                            .into(),
                    ),
                );
            }
        }
    }
}
