//! The real binary on records with a roll: `faultline report` (terminal, JUnit, Markdown)
//! and `faultline compare` (text and `-o json`) of a roll of reboots over three workers,
//! the second slower after "an upgrade". No record under `fixtures/records` has a roll
//! yet (they were made before rolls existed): these records are made here, through the
//! library, from a committed run re-dressed as a roll (its experiment the expanded roll,
//! its timeline three reboots in turn, its roll figures measured from that timeline).

use std::path::Path;

use chrono::Utc;
use faultline::record::RunRecord;
use faultline::timeline::{ConditionStatus, Entry, Event, NodeState, StepPhase, Timeline};

use crate::cli::faultline;

const NODES: [&str; 3] = ["lab-worker-1", "lab-worker-2", "lab-worker-3"];

fn push(t: &mut Timeline, offset_ms: i64, event: Event) {
    t.entries.push(Entry {
        offset_ms,
        wall: Utc::now(),
        event,
    });
}

fn node(name: &str, ready: ConditionStatus) -> Event {
    Event::Node {
        name: name.into(),
        before: None,
        after: Some(NodeState {
            ready,
            ready_since: None,
            taints: Vec::new(),
            unschedulable: false,
            zone: None,
            shutting_down: false,
        }),
    }
}

/// A run of `roll reboots` over the three workers, each NotReady 20 s after its step and
/// Ready again `back[i]` seconds after it, the next node 5 s later; written to `path`.
fn roll_record(path: &Path, back: [i64; 3]) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut record =
        RunRecord::load(&repo.join("fixtures/records/kubelet-stop-within-toleration.json"))
            .expect("record");
    // The experiment as a run records a roll: one step per node, `<step> (<node>)` on
    // `workers@<node>` (what `experiment::roll` expands it to once the nodes are known).
    let template = record.experiment.steps[0].clone();
    record.experiment.steps = NODES
        .iter()
        .map(|n| {
            let mut s = template.clone();
            s.name = format!("roll reboots ({n})");
            s.target = Some(format!("workers@{n}"));
            s.timeout = std::time::Duration::from_secs(300);
            s
        })
        .collect();
    let mut t = Timeline::new(Utc::now());
    for n in NODES {
        push(&mut t, 0, node(n, ConditionStatus::True));
    }
    let mut at = 1_000;
    for (i, n) in NODES.iter().enumerate() {
        push(
            &mut t,
            at,
            Event::Step {
                step: format!("roll reboots ({n})"),
                action: "reboot".into(),
                node: Some(n.to_string()),
                phase: StepPhase::Issued,
            },
        );
        push(&mut t, at + 20_000, node(n, ConditionStatus::Unknown));
        push(&mut t, at + back[i] * 1000, node(n, ConditionStatus::True));
        at += back[i] * 1000 + 5_000;
    }
    push(
        &mut t,
        at + 10_000,
        Event::Note {
            message: "end".into(),
        },
    );
    record.timeline = t;
    record.rolls = faultline::judge::roll_figures(&record.experiment, &record.timeline);
    record.save(path).expect("saved");
}

#[test]
fn report_shows_each_node_of_the_roll_and_junit_a_case_per_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("roll.json");
    roll_record(&path, [40, 360, 42]);
    let path = path.to_str().expect("utf-8");

    let out = faultline(&["report", path]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("roll `roll reboots` (timeout 5m 00s), each stage from the node's own step:"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("lab-worker-2 "))
        .unwrap_or_else(|| panic!("no row of lab-worker-2: {text}"));
    assert!(row.contains(" 20.0s") && row.contains(" 360.0s"), "{row}");
    assert!(
        text.contains("LATE: lab-worker-2 Ready again 360.0s after its step (timeout 5m 00s)"),
        "{text}"
    );

    let out = faultline(&["report", path, "-o", "junit"]);
    let xml = String::from_utf8_lossy(&out.stdout);
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
    let suite = doc
        .descendants()
        .find(|n| {
            n.has_tag_name("testsuite")
                && n.attribute("name")
                    .is_some_and(|s| s.ends_with("/ roll roll reboots"))
        })
        .unwrap_or_else(|| panic!("no roll suite: {xml}"));
    assert_eq!(suite.attribute("tests"), Some("3"));
    assert_eq!(suite.attribute("failures"), Some("1"));
    let failed: Vec<&str> = suite
        .children()
        .filter(|c| c.children().any(|f| f.has_tag_name("failure")))
        .filter_map(|c| c.attribute("name"))
        .collect();
    assert_eq!(failed, ["lab-worker-2 back within the roll's timeout"]);

    let out = faultline(&["report", path, "-o", "markdown"]);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        md.contains("**Roll** roll reboots (timeout 5m 00s)"),
        "{md}"
    );
}

#[test]
fn compare_names_the_node_and_stage_that_got_slower_in_text_and_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let before = dir.path().join("before.json");
    let after = dir.path().join("after.json");
    roll_record(&before, [40, 40, 40]);
    roll_record(&after, [40, 95, 40]);
    let (before, after) = (
        before.to_str().expect("utf-8"),
        after.to_str().expect("utf-8"),
    );

    let out = faultline(&["compare", before, after]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("rolls, node by node (after each node's own step):"),
        "{text}"
    );
    let regression = text
        .lines()
        .skip_while(|l| !l.starts_with("== regressions"))
        .find(|l| l.contains("roll `roll reboots`, lab-worker-2: Ready again"))
        .unwrap_or_else(|| panic!("no regression of lab-worker-2: {text}"));
    assert!(regression.contains("SLOWER"), "{regression}");
    assert!(text.contains("REGRESSED: 1 regression(s)"), "{text}");

    let out = faultline(&["compare", before, after, "-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["exit_code"], 1);
    assert_eq!(
        v["regressions"][0]["figure"],
        "roll `roll reboots`, lab-worker-2: Ready again"
    );
    let w2 = &v["experiments"][0]["rolls"][0]["nodes"][1];
    assert_eq!(w2["node"], "lab-worker-2");

    // The same record on both sides: nothing regressed, and the JSON says so.
    let out = faultline(&["compare", before, before, "-o", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["regressions"].as_array().map(Vec::len), Some(0));
}

/// `rehearse` re-judges a recording through the run's own loop: the roll file, expanded on
/// the record's nodes, issues each node's step when the record's node came back, and the
/// rehearsal measures its roll as a run does (the figures of its own timeline), close to
/// what the record holds: each step issued within the rehearsal's tick of the recorded one
/// (for the nodes the next node's step closed); the last node measured too, as observation
/// waits for it to be back once all is decided.
#[test]
fn a_rehearsal_of_the_roll_measures_the_nodes_as_the_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("roll.json");
    roll_record(&path, [40, 95, 42]);
    let mut record = RunRecord::load(&path).expect("record");
    record.start_ms = Some(0);
    record.observed_until_ms = None;
    record.targets = NODES
        .iter()
        .map(|n| (format!("workers@{n}"), vec![n.to_string()]))
        .chain([(
            "workers".to_string(),
            NODES.iter().map(|n| n.to_string()).collect(),
        )])
        .collect();
    let exp = faultline::experiment::parse(
        &format!(
            "name: {}
description: the roll rehearsed
targets:
  workers: {{names: [{}]}}
observe: {{for: 1m}}
steps:
  - {{name: roll reboots, at: 1s, do: reboot, target: workers, roll: {{settle: 5s, timeout: 5m}}}}
expect:
  - {{name: back, node: workers, eventually: Ready}}
",
            record.experiment.name,
            NODES.join(", ")
        ),
        Path::new("roll.yaml"),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let r =
        faultline::run::rehearse::rehearse(&exp, &record, false).unwrap_or_else(|e| panic!("{e}"));
    let issued: Vec<(String, Option<i64>, Option<i64>)> = r
        .steps
        .iter()
        .map(|s| (s.name.clone(), s.at_ms, s.recorded_ms))
        .collect();
    assert_eq!(r.rolls.len(), 1, "{issued:?} {}", r.ended);
    let (rehearsed, recorded) = (&r.rolls[0], &record.rolls[0]);
    assert_eq!(rehearsed.roll, "roll reboots");
    // The same measure as a report's of the rehearsed timeline; where the last node's
    // window closes (observation ended a tick, 100 ms, after it was seen back: its
    // timeline has no entry there), within that tick.
    let expanded: Vec<_> = r.steps.iter().map(|s| s.name.clone()).collect();
    let mut as_run = record.experiment.clone();
    as_run.steps.retain(|s| expanded.contains(&s.name));
    let again = faultline::judge::roll_figures(&as_run, &r.timeline.until(r.observed_until_ms));
    assert_eq!(r.rolls.len(), again.len());
    let tick = |a: Option<i64>, b: Option<i64>| a.zip(b).is_some_and(|(a, b)| (a - b).abs() <= 100);
    for (x, y) in r.rolls[0].nodes.iter().zip(&again[0].nodes) {
        assert_eq!((&x.node, x.issued_ms), (&y.node, y.issued_ms));
        assert_eq!(x.stages(), y.stages(), "{x:?} vs {y:?}");
        assert!(tick(x.watched_ms, y.watched_ms), "{x:?} vs {y:?}");
    }
    assert!(
        tick(r.rolls[0].until_ms, again[0].until_ms),
        "{:?}",
        r.rolls
    );
    // Close to the record: each stage within the rehearsal's tick (100 ms) of the run's.
    let near = |a: Option<i64>, b: Option<i64>| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 200,
        (a, b) => a == b,
    };
    for (x, y) in rehearsed.nodes[..2].iter().zip(&recorded.nodes[..2]) {
        assert_eq!(x.node, y.node);
        for ((key, _, a), (_, _, b)) in x.stages().into_iter().zip(y.stages()) {
            assert!(near(a, b), "{} {key}: {a:?} vs {b:?} ({issued:?})", x.node);
        }
        assert!(near(x.issued_ms, y.issued_ms), "{issued:?}");
    }
    assert!(near(rehearsed.nodes[1].ready_again_ms, Some(95_000)));
    // The last node too: observation waited for it to be back (within `observe.for`).
    assert!(
        rehearsed.nodes[2].ready_again_ms.is_some(),
        "{:?} {}",
        rehearsed.nodes[2],
        r.ended
    );
}

/// A real roll, recorded on the lab (2026-11-29): `experiments/rolling-upgrade-workers.yaml`
/// drained, rebooted and uncordoned the three workers in turn. The report's roll table has
/// them in that order, each issued after the one before was back (and 30 s), each drained
/// at once; JUnit has a case per worker, all passed; the record's figures are what the
/// report computes again from its timeline.
#[test]
fn a_recorded_sequence_roll_reads_worker_by_worker() {
    let path = "fixtures/records/rolls/rolling-upgrade-workers.json";
    let record = RunRecord::load(Path::new(env!("CARGO_MANIFEST_DIR")).join(path).as_path())
        .expect("the recorded roll");
    let roll = record.rolls.first().expect("its roll's figures");
    let nodes: Vec<&str> = roll.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(nodes, NODES);
    let issued: Vec<i64> = roll
        .nodes
        .iter()
        .map(|n| n.issued_ms.expect("issued"))
        .collect();
    assert!(
        issued.windows(2).all(|w| w[1] - w[0] >= 30_000),
        "each worker 30 s or more after the one before: {issued:?}"
    );
    assert!(roll.nodes.iter().all(|n| n.drained_ms.is_some()));
    assert_eq!(
        record.rolls,
        faultline::judge::roll_figures(
            &record.experiment,
            &record
                .timeline
                .until(record.observed_until_ms.expect("observed"))
        )
    );
    let text = String::from_utf8_lossy(&faultline(&["report", path]).stdout).into_owned();
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| NODES.iter().any(|n| l.trim_start().starts_with(n)))
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    let junit =
        String::from_utf8_lossy(&faultline(&["report", path, "-o", "junit"]).stdout).into_owned();
    let doc = roxmltree::Document::parse(&junit).expect("JUnit XML");
    let suite = doc
        .descendants()
        .find(|n| {
            n.has_tag_name("testsuite")
                && n.attribute("name") == Some("rolling-upgrade-workers / roll upgrade workers")
        })
        .expect("the roll's suite");
    let cases: Vec<_> = suite
        .children()
        .filter(|c| c.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 3);
    assert!(cases.iter().all(|c| {
        c.children()
            .all(|x| !x.has_tag_name("failure") && !x.has_tag_name("skipped"))
    }));
}

/// Issue 46, item 4: one JUnit case per node per expectation. The recorded roll, judged
/// again (its members now keep their own outcome and node), gives in the roll's suite,
/// after each worker's "back within the roll's timeout", a case `<worker>: <expectation>`
/// for every expectation with a member on that worker: the drains' evictions of its web
/// pods and its agent pod kept. A member failing on one worker fails that worker's case only.
#[test]
fn a_roll_has_a_junit_case_per_worker_per_expectation() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut record =
        RunRecord::load(&repo.join("fixtures/records/rolls/rolling-upgrade-workers.json"))
            .expect("the recorded roll");
    let experiment = record.experiment.clone();
    record.judged_against(experiment.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rejudged.json");
    std::fs::write(&path, serde_json::to_string(&record).expect("json")).expect("write");
    let cases = |path: &Path| {
        let out = faultline(&["report", path.to_str().expect("utf-8"), "-o", "junit"]);
        let junit = String::from_utf8_lossy(&out.stdout).into_owned();
        let doc = roxmltree::Document::parse(&junit).expect("JUnit XML");
        let suite = doc
            .descendants()
            .find(|n| {
                n.has_tag_name("testsuite")
                    && n.attribute("name") == Some("rolling-upgrade-workers / roll upgrade workers")
            })
            .expect("the roll's suite");
        suite
            .children()
            .filter(|c| c.has_tag_name("testcase"))
            .map(|c| {
                let failed = c.children().any(|x| x.has_tag_name("failure"));
                (c.attribute("name").unwrap_or_default().to_string(), failed)
            })
            .collect::<Vec<_>>()
    };
    let got = cases(&path);
    let mut want = Vec::new();
    for n in NODES {
        want.push((format!("{n} back within the roll's timeout"), false));
        for v in &experiment.expectations {
            want.push((format!("{n}: {}", v.name), false));
        }
    }
    assert_eq!(got, want);

    // The second worker's web pods said to have stayed: its case fails, the others hold.
    let mut broken = record.clone();
    let evicted = &mut broken.verdicts[0];
    let mut failed_one = false;
    for m in &mut evicted.members {
        if m.node.as_deref() == Some(NODES[1]) {
            m.outcome = Some(faultline::judge::Outcome::Failed);
            failed_one = true;
        }
    }
    assert!(
        failed_one,
        "a web pod on {}: {:?}",
        NODES[1], evicted.members
    );
    let path = dir.path().join("broken.json");
    std::fs::write(&path, serde_json::to_string(&broken).expect("json")).expect("write");
    let failed: Vec<String> = cases(&path)
        .into_iter()
        .filter(|(_, f)| *f)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        failed,
        vec![format!("{}: {}", NODES[1], experiment.expectations[0].name)]
    );
}
