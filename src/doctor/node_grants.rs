//! Grants on nodes by name. An actor may hold `patch nodes` (cordon, drain, taint) or
//! `delete nodes` on the nodes it is meant to touch alone (`faultline rbac --nodes`), as a
//! ClusterRole rule with `resourceNames`. Asked without a name, such an actor is refused;
//! so when the unnamed question is refused, the rules the API server reports for the
//! caller (`SelfSubjectRulesReview`) say which nodes it may touch, each confirmed by a
//! `SelfSubjectAccessReview` naming the node. A run asks again node by node once its
//! targets are resolved (`doctor::cluster::check_on_nodes`), and refuses a step on any
//! other node.

use kube::Client;

use super::access::{self, Access};
use super::review::{can_i, my_rules};

/// A per-node verb the API server refuses on every node but allows on some by name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GrantedByName {
    /// The permission, as asked without a name (`patch nodes`).
    pub access: Access,
    /// The nodes it is allowed on, each confirmed by name; never empty.
    pub nodes: Vec<String>,
}

/// The nodes `access` (refused without a name) is granted on by name: read from the rules
/// the API server reports for the caller, each confirmed by asking with its name. Empty
/// when no rule names a node (then the refusal stands).
pub(crate) async fn granted_nodes(client: &Client, access: &Access) -> Vec<String> {
    let rules = my_rules(client).await;
    let named = names_in_rules(
        rules.iter().map(|r| {
            (
                r.api_groups.as_deref().unwrap_or_default(),
                r.resources.as_deref().unwrap_or_default(),
                r.verbs.as_slice(),
                r.resource_names.as_deref().unwrap_or_default(),
            )
        }),
        access,
    );
    let mut confirmed = Vec::new();
    for node in named {
        if can_i(client, &access::on_node(access, &node))
            .await
            .unwrap_or(false)
        {
            confirmed.push(node);
        }
    }
    confirmed
}

/// The object names the rules (API groups, resources, verbs, resource names) grant
/// `access`'s verb on, sorted: only rules naming objects count (an unnamed rule would
/// have allowed the unnamed question).
fn names_in_rules<'a>(
    rules: impl Iterator<Item = (&'a [String], &'a [String], &'a [String], &'a [String])>,
    access: &Access,
) -> Vec<String> {
    let matches = |list: &[String], want: &str| list.iter().any(|v| v == want || v == "*");
    let mut names: Vec<String> = rules
        .filter(|(groups, resources, verbs, _)| {
            matches(groups, &access.group)
                && matches(resources, &access.resource)
                && matches(verbs, &access.verb)
        })
        .flat_map(|(_, _, _, names)| names.iter().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_rules_naming_nodes_for_the_verb_give_names() {
        let patch = Access {
            verb: "patch".into(),
            group: String::new(),
            resource: "nodes".into(),
            subresource: None,
            namespace: None,
            name: None,
            why: "step `drain`".into(),
            required: true,
        };
        let rules = [
            (
                strings(&[""]),
                strings(&["nodes"]),
                strings(&["patch"]),
                strings(&["w2", "w1"]),
            ),
            (
                strings(&[""]),
                strings(&["nodes"]),
                strings(&["delete"]),
                strings(&["cp"]),
            ),
            (
                strings(&[""]),
                strings(&["pods"]),
                strings(&["patch"]),
                strings(&["p"]),
            ),
            (
                strings(&["apps"]),
                strings(&["nodes"]),
                strings(&["patch"]),
                strings(&["x"]),
            ),
            (
                strings(&["*"]),
                strings(&["*"]),
                strings(&["*"]),
                strings(&["w1", "w3"]),
            ),
            (
                strings(&[""]),
                strings(&["nodes"]),
                strings(&["get"]),
                strings(&[]),
            ),
        ];
        let got = names_in_rules(
            rules
                .iter()
                .map(|(g, r, v, n)| (g.as_slice(), r.as_slice(), v.as_slice(), n.as_slice())),
            &patch,
        );
        assert_eq!(got, ["w1", "w2", "w3"]);
    }
}
