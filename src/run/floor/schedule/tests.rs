//! The scheduler driven by a virtual clock over hand-made timelines: at / after / when /
//! delay / timeout / cancellation / failed expectation / end of observation.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::Utc;

use super::*;
use crate::judge::TimelineIndex;
use crate::timeline::{ConditionStatus, Entry, Event, NodeState, StepPhase, Timeline};

const N: &str = "node-1";

fn experiment(yaml: &str) -> Experiment {
    let text = format!("name: t\ndescription: t\ntargets:\n  victim: {{names: [{N}]}}\n{yaml}");
    match crate::experiment::parse(&text, Path::new("t.yaml")) {
        Ok(e) => e,
        Err(d) => panic!("test experiment is invalid: {d}"),
    }
}

fn timers() -> ClusterTimers {
    ClusterTimers {
        node_monitor_period: Duration::from_secs(2),
        node_monitor_grace_period: Duration::from_secs(20),
        default_unreachable_toleration: Duration::from_secs(30),
        default_not_ready_toleration: Duration::from_secs(30),
    }
}

fn targets() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([("victim".to_string(), vec![N.to_string()])])
}

/// A run under test: the experiment, its scheduler's inputs, and the timeline so far.
struct Bench {
    exp: Experiment,
    targets: BTreeMap<String, Vec<String>>,
    timers: ClusterTimers,
    caps: Vec<String>,
}

impl Bench {
    fn new(yaml: &str) -> Self {
        Bench {
            exp: experiment(yaml),
            targets: targets(),
            timers: timers(),
            caps: Vec::new(),
        }
    }

    fn plan(&self, keep_going: bool) -> Plan<'_> {
        Plan {
            exp: &self.exp,
            targets: &self.targets,
            timers: &self.timers,
            capabilities: &self.caps,
            keep_going,
        }
    }
}

fn timeline() -> Timeline {
    Timeline::new(Utc::now())
}

fn push(t: &mut Timeline, offset_ms: i64, event: Event) {
    t.entries.push(Entry {
        offset_ms,
        wall: Utc::now(),
        event,
    });
    t.entries.sort_by_key(|e| e.offset_ms);
}

fn node(t: &mut Timeline, at_ms: i64, ready: ConditionStatus) {
    let state = NodeState {
        ready,
        ready_since: None,
        taints: Vec::new(),
        unschedulable: false,
        zone: None,
        shutting_down: false,
    };
    push(
        t,
        at_ms,
        Event::Node {
            name: N.into(),
            before: None,
            after: Some(state),
        },
    );
}

fn issued(t: &mut Timeline, at_ms: i64, step: &str) {
    push(
        t,
        at_ms,
        Event::Step {
            step: step.into(),
            action: "x".into(),
            node: None,
            phase: StepPhase::Issued,
        },
    );
}

/// Issues every due step the way the runner does (recording it on the timeline, the action
/// taking `takes_ms`), until nothing is due at `now`.
fn issue_due(s: &mut Scheduler<'_>, b: &mut Timeline, now: i64, takes_ms: i64) -> Vec<String> {
    let mut names = Vec::new();
    loop {
        let tick = s.poll(now, &TimelineIndex::of(b));
        if tick.end.is_some() || tick.due.is_empty() {
            return names;
        }
        for i in tick.due {
            let name = s.plan.exp.steps[i].name.clone();
            issued(b, now, &name);
            s.started(i, now);
            s.finished(i, now + takes_ms, true);
            names.push(name);
        }
    }
}

const TWO_AT_STEPS: &str = "
steps:
  - {name: stop, at: 0s, do: kubelet-stop, target: victim}
  - {name: start, at: grace + 5s, do: kubelet-start, target: victim}
expect:
  - {name: unknown, node: victim, becomes: Unknown, within: grace + 10s}
";

#[test]
fn at_steps_are_due_at_their_offsets_and_the_next_one_sets_the_wake_up() {
    let t = timeline();
    let b = Bench::new(TWO_AT_STEPS);
    let mut s = Scheduler::new(b.plan(false), 1_000);
    let tick = s.poll(999, &TimelineIndex::of(&t));
    assert!(tick.due.is_empty());
    assert_eq!(tick.wake_at_ms, Some(1_000));
    let tick = s.poll(1_000, &TimelineIndex::of(&t));
    assert_eq!(tick.due, vec![0]);
    s.started(0, 1_000);
    s.finished(0, 1_200, true);
    let tick = s.poll(1_200, &TimelineIndex::of(&t));
    assert!(tick.due.is_empty());
    // grace (20 s) + 5 s after the start at 1 000 ms.
    assert_eq!(tick.wake_at_ms, Some(26_000));
    assert_eq!(tick.waiting, vec![(1, Wait::Until { due_ms: 26_000 })]);
    assert_eq!(s.poll(26_000, &TimelineIndex::of(&t)).due, vec![1]);
}

#[test]
fn a_step_due_while_another_runs_waits_for_it() {
    let t = timeline();
    let b = Bench::new(TWO_AT_STEPS);
    let mut s = Scheduler::new(b.plan(false), 0);
    s.started(0, 0);
    let tick = s.poll(30_000, &TimelineIndex::of(&t));
    assert!(tick.due.is_empty());
    assert_eq!(tick.waiting, vec![(1, Wait::Running)]);
    s.finished(0, 30_000, true);
    assert_eq!(s.poll(30_000, &TimelineIndex::of(&t)).due, vec![1]);
}

#[test]
fn after_steps_count_their_delay_from_when_the_earlier_step_finished() {
    let t = timeline();
    let b = Bench::new(
        "
steps:
  - {name: stop, at: 0s, do: kubelet-stop, target: victim}
  - {name: start, after: stop, delay: 10s, do: kubelet-start, target: victim}
expect:
  - {name: unknown, node: victim, eventually: Unknown}
",
    );
    let mut s = Scheduler::new(b.plan(false), 0);
    s.started(0, 0);
    let tick = s.poll(3_000, &TimelineIndex::of(&t));
    assert_eq!(
        tick.waiting,
        vec![(
            1,
            Wait::Step {
                step: "stop".into(),
                finish: true
            }
        )]
    );
    assert_eq!(
        tick.wake_at_ms, None,
        "only the running step can change this"
    );
    s.finished(0, 4_000, true);
    let tick = s.poll(4_000, &TimelineIndex::of(&t));
    assert_eq!(tick.wake_at_ms, Some(14_000));
    assert!(s.poll(13_999, &TimelineIndex::of(&t)).due.is_empty());
    assert_eq!(s.poll(14_000, &TimelineIndex::of(&t)).due, vec![1]);
}

const WHEN_FIRST: &str = "
steps:
  - name: cordon when ready
    when: {node: victim, is: Ready}
    delay: 2s
    timeout: 30s
    do: cordon
    target: victim
expect:
  - {name: unschedulable, node: victim, becomes: Unschedulable, within: 10s}
";

#[test]
fn a_leading_when_step_is_judged_from_the_start_and_fires_on_a_state_already_holding() {
    let mut t = timeline();
    let b = Bench::new(WHEN_FIRST);
    assert!(
        matches!(&b.exp.steps[0].at, StepTime::When { since: None, .. }),
        "a first `when:` step is judged from the start"
    );
    node(&mut t, -500, ConditionStatus::True);
    let mut s = Scheduler::new(b.plan(false), 0);
    let tick = s.poll(0, &TimelineIndex::of(&t));
    assert!(tick.end.is_none());
    // Ready already at the start: due 2 s (its delay) after the start.
    assert_eq!(tick.waiting, vec![(0, Wait::Until { due_ms: 2_000 })]);
    assert_eq!(issue_due(&mut s, &mut t, 2_000, 100), ["cordon when ready"]);
}

#[test]
fn a_when_step_counts_its_delay_from_the_observed_transition() {
    let mut t = timeline();
    let b = Bench::new(WHEN_FIRST);
    node(&mut t, -500, ConditionStatus::Unknown);
    let s = Scheduler::new(b.plan(false), 0);
    let tick = s.poll(4_000, &TimelineIndex::of(&t));
    assert!(matches!(
        &tick.waiting[0].1,
        Wait::Condition { what, deadline_ms: 30_000, .. } if what == "node victim is Ready"
    ));
    assert_eq!(tick.wake_at_ms, Some(30_000), "the deadline");
    node(&mut t, 5_000, ConditionStatus::True);
    // Due 2 s after the transition was observed, not after it was noticed.
    let tick = s.poll(6_500, &TimelineIndex::of(&t));
    assert_eq!(tick.waiting, vec![(0, Wait::Until { due_ms: 7_000 })]);
    assert_eq!(s.poll(7_000, &TimelineIndex::of(&t)).due, vec![0]);
}

#[test]
fn a_when_step_whose_condition_never_comes_true_times_out_at_its_timeout() {
    let mut t = timeline();
    let b = Bench::new(WHEN_FIRST);
    node(&mut t, -500, ConditionStatus::Unknown);
    let s = Scheduler::new(b.plan(false), 0);
    assert!(s.poll(29_999, &TimelineIndex::of(&t)).end.is_none());
    let end = s.poll(30_000, &TimelineIndex::of(&t)).end;
    assert_eq!(
        end,
        Some(End::StepTimedOut {
            step: "cordon when ready".into(),
            what: "node victim is Ready".into(),
            waited_ms: 30_000,
        })
    );
    let text = end.unwrap().to_string();
    assert!(
        text.contains("waited 30s for node victim is Ready"),
        "{text}"
    );
    assert_eq!(s.never_issued().len(), 1);
}

#[test]
fn an_at_step_after_a_waiting_when_step_is_issued_at_its_time() {
    // The case from the issue: a `when:` step waits for a condition that never comes
    // true; the `at:` step listed after it still starts the kubelet at 40 s, and the
    // waiting step gives up at its timeout.
    let mut t = timeline();
    let b = Bench::new(
        "
steps:
  - {name: stop, at: 0s, do: kubelet-stop, target: victim}
  - name: never
    when: {node: victim, is: Gone}
    timeout: 60s
    do: cordon
    target: victim
  - {name: start, at: 40s, do: kubelet-start, target: victim}
expect:
  - {name: unknown, node: victim, eventually: Unknown}
",
    );
    node(&mut t, -500, ConditionStatus::True);
    let mut s = Scheduler::new(b.plan(false), 0);
    assert_eq!(issue_due(&mut s, &mut t, 0, 50), ["stop"]);
    let tick = s.poll(1_000, &TimelineIndex::of(&t));
    assert_eq!(tick.wake_at_ms, Some(40_000));
    assert_eq!(issue_due(&mut s, &mut t, 40_000, 50), ["start"]);
    // `never` is judged from `stop` (the step before it) and gives up 60 s after it.
    assert_eq!(
        s.poll(41_000, &TimelineIndex::of(&t)).wake_at_ms,
        Some(60_000)
    );
    assert!(matches!(
        s.poll(60_000, &TimelineIndex::of(&t)).end,
        Some(End::StepTimedOut { step, .. }) if step == "never"
    ));
}

#[test]
fn a_when_step_waits_for_its_since_step_and_ignores_what_came_before_it() {
    let mut t = timeline();
    let b = Bench::new(
        "
steps:
  - {name: stop, at: 10s, do: kubelet-stop, target: victim}
  - name: delete
    when: {node: victim, is: Unknown}
    do: delete-node
    target: victim
expect:
  - {name: unknown, node: victim, becomes: Unknown, within: grace + 10s}
",
    );
    // Unknown before `stop` was issued, Ready again, then Unknown after it.
    node(&mut t, -500, ConditionStatus::Unknown);
    node(&mut t, 2_000, ConditionStatus::True);
    let mut s = Scheduler::new(b.plan(false), 0);
    let tick = s.poll(5_000, &TimelineIndex::of(&t));
    assert!(tick.waiting.contains(&(
        1,
        Wait::Step {
            step: "stop".into(),
            finish: false
        }
    )));
    assert_eq!(issue_due(&mut s, &mut t, 10_000, 50), ["stop"]);
    assert!(s.poll(20_000, &TimelineIndex::of(&t)).due.is_empty());
    node(&mut t, 31_000, ConditionStatus::Unknown);
    assert_eq!(s.poll(31_200, &TimelineIndex::of(&t)).due, vec![1]);
}

#[test]
fn a_failed_expectation_ends_the_run_unless_it_keeps_going() {
    let mut t = timeline();
    let b = Bench::new(TWO_AT_STEPS);
    node(&mut t, -500, ConditionStatus::True);
    issued(&mut t, 0, "stop");
    let mut stopping = Scheduler::new(b.plan(false), 0);
    stopping.started(0, 0);
    stopping.finished(0, 100, true);
    // grace + 10 s passed with the node still Ready (seen once the last half second has
    // settled), with no entry since.
    assert!(stopping.poll(30_400, &TimelineIndex::of(&t)).end.is_none());
    let end = stopping.poll(30_501, &TimelineIndex::of(&t)).end;
    assert!(
        matches!(&end, Some(End::ExpectationFailed { message }) if message.contains("`unknown` failed")),
        "{end:?}"
    );
    let mut going = Scheduler::new(b.plan(true), 0);
    going.started(0, 0);
    going.finished(0, 100, true);
    let tick = going.poll(30_501, &TimelineIndex::of(&t));
    assert!(tick.end.is_none());
    assert_eq!(tick.due, vec![1], "the second step still runs");
}

#[test]
fn a_failed_step_ends_the_run() {
    let t = timeline();
    let b = Bench::new(TWO_AT_STEPS);
    let mut s = Scheduler::new(b.plan(false), 0);
    s.started(0, 0);
    s.finished(0, 500, false);
    assert_eq!(
        s.poll(600, &TimelineIndex::of(&t)).end,
        Some(End::StepFailed {
            step: "stop".into()
        })
    );
    assert_eq!(s.never_issued()[0].name, "start");
}

#[test]
fn cancellation_ends_the_run_and_leaves_the_rest_unissued() {
    let t = timeline();
    let b = Bench::new(TWO_AT_STEPS);
    let mut s = Scheduler::new(b.plan(false), 0);
    s.started(0, 0);
    s.finished(0, 10, true);
    s.cancel();
    let tick = s.poll(100, &TimelineIndex::of(&t));
    assert_eq!(tick.end, Some(End::Cancelled));
    assert!(tick.due.is_empty());
    assert_eq!(s.never_issued().len(), 1);
}

#[test]
fn observation_lasts_observe_for_after_the_last_step_or_until_all_is_decided() {
    let mut t = timeline();
    let b = Bench::new(&format!("{TWO_AT_STEPS}observe:\n  for: 30s\n"));
    node(&mut t, -500, ConditionStatus::True);
    let mut s = Scheduler::new(b.plan(false), 0);
    assert_eq!(issue_due(&mut s, &mut t, 0, 50), ["stop"]);
    node(&mut t, 21_000, ConditionStatus::Unknown);
    assert_eq!(issue_due(&mut s, &mut t, 25_000, 50), ["start"]);
    // `for: 30s` counts from the last step's issue (25 s); nothing is pending then.
    assert_eq!(s.observation_end_ms(), 55_000);
    assert_eq!(
        s.poll(26_000, &TimelineIndex::of(&t)).end,
        Some(End::Observed { all_decided: true })
    );
}

#[test]
fn observation_ends_at_its_planned_end_with_expectations_still_open() {
    let mut t = timeline();
    let b = Bench::new(
        "
steps:
  - {name: stop, at: 0s, do: kubelet-stop, target: victim}
expect:
  - {name: bounded, node: victim, becomes: Unknown, within: grace + 10s}
  - {name: open, node: victim, eventually: Gone}
",
    );
    node(&mut t, -500, ConditionStatus::True);
    node(&mut t, 100, ConditionStatus::Unknown);
    let mut s = Scheduler::new(b.plan(false), 0);
    assert_eq!(issue_due(&mut s, &mut t, 0, 50), ["stop"]);
    // The bound is grace + 10 s = 30 s after `stop`, then the margin.
    let end_ms = 30_000 + i64::try_from(OBSERVE_MARGIN.as_millis()).unwrap();
    assert_eq!(s.observation_end_ms(), end_ms);
    let tick = s.poll(end_ms - 1, &TimelineIndex::of(&t));
    assert_eq!((tick.end, tick.wake_at_ms), (None, Some(end_ms)));
    assert_eq!(
        s.poll(end_ms, &TimelineIndex::of(&t)).end,
        Some(End::Observed { all_decided: false })
    );
}

#[test]
fn the_run_wakes_when_a_bound_passes_even_if_nothing_is_observed() {
    let mut t = timeline();
    let b = Bench::new(TWO_AT_STEPS);
    node(&mut t, -500, ConditionStatus::True);
    let mut s = Scheduler::new(b.plan(false), 0);
    assert_eq!(issue_due(&mut s, &mut t, 0, 50), ["stop"]);
    // `unknown` must be decided at grace + 10 s once that moment settled: before the
    // second step (at 25 s) is due? No: 25 s comes first, then the bound.
    assert_eq!(
        s.poll(1_000, &TimelineIndex::of(&t)).wake_at_ms,
        Some(25_000)
    );
    assert_eq!(issue_due(&mut s, &mut t, 25_000, 50), ["start"]);
    let bound = 30_000 + SETTLE_MS + 1;
    assert_eq!(
        s.poll(26_000, &TimelineIndex::of(&t)).wake_at_ms,
        Some(bound)
    );
    assert!(matches!(
        s.poll(bound, &TimelineIndex::of(&t)).end,
        Some(End::ExpectationFailed { .. })
    ));
}

#[test]
fn the_projection_gives_offsets_to_timed_steps_and_leaves_conditions_open() {
    let b = Bench::new(
        "
steps:
  - {name: stop, at: 0s, do: kubelet-stop, target: victim}
  - {name: cordon, after: stop, delay: 5s, do: cordon, target: victim}
  - name: delete
    when: {node: victim, is: Unknown}
    do: delete-node
    target: victim
  - {name: start, after: delete, delay: 90s, do: kubelet-start, target: victim}
expect:
  - {name: unknown, node: victim, becomes: Unknown, within: grace + 10s}
",
    );
    let (steps, end) = project(b.plan(false));
    let at: Vec<Option<i64>> = steps.iter().map(|p| p.at_ms).collect();
    assert_eq!(at, [Some(0), Some(5_000), None, None]);
    assert_eq!(end, None);
    let b = Bench::new(TWO_AT_STEPS);
    let (steps, end) = project(b.plan(false));
    assert_eq!(steps[1].at_ms, Some(25_000));
    // grace + 10 s after `stop` is 5 s after `start`; then the margin.
    assert_eq!(end, Some(25_000 + 5_000 + 20_000));
}

#[test]
fn the_planned_length_counts_every_wait_at_its_longest() {
    let b = Bench::new(WHEN_FIRST);
    // delay 2 s + wait and action 30 s each + the largest bound 10 s + grace 20 s.
    assert_eq!(
        planned_length(&b.exp, &b.timers),
        Duration::from_secs(2 + 60 + 10 + 20)
    );
}

#[test]
fn a_tripped_abort_condition_ends_the_run_and_its_hold_sets_the_wake_up() {
    let b = Bench::new(&format!(
        "{TWO_AT_STEPS}abort:\n  nodeNotReady: 10s\n  apiUnreachable: off\n"
    ));
    let mut t = timeline();
    let mut s = Scheduler::new(b.plan(false), 0);
    s.started(0, 0);
    s.finished(0, 500, true);
    let bystander = |t: &mut Timeline, at, ready| {
        push(
            t,
            at,
            Event::Node {
                name: "bystander".into(),
                before: None,
                after: Some(NodeState {
                    ready,
                    ready_since: None,
                    taints: Vec::new(),
                    unschedulable: false,
                    zone: None,
                    shutting_down: false,
                }),
            },
        )
    };
    bystander(&mut t, 0, ConditionStatus::True);
    bystander(&mut t, 3_000, ConditionStatus::Unknown);
    let tick = s.poll(5_000, &TimelineIndex::of(&t));
    assert_eq!(tick.end, None);
    assert_eq!(
        tick.wake_at_ms,
        Some(13_000),
        "the hold passes before `start`"
    );
    let tick = s.poll(13_000, &TimelineIndex::of(&t));
    match tick.end {
        Some(End::Aborted(tripped)) => {
            assert_eq!(
                tripped.condition,
                "a node that is not a target goes NotReady for 10s"
            );
            assert_eq!(tripped.at_ms, 13_000);
        }
        other => panic!("expected an abort, got {other:?}"),
    }
    assert_eq!(
        s.never_issued().len(),
        1,
        "`start` is left for the safety net"
    );
}

#[test]
fn a_fault_that_did_not_take_effect_ends_the_run_as_a_step_error() {
    let b = Bench::new(TWO_AT_STEPS);
    let mut t = timeline();
    let mut s = Scheduler::new(b.plan(false), 0);
    issued(&mut t, 0, "stop");
    s.started(0, 0);
    s.finished(0, 500, true);
    push(
        &mut t,
        4_000,
        Event::Step {
            step: "stop".into(),
            action: "kubelet-stop".into(),
            node: Some(N.into()),
            phase: StepPhase::Reverted {
                evidence: "kubelet status: `running` (exit 0)".into(),
            },
        },
    );
    let tick = s.poll(4_100, &TimelineIndex::of(&t));
    let end = tick.end.expect("the run ends");
    assert!(end.is_early());
    assert_eq!(
        end.to_string(),
        "the fault of step `stop` on node-1 was undone by something other than faultline: \
         kubelet status: `running` (exit 0)"
    );
}

/// Every step ran and every expectation is decided: a run with a roll still waits for the
/// roll's last node to be back, woken at the roll's timeout from that node's step (sooner
/// than the end of observation), and ends once the runner saw the node back, or then.
#[test]
fn a_decided_run_waits_for_the_last_node_of_its_roll() {
    let mut b = Bench::new(
        "  one: {names: [node-1]}
observe: {for: 5m}
steps:
  - {name: roll, at: 0s, do: reboot, target: victim, roll: {timeout: 30s}}
expect:
  - {name: up, node: one, eventually: Ready}
",
    );
    b.targets
        .insert("victim".into(), vec![N.into(), "node-2".into()]);
    b.targets.insert("one".into(), vec![N.into()]);
    let (exp, targets) = crate::experiment::roll::expand(&b.exp, &b.targets);
    b.exp = exp;
    b.targets = targets;
    let mut t = timeline();
    node(&mut t, 0, ConditionStatus::True);
    issued(&mut t, 0, "roll (node-1)");
    issued(&mut t, 10_000, "roll (node-2)");
    let mut s = Scheduler::new(b.plan(false), 0);
    for (i, at) in [(0, 0), (1, 10_000)] {
        s.started(i, at);
        s.finished(i, at + 100, true);
    }
    let index = TimelineIndex::of(&t);
    let tick = s.poll(11_000, &index);
    assert!(tick.verdicts.iter().all(|v| v.outcome == Outcome::Passed));
    assert_eq!(tick.end, None);
    assert_eq!(tick.wake_at_ms, Some(40_000));
    assert_eq!(s.awaits_back(11_000, &tick), ["node-2"]);
    assert_eq!(
        s.poll(40_000, &index).end,
        Some(End::Observed { all_decided: true })
    );
    s.seen_back(["node-2".to_string()]);
    let tick = s.poll(12_000, &index);
    assert_eq!(tick.end, Some(End::Observed { all_decided: true }));
    assert!(s.awaits_back(12_000, &tick).is_empty());
}

#[test]
fn observation_reaches_past_an_unhealed_faults_eviction_and_never_ends_early() {
    let yaml = "name: c\ndescription: d\nnamespace: n\ntargets:\n  v: {role: worker, count: 1}\n\
                steps:\n  - {name: stop, at: 0s, do: kubelet-stop, target: v}\nexpect: conformance\n";
    let exp = crate::experiment::parse(yaml, std::path::Path::new("c.yaml")).expect("valid");
    let timers = crate::experiment::model::ClusterTimers::default();
    let after = observe_after_last_step(&exp, &timers, &|_| Some(Duration::ZERO), Duration::ZERO);
    assert!(
        after >= timers.node_monitor_grace_period + timers.default_unreachable_toleration,
        "{after:?}"
    );
}
