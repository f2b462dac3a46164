//! A complete experiment maps onto exactly the model the runner and judge expect:
//! defaults filled in, references kept, bounds parsed into terms.

use std::collections::BTreeMap;
use std::time::Duration;

use faultline::experiment::model::*;
use faultline::experiment::parse;

const YAML: &str = r#"
name: round-trip
description: Every construct once.
tags: [kubelet]
namespace: lab
targets:
  victim:
    role: worker
    runningPodsOf: statefulset/db
    count: 1
  other:
    names: [node-b]
    labels: {zone: b}
    exclude: [victim]
setup:
  manifests: [web.yaml]
teardown:
  deleteManifests: true
observe:
  for: 2 * grace
  namespaces: [lab]
safety:
  maxNodesDown: 2
  allowControlPlane: true
steps:
  - name: stop
    at: 0s
    do: kubelet-stop
    target: victim
  - do: run
    after: stop
    delay: 1m30s
    command: systemctl stop foo
    target: other
    timeout: 30s
  - do: delete-pods
    when: {pods: {workload: deployment/web, on: victim, count: any}, is: Terminating}
    pods: {workload: statefulset/kube-system/db, on: victim}
    force: true
  - do: delete-pvc
    at: 5m
    pvc: {name: data-db-0}
  - do: untaint
    at: grace - 5s
    target: victim
    taint: {key: k, value: v, effect: NoSchedule}
expect:
  - name: unknown
    node: victim
    becomes: Unknown
    within: grace + 10s
  - name: evicted
    pods: {workload: deployment/web, on: victim}
    becomes: Terminating
    between: [grace + toleration - 5s, grace + toleration + 30s]
  - name: replacements
    pods: {workload: deployment/web, notOn: victim, generation: replacements, count: 2}
    eventually: Ready
    since: delete-pods
  - name: holds
    pods: {workload: statefulset/db, on: victim}
    stays: Terminating
    until: stop
  - name: holds-for
    node: victim
    stays: {tainted: "node.kubernetes.io/unreachable"}
    for: 90s
  - name: holds-end
    workload: deployment/web
    stays: Degraded
    until: end
  - name: never
    workload: daemonset/x/agent
    never: Available
  - name: restarts
    pods: {workload: deployment/web}
    restarts: changed
    requires: [containers]
    weight: 2.5
  - name: replaced
    pods: {workload: statefulset/db}
    replaced: false
"#;

fn fixed(secs: u64) -> BoundTerm {
    term(1.0, BoundSymbol::Fixed(Duration::from_secs(secs)))
}

fn term(factor: f64, symbol: BoundSymbol) -> BoundTerm {
    BoundTerm { factor, symbol }
}

fn bound(terms: Vec<BoundTerm>) -> Bound {
    Bound { terms }
}

fn wl(kind: WorkloadKind, namespace: &str, name: &str) -> WorkloadRef {
    WorkloadRef {
        kind,
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn pods(workload: WorkloadRef, on: Option<&str>) -> PodSubject {
    PodSubject {
        workload,
        on: on.map(Into::into),
        not_on: None,
        generation: PodGeneration::Existing,
        quantifier: Quantifier::All,
    }
}

fn expectation(name: &str, subject: Subject, check: Check) -> Expectation {
    Expectation {
        name: name.into(),
        subject,
        check,
        since: "stop".into(),
        requires: vec![],
        weight: DEFAULT_WEIGHT,
    }
}

#[test]
fn complete_example_maps_onto_the_exact_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("web.yaml"), "kind: List\n").expect("write manifest");
    let path = dir.path().join("round-trip.yaml");
    let got = parse(YAML, &path).unwrap_or_else(|d| panic!("{d}"));

    let web = wl(WorkloadKind::Deployment, "lab", "web");
    let db = wl(WorkloadKind::StatefulSet, "lab", "db");
    let victim = Subject::Node {
        target: "victim".into(),
    };
    let want = Experiment {
        conformance: false,
        name: "round-trip".into(),
        description: "Every construct once.".into(),
        tags: vec!["kubelet".into()],
        requires: Vec::new(),
        source: path.clone(),
        namespace: "lab".into(),
        targets: vec![
            TargetSpec {
                name: "victim".into(),
                selector: NodeSelector {
                    role: Some(NodeRole::Worker),
                    running_pods_of: Some(db.clone()),
                    ..NodeSelector::default()
                },
                count: Some(1),
            },
            TargetSpec {
                name: "other".into(),
                selector: NodeSelector {
                    names: vec!["node-b".into()],
                    labels: BTreeMap::from([("zone".into(), "b".into())]),
                    exclude_targets: vec!["victim".into()],
                    ..NodeSelector::default()
                },
                count: None,
            },
        ],
        setup: Setup {
            manifests: vec![dir.path().join("web.yaml")],
            wait_timeout: Duration::from_secs(120),
        },
        teardown: Teardown {
            delete_manifests: true,
        },
        steps: vec![
            Step {
                name: "stop".into(),
                at: StepTime::Offset(bound(vec![fixed(0)])),
                action: Action::KubeletStop,
                target: Some("victim".into()),
                timeout: Duration::from_secs(120),
                roll: None,
            },
            Step {
                name: "run other".into(),
                at: StepTime::AfterStep {
                    step: "stop".into(),
                    delay: bound(vec![fixed(90)]),
                },
                action: Action::Run {
                    command: "systemctl stop foo".into(),
                    undo: None,
                },
                target: Some("other".into()),
                timeout: Duration::from_secs(30),
                roll: None,
            },
            Step {
                name: "delete-pods".into(),
                at: StepTime::When {
                    subject: Subject::Pods(PodSubject {
                        quantifier: Quantifier::Any,
                        ..pods(web.clone(), Some("victim"))
                    }),
                    state: StateMatch::Pod(PodStateMatch::Terminating),
                    delay: bound(vec![fixed(0)]),
                    since: Some("run other".into()),
                },
                action: Action::DeletePods {
                    pods: PodSelector {
                        workload: Some(wl(WorkloadKind::StatefulSet, "kube-system", "db")),
                        namespace: "kube-system".into(),
                        labels: BTreeMap::new(),
                        on: Some("victim".into()),
                    },
                    force: true,
                },
                target: None,
                timeout: Duration::from_secs(120),
                roll: None,
            },
            Step {
                name: "delete-pvc".into(),
                at: StepTime::Offset(bound(vec![fixed(300)])),
                action: Action::DeletePvc {
                    namespace: "lab".into(),
                    name: "data-db-0".into(),
                    remove_finalizers: false,
                },
                target: None,
                timeout: Duration::from_secs(120),
                roll: None,
            },
            Step {
                name: "untaint victim".into(),
                at: StepTime::Offset(bound(vec![
                    term(1.0, BoundSymbol::Grace),
                    term(-1.0, BoundSymbol::Fixed(Duration::from_secs(5))),
                ])),
                action: Action::Untaint(TaintSpec {
                    key: "k".into(),
                    value: Some("v".into()),
                    effect: "NoSchedule".into(),
                }),
                target: Some("victim".into()),
                timeout: Duration::from_secs(120),
                roll: None,
            },
        ],
        expectations: vec![
            expectation(
                "unknown",
                victim.clone(),
                Check::Becomes {
                    state: StateMatch::Node(NodeStateMatch::Unknown),
                    window: Window::Within(bound(vec![term(1.0, BoundSymbol::Grace), fixed(10)])),
                },
            ),
            expectation(
                "evicted",
                Subject::Pods(pods(web.clone(), Some("victim"))),
                Check::Becomes {
                    state: StateMatch::Pod(PodStateMatch::Terminating),
                    window: Window::Between(
                        bound(vec![
                            term(1.0, BoundSymbol::Grace),
                            term(1.0, BoundSymbol::Toleration),
                            term(-1.0, BoundSymbol::Fixed(Duration::from_secs(5))),
                        ]),
                        bound(vec![
                            term(1.0, BoundSymbol::Grace),
                            term(1.0, BoundSymbol::Toleration),
                            fixed(30),
                        ]),
                    ),
                },
            ),
            Expectation {
                since: "delete-pods".into(),
                ..expectation(
                    "replacements",
                    Subject::Pods(PodSubject {
                        workload: web.clone(),
                        on: None,
                        not_on: Some("victim".into()),
                        generation: PodGeneration::Replacements,
                        quantifier: Quantifier::AtLeast(2),
                    }),
                    Check::Becomes {
                        state: StateMatch::Pod(PodStateMatch::Ready),
                        window: Window::Eventually,
                    },
                )
            },
            expectation(
                "holds",
                Subject::Pods(pods(db.clone(), Some("victim"))),
                Check::Stays {
                    state: StateMatch::Pod(PodStateMatch::Terminating),
                    until: Until::Step("stop".into()),
                },
            ),
            expectation(
                "holds-for",
                victim,
                Check::Stays {
                    state: StateMatch::Node(NodeStateMatch::Tainted {
                        key: "node.kubernetes.io/unreachable".into(),
                        effect: None,
                    }),
                    until: Until::For(bound(vec![fixed(90)])),
                },
            ),
            expectation(
                "holds-end",
                Subject::Workload(web.clone()),
                Check::Stays {
                    state: StateMatch::Workload(WorkloadStateMatch::Degraded),
                    until: Until::End,
                },
            ),
            expectation(
                "never",
                Subject::Workload(wl(WorkloadKind::DaemonSet, "x", "agent")),
                Check::Never {
                    state: StateMatch::Workload(WorkloadStateMatch::Available),
                    until: Until::End,
                },
            ),
            Expectation {
                requires: vec!["containers".into()],
                weight: 2.5,
                ..expectation(
                    "restarts",
                    Subject::Pods(pods(web.clone(), None)),
                    Check::Restarts { changed: true },
                )
            },
            expectation(
                "replaced",
                Subject::Pods(pods(db, None)),
                Check::Replaced { replaced: false },
            ),
        ],
        observe: ObserveSpec {
            after_last_step: Some(bound(vec![term(2.0, BoundSymbol::Grace)])),
            namespaces: vec!["lab".into()],
            all_namespaces: false,
        },
        safety: SafetySpec {
            max_nodes_down: Some(2),
            allow_control_plane: true,
            allow_quorum_loss: false,
        },
        probes: Vec::new(),
        abort: Default::default(),
    };
    assert_eq!(got, want);
}

#[test]
fn defaults_fill_in_namespace_since_and_timeouts() {
    let yaml = "name: d\ndescription: x\ntargets: {v: {role: worker}}\nsteps:\n  - {do: reboot, at: 1s, target: v}\nexpect:\n  - {name: e, workload: deployment/web, eventually: Available}\n";
    let e = parse(yaml, std::path::Path::new("d.yaml")).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(e.namespace, "default");
    assert_eq!(e.steps[0].name, "reboot v");
    assert_eq!(e.steps[0].timeout, Duration::from_secs(120));
    assert_eq!(e.setup.wait_timeout, Duration::from_secs(120));
    assert_eq!(e.expectations[0].since, "reboot v");
    assert_eq!(
        e.expectations[0].subject,
        Subject::Workload(wl(WorkloadKind::Deployment, "default", "web"))
    );
    assert_eq!(e.safety, SafetySpec::default());
    assert_eq!(e.observe.after_last_step, None);
}

#[test]
fn without_abort_an_experiment_gets_the_two_default_conditions() {
    let yaml = "name: d\ndescription: x\ntargets: {v: {role: worker}}\nsteps:\n  - {do: reboot, at: 1s, target: v}\nexpect:\n  - {name: e, workload: deployment/web, eventually: Available}\n";
    let e = parse(yaml, std::path::Path::new("d.yaml")).unwrap_or_else(|d| panic!("{d}"));
    let names: Vec<&str> = e.abort.conditions.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "a node that is not a target goes NotReady",
            "the API server is unreachable for 60s"
        ]
    );
    assert_eq!(e.abort.conditions[0].kind, AbortKind::NodeNotReady);
    assert_eq!(e.abort.conditions[0].hold, bound(vec![fixed(0)]));
    assert_eq!(e.abort.conditions[1].kind, AbortKind::ApiUnreachable);
    assert_eq!(e.abort, AbortSpec::default());
}

#[test]
fn abort_conditions_map_onto_the_model_with_their_names() {
    let yaml = r#"
name: a
description: x
namespace: lab
targets: {v: {role: worker}}
probes:
  web: {command: "true"}
steps:
  - {do: kubelet-stop, at: 0s, target: v}
expect:
  - {name: e, workload: deployment/web, eventually: Available}
abort:
  nodeNotReady: off
  apiUnreachable: 2 * grace
  podsNotReady:
    - {workload: deployment/web, moreThan: 1, for: 10s}
    - {workload: statefulset/other/db}
  probeDown:
    - {probe: web, for: 30s}
  prometheus:
    - {query: 'sum(up{job="apiserver"})', below: 1}
    - {name: 5xx rate, query: 'sum(rate(x[1m]))', above: 5, for: 20s, every: 5s}
"#;
    let e = parse(yaml, std::path::Path::new("a.yaml")).unwrap_or_else(|d| panic!("{d}"));
    let got: Vec<(&str, &AbortKind, String)> = e
        .abort
        .conditions
        .iter()
        .map(|c| (c.name.as_str(), &c.kind, c.hold.to_string()))
        .collect();
    let want: Vec<(&str, AbortKind, &str)> = vec![
        (
            "the API server is unreachable for 2 * grace",
            AbortKind::ApiUnreachable,
            "2 * grace",
        ),
        (
            "more than 1 pod(s) of deployment/web not Ready for 10s",
            AbortKind::PodsNotReady {
                workload: wl(WorkloadKind::Deployment, "lab", "web"),
                more_than: 1,
            },
            "10s",
        ),
        (
            "more than 0 pod(s) of statefulset/db not Ready",
            AbortKind::PodsNotReady {
                workload: wl(WorkloadKind::StatefulSet, "other", "db"),
                more_than: 0,
            },
            "0s",
        ),
        (
            "probe web is Down for 30s",
            AbortKind::ProbeDown {
                probe: "web".into(),
            },
            "30s",
        ),
        (
            "`sum(up{job=\"apiserver\"})` below 1",
            AbortKind::Query {
                query: "sum(up{job=\"apiserver\"})".into(),
                threshold: Threshold::Below(1.0),
                every: Duration::from_secs(10),
            },
            "0s",
        ),
        (
            "5xx rate (above 5) for 20s",
            AbortKind::Query {
                query: "sum(rate(x[1m]))".into(),
                threshold: Threshold::Above(5.0),
                every: Duration::from_secs(5),
            },
            "20s",
        ),
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((g.0, g.1, g.2.as_str()), (w.0, &w.1, w.2));
    }
}

/// A pod may tolerate for `i64::MAX` seconds and a bound may multiply it by up to 100: the
/// judge inside the run gets an error for that bound, never a panic.
#[test]
fn a_bound_longer_than_a_duration_can_hold_is_an_error_not_a_panic() {
    let huge = bound(vec![term(100.0, BoundSymbol::Toleration)]);
    let ctx = BoundContext {
        grace: Duration::from_secs(40),
        monitor_period: Duration::from_secs(5),
        toleration: Some(Duration::from_secs(i64::MAX.unsigned_abs())),
    };
    let err = huge.resolve(&ctx).unwrap_err();
    assert!(matches!(err, BoundError::OutOfRange), "{err:?}");
    assert!(
        err.to_string().contains("more than a duration can hold"),
        "{err}"
    );
    let fine = bound(vec![term(2.0, BoundSymbol::Grace), fixed(5)]);
    assert_eq!(fine.resolve(&ctx), Ok(Duration::from_secs(85)));
}
