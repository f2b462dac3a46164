//! `steps:`: when each step is issued, what it does, and the keys each action takes.

use std::time::Duration;

use serde_saphyr::Location;

use super::{DEFAULT_TIMEOUT, is_dns_subdomain};
use super::{TOP, Validator, at, pos};
use crate::experiment::fault::{self, ActionKind};
use crate::experiment::model::*;
use crate::experiment::raw::*;
use crate::experiment::states::{TAINT_EFFECTS, effect_issue};
use crate::experiment::suggest::closest;

impl Validator<'_> {
    pub(super) fn default_step_name(step: &RawStep) -> String {
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

    pub(super) fn steps(&mut self, raw: &RawExperiment) -> Vec<Step> {
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

    pub(super) fn step(
        &mut self,
        step: &S<RawStep>,
        name: &str,
        earlier: &[String],
        later: &[String],
    ) -> Option<Step> {
        let s = &step.value;
        let time = self.step_time(step, name, earlier, later);
        if let Some(sequence) = &s.sequence {
            return self.sequence_step(step, sequence, name, time);
        }
        let (kind, action) = self.step_action(step);
        let target = match (&s.target, kind) {
            (Some(t), None) => {
                self.target_ref(t);
                None
            }
            (Some(t), Some(kind)) if kind.info().via.needs_target() => Some(self.target_ref(t)),
            (None, Some(kind)) if kind.info().via.needs_target() => {
                let do_ = s.do_.as_ref()?;
                self.err(
                    do_,
                    format!("`{}` acts on nodes and needs a `target`", do_.value),
                    None,
                );
                None
            }
            (Some(t), Some(_)) => {
                self.err(
                    t,
                    format!(
                        "`{}` goes through the API and takes no `target`",
                        s.do_.as_ref().map_or("", |d| d.value.as_str())
                    ),
                    Some("to limit pods to a target's nodes use `pods: {on: <target>}`"),
                );
                None
            }
            (None, _) => None,
        };
        let action = action?;
        let roll = match &s.roll {
            Some(r) => Some(self.roll(r, std::slice::from_ref(&(action.clone(), None)))?),
            None => None,
        };
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
            roll,
        })
    }

    /// The action a step (or an entry of a `sequence:`) does: its `do:` and the keys that
    /// action takes. The kind is known even when its keys are wrong (`None` action).
    pub(super) fn step_action(
        &mut self,
        step: &S<RawStep>,
    ) -> (Option<ActionKind>, Option<Action>) {
        let s = &step.value;
        let actions = fault::names();
        let Some(do_) = &s.do_ else {
            self.err(
                step,
                "step has no `do`",
                Some(&format!("actions: {}", actions.join(", "))),
            );
            return (None, None);
        };
        let action_name = do_.value.as_str();
        let Some(kind) = ActionKind::named(action_name) else {
            let hint = match closest(action_name, &actions) {
                Some(a) => format!("did you mean `{a}`?"),
                None => format!("actions: {}", actions.join(", ")),
            };
            self.report(
                pos(at(do_)),
                format!("unknown action `{action_name}`"),
                Some(hint),
            );
            return (None, None);
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
        self.only_for(&s.on_timeout, "onTimeout", action_name, &["drain"]);
        (Some(kind), self.action(step, do_, kind))
    }

    pub(super) fn only_for<T>(
        &mut self,
        field: &Option<S<T>>,
        key: &str,
        action: &str,
        allowed: &[&str],
    ) {
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

    pub(super) fn action(
        &mut self,
        step: &S<RawStep>,
        do_: &S<String>,
        kind: ActionKind,
    ) -> Option<Action> {
        let s = &step.value;
        if kind == ActionKind::Drain {
            return Some(Action::Drain {
                on_timeout: self.on_timeout(s.on_timeout.as_ref())?,
            });
        }
        if let Some(action) = kind.bare() {
            return Some(action);
        }
        let name = kind.info().name;
        Some(match kind {
            ActionKind::Run => {
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
            ActionKind::DeletePods => {
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
            ActionKind::DeletePvc => {
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
            ActionKind::Taint | ActionKind::Untaint => {
                let Some(taint) = &s.taint else {
                    self.err(
                        do_,
                        format!("`do: {name}` needs `taint`"),
                        Some("e.g. `taint: {key: example.com/chaos, effect: NoExecute}`"),
                    );
                    return None;
                };
                let spec = self.taint(taint)?;
                if kind == ActionKind::Taint {
                    Action::Taint(spec)
                } else {
                    Action::Untaint(spec)
                }
            }
            // Every other kind was `bare`.
            _ => return None,
        })
    }

    /// `onTimeout:` of a drain: what a drain still held by a PodDisruptionBudget at its
    /// timeout does (`fail` when absent).
    fn on_timeout(&mut self, word: Option<&S<String>>) -> Option<DrainOnTimeout> {
        let Some(word) = word else {
            return Some(DrainOnTimeout::Fail);
        };
        match word.value.as_str() {
            "fail" => Some(DrainOnTimeout::Fail),
            "continue" => Some(DrainOnTimeout::Continue),
            other => {
                let hint = match closest(other, &["fail", "continue"]) {
                    Some(w) => format!("did you mean `{w}`?"),
                    None => "`fail` (the default: the step is an error naming the budget) or \
                             `continue` (the run goes on with the held pods left)"
                        .to_string(),
                };
                self.err(
                    word,
                    format!("unknown `onTimeout` `{other}`: a held drain can `fail` or `continue`"),
                    Some(&hint),
                );
                None
            }
        }
    }

    pub(super) fn taint(&mut self, taint: &S<RawTaint>) -> Option<TaintSpec> {
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

    pub(super) fn pod_selector(&mut self, pods: &S<RawPods>) -> Option<PodSelector> {
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

    /// Checks that `name` (the value of `key`) names an earlier step: steps refer only
    /// backwards, so the file reads in the order things can happen.
    fn earlier_step(
        &mut self,
        name: &S<String>,
        key: &str,
        this: &str,
        earlier: &[String],
        later: &[String],
    ) -> bool {
        if earlier.contains(&name.value) {
            return true;
        }
        if name.value == this {
            self.err(
                name,
                format!("`{key}` names this step itself"),
                Some("name a step above it"),
            );
            return false;
        }
        if later.contains(&name.value) {
            self.err(
                name,
                format!(
                    "`{key}` must name an earlier step; `{}` comes later",
                    name.value
                ),
                Some("a step refers only to steps above it"),
            );
            return false;
        }
        let known: Vec<&str> = earlier.iter().map(String::as_str).collect();
        let hint = match closest(&name.value, &known) {
            Some(k) => format!("did you mean `{k}`?"),
            None if known.is_empty() => "no step comes before this one".to_string(),
            None => format!("earlier steps: {}", known.join(", ")),
        };
        self.report(
            pos(at(name)),
            format!("unknown step `{}`", name.value),
            Some(hint),
        );
        false
    }

    pub(super) fn step_time(
        &mut self,
        step: &S<RawStep>,
        this: &str,
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
            Some(d) => v.bound(d, true),
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
            return self.bound(a, true).map(StepTime::Offset);
        }
        if let Some(a) = &s.after {
            let ok = self.earlier_step(a, "after", this, earlier, later);
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
                self.subject(w, &w.value.node, &w.value.pods, &w.value.workload, &None)?;
            let Some(is) = &w.value.is else {
                self.err(w, "`when` needs `is: <state>`", None);
                return None;
            };
            let state = self.state(is, kind)?;
            let since = match &w.value.since {
                Some(since) if self.earlier_step(since, "since", this, earlier, later) => {
                    Some(since.value.clone())
                }
                Some(_) => return None,
                None => earlier.last().cloned(),
            };
            let delay = delay(self)?;
            return Some(StepTime::When {
                subject,
                state,
                delay,
                since,
            });
        }
        self.err(
            step,
            "a step needs one of `at`, `after`, `when`",
            Some("e.g. `at: 0s`"),
        );
        None
    }
}
