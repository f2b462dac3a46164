//! Probes in the experiment format: both kinds with their defaults, probe subjects,
//! probe states and `downFor`, parsed into the model.

use std::path::Path;
use std::time::Duration;

use faultline::experiment::model::*;

const FILE: &str = r#"
name: probes
description: Probes parse.
targets:
  victim: {role: worker, count: 1}
steps:
  - name: stop
    at: 0s
    do: power-off
    target: victim
probes:
  victim-ssh:
    command: "true"
    on: victim
    interval: 1s
    timeout: 3s
  api:
    http: https://10.213.77.1:6443/livez
    expectStatus: 200
    insecure: true
  local:
    command: "exit 0"
expect:
  - name: ssh goes
    probe: victim-ssh
    becomes: Down
    within: 10s
  - name: api stays
    probe: api
    never: Down
  - name: short outages
    probe: local
    downFor: 20s
"#;

#[test]
fn probes_parse_with_their_defaults() {
    let e = faultline::experiment::parse(FILE, Path::new("p.yaml")).expect("valid");
    assert_eq!(
        e.probes,
        vec![
            ProbeSpec {
                name: "victim-ssh".into(),
                kind: ProbeKind::Command {
                    command: "true".into(),
                    on: Some("victim".into()),
                },
                interval: Duration::from_secs(1),
                timeout: Duration::from_secs(3),
            },
            ProbeSpec {
                name: "api".into(),
                kind: ProbeKind::Http {
                    url: "https://10.213.77.1:6443/livez".into(),
                    expect_status: Some(200),
                    insecure: true,
                    ca_file: None,
                },
                interval: Duration::from_secs(2),
                timeout: Duration::from_secs(5),
            },
            ProbeSpec {
                name: "local".into(),
                kind: ProbeKind::Command {
                    command: "exit 0".into(),
                    on: None,
                },
                interval: Duration::from_secs(2),
                timeout: Duration::from_secs(5),
            },
        ]
    );
    let x = &e.expectations;
    assert_eq!(
        x[0].subject,
        Subject::Probe {
            name: "victim-ssh".into()
        }
    );
    assert_eq!(
        x[0].check,
        Check::Becomes {
            state: StateMatch::Probe(ProbeStateMatch::Down),
            window: Window::Within(Bound::fixed(Duration::from_secs(10))),
        }
    );
    assert_eq!(
        x[1].check,
        Check::Never {
            state: StateMatch::Probe(ProbeStateMatch::Down),
            until: Until::End,
        }
    );
    assert_eq!(
        x[2].check,
        Check::DownFor {
            at_most: Bound::fixed(Duration::from_secs(20))
        }
    );
}

#[test]
fn http_probe_keys_on_a_command_probe_and_bad_statuses_are_refused() {
    let text = FILE.replace(
        "    command: \"exit 0\"\n",
        "    command: \"exit 0\"\n    expectStatus: 200\n",
    );
    let d = faultline::experiment::parse(&text, Path::new("p.yaml")).expect_err("invalid");
    assert_eq!(
        d.iter().map(|d| d.message.clone()).collect::<Vec<_>>(),
        vec!["`expectStatus` only goes with an `http` probe"]
    );
    let text = FILE.replace("expectStatus: 200", "expectStatus: 2000");
    let d = faultline::experiment::parse(&text, Path::new("p.yaml")).expect_err("invalid");
    assert_eq!(d.0[0].message, "`expectStatus` 2000 is not an HTTP status");
    let text = FILE.replace("https://10.213.77.1:6443/livez", "10.213.77.1:6443");
    let d = faultline::experiment::parse(&text, Path::new("p.yaml")).expect_err("invalid");
    assert_eq!(
        d.0[0].message,
        "`10.213.77.1:6443` is not an http:// or https:// URL"
    );
}

#[test]
fn an_http_probe_may_go_through_a_single_node_target() {
    let text = FILE.replace(
        "https://10.213.77.1:6443/livez",
        "http://{internalIP:victim}:30080/hostname",
    );
    let e = faultline::experiment::parse(&text, Path::new("p.yaml")).expect("valid");
    assert!(matches!(
        &e.probes[1].kind,
        ProbeKind::Http { url, .. } if url == "http://{internalIP:victim}:30080/hostname"
    ));
}

#[test]
fn bad_internal_ip_placeholders_are_refused_where_they_are_written() {
    let cases = [
        (
            "http://{internalIP:victum}:30080/",
            "unknown target `victum`",
        ),
        (
            "http://{nodeIP:victim}:30080/",
            "in `http://{nodeIP:victim}:30080/`: unknown placeholder `{nodeIP:victim}`: the only one is `{internalIP:<target>}`",
        ),
        (
            "http://{internalIP:victim:30080/",
            "in `http://{internalIP:victim:30080/`: `{` at character 7 is never closed",
        ),
    ];
    for (url, message) in cases {
        let text = FILE.replace("https://10.213.77.1:6443/livez", url);
        let d = faultline::experiment::parse(&text, Path::new("p.yaml")).expect_err(url);
        assert_eq!(d.0[0].message, message, "{url}");
        assert_eq!(d.0[0].line, 18, "{url}: the line of `http:`");
    }
    let text = FILE
        .replace("victim: {role: worker, count: 1}", "victim: {role: worker}")
        .replace("    on: victim\n", "")
        .replace(
            "https://10.213.77.1:6443/livez",
            "http://{internalIP:victim}/",
        );
    let d = faultline::experiment::parse(&text, Path::new("p.yaml")).expect_err("many nodes");
    assert_eq!(
        d.0[0].message,
        "`{internalIP:<target>}` stands for exactly one node, and target `victim` may have more"
    );
}

#[test]
fn an_exec_probe_names_a_workload_pod_on_a_single_node_target() {
    let text = FILE.replace(
        "    command: \"true\"\n    on: victim\n",
        "    exec: [/agnhost, help]\n    pod: {workload: deployment/web, on: victim, container: app}\n",
    );
    let e = faultline::experiment::parse(&text, Path::new("p.yaml")).expect("valid");
    assert_eq!(
        e.probes[0].kind,
        ProbeKind::Exec {
            command: vec!["/agnhost".into(), "help".into()],
            workload: WorkloadRef {
                kind: WorkloadKind::Deployment,
                namespace: "default".into(),
                name: "web".into(),
            },
            on: "victim".into(),
            container: Some("app".into()),
        }
    );
}
