//! Proof that each fault took effect, and kept its effect until faultline undid it.
//!
//! A step whose command exits 0 has not necessarily done what it says: the kubelet unit
//! may have another name, a restart policy may bring a stopped kubelet back at once, the
//! power driver may reboot instead of powering off. After every fault step, each of its
//! nodes gets a task that reads the evidence the fault table names
//! ([`Proof`](crate::experiment::fault::Proof)) until it shows, within a bound, and puts
//! what it saw on the timeline (`confirmed`, or `not-confirmed` with the last evidence);
//! for a fault that lasts it then keeps reading, more slowly, until faultline undoes the
//! fault itself, and a reading that shows the fault gone is a `reverted` entry. The
//! scheduler ends the run on either of those (a step error with the evidence).
//!
//! The Node-object proofs (cordon, taint, delete) read the run's observer
//! ([`node_object`]); the heartbeat proof GETs the node's Lease, which the observer does
//! not watch; the others ask the node or its power driver.

mod node_object;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::execute::{Executor, NodeOp, PowerState};
use crate::experiment::fault::{self, PowerKey, Proof};
use crate::experiment::model::{Action, TaintSpec};
use crate::observe::ObserveMode;
use crate::run::shared_timeline::SharedTimeline;
use crate::run::world::FaultAt;
use crate::timeline::{Event, StepPhase};

/// Time between two readings while a fault is being confirmed.
const CONFIRM_EVERY: Duration = Duration::from_secs(1);
/// How long after its confirmation a fault is still read every [`CONFIRM_EVERY`]: a
/// restart policy or a supervisor brings a stopped kubelet back within seconds (systemd's
/// `RestartSec` is 100 ms by default, kubeadm's unit says 10 s).
const STAYS_FOR: Duration = Duration::from_secs(15);
/// Time between two readings after that, until faultline undoes it.
const WATCH_EVERY: Duration = Duration::from_secs(5);
/// Longest a single reading may take (an SSH command, an API call).
const READ_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a node that does not answer is given to answer a trivial command.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// A kubelet Lease's duration when the object does not say (the kubelet's default).
const DEFAULT_LEASE: Duration = Duration::from_secs(40);

/// How long a fault has to show its evidence after its step finished.
pub(in crate::run) fn within(proof: Proof) -> Duration {
    match proof {
        Proof::None => Duration::ZERO,
        // `systemctl stop` returns once the unit stopped.
        Proof::KubeletInactive => Duration::from_secs(10),
        // The API call returned; the observer's watch has it at once (`node_object`).
        Proof::Unschedulable | Proof::Tainted | Proof::NodeGone => Duration::from_secs(10),
        // The quiet period is the Lease's half duration; see `Checker::heartbeat`.
        Proof::HeartbeatStopped => Duration::from_secs(120),
        // An in-band `poweroff` shuts the system down first.
        Proof::PoweredOff => Duration::from_secs(120),
        // A machine takes minutes to boot.
        Proof::BootIdChanged => Duration::from_secs(600),
    }
}

/// One reading of a fault's evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reading {
    /// The fault is in effect: the evidence.
    InEffect(String),
    /// The fault is not (or no longer) in effect: the evidence.
    NotInEffect(String),
    /// Nothing could be read this time (the node did not answer the question).
    Unknown(String),
}

/// What a node's proof reads before its step, for evidence that is a change: the node's
/// boot id before a reboot.
pub(in crate::run) type Baseline = Result<String, String>;

/// Reads, before a step, what its proof compares with afterwards; `None` when its proof
/// needs nothing from before.
pub(in crate::run) async fn baseline(
    executor: &Executor,
    action: &Action,
    node: &str,
) -> Option<Baseline> {
    if fault::proof(action) != Proof::BootIdChanged {
        return None;
    }
    Some(
        executor
            .perform(node, &NodeOp::BootId, READ_TIMEOUT)
            .await
            .map(|out| one_line(&out.output))
            .map_err(|e| e.to_string()),
    )
}

/// The proofs under way: one task per node of each fault step.
pub(in crate::run) struct Proofs {
    running: Vec<Running>,
    /// How the run's observer follows the cluster: a poll gives the proofs that read it
    /// one interval more.
    observed: ObserveMode,
}

/// One node's proof in progress.
struct Running {
    node: String,
    fault: Action,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Proofs {
    /// No proof under way yet, on a run whose observer follows the cluster as `observed`.
    pub(in crate::run) fn new(observed: ObserveMode) -> Self {
        Proofs {
            running: Vec::new(),
            observed,
        }
    }

    /// Starts proving that `fault` took effect on its node.
    pub(in crate::run) fn start(
        &mut self,
        executor: &Executor,
        client: &kube::Client,
        timeline: &SharedTimeline,
        fault: FaultAt<'_>,
        baseline: Option<Baseline>,
    ) {
        let (step, action, node) = (fault.name, fault.action, fault.node);
        let proof = match fault::proof(action) {
            // Through the API, a stopped kubelet cannot be asked (exec goes through it):
            // its heartbeat stopping is the evidence.
            Proof::KubeletInactive if executor.through_api(node) => Proof::HeartbeatStopped,
            proof => proof,
        };
        if proof == Proof::None {
            return;
        }
        let stop = CancellationToken::new();
        let checker = Checker {
            executor: executor.clone(),
            client: client.clone(),
            timeline: timeline.clone(),
            node: node.to_string(),
            proof,
            bound: within(proof) + node_object::lag(proof, self.observed),
            taint: match action {
                Action::Taint(t) => Some(t.clone()),
                _ => None,
            },
            baseline,
            heartbeat: None,
        };
        let record = Recorder {
            timeline: timeline.clone(),
            step: step.to_string(),
            action: fault::action_name(action).to_string(),
            node: node.to_string(),
        };
        let task = tokio::spawn(prove(checker, record, stop.clone()));
        self.running.push(Running {
            node: node.to_string(),
            fault: action.clone(),
            stop,
            task,
        });
    }

    /// Before `action` runs on `nodes`: stops watching the faults it undoes there, so the
    /// planned undo is not mistaken for something else undoing them.
    pub(in crate::run) async fn settle(&mut self, action: &Action, nodes: &[&str]) {
        let (done, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|r| nodes.contains(&r.node.as_str()) && fault::undoes(action, &r.fault));
        self.running = keep;
        finish(done).await;
    }

    /// The run's observation ended: every proof stops (the safety net undoes what is
    /// left).
    pub(in crate::run) async fn stop_all(&mut self) {
        finish(std::mem::take(&mut self.running)).await;
    }
}

async fn finish(done: Vec<Running>) {
    for r in &done {
        r.stop.cancel();
    }
    for r in done {
        let _ = r.task.await;
    }
}

/// Puts one node's proof on the timeline, as an entry of its step.
struct Recorder {
    timeline: SharedTimeline,
    step: String,
    action: String,
    node: String,
}

impl Recorder {
    fn record(&self, phase: StepPhase) {
        self.timeline.record(Event::Step {
            step: self.step.clone(),
            action: self.action.clone(),
            node: Some(self.node.clone()),
            phase,
        });
    }
}

/// Confirms, then (for a fault that lasts) watches; stops at once when told to.
async fn prove(mut checker: Checker, record: Recorder, stop: CancellationToken) {
    let started = Instant::now();
    let deadline = started + checker.bound;
    if let Some(Err(e)) = &checker.baseline {
        record.record(StepPhase::NotConfirmed {
            evidence: format!("could not read the node's boot id before the step: {e}"),
        });
        return;
    }
    loop {
        let reading = tokio::select! {
            _ = stop.cancelled() => return,
            r = checker.read() => r,
        };
        if let Reading::InEffect(evidence) = &reading {
            record.record(StepPhase::Confirmed {
                evidence: format!("{evidence} ({:.1}s after the step)", secs(started)),
            });
            break;
        }
        if Instant::now() >= deadline {
            let evidence = match reading {
                Reading::NotInEffect(e) | Reading::Unknown(e) | Reading::InEffect(e) => e,
            };
            record.record(StepPhase::NotConfirmed {
                evidence: format!(
                    "{evidence} ({:.0}s after the step, the bound for this fault)",
                    secs(started)
                ),
            });
            return;
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(CONFIRM_EVERY) => {}
        }
    }
    if !checker.proof.watched() {
        return;
    }
    let confirmed = Instant::now();
    loop {
        let pause = if confirmed.elapsed() < STAYS_FOR {
            CONFIRM_EVERY
        } else {
            WATCH_EVERY
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
        let reading = tokio::select! {
            _ = stop.cancelled() => return,
            r = checker.read() => r,
        };
        if let Reading::NotInEffect(evidence) = reading {
            record.record(StepPhase::Reverted {
                evidence: format!("{evidence} ({:.1}s after the step)", secs(started)),
            });
            return;
        }
    }
}

fn secs(since: Instant) -> f64 {
    since.elapsed().as_secs_f64()
}

/// The first non-empty line of a command's output, or `(no output)`.
fn one_line(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        "(no output)".to_string()
    } else {
        lines.join(" ")
    }
}

/// What a heartbeat proof has seen of the node's Lease.
struct Heartbeat {
    /// The last renew time read.
    renewed: Option<String>,
    /// When that value was first read (or the proof began).
    since: Instant,
    /// The Lease's duration.
    lease: Duration,
}

/// What the Lease read at `now` says, given what was seen before (`state`): a renewal
/// since the last reading means the node reaches the API server; half a lease duration
/// (at least 3 s) without one, by faultline's clock, means it does not.
fn heartbeat_reading(
    state: &mut Option<Heartbeat>,
    renewed: Option<String>,
    lease: Duration,
    now: Instant,
) -> Reading {
    let hb = state.get_or_insert(Heartbeat {
        renewed: renewed.clone(),
        since: now,
        lease,
    });
    if hb.renewed != renewed {
        hb.renewed = renewed.clone();
        hb.since = now;
        return Reading::NotInEffect(format!(
            "the node renewed its heartbeat (Lease renewTime {}): it reaches the API server",
            renewed.as_deref().unwrap_or("unset")
        ));
    }
    let quiet = (hb.lease / 2).max(Duration::from_secs(3));
    let silent = now.duration_since(hb.since);
    if silent >= quiet {
        Reading::InEffect(format!(
            "no heartbeat for {:.1}s (Lease renewTime still {}, lease {}s): the node no \
             longer reaches the API server",
            silent.as_secs_f64(),
            renewed.as_deref().unwrap_or("unset"),
            hb.lease.as_secs()
        ))
    } else {
        Reading::Unknown(format!(
            "no heartbeat for {:.1}s so far (quiet for {}s confirms)",
            silent.as_secs_f64(),
            quiet.as_secs()
        ))
    }
}

/// Reads one node's evidence for one proof.
struct Checker {
    executor: Executor,
    client: kube::Client,
    /// What the run's observer holds: the Node-object proofs read it.
    timeline: SharedTimeline,
    node: String,
    proof: Proof,
    /// How long the fault has to show its evidence after its step.
    bound: Duration,
    taint: Option<TaintSpec>,
    baseline: Option<Baseline>,
    heartbeat: Option<Heartbeat>,
}

impl Checker {
    async fn read(&mut self) -> Reading {
        let read = async {
            match self.proof {
                Proof::None => Reading::InEffect("nothing to check".into()),
                Proof::KubeletInactive => self.kubelet().await,
                Proof::HeartbeatStopped => self.heartbeat().await,
                Proof::PoweredOff => self.powered_off().await,
                Proof::BootIdChanged => self.boot_id().await,
                Proof::NodeGone | Proof::Unschedulable | Proof::Tainted => self.node_object(),
            }
        };
        // A reading that hangs (a node's SSH that never answers) is no reading.
        match tokio::time::timeout(READ_TIMEOUT + ANSWER_TIMEOUT, read).await {
            Ok(r) => r,
            Err(_) => Reading::Unknown("the check did not finish in time".into()),
        }
    }

    async fn kubelet(&self) -> Reading {
        match self
            .executor
            .perform(&self.node, &NodeOp::KubeletStatus, READ_TIMEOUT)
            .await
        {
            Ok(out) => {
                let said = format!(
                    "kubelet status `{}` (exit {})",
                    one_line(&out.output),
                    out.exit_status
                        .map_or_else(|| "none".to_string(), |c| c.to_string())
                );
                if out.exit_status == Some(0) {
                    Reading::NotInEffect(format!("{said}: the kubelet runs"))
                } else {
                    Reading::InEffect(format!("{said}: the kubelet is not running"))
                }
            }
            Err(e) => Reading::Unknown(format!("could not ask the kubelet's status: {e}")),
        }
    }

    /// The Lease is renewed every quarter of its duration; half a duration without a
    /// renewal, read by faultline's own clock (so no clock skew between the node and this
    /// machine matters), means the node no longer reaches the API server. One renewal
    /// landing just after the cut (a request already under way) is allowed for: the quiet
    /// period starts at the last renewal seen.
    async fn heartbeat(&mut self) -> Reading {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), "kube-node-lease");
        let lease = match leases.get_opt(&self.node).await {
            Ok(Some(l)) => l,
            Ok(None) => {
                return Reading::Unknown(format!(
                    "node {} has no Lease in kube-node-lease (no heartbeat to watch)",
                    self.node
                ));
            }
            Err(e) => return Reading::Unknown(format!("could not read the node's Lease: {e}")),
        };
        let spec = lease.spec.unwrap_or_default();
        let renewed = spec.renew_time.map(|t| t.0.to_string());
        let duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(DEFAULT_LEASE, Duration::from_secs);
        heartbeat_reading(&mut self.heartbeat, renewed, duration, Instant::now())
    }

    async fn powered_off(&self) -> Reading {
        let configured = self
            .executor
            .inventory()
            .node(&self.node)
            .is_some_and(|a| a.power.has(PowerKey::Status));
        let mut said = Vec::new();
        if configured {
            match self.executor.power_state(&self.node, READ_TIMEOUT).await {
                Ok(PowerState::Off) => said.push("power status off".to_string()),
                Ok(PowerState::On) => {
                    return Reading::NotInEffect("power status says on".into());
                }
                Ok(PowerState::Unknown(s)) => {
                    return Reading::Unknown(format!("power status says `{s}`"));
                }
                Err(e) => return Reading::Unknown(format!("could not read the power status: {e}")),
            }
        }
        match self
            .executor
            .perform(&self.node, &NodeOp::Run("true".into()), ANSWER_TIMEOUT)
            .await
        {
            Ok(_) => Reading::NotInEffect(format!(
                "{}the node still answers over its transport",
                said.iter()
                    .map(|s| format!("{s}, but "))
                    .collect::<String>()
            )),
            Err(e) => {
                said.push(format!(
                    "the node does not answer ({})",
                    short(&e.to_string())
                ));
                Reading::InEffect(said.join("; "))
            }
        }
    }

    async fn boot_id(&self) -> Reading {
        let Some(Ok(before)) = &self.baseline else {
            return Reading::Unknown("no boot id from before the step".into());
        };
        match self
            .executor
            .perform(&self.node, &NodeOp::BootId, READ_TIMEOUT)
            .await
        {
            Ok(out) => {
                let now = one_line(&out.output);
                if now == *before {
                    Reading::NotInEffect(format!(
                        "the node answers with the boot id it had before the step (`{now}`): \
                         it did not reboot"
                    ))
                } else {
                    Reading::InEffect(format!("boot id `{before}` → `{now}`: the node rebooted"))
                }
            }
            Err(e) => Reading::Unknown(format!(
                "the node does not answer yet ({})",
                short(&e.to_string())
            )),
        }
    }

    /// A lookup in what the observer holds of the node (see [`node_object`]).
    fn node_object(&self) -> Reading {
        self.timeline.latest_view(|latest| {
            node_object::reading(latest, &self.node, self.proof, self.taint.as_ref())
        })
    }
}

/// An error message cut to its first line and 160 characters, for evidence lines.
fn short(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default();
    let mut out: String = first.chars().take(160).collect();
    if first.chars().count() > 160 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_proof_has_a_bound_and_readings_say_what_they_saw() {
        for proof in [
            Proof::KubeletInactive,
            Proof::HeartbeatStopped,
            Proof::PoweredOff,
            Proof::BootIdChanged,
            Proof::NodeGone,
            Proof::Unschedulable,
            Proof::Tainted,
        ] {
            assert!(within(proof) >= Duration::from_secs(10), "{proof:?}");
        }
        assert_eq!(one_line("\n  abc \n def\n"), "abc def");
        assert_eq!(one_line("  \n"), "(no output)");
        assert_eq!(short(&"x".repeat(200)).chars().count(), 161);
    }

    #[test]
    fn a_heartbeat_is_stopped_after_half_a_lease_without_renewal_and_back_at_the_next() {
        let t0 = Instant::now();
        let lease = Duration::from_secs(10);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let renew = |t: &str| Some(t.to_string());
        let mut hb = None;
        let first = heartbeat_reading(&mut hb, renew("10:00:00"), lease, at(0));
        assert!(matches!(first, Reading::Unknown(_)), "{first:?}");
        // A renewal that was under way when the cut came lands: the quiet period restarts.
        let late = heartbeat_reading(&mut hb, renew("10:00:01"), lease, at(1));
        assert!(matches!(late, Reading::NotInEffect(_)), "{late:?}");
        let early = heartbeat_reading(&mut hb, renew("10:00:01"), lease, at(5));
        assert!(matches!(early, Reading::Unknown(_)), "{early:?}");
        let quiet = heartbeat_reading(&mut hb, renew("10:00:01"), lease, at(6));
        match quiet {
            Reading::InEffect(e) => assert!(e.starts_with("no heartbeat for 5.0s"), "{e}"),
            other => panic!("{other:?}"),
        }
        let back = heartbeat_reading(&mut hb, renew("10:00:09"), lease, at(9));
        match back {
            Reading::NotInEffect(e) => assert!(e.contains("10:00:09"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}
