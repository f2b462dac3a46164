//! The experiment file as written: serde types that mirror the YAML one-to-one.
//!
//! Every key is optional here and every value carries its position, so validation (not
//! serde) decides what is required and can report every problem at its line and column.
//! Unknown keys are not rejected here: `keys.rs` finds every one of them, at its place,
//! before this parse, which skips them so the rest of the file is still validated in the
//! same pass. A new struct here needs its `Part` in `keys.rs`, or its typos go unsaid.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_saphyr::Spanned;

/// A value with the place it was written.
pub(super) type S<T> = Spanned<T>;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawExperiment {
    pub name: Option<S<String>>,
    pub description: Option<S<String>>,
    #[serde(default)]
    pub tags: Vec<S<String>>,
    #[serde(default)]
    pub requires: Vec<S<String>>,
    pub namespace: Option<S<String>>,
    pub targets: Option<S<Ordered<S<RawTarget>>>>,
    pub setup: Option<RawSetup>,
    pub teardown: Option<RawTeardown>,
    pub observe: Option<RawObserve>,
    pub safety: Option<RawSafety>,
    pub steps: Option<S<Vec<S<RawStep>>>>,
    pub expect: Option<S<RawExpect>>,
    pub probes: Option<S<Ordered<S<RawProbe>>>>,
    pub abort: Option<S<RawAbort>>,
}

/// `abort:`: the conditions that stop a run by itself.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawAbort {
    pub node_not_ready: Option<S<String>>,
    pub api_unreachable: Option<S<String>>,
    pub pods_not_ready: Option<S<Vec<S<RawPodsNotReady>>>>,
    pub probe_down: Option<S<Vec<S<RawProbeDown>>>>,
    pub prometheus: Option<S<Vec<S<RawQuery>>>>,
}

/// One `abort.podsNotReady` entry.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawPodsNotReady {
    pub workload: Option<S<String>>,
    pub more_than: Option<S<i64>>,
    #[serde(rename = "for")]
    pub for_: Option<S<String>>,
}

/// One `abort.probeDown` entry.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawProbeDown {
    pub probe: Option<S<String>>,
    #[serde(rename = "for")]
    pub for_: Option<S<String>>,
}

/// One `abort.prometheus` entry.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawQuery {
    pub name: Option<S<String>>,
    pub query: Option<S<String>>,
    pub above: Option<S<f64>>,
    pub below: Option<S<f64>>,
    #[serde(rename = "for")]
    pub for_: Option<S<String>>,
    pub every: Option<S<String>>,
}

/// One entry of `probes:`; exactly one of `command`, `http`, `exec` and `logs`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawProbe {
    pub command: Option<S<String>>,
    pub on: Option<S<String>>,
    pub http: Option<S<String>>,
    pub exec: Option<S<Vec<S<String>>>>,
    pub logs: Option<S<RawProbeLogs>>,
    pub pod: Option<S<RawProbePod>>,
    pub expect_status: Option<S<i64>>,
    pub insecure: Option<S<bool>>,
    pub ca_file: Option<S<String>>,
    pub interval: Option<S<String>>,
    pub timeout: Option<S<String>>,
}

/// `logs:` of a logs probe: how much of the log each try reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawProbeLogs {
    pub tail_lines: Option<S<i64>>,
}

/// `pod:` of an `exec` or `logs` probe: the pod of a workload on a target's node.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawProbePod {
    pub workload: Option<S<String>>,
    pub on: Option<S<String>>,
    pub container: Option<S<String>>,
}

/// A mapping whose entries keep the order they were written in (targets may only exclude
/// earlier targets, so order matters).
#[derive(Debug)]
pub(super) struct Ordered<V>(pub Vec<(S<String>, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Ordered<V> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OrderedVisitor<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for OrderedVisitor<V> {
            type Value = Ordered<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Ordered(entries))
            }
        }
        deserializer.deserialize_map(OrderedVisitor(std::marker::PhantomData))
    }
}

/// One entry of `targets:`: a node selector.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawTarget {
    pub role: Option<S<String>>,
    pub running_pods_of: Option<S<String>>,
    #[serde(default)]
    pub names: Vec<S<String>>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub exclude: Vec<S<String>>,
    pub count: Option<S<i64>>,
}

/// `setup:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawSetup {
    #[serde(default)]
    pub manifests: Vec<S<String>>,
    pub wait_timeout: Option<S<String>>,
}

/// `teardown:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawTeardown {
    pub delete_manifests: Option<bool>,
}

/// `observe:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawObserve {
    #[serde(rename = "for")]
    pub for_: Option<S<String>>,
    pub namespaces: Option<S<RawNamespaces>>,
}

/// `observe.namespaces` as written: a word (`all` is the only valid one) or a list.
#[derive(Debug)]
pub(super) enum RawNamespaces {
    Word(String),
    List(Vec<S<String>>),
}

impl<'de> Deserialize<'de> for RawNamespaces {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NamespacesVisitor;
        impl<'de> Visitor<'de> for NamespacesVisitor {
            type Value = RawNamespaces;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`all` or a list of namespaces")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawNamespaces, E> {
                Ok(RawNamespaces::Word(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawNamespaces, E> {
                Ok(RawNamespaces::Word(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawNamespaces, E> {
                Ok(RawNamespaces::Word(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawNamespaces, E> {
                Ok(RawNamespaces::Word(v.to_string()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawNamespaces, A::Error> {
                let mut out = Vec::new();
                while let Some(ns) = seq.next_element::<S<String>>()? {
                    out.push(ns);
                }
                Ok(RawNamespaces::List(out))
            }
        }
        deserializer.deserialize_any(NamespacesVisitor)
    }
}

/// `safety:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawSafety {
    pub max_nodes_down: Option<S<i64>>,
    pub allow_control_plane: Option<bool>,
    pub allow_quorum_loss: Option<bool>,
}

/// One entry of `steps:`; which keys apply depends on `do:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawStep {
    pub name: Option<S<String>>,
    pub at: Option<S<String>>,
    pub after: Option<S<String>>,
    pub when: Option<S<RawCondition>>,
    pub delay: Option<S<String>>,
    #[serde(rename = "do")]
    pub do_: Option<S<String>>,
    pub target: Option<S<String>>,
    pub timeout: Option<S<String>>,
    pub command: Option<S<String>>,
    pub undo: Option<S<String>>,
    pub pods: Option<S<RawPods>>,
    pub force: Option<S<bool>>,
    pub pvc: Option<S<RawPvc>>,
    pub remove_finalizers: Option<S<bool>>,
    pub on_timeout: Option<S<String>>,
    pub taint: Option<S<RawTaint>>,
    pub roll: Option<S<RawRoll>>,
    /// `sequence:` of a rolling step: its actions, each written as a step's action is
    /// (`do:` and the keys it takes), in place of the step's own `do:`.
    pub sequence: Option<S<Vec<S<RawStep>>>>,
}

/// `roll:` of a rolling step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawRoll {
    pub order: Option<S<RawOrder>>,
    pub settle: Option<S<String>>,
    pub timeout: Option<S<String>>,
    pub max_unavailable: Option<S<i64>>,
    pub same_zone: Option<S<String>>,
}

/// `roll.order` as written: a word (`name`, `zone`, `role`) or a list of node names.
#[derive(Debug)]
pub(super) enum RawOrder {
    Word(String),
    List(Vec<S<String>>),
}

impl<'de> Deserialize<'de> for RawOrder {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OrderVisitor;
        impl<'de> Visitor<'de> for OrderVisitor {
            type Value = RawOrder;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`name`, `zone`, `role` or a list of node names")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawOrder, E> {
                Ok(RawOrder::Word(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawOrder, E> {
                Ok(RawOrder::Word(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawOrder, E> {
                Ok(RawOrder::Word(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawOrder, E> {
                Ok(RawOrder::Word(v.to_string()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<RawOrder, A::Error> {
                let mut out = Vec::new();
                while let Some(node) = seq.next_element::<S<String>>()? {
                    out.push(node);
                }
                Ok(RawOrder::List(out))
            }
        }
        deserializer.deserialize_any(OrderVisitor)
    }
}

/// `when:` of a step: a subject and the state that triggers it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawCondition {
    pub node: Option<S<String>>,
    pub pods: Option<S<RawPods>>,
    pub workload: Option<S<String>>,
    pub is: Option<S<RawState>>,
    pub since: Option<S<String>>,
}

/// Pods, as selected by a `delete-pods` step or named by an expectation.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawPods {
    pub workload: Option<S<String>>,
    pub labels: Option<S<BTreeMap<String, String>>>,
    pub namespace: Option<S<String>>,
    pub on: Option<S<String>>,
    pub not_on: Option<S<String>>,
    pub generation: Option<S<String>>,
    pub count: Option<S<String>>,
}

/// `pvc:` of a `delete-pvc` step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawPvc {
    pub name: Option<S<String>>,
    pub namespace: Option<S<String>>,
}

/// `taint:` of a `taint`/`untaint` step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawTaint {
    pub key: Option<S<String>>,
    pub value: Option<S<String>>,
    pub effect: Option<S<String>>,
}

/// `expect:` as written: a list of expectations, or one word (`expect: conformance`).
#[derive(Debug)]
pub(super) enum RawExpect {
    /// The usual list; an item may be `conformance: true` instead of an expectation.
    List(Vec<S<RawExpectation>>),
    /// A word in place of the list.
    Word(String),
}

impl RawExpect {
    /// The list's items (none for a word).
    pub(super) fn items(&self) -> &[S<RawExpectation>] {
        match self {
            RawExpect::List(items) => items,
            RawExpect::Word(_) => &[],
        }
    }
}

impl<'de> Deserialize<'de> for RawExpect {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ExpectVisitor;
        impl<'de> Visitor<'de> for ExpectVisitor {
            type Value = RawExpect;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of expectations, or `conformance`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawExpect, E> {
                Ok(RawExpect::Word(v.to_owned()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<RawExpect, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(RawExpect::List(items))
            }
        }
        deserializer.deserialize_any(ExpectVisitor)
    }
}

/// One entry of `expect:`; exactly one subject and one check must be given, or
/// `conformance: true` alone.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawExpectation {
    pub conformance: Option<S<bool>>,
    pub name: Option<S<String>>,
    pub node: Option<S<String>>,
    pub pods: Option<S<RawPods>>,
    pub workload: Option<S<String>>,
    pub probe: Option<S<String>>,
    pub becomes: Option<S<RawState>>,
    pub stays: Option<S<RawState>>,
    pub never: Option<S<RawState>>,
    pub eventually: Option<S<RawState>>,
    pub restarts: Option<S<String>>,
    pub replaced: Option<S<bool>>,
    pub down_for: Option<S<String>>,
    pub within: Option<S<String>>,
    pub after: Option<S<String>>,
    pub between: Option<S<Vec<S<String>>>>,
    pub until: Option<S<String>>,
    #[serde(rename = "for")]
    pub for_: Option<S<String>>,
    pub since: Option<S<String>>,
    #[serde(default)]
    pub requires: Vec<S<String>>,
    pub weight: Option<S<f64>>,
}

/// A state as written: a name (`NotReady`) or `{tainted: "key:Effect"}`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RawState {
    Name(String),
    Tainted(String),
}

impl<'de> Deserialize<'de> for RawState {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StateVisitor;
        impl<'de> Visitor<'de> for StateVisitor {
            type Value = RawState;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a state name or {tainted: \"key\"}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawState, E> {
                Ok(RawState::Name(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawState, E> {
                Ok(RawState::Name(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawState, E> {
                Ok(RawState::Name(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawState, E> {
                Ok(RawState::Name(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawState, A::Error> {
                let mut tainted = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key != "tainted" {
                        return Err(de::Error::unknown_field(&key, &["tainted"]));
                    }
                    tainted = Some(map.next_value::<String>()?);
                }
                tainted
                    .map(RawState::Tainted)
                    .ok_or_else(|| de::Error::missing_field("tainted"))
            }
        }
        deserializer.deserialize_any(StateVisitor)
    }
}
