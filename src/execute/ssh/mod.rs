//! The SSH transport, built on ssh2 (libssh2).
//!
//! ssh2 blocks, so every session runs on a blocking thread watched from async code. The
//! command itself carries the node's own deadline (`timeout`, see the `execute` module),
//! so when the time limit passes the session is NOT cut: it is kept to hear the command
//! end there, until the node's deadline has surely ended it. Only then (or when the limit
//! passes before the command was even sent) are the sockets shut down from outside, which
//! makes the stuck libssh2 call return at once, and the thread is waited for, briefly.
//!
//! A node behind jump hosts is reached as `ssh -J` reaches it, in process: a session on the
//! first jump host over TCP, a `direct-tcpip` channel from it to the next machine, and the
//! next session over that channel ([`jump_channel`]), every host key verified on the way.
//! Sessions kept open between a run's commands wait in a [`pool`].

use std::io::Write;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ssh2::{CheckResult, ExtendedData, KnownHostFileKind, Session};

mod jump_channel;
mod pool;

use super::gate_input::GO;
use super::output::{MAX_OUTPUT, Tail, bounded, read_tail};
use crate::inventory::SshSettings;
use jump_channel::Bridge;

/// Where and how to run one command over SSH.
#[derive(Debug, Clone)]
pub(super) struct SshTarget {
    /// Node name, for messages.
    pub node: String,
    /// Host name or IP address (the ssh config's HostName, else the node's address).
    pub host: String,
    /// Merged SSH settings.
    pub settings: SshSettings,
}

impl SshTarget {
    /// What a kept connection is kept under: the node, and how it is logged into (user,
    /// address, port, key, the jump hosts on the way), so that a connection is only ever
    /// reused for exactly the login it was opened with.
    pub(super) fn pool_key(&self) -> String {
        let s = &self.settings;
        let jumps: Vec<String> = s
            .jump
            .iter()
            .map(|j| format!("{}@{}:{}", j.user, j.host, j.port))
            .collect();
        format!(
            "{} {}@{}:{} key={:?} via={}",
            self.node,
            s.user,
            self.host,
            s.port,
            s.identity_file,
            jumps.join(",")
        )
    }
}

/// The idle SSH connections an executor keeps, by node and login.
pub(super) type SessionPool = pool::SessionPool<Connection>;

/// An authenticated connection to a node: its session, the bridges that carry it through
/// jump hosts, and a copy of every socket on the way (to cut it from outside). Fields drop
/// in order: the session before the bridges under it.
pub(super) struct Connection {
    session: Session,
    /// Held only to keep the pumps running while the session lives.
    _bridges: Vec<Bridge>,
    sockets: Vec<Socket>,
}

/// How an SSH command ended.
#[derive(Debug)]
pub(super) enum SshEnd {
    /// The command finished and reported an exit status (or signal).
    Exited {
        /// Exit code; `None` if a signal ended it.
        code: Option<i32>,
        /// Bounded output.
        output: String,
    },
    /// The command was sent, then the connection went away (EOF, reset) without a status.
    Dropped {
        /// Output seen before the drop.
        output: String,
    },
    /// The time limit passed, then the command ended on the node (its deadline ended it,
    /// or it just finished) while the session was kept to hear it.
    Late {
        /// Exit code; `None` if a signal ended it.
        code: Option<i32>,
        /// Bounded output.
        output: String,
    },
    /// The time limit passed and the session was cut.
    TimedOut {
        /// Whether the command had been sent: when it had not, it never will be, and
        /// nothing runs on the node; when it had, its end could not be heard.
        sent: bool,
    },
}

/// Errors before a command could run: connection, host key, authentication.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    /// TCP connect or name resolution.
    #[error("cannot connect to {addr}: {message}")]
    Connect {
        /// host:port.
        addr: String,
        /// Why.
        message: String,
    },
    /// The host key is not what known_hosts says, or is absent from it.
    #[error("{0}")]
    HostKey(String),
    /// No configured method authenticated.
    #[error("authentication as `{user}` failed: {message}")]
    Auth {
        /// Login user.
        user: String,
        /// Which methods were tried.
        message: String,
    },
    /// Any other libssh2 error.
    #[error("ssh: {0}")]
    Protocol(String),
}

impl From<ssh2::Error> for SshError {
    fn from(e: ssh2::Error) -> Self {
        SshError::Protocol(e.to_string())
    }
}

/// A value read from the environment at run time (a sudo password): never shown by `Debug`.
pub(super) struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// A socket of the connection (the first TCP one, or the local end of a jump-host bridge),
/// kept so that the outer timeout can shut them all down from outside.
enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    fn try_clone(&self) -> std::io::Result<Socket> {
        Ok(match self {
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Socket::Unix(s) => Socket::Unix(s.try_clone()?),
        })
    }

    fn shutdown(&self) {
        let _ = match self {
            Socket::Tcp(s) => s.shutdown(Shutdown::Both),
            Socket::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

type Sockets = Arc<Mutex<Vec<Socket>>>;

/// Where a session is: connecting (the command not sent yet), sent, or abandoned (the
/// time limit passed before sending, and the command must never be sent).
const CONNECTING: u8 = 0;
const SENT: u8 = 1;
const ABANDONED: u8 = 2;

/// The session's shared state, and what cuts it: dropping the guard (the caller's future
/// dropped) abandons the command if it was not sent yet and shuts the sockets, so the
/// blocking thread ends.
struct Cut {
    sockets: Sockets,
    state: Arc<AtomicU8>,
    done: bool,
}

impl Cut {
    /// Abandons the command if not sent yet; returns whether it had been sent.
    fn abandon(&self) -> bool {
        self.state
            .compare_exchange(CONNECTING, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
    }

    fn shut(&self) {
        if let Ok(guard) = self.sockets.lock() {
            guard.iter().for_each(Socket::shutdown);
        }
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        if !self.done {
            self.abandon();
            self.shut();
        }
    }
}

/// Run `command` on the target. Within `timeout` (connect and jump hosts included) its
/// ending is [`SshEnd::Exited`] or [`SshEnd::Dropped`]. When the limit passes before the
/// command was sent, it is never sent ([`SshEnd::TimedOut`] `{ sent: false }`). When it
/// was sent, the session is kept until `ends_within` after sending plus a little slack,
/// the time by which the node's own deadline has surely ended the command
/// ([`SshEnd::Late`]); past that the session is cut ([`SshEnd::TimedOut`]
/// `{ sent: true }`). `stdin`, when given, is written to the command's standard input,
/// which is then closed.
///
/// The command goes over the connection `pool` keeps for this node when there is one, else
/// over a new one; with `keep`, the connection is put back once the command ended normally
/// (not for a command that takes the machine down).
pub(super) async fn run(
    target: SshTarget,
    command: String,
    stdin: Option<Secret>,
    limits: Limits,
    pool: Arc<SessionPool>,
    keep: bool,
    primed: Option<Primed>,
) -> Result<SshEnd, SshError> {
    let Limits {
        timeout,
        ends_within,
    } = limits;
    let mut cut = Cut {
        sockets: Arc::new(Mutex::new(Vec::new())),
        state: Arc::new(AtomicU8::new(CONNECTING)),
        done: false,
    };
    // A command released ahead ([`Primed::release`]) was sent then: the watcher must
    // not take it for one still connecting.
    let released_at = primed.as_ref().and_then(Primed::released_at);
    if released_at.is_some() {
        cut.state.store(SENT, Ordering::SeqCst);
    }
    let sent_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(released_at));
    // libssh2's own limit on one blocking call, only a backstop behind the watch below.
    let backstop = timeout
        .saturating_add(ends_within)
        .saturating_add(super::deadline::CONFIRM_SLACK)
        .saturating_add(super::deadline::REAP);
    let mut task = {
        let (sockets, state, sent_at) = (cut.sockets.clone(), cut.state.clone(), sent_at.clone());
        tokio::task::spawn_blocking(move || {
            let session = Watch {
                sockets: &sockets,
                state: &state,
                sent_at: &sent_at,
            };
            let key = target.pool_key();
            let (connection, end) = match primed.and_then(|p| p.alive(&session)) {
                Some(primed) => primed.start(backstop, &session)?,
                None => run_blocking(&target, &command, stdin, timeout, backstop, &session, &pool)?,
            };
            if keep && matches!(end, SshEnd::Exited { .. }) {
                pool.put(key, connection);
            }
            Ok(end)
        })
    };
    let joined = |j: Result<Result<SshEnd, SshError>, tokio::task::JoinError>| match j {
        Ok(result) => result,
        Err(join) => Err(SshError::Protocol(format!("ssh worker failed: {join}"))),
    };
    if let Ok(j) = tokio::time::timeout(timeout, &mut task).await {
        cut.done = true;
        return joined(j);
    }
    if !cut.abandon() {
        cut.shut();
        let _ = tokio::time::timeout(super::deadline::REAP, &mut task).await;
        cut.done = true;
        return Ok(SshEnd::TimedOut { sent: false });
    }
    // Sent: the node ends it by its own deadline; hear that end.
    let sent = sent_at
        .lock()
        .ok()
        .and_then(|s| *s)
        .unwrap_or_else(Instant::now);
    let left = ends_within
        .saturating_add(super::deadline::CONFIRM_SLACK)
        .saturating_sub(sent.elapsed());
    let end = match tokio::time::timeout(left, &mut task).await {
        Ok(j) => match joined(j)? {
            SshEnd::Exited { code, output } => SshEnd::Late { code, output },
            _ => SshEnd::TimedOut { sent: true },
        },
        Err(_) => {
            cut.shut();
            let _ = tokio::time::timeout(super::deadline::REAP, &mut task).await;
            SshEnd::TimedOut { sent: true }
        }
    };
    cut.done = true;
    Ok(end)
}

/// What the session thread shares with its watcher.
struct Watch<'a> {
    sockets: &'a Sockets,
    state: &'a AtomicU8,
    sent_at: &'a Mutex<Option<Instant>>,
}

/// One machine on the way: a jump host or the node itself.
struct Hop<'a> {
    /// How messages name it: `node X` or `jump host B (on the way to node X)`.
    what: String,
    host: &'a str,
    port: u16,
    user: &'a str,
    identity_file: Option<&'a Path>,
}

/// The two time limits of one command: the caller's, and the one by which the node's own
/// deadline has surely ended it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// The caller's limit (connecting included).
    pub timeout: Duration,
    /// How long after it was sent the node's deadline has surely ended the command.
    pub ends_within: Duration,
}

/// Runs the command over the kept connection for the node, or a new one when none is kept
/// or the kept one has gone stale; returns the connection with the command's ending.
fn run_blocking(
    target: &SshTarget,
    command: &str,
    stdin: Option<Secret>,
    timeout: Duration,
    backstop: Duration,
    watch: &Watch<'_>,
    pool: &SessionPool,
) -> Result<(Connection, SshEnd), SshError> {
    let kept = pool
        .take(&target.pool_key())
        .and_then(|c| reuse(c, target, watch.sockets));
    let (connection, mut channel) = match kept {
        Some(pair) => pair,
        None => {
            let connection = connect(target, timeout, watch.sockets)?;
            let channel = connection.session.channel_session()?;
            (connection, channel)
        }
    };
    // Connected within the limit: from here a call waits as long as the watcher may.
    connection
        .session
        .set_timeout(u32::try_from(backstop.as_millis()).unwrap_or(u32::MAX));
    let end = exchange(&mut channel, command, stdin, watch)?;
    drop(channel);
    Ok((connection, end))
}

/// A kept connection with a new channel on it, or `None` (the connection closed) when it
/// has gone stale: the node rebooted, or sshd ended the session. A connection that went
/// silent costs the node's connect timeout before a new one is opened.
fn reuse(
    connection: Connection,
    target: &SshTarget,
    sockets: &Sockets,
) -> Option<(Connection, ssh2::Channel)> {
    if let Ok(mut guard) = sockets.lock() {
        guard.extend(connection.sockets.iter().filter_map(|s| s.try_clone().ok()));
    }
    let limit = target.settings.connect_timeout.as_millis();
    connection
        .session
        .set_timeout(u32::try_from(limit).unwrap_or(u32::MAX));
    match connection.session.channel_session() {
        Ok(channel) => Some((connection, channel)),
        Err(e) => {
            tracing::debug!(
                node = %target.node,
                "the kept SSH connection is stale ({e}); opening a new one"
            );
            None
        }
    }
}

/// Opens a connection to the node, through its jump hosts, every host key verified and
/// every hop logged into; its sockets are also registered in `sockets`, so that a watcher
/// can cut it.
fn connect(
    target: &SshTarget,
    timeout: Duration,
    sockets: &Sockets,
) -> Result<Connection, SshError> {
    let s = &target.settings;
    let mut hops: Vec<Hop<'_>> = s
        .jump
        .iter()
        .map(|j| Hop {
            what: format!("jump host {} (on the way to node {})", j.name, target.node),
            host: &j.host,
            port: j.port,
            user: &j.user,
            identity_file: j.identity_file.as_deref(),
        })
        .collect();
    hops.push(Hop {
        what: format!("node {}", target.node),
        host: &target.host,
        port: s.port,
        user: &s.user,
        identity_file: s.identity_file.as_deref(),
    });
    // Declared before the sessions, so that they are dropped (pumps stopped) after them.
    let mut bridges: Vec<Bridge> = Vec::new();
    let mut own = Vec::new();
    let session = connect_through(&hops, target, timeout, sockets, &mut own, &mut bridges)?;
    Ok(Connection {
        session,
        _bridges: bridges,
        sockets: own,
    })
}

/// Sends the command on `channel` (unless the watcher gave up on it first), feeds it
/// `stdin`, and reads its output and its ending.
fn exchange(
    channel: &mut ssh2::Channel,
    command: &str,
    stdin: Option<Secret>,
    watch: &Watch<'_>,
) -> Result<SshEnd, SshError> {
    channel.handle_extended_data(ExtendedData::Merge)?;
    // Sent only if the watcher has not given up on it: never after the limit.
    if watch
        .state
        .compare_exchange(CONNECTING, SENT, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return Ok(SshEnd::TimedOut { sent: false });
    }
    if let Ok(mut at) = watch.sent_at.lock() {
        *at = Some(Instant::now());
    }
    channel.exec(command)?;
    if let Some(Secret(text)) = stdin {
        // A command that has already exited may not read it: that is its business.
        let _ = channel.write_all(format!("{text}\n").as_bytes());
        let _ = channel.send_eof();
    }
    hear(channel)
}

/// Reads the output of the command running on `channel` and how it ended.
fn hear(channel: &mut ssh2::Channel) -> Result<SshEnd, SshError> {
    let (tail, read) = read_tail(&mut *channel, MAX_OUTPUT);
    let output = bounded(&tail, &Tail::new(0));
    if read.is_err() {
        return Ok(SshEnd::Dropped { output });
    }
    if channel.wait_close().is_err() {
        return Ok(SshEnd::Dropped { output });
    }
    if let Ok(Some(_signal)) = channel.exit_signal().map(|s| s.exit_signal) {
        return Ok(SshEnd::Exited { code: None, output });
    }
    match channel.exit_status() {
        Ok(code) => Ok(SshEnd::Exited {
            code: Some(code),
            output,
        }),
        Err(_) => Ok(SshEnd::Dropped { output }),
    }
}

/// Connects to the first hop over TCP and to each next one through a `direct-tcpip`
/// channel of the one before, verifying every host key and logging into every hop; returns
/// the session on the last one (the node).
fn connect_through(
    hops: &[Hop<'_>],
    target: &SshTarget,
    timeout: Duration,
    sockets: &Sockets,
    own: &mut Vec<Socket>,
    bridges: &mut Vec<Bridge>,
) -> Result<Session, SshError> {
    let first = hops.first().expect("the node is always a hop");
    let tcp = connect_tcp(first, target.settings.connect_timeout)?;
    if let Ok(clone) = tcp.try_clone() {
        register(sockets, own, Socket::Tcp(clone));
    }
    let mut fd = tcp.as_raw_fd();
    let mut session = open_session(tcp, first, target, timeout)?;
    for pair in hops.windows(2) {
        let (via, next) = (&pair[0], &pair[1]);
        let channel = session
            .channel_direct_tcpip(next.host, next.port, None)
            .map_err(|e| SshError::Connect {
                addr: format!("{}:{}", next.host, next.port),
                message: format!(
                    "{} refused to open a connection to it: {e} (it needs                      AllowTcpForwarding in its sshd_config, and {} must be reachable from it)",
                    via.what, next.what
                ),
            })?;
        let (near, far) = UnixStream::pair()
            .map_err(|e| SshError::Protocol(format!("cannot make a socket pair: {e}")))?;
        if let Ok(clone) = near.try_clone() {
            register(sockets, own, Socket::Unix(clone));
        }
        bridges.push(
            Bridge::start(session, channel, fd, far)
                .map_err(|e| SshError::Protocol(format!("cannot start the jump bridge: {e}")))?,
        );
        fd = near.as_raw_fd();
        session = open_session(near, next, target, timeout)?;
    }
    Ok(session)
}

/// Keeps `socket` with the connection (`own`) and a copy of it where the watcher cuts.
fn register(sockets: &Sockets, own: &mut Vec<Socket>, socket: Socket) {
    if let (Ok(mut guard), Ok(copy)) = (sockets.lock(), socket.try_clone()) {
        guard.push(copy);
    }
    own.push(socket);
}

/// Opens and keeps a connection to the node ahead of its commands, unless one is kept
/// already; within `timeout`, else the sockets are shut and it is an error.
pub(super) async fn open(
    pool: Arc<SessionPool>,
    target: SshTarget,
    timeout: Duration,
) -> Result<(), SshError> {
    let key = target.pool_key();
    if pool.has(&key) {
        return Ok(());
    }
    let addr = format!("{}:{}", target.host, target.settings.port);
    let what = "connected and logged in";
    watched(timeout, addr, what, move |sockets| {
        let connection = connect(&target, timeout, sockets)?;
        pool.put(key, connection);
        Ok(())
    })
    .await
}

/// Runs `work` on a blocking thread, the sockets it registers watched: past `timeout`
/// they are shut (which makes a stuck libssh2 call return), the thread is waited for
/// briefly, and it is an error saying the node at `addr` was not `what` in time.
async fn watched<T: Send + 'static>(
    timeout: Duration,
    addr: String,
    what: &str,
    work: impl FnOnce(&Sockets) -> Result<T, SshError> + Send + 'static,
) -> Result<T, SshError> {
    let mut cut = Cut {
        sockets: Arc::new(Mutex::new(Vec::new())),
        state: Arc::new(AtomicU8::new(CONNECTING)),
        done: false,
    };
    let mut task = {
        let sockets = cut.sockets.clone();
        tokio::task::spawn_blocking(move || work(&sockets))
    };
    let result = match tokio::time::timeout(timeout, &mut task).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(SshError::Protocol(format!("ssh worker failed: {join}"))),
        Err(_) => {
            cut.shut();
            let _ = tokio::time::timeout(super::deadline::REAP, &mut task).await;
            Err(SshError::Connect {
                addr,
                message: format!("not {what} within {timeout:?}"),
            })
        }
    };
    cut.done = true;
    result
}

fn connect_tcp(hop: &Hop<'_>, connect_timeout: Duration) -> Result<TcpStream, SshError> {
    let addr_text = format!("{}:{}", hop.host, hop.port);
    let connect_err = |message: String| SshError::Connect {
        addr: addr_text.clone(),
        message,
    };
    let addrs: Vec<_> = (hop.host, hop.port)
        .to_socket_addrs()
        .map_err(|e| connect_err(e.to_string()))?
        .collect();
    let mut last = String::from("no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, connect_timeout) {
            Ok(t) => return Ok(t),
            Err(e) => last = e.to_string(),
        }
    }
    Err(connect_err(last))
}

/// SSH handshake, host key and login on one hop, over `stream`.
fn open_session<S: AsRawFd + 'static>(
    stream: S,
    hop: &Hop<'_>,
    target: &SshTarget,
    timeout: Duration,
) -> Result<Session, SshError> {
    let s = &target.settings;
    let mut session = Session::new()?;
    session.set_tcp_stream(stream);
    // libssh2's own limit, as a backstop to the outer timeout.
    session.set_timeout(u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX));
    session.handshake()?;
    if s.insecure_ignore_host_keys {
        tracing::warn!(
            node = %target.node,
            "!!! host key of {}:{} ({}) NOT verified (insecure flag) !!!",
            hop.host, hop.port, hop.what
        );
    } else {
        verify_host_key(&session, hop, s)?;
    }
    authenticate(&session, hop, s)?;
    Ok(session)
}

fn known_hosts_path(s: &SshSettings) -> PathBuf {
    s.known_hosts.clone().unwrap_or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(".ssh/known_hosts")
    })
}

fn verify_host_key(session: &Session, hop: &Hop<'_>, s: &SshSettings) -> Result<(), SshError> {
    let file = known_hosts_path(s);
    let shown = file.display();
    let hint = if hop.port == 22 {
        format!("ssh-keyscan {} >> {shown}", hop.host)
    } else {
        format!("ssh-keyscan -p {} {} >> {shown}", hop.port, hop.host)
    };
    let mut known = session.known_hosts()?;
    known
        .read_file(&file, KnownHostFileKind::OpenSSH)
        .map_err(|e| {
            SshError::HostKey(format!(
                "cannot read known_hosts file {shown}: {e}; create it with `{hint}` \
                 (after checking the key out of band)"
            ))
        })?;
    let (key, _) = session
        .host_key()
        .ok_or_else(|| SshError::Protocol("server sent no host key".into()))?;
    match known.check_port(hop.host, hop.port, key) {
        CheckResult::Match => Ok(()),
        CheckResult::NotFound => Err(SshError::HostKey(format!(
            "host key of {}:{} ({}) is not in {shown}; add it with `{hint}` after \
             checking it out of band",
            hop.host, hop.port, hop.what
        ))),
        CheckResult::Mismatch => Err(SshError::HostKey(format!(
            "HOST KEY MISMATCH for {}:{} ({}): the key differs from the one in {shown}. \
             Either the machine was reinstalled or someone is intercepting the connection; \
             if the change is expected, remove the old line and run `{hint}`",
            hop.host, hop.port, hop.what
        ))),
        CheckResult::Failure => Err(SshError::HostKey(format!(
            "could not check the host key of {}:{} ({}) against {shown}",
            hop.host, hop.port, hop.what
        ))),
    }
}

/// Key files ssh offers when nothing is configured, in its order.
const DEFAULT_KEYS: &[&str] = &[".ssh/id_ed25519", ".ssh/id_ecdsa", ".ssh/id_rsa"];

/// Logs into one hop: its key file, then the password from the environment, then the agent
/// (when asked for, or when nothing else is configured), then ssh's default key files
/// (when nothing is configured).
fn authenticate(session: &Session, hop: &Hop<'_>, s: &SshSettings) -> Result<(), SshError> {
    let user = hop.user;
    let mut tried = Vec::new();
    if let Some(key) = hop.identity_file {
        tried.push(format!("key {}", key.display()));
        if let Err(e) = session.userauth_pubkey_file(user, None, key, None) {
            tracing::debug!("{}: key auth failed: {e}", hop.what);
        }
    }
    if !session.authenticated()
        && let Some(var) = &s.password_env
    {
        tried.push(format!("password from ${var}"));
        match std::env::var(var) {
            // The password itself never reaches a message.
            Ok(pw) => {
                if session.userauth_password(user, &pw).is_err() {
                    tracing::debug!("{}: password auth failed", hop.what);
                }
            }
            Err(_) => tried.push(format!("(${var} is not set)")),
        }
    }
    let nothing_configured = hop.identity_file.is_none() && s.password_env.is_none();
    if !session.authenticated() && (s.agent || nothing_configured) {
        tried.push(agent_auth(
            session,
            user,
            s.agent_socket.as_deref(),
            &hop.what,
        ));
    }
    if !session.authenticated()
        && nothing_configured
        && let Some(home) = std::env::var_os("HOME")
    {
        for key in DEFAULT_KEYS.iter().map(|k| Path::new(&home).join(k)) {
            if key.is_file() {
                tried.push(format!("key {}", key.display()));
                if session.userauth_pubkey_file(user, None, &key, None).is_ok() {
                    break;
                }
            }
        }
    }
    if session.authenticated() {
        Ok(())
    } else {
        Err(SshError::Auth {
            user: user.to_string(),
            message: format!("at {}: tried {}", hop.what, tried.join(", ")),
        })
    }
}

/// Offers every key the agent holds; returns what to say was tried.
fn agent_auth(session: &Session, user: &str, socket: Option<&Path>, what: &str) -> String {
    let shown = match socket {
        Some(p) => format!("ssh-agent at {}", p.display()),
        None if std::env::var_os("SSH_AUTH_SOCK").is_none() => {
            return "ssh-agent ($SSH_AUTH_SOCK is not set)".into();
        }
        None => "ssh-agent".into(),
    };
    let result = (|| -> Result<usize, ssh2::Error> {
        let mut agent = session.agent()?;
        if let Some(p) = socket {
            agent.set_identity_path(p)?;
        }
        agent.connect()?;
        agent.list_identities()?;
        let ids = agent.identities()?;
        for id in &ids {
            if agent.userauth(user, id).is_ok() {
                break;
            }
        }
        let _ = agent.disconnect();
        Ok(ids.len())
    })();
    match result {
        Ok(0) => format!("{shown} (it holds no key)"),
        Ok(_) => shown,
        Err(e) => {
            tracing::debug!("{what}: agent auth failed: {e}");
            format!("{shown} ({e})")
        }
    }
}

/// A command sent to its node ahead of its step, waiting there for [`GO`] on its standard
/// input: when the step is due, only that one line crosses the network, and the node's
/// shell runs the command at once, with no channel to open, no session to fork and no
/// login shell to start. Dropped without being started (the run stopped first, or
/// faultline died), the channel closes, the waiting shell reads end-of-file, and the
/// command never runs; the node's deadline ends the wait in any case.
pub(super) struct Primed {
    connection: Connection,
    channel: ssh2::Channel,
    /// Set once [`Primed::release`] sent the word: when, and whether it was written.
    released: Option<Released>,
}

/// The word sent ahead of the call that hears the command out ([`Primed::release`]).
#[derive(Debug, Clone, Copy)]
struct Released {
    at: Instant,
    written: bool,
}

impl std::fmt::Debug for Primed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Primed(..)")
    }
}

impl Primed {
    /// `self` when its channel is still open (read without waiting: a node that rebooted
    /// or an sshd that ended the session has closed it); `None` after closing it, for the
    /// command to go the ordinary way. The connection's sockets are registered with the
    /// watcher either way before anything can block.
    fn alive(mut self, watch: &Watch<'_>) -> Option<Primed> {
        if let Ok(mut guard) = watch.sockets.lock() {
            guard.extend(
                self.connection
                    .sockets
                    .iter()
                    .filter_map(|s| s.try_clone().ok()),
            );
        }
        // Released, it runs (or ran) already: a byte read now would be its output.
        if self.released.is_some() || self.waiting() {
            return Some(self);
        }
        tracing::debug!("a primed SSH command had gone before it was due; sending it anew");
        None
    }

    /// Whether the command still waits for the word: its channel open and silent (read
    /// without waiting; a node that rebooted or an sshd that ended the session closed it).
    fn waiting(&mut self) -> bool {
        let session = &self.connection.session;
        session.set_blocking(false);
        let mut byte = [0u8; 1];
        let waiting = matches!(
            std::io::Read::read(&mut self.channel, &mut byte),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        );
        session.set_blocking(true);
        waiting && !self.channel.eof()
    }

    /// Starts the command (unless the watcher gave up on it first) and hears its end.
    fn start(
        mut self,
        backstop: Duration,
        watch: &Watch<'_>,
    ) -> Result<(Connection, SshEnd), SshError> {
        self.connection
            .session
            .set_timeout(u32::try_from(backstop.as_millis()).unwrap_or(u32::MAX));
        // Released, the word is out already and `run` counted it as sent; its end-of-file
        // was left to this call, off the pass that released the step's nodes.
        let written = match self.released {
            Some(released) => {
                let _ = self.channel.send_eof();
                released.written
            }
            None => {
                if watch
                    .state
                    .compare_exchange(CONNECTING, SENT, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
                {
                    return Ok((self.connection, SshEnd::TimedOut { sent: false }));
                }
                if let Ok(mut at) = watch.sent_at.lock() {
                    *at = Some(Instant::now());
                }
                let written = self.send_word();
                let _ = self.channel.send_eof();
                written
            }
        };
        let end = if written {
            hear(&mut self.channel)?
        } else {
            // It may have reached the node before the connection went.
            SshEnd::Dropped {
                output: String::new(),
            }
        };
        drop(self.channel);
        Ok((self.connection, end))
    }

    /// Writes the word; whether it was written.
    fn send_word(&mut self) -> bool {
        self.channel
            .write_all(format!("{GO}\n").as_bytes())
            .and_then(|()| self.channel.flush())
            .is_ok()
    }

    /// Sends the word now, ahead of the call that hears the command out: a step's
    /// commands are released on all of its nodes in one pass
    /// ([`super::Executor::release`]), before any of them takes this machine's CPU.
    /// Blocking (one small packet); once only. One whose channel has gone is left as it
    /// is, to be sent anew the ordinary way when it is performed.
    pub(super) fn release(&mut self) {
        if self.released.is_none() && self.waiting() {
            // Three bytes on an established connection: never worth a stalled loop.
            let limit = super::gate_input::RELEASE_LIMIT.as_millis();
            self.connection
                .session
                .set_timeout(u32::try_from(limit).unwrap_or(u32::MAX));
            let at = Instant::now();
            let written = self.send_word();
            self.released = Some(Released { at, written });
        }
    }

    /// When the word was sent, if it was released.
    pub(super) fn released_at(&self) -> Option<Instant> {
        self.released.map(|r| r.at)
    }
}

/// The command a primed channel is to run, rendered at the moment it is sent (its node
/// deadline counts from then); `None`: too late to send it at all.
pub(super) type RenderAtSend = Box<dyn FnOnce() -> Option<String> + Send>;

/// Sends the command `render` gives (one that waits for [`GO`] before it runs) to the
/// node over the kept connection, or a new one, within `timeout`; the connection then
/// belongs to the primed command until it is started or dropped.
pub(super) async fn prime(
    pool: Arc<SessionPool>,
    target: SshTarget,
    render: RenderAtSend,
    timeout: Duration,
) -> Result<Primed, SshError> {
    let addr = format!("{}:{}", target.host, target.settings.port);
    watched(timeout, addr, "primed", move |sockets| {
        let kept = pool
            .take(&target.pool_key())
            .and_then(|c| reuse(c, &target, sockets));
        let (connection, mut channel) = match kept {
            Some(pair) => pair,
            None => {
                let connection = connect(&target, timeout, sockets)?;
                let channel = connection.session.channel_session()?;
                (connection, channel)
            }
        };
        connection
            .session
            .set_timeout(u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX));
        channel.handle_extended_data(ExtendedData::Merge)?;
        let command = render().ok_or_else(|| {
            SshError::Protocol("too close to when it is due to be sent ahead".into())
        })?;
        channel.exec(&command)?;
        Ok(Primed {
            connection,
            channel,
            released: None,
        })
    })
    .await
}
