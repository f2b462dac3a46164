//! Signal handling, in one place: the first SIGINT, SIGTERM or SIGHUP cancels the run
//! cleanly (undo, reports, exit code 2); a second one exits at once and leaves the
//! fault journal for `faultline restore`.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Exit code used when a second signal cuts the clean shutdown short.
pub(crate) const HARD_EXIT_CODE: i32 = 130;

/// Starts listening for signals; `cancel` is triggered by the first one.
pub(crate) fn install(cancel: CancellationToken) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        let mut seen = 0u32;
        loop {
            let name = tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
            };
            seen += 1;
            if seen == 1 {
                eprintln!(
                    "faultline: {name} received: undoing faults and writing reports (send it again to exit at once)"
                );
                cancel.cancel();
            } else {
                eprintln!(
                    "faultline: {name} received again: exiting now; run `faultline restore` to undo what is left"
                );
                std::process::exit(HARD_EXIT_CODE);
            }
        }
    }))
}
