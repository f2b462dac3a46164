//! `faultline restore`: undo what a crashed or killed run left behind.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::restore_json::{ComparisonDoc, PodsDoc, RestoreDoc, UndoDoc};
use super::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, RestoreFormat};
use crate::cluster::snapshot;
use crate::execute::{Executor, OpOutcome};
use crate::experiment::model::Action;
use crate::inventory::Inventory;
use crate::journal::{Journal, Location, RetryPolicy, restore_all_with, trust};
use crate::run::worlds::cluster::act::Actor;
use crate::run::worlds::cluster::restored;

/// A line of progress for people: on stdout as text; on stderr under `-o json`, where
/// stdout holds the document alone. A failed write is dropped, as with `say!`.
macro_rules! tell {
    ($format:expr, $($arg:tt)*) => {{
        if $format == RestoreFormat::Json {
            say_err!($($arg)*);
        } else {
            say!($($arg)*);
        }
    }};
}

/// Reads the journal and undoes every fault recorded for the inventory's cluster: said as
/// it goes, or (`-o json`) one document on stdout at the end; the exit code is the same.
pub(super) async fn restore(
    inventory: &Path,
    journal: Option<PathBuf>,
    experiments: &[PathBuf],
    api: &super::ApiArgs,
    insecure_ignore_host_keys: bool,
    format: RestoreFormat,
) -> i32 {
    // Restore is itself the undo: a first Ctrl-C does not stop it (a second one does, and
    // what is left stays in the journal); its output may go nowhere (`say!`).
    // (Inside `faultline job`, whose listener counts them already, none is added.)
    let _signals = (!crate::run::signals::installed())
        .then(|| crate::run::signals::install(tokio_util::sync::CancellationToken::new()));
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
    let journal = match Journal::open(&location.path) {
        Ok(j) => j,
        Err(e) => {
            fail!("{e}");
            return EXIT_ERROR;
        }
    };
    // The `run` undo commands a journal others can write may ask for: those the
    // experiments given declare (the chart passes the pinned ones), else none.
    let commands = if trust::private_to_this_user(&location.path) {
        trust::Commands::Any
    } else {
        let namespace = super::NamespaceArg::default();
        let Some(declared) = (experiments.is_empty())
            .then(Vec::new)
            .or_else(|| super::load_experiments_in(experiments, &namespace))
        else {
            return EXIT_ERROR;
        };
        trust::Commands::Declared(trust::declared_commands(&declared))
    };
    let cluster = inventory.cluster().name.clone();
    let mut doc = RestoreDoc::begin(&cluster, &location, &journal.active(&cluster));
    let code = undo_and_compare(&inventory, journal, &location, &commands, format, &mut doc).await;
    doc.finish(code);
    if format == RestoreFormat::Json {
        match serde_json::to_string_pretty(&doc) {
            Ok(text) => say!("{text}"),
            Err(e) => {
                fail!("cannot write the restore as JSON: {e}");
                return EXIT_ERROR;
            }
        }
    }
    code
}

/// The restore itself, phase by phase: each said as it goes and noted in `doc`. Returns
/// the exit code.
async fn undo_and_compare(
    inventory: &Inventory,
    mut journal: Journal,
    location: &Location,
    commands: &trust::Commands,
    format: RestoreFormat,
    doc: &mut RestoreDoc,
) -> i32 {
    let path = &location.path;
    let cluster = inventory.cluster().name.clone();
    // Which file was read, always: a journal looked for in the wrong place (another
    // user's, root's) must not pass for an empty one.
    tell!(
        format,
        "{}",
        journal_line(location, journal.active(&cluster).len(), &cluster)
    );
    let executor = Executor::new(inventory.clone());
    let snapshot_path = snapshot::path_beside(path, &cluster);
    let before = match snapshot::load(&snapshot_path) {
        Ok(s) => s,
        Err(e) => {
            fail!(
                "{}: cannot read the cluster snapshot: {e}",
                snapshot_path.display()
            );
            doc.comparison = Some(ComparisonDoc {
                error: Some(format!("cannot read the cluster snapshot: {e}")),
                ..ComparisonDoc::of(&snapshot_path)
            });
            None
        }
    };
    let nothing = journal.active(&cluster).is_empty();
    // Even with nothing in this journal the cluster is asked: a run killed elsewhere (a CI
    // runner gone, a pod's emptyDir) left its faults undone through the API on the cluster
    // lock, which this restore takes over and carries out.
    // Over every API endpoint: the fault being undone may have taken one of them down.
    let client = crate::cluster::connect_with_failover(
        inventory.kubeconfig(),
        inventory.context(),
        &inventory.cluster().api_endpoints(),
    )
    .await
    .map(|c| c.client);
    // A live run on the cluster holds its lock: restoring under it would undo its faults
    // and delete its node-access pods. Only when the API cannot be reached at all (the
    // fault being undone may have taken it down) do the node undos run without it.
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
            Err(e @ crate::cluster::lock::LockError::Unreachable(_)) => {
                say_err!("warning: {e}; restoring without it");
                None
            }
            Err(e) => {
                fail!("{e}");
                doc.error = Some(e.to_string());
                return EXIT_ERROR;
            }
        },
        Err(_) => None,
    };
    // A dead holder's faults that only the API undoes, recorded on its Lease: undone here
    // whatever this journal holds (the dead run's may have been on another machine).
    let mut lapsed_failed = false;
    if let (Some(lock), Ok(client)) = (&lock, &client)
        && let Some(dead) = &lock.took_over
    {
        let executor = Executor::new(inventory.clone());
        let lapsed = crate::run::lapsed::undo_lapsed(dead, client, &executor).await;
        for l in &lapsed {
            tell!(format, "{}", l.line(dead));
        }
        if let Some(left) = crate::run::lapsed::still_left(&lapsed) {
            lapsed_failed = true;
            if let Err(e) = lock.handle().note_api_undos(Some(left)).await {
                say_err!("{e}");
            }
        }
        lapsed_failed |= lapsed.iter().any(|l| l.result.is_err());
    }
    // A run still alive on this journal (its claim is held) undoes its own faults: even
    // under the lock (a lock deleted under that run) they are left alone, and so are its
    // node-access pods.
    let alive: BTreeSet<String> = journal
        .active(&cluster)
        .iter()
        .map(|e| crate::execute::run_of(&e.id).to_string())
        .filter(|run| journal.run_alive(run))
        .collect();
    // Under the lock no run is live: every node-access pod left is a dead run's. Without
    // it, only the pods of the runs this journal names are touched.
    let journal_runs: BTreeSet<String> = doc
        .journal
        .runs
        .iter()
        .filter(|r| !alive.contains(*r))
        .cloned()
        .collect();
    let only_runs = lock.is_none().then_some(&journal_runs);
    let sweep = crate::execute::pod::Leftovers {
        only_runs,
        except_runs: Some(&alive),
    };
    let screen = |entry: &crate::journal::Entry| -> Option<String> {
        if let Err(untrusted) = trust::check(entry, commands) {
            return Some(untrusted.to_string());
        }
        let run = crate::execute::run_of(&entry.id);
        alive.contains(run).then(|| {
            format!(
                "not undone: run {run} is still alive here (it holds its claim on this                  journal) and undoes its own faults"
            )
        })
    };
    let code = 'done: {
        if nothing {
            // What a killed run left is removed under the lock; with faults to undo, after
            // them, since an undo watcher may be among them.
            doc.node_access_pods = delete_node_access_pods(inventory, sweep, format).await;
            tell!(
                format,
                "nothing to restore for cluster {cluster} ({})",
                path.display()
            );
            let Some(before) = before else {
                break 'done EXIT_OK;
            };
            let (code, compared) = compare(
                &before,
                client.as_ref().ok(),
                &executor,
                inventory,
                &snapshot_path,
                format,
            )
            .await;
            doc.comparison = Some(compared);
            break 'done code;
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
            &screen,
            api,
        )
        .await;
        doc.node_access_pods = delete_node_access_pods(inventory, sweep, format).await;
        let mut failed = 0;
        for o in &outcomes {
            doc.undos.push(UndoDoc::of(o));
            match &o.error {
                None => tell!(
                    format,
                    "restored {} on {} ({} attempt(s))",
                    o.fault,
                    o.node,
                    o.attempts
                ),
                Some(e) => {
                    failed += 1;
                    tell!(
                        format,
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
                tell!(format, "  {} on {}: {w}", o.fault, o.node);
            }
        }
        tell!(
            format,
            "{} restored, {} left in {}",
            outcomes.len() - failed,
            failed,
            path.display()
        );
        let mut code = if failed == 0 { EXIT_OK } else { EXIT_FAILED };
        if let Some(before) = before {
            let (compared, found) = compare(
                &before,
                client.as_ref().ok(),
                &executor,
                inventory,
                &snapshot_path,
                format,
            )
            .await;
            doc.comparison = Some(found);
            code = code.max(compared);
        }

        code
    };
    match lock {
        // What could not be undone stays recorded on the Lease for the next taker.
        Some(lock) if lapsed_failed => lock.abandon(),
        Some(lock) => lock.release().await,
        None => {}
    }
    if lapsed_failed {
        return code.max(EXIT_FAILED);
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
/// Returns the exit code and what was found.
async fn compare(
    before: &snapshot::Snapshot,
    client: Option<&kube::Client>,
    executor: &Executor,
    inventory: &Inventory,
    snapshot_path: &Path,
    format: RestoreFormat,
) -> (i32, ComparisonDoc) {
    let mut found = ComparisonDoc {
        taken_at: Some(before.taken_at),
        ..ComparisonDoc::of(snapshot_path)
    };
    let Some(client) = client else {
        let why = "cannot compare the cluster with its snapshot: the API is unreachable";
        fail!("{why}");
        found.error = Some(why.to_string());
        return (EXIT_ERROR, found);
    };
    // The timers the inventory states, upstream defaults for the rest: only the wait's length.
    let timers = crate::timers::TimersInForce::resolve(
        &crate::timers::ClusterReadings::default(),
        &inventory.stated_timers(),
        None,
    )
    .timers;
    let settle = restored::settle_bound(crate::run::DEFAULT_RESTORE_MARGIN, &timers);
    found.settle_ms = Some(u64::try_from(settle.as_millis()).unwrap_or(u64::MAX));
    tell!(
        format,
        "comparing the cluster with its snapshot from before the first fault ({}), waiting up \
         to {}s for it to settle",
        before.taken_at.format("%Y-%m-%d %H:%M:%S UTC"),
        settle.as_secs()
    );
    let check = restored::check(before, client, executor, settle).await;
    found.ok = check.ok;
    found.compared = Some(check.compared.clone());
    found.waited_ms = Some(check.waited_ms);
    found.differences = check.differences.clone();
    if check.ok {
        tell!(
            format,
            "cluster restored: {} (settled after {:.1}s)",
            check.compared,
            check.waited_ms as f64 / 1000.0
        );
        let _ = std::fs::remove_file(snapshot_path);
        (EXIT_OK, found)
    } else {
        tell!(
            format,
            "cluster NOT restored after {:.1}s:",
            check.waited_ms as f64 / 1000.0
        );
        for d in &check.differences {
            tell!(format, "  {d}");
        }
        tell!(
            format,
            "the snapshot stays at {}; fix the differences and run `faultline restore` again",
            snapshot_path.display()
        );
        (EXIT_FAILED, found)
    }
}

/// Deletes the node-access pods a killed run left behind, when the inventory reaches any
/// node through the API (`transport: pod`), in the namespaces its nodes' pods run in; says
/// what it deleted, or why it could not, and returns the same (`None`: no node is reached
/// through the API). `which`: whose pods (restoring without the cluster lock: only those of
/// the runs this journal names; never those of a run still alive here).
async fn delete_node_access_pods(
    inventory: &Inventory,
    which: crate::execute::pod::Leftovers<'_>,
    format: RestoreFormat,
) -> Option<PodsDoc> {
    let namespaces = inventory.node_access_namespaces();
    if namespaces.is_empty() {
        return None;
    }
    let mut found = PodsDoc::default();
    let client = match crate::cluster::connect_with_failover(
        inventory.kubeconfig(),
        inventory.context(),
        &inventory.cluster().api_endpoints(),
    )
    .await
    {
        Ok(c) => c.client,
        Err(e) => {
            let why = format!("cannot look for node-access pods left behind: {e}");
            say_err!("{why}");
            found.error = Some(why);
            return Some(found);
        }
    };
    if which.only_runs.is_some_and(|r| r.is_empty()) {
        let why = "node-access pods left behind are not looked for without the cluster lock: \
                   a live run's would be among them";
        tell!(format, "{why}");
        found.skipped = Some(why.to_string());
        return Some(found);
    }
    let swept = crate::execute::pod::delete_leftovers(&client, &namespaces, which).await;
    if !swept.deleted.is_empty() {
        tell!(
            format,
            "deleted {} node-access pod(s) left behind: {}",
            swept.deleted.len(),
            swept.deleted.join(", ")
        );
    }
    found.deleted = swept.deleted;
    if !swept.failed.is_empty() {
        let why = format!(
            "could not delete every node-access pod left behind: {}",
            swept.failed.join("; ")
        );
        say_err!("{why}");
        found.error = Some(why);
    }
    Some(found)
}
