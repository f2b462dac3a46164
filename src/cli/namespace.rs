//! `-n/--namespace`: an experiment run in another namespace than the one its file names,
//! as kubectl's `-n` runs the same command against another copy of an application.
//!
//! The experiment's namespace is used wherever the experiment used it: as the default of
//! references written without one, and in references that name it. References to other
//! namespaces (kube-system, say) stay. Setup manifests are applied as written, so one
//! that creates the experiment's Namespace, or puts its objects in that namespace itself,
//! is refused: the run would create them where `-n` says nothing is looked at. `run`,
//! `plan`, `doctor`, `validate` and `rehearse` take `-n`; a refusal is exit 2 in each.

use std::path::PathBuf;

use serde_json::Value;

use crate::experiment::model::Experiment;

/// Why an experiment cannot be moved to the namespace asked for.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NamespaceError {
    /// Not a DNS-1123 label, so no namespace can have that name.
    #[error(
        "-n {0}: not a namespace name (lower-case letters, digits and `-`, at most 63, \
         starting and ending with a letter or digit)"
    )]
    InvalidName(String),
    /// A setup manifest creates the experiment's namespace: moved, the run would create
    /// that namespace and look for its workloads in another.
    #[error(
        "{experiment}: -n {asked}: setup manifest {file} creates Namespace `{own}` itself: \
         with -n the run would create `{own}` and look for the workloads in `{asked}`; \
         take the Namespace out of setup and create `{asked}` before the run, or run \
         without -n"
    )]
    SetupCreatesNamespace {
        /// The experiment.
        experiment: String,
        /// The namespace asked for.
        asked: String,
        /// The experiment's own namespace.
        own: String,
        /// The manifest file.
        file: PathBuf,
    },
    /// A setup manifest names the experiment's namespace itself.
    #[error(
        "{experiment}: -n {asked}: setup manifest {file} puts {object} in namespace `{own}` \
         itself, so -n cannot move it; remove its `namespace:` lines and create the \
         namespace before the run, or run without -n"
    )]
    ManifestNamesNamespace {
        /// The experiment.
        experiment: String,
        /// The namespace asked for.
        asked: String,
        /// The experiment's own namespace.
        own: String,
        /// The manifest file.
        file: PathBuf,
        /// `Kind/name` of the object.
        object: String,
    },
    /// A setup manifest cannot be read or parsed (a run would fail on it too).
    #[error("{experiment}: -n {asked}: {message}")]
    Manifest {
        /// The experiment.
        experiment: String,
        /// The namespace asked for.
        asked: String,
        /// What went wrong.
        message: String,
    },
    /// The experiment did not survive the rewrite (cannot happen with a validated one).
    #[error("{experiment}: -n {asked}: {message}")]
    Rewrite {
        /// The experiment.
        experiment: String,
        /// The namespace asked for.
        asked: String,
        /// What went wrong.
        message: String,
    },
}

/// The experiment with its namespace replaced by `namespace` everywhere it is used.
pub(crate) fn moved_to(exp: Experiment, namespace: &str) -> Result<Experiment, NamespaceError> {
    if !is_dns1123_label(namespace) {
        return Err(NamespaceError::InvalidName(namespace.to_string()));
    }
    let own = exp.namespace.clone();
    if own == namespace {
        return Ok(exp);
    }
    check_setup_manifests(&exp, namespace)?;
    let rewrite_error = |message: String| NamespaceError::Rewrite {
        experiment: exp.name.clone(),
        asked: namespace.to_string(),
        message,
    };
    let mut value = serde_json::to_value(&exp).map_err(|e| rewrite_error(e.to_string()))?;
    replace_namespace(&mut value, &own, namespace);
    serde_json::from_value(value).map_err(|e| rewrite_error(e.to_string()))
}

/// Replaces `from` by `to` in every `namespace` string and every `namespaces` list entry.
fn replace_namespace(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match (key.as_str(), &mut *v) {
                    ("namespace", Value::String(s)) if s == from => *s = to.to_string(),
                    ("namespaces", Value::Array(list)) => {
                        for entry in list.iter_mut() {
                            if entry.as_str() == Some(from) {
                                *entry = Value::String(to.to_string());
                            }
                        }
                    }
                    _ => replace_namespace(v, from, to),
                }
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|v| replace_namespace(v, from, to)),
        _ => {}
    }
}

/// Refuses a setup manifest with an object in the experiment's own namespace, or that
/// creates that namespace.
fn check_setup_manifests(exp: &Experiment, asked: &str) -> Result<(), NamespaceError> {
    let own = &exp.namespace;
    for file in &exp.setup.manifests {
        let manifest_error = |message: String| NamespaceError::Manifest {
            experiment: exp.name.clone(),
            asked: asked.to_string(),
            message,
        };
        let text = std::fs::read_to_string(file)
            .map_err(|e| manifest_error(format!("{}: {e}", file.display())))?;
        let objects = crate::experiment::manifest::parse_manifest(file, &text)
            .map_err(|e| manifest_error(e.to_string()))?;
        for obj in objects {
            let kind = obj.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("");
            let name = obj.metadata.name.as_deref().unwrap_or("");
            if kind == "Namespace" && name == own {
                return Err(NamespaceError::SetupCreatesNamespace {
                    experiment: exp.name.clone(),
                    asked: asked.to_string(),
                    own: own.clone(),
                    file: file.clone(),
                });
            }
            if obj.metadata.namespace.as_deref() == Some(own.as_str()) {
                return Err(NamespaceError::ManifestNamesNamespace {
                    experiment: exp.name.clone(),
                    asked: asked.to_string(),
                    own: own.clone(),
                    file: file.clone(),
                    object: format!("{kind}/{name}"),
                });
            }
        }
    }
    Ok(())
}

/// A DNS-1123 label: what a namespace name must be.
fn is_dns1123_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const WITHOUT_SETUP: &str = "name: moved\ndescription: the web pods of the shop\nnamespace: shop\n\
        observe:\n  namespaces: [shop, kube-system]\n\
        targets:\n  victim: {role: worker, runningPodsOf: deployment/web, count: 1}\n\
        steps:\n  - {name: stop, at: 0s, do: kubelet-stop, target: victim}\n\
        expect:\n\
        \x20 - name: web pods go Terminating\n    pods: {workload: deployment/web, on: victim}\n    becomes: Terminating\n    within: 5m\n\
        \x20 - name: dns stays\n    pods: {workload: deployment/kube-system/coredns}\n    never: Terminating\n";

    fn parsed(text: &str) -> Experiment {
        crate::experiment::parse(text, Path::new("moved.yaml")).unwrap_or_else(|d| panic!("{d}"))
    }

    #[test]
    fn the_experiments_namespace_moves_and_other_namespaces_stay() {
        let exp = moved_to(parsed(WITHOUT_SETUP), "shop-copy").expect("moved");
        let json = serde_json::to_string(&exp).expect("json");
        assert_eq!(exp.namespace, "shop-copy");
        assert!(!json.contains("\"shop\""), "{json}");
        assert!(json.contains("\"kube-system\""), "{json}");
        assert_eq!(
            exp.observe.namespaces.len(),
            2,
            "{:?}",
            exp.observe.namespaces
        );
        assert!(exp.observe.namespaces.contains(&"shop-copy".to_string()));
        assert!(exp.observe.namespaces.contains(&"kube-system".to_string()));
    }

    #[test]
    fn a_setup_manifest_in_the_experiments_namespace_is_refused_naming_it() {
        let exp = crate::experiment::load(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("experiments/kubelet-stop-past-toleration.yaml"),
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let err = moved_to(exp, "other").unwrap_err().to_string();
        assert!(
            err.contains(
                "00-namespace.yaml creates Namespace `faultline-lab` itself: with -n the run \
                 would create `faultline-lab` and look for the workloads in `other`"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_name_no_namespace_can_have_is_refused() {
        for bad in ["Shop", "-shop", "shop_1", "", &"a".repeat(64)] {
            assert!(
                matches!(
                    moved_to(parsed(WITHOUT_SETUP), bad),
                    Err(NamespaceError::InvalidName(_))
                ),
                "{bad:?}"
            );
        }
    }
}
