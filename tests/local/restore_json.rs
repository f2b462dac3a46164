//! `restore -o json` through the built binary, without a cluster: the journal is a file
//! in a temporary directory, the API and the nodes a closed local port. stdout holds one
//! JSON document with the documented fields, progress goes to stderr, and the exit code
//! is the text's.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn faultline(args: &[&str], journal: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(args)
        .env("FAULTLINE_JOURNAL", journal)
        .env_remove("KUBECONFIG")
        .env_remove("FAULTLINE_INVENTORY")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("faultline runs")
}

/// stdout as JSON, failing with both streams shown when it is not.
fn document(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a port")
}

/// An inventory of cluster `gone` whose API and node `w1` are a closed local port.
fn unreachable_inventory(dir: &Path) -> String {
    let port = closed_port();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    \
             server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\n\
             users:\n- name: u\n  user:\n    token: not-a-secret\ncontexts:\n- name: gone\n  \
             context: {{cluster: gone, user: u}}\ncurrent-context: gone\n"
        ),
    )
    .expect("kubeconfig");
    let inv = dir.join("inventory.yaml");
    std::fs::write(
        &inv,
        format!(
            "cluster:\n  name: gone\n  kubeconfig: {kc}\n  context: gone\n  \
             discoverApiServers: false\nprofile: kubeadm\n\
             ssh: {{port: {port}, connectTimeout: 1s, knownHosts: {dir}/known_hosts}}\n\
             nodes:\n  - {{name: w1, address: 127.0.0.1, roles: [worker]}}\n",
            kc = kubeconfig.display(),
            dir = dir.display(),
        ),
    )
    .expect("inventory");
    inv.to_str().expect("utf-8").to_owned()
}

#[test]
fn nothing_to_restore_is_one_document_on_stdout_and_exit_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("absent/journal.json");
    let path = journal.to_str().expect("utf-8");
    let inv = "fixtures/inventory/kubeadm.yaml";
    let out = faultline(
        &["restore", "-i", inv, "--journal", path, "-o", "json"],
        &journal,
    );
    let doc = document(&out);
    assert_eq!(out.status.code(), Some(0), "{doc}");
    assert_eq!(doc["exitCode"], 0);
    assert_eq!(doc["outcome"], "nothing-to-restore");
    assert_eq!(doc["cluster"], "prod-kubeadm");
    assert_eq!(doc["journal"]["path"], path);
    assert_eq!(doc["journal"]["faults"], serde_json::json!([]));
    assert_eq!(doc["journal"]["runs"], serde_json::json!([]));
    assert_eq!(doc["undos"], serde_json::json!([]));
    for absent in ["comparison", "nodeAccessPods", "error"] {
        assert!(doc.get(absent).is_none(), "{absent} in {doc}");
    }
    // What the text says goes to stderr: stdout holds the document alone.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nothing to restore"), "{stderr}");

    // `-o text` is the default, on stdout, with the same exit code; the journal read from
    // FAULTLINE_JOURNAL as from the flag.
    for args in [
        &["restore", "-i", inv][..],
        &["restore", "-i", inv, "-o", "text"],
    ] {
        let out = faultline(args, &journal);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        assert!(
            stdout.contains(&format!("journal: {path} (0 fault(s)")),
            "{stdout}"
        );
        assert!(stdout.contains("nothing to restore"), "{stdout}");
    }
}

#[test]
fn an_undo_that_fails_is_failed_with_its_error_and_exit_1_as_in_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = unreachable_inventory(dir.path());
    let journal = dir.path().join("journal.json");
    std::fs::write(
        &journal,
        r#"{"version": 1, "faults": [{"id": "fl20261129000000001-1", "cluster": "gone",
            "node": "w1", "fault": "kubelet-stop", "undo": {"node": "kubelet-start"},
            "injectedAt": "2026-11-29T00:00:00Z"}]}"#,
    )
    .expect("journal");
    let out = faultline(&["restore", "-i", &inv, "-o", "json"], &journal);
    let doc = document(&out);
    assert_eq!(out.status.code(), Some(1), "{doc}");
    assert_eq!(doc["exitCode"], 1);
    assert_eq!(doc["outcome"], "not-restored");
    assert_eq!(doc["cluster"], "gone");
    assert_eq!(
        doc["journal"]["runs"],
        serde_json::json!(["fl20261129000000001"])
    );
    let fault = &doc["journal"]["faults"][0];
    assert_eq!(
        (&fault["node"], &fault["fault"], &fault["run"]),
        (
            &"w1".into(),
            &"kubelet-stop".into(),
            &"fl20261129000000001".into()
        ),
        "{doc}"
    );
    let undos = doc["undos"].as_array().expect("undos");
    assert_eq!(undos.len(), 1, "{doc}");
    assert_eq!(undos[0]["outcome"], "failed");
    assert_eq!(undos[0]["id"], "fl20261129000000001-1");
    assert_eq!(undos[0]["attempts"], 3);
    let error = undos[0]["error"].as_str().expect("an error");
    assert!(!error.is_empty(), "{doc}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NOT restored kubelet-stop on w1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The fault stays journaled; the text gives the same exit code.
    let text = faultline(&["restore", "-i", &inv], &journal);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("NOT restored kubelet-stop on w1"),
        "{stdout}"
    );
    assert!(stdout.contains("0 restored, 1 left in"), "{stdout}");
}
