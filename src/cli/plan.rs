//! `faultline plan` (and `run --dry-run`): the resolved targets and the exact commands,
//! with every interlock checked, touching nothing.

use std::path::{Path, PathBuf};

use super::{EXIT_ERROR, EXIT_OK};
use crate::cluster::ClusterError;
use crate::experiment::fault::{self, Via, action_name};
use crate::experiment::model::{Action, Experiment};
use crate::run::RunSettings;
use crate::run::prepare::{Prepared, RunError, prepare, resolve};
use crate::run::schedule;
use crate::timeline::format_offset_ms;

/// `faultline plan`: loads the files and the inventory, prints each plan.
pub(super) async fn plan(paths: &[PathBuf], inventory: &Path, api: &super::ApiArgs) -> i32 {
    let Some(experiments) = super::load_experiments(paths) else {
        return EXIT_ERROR;
    };
    let Some(inventory) = super::load_inventory(inventory, api) else {
        return EXIT_ERROR;
    };
    let journal_path = match super::journal_path(None) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_ERROR;
        }
    };
    let settings = RunSettings {
        ignore_journal: true,
        ..RunSettings::new(inventory, journal_path)
    };
    print_plans(&experiments, &settings).await
}

/// Prints the plan of every experiment; an error exit if any interlock refuses one.
pub(super) async fn print_plans(experiments: &[Experiment], settings: &RunSettings) -> i32 {
    let mut code = EXIT_OK;
    for exp in experiments {
        let mut prepared = match prepare(exp, settings).await {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{}: refused: {e}", exp.name);
                code = EXIT_ERROR;
                continue;
            }
        };
        match resolve(exp, &mut prepared, &settings.inventory).await {
            Ok(()) => print!("{}", render(exp, &prepared)),
            // Targets chosen by the pods of a workload that setup has not applied yet can
            // only be resolved by a run; the rest of the plan still stands.
            Err(RunError::Cluster(e @ ClusterError::TargetUnsatisfied { .. }))
                if !exp.setup.manifests.is_empty() =>
            {
                print!("{}", render(exp, &prepared));
                println!("  note: targets are resolved after setup applies its manifests ({e})");
            }
            Err(e) => {
                eprintln!("{}: refused: {e}", exp.name);
                code = EXIT_ERROR;
            }
        }
    }
    code
}

/// The plan as text: cluster, targets, then each step with its time and exact command.
pub(super) fn render(exp: &Experiment, p: &Prepared) -> String {
    let mut out = format!(
        "plan for {} on cluster {} (context {}, {})\n",
        exp.name,
        p.cluster.name,
        p.cluster.context.as_deref().unwrap_or("default"),
        p.cluster
            .server_version
            .as_deref()
            .unwrap_or("version unknown"),
    );
    out.push_str("targets:\n");
    for (name, nodes) in &p.targets {
        out.push_str(&format!("  {name}: {}\n", nodes.join(", ")));
    }
    let plan = schedule::Plan {
        exp,
        targets: &p.targets,
        timers: &p.cluster.timers,
        capabilities: &p.cluster.capabilities,
        keep_going: false,
    };
    let (projected, observation_end) = schedule::project(plan);
    out.push_str("steps (offsets from the start, actions taking no time):\n");
    for (step, projected) in exp.steps.iter().zip(&projected) {
        let at = projected.at_ms.map_or_else(
            || "     ?".to_string(),
            |ms| format!("{:>6}", format_offset_ms(ms)),
        );
        out.push_str(&format!(
            "  {at}  {} ({}): {}\n",
            step.name,
            schedule::describe_step_time(step, &p.cluster.timers),
            action_name(&step.action)
        ));
        let nodes = step.nodes(&p.targets);
        for node in nodes {
            out.push_str(&format!(
                "            {node}: {}\n",
                command_of(p, &step.action, node)
            ));
        }
        if nodes.is_empty() {
            out.push_str(&format!("            via the API: {:?}\n", step.action));
        }
    }
    let length = match &exp.observe.after_last_step {
        Some(b) => format!("`observe.for: {b}` after the last step"),
        None => "after the last step, until every expectation's bound has passed, plus a margin"
            .to_string(),
    };
    match observation_end {
        Some(end) => out.push_str(&format!(
            "observation: ends at {} ({length}), or once every expectation is decided\n",
            format_offset_ms(end)
        )),
        None => out.push_str(&format!(
            "observation: {length}; when depends on the steps that wait for an observed state\n"
        )),
    }
    if exp.abort.conditions.is_empty() {
        out.push_str("abort conditions: none (all switched off)\n");
    } else {
        out.push_str("abort conditions (the run stops and undoes every fault when one trips):\n");
        for c in &exp.abort.conditions {
            out.push_str(&format!("  {}\n", c.name));
        }
    }
    out
}

fn command_of(p: &Prepared, action: &Action, node: &str) -> String {
    if let Via::Power(power) = fault::info(action).via {
        return p.executor.describe_power(node, power);
    }
    match fault::node_op(action) {
        Some(op) => p.executor.describe(node, &op),
        None => format!("API: {} node/{node}", action_name(action)),
    }
}
