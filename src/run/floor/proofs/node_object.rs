//! The Node-object proofs (cordon, taint, delete) read what the run's observer holds of the
//! node, not the API.
//!
//! The observer watches every Node already and files each change on the timeline; a GET of
//! the same Node once a second beside it would be a second, slower view of the same object
//! (issue 45, item 6). Measured on the recorded runs (kind's delete and out-of-service
//! taint, the lab roll's three drains), the watch held each change 7–63 ms after its step
//! was issued, before the step's own call returned, so at the proof's first reading
//! (`recorded_runs_show_every_node_object_fault_by_the_second_reading`). Under
//! `--observe poll` the same state is read; it is only as fresh as the last list, so the
//! bound grows by one poll interval ([`lag`]).

use std::time::Duration;

use crate::experiment::fault::Proof;
use crate::experiment::model::TaintSpec;
use crate::judge::Latest;
use crate::observe::{NODES_SOURCE, ObserveMode};

use super::Reading;

/// Whether `proof` reads the observer's state of a Node (rather than asking the node or
/// its Lease).
pub(super) fn reads_observer(proof: Proof) -> bool {
    matches!(
        proof,
        Proof::NodeGone | Proof::Unschedulable | Proof::Tainted
    )
}

/// How much later than the API the observer may hold a change in `mode`: nothing for a
/// watch (see the module's figures), one interval for a poll (the change shows at the next
/// list).
pub(super) fn lag(proof: Proof, mode: ObserveMode) -> Duration {
    match mode {
        ObserveMode::Poll { interval } if reads_observer(proof) => interval,
        _ => Duration::ZERO,
    }
}

/// What the observer's latest word on `node` says of `proof`: the node never seen, or the
/// Node source out of sight (first list not in, a gap open), is no reading.
pub(super) fn reading(
    latest: &Latest<'_>,
    node: &str,
    proof: Proof,
    taint: Option<&TaintSpec>,
) -> Reading {
    if !latest.source_in_sight(NODES_SOURCE) {
        return Reading::Unknown(
            "the observer is not in sight of the nodes (first list not in, or a gap open)".into(),
        );
    }
    let Some(seen) = latest.node(node) else {
        return Reading::Unknown(format!("the observer never saw node {node}"));
    };
    match proof {
        Proof::NodeGone => match seen {
            None => Reading::InEffect("the Node object is gone".into()),
            Some(_) => Reading::NotInEffect("the Node object still exists".into()),
        },
        Proof::Unschedulable => match seen {
            None => Reading::Unknown("the Node object is gone".into()),
            Some(state) if state.unschedulable => {
                Reading::InEffect("the node is unschedulable".into())
            }
            Some(_) => Reading::NotInEffect("the node is schedulable".into()),
        },
        _ => {
            let Some(want) = taint else {
                return Reading::Unknown("no taint to look for".into());
            };
            let which = format!("{}:{}", want.key, want.effect);
            match seen {
                None => Reading::Unknown("the Node object is gone".into()),
                Some(state)
                    if state
                        .taints
                        .iter()
                        .any(|t| t.key == want.key && t.effect == want.effect) =>
                {
                    Reading::InEffect(format!("the node carries {which}"))
                }
                Some(_) => Reading::NotInEffect(format!("the node lacks {which}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Node, Taint as ApiTaint};

    use super::*;
    use crate::events::RunEvents;
    use crate::experiment::model::Action;
    use crate::judge::TimelineIndex;
    use crate::observe::{Observation, Recorder, Seen};
    use crate::run::shared_timeline::SharedTimeline;
    use crate::timeline::{Event, GapPhase, RunPhase, StepPhase};

    const NODE: &str = "lab-worker-1";

    fn out_of_service() -> TaintSpec {
        TaintSpec {
            key: "node.kubernetes.io/out-of-service".into(),
            value: Some("nodeshutdown".into()),
            effect: "NoExecute".into(),
        }
    }

    /// What each of the three proofs reads of `NODE` from the timeline as it stands.
    fn read_all(timeline: &SharedTimeline) -> [Reading; 3] {
        let taint = out_of_service();
        timeline.latest_view(|latest| {
            [
                reading(latest, NODE, Proof::Unschedulable, None),
                reading(latest, NODE, Proof::Tainted, Some(&taint)),
                reading(latest, NODE, Proof::NodeGone, None),
            ]
        })
    }

    fn kinds(readings: &[Reading; 3]) -> [&'static str; 3] {
        readings.each_ref().map(|r| match r {
            Reading::InEffect(_) => "in effect",
            Reading::NotInEffect(_) => "not in effect",
            Reading::Unknown(_) => "unknown",
        })
    }

    /// Folds `seen` through the observer's own recorder onto `timeline`, as a run does.
    fn observe(recorder: &mut Recorder, timeline: &SharedTimeline, seen: Seen<Node>) {
        for event in recorder.record(Observation::Node(seen)) {
            timeline.record(event);
        }
    }

    #[test]
    fn the_three_proofs_read_the_observers_node_as_the_recorder_reduced_it() {
        // A recorded API object, through the observer's recorder: what a run's watch files.
        let ready: Node = crate::fixtures::load("node-ready.json");
        assert_eq!(ready.metadata.name.as_deref(), Some(NODE));
        let timeline = SharedTimeline::start(RunEvents::default());
        let mut recorder = Recorder::new();

        // Before the observer said it has every first list, nothing is read.
        observe(&mut recorder, &timeline, Seen::Init);
        observe(&mut recorder, &timeline, Seen::InitApply(ready.clone()));
        observe(&mut recorder, &timeline, Seen::InitDone);
        assert_eq!(kinds(&read_all(&timeline)), ["unknown"; 3]);
        timeline.record(Event::Run {
            phase: RunPhase::ObserverReady { sources: 1 },
        });
        let before = read_all(&timeline);
        assert_eq!(kinds(&before), ["not in effect"; 3]);
        assert_eq!(
            before,
            [
                Reading::NotInEffect("the node is schedulable".into()),
                Reading::NotInEffect(
                    "the node lacks node.kubernetes.io/out-of-service:NoExecute".into()
                ),
                Reading::NotInEffect("the Node object still exists".into()),
            ]
        );

        // A node never seen is no reading, whatever the proof.
        let taint = out_of_service();
        timeline.latest_view(|latest| {
            for (proof, taint) in [
                (Proof::Unschedulable, None),
                (Proof::Tainted, Some(&taint)),
                (Proof::NodeGone, None),
            ] {
                let r = reading(latest, "lab-worker-9", proof, taint);
                assert_eq!(
                    r,
                    Reading::Unknown("the observer never saw node lab-worker-9".into()),
                    "{proof:?}"
                );
            }
        });

        // Cordoned and tainted, with the taint's effect deciding (another effect of the
        // same key is not the fault).
        let mut faulted = ready.clone();
        let spec = faulted.spec.get_or_insert_with(Default::default);
        spec.unschedulable = Some(true);
        spec.taints = Some(vec![ApiTaint {
            key: "node.kubernetes.io/out-of-service".into(),
            effect: "NoSchedule".into(),
            ..ApiTaint::default()
        }]);
        observe(&mut recorder, &timeline, Seen::Applied(faulted.clone()));
        assert_eq!(
            kinds(&read_all(&timeline)),
            ["in effect", "not in effect", "not in effect"]
        );
        if let Some(taints) = faulted.spec.as_mut().and_then(|s| s.taints.as_mut()) {
            taints.push(ApiTaint {
                key: "node.kubernetes.io/out-of-service".into(),
                value: Some("nodeshutdown".into()),
                effect: "NoExecute".into(),
                ..ApiTaint::default()
            });
        }
        observe(&mut recorder, &timeline, Seen::Applied(faulted.clone()));
        let faulted_readings = read_all(&timeline);
        assert_eq!(
            kinds(&faulted_readings),
            ["in effect", "in effect", "not in effect"]
        );
        assert_eq!(
            faulted_readings[1],
            Reading::InEffect(
                "the node carries node.kubernetes.io/out-of-service:NoExecute".into()
            )
        );

        // A gap on the Node source: the last state may be stale, so no reading; a gap on
        // another source does not blind the node proofs.
        for (source, blind) in [("pods/faultline-lab", false), (NODES_SOURCE, true)] {
            timeline.record(Event::Gap {
                source: source.into(),
                phase: GapPhase::Began,
                reason: "connection reset".into(),
            });
            let want = if blind {
                ["unknown"; 3]
            } else {
                ["in effect", "in effect", "not in effect"]
            };
            assert_eq!(kinds(&read_all(&timeline)), want, "gap on {source}");
            timeline.record(Event::Gap {
                source: source.into(),
                phase: GapPhase::Ended,
                reason: crate::timeline::GAP_RELISTED.into(),
            });
        }
        assert_eq!(
            kinds(&read_all(&timeline)),
            ["in effect", "in effect", "not in effect"]
        );

        // Deleted: gone is the delete's proof, and no reading for the others.
        observe(&mut recorder, &timeline, Seen::Deleted(faulted));
        assert_eq!(
            read_all(&timeline),
            [
                Reading::Unknown("the Node object is gone".into()),
                Reading::Unknown("the Node object is gone".into()),
                Reading::InEffect("the Node object is gone".into()),
            ]
        );

        // Its kubelet registers it again: it exists, as first listed.
        observe(&mut recorder, &timeline, Seen::Applied(ready));
        assert_eq!(kinds(&read_all(&timeline)), ["not in effect"; 3]);
    }

    #[test]
    fn the_observer_after_the_end_of_observation_is_read_too() {
        // Entries after the end of observation are filed apart; the latest word wins.
        let timeline = SharedTimeline::start(RunEvents::default());
        let mut recorder = Recorder::new();
        let ready: Node = crate::fixtures::load("node-ready.json");
        observe(&mut recorder, &timeline, Seen::Init);
        observe(&mut recorder, &timeline, Seen::InitApply(ready.clone()));
        observe(&mut recorder, &timeline, Seen::InitDone);
        timeline.record(Event::Run {
            phase: RunPhase::ObserverReady { sources: 1 },
        });
        timeline.end_observation(None);
        std::thread::sleep(Duration::from_millis(2));
        observe(&mut recorder, &timeline, Seen::Deleted(ready));
        assert_eq!(kinds(&read_all(&timeline))[2], "in effect");
    }

    #[test]
    fn a_poll_gives_the_observers_proofs_one_interval_more() {
        let poll = ObserveMode::Poll {
            interval: Duration::from_secs(7),
        };
        for proof in [Proof::NodeGone, Proof::Unschedulable, Proof::Tainted] {
            assert_eq!(lag(proof, poll), Duration::from_secs(7), "{proof:?}");
            assert_eq!(lag(proof, ObserveMode::WatchStreamed), Duration::ZERO);
        }
        assert_eq!(lag(Proof::HeartbeatStopped, poll), Duration::ZERO);
        assert_eq!(lag(Proof::KubeletInactive, poll), Duration::ZERO);
    }

    /// The proof a recorded fault step's entry stands for, with its taint: the step's own
    /// action when the experiment names it, else (a roll's expanded step) its action name.
    fn recorded_proof(
        record: &crate::record::RunRecord,
        step: &str,
        action: &str,
    ) -> Option<(Proof, Option<TaintSpec>)> {
        let named = record.experiment.steps.iter().find(|s| s.name == step);
        match named.map(|s| &s.action) {
            Some(Action::Taint(t)) => Some((Proof::Tainted, Some(t.clone()))),
            Some(a) => reads_observer(crate::experiment::fault::proof(a))
                .then(|| (crate::experiment::fault::proof(a), None)),
            None => match action {
                "cordon" | "drain" => Some((Proof::Unschedulable, None)),
                "delete-node" => Some((Proof::NodeGone, None)),
                _ => None,
            },
        }
    }

    /// The figure issue 45 (item 6) asks for, from real runs: how long after a cordon,
    /// taint or delete step finished the observer's watch held the change. A reading at
    /// the step's end and one a second later are the proof's first two.
    #[test]
    fn recorded_runs_show_every_node_object_fault_by_the_second_reading() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/records");
        let mut paths = Vec::new();
        let mut dirs = vec![dir];
        while let Some(d) = dirs.pop() {
            for entry in std::fs::read_dir(&d).expect("fixtures/records") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "json") {
                    paths.push(path);
                }
            }
        }
        paths.sort();
        let second = i64::try_from(super::super::CONFIRM_EVERY.as_millis()).expect("ms");
        let mut proven = Vec::new();
        for path in paths {
            // The repeat records (`upgrade/`) are another shape, without a cordon, taint
            // or delete.
            let Ok(record) = crate::record::RunRecord::load(&path) else {
                continue;
            };
            let entries = &record.timeline.entries;
            // Only runs whose observer said when it had every first list (older records
            // predate the entry).
            if !entries.iter().any(|e| {
                matches!(
                    e.event,
                    Event::Run {
                        phase: RunPhase::ObserverReady { .. }
                    }
                )
            }) {
                continue;
            }
            let mut issued = None;
            for entry in entries {
                let Event::Step {
                    step,
                    action,
                    node: Some(node),
                    phase,
                } = &entry.event
                else {
                    continue;
                };
                let Some((proof, taint)) = recorded_proof(&record, step, action) else {
                    continue;
                };
                match phase {
                    StepPhase::Issued => issued = Some(entry.offset_ms),
                    StepPhase::Finished { .. } => {
                        let issued = issued.take().expect("issued before finished");
                        let at = |until: i64| {
                            let index = TimelineIndex::of(&record.timeline.until(until));
                            reading(&Latest::new(&index, None), node, proof, taint.as_ref())
                        };
                        let what = format!("{} {step} on {node}", path.display());
                        let before = at(issued - 1);
                        assert!(
                            matches!(before, Reading::NotInEffect(_)),
                            "{what}: before the step: {before:?}"
                        );
                        let by_second = at(entry.offset_ms + second);
                        assert!(
                            matches!(by_second, Reading::InEffect(_)),
                            "{what}: {by_second:?}"
                        );
                        // When the observer first held the fault, after the step's end.
                        let seen = entries
                            .iter()
                            .filter(|e| e.offset_ms >= issued)
                            .find(|e| matches!(at(e.offset_ms), Reading::InEffect(_)))
                            .map(|e| e.offset_ms - entry.offset_ms);
                        proven.push((what, seen));
                    }
                    _ => {}
                }
            }
        }
        // The recorded delete (kind), taint (kind, out of service) and the roll's three
        // drains. A watch slower than the proof's cadence would fail here: the figure
        // was at most 1 ms after the step's end on every one.
        assert!(proven.len() >= 5, "{proven:?}");
        for (what, after_end_ms) in &proven {
            assert!(
                after_end_ms.is_some_and(|ms| ms < second),
                "{what}: the observer held the fault {after_end_ms:?} ms after the step's end"
            );
        }
    }
}
