//! `faultline explain`: each transition the node failure model ([`crate::failure_model`])
//! predicts for a recorded run, beside what the run saw, and for each deviation the most
//! likely cause named from the model, or "outside the model" when nothing explains it.
//!
//! Reads only the record: the timers in force, the steps as carried out (each silencing
//! step's outage lasts until the step or undo that ended it), the nodes and the pods on
//! the silenced nodes with their owners and tolerations. What the record does not hold
//! (the kubelet's lease, node zones) is assumed and listed in [`Explanation::assumed`].
//! The reports call [`explain`] too: a failed JUnit case and the Markdown summary carry
//! the prediction and the cause for the transitions their expectation is about.

mod cause;
mod failed;
mod inputs;
mod observed;
mod related;
mod roll;
#[cfg(test)]
mod roll_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::experiment::fault;
use crate::experiment::model::{Action, WorkloadRef};
use crate::failure_model::json_ms;
use crate::failure_model::words::offset;
use crate::failure_model::{Prediction, Rule, Transition, Window, predict};
use crate::record::RunRecord;
use crate::timeline::{Entry, Event, StepPhase};

pub use related::related;
pub(crate) use related::transitions_of;
pub use roll::RollExplained;
pub(crate) use roll::roll_fault;

/// How far an observation may fall outside its window and still count inside it: the
/// stop command returns a moment after the kubelet stopped, and the observer sees a change
/// a few milliseconds after the API server has it.
pub const SLACK: Duration = Duration::from_secs(1);

/// A recorded run explained.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// What the model assumed because the record does not say it.
    pub assumed: Vec<String>,
    /// Every predicted transition, in the model's order (per outage: the node, then its
    /// pods).
    pub items: Vec<Explained>,
    /// Each roll of the run, node by node in roll order, each node's windows counted from
    /// its own issue (its Unknown and taint where no outage above has them). Absent from
    /// the JSON when the run had no roll.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rolls: Vec<RollExplained>,
}

/// One predicted transition beside what was observed.
#[derive(Debug, Clone, Serialize)]
pub struct Explained {
    /// The model's prediction.
    pub prediction: Prediction,
    /// The node the subject is on (the subject itself for a node's transitions).
    pub node: String,
    /// The pod's workload, for a pod's transitions.
    pub workload: Option<WorkloadRef>,
    /// When the run saw it, if it did (from time zero, the experiment's start).
    #[serde(rename = "observed_ms", serialize_with = "json_ms::maybe")]
    pub observed: Option<Duration>,
    /// When the fault on its node was undone, if it was.
    #[serde(rename = "undone_ms", serialize_with = "json_ms::maybe")]
    pub until: Option<Duration>,
    /// How the observation fits the window.
    pub fit: Fit,
    /// For a deviation: the most likely cause, in words.
    pub cause: Option<String>,
}

/// How an observation fits its predicted window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Fit {
    /// Inside the window (within [`SLACK`]), or predicted never and not seen.
    Inside,
    /// Seen before the window opened, by this much.
    Early(#[serde(serialize_with = "json_ms::one")] Duration),
    /// Seen after the window closed, by this much.
    Late(#[serde(serialize_with = "json_ms::one")] Duration),
    /// Predicted, the window closed before observation ended, and not seen.
    Missing,
    /// Predicted never, and seen.
    Unexpected,
    /// The window reaches past what the run observed of the subject: undecided.
    Undecided,
}

impl Fit {
    /// Whether the cluster did something other than the model said.
    pub fn deviates(self) -> bool {
        !matches!(self, Fit::Inside | Fit::Undecided)
    }
}

impl fmt::Display for Fit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fit::Inside => f.write_str("inside"),
            Fit::Early(by) => write!(f, "EARLY by {:.1}s", by.as_secs_f64()),
            Fit::Late(by) => write!(f, "LATE by {:.1}s", by.as_secs_f64()),
            Fit::Missing => f.write_str("MISSING"),
            Fit::Unexpected => f.write_str("UNEXPECTED"),
            Fit::Undecided => f.write_str("undecided"),
        }
    }
}

/// How `observed` (seen up to `cut`) fits `window`.
pub(crate) fn fit(window: Window, observed: Option<Duration>, cut: Duration) -> Fit {
    match (window, observed) {
        (Window::Never, None) => Fit::Inside,
        (Window::Never, Some(_)) => Fit::Unexpected,
        (Window::Between { earliest, latest }, Some(t)) => {
            if t + SLACK < earliest {
                Fit::Early(earliest - t)
            } else if let Some(l) = latest.filter(|l| t > *l + SLACK) {
                Fit::Late(t - l)
            } else {
                Fit::Inside
            }
        }
        (Window::Between { latest, .. }, None) => match latest {
            Some(l) if l + SLACK < cut => Fit::Missing,
            _ => Fit::Undecided,
        },
    }
}

/// Where observation of a node's transitions (or of one of its pods') ends: the end of
/// observation, or an earlier step on it that the model does not cover (deleting the
/// node, draining it; for a pod also a step on no node, such as deleting a claim, or
/// deleting pods that may be it other than the deletion the model follows), after which
/// its windows say nothing.
fn cut(
    record: &RunRecord,
    recorded: &inputs::RecordedOutage,
    pod: Option<&inputs::RecordedPod>,
) -> Duration {
    let outage = &recorded.outage;
    let end = record
        .observed_until_ms
        .map(inputs::at)
        .unwrap_or(Duration::MAX);
    let pods = pod.is_some();
    let interferes = |(i, e): &(usize, &Entry)| match &e.event {
        Event::Step {
            step,
            action,
            node,
            phase: StepPhase::Issued,
        } if inputs::at(e.offset_ms) > outage.from => {
            let on_it = node.as_deref() == Some(outage.node.as_str()) || (pods && node.is_none());
            let action = inputs::action_of(record, step, action);
            // The fault, its undo, the out-of-service taint and, for the pods, deleting the
            // Node (the model covers them; a deleted Node has no transitions of its own).
            let part_of_outage = action.as_ref().is_some_and(|a| {
                *a == recorded.fault
                    || fault::undoes(a, &recorded.fault)
                    || matches!(a, Action::Taint(t) | Action::Untaint(t)
                        if t.key == inputs::OUT_OF_SERVICE)
                    || (pods && *a == Action::DeleteNode)
            });
            // Deleting pods: the one deletion of this pod the model follows, and those
            // that cannot be it, leave it be.
            let not_its_concern = match (pod, &action) {
                (Some(p), Some(Action::DeletePods { pods: selector, .. })) => {
                    p.deleted_by == Some(*i)
                        || inputs::selects(
                            record,
                            selector,
                            (p.namespace(), p.workload.as_ref()),
                            &outage.node,
                        ) == Some(false)
                }
                _ => false,
            };
            on_it && !part_of_outage && !not_its_concern
        }
        _ => false,
    };
    record
        .timeline
        .entries
        .iter()
        .enumerate()
        .find(|ie| interferes(ie))
        .map_or(end, |(_, e)| inputs::at(e.offset_ms).min(end))
}

/// Explains a recorded run: the model's predictions for every node a step silenced and
/// its pods, each beside what the run saw, with a cause for each deviation.
pub fn explain(record: &RunRecord) -> Explanation {
    let settings = inputs::settings(record);
    let nodes = inputs::nodes(record);
    let outages = inputs::outages(record);
    let entries = &record.timeline.entries;
    let mut items = Vec::new();
    let mut replacements = observed::Replacements::new(entries);
    for recorded in &outages {
        let outage = &recorded.outage;
        let pods = inputs::pods_on(record, outage);
        let model_pods: Vec<_> = pods.iter().map(|p| p.model.clone()).collect();
        let node_cut = cut(record, recorded, None);
        // Each pod's own: the steps that may touch it differ from pod to pod.
        let pod_cuts: Vec<Duration> = pods
            .iter()
            .map(|p| cut(record, recorded, Some(p)))
            .collect();
        let mut terminating_at = None;
        // The other nodes silenced at the same time share its zones' states and queues.
        let at_once: Vec<_> = std::iter::once(outage.clone())
            .chain(
                outages
                    .iter()
                    .map(|o| &o.outage)
                    .filter(|o| o.node != outage.node && overlap(o, outage))
                    .cloned(),
            )
            .collect();
        let predictions = predict(&settings, &nodes, &model_pods, &at_once)
            .into_iter()
            .filter(|p| p.subject == outage.node || model_pods.iter().any(|m| m.name == p.subject));
        for p in predictions {
            let at = pods.iter().position(|r| r.model.name == p.subject);
            let pod = at.map(|i| &pods[i]);
            let workload = pod.and_then(|r| r.workload.clone());
            let cut_here = at.map_or(node_cut, |i| pod_cuts[i]);
            let observed = match (p.transition, &workload) {
                // The controller may create the replacement a moment before the observer
                // hears of the old pod's deletion: a second of slack, as for the windows.
                (Transition::PodReplaced, Some(w)) => terminating_at.and_then(|since: Duration| {
                    replacements.next(w, since.saturating_sub(SLACK), cut_here)
                }),
                (Transition::PodReplaced, None) => None,
                (t, _) => observed::first(entries, &p.subject, t, outage.from, cut_here),
            };
            if p.transition == Transition::PodTerminating {
                terminating_at = observed;
            }
            items.push(Explained {
                fit: fit(p.window, observed, cut_here),
                prediction: p,
                node: outage.node.clone(),
                workload,
                observed,
                until: outage.until,
                cause: None,
            });
        }
    }
    let covered = |node: &str, t: Transition| {
        items
            .iter()
            .any(|i| i.prediction.subject == node && i.prediction.transition == t)
    };
    let mut rolls = roll::explain_rolls(record, &settings, &nodes, &covered);
    for i in 0..items.len() {
        if items[i].fit.deviates() {
            let why = cause::of(record, &settings, &items, &items[i]);
            items[i].cause = Some(why);
        }
    }
    for r in &mut rolls {
        for i in 0..r.items.len() {
            if r.items[i].fit.deviates() {
                let why = cause::of(record, &settings, &r.items, &r.items[i]);
                r.items[i].cause = Some(why);
            }
        }
    }
    // The model worked on the timeline's offsets; every report counts from time zero, the
    // experiment's start.
    let zero = inputs::at(record.zero_ms());
    for i in items
        .iter_mut()
        .chain(rolls.iter_mut().flat_map(|r| r.items.iter_mut()))
    {
        i.prediction.window = i.prediction.window.counted_from(zero);
        i.observed = i.observed.map(|t| t.saturating_sub(zero));
        i.until = i.until.map(|t| t.saturating_sub(zero));
    }
    let mut assumed = Vec::new();
    if record.cluster.node_lease_seconds.is_none() {
        assumed.push(format!(
            "the kubelet's lease: {}s (the upstream default; the record does not hold it)",
            settings.node_lease_duration.as_secs()
        ));
    }
    if !(items.is_empty() && rolls.is_empty()) && nodes.iter().all(|n| n.zone.is_empty()) {
        assumed.push("one zone (no node seen in the run has zone labels)".to_string());
    }
    Explanation {
        assumed,
        items,
        rolls,
    }
}

/// Whether two outages were under way at the same time (one without an end lasts).
fn overlap(a: &crate::failure_model::Outage, b: &crate::failure_model::Outage) -> bool {
    let ends_after = |o: &crate::failure_model::Outage, t: Duration| o.until.is_none_or(|u| u > t);
    ends_after(a, b.from) && ends_after(b, a.from)
}

impl Explained {
    /// One line: subject, transition, predicted window and rule, observed, fit, cause.
    pub fn line(&self) -> String {
        let p = &self.prediction;
        let seen = self.observed.map_or_else(|| "not seen".to_string(), offset);
        // A roll's node that comes back by itself may never have left Ready (a reboot
        // shorter than the grace period): what is judged is when the roll saw it back, as
        // the roll's report says, not a return to Ready.
        let transition = match (p.transition, &p.rule) {
            (Transition::NodeReady, Rule::BackAfterRenewals) => "back (as the roll saw it)".into(),
            (t, _) => t.to_string(),
        };
        let mut s = format!(
            "{} {transition}: predicted {} ({}); observed {}: {}",
            p.subject, p.window, p.rule, seen, self.fit
        );
        if let Some(cause) = &self.cause {
            s.push_str(&format!(": {cause}"));
        }
        s
    }
}

impl Explanation {
    /// The deviations the model cannot explain.
    pub fn unexplained(&self) -> impl Iterator<Item = &Explained> {
        self.every().filter(|i| {
            i.fit.deviates()
                && i.cause
                    .as_deref()
                    .is_none_or(|c| c.starts_with(cause::OUTSIDE))
        })
    }

    /// Every item: the outages', then each roll's.
    fn every(&self) -> impl Iterator<Item = &Explained> {
        self.items
            .iter()
            .chain(self.rolls.iter().flat_map(|r| r.items.iter()))
    }

    /// The explanation as `faultline explain` prints it.
    pub fn render(&self, record: &RunRecord) -> String {
        let mut out = format!(
            "{} on cluster {} (run {}): the node failure model against what was observed\n",
            record.experiment.name, record.cluster.name, record.run_id
        );
        if self.items.is_empty() && self.rolls.is_empty() {
            let shutdowns = record
                .experiment
                .steps
                .iter()
                .any(|s| crate::experiment::fault::info(&s.action).kubelet_ends_pods);
            out.push_str(if shutdowns {
                "  no step silenced a node: the model predicts nothing for this run (an OS \
                 shutdown is not modelled: a kubelet with graceful node shutdown ends its pods \
                 first, for as long as its own shutdownGracePeriod, which the API does not show)\n"
            } else {
                "  no step silenced a node: the model predicts nothing for this run\n"
            });
            return out;
        }
        // The expectations that failed first: which side the model says is wrong.
        for line in failed::lines(self, record) {
            out.push_str(&format!("  {line}\n"));
        }
        if !self.assumed.is_empty() {
            out.push_str(&format!("  assumed: {}\n", self.assumed.join("; ")));
        }
        for item in &self.items {
            out.push_str(&format!("  {}\n", item.line()));
        }
        for roll in &self.rolls {
            out.push_str(&format!(
                "  roll `{}`, node by node (each node's windows from its own issue):\n",
                roll.roll
            ));
            for item in &roll.items {
                out.push_str(&format!("    {}\n", item.line()));
            }
        }
        let deviations = self.every().filter(|i| i.fit.deviates()).count();
        let decided = self.every().filter(|i| i.fit != Fit::Undecided).count();
        out.push_str(&format!(
            "  {} of {decided} decided transition(s) inside their window; {deviations} deviation(s)\n",
            decided - deviations
        ));
        out
    }
}
