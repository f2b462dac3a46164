use std::path::Path;

use super::*;

fn parse(text: &str) -> Result<Inventory, InventoryError> {
    Inventory::parse(text, Path::new("inv.yaml"))
}

fn fixture(name: &str) -> Inventory {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/inventory")
        .join(name);
    Inventory::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn reads_the_lab_file_verbatim() {
    let inv = fixture("lab.yaml");
    assert_eq!(inv.cluster().name, "faultline-lab");
    assert_eq!(
        inv.kubeconfig(),
        [PathBuf::from("/abs/target/lab/kubeconfig")]
    );
    assert_eq!(inv.context(), Some("faultline-lab"));
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
    let n = inv.node("lab-worker-1").expect("node present");
    assert_eq!(n.address, "10.213.77.11");
    assert_eq!(n.roles, vec!["worker".to_string()]);
    assert_eq!(n.transport, TransportKind::Ssh);
    assert_eq!(n.ssh.connect_timeout, Duration::from_secs(5));
    assert_eq!(
        n.ssh.known_hosts.as_deref(),
        Some(Path::new("/abs/target/lab/ssh/known_hosts"))
    );
    assert_eq!(
        n.commands.get(CommandKey::PowerOff).map(String::as_str),
        Some("/abs/ci/lab/node-ctl power-off")
    );
    assert_eq!(
        n.power.get(PowerKey::On).cloned(),
        Some(vec![
            "/abs/ci/lab/power".into(),
            "on".into(),
            "{node}".into()
        ])
    );
    assert!(inv.node("nope").is_none());
}

#[test]
fn missing_timers_are_stated_as_absent() {
    let inv = parse("cluster: {name: c}\nnodes: []\n").expect("valid");
    assert_eq!(inv.stated_timers(), crate::timers::StatedTimers::default());
}

#[test]
fn precedence_node_over_top_over_profile() {
    let inv = fixture("mixed.yaml");
    let agent = inv.node("agent-1").expect("agent");
    assert_eq!(agent.profile, Some(ProfileName::Rke2Agent));
    // profile default
    assert_eq!(
        agent
            .commands
            .get(CommandKey::KubeletStop)
            .map(String::as_str),
        Some("systemctl stop rke2-agent")
    );
    // top level beats profile
    assert_eq!(
        agent
            .commands
            .get(CommandKey::Partition)
            .map(String::as_str),
        Some("/usr/local/bin/cut-off")
    );
    assert_eq!(agent.ssh.user, "admin");
    assert!(agent.ssh.sudo);
    assert_eq!(agent.ssh.port, 22, "built-in default");

    let server = inv.node("server-1").expect("server");
    assert_eq!(
        server
            .commands
            .get(CommandKey::KubeletStop)
            .map(String::as_str),
        Some("systemctl stop rke2-server")
    );
    assert_eq!(
        server.commands.get(CommandKey::Reboot).map(String::as_str),
        Some("shutdown -r now")
    );
    assert_eq!(server.ssh.port, 2222);
    assert_eq!(
        server.ssh.user, "admin",
        "node override keeps unset fields from top level"
    );

    let kind = inv.node("kind-worker").expect("kind");
    assert_eq!(kind.transport, TransportKind::Exec);
    assert_eq!(kind.address, "kind-worker");
    assert_eq!(
        kind.exec,
        Some(
            vec!["docker", "exec", "{node}", "sh", "-c", "{command}"]
                .into_iter()
                .map(String::from)
                .collect()
        )
    );
    assert_eq!(
        kind.power.get(PowerKey::On).cloned(),
        Some(vec!["docker".into(), "start".into(), "{node}".into()])
    );
    assert_eq!(
        kind.power.get(PowerKey::Status).cloned(),
        Some(vec!["docker".into(), "inspect".into(), "{node}".into()])
    );
}

#[test]
fn unknown_key_is_reported_with_line_and_column() {
    let err = parse("cluster:\n  name: c\nssh:\n  usr: root\n").expect_err("typo");
    let text = err.to_string();
    assert!(text.starts_with("inv.yaml:4:"), "{text}");
    assert!(text.contains("usr"), "{text}");
}

#[test]
fn bad_duration_is_reported_in_place() {
    let err = parse("cluster: {name: c}\ntimers:\n  nodeMonitorPeriod: 5\n").expect_err("unitless");
    let text = err.to_string();
    assert!(text.starts_with("inv.yaml:3:"), "{text}");
    assert!(text.contains("has no unit"), "{text}");
}

#[test]
fn bad_node_names_are_rejected() {
    for bad in ["Upper", "-lead", "trail-", "a b", "a;rm -rf", "x$(id)", ""] {
        let text = format!("cluster: {{name: c}}\nnodes:\n  - name: \"{bad}\"\n");
        let err = parse(&text).expect_err(bad);
        assert!(
            err.to_string().contains("not a valid Kubernetes node name"),
            "{err}"
        );
    }
    assert!(valid_node_name("a"));
    assert!(valid_node_name("ip-10-0-0-1.ec2.internal"));
}

#[test]
fn unknown_profile_is_an_error() {
    let err = parse("cluster: {name: c}\nprofile: minikube\n").expect_err("profile");
    assert!(err.to_string().starts_with("inv.yaml:2:"), "{err}");
}

#[test]
fn insecure_host_keys_cannot_come_from_a_file() {
    let err =
        parse("cluster: {name: c}\nssh: {insecureIgnoreHostKeys: true}\nnodes: [{name: n1}]\n")
            .expect_err("insecure");
    assert!(
        err.to_string().contains("--insecure-ignore-host-keys"),
        "{err}"
    );
}

#[test]
fn exec_transport_needs_a_command_placeholder() {
    let err = parse(
        "cluster: {name: c}\ntransport: exec\nexec: [docker, exec, x]\nnodes: [{name: n1}]\n",
    )
    .expect_err("exec");
    assert!(err.to_string().contains("{command}"), "{err}");
}

#[test]
fn duplicate_nodes_are_an_error() {
    let err = parse("cluster: {name: c}\nnodes: [{name: n1}, {name: n1}]\n").expect_err("dup");
    assert!(err.to_string().contains("twice"), "{err}");
}

#[test]
fn api_servers_are_extra_failover_endpoints_and_discovery_is_on_by_default() {
    let inv = parse(
        "cluster:\n  name: c\n  apiServers: [https://10.0.0.2:6443, https://lb.example:443]\nnodes: []\n",
    )
    .unwrap();
    let endpoints = inv.cluster().api_endpoints();
    assert_eq!(
        endpoints.extra,
        ["https://10.0.0.2:6443", "https://lb.example:443"]
    );
    assert!(endpoints.discover);
    let off = parse("cluster:\n  name: c\n  discoverApiServers: false\nnodes: []\n").unwrap();
    assert!(!off.cluster().api_endpoints().discover);
}

#[test]
fn an_api_server_that_is_not_an_https_url_is_an_error() {
    for (bad, why) in [
        ("10.0.0.2:6443", "needs https://"),
        ("https://", "is not a URL"),
        ("ftp://10.0.0.2", "needs https://"),
    ] {
        let err = parse(&format!(
            "cluster:\n  name: c\n  apiServers: [\"{bad}\"]\nnodes: []\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("cluster.apiServers") && err.contains(why),
            "{bad}: {err}"
        );
    }
}

#[test]
fn a_nodes_own_exec_client_is_never_primed_through_its_profiles() {
    let inv = parse(
        "cluster: {name: c}\nprofile: kind\nnodes:\n  - {name: n1}\n  - name: n2\n    exec: [podman, exec, \"{node}\", sh, -c, \"{command}\"]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let profile = inv.node("n1").expect("n1");
    assert_eq!(
        profile.exec_with_stdin.as_deref().map(|a| a.join(" ")),
        Some("docker exec -i {node} sh -c {command}".to_string())
    );
    let own = inv.node("n2").expect("n2");
    assert_eq!(own.exec.as_ref().map(|a| a[0].as_str()), Some("podman"));
    assert_eq!(own.exec_with_stdin, None, "docker's -i paired with podman");
}
