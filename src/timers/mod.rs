//! The cluster's node-lifecycle timers a run resolves its bounds against, and where each
//! one came from: read from the cluster, stated in the inventory, or assumed (the upstream
//! default of the cluster's version, because nothing better was known).
//!
//! A cluster tuned to a 20 s grace period judged against an assumed 50 s is wrong by 30 s
//! with nobody told; so every timer carries its [`Origin`], the cluster's reading wins over
//! the inventory's statement, a disagreement between the two is reported, and a bound built
//! on an assumed value is marked wherever it is shown (`plan`, the terminal, the reports).
//!
//! This module is pure: [`sources`] reads timers out of what the cluster shows (component
//! command lines, `/configz`, a dry-run pod, a k3s config file); the I/O that fetches those
//! lives with the API client (`cluster::api_timers`) and the node checks (`doctor`).

pub(crate) mod flags;
pub mod sources;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::experiment::model::{Bound, BoundSymbol, ClusterTimers};

/// One of the four node-lifecycle timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Timer {
    /// kube-controller-manager `--node-monitor-period` (bound symbol `monitor`).
    NodeMonitorPeriod,
    /// kube-controller-manager `--node-monitor-grace-period` (bound symbol `grace`).
    NodeMonitorGracePeriod,
    /// kube-apiserver `--default-unreachable-toleration-seconds` (bound symbol `toleration`
    /// where no pod is in question: step times, observation lengths).
    DefaultUnreachableTolerationSeconds,
    /// kube-apiserver `--default-not-ready-toleration-seconds`.
    DefaultNotReadyTolerationSeconds,
}

impl Timer {
    /// Every timer, in the order the inventory lists them.
    pub const ALL: [Timer; 4] = [
        Timer::NodeMonitorPeriod,
        Timer::NodeMonitorGracePeriod,
        Timer::DefaultUnreachableTolerationSeconds,
        Timer::DefaultNotReadyTolerationSeconds,
    ];

    /// The key under the inventory's `timers:`.
    pub fn key(self) -> &'static str {
        match self {
            Timer::NodeMonitorPeriod => "nodeMonitorPeriod",
            Timer::NodeMonitorGracePeriod => "nodeMonitorGracePeriod",
            Timer::DefaultUnreachableTolerationSeconds => "defaultUnreachableTolerationSeconds",
            Timer::DefaultNotReadyTolerationSeconds => "defaultNotReadyTolerationSeconds",
        }
    }

    /// The component flag that sets it.
    pub fn flag(self) -> &'static str {
        match self {
            Timer::NodeMonitorPeriod => "--node-monitor-period",
            Timer::NodeMonitorGracePeriod => "--node-monitor-grace-period",
            Timer::DefaultUnreachableTolerationSeconds => {
                "--default-unreachable-toleration-seconds"
            }
            Timer::DefaultNotReadyTolerationSeconds => "--default-not-ready-toleration-seconds",
        }
    }

    /// The component that owns the flag.
    pub fn component(self) -> &'static str {
        match self {
            Timer::NodeMonitorPeriod | Timer::NodeMonitorGracePeriod => "kube-controller-manager",
            _ => "kube-apiserver",
        }
    }

    /// The bound symbol that stands for it, if one does.
    pub fn symbol(self) -> Option<&'static str> {
        match self {
            Timer::NodeMonitorPeriod => Some("monitor"),
            Timer::NodeMonitorGracePeriod => Some("grace"),
            Timer::DefaultUnreachableTolerationSeconds => Some("toleration"),
            Timer::DefaultNotReadyTolerationSeconds => None,
        }
    }

    /// Its value in a set of timers.
    pub fn of(self, timers: &ClusterTimers) -> Duration {
        match self {
            Timer::NodeMonitorPeriod => timers.node_monitor_period,
            Timer::NodeMonitorGracePeriod => timers.node_monitor_grace_period,
            Timer::DefaultUnreachableTolerationSeconds => timers.default_unreachable_toleration,
            Timer::DefaultNotReadyTolerationSeconds => timers.default_not_ready_toleration,
        }
    }

    fn set(self, timers: &mut ClusterTimers, value: Duration) {
        match self {
            Timer::NodeMonitorPeriod => timers.node_monitor_period = value,
            Timer::NodeMonitorGracePeriod => timers.node_monitor_grace_period = value,
            Timer::DefaultUnreachableTolerationSeconds => {
                timers.default_unreachable_toleration = value
            }
            Timer::DefaultNotReadyTolerationSeconds => timers.default_not_ready_toleration = value,
        }
    }
}

impl fmt::Display for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// A timer's value as text the way people write it (`20s`, `1m30s`, `500ms`).
pub fn show(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// One value read from the cluster, and where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The value.
    pub value: Duration,
    /// Where it was read, for people: `kube-controller-manager --node-monitor-grace-period=20s
    /// (pod kube-system/kube-controller-manager-cp-1)`.
    pub source: String,
}

/// What the cluster showed of its timers: a reading per timer it showed, and for the
/// others why they could not be read (each place looked at, and what stood in the way).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterReadings {
    values: BTreeMap<Timer, Reading>,
    /// Every place looked at that gave nothing, and why: shown by `doctor`, and in the
    /// plan when a timer ends up assumed.
    pub misses: Vec<String>,
}

impl ClusterReadings {
    /// Records a reading unless an earlier (more direct) source already gave this timer.
    pub fn offer(&mut self, timer: Timer, reading: Reading) {
        self.values.entry(timer).or_insert(reading);
    }

    /// The reading of one timer, if the cluster showed it.
    pub fn get(&self, timer: Timer) -> Option<&Reading> {
        self.values.get(&timer)
    }

    /// Whether every timer has been read.
    pub fn complete(&self) -> bool {
        Timer::ALL.iter().all(|t| self.values.contains_key(t))
    }

    /// Whether any of `timers` is still unread.
    pub fn lacks_any(&self, timers: &[Timer]) -> bool {
        timers.iter().any(|t| !self.values.contains_key(t))
    }

    /// Notes a place that gave nothing.
    pub fn miss(&mut self, why: impl Into<String>) {
        self.misses.push(why.into());
    }

    /// Adds another set of readings (and misses); readings already held win.
    pub fn absorb(&mut self, other: ClusterReadings) {
        for (t, r) in other.values {
            self.offer(t, r);
        }
        self.misses.extend(other.misses);
    }
}

/// The timers an inventory states under `timers:`; each one may be absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatedTimers {
    /// `nodeMonitorPeriod`.
    pub node_monitor_period: Option<Duration>,
    /// `nodeMonitorGracePeriod`.
    pub node_monitor_grace_period: Option<Duration>,
    /// `defaultUnreachableTolerationSeconds`.
    pub default_unreachable_toleration: Option<Duration>,
    /// `defaultNotReadyTolerationSeconds`.
    pub default_not_ready_toleration: Option<Duration>,
}

impl StatedTimers {
    /// The stated value of one timer.
    pub fn get(&self, timer: Timer) -> Option<Duration> {
        match timer {
            Timer::NodeMonitorPeriod => self.node_monitor_period,
            Timer::NodeMonitorGracePeriod => self.node_monitor_grace_period,
            Timer::DefaultUnreachableTolerationSeconds => self.default_unreachable_toleration,
            Timer::DefaultNotReadyTolerationSeconds => self.default_not_ready_toleration,
        }
    }
}

/// Where a timer in force came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Read from the cluster itself.
    Cluster,
    /// Stated in the inventory; the cluster did not show it.
    Inventory,
    /// Neither the cluster nor the inventory gave it: the upstream default of the
    /// cluster's Kubernetes version, which this cluster may not use.
    Assumed,
}

impl Origin {
    /// The origin as one word, as tables and reports print it.
    pub fn word(self) -> &'static str {
        match self {
            Origin::Cluster => "cluster",
            Origin::Inventory => "inventory",
            Origin::Assumed => "ASSUMED",
        }
    }
}

/// One timer in force: its value, where it came from, and what the inventory said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimerSource {
    /// Which timer.
    pub timer: Timer,
    /// The value bounds resolve against.
    pub value: Duration,
    /// Where it came from.
    pub origin: Origin,
    /// Where exactly, for people (the flag and the pod, the endpoint, the default's version).
    pub detail: String,
    /// What the inventory states for it, if anything (kept when the cluster's value is used,
    /// so a disagreement stays visible).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Duration>,
}

impl TimerSource {
    /// The inventory states another value than the cluster uses.
    pub fn disagrees(&self) -> bool {
        self.origin == Origin::Cluster && self.inventory.is_some_and(|v| v != self.value)
    }

    /// One line for people: `nodeMonitorGracePeriod 20s (cluster: …)`.
    /// `nodeMonitorPeriod 5s (ASSUMED)`: the value and where it came from, without the
    /// detail, for a list whose entries share one detail said once.
    pub fn short_line(&self) -> String {
        format!(
            "{} {} ({})",
            self.timer,
            show(self.value),
            self.origin.word()
        )
    }

    pub fn line(&self) -> String {
        let mut line = format!(
            "{} {} ({}: {})",
            self.timer,
            show(self.value),
            self.origin.word(),
            self.detail
        );
        if self.disagrees() {
            line.push_str(&format!(
                "; the inventory states {}, which the cluster does not use",
                show(self.inventory.unwrap_or_default())
            ));
        } else if self.origin == Origin::Cluster && self.inventory.is_some() {
            line.push_str("; the inventory states the same");
        }
        line
    }
}

/// The timers in force and where each came from: what a run resolves its bounds against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimersInForce {
    /// The values.
    pub timers: ClusterTimers,
    /// One entry per timer, in [`Timer::ALL`] order.
    pub sources: Vec<TimerSource>,
}

impl TimersInForce {
    /// The cluster's reading where there is one, else the inventory's statement, else the
    /// upstream default of `version` (a `gitVersion` such as `v1.33.13`), marked assumed.
    pub fn resolve(
        readings: &ClusterReadings,
        stated: &StatedTimers,
        version: Option<&str>,
    ) -> TimersInForce {
        let defaults = sources::defaults_of(version);
        let mut timers = ClusterTimers::default();
        let mut out = Vec::with_capacity(Timer::ALL.len());
        for timer in Timer::ALL {
            let inventory = stated.get(timer);
            let (value, origin, detail) = match (readings.get(timer), inventory) {
                (Some(r), _) => (r.value, Origin::Cluster, r.source.clone()),
                (None, Some(v)) => (
                    v,
                    Origin::Inventory,
                    format!("timers.{} in the inventory", timer.key()),
                ),
                (None, None) => (
                    timer.of(&defaults.timers),
                    Origin::Assumed,
                    format!(
                        "upstream default of {}; not read from the cluster and not in the \
                         inventory's timers",
                        defaults.label
                    ),
                ),
            };
            timer.set(&mut timers, value);
            out.push(TimerSource {
                timer,
                value,
                origin,
                detail,
                inventory,
            });
        }
        TimersInForce {
            timers,
            sources: out,
        }
    }

    /// The source of one timer.
    pub fn source(&self, timer: Timer) -> Option<&TimerSource> {
        self.sources.iter().find(|s| s.timer == timer)
    }

    /// The timers whose value is assumed.
    pub fn assumed(&self) -> Vec<Timer> {
        assumed_in(&self.sources)
    }

    /// The timers whose inventory value the cluster contradicts.
    pub fn disagreements(&self) -> Vec<&TimerSource> {
        self.sources.iter().filter(|s| s.disagrees()).collect()
    }
}

/// The timers marked assumed in a list of sources (a record's, or a fresh resolution's).
pub fn assumed_in(sources: &[TimerSource]) -> Vec<Timer> {
    sources
        .iter()
        .filter(|s| s.origin == Origin::Assumed)
        .map(|s| s.timer)
        .collect()
}

/// Where a bound is used, which decides what its `toleration` stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundUse {
    /// A step time or an observation length: `toleration` is the cluster's default.
    Schedule,
    /// An expectation: `toleration` is each pod's own `tolerationSeconds`, read from the
    /// pod (the default only for a pod that has none).
    Expectation,
}

/// The assumed timers a bound is built on, as `grace = 50s` phrases; empty when the bound
/// rests on nothing assumed.
pub fn assumed_terms(bound: &Bound, sources: &[TimerSource], used: BoundUse) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for term in &bound.terms {
        let timer = match term.symbol {
            BoundSymbol::Fixed(_) => continue,
            BoundSymbol::Grace => Timer::NodeMonitorGracePeriod,
            BoundSymbol::MonitorPeriod => Timer::NodeMonitorPeriod,
            BoundSymbol::Toleration if used == BoundUse::Schedule => {
                Timer::DefaultUnreachableTolerationSeconds
            }
            BoundSymbol::Toleration => continue,
        };
        if let Some(s) = sources
            .iter()
            .find(|s| s.timer == timer && s.origin == Origin::Assumed)
        {
            let phrase = format!(
                "{} = {}",
                timer.symbol().unwrap_or(timer.key()),
                show(s.value)
            );
            if !out.contains(&phrase) {
                out.push(phrase);
            }
        }
    }
    out
}

/// The mark for several bounds used together (an expectation's window): the assumed
/// timers any of them is built on, once each.
pub fn assumed_mark_all(bounds: &[&Bound], sources: &[TimerSource], used: BoundUse) -> String {
    let mut terms: Vec<String> = Vec::new();
    for b in bounds {
        for t in assumed_terms(b, sources, used) {
            if !terms.contains(&t) {
                terms.push(t);
            }
        }
    }
    if terms.is_empty() {
        String::new()
    } else {
        format!(" [ASSUMED: {}]", terms.join(", "))
    }
}

/// The mark put after a bound built on assumed timers: ` [ASSUMED: grace = 50s]`, or
/// nothing.
pub fn assumed_mark(bound: &Bound, sources: &[TimerSource], used: BoundUse) -> String {
    let terms = assumed_terms(bound, sources, used);
    if terms.is_empty() {
        String::new()
    } else {
        format!(" [ASSUMED: {}]", terms.join(", "))
    }
}

#[cfg(test)]
mod tests;
