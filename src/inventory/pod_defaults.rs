//! The API transport's defaults, where the inventory reads them: the node-access pods'
//! namespace, image and start timeout, and the self-restore a node reached through the API
//! arms (a transient systemd timer). They live with the inventory, which fills them in, so
//! the executor (`crate::execute::pod`) reads the inventory and not the other way round.

use std::time::Duration;

use super::TransportKind;

/// Namespace of the node-access pods when the inventory names none; faultline creates it.
pub const DEFAULT_NAMESPACE: &str = "faultline-node-access";

/// Image of the node-access pod when the inventory names none: the kube-proxy image the
/// offline kind cluster (`ci/kind/build`) builds from a Debian root filesystem and loads
/// into every node, so it runs without a registry. On another cluster set `pod.image` to
/// any image with `sh` and `nsenter` (util-linux), e.g. `debian:bookworm-slim`.
pub const DEFAULT_IMAGE: &str = "registry.k8s.io/kube-proxy:v1.33.13";

/// How long a node-access pod may take to run when the inventory does not say.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);

/// The self-restore of a node reached through the API: a command run in the node-access
/// pod dies with it, so the undo is handed to the host's systemd as a transient timer and
/// service (the same template as the `openshift` profile, whose `oc debug` pod has the
/// same life). `AccuracySec=1s`: a timer's default accuracy is a minute.
pub const SYSTEMD_ARM: &str = "systemd-run --quiet --collect --unit=faultline-restore-{token} --on-active={seconds} --timer-property=AccuracySec=1s sh -c {undo}";

/// Disarms [`SYSTEMD_ARM`]'s timer by name; prints `gone` when it already fired.
pub const SYSTEMD_DISARM: &str = "if systemctl is-active --quiet faultline-restore-{token}.timer; then systemctl stop faultline-restore-{token}.timer && echo disarmed; else echo gone; fi";

/// Exits 0 while [`SYSTEMD_ARM`]'s timer is still waiting: what a fault that cuts the API
/// transport is gated on. Its sub-state, not `is-active`: systemd calls a timer active
/// while the service it started runs, and a stop that lands while the undo is starting
/// the kubelet would cancel it with no backstop left.
pub const SYSTEMD_WAITING: &str = "test \"$(systemctl show --property=SubState --value faultline-restore-{token}.timer)\" = waiting";

/// The self-restore templates (arm, disarm, still waiting) a transport uses when no layer
/// of the inventory sets them: the systemd timer for the API transport, the executor's
/// built-in default otherwise.
pub(crate) fn default_restore(transport: TransportKind) -> [Option<String>; 3] {
    match transport {
        TransportKind::Pod => [
            Some(SYSTEMD_ARM.into()),
            Some(SYSTEMD_DISARM.into()),
            Some(SYSTEMD_WAITING.into()),
        ],
        TransportKind::Ssh | TransportKind::Exec => [None, None, None],
    }
}

/// A Kubernetes namespace name: an RFC 1123 label.
pub(crate) fn valid_dns_label(name: &str) -> bool {
    let b = name.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    let end = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match b {
        [] => false,
        _ if b.len() > 63 => false,
        [only] => end(only),
        [first, mid @ .., last] => end(first) && end(last) && mid.iter().all(inner),
    }
}
