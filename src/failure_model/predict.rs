//! The prediction itself: node windows first, then each zone's state and eviction queue,
//! then each pod on a faulted node.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{
    ControllerSettings, ModelNode, ModelPod, Outage, Owner, Prediction, Rule, Toleration,
    Transition, Window,
};

/// How often `doNoExecuteTaintingPass` takes nodes off the zone's queue
/// (`scheduler.NodeEvictionPeriod`).
const TAINT_PASS: Duration = Duration::from_millis(100);

/// How often the pod garbage collector runs (`gcCheckPeriod` in `pkg/controller/podgc`):
/// it force-deletes the terminating pods of a node that is out of service at its next pass.
const POD_GC_PERIOD: Duration = Duration::from_secs(20);

/// How long the pod garbage collector waits before it deletes the pods of a Node that is
/// gone (`quarantineTime` in `pkg/controller/podgc`).
const ORPHAN_QUARANTINE: Duration = Duration::from_secs(40);

/// How late an orphan's deletion can come after the quarantine: the pass that first sees
/// the Node gone comes up to one period after the deletion, and the quarantined name becomes
/// ready within microseconds of the pass two periods later (the period slides: it starts
/// when a pass ends), so a pass can miss it by a hair and the pods wait one period more.
/// CI saw it: deleted 62.9 s after the Node.
const ORPHAN_PASSES: Duration = Duration::from_secs(2 * POD_GC_PERIOD.as_secs());

/// How long a workload controller may take to recreate a pod once the pod is gone: it
/// acts on the deletion event from its work queue, with no timer in between, so this is
/// only the control plane's delay under load (kind, 2026-11-28: 50 ms), taken generously.
const CONTROLLER_REACTS: Duration = Duration::from_secs(5);

/// A zone's state as `ComputeZoneState` decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ZoneState {
    Normal,
    Partial,
    Full,
}

/// A window known to happen, as two offsets (`latest` may be open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    earliest: Duration,
    latest: Option<Duration>,
}

impl Span {
    fn window(self) -> Window {
        Window::Between {
            earliest: self.earliest,
            latest: self.latest,
        }
    }

    fn shifted(self, by: Duration) -> Span {
        Span {
            earliest: self.earliest + by,
            latest: self.latest.map(|l| l + by),
        }
    }
}

/// What happens to one faulted node: its Unknown span (or why not) and its taint's.
struct NodeFate<'a> {
    outage: &'a Outage,
    unknown: Result<Span, Rule>,
    tainted: Result<(Span, Rule), Rule>,
}

/// Every transition the outages cause on their nodes and those nodes' pods, each with its
/// window and the rule that produced it. `nodes` is the whole cluster (zones and readiness
/// decide the eviction rate); `pods` are the pods on the faulted nodes.
pub fn predict(
    settings: &ControllerSettings,
    nodes: &[ModelNode],
    pods: &[ModelPod],
    outages: &[Outage],
) -> Vec<Prediction> {
    let mut fates: Vec<NodeFate<'_>> = outages
        .iter()
        .map(|outage| {
            let unknown = unknown_span(settings, outage);
            // Not tainted for the reason it never goes Unknown (set below when it does).
            let tainted = Err(unknown.clone().err().unwrap_or(Rule::GracePeriod));
            NodeFate {
                outage,
                unknown,
                tainted,
            }
        })
        .collect();
    taint_spans(settings, nodes, &mut fates);

    let mut out = Vec::new();
    for fate in &fates {
        let node = &fate.outage.node;
        out.push(prediction(
            node,
            Transition::NodeUnknown,
            fate.unknown.clone().map(|s| (s, Rule::GracePeriod)),
        ));
        out.push(prediction(
            node,
            Transition::NodeTainted,
            fate.tainted.clone(),
        ));
        if let (Ok(_), Some(back)) = (&fate.unknown, fate.outage.until) {
            out.push(prediction(
                node,
                Transition::NodeReady,
                Ok((
                    Span {
                        earliest: back,
                        latest: None,
                    },
                    Rule::Answers,
                )),
            ));
        }
        for pod in pods.iter().filter(|p| &p.node == node) {
            out.extend(pod_predictions(settings, fate, pod));
        }
    }
    out
}

fn prediction(
    subject: &str,
    transition: Transition,
    when: Result<(Span, Rule), Rule>,
) -> Prediction {
    let (window, rule) = match when {
        Ok((span, rule)) => (span.window(), rule),
        Err(rule) => (Window::Never, rule),
    };
    Prediction {
        subject: subject.to_string(),
        transition,
        window,
        rule,
    }
}

/// When the node's Ready goes Unknown: the last Lease renewal is up to one renew interval
/// before the fault; the controller acts once the grace period has passed since it, at its
/// next monitor pass. A node that answers again before that never goes Unknown.
fn unknown_span(settings: &ControllerSettings, outage: &Outage) -> Result<Span, Rule> {
    let grace = settings.node_monitor_grace_period;
    let earliest = (outage.from + grace)
        .saturating_sub(settings.renew_interval())
        .max(outage.from);
    let mut latest = outage.held_by.max(outage.from) + grace + settings.node_monitor_period;
    if let Some(back) = outage.until {
        if back <= earliest {
            return Err(Rule::BackBeforeGrace);
        }
        latest = latest.min(back);
    }
    Ok(Span {
        earliest,
        latest: Some(latest),
    })
}

/// Each zone's state once its faulted nodes are Unknown, and from it each node's taint:
/// through the zone's token bucket (burst 1) at the zone's rate, in the order the nodes
/// go Unknown; none when every zone is fully disrupted or a small zone is partially.
fn taint_spans(settings: &ControllerSettings, nodes: &[ModelNode], fates: &mut [NodeFate<'_>]) {
    let down: Vec<&str> = fates
        .iter()
        .filter(|f| f.unknown.is_ok())
        .map(|f| f.outage.node.as_str())
        .collect();
    let mut zones: BTreeMap<&str, (usize, usize)> = BTreeMap::new(); // zone → (size, not Ready)
    for n in nodes {
        let entry = zones.entry(n.zone.as_str()).or_default();
        entry.0 += 1;
        if !n.ready || down.contains(&n.name.as_str()) {
            entry.1 += 1;
        }
    }
    let state = |zone: &str| -> (ZoneState, usize) {
        let (size, not_ready) = zones.get(zone).copied().unwrap_or((1, 1));
        let ready = size - not_ready;
        let s = if ready == 0 && not_ready > 0 {
            ZoneState::Full
        } else if not_ready > 2
            && not_ready as f64 / size as f64 >= settings.unhealthy_zone_threshold
        {
            ZoneState::Partial
        } else {
            ZoneState::Normal
        };
        (s, size)
    };
    let all_full = !zones.is_empty() && zones.keys().all(|z| state(z).0 == ZoneState::Full);
    let zone_of = |node: &str| {
        nodes
            .iter()
            .find(|n| n.name == node)
            .map_or("", |n| n.zone.as_str())
    };

    // The pass that sets Unknown decides on the condition as it read it (still True), so
    // a node joins its zone's queue at the next pass, one monitor period later.
    let queued: Vec<Option<Span>> = fates
        .iter()
        .map(|f| {
            f.unknown
                .as_ref()
                .ok()
                .map(|u| u.shifted(settings.node_monitor_period))
        })
        .collect();
    for i in 0..fates.len() {
        let Some(mine) = queued[i] else {
            continue;
        };
        let zone = zone_of(&fates[i].outage.node).to_string();
        let (zone_state, size) = state(&zone);
        let rate = match zone_state {
            _ if all_full => {
                fates[i].tainted = Err(Rule::AllZonesDisrupted);
                continue;
            }
            ZoneState::Partial if size <= settings.large_cluster_size_threshold => {
                fates[i].tainted = Err(Rule::PartialDisruptionSmallZone { zone });
                continue;
            }
            ZoneState::Partial => settings.secondary_eviction_rate,
            ZoneState::Normal | ZoneState::Full => settings.eviction_rate,
        };
        // The zone's queue takes one node per 1/rate seconds (burst 1). The nodes queued
        // for certain before this one go first; those whose queueing may come first (their
        // windows overlap) may or may not: the window spans both.
        let others: Vec<Span> = (0..fates.len())
            .filter(|&j| j != i && zone_of(&fates[j].outage.node) == zone)
            .filter_map(|j| queued[j])
            .collect();
        let before = |a: &Span, b: &Span| a.latest.is_some_and(|l| l < b.earliest);
        let certainly_ahead = others.iter().filter(|o| before(o, &mine)).count();
        let turn = |n: usize| Duration::from_secs_f64(n as f64 / rate);
        // One queued long before has had its turn by the time this one joins.
        let still_queued = |o: &Span| {
            o.latest
                .is_none_or(|l| l + turn(others.len()) + TAINT_PASS >= mine.earliest)
        };
        let maybe_ahead = others
            .iter()
            .filter(|o| !before(&mine, o) && still_queued(o))
            .count();
        let first = others
            .iter()
            .map(|o| o.earliest)
            .chain([mine.earliest])
            .min()
            .unwrap_or(mine.earliest);
        let earliest = mine.earliest.max(first + turn(certainly_ahead));
        let latest = mine.latest.map(|l| l + turn(maybe_ahead) + TAINT_PASS);
        let span = Span { earliest, latest };
        fates[i].tainted = match (fates[i].outage.until, fates[i].outage.deleted) {
            (Some(back), _) if back <= earliest => Err(Rule::BackBeforeGrace),
            // No Node object left to taint.
            (_, Some(deleted)) if deleted <= earliest => Err(Rule::NodeDeleted),
            _ => Ok((
                span,
                Rule::EvictionQueue {
                    rate,
                    position: maybe_ahead,
                },
            )),
        };
    }
}

/// NotReady, Terminating and the replacement of one pod on a faulted node.
fn pod_predictions(
    settings: &ControllerSettings,
    fate: &NodeFate<'_>,
    pod: &ModelPod,
) -> Vec<Prediction> {
    let name = pod.name.as_str();
    let not_ready = fate.unknown.clone().map(|s| (s, Rule::WithItsNode));
    let by_taint = match (&fate.tainted, pod.toleration) {
        (Err(rule), _) => Err(rule.clone()),
        (Ok(_), Toleration::Forever) => Err(Rule::ToleratesForever),
        (Ok((span, _)), t) => {
            let wait = match t {
                Toleration::Default => settings.default_unreachable_toleration,
                Toleration::For(d) => d,
                Toleration::Forever => unreachable!("handled above"),
            };
            let at = span.shifted(wait);
            match fate.outage.until {
                Some(back) if back <= at.earliest => Err(Rule::BackBeforeToleration),
                _ => Ok((at, Rule::Toleration(wait))),
            }
        }
    };
    // The out-of-service taint (NoExecute, tolerated by no default: not even the ones the
    // DaemonSet controller adds) evicts at once. Only a pod that tolerates every taint
    // (`operator: Exists` without a key, as kube-proxy's) stays, which the model's input
    // does not say.
    let by_out_of_service = fate.outage.out_of_service.map(|at| {
        (
            Span {
                earliest: at,
                latest: Some(at + TAINT_PASS + settings.node_monitor_period),
            },
            Rule::OutOfService,
        )
    });
    // The taint eviction controller forgets a deleted Node's pods: an eviction due after
    // the deletion never comes.
    let by_taint = match (by_taint, fate.outage.deleted) {
        (Ok((span, _)), Some(d)) if span.earliest >= d => Err(Rule::NodeDeleted),
        (other, _) => other,
    };
    // A deleted Node's pods are orphans: deleted after the quarantine, every one of them.
    let by_deletion = fate.outage.deleted.map(|at| {
        (
            Span {
                earliest: at + ORPHAN_QUARANTINE,
                latest: Some(at + ORPHAN_QUARANTINE + ORPHAN_PASSES + TAINT_PASS),
            },
            Rule::NodeDeleted,
        )
    });
    // A step's delete marks the pod (or, forced, removes it) by the time the call returns.
    let by_step = pod.deleted.map(|d| {
        (
            Span {
                earliest: d.from,
                latest: Some(d.by),
            },
            Rule::DeletedByStep { force: d.force },
        )
    });
    // Whichever comes first makes it Terminating; with none of them, why not.
    let others = [by_out_of_service, by_deletion, by_step]
        .into_iter()
        .flatten();
    let terminating =
        first_of(by_taint.clone().ok().into_iter().chain(others)).map_or(by_taint, Ok);
    let force_deleted = pod.deleted.filter(|d| d.force).map(|d| {
        (
            Span {
                earliest: d.from,
                latest: Some(d.by + CONTROLLER_REACTS),
            },
            Rule::DeletedByStep { force: true },
        )
    });
    let replaced = match (&terminating, pod.owner) {
        (Err(rule), _) => Err(rule.clone()),
        // A DaemonSet's pod comes back with its node: a deleted Node registers again (a new
        // object) when the kubelet answers, an out-of-service one is untainted once it is
        // back, and the DaemonSet gives it a new pod.
        (Ok((_, Rule::NodeDeleted | Rule::OutOfService)), Owner::DaemonSet) => {
            match fate.outage.until {
                Some(back) => Ok((
                    Span {
                        earliest: back,
                        latest: None,
                    },
                    Rule::Answers,
                )),
                None => Err(Rule::NotReplaced),
            }
        }
        // A force-deleted daemon pod is missing from a node that should run it, and whose
        // taints it tolerates: the DaemonSet creates it there again.
        (Ok(_), Owner::DaemonSet) => force_deleted.ok_or(Rule::NotReplaced),
        (Ok(_), Owner::None) => Err(Rule::NotReplaced),
        (Ok((span, _)), Owner::ReplicaSet) => Ok((*span, Rule::ReplicaSetReplaces)),
        // Deleted outright (not only marked): the StatefulSet recreates it at once.
        (Ok((span, Rule::NodeDeleted)), Owner::StatefulSet) => Ok((*span, Rule::NodeDeleted)),
        (Ok((span, rule)), Owner::StatefulSet) => {
            // Gone once the node answers again (its kubelet finishes the deletion), when
            // the pod garbage collector force-deletes it out of service (at its next
            // pass), or when a step force-deletes it; whichever can come first (the
            // first of equals: the collector's pass, then the step, then the node).
            let back = fate.outage.until.filter(|b| *b >= span.earliest).map(|b| {
                (
                    Span {
                        earliest: b,
                        latest: None,
                    },
                    Rule::Answers,
                )
            });
            let collected = (*rule == Rule::OutOfService).then(|| {
                (
                    Span {
                        earliest: span.earliest,
                        latest: span.latest.map(|l| l + POD_GC_PERIOD),
                    },
                    Rule::OutOfService,
                )
            });
            first_of([collected, force_deleted, back].into_iter().flatten())
                .ok_or(Rule::StatefulSetWaits)
        }
    };
    let mut out = Vec::new();
    // A reboot short of the grace period: the node stays Ready, but the kubelet itself
    // marks the pod not Ready while it starts its containers again, when the model cannot
    // say: no NotReady prediction then.
    if !(fate.outage.restarts && not_ready.is_err()) {
        out.push(prediction(name, Transition::PodNotReady, not_ready));
    }
    let still_there = terminating.is_err();
    out.push(prediction(name, Transition::PodTerminating, terminating));
    out.push(prediction(name, Transition::PodReplaced, replaced));
    // The same pod, back on its restarted machine: its containers start again in place.
    if let (true, true, Some(_)) = (fate.outage.restarts, still_there, fate.outage.until) {
        out.push(prediction(
            name,
            Transition::PodRestarted,
            Ok((
                Span {
                    earliest: fate.outage.from,
                    latest: None,
                },
                Rule::RestartsInPlace,
            )),
        ));
    }
    out
}

/// The first of several things that may each happen, in its own window: it comes no
/// earlier than the earliest of them opens and no later than the first of them closes.
/// Named by the rule of the one that can come first (the first of equals).
fn first_of(candidates: impl IntoIterator<Item = (Span, Rule)>) -> Option<(Span, Rule)> {
    candidates.into_iter().reduce(|(a, rule_a), (b, rule_b)| {
        let latest = match (a.latest, b.latest) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        let rule = if b.earliest < a.earliest {
            rule_b
        } else {
            rule_a
        };
        (
            Span {
                earliest: a.earliest.min(b.earliest),
                latest,
            },
            rule,
        )
    })
}
