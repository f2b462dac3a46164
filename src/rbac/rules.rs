//! Permissions as RBAC rules: [`Access`]es grouped into the `rules:` of a ClusterRole (the
//! cluster-wide ones) and of a Role per namespace, and the question RBAC itself answers
//! for a set of rules: is this request allowed?

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::doctor::access::Access;

/// The rules of one role: cluster-wide (a ClusterRole bound by a ClusterRoleBinding) or in
/// one namespace (a Role and its RoleBinding).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Grants {
    /// Rules that hold in every namespace and for cluster-scoped resources.
    pub cluster: Vec<PolicyRule>,
    /// Namespace → rules that hold only there.
    pub namespaced: BTreeMap<String, Vec<PolicyRule>>,
}

impl Grants {
    /// The fewest rules that allow exactly `accesses`: per scope, one rule per API group,
    /// set of verbs and set of object names, listing every resource that needs that same
    /// set. An access on one named object is granted by `resourceNames`, unless the same
    /// verb is needed on any object of the resource, or the verb is `create` (RBAC cannot
    /// restrict it by name: the object has none yet). Sorted, so the same permissions
    /// always print the same rules.
    pub(crate) fn of(accesses: &[Access]) -> Grants {
        let mut by_scope: BTreeMap<Option<String>, VerbsByResource> = BTreeMap::new();
        for a in accesses {
            let names = by_scope
                .entry(a.namespace.clone())
                .or_default()
                .entry((a.group.clone(), resource_path(a)))
                .or_default()
                .entry(a.verb.clone())
                .or_insert_with(|| Some(BTreeSet::new()));
            match (&a.name, names.as_mut()) {
                (Some(name), Some(set)) if a.verb != "create" => {
                    set.insert(name.clone());
                }
                _ => *names = None,
            }
        }
        let mut grants = Grants::default();
        for (scope, resources) in by_scope {
            let rules = merge(resources);
            match scope {
                None => grants.cluster = rules,
                Some(ns) => {
                    grants.namespaced.insert(ns, rules);
                }
            }
        }
        grants
    }

    /// Whether these rules allow `access`, as the RBAC authorizer decides: a cluster-wide
    /// rule allows it anywhere, a namespace's rule only in that namespace; `*` matches all.
    pub(crate) fn allows(&self, access: &Access) -> bool {
        let in_namespace = access
            .namespace
            .as_ref()
            .and_then(|ns| self.namespaced.get(ns))
            .into_iter()
            .flatten();
        self.cluster
            .iter()
            .chain(in_namespace)
            .any(|rule| rule_allows(rule, access))
    }
}

/// (API group, resource or `resource/subresource`) → verb → the object names it is needed
/// on (`None`: any object), within one scope.
type VerbsByResource = BTreeMap<(String, String), BTreeMap<String, Option<BTreeSet<String>>>>;

/// `pods`, or `pods/eviction` for a subresource, as RBAC rules name it.
fn resource_path(a: &Access) -> String {
    match &a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.clone(),
    }
}

/// The rules' key: API group, verbs, and the object names they hold for (`None`: any).
type RuleKey = (String, Vec<String>, Option<Vec<String>>);

/// One rule per group, verb set and name set.
fn merge(resources: VerbsByResource) -> Vec<PolicyRule> {
    let mut by_verbs: BTreeMap<RuleKey, Vec<String>> = BTreeMap::new();
    for ((group, resource), verbs) in resources {
        let mut by_names: BTreeMap<Option<Vec<String>>, Vec<String>> = BTreeMap::new();
        for (verb, names) in verbs {
            by_names
                .entry(names.map(|n| n.into_iter().collect()))
                .or_default()
                .push(verb);
        }
        for (names, verbs) in by_names {
            by_verbs
                .entry((group.clone(), verbs, names))
                .or_default()
                .push(resource.clone());
        }
    }
    by_verbs
        .into_iter()
        .map(|((group, verbs, names), resources)| PolicyRule {
            api_groups: Some(vec![group]),
            resources: Some(resources),
            resource_names: names,
            verbs,
            ..PolicyRule::default()
        })
        .collect()
}

fn rule_allows(rule: &PolicyRule, a: &Access) -> bool {
    let has = |list: &Option<Vec<String>>, want: &str| {
        list.iter().flatten().any(|x| x == "*" || x == want)
    };
    // A rule that names its objects holds for those alone, and never for `create`.
    let named = match rule.resource_names.as_deref() {
        None | Some([]) => true,
        Some(names) => a.verb != "create" && a.name.as_ref().is_some_and(|n| names.contains(n)),
    };
    has(&rule.api_groups, &a.group)
        && has(&rule.resources, &resource_path(a))
        && rule.verbs.iter().any(|v| v == "*" || *v == a.verb)
        && named
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(verb: &str, group: &str, resource: &str, ns: Option<&str>) -> Access {
        Access {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: None,
            namespace: ns.map(str::to_string),
            name: None,
            why: "test".into(),
            required: true,
        }
    }

    #[test]
    fn resources_with_the_same_verbs_share_a_rule_and_scopes_stay_apart() {
        let mut eviction = access("create", "", "pods", None);
        eviction.subresource = Some("eviction".into());
        let grants = Grants::of(&[
            access("list", "", "pods", None),
            access("list", "", "nodes", None),
            access("patch", "", "nodes", None),
            eviction,
            access("delete", "", "pods", Some("shop")),
            access("watch", "apps", "deployments", Some("shop")),
        ]);
        let show = |rules: &[PolicyRule]| -> Vec<String> {
            rules
                .iter()
                .map(|r| {
                    format!(
                        "{:?} {:?} {:?}",
                        r.api_groups.as_deref().unwrap_or_default(),
                        r.resources.as_deref().unwrap_or_default(),
                        r.verbs
                    )
                })
                .collect()
        };
        assert_eq!(
            show(&grants.cluster),
            [
                r#"[""] ["pods/eviction"] ["create"]"#,
                r#"[""] ["pods"] ["list"]"#,
                r#"[""] ["nodes"] ["list", "patch"]"#,
            ]
        );
        assert_eq!(
            show(&grants.namespaced["shop"]),
            [
                r#"[""] ["pods"] ["delete"]"#,
                r#"["apps"] ["deployments"] ["watch"]"#,
            ]
        );
    }

    #[test]
    fn a_role_allows_only_in_its_namespace_and_a_cluster_role_everywhere() {
        let grants = Grants::of(&[
            access("delete", "", "pods", Some("shop")),
            access("list", "", "nodes", None),
        ]);
        assert!(grants.allows(&access("delete", "", "pods", Some("shop"))));
        assert!(!grants.allows(&access("delete", "", "pods", Some("bank"))));
        assert!(!grants.allows(&access("delete", "", "pods", None)));
        assert!(!grants.allows(&access("patch", "", "nodes", None)));
        assert!(!grants.allows(&access("list", "apps", "nodes", None)));
        let wide = Grants::of(&[access("delete", "", "pods", None)]);
        assert!(wide.allows(&access("delete", "", "pods", Some("bank"))));
        let mut sub = access("delete", "", "pods", None);
        sub.subresource = Some("eviction".into());
        assert!(
            !wide.allows(&sub),
            "a resource's rule does not cover its subresources"
        );
    }
}
