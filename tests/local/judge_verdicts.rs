//! The judge over recorded timelines: every check kind and window, quantifiers, per-pod
//! toleration bounds, gaps, live (incomplete) runs, missing steps and capabilities.

use crate::judge_support::*;
use faultline::experiment::model::*;
use faultline::judge::{Outcome, Verdict, judge};
use faultline::timeline::Timeline;

const STOP: &str = "stop kubelet";

fn one(e: Expectation, t: &Timeline, complete: bool) -> Verdict {
    one_with(e, t, complete, &["containers".to_string()])
}

fn one_with(e: Expectation, t: &Timeline, complete: bool, caps: &[String]) -> Verdict {
    let exp = experiment(vec![e]);
    let mut v = judge(&exp, &targets(), &timers(), caps, t, complete);
    assert_eq!(v.len(), 1);
    v.remove(0)
}

fn stop() -> Timeline {
    timeline("kubelet-stop")
}

#[test]
fn node_becomes_unknown_within_grace_passes_and_says_when() {
    let e = expect(
        "node unknown",
        node_down(),
        becomes(
            node_state(NodeStateMatch::Unknown),
            Window::Within(sum(&[
                BoundSymbol::Grace,
                BoundSymbol::Fixed(std::time::Duration::from_secs(10)),
            ])),
        ),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    assert_eq!(v.measured_ms, Some(21300));
    assert_eq!(
        v.message,
        "lab-worker-2 became Unknown at +21.3s (bound 30.0s)"
    );
    assert_eq!(v.since, STOP);
    assert_eq!(v.members.len(), 1);
    assert_eq!(v.members[0].member, "lab-worker-2");
}

#[test]
fn node_unknown_too_late_fails_with_exact_message() {
    let e = expect(
        "node unknown fast",
        node_down(),
        becomes(
            node_state(NodeStateMatch::Unknown),
            Window::Within(secs(10.0)),
        ),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Failed);
    assert_eq!(
        v.message,
        "expected Unknown within 10.0s after `stop kubelet`; lab-worker-2 became Unknown at +21.3s, too late (bound 10.0s)"
    );
    assert_eq!(v.measured_ms, Some(21300));
}

#[test]
fn taint_with_effect_is_matched() {
    let tainted = |effect: &str| {
        node_state(NodeStateMatch::Tainted {
            key: "node.kubernetes.io/unreachable".into(),
            effect: Some(effect.into()),
        })
    };
    let v = one(
        expect(
            "tainted",
            node_down(),
            becomes(tainted("NoExecute"), Window::Eventually),
            STOP,
        ),
        &stop(),
        true,
    );
    assert_eq!(v.outcome, Outcome::Passed);
    assert_eq!(v.measured_ms, Some(21300));
    let v = one(
        expect(
            "wrong effect",
            node_down(),
            becomes(tainted("PreferNoSchedule"), Window::Eventually),
            STOP,
        ),
        &stop(),
        true,
    );
    assert_eq!(v.outcome, Outcome::Failed);
    assert!(
        v.message
            .contains("never became Tainted(unreachable:PreferNoSchedule)"),
        "{}",
        v.message
    );
}

#[test]
fn between_window_names_the_late_pod() {
    let e = expect(
        "web evicted",
        existing_on_down(web()),
        becomes(
            pod_state(PodStateMatch::Terminating),
            Window::Between(secs(30.0), secs(40.0)),
        ),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Failed);
    assert_eq!(
        v.message,
        "expected Terminating between 30.0s and 40.0s after `stop kubelet`; web-5d9c-aaaaa became Terminating at +52.0s, too late (bounds 30.0s and 40.0s)"
    );
    // Both web pods on the stopped node are members; the 10s-toleration one was in time.
    assert_eq!(v.members.len(), 2);
    assert!(
        v.members
            .iter()
            .any(|m| m.member == "web-5d9c-fffff" && m.at_ms == Some(31500))
    );
}

#[test]
fn after_window_fails_when_too_early() {
    let e = expect(
        "not before 40s",
        existing_on_down(web()),
        becomes(
            pod_state(PodStateMatch::Terminating),
            Window::After(secs(40.0)),
        ),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Failed);
    assert!(
        v.message
            .contains("web-5d9c-fffff became Terminating at +31.5s, too early (bound 40.0s)"),
        "{}",
        v.message
    );
    assert!(
        !v.message.contains("aaaaa"),
        "the pod that was in time is not blamed: {}",
        v.message
    );
}

#[test]
fn toleration_bound_resolves_per_pod() {
    // toleration + grace + 5s: 35s for the 10s pod, 55s for the 30s pod; both in time.
    let bound = sum(&[
        BoundSymbol::Toleration,
        BoundSymbol::Grace,
        BoundSymbol::Fixed(std::time::Duration::from_secs(5)),
    ]);
    let e = expect(
        "evicted per toleration",
        existing_on_down(web()),
        becomes(
            pod_state(PodStateMatch::Terminating),
            Window::Within(bound.clone()),
        ),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    assert_eq!(v.measured_ms, Some(52000), "All: the last member decides");
    assert!(
        v.message.contains("(bound 35.0s)") && v.message.contains("(bound 55.0s)"),
        "{}",
        v.message
    );

    // Toleration alone (10s / 30s) is too tight for both: they are evicted after grace + toleration.
    let e = expect(
        "too tight",
        existing_on_down(web()),
        becomes(
            pod_state(PodStateMatch::Terminating),
            Window::Within(sum(&[BoundSymbol::Toleration])),
        ),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Failed);
    assert!(
        v.message
            .starts_with("expected Terminating within `toleration` after `stop kubelet`"),
        "{}",
        v.message
    );
}

#[test]
fn toleration_of_a_pod_that_tolerates_forever_is_an_error() {
    let e = expect(
        "agent evicted",
        existing_on_down(agent()),
        becomes(
            pod_state(PodStateMatch::Terminating),
            Window::Within(sum(&[BoundSymbol::Toleration])),
        ),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Error);
    assert!(
        v.message
            .contains("agent-x2 tolerates `node.kubernetes.io/unreachable` forever"),
        "{}",
        v.message
    );
}

#[test]
fn toleration_on_a_node_subject_is_an_error() {
    let e = expect(
        "node by toleration",
        node_down(),
        becomes(
            node_state(NodeStateMatch::Unknown),
            Window::Within(sum(&[BoundSymbol::Toleration])),
        ),
        STOP,
    );
    assert_eq!(one(e, &stop(), true).outcome, Outcome::Error);
}

#[test]
fn daemonset_pod_stays_running_until_kubelet_returns_and_is_never_evicted() {
    let stays = expect(
        "agent stays",
        existing_on_down(agent()),
        Check::Stays {
            state: pod_state(PodStateMatch::Running),
            until: Until::Step("start kubelet".into()),
        },
        STOP,
    );
    let v = one(stays, &stop(), true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    assert_eq!(v.message, "agent-x2 was Running from +0.0s to +90.0s");

    let never = expect(
        "agent never terminating",
        existing_on_down(agent()),
        Check::Never {
            state: pod_state(PodStateMatch::Terminating),
            until: Until::End,
        },
        STOP,
    );
    assert_eq!(one(never, &stop(), true).outcome, Outcome::Passed);
}

#[test]
fn stays_fails_naming_when_the_state_was_left() {
    let e = expect(
        "web stays ready",
        existing_on_down(web()),
        Check::Stays {
            state: pod_state(PodStateMatch::Ready),
            until: Until::For(secs(60.0)),
        },
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Failed);
    assert!(
        v.message.starts_with("expected Ready for 60.0s after `stop kubelet`; web-5d9c-aaaaa left Ready at +21.4s (Running, not Ready on lab-worker-2)"),
        "{}",
        v.message
    );
    assert_eq!(v.measured_ms, Some(21400));
}

#[test]
fn stays_until_a_step_that_never_ran_is_undecidable() {
    let e = expect(
        "until reboot",
        existing_on_down(agent()),
        Check::Stays {
            state: pod_state(PodStateMatch::Running),
            until: Until::Step("reboot".into()),
        },
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Undecidable, "{}", v.message);
}

#[test]
fn stays_for_longer_than_observed_is_undecidable() {
    let e = expect(
        "agent long",
        existing_on_down(agent()),
        Check::Stays {
            state: pod_state(PodStateMatch::Running),
            until: Until::For(secs(500.0)),
        },
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Undecidable);
    assert!(
        v.message.contains("before the hold ended at +500.0s"),
        "{}",
        v.message
    );
}

#[test]
fn stays_until_end_passes_for_a_healthy_node() {
    let e = expect(
        "healthy node ready",
        Subject::Node {
            target: "healthy".into(),
        },
        Check::Stays {
            state: node_state(NodeStateMatch::Ready),
            until: Until::End,
        },
        STOP,
    );
    assert_eq!(one(e, &stop(), true).outcome, Outcome::Passed);
}

#[test]
fn never_fails_with_the_moment_it_happened() {
    let e = expect(
        "web never degraded",
        Subject::Workload(web()),
        Check::Never {
            state: StateMatch::Workload(WorkloadStateMatch::Degraded),
            until: Until::End,
        },
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Failed);
    assert_eq!(
        v.message,
        "expected never Degraded after `stop kubelet`; faultline-lab/deployment/web was Degraded at +21.5s (1/3 available, 1 ready)"
    );
}

#[test]
fn workload_becomes_available_again_after_degrading() {
    // Available at `since` already: `becomes` is satisfied at +0 (it was already true).
    let e = expect(
        "web available",
        Subject::Workload(web()),
        becomes(
            StateMatch::Workload(WorkloadStateMatch::Available),
            Window::After(secs(5.0)),
        ),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(
        v.outcome,
        Outcome::Failed,
        "already true at since = +0, too early"
    );
    assert_eq!(v.measured_ms, Some(0));
}

#[test]
fn replacements_elsewhere_become_ready() {
    let e = expect(
        "replacements ready",
        replacements_off_down(web()),
        becomes(pod_state(PodStateMatch::Ready), Window::Within(secs(60.0))),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    let names: Vec<&str> = v.members.iter().map(|m| m.member.as_str()).collect();
    assert_eq!(names, vec!["web-5d9c-ccccc", "web-5d9c-ddddd"]);
    assert_eq!(v.measured_ms, Some(54000));
}

#[test]
fn quantifiers_any_and_at_least() {
    let window = Window::Within(secs(40.0));
    let subject = |q| pods(web(), Some("down"), None, PodGeneration::Existing, q);
    let check = || becomes(pod_state(PodStateMatch::Terminating), window.clone());
    let any = one(
        expect("any", subject(Quantifier::Any), check(), STOP),
        &stop(),
        true,
    );
    assert_eq!(any.outcome, Outcome::Passed);
    assert_eq!(any.measured_ms, Some(31500));
    let one_of = one(
        expect("1", subject(Quantifier::AtLeast(1)), check(), STOP),
        &stop(),
        true,
    );
    assert_eq!(one_of.outcome, Outcome::Passed);
    let two = one(
        expect("2", subject(Quantifier::AtLeast(2)), check(), STOP),
        &stop(),
        true,
    );
    assert_eq!(two.outcome, Outcome::Failed);
    assert!(
        two.message.contains("(needs 2 of 2, 1 did)"),
        "{}",
        two.message
    );
    let all = one(
        expect("all", subject(Quantifier::All), check(), STOP),
        &stop(),
        true,
    );
    assert_eq!(all.outcome, Outcome::Failed);
}

#[test]
fn an_empty_pod_set_fails_and_says_so() {
    let e = expect(
        "db elsewhere",
        pods(
            db(),
            Some("healthy"),
            None,
            PodGeneration::Existing,
            Quantifier::All,
        ),
        becomes(pod_state(PodStateMatch::Terminating), Window::Eventually),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Failed);
    assert_eq!(
        v.message,
        "expected Terminating eventually after `stop kubelet`; no existing pods of faultline-lab/statefulset/db matched at `stop kubelet`"
    );
    let any = expect(
        "db elsewhere any",
        pods(
            db(),
            Some("healthy"),
            None,
            PodGeneration::Existing,
            Quantifier::Any,
        ),
        becomes(pod_state(PodStateMatch::Terminating), Window::Eventually),
        STOP,
    );
    assert_eq!(one(any, &stop(), true).outcome, Outcome::Failed);
}

#[test]
fn restarts_and_capabilities() {
    let restarts = |changed| {
        let mut e = expect(
            "agent restarts",
            existing_on_down(agent()),
            Check::Restarts { changed },
            STOP,
        );
        e.requires = vec!["containers".into()];
        e
    };
    let v = one(restarts(true), &stop(), true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    assert_eq!(v.measured_ms, Some(95000));
    assert_eq!(one(restarts(false), &stop(), true).outcome, Outcome::Failed);

    let skipped = one_with(restarts(true), &stop(), true, &[]);
    assert_eq!(skipped.outcome, Outcome::Skipped);
    assert_eq!(
        skipped.message,
        "needs `containers`, which this cluster lacks: kwok runs no containers"
    );
}

#[test]
fn replaced_pairs_old_pods_with_new_ones() {
    let e = expect(
        "web replaced",
        existing_on_down(web()),
        Check::Replaced { replaced: true },
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);

    // The StatefulSet pod comes back under the same name with a new UID.
    let e = expect(
        "db replaced",
        existing_on_down(db()),
        Check::Replaced { replaced: true },
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    assert!(
        v.message.contains("replaced by db-0 created at +93.5s"),
        "{}",
        v.message
    );

    // The DaemonSet pod keeps its UID.
    let e = expect(
        "agent kept",
        existing_on_down(agent()),
        Check::Replaced { replaced: false },
        STOP,
    );
    assert_eq!(one(e, &stop(), true).outcome, Outcome::Passed);
    let e = expect(
        "web kept",
        existing_on_down(web()),
        Check::Replaced { replaced: false },
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Failed);
    assert!(
        v.message.contains("(uid u-web-a) was gone at +93.0s"),
        "{}",
        v.message
    );
}

#[test]
fn reboot_restarts_in_place_without_eviction() {
    let t = timeline("reboot");
    let restarts = expect(
        "restarts",
        existing_on_down(web()),
        Check::Restarts { changed: true },
        "reboot",
    );
    assert_eq!(one(restarts, &t, true).outcome, Outcome::Passed);
    let kept = expect(
        "kept",
        existing_on_down(web()),
        Check::Replaced { replaced: false },
        "reboot",
    );
    assert_eq!(one(kept, &t, true).outcome, Outcome::Passed);
    let never = expect(
        "no eviction",
        existing_on_down(web()),
        Check::Never {
            state: pod_state(PodStateMatch::Terminating),
            until: Until::End,
        },
        "reboot",
    );
    assert_eq!(one(never, &t, true).outcome, Outcome::Passed);
    let ready = expect(
        "node back",
        node_down(),
        Check::Stays {
            state: node_state(NodeStateMatch::Ready),
            until: Until::End,
        },
        "reboot",
    );
    let v = one(ready, &t, true);
    assert_eq!(v.outcome, Outcome::Failed, "Ready at since, lost at +21s");
    assert!(
        v.message.contains("lab-worker-2 left Ready at +21.0s"),
        "{}",
        v.message
    );
}

#[test]
fn missing_since_step_is_an_error() {
    let e = expect(
        "after reboot",
        node_down(),
        becomes(node_state(NodeStateMatch::Ready), Window::Eventually),
        "reboot",
    );
    let v = one(e.clone(), &stop(), true);
    assert_eq!(v.outcome, Outcome::Error);
    assert_eq!(v.message, "step `reboot` never ran");
    assert_eq!(one(e, &stop(), false).outcome, Outcome::Pending);
}

#[test]
fn unknown_target_is_an_error() {
    let e = expect(
        "ghost",
        Subject::Node {
            target: "ghost".into(),
        },
        becomes(node_state(NodeStateMatch::Ready), Window::Eventually),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Error);
    assert!(v.message.contains("target `ghost`"), "{}", v.message);
}

#[test]
fn state_of_the_wrong_kind_is_an_error() {
    let e = expect(
        "pod state on node",
        node_down(),
        becomes(pod_state(PodStateMatch::Ready), Window::Eventually),
        STOP,
    );
    let v = one(e, &stop(), true);
    assert_eq!(v.outcome, Outcome::Error);
    assert_eq!(v.message, "state Ready does not apply to a node subject");
}

#[test]
fn live_run_pending_versus_decided_early() {
    let t = prefix(&stop(), 35000);
    // The node already went Unknown: decided, final.
    let unknown = expect(
        "unknown",
        node_down(),
        becomes(
            node_state(NodeStateMatch::Unknown),
            Window::Within(secs(30.0)),
        ),
        STOP,
    );
    assert_eq!(one(unknown, &t, false).outcome, Outcome::Passed);
    // A 10s bound that passed without the state: failed early.
    let fast = expect(
        "fast",
        existing_on_down(web()),
        becomes(
            pod_state(PodStateMatch::Terminating),
            Window::Within(secs(10.0)),
        ),
        STOP,
    );
    let v = one(fast, &t, false);
    assert_eq!(v.outcome, Outcome::Failed);
    assert!(
        v.message.contains("was not Terminating by +10.0s"),
        "{}",
        v.message
    );
    // One pod evicted, the other's 40s bound not reached yet: pending.
    let between = expect(
        "between",
        existing_on_down(web()),
        becomes(
            pod_state(PodStateMatch::Terminating),
            Window::Within(secs(40.0)),
        ),
        STOP,
    );
    assert_eq!(one(between, &t, false).outcome, Outcome::Pending);
    // Never and stays-until-end cannot pass before the end.
    let never = expect(
        "never",
        existing_on_down(agent()),
        Check::Never {
            state: pod_state(PodStateMatch::Terminating),
            until: Until::End,
        },
        STOP,
    );
    assert_eq!(one(never.clone(), &t, false).outcome, Outcome::Pending);
    assert_eq!(one(never, &t, true).outcome, Outcome::Passed);
    // Replacements may still appear.
    let repl = expect(
        "repl",
        pods(
            db(),
            None,
            None,
            PodGeneration::Replacements,
            Quantifier::All,
        ),
        becomes(pod_state(PodStateMatch::Ready), Window::Eventually),
        STOP,
    );
    assert_eq!(one(repl, &t, false).outcome, Outcome::Pending);
}

#[test]
fn live_replacements_all_stay_pending_but_any_is_final() {
    let t = prefix(&stop(), 40000);
    let subject = |q| pods(web(), None, Some("down"), PodGeneration::Replacements, q);
    let check = || becomes(pod_state(PodStateMatch::Ready), Window::Within(secs(60.0)));
    let all = one(
        expect("all", subject(Quantifier::All), check(), STOP),
        &t,
        false,
    );
    assert_eq!(all.outcome, Outcome::Pending, "{}", all.message);
    let any = one(
        expect("any", subject(Quantifier::Any), check(), STOP),
        &t,
        false,
    );
    assert_eq!(any.outcome, Outcome::Passed);
    assert_eq!(any.measured_ms, Some(33000));
    let two = one(
        expect("two", subject(Quantifier::AtLeast(2)), check(), STOP),
        &t,
        false,
    );
    assert_eq!(
        two.outcome,
        Outcome::Pending,
        "the second replacement comes at +52.1s"
    );
    let two = one(
        expect("two", subject(Quantifier::AtLeast(2)), check(), STOP),
        &stop(),
        true,
    );
    assert_eq!(two.outcome, Outcome::Passed);
}

#[test]
fn gap_straddling_a_bound_is_undecidable_and_named() {
    let t = timeline("kubelet-stop-gap");
    let e = expect(
        "evicted by 45s",
        existing_on_down(web()),
        becomes(
            pod_state(PodStateMatch::Terminating),
            Window::Within(secs(45.0)),
        ),
        STOP,
    );
    let v = one(e, &t, true);
    assert_eq!(v.outcome, Outcome::Undecidable, "{}", v.message);
    assert!(
        v.message.contains(
            "no observation from +41.2s to +47.9s (pods watch error: connection reset by peer)"
        ),
        "{}",
        v.message
    );
    // A bound beyond the gap's end is decidable: the transition surely happened by +47.9s.
    let e = expect(
        "evicted by 50s",
        existing_on_down(web()),
        becomes(
            pod_state(PodStateMatch::Terminating),
            Window::Within(secs(50.0)),
        ),
        STOP,
    );
    assert_eq!(one(e, &t, true).outcome, Outcome::Passed);
    // A bound before the gap began is decidably missed.
    let e = expect(
        "evicted by 40s",
        existing_on_down(web()),
        becomes(
            pod_state(PodStateMatch::Terminating),
            Window::Within(secs(40.0)),
        ),
        STOP,
    );
    assert_eq!(one(e, &t, true).outcome, Outcome::Failed);
}

#[test]
fn gap_over_a_never_interval_is_undecidable_unless_the_member_bridges_it() {
    let t = timeline("kubelet-stop-gap");
    // Deletion is one-way: the agent pod, present and not terminating after the relist
    // that ended the gap, was not terminating inside it.
    let e = expect(
        "agent never terminating",
        existing_on_down(agent()),
        Check::Never {
            state: pod_state(PodStateMatch::Terminating),
            until: Until::End,
        },
        STOP,
    );
    let v = one(e, &t, true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    // A phase leaves no evidence: it may have changed and changed back unseen.
    let e = expect(
        "agent never pending",
        existing_on_down(agent()),
        Check::Never {
            state: pod_state(PodStateMatch::Pending),
            until: Until::End,
        },
        STOP,
    );
    let v = one(e, &t, true);
    assert_eq!(v.outcome, Outcome::Undecidable);
    assert!(
        v.message.contains("no observation from +41.2s to +47.9s"),
        "{}",
        v.message
    );
    // An observed violation is a failure even with a gap elsewhere.
    let e = expect(
        "web never terminating",
        existing_on_down(web()),
        Check::Never {
            state: pod_state(PodStateMatch::Terminating),
            until: Until::End,
        },
        STOP,
    );
    assert_eq!(one(e, &t, true).outcome, Outcome::Failed);
}

#[test]
fn verdicts_come_in_expectation_order() {
    let exp = experiment(vec![
        expect(
            "b",
            node_down(),
            becomes(node_state(NodeStateMatch::Unknown), Window::Eventually),
            STOP,
        ),
        expect(
            "a",
            node_down(),
            becomes(node_state(NodeStateMatch::Gone), Window::Eventually),
            STOP,
        ),
    ]);
    let v = judge(&exp, &targets(), &timers(), &[], &stop(), true);
    let names: Vec<&str> = v.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, vec!["b", "a"]);
    assert_eq!(v[1].outcome, Outcome::Failed);
}

#[test]
fn never_until_a_step_only_looks_before_that_step() {
    // The StatefulSet replacement db-0 (new UID) runs at +96s, after `start kubelet` at +90s.
    let replacements = pods(
        db(),
        None,
        None,
        PodGeneration::Replacements,
        Quantifier::All,
    );
    let before_start = expect(
        "no db replacement while the old pod exists",
        replacements.clone(),
        Check::Never {
            state: pod_state(PodStateMatch::Running),
            until: Until::Step("start kubelet".into()),
        },
        STOP,
    );
    let v = one(before_start, &stop(), true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);

    let to_the_end = expect(
        "no db replacement at all",
        replacements,
        Check::Never {
            state: pod_state(PodStateMatch::Running),
            until: Until::End,
        },
        STOP,
    );
    let v = one(to_the_end, &stop(), true);
    assert_eq!(v.outcome, Outcome::Failed, "{}", v.message);
    assert!(v.message.contains("+96.0s"), "{}", v.message);

    // While the run is still before the step, the hold is not decided yet.
    let early = expect(
        "undecided before the step",
        existing_on_down(db()),
        Check::Never {
            state: pod_state(PodStateMatch::Gone),
            until: Until::Step("start kubelet".into()),
        },
        STOP,
    );
    let v = one(early, &prefix(&stop(), 60_000), false);
    assert_eq!(v.outcome, Outcome::Pending, "{}", v.message);
}

#[test]
fn never_about_replacements_that_never_appeared_holds() {
    // The DaemonSet's pod is never evicted in this timeline, so it has no replacement.
    let none = |until: Until| {
        expect(
            "no agent replacement",
            pods(
                agent(),
                None,
                None,
                PodGeneration::Replacements,
                Quantifier::All,
            ),
            Check::Never {
                state: pod_state(PodStateMatch::Running),
                until,
            },
            STOP,
        )
    };
    let v = one(none(Until::End), &stop(), true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    assert!(v.message.contains("none appeared"), "{}", v.message);
    // Before the hold's end step, and with the run still going, it is not decided yet.
    let v = one(
        none(Until::Step("start kubelet".into())),
        &prefix(&stop(), 60_000),
        false,
    );
    assert_eq!(v.outcome, Outcome::Pending, "{}", v.message);
}

#[test]
fn a_replacement_created_after_a_hold_ended_is_not_part_of_the_hold() {
    // Web replacements are Ready from ~+52s to the end; add one more replacement created
    // after `start kubelet` (+90s) that never becomes Ready.
    let mut t = stop();
    let template = t
        .entries
        .iter()
        .find_map(|e| match &e.event {
            faultline::timeline::Event::Pod { after: Some(s), .. }
                if s.owner.as_ref().is_some_and(|o| o.name == "web") =>
            {
                Some(faultline::timeline::PodState::clone(s))
            }
            _ => None,
        })
        .expect("a web pod in the fixture");
    let late = faultline::timeline::PodState {
        phase: "Pending".into(),
        ready: false,
        ready_since: None,
        node: None,
        ..template
    };
    let at = t.end_ms() - 1;
    let wall = t.entries.last().expect("entries").wall;
    t.entries.push(faultline::timeline::Entry {
        offset_ms: at,
        wall,
        event: faultline::timeline::Event::Pod {
            pod: faultline::timeline::PodId {
                namespace: NS.into(),
                name: "web-late".into(),
                uid: "u-web-late".into(),
            }
            .into(),
            before: None,
            after: Some(late.into()),
        },
    });
    t.entries.sort_by_key(|e| e.offset_ms);
    let e = expect(
        "replacements stay Ready until the kubelet is back",
        replacements_off_down(web()),
        Check::Stays {
            state: pod_state(PodStateMatch::Ready),
            until: Until::Step("start kubelet".into()),
        },
        STOP,
    );
    let v = one(e, &t, true);
    assert_eq!(v.outcome, Outcome::Passed, "{}", v.message);
    assert!(!v.message.contains("web-late"), "{}", v.message);
}
