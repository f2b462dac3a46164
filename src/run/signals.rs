//! Signal handling, in one place: the first SIGINT, SIGTERM or SIGHUP cancels the run
//! cleanly (undo, reports, exit code 2); a second SIGINT or SIGTERM (the user pressing
//! Ctrl-C again, an operator insisting) exits at once and leaves the fault journal for
//! `faultline restore`. A SIGHUP never does: one terminal hangup can arrive twice (the
//! shell hands it to its jobs, then the kernel sends it to the old foreground group), and
//! a hangup says nothing about wanting the undo skipped.
//!
//! The handler cancels FIRST and only then says so, and what it says may go nowhere: after
//! a SIGHUP the terminal is gone, and after a SIGINT to a pipeline (`faultline run | tee
//! log`) the reader is gone too. A write that fails is dropped; it can never stop the
//! cancellation (a print that panicked here once left every fault in place).

use std::io::Write;

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Exit code used when a second signal cuts the clean shutdown short.
pub(crate) const HARD_EXIT_CODE: i32 = 130;

/// What a signal does, decided by how many came before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Response {
    /// The first: cancel the run; undo and reports follow.
    Cancel,
    /// Any later one: exit now.
    Exit,
}

fn respond(name: &str, seen_before: u32) -> Response {
    if seen_before == 0 || name == "SIGHUP" {
        Response::Cancel
    } else {
        Response::Exit
    }
}

/// Handles one signal named `name`: cancels (or exits) first, then writes one line to
/// `err`, ignoring a failed write.
fn handle(name: &str, seen_before: u32, cancel: &CancellationToken, err: &mut impl Write) {
    if seen_before > 0 && name == "SIGHUP" {
        // Already cancelled; a hangup repeated is not a request to stop harder.
        cancel.cancel();
        let _ = writeln!(err, "faultline: SIGHUP received again: still undoing");
        return;
    }
    match respond(name, seen_before) {
        Response::Cancel => {
            cancel.cancel();
            let _ = writeln!(
                err,
                "faultline: {name} received: undoing faults and writing reports (send it again to exit at once)"
            );
        }
        Response::Exit => {
            let _ = writeln!(
                err,
                "faultline: {name} received again: exiting now; run `faultline restore` to undo what is left"
            );
            std::process::exit(HARD_EXIT_CODE);
        }
    }
}

/// Whether this process listens for signals already ([`install`]): one listener counts
/// them, so a command run inside another (`faultline job` runs `restore`, then `run`)
/// does not count each signal twice.
static INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`install`] already ran in this process.
pub(crate) fn installed() -> bool {
    INSTALLED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Starts listening for signals; `cancel` is triggered by the first one.
pub(crate) fn install(cancel: CancellationToken) -> std::io::Result<tokio::task::JoinHandle<()>> {
    INSTALLED.store(true, std::sync::atomic::Ordering::SeqCst);
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
            handle(name, seen, &cancel, &mut std::io::stderr());
            seen += 1;
        }
    }))
}

/// What the run loop's offline tests use to send a signal the way the handler gets one.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A terminal that hung up: every write fails as a closed tty does.
    pub(crate) struct DeadTerminal;

    impl Write for DeadTerminal {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from_raw_os_error(libc::EIO))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::EIO))
        }
    }

    /// A first SIGHUP, its message written to a terminal that hung up.
    pub(crate) fn hangup_with_dead_terminal(cancel: &CancellationToken) {
        handle("SIGHUP", 0, cancel, &mut DeadTerminal);
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::DeadTerminal;
    use super::*;

    #[test]
    fn sighup_with_a_dead_terminal_cancels_and_does_not_panic() {
        let cancel = CancellationToken::new();
        handle("SIGHUP", 0, &cancel, &mut DeadTerminal);
        assert!(cancel.is_cancelled());
    }

    #[test]
    fn a_hangup_delivered_twice_does_not_cut_the_undo_short() {
        let cancel = CancellationToken::new();
        let mut said = Vec::new();
        handle("SIGHUP", 0, &cancel, &mut said);
        // Were it taken as a second signal, the process would exit here.
        handle("SIGHUP", 1, &cancel, &mut said);
        assert!(cancel.is_cancelled());
        assert!(String::from_utf8_lossy(&said).contains("still undoing"));
        assert_eq!(respond("SIGHUP", 1), Response::Cancel);
        // After a Ctrl-C, the terminal closing is not a second Ctrl-C either.
        assert_eq!(respond("SIGHUP", 3), Response::Cancel);
    }

    #[test]
    fn the_first_signal_cancels_and_a_later_one_exits() {
        assert_eq!(respond("SIGINT", 0), Response::Cancel);
        assert_eq!(respond("SIGINT", 1), Response::Exit);
        assert_eq!(respond("SIGTERM", 7), Response::Exit);
        let cancel = CancellationToken::new();
        let mut said = Vec::new();
        handle("SIGINT", 0, &cancel, &mut said);
        assert!(cancel.is_cancelled());
        assert!(String::from_utf8_lossy(&said).contains("SIGINT received: undoing"));
    }
}
