//! Why a node's entry in the inventory cannot be used: what its layers (the node, the top
//! level, its profile, the ssh config) say together does not make a way to reach it. Each
//! message names the node and the setting to mend; the inventory reports it as invalid.

use std::path::PathBuf;

use thiserror::Error;

use super::jump::JumpError;
use super::ssh_config::{SshConfigError, TokenError};

/// Why a node's settings do not merge into a way to reach it.
#[derive(Debug, Error)]
pub(super) enum NodeError {
    /// Its profile's shipped YAML does not parse (a bug the unit tests catch).
    #[error("{0}")]
    Profile(String),
    /// `transport: exec` without an argv template that carries the command.
    #[error(
        "node `{node}`: `transport: exec` needs an `exec:` argv template containing \
         \"{{command}}\", e.g. [docker, exec, \"{{node}}\", sh, -c, \"{{command}}\"]"
    )]
    ExecTemplate {
        /// The node.
        node: String,
    },
    /// An `execWithStdin` template that does not carry the command.
    #[error(
        "node `{node}`: `execWithStdin:` needs \"{{command}}\", e.g. \
         [docker, exec, -i, \"{{node}}\", sh, -c, \"{{command}}\"]"
    )]
    ExecWithStdinTemplate {
        /// The node.
        node: String,
    },
    /// Its SSH settings do not resolve.
    #[error("node `{node}`: {source}")]
    Ssh {
        /// The node.
        node: String,
        /// Why.
        source: SshSettingsError,
    },
    /// A file asks to skip host-key verification, which only the command line may.
    #[error(
        "node `{node}`: ssh.insecureIgnoreHostKeys can only be turned on from the command \
         line (--insecure-ignore-host-keys), never from a file"
    )]
    InsecureFromFile {
        /// The node.
        node: String,
    },
    /// A layer that says how to disarm a self-restore, or ask after one, that it does
    /// not arm: the three templates go together, so the profile's arm would be dropped.
    #[error(
        "node `{node}`: `{template}` is set without `armRestore` beside it (on the node, at \
         the top level or in the profile): the self-restore templates go together, so the \
         first place that sets any of them supplies all three and this one would arm with \
         faultline's built-in process instead; set `armRestore` in the same place"
    )]
    RestoreWithoutArm {
        /// The node.
        node: String,
        /// The template set without its arm.
        template: &'static str,
    },
    /// Its API transport settings are unusable.
    #[error("node `{node}`: {source}")]
    Pod {
        /// The node.
        node: String,
        /// Why.
        source: PodSettingsError,
    },
}

/// Why a node's `pod:` settings are unusable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(super) enum PodSettingsError {
    /// `pod.namespace` is no namespace name.
    #[error(
        "pod.namespace `{}` is not a valid namespace name (lowercase letters, digits and \
         '-', at most 63, starting and ending alphanumeric)",
        .0.escape_debug()
    )]
    Namespace(String),
    /// `pod.image` is empty.
    #[error("pod.image is empty")]
    EmptyImage,
}

/// Why a node's SSH settings do not resolve.
#[derive(Debug, Error)]
pub(super) enum SshSettingsError {
    /// `ssh.config` names no file.
    #[error(
        "ssh.config: `{}` is not a file (write `none` to read no ssh config)",
        .0.display()
    )]
    NoConfigFile(PathBuf),
    /// The ssh config cannot be read.
    #[error(transparent)]
    Config(#[from] SshConfigError),
    /// The ssh config's `IdentityFile` for the node does not expand.
    #[error("{config}: IdentityFile: {source}")]
    IdentityFile {
        /// The ssh config, as said to a person.
        config: String,
        /// Why.
        source: TokenError,
    },
    /// The inventory's `ssh.jump` does not parse.
    #[error("ssh.jump: {0}")]
    Jump(JumpError),
    /// The ssh config's `ProxyJump` for the node does not parse.
    #[error("{config}: ProxyJump: {source}")]
    ProxyJump {
        /// The ssh config, as said to a person.
        config: String,
        /// Why.
        source: JumpError,
    },
    /// The jump hosts do not resolve.
    #[error(transparent)]
    Resolve(JumpError),
}
