//! The Docker side of `faultline inventory k3d|kind`, and of a primed `docker exec -i`, for
//! real: containers created with
//! exactly k3d's (and kind's) names and labels, read back through the real `docker` CLI,
//! turned into an inventory that `faultline run` parses. k3s itself cannot run here, so
//! each "node" is a busybox shell whose PID 1 command line carries k3s's flags.
//!
//! Needs a Docker engine: `cargo test --test discover_docker -- --ignored`. Without one the
//! tests say so and pass, except under `CI=true`, where a missing engine is a failure.
//! They build a tiny image (`docker import` of a tarball holding the host's static
//! `/bin/busybox`; no registry needed) and remove every container they create.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use faultline::inventory::Inventory;
use faultline::inventory::discover::live::docker_side;
use faultline::inventory::discover::{self, ApiNode, ClusterFacts, Tool};

/// Tagged by what it holds: `timeout` joined for the node deadline of a primed command.
const IMAGE: &str = "faultline-test/busybox:sh-sleep-cat-timeout";
/// The node "process": a shell that stays up and leaves on `docker stop` at once.
const KEEP_RUNNING: &str = "trap 'exit 0' TERM; while :; do sleep 1; done";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether the tests can run; under CI=true a missing prerequisite fails instead.
fn prerequisites() -> bool {
    let docker = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output();
    let problem = match docker {
        Err(e) => Some(format!("docker CLI not runnable: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "docker engine not answering: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) if !Path::new("/bin/busybox").exists() => {
            Some("/bin/busybox missing (apt-get install busybox-static)".to_string())
        }
        Ok(_) => None,
    };
    match problem {
        None => true,
        Some(p) if in_ci() => panic!("CI=true and this test needs Docker: {p}"),
        Some(p) => {
            eprintln!("SKIPPED (not in CI): {p}");
            false
        }
    }
}

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "docker {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Builds the busybox image once per machine (kept: it is reused, and no container).
fn ensure_image() {
    static ONCE: Mutex<()> = Mutex::new(());
    let _held = ONCE.lock().unwrap_or_else(|p| p.into_inner());
    let known = Command::new("docker")
        .args(["image", "inspect", IMAGE])
        .output()
        .unwrap();
    if known.status.success() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(root.path().join("proc")).unwrap();
    std::fs::copy("/bin/busybox", bin.join("busybox")).unwrap();
    for applet in ["sh", "sleep", "cat", "timeout"] {
        std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
    }
    let tar = root.path().join("rootfs.tar");
    let status = Command::new("tar")
        .arg("-C")
        .arg(root.path())
        .arg("-cf")
        .arg(&tar)
        .args(["bin", "proc"])
        .status()
        .unwrap();
    assert!(status.success(), "tar failed");
    docker(&["import", tar.to_str().unwrap(), IMAGE]);
}

/// Containers this test created, removed when it ends however it ends.
struct Created(Vec<String>);

impl Drop for Created {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let mut args = vec!["rm".to_string(), "--force".to_string()];
        args.extend(self.0.iter().cloned());
        let _ = Command::new("docker").args(&args).output();
    }
}

impl Created {
    /// `docker run -d` of a node stand-in named and labelled as given; `argv` follows the
    /// shell script, so it is PID 1's command line exactly as k3s's would be.
    fn run(&mut self, name: &str, labels: &[(&str, &str)], argv: &[&str]) {
        let mut args: Vec<String> = [
            "run",
            "--detach",
            "--name",
            name,
            "--hostname",
            name,
            "--network",
            "none",
            // As kind's and k3d's nodes are: a primed command may enter it directly.
            "--privileged",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (k, v) in labels {
            args.push("--label".into());
            args.push(format!("{k}={v}"));
        }
        args.extend(["--entrypoint", "/bin/sh", IMAGE, "-c", KEEP_RUNNING].map(String::from));
        args.extend(argv.iter().map(|s| s.to_string()));
        self.0.push(name.to_string());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        docker(&refs);
    }
}

fn k3d_labels<'a>(cluster: &'a str, role: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("app", "k3d"),
        ("k3d.cluster", cluster),
        ("k3d.role", role),
        ("k3d.version", "v5.8.3"),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
#[ignore = "needs a Docker engine: cargo test --test discover_docker -- --ignored"]
fn docker_k3d_shaped_containers_become_an_inventory_with_the_k3s_flags_as_timers() {
    if !prerequisites() {
        return;
    }
    ensure_image();
    let cluster = format!("fltest{}", std::process::id());
    let node = |role: &str, i: u32| format!("k3d-{cluster}-{role}-{i}");
    let mut created = Created(Vec::new());
    created.run(
        &node("server", 0),
        &k3d_labels(&cluster, "server"),
        &[
            "/bin/k3s",
            "server",
            "--tls-san",
            "0.0.0.0",
            "--kube-controller-manager-arg=node-monitor-grace-period=20s",
            "--kube-controller-manager-arg",
            "node-monitor-period=2s",
            "--kube-apiserver-arg=default-unreachable-toleration-seconds=30",
        ],
    );
    created.run(
        &node("agent", 0),
        &k3d_labels(&cluster, "agent"),
        &["/bin/k3s", "agent"],
    );
    created.run(
        &node("agent", 1),
        &k3d_labels(&cluster, "agent"),
        &["/bin/k3s", "agent"],
    );
    created.run(
        &format!("k3d-{cluster}-serverlb"),
        &k3d_labels(&cluster, "loadbalancer"),
        &[],
    );
    docker(&["stop", "--time", "5", &node("agent", 1)]);

    let rt = runtime();
    let side = rt
        .block_on(docker_side(Tool::K3d, &cluster))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(side.containers.len(), 4);
    let (place, argv) = side.server_argv.clone().expect("the server's command line");
    assert_eq!(place, format!("/proc/1/cmdline of {}", node("server", 0)));
    assert!(
        argv.contains(&"node-monitor-period=2s".to_string()),
        "{argv:?}"
    );

    // The API side as k3s registers these nodes: named after the containers, servers
    // labelled control-plane.
    let facts = ClusterFacts {
        tool: Tool::K3d,
        cluster: cluster.clone(),
        context: format!("k3d-{cluster}"),
        kubeconfig: None,
        version: "v1.31.5+k3s1".into(),
        nodes: vec![
            ApiNode {
                name: node("server", 0),
                control_plane: true,
                images: Vec::new(),
            },
            ApiNode {
                name: node("agent", 0),
                control_plane: false,
                images: Vec::new(),
            },
            ApiNode {
                name: node("agent", 1),
                control_plane: false,
                images: Vec::new(),
            },
        ],
        containers: side.containers,
        controller_managers: Vec::new(),
        api_servers: Vec::new(),
        server_argv: side.server_argv,
        kubelet_configs: Vec::new(),
    };
    let discovered = discover::build(&facts).unwrap_or_else(|e| panic!("{e}"));
    let text = discover::render(&discovered, "faultline inventory k3d (test)")
        .unwrap_or_else(|e| panic!("{e}"));
    let inv = Inventory::parse(&text, Path::new("generated.yaml"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let names: Vec<&str> = inv.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        [
            node("server", 0).as_str(),
            node("agent", 0).as_str(),
            node("agent", 1).as_str()
        ]
    );
    let t = inv.stated_timers();
    assert_eq!(t.node_monitor_grace_period.map(|d| d.as_secs()), Some(20));
    assert_eq!(t.node_monitor_period.map(|d| d.as_secs()), Some(2));
    assert_eq!(
        t.default_unreachable_toleration.map(|d| d.as_secs()),
        Some(30)
    );
    assert_eq!(
        t.default_not_ready_toleration.map(|d| d.as_secs()),
        Some(300)
    );
    assert!(
        text.contains(&format!(
            "node container {} is exited, not running",
            node("agent", 1)
        )),
        "{text}"
    );
    assert!(text.contains("(loadbalancer) is not a node"), "{text}");
    assert!(text.contains("default of v1.31"), "{text}");

    // With the server stopped there is no command line to read the timers from: refused.
    docker(&["stop", "--time", "5", &node("server", 0)]);
    let side = rt.block_on(docker_side(Tool::K3d, &cluster)).unwrap();
    assert!(side.server_argv.is_none());
    let facts = ClusterFacts {
        server_argv: None,
        containers: side.containers,
        ..facts
    };
    let err = discover::build(&facts).unwrap_err().to_string();
    assert!(err.contains("no k3s server command line"), "{err}");
}

#[test]
#[ignore = "needs a Docker engine: cargo test --test discover_docker -- --ignored"]
fn docker_kind_shaped_containers_are_found_by_their_label() {
    if !prerequisites() {
        return;
    }
    ensure_image();
    let cluster = format!("fltest{}", std::process::id());
    let mut created = Created(Vec::new());
    for (suffix, role) in [("control-plane", "control-plane"), ("worker", "worker")] {
        created.run(
            &format!("{cluster}-{suffix}"),
            &[
                ("io.x-k8s.kind.cluster", cluster.as_str()),
                ("io.x-k8s.kind.role", role),
            ],
            &[],
        );
    }
    let side = runtime()
        .block_on(docker_side(Tool::Kind, &cluster))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut names: Vec<String> = side.containers.iter().map(|c| c.name.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            format!("{cluster}-control-plane"),
            format!("{cluster}-worker")
        ]
    );
    assert!(side.server_argv.is_none(), "kind timers come from the API");
}

#[test]
#[ignore = "needs a Docker engine: cargo test --test discover_docker -- --ignored"]
fn docker_no_such_cluster_is_a_one_line_error_naming_the_label() {
    if !prerequisites() {
        return;
    }
    let err = runtime()
        .block_on(docker_side(Tool::K3d, "fltest-no-such-cluster"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "no Docker container is labelled k3d.cluster=fltest-no-such-cluster: is the k3d \
         cluster `fltest-no-such-cluster` running? (`k3d cluster list` lists them; pass --name)"
    );
    assert!(!err.contains('\n'));
}

/// Lines in `file` inside `container` (0 when there is none).
fn lines_in(container: &str, file: &str) -> usize {
    docker(&[
        "exec",
        container,
        "sh",
        "-c",
        &format!("cat {file} 2>/dev/null || true"),
    ])
    .lines()
    .count()
}

/// Whether a `docker exec -i` client into `container` runs on this machine.
fn client_into(container: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", &format!("docker exec -i {container} ")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// One container named for `suffix` (removed when the returned guard drops) and an
/// inventory reaching it the way the kind and k3d profiles do (`docker exec`, and
/// `docker exec -i` for a command sent ahead).
fn exec_node(suffix: &str) -> (String, Inventory, Created) {
    ensure_image();
    let node = format!("fltest{}-{suffix}", std::process::id());
    let mut created = Created(Vec::new());
    created.run(&node, &[], &[]);
    let text = format!(
        "cluster: {{name: fltest}}\ntransport: exec\n\
         exec: [docker, exec, \"{{node}}\", sh, -c, \"{{command}}\"]\n\
         execWithStdin: [docker, exec, -i, \"{{node}}\", sh, -c, \"{{command}}\"]\n\
         nodes: [{{name: {node}}}]\n"
    );
    let inventory = Inventory::parse(&text, Path::new("t.yaml")).unwrap_or_else(|e| panic!("{e}"));
    (node, inventory, created)
}

/// The engine's execs running in `container` (`docker inspect`'s `ExecIDs`).
fn engine_execs(container: &str) -> usize {
    let ids = docker(&["inspect", "-f", "{{json .ExecIDs}}", container]);
    serde_json::from_str::<Option<Vec<String>>>(ids.trim())
        .unwrap_or_else(|e| panic!("ExecIDs of {container}: {e}: {ids}"))
        .map_or(0, |ids| ids.len())
}

/// Whether an `nsenter` of this process into `container`'s first process waits.
fn entered_into(container: &str) -> bool {
    let pid = docker(&["inspect", "-f", "{{.State.Pid}}", container]);
    Command::new("pgrep")
        .args([
            "-P",
            &std::process::id().to_string(),
            "-f",
            &format!("^[^ ]*nsenter --target={} ", pid.trim()),
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Says which way a command sent ahead to `node` waits, and fails unless it is `via`'s:
/// never a client; with the engine's exec for [`PrimedDockerExec::Engine`], with an
/// `nsenter` of this process and no engine exec for [`PrimedDockerExec::Nearest`] (this
/// test runs as root beside the engine).
fn assert_waits_by(node: &str, via: faultline::execute::PrimedDockerExec) {
    use faultline::execute::PrimedDockerExec;
    assert!(!client_into(node), "a docker client carries the command");
    let (execs, entered) = (engine_execs(node), entered_into(node));
    match via {
        PrimedDockerExec::Engine => assert!(execs == 1 && !entered, "{execs} engine execs"),
        PrimedDockerExec::Nearest => assert!(
            execs == 0 && entered,
            "not entered directly: {execs} engine execs, nsenter waiting: {entered}"
        ),
    }
}

/// A step sent ahead by kind's and k3d's `execWithStdin` (`docker exec -i`) is made
/// through dockerd's API, with no client process (issue 48, item 3): performed when due it
/// runs once, its output and exit code heard whole; released in one pass first, its call
/// hears it out without sending it again; sent ahead and never performed, it runs nothing
/// and leaves nothing waiting in the container.
#[test]
#[ignore = "needs a Docker engine: cargo test --test discover_docker -- --ignored"]
fn docker_a_primed_docker_exec_goes_through_the_engine_and_runs_once_when_performed() {
    primed_docker_exec_runs_once(faultline::execute::PrimedDockerExec::Engine);
}

/// The same step, root beside the engine, enters the container directly (no engine on its
/// path, issue 48, item 3) and keeps every promise the engine's exec keeps; its command
/// runs in the container's cgroups with the environment the engine gives an exec.
#[test]
#[ignore = "needs a Docker engine: cargo test --test discover_docker -- --ignored"]
fn docker_a_primed_docker_exec_enters_its_container_directly_and_runs_once_when_performed() {
    assert_eq!(
        effective_uid(),
        0,
        "entering a container directly needs root, as this suite runs"
    );
    primed_docker_exec_runs_once(faultline::execute::PrimedDockerExec::Nearest);
}

/// This process's effective user id (`/proc/self/status`).
fn effective_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1)?.parse().ok())
        .expect("Uid line")
}

fn primed_docker_exec_runs_once(via: faultline::execute::PrimedDockerExec) {
    use faultline::execute::{Executor, NodeOp};
    use std::time::{Duration, Instant};
    if !prerequisites() {
        return;
    }
    let (node, inventory, _created) = exec_node(&format!("primed-{via:?}").to_lowercase());
    let file = "/ran";
    // `faultline_go` is set only by the gate of a command sent ahead: its output says
    // which command ran. Its cgroups and environment are kept to compare with the
    // container's own and with an engine exec's.
    let op = NodeOp::Run(format!(
        "echo x >> {file}; echo \"word=$faultline_go\"; echo said >&2; \
         cat /proc/self/cgroup > /cgroup-of-step; echo \"env=$PATH $HOSTNAME\""
    ));
    let limit = Duration::from_secs(20);
    let ahead = Duration::from_secs(3);
    runtime().block_on(async {
        let executor = Executor::new(inventory.clone()).with_primed_docker_exec(via);
        let due = Instant::now() + ahead;
        let primed = executor
            .prime(&node, &op, limit, due, ahead)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(primed, "docker exec -i is sent ahead");
        assert_waits_by(&node, via);
        // Looked at a second before it is due: performed later than `PRIMED_LATE` after
        // that (a slow `docker exec` on a busy machine), it would go the ordinary way.
        tokio::time::sleep_until((due - Duration::from_secs(1)).into()).await;
        assert_eq!(lines_in(&node, file), 0, "it ran before it was performed");
        tokio::time::sleep_until(due.into()).await;
        let out = executor
            .perform(&node, &op, limit)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.exit_status, Some(0), "{out:?}");
        assert!(
            out.output.contains("word=go") && out.output.contains("said"),
            "{out:?}"
        );
        assert_eq!(lines_in(&node, file), 1);
        let engines = docker(&["exec", &node, "sh", "-c", "echo \"env=$PATH $HOSTNAME\""]);
        assert!(
            out.output.contains(engines.trim()),
            "not the environment of an engine exec ({}): {out:?}",
            engines.trim()
        );
        let container = docker(&["exec", &node, "cat", "/proc/1/cgroup"]);
        let step = docker(&["exec", &node, "cat", "/cgroup-of-step"]);
        assert_eq!(
            step, container,
            "the step ran outside the container's cgroups"
        );

        let due = Instant::now() + ahead;
        let primed = executor.prime(&node, &op, limit, due, ahead).await;
        assert!(primed.unwrap_or_else(|e| panic!("{e}")));
        assert_waits_by(&node, via);
        tokio::time::sleep_until(due.into()).await;
        executor.release(&[node.as_str()], &op, limit).await;
        let mut ran = false;
        for _ in 0..100 {
            ran = lines_in(&node, file) == 2;
            if ran {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(ran, "the release did not start it before its call");
        let out = executor
            .perform(&node, &op, limit)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            out.output.contains("word=go"),
            "not the released command: {out:?}"
        );
        assert_eq!(
            lines_in(&node, file),
            2,
            "a released command was sent again"
        );

        let executor = Executor::new(inventory).with_primed_docker_exec(via);
        let primed = executor
            .prime(&node, &op, limit, Instant::now() + ahead, ahead)
            .await;
        assert!(primed.unwrap_or_else(|e| panic!("{e}")));
        drop(executor);
        tokio::time::sleep(Duration::from_secs(2)).await;
    });
    assert_eq!(
        lines_in(&node, file),
        2,
        "a command sent ahead ran without being performed"
    );
    let left = docker(&["top", &node, "-o", "pid,args"]);
    assert!(!left.contains("faultline_go"), "a gate still waits: {left}");
}

/// A step sent ahead through dockerd's API that runs past its limit is ended in its
/// container by its node deadline (the engine has no way to end an exec): the call says
/// it timed out and is over, within the limit, the deadline's lead and the time to hear
/// it, and nothing of it is left running in the container.
#[test]
#[ignore = "needs a Docker engine: cargo test --test discover_docker -- --ignored"]
fn docker_a_primed_engine_exec_past_its_limit_is_ended_in_its_container() {
    primed_docker_exec_past_its_limit_is_ended(faultline::execute::PrimedDockerExec::Engine);
}

/// The same, entered directly: its process group (here, in the container's PID
/// namespace) is ended, or its node deadline ends it first.
#[test]
#[ignore = "needs a Docker engine: cargo test --test discover_docker -- --ignored"]
fn docker_a_directly_entered_exec_past_its_limit_is_ended_in_its_container() {
    primed_docker_exec_past_its_limit_is_ended(faultline::execute::PrimedDockerExec::Nearest);
}

fn primed_docker_exec_past_its_limit_is_ended(via: faultline::execute::PrimedDockerExec) {
    use faultline::execute::{ExecError, Executor, NodeOp};
    use std::time::{Duration, Instant};
    if !prerequisites() {
        return;
    }
    let (node, inventory, _created) = exec_node(&format!("overrun-{via:?}").to_lowercase());
    let op = NodeOp::Run("echo started >> /ran; sleep 300".to_string());
    let limit = Duration::from_secs(2);
    let ahead = Duration::from_secs(2);
    let (err, took) = runtime().block_on(async {
        let executor = Executor::new(inventory).with_primed_docker_exec(via);
        let due = Instant::now() + ahead;
        let primed = executor
            .prime(&node, &op, limit, due, ahead)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(primed, "docker exec -i is sent ahead");
        assert_waits_by(&node, via);
        tokio::time::sleep_until(due.into()).await;
        let performed = Instant::now();
        let result = executor.perform(&node, &op, limit).await;
        (
            result.expect_err("a command past its limit"),
            performed.elapsed(),
        )
    });
    assert!(
        matches!(err, ExecError::TimedOutEnded { started: true, .. }),
        "{err}"
    );
    // The node deadline of a primed command counts from when it was sent ahead: the lead,
    // the limit, room for a late start; then TERM ends `sleep` at once.
    assert!(took >= limit, "it was given up before its limit: {took:?}");
    assert!(
        took < Duration::from_secs(20),
        "its end took {took:?} to be heard"
    );
    assert_eq!(lines_in(&node, "/ran"), 1, "it did not run once");
    // (busybox's `timeout` leaves a watcher behind for its KILL window: not the command.)
    let left = docker(&["top", &node, "-o", "pid,args"]);
    let running = left
        .lines()
        .any(|line| line.split_whitespace().skip(1).collect::<Vec<_>>() == ["sleep", "300"]);
    assert!(!running, "the command still runs: {left}");
    eprintln!("{via:?}: heard it end {took:?} after it was performed");
}
