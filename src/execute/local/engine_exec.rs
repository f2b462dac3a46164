//! A primed `docker exec -i` made through dockerd's API on its Unix socket, with no
//! `docker` client process in between (kind, k3d: the profiles' `execWithStdin`).
//!
//! A primed command's word goes to its node the moment its step is due. Through a client,
//! it passes that client (one Go process per node), dockerd and the container's shim; at
//! 20 nodes and load 3–6 the last command started 113–171 ms after the word. Through the
//! API the client hop is gone, and the same 20 started within 20–41 ms
//! (`ci/bench-docker-stdin`). What runs in the container is the same argv with the same
//! gate: an exec created with its standard input attached, started with its stream
//! hijacked, the word written to that stream.
//!
//! Only an argv that is exactly `docker exec -i CONTAINER COMMAND…` goes this way, and
//! only to the engine the `docker` client would talk to without a context: `DOCKER_HOST`
//! when it is `unix://…`, else the default socket. Any other argv, a context chosen
//! (`DOCKER_CONTEXT`, or `currentContext` in the client's configuration), another
//! `DOCKER_HOST`, or an engine that does not make the exec (not there, another engine
//! without that container) leaves the client way.
//!
//! Run as root beside the engine, faultline skips the engine too and enters the container
//! itself ([`super::namespace_exec`]); this is the way when it cannot do that exactly.

use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures::{FutureExt, Stream, StreamExt};

use super::end::LocalEnd;
use crate::execute::gate_input::BoxedInput;
use crate::execute::output::{MAX_OUTPUT, Tail, bounded};

/// How long creating and starting one exec may take at most before the client way is
/// used (less when its step is due sooner: [`EngineExec::start`]).
pub(super) const SET_UP_LIMIT: Duration = Duration::from_secs(5);

/// How long to ask after the exit code of an exec whose stream has ended (the engine
/// records the code a moment after it closes the stream).
const EXIT_CODE_LIMIT: Duration = Duration::from_secs(2);

type Output = Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// The container and command of `argv` when it is `docker exec -i CONTAINER COMMAND…`
/// and nothing else.
pub(super) fn docker_exec_i(argv: &[String]) -> Option<(&str, &[String])> {
    let [program, exec, interactive, container, command @ ..] = argv else {
        return None;
    };
    let docker = Path::new(program).file_name().and_then(|n| n.to_str()) == Some("docker");
    (docker
        && exec == "exec"
        && interactive == "-i"
        && !container.starts_with('-')
        && !command.is_empty())
    .then_some((container.as_str(), command))
}

/// The engine the `docker` client would use without a context, when it is on a Unix
/// socket.
pub(super) fn engine() -> Option<Docker> {
    if context_chosen() {
        return None;
    }
    match std::env::var("DOCKER_HOST") {
        Ok(host) if !host.is_empty() && !host.starts_with("unix://") => return None,
        _ => {}
    }
    Docker::connect_with_unix_defaults().ok()
}

/// Whether the `docker` client would use a context other than the default one:
/// `DOCKER_CONTEXT`, else `currentContext` in its configuration (`DOCKER_CONFIG`, else
/// `~/.docker`). Read once: the client's configuration does not change during a run, and priming asks
/// for every node of every step.
fn context_chosen() -> bool {
    static CHOSEN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(read_context_chosen)
}

fn read_context_chosen() -> bool {
    let chosen = |name: &str| !name.is_empty() && name != "default";
    if let Ok(name) = std::env::var("DOCKER_CONTEXT") {
        return chosen(&name);
    }
    let dir = match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => match std::env::var_os("HOME") {
            Some(home) => Path::new(&home).join(".docker"),
            None => return false,
        },
    };
    let Ok(text) = std::fs::read_to_string(dir.join("config.json")) else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|config| config.get("currentContext")?.as_str().map(chosen))
        .unwrap_or(false)
}

/// An exec waiting in its container, its stream open.
pub(super) struct EngineExec {
    docker: Docker,
    id: String,
    output: Output,
    /// What the stream said before the command was started (the gate says nothing: a
    /// shell's complaint at most).
    early: Vec<LogOutput>,
    ended_early: bool,
}

impl EngineExec {
    /// Creates `command` as an exec in `container` with its standard input attached and
    /// starts it; `None` (said at debug level) when the engine does not within `within`
    /// (at most [`SET_UP_LIMIT`]): a stalled engine leaves the client the rest of the lead.
    pub(super) async fn start(
        container: &str,
        command: &[String],
        within: Duration,
    ) -> Option<(EngineExec, BoxedInput)> {
        EngineExec::start_on(engine()?, container, command, within).await
    }

    /// [`EngineExec::start`] on `docker`.
    async fn start_on(
        docker: Docker,
        container: &str,
        command: &[String],
        within: Duration,
    ) -> Option<(EngineExec, BoxedInput)> {
        let set_up = async {
            let options = CreateExecOptions {
                attach_stdin: Some(true),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                cmd: Some(command.to_vec()),
                ..Default::default()
            };
            let created = docker.create_exec(container, options).await?;
            let started = docker
                .start_exec(&created.id, Some(StartExecOptions::default()))
                .await?;
            Ok::<_, bollard::errors::Error>((created.id, started))
        };
        let (id, started) = match tokio::time::timeout(within.min(SET_UP_LIMIT), set_up).await {
            Ok(Ok(made)) => made,
            Ok(Err(e)) => {
                tracing::debug!(container, "the engine did not make the exec: {e}");
                return None;
            }
            Err(_) => {
                tracing::debug!(container, "the engine did not make the exec in time");
                return None;
            }
        };
        let StartExecResults::Attached { output, input } = started else {
            return None;
        };
        let exec = EngineExec {
            docker,
            id,
            output,
            early: Vec::new(),
            ended_early: false,
        };
        Some((exec, input))
    }

    /// Whether its stream is still open (a container stopped or removed ended it). Reads
    /// what is ready without waiting, and keeps it for [`EngineExec::finish`].
    pub(super) fn is_open(&mut self) -> bool {
        while !self.ended_early {
            match self.output.next().now_or_never() {
                None => break,
                Some(Some(Ok(frame))) => self.early.push(frame),
                Some(Some(Err(_)) | None) => self.ended_early = true,
            }
        }
        !self.ended_early
    }

    /// Hears the started command out as a local client's is heard ([`LocalEnd`]): its
    /// output and exit code within `timeout`, then `grace`; after that the stream is
    /// closed (the engine has no way to end an exec: the node's deadline ends it).
    pub(super) async fn finish(self, timeout: Duration, grace: Duration) -> LocalEnd {
        let EngineExec {
            docker,
            id,
            mut output,
            early,
            ended_early,
        } = self;
        let collect = async move {
            let (mut out, mut err) = (Tail::new(MAX_OUTPUT), Tail::new(MAX_OUTPUT));
            for frame in &early {
                keep(frame, &mut out, &mut err);
            }
            if !ended_early {
                while let Some(Ok(frame)) = output.next().await {
                    keep(&frame, &mut out, &mut err);
                }
            }
            (exit_code(&docker, &id).await, bounded(&out, &err))
        };
        tokio::pin!(collect);
        if let Ok((code, output)) = tokio::time::timeout(timeout, &mut collect).await {
            return LocalEnd::Exited { code, output };
        }
        if !grace.is_zero()
            && let Ok((code, output)) = tokio::time::timeout(grace, &mut collect).await
        {
            return LocalEnd::Late { code, output };
        }
        LocalEnd::TimedOut { reaped: false }
    }
}

fn keep(frame: &LogOutput, out: &mut Tail, err: &mut Tail) {
    match frame {
        LogOutput::StdOut { message } | LogOutput::Console { message } => out.push(message),
        LogOutput::StdErr { message } => err.push(message),
        LogOutput::StdIn { .. } => {}
    }
}

/// The exec's exit code once the engine has it; `None` when it cannot say (the container
/// went away with it), which reads as a command ended by a signal.
async fn exit_code(docker: &Docker, id: &str) -> Option<i32> {
    let ask = async {
        loop {
            match docker.inspect_exec(id).await {
                Ok(seen) if seen.running == Some(true) => {}
                Ok(seen) => return seen.exit_code.and_then(|c| i32::try_from(c).ok()),
                Err(e) => {
                    tracing::debug!("the engine did not say how the exec ended: {e}");
                    return None;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(EXIT_CODE_LIMIT, ask)
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn only_a_plain_docker_exec_i_goes_through_the_engine() {
        let plain = argv(&["docker", "exec", "-i", "kind-worker", "sh", "-c", "x"]);
        let (container, command) = docker_exec_i(&plain).expect("plain");
        assert_eq!(container, "kind-worker");
        assert_eq!(command, &plain[4..]);
        let by_path = argv(&["/usr/bin/docker", "exec", "-i", "n", "sh"]);
        assert_eq!(docker_exec_i(&by_path).map(|(c, _)| c), Some("n"));
        for other in [
            argv(&["podman", "exec", "-i", "n", "sh"]),
            argv(&["docker", "exec", "-i", "-u", "root", "n", "sh"]),
            argv(&["docker", "exec", "-it", "n", "sh"]),
            argv(&["docker", "--context", "x", "exec", "-i", "n", "sh"]),
            argv(&["docker", "exec", "-i", "n"]),
        ] {
            assert_eq!(docker_exec_i(&other), None, "{other:?}");
        }
    }

    /// An engine that takes the connection and never answers gives the exec up within
    /// the time it was given: the client way still has the rest of the step's lead.
    #[tokio::test]
    async fn a_stalled_engine_is_given_up_within_the_time_given() {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("stalled.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
        let held = std::thread::spawn(move || {
            let mut kept = Vec::new();
            for conn in listener.incoming().take(1) {
                kept.push(conn);
                std::thread::sleep(Duration::from_secs(3));
            }
        });
        let docker = Docker::connect_with_unix(
            socket.to_str().expect("utf-8 path"),
            120,
            bollard::API_DEFAULT_VERSION,
        )
        .expect("client");
        let asked = std::time::Instant::now();
        let command = argv(&["sh", "-c", "true"]);
        let made = EngineExec::start_on(docker, "n", &command, Duration::from_millis(300)).await;
        let took = asked.elapsed();
        assert!(made.is_none(), "a stalled engine made an exec");
        assert!(
            took < Duration::from_secs(2),
            "given 300 ms, it waited {took:?}"
        );
        drop(held);
    }
}
