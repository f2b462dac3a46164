//! `abort:`: the conditions that stop a run by itself. The two defaults (a node that is not
//! a target goes NotReady; the API unreachable for a minute) apply unless switched `off`;
//! the others are lists the experiment writes.

use std::time::Duration;

use super::*;

/// The word that switches a default condition off.
const OFF: &str = "off";

/// The shortest interval between two asks of a Prometheus query.
const MIN_EVERY: Duration = Duration::from_secs(1);

impl Validator<'_> {
    /// The abort conditions; they need the probes' names, so probes are validated first.
    pub(super) fn abort(&mut self, raw: &RawExperiment) -> AbortSpec {
        let Some(a) = &raw.abort else {
            return AbortSpec::defaults();
        };
        let a = &a.value;
        let mut conditions = Vec::new();
        let node = self.default_hold(
            "nodeNotReady",
            a.node_not_ready.as_ref(),
            AbortSpec::DEFAULT_NODE_NOT_READY,
        );
        conditions.extend(node.map(AbortCondition::node_not_ready));
        let api = self.default_hold(
            "apiUnreachable",
            a.api_unreachable.as_ref(),
            AbortSpec::DEFAULT_API_UNREACHABLE,
        );
        conditions.extend(api.map(AbortCondition::api_unreachable));
        for p in a.pods_not_ready.iter().flat_map(|l| &l.value) {
            conditions.extend(self.pods_not_ready(p));
        }
        for p in a.probe_down.iter().flat_map(|l| &l.value) {
            conditions.extend(self.probe_down(p));
        }
        let mut names: Vec<&str> = Vec::new();
        for q in a.prometheus.iter().flat_map(|l| &l.value) {
            if let Some(n) = &q.value.name {
                if names.contains(&n.value.trim()) {
                    self.err(
                        n,
                        format!("duplicate query name `{}`", n.value.trim()),
                        Some("give each query its own `name`"),
                    );
                }
                names.push(n.value.trim());
            }
            conditions.extend(self.query(q));
        }
        AbortSpec { conditions }
    }

    /// `nodeNotReady` / `apiUnreachable`: a hold, `off`, or absent (the default hold).
    fn default_hold(
        &mut self,
        key: &str,
        given: Option<&S<String>>,
        default: Duration,
    ) -> Option<Bound> {
        let Some(v) = given else {
            return Some(Bound::fixed(default));
        };
        if v.value == OFF {
            return None;
        }
        if parse_bound_detailed(&v.value).is_err() {
            self.err(
                v,
                format!(
                    "`{key}` is how long the condition may last, or `off`; not `{}`",
                    v.value
                ),
                Some("write e.g. `30s`, `grace`, `0s` (at once) or `off`"),
            );
            return None;
        }
        self.hold(Some(v))
    }

    /// A condition's `for:`: how long its bad state must last (zero when absent).
    fn hold(&mut self, given: Option<&S<String>>) -> Option<Bound> {
        let Some(v) = given else {
            return Some(Bound::fixed(Duration::ZERO));
        };
        match parse_bound_detailed(&v.value) {
            Ok(b) if b.uses_toleration() => {
                self.err(
                    v,
                    "`toleration` has no meaning in an abort condition",
                    Some("use grace, monitor or a fixed duration here"),
                );
                None
            }
            Ok(b) => Some(b),
            Err(issue) => {
                self.issue(v, issue);
                None
            }
        }
    }

    fn pods_not_ready(&mut self, p: &S<RawPodsNotReady>) -> Option<AbortCondition> {
        let Some(w) = &p.value.workload else {
            self.err(
                p,
                "`podsNotReady` needs `workload`",
                Some("write e.g. {workload: deployment/web, moreThan: 1}"),
            );
            return None;
        };
        let workload = self.workload(w);
        let more_than = match &p.value.more_than {
            None => Some(0),
            Some(m) => match u32::try_from(m.value) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.err(
                        m,
                        format!("`moreThan` must be 0 or more, found {}", m.value),
                        None,
                    );
                    None
                }
            },
        };
        let hold = self.hold(p.value.for_.as_ref());
        let (workload, more_than, hold) = (workload?, more_than?, hold?);
        let what = format!(
            "more than {more_than} pod(s) of {}/{} not Ready",
            workload.kind.as_str(),
            workload.name
        );
        Some(AbortCondition {
            name: with_hold(&what, &hold),
            kind: AbortKind::PodsNotReady {
                workload,
                more_than,
            },
            hold,
        })
    }

    fn probe_down(&mut self, p: &S<RawProbeDown>) -> Option<AbortCondition> {
        let Some(name) = &p.value.probe else {
            self.err(
                p,
                "`probeDown` needs `probe`",
                Some("name one of the experiment's probes, e.g. {probe: web, for: 30s}"),
            );
            return None;
        };
        let probe = self.probe_ref(name);
        let hold = self.hold(p.value.for_.as_ref())?;
        Some(AbortCondition {
            name: with_hold(&format!("probe {probe} is Down"), &hold),
            kind: AbortKind::ProbeDown { probe },
            hold,
        })
    }

    fn query(&mut self, q: &S<RawQuery>) -> Option<AbortCondition> {
        let raw = &q.value;
        let query = match &raw.query {
            Some(text) if text.value.trim().is_empty() => {
                self.err(text, "`query` is empty", Some("write a PromQL expression"));
                None
            }
            Some(text) => Some(text.value.trim().to_string()),
            None => {
                self.err(
                    q,
                    "a `prometheus` condition needs `query`",
                    Some("write e.g. {query: 'sum(up{job=\"apiserver\"})', below: 1}"),
                );
                None
            }
        };
        let threshold = match (&raw.above, &raw.below) {
            (Some(a), Some(b)) => {
                let second = if (b.referenced.line(), b.referenced.column())
                    > (a.referenced.line(), a.referenced.column())
                {
                    b
                } else {
                    a
                };
                self.err(
                    second,
                    "give one of `above` and `below`, not both",
                    Some("write one condition per side"),
                );
                None
            }
            (Some(a), None) => self.finite(a).map(Threshold::Above),
            (None, Some(b)) => self.finite(b).map(Threshold::Below),
            (None, None) => {
                self.err(
                    q,
                    "a `prometheus` condition needs `above` or `below`",
                    Some("the side of the threshold that stops the run, e.g. `above: 0.05`"),
                );
                None
            }
        };
        let hold = self.hold(raw.for_.as_ref());
        let every = match &raw.every {
            None => Some(AbortSpec::DEFAULT_QUERY_EVERY),
            Some(e) => match parse_duration_detailed(&e.value) {
                Ok(d) if d < MIN_EVERY => {
                    self.err(
                        e,
                        format!("asking Prometheus every {} is too often", e.value),
                        Some("1s at least; its data changes once per scrape"),
                    );
                    None
                }
                Ok(d) => Some(d),
                Err(issue) => {
                    self.issue(e, issue);
                    None
                }
            },
        };
        let (query, threshold, hold, every) = (query?, threshold?, hold?, every?);
        let name = match &raw.name {
            Some(n) if n.value.trim().is_empty() => {
                self.err(n, "`name` is empty", None);
                return None;
            }
            Some(n) => with_hold(&format!("{} ({threshold})", n.value.trim()), &hold),
            None => with_hold(&format!("`{query}` {threshold}"), &hold),
        };
        Some(AbortCondition {
            name,
            kind: AbortKind::Query {
                query,
                threshold,
                every,
            },
            hold,
        })
    }

    fn finite(&mut self, v: &S<f64>) -> Option<f64> {
        if v.value.is_finite() {
            Some(v.value)
        } else {
            self.err(v, "the threshold must be a finite number", None);
            None
        }
    }
}
