//! Built-in cluster profiles: default commands, transport and power per distribution.
//!
//! Profiles are data (YAML embedded at build time) so the service names and their caveats
//! are read and reviewed as configuration, not buried in match arms.

use std::fmt;

use serde::Deserialize;

use super::raw::RawProfile;

/// A Kubernetes distribution whose node-level commands faultline knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileName {
    /// kubeadm clusters: `kubelet` systemd unit, SSH.
    Kubeadm,
    /// kind: node containers reached with `docker exec`.
    Kind,
    /// k3d: k3s node containers reached with `docker exec`.
    K3d,
    /// k3s server node: `k3s` unit.
    K3sServer,
    /// k3s agent node: `k3s-agent` unit.
    K3sAgent,
    /// RKE2 server node: `rke2-server` unit.
    Rke2Server,
    /// RKE2 agent node: `rke2-agent` unit.
    Rke2Agent,
    /// OpenShift: `oc debug node/..`.
    Openshift,
}

impl ProfileName {
    /// The embedded YAML text of this profile.
    fn source(self) -> &'static str {
        match self {
            ProfileName::Kubeadm => include_str!("profiles/kubeadm.yaml"),
            ProfileName::Kind => include_str!("profiles/kind.yaml"),
            ProfileName::K3d => include_str!("profiles/k3d.yaml"),
            ProfileName::K3sServer => include_str!("profiles/k3s-server.yaml"),
            ProfileName::K3sAgent => include_str!("profiles/k3s-agent.yaml"),
            ProfileName::Rke2Server => include_str!("profiles/rke2-server.yaml"),
            ProfileName::Rke2Agent => include_str!("profiles/rke2-agent.yaml"),
            ProfileName::Openshift => include_str!("profiles/openshift.yaml"),
        }
    }

    /// Every profile, for listing and for tests.
    pub const ALL: [ProfileName; 8] = [
        ProfileName::Kubeadm,
        ProfileName::Kind,
        ProfileName::K3d,
        ProfileName::K3sServer,
        ProfileName::K3sAgent,
        ProfileName::Rke2Server,
        ProfileName::Rke2Agent,
        ProfileName::Openshift,
    ];

    /// Parse the embedded profile (a [`ProfileError`] names it). Only fails if the shipped YAML is broken, which the
    /// unit tests catch; callers still get an error rather than a panic.
    pub(crate) fn load(self) -> Result<RawProfile, ProfileError> {
        serde_saphyr::from_str(self.source()).map_err(|e| ProfileError {
            profile: self,
            reason: e.to_string(),
        })
    }
}

/// A built-in profile whose shipped YAML does not parse: a bug the unit tests catch, kept
/// an error so that what copies a profile (discovery's SSH inventory) reports it.
#[derive(Debug, thiserror::Error)]
#[error("built-in profile {profile} is invalid: {reason}")]
pub(crate) struct ProfileError {
    /// The profile.
    pub(crate) profile: ProfileName,
    /// The parser's message.
    pub(crate) reason: String,
}

impl fmt::Display for ProfileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProfileName::Kubeadm => "kubeadm",
            ProfileName::Kind => "kind",
            ProfileName::K3d => "k3d",
            ProfileName::K3sServer => "k3s-server",
            ProfileName::K3sAgent => "k3s-agent",
            ProfileName::Rke2Server => "rke2-server",
            ProfileName::Rke2Agent => "rke2-agent",
            ProfileName::Openshift => "openshift",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::fault::CommandKey;

    #[test]
    fn every_builtin_profile_parses() {
        for p in ProfileName::ALL {
            let raw = p.load().unwrap_or_else(|e| panic!("{e}"));
            assert!(raw.commands.is_some(), "{p} has commands");
        }
    }

    #[test]
    fn profiles_use_the_real_service_names() {
        let stop = |p: ProfileName| {
            p.load()
                .ok()
                .and_then(|r| r.commands?.get(CommandKey::KubeletStop).cloned())
        };
        assert_eq!(
            stop(ProfileName::Rke2Agent).as_deref(),
            Some("systemctl stop rke2-agent")
        );
        assert_eq!(
            stop(ProfileName::Rke2Server).as_deref(),
            Some("systemctl stop rke2-server")
        );
        assert_eq!(
            stop(ProfileName::K3sAgent).as_deref(),
            Some("systemctl stop k3s-agent")
        );
        assert_eq!(
            stop(ProfileName::K3sServer).as_deref(),
            Some("systemctl stop k3s")
        );
        assert_eq!(
            stop(ProfileName::Kubeadm).as_deref(),
            Some("systemctl stop kubelet")
        );
        assert_eq!(stop(ProfileName::K3d), None);
    }

    #[test]
    fn systemd_nodes_self_restore_through_systemd_and_containers_through_a_process() {
        for p in ProfileName::ALL {
            let raw = p.load().unwrap_or_else(|e| panic!("{e}"));
            let arm = raw.arm_restore.as_deref().unwrap_or("");
            let by_systemd = arm.starts_with("systemd-run ");
            assert_eq!(
                by_systemd,
                raw.disarm_restore
                    .as_deref()
                    .is_some_and(|d| d.contains("systemctl stop faultline-restore-{token}.timer")),
                "{p}: arm and disarm go together"
            );
            // And a fault that cuts the API transport is gated on the same timer.
            assert_eq!(
                raw.restore_waiting.as_deref(),
                by_systemd.then_some(crate::inventory::pod_defaults::SYSTEMD_WAITING),
                "{p}: the check asks the unit armed"
            );
            // Nodes whose kubelet is a systemd unit hand the restore to it (it outlives the
            // SSH session under KillUserProcesses=yes); kind and k3d nodes are reached by
            // `docker exec` and keep the default process.
            let expected = !matches!(p, ProfileName::Kind | ProfileName::K3d);
            assert_eq!(by_systemd, expected, "{p}: {arm:?}");
        }
    }
}
