//! Raw file → validated [`Experiment`]: every rule that serde cannot express.
//!
//! Validation collects every problem instead of stopping at the first, so an author fixes
//! a file in one pass. Each problem points at the key or value that causes it.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde_saphyr::Location;

use super::bound::{BoundIssue, parse_bound_detailed, parse_duration_detailed};
use super::diagnostic::Diagnostic;
use super::model::*;
use super::raw::*;
use super::states::{SubjectKind, TAINT_EFFECTS, effect_issue, parse_state};
use super::suggest::closest;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

const ACTIONS: [&str; 17] = [
    "kubelet-stop",
    "kubelet-start",
    "kubelet-restart",
    "reboot",
    "power-off",
    "power-on",
    "partition",
    "heal",
    "run",
    "cordon",
    "uncordon",
    "drain",
    "delete-node",
    "delete-pods",
    "delete-pvc",
    "taint",
    "untaint",
];

/// Accumulates diagnostics for one file.
pub(crate) struct Validator<'a> {
    path: &'a Path,
    diags: Vec<Diagnostic>,
    targets: Vec<String>,
    steps: Vec<String>,
    namespace: String,
    /// False when `targets` is missing: every reference would be "unknown", which is noise.
    check_target_refs: bool,
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

fn is_node_action(action: &str) -> bool {
    !matches!(action, "delete-pods" | "delete-pvc")
}

impl<'a> Validator<'a> {
    pub(crate) fn new(path: &'a Path) -> Self {
        Validator {
            path,
            diags: Vec::new(),
            targets: Vec::new(),
            steps: Vec::new(),
            namespace: "default".into(),
            check_target_refs: true,
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

    fn issue<T>(&mut self, s: &S<T>, issue: BoundIssue) {
        self.report(pos(at(s)), issue.message, issue.hint);
    }

    /// Validates the whole file; `Err` holds every problem found, in file order.
    pub(crate) fn experiment(mut self, raw: RawExperiment) -> Result<Experiment, Vec<Diagnostic>> {
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
        let targets = self.targets(&raw);
        let setup = self.setup(&raw);
        let observe = self.observe(&raw);
        let safety = self.safety(&raw);
        let steps = self.steps(&raw);
        let expectations = self.expectations(&raw);
        if !self.diags.is_empty() {
            self.diags.sort_by_key(|d| (d.line, d.column));
            return Err(self.diags);
        }
        Ok(Experiment {
            name,
            description,
            tags: raw.tags.iter().map(|t| t.value.clone()).collect(),
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
        })
    }

    fn targets(&mut self, raw: &RawExperiment) -> Vec<TargetSpec> {
        let Some(targets) = &raw.targets else {
            self.check_target_refs = false;
            self.report(TOP, "missing required key `targets`", Some("name at least one node set, e.g. `targets: {victim: {role: worker, count: 1}}`".into()));
            return Vec::new();
        };
        if targets.value.0.is_empty() {
            self.err(
                targets,
                "`targets` is empty",
                Some("name at least one node set"),
            );
        }
        let mut out = Vec::new();
        for (name, target) in &targets.value.0 {
            if !is_dns_label(&name.value) {
                self.err(
                    name,
                    format!("target name `{}` may only use a-z, 0-9 and -", name.value),
                    None,
                );
            }
            let t = &target.value;
            let role = t.role.as_ref().and_then(|r| match r.value.as_str() {
                "worker" => Some(NodeRole::Worker),
                "control-plane" => Some(NodeRole::ControlPlane),
                other => {
                    self.err(
                        r,
                        format!("unknown role `{other}`"),
                        Some("roles are worker, control-plane"),
                    );
                    None
                }
            });
            let running_pods_of = t.running_pods_of.as_ref().and_then(|w| self.workload(w));
            for n in &t.names {
                if !is_dns_label(&n.value) {
                    self.err(
                        n,
                        format!("node name `{}` is not a valid DNS-1123 label", n.value),
                        Some("node names use a-z, 0-9 and -, at most 63 characters"),
                    );
                }
            }
            for e in &t.exclude {
                if e.value == name.value {
                    self.err(
                        e,
                        format!("target `{}` cannot exclude itself", e.value),
                        Some("`exclude` names another, earlier target"),
                    );
                } else if !self.targets.contains(&e.value) {
                    let later = targets.value.0.iter().any(|(n, _)| n.value == e.value);
                    if later {
                        self.err(
                            e,
                            format!(
                                "`exclude` must name an earlier target; `{}` is defined later",
                                e.value
                            ),
                            Some("move the excluded target above this one"),
                        );
                    } else {
                        self.unknown_target(e);
                    }
                }
            }
            let count = t.count.as_ref().and_then(|c| self.positive(c, "count"));
            self.targets.push(name.value.clone());
            out.push(TargetSpec {
                name: name.value.clone(),
                selector: NodeSelector {
                    names: t.names.iter().map(|n| n.value.clone()).collect(),
                    labels: t.labels.clone(),
                    role,
                    running_pods_of,
                    exclude_targets: t.exclude.iter().map(|e| e.value.clone()).collect(),
                },
                count,
            });
        }
        out
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

    fn workload(&mut self, w: &S<String>) -> Option<WorkloadRef> {
        let parts: Vec<&str> = w.value.split('/').collect();
        let (kind, namespace, name) = match parts.as_slice() {
            [k, n] => (*k, self.namespace.clone(), *n),
            [k, ns, n] => (*k, (*ns).to_owned(), *n),
            _ => {
                self.err(
                    w,
                    format!("invalid workload reference `{}`", w.value),
                    Some("write kind/name or kind/namespace/name, e.g. deployment/web"),
                );
                return None;
            }
        };
        let kind = match kind {
            "deployment" => WorkloadKind::Deployment,
            "statefulset" => WorkloadKind::StatefulSet,
            "daemonset" => WorkloadKind::DaemonSet,
            other => {
                let hint = match closest(other, &["deployment", "statefulset", "daemonset"]) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => "kinds are deployment, statefulset, daemonset".into(),
                };
                self.report(
                    pos(at(w)),
                    format!("unknown workload kind `{other}` in `{}`", w.value),
                    Some(hint),
                );
                return None;
            }
        };
        if !is_dns_label(&namespace) || !is_dns_subdomain(name) {
            self.err(
                w,
                format!("invalid workload reference `{}`", w.value),
                Some("namespace and name must be lowercase DNS-1123 names"),
            );
            return None;
        }
        Some(WorkloadRef {
            kind,
            namespace,
            name: name.to_owned(),
        })
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

    /// A bound; `toleration` only where the subject is pods.
    fn bound(&mut self, b: &S<String>, toleration_ok: bool) -> Option<Bound> {
        match parse_bound_detailed(&b.value) {
            Ok(bound) => {
                if bound.uses_toleration() && !toleration_ok {
                    self.err(
                        b,
                        "`toleration` is only meaningful in an expectation about pods",
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
            };
        };
        let after_last_step = o.for_.as_ref().and_then(|f| self.bound(f, false));
        for ns in &o.namespaces {
            if !is_dns_label(&ns.value) {
                self.err(
                    ns,
                    format!("namespace `{}` is not a valid DNS-1123 label", ns.value),
                    None,
                );
            }
        }
        ObserveSpec {
            after_last_step,
            namespaces: o.namespaces.iter().map(|n| n.value.clone()).collect(),
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
        }
    }

    fn default_step_name(step: &RawStep) -> String {
        let action = step
            .do_
            .as_ref()
            .map(|d| d.value.as_str())
            .unwrap_or("step");
        match &step.target {
            Some(t) => format!("{action} {}", t.value),
            None => action.to_owned(),
        }
    }

    fn steps(&mut self, raw: &RawExperiment) -> Vec<Step> {
        let Some(steps) = &raw.steps else {
            self.report(
                TOP,
                "missing required key `steps`",
                Some("an experiment needs at least one step".into()),
            );
            return Vec::new();
        };
        if steps.value.is_empty() {
            self.err(
                steps,
                "`steps` is empty",
                Some("an experiment needs at least one step"),
            );
        }
        let names: Vec<String> = steps
            .value
            .iter()
            .map(|s| {
                s.value
                    .name
                    .as_ref()
                    .map(|n| n.value.clone())
                    .unwrap_or_else(|| Self::default_step_name(&s.value))
            })
            .collect();
        let mut out = Vec::new();
        for (i, step) in steps.value.iter().enumerate() {
            let name = names[i].clone();
            if names[..i].contains(&name) {
                match &step.value.name {
                    Some(n) => self.err(
                        n,
                        format!("duplicate step name `{name}`"),
                        Some("step names must be unique"),
                    ),
                    None => self.err(
                        step,
                        format!("duplicate step name `{name}` (the default name of this step)"),
                        Some("give the step a `name:`"),
                    ),
                }
            }
            if let Some(s) = self.step(step, &name, &names[..i], &names[i + 1..]) {
                out.push(s);
            }
            self.steps.push(name);
        }
        out
    }

    fn step(
        &mut self,
        step: &S<RawStep>,
        name: &str,
        earlier: &[String],
        later: &[String],
    ) -> Option<Step> {
        let s = &step.value;
        let time = self.step_time(step, earlier, later);
        let Some(do_) = &s.do_ else {
            if let Some(t) = &s.target {
                self.target_ref(t);
            }
            self.err(
                step,
                "step has no `do`",
                Some(&format!("actions: {}", ACTIONS.join(", "))),
            );
            return None;
        };
        let action_name = do_.value.as_str();
        if !ACTIONS.contains(&action_name) {
            let hint = match closest(action_name, &ACTIONS) {
                Some(a) => format!("did you mean `{a}`?"),
                None => format!("actions: {}", ACTIONS.join(", ")),
            };
            self.report(
                pos(at(do_)),
                format!("unknown action `{action_name}`"),
                Some(hint),
            );
            if let Some(t) = &s.target {
                self.target_ref(t);
            }
            return None;
        }
        let target = match (&s.target, is_node_action(action_name)) {
            (Some(t), true) => Some(self.target_ref(t)),
            (None, true) => {
                self.err(
                    do_,
                    format!("`{action_name}` acts on nodes and needs a `target`"),
                    None,
                );
                None
            }
            (Some(t), false) => {
                self.err(
                    t,
                    format!("`{action_name}` goes through the API and takes no `target`"),
                    Some("to limit pods to a target's nodes use `pods: {on: <target>}`"),
                );
                None
            }
            (None, false) => None,
        };
        self.only_for(&s.command, "command", action_name, &["run"]);
        self.only_for(&s.undo, "undo", action_name, &["run"]);
        self.only_for(&s.pods, "pods", action_name, &["delete-pods"]);
        self.only_for(&s.force, "force", action_name, &["delete-pods"]);
        self.only_for(&s.pvc, "pvc", action_name, &["delete-pvc"]);
        self.only_for(
            &s.remove_finalizers,
            "removeFinalizers",
            action_name,
            &["delete-pvc"],
        );
        self.only_for(&s.taint, "taint", action_name, &["taint", "untaint"]);
        let action = self.action(step, do_, action_name)?;
        let timeout = match &s.timeout {
            Some(t) => self.plain(t)?,
            None => DEFAULT_TIMEOUT,
        };
        Some(Step {
            name: name.to_owned(),
            at: time?,
            action,
            target,
            timeout,
        })
    }

    fn only_for<T>(&mut self, field: &Option<S<T>>, key: &str, action: &str, allowed: &[&str]) {
        if let Some(f) = field
            && !allowed.contains(&action)
        {
            let list: Vec<String> = allowed.iter().map(|a| format!("`do: {a}`")).collect();
            self.err(
                f,
                format!(
                    "`{key}` only applies to {}, not `do: {action}`",
                    list.join(" and ")
                ),
                None,
            );
        }
    }

    fn action(&mut self, step: &S<RawStep>, do_: &S<String>, name: &str) -> Option<Action> {
        let s = &step.value;
        Some(match name {
            "kubelet-stop" => Action::KubeletStop,
            "kubelet-start" => Action::KubeletStart,
            "kubelet-restart" => Action::KubeletRestart,
            "reboot" => Action::Reboot,
            "power-off" => Action::PowerOff,
            "power-on" => Action::PowerOn,
            "partition" => Action::Partition,
            "heal" => Action::Heal,
            "cordon" => Action::Cordon,
            "uncordon" => Action::Uncordon,
            "drain" => Action::Drain,
            "delete-node" => Action::DeleteNode,
            "run" => {
                let Some(command) = &s.command else {
                    self.err(
                        do_,
                        "`do: run` needs a `command`",
                        Some("e.g. `command: systemctl stop foo`"),
                    );
                    return None;
                };
                if command.value.trim().is_empty() {
                    self.err(command, "`command` is empty", None);
                    return None;
                }
                Action::Run {
                    command: command.value.clone(),
                    undo: s.undo.as_ref().map(|u| u.value.clone()),
                }
            }
            "delete-pods" => {
                let Some(pods) = &s.pods else {
                    self.err(
                        do_,
                        "`do: delete-pods` needs `pods`",
                        Some("e.g. `pods: {workload: statefulset/db, on: victim}`"),
                    );
                    return None;
                };
                let selector = self.pod_selector(pods)?;
                Action::DeletePods {
                    pods: selector,
                    force: s.force.as_ref().is_some_and(|f| f.value),
                }
            }
            "delete-pvc" => {
                let Some(pvc) = &s.pvc else {
                    self.err(
                        do_,
                        "`do: delete-pvc` needs `pvc`",
                        Some("e.g. `pvc: {name: data-db-0}`"),
                    );
                    return None;
                };
                let Some(pvc_name) = &pvc.value.name else {
                    self.err(pvc, "`pvc` needs a `name`", None);
                    return None;
                };
                if !is_dns_subdomain(&pvc_name.value) {
                    self.err(
                        pvc_name,
                        format!("`{}` is not a valid claim name", pvc_name.value),
                        None,
                    );
                }
                Action::DeletePvc {
                    namespace: pvc
                        .value
                        .namespace
                        .as_ref()
                        .map(|n| n.value.clone())
                        .unwrap_or_else(|| self.namespace.clone()),
                    name: pvc_name.value.clone(),
                    remove_finalizers: s.remove_finalizers.as_ref().is_some_and(|r| r.value),
                }
            }
            "taint" | "untaint" => {
                let Some(taint) = &s.taint else {
                    self.err(
                        do_,
                        format!("`do: {name}` needs `taint`"),
                        Some("e.g. `taint: {key: example.com/chaos, effect: NoExecute}`"),
                    );
                    return None;
                };
                let spec = self.taint(taint)?;
                if name == "taint" {
                    Action::Taint(spec)
                } else {
                    Action::Untaint(spec)
                }
            }
            _ => return None,
        })
    }

    fn taint(&mut self, taint: &S<RawTaint>) -> Option<TaintSpec> {
        let t = &taint.value;
        let key = match &t.key {
            Some(k) if !k.value.is_empty() => Some(k.value.clone()),
            _ => {
                self.err(taint, "`taint` needs a `key`", None);
                None
            }
        };
        let effect = match &t.effect {
            Some(e) if TAINT_EFFECTS.contains(&e.value.as_str()) => Some(e.value.clone()),
            Some(e) => {
                let issue = effect_issue(&e.value);
                self.report(pos(at(e)), issue.message, issue.hint);
                None
            }
            None => {
                self.err(
                    taint,
                    "`taint` needs an `effect`",
                    Some("effects are NoSchedule, PreferNoSchedule, NoExecute"),
                );
                None
            }
        };
        Some(TaintSpec {
            key: key?,
            value: t.value.as_ref().map(|v| v.value.clone()),
            effect: effect?,
        })
    }

    fn pod_selector(&mut self, pods: &S<RawPods>) -> Option<PodSelector> {
        let p = &pods.value;
        for (field, key) in [
            (&p.not_on, "notOn"),
            (&p.generation, "generation"),
            (&p.count, "count"),
        ] {
            if let Some(f) = field {
                self.err(
                    f,
                    format!("`{key}` is not allowed in a step's `pods`"),
                    Some("a step selects pods with workload or labels, namespace and on"),
                );
            }
        }
        let workload = match &p.workload {
            Some(w) => Some(self.workload(w)?),
            None => None,
        };
        let labels = p
            .labels
            .as_ref()
            .map(|l| l.value.clone())
            .unwrap_or_default();
        if workload.is_none() && labels.is_empty() {
            self.err(pods, "`pods` needs a `workload` or `labels`", None);
            return None;
        }
        Some(PodSelector {
            namespace: p
                .namespace
                .as_ref()
                .map(|n| n.value.clone())
                .or_else(|| workload.as_ref().map(|w| w.namespace.clone()))
                .unwrap_or_else(|| self.namespace.clone()),
            workload,
            labels,
            on: p.on.as_ref().map(|o| self.target_ref(o)),
        })
    }

    fn step_time(
        &mut self,
        step: &S<RawStep>,
        earlier: &[String],
        later: &[String],
    ) -> Option<StepTime> {
        let s = &step.value;
        let given: Vec<Location> = [
            s.at.as_ref().map(at),
            s.after.as_ref().map(at),
            s.when.as_ref().map(at),
        ]
        .into_iter()
        .flatten()
        .collect();
        if given.len() > 1 {
            let mut locs = given.clone();
            locs.sort_by_key(|l| (l.line(), l.column()));
            self.report(
                pos(locs[1]),
                "a step takes exactly one of `at`, `after`, `when`",
                None,
            );
            return None;
        }
        let delay = |v: &mut Self| match &s.delay {
            Some(d) => v.bound(d, false),
            None => Some(Bound::fixed(Duration::ZERO)),
        };
        if let Some(a) = &s.at {
            if let Some(d) = &s.delay {
                self.err(
                    d,
                    "`delay` only goes with `after` or `when`",
                    Some("put the offset in `at`"),
                );
            }
            return self.bound(a, false).map(StepTime::Offset);
        }
        if let Some(a) = &s.after {
            let ok = if earlier.contains(&a.value) {
                true
            } else if later.contains(&a.value) {
                self.err(
                    a,
                    format!(
                        "`after` must name an earlier step; `{}` comes later",
                        a.value
                    ),
                    Some("steps are issued in file order"),
                );
                false
            } else {
                let known: Vec<&str> = earlier.iter().map(String::as_str).collect();
                let hint = match closest(&a.value, &known) {
                    Some(k) => format!("did you mean `{k}`?"),
                    None => format!("earlier steps: {}", known.join(", ")),
                };
                self.report(
                    pos(at(a)),
                    format!("unknown step `{}`", a.value),
                    Some(hint),
                );
                false
            };
            let delay = delay(self);
            return if ok {
                Some(StepTime::AfterStep {
                    step: a.value.clone(),
                    delay: delay?,
                })
            } else {
                None
            };
        }
        if let Some(w) = &s.when {
            let (subject, kind) =
                self.subject(w, &w.value.node, &w.value.pods, &w.value.workload)?;
            let Some(is) = &w.value.is else {
                self.err(w, "`when` needs `is: <state>`", None);
                return None;
            };
            let state = self.state(is, kind)?;
            let delay = delay(self)?;
            return Some(StepTime::When {
                subject,
                state,
                delay,
            });
        }
        self.err(
            step,
            "a step needs one of `at`, `after`, `when`",
            Some("e.g. `at: 0s`"),
        );
        None
    }

    fn state(&mut self, s: &S<RawState>, kind: SubjectKind) -> Option<StateMatch> {
        match parse_state(&s.value, kind) {
            Ok(st) => Some(st),
            Err(issue) => {
                self.report(pos(at(s)), issue.message, issue.hint);
                None
            }
        }
    }

    /// Exactly one of node / pods / workload.
    fn subject<T>(
        &mut self,
        owner: &S<T>,
        node: &Option<S<String>>,
        pods: &Option<S<RawPods>>,
        workload: &Option<S<String>>,
    ) -> Option<(Subject, SubjectKind)> {
        let mut given: Vec<Location> = [
            node.as_ref().map(at),
            pods.as_ref().map(at),
            workload.as_ref().map(at),
        ]
        .into_iter()
        .flatten()
        .collect();
        given.sort_by_key(|l| (l.line(), l.column()));
        if given.len() > 1 {
            self.report(
                pos(given[1]),
                "exactly one subject is allowed: `node`, `pods` or `workload`",
                None,
            );
            return None;
        }
        if let Some(n) = node {
            return Some((
                Subject::Node {
                    target: self.target_ref(n),
                },
                SubjectKind::Node,
            ));
        }
        if let Some(p) = pods {
            return Some((Subject::Pods(self.pod_subject(p)?), SubjectKind::Pods));
        }
        if let Some(w) = workload {
            return Some((Subject::Workload(self.workload(w)?), SubjectKind::Workload));
        }
        self.err(
            owner,
            "no subject: write one of `node`, `pods` or `workload`",
            None,
        );
        None
    }

    fn pod_subject(&mut self, pods: &S<RawPods>) -> Option<PodSubject> {
        let p = &pods.value;
        if let Some(l) = &p.labels {
            self.err(
                l,
                "`labels` is not allowed in an expectation's `pods`",
                Some("name the pods by `workload`"),
            );
        }
        if let Some(n) = &p.namespace {
            self.err(
                n,
                "`namespace` is not allowed in an expectation's `pods`",
                Some("write workload: kind/namespace/name"),
            );
        }
        let on = p.on.as_ref().map(|o| self.target_ref(o));
        let not_on = p.not_on.as_ref().map(|o| self.target_ref(o));
        let generation = match &p.generation {
            None => Some(PodGeneration::Existing),
            Some(g) => match g.value.as_str() {
                "existing" => Some(PodGeneration::Existing),
                "replacements" => Some(PodGeneration::Replacements),
                other => {
                    self.err(
                        g,
                        format!("unknown generation `{other}`"),
                        Some("generations are existing, replacements"),
                    );
                    None
                }
            },
        };
        let quantifier = match &p.count {
            None => Some(Quantifier::All),
            Some(c) => match c.value.as_str() {
                "all" => Some(Quantifier::All),
                "any" => Some(Quantifier::Any),
                n => match n.parse::<u32>() {
                    Ok(n) if n >= 1 => Some(Quantifier::AtLeast(n)),
                    Ok(_) => {
                        self.err(
                            c,
                            "`count` must be at least 1, found 0",
                            Some("write `any` for at least one pod"),
                        );
                        None
                    }
                    Err(_) => {
                        self.err(
                            c,
                            format!("invalid count `{n}`"),
                            Some("write all, any or a positive number"),
                        );
                        None
                    }
                },
            },
        };
        let Some(w) = &p.workload else {
            self.err(
                pods,
                "`pods` needs a `workload`",
                Some("e.g. `pods: {workload: deployment/web, on: victim}`"),
            );
            return None;
        };
        let workload = self.workload(w)?;
        Some(PodSubject {
            workload,
            on,
            not_on,
            generation: generation?,
            quantifier: quantifier?,
        })
    }

    fn expectations(&mut self, raw: &RawExperiment) -> Vec<Expectation> {
        let Some(expect) = &raw.expect else {
            self.report(
                TOP,
                "missing required key `expect`",
                Some("an experiment needs at least one expectation".into()),
            );
            return Vec::new();
        };
        if expect.value.is_empty() {
            self.err(
                expect,
                "`expect` is empty",
                Some("an experiment needs at least one expectation"),
            );
        }
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for e in &expect.value {
            if let Some(n) = &e.value.name
                && !seen.insert(n.value.clone())
            {
                self.err(
                    n,
                    format!("duplicate expectation name `{}`", n.value),
                    Some("expectation names are test-case names and must be unique"),
                );
            }
            if let Some(x) = self.expectation(e) {
                out.push(x);
            }
        }
        out
    }

    fn expectation(&mut self, e: &S<RawExpectation>) -> Option<Expectation> {
        let x = &e.value;
        let name = match &x.name {
            Some(n) => Some(n.value.clone()),
            None => {
                self.err(
                    e,
                    "expectation has no `name`",
                    Some("the name is the JUnit test-case name"),
                );
                None
            }
        };
        let subject = self.subject(e, &x.node, &x.pods, &x.workload);
        let kind = subject.as_ref().map(|(_, k)| *k);
        let check = self.check(e, kind);
        let since = match &x.since {
            Some(s) => Some(self.step_ref(s)),
            None => self.steps.first().cloned(),
        };
        for r in &x.requires {
            if r.value.is_empty() || !r.value.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                self.err(
                    r,
                    format!("capability `{}` may only use a-z and -", r.value),
                    None,
                );
            }
        }
        Some(Expectation {
            name: name?,
            subject: subject?.0,
            check: check?,
            since: since?,
            requires: x.requires.iter().map(|r| r.value.clone()).collect(),
        })
    }

    fn check(&mut self, e: &S<RawExpectation>, kind: Option<SubjectKind>) -> Option<Check> {
        let x = &e.value;
        let mut checks: Vec<(Location, &str)> = [
            x.becomes.as_ref().map(|s| (at(s), "becomes")),
            x.stays.as_ref().map(|s| (at(s), "stays")),
            x.never.as_ref().map(|s| (at(s), "never")),
            x.eventually.as_ref().map(|s| (at(s), "eventually")),
            x.restarts.as_ref().map(|s| (at(s), "restarts")),
            x.replaced.as_ref().map(|s| (at(s), "replaced")),
        ]
        .into_iter()
        .flatten()
        .collect();
        checks.sort_by_key(|(l, _)| (l.line(), l.column()));
        let pods_ok = kind == Some(SubjectKind::Pods);
        // Windows belong to `becomes`, holds to `stays`.
        if x.becomes.is_none() {
            for (w, key) in [(&x.within, "within"), (&x.after, "after")] {
                if let Some(w) = w {
                    self.err(
                        w,
                        format!("`{key}` only goes with `becomes`"),
                        Some("write `becomes: <state>` with the window"),
                    );
                }
            }
            if let Some(b) = &x.between {
                self.err(
                    b,
                    "`between` only goes with `becomes`",
                    Some("write `becomes: <state>` with the window"),
                );
            }
        }
        if x.stays.is_none() {
            if let Some(u) = &x.until {
                self.err(u, "`until` only goes with `stays`", None);
            }
            if let Some(f) = &x.for_ {
                self.err(f, "`for` only goes with `stays`", None);
            }
        }
        if checks.len() > 1 {
            self.report(
                pos(checks[1].0),
                format!(
                    "an expectation has exactly one check; `{}` is a second one",
                    checks[1].1
                ),
                Some("split it into two expectations".into()),
            );
            return None;
        }
        if checks.is_empty() {
            self.err(e, "no check: write one of `becomes`, `stays`, `never`, `eventually`, `restarts`, `replaced`", None);
            return None;
        }
        if let Some(b) = &x.becomes {
            let state = kind.and_then(|k| self.state(b, k));
            let window = self.window(e, b, pods_ok);
            return Some(Check::Becomes {
                state: state?,
                window: window?,
            });
        }
        if let Some(ev) = &x.eventually {
            let state = self.state(ev, kind?)?;
            return Some(Check::Becomes {
                state,
                window: Window::Eventually,
            });
        }
        if let Some(s) = &x.stays {
            let state = kind.and_then(|k| self.state(s, k));
            let until = match (&x.until, &x.for_) {
                (Some(_), Some(f)) => {
                    self.err(f, "`stays` takes one of `until` and `for`, not both", None);
                    None
                }
                (Some(u), None) if u.value == "end" => Some(Until::End),
                (Some(u), None) => Some(Until::Step(self.step_ref(u))),
                (None, Some(f)) => self.bound(f, pods_ok).map(Until::For),
                (None, None) => {
                    self.err(
                        s,
                        "`stays` needs `until: <step name>`, `until: end` or `for: <bound>`",
                        None,
                    );
                    None
                }
            };
            return Some(Check::Stays {
                state: state?,
                until: until?,
            });
        }
        if let Some(n) = &x.never {
            let state = self.state(n, kind?)?;
            return Some(Check::Never { state });
        }
        if let Some(r) = &x.restarts {
            let changed = match r.value.as_str() {
                "changed" => Some(true),
                "unchanged" => Some(false),
                other => {
                    self.err(
                        r,
                        format!("`restarts` is `changed` or `unchanged`, found `{other}`"),
                        None,
                    );
                    None
                }
            };
            if kind.is_some() && !pods_ok {
                self.err(r, "`restarts` only applies to a `pods` subject", None);
                return None;
            }
            return Some(Check::Restarts { changed: changed? });
        }
        if let Some(r) = &x.replaced {
            if kind.is_some() && !pods_ok {
                self.err(r, "`replaced` only applies to a `pods` subject", None);
                return None;
            }
            return Some(Check::Replaced { replaced: r.value });
        }
        None
    }

    /// The window of a `becomes`: exactly one of `within`, `after`, `between`.
    fn window(
        &mut self,
        e: &S<RawExpectation>,
        becomes: &S<RawState>,
        pods_ok: bool,
    ) -> Option<Window> {
        let x = &e.value;
        let mut given: Vec<Location> = [
            x.within.as_ref().map(at),
            x.after.as_ref().map(at),
            x.between.as_ref().map(at),
        ]
        .into_iter()
        .flatten()
        .collect();
        given.sort_by_key(|l| (l.line(), l.column()));
        if given.len() > 1 {
            self.report(
                pos(given[1]),
                "`becomes` takes exactly one of `within`, `after`, `between`",
                None,
            );
            return None;
        }
        if let Some(w) = &x.within {
            return self.bound(w, pods_ok).map(Window::Within);
        }
        if let Some(a) = &x.after {
            return self.bound(a, pods_ok).map(Window::After);
        }
        if let Some(b) = &x.between {
            let [lo, hi] = b.value.as_slice() else {
                self.err(
                    b,
                    format!("`between` needs exactly 2 bounds, found {}", b.value.len()),
                    Some("write `between: [grace, grace + 30s]`"),
                );
                return None;
            };
            let lo_b = self.bound(lo, pods_ok);
            let hi_b = self.bound(hi, pods_ok);
            let (lo_b, hi_b) = (lo_b?, hi_b?);
            if let Some(order) = compare(&lo_b, &hi_b)
                && order == std::cmp::Ordering::Greater
            {
                self.err(
                    lo,
                    format!(
                        "`between` is reversed: `{}` is later than `{}`",
                        lo.value, hi.value
                    ),
                    Some("write the earlier bound first"),
                );
                return None;
            }
            return Some(Window::Between(lo_b, hi_b));
        }
        self.err(
            becomes,
            "`becomes` needs a window: `within`, `after` or `between`",
            Some("use `eventually: <state>` when any time before the end will do"),
        );
        None
    }
}

/// Orders two bounds when they use the same symbols with the same factors (so only their
/// fixed parts differ); `None` when the order depends on the cluster's timers.
fn compare(a: &Bound, b: &Bound) -> Option<std::cmp::Ordering> {
    fn split(b: &Bound) -> (f64, Vec<(String, i64)>) {
        let mut fixed = 0.0;
        let mut symbols: Vec<(String, i64)> = Vec::new();
        for t in &b.terms {
            match &t.symbol {
                BoundSymbol::Fixed(d) => fixed += t.factor * d.as_secs_f64(),
                other => {
                    let key = format!("{other:?}");
                    // Factors compared in thousandths: written factors are short decimals.
                    let f = (t.factor * 1000.0).round() as i64;
                    match symbols.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, v)) => *v += f,
                        None => symbols.push((key, f)),
                    }
                }
            }
        }
        symbols.retain(|(_, f)| *f != 0);
        symbols.sort();
        (fixed, symbols)
    }
    let (fa, sa) = split(a);
    let (fb, sb) = split(b);
    if sa != sb {
        return None;
    }
    fa.partial_cmp(&fb)
}
