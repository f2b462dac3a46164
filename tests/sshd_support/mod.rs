//! A REAL sshd on 127.0.0.1 for one test: random port, fresh host and client keys
//! (`client_key`, and `other_host_key`, which no one accepts), known_hosts files with the
//! right key (`known_hosts`), a wrong one (`known_hosts_wrong`) and another host only
//! (`known_hosts_other`); killed by its own pid when the guard drops.
//!
//! The password and sudo tests run their sshd in a private mount namespace whose
//! /etc/passwd, /etc/shadow, /etc/group and /etc/sudoers are the test's own (two test users,
//! one with passwordless sudo, one whose sudo asks for a password), so nothing on the machine
//! is changed; they need root, `unshare` and `sudo`. What a test needs and cannot get (sshd,
//! root, sudo) makes it print SKIP and return, except under `CI=true`, where it fails.
#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SSHD: &str = "/usr/sbin/sshd";

/// A running sshd; killed (by its own pid) on drop.
pub struct Sshd {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its keys, config, log and known_hosts files.
    pub dir: tempfile::TempDir,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sshd {
    /// The directory holding its keys and known_hosts files.
    pub fn d(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
    /// `[127.0.0.1]:port key` for its host key (or another key of its directory).
    pub fn known_line(&self, key: &str) -> String {
        format!(
            "[127.0.0.1]:{} {}",
            self.port,
            public_key(&self.d().join(key)).trim()
        )
    }
    /// Lets the holder of `key` (a private key file) log in too.
    pub fn authorize(&self, key: &Path) {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(self.d().join("authorized_keys"))
            .expect("authorized_keys");
        writeln!(f, "{}", public_key(key).trim()).expect("w");
    }
}

/// Says why a test cannot run: under `CI=true` that is a failure, elsewhere a SKIP.
pub fn unavailable(why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and this test cannot run: {why}");
    }
    println!("SKIP: {why}");
}

pub fn keygen(path: &Path) {
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

pub fn public_key(path: &Path) -> String {
    let mut p = path.as_os_str().to_owned();
    p.push(".pub");
    fs::read_to_string(PathBuf::from(p)).expect("pub key")
}

/// Whether `path` exists, installing Debian package `package` for it if it does not.
pub fn installed(path: &str, package: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    let _ = Command::new("sh")
        .args([
            "-c",
            &format!("DEBIAN_FRONTEND=noninteractive apt-get install -y {package} >/dev/null 2>&1"),
        ])
        .status();
    if Path::new(path).exists() {
        return true;
    }
    unavailable(&format!(
        "{path} is missing and `apt-get install -y {package}` failed"
    ));
    false
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// How a test's sshd differs from the plain one.
#[derive(Default)]
pub struct Options {
    /// More sshd_config lines.
    pub extra: String,
    /// Run it in a private mount namespace with the test users (see the module comment).
    pub users: bool,
    /// Put a `sudo` that always wants a password first on the sessions' `PATH` (a node
    /// whose sudo has no NOPASSWD rule, whatever the machine running the tests has).
    pub sudo_wants_password: bool,
}

/// The password of the test users: the value of `HOME`, a variable every test run has, so
/// that `passwordEnv: HOME` / `sudoPasswordEnv: HOME` give it without the test changing its
/// own environment (which would race with the other tests' threads).
pub fn test_password() -> String {
    std::env::var("HOME").expect("HOME is set")
}

/// Test users: (name, sudo rule).
pub const USERS: &[(&str, &str)] = &[("fltest-nopw", "NOPASSWD: ALL"), ("fltest-pw", "ALL")];

pub fn start_sshd() -> Option<Sshd> {
    start_sshd_with(Options::default())
}

pub fn start_sshd_with(opts: Options) -> Option<Sshd> {
    if !installed(SSHD, "openssh-server") {
        return None;
    }
    let mut dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_path_buf();
    let d = d.as_path();
    keygen(&d.join("host_key"));
    keygen(&d.join("client_key"));
    keygen(&d.join("other_host_key"));
    fs::write(d.join("authorized_keys"), public_key(&d.join("client_key"))).expect("w");
    let mut extra = opts.extra.clone();
    if opts.sudo_wants_password {
        fs::create_dir(d.join("bin")).expect("bin");
        let sudo = d.join("bin/sudo");
        fs::write(
            &sudo,
            "#!/bin/sh\necho 'sudo: a terminal is required to read the password; either use the -S \
             option to read from standard input or configure an askpass helper' >&2\n\
             echo 'sudo: a password is required' >&2\nexit 1\n",
        )
        .expect("w");
        fs::set_permissions(&sudo, fs::Permissions::from_mode(0o755)).expect("chmod");
        extra.push_str(&format!(
            "SetEnv PATH={}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n",
            d.display()
        ));
    }
    // The port is free when asked for, but another process (a test running beside this
    // one) may take it before sshd binds it: then sshd exits, and this tries another port
    // rather than trusting whatever answers there.
    let mut attempt = 0;
    let sshd = loop {
        attempt += 1;
        let port = free_port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile none\n\
             AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\nUsePAM no\n\
             StrictModes no\nPasswordAuthentication {pw}\nKbdInteractiveAuthentication no\n{extra}\n",
            d = d.display(),
            pw = if opts.users { "yes" } else { "no" },
            extra = extra,
        );
        fs::write(d.join("sshd_config"), config).expect("w");
        let mut cmd = if opts.users {
            if !users_possible() {
                return None;
            }
            namespace_with_users(d)
        } else {
            let _ = fs::create_dir_all("/run/sshd");
            Command::new(SSHD)
        };
        let child = cmd
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(d.join("sshd.log")).expect("log"))
            .spawn()
            .expect("sshd starts");
        let mut sshd = Sshd { child, port, dir };
        let listening = format!("Server listening on 127.0.0.1 port {port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = fs::read_to_string(d.join("sshd.log")).unwrap_or_default();
            if log.contains(&listening) && TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            if sshd.child.try_wait().expect("sshd status").is_some() {
                assert!(attempt < 5, "sshd exited 5 times; last log:\n{log}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not listen on {port}: {log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        if sshd.child.try_wait().expect("sshd status").is_none() {
            break sshd;
        }
        // Keep the directory (keys, authorized_keys) for the next attempt.
        dir = std::mem::replace(&mut sshd.dir, tempfile::tempdir().expect("tempdir"));
    };
    let port = sshd.port;
    // known_hosts with the real key, one with a wrong key, one without the host.
    fs::write(d.join("known_hosts"), sshd.known_line("host_key") + "\n").expect("w");
    fs::write(
        d.join("known_hosts_wrong"),
        sshd.known_line("other_host_key") + "\n",
    )
    .expect("w");
    let mut f = fs::File::create(d.join("known_hosts_other")).expect("w");
    writeln!(
        f,
        "[192.0.2.1]:{port} {}",
        public_key(&d.join("host_key")).trim()
    )
    .expect("w");
    Some(sshd)
}

/// Root, `unshare` and `sudo`: what the password and sudo tests need.
pub fn users_possible() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        unavailable("the password and sudo tests need root (a private mount namespace)");
        return false;
    }
    installed("/usr/bin/unshare", "util-linux")
        && installed("/usr/bin/sudo", "sudo")
        && installed("/usr/bin/openssl", "openssl")
}

/// A command that starts sshd (its arguments follow) in a private mount namespace where
/// /etc/passwd, /etc/shadow, /etc/group and /etc/sudoers are files of `d` that add the test
/// users, and /run is a fresh tmpfs (sshd's privilege separation directory, sudo's
/// timestamps): nothing outside the namespace sees any of it.
pub fn namespace_with_users(d: &Path) -> Command {
    let hash = {
        let mut child = Command::new("openssl")
            .args(["passwd", "-6", "-stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("openssl");
        writeln!(child.stdin.take().expect("stdin"), "{}", test_password()).expect("w");
        let out = child.wait_with_output().expect("openssl");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert!(hash.starts_with("$6$"), "openssl passwd gave {hash}");
    let host_passwd = fs::read_to_string("/etc/passwd").expect("passwd");
    let host_group = fs::read_to_string("/etc/group").expect("group");
    let taken = |uid: u32| {
        host_passwd
            .lines()
            .chain(host_group.lines())
            .any(|l| l.split(':').nth(2) == Some(&uid.to_string()))
    };
    let mut uid = 42420;
    let (mut passwd, mut shadow, mut group) = (
        host_passwd.clone(),
        String::from("root:*:19000:0:99999:7:::\n"),
        host_group.clone(),
    );
    let mut sudoers = String::from(
        "Defaults env_reset\nDefaults lecture=never\nDefaults !fqdn\nroot ALL=(ALL:ALL) ALL\n",
    );
    for (name, rule) in USERS {
        while taken(uid) {
            uid += 1;
        }
        let home = d.join("home").join(name);
        fs::create_dir_all(&home).expect("home");
        std::os::unix::fs::chown(&home, Some(uid), Some(uid)).expect("chown home");
        passwd.push_str(&format!(
            "{name}:x:{uid}:{uid}::{}:/bin/sh\n",
            home.display()
        ));
        shadow.push_str(&format!("{name}:{hash}:19000:0:99999:7:::\n"));
        group.push_str(&format!("{name}:x:{uid}:\n"));
        sudoers.push_str(&format!("{name} ALL=(ALL) {rule}\n"));
        uid += 1;
    }
    // The users' homes are inside: let them through (the keys in it stay 0600).
    fs::set_permissions(d, fs::Permissions::from_mode(0o711)).expect("chmod");
    fs::set_permissions(d.join("home"), fs::Permissions::from_mode(0o755)).expect("chmod");
    for (file, text, mode) in [
        ("passwd", &passwd, 0o644),
        ("shadow", &shadow, 0o600),
        ("group", &group, 0o644),
        ("sudoers", &sudoers, 0o440),
    ] {
        fs::write(d.join(file), text).expect("w");
        fs::set_permissions(d.join(file), fs::Permissions::from_mode(mode)).expect("chmod");
    }
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -t tmpfs -o mode=755 tmpfs /run && mkdir -p /run/sshd && \
             for f in passwd shadow group sudoers; do mount --bind \"$0/$f\" /etc/$f || exit 1; done && \
             exec \"$@\"",
        )
        .arg(d)
        .arg(SSHD);
    cmd
}

pub fn user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
