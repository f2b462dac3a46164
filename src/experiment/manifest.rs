//! A setup manifest read as API objects without a cluster: validation (which workloads
//! setup creates), `plan`, `doctor`, `rbac` and setup itself all read manifests through
//! this one parser, so it sits with the experiment its `setup.manifests` belong to, below
//! everything that reads them.

use std::path::{Path, PathBuf};

use kube::api::DynamicObject;

/// A manifest file is not valid YAML or a document is not a Kubernetes object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("manifest {path}, document {document}: {message}")]
pub struct ManifestInvalid {
    /// The file.
    pub path: PathBuf,
    /// 1-based document index within the file (0: the file as a whole).
    pub document: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses a multi-document YAML manifest into API objects; empty documents are skipped.
pub(crate) fn parse_manifest(
    path: &Path,
    text: &str,
) -> Result<Vec<DynamicObject>, ManifestInvalid> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(text).map_err(|e| ManifestInvalid {
            path: path.to_path_buf(),
            document: 0,
            message: e.to_string(),
        })?;
    let mut out = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let invalid = |message: String| ManifestInvalid {
            path: path.to_path_buf(),
            document: i + 1,
            message,
        };
        let obj: DynamicObject =
            serde_json::from_value(doc).map_err(|e| invalid(format!("not an API object: {e}")))?;
        if obj.types.is_none() {
            return Err(invalid("missing apiVersion or kind".to_string()));
        }
        if obj.metadata.name.is_none() {
            return Err(invalid("missing metadata.name".to_string()));
        }
        out.push(obj);
    }
    Ok(out)
}

/// A Deployment, StatefulSet or DaemonSet a setup manifest creates, with what its pods will
/// tolerate: what `plan` predicts for pods it cannot list yet.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SetupWorkload {
    /// Which workload, where setup puts it (`default` when the manifest names no
    /// namespace).
    pub workload: crate::experiment::model::WorkloadRef,
    /// Its pod template's tolerations, as written.
    pub tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
}

/// The workloads `manifests` create, in file order; `None` when a file cannot be read or
/// parsed (validation and the run say why).
pub(crate) fn setup_workloads(manifests: &[PathBuf]) -> Option<Vec<SetupWorkload>> {
    use crate::experiment::model::{WorkloadKind, WorkloadRef};
    let mut out = Vec::new();
    for path in manifests {
        let text = crate::experiment::read_input(path).ok()?;
        for obj in parse_manifest(path, &text).ok()? {
            let kind = match obj.types.as_ref().map(|t| t.kind.as_str()) {
                Some("Deployment") => WorkloadKind::Deployment,
                Some("StatefulSet") => WorkloadKind::StatefulSet,
                Some("DaemonSet") => WorkloadKind::DaemonSet,
                _ => continue,
            };
            let tolerations = obj
                .data
                .pointer("/spec/template/spec/tolerations")
                .cloned()
                .and_then(|t| serde_json::from_value(t).ok())
                .unwrap_or_default();
            let Some(name) = obj.metadata.name else {
                continue;
            };
            out.push(SetupWorkload {
                workload: WorkloadRef {
                    kind,
                    namespace: obj.metadata.namespace.unwrap_or_else(|| "default".into()),
                    name,
                },
                tolerations,
            });
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_multi_document_yaml_and_skips_empty_documents() {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lab/db-statefulset.yaml"),
        )
        .unwrap_or_default();
        let objs = parse_manifest(Path::new("db.yaml"), &format!("---\n{text}\n---\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        let kinds: Vec<_> = objs
            .iter()
            .map(|o| o.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default())
            .collect();
        assert_eq!(kinds, vec!["Service", "StatefulSet"]);
        assert_eq!(objs[1].metadata.namespace.as_deref(), Some("faultline-lab"));
    }

    #[test]
    fn rejects_documents_that_are_not_objects() {
        let err = parse_manifest(
            Path::new("x.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nfoo: bar\n",
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.contains("x.yaml, document 2"), "{err}");
        let err = parse_manifest(Path::new("y.yaml"), "apiVersion: v1\nkind: ConfigMap\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("metadata.name"), "{err}");
    }
}
