//! Reading timers out of what a cluster shows of itself. Each function takes what was
//! fetched (a component's command line, a `/configz` document, a pod the API server
//! defaulted, a k3s config file) and says which timers it gives and where it found them.
//!
//! A flag on a component's command line is its value. A flag that is absent is the
//! compiled-in default of the cluster's Kubernetes version (period 5 s; grace 50 s from
//! v1.32, 40 s before; tolerations 300 s) and says so: the absence was seen, so the value is
//! the cluster's, not an assumption. Without a version the default is unknown and nothing
//! is read.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;

use thiserror::Error;

use super::flags::{
    FlagValueError, flag_value, k3s_component_args, parse_go_duration, parse_seconds,
};
use super::{Reading, Timer};
use crate::experiment::model::ClusterTimers;

/// Why what a cluster showed of itself gave no timers; said in the readings' misses.
#[derive(Debug, Error)]
pub enum TimerSourceError {
    /// The API server's version names no minor version, so absent flags have no default.
    #[error(
        "cannot tell the Kubernetes version from the API server's `{version}`, so the \
         defaults of absent flags are unknown"
    )]
    UnknownVersion {
        /// The `gitVersion` as given.
        version: String,
    },
    /// A timer flag on a component's command line holds no readable value.
    #[error("{component} {flag} in {place}: {source}")]
    Flag {
        /// The component.
        component: &'static str,
        /// The flag.
        flag: &'static str,
        /// Where the command line was read.
        place: String,
        /// Why its value is unreadable.
        source: FlagValueError,
    },
    /// kube-system holds no static pod of the component.
    #[error(
        "no pod labelled component={component} in namespace kube-system (its flags are \
         readable on kubeadm, kind and RKE2, where it runs as a static pod)"
    )]
    NoStaticPod {
        /// The component.
        component: &'static str,
    },
    /// The `/configz` document lacks a timer's key.
    #[error("{place} has no {key}")]
    ConfigzMissing {
        /// Where the document was read.
        place: String,
        /// The key looked for.
        key: &'static str,
    },
    /// A timer's key in `/configz` holds no text.
    #[error("{place}: {key} is {found}, not a duration")]
    ConfigzNotText {
        /// Where the document was read.
        place: String,
        /// The key.
        key: &'static str,
        /// What it holds, as JSON.
        found: String,
    },
    /// A timer's key in `/configz` holds no Go duration.
    #[error("{place}: {key}: {source}")]
    ConfigzValue {
        /// Where the document was read.
        place: String,
        /// The key.
        key: &'static str,
        /// Why its value is unreadable.
        source: FlagValueError,
    },
    /// A k3s (or RKE2) config file is not one.
    #[error("{path}: not a {distribution} config file: {message}")]
    K3sConfig {
        /// The file.
        path: String,
        /// `k3s` or `rke2`.
        distribution: String,
        /// What the YAML parser said.
        message: String,
    },
    /// Neither a config file nor the server's command line was there to read.
    #[error("neither a {distribution} config file nor the server's command line could be read")]
    NothingRead {
        /// `k3s` or `rke2`.
        distribution: String,
    },
}

/// `(major, minor)` of a `gitVersion` such as `v1.33.13` or `v1.31.5+k3s1`.
pub(crate) fn minor_version(git_version: &str) -> Option<(u32, u32)> {
    let v = git_version.trim().strip_prefix('v').unwrap_or(git_version);
    let mut parts = v.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The compiled-in defaults of one Kubernetes version, and the version's label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    /// The four defaults.
    pub timers: ClusterTimers,
    /// `v1.33`, or `Kubernetes v1.32+` when the version is unknown.
    pub label: String,
}

/// The defaults of the version a `gitVersion` names; those of current Kubernetes (v1.32+)
/// when it names none.
pub(crate) fn defaults_of(git_version: Option<&str>) -> Defaults {
    match git_version.and_then(minor_version) {
        Some(v) => Defaults {
            timers: version_defaults(v),
            label: format!("v{}.{}", v.0, v.1),
        },
        None => Defaults {
            timers: ClusterTimers::default(),
            label: "Kubernetes v1.32+ (the cluster's version is unknown)".into(),
        },
    }
}

fn version_defaults((major, minor): (u32, u32)) -> ClusterTimers {
    ClusterTimers {
        node_monitor_period: Duration::from_secs(5),
        // kube-controller-manager raised the default from 40 s to 50 s in v1.32.
        node_monitor_grace_period: Duration::from_secs(if (major, minor) >= (1, 32) {
            50
        } else {
            40
        }),
        default_unreachable_toleration: Duration::from_secs(300),
        default_not_ready_toleration: Duration::from_secs(300),
    }
}

/// One component's command line: which component, where it was read, and its argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// `kube-controller-manager` or `kube-apiserver`.
    pub component: &'static str,
    /// Where it was read (`pod kube-system/kube-apiserver-cp-1`).
    pub place: String,
    /// The argv (command and args).
    pub argv: Vec<String>,
}

impl CommandLine {
    /// The timers this component owns, read from its flags; an absent flag is the default
    /// of `version` (`v1.33.13`). A flag whose value cannot be parsed is an error.
    pub fn timers(&self, version: &str) -> Result<Vec<(Timer, Reading)>, TimerSourceError> {
        let version_pair =
            minor_version(version).ok_or_else(|| TimerSourceError::UnknownVersion {
                version: version.to_string(),
            })?;
        let defaults = version_defaults(version_pair);
        let label = format!("v{}.{}", version_pair.0, version_pair.1);
        let mut out = Vec::new();
        for timer in Timer::ALL
            .into_iter()
            .filter(|t| t.component() == self.component)
        {
            let flag = timer.flag();
            let reading = match flag_value(&self.argv, flag) {
                Some(text) => {
                    let value = match timer {
                        Timer::NodeMonitorPeriod | Timer::NodeMonitorGracePeriod => {
                            parse_go_duration(&text)
                        }
                        _ => parse_seconds(&text).map(Duration::from_secs),
                    }
                    .map_err(|source| TimerSourceError::Flag {
                        component: self.component,
                        flag,
                        place: self.place.clone(),
                        source,
                    })?;
                    Reading {
                        value,
                        source: format!("{} {flag}={text} ({})", self.component, self.place),
                    }
                }
                None => Reading {
                    value: timer.of(&defaults),
                    source: format!(
                        "default of {label}: {} sets no {flag} ({})",
                        self.component, self.place
                    ),
                },
            };
            out.push((timer, reading));
        }
        Ok(out)
    }
}

/// The command line of a component from its kube-system static pods (kubeadm, kind, RKE2):
/// the first pod by name; a note for each timer flag another pod sets differently.
pub fn static_pod(
    component: &'static str,
    pods: &[(String, Vec<String>)],
    notes: &mut Vec<String>,
) -> Result<CommandLine, TimerSourceError> {
    let mut sorted: Vec<&(String, Vec<String>)> = pods.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let Some((first_name, first_argv)) = sorted.first() else {
        return Err(TimerSourceError::NoStaticPod { component });
    };
    for (name, argv) in sorted.iter().skip(1) {
        for timer in Timer::ALL
            .into_iter()
            .filter(|t| t.component() == component)
        {
            let flag = timer.flag();
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
    })
}

/// The controller-manager's timers from its `/configz` document: the configuration it
/// really runs with (defaults filled in), whatever set it. The document holds
/// `NodeMonitorPeriod` (under `KubeCloudShared`) and `NodeMonitorGracePeriod` (under
/// `NodeLifecycleController`), durations written as Go durations; they are looked for
/// anywhere in it, so the layout of another version reads too.
pub fn from_configz(
    doc: &serde_json::Value,
    place: &str,
) -> Result<Vec<(Timer, Reading)>, TimerSourceError> {
    let mut out = Vec::new();
    for (timer, key) in [
        (Timer::NodeMonitorPeriod, "NodeMonitorPeriod"),
        (Timer::NodeMonitorGracePeriod, "NodeMonitorGracePeriod"),
    ] {
        let Some(found) = find_key(doc, key) else {
            return Err(TimerSourceError::ConfigzMissing {
                place: place.to_string(),
                key,
            });
        };
        let text = found
            .as_str()
            .ok_or_else(|| TimerSourceError::ConfigzNotText {
                place: place.to_string(),
                key,
                found: found.to_string(),
            })?;
        let value = parse_go_duration(text).map_err(|source| TimerSourceError::ConfigzValue {
            place: place.to_string(),
            key,
            source,
        })?;
        out.push((
            timer,
            Reading {
                value,
                source: format!("kube-controller-manager /configz {key}={text} ({place})"),
            },
        ));
    }
    Ok(out)
}

fn find_key<'a>(doc: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    match doc {
        serde_json::Value::Object(map) => map
            .get(key)
            .or_else(|| map.values().find_map(|v| find_key(v, key))),
        serde_json::Value::Array(items) => items.iter().find_map(|v| find_key(v, key)),
        _ => None,
    }
}

/// The default tolerations the API server's `DefaultTolerationSeconds` admission put on a
/// pod created without tolerations (a server-side dry run): what every pod without its own
/// gets. A pod that came back with no such toleration shows the admission is off, so such
/// pods are evicted as soon as the `NoExecute` taint lands: 0 s.
pub fn from_defaulted_pod(pod: &Pod, place: &str) -> Vec<(Timer, Reading)> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    let mut out = Vec::new();
    for (timer, key) in [
        (
            Timer::DefaultUnreachableTolerationSeconds,
            "node.kubernetes.io/unreachable",
        ),
        (
            Timer::DefaultNotReadyTolerationSeconds,
            "node.kubernetes.io/not-ready",
        ),
    ] {
        let found = tolerations.iter().find(|t| {
            t.key.as_deref() == Some(key) && t.effect.as_deref().is_none_or(|e| e == "NoExecute")
        });
        let reading = match found.map(|t| t.toleration_seconds) {
            Some(Some(secs)) => Reading {
                value: Duration::from_secs(secs.max(0).unsigned_abs()),
                source: format!(
                    "kube-apiserver DefaultTolerationSeconds: tolerationSeconds={secs} for \
                     {key} on {place}"
                ),
            },
            // Tolerated forever: no duration to resolve against; leave it unread.
            Some(None) => continue,
            None => Reading {
                value: Duration::ZERO,
                source: format!(
                    "kube-apiserver added no toleration for {key} to {place} \
                     (DefaultTolerationSeconds is off): pods without their own are evicted \
                     as soon as the taint lands"
                ),
            },
        };
        out.push((timer, reading));
    }
    out
}

/// One `kube-controller-manager-arg` / `kube-apiserver-arg` entry of a k3s or RKE2 config
/// file: a single string or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// The keys of a k3s / RKE2 config file faultline reads; every other key is ignored.
#[derive(Debug, Deserialize)]
struct K3sConfig {
    #[serde(rename = "kube-controller-manager-arg")]
    controller_manager: Option<OneOrMany>,
    #[serde(rename = "kube-apiserver-arg")]
    api_server: Option<OneOrMany>,
}

/// The component command lines a k3s (or RKE2) server runs its embedded components with:
/// the `kube-controller-manager-arg` / `kube-apiserver-arg` of its config files (in the
/// order given: `config.yaml`, then `config.yaml.d/*.yaml`), then those on its own command
/// line; the last setting of a flag wins. `files` are `(path, text)`; `argv` is the server
/// process's command line and where it was read.
pub fn k3s_command_lines(
    distribution: &str,
    files: &[(String, String)],
    argv: Option<&(String, Vec<String>)>,
) -> Result<(CommandLine, CommandLine), TimerSourceError> {
    let mut kcm = Vec::new();
    let mut api = Vec::new();
    let mut places = Vec::new();
    for (path, text) in files {
        if text.trim().is_empty() {
            continue;
        }
        let config: K3sConfig =
            serde_saphyr::from_str(text).map_err(|e| TimerSourceError::K3sConfig {
                path: path.clone(),
                distribution: distribution.to_string(),
                message: e.to_string(),
            })?;
        let push = |entry: Option<OneOrMany>, into: &mut Vec<String>| match entry {
            Some(OneOrMany::One(s)) => into.push(format!("--{}", s.trim_start_matches('-'))),
            Some(OneOrMany::Many(list)) => into.extend(
                list.into_iter()
                    .map(|s| format!("--{}", s.trim_start_matches('-'))),
            ),
            None => {}
        };
        push(config.controller_manager, &mut kcm);
        push(config.api_server, &mut api);
        places.push(path.clone());
    }
    if let Some((place, argv)) = argv {
        kcm.extend(k3s_component_args(argv, "--kube-controller-manager-arg"));
        api.extend(k3s_component_args(argv, "--kube-apiserver-arg"));
        places.push(place.clone());
    }
    if places.is_empty() {
        return Err(TimerSourceError::NothingRead {
            distribution: distribution.to_string(),
        });
    }
    let place = places.join(", ");
    Ok((
        CommandLine {
            component: "kube-controller-manager",
            place: format!("{distribution} --kube-controller-manager-arg, {place}"),
            argv: kcm,
        },
        CommandLine {
            component: "kube-apiserver",
            place: format!("{distribution} --kube-apiserver-arg, {place}"),
            argv: api,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn versions_and_their_defaults() {
        assert_eq!(minor_version("v1.33.13"), Some((1, 33)));
        assert_eq!(minor_version("v1.31.5+k3s1"), Some((1, 31)));
        assert_eq!(minor_version("v1.32.0-rc.1"), Some((1, 32)));
        assert_eq!(minor_version("garbage"), None);
        let d = |v: &str| defaults_of(Some(v)).timers;
        assert_eq!(
            d("v1.32.0").node_monitor_grace_period,
            Duration::from_secs(50)
        );
        assert_eq!(
            d("v1.31.0").node_monitor_grace_period,
            Duration::from_secs(40)
        );
        assert_eq!(d("v1.31.0").node_monitor_period, Duration::from_secs(5));
        assert_eq!(
            d("v1.33.1").default_unreachable_toleration,
            Duration::from_secs(300)
        );
        assert_eq!(defaults_of(None).timers, ClusterTimers::default());
        assert_eq!(defaults_of(Some("v1.33.13")).label, "v1.33");
    }

    #[test]
    fn a_command_line_gives_its_flags_and_the_defaults_of_absent_ones() {
        let line = CommandLine {
            component: "kube-controller-manager",
            place: "pod kube-system/kcm-a".into(),
            argv: argv("kube-controller-manager --node-monitor-grace-period=20s --v=2"),
        };
        let got = line.timers("v1.33.13").expect("readable");
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, Timer::NodeMonitorPeriod);
        assert_eq!(got[0].1.value, Duration::from_secs(5));
        assert!(
            got[0].1.source.starts_with(
                "default of v1.33: kube-controller-manager sets no --node-monitor-period"
            ),
            "{}",
            got[0].1.source
        );
        assert_eq!(got[1].1.value, Duration::from_secs(20));
        assert_eq!(
            got[1].1.source,
            "kube-controller-manager --node-monitor-grace-period=20s (pod kube-system/kcm-a)"
        );
        let bad = CommandLine {
            argv: argv("kcm --node-monitor-period=five"),
            ..line.clone()
        };
        assert!(matches!(
            bad.timers("v1.33.0"),
            Err(TimerSourceError::Flag {
                source: FlagValueError::NotGoDuration(_),
                ..
            })
        ));
        assert!(
            matches!(
                line.timers("garbage"),
                Err(TimerSourceError::UnknownVersion { .. })
            ),
            "no version, no defaults"
        );
    }

    #[test]
    fn configz_is_searched_for_the_two_controller_manager_timers() {
        let doc: serde_json::Value = serde_json::from_str(
            r#"{"kubecontrollermanager.config.k8s.io":{"KubeCloudShared":{"NodeMonitorPeriod":"2s"},
                "NodeLifecycleController":{"NodeMonitorGracePeriod":"20s","NodeStartupGracePeriod":"30s"}}}"#,
        )
        .expect("json");
        let got = from_configz(&doc, "https://127.0.0.1:10257/configz").expect("found");
        assert_eq!(got[0], (Timer::NodeMonitorPeriod, Reading {
            value: Duration::from_secs(2),
            source: "kube-controller-manager /configz NodeMonitorPeriod=2s (https://127.0.0.1:10257/configz)".into(),
        }));
        assert_eq!(got[1].1.value, Duration::from_secs(20));
        let partial: serde_json::Value =
            serde_json::from_str(r#"{"x":{"NodeMonitorPeriod":"2s"}}"#).expect("json");
        assert!(from_configz(&partial, "p").is_err());
    }

    #[test]
    fn a_defaulted_pod_shows_the_admission_defaults_or_their_absence() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}], "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 45}
            ]}
        }))
        .expect("pod");
        let got = from_defaulted_pod(&pod, "a dry-run pod");
        assert_eq!(got[0].0, Timer::DefaultUnreachableTolerationSeconds);
        assert_eq!(got[0].1.value, Duration::from_secs(45));
        assert_eq!(got[1].1.value, Duration::from_secs(30));
        let bare: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}
        }))
        .expect("pod");
        let got = from_defaulted_pod(&bare, "a dry-run pod");
        assert_eq!(got[0].1.value, Duration::ZERO);
        assert!(got[0].1.source.contains("DefaultTolerationSeconds is off"));
    }

    #[test]
    fn k3s_config_files_then_the_command_line_last_wins() {
        let files = vec![
            (
                "/etc/rancher/k3s/config.yaml".to_string(),
                "write-kubeconfig-mode: \"0644\"\nkube-controller-manager-arg:\n  - node-monitor-grace-period=20s\n  - node-monitor-period=2s\nkube-apiserver-arg: default-unreachable-toleration-seconds=60\n".to_string(),
            ),
            (
                "/etc/rancher/k3s/config.yaml.d/10-tune.yaml".to_string(),
                "kube-controller-manager-arg: [\"--node-monitor-grace-period=30s\"]\n".to_string(),
            ),
        ];
        let cmdline = (
            "/proc/812/cmdline".to_string(),
            argv(
                "/usr/local/bin/k3s server --kube-apiserver-arg=default-unreachable-toleration-seconds=90",
            ),
        );
        let (kcm, api) = k3s_command_lines("k3s", &files, Some(&cmdline)).expect("readable");
        let kcm = kcm.timers("v1.31.5+k3s1").expect("kcm");
        assert_eq!(kcm[0].1.value, Duration::from_secs(2));
        assert_eq!(
            kcm[1].1.value,
            Duration::from_secs(30),
            "the drop-in comes later"
        );
        let api = api.timers("v1.31.5+k3s1").expect("api");
        assert_eq!(
            api[0].1.value,
            Duration::from_secs(90),
            "the command line comes last"
        );
        assert_eq!(api[1].1.value, Duration::from_secs(300), "default of v1.31");
        assert!(k3s_command_lines("k3s", &[], None).is_err());
        let broken = vec![(
            "/etc/rancher/k3s/config.yaml".to_string(),
            "kube-apiserver-arg: {a: 1}\n".to_string(),
        )];
        assert!(k3s_command_lines("k3s", &broken, None).is_err());
    }
}
