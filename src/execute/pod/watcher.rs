//! The undo watcher: how an undo reaches a node through the API while its kubelet is
//! stopped.
//!
//! Exec goes through the kubelet, so once a fault has stopped it nothing faultline sends
//! that way reaches the node; the planned undo is a timer armed on the host beforehand
//! (`SYSTEMD_ARM`). A timer cannot be brought forward, though: a Ctrl-C, an abort or a
//! failed step would wait for it. So with the timer, faultline starts one more pod on the
//! node, the watcher. Its container outlives the stopped kubelet (the container runtime
//! keeps it; only the kubelet would end it), and it is in the host's network, so it still
//! reaches the API server without the kubelet. Once a second it reads its own Pod object;
//! when faultline annotates that object [`UNDO_ANNOTATION`]`: now`, the watcher runs the
//! undo in the host's namespaces, disarms the timer, and exits. The timer stays the
//! backstop when faultline is gone; the watcher ends at the same deadline.
//!
//! What it reads with is the least a credential can be: the pod's own ServiceAccount
//! token ([`SERVICE_ACCOUNT`]), whose Role lets it `get` pods in the node-access
//! namespace and nothing else. The HTTP client is the node's `curl`, run in the host's
//! mount namespace; the token and CA are copied into the watcher's own scratch volume and
//! read through `/proc/<pid>/root` of its shell, so they never appear on a command line.
//!
//! What it cannot do: a fault that cuts the node off from the API server (a partition)
//! also cuts the watcher off, so such a fault ends only by its timer; `plan` and the run
//! say so.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodSpec,
    ServiceAccount, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, LogParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use super::{ACCESS_LABEL, PodError, api_error, pod_object};
use crate::inventory::PodSettings;

/// The ServiceAccount (and Role, and RoleBinding) the watcher reads its own pod with.
pub const SERVICE_ACCOUNT: &str = "faultline-undo-watcher";

/// The label a watcher pod carries (value `true`) beside [`ACCESS_LABEL`].
pub const WATCHER_LABEL: &str = "faultline.dev/undo-watcher";

/// The annotation faultline sets to `now` on a watcher pod to have its undo run.
pub const UNDO_ANNOTATION: &str = "faultline.dev/undo";

/// How long after its deadline a watcher pod outlives it (the kubelet, once back, ends it).
const LIFETIME_MARGIN: Duration = Duration::from_secs(60);

/// How often the watcher's log is read while it starts.
const POLL: Duration = Duration::from_millis(250);

/// The watcher's first line once it has read its own pod through the API server: the
/// path works from the node.
const WATCHING: &str = "faultline-watcher: watching";

/// The container's script (POSIX sh: the node-access image's `sh`, with `nsenter`).
/// `UNDO` is the host command; `LIFE` the seconds it watches for.
const SCRIPT: &str = r#"set -u
say() { echo "faultline-watcher: $*"; }
me=/proc/$$/root
sa=/var/run/secrets/kubernetes.io/serviceaccount
command -v nsenter >/dev/null 2>&1 || { say "no nsenter in the image"; exit 3; }
nsenter -t 1 -m -- sh -c 'command -v curl' >/dev/null 2>&1 || { say "no curl on the node: the undo can only come from its timer"; exit 3; }
# The host reads these through /proc/<pid>/root: copied out of the account's volume,
# whose paths go through symlinks (/var/run -> /run) that would resolve on the host.
cp "$sa/ca.crt" /faultline/ca.crt || { say "no CA in $sa"; exit 3; }
printf 'header = "Authorization: Bearer %s"\n' "$(cat "$sa/token")" > /faultline/auth
host=$KUBERNETES_SERVICE_HOST
case $host in *:*) host="[$host]" ;; esac
url="https://$host:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/$POD_NAMESPACE/pods/$POD_NAME"
read_self() { nsenter -t 1 -m -- curl -sS --max-time 3 --cacert "$me/faultline/ca.crt" -K "$me/faultline/auth" "$url"; }
body=$(read_self 2>&1) || { say "cannot read $url from the node: $(printf %s "$body" | head -c 300)"; exit 3; }
case $body in *'"kind":"Pod"'*|*'"kind": "Pod"'*) ;; *) say "unexpected answer from $url: $(printf %s "$body" | head -c 300)"; exit 3 ;; esac
say watching
end=$(( $(date +%s) + LIFE ))
while [ "$(date +%s)" -lt "$end" ]; do
  body=$(read_self 2>/dev/null) || { sleep 1; continue; }
  case $body in
    *'"faultline.dev/undo":"now"'*|*'"faultline.dev/undo": "now"'*)
      say "undo asked"
      nsenter -t 1 -m -u -i -n -p -- sh -c "$UNDO" </dev/null
      say "undone (exit $?)"
      exit 0 ;;
    *'"faultline.dev/undo":"withdrawn"'*|*'"faultline.dev/undo": "withdrawn"'*)
      say withdrawn; exit 0 ;;
    *'"deletionTimestamp"'*)
      # Deleted or evicted by someone else while the kubelet is away: the object stays
      # (Terminating) until the kubelet is back, so an undo asked still reaches it here.
      [ -n "${deleted:-}" ] || say "deleted by someone else: still watching for the undo"
      deleted=1 ;;
    *'"kind":"Status"'*|*'"kind": "Status"'*)
      [ -n "${gone:-}" ] || say "my pod object is gone: the undo now comes from the node's timer alone"
      gone=1 ;;
  esac
  sleep 1
done
say "deadline passed"
"#;

/// The watcher's objects in the node-access namespace: the ServiceAccount, a Role that
/// may only `get` pods there, and their binding.
pub(crate) fn rbac_objects(namespace: &str) -> (ServiceAccount, Role, RoleBinding) {
    let meta = || ObjectMeta {
        name: Some(SERVICE_ACCOUNT.to_string()),
        namespace: Some(namespace.to_string()),
        labels: Some([(ACCESS_LABEL.to_string(), "true".to_string())].into()),
        ..ObjectMeta::default()
    };
    let account = ServiceAccount {
        metadata: meta(),
        ..ServiceAccount::default()
    };
    let role = Role {
        metadata: meta(),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods".into()]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta(),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: SERVICE_ACCOUNT.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: SERVICE_ACCOUNT.into(),
            namespace: Some(namespace.to_string()),
            ..Subject::default()
        }]),
    };
    (account, role, binding)
}

/// Makes sure the watcher's objects exist in `namespace`: each one missing is created
/// (the Helm chart creates them beforehand, so a run inside the cluster only reads them).
pub(crate) async fn ensure_rbac(client: &Client, namespace: &str) -> Result<(), PodError> {
    let (account, role, binding) = rbac_objects(namespace);
    ensure(client, namespace, "ServiceAccount", &account).await?;
    ensure(client, namespace, "Role", &role).await?;
    ensure(client, namespace, "RoleBinding", &binding).await
}

async fn ensure<K>(client: &Client, namespace: &str, kind: &str, object: &K) -> Result<(), PodError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let what = format!("{kind} {namespace}/{SERVICE_ACCOUNT} (the undo watcher's)");
    if api
        .get_opt(SERVICE_ACCOUNT)
        .await
        .map_err(api_error(format!("reading {what}")))?
        .is_some()
    {
        return Ok(());
    }
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(api_error(format!(
            "creating {what}; `faultline rbac -i INVENTORY` prints the rules that allow it, \
             and the Helm chart creates it"
        ))(e)),
    }
}

/// The watcher pod for `node`: a node-access pod (host namespaces, privileged, every
/// taint tolerated) whose container runs [`SCRIPT`] for `watch_for` with `undo` as the
/// host command, under [`SERVICE_ACCOUNT`], labelled [`WATCHER_LABEL`] and `run`'s id.
pub(crate) fn pod(
    node: &str,
    settings: &PodSettings,
    undo: &str,
    watch_for: Duration,
    run: &str,
) -> Pod {
    let mut pod = pod_object(node, settings, watch_for + LIFETIME_MARGIN, Some(run));
    let meta = &mut pod.metadata;
    meta.generate_name = meta
        .generate_name
        .take()
        .map(|g| g.replacen("faultline-", "faultline-undo-", 1));
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.insert(WATCHER_LABEL.into(), "true".into());
    labels.insert(super::RUN_LABEL.into(), run.into());
    let spec: &mut PodSpec = pod.spec.get_or_insert_with(Default::default);
    spec.service_account_name = Some(SERVICE_ACCOUNT.into());
    spec.automount_service_account_token = Some(true);
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: "faultline".into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    });
    let field = |path: &str| EnvVarSource {
        field_ref: Some(ObjectFieldSelector {
            field_path: path.into(),
            ..ObjectFieldSelector::default()
        }),
        ..EnvVarSource::default()
    };
    let value = |name: &str, value: String| EnvVar {
        name: name.into(),
        value: Some(value),
        ..EnvVar::default()
    };
    if let Some(c) = spec.containers.first_mut() {
        *c = Container {
            command: Some(vec!["sh".into(), "-c".into(), literal(SCRIPT)]),
            env: Some(vec![
                EnvVar {
                    name: "POD_NAME".into(),
                    value_from: Some(field("metadata.name")),
                    ..EnvVar::default()
                },
                EnvVar {
                    name: "POD_NAMESPACE".into(),
                    value_from: Some(field("metadata.namespace")),
                    ..EnvVar::default()
                },
                value("UNDO", literal(undo)),
                value("LIFE", watch_for.as_secs().max(1).to_string()),
            ]),
            volume_mounts: Some(
                c.volume_mounts
                    .take()
                    .unwrap_or_default()
                    .into_iter()
                    .chain(std::iter::once(VolumeMount {
                        name: "faultline".into(),
                        mount_path: "/faultline".into(),
                        ..VolumeMount::default()
                    }))
                    .collect(),
            ),
            ..c.clone()
        };
    }
    pod
}

/// `text` as Kubernetes passes it on unchanged in a container's command or an env value:
/// the kubelet expands `$(NAME)` there and reads `$$` as `$`, so every `$` is doubled.
fn literal(text: &str) -> String {
    text.replace('$', "$$")
}

/// Starts the watcher on `node` and waits until it has read its own pod through the API
/// server from the node, at most the inventory's start timeout. Returns the pod's name.
/// A watcher that cannot watch (no `curl` on the node, the API server out of reach from
/// it) is deleted again, and the error says why.
pub(crate) async fn start(
    client: &Client,
    node: &str,
    settings: &PodSettings,
    undo: &str,
    watch_for: Duration,
    run: &str,
) -> Result<String, PodError> {
    if settings.create_namespace {
        super::ensure_namespace(client, &settings.namespace).await?;
    }
    ensure_rbac(client, &settings.namespace).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &settings.namespace);
    let created = pods
        .create(
            &PostParams::default(),
            &pod(node, settings, undo, watch_for, run),
        )
        .await
        .map_err(api_error(format!(
            "creating the undo watcher on node {node} in namespace {}",
            settings.namespace
        )))?;
    let name = created.metadata.name.unwrap_or_default();
    match watching(&pods, &settings.namespace, &name, settings.start_timeout).await {
        Ok(()) => Ok(name),
        Err(e) => {
            delete(client, &settings.namespace, &name).await;
            Err(e)
        }
    }
}

/// Waits for the watcher's [`WATCHING`] line; a watcher that ended first, or said
/// nothing in `within`, is an error carrying its last words.
async fn watching(
    pods: &Api<Pod>,
    namespace: &str,
    name: &str,
    within: Duration,
) -> Result<(), PodError> {
    let deadline = tokio::time::Instant::now() + within;
    let not_started = |why: String| PodError::NotStarted {
        namespace: namespace.to_string(),
        pod: name.to_string(),
        after: within,
        why: format!("the undo watcher: {why}"),
    };
    let mut last = "not running yet".to_string();
    loop {
        let pod = pods
            .get_opt(name)
            .await
            .map_err(api_error(format!("reading pod {namespace}/{name}")))?;
        let state = pod.as_ref().map(super::start_state);
        if let Some(super::StartState::Failed(why)) = &state {
            let said = log(pods, name).await.unwrap_or_default();
            return Err(not_started(format!("{why}; {}", said.trim())));
        }
        if let Some(super::StartState::Running) = state {
            let said = log(pods, name).await.unwrap_or_default();
            if said.lines().any(|l| l.trim() == WATCHING) {
                return Ok(());
            }
            if let Some(l) = said.lines().rev().find(|l| !l.trim().is_empty()) {
                last = l.trim().to_string();
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(not_started(last));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The watcher's log so far (at most 4 KiB).
async fn log(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.logs(
        name,
        &LogParams {
            limit_bytes: Some(4096),
            ..LogParams::default()
        },
    )
    .await
    .ok()
}

/// Asks the watcher on its node to run its undo now.
pub(crate) async fn ask_undo(client: &Client, namespace: &str, name: &str) -> Result<(), PodError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {UNDO_ANNOTATION: "now"}}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(api_error(format!(
            "asking the undo watcher {namespace}/{name} to undo"
        )))
}

/// Withdraws and deletes the watcher: annotated [`UNDO_ANNOTATION`]`: withdrawn` first,
/// which it exits on (a deletion alone it does not take for a withdrawal: someone else's
/// delete or an eviction during a kubelet stop must not lose the fast undo); on a node
/// whose kubelet is away the pod stays Terminating until it is back. Logged, never an
/// error: its own deadline and `restore` end it otherwise.
pub(crate) async fn delete(client: &Client, namespace: &str, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {UNDO_ANNOTATION: "withdrawn"}}});
    if let Err(e) = pods
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::debug!("could not mark the undo watcher {namespace}/{name} withdrawn: {e}");
    }
    let params = DeleteParams {
        grace_period_seconds: Some(1),
        ..DeleteParams::default()
    };
    match pods.delete(name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.is_not_found() => {}
        Err(e) => tracing::debug!("could not delete the undo watcher {namespace}/{name}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> PodSettings {
        PodSettings {
            namespace: "faultline-node-access".into(),
            create_namespace: true,
            image: "img".into(),
            start_timeout: Duration::from_secs(60),
        }
    }

    #[test]
    fn the_watcher_reads_with_its_own_account_which_may_only_get_pods_there() {
        let (account, role, binding) = rbac_objects("ns");
        assert_eq!(account.metadata.namespace.as_deref(), Some("ns"));
        let rules = role.rules.expect("rules");
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].verbs, ["get"]);
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["pods".to_string()][..])
        );
        let subject = &binding.subjects.expect("subjects")[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            (SERVICE_ACCOUNT, Some("ns"))
        );
    }

    #[test]
    fn the_watcher_pod_carries_its_undo_its_deadline_and_a_token() {
        let p = pod(
            "worker-1",
            &settings(),
            "systemctl start kubelet",
            Duration::from_secs(62),
            "run-7",
        );
        let labels = p.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get(ACCESS_LABEL).map(String::as_str), Some("true"));
        assert_eq!(labels.get(WATCHER_LABEL).map(String::as_str), Some("true"));
        assert_eq!(
            labels.get(super::super::RUN_LABEL).map(String::as_str),
            Some("run-7")
        );
        assert!(
            p.metadata
                .generate_name
                .as_deref()
                .is_some_and(|g| g.starts_with("faultline-undo-worker-1"))
        );
        let spec = p.spec.expect("spec");
        assert_eq!(spec.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
        assert_eq!(spec.automount_service_account_token, Some(true));
        assert_eq!(spec.host_network, Some(true));
        assert_eq!(spec.active_deadline_seconds, Some(122));
        let c = &spec.containers[0];
        let env = c.env.clone().unwrap_or_default();
        let get = |n: &str| {
            env.iter()
                .find(|e| e.name == n)
                .and_then(|e| e.value.clone())
        };
        assert_eq!(get("UNDO").as_deref(), Some("systemctl start kubelet"));
        assert_eq!(get("LIFE").as_deref(), Some("62"));
        // The kubelet reads `$$` as `$`: the script and the undo reach the shell unchanged.
        let command = c.command.as_ref().map(|c| c[2].clone()).unwrap_or_default();
        assert_eq!(command.replace("$$", "$"), SCRIPT);
        assert!(command.contains("/proc/$$$$/root"), "{command}");
        let p = pod(
            "w",
            &settings(),
            "kill $(cat /run/x.pid)",
            Duration::from_secs(5),
            "r",
        );
        let env = p.spec.expect("spec").containers[0]
            .env
            .clone()
            .unwrap_or_default();
        let undo = env
            .iter()
            .find(|e| e.name == "UNDO")
            .and_then(|e| e.value.clone());
        assert_eq!(undo.as_deref(), Some("kill $$(cat /run/x.pid)"));
        assert!(
            c.volume_mounts
                .as_ref()
                .is_some_and(|m| m.iter().any(|m| m.mount_path == "/faultline"))
        );
    }

    /// The script under a real `sh`, with `nsenter` and `curl` stood in by functions: it
    /// says it watches once its pod answers, runs the undo once the annotation is there,
    /// and without `curl` says so and ends (exit 3) before watching.
    #[test]
    fn the_script_watches_then_undoes_when_asked_and_refuses_without_curl() {
        let dir = tempfile::tempdir().expect("tempdir");
        let answers = dir.path().join("answers");
        let done = dir.path().join("undone");
        // Three reads: the first proves the path; the second has no annotation; the third asks.
        std::fs::write(
            &answers,
            "{\"kind\":\"Pod\"}\n{\"kind\":\"Pod\",\"metadata\":{}}\n\
             {\"kind\":\"Pod\",\"metadata\":{\"annotations\":{\"faultline.dev/undo\":\"now\"}}}\n",
        )
        .expect("answers");
        let stand_ins = |curl: bool| {
            format!(
                "nsenter() {{ while [ \"$1\" != \"--\" ]; do shift; done; shift; \
                   if [ \"$1\" = curl ]; then n=$(( $(cat {d}/n 2>/dev/null || echo 0) + 1 )); echo $n > {d}/n; sed -n \"${{n}}p\" {a}; \
                   elif [ \"$1\" = sh ] && [ \"$3\" = 'command -v curl' ]; then {curl}; \
                   else \"$@\"; fi; }}\n\
                 sleep() {{ :; }}\nmkdir -p {d}/faultline\n",
                d = dir.path().display(),
                a = answers.display(),
                curl = if curl { "true" } else { "false" }
            )
        };
        let sa = dir.path().join("sa");
        std::fs::create_dir_all(&sa).expect("sa");
        std::fs::write(sa.join("ca.crt"), "ca").expect("ca");
        std::fs::write(sa.join("token"), "t").expect("token");
        let script = SCRIPT
            .replace(
                "/faultline/",
                &format!("{}/faultline/", dir.path().display()),
            )
            .replace(
                "/var/run/secrets/kubernetes.io/serviceaccount",
                &sa.display().to_string(),
            );
        let run = |curl: bool| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{}{script}", stand_ins(curl)))
                .env("UNDO", format!("touch {}", done.display()))
                .env("LIFE", "30")
                .env("KUBERNETES_SERVICE_HOST", "10.96.0.1")
                .env("KUBERNETES_SERVICE_PORT", "443")
                .env("POD_NAME", "w")
                .env("POD_NAMESPACE", "ns")
                .output()
                .expect("sh runs")
        };
        let out = run(true);
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(said.contains(WATCHING), "{said}");
        assert!(said.contains("undo asked"), "{said}");
        assert!(done.exists(), "the undo ran: {said}");
        assert_eq!(out.status.code(), Some(0), "{said}");

        let out = run(false);
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(out.status.code(), Some(3), "{said}");
        assert!(said.contains("no curl on the node"), "{said}");
        assert!(!said.contains(WATCHING), "{said}");

        // Issue 69, item 5: a watcher whose pod someone else deleted (or evicted) during
        // the kubelet stop took the deletion for a withdrawal and exited, losing the fast
        // undo. Now it keeps watching its Terminating object and undoes when asked.
        std::fs::remove_file(&done).expect("reset");
        std::fs::remove_file(dir.path().join("n")).expect("reset");
        std::fs::write(
            &answers,
            "{\"kind\":\"Pod\"}\n             {\"kind\":\"Pod\",\"metadata\":{\"deletionTimestamp\":\"2026-12-07T00:00:00Z\"}}\n             {\"kind\":\"Pod\",\"metadata\":{\"deletionTimestamp\":\"2026-12-07T00:00:00Z\",             \"annotations\":{\"faultline.dev/undo\":\"now\"}}}\n",
        )
        .expect("answers");
        let out = run(true);
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            said.contains("deleted by someone else: still watching"),
            "{said}"
        );
        assert!(done.exists(), "the undo still ran: {said}");
        // Withdrawn by faultline (its annotation, then the delete): it exits, undoing nothing.
        std::fs::remove_file(&done).expect("reset");
        std::fs::remove_file(dir.path().join("n")).expect("reset");
        std::fs::write(
            &answers,
            "{\"kind\":\"Pod\"}\n             {\"kind\":\"Pod\",\"metadata\":{\"deletionTimestamp\":\"2026-12-07T00:00:00Z\",             \"annotations\":{\"faultline.dev/undo\":\"withdrawn\"}}}\n",
        )
        .expect("answers");
        let out = run(true);
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(said.contains("withdrawn"), "{said}");
        assert!(!done.exists(), "{said}");
        assert_eq!(out.status.code(), Some(0), "{said}");
    }
}
