//! The SSH transport against a REAL sshd started on 127.0.0.1 for this test.
//!
//! Each test gets its own sshd (random port, fresh host and client keys, temp known_hosts),
//! killed by pid when the guard drops. If sshd is missing and cannot be installed the tests
//! print why and return.

use std::fs;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use faultline::execute::{ExecError, Executor, NodeOp};
use faultline::inventory::Inventory;

const SSHD: &str = "/usr/sbin/sshd";

/// A running sshd; killed (by its own pid) on drop.
struct Sshd {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "faultline-test",
            "-f",
        ])
        .arg(path)
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success(), "ssh-keygen failed");
}

fn public_key(path: &Path) -> String {
    let mut p = path.as_os_str().to_owned();
    p.push(".pub");
    fs::read_to_string(PathBuf::from(p)).expect("pub key")
}

fn sshd_available() -> bool {
    if Path::new(SSHD).exists() {
        return true;
    }
    let installed = Command::new("sh")
        .args(["-c", "apt-get install -y openssh-server >/dev/null 2>&1"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !installed || !Path::new(SSHD).exists() {
        println!("SKIP: {SSHD} is missing and `apt-get install -y openssh-server` failed");
        return false;
    }
    true
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn start_sshd() -> Option<Sshd> {
    if !sshd_available() {
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_path_buf();
    let d = d.as_path();
    keygen(&d.join("host_key"));
    keygen(&d.join("client_key"));
    keygen(&d.join("other_host_key"));
    fs::write(d.join("authorized_keys"), public_key(&d.join("client_key"))).expect("w");
    let port = free_port();
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
         AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\nUsePAM no\n\
         StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n",
        d = d.display()
    );
    fs::write(d.join("sshd_config"), config).expect("w");
    let _ = fs::create_dir_all("/run/sshd");
    let child = Command::new(SSHD)
        .args(["-D", "-e", "-f"])
        .arg(d.join("sshd_config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sshd starts");
    let sshd = Sshd { child, port, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "sshd did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // known_hosts with the real key, one with a wrong key, one without the host.
    let line = |key: &str| format!("[127.0.0.1]:{port} {}", public_key(&d.join(key)));
    fs::write(d.join("known_hosts"), line("host_key")).expect("w");
    fs::write(d.join("known_hosts_wrong"), line("other_host_key")).expect("w");
    let mut f = fs::File::create(d.join("known_hosts_other")).expect("w");
    writeln!(
        f,
        "[192.0.2.1]:{port} {}",
        public_key(&d.join("host_key")).trim()
    )
    .expect("w");
    Some(sshd)
}

fn user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn executor(sshd: &Sshd, known_hosts: &str, commands: &str) -> Executor {
    let d = sshd.dir.path().display();
    let text = format!(
        "cluster: {{name: ssh-test}}\nssh:\n  user: {user}\n  port: {port}\n  \
         identityFile: {d}/client_key\n  knownHosts: {d}/{known_hosts}\n  connectTimeout: 2s\n\
         commands:\n{commands}\nnodes:\n  - name: local\n    address: 127.0.0.1\n",
        user = user(),
        port = sshd.port,
    );
    let inv = Inventory::parse(&text, Path::new("ssh-test.yaml")).unwrap_or_else(|e| panic!("{e}"));
    Executor::new(inv)
}

const T: Duration = Duration::from_secs(10);

#[tokio::test]
async fn command_runs_and_returns_output_and_exit_code() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(
        &sshd,
        "known_hosts",
        "  kubeletStop: echo out; echo err >&2\n  kubeletStatus: echo inactive; exit 3\n  partition: exit 5",
    );
    let out = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect("runs");
    assert_eq!(out.exit_status, Some(0));
    assert!(
        out.output.contains("out\n") && out.output.contains("err\n"),
        "{}",
        out.output
    );
    let out = ex
        .perform("local", &NodeOp::KubeletStatus, T)
        .await
        .expect("answer");
    assert_eq!(out.exit_status, Some(3));
    let err = ex
        .perform("local", &NodeOp::Partition, T)
        .await
        .expect_err("exit 5");
    assert!(
        matches!(
            err,
            ExecError::CommandFailed {
                exit_status: Some(5),
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn wrong_host_key_is_refused_with_a_clear_error() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(&sshd, "known_hosts_wrong", "  kubeletStop: echo never");
    let err = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("mismatch");
    let text = err.to_string();
    assert!(text.contains("HOST KEY MISMATCH"), "{text}");
    assert!(text.contains("known_hosts_wrong"), "{text}");
    assert!(text.contains("ssh-keyscan -p"), "{text}");
}

#[tokio::test]
async fn unknown_host_is_refused() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(&sshd, "known_hosts_other", "  kubeletStop: echo never");
    let err = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("unknown");
    let text = err.to_string();
    assert!(text.contains("is not in"), "{text}");
    assert!(text.contains("known_hosts_other"), "{text}");
}

#[tokio::test]
async fn command_timeout_is_enforced_by_the_outer_timeout() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(&sshd, "known_hosts", "  heal: sleep 30");
    let start = Instant::now();
    let err = ex
        .perform("local", &NodeOp::Heal, Duration::from_secs(2))
        .await
        .expect_err("times out");
    let took = start.elapsed();
    assert!(matches!(err, ExecError::Timeout { .. }), "{err}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[tokio::test]
async fn dropped_connection_during_reboot_is_success() {
    let Some(sshd) = start_sshd() else { return };
    // Killing the session's sshd process is what a reboot looks like from here.
    let ex = executor(&sshd, "known_hosts", "  reboot: kill -KILL $PPID; sleep 5");
    let out = ex
        .perform("local", &NodeOp::Reboot, T)
        .await
        .expect("dropped is ok");
    assert!(out.dropped, "{out:?}");
    // The same drop for an ordinary operation is an error.
    let ex = executor(
        &sshd,
        "known_hosts",
        "  kubeletStop: kill -KILL $PPID; sleep 5",
    );
    let err = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("drop");
    assert!(matches!(err, ExecError::Dropped { .. }), "{err}");
}

#[tokio::test]
async fn reboot_that_hangs_after_sending_counts_as_dropped() {
    let Some(sshd) = start_sshd() else { return };
    let ex = executor(&sshd, "known_hosts", "  reboot: sleep 30");
    let out = ex
        .perform("local", &NodeOp::Reboot, Duration::from_secs(2))
        .await
        .expect("timeout after send is the expected outcome");
    assert!(out.dropped);
}

#[tokio::test]
async fn self_restore_over_ssh_arms_and_disarms() {
    let Some(sshd) = start_sshd() else { return };
    let flag = sshd.dir.path().join("restored");
    let ex = executor(
        &sshd,
        "known_hosts",
        &format!("  kubeletStart: touch {}", flag.display()),
    );
    let armed = ex
        .arm_restore(
            "local",
            &NodeOp::KubeletStart,
            Duration::from_secs(1),
            "ssh-tok",
        )
        .await
        .expect("armed");
    assert!(armed.pid.is_some());
    let deadline = Instant::now() + Duration::from_secs(6);
    while !flag.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(flag.exists(), "restore ran on the node without faultline");
    fs::remove_file(&flag).expect("rm");
    let armed = ex
        .arm_restore(
            "local",
            &NodeOp::KubeletStart,
            Duration::from_secs(2),
            "ssh-tok2",
        )
        .await
        .expect("armed");
    assert!(ex.disarm("local", &armed).await.expect("disarm"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!flag.exists(), "disarmed restore did not run");
}

#[tokio::test]
async fn failed_authentication_names_methods_but_never_the_password() {
    let Some(sshd) = start_sshd() else { return };
    let d = sshd.dir.path().display();
    // PATH stands in for a password variable: its value is known and must not leak.
    let text = format!(
        "cluster: {{name: ssh-test}}\nssh:\n  user: {user}\n  port: {port}\n  \
         identityFile: {d}/other_host_key\n  knownHosts: {d}/known_hosts\n  passwordEnv: PATH\n\
         commands: {{kubeletStop: echo never}}\nnodes: [{{name: local, address: 127.0.0.1}}]\n",
        user = user(),
        port = sshd.port,
    );
    let ex = Executor::new(Inventory::parse(&text, Path::new("t.yaml")).expect("valid"));
    let err = ex
        .perform("local", &NodeOp::KubeletStop, T)
        .await
        .expect_err("auth");
    let text = err.to_string();
    assert!(text.contains("authentication"), "{text}");
    assert!(text.contains("password from $PATH"), "{text}");
    let secret = std::env::var("PATH").unwrap_or_default();
    assert!(!secret.is_empty() && !text.contains(&secret), "{text}");
    assert!(!format!("{err:?}").contains(&secret));
}
