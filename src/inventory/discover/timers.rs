//! The node-lifecycle timers, read from the components' command lines, never guessed.
//!
//! A flag on the command line is the value. A flag that is absent is the compiled-in
//! default of the cluster's Kubernetes version (grace 50 s from v1.32, 40 s before; period
//! 5 s; tolerations 300 s), and the generated file says so next to the value, so a reader
//! can tell a measured configuration from a default.

use std::time::Duration;

use super::flags::{flag_value, k3s_component_args, parse_go_duration, parse_seconds};
use super::{ClusterFacts, DiscoverError, Tool};

/// A value and where it came from (`kube-controller-manager --node-monitor-period=5s`,
/// `default of v1.33`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from, for the comment next to it.
    pub source: String,
}

/// The four timers the inventory's `timers:` holds, each with its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerSources {
    /// kube-controller-manager `--node-monitor-period`.
    pub node_monitor_period: Sourced<Duration>,
    /// kube-controller-manager `--node-monitor-grace-period`.
    pub node_monitor_grace_period: Sourced<Duration>,
    /// kube-apiserver `--default-unreachable-toleration-seconds`.
    pub default_unreachable_toleration_seconds: Sourced<u64>,
    /// kube-apiserver `--default-not-ready-toleration-seconds`.
    pub default_not_ready_toleration_seconds: Sourced<u64>,
}

/// `(major, minor)` of a `gitVersion` such as `v1.33.13` or `v1.31.5+k3s1`.
pub(crate) fn minor_version(git_version: &str) -> Option<(u32, u32)> {
    let v = git_version.trim().strip_prefix('v').unwrap_or(git_version);
    let mut parts = v.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The compiled-in defaults of one Kubernetes version.
struct Defaults {
    period: Duration,
    grace: Duration,
    toleration: u64,
}

fn defaults_of((major, minor): (u32, u32)) -> Defaults {
    Defaults {
        period: Duration::from_secs(5),
        // kube-controller-manager raised the default from 40 s to 50 s in v1.32.
        grace: Duration::from_secs(if (major, minor) >= (1, 32) { 50 } else { 40 }),
        toleration: 300,
    }
}

/// One component's command line: which component, where it was read, and its argv.
struct CommandLine<'a> {
    component: &'static str,
    place: String,
    argv: Vec<String>,
    default_label: &'a str,
}

impl CommandLine<'_> {
    fn duration(&self, flag: &str, default: Duration) -> Result<Sourced<Duration>, DiscoverError> {
        match flag_value(&self.argv, flag) {
            Some(text) => Ok(Sourced {
                value: parse_go_duration(&text).map_err(|e| self.bad(flag, e))?,
                source: format!("{} {flag}={text} ({})", self.component, self.place),
            }),
            None => Ok(self.default(flag, default)),
        }
    }

    fn seconds(&self, flag: &str, default: u64) -> Result<Sourced<u64>, DiscoverError> {
        match flag_value(&self.argv, flag) {
            Some(text) => Ok(Sourced {
                value: parse_seconds(&text).map_err(|e| self.bad(flag, e))?,
                source: format!("{} {flag}={text} ({})", self.component, self.place),
            }),
            None => Ok(self.default(flag, default)),
        }
    }

    fn default<T>(&self, flag: &str, value: T) -> Sourced<T> {
        Sourced {
            value,
            source: format!(
                "default of {}: {} sets no {flag} ({})",
                self.default_label, self.component, self.place
            ),
        }
    }

    fn bad(&self, flag: &str, why: String) -> DiscoverError {
        DiscoverError::Timers(format!(
            "{} {flag} in {}: {why}",
            self.component, self.place
        ))
    }
}

/// Reads the timers of a kind (static pods) or k3d (k3s argv) cluster; `notes` gets
/// anything the reader should know (e.g. control-plane nodes that disagree).
pub(crate) fn read(
    facts: &ClusterFacts,
    notes: &mut Vec<String>,
) -> Result<TimerSources, DiscoverError> {
    let version = minor_version(&facts.version).ok_or_else(|| {
        DiscoverError::Timers(format!(
            "cannot tell the Kubernetes version from the API server's `{}`, so the defaults \
             of absent flags are unknown",
            facts.version
        ))
    })?;
    let label = format!("v{}.{}", version.0, version.1);
    let d = defaults_of(version);
    let (kcm, api) = match facts.tool {
        Tool::Kind => (
            static_pod(
                "kube-controller-manager",
                &facts.controller_managers,
                &label,
                notes,
            )?,
            static_pod("kube-apiserver", &facts.api_servers, &label, notes)?,
        ),
        Tool::K3d => {
            let (place, argv) = facts.server_argv.as_ref().ok_or_else(|| {
                DiscoverError::Timers(format!(
                    "no k3s server command line was read for k3d cluster `{}`: no running \
                     server container",
                    facts.cluster
                ))
            })?;
            let pass = |flag: &str| -> Vec<String> { k3s_component_args(argv, flag) };
            (
                CommandLine {
                    component: "kube-controller-manager",
                    place: format!("k3s --kube-controller-manager-arg, {place}"),
                    argv: pass("--kube-controller-manager-arg"),
                    default_label: &label,
                },
                CommandLine {
                    component: "kube-apiserver",
                    place: format!("k3s --kube-apiserver-arg, {place}"),
                    argv: pass("--kube-apiserver-arg"),
                    default_label: &label,
                },
            )
        }
    };
    Ok(TimerSources {
        node_monitor_period: kcm.duration("--node-monitor-period", d.period)?,
        node_monitor_grace_period: kcm.duration("--node-monitor-grace-period", d.grace)?,
        default_unreachable_toleration_seconds: api
            .seconds("--default-unreachable-toleration-seconds", d.toleration)?,
        default_not_ready_toleration_seconds: api
            .seconds("--default-not-ready-toleration-seconds", d.toleration)?,
    })
}

/// The first (by pod name) static pod's command; a note if the others differ in a timer.
fn static_pod<'a>(
    component: &'static str,
    pods: &[(String, Vec<String>)],
    default_label: &'a str,
    notes: &mut Vec<String>,
) -> Result<CommandLine<'a>, DiscoverError> {
    let mut sorted: Vec<&(String, Vec<String>)> = pods.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let Some((first_name, first_argv)) = sorted.first() else {
        return Err(DiscoverError::Timers(format!(
            "no pod labelled component={component} in namespace kube-system: cannot read the \
             node-lifecycle timers from its flags (is this a kubeadm/kind cluster?)"
        )));
    };
    const TIMER_FLAGS: [&str; 4] = [
        "--node-monitor-period",
        "--node-monitor-grace-period",
        "--default-unreachable-toleration-seconds",
        "--default-not-ready-toleration-seconds",
    ];
    for (name, argv) in sorted.iter().skip(1) {
        for flag in TIMER_FLAGS {
            if flag_value(argv, flag) != flag_value(first_argv, flag) {
                notes.push(format!(
                    "{name} and {first_name} disagree on {flag}; the timers are {first_name}'s"
                ));
            }
        }
    }
    Ok(CommandLine {
        component,
        place: format!("pod kube-system/{first_name}"),
        argv: first_argv.clone(),
        default_label,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_their_defaults() {
        assert_eq!(minor_version("v1.33.13"), Some((1, 33)));
        assert_eq!(minor_version("v1.31.5+k3s1"), Some((1, 31)));
        assert_eq!(minor_version("v1.32.0-rc.1"), Some((1, 32)));
        assert_eq!(minor_version("garbage"), None);
        assert_eq!(defaults_of((1, 32)).grace, Duration::from_secs(50));
        assert_eq!(defaults_of((1, 31)).grace, Duration::from_secs(40));
        assert_eq!(defaults_of((1, 31)).period, Duration::from_secs(5));
        assert_eq!(defaults_of((1, 33)).toleration, 300);
    }
}
