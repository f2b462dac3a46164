//! Jump hosts (bastions): `ssh.jump` in the inventory and `ProxyJump` in the ssh config,
//! written as ssh writes them (`[user@]host[:port]`, `ssh://[user@]host[:port]`, hops
//! separated by commas, `none`), resolved into the hops faultline connects through.

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::ssh_config::{SshConfigFile, TokenError, Tokens, expand_tokens};

/// A jump host (bastion) on the way to a node. Its host key is verified against the same
/// knownHosts file as the node's, and it is logged into with the node's agent and password
/// settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpHost {
    /// As written (`user@host:port`, or an ssh config alias), for messages.
    pub name: String,
    /// Host name or address connected to.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Login user.
    pub user: String,
    /// Private key file.
    pub identity_file: Option<PathBuf>,
}

/// How deep a first hop's own ProxyJump may lead before it is taken for a loop.
const MAX_DEPTH: usize = 8;

/// One hop as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct JumpSpec {
    /// The text, for messages.
    pub text: String,
    /// `user@`, if given.
    pub user: Option<String>,
    /// The host (an ssh config alias or a name or address).
    pub host: String,
    /// `:port`, if given.
    pub port: Option<u16>,
}

/// Why jump hosts could not be read or resolved.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(super) enum JumpError {
    /// One hop is not `[ssh://][user@]host[:port]`.
    #[error("jump host `{}`: {why}", text.escape_debug())]
    Hop {
        /// The hop as written.
        text: String,
        /// What is wrong with it.
        why: HopProblem,
    },
    /// ProxyJump leads on and on: a loop in the ssh config.
    #[error(
        "jump hosts lead through more than {MAX_DEPTH} ProxyJump levels from `{from}`; is \
         there a loop in the ssh config?"
    )]
    Loop {
        /// The first hop of the chain that went too deep.
        from: String,
    },
    /// A hop's `IdentityFile` names a token that cannot be expanded.
    #[error(transparent)]
    Identity(#[from] TokenError),
}

/// What is wrong with one hop's text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(super) enum HopProblem {
    /// `@host`.
    #[error("empty user before `@`")]
    EmptyUser,
    /// `[::1` .
    #[error("`[` without `]`")]
    Unclosed,
    /// `[::1]x`.
    #[error("text after `]` that is not `:port`")]
    AfterBracket,
    /// No host, or one with spaces, controls or `/`.
    #[error("want [user@]host[:port]")]
    BadHost,
    /// A port that is not 1-65535.
    #[error("port `{0}` is not 1-65535")]
    BadPort(String),
}

/// Splits `a,b,c` into hops; `none` (or nothing) is no hop.
pub(super) fn parse_chain(text: &str) -> Result<Vec<JumpSpec>, JumpError> {
    let text = text.trim();
    if text.is_empty() || text.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    text.split(',').map(|h| parse_hop(h.trim())).collect()
}

/// One `[ssh://][user@]host[:port]` (IPv6 addresses in brackets: `[::1]:2222`).
pub(super) fn parse_hop(text: &str) -> Result<JumpSpec, JumpError> {
    let bad = |why: HopProblem| JumpError::Hop {
        text: text.to_string(),
        why,
    };
    let rest = text.strip_prefix("ssh://").unwrap_or(text);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (user, hostport) = match rest.rsplit_once('@') {
        Some((u, h)) if !u.is_empty() => (Some(u.to_string()), h),
        Some(_) => return Err(bad(HopProblem::EmptyUser)),
        None => (None, rest),
    };
    let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
        let (h, after) = inner
            .split_once(']')
            .ok_or_else(|| bad(HopProblem::Unclosed))?;
        match after.strip_prefix(':') {
            Some(p) => (h, Some(p)),
            None if after.is_empty() => (h, None),
            None => return Err(bad(HopProblem::AfterBracket)),
        }
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty()
        || host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
    {
        return Err(bad(HopProblem::BadHost));
    }
    let port = port
        .map(|p| {
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad(HopProblem::BadPort(p.to_string())))
        })
        .transpose()?;
    Ok(JumpSpec {
        text: text.to_string(),
        user,
        host: host.to_string(),
        port,
    })
}

/// What a hop inherits from the node it leads to, when neither its text nor the ssh config
/// says otherwise.
pub(super) struct Fallback<'a> {
    /// The node's login user.
    pub user: &'a str,
    /// The node's key file.
    pub identity_file: Option<&'a Path>,
}

/// Resolves hops into the jump hosts connected through, in order. The first hop's own
/// ProxyJump (from the ssh config) is honoured, as ssh does; later hops are reached through
/// the ones before them. Warnings about ignored config lines go to `warnings`.
pub(super) fn resolve(
    chain: &[JumpSpec],
    config: Option<&SshConfigFile>,
    fallback: &Fallback<'_>,
    warnings: &mut Vec<String>,
) -> Result<Vec<JumpHost>, JumpError> {
    resolve_at(chain, config, fallback, warnings, 0)
}

fn resolve_at(
    chain: &[JumpSpec],
    config: Option<&SshConfigFile>,
    fallback: &Fallback<'_>,
    warnings: &mut Vec<String>,
    depth: usize,
) -> Result<Vec<JumpHost>, JumpError> {
    if depth > MAX_DEPTH {
        return Err(JumpError::Loop {
            from: chain.first().map(|s| s.text.clone()).unwrap_or_default(),
        });
    }
    let mut out = Vec::new();
    for (i, spec) in chain.iter().enumerate() {
        let entry = config.map(|c| c.lookup(&spec.host)).unwrap_or_default();
        warnings.extend(entry.warnings.iter().cloned());
        if i == 0
            && let Some(own) = entry.proxy_jump.as_ref().filter(|j| !j.is_empty())
        {
            let own: Vec<JumpSpec> = own.iter().map(|h| parse_hop(h)).collect::<Result<_, _>>()?;
            out.extend(resolve_at(&own, config, fallback, warnings, depth + 1)?);
        }
        let host = entry.host_name.clone().unwrap_or_else(|| spec.host.clone());
        let user = spec
            .user
            .clone()
            .or(entry.user.clone())
            .unwrap_or_else(|| fallback.user.to_string());
        let port = spec.port.or(entry.port).unwrap_or(22);
        let identity_file = pick_identity(
            &entry.identity_files,
            &Tokens {
                host: &host,
                original: &spec.host,
                user: &user,
                port,
            },
        )?
        .or_else(|| fallback.identity_file.map(Path::to_path_buf));
        out.push(JumpHost {
            name: spec.text.clone(),
            host,
            port,
            user,
            identity_file,
        });
    }
    Ok(out)
}

/// The key file ssh would offer first: the first `IdentityFile` that exists (tokens
/// expanded), else the first one written, so that the error names it.
pub(super) fn pick_identity(
    files: &[String],
    tokens: &Tokens<'_>,
) -> Result<Option<PathBuf>, TokenError> {
    let expanded: Vec<PathBuf> = files
        .iter()
        .map(|f| expand_tokens(f, tokens).map(PathBuf::from))
        .collect::<Result<_, _>>()?;
    Ok(expanded
        .iter()
        .find(|p| p.is_file())
        .or(expanded.first())
        .cloned())
}
