//! `probes:` and the references to them: each probe is a command or an HTTP GET, with an
//! interval and a timeout.

use std::path::Path;
use std::time::Duration;

use super::{Validator, at, is_dns_label, pos};
use crate::experiment::model::*;
use crate::experiment::raw::*;
use crate::experiment::suggest::closest;
use crate::experiment::url_template;

/// Time between two tries when `interval` is not written.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(2);
/// Longest a try may take when `timeout` is not written.
const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

impl Validator<'_> {
    /// Validates `probes:` against the already validated targets (a command probe's `on`
    /// must name a target of exactly one node).
    pub(super) fn probes(&mut self, raw: &RawExperiment, targets: &[TargetSpec]) -> Vec<ProbeSpec> {
        let Some(probes) = &raw.probes else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, probe) in &probes.value.0 {
            if !is_dns_label(&name.value) {
                self.err(
                    name,
                    format!("probe name `{}` may only use a-z, 0-9 and -", name.value),
                    None,
                );
            }
            self.probe_names.push(name.value.clone());
            if let Some(spec) = self.probe(name, probe, targets) {
                out.push(spec);
            }
        }
        out
    }

    fn probe(
        &mut self,
        name: &S<String>,
        probe: &S<RawProbe>,
        targets: &[TargetSpec],
    ) -> Option<ProbeSpec> {
        let p = &probe.value;
        let interval = p
            .interval
            .as_ref()
            .map_or(Some(DEFAULT_INTERVAL), |i| self.plain(i));
        let timeout = p
            .timeout
            .as_ref()
            .map_or(Some(DEFAULT_PROBE_TIMEOUT), |t| self.plain(t));
        let kind = match (&p.command, &p.http, &p.exec, &p.logs) {
            (Some(c), None, None, None) => self.command_probe(c, p, targets),
            (None, Some(h), None, None) => self.http_probe(h, p, targets),
            (None, None, Some(e), None) => self.exec_probe(e, p, targets),
            (None, None, None, Some(l)) => self.logs_probe(l, p, targets),
            (None, None, None, None) => {
                self.err(
                    probe,
                    format!(
                        "probe `{}` has none of `command`, `http`, `exec` and `logs`",
                        name.value
                    ),
                    Some("write `command: \"true\"` with `on: <target>`, `http: https://host/path`, `exec: [true]` or `logs: {}` with `pod: {workload, on}`"),
                );
                None
            }
            (c, h, e, l) => {
                // Point at the second check written: the one that makes it two.
                let second = [
                    c.as_ref().map(at),
                    h.as_ref().map(at),
                    e.as_ref().map(at),
                    l.as_ref().map(at),
                ]
                .into_iter()
                .flatten()
                .nth(1);
                if let Some(loc) = second {
                    self.report(
                        pos(loc),
                        "a probe is one check: a `command`, an `http`, an `exec` or a `logs`, not several",
                        Some("split it into several probes".into()),
                    );
                }
                None
            }
        };
        Some(ProbeSpec {
            name: name.value.clone(),
            kind: kind?,
            interval: interval?,
            timeout: timeout?,
        })
    }

    /// An `exec` probe: a non-empty argv and `pod: {workload, on}` with `on` a target of
    /// one node; the HTTP keys and a probe-level `on` do not go with it.
    fn exec_probe(
        &mut self,
        exec: &S<Vec<S<String>>>,
        p: &RawProbe,
        targets: &[TargetSpec],
    ) -> Option<ProbeKind> {
        let command: Vec<String> = exec.value.iter().map(|a| a.value.clone()).collect();
        if command.first().is_none_or(|c| c.trim().is_empty()) {
            self.err(
                exec,
                "the probe's `exec` is empty",
                Some("give the command as a list, e.g. `exec: [true]`"),
            );
        }
        let (workload, on, container) = self.probe_pod(exec, p, targets, "an `exec`")?;
        if command.first().is_none_or(|c| c.trim().is_empty()) {
            return None;
        }
        Some(ProbeKind::Exec {
            command,
            workload,
            on,
            container,
        })
    }

    /// A `logs` probe: `pod: {workload, on}` as for `exec`, and how many lines from the
    /// end of the log each try reads (`tailLines`, one when not written).
    fn logs_probe(
        &mut self,
        logs: &S<RawProbeLogs>,
        p: &RawProbe,
        targets: &[TargetSpec],
    ) -> Option<ProbeKind> {
        let tail_lines = match &logs.value.tail_lines {
            None => Some(1),
            Some(n) => match u32::try_from(n.value) {
                Ok(n) if n >= 1 => Some(n),
                _ => {
                    self.err(
                        n,
                        format!("`tailLines` must be 1 or more, not {}", n.value),
                        Some("each try reads that many lines from the end of the log"),
                    );
                    None
                }
            },
        };
        let (workload, on, container) = self.probe_pod(logs, p, targets, "a `logs`")?;
        Some(ProbeKind::Logs {
            workload,
            on,
            container,
            tail_lines: tail_lines?,
        })
    }

    /// The `pod: {workload, on, container}` of an `exec` or `logs` probe (`what`, with its
    /// article: "an `exec`"), `on` a
    /// target of one node; the HTTP keys and a probe-level `on` do not go with it.
    fn probe_pod<T>(
        &mut self,
        check: &S<T>,
        p: &RawProbe,
        targets: &[TargetSpec],
        what: &str,
    ) -> Option<(WorkloadRef, String, Option<String>)> {
        self.no_http_keys(p);
        if let Some(o) = &p.on {
            self.err(
                o,
                format!("`on` goes under `pod:` for {what} probe"),
                Some("write `pod: {workload: deployment/web, on: <target>}`"),
            );
        }
        let Some(pod) = &p.pod else {
            self.err(
                check,
                format!("{what} probe needs `pod: {{workload, on}}`: whose pod, on which node"),
                Some("write `pod: {workload: deployment/web, on: <target>}`"),
            );
            return None;
        };
        let (Some(w), Some(o)) = (&pod.value.workload, &pod.value.on) else {
            self.err(
                pod,
                "`pod:` needs both `workload` and `on`",
                Some("write `pod: {workload: deployment/web, on: <target>}`"),
            );
            return None;
        };
        let workload = self.workload(w);
        let on = self.single_node_target(o, targets, &format!("{what} probe uses the pod on"));
        let container = pod.value.container.as_ref().map(|c| c.value.clone());
        Some((workload?, on?, container))
    }

    /// Reports the keys that only go with an `http` probe.
    fn no_http_keys(&mut self, p: &RawProbe) {
        for (key, given) in [
            ("expectStatus", p.expect_status.as_ref().map(at)),
            ("insecure", p.insecure.as_ref().map(at)),
            ("caFile", p.ca_file.as_ref().map(at)),
        ] {
            if let Some(loc) = given {
                self.report(
                    pos(loc),
                    format!("`{key}` only goes with an `http` probe"),
                    None,
                );
            }
        }
    }

    fn command_probe(
        &mut self,
        command: &S<String>,
        p: &RawProbe,
        targets: &[TargetSpec],
    ) -> Option<ProbeKind> {
        self.no_http_keys(p);
        if let Some(pod) = &p.pod {
            self.err(pod, "`pod` only goes with an `exec` or `logs` probe", None);
        }
        if command.value.trim().is_empty() {
            self.err(command, "the probe's `command` is empty", None);
            return None;
        }
        let on = match &p.on {
            None => None,
            Some(o) => Some(self.single_node_target(o, targets, "a probe runs on")?),
        };
        Some(ProbeKind::Command {
            command: command.value.clone(),
            on,
        })
    }

    /// A target reference that must resolve to one node (a probe's `on`, a URL's
    /// `{internalIP:<target>}`); `what` starts the message about a target that may have more.
    fn single_node_target(
        &mut self,
        r: &S<String>,
        targets: &[TargetSpec],
        what: &str,
    ) -> Option<String> {
        let name = self.target_ref(r);
        if let Some(t) = targets.iter().find(|t| t.name == name) {
            let single = t.count == Some(1) || t.selector.names.len() == 1;
            if !single {
                self.err(
                    r,
                    format!("{what} exactly one node, and target `{name}` may have more"),
                    Some("give the target `count: 1` or a single name"),
                );
                return None;
            }
        }
        Some(name)
    }

    /// Checks the `{internalIP:<target>}` placeholders of an HTTP probe's URL and returns
    /// the URL as it would look filled, for the URL check that follows.
    fn url_template(&mut self, url: &S<String>, targets: &[TargetSpec]) -> Option<String> {
        let names = match url_template::targets(&url.value) {
            Ok(names) => names,
            Err(e) => {
                self.err(
                    url,
                    format!("in `{}`: {e}", url.value),
                    Some("write e.g. http://{internalIP:entry}:30080/ with `entry` a target of one node"),
                );
                return None;
            }
        };
        let mut ok = true;
        for name in names {
            let mut r = url.clone();
            r.value = name;
            ok &= self
                .single_node_target(&r, targets, "`{internalIP:<target>}` stands for")
                .is_some();
        }
        let filled = url_template::fill(&url.value, |_| Ok("192.0.2.1".into())).ok()?;
        ok.then_some(filled)
    }

    fn http_probe(
        &mut self,
        url: &S<String>,
        p: &RawProbe,
        targets: &[TargetSpec],
    ) -> Option<ProbeKind> {
        if let Some(o) = &p.on {
            self.err(
                o,
                "`on` only goes with a `command` probe",
                Some("an HTTP probe runs from the machine running faultline"),
            );
        }
        if let Some(pod) = &p.pod {
            self.err(pod, "`pod` only goes with an `exec` or `logs` probe", None);
        }
        let filled = self.url_template(url, targets)?;
        let scheme_ok = filled.starts_with("http://") || filled.starts_with("https://");
        if !scheme_ok || filled.parse::<hyper::Uri>().is_err() {
            self.err(
                url,
                format!("`{}` is not an http:// or https:// URL", url.value),
                Some("write e.g. https://10.0.0.1:6443/livez"),
            );
            return None;
        }
        let expect_status = match &p.expect_status {
            None => Some(None),
            Some(s) => match u16::try_from(s.value) {
                Ok(code) if (100..=599).contains(&code) => Some(Some(code)),
                _ => {
                    self.err(
                        s,
                        format!("`expectStatus` {} is not an HTTP status", s.value),
                        Some("write a status between 100 and 599, e.g. 200"),
                    );
                    None
                }
            },
        };
        let insecure = p.insecure.as_ref().is_some_and(|i| i.value);
        if let (Some(i), Some(_)) = (&p.insecure, &p.ca_file)
            && i.value
        {
            self.err(
                i,
                "`insecure: true` skips verification, so `caFile` would be ignored",
                Some("keep one of them"),
            );
            return None;
        }
        let ca_file = p.ca_file.as_ref().map(|c| {
            let dir = self.path.parent().unwrap_or(Path::new("."));
            let path = dir.join(&c.value);
            if !path.is_file() {
                self.err(
                    c,
                    format!("CA file `{}` not found", c.value),
                    Some("paths are relative to the experiment file's directory"),
                );
            }
            path
        });
        Some(ProbeKind::Http {
            url: url.value.clone(),
            expect_status: expect_status?,
            insecure,
            ca_file,
        })
    }

    /// A probe name used by an expectation; unknown names get a suggestion.
    pub(super) fn probe_ref(&mut self, r: &S<String>) -> String {
        if !self.probe_names.contains(&r.value) {
            let known: Vec<&str> = self.probe_names.iter().map(String::as_str).collect();
            let hint = match closest(&r.value, &known) {
                Some(s) => format!("did you mean `{s}`?"),
                None if known.is_empty() => {
                    "no probes are defined; add them under `probes:`".into()
                }
                None => format!("known probes: {}", known.join(", ")),
            };
            self.report(
                pos(at(r)),
                format!("unknown probe `{}`", r.value),
                Some(hint),
            );
        }
        r.value.clone()
    }
}
