//! The SSH transport, built on ssh2 (libssh2).
//!
//! ssh2 blocks and its own timeouts overshoot, so every session runs on a blocking thread
//! under an OUTER tokio timeout; when that fires the TCP socket is shut down from outside,
//! which makes the stuck libssh2 call return at once instead of holding a thread.

use std::io::Read;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ssh2::{CheckResult, ExtendedData, KnownHostFileKind, Session};

use super::output::bounded;
use crate::inventory::SshSettings;

/// Where and how to run one command over SSH.
#[derive(Debug, Clone)]
pub(super) struct SshTarget {
    /// Node name, for messages.
    pub node: String,
    /// Host name or IP address.
    pub host: String,
    /// Merged SSH settings.
    pub settings: SshSettings,
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
    /// The outer time limit passed.
    TimedOut {
        /// Whether the command had been sent before the limit.
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

/// Run `command` on the target within `timeout` (connect included).
pub(super) async fn run(
    target: SshTarget,
    command: String,
    timeout: Duration,
) -> Result<SshEnd, SshError> {
    let socket: Arc<Mutex<Option<TcpStream>>> = Arc::new(Mutex::new(None));
    let sent = Arc::new(AtomicBool::new(false));
    let task = {
        let socket = socket.clone();
        let sent = sent.clone();
        tokio::task::spawn_blocking(move || {
            run_blocking(&target, &command, timeout, &socket, &sent)
        })
    };
    match tokio::time::timeout(timeout, task).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(SshError::Protocol(format!("ssh worker failed: {join}"))),
        Err(_) => {
            if let Ok(guard) = socket.lock()
                && let Some(s) = guard.as_ref()
            {
                let _ = s.shutdown(Shutdown::Both);
            }
            Ok(SshEnd::TimedOut {
                sent: sent.load(Ordering::SeqCst),
            })
        }
    }
}

fn run_blocking(
    target: &SshTarget,
    command: &str,
    timeout: Duration,
    socket: &Mutex<Option<TcpStream>>,
    sent: &AtomicBool,
) -> Result<SshEnd, SshError> {
    let s = &target.settings;
    let addr_text = format!("{}:{}", target.host, s.port);
    let connect_err = |message: String| SshError::Connect {
        addr: addr_text.clone(),
        message,
    };
    let addrs: Vec<_> = (target.host.as_str(), s.port)
        .to_socket_addrs()
        .map_err(|e| connect_err(e.to_string()))?
        .collect();
    let mut last = String::from("no address");
    let mut tcp = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, s.connect_timeout) {
            Ok(t) => {
                tcp = Some(t);
                break;
            }
            Err(e) => last = e.to_string(),
        }
    }
    let tcp = tcp.ok_or_else(|| connect_err(last))?;
    if let (Ok(mut guard), Ok(clone)) = (socket.lock(), tcp.try_clone()) {
        *guard = Some(clone);
    }
    let mut session = Session::new()?;
    session.set_tcp_stream(tcp);
    // libssh2's own limit, as a backstop to the outer timeout.
    session.set_timeout(u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX));
    session.handshake()?;
    if s.insecure_ignore_host_keys {
        tracing::warn!(node = %target.node, "!!! host key of {addr_text} NOT verified (insecure flag) !!!");
    } else {
        verify_host_key(&session, target)?;
    }
    authenticate(&session, target)?;

    let mut channel = session.channel_session()?;
    channel.handle_extended_data(ExtendedData::Merge)?;
    channel.exec(command)?;
    sent.store(true, Ordering::SeqCst);
    let mut out = Vec::new();
    let read = channel.read_to_end(&mut out);
    let output = bounded(&out, &[]);
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

fn known_hosts_path(s: &SshSettings) -> PathBuf {
    s.known_hosts.clone().unwrap_or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(".ssh/known_hosts")
    })
}

fn verify_host_key(session: &Session, target: &SshTarget) -> Result<(), SshError> {
    let s = &target.settings;
    let file = known_hosts_path(s);
    let shown = file.display();
    let hint = if s.port == 22 {
        format!("ssh-keyscan {} >> {shown}", target.host)
    } else {
        format!("ssh-keyscan -p {} {} >> {shown}", s.port, target.host)
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
    match known.check_port(&target.host, s.port, key) {
        CheckResult::Match => Ok(()),
        CheckResult::NotFound => Err(SshError::HostKey(format!(
            "host key of {}:{} (node {}) is not in {shown}; add it with `{hint}` after \
             checking it out of band",
            target.host, s.port, target.node
        ))),
        CheckResult::Mismatch => Err(SshError::HostKey(format!(
            "HOST KEY MISMATCH for {}:{} (node {}): the key differs from the one in {shown}. \
             Either the node was reinstalled or someone is intercepting the connection; if \
             the change is expected, remove the old line and run `{hint}`",
            target.host, s.port, target.node
        ))),
        CheckResult::Failure => Err(SshError::HostKey(format!(
            "could not check the host key of {}:{} against {shown}",
            target.host, s.port
        ))),
    }
}

fn authenticate(session: &Session, target: &SshTarget) -> Result<(), SshError> {
    let s = &target.settings;
    let mut tried = Vec::new();
    if let Some(key) = &s.identity_file {
        tried.push(format!("key {}", key.display()));
        if let Err(e) = session.userauth_pubkey_file(&s.user, None, key, None) {
            tracing::debug!(node = %target.node, "key auth failed: {e}");
        }
    }
    if !session.authenticated()
        && let Some(var) = &s.password_env
    {
        tried.push(format!("password from ${var}"));
        match std::env::var(var) {
            // The password itself never reaches a message.
            Ok(pw) => {
                if session.userauth_password(&s.user, &pw).is_err() {
                    tracing::debug!(node = %target.node, "password auth failed");
                }
            }
            Err(_) => tried.push(format!("(${var} is not set)")),
        }
    }
    let nothing_configured = s.identity_file.is_none() && s.password_env.is_none();
    if !session.authenticated() && (s.agent || nothing_configured) {
        tried.push("ssh-agent".into());
        if session.userauth_agent(&s.user).is_err() {
            tracing::debug!(node = %target.node, "agent auth failed");
        }
    }
    if session.authenticated() {
        Ok(())
    } else {
        Err(SshError::Auth {
            user: s.user.clone(),
            message: format!("tried {}", tried.join(", ")),
        })
    }
}
