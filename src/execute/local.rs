//! Running an argv on the machine faultline runs on: the `exec` transport (`docker exec`,
//! `oc debug`) and out-of-band power drivers. No shell is involved.
//!
//! The process gets a process group of its own, so that ending it on a timeout ends what
//! it started too (a `sh -c` with children), and a Ctrl-C aimed at faultline's terminal
//! does not cut a power command in half (faultline decides what happens then). Output is
//! read as it streams, its tail kept ([`super::output`]).

use std::process::Stdio;
use std::time::Duration;

use super::output::{MAX_OUTPUT, Tail, bounded, read_tail_async};

/// How a local process ended.
#[derive(Debug)]
pub(super) enum LocalEnd {
    /// It exited within the time limit; `code` is `None` when a signal ended it.
    Exited {
        /// Exit code.
        code: Option<i32>,
        /// Bounded stdout+stderr.
        output: String,
    },
    /// The time limit passed, then it exited by itself within the grace given (the node's
    /// own deadline ended the command, or it just finished).
    Late {
        /// Exit code; `None` for a signal.
        code: Option<i32>,
        /// Bounded stdout+stderr.
        output: String,
    },
    /// The time limit (and grace) passed; its process group was killed.
    TimedOut {
        /// Whether the killed process was seen to end (reaped) within a few seconds.
        reaped: bool,
    },
}

/// Kills a process group with SIGKILL when dropped, unless defused: a dropped run (its
/// caller's future dropped) takes its whole group with it, not only the direct child.
struct GroupKill(Option<i32>);

impl GroupKill {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: killpg has no memory-safety preconditions; `pgid` is the group this
            // module created for a child it has not yet seen reaped.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Run `argv` with no stdin, capturing output. Within `timeout` its ending is
/// [`LocalEnd::Exited`]. Then it gets `grace` more to end by itself ([`LocalEnd::Late`]):
/// time for a node-side deadline to end the command the local client carries. Then its
/// process group is killed and reaped ([`LocalEnd::TimedOut`]).
pub(super) async fn run(
    argv: &[String],
    timeout: Duration,
    grace: Duration,
) -> std::io::Result<LocalEnd> {
    let Some((program, args)) = argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty argv",
        ));
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let mut group = GroupKill(child.id().and_then(|id| i32::try_from(id).ok()));
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let collect = async move {
        let (out, err, status) = tokio::join!(tail_of(stdout), tail_of(stderr), child.wait());
        (status, bounded(&out, &err))
    };
    tokio::pin!(collect);
    if let Ok((status, output)) = tokio::time::timeout(timeout, &mut collect).await {
        group.0 = None;
        return Ok(LocalEnd::Exited {
            code: status?.code(),
            output,
        });
    }
    if !grace.is_zero()
        && let Ok((status, output)) = tokio::time::timeout(grace, &mut collect).await
    {
        group.0 = None;
        return Ok(LocalEnd::Late {
            code: status?.code(),
            output,
        });
    }
    group.kill();
    let reaped = tokio::time::timeout(super::REAP, &mut collect)
        .await
        .is_ok();
    Ok(LocalEnd::TimedOut { reaped })
}

/// The tail of a child's pipe, read to its end.
async fn tail_of(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> Tail {
    match pipe {
        Some(p) => read_tail_async(p, MAX_OUTPUT).await.0,
        None => Tail::new(MAX_OUTPUT),
    }
}
