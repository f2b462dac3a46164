//! Running an argv on the machine faultline runs on: the `exec` transport (`docker exec`,
//! `oc debug`) and out-of-band power drivers. No shell is involved.
//!
//! The process gets a process group of its own, so that ending it on a timeout ends what
//! it started too (a `sh -c` with children), and a Ctrl-C aimed at faultline's terminal
//! does not cut a power command in half (faultline decides what happens then). Output is
//! read as it streams, its tail kept ([`super::output`]).
//!
//! A plain `docker exec -i` sent ahead may skip the client: through the engine's API
//! ([`engine_exec`]), or, root beside the engine, into the container directly
//! ([`namespace_exec`]); however it was carried, its ending is one [`LocalEnd`] ([`end`]).

use std::process::Stdio;
use std::time::Duration;

mod end;
mod engine_exec;
mod namespace_exec;

pub(super) use end::LocalEnd;
use engine_exec::EngineExec;
use namespace_exec::Entry;
pub use namespace_exec::PrimedDockerExec;

use super::gate_input::{BoxedInput, GateInput};
use super::output::{MAX_OUTPUT, Tail, bounded, read_tail_async};

/// Kills a process group with SIGKILL when dropped, unless defused: a dropped run (its
/// caller's future dropped) takes its whole group with it, not only the direct child.
struct GroupKill(Option<i32>);

impl GroupKill {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: killpg has no memory-safety preconditions; `pgid` is the group this
            // module created for a child it has not yet seen reaped.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Run `argv` with no stdin, capturing output. Within `timeout` its ending is
/// [`LocalEnd::Exited`]. Then it gets `grace` more to end by itself ([`LocalEnd::Late`]):
/// time for a node-side deadline to end the command the local client carries. Then its
/// process group is killed and reaped ([`LocalEnd::TimedOut`]).
pub(super) async fn run(
    argv: &[String],
    timeout: Duration,
    grace: Duration,
) -> std::io::Result<LocalEnd> {
    let (child, group) = spawn(argv, Stdio::null())?;
    finish(child, group, timeout, grace).await
}

/// `argv` started in a process group of its own, its output piped.
fn spawn(argv: &[String], stdin: Stdio) -> std::io::Result<(tokio::process::Child, GroupKill)> {
    let Some((program, args)) = argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty argv",
        ));
    };
    let mut command = tokio::process::Command::new(program);
    command.args(args);
    start_grouped(command, stdin)
}

/// `command` started in a process group of its own, killed with it when dropped, its
/// output piped.
fn start_grouped(
    mut command: tokio::process::Command,
    stdin: Stdio,
) -> std::io::Result<(tokio::process::Child, GroupKill)> {
    let child = command
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let group = GroupKill(child.id().and_then(|id| i32::try_from(id).ok()));
    Ok((child, group))
}

/// `entry`'s `nsenter` started in a process group of its own, its standard input a pipe
/// held here, its output piped: it writes itself into the container's cgroups before it
/// runs, then enters the container's namespaces and starts the command there.
fn spawn_entered(entry: &Entry) -> std::io::Result<(tokio::process::Child, GroupKill)> {
    let fds = entry.cgroup_fds();
    let mut command = tokio::process::Command::new(&entry.program);
    command
        .args(&entry.args)
        .env_clear()
        .envs(entry.env.iter().map(|(k, v)| (k, v)))
        .current_dir("/");
    // SAFETY: between fork and exec the closure only calls write(2) on descriptors that
    // `entry` holds open in the parent until the spawn returns, and reads errno: both
    // async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            for &fd in &fds {
                // "0": the process writing it (cgroup v1 and v2 alike).
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    start_grouped(command, Stdio::piped())
}

/// Hears a started process out: its output and ending within `timeout`, then `grace`,
/// then its group killed (see [`run`]).
async fn finish(
    mut child: tokio::process::Child,
    mut group: GroupKill,
    timeout: Duration,
    grace: Duration,
) -> std::io::Result<LocalEnd> {
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let collect = async move {
        let (out, err, status) = tokio::join!(tail_of(stdout), tail_of(stderr), child.wait());
        (status, bounded(&out, &err))
    };
    tokio::pin!(collect);
    if let Ok((status, output)) = tokio::time::timeout(timeout, &mut collect).await {
        group.0 = None;
        return Ok(LocalEnd::Exited {
            code: status?.code(),
            output,
        });
    }
    if !grace.is_zero()
        && let Ok((status, output)) = tokio::time::timeout(grace, &mut collect).await
    {
        group.0 = None;
        return Ok(LocalEnd::Late {
            code: status?.code(),
            output,
        });
    }
    group.kill();
    let reaped = tokio::time::timeout(super::deadline::REAP, &mut collect)
        .await
        .is_ok();
    Ok(LocalEnd::TimedOut { reaped })
}

/// A command carried to its node by a local client (`transport: exec` with
/// `execWithStdin`), started ahead of its step behind the gate of
/// [`super::primed::gated`] and waiting there for [`super::gate_input::GO`] on its standard
/// input. Dropped without being started (the run stopped first, or the step went the
/// ordinary way), its client is killed (or its engine stream closed), the node side reads
/// end-of-file and runs nothing; its node deadline ends the wait in any case.
pub(super) struct PrimedLocal {
    carrier: Carrier,
    stdin: GateInput<BoxedInput>,
}

/// What carries a primed command's input to its node.
enum Carrier {
    /// A process of faultline's: the client of the argv, or (`entered`) an `nsenter` into
    /// a plain `docker exec -i`'s container with no engine on the path
    /// ([`namespace_exec`]).
    Process {
        child: tokio::process::Child,
        group: GroupKill,
        entered: bool,
    },
    /// The engine's API, for a plain `docker exec -i` ([`engine_exec`]).
    Engine(EngineExec),
}

impl std::fmt::Debug for PrimedLocal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.carrier {
            Carrier::Process { entered: false, .. } => "PrimedLocal(client)",
            Carrier::Process { entered: true, .. } => "PrimedLocal(entered)",
            Carrier::Engine(_) => "PrimedLocal(engine)",
        })
    }
}

impl PrimedLocal {
    /// Starts `argv` (its command already gated), its standard input held open. A plain
    /// `docker exec -i` enters its container directly when `via` allows it and faultline
    /// can do it as the engine would ([`namespace_exec`]), else goes through the
    /// engine's API when the engine makes the exec within `within`; anything else starts
    /// the client.
    pub(super) async fn prime(
        argv: &[String],
        within: Duration,
        via: PrimedDockerExec,
    ) -> std::io::Result<PrimedLocal> {
        let Some((container, command)) = engine_exec::docker_exec_i(argv) else {
            return PrimedLocal::spawn(argv);
        };
        if via == PrimedDockerExec::Nearest
            && let Some(entry) = namespace_exec::entry(container, command, within).await
        {
            match spawn_entered(&entry).and_then(|started| PrimedLocal::holding(started, true)) {
                Ok(primed) => return Ok(primed),
                Err(e) => tracing::debug!(container, "not entered directly: {e}"),
            }
        }
        if let Some((exec, input)) = EngineExec::start(container, command, within).await {
            return Ok(PrimedLocal {
                carrier: Carrier::Engine(exec),
                stdin: GateInput::new(Some(input)),
            });
        }
        PrimedLocal::spawn(argv)
    }

    /// Starts the client of `argv` (its command already gated), its standard input held
    /// open.
    pub(super) fn spawn(argv: &[String]) -> std::io::Result<PrimedLocal> {
        PrimedLocal::holding(spawn(argv, Stdio::piped())?, false)
    }

    /// A started process (`entered`: into a container directly), its standard input held.
    fn holding(
        (mut child, group): (tokio::process::Child, GroupKill),
        entered: bool,
    ) -> std::io::Result<PrimedLocal> {
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no standard input to hold"))?;
        Ok(PrimedLocal {
            carrier: Carrier::Process {
                child,
                group,
                entered,
            },
            stdin: GateInput::new(Some(Box::pin(stdin))),
        })
    }

    /// `self` while its client still runs (or its engine stream is open: a node that was
    /// powered off or restarted ended it); `None` after ending it, for the command to go
    /// the ordinary way. A released one is kept unasked: it may have run and ended
    /// already, and must not run again.
    pub(super) fn alive(mut self) -> Option<PrimedLocal> {
        if self.stdin.released_at().is_some() {
            return Some(self);
        }
        let running = match &mut self.carrier {
            Carrier::Process { child, .. } => matches!(child.try_wait(), Ok(None)),
            Carrier::Engine(exec) => exec.is_open(),
        };
        if running {
            Some(self)
        } else {
            tracing::debug!("a primed local command had ended before it was due");
            None
        }
    }

    /// Sends the word now, ahead of the call that hears the command out: a step's
    /// commands are released on all of its nodes in one pass
    /// ([`super::Executor::release`]). Once only.
    pub(super) async fn release(&mut self) {
        self.stdin.release().await;
    }

    /// Whether its word was sent ([`PrimedLocal::release`]).
    pub(super) fn released(&self) -> bool {
        self.stdin.released_at().is_some()
    }

    /// Sends the word (unless it was released already) and end-of-file, then hears the
    /// command out as [`run`] does. A client that went away before the word reached it
    /// ends with whatever it says then.
    pub(super) async fn start(
        mut self,
        timeout: Duration,
        grace: Duration,
    ) -> std::io::Result<LocalEnd> {
        self.stdin.release().await;
        drop(self.stdin);
        match self.carrier {
            Carrier::Process { child, group, .. } => finish(child, group, timeout, grace).await,
            Carrier::Engine(exec) => Ok(exec.finish(timeout, grace).await),
        }
    }
}

/// The tail of a child's pipe, read to its end.
async fn tail_of(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> Tail {
    match pipe {
        Some(p) => read_tail_async(p, MAX_OUTPUT).await.0,
        None => Tail::new(MAX_OUTPUT),
    }
}
