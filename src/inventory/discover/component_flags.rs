//! The node-lifecycle timers of a kind or k3d cluster, read from the components' command
//! lines, never guessed. The reading itself is shared with runs and `doctor`
//! ([`crate::timers::sources`]); this module picks the command lines a kind or k3d cluster
//! shows and keeps each value with its source for the generated file's comments.

use std::time::Duration;

use super::{ClusterFacts, DiscoverError, Tool};
use crate::timers::Timer;
use crate::timers::sources::{self, CommandLine, TimerSourceError};

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

/// Reads the timers of a kind (static pods) or k3d (k3s argv) cluster; `notes` gets
/// anything the reader should know (e.g. control-plane nodes that disagree).
pub(crate) fn read(
    facts: &ClusterFacts,
    notes: &mut Vec<String>,
) -> Result<TimerSources, DiscoverError> {
    let (kcm, api) = match facts.tool {
        Tool::Kind => (
            sources::static_pod("kube-controller-manager", &facts.controller_managers, notes)
                .map_err(no_timers)?,
            sources::static_pod("kube-apiserver", &facts.api_servers, notes).map_err(no_timers)?,
        ),
        Tool::K3d => {
            let argv = facts.server_argv.as_ref().ok_or_else(|| {
                DiscoverError::Timers(format!(
                    "no k3s server command line was read for k3d cluster `{}`: no running \
                     server container",
                    facts.cluster
                ))
            })?;
            sources::k3s_command_lines("k3s", &[], Some(argv))
                .map_err(|e| DiscoverError::Timers(e.to_string()))?
        }
    };
    let mut read = Vec::new();
    for line in [&kcm, &api] {
        read.extend(timers_of(line, &facts.version)?);
    }
    let get = |timer: Timer| -> Sourced<Duration> {
        read.iter()
            .find(|(t, _)| *t == timer)
            .map(|(_, r)| Sourced {
                value: r.value,
                source: r.source.clone(),
            })
            .unwrap_or_else(|| Sourced {
                value: Duration::ZERO,
                source: String::new(),
            })
    };
    let secs = |s: Sourced<Duration>| Sourced {
        value: s.value.as_secs(),
        source: s.source,
    };
    Ok(TimerSources {
        node_monitor_period: get(Timer::NodeMonitorPeriod),
        node_monitor_grace_period: get(Timer::NodeMonitorGracePeriod),
        default_unreachable_toleration_seconds: secs(get(
            Timer::DefaultUnreachableTolerationSeconds,
        )),
        default_not_ready_toleration_seconds: secs(get(Timer::DefaultNotReadyTolerationSeconds)),
    })
}

fn timers_of(
    line: &CommandLine,
    version: &str,
) -> Result<Vec<(Timer, crate::timers::Reading)>, DiscoverError> {
    line.timers(version)
        .map_err(|e| DiscoverError::Timers(e.to_string()))
}

fn no_timers(why: TimerSourceError) -> DiscoverError {
    DiscoverError::Timers(format!(
        "{why}: cannot read the node-lifecycle timers from its flags (is this a kubeadm/kind \
         cluster?)"
    ))
}
