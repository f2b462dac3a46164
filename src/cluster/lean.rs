//! Pods and nodes decoded only as far as faultline reads them.
//!
//! At 30,000 pods most of what a watch or a list sends is what the reducers never look at:
//! managed fields (each a JSON tree, decoded into `serde_json::Value`), container specs,
//! volumes, a node's image list, a ReplicaSet's pod template. [`Lean`] decodes an object
//! into the same k8s-openapi type with only the fields the observer's reducers
//! (`crate::observe::reduce`), the owner index and the preflight's node reads (targets,
//! zones, control plane, internal addresses) use; the rest stays at its default and serde
//! skips it without building it. Issue 29: what faultline spends per event beside the API
//! server's own share; issue 48: on 5,000 nodes the preflight's two full node lists held
//! about 100 MB at once.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{
    ContainerStatus, Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Pod, PodCondition,
    PodSpec, PodStatus, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// `K` decoded leanly: only what the observer reads is filled in.
#[derive(Debug, Clone)]
pub(crate) struct Lean<K>(pub(crate) K);

impl<K: Resource> Resource for Lean<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// The metadata the observer reads: identity, the resource version the watcher resumes
/// from, the timestamps, the owners and the labels: all of them (`L` = [`AllLabels`], a
/// node's zone) or only a pod's `pod-template-hash` ([`TemplateHashOnly`]).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Meta<L = AllLabels> {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    owner_references: Option<Vec<OwnerReference>>,
    labels: L,
}

/// Every label of the object.
type AllLabels = Option<BTreeMap<String, String>>;

/// Of a pod's labels only the one the owner resolution reads (`crate::cluster::owners`);
/// every other label is read past, never built.
#[derive(Default)]
struct TemplateHashOnly(AllLabels);

/// The label [`TemplateHashOnly`] keeps.
const TEMPLATE_HASH: &str = "pod-template-hash";

impl<'de> Deserialize<'de> for TemplateHashOnly {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Labels;
        impl<'de> Visitor<'de> for Labels {
            type Value = TemplateHashOnly;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of labels")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(TemplateHashOnly(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == TEMPLATE_HASH {
                        kept.insert(key.into_owned(), map.next_value::<String>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(TemplateHashOnly(Some(kept)))
            }
        }
        deserializer.deserialize_any(Labels)
    }
}

impl From<TemplateHashOnly> for AllLabels {
    fn from(l: TemplateHashOnly) -> AllLabels {
        l.0
    }
}

impl<L: Into<AllLabels>> From<Meta<L>> for ObjectMeta {
    fn from(m: Meta<L>) -> ObjectMeta {
        ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            owner_references: m.owner_references,
            labels: m.labels.into(),
            ..ObjectMeta::default()
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LeanPod<'a> {
    metadata: Meta<TemplateHashOnly>,
    spec: Option<LeanPodSpec>,
    #[serde(borrow)]
    status: Option<LeanPodStatus<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LeanPodSpec {
    node_name: Option<String>,
    tolerations: Option<Vec<Toleration>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LeanPodStatus<'a> {
    phase: Option<String>,
    #[serde(borrow)]
    conditions: Option<Vec<LeanPodCondition<'a>>>,
    container_statuses: Option<Vec<LeanContainerStatus>>,
}

/// A pod condition as it arrives: its type and status borrowed from the event's text and
/// its transition time unparsed. Only the `Ready` condition is kept, and only its time is
/// parsed (`crate::observe::reduce::pod_state` reads nothing else of the conditions).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LeanPodCondition<'a> {
    #[serde(rename = "type", borrow)]
    type_: Cow<'a, str>,
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(borrow)]
    last_transition_time: Option<Cow<'a, str>>,
}

/// The condition the observer reads.
const READY: &str = "Ready";

impl LeanPodCondition<'_> {
    /// The `Ready` condition as k8s-openapi has it; a time that does not parse is an error,
    /// as it would be in a full decode.
    fn ready<E: serde::de::Error>(self) -> Result<PodCondition, E> {
        let last_transition_time = self
            .last_transition_time
            .map(|t| t.parse::<Timestamp>().map(Time).map_err(E::custom))
            .transpose()?;
        Ok(PodCondition {
            type_: READY.to_string(),
            status: self.status.into_owned(),
            last_transition_time,
            ..PodCondition::default()
        })
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LeanContainerStatus {
    restart_count: i32,
}

impl<'de> Deserialize<'de> for Lean<Pod> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let p = LeanPod::deserialize(deserializer)?;
        let status = match p.status {
            None => None,
            Some(s) => Some(PodStatus {
                phase: s.phase,
                conditions: s
                    .conditions
                    .map(|cs| {
                        cs.into_iter()
                            .filter(|c| c.type_ == READY)
                            .map(LeanPodCondition::ready)
                            .collect::<Result<Vec<_>, D::Error>>()
                    })
                    .transpose()?,
                container_statuses: s.container_statuses.map(|cs| {
                    cs.into_iter()
                        .map(|c| ContainerStatus {
                            restart_count: c.restart_count,
                            ..ContainerStatus::default()
                        })
                        .collect()
                }),
                ..PodStatus::default()
            }),
        };
        Ok(Lean(Pod {
            metadata: p.metadata.into(),
            spec: p.spec.map(|s| PodSpec {
                node_name: s.node_name,
                tolerations: s.tolerations,
                ..PodSpec::default()
            }),
            status,
        }))
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LeanNode {
    metadata: Meta,
    spec: Option<LeanNodeSpec>,
    status: Option<LeanNodeStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LeanNodeSpec {
    taints: Option<Vec<Taint>>,
    unschedulable: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LeanNodeStatus {
    conditions: Option<Vec<NodeCondition>>,
    /// Where a NodePort probe reaches the node (`cluster::targets::internal_ips`).
    addresses: Option<Vec<NodeAddress>>,
}

impl<'de> Deserialize<'de> for Lean<Node> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let n = LeanNode::deserialize(deserializer)?;
        Ok(Lean(Node {
            metadata: n.metadata.into(),
            spec: n.spec.map(|s| NodeSpec {
                taints: s.taints,
                unschedulable: s.unschedulable,
                ..NodeSpec::default()
            }),
            status: n.status.map(|s| NodeStatus {
                conditions: s.conditions,
                addresses: s.addresses,
                ..NodeStatus::default()
            }),
        }))
    }
}

/// A ReplicaSet is read for its owner (the Deployment) alone: its pod template, often the
/// biggest part of it, is skipped.
#[derive(Deserialize, Default)]
#[serde(default)]
struct LeanReplicaSet {
    metadata: Meta,
}

impl<'de> Deserialize<'de> for Lean<ReplicaSet> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let rs = LeanReplicaSet::deserialize(deserializer)?;
        Ok(Lean(ReplicaSet {
            metadata: rs.metadata.into(),
            ..ReplicaSet::default()
        }))
    }
}

// Tested in `crate::observe` (lean_tests.rs): a lean object reduces as the full one does.
