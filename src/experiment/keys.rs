//! Every unknown key of an experiment file, each at its line and column, with the key it
//! probably means; and files that are not experiments at all, named for what they are.
//!
//! serde stops at the first unknown key, so a file with three typos took three runs of
//! `validate`. Here the file is read once as a plain tree of mappings and lists, and each
//! mapping's keys are compared with the keys its part of the file takes. Those key lists
//! are asked from serde's derive of the raw types ([`fields_of`]), so they cannot drift
//! from `raw.rs`; only which part of the file holds which part is written here. This is
//! the only check for unknown keys: the typed parse skips them, so the rest of the file is
//! validated in the same pass (a raw type without its `Part` here would let typos by).

use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::diagnostic::Diagnostic;
use super::raw::*;
use super::suggest::closest;

/// A YAML document as a tree, keys with their place; scalars are not kept.
#[derive(Debug)]
pub(super) enum Node {
    /// A mapping, in file order.
    Map(Vec<(Spanned<String>, Node)>),
    /// A list.
    Seq(Vec<Node>),
    /// Any scalar (or null).
    Scalar(Option<String>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NodeVisitor;
        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Scalar(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Scalar(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Scalar(None))
            }
            fn visit_i128<E: de::Error>(self, _: i128) -> Result<Node, E> {
                Ok(Node::Scalar(None))
            }
            fn visit_u128<E: de::Error>(self, _: u128) -> Result<Node, E> {
                Ok(Node::Scalar(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Scalar(None))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Scalar(Some(v.to_owned())))
            }
            fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Node, E> {
                Ok(Node::Scalar(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Scalar(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Scalar(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
                Node::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Node::Map(entries))
            }
        }
        deserializer.deserialize_any(NodeVisitor)
    }
}

impl Node {
    /// The value of `key` in a mapping.
    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().find(|(k, _)| k.value == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            Node::Scalar(Some(s)) => Some(s),
            _ => None,
        }
    }
}

/// The field names serde's derive gives a struct (after renames), asked from the derive
/// itself: it hands them to `deserialize_struct`, which is all this deserializer answers.
fn fields_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    #[derive(Debug)]
    struct Caught(Option<&'static [&'static str]>);
    impl fmt::Display for Caught {
        fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("not a struct")
        }
    }
    impl std::error::Error for Caught {}
    impl de::Error for Caught {
        fn custom<M: fmt::Display>(_: M) -> Self {
            Caught(None)
        }
    }
    struct Ask;
    impl<'de> Deserializer<'de> for Ask {
        type Error = Caught;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Caught> {
            Err(Caught(None))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Caught> {
            Err(Caught(Some(fields)))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    match T::deserialize(Ask) {
        Err(Caught(Some(fields))) => fields,
        _ => &[],
    }
}

/// A part of the file whose mappings take a fixed set of keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Experiment,
    Target,
    Setup,
    Teardown,
    Observe,
    Safety,
    Step,
    Condition,
    Pods,
    Pvc,
    Taint,
    Roll,
    State,
    Expectation,
    Probe,
    ProbePod,
    ProbeLogs,
    Abort,
    PodsNotReady,
    ProbeDown,
    Query,
}

/// What a key's value is: a mapping of one part, a mapping of names to parts, a list of
/// parts, or anything (labels, scalars).
#[derive(Debug, Clone, Copy)]
enum Shape {
    Keys(Part),
    Named(Part),
    List(Part),
    Free,
}

impl Part {
    fn keys(self) -> &'static [&'static str] {
        match self {
            Part::Experiment => fields_of::<RawExperiment>(),
            Part::Target => fields_of::<RawTarget>(),
            Part::Setup => fields_of::<RawSetup>(),
            Part::Teardown => fields_of::<RawTeardown>(),
            Part::Observe => fields_of::<RawObserve>(),
            Part::Safety => fields_of::<RawSafety>(),
            Part::Step => fields_of::<RawStep>(),
            Part::Condition => fields_of::<RawCondition>(),
            Part::Pods => fields_of::<RawPods>(),
            Part::Pvc => fields_of::<RawPvc>(),
            Part::Taint => fields_of::<RawTaint>(),
            Part::Roll => fields_of::<RawRoll>(),
            // RawState reads its one key by hand.
            Part::State => &["tainted"],
            Part::Expectation => fields_of::<RawExpectation>(),
            Part::Probe => fields_of::<RawProbe>(),
            Part::ProbePod => fields_of::<RawProbePod>(),
            Part::ProbeLogs => fields_of::<RawProbeLogs>(),
            Part::Abort => fields_of::<RawAbort>(),
            Part::PodsNotReady => fields_of::<RawPodsNotReady>(),
            Part::ProbeDown => fields_of::<RawProbeDown>(),
            Part::Query => fields_of::<RawQuery>(),
        }
    }

    /// Where the key is, in words, for the message.
    fn place(self) -> &'static str {
        match self {
            Part::Experiment => "at the top level",
            Part::Target => "in a target",
            Part::Setup => "in `setup`",
            Part::Teardown => "in `teardown`",
            Part::Observe => "in `observe`",
            Part::Safety => "in `safety`",
            Part::Step => "in a step",
            Part::Condition => "in a step's `when`",
            Part::Pods => "in `pods`",
            Part::Pvc => "in `pvc`",
            Part::Taint => "in `taint`",
            Part::Roll => "in `roll`",
            Part::State => "in a state",
            Part::Expectation => "in an expectation",
            Part::Probe => "in a probe",
            Part::ProbePod => "in a probe's `pod`",
            Part::ProbeLogs => "in a probe's `logs`",
            Part::Abort => "in `abort`",
            Part::PodsNotReady => "in `abort.podsNotReady`",
            Part::ProbeDown => "in `abort.probeDown`",
            Part::Query => "in `abort.prometheus`",
        }
    }

    /// The shape of the value of `key` (a key this part takes).
    fn child(self, key: &str) -> Shape {
        match (self, key) {
            (Part::Experiment, "targets") => Shape::Named(Part::Target),
            (Part::Experiment, "setup") => Shape::Keys(Part::Setup),
            (Part::Experiment, "teardown") => Shape::Keys(Part::Teardown),
            (Part::Experiment, "observe") => Shape::Keys(Part::Observe),
            (Part::Experiment, "safety") => Shape::Keys(Part::Safety),
            (Part::Experiment, "steps") => Shape::List(Part::Step),
            (Part::Experiment, "expect") => Shape::List(Part::Expectation),
            (Part::Experiment, "probes") => Shape::Named(Part::Probe),
            (Part::Experiment, "abort") => Shape::Keys(Part::Abort),
            (Part::Step, "when") => Shape::Keys(Part::Condition),
            (Part::Step | Part::Condition | Part::Expectation, "pods") => Shape::Keys(Part::Pods),
            (Part::Step, "pvc") => Shape::Keys(Part::Pvc),
            (Part::Step, "taint") => Shape::Keys(Part::Taint),
            (Part::Step, "roll") => Shape::Keys(Part::Roll),
            // A rolling step's actions, each written as a step's action is.
            (Part::Step, "sequence") => Shape::List(Part::Step),
            (Part::Condition, "is")
            | (Part::Expectation, "becomes" | "stays" | "never" | "eventually") => {
                Shape::Keys(Part::State)
            }
            (Part::Probe, "pod") => Shape::Keys(Part::ProbePod),
            (Part::Probe, "logs") => Shape::Keys(Part::ProbeLogs),
            (Part::Abort, "podsNotReady") => Shape::List(Part::PodsNotReady),
            (Part::Abort, "probeDown") => Shape::List(Part::ProbeDown),
            (Part::Abort, "prometheus") => Shape::List(Part::Query),
            _ => Shape::Free,
        }
    }
}

/// Every key of `tree` that its place does not take, in file order.
pub(super) fn unknown_keys(tree: &Node, path: &Path) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    walk(tree, Shape::Keys(Part::Experiment), path, &mut out);
    out.sort_by_key(|d| (d.line, d.column));
    out
}

fn walk(node: &Node, shape: Shape, path: &Path, out: &mut Vec<Diagnostic>) {
    match (shape, node) {
        (Shape::Keys(part), Node::Map(entries)) => {
            let known = part.keys();
            for (key, value) in entries {
                if known.contains(&key.value.as_str()) {
                    walk(value, part.child(&key.value), path, out);
                } else {
                    out.push(unknown(key, part, known, path));
                }
            }
        }
        (Shape::Named(part), Node::Map(entries)) => {
            for (_, value) in entries {
                walk(value, Shape::Keys(part), path, out);
            }
        }
        (Shape::List(part), Node::Seq(items)) => {
            for item in items {
                walk(item, Shape::Keys(part), path, out);
            }
        }
        // A value of the wrong shape is the typed parse's to report.
        _ => {}
    }
}

/// `wait_timeout` and `wait-timeout` for `waitTimeout`: the same letters, another case.
fn camel_case_of<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    if !key.contains(['_', '-']) {
        return None;
    }
    let plain = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let wanted = plain(key);
    known.iter().copied().find(|k| plain(k) == wanted)
}

fn unknown(key: &Spanned<String>, part: Part, known: &[&str], path: &Path) -> Diagnostic {
    let hint = if let Some(camel) = camel_case_of(&key.value, known) {
        format!("keys are camelCase: write `{camel}`")
    } else if let Some(close) = closest(&key.value, known) {
        format!("did you mean `{close}`?")
    } else {
        format!("keys {}: {}", part.place(), known.join(", "))
    };
    Diagnostic {
        path: path.to_path_buf(),
        line: u32::try_from(key.referenced.line()).unwrap_or(u32::MAX),
        column: u32::try_from(key.referenced.column()).unwrap_or(u32::MAX),
        message: format!("unknown key `{}` {}", key.value, part.place()),
        hint: Some(hint),
    }
}

/// When `tree` is plainly another kind of file (a Kubernetes manifest, a faultline
/// inventory or run record), one diagnostic that says so and what the command expects,
/// instead of an "unknown key" for each of its keys.
pub(super) fn other_kind_of_file(tree: &Node, path: &Path) -> Option<Diagnostic> {
    let has = |key: &str| tree.get(key).is_some();
    // A record has `targets` too (as resolved), so it is recognised first.
    let record = has("run_id") && has("faultline_version");
    let experiment_keys = ["targets", "steps", "expect"];
    if !record && experiment_keys.iter().any(|k| has(k)) {
        return None;
    }
    let (message, hint) = if record {
        (
            "this is a faultline run record, not an experiment".to_owned(),
            "`faultline report` renders a record, `faultline rehearse EXPERIMENT --record \
             RECORD` replays one",
        )
    } else if let (Some(_), Some(kind)) = (tree.get("apiVersion"), tree.get("kind")) {
        let kind = kind.text().unwrap_or("object");
        let name = tree
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Node::text);
        let what = match name {
            Some(name) => format!("{kind} {name}"),
            None => kind.to_owned(),
        };
        (
            format!("this is a Kubernetes manifest ({what}), not a faultline experiment"),
            "validate, plan and run take experiment files (name, description, targets, steps, \
             expect); to create this object before the fault, list the file under \
             `setup.manifests` of an experiment",
        )
    } else if has("nodes") || has("cluster") {
        (
            "this is a faultline inventory (how nodes are reached), not an experiment".to_owned(),
            "pass it with `--inventory` (`-i`), e.g. `faultline run EXPERIMENT -i INVENTORY`; \
             validate takes experiment files",
        )
    } else {
        return None;
    };
    Some(Diagnostic {
        path: path.to_path_buf(),
        line: 0,
        column: 0,
        message,
        hint: Some(hint.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(text: &str) -> Node {
        serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn unknown_in(text: &str) -> Vec<String> {
        unknown_keys(&tree(text), Path::new("x.yaml"))
            .iter()
            .map(|d| {
                format!(
                    "{}:{}: {} ({})",
                    d.line,
                    d.column,
                    d.message,
                    d.hint.as_deref().unwrap_or("")
                )
            })
            .collect()
    }

    #[test]
    fn key_lists_come_from_the_raw_types() {
        assert!(fields_of::<RawStep>().contains(&"removeFinalizers"));
        assert!(fields_of::<RawExpectation>().contains(&"for"));
        assert!(fields_of::<RawExperiment>().contains(&"abort"));
        for part in [
            Part::Experiment,
            Part::Target,
            Part::Setup,
            Part::Teardown,
            Part::Observe,
            Part::Safety,
            Part::Step,
            Part::Condition,
            Part::Pods,
            Part::Pvc,
            Part::Taint,
            Part::Expectation,
            Part::Probe,
            Part::ProbePod,
            Part::Abort,
            Part::PodsNotReady,
            Part::ProbeDown,
            Part::Query,
        ] {
            assert!(!part.keys().is_empty(), "{part:?}");
        }
    }

    #[test]
    fn every_unknown_key_at_every_depth_with_its_likely_meaning() {
        let got = unknown_in(
            "nmae: x\nsetup: {wait-timeout: 2m}\nsteps:\n  - {at: 0s, timout: 5s, when: {node: v, iz: Ready}}\n\
             expect:\n  - {pods: {workload: w, onn: v}, becomes: {taint: k}}\n\
             probes:\n  p: {command: x, intervall: 1s}\nabort:\n  podsNotReady: [{workload: w, moreThen: 1}]\n\
             targets:\n  v: {labels: {any_key: ok}, rol: worker}\nhypothesis: y\n",
        );
        assert_eq!(
            got,
            vec![
                "1:1: unknown key `nmae` at the top level (did you mean `name`?)",
                "2:9: unknown key `wait-timeout` in `setup` (keys are camelCase: write `waitTimeout`)",
                "4:14: unknown key `timout` in a step (did you mean `timeout`?)",
                "4:42: unknown key `iz` in a step's `when` (keys in a step's `when`: node, pods, workload, is, since)",
                "6:26: unknown key `onn` in `pods` (keys in `pods`: workload, labels, namespace, on, notOn, generation, count)",
                "6:45: unknown key `taint` in a state (did you mean `tainted`?)",
                "8:19: unknown key `intervall` in a probe (did you mean `interval`?)",
                "10:32: unknown key `moreThen` in `abort.podsNotReady` (did you mean `moreThan`?)",
                "12:30: unknown key `rol` in a target (did you mean `role`?)",
                "13:1: unknown key `hypothesis` at the top level (keys at the top level: name, description, tags, requires, namespace, targets, setup, teardown, observe, safety, steps, expect, probes, abort)",
            ]
        );
    }

    #[test]
    fn other_kinds_of_file_are_named() {
        let p = Path::new("f.yaml");
        let manifest = tree("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n");
        let d = other_kind_of_file(&manifest, p).map(|d| d.message);
        assert_eq!(
            d.as_deref(),
            Some("this is a Kubernetes manifest (Deployment web), not a faultline experiment")
        );
        let inventory = tree("cluster: {name: c}\nnodes: []\n");
        let d = other_kind_of_file(&inventory, p).map(|d| d.message);
        assert!(d.is_some_and(|m| m.contains("faultline inventory")));
        let record = tree("faultline_version: 0.1.0\nrun_id: r\ntargets: {v: [n1]}\n");
        let d = other_kind_of_file(&record, p).map(|d| d.message);
        assert!(d.is_some_and(|m| m.contains("run record")));
        let experiment = tree("apiVersion: x\nkind: y\nname: n\nsteps: []\n");
        assert!(other_kind_of_file(&experiment, p).is_none());
    }
}
