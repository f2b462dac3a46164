//! Expectations about a workload that `setup` never creates.
//!
//! Such an expectation validated as ok and failed only at the end of a run, after a node
//! had been broken for nothing. Offline, faultline knows what the setup manifests create,
//! but not what the cluster already runs (a platform DaemonSet, an application deployed by
//! other means), so this is a warning, not an error. It is only given when the experiment
//! has setup manifests (an experiment without them is about workloads already there), and
//! not for a workload a target selects by (`runningPodsOf`): targets are resolved before
//! any fault, and one whose workload has no pods refuses the run then.

use std::collections::BTreeSet;

use super::{Validator, at, pos};
use crate::experiment::model::*;
use crate::experiment::raw::*;

/// A workload as `kind/namespace/name`, lowercase kind: how a manifest object and a
/// reference are compared.
type Key = (String, String, String);

impl Validator<'_> {
    pub(super) fn workloads_setup_creates(
        &mut self,
        raw: &RawExperiment,
        setup: &Setup,
        targets: &[TargetSpec],
    ) {
        if setup.manifests.is_empty() {
            return;
        }
        let Some(created) = created_by(&setup.manifests) else {
            // A manifest that does not read is setup's to report, before any fault.
            return;
        };
        let selected: BTreeSet<Key> = targets
            .iter()
            .filter_map(|t| t.selector.running_pods_of.as_ref())
            .map(key_of)
            .collect();
        let Some(expect) = &raw.expect else {
            return;
        };
        for e in expect.value.items() {
            let e = &e.value;
            let refs = [
                e.workload.as_ref(),
                e.pods.as_ref().and_then(|p| p.value.workload.as_ref()),
            ];
            for r in refs.into_iter().flatten() {
                let Some(wanted) = self.quiet_workload(&r.value) else {
                    continue;
                };
                if created.contains(&wanted) || selected.contains(&wanted) {
                    continue;
                }
                let (kind, namespace, name) = &wanted;
                let elsewhere: Vec<&str> = created
                    .iter()
                    .filter(|(k, _, n)| k == kind && n == name)
                    .map(|(_, ns, _)| ns.as_str())
                    .collect();
                let hint = match elsewhere.first() {
                    Some(ns) => format!(
                        "setup creates {kind}/{name} in {ns}: write `{kind}/{ns}/{name}`, or set \
                         metadata.namespace in its manifest (a manifest without one goes to `default`)"
                    ),
                    None => format!(
                        "if it is not already in the cluster, the run breaks a node and then fails \
                         this expectation: add its manifest to `setup.manifests`, or check the name \
                         and namespace (`{kind}/NAMESPACE/NAME`)"
                    ),
                };
                self.warnings.push(crate::experiment::Diagnostic {
                    path: self.path.to_path_buf(),
                    line: pos(at(r)).0,
                    column: pos(at(r)).1,
                    message: format!(
                        "`setup` does not create {kind}/{name} in {namespace}, which this expectation is about"
                    ),
                    hint: Some(hint),
                });
            }
        }
    }

    /// A workload reference as [`Validator::workload`] reads it, without reporting: the
    /// errors were reported there.
    fn quiet_workload(&self, text: &str) -> Option<Key> {
        let parts: Vec<&str> = text.split('/').collect();
        let (kind, namespace, name) = match parts.as_slice() {
            [k, n] => (*k, self.namespace.as_str(), *n),
            [k, ns, n] => (*k, *ns, *n),
            _ => return None,
        };
        Some((kind.to_owned(), namespace.to_owned(), name.to_owned()))
    }
}

fn key_of(w: &WorkloadRef) -> Key {
    (
        w.kind.as_str().to_owned(),
        w.namespace.clone(),
        w.name.clone(),
    )
}

/// The Deployments, StatefulSets and DaemonSets the manifests create, where setup puts
/// them (`default` when a manifest names no namespace); `None` if one does not read.
fn created_by(manifests: &[std::path::PathBuf]) -> Option<BTreeSet<Key>> {
    let workloads = crate::experiment::manifest::setup_workloads(manifests)?;
    Some(workloads.iter().map(|w| key_of(&w.workload)).collect())
}

#[cfg(test)]
mod tests {
    /// Setup creates deployment/web only. Workloads named where no expectation is about
    /// them (a `when:` condition, a `delete-pods` step, an exec probe's pod, an `abort`
    /// condition) get no warning; the one expectation about a workload setup never creates
    /// gets exactly one, at its line.
    #[test]
    fn only_expectations_about_a_workload_are_warned() {
        let dir = tempfile::tempdir().unwrap();
        let lab = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lab");
        std::fs::copy(
            lab.join("web-deployment.yaml"),
            dir.path().join("web-deployment.yaml"),
        )
        .unwrap();
        let file = dir.path().join("exp.yaml");
        std::fs::write(
            &file,
            "name: warn-check\ndescription: which references are warned\nnamespace: faultline-lab\n\
             targets:\n  victim: {role: worker, runningPodsOf: deployment/web, count: 1}\n\
             setup:\n  manifests: [web-deployment.yaml]\n\
             probes:\n  in-pod:\n    exec: [\"true\"]\n    pod: {workload: deployment/probe-pod, on: victim}\n\
             steps:\n  - {name: stop, at: 0s, do: kubelet-stop, target: victim}\n\
             \x20 - name: delete when ready\n    when: {pods: {workload: deployment/condition}, is: Ready}\n    do: delete-pods\n    pods: {workload: deployment/deleted}\n\
             abort:\n  podsNotReady: [{workload: deployment/aborted, moreThan: 1, for: 10s}]\n\
             expect:\n\
             \x20 - {name: probe stays up, probe: in-pod, never: Down}\n\
             \x20 - {name: node goes Unknown, node: victim, becomes: Unknown, within: grace + 10s}\n\
             \x20 - {name: web stays, pods: {workload: deployment/web}, never: Gone}\n\
             \x20 - {name: missing one, pods: {workload: deployment/missing}, never: Terminating}\n",
        )
        .unwrap();
        let (_, checked) = crate::experiment::load_all_checked(&[file])
            .into_iter()
            .next()
            .unwrap();
        checked.result.as_ref().unwrap_or_else(|d| panic!("{d}"));
        let warnings: Vec<String> = checked.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        assert!(
            warnings[0].contains("does not create deployment/missing in faultline-lab"),
            "{warnings:#?}"
        );
        assert!(warnings[0].contains("exp.yaml:24:"), "{warnings:#?}");
    }
}
