//! `faultline restore`: undo what a crashed or killed run left behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK};
use crate::execute::{Executor, OpOutcome};
use crate::experiment::model::Action;
use crate::journal::{Journal, RetryPolicy, restore_all_with};
use crate::run::act::Actor;

/// Reads the journal and undoes every fault recorded for the inventory's cluster.
pub(super) async fn restore(
    inventory: &Path,
    journal: Option<PathBuf>,
    api: &super::ApiArgs,
) -> i32 {
    let Some(inventory) = super::load_inventory(inventory, api) else {
        return EXIT_ERROR;
    };
    let path = match super::journal_path(journal) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_ERROR;
        }
    };
    let mut journal = match Journal::open(&path) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_ERROR;
        }
    };
    let cluster = inventory.cluster().name.clone();
    if journal.active(&cluster).is_empty() {
        println!(
            "nothing to restore for cluster {cluster} ({})",
            path.display()
        );
        return EXIT_OK;
    }
    let executor = Executor::new(inventory.clone());
    // Over every API endpoint: the fault being undone may have taken one of them down.
    let client = crate::cluster::connect_with_failover(
        inventory.kubeconfig(),
        inventory.context(),
        &inventory.cluster().api_endpoints(),
    )
    .await
    .map(|c| c.client);
    let targets = Default::default();
    let api = async |node: &str, action: &Action, timeout: Duration| -> Result<OpOutcome, String> {
        let client = client.as_ref().map_err(|e| e.to_string())?;
        let actor = Actor {
            executor: &executor,
            client,
            targets: &targets,
        };
        actor
            .act(action, Some(node), timeout)
            .await
            .map(|r| OpOutcome {
                exit_status: r.exit_status,
                output: r.output,
                dropped: false,
            })
            .map_err(|e| e.to_string())
    };
    let outcomes = restore_all_with(
        &mut journal,
        &executor,
        &cluster,
        &RetryPolicy::default(),
        api,
    )
    .await;
    let mut failed = 0;
    for o in &outcomes {
        match &o.error {
            None => println!(
                "restored {} on {} ({} attempt(s))",
                o.fault, o.node, o.attempts
            ),
            Some(e) => {
                failed += 1;
                println!("NOT restored {} on {}: {e}", o.fault, o.node);
            }
        }
    }
    println!(
        "{} restored, {} left in {}",
        outcomes.len() - failed,
        failed,
        path.display()
    );
    if failed == 0 { EXIT_OK } else { EXIT_FAILED }
}
