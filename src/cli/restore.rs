//! `faultline restore`: undo what a crashed or killed run left behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK};
use crate::cluster::snapshot;
use crate::execute::{Executor, OpOutcome};
use crate::experiment::model::Action;
use crate::journal::{Journal, Location, RetryPolicy, restore_all_with};
use crate::run::worlds::cluster::act::Actor;
use crate::run::worlds::cluster::restored;

/// Reads the journal and undoes every fault recorded for the inventory's cluster.
pub(super) async fn restore(
    inventory: &Path,
    journal: Option<PathBuf>,
    api: &super::ApiArgs,
    insecure_ignore_host_keys: bool,
) -> i32 {
    // Restore is itself the undo: a first Ctrl-C does not stop it (a second one does, and
    // what is left stays in the journal); its output may go nowhere (`say!`).
    let _signals = crate::run::signals::install(tokio_util::sync::CancellationToken::new());
    let Some(mut inventory) = super::load_inventory(inventory, api) else {
        return EXIT_ERROR;
    };
    if insecure_ignore_host_keys {
        inventory.set_insecure_ignore_host_keys(true);
    }
    let location = match super::journal_location(journal) {
        Ok(l) => l,
        Err(e) => {
            fail!("{e}");
            return EXIT_ERROR;
        }
    };
    let path = location.path.clone();
    let mut journal = match Journal::open(&path) {
        Ok(j) => j,
        Err(e) => {
            fail!("{e}");
            return EXIT_ERROR;
        }
    };
    let cluster = inventory.cluster().name.clone();
    // Which file was read, always: a journal looked for in the wrong place (another
    // user's, root's) must not pass for an empty one.
    say!(
        "{}",
        journal_line(&location, journal.active(&cluster).len(), &cluster)
    );
    let executor = Executor::new(inventory.clone());
    let snapshot_path = snapshot::path_beside(&path, &cluster);
    let before = match snapshot::load(&snapshot_path) {
        Ok(s) => s,
        Err(e) => {
            fail!(
                "{}: cannot read the cluster snapshot: {e}",
                snapshot_path.display()
            );
            None
        }
    };
    let nothing = journal.active(&cluster).is_empty();
    let through_api = inventory
        .nodes()
        .iter()
        .any(|n| n.transport == crate::inventory::TransportKind::Pod);
    // Nothing to undo, nothing to compare, no node-access pod to look for: no cluster asked.
    if nothing && before.is_none() && !through_api {
        say!(
            "nothing to restore for cluster {cluster} ({})",
            path.display()
        );
        return EXIT_OK;
    }
    // Over every API endpoint: the fault being undone may have taken one of them down.
    let client = crate::cluster::connect_with_failover(
        inventory.kubeconfig(),
        inventory.context(),
        &inventory.cluster().api_endpoints(),
    )
    .await
    .map(|c| c.client);
    // A live run on the cluster holds its lock: restoring under it would undo its faults
    // and delete its node-access pods. Without the API the node undos still run.
    let lock = match &client {
        Ok(c) => match crate::cluster::lock::ClusterLock::take(
            c,
            &cluster,
            &crate::cluster::lock::identity("restore"),
            "faultline restore",
        )
        .await
        {
            Ok(lock) => Some(lock),
            Err(e @ crate::cluster::lock::LockError::Held { .. }) => {
                fail!("{e}");
                return EXIT_ERROR;
            }
            Err(e) => {
                say_err!("warning: {e}; restoring without it");
                None
            }
        },
        Err(_) => None,
    };
    // Under the lock no run is live: every node-access pod left is a dead run's. Without
    // it, only the pods of the runs this journal names are touched.
    let journal_runs: std::collections::BTreeSet<String> = journal
        .active(&cluster)
        .iter()
        .map(|e| crate::execute::run_of(&e.id).to_string())
        .collect();
    let only_runs = lock.is_none().then_some(&journal_runs);
    let code = 'done: {
        if nothing {
            // What a killed run left is removed under the lock; with faults to undo, after
            // them, since an undo watcher may be among them.
            delete_node_access_pods(&inventory, only_runs).await;
            say!(
                "nothing to restore for cluster {cluster} ({})",
                path.display()
            );
            let Some(before) = before else {
                break 'done EXIT_OK;
            };
            break 'done compare(
                &before,
                client.as_ref().ok(),
                &executor,
                &inventory,
                &snapshot_path,
            )
            .await;
        }
        let targets = Default::default();
        let api =
            async |node: &str, action: &Action, timeout: Duration| -> Result<OpOutcome, String> {
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
        delete_node_access_pods(&inventory, only_runs).await;
        let mut failed = 0;
        for o in &outcomes {
            match &o.error {
                None => say!(
                    "restored {} on {} ({} attempt(s))",
                    o.fault,
                    o.node,
                    o.attempts
                ),
                Some(e) => {
                    failed += 1;
                    say!(
                        "NOT restored {} on {}: {e} (it stays in the journal{})",
                        o.fault,
                        o.node,
                        if o.outcome.is_none() {
                            ", and its self-restore, if one was armed, stays armed"
                        } else {
                            ""
                        }
                    );
                }
            }
            if let Some(w) = &o.warning {
                say!("  {} on {}: {w}", o.fault, o.node);
            }
        }
        say!(
            "{} restored, {} left in {}",
            outcomes.len() - failed,
            failed,
            path.display()
        );
        let mut code = if failed == 0 { EXIT_OK } else { EXIT_FAILED };
        if let Some(before) = before {
            let compared = compare(
                &before,
                client.as_ref().ok(),
                &executor,
                &inventory,
                &snapshot_path,
            )
            .await;
            code = code.max(compared);
        }

        code
    };
    if let Some(lock) = lock {
        lock.release().await;
    }
    code
}

/// `journal: PATH (N faults for cluster C)`, saying whose journal it is when sudo chose it.
fn journal_line(location: &Location, faults: usize, cluster: &str) -> String {
    let whose = location
        .sudo_user
        .as_deref()
        .map(|u| format!("; the journal of {u}, who ran sudo"))
        .unwrap_or_default();
    format!(
        "journal: {} ({faults} fault(s) for cluster {cluster}{whose})",
        location.path.display()
    )
}

/// Compares the cluster with the snapshot a run took before its first fault, waiting for
/// it to settle, and says what differs; the snapshot is dropped once nothing does.
async fn compare(
    before: &snapshot::Snapshot,
    client: Option<&kube::Client>,
    executor: &Executor,
    inventory: &crate::inventory::Inventory,
    snapshot_path: &Path,
) -> i32 {
    let Some(client) = client else {
        fail!("cannot compare the cluster with its snapshot: the API is unreachable");
        return EXIT_ERROR;
    };
    // The timers the inventory states, upstream defaults for the rest: only the wait's length.
    let timers = crate::timers::TimersInForce::resolve(
        &crate::timers::ClusterReadings::default(),
        &inventory.stated_timers(),
        None,
    )
    .timers;
    let settle = restored::settle_bound(crate::run::DEFAULT_RESTORE_MARGIN, &timers);
    say!(
        "comparing the cluster with its snapshot from before the first fault ({}), waiting up \
         to {}s for it to settle",
        before.taken_at.format("%Y-%m-%d %H:%M:%S UTC"),
        settle.as_secs()
    );
    let check = restored::check(before, client, executor, settle).await;
    if check.ok {
        say!(
            "cluster restored: {} (settled after {:.1}s)",
            check.compared,
            check.waited_ms as f64 / 1000.0
        );
        let _ = std::fs::remove_file(snapshot_path);
        EXIT_OK
    } else {
        say!(
            "cluster NOT restored after {:.1}s:",
            check.waited_ms as f64 / 1000.0
        );
        for d in &check.differences {
            say!("  {d}");
        }
        say!(
            "the snapshot stays at {}; fix the differences and run `faultline restore` again",
            snapshot_path.display()
        );
        EXIT_FAILED
    }
}

/// Deletes the node-access pods a killed run left behind, when the inventory reaches any
/// node through the API (`transport: pod`); says what it deleted, or why it could not.
/// `only_runs`: those of these runs alone (restoring without the cluster lock).
async fn delete_node_access_pods(
    inventory: &crate::inventory::Inventory,
    only_runs: Option<&std::collections::BTreeSet<String>>,
) {
    use crate::inventory::TransportKind;
    if !inventory
        .nodes()
        .iter()
        .any(|n| n.transport == TransportKind::Pod)
    {
        return;
    }
    let client = match crate::cluster::connect_with_failover(
        inventory.kubeconfig(),
        inventory.context(),
        &inventory.cluster().api_endpoints(),
    )
    .await
    {
        Ok(c) => c.client,
        Err(e) => {
            say_err!("cannot look for node-access pods left behind: {e}");
            return;
        }
    };
    if only_runs.is_some_and(|r| r.is_empty()) {
        say!(
            "node-access pods left behind are not looked for without the cluster lock: a live run's would be among them"
        );
        return;
    }
    match crate::execute::pod::delete_leftovers(&client, only_runs).await {
        Ok(gone) if gone.is_empty() => {}
        Ok(gone) => say!(
            "deleted {} node-access pod(s) left behind: {}",
            gone.len(),
            gone.join(", ")
        ),
        Err(e) => say_err!("cannot delete the node-access pods left behind: {e}"),
    }
}
