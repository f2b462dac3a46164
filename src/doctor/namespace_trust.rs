//! Inside the cluster (the chart's Job, `POD_NAMESPACE` set): who else may change what this
//! Job runs.
//!
//! The Job runs with the actor's powers, and through the API transport as root on the
//! nodes. Its files are pinned by digest (`faultline job`), so an edited ConfigMap runs
//! nothing; but whoever may edit its Jobs or CronJobs, create pods in its namespace (and so
//! run as its ServiceAccounts), or edit the ConfigMaps before the next release, can act as
//! the actor. Kubernetes' usual `edit` and `admin` roles allow all of it. So `doctor`, run
//! from the Job, reads the namespace's RoleBindings (the `can-i --list` question asked of
//! every subject bound there) and names each subject that may do any of that, other than
//! faultline's own ServiceAccounts: the namespace should be the release owner's alone.
//! Cluster-wide bindings (cluster admins) are not listed: they hold more than this anyway.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding};
use kube::api::{Api, ListParams};

use super::{CheckKind, Finding, Status};

/// The requests that change what the Job runs, or run as its accounts: (group, resource,
/// verbs).
const CHANGES_THE_JOB: &[(&str, &str, &[&str])] = &[
    ("", "configmaps", &["update", "patch", "create", "delete"]),
    ("", "pods", &["create"]),
    ("", "serviceaccounts/token", &["create"]),
    ("batch", "jobs", &["update", "patch", "create"]),
    ("batch", "cronjobs", &["update", "patch", "create"]),
    ("", "persistentvolumeclaims", &["update", "patch", "create"]),
];

/// What `rules` allow of [`CHANGES_THE_JOB`], as `verb resource` strings.
pub(crate) fn job_changing(rules: &[PolicyRule]) -> Vec<String> {
    let mut found = Vec::new();
    for (group, resource, verbs) in CHANGES_THE_JOB {
        for verb in *verbs {
            let allowed = rules.iter().any(|r| {
                let any = |list: &Option<Vec<String>>, want: &str| {
                    list.as_ref()
                        .is_some_and(|l| l.iter().any(|v| v == "*" || v == want))
                };
                r.verbs.iter().any(|v| v == "*" || v == verb)
                    && any(&r.api_groups, group)
                    && any(&r.resources, resource)
                    && r.resource_names.as_ref().is_none_or(|n| n.is_empty())
            });
            if allowed {
                found.push(format!("{verb} {resource}"));
            }
        }
    }
    found
}

/// The finding for namespace `ns`; `own` are faultline's ServiceAccounts there (the
/// release's), which are not counted.
pub(crate) async fn finding(client: &kube::Client, ns: &str, own: &[String]) -> Finding {
    let f = |status, detail: String| Finding::cluster(CheckKind::Trust, status, detail);
    let bindings = match Api::<RoleBinding>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(e) => {
            return f(
                Status::Skip,
                format!(
                    "cannot read the RoleBindings of namespace {ns} ({e}): grant `list \
                     rolebindings, roles` there and `get clusterroles` to check who else may \
                     change what this Job runs"
                ),
            );
        }
    };
    let mut others = Vec::new();
    let mut unread = Vec::new();
    for b in &bindings {
        let name = b.metadata.name.clone().unwrap_or_default();
        let rules = match b.role_ref.kind.as_str() {
            "Role" => Api::<Role>::namespaced(client.clone(), ns)
                .get(&b.role_ref.name)
                .await
                .map(|r| r.rules.unwrap_or_default()),
            _ => Api::<ClusterRole>::all(client.clone())
                .get(&b.role_ref.name)
                .await
                .map(|r| r.rules.unwrap_or_default()),
        };
        let rules = match rules {
            Ok(rules) => rules,
            Err(_) => {
                unread.push(format!("{} {}", b.role_ref.kind, b.role_ref.name));
                continue;
            }
        };
        let may = job_changing(&rules);
        if may.is_empty() {
            continue;
        }
        for s in b.subjects.iter().flatten() {
            let ours = s.kind == "ServiceAccount"
                && s.namespace.as_deref().unwrap_or(ns) == ns
                && own.contains(&s.name);
            if !ours {
                others.push(format!(
                    "{} {} (RoleBinding {name} → {} {}: {})",
                    s.kind,
                    s.name,
                    b.role_ref.kind,
                    b.role_ref.name,
                    may.join(", ")
                ));
            }
        }
    }
    let unread = if unread.is_empty() {
        String::new()
    } else {
        format!("; not read: {}", unread.join(", "))
    };
    if others.is_empty() {
        f(
            Status::Pass,
            format!(
                "no RoleBinding in namespace {ns} lets anyone but faultline's own accounts change \
                 what this Job runs{unread}"
            ),
        )
    } else {
        f(
            Status::Warn,
            format!(
                "in namespace {ns} these may change what this Job runs, and so act with the \
                 actor's powers: {}. Keep the namespace the release owner's alone \
                 (docs/in-cluster.md, \"Who must be allowed what\"){unread}",
                others.join("; ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
        PolicyRule {
            api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
            resources: Some(resources.iter().map(|s| s.to_string()).collect()),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            ..PolicyRule::default()
        }
    }

    /// Issue 69, item 4: Kubernetes' `edit` lets a namespace editor change the Job's
    /// ConfigMaps and run pods as its accounts; a read-only role does not.
    #[test]
    fn edit_like_rules_change_the_job_and_read_only_ones_do_not() {
        let edit = [
            rule(
                &[""],
                &["configmaps", "pods"],
                &["create", "update", "patch", "delete"],
            ),
            rule(
                &["batch"],
                &["jobs", "cronjobs"],
                &["create", "update", "patch"],
            ),
        ];
        let found = job_changing(&edit);
        assert!(
            found.contains(&"update configmaps".to_string()),
            "{found:?}"
        );
        assert!(found.contains(&"create pods".to_string()), "{found:?}");
        assert!(found.contains(&"patch cronjobs".to_string()), "{found:?}");
        let view = [rule(&["", "batch"], &["*"], &["get", "list", "watch"])];
        assert!(job_changing(&view).is_empty());
        let star = [rule(&["*"], &["*"], &["*"])];
        assert_eq!(job_changing(&star).len(), 15);
        // One named ConfigMap only: not the Job's.
        let mut named = rule(&[""], &["configmaps"], &["update"]);
        named.resource_names = Some(vec!["other".into()]);
        assert!(job_changing(&[named]).is_empty());
    }
}
