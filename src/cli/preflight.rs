//! Before a run: is there a cluster to run against? A missing kubeconfig, a context that
//! does not exist or an API server that does not answer is a mistake in the configuration,
//! not a result: it is said in one line naming the file, the context or the server, and
//! the run stops with exit 2 before any reporter writes a report and before any node is
//! touched. (Run as experiments, the same mistake became one "error" test case per
//! expectation, and CI showed nine failed tests for a typo in a path.)

use std::path::PathBuf;
use std::time::Duration;

use kube::config::Kubeconfig;

use super::ApiArgs;
use crate::cluster::kubeconfig::{read_merged, show_files};
use crate::cluster::{self, ApiAccess, KubeconfigOrigin};
use crate::inventory::Inventory;

/// How long the first request may take before the API server counts as unreachable.
/// kube's own connect timeout is 30 s; a server that answers nothing within this never
/// will in time for a run.
const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Why there is no cluster to run against; each message is one line that says what and
/// where, and what to do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// The kubeconfig named (by a flag, `KUBECONFIG` or the inventory) does not exist.
    #[error("kubeconfig {files} (from {origin}) does not exist")]
    KubeconfigMissing {
        /// The file(s) named.
        files: String,
        /// Which setting named them.
        origin: &'static str,
    },
    /// Nothing names a kubeconfig, `~/.kube/config` does not exist and this is no pod.
    #[error(
        "no kubeconfig: {default} does not exist, KUBECONFIG is unset, the inventory names \
         none and this is not a pod; pass --kubeconfig FILE or set cluster.kubeconfig in the \
         inventory"
    )]
    NoKubeconfig {
        /// The default location that was looked at.
        default: String,
    },
    /// The kubeconfig exists but cannot be read or used.
    #[error("kubeconfig {files}: {reason}")]
    KubeconfigInvalid {
        /// The file(s).
        files: String,
        /// What is wrong, on one line.
        reason: String,
    },
    /// The context asked for is not in the kubeconfig.
    #[error(
        "context `{context}` (from {origin}) is not in kubeconfig {files}; it has: {available}"
    )]
    ContextMissing {
        /// The context asked for.
        context: String,
        /// Which setting asked for it.
        origin: &'static str,
        /// The kubeconfig file(s).
        files: String,
        /// The contexts it does have.
        available: String,
    },
    /// Something answered at the server's address, but not a Kubernetes API server.
    #[error(
        "{server} (context `{context}`, kubeconfig {files}) is not a Kubernetes API server: \
         it answered the first request with HTTP {code} and no Kubernetes status; is the \
         kubeconfig's `server:` the API server's address and port?"
    )]
    NotKubernetes {
        /// The server URL.
        server: String,
        /// The context in use.
        context: String,
        /// The kubeconfig file(s).
        files: String,
        /// The HTTP status it answered with.
        code: u16,
    },
    /// The API server did not answer the first request.
    #[error(
        "API server {server} (context `{context}`, kubeconfig {files}) cannot be reached: {reason}"
    )]
    Unreachable {
        /// The server URL.
        server: String,
        /// The context in use.
        context: String,
        /// The kubeconfig file(s).
        files: String,
        /// The innermost cause, e.g. `Connection refused (os error 111)`.
        reason: String,
    },
}

/// Checks that the inventory's cluster (after `--kubeconfig`, `--context` and
/// `KUBECONFIG`) can be reached: the kubeconfig exists and has the context, and the API
/// server answers a first request. Returns the server's version.
pub(crate) async fn check_cluster(
    inventory: &Inventory,
    access: &ApiAccess,
    api: &ApiArgs,
) -> Result<String, ConfigError> {
    let files = inventory.kubeconfig();
    let shown = shown_files(files);
    let kubeconfig = read_kubeconfig(files, access.origin)?;
    let context = match (inventory.context(), &kubeconfig) {
        (Some(asked), Some(kc)) => {
            if !kc.contexts.iter().any(|c| c.name == asked) {
                return Err(ConfigError::ContextMissing {
                    context: asked.to_string(),
                    origin: if api.context.is_some() {
                        "--context"
                    } else {
                        "the inventory's cluster.context"
                    },
                    files: shown,
                    available: context_names(kc),
                });
            }
            asked.to_string()
        }
        (None, Some(kc)) => kc.current_context.clone().unwrap_or_default(),
        (asked, None) => asked.unwrap_or("in-cluster").to_string(),
    };
    let config = cluster::load_config(files, inventory.context())
        .await
        .map_err(|e| ConfigError::KubeconfigInvalid {
            files: shown.clone(),
            reason: one_line(&e),
        })?;
    let unreachable = |reason: String| ConfigError::Unreachable {
        server: config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string(),
        context: context.clone(),
        files: shown.clone(),
        reason,
    };
    let connection = cluster::connect_with_failover(
        files,
        inventory.context(),
        &inventory.cluster().api_endpoints(),
    )
    .await
    .map_err(|e| unreachable(innermost(&e)))?;
    match tokio::time::timeout(FIRST_REQUEST_TIMEOUT, connection.client.apiserver_version()).await {
        Ok(Ok(info)) => Ok(info.git_version),
        Ok(Err(e)) => Err(match not_kubernetes(&e) {
            Some(code) => ConfigError::NotKubernetes {
                server: config
                    .cluster_url
                    .to_string()
                    .trim_end_matches('/')
                    .to_string(),
                context: context.clone(),
                files: shown.clone(),
                code,
            },
            None => unreachable(innermost(&e)),
        }),
        Err(_) => Err(unreachable(format!(
            "no answer within {}s",
            FIRST_REQUEST_TIMEOUT.as_secs()
        ))),
    }
}

/// The HTTP status of a reply that is not a Kubernetes API server's (it carries no
/// Kubernetes `Status`; kube says "Failed to parse error data" after the reply's body).
fn not_kubernetes(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) if status.reason == "Failed to parse error data" => {
            Some(status.code)
        }
        _ => None,
    }
}

/// The kubeconfig in use, read; `None` when there is none but this runs in a pod (the
/// service account is the configuration then).
fn read_kubeconfig(
    files: &[PathBuf],
    origin: KubeconfigOrigin,
) -> Result<Option<Kubeconfig>, ConfigError> {
    if files.is_empty() {
        let default = std::env::home_dir()
            .map(|h| h.join(".kube").join("config"))
            .unwrap_or_else(|| PathBuf::from("~/.kube/config"));
        if !default.exists() {
            if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
                return Ok(None);
            }
            return Err(ConfigError::NoKubeconfig {
                default: default.display().to_string(),
            });
        }
        return read_merged(std::slice::from_ref(&default))
            .map(Some)
            .map_err(|e| ConfigError::KubeconfigInvalid {
                files: default.display().to_string(),
                reason: one_line(&e),
            });
    }
    if !files.iter().any(|f| f.exists()) {
        return Err(ConfigError::KubeconfigMissing {
            files: shown_files(files),
            origin: origin_name(origin),
        });
    }
    read_merged(files)
        .map(Some)
        .map_err(|e| ConfigError::KubeconfigInvalid {
            files: shown_files(files),
            reason: one_line(&e),
        })
}

fn shown_files(files: &[PathBuf]) -> String {
    if files.is_empty() {
        return std::env::home_dir()
            .map(|h| h.join(".kube").join("config").display().to_string())
            .unwrap_or_else(|| "~/.kube/config".to_string());
    }
    show_files(files)
}

/// Which setting named the kubeconfig, as a person would look for it.
fn origin_name(origin: KubeconfigOrigin) -> &'static str {
    match origin {
        KubeconfigOrigin::Flag => "--kubeconfig",
        KubeconfigOrigin::Env => "KUBECONFIG",
        KubeconfigOrigin::Inventory => "the inventory's cluster.kubeconfig",
        KubeconfigOrigin::Default => "the default location",
    }
}

fn context_names(kc: &Kubeconfig) -> String {
    if kc.contexts.is_empty() {
        return "no contexts".to_string();
    }
    kc.contexts
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// An error and its causes on one line (kube's messages nest and quote).
fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The innermost cause of a client error: `Connection refused (os error 111)` says more
/// than the four layers of client errors around it.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut last: &(dyn std::error::Error + 'static) = error;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer\nlayer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_innermost_cause_is_kept_and_each_message_is_one_line() {
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        ));
        assert_eq!(innermost(&e), "Connection refused (os error 111)");
        assert_eq!(
            one_line(&e),
            "outer layer: Connection refused (os error 111)"
        );
    }

    #[test]
    fn a_missing_kubeconfig_names_the_file_and_the_setting_that_named_it() {
        let err = read_kubeconfig(&["/nonexistent/kc".into()], KubeconfigOrigin::Env)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "kubeconfig /nonexistent/kc (from KUBECONFIG) does not exist"
        );
    }
}
