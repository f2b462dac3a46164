//! How long a run may need, once told to stop, to leave nothing broken: what the chart's
//! `terminationGracePeriodSeconds` must give it before Kubernetes sends SIGKILL.
//!
//! After a SIGTERM the run cuts its step in flight, ends on the nodes what it cut short,
//! and its safety net undoes every fault still in place: each node's faults one after
//! another (newest first), the nodes at once, each undo tried [`RetryPolicy`]'s attempts
//! times, an attempt through the API bounded by the safety net's timeout, one on a node by
//! that timeout and the node deadline's end after it ([`Executor::longest_wait`]). Then
//! teardown, the reports and the deletions still being sent. The bound is the worst case
//! (every undo failing until its last try), taken as if every fault of an experiment were
//! on one node; an undo usually takes a second.

use std::time::Duration;

use crate::execute::Executor;
use crate::experiment::fault::{self, Via};
use crate::experiment::model::{Action, Experiment};
use crate::journal::RetryPolicy;
use crate::run::floor::drive::UNDO_TIMEOUT;

/// What a run needs after its last undo: teardown, reports, the node-access pod deletions
/// still being sent (the process waits up to 10 s for them), rounded up.
const AFTER_UNDO: Duration = Duration::from_secs(15);

/// The grace a run of some experiments needs, and for which of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grace {
    /// Whole seconds.
    pub seconds: u64,
    /// The experiment that needs it, with its faults.
    pub because: String,
}

/// How long undoing `fault` may take at worst, tries and waits between them included;
/// `None` when nothing undoes it.
fn undo_bound(fault: &Action, policy: &RetryPolicy) -> Option<Duration> {
    let undo =
        fault::inverse(fault).or_else(|| (*fault == Action::Reboot).then_some(Action::PowerOn))?;
    let one = match fault::info(&undo).via {
        Via::NodeApi | Via::ClusterApi => policy.timeout,
        Via::Node(_) | Via::StepCommand | Via::Power(_) => Executor::longest_wait(policy.timeout),
    };
    let waits: Duration = (1..policy.attempts.max(1))
        .map(|i| policy.first_delay.saturating_mul(1 << (i - 1).min(16)))
        .sum();
    Some(
        one.saturating_mul(policy.attempts.max(1))
            .saturating_add(waits),
    )
}

/// The grace `experiments` need at most (the longest of them), at least [`AFTER_UNDO`].
pub(crate) fn needed(experiments: &[Experiment]) -> Grace {
    let policy = RetryPolicy {
        timeout: UNDO_TIMEOUT,
        ..RetryPolicy::default()
    };
    let mut worst = Grace {
        seconds: AFTER_UNDO.as_secs(),
        because: "no experiment makes a fault to undo".into(),
    };
    for exp in experiments {
        let faults: Vec<&Action> = exp
            .steps
            .iter()
            .map(|s| &s.action)
            .filter(|a| undo_bound(a, &policy).is_some())
            .collect();
        let undo: Duration = faults.iter().filter_map(|a| undo_bound(a, &policy)).sum();
        // A step cut short on a node is ended there before the undo.
        let on_node = exp.steps.iter().any(|s| {
            matches!(
                fault::info(&s.action).via,
                Via::Node(_) | Via::StepCommand | Via::Power(_)
            )
        });
        let cut = if on_node {
            Executor::longest_ending()
        } else {
            Duration::ZERO
        };
        let total = undo.saturating_add(cut).saturating_add(AFTER_UNDO);
        let seconds = total.as_secs() + u64::from(total.subsec_nanos() > 0);
        if seconds > worst.seconds {
            let names: Vec<&str> = faults.iter().map(|a| fault::action_name(a)).collect();
            worst = Grace {
                seconds,
                because: format!(
                    "{}: undoing {} ({} tries of up to {}s each){}",
                    exp.name,
                    names.join(", "),
                    policy.attempts,
                    UNDO_TIMEOUT.as_secs(),
                    if on_node {
                        ", after ending on its node the step a stop cut short"
                    } else {
                        ""
                    }
                ),
            };
        }
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp(yaml: &str) -> Experiment {
        crate::experiment::parse(yaml, std::path::Path::new("grace.yaml")).expect("experiment")
    }

    /// Issue 69, item 2: the chart's 200 s covered one API undo's tries alone; a node's
    /// several faults are undone one after another, each on a node bounded by its node
    /// deadline too.
    #[test]
    fn the_grace_grows_with_each_fault_and_with_undos_on_a_node() {
        let drain = exp(
            "name: d\ndescription: d\ntargets: {v: {role: worker, count: 1}}\nsteps:\n  - {name: drain, at: 0s, do: drain, target: v}\n  - {name: back, at: 30s, do: uncordon, target: v}\nexpect:\n  - {name: n, node: v, never: Unknown}\n",
        );
        let only_api = needed(std::slice::from_ref(&drain));
        // Three tries of 60 s, 1 s and 2 s between them, then the end of the run.
        assert_eq!(only_api.seconds, 3 * 60 + 3 + 15, "{only_api:?}");
        let node = exp(
            "name: k\ndescription: k\ntargets: {v: {role: worker, count: 1}}\nsteps:\n  - {name: cordon, at: 0s, do: cordon, target: v}\n  - {name: stop, at: 1s, do: kubelet-stop, target: v}\n  - {name: start, at: 30s, do: kubelet-start, target: v}\nexpect:\n  - {name: n, node: v, never: Unknown}\n",
        );
        let both = needed(&[drain, node]);
        let one_node_try = Executor::longest_wait(UNDO_TIMEOUT).as_secs();
        assert!(
            both.seconds >= 3 * 60 + 3 * one_node_try + 2 * 3 + 15,
            "{both:?}"
        );
        assert!(
            both.because.starts_with("k: undoing cordon, kubelet-stop"),
            "{both:?}"
        );
        assert_eq!(needed(&[]).seconds, 15);
    }
}
