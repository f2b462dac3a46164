//! Which cluster the command means when the user says little: `--name`, else the name in a
//! `kind-NAME` / `k3d-NAME` context (`--context`, then the current one), else the tool's
//! default cluster; the context is `--context`, else the one the tool writes for it.

use super::Tool;

/// The cluster and the kube context to read it through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterChoice {
    /// Cluster name (Docker label value).
    pub cluster: String,
    /// Kube context.
    pub context: String,
}

/// Picks the cluster and context; pure, so the defaults are unit-tested.
pub fn choose_cluster(
    tool: Tool,
    name: Option<&str>,
    context: Option<&str>,
    current_context: Option<&str>,
) -> ClusterChoice {
    let prefix = format!("{}-", tool.name());
    let from_context = |c: Option<&str>| -> Option<String> {
        c.and_then(|c| c.strip_prefix(&prefix))
            .filter(|n| !n.is_empty())
            .map(str::to_string)
    };
    let cluster = name
        .map(str::to_string)
        .or_else(|| from_context(context))
        .or_else(|| from_context(current_context))
        .unwrap_or_else(|| tool.default_cluster().to_string());
    let context = context
        .map(str::to_string)
        .unwrap_or_else(|| tool.context_of(&cluster));
    ClusterChoice { cluster, context }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(cluster: &str, context: &str) -> ClusterChoice {
        ClusterChoice {
            cluster: cluster.into(),
            context: context.into(),
        }
    }

    #[test]
    fn name_then_context_then_current_context_then_default() {
        let k = Tool::Kind;
        assert_eq!(
            choose_cluster(k, Some("faultline"), None, Some("kind-other")),
            choice("faultline", "kind-faultline")
        );
        assert_eq!(
            choose_cluster(k, None, Some("kind-x"), Some("kind-other")),
            choice("x", "kind-x")
        );
        assert_eq!(
            choose_cluster(k, None, None, Some("kind-faultline")),
            choice("faultline", "kind-faultline")
        );
        assert_eq!(
            choose_cluster(k, None, None, Some("prod-east")),
            choice("kind", "kind-kind")
        );
        assert_eq!(
            choose_cluster(k, None, None, None),
            choice("kind", "kind-kind")
        );
        // A renamed context names no cluster: the name is given, the context kept.
        assert_eq!(
            choose_cluster(k, Some("a"), Some("my-ctx"), None),
            choice("a", "my-ctx")
        );
    }

    #[test]
    fn k3d_defaults_to_k3s_default_and_reads_k3d_contexts() {
        let k = Tool::K3d;
        assert_eq!(
            choose_cluster(k, None, None, None),
            choice("k3s-default", "k3d-k3s-default")
        );
        assert_eq!(
            choose_cluster(k, None, None, Some("k3d-demo")),
            choice("demo", "k3d-demo")
        );
        assert_eq!(
            choose_cluster(k, None, None, Some("kind-demo")),
            choice("k3s-default", "k3d-k3s-default")
        );
    }
}
