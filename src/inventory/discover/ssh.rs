//! `faultline inventory kind --transport ssh`: the same kind cluster reached the way a
//! kubeadm cluster is, so the `kubeadm` profile (SSH, `systemctl`, `iptables`) meets real
//! kubelets. A kind node is a kubeadm node running `kubelet.service`; only its power is
//! different: it is a container, so power stays with Docker, out of band like a BMC.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::{DiscoverError, Discovered, Tool};
use crate::experiment::fault::{KeyTable, PowerKey};
use crate::inventory::ProfileName;

/// How the generated inventory reaches the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Reach {
    /// The tool's own profile: `docker exec` into each node container.
    #[default]
    DockerExec,
    /// kind only: the `kubeadm` profile over SSH to each node container's address, as root.
    Ssh(SshReach),
}

/// The SSH client files the inventory names: both are required, because a kind node's
/// host key is in no default known_hosts and faultline never skips the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshReach {
    /// Private key authorized for root on every node.
    pub identity_file: PathBuf,
    /// known_hosts pinning each node's host key by its address.
    pub known_hosts: PathBuf,
}

impl Discovered {
    /// The same inventory, reaching its nodes over SSH: only for kind (k3d's node image
    /// runs no sshd), and only when every node container has an address to connect to.
    pub fn over_ssh(mut self, ssh: SshReach) -> Result<Discovered, DiscoverError> {
        if self.tool != Tool::Kind {
            return Err(DiscoverError::Ssh(format!(
                "--transport ssh is for kind clusters only: {} node containers run no sshd",
                self.tool.name()
            )));
        }
        if let Some(n) = self.nodes.iter().find(|n| n.address.is_none()) {
            return Err(DiscoverError::Ssh(format!(
                "node container {} has no address to reach over SSH (is it running? on \
                 several Docker networks, none named `kind`?)",
                n.name
            )));
        }
        self.reach = Reach::Ssh(ssh);
        Ok(self)
    }
}

/// Why an SSH inventory could not be written: the built-in kind profile, whose power
/// commands it copies, is unusable (a bug the unit tests catch).
#[derive(Debug, thiserror::Error)]
pub(crate) enum KindPowerError {
    /// The profile does not parse.
    #[error(transparent)]
    Profile(#[from] crate::inventory::profile::ProfileError),
    /// The profile has no power commands.
    #[error("the built-in kind profile has no power commands")]
    NoPower,
    /// A power command's argv could not be written as JSON.
    #[error(transparent)]
    Argv(#[from] serde_json::Error),
}

/// The `profile:`, `ssh:` and `power:` lines of an inventory reaching kind nodes over SSH.
/// Power is the `kind` profile's, read from it so the two never drift apart.
pub(super) fn yaml(
    ssh: &SshReach,
    quoted: impl Fn(&str) -> String,
) -> Result<String, KindPowerError> {
    let kind = ProfileName::Kind.load()?;
    let power = kind.power.ok_or(KindPowerError::NoPower)?;
    let mut out = String::new();
    out.push_str(
        "profile: kubeadm                 # a kind node is a kubeadm node: systemctl, iptables, over SSH\n",
    );
    out.push_str(
        "ssh:                             # as root, straight to each node container's address\n",
    );
    out.push_str(
        "  config: none                   # ~/.ssh/config has no say over Docker's addresses\n",
    );
    out.push_str("  user: root\n");
    let _ = writeln!(
        out,
        "  identityFile: {}",
        quoted(&ssh.identity_file.display().to_string())
    );
    let _ = writeln!(
        out,
        "  knownHosts: {}   # every node's own host key, checked strictly",
        quoted(&ssh.known_hosts.display().to_string())
    );
    out.push_str(
        "# Power goes through Docker, out of band, as a BMC would: the kind profile's commands.\n\
         # Reboots too, so SSH does not carry them: the kubeadm profile's in-band `systemctl\n\
         # reboot` makes systemd, PID 1 of the node container, exit (status 129), and kind's\n\
         # restart policy (on-failure:1) starts the container again only the first time; a\n\
         # second reboot leaves the node off. Here a reboot is `docker stop`, 3 s, `docker\n\
         # start`, and a power-off `docker kill`. Power-off likewise: in-band, systemd exits with status 130 and the same\n\
         # policy starts the node again. The address check catches a node container that\n\
         # comes back with another address (kind #2045), which would also break this file's\n\
         # `address:`.\n",
    );
    out.push_str("power:\n");
    for key in PowerKey::ALL {
        if let Some(argv) = power.get(*key) {
            let argv = serde_json::to_string(argv)?;
            let _ = writeln!(out, "  {}: {argv}", key.name());
        }
    }
    Ok(out)
}
