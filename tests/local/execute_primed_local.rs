//! Commands sent ahead of their step through a local client that passes its standard input
//! on (`transport: exec` with `execWithStdin`, as `docker exec -i` on kind and k3d), with a
//! REAL `sh` standing in for the node: a primed command runs once, only when it is
//! performed near when it was due, never when it is not, and one whose client ended is
//! sent anew; a step's nodes are released together, before their calls hear them out.
//! (How soon after its offset it starts is a figure, not a test.)

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::execute_primed::{lines, running, until};
use faultline::execute::{Executor, NodeOp};
use faultline::inventory::Inventory;

const T: Duration = Duration::from_secs(10);
const AHEAD: Duration = Duration::from_secs(2);

/// An inventory whose node is this machine through `sh -c`, `heal` appending to `log`;
/// `with_stdin` adds the same client as `execWithStdin`.
fn executor(log: &Path, with_stdin: bool) -> Executor {
    executor_of(log, with_stdin, &["n1"])
}

/// [`executor`] with `nodes`, all of them this machine.
fn executor_of(log: &Path, with_stdin: bool, nodes: &[&str]) -> Executor {
    let stdin = if with_stdin {
        "execWithStdin: [sh, -c, \"{command}\"]\n"
    } else {
        ""
    };
    let nodes: Vec<String> = nodes.iter().map(|n| format!("{{name: {n}}}")).collect();
    let text = format!(
        "cluster: {{name: local}}\ntransport: exec\nexec: [sh, -c, \"{{command}}\"]\n{stdin}\
         commands:\n  heal: echo x >> {}; echo healed\nnodes: [{}]\n",
        log.display(),
        nodes.join(", ")
    );
    Executor::new(Inventory::parse(&text, Path::new("t.yaml")).unwrap_or_else(|e| panic!("{e}")))
}

/// Primes `heal` on `n1` for a step due at `due` with `limit`; it must be primed.
async fn prime_heal(ex: &Executor, limit: Duration, due: Instant) {
    prime_heal_on(ex, "n1", limit, due).await;
}

/// [`prime_heal`] on `node`.
async fn prime_heal_on(ex: &Executor, node: &str, limit: Duration, due: Instant) {
    let primed = ex
        .prime(node, &NodeOp::Heal, limit, due, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(primed, "a client with execWithStdin is primed");
}

/// A log in a fresh folder (kept while the folder is), an executor for `n1` whose `heal`
/// appends to it, and `heal` primed there with [`T`], now due.
async fn heal_now_due() -> (tempfile::TempDir, PathBuf, Executor) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("ran");
    let ex = executor(&log, true);
    let due = Instant::now() + AHEAD;
    prime_heal(&ex, T, due).await;
    tokio::time::sleep_until(due.into()).await;
    (dir, log, ex)
}

/// A step due on three nodes through `docker exec -i` (here `sh`): the loop's one
/// release starts the command on all of them before any node's call, and each call then
/// hears its own out whole, without sending it again.
#[tokio::test]
async fn a_steps_local_commands_are_released_on_all_its_nodes_before_any_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("ran");
    let nodes = ["n1", "n2", "n3"];
    let ex = executor_of(&log, true, &nodes);
    let due = Instant::now() + AHEAD;
    for node in nodes {
        prime_heal_on(&ex, node, T, due).await;
    }
    tokio::time::sleep_until(due.into()).await;
    assert_eq!(lines(&log), 0, "it ran before it was released");
    ex.release(&nodes, &NodeOp::Heal, T).await;
    assert!(
        until(T, || lines(&log) == 3).await,
        "released commands did not all run before their calls: {} of 3",
        lines(&log)
    );
    let outs =
        futures::future::join_all(nodes.iter().map(|n| ex.perform(n, &NodeOp::Heal, T))).await;
    for out in outs {
        let out = out.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((out.exit_status, out.output.trim()), (Some(0), "healed"));
    }
    assert_eq!(lines(&log), 3, "a released command was sent again");
}

/// A released command that is over before its call comes (its client ended) is the
/// step's command: its call hears it out, and never takes it for one that had gone.
#[tokio::test]
async fn a_released_local_command_over_before_its_call_is_heard_once() {
    let (_dir, log, ex) = heal_now_due().await;
    ex.release(&["n1"], &NodeOp::Heal, T).await;
    let waiting = format!("faultline_go.*{}", log.display());
    assert!(
        until(T, || lines(&log) == 1 && !running(&waiting)).await,
        "a released command did not run and end"
    );
    let out = ex
        .perform("n1", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.output.trim(), "healed", "{out:?}");
    assert_eq!(lines(&log), 1, "a released command was sent again");
}

#[tokio::test]
async fn a_primed_local_command_runs_once_when_performed_and_not_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("ran");
    let ex = executor(&log, true);
    let due = Instant::now() + AHEAD;
    prime_heal(&ex, T, due).await;
    let waiting = format!("faultline_go.*{}", log.display());
    assert!(until(T, || running(&waiting)).await, "nothing waits");
    tokio::time::sleep_until(due.into()).await;
    assert_eq!(lines(&log), 0, "it ran before it was performed");
    let out = ex
        .perform("n1", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit_status, Some(0), "{out:?}");
    assert_eq!(out.output.trim(), "healed", "{out:?}");
    assert_eq!(lines(&log), 1);
    assert!(
        !running(&waiting),
        "the primed command was not the one that ran"
    );
    ex.perform("n1", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lines(&log), 2);
}

#[tokio::test]
async fn a_primed_local_command_never_performed_never_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("ran");
    let ex = executor(&log, true);
    // A long limit: what ends the waiting shell must be its client, not its deadline.
    prime_heal(&ex, Duration::from_secs(60), Instant::now() + AHEAD).await;
    let waiting = format!("faultline_go.*{}", log.display());
    assert!(until(T, || running(&waiting)).await, "nothing waits");
    drop(ex);
    assert!(
        until(Duration::from_secs(10), || !running(&waiting)).await,
        "a waiting shell outlived its client"
    );
    assert_eq!(lines(&log), 0, "a primed command ran without being started");
}

#[tokio::test]
async fn a_primed_local_command_is_not_taken_by_a_call_with_another_limit() {
    let (_dir, log, ex) = heal_now_due().await;
    ex.perform("n1", &NodeOp::Heal, Duration::from_secs(7))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lines(&log), 1);
    let waiting = format!("faultline_go.*{}", log.display());
    assert!(running(&waiting), "the primed command was taken");
    drop(ex);
    assert!(until(Duration::from_secs(10), || !running(&waiting)).await);
    assert_eq!(lines(&log), 1, "the primed command ran too");
}

#[tokio::test]
async fn a_primed_local_command_whose_client_ended_is_sent_anew() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("ran");
    let ex = executor(&log, true);
    let due = Instant::now() + Duration::from_secs(4);
    prime_heal(&ex, T, due).await;
    // The node went away under it (`docker kill` ends `docker exec`).
    let waiting = format!("faultline_go.*{}", log.display());
    assert!(until(T, || running(&waiting)).await, "nothing waits");
    let killed = std::process::Command::new("pkill")
        .args(["-KILL", "-f", &waiting])
        .status()
        .is_ok_and(|s| s.success());
    assert!(killed, "no waiting shell found to kill");
    assert!(until(T, || !running(&waiting)).await);
    tokio::time::sleep_until(due.into()).await;
    let out = ex
        .perform("n1", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.output.trim(), "healed", "{out:?}");
    assert_eq!(lines(&log), 1);
}

#[tokio::test]
async fn a_client_without_execwithstdin_is_not_primed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("ran");
    let ex = executor(&log, false);
    let primed = ex
        .prime("n1", &NodeOp::Heal, T, Instant::now() + AHEAD, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !primed,
        "a client that may not pass standard input on was primed"
    );
    let out = ex
        .perform("n1", &NodeOp::Heal, T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.output.trim(), "healed", "{out:?}");
}

#[test]
fn an_execwithstdin_without_the_command_is_refused_where_it_is_written() {
    let text = "cluster: {name: local}\ntransport: exec\nexec: [sh, -c, \"{command}\"]\n\
                execWithStdin: [sh, -c, true]\nnodes: [{name: n1}]\n";
    let err = Inventory::parse(text, Path::new("t.yaml"))
        .expect_err("an execWithStdin that carries no command")
        .to_string();
    assert!(
        err.contains("execWithStdin") && err.contains("{command}"),
        "{err}"
    );
}
