//! The OpenSSH client configuration (`~/.ssh/config`), read the way `ssh` reads it, so that
//! nodes are reached the way their owners already reach them: Host aliases, HostName, User,
//! Port, IdentityFile, ProxyJump, UserKnownHostsFile, IdentityAgent.
//!
//! Parsing and Host matching (patterns with `*`, `?` and `!`, the first value obtained
//! wins, `Include`) are `ssh2_config`'s. Two things are added here: `Match` blocks, which
//! that crate does not know, are never applied (a warning names their line) instead of
//! leaking their settings into the block before them; and nothing in the file can weaken
//! host-key verification (`StrictHostKeyChecking no` and `UserKnownHostsFile /dev/null` are
//! ignored with a warning).

use std::collections::HashMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use ssh2_config::{ParseRule, SshConfig, SshParserError};
use thiserror::Error;

/// Why an ssh config file could not be used; the message names the file (and the line,
/// where it can be found).
#[derive(Debug, Error)]
pub(super) enum SshConfigError {
    /// The file could not be read.
    #[error("ssh config {}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file does not parse; `line` is where it first stops parsing, when found.
    #[error("ssh config {}{}: {source}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: Option<usize>,
        /// What the parser said.
        source: SshParserError,
    },
    /// A file it includes has a `Match` block, which cannot be skipped there.
    #[error(
        "ssh config {shown}: a file it Includes has a `Match` block, which faultline \
         cannot read (its settings would land on the wrong hosts); move it into {shown} \
         itself (where it is skipped with a warning) or set `ssh.config` to another file \
         or `none`",
        shown = path.display()
    )]
    IncludedMatch {
        /// The file.
        path: PathBuf,
    },
}

/// Why a `%` token in an `IdentityFile` could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(super) enum TokenError {
    /// `%d` without `$HOME`.
    #[error("`%d` needs $HOME, which is not set")]
    NoHome,
    /// A token faultline does not expand.
    #[error(
        "`%{token}` in `{value}` is not a token faultline expands (it knows %h %n %r %p %u \
         %d %%)"
    )]
    Unknown {
        /// The letter after `%`.
        token: char,
        /// The value it stands in.
        value: String,
    },
    /// A `%` with nothing after it.
    #[error("`{0}` ends in a lone `%`")]
    LonePercent(String),
}

/// One parsed configuration file.
#[derive(Debug)]
pub(super) struct SshConfigFile {
    path: PathBuf,
    config: SshConfig,
}

/// What the file says about one host, before the inventory's own values are laid over it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct HostEntry {
    /// `HostName`, `%h` already replaced by the host looked up.
    pub host_name: Option<String>,
    /// `User`.
    pub user: Option<String>,
    /// `Port`.
    pub port: Option<u16>,
    /// `IdentityFile`s in the order given, `~` expanded, `%` tokens NOT yet expanded (they
    /// need the final user and port).
    pub identity_files: Vec<String>,
    /// `ProxyJump` as written (one entry per hop); `Some(empty)` for `ProxyJump none`.
    pub proxy_jump: Option<Vec<String>>,
    /// `UserKnownHostsFile` (the first one), unless it would switch verification off.
    pub known_hosts: Option<PathBuf>,
    /// `IdentityAgent`: the agent socket; `None` when unset or `SSH_AUTH_SOCK`.
    pub identity_agent: Option<PathBuf>,
    /// Warnings about what was ignored for this host.
    pub warnings: Vec<String>,
}

impl SshConfigFile {
    /// Read and parse `path`. Errors name the file and, when it can be found, the line.
    pub(super) fn load(path: &Path) -> Result<SshConfigFile, SshConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| SshConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        SshConfigFile::parse(&text, path)
    }

    /// Parse configuration text; `path` names it in messages.
    pub(super) fn parse(text: &str, path: &Path) -> Result<SshConfigFile, SshConfigError> {
        let shown = path.display();
        let (text, skipped) = without_match_blocks(text);
        for line in skipped {
            tracing::warn!(
                "{shown}:{line}: `Match` blocks are not read by faultline; the settings under \
                 this one are not applied to any node"
            );
        }
        let config = parse_text(&text).map_err(|source| SshConfigError::Parse {
            path: path.to_path_buf(),
            line: first_bad_line(&text),
            source,
        })?;
        let included_match = config.get_hosts().iter().any(|h| {
            h.params
                .ignored_fields
                .keys()
                .any(|k| k.eq_ignore_ascii_case("match"))
        });
        if included_match {
            return Err(SshConfigError::IncludedMatch {
                path: path.to_path_buf(),
            });
        }
        Ok(SshConfigFile {
            path: path.to_path_buf(),
            config,
        })
    }

    /// What the file says about `host` (the name as given: the node's address or a jump
    /// host's name).
    pub(super) fn lookup(&self, host: &str) -> HostEntry {
        let p = self.config.query(host);
        let mut warnings = Vec::new();
        let shown = self.path.display();
        let unsupported = |key: &str| -> Option<&Vec<String>> {
            p.unsupported_fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        };
        if let Some(v) = unsupported("stricthostkeychecking")
            && let Some(value) = v.first()
            && !matches!(value.to_ascii_lowercase().as_str(), "yes" | "ask")
        {
            warnings.push(format!(
                "{shown}: `StrictHostKeyChecking {value}` for {host} is ignored: faultline \
                 always verifies host keys against its knownHosts file"
            ));
        }
        let known_hosts = unsupported("userknownhostsfile")
            .and_then(|v| v.first())
            .and_then(|f| {
                if f == "/dev/null" || f.eq_ignore_ascii_case("none") {
                    warnings.push(format!(
                        "{shown}: `UserKnownHostsFile {f}` for {host} is ignored: it would \
                         switch host-key verification off"
                    ));
                    None
                } else {
                    Some(expand_home(f))
                }
            });
        // `SSH_AUTH_SOCK` (and `none`) leave the agent as the inventory says; `$VAR` names
        // another variable holding the socket path.
        let identity_agent = unsupported("identityagent")
            .and_then(|v| v.first())
            .filter(|a| *a != "SSH_AUTH_SOCK" && !a.eq_ignore_ascii_case("none"))
            .and_then(|a| match a.strip_prefix('$') {
                Some(var) => std::env::var_os(var).map(PathBuf::from),
                None => Some(expand_home(a)),
            });
        let proxy_jump = p.proxy_jump.as_ref().map(|hops| {
            if hops.len() == 1 && hops[0].eq_ignore_ascii_case("none") {
                Vec::new()
            } else {
                hops.iter()
                    .map(|h| h.trim().to_string())
                    .filter(|h| !h.is_empty())
                    .collect()
            }
        });
        HostEntry {
            host_name: p.host_name.as_ref().map(|n| expand_percent_h(n, host)),
            user: p.user.clone(),
            port: p.port,
            identity_files: p
                .identity_file
                .iter()
                .flatten()
                .map(|f| f.display().to_string())
                .collect(),
            proxy_jump,
            known_hosts,
            identity_agent,
            warnings,
        }
    }
}

/// The text parsed as ssh reads it, unknown and unsupported keywords let through.
fn parse_text(text: &str) -> Result<SshConfig, SshParserError> {
    SshConfig::default().parse(
        &mut BufReader::new(text.as_bytes()),
        ParseRule::ALLOW_UNKNOWN_FIELDS | ParseRule::ALLOW_UNSUPPORTED_FIELDS,
    )
}

/// The 1-based line at which the text first stops parsing (the parser itself says no line).
fn first_bad_line(text: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    (1..=lines.len()).find(|&n| parse_text(&(lines[..n].join("\n") + "\n")).is_err())
}

/// Replaces every `Match` line by a Host line that matches nothing (`Match all` by `Host *`,
/// which is what it means), so the settings under it apply to no host; returns the lines
/// replaced.
fn without_match_blocks(text: &str) -> (String, Vec<usize>) {
    let mut skipped = Vec::new();
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let keyword_end = trimmed
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(trimmed.len());
        let (keyword, rest) = trimmed.split_at(keyword_end);
        if keyword.eq_ignore_ascii_case("match") {
            let args = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '=');
            let args = args.split('#').next().unwrap_or("").trim();
            if args.eq_ignore_ascii_case("all") {
                out.push_str("Host *");
            } else {
                skipped.push(i + 1);
                out.push_str("Host !*");
            }
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    (out, skipped)
}

fn expand_percent_h(value: &str, host: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('%', Some('h')) => {
                out.push_str(host);
                chars.next();
            }
            ('%', Some('%')) => {
                out.push('%');
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// `~` and `~/…` against `$HOME`; anything else as written.
pub(super) fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix('~'), std::env::var_os("HOME")) {
        (Some(""), Some(home)) => PathBuf::from(home),
        (Some(rest), Some(home)) if rest.starts_with('/') => {
            PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(path),
    }
}

/// The values `%` tokens in an `IdentityFile` stand for.
pub(super) struct Tokens<'a> {
    /// `%h`: the host name connected to (after HostName).
    pub host: &'a str,
    /// `%n`: the host as given (alias or address).
    pub original: &'a str,
    /// `%r`: the remote user.
    pub user: &'a str,
    /// `%p`: the port.
    pub port: u16,
}

/// Expands `%h %n %r %p %u %d %%` as ssh does in `IdentityFile`; any other token is an error
/// (it would name a file that does not exist).
pub(super) fn expand_tokens(value: &str, t: &Tokens<'_>) -> Result<String, TokenError> {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('h') => out.push_str(t.host),
            Some('n') => out.push_str(t.original),
            Some('r') => out.push_str(t.user),
            Some('p') => out.push_str(&t.port.to_string()),
            Some('%') => out.push('%'),
            Some('u') => out.push_str(&local_user()),
            Some('d') => out.push_str(&std::env::var("HOME").map_err(|_| TokenError::NoHome)?),
            Some(other) => {
                return Err(TokenError::Unknown {
                    token: other,
                    value: value.to_string(),
                });
            }
            None => return Err(TokenError::LonePercent(value.to_string())),
        }
    }
    Ok(out)
}

fn local_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_default()
}

/// Parsed configuration files by path, so each is read once per inventory, and the warnings
/// already given, so each is given once.
#[derive(Default)]
pub(super) struct ConfigCache {
    files: HashMap<PathBuf, SshConfigFile>,
    warned: std::collections::HashSet<String>,
}

impl ConfigCache {
    /// The parsed file at `path`, read on first use.
    pub(super) fn get(&mut self, path: &Path) -> Result<&SshConfigFile, SshConfigError> {
        if !self.files.contains_key(path) {
            let file = SshConfigFile::load(path)?;
            self.files.insert(path.to_path_buf(), file);
        }
        Ok(&self.files[path])
    }

    /// Logs `message` as a warning unless it was logged already.
    pub(super) fn warn_once(&mut self, message: &str) {
        if self.warned.insert(message.to_string()) {
            tracing::warn!("{message}");
        }
    }
}
