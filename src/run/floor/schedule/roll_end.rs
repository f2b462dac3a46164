//! A run with rolls ends observation only once the last batch of every roll is back
//! (issue 46). A batch's step "finishes" when its command returns, and a reboot returns
//! while the machine still boots: when every expectation was decided before the last
//! batch's step, observation would end there and the roll's figures would have nothing of
//! its last nodes. So, every step run and every expectation decided, observation still
//! waits for each roll's last batch to be back, in the sense the run-time interlock gates
//! a roll's next batch on (`super::super::interlock`: not seen down, not on the way back
//! from a reboot or power-on this run issued), which the runner asks and tells the
//! scheduler. It waits no longer than the roll's `timeout` from that batch's issue, nor
//! past the planned end of observation.
//!
//! Not waited for: the workloads being available again. The index does not offer that
//! query outside the judge (the roll figures compute it there); observation ends with the
//! nodes back, and a workload still degraded then shows as not observed in the figures.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::experiment::model::{Experiment, NodeStateMatch, StateMatch, StepTime, Subject};
use crate::experiment::roll::roll_member;

/// The last batch of one roll of an expanded experiment: what observation waits to see
/// back before it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LastBatch {
    /// Its nodes.
    nodes: Vec<String>,
    /// Its first step (an index into the experiment's steps): the batch's issue, which
    /// the roll's timeout counts from.
    first_step: usize,
    /// The roll's `timeout`, as its expansion gave it to every step gated on a node being
    /// Ready again after the roll's first; `None` for a roll of one batch of one action,
    /// which has no such step (observation then waits up to its planned end).
    timeout: Option<Duration>,
}

/// The last batch of every roll of `exp` (expanded: a roll's steps are named and targeted
/// per batch, see [`roll_member`]), in the order the rolls first appear.
pub(super) fn last_batches(exp: &Experiment) -> Vec<LastBatch> {
    let mut rolls: Vec<(&str, LastBatch)> = Vec::new();
    for (i, step) in exp.steps.iter().enumerate() {
        let Some((roll, nodes)) = roll_member(step) else {
            continue;
        };
        let nodes: Vec<String> = nodes.into_iter().map(str::to_string).collect();
        let Some((_, last)) = rolls.iter_mut().find(|(r, _)| *r == roll) else {
            // The roll's first step keeps the time (and timeout) it was written with.
            rolls.push((
                roll,
                LastBatch {
                    nodes,
                    first_step: i,
                    timeout: None,
                },
            ));
            continue;
        };
        let gated = matches!(
            &step.at,
            StepTime::When {
                subject: Subject::Node { .. },
                state: StateMatch::Node(NodeStateMatch::Ready),
                ..
            }
        );
        if gated {
            last.timeout = Some(step.timeout);
        }
        if last.nodes != nodes {
            last.nodes = nodes;
            last.first_step = i;
        }
    }
    rolls.into_iter().map(|(_, b)| b).collect()
}

/// What observation still waits for at `now_ms`: the nodes of the last batches issued
/// (`issued_ms` of a step index) not in `back` and whose roll's timeout has not run out,
/// with the earliest of those timeouts; `None` when it waits for nothing.
pub(super) fn awaited(
    batches: &[LastBatch],
    issued_ms: impl Fn(usize) -> Option<i64>,
    back: &BTreeSet<String>,
    now_ms: i64,
) -> Option<(Vec<String>, Option<i64>)> {
    let mut nodes: Vec<String> = Vec::new();
    let mut until: Option<i64> = None;
    for b in batches {
        let Some(t0) = issued_ms(b.first_step) else {
            continue;
        };
        let deadline = b
            .timeout
            .map(|t| t0.saturating_add(i64::try_from(t.as_millis()).unwrap_or(i64::MAX)));
        if deadline.is_some_and(|d| now_ms >= d) {
            continue;
        }
        let missing: Vec<&String> = b.nodes.iter().filter(|n| !back.contains(*n)).collect();
        if missing.is_empty() {
            continue;
        }
        nodes.extend(missing.into_iter().cloned());
        until = match (until, deadline) {
            (Some(a), Some(d)) => Some(a.min(d)),
            (a, d) => a.or(d),
        };
    }
    (!nodes.is_empty()).then_some((nodes, until))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(yaml: &str, nodes: &[&str]) -> Experiment {
        let exp = crate::experiment::parse(yaml, std::path::Path::new("roll.yaml"))
            .unwrap_or_else(|d| panic!("{d}"));
        let targets = std::collections::BTreeMap::from([(
            "workers".to_string(),
            nodes.iter().map(|n| n.to_string()).collect(),
        )]);
        crate::experiment::roll::expand(&exp, &targets).0
    }

    const ROLL: &str = "
name: r
description: a roll
targets:
  workers: {names: [a, b, c]}
steps:
  - {name: first, at: 0s, do: kubelet-restart, target: workers}
  - {name: roll, at: 10s, do: reboot, target: workers, roll: {settle: 5s, timeout: 2m}}
expect:
  - {name: back, node: workers, eventually: Ready}
";

    #[test]
    fn the_last_batch_of_a_roll_is_its_last_nodes_with_the_rolls_timeout() {
        let exp = expanded(ROLL, &["a", "b", "c"]);
        let batches = last_batches(&exp);
        let last = exp.steps.iter().position(|s| s.name == "roll (c)");
        assert_eq!(
            batches,
            [LastBatch {
                nodes: vec!["c".into()],
                first_step: last.expect("expanded"),
                timeout: Some(Duration::from_secs(120)),
            }]
        );
        // One node, one action: no step carries the roll's timeout.
        let exp = expanded(ROLL, &["a"]);
        assert_eq!(last_batches(&exp)[0].timeout, None);
    }

    #[test]
    fn observation_waits_for_the_last_nodes_until_back_or_the_timeout() {
        let exp = expanded(ROLL, &["a", "b", "c"]);
        let batches = last_batches(&exp);
        let issued = |_: usize| Some(100_000);
        let none = BTreeSet::new();
        assert_eq!(
            awaited(&batches, issued, &none, 150_000),
            Some((vec!["c".to_string()], Some(220_000)))
        );
        assert_eq!(awaited(&batches, issued, &none, 220_000), None);
        let back = BTreeSet::from(["c".to_string()]);
        assert_eq!(awaited(&batches, issued, &back, 150_000), None);
        // Not issued: nothing to wait for.
        assert_eq!(awaited(&batches, |_| None, &none, 150_000), None);
    }
}
