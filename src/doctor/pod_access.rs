//! `doctor` for nodes reached through the API (`transport: pod`): whether the namespace
//! admits the privileged node-access pod (a server-side dry-run create: Pod Security
//! admission and any admission webhook answer it as they would a real one), and whether
//! the user may create pods and `pods/exec` there (`SelfSubjectAccessReview`). Each
//! refusal names the label or rule that would allow it. Whether the host has `systemd-run`
//! is the self-restore check's, which arms and disarms one through the same pod.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, PostParams};

use super::{CheckKind, Finding, Status};
use crate::execute::pod;
use crate::inventory::{Inventory, NodeAccess, PodSettings, TransportKind};

/// The findings for every namespace the inventory's API-transport nodes use; none when no
/// node goes through the API.
pub(super) async fn findings(client: &Client, inventory: &Inventory) -> Vec<Finding> {
    let mut by_namespace: BTreeMap<String, (&PodSettings, &NodeAccess)> = BTreeMap::new();
    for node in inventory.nodes() {
        if node.transport == TransportKind::Pod {
            by_namespace
                .entry(node.pod.namespace.clone())
                .or_insert((&node.pod, node));
        }
    }
    let mut out = Vec::new();
    for (ns, (settings, node)) in by_namespace {
        out.extend(one_namespace(client, &ns, settings, &node.name).await);
        out.extend(image_pinned(settings));
    }
    out
}

/// A warning when the node-access image is named by a tag alone: it runs privileged in
/// every node's host namespaces, and whoever can push that tag decides what runs there.
fn image_pinned(settings: &PodSettings) -> Option<Finding> {
    (!settings.image.contains("@sha256:")).then(|| {
        finding(
            Status::Warn,
            format!(
                "the node-access image `{}` is named by tag, not digest: it runs privileged                  on every node, and the tag can be moved; set pod.image to NAME@sha256:DIGEST",
                settings.image
            ),
        )
    })
}

fn finding(status: Status, detail: String) -> Finding {
    Finding::cluster(CheckKind::PodAccess, status, detail)
}

async fn one_namespace(
    client: &Client,
    ns: &str,
    settings: &PodSettings,
    node: &str,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for (verb, resource, sub, why) in [
        ("create", "pods", None, "the node-access pod"),
        ("create", "pods", Some("exec"), "each node command"),
        (
            "get",
            "pods",
            Some("exec"),
            "each node command, over a WebSocket",
        ),
        ("delete", "pods", None, "removing the pod after its command"),
    ] {
        let shown = match sub {
            Some(s) => format!("{verb} {resource}/{s}"),
            None => format!("{verb} {resource}"),
        };
        match can_i(client, verb, resource, sub, Some(ns)).await {
            Ok(true) => {}
            Ok(false) => out.push(finding(
                Status::Fail,
                format!(
                    "`{shown}` in namespace {ns} is not allowed ({why}); grant it with a Role in {ns} \
                     (rules: apiGroups [\"\"], resources [\"{}\"], verbs [\"{verb}\"]) bound to your user",
                    sub.map_or_else(|| resource.to_string(), |s| format!("{resource}/{s}"))
                ),
            )),
            Err(e) => out.push(finding(
                Status::Fail,
                format!("cannot ask whether `{shown}` in {ns} is allowed: {e}"),
            )),
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let exists = match namespaces.get_opt(ns).await {
        Ok(found) => found.is_some(),
        Err(e) => {
            out.push(finding(
                Status::Fail,
                format!("cannot read namespace {ns}: {e}"),
            ));
            return out;
        }
    };
    if !exists {
        if !settings.create_namespace {
            out.push(finding(
                Status::Fail,
                format!(
                    "namespace {ns} (pod.namespace) does not exist; create it with the label \
                     pod-security.kubernetes.io/enforce=privileged, or set pod.createNamespace: true"
                ),
            ));
            return out;
        }
        match can_i(client, "create", "namespaces", None, None).await {
            Ok(true) => out.push(finding(
                Status::Pass,
                format!(
                    "namespace {ns} does not exist yet: the first command creates it with the \
                     privileged Pod Security labels (a dry run of the pod needs it to exist)"
                ),
            )),
            Ok(false) => out.push(finding(
                Status::Fail,
                format!(
                    "namespace {ns} does not exist and `create namespaces` is not allowed; \
                     create it (labelled pod-security.kubernetes.io/enforce=privileged) or grant \
                     a ClusterRole with resources [\"namespaces\"], verbs [\"create\"]"
                ),
            )),
            Err(e) => out.push(finding(
                Status::Fail,
                format!("cannot ask whether `create namespaces` is allowed: {e}"),
            )),
        }
        return out;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let object = pod::pod_object(node, settings, Duration::from_secs(60), None);
    match pods.create(&dry, &object).await {
        Ok(_) => {
            if out.is_empty() {
                out.push(finding(
                    Status::Pass,
                    format!(
                        "namespace {ns} admits the privileged node-access pod (server-side dry run \
                         on {node}, image {}); create pods and pods/exec allowed",
                        settings.image
                    ),
                ));
            }
        }
        Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("PodSecurity") => {
            out.push(finding(
                Status::Fail,
                format!(
                    "namespace {ns} refuses the privileged node-access pod: {}; label it \
                     pod-security.kubernetes.io/enforce=privileged (kubectl label ns {ns} \
                     pod-security.kubernetes.io/enforce=privileged --overwrite), or leave \
                     pod.namespace unset so faultline uses its own",
                    s.message
                ),
            ))
        }
        Err(kube::Error::Api(s)) => out.push(finding(
            Status::Fail,
            format!(
                "namespace {ns} refuses the node-access pod (server-side dry run, {} {}): {}; \
                 an admission policy or webhook must allow privileged pods with host namespaces \
                 and a hostPath volume there",
                s.code, s.reason, s.message
            ),
        )),
        Err(e) => out.push(finding(
            Status::Fail,
            format!("cannot dry-run the node-access pod in {ns}: {e}"),
        )),
    }
    out
}

/// One `SelfSubjectAccessReview` (`namespace: None` for a cluster-scoped resource).
async fn can_i(
    client: &Client,
    verb: &str,
    resource: &str,
    subresource: Option<&str>,
    namespace: Option<&str>,
) -> Result<bool, kube::Error> {
    let access = super::access::Access {
        verb: verb.to_string(),
        group: String::new(),
        resource: resource.to_string(),
        subresource: subresource.map(str::to_string),
        namespace: namespace.map(str::to_string),
        name: None,
        why: String::new(),
        required: true,
    };
    super::review::can_i(client, &access).await
}

#[cfg(test)]
mod pin_tests {
    use super::*;

    /// Issue 69, item 5: the node-access image was a mutable tag and nothing said so.
    #[test]
    fn a_node_access_image_by_tag_is_a_warning_and_by_digest_is_not() {
        let mut settings = PodSettings {
            namespace: "faultline-node-access".into(),
            create_namespace: true,
            image: "registry.k8s.io/kube-proxy:v1.33.13".into(),
            start_timeout: Duration::from_secs(60),
        };
        let warned = image_pinned(&settings).expect("a warning");
        assert_eq!(warned.status, Status::Warn);
        assert!(warned.detail.contains("named by tag"), "{}", warned.detail);
        settings.image = format!("debian@sha256:{}", "a".repeat(64));
        assert!(image_pinned(&settings).is_none());
    }
}
