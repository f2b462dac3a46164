//! What a newcomer meets first, through the built binary: the README's one-minute offline
//! tour (its commands extracted from README.md and run, so it cannot rot), the copyable
//! inventories of `fixtures/inventory/` (one per distribution), the duration spellings
//! docs/inventory.md lists, and `-n` on `validate` and `rehearse`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cli::faultline;
use faultline::inventory::{CommandKey, PowerKey};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The commands of the README's tour: the `sh` block after the `<!-- tour -->` marker,
/// each line `target/release/faultline ARGS  # exit N: …` (exit 0 when not said).
fn tour_commands() -> Vec<(Vec<String>, i32)> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let block = readme
        .split("<!-- tour -->")
        .nth(1)
        .expect("README.md marks its tour with <!-- tour -->")
        .split("```sh\n")
        .nth(1)
        .expect("a sh block after the marker")
        .split("```")
        .next()
        .unwrap();
    block
        .lines()
        // `cargo build --release` is the build this test already has.
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .filter(|l| !l.starts_with("cargo "))
        .map(|line| {
            let (command, comment) = line.split_once('#').unwrap_or((line, ""));
            let code = comment
                .trim()
                .strip_prefix("exit ")
                .and_then(|c| c.split(|ch: char| !ch.is_ascii_digit()).next())
                .map_or(0, |c| c.parse().expect("an exit code"));
            let words: Vec<String> = command.split_whitespace().map(String::from).collect();
            (words, code)
        })
        .collect()
}

#[test]
fn every_command_of_the_readme_tour_runs_offline_as_it_says() {
    let commands = tour_commands();
    let names: Vec<&str> = commands.iter().map(|(w, _)| w[1].as_str()).collect();
    assert_eq!(
        names,
        [
            "list", "validate", "plan", "rehearse", "report", "explain", "compare"
        ],
        "the tour shows the seven offline commands"
    );
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        readme.contains("No root, no cluster, no SSH: seven commands"),
        "the README counts the tour's commands right"
    );
    let tracked = Command::new("git")
        .args(["ls-files"])
        .current_dir(repo())
        .output()
        .expect("git runs");
    let tracked = String::from_utf8_lossy(&tracked.stdout).into_owned();
    for (words, code) in commands {
        assert_eq!(words[0], "target/release/faultline", "{words:?}");
        // Everything it reads is in a fresh clone: committed, not built or generated.
        for arg in words[1..].iter().filter(|a| a.contains('/')) {
            assert!(
                tracked
                    .lines()
                    .any(|f| f == arg.as_str() || f.starts_with(arg.as_str())),
                "{arg} is not committed"
            );
        }
        let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        let started = std::time::Instant::now();
        let out = faultline(&args);
        assert_eq!(out.status.code(), Some(code), "{words:?}");
        assert!(!out.stdout.is_empty(), "{words:?} printed nothing");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{words:?} took {:?}: the tour is a minute",
            started.elapsed()
        );
    }
}

const DISTRIBUTIONS: [&str; 6] = ["kubeadm", "k3s", "rke2", "kind", "k3d", "openshift"];

#[test]
fn each_distributions_inventory_loads_with_every_node_reachable_and_stoppable() {
    for name in DISTRIBUTIONS {
        let path = repo().join(format!("fixtures/inventory/{name}.yaml"));
        let inv = faultline::inventory::Inventory::load(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(inv.nodes().len(), 3, "{name}: three nodes");
        let roles = |role: &str| {
            inv.nodes()
                .iter()
                .filter(|n| n.roles.iter().any(|r| r == role))
                .count()
        };
        assert_eq!(roles("control-plane"), 1, "{name}");
        assert_eq!(roles("worker"), 2, "{name}");
        for node in inv.nodes() {
            // k3d runs k3s as the container's PID 1: no kubelet to stop alone.
            if name != "k3d" {
                assert!(
                    node.commands.has(CommandKey::KubeletStop),
                    "{name}: {} has no kubelet stop",
                    node.name
                );
            }
        }
    }
    // The ones reached over SSH as a user that is not root say so, with sudo.
    for name in ["kubeadm", "k3s", "rke2"] {
        let path = repo().join(format!("fixtures/inventory/{name}.yaml"));
        let inv = faultline::inventory::Inventory::load(&path).unwrap();
        for node in inv.nodes() {
            assert_ne!(node.ssh.user, "root", "{name}");
            assert!(node.ssh.sudo, "{name}: {}", node.name);
        }
    }
    // The ones with a BMC can power a node back on.
    for name in ["kubeadm", "rke2", "kind", "k3d"] {
        let path = repo().join(format!("fixtures/inventory/{name}.yaml"));
        let inv = faultline::inventory::Inventory::load(&path).unwrap();
        assert!(
            inv.nodes().iter().all(|n| n.power.has(PowerKey::On)),
            "{name}"
        );
    }
}

#[test]
fn the_offline_plan_reads_each_distributions_inventory() {
    for name in DISTRIBUTIONS {
        let inventory = format!("fixtures/inventory/{name}.yaml");
        // No cluster here: the plan is offline, with the inventory's nodes and commands.
        let out = faultline(&[
            "plan",
            "experiments/kubelet-stop-within-toleration.yaml",
            "-i",
            &inventory,
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("OFFLINE"), "{name}: {text}");
        if name == "k3d" {
            // k3s runs the kubelet inside its own process: no command stops it alone, and
            // the plan says so with the exit code a run would have.
            assert_eq!(out.status.code(), Some(2), "{name}: {text}");
            assert!(
                text.contains("step `stop kubelet` cannot run: node `k3d-demo-agent-0`: no `commands.kubeletStop` configured"),
                "{name}: {text}"
            );
        } else {
            assert_eq!(out.status.code(), Some(0), "{name}: {text}");
        }
    }
}

/// docs/inventory.md lists the duration spellings; each one is accepted in an inventory.
#[test]
fn every_duration_spelling_docs_inventory_lists_is_accepted() {
    let doc = std::fs::read_to_string(repo().join("docs/inventory.md")).unwrap();
    let block = doc
        .split("Durations are written with a unit")
        .nth(1)
        .expect("the durations paragraph")
        .split("```\n")
        .nth(1)
        .expect("a block of spellings");
    let spellings: Vec<&str> = block
        .split("   ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    for wanted in ["5 mins", "1m 30s", "10 s", "1m30s", "1 hour 30 minutes"] {
        assert!(
            spellings.contains(&wanted),
            "{wanted} not listed: {spellings:?}"
        );
    }
    let lab = std::fs::read_to_string(repo().join("fixtures/inventory/lab.yaml")).unwrap();
    for s in spellings {
        let text = lab.replace("commandTimeout: 60s", &format!("commandTimeout: {s}"));
        assert_ne!(text, lab);
        faultline::inventory::Inventory::parse(&text, Path::new("lab.yaml"))
            .unwrap_or_else(|e| panic!("`{s}`: {e}"));
    }
}

#[test]
fn validate_and_rehearse_take_n_and_refuse_a_setup_that_creates_the_namespace() {
    // The shipped experiment's setup creates Namespace faultline-lab: -n would apply into
    // one namespace and look in another.
    let exp = "experiments/kubelet-stop-past-toleration.yaml";
    let out = faultline(&["validate", exp, "-n", "shop"]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("00-namespace.yaml creates Namespace `faultline-lab` itself"),
        "{text}"
    );
    let out = faultline(&[
        "rehearse",
        exp,
        "--record",
        "fixtures/records/kubelet-stop-past-toleration.json",
        "-n",
        "shop",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("creates Namespace `faultline-lab` itself"),
        "{err}"
    );
    // Without a setup, -n moves the experiment: valid, and said where.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("no-setup.yaml");
    std::fs::write(
        &file,
        "name: no-setup\ndescription: the web pods of the shop\nnamespace: faultline-lab\n\
         targets:\n  victim: {role: worker, runningPodsOf: deployment/web, count: 1}\n\
         steps:\n  - {name: stop, at: 0s, do: kubelet-stop, target: victim}\n\
         expect:\n  - name: node goes Unknown\n    node: victim\n    becomes: Unknown\n    within: grace + 10s\n",
    )
    .unwrap();
    let out = faultline(&["validate", file.to_str().unwrap(), "-n", "shop"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("in namespace shop)"));
    let out = faultline(&["validate", file.to_str().unwrap(), "-n", "Shop"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_readme_counts_the_broken_experiment_files_right() {
    let broken = std::fs::read_dir(repo().join("fixtures/experiments/invalid"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        })
        .count();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let said = format!("`fixtures/experiments/invalid/` holds {broken} broken files");
    assert!(readme.contains(&said), "README.md should say: {said}");
}
