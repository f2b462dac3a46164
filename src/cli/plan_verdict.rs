//! What a plan found that a run would not get past, and the exit code that says so:
//! `plan` exits with the code the run would (2: it could not be carried out; 1: an
//! expectation cannot hold), and `validate -i` refuses the file. Found offline from the
//! inventory (a step no candidate node can carry out, a target no node can be, a fault on
//! the node of the only API server) and from the node failure model (an expectation the
//! model says cannot hold).

use std::collections::BTreeMap;

use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK};
use crate::experiment::model::Experiment;
use crate::inventory::Inventory;

/// One thing a run would not get past.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Problem {
    /// A step no candidate node of its target can carry out (no power command, a node
    /// the inventory cannot reach).
    CannotRun {
        /// The step.
        step: String,
        /// Why, as the executor says it for the first candidate.
        why: String,
    },
    /// A target that needs a node command, which no node of the inventory can be.
    NoNode {
        /// The target.
        target: String,
    },
    /// A fault on the node of the only API server faultline would talk to.
    OwnFeet(String),
    /// An expectation the node failure model says cannot hold.
    CannotHold {
        /// The expectation.
        expectation: String,
        /// What the model says.
        why: String,
    },
}

impl Problem {
    /// The exit code of a run that meets it: 1 when an expectation would fail, 2 when
    /// the run could not be carried out.
    pub(super) fn exit_code(&self) -> i32 {
        match self {
            Problem::CannotHold { .. } => EXIT_FAILED,
            _ => EXIT_ERROR,
        }
    }

    /// One line for the plan's verdict.
    pub(super) fn line(&self) -> String {
        match self {
            Problem::CannotRun { step, why } => format!("step `{step}` cannot run: {why}"),
            Problem::NoNode { target } => {
                format!("no node of the inventory can be target `{target}`")
            }
            Problem::OwnFeet(why) => why.clone(),
            Problem::CannotHold { expectation, why } => {
                format!("expectation `{expectation}` cannot hold: {why}")
            }
        }
    }
}

/// The worst exit code among `problems`: what a run would exit with.
pub(super) fn exit_code(problems: &[Problem]) -> i32 {
    problems
        .iter()
        .map(Problem::exit_code)
        .max()
        .unwrap_or(EXIT_OK)
}

/// The plan's closing lines: what a run would meet and its exit code, or that nothing
/// stands in its way as far as the plan can tell.
pub(super) fn text(problems: &[Problem]) -> String {
    if problems.is_empty() {
        return "verdict: nothing found that would stop a run or fail an expectation\n".into();
    }
    let code = exit_code(problems);
    let what = if code == EXIT_ERROR {
        "a run could not be carried out"
    } else {
        "a run would fail an expectation"
    };
    let mut out = format!("verdict: {what} (exit {code}):\n");
    for p in problems {
        out.push_str(&format!("  {}\n", p.line()));
    }
    out
}

/// Offline, the step that would take down the node of the only API server: the inventory
/// names one control-plane node and one API endpoint, and a step that takes a node down
/// has it as its every candidate. A target that may pick another node is left to the run,
/// which checks it with the targets resolved.
pub(super) fn own_feet_offline(
    exp: &Experiment,
    inv: &Inventory,
    candidates: &BTreeMap<String, Vec<String>>,
) -> Option<Problem> {
    let control_plane: Vec<&str> = inv
        .nodes()
        .iter()
        .filter(|n| n.roles.iter().any(|r| r == "control-plane"))
        .map(|n| n.name.as_str())
        .collect();
    let [server] = control_plane.as_slice() else {
        return None;
    };
    // Another API server listed: faultline fails over to it.
    if !inv.cluster().api_endpoints().extra.is_empty() {
        return None;
    }
    let only_server: BTreeMap<String, Vec<String>> = candidates
        .iter()
        .filter(|(_, nodes)| nodes.as_slice() == [server.to_string()])
        .map(|(t, nodes)| (t.clone(), nodes.clone()))
        .collect();
    let feet = crate::run::preflight::own_feet::OwnFeet {
        own_pod: None,
        api_server_node: Some(server.to_string()),
    };
    crate::run::preflight::own_feet::check(exp, &only_server, &feet, "the kubeconfig's server")
        .err()
        .map(|e| Problem::OwnFeet(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_problem_decides_the_exit_code() {
        let hold = Problem::CannotHold {
            expectation: "e".into(),
            why: "w".into(),
        };
        let node = Problem::NoNode { target: "t".into() };
        assert_eq!(exit_code(&[]), EXIT_OK);
        assert_eq!(exit_code(std::slice::from_ref(&hold)), EXIT_FAILED);
        assert_eq!(exit_code(&[hold.clone(), node]), EXIT_ERROR);
        assert!(text(&[hold]).starts_with("verdict: a run would fail an expectation (exit 1):"));
    }
}
