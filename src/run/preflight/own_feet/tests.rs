use k8s_openapi::api::core::v1::{NodeAddress, NodeStatus};
use kube::api::ObjectMeta;

use super::*;

fn experiment() -> Experiment {
    crate::experiment::parse(
        "name: e\ndescription: d\nnamespace: shop\ntargets:\n  v: {role: worker, count: 1}\n  cp: {role: control-plane, count: 1}\nsafety: {allowControlPlane: true}\nsteps:\n  - {name: stop it, at: 0s, do: kubelet-stop, target: v}\n  - {name: start it, at: 30s, do: kubelet-start, target: v}\n  - {name: cordon cp, at: 40s, do: cordon, target: cp}\n  - {name: uncordon cp, at: 50s, do: uncordon, target: cp}\n  - {name: cut cp off, at: 60s, do: partition, target: cp}\n  - {name: heal cp, at: 90s, do: heal, target: cp}\nexpect:\n  - {name: n, node: v, becomes: NotReady, within: 60s}\n",
        std::path::Path::new("e.yaml"),
    )
    .unwrap_or_else(|d| panic!("{d}"))
}

fn targets(v: &str, cp: &str) -> ResolvedTargets {
    [
        ("v".to_string(), vec![v.to_string()]),
        ("cp".to_string(), vec![cp.to_string()]),
    ]
    .into_iter()
    .collect()
}

fn node(name: &str, ip: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            }]),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

#[test]
fn a_step_on_the_node_running_faultlines_pod_is_refused_naming_it() {
    let feet = OwnFeet {
        own_pod: Some(("w1".into(), "faultline/run-1-abc".into())),
        api_server_node: None,
    };
    let err = check(
        &experiment(),
        &targets("w1", "cp1"),
        &feet,
        "https://10.96.0.1",
    )
    .expect_err("the kubelet stop would kill faultline's own pod");
    let text = err.to_string();
    assert!(
        text.contains("step `stop it` does kubelet-stop on node w1"),
        "{text}"
    );
    assert!(text.contains("faultline/run-1-abc"), "{text}");
    assert!(text.contains("job.nodeSelector"), "{text}");
    assert_eq!(
        check(&experiment(), &targets("w2", "cp1"), &feet, ""),
        Ok(())
    );
}

#[test]
fn the_only_api_servers_node_may_be_cordoned_but_not_taken_down() {
    let feet = OwnFeet {
        own_pod: None,
        api_server_node: Some("cp1".into()),
    };
    // Cordoning it, or stopping a kubelet (the API server's static pod keeps running),
    // leaves the API server answering.
    assert_eq!(
        check(&experiment(), &targets("w1", "w9"), &feet, "u"),
        Ok(())
    );
    assert_eq!(
        check(&experiment(), &targets("cp1", "w9"), &feet, "u"),
        Ok(()),
        "kubelet-stop and cordon on cp1"
    );
    let err = check(
        &experiment(),
        &targets("w1", "cp1"),
        &feet,
        "https://172.18.0.2:6443",
    )
    .expect_err("a partition cuts the only API server off");
    let text = err.to_string();
    assert!(
        text.contains("step `cut cp off` does partition on node cp1"),
        "{text}"
    );
    assert!(
        text.contains("runs the only API server faultline talks to (https://172.18.0.2:6443)"),
        "{text}"
    );
}

#[test]
fn the_api_servers_node_is_found_by_address_or_as_the_only_apiserver_pod() {
    let nodes = [node("cp1", "172.18.0.2"), node("w1", "172.18.0.3")];
    assert_eq!(
        api_server_node("https://172.18.0.2:6443", false, &nodes, &[]),
        Some("cp1".into())
    );
    assert_eq!(
        api_server_node("https://172.18.0.2:6443", true, &nodes, &[]),
        None,
        "failover"
    );
    // In a pod: the Service address; the only kube-apiserver pod tells the node.
    assert_eq!(
        api_server_node("https://10.96.0.1", false, &nodes, &["cp1".into()]),
        Some("cp1".into())
    );
    // Several API servers behind one Service: it fails over by itself.
    assert_eq!(
        api_server_node(
            "https://10.96.0.1",
            false,
            &nodes,
            &["cp1".into(), "cp2".into()]
        ),
        None
    );
    assert_eq!(host_of("https://[fd00::1]:6443/"), "fd00::1");
    assert_eq!(host_of("https://api.example.com"), "api.example.com");
}
