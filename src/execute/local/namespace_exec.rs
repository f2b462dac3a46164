//! A primed `docker exec -i` started with no engine on its path: faultline, root beside
//! the engine, enters the container's namespaces and cgroups itself (`nsenter`), as the
//! engine would for an exec, and holds the command's standard input as a pipe of its own.
//!
//! Through dockerd's API ([`super::engine_exec`]) the word that starts a step still passes
//! dockerd and the container's shim: at 20 nodes and load 3–6 the last command started
//! 12.8–48.3 ms after the word (median 18.6). Written into pipes faultline owns, the same
//! twenty started within 14.7–23.2 ms at load, in the containers' cgroups or not: the
//! engine's processes are what wake late (`docs/performance.md`, `ci/bench-docker-stdin`).
//!
//! The command is made as the engine makes an exec: in every namespace of the container's
//! first process but its user namespace (mount, UTS, IPC, network, PID, cgroup), in its
//! cgroups, with the container's environment (`HOSTNAME`, a default `PATH` when the
//! container sets none), as root in `/`, unconfined. Only when that is certain does it go
//! this way: faultline runs as root, in the container's user namespace, the engine is the
//! one the client would use on its Unix socket and names a running, privileged container
//! (kind's and k3d's nodes are: their execs keep every capability, with no seccomp or
//! AppArmor profile) whose process is in faultline's process view (its cgroups name the
//! container), the container runs as root from `/`, `nsenter` is on `PATH`, and every
//! cgroup of the container's first process can be joined. Else the engine's API carries
//! it, as before.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::query_parameters::InspectContainerOptions;

use super::engine_exec::{SET_UP_LIMIT, engine};

/// The `PATH` the engine gives an exec in a container that sets none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// How a primed `docker exec -i` reaches its container: a deliberate choice for callers
/// that need the engine's own exec (the engine's tests, a user who wants dockerd to see
/// every command).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PrimedDockerExec {
    /// Into the container's namespaces directly when faultline can do it exactly as the
    /// engine would (root beside the engine), else through the engine's API.
    #[default]
    Nearest,
    /// Always through the engine's API (else the client).
    Engine,
}

/// Everything needed to start a command in a container as its engine would, checked.
pub(super) struct Entry {
    /// `nsenter`, by its full path.
    pub(super) program: PathBuf,
    /// `nsenter`'s arguments, the command last.
    pub(super) args: Vec<String>,
    /// The command's whole environment.
    pub(super) env: Vec<(String, String)>,
    /// The container's `cgroup.procs` files, open for writing: the started process
    /// writes itself into each before it runs anything.
    pub(super) cgroups: Vec<File>,
}

impl Entry {
    /// The open cgroup files, as the started process needs them (see [`Entry::cgroups`]).
    pub(super) fn cgroup_fds(&self) -> Vec<i32> {
        self.cgroups.iter().map(|f| f.as_raw_fd()).collect()
    }
}

/// How `command` enters `container` with no engine on its path, when that can be done
/// exactly as the engine would; `None` (said at debug level) otherwise. Asks the engine
/// once, within `within` (at most [`SET_UP_LIMIT`]).
pub(super) async fn entry(container: &str, command: &[String], within: Duration) -> Option<Entry> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let docker = engine()?;
    let asked = docker.inspect_container(container, None::<InspectContainerOptions>);
    let seen = match tokio::time::timeout(within.min(SET_UP_LIMIT), asked).await {
        Ok(Ok(seen)) => seen,
        Ok(Err(e)) => {
            tracing::debug!(container, "the engine did not describe the container: {e}");
            return None;
        }
        Err(_) => return None,
    };
    let id = seen.id.unwrap_or_default();
    let state = seen.state.unwrap_or_default();
    let config = seen.config.unwrap_or_default();
    let pid = state
        .pid
        .filter(|&p| p > 0 && state.running == Some(true))?;
    let as_root = matches!(
        config.user.as_deref().unwrap_or(""),
        "" | "root" | "0" | "0:0" | "root:root"
    );
    let from_root = matches!(config.working_dir.as_deref().unwrap_or(""), "" | "/");
    // An exec in a privileged container keeps every capability, with no seccomp or
    // AppArmor profile: what a process entering its namespaces as root has too. Any other
    // container's exec is confined, so only its engine makes it.
    let privileged = seen.host_config.and_then(|h| h.privileged) == Some(true);
    if id.is_empty() || !as_root || !from_root || !privileged {
        tracing::debug!(
            container,
            "not entered directly: its exec is not an unconfined root shell in /"
        );
        return None;
    }
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let ours = |ns: &str| {
        let theirs = std::fs::read_link(proc.join("ns").join(ns)).ok();
        theirs.is_some() && theirs == std::fs::read_link(format!("/proc/self/ns/{ns}")).ok()
    };
    let membership = std::fs::read_to_string(proc.join("cgroup")).ok()?;
    if !ours("user") || !membership.contains(&id) {
        tracing::debug!(
            container,
            "not entered directly: its process is not in our view"
        );
        return None;
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let cgroups = cgroup_files(&membership, &mounts)?;
    let program = on_path("nsenter")?;
    let mut args = vec![format!("--target={pid}")];
    for ns in ["mount", "uts", "ipc", "net", "pid", "cgroup"] {
        let file = if ns == "mount" { "mnt" } else { ns };
        if proc.join("ns").join(file).exists() {
            args.push(format!("--{ns}"));
        }
    }
    args.push("--".to_string());
    args.extend(command.iter().cloned());
    let env = environment(
        config.env.unwrap_or_default(),
        config.hostname.unwrap_or_default(),
    );
    Some(Entry {
        program,
        args,
        env,
        cgroups,
    })
}

/// The environment the engine gives an exec: the container's, `HOSTNAME`, and a default
/// `PATH` when the container sets none.
fn environment(container: Vec<String>, hostname: String) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |key: &str, value: &str| {
        env.retain(|(k, _)| k != key);
        env.push((key.to_string(), value.to_string()));
    };
    set("PATH", DEFAULT_PATH);
    if !hostname.is_empty() {
        set("HOSTNAME", &hostname);
    }
    for pair in &container {
        if let Some((key, value)) = pair.split_once('=') {
            set(key, value);
        }
    }
    env
}

/// The `cgroup.procs` file of each cgroup in `membership` (a `/proc/PID/cgroup`), found
/// under its hierarchy's mount in `mounts` (a `/proc/self/mountinfo`), open for writing;
/// `None` when one is not mounted whole here or cannot be opened.
fn cgroup_files(membership: &str, mounts: &str) -> Option<Vec<File>> {
    let mut files = Vec::new();
    for line in membership.lines().filter(|l| !l.is_empty()) {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let dir = hierarchy_mount(controllers, mounts)?;
        let procs = dir.join(path.trim_start_matches('/')).join("cgroup.procs");
        match std::fs::OpenOptions::new().write(true).open(&procs) {
            Ok(file) => files.push(file),
            Err(e) => {
                tracing::debug!("not entered directly: {}: {e}", procs.display());
                return None;
            }
        }
    }
    (!files.is_empty()).then_some(files)
}

/// Where the cgroup hierarchy of `controllers` (as `/proc/PID/cgroup` names them: empty
/// for cgroup v2, `cpu,cpuacct` or `name=systemd` for v1) is mounted from its root.
fn hierarchy_mount(controllers: &str, mounts: &str) -> Option<PathBuf> {
    let wanted: Vec<&str> = controllers.split(',').filter(|c| !c.is_empty()).collect();
    mounts.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let fields: Vec<&str> = before.split(' ').collect();
        let (root, mount_point) = (fields.get(3)?, fields.get(4)?);
        let mut after = after.split(' ');
        let (fs_type, _source, options) = (after.next()?, after.next()?, after.next()?);
        let options: Vec<&str> = options.split(',').collect();
        let matches = match fs_type {
            "cgroup2" => wanted.is_empty(),
            "cgroup" => !wanted.is_empty() && wanted.iter().all(|c| options.contains(c)),
            _ => false,
        };
        (matches && *root == "/").then(|| PathBuf::from(unescape_mount(mount_point)))
    })
}

/// A mount point as `mountinfo` writes it (a space, tab, newline or backslash as `\ooo`).
fn unescape_mount(field: &str) -> String {
    let mut out = String::new();
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest
            .get(at + 1..at + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `program`'s full path on `PATH`, when it is there and executable.
fn on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| {
            Path::new(p)
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
35 25 0:30 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu
36 25 0:31 / /sys/fs/cgroup/cpuacct rw,nosuid - cgroup cgroup rw,cpuacct
37 25 0:32 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd
38 25 0:33 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
39 25 0:34 /docker /sys/fs/cgroup/memory\\040inner rw - cgroup cgroup rw,memory
40 25 0:35 / /sys/fs/cgroup/net_cls,net_prio rw - cgroup cgroup rw,net_cls,net_prio
";

    #[test]
    fn each_hierarchy_is_found_by_its_controllers_at_its_whole_mount() {
        let at = |c: &str| hierarchy_mount(c, HYBRID).map(|p| p.display().to_string());
        assert_eq!(at("cpu").as_deref(), Some("/sys/fs/cgroup/cpu"));
        assert_eq!(
            at("name=systemd").as_deref(),
            Some("/sys/fs/cgroup/systemd")
        );
        assert_eq!(at("").as_deref(), Some("/sys/fs/cgroup/unified"));
        assert_eq!(
            at("net_cls,net_prio").as_deref(),
            Some("/sys/fs/cgroup/net_cls,net_prio")
        );
        // Mounted from a subtree only: the container's path cannot be placed under it.
        assert_eq!(at("memory"), None);
        assert_eq!(at("pids"), None);
    }

    #[test]
    fn a_mount_point_is_read_back_from_its_escapes() {
        assert_eq!(unescape_mount("/a\\040b\\011c"), "/a b\tc");
        assert_eq!(unescape_mount("/plain"), "/plain");
        assert_eq!(unescape_mount("/odd\\x"), "/odd\\x");
    }

    #[test]
    fn the_environment_is_the_containers_over_the_engines_defaults() {
        let env = environment(
            vec![
                "container=docker".into(),
                "PATH=/opt/bin".into(),
                "bad".into(),
            ],
            "kind-worker".into(),
        );
        let get = |k: &str| {
            env.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("PATH"), Some("/opt/bin"));
        assert_eq!(get("HOSTNAME"), Some("kind-worker"));
        assert_eq!(get("container"), Some("docker"));
        assert_eq!(env.len(), 3);
        let bare = environment(Vec::new(), String::new());
        assert_eq!(bare, vec![("PATH".to_string(), DEFAULT_PATH.to_string())]);
    }

    #[test]
    fn a_container_whose_cgroup_is_not_mounted_here_is_not_entered() {
        let membership = "4:memory:/docker/abc\n";
        assert!(cgroup_files(membership, HYBRID).is_none());
    }
}
