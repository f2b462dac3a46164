use std::path::Path;

use super::*;
use crate::experiment::load_all_checked;

fn load(path: &str) -> Vec<Experiment> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    load_all_checked(&[root.join(path)])
        .into_iter()
        .map(|(p, c)| c.result.unwrap_or_else(|d| panic!("{}: {d}", p.display())))
        .collect()
}

fn shown(accesses: &[Access]) -> Vec<String> {
    accesses.iter().map(Access::show).collect()
}

#[test]
fn the_observer_only_reads_and_sees_leases_in_kube_node_lease_alone() {
    let observer = observer();
    assert!(
        observer
            .iter()
            .all(|a| ["get", "list", "watch"].contains(&a.verb.as_str())),
        "{:#?}",
        shown(&observer)
    );
    let grants = Grants::of(&observer);
    let lease = |ns: Option<&str>| Access {
        verb: "list".into(),
        group: "coordination.k8s.io".into(),
        resource: "leases".into(),
        subresource: None,
        namespace: ns.map(str::to_string),
        name: None,
        why: String::new(),
        required: true,
    };
    assert!(grants.allows(&lease(Some(NODE_LEASE_NAMESPACE))));
    assert!(!grants.allows(&lease(Some("kube-system"))));
    assert!(!grants.allows(&lease(None)));
    // Everything a run only observes is covered: no experiment's actor holds a read the
    // observer already has.
    let exps = load("experiments");
    let needed = access::needed(&exps);
    for a in needed.iter().filter(|a| a.why.starts_with("observing")) {
        assert!(grants.allows(a), "observer lacks {}", a.show());
    }
}

#[test]
fn the_actor_holds_the_drains_requests_and_nothing_the_observer_has() {
    let exps = load("deploy/helm/faultline/files/experiments");
    let actor = actor(&exps).unwrap_or_else(|e| panic!("{e}"));
    let got = shown(&actor);
    for want in [
        "patch nodes (cluster-wide)",
        "create pods/eviction (cluster-wide)",
        "patch namespaces faultline-demo",
        "get namespaces faultline-demo",
        "patch deployments.apps in namespace faultline-demo",
    ] {
        assert!(
            got.iter().any(|g| g == want),
            "{want} missing from {got:#?}"
        );
    }
    let observer = Grants::of(&observer());
    assert!(actor.iter().all(|a| !observer.allows(a)), "{got:#?}");
    // The default experiment deletes nothing (no teardown); a run deletes its own lock.
    let deletes: Vec<&String> = got.iter().filter(|g| g.starts_with("delete ")).collect();
    assert_eq!(
        deletes,
        ["delete leases.coordination.k8s.io faultline-run in namespace default"],
        "{got:#?}"
    );
}

/// What the API server answers a ServiceAccount holding `granted`, permission by
/// permission, judged as `doctor` and `run` judge its answers.
fn judged(granted: &Grants, exps: &[Experiment]) -> crate::doctor::AccessAnswers {
    let mut needed = access::needed(exps);
    for exp in exps {
        needed.extend(kinds::setup_access(exp).unwrap_or_else(|e| panic!("{e}")));
    }
    let answers = access::dedup(needed)
        .into_iter()
        .map(|a| {
            let allowed = granted.allows(&a);
            (a, Ok(allowed))
        })
        .collect();
    crate::doctor::judge_access(Vec::new(), answers, Vec::new())
}

#[test]
fn with_the_observer_alone_a_run_is_refused_naming_the_missing_rules() {
    let exps = load("deploy/helm/faultline/files/experiments");
    let refused = judged(&Grants::of(&observer()), &exps);
    let failures: Vec<String> = crate::doctor::failures(&refused.findings)
        .iter()
        .map(|f| f.to_string())
        .collect();
    for want in [
        "`patch nodes (cluster-wide)` is not allowed; step `drain` of drain-a-worker needs it",
        "`create pods/eviction (cluster-wide)` is not allowed; step `drain` of drain-a-worker needs it",
        "`patch deployments.apps in namespace faultline-demo` is not allowed; setup of drain-a-worker",
    ] {
        assert!(
            failures.iter().any(|f| f.contains(want)),
            "{want} missing from {failures:#?}"
        );
    }
    let rules = paste_ready(&refused.missing);
    assert!(rules.contains("# ClusterRole rules:"), "{rules}");
    assert!(rules.contains("pods/eviction"), "{rules}");
    assert!(
        rules.contains("# Role rules in namespace faultline-demo:"),
        "{rules}"
    );
    assert_eq!(
        Grants::of(&refused.missing),
        Grants::of(&actor(&exps).unwrap_or_else(|e| panic!("{e}"))),
        "what the observer lacks is exactly the actor's rules"
    );

    let mut both = observer();
    both.extend(actor(&exps).unwrap_or_else(|e| panic!("{e}")));
    let allowed = judged(&Grants::of(&both), &exps);
    assert!(
        crate::doctor::failures(&allowed.findings).is_empty(),
        "observer and actor together allow the run: {:#?}",
        allowed.findings
    );
    assert!(allowed.missing.is_empty());
}

#[test]
fn every_shipped_experiment_gets_rules_and_an_unknown_kind_is_refused() {
    for exp in load("experiments") {
        actor(std::slice::from_ref(&exp)).unwrap_or_else(|e| panic!("{}: {e}", exp.name));
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("crd.yaml"),
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: x}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("e.yaml"),
        "name: e\ndescription: d\nnamespace: x\ntargets: {v: {role: worker, count: 1}}\nsetup: {manifests: [crd.yaml]}\nsteps:\n  - {name: cordon, at: 0s, do: cordon, target: v}\nexpect:\n  - {name: n, node: v, stays: Ready, until: cordon}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let exps: Vec<Experiment> = load_all_checked(&[dir.path().join("e.yaml")])
        .into_iter()
        .map(|(_, c)| c.result.unwrap_or_else(|d| panic!("{d}")))
        .collect();
    let err = actor(&exps)
        .expect_err("a custom kind has no known resource")
        .to_string();
    assert!(err.contains("example.com/v1 Widget"), "{err}");
}

#[test]
fn manifests_and_values_carry_the_same_rules() {
    let exps = load("experiments/local-persistent-volume.yaml");
    let grants = grants(RbacRole::Actor, &exps, None, &[], &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !grants.namespaced.is_empty(),
        "deletes claims in its namespace"
    );
    let text = manifests("faultline", RbacRole::Actor, &grants);
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut back = Grants::default();
    for d in docs {
        let rules: Vec<PolicyRule> =
            serde_json::from_value(d["rules"].clone()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(d["metadata"]["name"], "faultline-actor");
        match d["kind"].as_str() {
            Some("ClusterRole") => back.cluster = rules,
            Some("Role") => {
                let ns = d["metadata"]["namespace"].as_str().unwrap_or_default();
                back.namespaced.insert(ns.to_string(), rules);
            }
            other => panic!("unexpected kind {other:?}"),
        }
    }
    assert_eq!(back, grants);
    let values: serde_json::Value = serde_saphyr::from_str(&values(
        &[(RbacRole::Actor, grants.clone())],
        &["faultline-lab".to_string(), "elsewhere".to_string()],
        &[],
        None,
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let cluster: Vec<PolicyRule> =
        serde_json::from_value(values["rbac"]["actor"]["clusterRules"].clone())
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cluster, grants.cluster);
    let namespaces: Vec<&str> = values["rbac"]["actor"]["namespaceRules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["namespace"].as_str())
        .collect();
    // Its own namespace, and the cluster lock's Lease.
    assert_eq!(namespaces, ["default", "faultline-lab"]);
    assert_eq!(
        values["rbac"]["createNamespaces"],
        serde_json::json!(["elsewhere", "faultline-lab"]),
        "every namespace the setup creates"
    );
}

#[test]
fn the_setups_namespace_is_granted_by_name_and_not_created_when_made_for_the_actor() {
    let exps = load("deploy/helm/faultline/files/experiments");
    let namespaces = |g: &Grants| -> Vec<PolicyRule> {
        g.cluster
            .iter()
            .filter(|r| r.resources.as_deref() == Some(&["namespaces".to_string()][..]))
            .cloned()
            .collect()
    };
    let ask = |verb: &str, name: &str| Access {
        verb: verb.into(),
        group: String::new(),
        resource: "namespaces".into(),
        subresource: None,
        namespace: None,
        name: Some(name.into()),
        why: String::new(),
        required: true,
    };
    // Outside the chart: faultline creates the namespace, then applies it by name.
    let alone = grants(RbacRole::Actor, &exps, None, &[], &[]).unwrap();
    assert!(alone.allows(&ask("create", "faultline-demo")));
    assert!(alone.allows(&ask("patch", "faultline-demo")));
    assert!(
        !alone.allows(&ask("patch", "kube-system")),
        "another namespace's labels (its Pod Security level) are out of reach: {:?}",
        namespaces(&alone)
    );
    // The chart made it: no `create namespaces`, `get` and `patch` on it alone.
    let made = ["faultline-demo".to_string()];
    let chart = grants(RbacRole::Actor, &exps, None, &made, &[]).unwrap();
    let rules = namespaces(&chart);
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0].verbs, ["get", "patch"]);
    assert_eq!(
        rules[0].resource_names.as_deref(),
        Some(&["faultline-demo".to_string()][..])
    );
    assert!(!chart.allows(&ask("create", "faultline-demo")));
    assert!(!chart.allows(&ask("get", "default")));
}

#[test]
fn the_api_transport_adds_its_pods_to_the_actor_and_ssh_adds_nothing() {
    let exps = load("experiments/kubelet-stop-within-toleration.yaml");
    let inventory = |transport: &str| {
        let text = format!(
            "cluster:\n  name: c\nprofile: kubeadm\ntransport: {transport}\nnodes:\n  - name: w1\n"
        );
        crate::inventory::Inventory::parse(&text, Path::new("inv.yaml"))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let by_pod = grants(RbacRole::Actor, &exps, Some(&inventory("pod")), &[], &[]).unwrap();
    let pod_rules = by_pod
        .namespaced
        .get("faultline-node-access")
        .unwrap_or_else(|| panic!("a Role in the pods' namespace: {by_pod:?}"));
    let rules = serde_json::to_string(pod_rules).unwrap();
    for wanted in ["\"pods/exec\"", "\"create\"", "\"delete\""] {
        assert!(rules.contains(wanted), "{wanted} in {rules}");
    }
    // Exec over a WebSocket is authorized as `get` (a Job with `create` alone was refused
    // on kind), over SPDY and on newer servers as `create`: both.
    let exec_verbs: Vec<String> = serde_json::to_value(pod_rules)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["resources"].to_string().contains("pods/exec"))
        .flat_map(|r| r["verbs"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    for verb in ["create", "get"] {
        assert!(exec_verbs.iter().any(|v| v == verb), "{verb}: {rules}");
    }
    let cluster = serde_json::to_string(&by_pod.cluster).unwrap();
    assert!(cluster.contains("\"namespaces\""), "{cluster}");

    let by_ssh = grants(RbacRole::Actor, &exps, Some(&inventory("ssh")), &[], &[]).unwrap();
    let none = grants(RbacRole::Actor, &exps, None, &[], &[]).unwrap();
    assert_eq!(
        serde_json::to_string(&by_ssh.cluster).unwrap(),
        serde_json::to_string(&none.cluster).unwrap()
    );
    assert!(!by_ssh.namespaced.contains_key("faultline-node-access"));
}

/// `faultline rbac --nodes a,b`: the drain's `patch nodes` is granted on those nodes alone
/// (by `resourceNames`), and a run's per-node questions are answered by those rules: the
/// named nodes are allowed, any other node is refused naming it and the step.
#[test]
fn an_actor_limited_to_named_nodes_may_patch_those_alone() {
    let exps = load("deploy/helm/faultline/files/experiments");
    let nodes = ["kind-worker".to_string(), "kind-worker2".to_string()];
    let named = grants(RbacRole::Actor, &exps, None, &[], &nodes).unwrap();
    let patch_rules: Vec<&PolicyRule> = named
        .cluster
        .iter()
        .filter(|r| {
            r.resources.as_deref() == Some(&["nodes".to_string()][..])
                && r.verbs.contains(&"patch".to_string())
        })
        .collect();
    assert_eq!(patch_rules.len(), 1, "{:#?}", named.cluster);
    assert_eq!(
        patch_rules[0].resource_names.as_deref(),
        Some(&nodes[..]),
        "granted by name"
    );
    // The rest of the actor is untouched: the eviction cannot be limited to a node.
    let every = grants(RbacRole::Actor, &exps, None, &[], &[]).unwrap();
    let without_nodes = |g: &Grants| -> Vec<PolicyRule> {
        g.cluster
            .iter()
            .filter(|r| r.resources.as_deref() != Some(&["nodes".to_string()][..]))
            .cloned()
            .collect()
    };
    assert_eq!(without_nodes(&named), without_nodes(&every));
    assert!(every.allows(&access::on_node(&patch_nodes(), "kind-control-plane")));

    let mut held = observer();
    held.extend(actor(&exps).unwrap());
    let held = Grants::of(&super::on_nodes(held, &nodes));
    assert!(!held.allows(&patch_nodes()), "not on every node");
    let exp = &exps[0];
    let target = exp.steps.iter().find_map(|s| s.target.clone()).unwrap();
    let on = |node: &str| {
        let targets: std::collections::BTreeMap<String, Vec<String>> =
            [(target.clone(), vec![node.to_string()])].into();
        let answers = access::needed_on_nodes(exp, &targets)
            .into_iter()
            .map(|a| {
                let allowed = held.allows(&a);
                (a, Ok(allowed))
            })
            .collect();
        crate::doctor::judge_access(Vec::new(), answers, Vec::new())
    };
    let allowed = on("kind-worker2");
    assert!(
        crate::doctor::failures(&allowed.findings).is_empty(),
        "{:#?}",
        allowed.findings
    );
    let refused = on("kind-worker3");
    let failures: Vec<String> = crate::doctor::failures(&refused.findings)
        .iter()
        .map(|f| f.to_string())
        .collect();
    assert!(
        failures.iter().any(|f| f
            .contains("`patch nodes kind-worker3` is not allowed; step `drain` of drain-a-worker")),
        "{failures:#?}"
    );
}

/// A per-node verb refused on every node but granted on some by name is not a refusal:
/// it passes, naming the nodes, and a run asks again node by node.
#[test]
fn a_grant_by_name_passes_saying_on_which_nodes() {
    let answers = vec![(patch_nodes(), Ok(true))];
    let by_name = vec![crate::doctor::node_grants::GrantedByName {
        access: Access {
            verb: "delete".into(),
            ..patch_nodes()
        },
        nodes: vec!["w1".into(), "w2".into()],
    }];
    let judged = crate::doctor::judge_access(Vec::new(), answers, by_name);
    assert!(crate::doctor::failures(&judged.findings).is_empty());
    let text: Vec<String> = judged.findings.iter().map(|f| f.to_string()).collect();
    assert!(
        text.iter().any(|f| f.contains(
            "`delete nodes` is granted by name only, on 2 node(s): w1, w2; a run asks it node by node"
        )),
        "{text:#?}"
    );
    assert!(
        text.iter().any(|f| f.contains("2 of 2 permissions")),
        "{text:#?}"
    );
}

fn patch_nodes() -> Access {
    Access {
        verb: "patch".into(),
        group: String::new(),
        resource: "nodes".into(),
        subresource: None,
        namespace: None,
        name: None,
        why: "step `drain`".into(),
        required: true,
    }
}
