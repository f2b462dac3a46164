//! Where a primed `docker exec` command's start goes late: one line of standard input sent
//! at once to a waiting shell in each of many containers, by four paths, and when each
//! shell started (issue 48, item 3). `ci/bench-docker-stdin` starts the containers and
//! calls this.
//!
//! - `cli`: what faultline did before `e357402` (`execWithStdin` of the kind and k3d
//!   profiles), and still does with a Docker context chosen: one `docker exec -i` client
//!   per container, the line written to each client's standard
//!   input. The line goes client → dockerd → the container's shim → the shell.
//! - `api`: the same exec made through dockerd's API on its Unix socket, no client process:
//!   an exec created, started with its stream hijacked, the line written to that stream.
//!   The line goes dockerd → shim → shell. What faultline does now.
//! - `api-pipe`: the exec made through the API as in `api`, the line written straight into
//!   the waiting shell's standard input pipe (`/proc/PID/fd/0`, the process the engine
//!   names), which needs root beside the engine. The line wakes the shell with no engine
//!   process in between; the stream still carries the stamp. Tried for faultline and not
//!   kept: at load 3 it started the last shell later than `api` did
//!   (`docs/performance.md`, 2026-11-30 `2f97b79`).
//! - `direct`: no engine on the line's path at all: `nsenter` into each container's
//!   namespaces with the shell's standard input a pipe from here. What is left is starting
//!   the command itself on every container (the floor of this machine).
//! - `direct-cgroup`: as `direct`, each `nsenter` first moved into its container's
//!   cgroups (every hierarchy), as `docker exec` places an exec: whether the containers'
//!   cgroups, not the engine, make the shells late at load (they do not: `7f9c6a1`).
//!
//! Each shell runs `IFS= read -r x; date +%s.%N`: the stamp is the instant its command
//! started. The containers share the host's clock. Printed, one `figure` line each, per
//! run: `stdin_<path>_first_ms` and `stdin_<path>_last_ms`, the first and last command
//! start after the line was written to the first container.
//!
//! `docker_stdin_paths PATH PREFIX COUNT RUNS` (containers `PREFIX1` … `PREFIXCOUNT`,
//! running; root for `api-pipe`, `direct` and `direct-cgroup`). The socket is `DOCKER_HOST` when it is `unix://…`, else
//! `/var/run/docker.sock`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The waiting command: its start is stamped on the container's clock (the host's).
const WAITING: &str = "IFS= read -r x; date +%s.%N";

/// How long the commands wait before the line is sent: every exec is set up by then.
const PRIMED_FOR: Duration = Duration::from_secs(3);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, prefix, count, runs] = args.as_slice() else {
        eprintln!(
            "usage: docker_stdin_paths cli|api|api-pipe|direct|direct-cgroup PREFIX COUNT RUNS"
        );
        return ExitCode::from(2);
    };
    let (Ok(count), Ok(runs)) = (count.parse::<usize>(), runs.parse::<usize>()) else {
        eprintln!("docker_stdin_paths: COUNT and RUNS are numbers");
        return ExitCode::from(2);
    };
    let names: Vec<String> = (1..=count).map(|i| format!("{prefix}{i}")).collect();
    for _ in 0..runs {
        let starts = match path.as_str() {
            "cli" => through_clients(&names),
            "api" => through_api(&names),
            "api-pipe" => through_api_pipes(&names),
            "direct" => direct(&names, false),
            "direct-cgroup" => direct(&names, true),
            other => Err(format!(
                "no path `{other}` (cli, api, api-pipe, direct or direct-cgroup)"
            )),
        };
        match starts {
            Ok((sent, starts)) => print_run(path, sent, &starts),
            Err(e) => {
                eprintln!("docker_stdin_paths: {path}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Prints one run's figures: first and last start after `sent`, and every start.
fn print_run(path: &str, sent: f64, starts: &[f64]) {
    let mut after: Vec<f64> = starts.iter().map(|s| (s - sent) * 1000.0).collect();
    after.sort_by(f64::total_cmp);
    let (Some(first), Some(last)) = (after.first(), after.last()) else {
        return;
    };
    println!("figure stdin_{path}_first_ms {first:.1} ms");
    println!("figure stdin_{path}_last_ms {last:.1} ms");
    let all: Vec<String> = after.iter().map(|a| format!("{a:.0}")).collect();
    eprintln!("{path}: starts after the line (ms): {}", all.join(" "));
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// Children that wait for the line on their standard input; returns when the line was
/// sent to the first and every stamp.
fn release_children(mut children: Vec<Child>) -> Result<(f64, Vec<f64>), String> {
    std::thread::sleep(PRIMED_FOR);
    let sent = now();
    for child in &mut children {
        let input = child.stdin.as_mut().ok_or("no standard input")?;
        input.write_all(b"go\n").map_err(|e| e.to_string())?;
        input.flush().map_err(|e| e.to_string())?;
    }
    let mut starts = Vec::new();
    for child in children {
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        starts.push(stamp(&out.stdout)?);
    }
    Ok((sent, starts))
}

fn stamp(out: &[u8]) -> Result<f64, String> {
    let text = String::from_utf8_lossy(out);
    text.trim()
        .parse::<f64>()
        .map_err(|_| format!("not a stamp: {text:?}"))
}

fn waiting_child(program: &str, args: &[&str]) -> Result<Child, String> {
    Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{program}: {e}"))
}

fn through_clients(names: &[String]) -> Result<(f64, Vec<f64>), String> {
    let children = names
        .iter()
        .map(|n| waiting_child("docker", &["exec", "-i", n, "sh", "-c", WAITING]))
        .collect::<Result<Vec<_>, _>>()?;
    release_children(children)
}

fn direct(names: &[String], in_container_cgroups: bool) -> Result<(f64, Vec<f64>), String> {
    let mut children = Vec::new();
    for name in names {
        let out = Command::new("docker")
            .args(["inspect", "-f", "{{.State.Pid}}", name])
            .output()
            .map_err(|e| format!("docker inspect: {e}"))?;
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let args = ["-t", &pid, "-m", "-u", "-i", "-p", "sh", "-c", WAITING];
        if in_container_cgroups {
            let join = cgroup_join(&pid)?;
            let script = format!("{join} exec nsenter \"$@\"");
            let mut wrapped = vec!["-c", script.as_str(), "sh"];
            wrapped.extend(args);
            children.push(waiting_child("sh", &wrapped)?);
        } else {
            children.push(waiting_child("nsenter", &args)?);
        }
    }
    release_children(children)
}

/// Shell words that move the shell running them into every cgroup v1 hierarchy (and the
/// v2 one) the container's process `pid` is in, as `docker exec` places its processes.
fn cgroup_join(pid: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("/proc/{pid}/cgroup: {e}"))?;
    let mut words = String::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controllers), Some(path)) = (controllers, path) else {
            continue;
        };
        let dir = match controllers {
            "" => "/sys/fs/cgroup/unified".to_string(),
            c if c.starts_with("name=") => format!("/sys/fs/cgroup/{}", &c[5..]),
            c => format!("/sys/fs/cgroup/{c}"),
        };
        if path != "/" {
            words.push_str(&format!("echo $$ > {dir}{path}/cgroup.procs || exit 9;"));
        }
    }
    Ok(words)
}

fn socket() -> String {
    match std::env::var("DOCKER_HOST") {
        Ok(host) if host.starts_with("unix://") => host["unix://".len()..].to_string(),
        _ => "/var/run/docker.sock".to_string(),
    }
}

/// Sends one HTTP/1.1 request on a new connection to dockerd; returns the connection, the
/// status line and whatever was read past the headers.
fn request(
    method: &str,
    path: &str,
    body: &str,
    upgrade: bool,
) -> Result<(UnixStream, String, Vec<u8>), String> {
    let mut conn = UnixStream::connect(socket()).map_err(|e| format!("{}: {e}", socket()))?;
    let upgrade = if upgrade {
        "Connection: Upgrade\r\nUpgrade: tcp\r\n"
    } else {
        "Connection: close\r\n"
    };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{upgrade}\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())
        .and_then(|()| conn.write_all(body.as_bytes()))
        .map_err(|e| e.to_string())?;
    let mut read = Vec::new();
    let mut buf = [0u8; 8192];
    let end = loop {
        if let Some(at) = read.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = conn.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("dockerd closed the connection".into());
        }
        read.extend_from_slice(&buf[..n]);
    };
    let status = String::from_utf8_lossy(&read[..end])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    Ok((conn, status, read[end + 4..].to_vec()))
}

/// One exec waiting in `name`, its stream hijacked; returns the stream and what was read
/// past the headers.
fn started_exec(name: &str) -> Result<(UnixStream, Vec<u8>), String> {
    started_exec_and_id(name).map(|(conn, read, _)| (conn, read))
}

/// [`started_exec`], and the exec's id.
fn started_exec_and_id(name: &str) -> Result<(UnixStream, Vec<u8>, String), String> {
    let create = serde_json::json!({
        "AttachStdin": true, "AttachStdout": true, "AttachStderr": true,
        "Cmd": ["sh", "-c", WAITING],
    });
    let (mut conn, status, mut body) = request(
        "POST",
        &format!("/containers/{name}/exec"),
        &create.to_string(),
        false,
    )?;
    if !status.contains(" 201 ") {
        return Err(format!("exec create in {name}: {status}"));
    }
    conn.read_to_end(&mut body).map_err(|e| e.to_string())?;
    let created: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("exec create in {name}: {e}"))?;
    let id = created["Id"].as_str().ok_or("exec create: no Id")?;
    let start = serde_json::json!({"Detach": false, "Tty": false});
    let (conn, status, rest) = request(
        "POST",
        &format!("/exec/{id}/start"),
        &start.to_string(),
        true,
    )?;
    if !(status.contains(" 101 ") || status.contains(" 200 ")) {
        return Err(format!("exec start in {name}: {status}"));
    }
    Ok((conn, rest, id.to_string()))
}

/// The host process id of exec `id` once the engine names it.
fn exec_pid(id: &str) -> Result<u32, String> {
    for _ in 0..200 {
        let (mut conn, status, mut body) = request("GET", &format!("/exec/{id}/json"), "", false)?;
        if !status.contains(" 200 ") {
            return Err(format!("exec inspect {id}: {status}"));
        }
        conn.read_to_end(&mut body).map_err(|e| e.to_string())?;
        let seen: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| format!("exec inspect {id}: {e}"))?;
        if let Some(pid) = seen["Pid"].as_u64().filter(|p| *p > 0) {
            return u32::try_from(pid).map_err(|e| e.to_string());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Err(format!("the engine never named exec {id}'s process"))
}

/// The first standard-output frame of a hijacked exec stream (8-byte header: stream,
/// three zero bytes, big-endian size), as text.
fn first_stdout_line(conn: UnixStream, mut read: Vec<u8>) -> Result<String, String> {
    let mut reader = BufReader::new(conn);
    loop {
        if read.len() >= 8 {
            let size = u32::from_be_bytes([read[4], read[5], read[6], read[7]]) as usize;
            if read.len() >= 8 + size {
                let frame = read[8..8 + size].to_vec();
                if read[0] == 1 {
                    return Ok(String::from_utf8_lossy(&frame).to_string());
                }
                read.drain(..8 + size);
                continue;
            }
        }
        let buf = reader.fill_buf().map_err(|e| e.to_string())?;
        if buf.is_empty() {
            return Err("the exec stream ended before its stamp".into());
        }
        read.extend_from_slice(buf);
        let n = buf.len();
        reader.consume(n);
    }
}

fn through_api(names: &[String]) -> Result<(f64, Vec<f64>), String> {
    let mut streams = names
        .iter()
        .map(|n| started_exec(n))
        .collect::<Result<Vec<_>, _>>()?;
    std::thread::sleep(PRIMED_FOR);
    let sent = now();
    for (conn, _) in &mut streams {
        conn.write_all(b"go\n").map_err(|e| e.to_string())?;
    }
    let mut starts = Vec::new();
    for (conn, read) in streams {
        starts.push(stamp(first_stdout_line(conn, read)?.as_bytes())?);
    }
    Ok((sent, starts))
}

fn through_api_pipes(names: &[String]) -> Result<(f64, Vec<f64>), String> {
    let mut streams = Vec::new();
    for name in names {
        let (conn, read, id) = started_exec_and_id(name)?;
        let pipe = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/{}/fd/0", exec_pid(&id)?))
            .map_err(|e| format!("the pipe of the exec in {name}: {e}"))?;
        streams.push((conn, read, pipe));
    }
    std::thread::sleep(PRIMED_FOR);
    let sent = now();
    for (_, _, pipe) in &mut streams {
        pipe.write_all(b"go\n").map_err(|e| e.to_string())?;
    }
    let mut starts = Vec::new();
    for (conn, read, _) in streams {
        starts.push(stamp(first_stdout_line(conn, read)?.as_bytes())?);
    }
    Ok((sent, starts))
}
