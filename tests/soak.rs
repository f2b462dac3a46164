//! The kill soak (issue 16), run by `ci/soak` on the lab, not in CI (about half an hour for
//! twenty runs): runs of kubelet-stop, partition and power-off experiments, each faultline
//! killed with SIGKILL at a random instant between its first fault and its planned end
//! (where `faultline plan` says observation ends).
//! After each kill, with no help from anyone:
//! - every node is Ready and schedulable again by the self-restore's deadline (the run's
//!   longest planned length plus its restore margin, written in the journal) plus a grace period for
//!   the node to report Ready once its fault is undone;
//! - `faultline restore` then leaves the journal empty;
//! - and its comparison with the snapshot the killed run took before its first fault
//!   passes ("cluster restored").
//!
//! It prints each run and then `soak: S/N survived`, with the worst time to recovery.
//! `SOAK_RUNS` (default 20), `SOAK_MARGIN` (seconds, default 10), `SOAK_SEED` (the kill
//! instants; printed, so a run can be repeated).

mod lab_support;

use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::core::v1::Node;
use lab_support::*;

/// The soak's experiments, taken in turn: the fault step and the file.
const EXPERIMENTS: [(&str, &str); 3] = [
    (
        "kubelet-stop",
        "fixtures/experiments/lab/soak-kubelet-stop.yaml",
    ),
    ("partition", "fixtures/experiments/lab/soak-partition.yaml"),
    ("power-off", "fixtures/experiments/lab/soak-power-off.yaml"),
];

/// xorshift64*: the kill instants, reproducible from the printed seed (no crate for it).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A fraction in [0, 1).
    fn fraction(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one run of the soak found.
struct Outcome {
    name: &'static str,
    /// From the kill until every node was Ready and schedulable, if it was in time.
    recovered: Option<Duration>,
    /// How far past the self-restore's deadline that was (negative: before it).
    past_deadline_s: f64,
    /// What went wrong, if anything did.
    problems: Vec<String>,
}

/// Whether every node of the lab is Ready and schedulable.
async fn all_back(client: &kube::Client) -> bool {
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let Ok(list) = nodes.list(&Default::default()).await else {
        return false;
    };
    list.items.iter().all(|n| {
        let ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True");
        let schedulable = n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true);
        ready && schedulable
    })
}

/// The self-restore deadline the journal holds for the run's fault.
fn journal_deadline(s: &Scratch) -> Option<chrono::DateTime<Utc>> {
    let text = std::fs::read_to_string(s.journal()).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    doc["faults"]
        .as_array()?
        .iter()
        .filter_map(|f| f["deadline"].as_str())
        .filter_map(|d| chrono::DateTime::parse_from_rfc3339(d).ok())
        .map(|d| d.with_timezone(&Utc))
        .min()
}

/// Where `faultline plan` says the experiment's observation ends, from its start (its line
/// `observation: ends at +50.0s ...`): the planned end a kill instant is drawn before.
fn observation_end(s: &Scratch, file: &str) -> Duration {
    let out = s
        .faultline(&["plan", file])
        .output()
        .expect("faultline plan");
    let text = String::from_utf8_lossy(&out.stdout);
    let secs = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("observation: ends at +"))
        .and_then(|rest| rest.split_once('s'))
        .and_then(|(n, _)| n.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no observation end in `faultline plan {file}`:\n{text}"));
    Duration::from_secs_f64(secs)
}

async fn one_run(
    client: &kube::Client,
    rng: &mut Rng,
    index: u64,
    margin: Duration,
    grace: Duration,
) -> Outcome {
    let (name, file) = EXPERIMENTS[(index % 3) as usize];
    let mut out = Outcome {
        name,
        recovered: None,
        past_deadline_s: 0.0,
        problems: Vec::new(),
    };
    all_nodes_ready(client, Duration::from_secs(180)).await;
    let s = Scratch::new();
    let margin_arg = format!("{}s", margin.as_secs());
    let (mut child, lines) = s.spawn_lines(file, &["--restore-margin", &margin_arg]);
    if wait_line(&lines, |l| is_issued(l, name), Duration::from_secs(120)).is_none() {
        let _ = child.kill();
        let _ = child.wait();
        out.problems.push(format!("`{name}` was never issued"));
        return out;
    }
    let issued = Utc::now();
    let Some(deadline) = journal_deadline(&s) else {
        let _ = child.kill();
        let _ = child.wait();
        out.problems
            .push("no self-restore deadline in the journal".into());
        return out;
    };
    // The planned end: where `faultline plan` says observation ends (the run's own end
    // when nothing stops it early), counted from the first fault, issued at +0s. The
    // self-restore deadline is later: it allows one more grace period, and the margin.
    let planned_end =
        issued + chrono::Duration::from_std(observation_end(&s, file)).unwrap_or_default();
    let window = (planned_end - issued).num_milliseconds().max(0) as f64;
    let kill_after = Duration::from_millis((window * rng.fraction()) as u64);
    tokio::time::sleep(kill_after).await;
    // A run that ended by itself before the kill instant tests nothing of the kill: say so
    // rather than judge what `restore` finds after a clean end.
    if let Ok(Some(status)) = child.try_wait() {
        out.problems.push(format!(
            "the run ended by itself ({status}) before the kill instant, {:.1}s after `{name}`",
            kill_after.as_secs_f64()
        ));
        return out;
    }
    child.kill().expect("SIGKILL faultline");
    let _ = child.wait();
    let killed = Instant::now();
    let killed_at = Utc::now();
    println!(
        "  killed {:.1}s after `{name}` was issued (planned end in {:.1}s, self-restore deadline in {:.1}s)",
        kill_after.as_secs_f64(),
        (planned_end - killed_at).num_milliseconds() as f64 / 1000.0,
        (deadline - killed_at).num_milliseconds() as f64 / 1000.0
    );
    let limit = (deadline - killed_at).to_std().unwrap_or_default() + grace;
    // A fault still in the journal is still in place (the kill came before faultline undid
    // it): the node may not even be NotReady yet, so it counts as back only once the
    // self-restore's deadline has passed. A fault faultline undid before the kill needs no
    // wait.
    if journal_deadline(&s).is_some()
        && let Ok(wait) = (deadline - Utc::now()).to_std()
    {
        tokio::time::sleep(wait).await;
    }
    loop {
        if all_back(client).await {
            out.recovered = Some(killed.elapsed());
            out.past_deadline_s = (Utc::now() - deadline).num_milliseconds() as f64 / 1000.0;
            break;
        }
        if killed.elapsed() > limit {
            out.problems.push(format!(
                "nodes not all Ready and schedulable {:.1}s after the kill (deadline + {}s)",
                killed.elapsed().as_secs_f64(),
                grace.as_secs()
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let restore = s.faultline(&["restore"]).output().expect("restore");
    let said = String::from_utf8_lossy(&restore.stdout).to_string();
    print!(
        "{}",
        said.lines()
            .map(|l| format!("    restore: {l}\n"))
            .collect::<String>()
    );
    if restore.status.code() != Some(0) {
        out.problems.push(format!(
            "`faultline restore` exited {:?}: {}",
            restore.status.code(),
            String::from_utf8_lossy(&restore.stderr).trim()
        ));
    }
    let journal = std::fs::read_to_string(s.journal()).unwrap_or_default();
    if journal.contains("\"node\"") {
        out.problems
            .push(format!("the journal is not empty after restore: {journal}"));
    }
    if !said.contains("cluster restored:") {
        out.problems
            .push("restore did not report the cluster restored".into());
    }
    out
}

#[tokio::test]
#[ignore = "the kill soak: ci/soak runs it on the lab"]
async fn kill_soak() {
    let runs = env_u64("SOAK_RUNS", 20);
    let margin = Duration::from_secs(env_u64("SOAK_MARGIN", 10));
    let seed = env_u64("SOAK_SEED", Utc::now().timestamp_millis().unsigned_abs()) | 1;
    let client = client().await;
    let grace = lab_grace();
    println!(
        "kill soak: {runs} runs, restore margin {}s, grace {}s, seed {seed}",
        margin.as_secs(),
        grace.as_secs()
    );
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for i in 0..runs {
        println!("run {}/{runs}", i + 1);
        let o = one_run(&client, &mut rng, i, margin, grace).await;
        match (&o.recovered, o.problems.is_empty()) {
            (Some(t), true) => println!(
                "  survived: {} recovered {:.1}s after the kill ({:+.1}s from the self-restore deadline)",
                o.name,
                t.as_secs_f64(),
                o.past_deadline_s
            ),
            _ => println!("  FAILED: {} {}", o.name, o.problems.join("; ")),
        }
        outcomes.push(o);
    }
    let survived = outcomes
        .iter()
        .filter(|o| o.recovered.is_some() && o.problems.is_empty())
        .count();
    let worst = outcomes
        .iter()
        .filter_map(|o| o.recovered.map(|t| (t, o)))
        .max_by_key(|(t, _)| *t);
    println!(
        "soak: {survived}/{runs} survived in {:.1} min",
        started.elapsed().as_secs_f64() / 60.0
    );
    if let Some((t, o)) = worst {
        println!(
            "soak: worst time to recovery {:.1}s after the kill ({}, {:+.1}s from its self-restore deadline)",
            t.as_secs_f64(),
            o.name,
            o.past_deadline_s
        );
    }
    assert_eq!(survived as u64, runs, "every run survives its kill");
}
