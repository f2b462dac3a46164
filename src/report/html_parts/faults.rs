//! When each fault held each node: from the fault step to what undid it, so the picture
//! can shade that stretch on the node's lane and a reader sees the cause beside the effect.

use crate::experiment::fault;
use crate::experiment::model::{Action, Step};
use crate::record::RunRecord;
use crate::timeline::{Event, StepPhase};

/// One fault on one node, from its step to its undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FaultSpan {
    /// The node it hit.
    pub(super) node: String,
    /// The fault step's name.
    pub(super) step: String,
    /// Its action, as experiments spell it (`kubelet-stop`).
    pub(super) action: &'static str,
    /// When the step was issued.
    pub(super) from: i64,
    /// When it ended: its undo issued, or for a fault nothing undoes (a reboot, a deleted
    /// Node) when the step's last word came (finished or proven); the end of the lanes
    /// when it was still in force.
    pub(super) to: i64,
    /// What ended it, in words.
    pub(super) ended: String,
}

/// The step of the experiment named `name`.
fn step<'r>(record: &'r RunRecord, name: &str) -> Option<&'r Step> {
    record.experiment.steps.iter().find(|s| s.name == name)
}

/// Every fault step that hit a node, with when it stopped holding: the next step on the
/// same node that undoes it (or faultline's safety-net undo of it), else `end`. Repairs
/// (`kubelet-start`, `uncordon`) and steps on pods or claims are not faults on a node.
pub(super) fn fault_spans(record: &RunRecord, end: i64) -> Vec<FaultSpan> {
    let entries = &record.timeline.entries;
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let Event::Step {
            step: name,
            node: Some(node),
            phase: StepPhase::Issued,
            ..
        } = &e.event
        else {
            continue;
        };
        let Some(action) = step(record, name).map(|s| &s.action) else {
            continue;
        };
        if fault::info(action).repairs || !fault::info(action).via.needs_target() {
            continue;
        }
        let (to, ended) = match fault::inverse(action) {
            Some(_) => undone_at(record, &entries[i + 1..], name, node, action)
                .unwrap_or((end, "still in force when observation ended".to_string())),
            None => last_word(&entries[i + 1..], name, node)
                .map(|at| (at, "over by itself".to_string()))
                .unwrap_or((e.offset_ms, "over by itself".to_string())),
        };
        out.push(FaultSpan {
            node: node.clone(),
            step: name.clone(),
            action: fault::action_name(action),
            from: e.offset_ms,
            to: to.max(e.offset_ms),
            ended,
        });
    }
    out
}

/// When, after the fault `fault` of step `name` on `node`, something undid it: a later step
/// on the node whose action undoes it, or the safety net's undo of that step.
fn undone_at(
    record: &RunRecord,
    later: &[crate::timeline::Entry],
    name: &str,
    node: &str,
    fault: &Action,
) -> Option<(i64, String)> {
    later.iter().find_map(|e| match &e.event {
        Event::Step {
            step: other,
            node: Some(n),
            phase: StepPhase::Issued,
            ..
        } if n == node => step(record, other)
            .filter(|s| fault::undoes(&s.action, fault))
            .map(|_| (e.offset_ms, format!("undone by `{other}`"))),
        Event::Step {
            step: other,
            node: Some(n),
            phase: StepPhase::Undo { .. },
            ..
        } if n == node && other.strip_prefix("undo ") == Some(name) => {
            Some((e.offset_ms, "undone by faultline's safety net".to_string()))
        }
        _ => None,
    })
}

/// The last thing said about step `name` on `node` (finished, proven), before another
/// step was issued: when a fault nothing undoes was over.
fn last_word(later: &[crate::timeline::Entry], name: &str, node: &str) -> Option<i64> {
    later
        .iter()
        .take_while(|e| {
            !matches!(&e.event, Event::Step { phase: StepPhase::Issued, step, .. } if step != name)
        })
        .filter(|e| {
            matches!(&e.event, Event::Step { step, node: Some(n), .. } if step == name && n == node)
        })
        .map(|e| e.offset_ms)
        .last()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(name: &str) -> RunRecord {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/records")
            .join(format!("{name}.json"));
        RunRecord::load(&path).expect("fixture record")
    }

    #[test]
    fn a_kubelet_stop_holds_until_the_kubelet_starts() {
        let spans = fault_spans(&fixture("kubelet-stop-past-toleration"), 200_000);
        assert_eq!(
            spans,
            vec![FaultSpan {
                node: "lab-worker-2".into(),
                step: "stop kubelet".into(),
                action: "kubelet-stop",
                from: 745,
                to: 80_604,
                ended: "undone by `start kubelet`".into(),
            }]
        );
    }

    #[test]
    fn a_deleted_node_is_a_fault_of_its_own_and_pod_steps_are_none() {
        let spans = fault_spans(&fixture("node-deleted"), 200_000);
        let named: Vec<(&str, i64, i64)> = spans
            .iter()
            .map(|s| (s.step.as_str(), s.from, s.to))
            .collect();
        assert_eq!(
            named,
            vec![
                ("stop kubelet", 786, 111_630),
                ("delete node", 21_580, 21_629)
            ]
        );
        let pods = fault_spans(&fixture("local-persistent-volume"), 200_000);
        assert_eq!(pods.len(), 1, "delete-pods and delete-pvc hit no node");
    }

    #[test]
    fn a_fault_never_undone_lasts_to_the_end() {
        let mut record = fixture("kubelet-stop-within-toleration");
        record
            .timeline
            .entries
            .retain(|e| !matches!(&e.event, Event::Step { step, .. } if step == "start kubelet"));
        let spans = fault_spans(&record, 99_000);
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].to, 99_000);
        assert_eq!(spans[0].ended, "still in force when observation ended");
    }
}
