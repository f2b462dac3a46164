//! `faultline plan -o json`: the plan as a structure for tools, built beside the text by
//! the same render, so the two cannot say different things. One object per experiment,
//! in an array; the fields are documented in docs/reading-results.md. The exit code is the text's.

use std::path::PathBuf;

use serde::Serialize;

use super::place::Place;
use super::plan_roll_predicted::RollPredicted;
use super::plan_verdict::{self, Problem};
use super::{EXIT_ERROR, EXIT_OK, PlanFormat};
use crate::experiment::model::Experiment;
use crate::failure_model::Prediction;
use crate::timers::{Origin, Timer, TimerSource};

/// What `plan -o json` says about one experiment.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PlanDoc {
    /// The experiment's name.
    pub experiment: String,
    /// Its file.
    pub file: PathBuf,
    /// Planned, skipped on this cluster (a capability it lacks), or refused (an interlock).
    pub status: PlanStatus,
    /// Why it is skipped or refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The cluster, as the inventory or the API names it (absent without `-i`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The kubeconfig context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The API server's version, when the API answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// Why the plan is offline (no inventory, no API answering), when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offline: Option<String>,
    /// Every timer in force, its value and where it came from (`assumed` when not read).
    pub timers: Vec<TimerDoc>,
    /// Each target: its selector, and the nodes it resolved to (`resolved`) or the
    /// inventory's candidates.
    pub targets: Vec<TargetDoc>,
    /// The steps in time order (those that wait for something observed last).
    pub steps: Vec<StepDoc>,
    /// What the node failure model predicts for the silenced nodes and their pods.
    pub predictions: Vec<Prediction>,
    /// What the predictions took for granted (lease assumed, one zone, ...).
    pub prediction_assumptions: Vec<String>,
    /// Each roll, node by node in roll order: when each node's step is predicted to be
    /// issued and its windows counted from it. Absent when the experiment has no roll.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub roll_predictions: Vec<RollPredicted>,
    /// The expectations, each with the model's word when it says it cannot hold.
    pub expectations: Vec<ExpectationDoc>,
    /// When observation ends at the latest, in ms from the start, when the schedule alone
    /// decides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observation_ends_ms: Option<i64>,
    /// What to look at: assumed timers, targets resolved only after setup.
    pub warnings: Vec<String>,
    /// The file's own warnings at their place, as `validate -o json` gives them (an
    /// expectation about a workload setup never creates).
    pub file_warnings: Vec<Place>,
    /// What a run would not get past (the verdict's lines).
    pub problems: Vec<ProblemDoc>,
    /// The exit code this experiment gives (the process exits with the worst).
    pub exit_code: i32,
}

/// A timer in force, as a plan takes it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TimerDoc {
    /// Which timer (`nodeMonitorGracePeriod`).
    pub timer: Timer,
    /// Its value in ms.
    pub value_ms: u128,
    /// `cluster`, `inventory` or `assumed`.
    pub origin: Origin,
    /// Where exactly it came from, for people.
    pub detail: String,
}

impl From<&TimerSource> for TimerDoc {
    fn from(s: &TimerSource) -> TimerDoc {
        TimerDoc {
            timer: s.timer,
            value_ms: s.value.as_millis(),
            origin: s.origin,
            detail: s.detail.clone(),
        }
    }
}

/// A plan's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum PlanStatus {
    /// Planned: the rest of the object says how a run would go.
    Planned,
    /// A run on this cluster skips it (exit code unaffected).
    Skipped,
    /// An interlock refuses it: a run would not start (exit 2).
    Refused,
}

/// One target of a plan.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TargetDoc {
    /// Its name.
    pub name: String,
    /// Its selector in words (`role worker, 1 node`).
    pub selector: String,
    /// Whether `nodes` are the nodes a run uses (through the API) or only candidates.
    pub resolved: bool,
    /// The nodes it resolved to, or the inventory's nodes it could pick.
    pub nodes: Vec<String>,
}

/// One step of a plan.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StepDoc {
    /// Its name.
    pub name: String,
    /// Its action (`kubelet-stop`).
    pub action: &'static str,
    /// Its offset from the start in ms, when the schedule alone decides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<i64>,
    /// When it is issued, in words (`at 0s`, `after stop + 30s`, `when ...`).
    pub when: String,
    /// Its target, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The exact command on each node (each candidate shown, when not resolved).
    pub commands: Vec<CommandDoc>,
    /// Candidates beyond those shown.
    #[serde(skip_serializing_if = "is_zero")]
    pub more_candidates: usize,
    /// How it goes on where no command is shown (through the API; a roll; no node).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A step's command on one node.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CommandDoc {
    /// The node.
    pub node: String,
    /// The command (absent when it cannot run there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Why the step cannot run on this node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cannot_run: Option<String>,
    /// How its undo reaches a node whose API transport the fault cuts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<String>,
}

/// One expectation of a plan.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ExpectationDoc {
    /// Its name.
    pub name: String,
    /// Its check in words, bounds resolved.
    pub check: String,
    /// The step it counts from.
    pub since: String,
    /// The node failure model's reason it cannot hold, when it says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cannot_hold: Option<String>,
}

/// One thing a run would not get past.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ProblemDoc {
    /// `cannot-run`, `no-node`, `own-feet` or `cannot-hold`.
    pub kind: &'static str,
    /// The step, target or expectation it is about, when one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
    /// The verdict's line.
    pub message: String,
    /// The exit code a run meeting it gives.
    pub exit_code: i32,
}

impl From<&Problem> for ProblemDoc {
    fn from(p: &Problem) -> ProblemDoc {
        let (kind, about) = match p {
            Problem::CannotRun { step, .. } => ("cannot-run", Some(step.clone())),
            Problem::NoNode { target } => ("no-node", Some(target.clone())),
            Problem::OwnFeet(_) => ("own-feet", None),
            Problem::CannotHold { expectation, .. } => ("cannot-hold", Some(expectation.clone())),
        };
        ProblemDoc {
            kind,
            about,
            message: p.line(),
            exit_code: p.exit_code(),
        }
    }
}

impl PlanDoc {
    /// An empty plan of `exp`, to be filled by the render.
    pub(super) fn of(exp: &Experiment, status: PlanStatus) -> PlanDoc {
        PlanDoc {
            experiment: exp.name.clone(),
            file: exp.source.clone(),
            status,
            reason: None,
            cluster: None,
            context: None,
            server_version: None,
            offline: None,
            timers: Vec::new(),
            targets: Vec::new(),
            steps: Vec::new(),
            predictions: Vec::new(),
            prediction_assumptions: Vec::new(),
            roll_predictions: Vec::new(),
            expectations: Vec::new(),
            observation_ends_ms: None,
            warnings: Vec::new(),
            file_warnings: Vec::new(),
            problems: Vec::new(),
            exit_code: EXIT_OK,
        }
    }

    /// The problems and the exit code they give.
    pub(super) fn judged(mut self, problems: &[Problem]) -> PlanDoc {
        self.problems = problems.iter().map(ProblemDoc::from).collect();
        self.exit_code = plan_verdict::exit_code(problems);
        self
    }
}

/// A rendered plan: the text, the structure, and what a run would not get past.
pub(super) struct Rendered {
    /// For people.
    pub text: String,
    /// For tools.
    pub doc: PlanDoc,
    /// For the exit code.
    pub problems: Vec<Problem>,
}

/// Where plans go: printed as text one by one, or kept for one JSON array at the end.
pub(super) struct Sink {
    format: PlanFormat,
    docs: Vec<PlanDoc>,
}

impl Sink {
    /// A sink for `format`.
    pub(super) fn new(format: PlanFormat) -> Sink {
        Sink {
            format,
            docs: Vec::new(),
        }
    }

    /// A rendered plan: printed, or kept with its file's warnings (which stderr has
    /// said already, as the file was loaded); its problems returned for the exit code.
    pub(super) fn plan(&mut self, r: Rendered) -> Vec<Problem> {
        match self.format {
            PlanFormat::Text => crate::report::colour::print_plan(&r.text),
            PlanFormat::Json => {
                let checked = crate::experiment::load_checked(&r.doc.file);
                self.docs.push(PlanDoc {
                    file_warnings: checked.warnings.iter().map(Place::from).collect(),
                    ..r.doc
                });
            }
        }
        r.problems
    }

    /// An experiment a run on this cluster skips: said as text, or kept.
    pub(super) fn skipped(&mut self, exp: &Experiment, why: String) {
        match self.format {
            PlanFormat::Text => println!(
                "{}: NOT RUN on this cluster, a run skips it: {why}",
                exp.name
            ),
            PlanFormat::Json => self.docs.push(PlanDoc {
                reason: Some(why),
                ..PlanDoc::of(exp, PlanStatus::Skipped)
            }),
        }
    }

    /// An experiment an interlock refuses: always said on stderr, and kept for JSON.
    pub(super) fn refused(&mut self, exp: &Experiment, why: String) {
        fail!("{}: refused: {why}", exp.name);
        if self.format == PlanFormat::Json {
            self.docs.push(PlanDoc {
                reason: Some(why),
                exit_code: EXIT_ERROR,
                ..PlanDoc::of(exp, PlanStatus::Refused)
            });
        }
    }

    /// A line about the plan just given: printed after it, or one of its warnings.
    pub(super) fn note(&mut self, line: String) {
        match (self.format, self.docs.last_mut()) {
            (PlanFormat::Json, Some(doc)) => doc.warnings.push(line),
            _ => println!("  note: {line}"),
        }
    }

    /// The end: the JSON array printed, when JSON was asked for; `code` otherwise, or
    /// an error exit when the JSON cannot be written.
    pub(super) fn finish(self, code: i32) -> i32 {
        if self.format == PlanFormat::Text {
            return code;
        }
        match serde_json::to_string_pretty(&self.docs) {
            Ok(text) => {
                say!("{text}");
                code
            }
            Err(e) => {
                fail!("cannot write the plans as JSON: {e}");
                EXIT_ERROR
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_keeps_its_kind_its_subject_and_its_exit_code() {
        let hold = ProblemDoc::from(&Problem::CannotHold {
            expectation: "evicted".into(),
            why: "the model".into(),
        });
        assert_eq!(
            (hold.kind, hold.about.as_deref()),
            ("cannot-hold", Some("evicted"))
        );
        assert_eq!(hold.exit_code, super::super::EXIT_FAILED);
        assert_eq!(hold.message, "expectation `evicted` cannot hold: the model");
        let node = ProblemDoc::from(&Problem::NoNode { target: "t".into() });
        assert_eq!((node.kind, node.exit_code), ("no-node", EXIT_ERROR));
    }

    #[test]
    fn a_note_after_a_json_plan_is_one_of_its_warnings() {
        let exp = crate::experiment::parse(
            super::super::init::Starter::Reboot.template(),
            std::path::Path::new("reboot.yaml"),
        )
        .expect("the starter validates");
        let mut sink = Sink::new(PlanFormat::Json);
        sink.plan(Rendered {
            text: String::new(),
            doc: PlanDoc::of(&exp, PlanStatus::Planned),
            problems: Vec::new(),
        });
        sink.note("targets are resolved after setup".into());
        sink.skipped(&exp, "no containers".into());
        assert_eq!(sink.docs[0].warnings, ["targets are resolved after setup"]);
        assert_eq!(sink.docs[1].status, PlanStatus::Skipped);
        assert_eq!(sink.docs[1].reason.as_deref(), Some("no containers"));
        assert_eq!(sink.docs[1].exit_code, EXIT_OK);
    }
}
