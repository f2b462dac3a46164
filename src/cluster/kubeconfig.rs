//! Which kubeconfig files and context a command uses, with kubectl's conventions:
//! `--kubeconfig FILE` beats `KUBECONFIG` (a colon-separated list, merged, first value
//! wins), which beats the inventory's `cluster.kubeconfig`, which beats `~/.kube/config`;
//! `--context NAME` beats the inventory's `cluster.context`, which beats the kubeconfig's
//! `current-context`.
//!
//! People switch clusters with these two flags and that variable every day; an inventory
//! that could only be changed by editing it would be the one tool that ignores them. The
//! resolution is a pure function of its inputs so the precedence is unit-tested; the
//! environment is read once, at the command line's edge.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;

use super::ClusterError;

/// What the command line (and its environment) says about reaching the API; every field
/// unset means "whatever the inventory says".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiOverrides {
    /// `--kubeconfig FILE`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context NAME`.
    pub context: Option<String>,
    /// The raw `KUBECONFIG` value (a path list in the platform's syntax).
    pub kubeconfig_env: Option<OsString>,
}

impl ApiOverrides {
    /// The flags as given, with `KUBECONFIG` read from this process's environment.
    pub fn from_flags_and_env(kubeconfig: Option<PathBuf>, context: Option<String>) -> Self {
        ApiOverrides {
            kubeconfig,
            context,
            kubeconfig_env: std::env::var_os("KUBECONFIG"),
        }
    }

    /// The `KUBECONFIG` list, empty names dropped (as kubectl does); empty if unset.
    fn env_files(&self) -> Vec<PathBuf> {
        self.kubeconfig_env
            .as_ref()
            .map(|v| {
                std::env::split_paths(v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Where the kubeconfig in use came from, so a message can say which layer won.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeconfigOrigin {
    /// `--kubeconfig`.
    Flag,
    /// `KUBECONFIG`.
    Env,
    /// The inventory's `cluster.kubeconfig`.
    Inventory,
    /// Nothing named one: `~/.kube/config` (or in-cluster).
    Default,
}

/// The kubeconfig files (merged in order; empty = the default lookup) and context to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiAccess {
    /// Files to merge, first value wins; empty means `~/.kube/config` or in-cluster.
    pub kubeconfig: Vec<PathBuf>,
    /// Where `kubeconfig` came from.
    pub origin: KubeconfigOrigin,
    /// The context; `None` means the kubeconfig's current context.
    pub context: Option<String>,
}

/// Applies the precedence flag > `KUBECONFIG` > inventory > default to the kubeconfig, and
/// flag > inventory > current context to the context.
pub fn resolve_access(
    overrides: &ApiOverrides,
    inventory_kubeconfig: Option<&Path>,
    inventory_context: Option<&str>,
) -> ApiAccess {
    let env = overrides.env_files();
    let (kubeconfig, origin) = if let Some(flag) = &overrides.kubeconfig {
        (vec![flag.clone()], KubeconfigOrigin::Flag)
    } else if !env.is_empty() {
        (env, KubeconfigOrigin::Env)
    } else if let Some(file) = inventory_kubeconfig {
        (vec![file.to_path_buf()], KubeconfigOrigin::Inventory)
    } else {
        (Vec::new(), KubeconfigOrigin::Default)
    };
    let context = overrides
        .context
        .clone()
        .or_else(|| inventory_context.map(str::to_string));
    ApiAccess {
        kubeconfig,
        origin,
        context,
    }
}

/// The files as one string for messages: `a`, or `a:b` as the user wrote them.
pub(crate) fn show_files(files: &[PathBuf]) -> String {
    if files.is_empty() {
        return "$KUBECONFIG or ~/.kube/config".to_string();
    }
    files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// Reads and merges kubeconfig files kubectl's way (the first file to set a value wins,
/// files that do not exist are skipped unless none exists);
/// with no files, `KUBECONFIG` or `~/.kube/config` as kube itself would.
pub(crate) fn read_merged(files: &[PathBuf]) -> Result<Kubeconfig, ClusterError> {
    let wrap = |source| ClusterError::Kubeconfig {
        path: show_files(files),
        source,
    };
    if files.is_empty() {
        return Kubeconfig::read().map_err(wrap);
    }
    // kubectl skips the files of a KUBECONFIG list that do not exist; all missing is an error.
    let existing: Vec<&PathBuf> = files.iter().filter(|f| f.exists()).collect();
    let read = if existing.is_empty() {
        files.iter().collect()
    } else {
        existing
    };
    let mut merged = Kubeconfig::default();
    for file in read {
        let one = Kubeconfig::read_from(file).map_err(|source| ClusterError::Kubeconfig {
            path: file.display().to_string(),
            source,
        })?;
        merged = merged.merge(one).map_err(wrap)?;
    }
    Ok(merged)
}

/// The first of `files` that defines `context`: the one file a generated inventory can
/// name when `KUBECONFIG` lists several.
pub(crate) fn file_defining(files: &[PathBuf], context: &str) -> Option<PathBuf> {
    files.iter().find_map(|f| {
        let kc = Kubeconfig::read_from(f).ok()?;
        kc.contexts
            .iter()
            .any(|c| c.name == context)
            .then(|| f.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(list: &str) -> Option<OsString> {
        Some(OsString::from(list))
    }

    #[test]
    fn flag_beats_env_beats_inventory_beats_default() {
        let inv = Some(Path::new("/inv/kubeconfig"));
        let all = ApiOverrides {
            kubeconfig: Some("/flag/kc".into()),
            context: None,
            kubeconfig_env: env("/env/a:/env/b"),
        };
        let a = resolve_access(&all, inv, None);
        assert_eq!(a.kubeconfig, vec![PathBuf::from("/flag/kc")]);
        assert_eq!(a.origin, KubeconfigOrigin::Flag);

        let no_flag = ApiOverrides {
            kubeconfig: None,
            ..all.clone()
        };
        let a = resolve_access(&no_flag, inv, None);
        assert_eq!(
            a.kubeconfig,
            vec![PathBuf::from("/env/a"), PathBuf::from("/env/b")]
        );
        assert_eq!(a.origin, KubeconfigOrigin::Env);

        let a = resolve_access(&ApiOverrides::default(), inv, None);
        assert_eq!(a.kubeconfig, vec![PathBuf::from("/inv/kubeconfig")]);
        assert_eq!(a.origin, KubeconfigOrigin::Inventory);

        let a = resolve_access(&ApiOverrides::default(), None, None);
        assert!(a.kubeconfig.is_empty());
        assert_eq!(a.origin, KubeconfigOrigin::Default);
    }

    #[test]
    fn an_empty_or_all_empty_kubeconfig_variable_counts_as_unset() {
        let inv = Some(Path::new("/inv/kubeconfig"));
        for value in ["", ":", "::"] {
            let o = ApiOverrides {
                kubeconfig_env: env(value),
                ..Default::default()
            };
            let a = resolve_access(&o, inv, None);
            assert_eq!(
                a.origin,
                KubeconfigOrigin::Inventory,
                "KUBECONFIG={value:?}"
            );
        }
        let o = ApiOverrides {
            kubeconfig_env: env(":/env/only:"),
            ..Default::default()
        };
        assert_eq!(
            resolve_access(&o, inv, None).kubeconfig,
            vec![PathBuf::from("/env/only")]
        );
    }

    #[test]
    fn context_flag_beats_inventory_and_none_means_current_context() {
        let o = ApiOverrides {
            context: Some("kind-other".into()),
            ..Default::default()
        };
        assert_eq!(
            resolve_access(&o, None, Some("kind-faultline")).context,
            Some("kind-other".into())
        );
        assert_eq!(
            resolve_access(&ApiOverrides::default(), None, Some("kind-faultline")).context,
            Some("kind-faultline".into())
        );
        assert_eq!(
            resolve_access(&ApiOverrides::default(), None, None).context,
            None
        );
    }

    fn kubeconfig_file(dir: &Path, name: &str, current: &str, contexts: &[&str]) -> PathBuf {
        let mut text = format!("apiVersion: v1\nkind: Config\ncurrent-context: {current}\n");
        text.push_str("clusters:\n");
        for c in contexts {
            text.push_str(&format!(
                "- name: {c}\n  cluster: {{server: 'https://{c}.example:6443'}}\n"
            ));
        }
        text.push_str("users:\n");
        for c in contexts {
            text.push_str(&format!("- name: {c}\n  user: {{token: t}}\n"));
        }
        text.push_str("contexts:\n");
        for c in contexts {
            text.push_str(&format!(
                "- name: {c}\n  context: {{cluster: {c}, user: {c}}}\n"
            ));
        }
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_kubeconfig_list_merges_with_the_first_current_context_winning() {
        let dir = tempfile::tempdir().unwrap();
        let a = kubeconfig_file(dir.path(), "a", "kind-a", &["kind-a"]);
        let b = kubeconfig_file(dir.path(), "b", "k3d-b", &["k3d-b", "kind-a"]);
        let merged = read_merged(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(merged.current_context.as_deref(), Some("kind-a"));
        let names: Vec<_> = merged.contexts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["kind-a", "k3d-b"]);
        assert_eq!(
            file_defining(&[a.clone(), b.clone()], "k3d-b"),
            Some(b.clone())
        );
        assert_eq!(file_defining(&[a.clone(), b], "kind-a"), Some(a));
    }

    #[test]
    fn missing_files_in_a_list_are_skipped_as_kubectl_does() {
        let dir = tempfile::tempdir().unwrap();
        let b = kubeconfig_file(dir.path(), "b", "kind-b", &["kind-b"]);
        let merged = read_merged(&[dir.path().join("missing"), b]).unwrap();
        assert_eq!(merged.current_context.as_deref(), Some("kind-b"));
    }

    #[test]
    fn a_missing_file_in_the_list_is_named_in_the_error() {
        let err = read_merged(&[PathBuf::from("/nonexistent/kubeconfig")]).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }
}
