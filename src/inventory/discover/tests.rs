//! Discovery on recorded API objects and `docker inspect` output (`fixtures/api/{kind,
//! kind-tuned,k3d}`, `fixtures/docker/`): what a kind or k3d cluster really shows, in, the
//! inventory `faultline run` reads, out.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::*;
use crate::cluster::api_timers::pod_command;
use crate::experiment::fault::PowerKey;
use crate::inventory::{CommandKey, Inventory, ProfileName, TransportKind};

fn fixture(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn items<T: serde::de::DeserializeOwned>(rel: &str) -> Vec<T> {
    let list: serde_json::Value = serde_json::from_str(&fixture(rel)).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| serde_json::from_value(i.clone()).unwrap())
        .collect()
}

fn api_nodes(rel: &str) -> Vec<ApiNode> {
    items::<Node>(rel)
        .iter()
        .filter_map(ApiNode::from_node)
        .collect()
}

fn pods(rel: &str) -> Vec<(String, Vec<String>)> {
    items::<Pod>(rel).iter().filter_map(pod_command).collect()
}

fn version(rel: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(&fixture(rel)).unwrap();
    v["gitVersion"].as_str().unwrap().to_string()
}

fn kind_facts(pod_dir: &str) -> ClusterFacts {
    ClusterFacts {
        tool: Tool::Kind,
        cluster: "faultline".into(),
        context: "kind-faultline".into(),
        kubeconfig: Some(PathBuf::from("/work/main/target/kind/kubeconfig")),
        version: version("api/kind/version.json"),
        nodes: api_nodes("api/kind/nodes.json"),
        containers: parse_inspect(&fixture("docker/kind/inspect.json")).unwrap(),
        controller_managers: pods(&format!("api/{pod_dir}/kube-controller-manager.json")),
        api_servers: pods(&format!("api/{pod_dir}/kube-apiserver.json")),
        server_argv: None,
        kubelet_configs: Vec::new(),
    }
}

fn k3d_facts() -> ClusterFacts {
    let containers = parse_inspect(&fixture("docker/k3d/inspect.json")).unwrap();
    let server = containers
        .iter()
        .find(|c| c.name == "k3d-demo-server-0")
        .unwrap();
    ClusterFacts {
        tool: Tool::K3d,
        cluster: "demo".into(),
        context: "k3d-demo".into(),
        kubeconfig: None,
        version: version("api/k3d/version.json"),
        nodes: api_nodes("api/k3d/nodes.json"),
        server_argv: Some((
            "docker inspect command of k3d-demo-server-0".into(),
            server.command.clone(),
        )),
        containers,
        controller_managers: Vec::new(),
        api_servers: Vec::new(),
        kubelet_configs: Vec::new(),
    }
}

/// The generated text, parsed exactly as `faultline run -i` parses it.
fn generate(facts: &ClusterFacts) -> (String, Inventory) {
    let d = build(facts).unwrap_or_else(|e| panic!("{e}"));
    let text = render(&d, "faultline inventory test").unwrap_or_else(|e| panic!("{e}"));
    let inv = Inventory::parse(&text, Path::new("generated.yaml"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    (text, inv)
}

fn names_and_roles(inv: &Inventory) -> Vec<(String, Vec<String>)> {
    inv.nodes()
        .iter()
        .map(|n| (n.name.clone(), n.roles.clone()))
        .collect()
}

fn nr(name: &str, role: &str) -> (String, Vec<String>) {
    (name.to_string(), vec![role.to_string()])
}

#[test]
fn a_recorded_kind_cluster_becomes_an_inventory_run_reads_unchanged() {
    let (text, inv) = generate(&kind_facts("kind"));
    assert_eq!(
        names_and_roles(&inv),
        [
            nr("faultline-control-plane", "control-plane"),
            nr("faultline-worker", "worker"),
            nr("faultline-worker2", "worker"),
        ]
    );
    assert_eq!(inv.cluster().name, "kind-faultline");
    assert_eq!(inv.context(), Some("kind-faultline"));
    assert_eq!(
        inv.kubeconfig(),
        [PathBuf::from("/work/main/target/kind/kubeconfig")]
    );
    assert_eq!(inv.cluster().allowed_contexts, ["kind-faultline"]);
    let worker = inv.node("faultline-worker").unwrap();
    assert_eq!(worker.profile, Some(ProfileName::Kind));
    assert_eq!(worker.transport, TransportKind::Exec);
    assert_eq!(
        worker
            .commands
            .get(CommandKey::KubeletStop)
            .map(String::as_str),
        Some("systemctl stop kubelet")
    );
    // kind sets none of the flags: the defaults of v1.33, and the file says so.
    let t = inv.stated_timers();
    assert_eq!(t.node_monitor_period, Some(Duration::from_secs(5)));
    assert_eq!(t.node_monitor_grace_period, Some(Duration::from_secs(50)));
    assert_eq!(
        t.default_unreachable_toleration,
        Some(Duration::from_secs(300))
    );
    assert_eq!(
        t.default_not_ready_toleration,
        Some(Duration::from_secs(300))
    );
    let grace_line = text
        .lines()
        .find(|l| l.contains("nodeMonitorGracePeriod"))
        .unwrap();
    assert!(
        grace_line.contains("# default of v1.33: kube-controller-manager sets no --node-monitor-grace-period (pod kube-system/kube-controller-manager-faultline-control-plane)"),
        "{grace_line}"
    );
    let unreachable_line = text
        .lines()
        .find(|l| l.contains("defaultUnreachableTolerationSeconds"))
        .unwrap();
    assert!(
        unreachable_line
            .contains("kube-apiserver sets no --default-unreachable-toleration-seconds"),
        "{unreachable_line}"
    );
}

#[test]
fn flags_on_kinds_static_pods_are_the_timers_and_are_cited() {
    let (text, inv) = generate(&kind_facts("kind-tuned"));
    let t = inv.stated_timers();
    assert_eq!(t.node_monitor_period, Some(Duration::from_secs(2)));
    assert_eq!(t.node_monitor_grace_period, Some(Duration::from_secs(20)));
    assert_eq!(
        t.default_unreachable_toleration,
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        t.default_not_ready_toleration,
        Some(Duration::from_secs(30))
    );
    assert!(
        text.contains(
            "nodeMonitorGracePeriod: 20s   # kube-controller-manager --node-monitor-grace-period=20s (pod kube-system/kube-controller-manager-faultline-control-plane)"
        ),
        "{text}"
    );
}

#[test]
fn the_default_grace_period_follows_the_clusters_version() {
    let mut facts = kind_facts("kind");
    facts.version = "v1.31.4".into();
    let (text, inv) = generate(&facts);
    assert_eq!(
        inv.stated_timers().node_monitor_grace_period,
        Some(Duration::from_secs(40))
    );
    assert!(text.contains("40s   # default of v1.31"), "{text}");

    facts.version = "unknown".into();
    let err = build(&facts).unwrap_err().to_string();
    assert!(err.contains("`unknown`"), "{err}");
}

#[test]
fn a_recorded_k3d_cluster_servers_are_control_plane_and_k3s_args_are_the_timers() {
    let (text, inv) = generate(&k3d_facts());
    assert_eq!(
        names_and_roles(&inv),
        [
            nr("k3d-demo-server-0", "control-plane"),
            nr("k3d-demo-agent-0", "worker"),
            nr("k3d-demo-agent-1", "worker"),
        ]
    );
    assert_eq!(inv.cluster().name, "k3d-demo");
    assert_eq!(inv.context(), Some("k3d-demo"));
    assert!(inv.kubeconfig().is_empty());
    let agent = inv.node("k3d-demo-agent-0").unwrap();
    assert_eq!(agent.profile, Some(ProfileName::K3d));
    let t = inv.stated_timers();
    assert_eq!(t.node_monitor_period, Some(Duration::from_secs(2)));
    assert_eq!(t.node_monitor_grace_period, Some(Duration::from_secs(20)));
    assert_eq!(
        t.default_unreachable_toleration,
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        t.default_not_ready_toleration,
        Some(Duration::from_secs(300))
    );
    assert!(
        text.contains("kube-controller-manager --node-monitor-grace-period=20s (k3s --kube-controller-manager-arg, docker inspect command of k3d-demo-server-0)"),
        "{text}"
    );
    assert!(
        text.contains(
            "# default of v1.31: kube-apiserver sets no --default-not-ready-toleration-seconds"
        ),
        "{text}"
    );
    assert!(
        text.contains("# note: container k3d-demo-serverlb (loadbalancer) is not a node"),
        "{text}"
    );
    assert!(text.contains("# k3s server"), "{text}");
}

#[test]
fn a_k3d_cluster_without_a_readable_server_command_line_is_refused() {
    let mut facts = k3d_facts();
    facts.server_argv = None;
    let err = build(&facts).unwrap_err().to_string();
    assert!(err.contains("no k3s server command line"), "{err}");
}

#[test]
fn a_context_of_another_cluster_is_refused_not_written_down() {
    let mut facts = kind_facts("kind");
    facts.nodes = api_nodes("api/k3d/nodes.json");
    let err = build(&facts).unwrap_err().to_string();
    assert!(err.contains("points at another cluster"), "{err}");
    assert!(err.contains("k3d-demo-server-0"), "{err}");
    assert!(err.contains("faultline-worker"), "{err}");
}

#[test]
fn a_node_without_its_container_is_named() {
    let mut facts = kind_facts("kind");
    facts.containers.retain(|c| c.name != "faultline-worker2");
    let err = build(&facts).unwrap_err().to_string();
    assert!(
        err.starts_with("node faultline-worker2 (context `kind-faultline`) has no container"),
        "{err}"
    );
}

#[test]
fn roles_must_agree_between_api_and_docker() {
    let mut facts = kind_facts("kind");
    facts.nodes[1].control_plane = true;
    let err = build(&facts).unwrap_err().to_string();
    assert!(
        err.contains("faultline-worker is control-plane in the API"),
        "{err}"
    );
}

#[test]
fn no_container_with_the_clusters_label_means_no_such_cluster() {
    let mut facts = kind_facts("kind");
    facts.cluster = "nope".into();
    let err = build(&facts).unwrap_err().to_string();
    assert_eq!(
        err,
        "no Docker container is labelled io.x-k8s.kind.cluster=nope: is the kind cluster `nope` \
         running? (`kind get clusters` lists them; pass --name)"
    );
}

#[test]
fn stopped_node_containers_and_unregistered_ones_are_noted() {
    let mut facts = kind_facts("kind");
    facts.containers[1].state = "exited".into();
    facts.nodes.retain(|n| n.name != "faultline-worker2");
    let (text, inv) = generate(&facts);
    assert_eq!(inv.nodes().len(), 2);
    assert!(
        text.contains("# note: node container faultline-worker is exited, not running"),
        "{text}"
    );
    assert!(
        text.contains("# note: container faultline-worker2 has no node in the API"),
        "{text}"
    );
}

#[test]
fn a_missing_static_pod_or_a_bad_flag_is_an_error_naming_it() {
    let mut facts = kind_facts("kind");
    facts.controller_managers.clear();
    let err = build(&facts).unwrap_err().to_string();
    assert!(
        err.contains("no pod labelled component=kube-controller-manager in namespace kube-system"),
        "{err}"
    );

    let mut facts = kind_facts("kind");
    facts.api_servers[0]
        .1
        .push("--default-unreachable-toleration-seconds=5m".into());
    let err = build(&facts).unwrap_err().to_string();
    assert!(
        err.contains("kube-apiserver --default-unreachable-toleration-seconds in pod kube-system/kube-apiserver-faultline-control-plane: `5m` is not a whole number"),
        "{err}"
    );
}

#[test]
fn control_plane_nodes_that_disagree_are_noted() {
    let mut facts = kind_facts("kind-tuned");
    let (_, mut argv) = facts.controller_managers[0].clone();
    argv.retain(|a| !a.starts_with("--node-monitor-grace-period"));
    facts.controller_managers.push((
        "kube-controller-manager-faultline-control-plane2".into(),
        argv,
    ));
    let d = build(&facts).unwrap();
    assert_eq!(
        d.timers.node_monitor_grace_period.value,
        Duration::from_secs(20)
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("disagree on --node-monitor-grace-period")),
        "{:?}",
        d.notes
    );
}

#[test]
fn odd_strings_cannot_break_the_generated_file() {
    let mut facts = kind_facts("kind");
    facts.context = "ctx: with \"quotes\" # and hash".into();
    facts.kubeconfig = Some(PathBuf::from("/tmp/a b/kube: config"));
    let (_, inv) = generate(&facts);
    assert_eq!(inv.context(), Some("ctx: with \"quotes\" # and hash"));
    assert_eq!(inv.kubeconfig(), [PathBuf::from("/tmp/a b/kube: config")]);
}

fn ssh_files() -> SshReach {
    SshReach {
        identity_file: PathBuf::from("/work/main/target/kind/ssh/id_ed25519"),
        known_hosts: PathBuf::from("/work/main/target/kind/ssh/known_hosts"),
    }
}

#[test]
fn a_kind_cluster_over_ssh_is_kubeadm_nodes_at_their_container_addresses_powered_by_docker() {
    let facts = kind_facts("kind-tuned");
    let (_, over_docker) = generate(&facts);
    let d = build(&facts).unwrap().over_ssh(ssh_files()).unwrap();
    let text = render(&d, "faultline inventory kind --transport ssh").unwrap();
    let inv = Inventory::parse(&text, Path::new("generated.yaml"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(names_and_roles(&inv), names_and_roles(&over_docker));
    let addresses: Vec<(&str, &str)> = inv
        .nodes()
        .iter()
        .map(|n| (n.name.as_str(), n.address.as_str()))
        .collect();
    // The recorded `docker inspect`: each container's address on the `kind` network.
    assert_eq!(
        addresses,
        [
            ("faultline-control-plane", "172.18.0.3"),
            ("faultline-worker", "172.18.0.4"),
            ("faultline-worker2", "172.18.0.2"),
        ]
    );
    let worker = inv.node("faultline-worker").unwrap();
    assert_eq!(worker.profile, Some(ProfileName::Kubeadm));
    assert_eq!(worker.transport, TransportKind::Ssh);
    assert_eq!(worker.ssh.user, "root");
    assert_eq!(worker.ssh.config, None, "config: none");
    assert_eq!(worker.ssh.identity_file, Some(ssh_files().identity_file));
    assert_eq!(worker.ssh.known_hosts, Some(ssh_files().known_hosts));
    assert!(!worker.ssh.insecure_ignore_host_keys);
    assert_eq!(
        worker
            .commands
            .get(CommandKey::KubeletStop)
            .map(String::as_str),
        Some("systemctl stop kubelet"),
        "the kubeadm profile's commands"
    );
    // Power, reboots included, is exactly what the kind profile does through Docker.
    let docker_worker = over_docker.node("faultline-worker").unwrap();
    assert_eq!(worker.power, docker_worker.power);
    assert!(worker.power.has(PowerKey::Reboot) && worker.power.has(PowerKey::Address));
    // The timers are read from the cluster either way.
    assert_eq!(inv.stated_timers(), over_docker.stated_timers());
}

#[test]
fn ssh_is_refused_for_k3d_and_for_a_node_container_without_an_address() {
    let k3d = build(&k3d_facts()).unwrap();
    let err = k3d.over_ssh(ssh_files()).unwrap_err().to_string();
    assert!(err.contains("kind clusters only"), "{err}");

    let mut facts = kind_facts("kind");
    let stopped = facts
        .containers
        .iter_mut()
        .find(|c| c.name == "faultline-worker2")
        .unwrap();
    stopped.addresses.clear();
    let d = build(&facts).unwrap();
    let err = d.over_ssh(ssh_files()).unwrap_err().to_string();
    assert!(err.contains("faultline-worker2 has no address"), "{err}");
}

#[test]
fn the_pod_transport_inventory_needs_neither_docker_nor_ssh() {
    let discovered = "cluster:\n  name: \"kind-x\"\nprofile: kind                  # nodes are containers: docker exec, power through Docker\nnodes:\n  - {name: x-worker, roles: [worker]}\n";
    let text = super::pod_transport(discovered, "v1.33.13", None);
    let inv = crate::inventory::Inventory::parse(&text, std::path::Path::new("t.yaml"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let node = inv.node("x-worker").expect("node");
    assert_eq!(node.transport, crate::inventory::TransportKind::Pod);
    assert_eq!(node.pod.image, "registry.k8s.io/kube-proxy:v1.33.13");
    // No power driver: the kind profile's is Docker.
    assert!(
        !node.power.has(crate::inventory::PowerKey::Status),
        "{text}"
    );
    assert_eq!(
        node.commands
            .get(crate::inventory::CommandKey::KubeletStop)
            .map(String::as_str),
        Some("systemctl stop kubelet")
    );
}

#[test]
fn kubelets_that_all_hold_off_a_shutdown_make_the_inventory_offer_graceful_shutdown() {
    let config = |extra: &str| {
        format!("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{extra}")
    };
    let nodes = [
        "faultline-control-plane",
        "faultline-worker",
        "faultline-worker2",
    ];
    let mut facts = kind_facts("kind");
    facts.kubelet_configs = nodes
        .iter()
        .map(|n| (n.to_string(), config("shutdownGracePeriod: 20s\n")))
        .collect();
    let (text, inv) = generate(&facts);
    assert!(
        inv.cluster()
            .capabilities()
            .contains(&"graceful-node-shutdown".to_string()),
        "{text}"
    );
    assert!(text.contains("shutdownGracePeriod >= 20s"), "{text}");

    // One kubelet without it: a target may be that node, so the cluster does not offer it.
    facts.kubelet_configs[1].1 = config("cgroupDriver: systemd\n");
    let (text, inv) = generate(&facts);
    assert!(!text.contains("offers:"), "{text}");
    assert_eq!(inv.cluster().capabilities(), ["containers"]);

    // One that cannot be read: said in the header, nothing offered.
    facts.kubelet_configs[1].1 = config("shutdownGracePeriod: soon\n");
    let (text, _) = generate(&facts);
    assert!(!text.contains("offers:"), "{text}");
    assert!(
        text.contains("faultline-worker could not be read"),
        "{text}"
    );
}

#[test]
fn the_pod_transport_image_is_pinned_to_the_digest_every_node_holds_it_by() {
    let tag = "registry.k8s.io/kube-proxy:v1.33.13";
    let pulled = |digest: &str| {
        vec![
            format!("registry.k8s.io/kube-proxy@sha256:{digest}"),
            tag.to_string(),
        ]
    };
    let node = |name: &str, images: Vec<Vec<String>>| ApiNode {
        name: name.to_string(),
        control_plane: false,
        images,
    };
    let same = [node("a", vec![pulled("aa")]), node("b", vec![pulled("aa")])];
    let pinned = super::pinned_image(&same, tag);
    assert_eq!(
        pinned.as_deref(),
        Some("registry.k8s.io/kube-proxy:v1.33.13@sha256:aa")
    );
    let text = super::pod_transport(
        "cluster:\n  name: \"kind-x\"\nprofile: kind\nnodes:\n  - {name: a, roles: [worker]}\n",
        "v1.33.13",
        pinned.as_deref(),
    );
    let inv = crate::inventory::Inventory::parse(&text, std::path::Path::new("t.yaml"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(
        inv.node("a").expect("node").pod.image,
        "registry.k8s.io/kube-proxy:v1.33.13@sha256:aa"
    );
    // Nodes that disagree, one without it, or an image loaded under another name (as the
    // offline kind cluster's, recorded from its nodes): the tag stays.
    let differ = [node("a", vec![pulled("aa")]), node("b", vec![pulled("bb")])];
    assert_eq!(super::pinned_image(&differ, tag), None);
    let missing = [node("a", vec![pulled("aa")]), node("b", Vec::new())];
    assert_eq!(super::pinned_image(&missing, tag), None);
    let loaded = [node(
        "a",
        vec![vec![
            "docker.io/library/import-2026-11-28@sha256:0069723e".to_string(),
            tag.to_string(),
        ]],
    )];
    assert_eq!(super::pinned_image(&loaded, tag), None);
    assert_eq!(super::pinned_image(&[], tag), None, "no node, no digest");
}
