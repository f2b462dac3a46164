//! Running an argv on the machine faultline runs on: the `exec` transport (`docker exec`,
//! `oc debug`) and out-of-band power drivers. No shell is involved.

use std::process::Stdio;
use std::time::Duration;

use super::output::bounded;

/// How a local process ended.
#[derive(Debug)]
pub(super) enum LocalEnd {
    /// It exited; `code` is `None` when a signal ended it.
    Exited {
        /// Exit code.
        code: Option<i32>,
        /// Bounded stdout+stderr.
        output: String,
    },
    /// The time limit passed; the process was killed.
    TimedOut,
}

/// Run `argv` with no stdin, capturing output, killing it at `timeout`.
pub(super) async fn run(argv: &[String], timeout: Duration) -> std::io::Result<LocalEnd> {
    let Some((program, args)) = argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty argv",
        ));
    };
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(out) => {
            let out = out?;
            Ok(LocalEnd::Exited {
                code: out.status.code(),
                output: bounded(&out.stdout, &out.stderr),
            })
        }
        // Dropping the future drops the child, and kill_on_drop kills it.
        Err(_) => Ok(LocalEnd::TimedOut),
    }
}
