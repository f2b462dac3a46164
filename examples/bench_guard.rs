//! The benchmarks' regression guard: compares the figures of a `ci/bench` run with the
//! last committed ones (`docs/performance.json`), and writes that file.
//!
//! ```text
//! bench_guard compare docs/performance.json target/bench/figures.txt [--strict]
//! bench_guard record target/bench/figures.txt COMMIT DIRTY LOAD [invalid] > docs/performance.json
//! ```
//!
//! FIGURES.txt holds `figure NAME VALUE UNIT` lines, as `ci/bench` collects them.
//!
//! `compare` prints one line per figure that both runs measured and that describes
//! faultline's own cost, and says which got worse by more than its noise margin:
//!
//! | unit | kind | worse when the new value exceeds |
//! |---|---|---|
//! | MB | memory | old × 1.20 + 5 MB |
//! | MiB | binary size | old × 1.05 + 0.5 MiB |
//! | pods | pods first seen after the start | old (any increase) |
//! | %, ms, s, us | timing (CPU, latency, sync) | old × 2 + 1 %, 5 ms, 1 s, 100 us |
//!
//! Memory, size and pod figures are what this guard is for: the machine's load does not
//! move them. Timing figures on a shared 2-core machine move by more than 2× with a
//! neighbour's compile, so they are flagged but decide the exit status only with
//! `--strict`. Figures about the lab, kubectl or the load generator (`kubectl_`,
//! `apiserver_`, `etcd_`, `kwok_`, `load_`, `churn_`, `write_rtt_`, `scale_`, and
//! `latency_reference_`, the API server seen by a bare client) and counts
//! without a direction (exit codes, ticks, entries, pods listed or left out of a record: they
//! follow the churn's timing) are not compared. Exit status: 0 when
//! nothing decisive got worse, 3 when something did, 2 on a usage or input error.
//!
//! `record` writes the JSON that `compare` reads: the commit measured, whether its tree had
//! changes not committed, the load average around the measurement, when, and every figure.

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

/// One figure: its value and unit.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Figure {
    value: f64,
    unit: String,
}

/// What `docs/performance.json` holds.
#[derive(Debug, Serialize, Deserialize)]
struct Measured {
    /// The commit measured.
    commit: String,
    /// Its work tree had changes not committed.
    dirty: bool,
    /// When the run ended (UTC).
    measured_at: String,
    /// `uptime`'s load averages at the start and the end of the run.
    load_average: String,
    /// Every stage of the run succeeded (an invalid run's figures are not a baseline).
    valid: bool,
    /// Every figure, by name.
    figures: BTreeMap<String, Figure>,
}

/// Reads `figure NAME VALUE UNIT` lines; a name measured twice keeps its last value.
fn read_figures(text: &str) -> BTreeMap<String, Figure> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            if f.next()? != "figure" {
                return None;
            }
            let name = f.next()?.to_string();
            let value = f.next()?.parse().ok()?;
            let unit = f.next().unwrap_or("").to_string();
            Some((name, Figure { value, unit }))
        })
        .collect()
}

/// How a figure is guarded: decisive or not, relative and absolute margin.
struct Margin {
    decisive: bool,
    relative: f64,
    absolute: f64,
}

const NOT_OURS: [&str; 9] = [
    "kubectl_",
    "latency_reference_",
    "apiserver_",
    "etcd_",
    "kwok_",
    "load_",
    "churn_",
    "write_rtt_",
    "scale_",
];

fn margin(name: &str, unit: &str) -> Option<Margin> {
    if NOT_OURS.iter().any(|p| name.starts_with(p)) {
        return None;
    }
    let (decisive, relative, absolute) = match unit {
        "MB" => (true, 0.20, 5.0),
        "MiB" => (true, 0.05, 0.5),
        // Pods first seen after the start: any increase. Other pod counts (listed, left
        // out of the record) follow the churn's timing and have no direction.
        "pods" if name.contains("first_seen_after_start") => (true, 0.0, 0.0),
        "%" => (false, 1.0, 1.0),
        "ms" => (false, 1.0, 5.0),
        "s" => (false, 1.0, 1.0),
        "us" => (false, 1.0, 100.0),
        _ => return None,
    };
    Some(Margin {
        decisive,
        relative,
        absolute,
    })
}

fn compare(baseline: &str, figures: &str, strict: bool) -> Result<bool, String> {
    let old: Measured = serde_json::from_str(
        &std::fs::read_to_string(baseline).map_err(|e| format!("{baseline}: {e}"))?,
    )
    .map_err(|e| format!("{baseline}: {e}"))?;
    let new =
        read_figures(&std::fs::read_to_string(figures).map_err(|e| format!("{figures}: {e}"))?);
    println!(
        "guard: against {} ({}{}, load {}){}",
        baseline,
        old.commit,
        if old.dirty { " with changes" } else { "" },
        old.load_average,
        if old.valid {
            ""
        } else {
            " — that run was INVALID"
        }
    );
    let mut worse_decisive = Vec::new();
    let mut worse_timing = Vec::new();
    let mut compared = 0;
    for (name, now) in &new {
        let Some(before) = old.figures.get(name) else {
            continue;
        };
        let Some(m) = margin(name, &now.unit) else {
            continue;
        };
        if before.unit != now.unit {
            println!(
                "guard: {name}: unit changed ({} → {})",
                before.unit, now.unit
            );
            continue;
        }
        compared += 1;
        let bound = before.value.max(0.0) * (1.0 + m.relative) + m.absolute;
        let change = if before.value.abs() > f64::EPSILON {
            format!(
                "{:+.0}%",
                100.0 * (now.value - before.value) / before.value.abs()
            )
        } else {
            String::new()
        };
        let worse = now.value > bound;
        let line = format!(
            "{name}: {} → {} {} {change} (worse above {bound:.1})",
            before.value, now.value, now.unit
        );
        if worse && m.decisive {
            println!("guard: WORSE  {line}");
            worse_decisive.push(name.clone());
        } else if worse {
            println!("guard: worse (timing, noisy) {line}");
            worse_timing.push(name.clone());
        } else {
            println!("guard: ok     {line}");
        }
    }
    let missing: Vec<&String> = old
        .figures
        .keys()
        .filter(|k| !new.contains_key(*k) && margin(k, &old.figures[*k].unit).is_some())
        .collect();
    if !missing.is_empty() {
        println!(
            "guard: {} figure(s) of the baseline not measured this time (a stage skipped?)",
            missing.len()
        );
    }
    println!(
        "guard: {compared} figure(s) compared; worse beyond the margin: {} decisive (memory, \
         size, pods){}, {} timing{}",
        worse_decisive.len(),
        if worse_decisive.is_empty() {
            String::new()
        } else {
            format!(": {}", worse_decisive.join(", "))
        },
        worse_timing.len(),
        if worse_timing.is_empty() {
            String::new()
        } else {
            format!(": {}", worse_timing.join(", "))
        }
    );
    Ok(worse_decisive.is_empty() && (!strict || worse_timing.is_empty()))
}

fn record(figures: &str, commit: &str, dirty: &str, load: &str, valid: bool) -> Result<(), String> {
    let measured = Measured {
        commit: commit.to_string(),
        dirty: dirty == "dirty" || dirty == "true",
        measured_at: chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        load_average: load.to_string(),
        valid,
        figures: read_figures(
            &std::fs::read_to_string(figures).map_err(|e| format!("{figures}: {e}"))?,
        ),
    };
    let text = serde_json::to_string_pretty(&measured).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["compare", baseline, figures, rest @ ..] => {
            compare(baseline, figures, rest.contains(&"--strict")).map(|ok| {
                if ok {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(3)
                }
            })
        }
        ["record", figures, commit, dirty, load, rest @ ..] => {
            record(figures, commit, dirty, load, !rest.contains(&"invalid"))
                .map(|()| ExitCode::SUCCESS)
        }
        _ => Err(
            "usage: bench_guard compare BASELINE.json FIGURES.txt [--strict] | \
                  bench_guard record FIGURES.txt COMMIT clean|dirty LOAD [invalid]"
                .to_string(),
        ),
    };
    result.unwrap_or_else(|e| {
        eprintln!("bench_guard: {e}");
        ExitCode::from(2)
    })
}
