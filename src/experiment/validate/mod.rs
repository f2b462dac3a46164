//! Raw file → validated [`Experiment`]: every rule that serde cannot express.
//!
//! Validation collects every problem instead of stopping at the first, so an author fixes
//! a file in one pass. Each problem points at the key or value that causes it.
//!
//! One submodule per part of the file: [`targets`], [`probes`], [`steps`], [`expectations`].

use std::path::Path;
use std::time::Duration;

use serde_saphyr::Location;

use super::bound::{BoundIssue, parse_bound_detailed, parse_duration_detailed};
use super::diagnostic::Diagnostic;
use super::model::*;
use super::raw::*;
use super::suggest::closest;

mod abort;
mod expectations;
mod probes;
mod roll;
mod setup_workloads;
mod steps;
mod targets;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a rolling step's node may take to be Ready again by default: as long as
/// faultline waits for a rebooted node to answer.
const DEFAULT_ROLL_TIMEOUT: Duration = Duration::from_secs(600);

/// Accumulates diagnostics for one file.
pub(crate) struct Validator<'a> {
    path: &'a Path,
    diags: Vec<Diagnostic>,
    /// What the file alone cannot prove wrong but will likely fail a run.
    warnings: Vec<Diagnostic>,
    targets: Vec<String>,
    steps: Vec<String>,
    /// Names under `probes:`, for expectations that refer to them.
    probe_names: Vec<String>,
    namespace: String,
    /// False when `targets` is missing: every reference would be "unknown", which is noise.
    check_target_refs: bool,
    /// `safety.maxNodesDown` (1 when not given), which a roll's `maxUnavailable` may not pass.
    max_nodes_down: u32,
}

fn at<T>(s: &S<T>) -> Location {
    s.referenced
}

/// Where a diagnostic goes when the key is missing entirely: the top of the file.
const TOP: (u32, u32) = (1, 1);

fn pos(loc: Location) -> (u32, u32) {
    (
        u32::try_from(loc.line()).unwrap_or(u32::MAX),
        u32::try_from(loc.column()).unwrap_or(u32::MAX),
    )
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters: what Kubernetes accepts as a
/// label-like name (DNS-1123 label).
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// DNS-1123 subdomain: dot-separated labels, at most 253 characters (object names).
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

impl<'a> Validator<'a> {
    pub(crate) fn new(path: &'a Path) -> Self {
        Validator {
            path,
            diags: Vec::new(),
            warnings: Vec::new(),
            targets: Vec::new(),
            steps: Vec::new(),
            probe_names: Vec::new(),
            namespace: "default".into(),
            check_target_refs: true,
            max_nodes_down: 1,
        }
    }

    fn report(
        &mut self,
        (line, column): (u32, u32),
        message: impl Into<String>,
        hint: Option<String>,
    ) {
        self.diags.push(Diagnostic {
            path: self.path.to_path_buf(),
            line,
            column,
            message: message.into(),
            hint,
        });
    }

    fn err<T>(&mut self, s: &S<T>, message: impl Into<String>, hint: Option<&str>) {
        self.report(pos(at(s)), message, hint.map(str::to_owned));
    }

    /// A `requires:` list (the experiment's or an expectation's): every name one faultline
    /// knows, the closest suggested otherwise.
    fn capabilities(&mut self, names: &[S<String>]) -> Vec<String> {
        let known = crate::capability::names();
        for r in names {
            if crate::capability::find(&r.value).is_none() {
                let hint = match closest(&r.value, &known) {
                    Some(near) => format!("did you mean `{near}`? known: {}", known.join(", ")),
                    None => format!("known: {}", known.join(", ")),
                };
                self.report(
                    pos(at(r)),
                    format!("`{}` is not a capability faultline knows", r.value),
                    Some(hint),
                );
            }
        }
        names.iter().map(|r| r.value.clone()).collect()
    }

    fn issue<T>(&mut self, s: &S<T>, issue: BoundIssue) {
        self.report(pos(at(s)), issue.message, issue.hint);
    }

    /// Validates the whole file: the experiment or every problem found, and the warnings,
    /// each in file order.
    pub(crate) fn experiment(
        mut self,
        raw: RawExperiment,
    ) -> (Result<Experiment, Vec<Diagnostic>>, Vec<Diagnostic>) {
        let result = self.checked(&raw);
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.sort_by_key(|d| (d.line, d.column));
        (result, warnings)
    }

    fn checked(&mut self, raw: &RawExperiment) -> Result<Experiment, Vec<Diagnostic>> {
        let name = match &raw.name {
            None => {
                self.report(TOP, "missing required key `name`", None);
                String::new()
            }
            Some(n) => {
                if n.value.is_empty()
                    || !n
                        .value
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                {
                    self.err(
                        n,
                        format!("experiment name `{}` may only use a-z, 0-9 and -", n.value),
                        Some("the name is used in report file names; write e.g. kubelet-stop-past-toleration"),
                    );
                }
                n.value.clone()
            }
        };
        let description = match &raw.description {
            None => {
                self.report(
                    TOP,
                    "missing required key `description`",
                    Some(
                        "say what the experiment proves and where the observation comes from"
                            .into(),
                    ),
                );
                String::new()
            }
            Some(d) => d.value.clone(),
        };
        if let Some(ns) = &raw.namespace {
            if !is_dns_label(&ns.value) {
                self.err(
                    ns,
                    format!("namespace `{}` is not a valid DNS-1123 label", ns.value),
                    None,
                );
            }
            self.namespace = ns.value.clone();
        }
        let requires = self.capabilities(&raw.requires);
        let targets = self.targets(raw);
        let probes = self.probes(raw, &targets);
        let setup = self.setup(raw);
        let observe = self.observe(raw);
        let safety = self.safety(raw);
        self.max_nodes_down = safety.max_nodes_down.unwrap_or(1);
        let steps = self.steps(raw);
        self.roll_orders_fit_named_targets(raw, &targets);
        let (expectations, conformance) = self.expectations(raw);
        let abort = self.abort(raw);
        if !self.diags.is_empty() {
            let mut diags = std::mem::take(&mut self.diags);
            diags.sort_by_key(|d| (d.line, d.column));
            return Err(diags);
        }
        self.workloads_setup_creates(raw, &setup, &targets);
        Ok(Experiment {
            name,
            description,
            tags: raw.tags.iter().map(|t| t.value.clone()).collect(),
            requires,
            source: self.path.to_path_buf(),
            namespace: self.namespace.clone(),
            targets,
            setup,
            teardown: Teardown {
                delete_manifests: raw
                    .teardown
                    .as_ref()
                    .and_then(|t| t.delete_manifests)
                    .unwrap_or(false),
            },
            steps,
            expectations,
            observe,
            safety,
            probes,
            abort,
            conformance,
        })
    }

    fn positive(&mut self, c: &S<i64>, key: &str) -> Option<u32> {
        match u32::try_from(c.value) {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                self.err(
                    c,
                    format!("`{key}` must be at least 1, found {}", c.value),
                    None,
                );
                None
            }
        }
    }

    fn unknown_target(&mut self, r: &S<String>) {
        let known: Vec<&str> = self.targets.iter().map(String::as_str).collect();
        let hint = match closest(&r.value, &known) {
            Some(s) => format!("did you mean `{s}`?"),
            None if known.is_empty() => "no targets are defined".into(),
            None => format!("known targets: {}", known.join(", ")),
        };
        self.report(
            pos(at(r)),
            format!("unknown target `{}`", r.value),
            Some(hint),
        );
    }

    fn target_ref(&mut self, r: &S<String>) -> String {
        if self.check_target_refs && !self.targets.contains(&r.value) {
            self.unknown_target(r);
        }
        r.value.clone()
    }

    fn step_ref(&mut self, r: &S<String>) -> String {
        if !self.steps.contains(&r.value) {
            let known: Vec<&str> = self.steps.iter().map(String::as_str).collect();
            let hint = match closest(&r.value, &known) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("known steps: {}", known.join(", ")),
            };
            self.report(
                pos(at(r)),
                format!("unknown step `{}`", r.value),
                Some(hint),
            );
        }
        r.value.clone()
    }

    fn setup(&mut self, raw: &RawExperiment) -> Setup {
        let Some(setup) = &raw.setup else {
            return Setup {
                manifests: Vec::new(),
                wait_timeout: DEFAULT_TIMEOUT,
            };
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut manifests = Vec::new();
        for m in &setup.manifests {
            let p = dir.join(&m.value);
            if !p.is_file() {
                self.err(
                    m,
                    format!("manifest `{}` not found", m.value),
                    Some("paths are relative to the experiment file's directory"),
                );
            }
            manifests.push(p);
        }
        let wait_timeout = setup
            .wait_timeout
            .as_ref()
            .and_then(|t| self.plain(t))
            .unwrap_or(DEFAULT_TIMEOUT);
        Setup {
            manifests,
            wait_timeout,
        }
    }

    fn plain(&mut self, t: &S<String>) -> Option<Duration> {
        match parse_duration_detailed(&t.value) {
            Ok(d) if d.is_zero() => {
                self.err(
                    t,
                    "a timeout of zero leaves no time for the action",
                    Some("write e.g. 2m"),
                );
                None
            }
            Ok(d) => Some(d),
            Err(issue) => {
                self.issue(t, issue);
                None
            }
        }
    }

    /// A bound. `toleration` is a pod's own toleration in an expectation about pods, and the
    /// cluster's default unreachable toleration in step times and `observe.for`; in an
    /// expectation about a node or a workload it has no meaning and is refused.
    fn bound(&mut self, b: &S<String>, toleration_ok: bool) -> Option<Bound> {
        match parse_bound_detailed(&b.value) {
            Ok(bound) => {
                if bound.uses_toleration() && !toleration_ok {
                    self.err(
                        b,
                        "`toleration` has no meaning in an expectation about a node or a workload",
                        Some("use grace, monitor or a fixed duration here"),
                    );
                    return None;
                }
                Some(bound)
            }
            Err(issue) => {
                self.issue(b, issue);
                None
            }
        }
    }

    fn observe(&mut self, raw: &RawExperiment) -> ObserveSpec {
        let Some(o) = &raw.observe else {
            return ObserveSpec {
                after_last_step: None,
                namespaces: Vec::new(),
                all_namespaces: false,
            };
        };
        let after_last_step = o.for_.as_ref().and_then(|f| self.bound(f, true));
        let (namespaces, all_namespaces) = match &o.namespaces {
            None => (Vec::new(), false),
            Some(spanned) => match &spanned.value {
                RawNamespaces::Word(w) if w == "all" => (Vec::new(), true),
                RawNamespaces::Word(w) => {
                    self.err(
                        spanned,
                        format!("`namespaces` is `all` or a list of namespaces, not `{w}`"),
                        Some("write `namespaces: all` or `namespaces: [web, db]`"),
                    );
                    (Vec::new(), false)
                }
                RawNamespaces::List(list) => {
                    for ns in list {
                        if !is_dns_label(&ns.value) {
                            self.err(
                                ns,
                                format!("namespace `{}` is not a valid DNS-1123 label", ns.value),
                                None,
                            );
                        }
                    }
                    (list.iter().map(|n| n.value.clone()).collect(), false)
                }
            },
        };
        ObserveSpec {
            after_last_step,
            namespaces,
            all_namespaces,
        }
    }

    fn safety(&mut self, raw: &RawExperiment) -> SafetySpec {
        let Some(s) = &raw.safety else {
            return SafetySpec::default();
        };
        SafetySpec {
            max_nodes_down: s
                .max_nodes_down
                .as_ref()
                .and_then(|m| self.positive(m, "maxNodesDown")),
            allow_control_plane: s.allow_control_plane.unwrap_or(false),
            allow_quorum_loss: s.allow_quorum_loss.unwrap_or(false),
        }
    }
}
