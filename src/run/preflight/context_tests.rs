//! The context a run will use once the command line's kubeconfig and context are put in
//! place of the inventory's, and the allow-list it must still pass.

use std::path::{Path, PathBuf};

use super::prepare::{IN_CLUSTER_CONTEXT, context_in_use, effective_context};
use super::safety::{AllowList, check_context};
use crate::cluster::ApiOverrides;
use crate::inventory::{Inventory, InventoryError};

fn parse(text: &str) -> Result<Inventory, InventoryError> {
    Inventory::parse(text, Path::new("inv.yaml"))
}

fn overrides(kubeconfig: Option<&str>, context: Option<&str>, env: Option<&str>) -> ApiOverrides {
    ApiOverrides {
        kubeconfig: kubeconfig.map(PathBuf::from),
        context: context.map(str::to_string),
        kubeconfig_env: env.map(std::ffi::OsString::from),
    }
}

const ALLOW_LISTED: &str = "cluster:
  name: kind-a
  kubeconfig: /inv/kubeconfig
  context: kind-a
  allowedContexts: [kind-a]
";

#[test]
fn command_line_kubeconfig_and_context_replace_the_files() {
    let mut inv = parse(ALLOW_LISTED).unwrap();
    inv.apply_api_overrides(&overrides(
        Some("/flag/kc"),
        Some("kind-a"),
        Some("/env/kc"),
    ));
    assert_eq!(inv.kubeconfig(), [PathBuf::from("/flag/kc")]);
    assert_eq!(inv.context(), Some("kind-a"));

    let mut inv = parse(ALLOW_LISTED).unwrap();
    inv.apply_api_overrides(&overrides(None, None, Some("/env/a:/env/b")));
    assert_eq!(
        inv.kubeconfig(),
        [PathBuf::from("/env/a"), PathBuf::from("/env/b")]
    );
    assert_eq!(inv.context(), Some("kind-a"), "no --context: the file's");

    let mut inv = parse(ALLOW_LISTED).unwrap();
    inv.apply_api_overrides(&overrides(None, None, None));
    assert_eq!(inv.kubeconfig(), [PathBuf::from("/inv/kubeconfig")]);
}

#[test]
fn an_overridden_context_still_has_to_pass_the_inventorys_allow_list() {
    let mut inv = parse(ALLOW_LISTED).unwrap();
    inv.apply_api_overrides(&overrides(None, Some("prod-east"), None));
    let in_use = effective_context(&inv).unwrap();
    assert_eq!(in_use, "prod-east");
    let err = check_context(
        &in_use,
        &inv.cluster().allowed_contexts,
        AllowList::Inventory,
    )
    .unwrap_err();
    assert!(err.to_string().contains("prod-east"), "{err}");

    let mut inv = parse(ALLOW_LISTED).unwrap();
    inv.apply_api_overrides(&overrides(None, Some("kind-a"), None));
    check_context(
        &effective_context(&inv).unwrap(),
        &inv.cluster().allowed_contexts,
        AllowList::Inventory,
    )
    .unwrap();
}

#[test]
fn without_any_context_the_current_context_of_the_kubeconfig_list_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, current: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: {current}\nclusters: []\n\
                 contexts: []\nusers: []\n"
            ),
        )
        .unwrap();
        path
    };
    let a = write("a", "prod-east");
    let b = write("b", "kind-a");
    let env = format!("{}:{}", a.display(), b.display());
    let mut inv = parse("cluster: {name: kind-a, allowedContexts: [kind-a]}\n").unwrap();
    inv.apply_api_overrides(&overrides(None, None, Some(&env)));
    // kubectl's merge: the first file to set current-context wins.
    let in_use = effective_context(&inv).unwrap();
    assert_eq!(in_use, "prod-east");
    assert!(
        check_context(
            &in_use,
            &inv.cluster().allowed_contexts,
            AllowList::Inventory
        )
        .is_err()
    );
}

#[test]
fn in_a_pod_without_a_kubeconfig_the_context_is_in_cluster_and_an_inventory_must_allow_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-kubeconfig");
    let env = missing.display().to_string();
    // An inventory written outside the cluster lists the context it was written from.
    let mut inv = parse("cluster: {name: kind-a, allowedContexts: [kind-a]}\n").unwrap();
    inv.apply_api_overrides(&overrides(None, None, Some(&env)));
    assert_eq!(context_in_use(&inv, false), None, "outside a pod: none");
    let in_use = context_in_use(&inv, true).unwrap();
    assert_eq!(in_use, IN_CLUSTER_CONTEXT);
    let err = check_context(
        &in_use,
        &inv.cluster().allowed_contexts,
        AllowList::Inventory,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(
            "kube context `in-cluster` is not on the inventory's allow-list \
             (cluster.allowedContexts) (kind-a); refusing to start. Add `in-cluster` to the \
             inventory's cluster.allowedContexts"
        ),
        "{err}"
    );
    let mut inv =
        parse("cluster: {name: kind-a, allowedContexts: [kind-a, in-cluster]}\n").unwrap();
    inv.apply_api_overrides(&overrides(None, None, Some(&env)));
    check_context(
        &context_in_use(&inv, true).unwrap(),
        &inv.cluster().allowed_contexts,
        AllowList::Inventory,
    )
    .unwrap();
}
