//! Command probes: exit status 0 is Up, anything else (or no answer in time) is Down.

use std::process::Stdio;
use std::time::Duration;

use crate::execute::{ExecError, Executor, NodeOp};
use crate::timeline::format_secs;

use super::TryResult;

/// Runs `sh -c command` locally under `timeout` (the child is killed when it overruns).
pub(crate) async fn local(command: &str, timeout: Duration) -> TryResult {
    let spawned = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return TryResult::new(false, format!("cannot run sh: {e}")),
    };
    let stderr = child.stderr.take();
    let finished = async {
        let text = match stderr {
            Some(pipe) => super::read_capped(pipe).await,
            None => String::new(),
        };
        (child.wait().await, text)
    };
    match tokio::time::timeout(timeout, finished).await {
        Err(_) => TryResult::new(false, format!("timed out after {}", format_secs(timeout))),
        Ok((Err(e), _)) => TryResult::new(false, format!("cannot run sh: {e}")),
        Ok((Ok(status), stderr)) => status_result(status.code(), &stderr),
    }
}

/// Runs the command on `node` over the node's transport.
pub(crate) async fn remote(
    executor: &Executor,
    node: &str,
    command: &str,
    timeout: Duration,
) -> TryResult {
    let op = NodeOp::Run(command.to_string());
    // The transport enforces the timeout; the outer one guards a transport that does not.
    let guard = timeout + Duration::from_secs(1);
    match tokio::time::timeout(guard, executor.perform(node, &op, timeout)).await {
        Err(_) => TryResult::new(false, format!("timed out after {}", format_secs(timeout))),
        Ok(Ok(o)) => status_result(o.exit_status, &o.output),
        Ok(Err(ExecError::CommandFailed {
            exit_status,
            output,
            ..
        })) => status_result(exit_status, &output),
        Ok(Err(e)) => TryResult::new(false, e.to_string()),
    }
}

/// `exit 0` is Up; otherwise Down with the exit status and the first line of output.
fn status_result(code: Option<i32>, output: &str) -> TryResult {
    let status = match code {
        Some(c) => format!("exit {c}"),
        None => "no exit status (killed)".to_string(),
    };
    if code == Some(0) {
        return TryResult::new(true, status);
    }
    match output.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(line) => TryResult::new(false, format!("{status}: {line}")),
        None => TryResult::new(false, status),
    }
}
