//! `expect:` and the parts steps share with it: subjects, states, checks and windows.

use std::collections::HashSet;

use serde_saphyr::Location;

use super::{TOP, Validator, at, pos};
use crate::experiment::fault;
use crate::experiment::model::*;
use crate::experiment::raw::*;
use crate::experiment::states::{SubjectKind, parse_state};

/// The largest `weight` an expectation may carry: weights are relative, and a bound keeps a
/// typo (`weight: 1000000`) from drowning every other expectation in the score.
const MAX_WEIGHT: f64 = 100.0;

impl Validator<'_> {
    pub(super) fn state(&mut self, s: &S<RawState>, kind: SubjectKind) -> Option<StateMatch> {
        match parse_state(&s.value, kind) {
            Ok(st) => Some(st),
            Err(issue) => {
                self.report(pos(at(s)), issue.message, issue.hint);
                None
            }
        }
    }

    /// Exactly one of node / pods / workload / probe (probes only in expectations).
    pub(super) fn subject<T>(
        &mut self,
        owner: &S<T>,
        node: &Option<S<String>>,
        pods: &Option<S<RawPods>>,
        workload: &Option<S<String>>,
        probe: &Option<S<String>>,
    ) -> Option<(Subject, SubjectKind)> {
        let given = [
            node.as_ref().map(at),
            pods.as_ref().map(at),
            workload.as_ref().map(at),
            probe.as_ref().map(at),
        ];
        if let Some(second) = second_of(given) {
            self.report(
                pos(second),
                "exactly one subject is allowed: `node`, `pods`, `workload` or `probe`",
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
        if let Some(p) = probe {
            return Some((
                Subject::Probe {
                    name: self.probe_ref(p),
                },
                SubjectKind::Probe,
            ));
        }
        self.err(
            owner,
            "no subject: write one of `node`, `pods` or `workload`",
            None,
        );
        None
    }

    pub(super) fn pod_subject(&mut self, pods: &S<RawPods>) -> Option<PodSubject> {
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

    /// The hand-written expectations, and whether the model judges the run too
    /// (`expect: conformance`, or a `conformance: true` item).
    pub(super) fn expectations(&mut self, raw: &RawExperiment) -> (Vec<Expectation>, bool) {
        let Some(expect) = &raw.expect else {
            self.report(
                TOP,
                "missing required key `expect`",
                Some(
                    "an experiment needs at least one expectation, or `expect: conformance` \
                     to be judged against what Kubernetes specifies"
                        .into(),
                ),
            );
            return (Vec::new(), false);
        };
        let mut conformance = false;
        match &expect.value {
            RawExpect::Word(w) if w == "conformance" => conformance = true,
            RawExpect::Word(w) => self.err(
                expect,
                format!("`expect: {w}` is not known"),
                Some("write `expect: conformance`, or a list of expectations"),
            ),
            RawExpect::List(items) if items.is_empty() => self.err(
                expect,
                "`expect` is empty",
                Some("an experiment needs at least one expectation, or `expect: conformance`"),
            ),
            RawExpect::List(_) => {}
        }
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for e in expect.value.items() {
            if let Some(c) = &e.value.conformance {
                if let Some(on) = self.conformance_item(e, c) {
                    conformance |= on;
                }
                continue;
            }
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
        if conformance {
            self.conformance_covers(raw, expect);
        }
        (out, conformance)
    }

    /// A `conformance:` item: alone in its entry.
    fn conformance_item(&mut self, e: &S<RawExpectation>, c: &S<bool>) -> Option<bool> {
        let x = &e.value;
        let others = x.name.is_some()
            || x.node.is_some()
            || x.pods.is_some()
            || x.workload.is_some()
            || x.probe.is_some()
            || x.becomes.is_some()
            || x.stays.is_some()
            || x.never.is_some()
            || x.eventually.is_some()
            || x.within.is_some()
            || x.since.is_some();
        if others {
            self.err(
                e,
                "`conformance` stands alone in its entry of `expect`",
                Some(
                    "write `- conformance: true` as its own item; the model names each \
                     behaviour it judges",
                ),
            );
            return None;
        }
        Some(c.value)
    }

    /// `expect: conformance` needs a step whose fault the node failure model predicts
    /// for; otherwise the run would judge nothing and pass.
    fn conformance_covers(&mut self, raw: &RawExperiment, expect: &S<RawExpect>) {
        let steps = raw.steps.as_ref().map_or(&[][..], |s| &s.value[..]);
        let covered = steps.iter().any(|s| {
            s.value.roll.is_some()
                || s.value
                    .do_
                    .as_ref()
                    .and_then(|d| fault::ActionKind::named(&d.value))
                    .is_some_and(fault::ActionKind::modelled)
        });
        if !covered && !steps.is_empty() {
            let hint = format!(
                "the model covers {} (and rolls); write expectations for the other faults",
                fault::ActionKind::modelled_names().join(", ")
            );
            self.err(
                expect,
                "`expect: conformance` judges nothing here: no step is a fault the node \
                 failure model predicts for",
                Some(&hint),
            );
        }
    }

    pub(super) fn expectation(&mut self, e: &S<RawExpectation>) -> Option<Expectation> {
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
        let subject = self.subject(e, &x.node, &x.pods, &x.workload, &x.probe);
        let kind = subject.as_ref().map(|(_, k)| *k);
        let check = self.check(e, kind);
        let since = match &x.since {
            Some(s) => Some(self.step_ref(s)),
            None => self.steps.first().cloned(),
        };
        let requires = self.capabilities(&x.requires);
        let weight = self.weight(&x.weight);
        Some(Expectation {
            name: name?,
            subject: subject?.0,
            check: check?,
            since: since?,
            requires,
            weight: weight?,
        })
    }

    /// `weight`: how much the expectation counts in the resilience score, more than 0 and at
    /// most [`MAX_WEIGHT`]; 1 when not written.
    fn weight(&mut self, w: &Option<S<f64>>) -> Option<f64> {
        let Some(w) = w else {
            return Some(DEFAULT_WEIGHT);
        };
        if w.value.is_finite() && w.value > 0.0 && w.value <= MAX_WEIGHT {
            return Some(w.value);
        }
        self.err(
            w,
            format!(
                "`weight` must be more than 0 and at most {MAX_WEIGHT}, found {}",
                w.value
            ),
            Some("weights are relative (default 1); give a minor expectation e.g. 0.5"),
        );
        None
    }

    pub(super) fn check(
        &mut self,
        e: &S<RawExpectation>,
        kind: Option<SubjectKind>,
    ) -> Option<Check> {
        let x = &e.value;
        let mut checks: Vec<(Location, &str)> = [
            x.becomes.as_ref().map(|s| (at(s), "becomes")),
            x.stays.as_ref().map(|s| (at(s), "stays")),
            x.never.as_ref().map(|s| (at(s), "never")),
            x.eventually.as_ref().map(|s| (at(s), "eventually")),
            x.restarts.as_ref().map(|s| (at(s), "restarts")),
            x.replaced.as_ref().map(|s| (at(s), "replaced")),
            x.down_for.as_ref().map(|s| (at(s), "downFor")),
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
        if x.stays.is_none() && x.never.is_none() {
            if let Some(u) = &x.until {
                self.err(u, "`until` only goes with `stays` or `never`", None);
            }
            if let Some(f) = &x.for_ {
                self.err(f, "`for` only goes with `stays` or `never`", None);
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
            self.err(e, "no check: write one of `becomes`, `stays`, `never`, `eventually`, `restarts`, `replaced`, `downFor`", None);
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
            let until = match self.hold_end(x, "stays", pods_ok) {
                HoldEnd::Given(until) => Some(until),
                HoldEnd::Invalid => None,
                HoldEnd::Missing => {
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
            let until = match self.hold_end(x, "never", pods_ok) {
                HoldEnd::Given(until) => Some(until),
                HoldEnd::Missing => Some(Until::End),
                HoldEnd::Invalid => None,
            };
            let state = self.state(n, kind?)?;
            return Some(Check::Never {
                state,
                until: until?,
            });
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
        if let Some(d) = &x.down_for {
            if kind.is_some() && kind != Some(SubjectKind::Probe) {
                self.err(
                    d,
                    "`downFor` only applies to a `probe` subject",
                    Some("for a node or pods, write `stays` or `never` with `for`"),
                );
                return None;
            }
            return self
                .bound(d, false)
                .map(|at_most| Check::DownFor { at_most });
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

    /// The end of a `stays` or `never` hold: `until: <step>|end` or `for: <bound>`.
    fn hold_end(&mut self, x: &RawExpectation, check: &str, pods_ok: bool) -> HoldEnd {
        match (&x.until, &x.for_) {
            (Some(_), Some(f)) => {
                self.err(
                    f,
                    format!("`{check}` takes one of `until` and `for`, not both"),
                    None,
                );
                HoldEnd::Invalid
            }
            (Some(u), None) if u.value == "end" => HoldEnd::Given(Until::End),
            (Some(u), None) => HoldEnd::Given(Until::Step(self.step_ref(u))),
            (None, Some(f)) => self
                .bound(f, pods_ok)
                .map_or(HoldEnd::Invalid, |b| HoldEnd::Given(Until::For(b))),
            (None, None) => HoldEnd::Missing,
        }
    }

    /// The window of a `becomes`: exactly one of `within`, `after`, `between`.
    pub(super) fn window(
        &mut self,
        e: &S<RawExpectation>,
        becomes: &S<RawState>,
        pods_ok: bool,
    ) -> Option<Window> {
        let x = &e.value;
        let given = [
            x.within.as_ref().map(at),
            x.after.as_ref().map(at),
            x.between.as_ref().map(at),
        ];
        if let Some(second) = second_of(given) {
            self.report(
                pos(second),
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
    pub(super) fn split(b: &Bound) -> (f64, Vec<(String, i64)>) {
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

/// What an expectation says about the end of its hold.
enum HoldEnd {
    /// A valid `until` or `for`.
    Given(Until),
    /// Neither was written.
    Missing,
    /// One was written but is wrong (already reported).
    Invalid,
}

/// Of keys that exclude each other, the one written second (in file order), if two or
/// more were written: where the diagnostic points.
fn second_of<const N: usize>(given: [Option<Location>; N]) -> Option<Location> {
    let mut written: Vec<Location> = given.into_iter().flatten().collect();
    written.sort_by_key(|l| (l.line(), l.column()));
    written.get(1).copied()
}
