//! Property tests of the model's invariants over generated clusters, timers, pods and
//! outages: an eviction never comes before its node's taint plus the pod's toleration; a
//! pod that tolerates the taint forever (a DaemonSet's) is never evicted by it; nothing is
//! tainted or evicted when every node is down; a pod a step deletes is Terminating by the
//! time the call returned, and, forced, replaced soon after when it has a controller;
//! every window opens at or after the outage and closes no earlier than it opens.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

/// A generated scenario: settings, nodes, pods on them and outages.
#[derive(Debug, Clone)]
struct Scenario {
    settings: ControllerSettings,
    nodes: Vec<ModelNode>,
    pods: Vec<ModelPod>,
    outages: Vec<Outage>,
}

fn settings() -> impl Strategy<Value = ControllerSettings> {
    (
        1u64..=10,
        10u64..=60,
        0u64..=300,
        prop_oneof![Just(10u64), Just(40)],
    )
        .prop_map(|(monitor, grace, toleration, lease)| ControllerSettings {
            node_monitor_period: Duration::from_secs(monitor),
            node_monitor_grace_period: Duration::from_secs(grace),
            default_unreachable_toleration: Duration::from_secs(toleration),
            node_lease_duration: Duration::from_secs(lease),
            ..ControllerSettings::default()
        })
}

fn owner() -> impl Strategy<Value = Owner> {
    prop_oneof![
        Just(Owner::ReplicaSet),
        Just(Owner::StatefulSet),
        Just(Owner::DaemonSet),
        Just(Owner::None)
    ]
}

fn toleration() -> impl Strategy<Value = Toleration> {
    prop_oneof![
        Just(Toleration::Default),
        (0u64..=600).prop_map(|s| Toleration::For(Duration::from_secs(s))),
        Just(Toleration::Forever)
    ]
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (settings(), 1usize..=8, 1usize..=2).prop_flat_map(|(settings, size, zones)| {
        let nodes: Vec<ModelNode> = (0..size)
            .map(|i| ModelNode {
                name: format!("n{i}"),
                zone: format!("z{}", i % zones),
                ready: true,
            })
            .collect();
        let outage = (
            0..size,
            0u64..=120,
            proptest::option::of(1u64..=600),
            any::<bool>(),
        )
            .prop_map(|(node, from, length, restarts)| Outage {
                node: format!("n{node}"),
                from: Duration::from_secs(from),
                held_by: Duration::from_secs(from),
                until: length.map(|l| Duration::from_secs(from + l)),
                out_of_service: None,
                deleted: None,
                restarts,
            });
        let deletion = proptest::option::of((0u64..=700, 0u64..=3, any::<bool>())).prop_map(|d| {
            d.map(|(from, takes, force)| PodDeletion {
                from: Duration::from_secs(from),
                by: Duration::from_secs(from + takes),
                force,
            })
        });
        let pod = (0..size, owner(), toleration(), deletion).prop_map(
            |(node, owner, toleration, deleted)| (format!("n{node}"), owner, toleration, deleted),
        );
        (
            Just(settings),
            Just(nodes),
            proptest::collection::vec(pod, 0..12),
            proptest::collection::vec(outage, 1..=size),
        )
            .prop_map(|(settings, nodes, pods, mut outages)| {
                // One outage per node, as the experiment's steps give.
                outages.sort_by(|a, b| a.node.cmp(&b.node));
                outages.dedup_by(|a, b| a.node == b.node);
                let pods = pods
                    .into_iter()
                    .enumerate()
                    .map(|(i, (node, owner, toleration, deleted))| ModelPod {
                        name: format!("ns/p{i}"),
                        node,
                        owner,
                        toleration,
                        deleted,
                    })
                    .collect();
                Scenario {
                    settings,
                    nodes,
                    pods,
                    outages,
                }
            })
    })
}

fn prediction_of<'p>(
    all: &'p [Prediction],
    subject: &str,
    t: Transition,
) -> Option<&'p Prediction> {
    all.iter()
        .find(|p| p.subject == subject && p.transition == t)
}

fn window_of<'p>(all: &'p [Prediction], subject: &str, t: Transition) -> Option<&'p Window> {
    prediction_of(all, subject, t).map(|p| &p.window)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_model_keeps_its_invariants(sc in scenario()) {
        let all = predict(&sc.settings, &sc.nodes, &sc.pods, &sc.outages);
        for p in &all {
            if let Window::Between { earliest, latest: Some(latest) } = p.window {
                prop_assert!(latest >= earliest, "{p:?}");
            }
        }
        for o in &sc.outages {
            if let Some(Window::Between { earliest, .. }) =
                window_of(&all, &o.node, Transition::NodeUnknown)
            {
                prop_assert!(*earliest >= o.from, "Unknown before the fault: {o:?}");
            }
        }
        for pod in &sc.pods {
            let Some(outage) = sc.outages.iter().find(|o| o.node == pod.node) else {
                continue;
            };
            let evicted = window_of(&all, &pod.name, Transition::PodTerminating);
            let by_step = prediction_of(&all, &pod.name, Transition::PodTerminating)
                .is_some_and(|p| matches!(p.rule, Rule::DeletedByStep { .. }));
            if let Some(d) = pod.deleted {
                // Deleted by a step: Terminating by the time the call returned, at the latest.
                let Some(Window::Between { earliest, latest: Some(latest) }) = evicted else {
                    return Err(TestCaseError::fail(format!("deleted, never Terminating: {pod:?}")));
                };
                prop_assert!(*latest <= d.by, "{pod:?}: Terminating as late as {latest:?}");
                if by_step {
                    prop_assert_eq!(*earliest, d.from, "{:?}", pod);
                }
                // Forced, with a controller: replaced soon after the call returned.
                if d.force && pod.owner != Owner::None {
                    let replaced = window_of(&all, &pod.name, Transition::PodReplaced);
                    let Some(Window::Between { latest: Some(latest), .. }) = replaced else {
                        return Err(TestCaseError::fail(format!("force-deleted, not replaced: {pod:?}: {replaced:?}")));
                    };
                    prop_assert!(*latest <= d.by + Duration::from_secs(5), "{pod:?}: replaced as late as {latest:?}");
                }
                continue;
            }
            if pod.toleration == Toleration::Forever {
                prop_assert_eq!(evicted, Some(&Window::Never), "{:?}", pod);
            }
            if let Some(Window::Between { earliest, .. }) = evicted {
                let Some(Window::Between { earliest: tainted, .. }) =
                    window_of(&all, &outage.node, Transition::NodeTainted)
                else {
                    return Err(TestCaseError::fail(format!("evicted without a taint: {pod:?}")));
                };
                let wait = match pod.toleration {
                    Toleration::Default => sc.settings.default_unreachable_toleration,
                    Toleration::For(d) => d,
                    Toleration::Forever => unreachable!("checked above"),
                };
                prop_assert!(*earliest >= *tainted + wait, "{pod:?}: {earliest:?} < {tainted:?} + {wait:?}");
            }
        }
        // Every node down for good: the controller blames itself.
        let all_down = sc.nodes.iter().all(|n| {
            sc.outages.iter().any(|o| o.node == n.name && o.until.is_none())
        });
        if all_down {
            for o in &sc.outages {
                prop_assert_eq!(
                    window_of(&all, &o.node, Transition::NodeTainted),
                    Some(&Window::Never)
                );
            }
            for pod in sc.pods.iter().filter(|p| p.deleted.is_none()) {
                prop_assert_eq!(
                    window_of(&all, &pod.name, Transition::PodTerminating),
                    Some(&Window::Never)
                );
            }
        }
    }
}
