//! `targets:` and the references to them, and workload references (`kind/ns/name`).

use super::{TOP, Validator, at, pos};
use super::{is_dns_label, is_dns_subdomain};
use crate::experiment::model::*;
use crate::experiment::raw::*;
use crate::experiment::suggest::closest;

impl Validator<'_> {
    pub(super) fn targets(&mut self, raw: &RawExperiment) -> Vec<TargetSpec> {
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
            let control_plane_allowed = raw
                .safety
                .as_ref()
                .and_then(|s| s.allow_control_plane)
                .unwrap_or(false);
            if let Some(r) = &t.role
                && role == Some(NodeRole::ControlPlane)
                && !control_plane_allowed
            {
                self.err(
                    r,
                    format!(
                        "target `{}` selects control-plane nodes but `safety.allowControlPlane` is not true",
                        name.value
                    ),
                    Some("faults on control-plane nodes must be opted into: add `safety: {allowControlPlane: true}`"),
                );
            }
            let running_pods_of = t.running_pods_of.as_ref().and_then(|w| self.workload(w));
            // Node names are DNS-1123 subdomains, as Kubernetes has them: EKS and many
            // on-premises clusters name nodes `ip-10-0-1-5.ec2.internal`.
            for n in &t.names {
                if !is_dns_subdomain(&n.value) {
                    self.err(
                        n,
                        format!("node name `{}` is not a valid Kubernetes node name", n.value),
                        Some("node names are DNS-1123 subdomains: dot-separated parts of a-z, 0-9 and -, each starting and ending with a letter or digit, at most 253 characters"),
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

    pub(super) fn workload(&mut self, w: &S<String>) -> Option<WorkloadRef> {
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
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn with_names(names: &str) -> Result<Vec<String>, Vec<String>> {
        let text = format!(
            "name: n\ndescription: d\ntargets:\n  victim: {{names: {names}}}\n\
             steps:\n  - {{name: c, at: 0s, do: cordon, target: victim}}\n\
             expect:\n  - {{name: e, node: victim, becomes: Unschedulable, within: 5s}}\n"
        );
        crate::experiment::parse(&text, Path::new("x.yaml"))
            .map(|e| e.targets[0].selector.names.clone())
            .map_err(|d| d.iter().map(|d| d.message.clone()).collect())
    }

    #[test]
    fn node_names_are_dns_subdomains() {
        assert_eq!(
            with_names("[ip-10-0-1-5.ec2.internal, node-a, a]"),
            Ok(vec![
                "ip-10-0-1-5.ec2.internal".to_owned(),
                "node-a".to_owned(),
                "a".to_owned()
            ])
        );
        let long = format!("{}xy", "a.".repeat(126)); // 254 characters, every part valid
        for bad in ["Node_B", "a..b", "node.", "-a.b", "a.b-", &long] {
            let got = with_names(&format!("['{bad}']"));
            assert_eq!(
                got,
                Err(vec![format!(
                    "node name `{bad}` is not a valid Kubernetes node name"
                )]),
                "{bad}"
            );
        }
    }
}
