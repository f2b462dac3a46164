//! What the nodes' kubelets offer beyond upstream's defaults, read from their configuration
//! files: a capability goes into the inventory's `cluster.offers` only when every running
//! node's kubelet has it, since a target may be any of them.

use std::time::Duration;

use serde::Deserialize;

use super::ClusterFacts;
use crate::timers::flags::parse_go_duration;

/// The one field of a `KubeletConfiguration` read here; the rest is ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KubeletConfig {
    shutdown_grace_period: Option<String>,
}

/// Why a kubelet's configuration could not be read: it becomes a note in the written
/// inventory's header, and graceful node shutdown is not offered.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum KubeletConfigError {
    /// The text is not YAML of a kubelet configuration.
    #[error("not a kubelet configuration: {0}")]
    NotAConfig(String),
    /// Its `shutdownGracePeriod` is not a Go duration.
    #[error("shutdownGracePeriod: {0}")]
    GracePeriod(#[from] crate::timers::flags::FlagValueError),
}

/// A kubelet's `shutdownGracePeriod`: zero when the file does not set it (upstream's
/// default, graceful node shutdown off); an error names what could not be read.
fn shutdown_grace_period(config: &str) -> Result<Duration, KubeletConfigError> {
    let parsed: KubeletConfig = serde_saphyr::from_str(config)
        .map_err(|e| KubeletConfigError::NotAConfig(e.without_snippet().to_string()))?;
    match parsed.shutdown_grace_period {
        None => Ok(Duration::ZERO),
        Some(text) => Ok(parse_go_duration(&text)?),
    }
}

/// The capabilities every node's kubelet offers, each with where that was read; what
/// could not be read becomes a note for the file's header, and the capability is left out.
pub(super) fn offers(facts: &ClusterFacts, notes: &mut Vec<String>) -> Vec<(&'static str, String)> {
    if facts.kubelet_configs.is_empty() {
        return Vec::new();
    }
    let mut periods = Vec::new();
    for (node, text) in &facts.kubelet_configs {
        match shutdown_grace_period(text) {
            Ok(p) => periods.push((node, p)),
            Err(e) => {
                notes.push(format!(
                    "the kubelet configuration of {node} could not be read ({e}): graceful node \
                     shutdown is not offered"
                ));
                return Vec::new();
            }
        }
    }
    let shortest = periods.iter().map(|(_, p)| *p).min().unwrap_or_default();
    if shortest.is_zero() {
        return Vec::new();
    }
    vec![(
        "graceful-node-shutdown",
        format!(
            "every node's kubelet has shutdownGracePeriod >= {}s (/var/lib/kubelet/config.yaml)",
            shortest.as_secs()
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubelet_config_without_the_field_has_graceful_shutdown_off() {
        let text = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
                    cgroupDriver: systemd\n";
        assert_eq!(shutdown_grace_period(text), Ok(Duration::ZERO));
        let on = format!("{text}shutdownGracePeriod: 20s\nshutdownGracePeriodCriticalPods: 5s\n");
        assert_eq!(shutdown_grace_period(&on), Ok(Duration::from_secs(20)));
        assert!(matches!(
            shutdown_grace_period("shutdownGracePeriod: soon\n"),
            Err(KubeletConfigError::GracePeriod(_))
        ));
    }
}
