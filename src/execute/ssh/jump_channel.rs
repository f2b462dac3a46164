//! The bridge that carries an SSH session through a jump host: a `direct-tcpip` channel of
//! the jump host's session, pumped to and from one end of a local socket pair whose other
//! end the next session runs over (as `ssh -J` does with a pipe to `ssh -W`).
//!
//! libssh2 sessions are not safe to read and write from two threads at once, so one thread
//! owns the jump host's session, switched to non-blocking, and moves bytes both ways,
//! sleeping in poll(2) on the local socket and the jump host's own socket. The thread ends
//! when either side closes or fails, or when the bridge is dropped (which joins it).

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use ssh2::{BlockDirections, Channel, Session};

/// How long one poll waits before the pump looks at its stop flag again.
const POLL_MS: i32 = 50;

/// libssh2's "would block" (`LIBSSH2_ERROR_EAGAIN`).
const EAGAIN: i32 = -37;

/// A running pump; dropping it stops and joins the thread.
pub(super) struct Bridge {
    stop: Arc<AtomicBool>,
    local: Option<UnixStream>,
    thread: Option<JoinHandle<()>>,
}

impl Bridge {
    /// Starts pumping between `channel` (of `session`, whose transport socket is
    /// `session_fd`) and `local`.
    pub(super) fn start(
        session: Session,
        channel: Channel,
        session_fd: RawFd,
        local: UnixStream,
    ) -> std::io::Result<Bridge> {
        let stop = Arc::new(AtomicBool::new(false));
        let handle = local.try_clone()?;
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("faultline-ssh-jump".into())
                .spawn(move || pump(&session, channel, session_fd, local, &stop))?
        };
        Ok(Bridge {
            stop,
            local: Some(handle),
            thread: Some(thread),
        })
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(local) = self.local.take() {
            let _ = local.shutdown(std::net::Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn would_block(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::WouldBlock
}

/// Moves bytes until one side is done. Bytes read but not yet written wait in `up` (local →
/// channel) and `down` (channel → local); a libssh2 write that would block is repeated with
/// the same bytes, as libssh2 requires.
fn pump(
    session: &Session,
    mut channel: Channel,
    session_fd: RawFd,
    mut local: UnixStream,
    stop: &AtomicBool,
) {
    session.set_blocking(false);
    if local.set_nonblocking(true).is_err() {
        return;
    }
    let mut up: Vec<u8> = Vec::new();
    let mut down: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    let mut local_eof = false;
    let mut eof_sent = false;
    let mut remote_eof = false;
    while !stop.load(Ordering::SeqCst) {
        let mut moved = false;
        // Channel → local.
        if down.is_empty() && !remote_eof {
            match channel.read(&mut buf) {
                Ok(0) if channel.eof() => {
                    remote_eof = true;
                    let _ = local.shutdown(std::net::Shutdown::Write);
                }
                Ok(n) => {
                    moved |= n > 0;
                    down.extend_from_slice(&buf[..n]);
                }
                Err(e) if would_block(&e) => {}
                Err(_) => break,
            }
        }
        if !down.is_empty() {
            match local.write(&down) {
                Ok(n) => {
                    moved |= n > 0;
                    down.drain(..n);
                }
                Err(e) if would_block(&e) => {}
                Err(_) => break,
            }
        }
        // Local → channel.
        if up.is_empty() && !local_eof {
            match local.read(&mut buf) {
                Ok(0) => local_eof = true,
                Ok(n) => {
                    moved = true;
                    up.extend_from_slice(&buf[..n]);
                }
                Err(e) if would_block(&e) => {}
                Err(_) => break,
            }
        }
        if !up.is_empty() {
            match channel.write(&up) {
                Ok(n) => {
                    moved |= n > 0;
                    up.drain(..n);
                }
                Err(e) if would_block(&e) => {}
                Err(_) => break,
            }
        }
        if local_eof && up.is_empty() && !eof_sent {
            match channel.send_eof() {
                Ok(()) => eof_sent = true,
                Err(e) if e.code() == ssh2::ErrorCode::Session(EAGAIN) => {}
                Err(_) => break,
            }
        }
        if local_eof && eof_sent && remote_eof && down.is_empty() {
            break;
        }
        // libssh2 may hold bytes it already read from its socket: only sleep when a whole
        // round moved nothing.
        if !moved {
            wait(session, session_fd, &local, &up, &down, local_eof);
        }
    }
    let _ = local.shutdown(std::net::Shutdown::Both);
    session.set_blocking(true);
    session.set_timeout(1000);
    let _ = channel.close();
}

/// Sleeps until either socket is ready for what the pump needs next (or `POLL_MS` passes).
fn wait(
    session: &Session,
    session_fd: RawFd,
    local: &UnixStream,
    up: &[u8],
    down: &[u8],
    local_eof: bool,
) {
    let mut local_events = 0;
    if up.is_empty() && !local_eof {
        local_events |= libc::POLLIN;
    }
    if !down.is_empty() {
        local_events |= libc::POLLOUT;
    }
    let mut remote_events = libc::POLLIN;
    if matches!(
        session.block_directions(),
        BlockDirections::Outbound | BlockDirections::Both
    ) {
        remote_events |= libc::POLLOUT;
    }
    let mut fds = [
        libc::pollfd {
            fd: local.as_raw_fd(),
            events: local_events,
            revents: 0,
        },
        libc::pollfd {
            fd: session_fd,
            events: remote_events,
            revents: 0,
        },
    ];
    // SAFETY: `fds` is a valid array of two pollfd for the duration of the call, and both
    // descriptors stay open while the pump runs (the local one is owned here, the session's
    // by `session`).
    unsafe {
        libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, POLL_MS);
    }
}
