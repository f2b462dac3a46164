//! The real binary: `faultline compare` on the committed records (against themselves, and
//! against a copy "made before an upgrade" in the test), its tolerance errors and reports;
//! `report` and `rehearse` on a series file.

use std::path::Path;
use std::process::Output;

use crate::cli::faultline;
use crate::records_support::*;
use faultline::judge::Outcome;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A report directory holding every committed record as if made on an older Kubernetes
/// whose grace period was 10 s shorter: each node noticed 10 s earlier.
fn before_upgrade(dir: &Path) {
    for s in committed() {
        let r = upgraded(s.first().clone(), "v1.32.9", -10_000);
        r.save(&dir.join(format!("{}.json", s.name()))).unwrap();
    }
}

#[test]
fn the_committed_runs_compared_with_themselves_exit_0() {
    let out = faultline(&["compare", "fixtures/records", "fixtures/records"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.ends_with(
            "NO REGRESSION: 4 experiment(s) compared, every change within the tolerance\n"
        ),
        "{text}"
    );
    // One record against itself too, under no tolerance at all.
    let one = "fixtures/records/kubelet-stop-within-toleration.json";
    let out = faultline(&["compare", one, one, "--tolerance", "0%"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_node_noticed_ten_seconds_later_exits_1_under_a_tight_tolerance() {
    let dir = tempfile::tempdir().unwrap();
    before_upgrade(dir.path());
    let base = dir.path().to_str().unwrap();
    let out = faultline(&["compare", base, "fixtures/records", "--tolerance", "5%"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains(
            "  changed:     Kubernetes v1.32.9 → v1.33.13; node-monitor grace period 10s → 20s"
        ),
        "{text}"
    );
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("node NotReady"))
        .collect();
    assert_eq!(rows.len(), 4, "one per experiment: {text}");
    for row in rows {
        assert!(row.contains("+10.0s") && row.ends_with("SLOWER"), "{row}");
    }
    assert!(
        text.lines().last().unwrap().starts_with("REGRESSED: "),
        "{text}"
    );
    // Loose enough, the same move is within the tolerance.
    let out = faultline(&["compare", base, "fixtures/records", "--tolerance", "200%"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn the_comparison_is_written_as_markdown_html_and_junit() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    std::fs::create_dir(&base).unwrap();
    before_upgrade(&base);
    let out_dir = dir.path().join("out");
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "# job summary\n").unwrap();
    let out = faultline(&[
        "compare",
        base.to_str().unwrap(),
        "fixtures/records",
        "--out",
        out_dir.to_str().unwrap(),
        "--summary",
        summary.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let junit = std::fs::read_to_string(out_dir.join("compare.junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&junit).expect("well-formed JUnit");
    let suites = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .count();
    assert_eq!(suites, 4);
    let md = std::fs::read_to_string(out_dir.join("compare.md")).unwrap();
    assert!(md.starts_with("## **REGRESSED** "), "{md}");
    let appended = std::fs::read_to_string(&summary).unwrap();
    assert_eq!(appended, format!("# job summary\n\n{md}"));
    let html = std::fs::read_to_string(out_dir.join("compare.html")).unwrap();
    assert_eq!(
        html.matches("<svg ").count(),
        8,
        "two timelines per experiment"
    );
}

#[test]
fn bad_tolerances_and_paths_are_clear_errors() {
    let records = "fixtures/records";
    let out = faultline(&["compare", records, records, "--tolerance", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "invalid value '10' for '--tolerance <[KEY=]VALUE>': `10` has no unit: write a percentage (10%) or a duration (10s)"
        ),
        "{}",
        stderr(&out)
    );
    let out = faultline(&[
        "compare",
        records,
        records,
        "--tolerance",
        "node_not_redy=2s",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(
            "--tolerance `node_not_redy=…`: no recovery figure or expectation of that name"
        ),
        "{}",
        stderr(&out)
    );
    let out = faultline(&[
        "compare",
        records,
        records,
        "--tolerance",
        "5%",
        "--tolerance",
        "6%",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("relative tolerance of every figure twice"));
    let out = faultline(&["compare", "no/such/dir", records]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error: no/such/dir: "),
        "{}",
        stderr(&out)
    );
    let out = faultline(&["compare", "experiments", records]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no run records (*.json) in this directory"),
        "{}",
        stderr(&out)
    );
    // `--tolerance` belongs to `--baseline` in `run`.
    let out = faultline(&[
        "run",
        "experiments/reboot.yaml",
        "-i",
        "fixtures/inventory/lab.yaml",
        "--tolerance",
        "5%",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--baseline"), "{}", stderr(&out));
    // A baseline in the directory the run writes to would be overwritten by it.
    let out = faultline(&[
        "run",
        "experiments/reboot.yaml",
        "-i",
        "fixtures/inventory/lab.yaml",
        "--baseline",
        "fixtures/records",
        // The old spelling of `--out`, kept as an alias for existing scripts.
        "--reports",
        "fixtures/records",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("would overwrite the baseline; give --out another directory"),
        "{}",
        stderr(&out)
    );
    // A wrong baseline is an error before anything runs.
    let out = faultline(&[
        "run",
        "experiments/reboot.yaml",
        "-i",
        "fixtures/inventory/lab.yaml",
        "--baseline",
        "no/such/reports",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error: no/such/reports: "),
        "{}",
        stderr(&out)
    );
}

/// The upgrade comparison read at a glance: a list of regressions (one per line: figure,
/// baseline, now, change) in every format, labelled min / median / max columns, and the
/// tolerance and noise floor stated.
#[test]
fn the_regressions_are_a_list_one_per_line_in_every_format() {
    let old = "fixtures/records/upgrade/v1.31.4";
    let new = "fixtures/records/upgrade/v1.33.13";
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let out = faultline(&["compare", old, new]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    for line in text.lines() {
        assert!(
            line.chars().count() <= 160,
            "a line of {} chars: {line}",
            line.chars().count()
        );
    }
    assert!(
        text.contains("  noise floor: a move of the median under 1s or under 20% of the baseline's median is noise, never a regression\n"),
        "{text}"
    );
    assert!(
        text.contains("baseline min / median / max  now min / median / max"),
        "{text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == "== regressions, one per line")
        .expect("a regression list");
    assert_eq!(
        lines[start + 1]
            .split("  ")
            .filter(|c| !c.is_empty())
            .map(str::trim)
            .collect::<Vec<_>>(),
        [
            "experiment",
            "figure",
            "baseline (median)",
            "now (median)",
            "change"
        ]
    );
    let rows = &lines[start + 2..lines.len() - 1];
    let last = lines.last().unwrap();
    assert_eq!(
        *last,
        format!(
            "REGRESSED: {} regression(s) beyond the tolerance and the noise floor",
            rows.len()
        )
    );
    // Node NotReady moved with the grace period (40 s → 50 s): two experiments, each its
    // recovery figure and its transition; the node-Ready-again moves (+18 %) are noise.
    assert_eq!(rows.len(), 9, "{text}");
    let row = rows
        .iter()
        .find(|r| r.contains(" node NotReady ") && r.starts_with("  kubelet-stop-within"))
        .expect("node NotReady listed");
    let cells: Vec<&str> = row
        .split("  ")
        .filter(|c| !c.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        cells,
        [
            "kubelet-stop-within-toleration",
            "node NotReady",
            "38.2s",
            "49.4s",
            "+11.2s (+29.4%) SLOWER"
        ]
    );
    assert!(
        !rows.iter().any(|r| r.contains("node Ready again")),
        "under the noise floor: {text}"
    );
    let out = faultline(&["compare", old, new, "--out", out_dir]);
    assert_eq!(out.status.code(), Some(1));
    let md = std::fs::read_to_string(dir.path().join("compare.md")).unwrap();
    assert!(
        md.contains("| Experiment | Figure | Baseline (median) | Now (median) | Change |\n| --- | --- | --- | --- | --- |\n| kubelet-stop-within-toleration | node NotReady | 38.2s | 49.4s | +11.2s (+29.4%) SLOWER |\n"),
        "{md}"
    );
    assert!(md.contains("| Figure | Baseline min / median / max | Now min / median / max | Median moved | % | Verdict |"), "{md}");
    assert!(
        md.contains("Noise floor: a move of the median under 1s"),
        "{md}"
    );
    assert!(md.lines().all(|l| l.chars().count() < 300), "{md}");
    let html = std::fs::read_to_string(dir.path().join("compare.html")).unwrap();
    let banner = html
        .split("<table class=\"regressions\">")
        .nth(1)
        .expect("a regression table");
    let banner = banner.split("</table>").next().unwrap();
    assert_eq!(
        banner.matches("<tr class=\"Failed\">").count(),
        9,
        "{banner}"
    );
    assert!(html.contains("<th>baseline min / median / max</th>"));
}

/// A move under the noise floor is noise, not a regression; the floor is a flag, shown in
/// the output, and a floor given twice is an error.
#[test]
fn the_noise_floor_is_a_flag_and_a_small_move_is_noise() {
    let dir = tempfile::tempdir().unwrap();
    // The committed runs as if the baseline's nodes were noticed 3 s earlier: now is 3 s
    // (about 15 %) later, beyond the default tolerance (10 % or 1 s) but under the floor.
    for s in committed() {
        let r = upgraded(s.first().clone(), "v1.32.9", -3_000);
        r.save(&dir.path().join(format!("{}.json", s.name())))
            .unwrap();
    }
    let base = dir.path().to_str().unwrap();
    let out = faultline(&["compare", base, "fixtures/records"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("node NotReady") && l.ends_with("noise")),
        "{text}"
    );
    let out = faultline(&["compare", base, "fixtures/records", "--noise-floor", "0%"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "  noise floor: a move of the median under 1s is noise, never a regression\n"
        ),
        "{text}"
    );
    let out = faultline(&[
        "compare",
        base,
        "fixtures/records",
        "--noise-floor",
        "1s",
        "--noise-floor",
        "2s",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).trim(),
        "error: --noise-floor gives the absolute floor twice"
    );
    let out = faultline(&["compare", base, "fixtures/records", "--noise-floor", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`3` has no unit"), "{}", stderr(&out));
}

#[test]
fn report_and_rehearse_take_a_series_file() {
    let r = fixture("kubelet-stop-within-toleration");
    let s = series(vec![
        r.clone(),
        with_outcome(r.clone(), "nothing on the node is evicted", Outcome::Failed),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubelet-stop-within-toleration.json");
    s.save(&path).unwrap();
    let file = path.to_str().unwrap();
    let out = faultline(&["report", file]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("FLAKY: 1 expectation(s) held in some runs only"));
    let out = faultline(&["report", file, "--format", "junit"]);
    roxmltree::Document::parse(&stdout(&out)).expect("well-formed JUnit");
    // Every run in turn: the rehearsal judges each run's own observations again.
    let experiment = "experiments/kubelet-stop-within-toleration.yaml";
    let out = faultline(&["rehearse", experiment, "--record", file]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "both recorded runs held when rehearsed"
    );
    let text = stdout(&out);
    assert!(
        text.contains("== run 1 of 2\n") && text.contains("== run 2 of 2\n"),
        "{text}"
    );
    assert!(
        text.contains("(recorded: FAIL -)"),
        "run 2's recorded verdict: {text}"
    );
    let out = faultline(&["rehearse", experiment, "--record", file, "--run", "2"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!stdout(&out).contains("== run 1 of 2"));
    let out = faultline(&["rehearse", experiment, "--record", file, "--run", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--run 3, but it holds 2 run(s)"));
}

/// Issue 14's demonstration, on the records `ci/upgrade-demo` wrote on the lab (committed
/// unedited under `fixtures/records/upgrade/`): the same experiments, three runs each, at
/// Kubernetes v1.31.4 and v1.33.13 with each release's own default timers. v1.32 raised the
/// default node-monitor grace period from 40 s to 50 s; the comparison must show it.
#[test]
fn the_upgrade_from_v1_31_to_v1_33_moves_node_unknown_by_about_ten_seconds() {
    let old = "fixtures/records/upgrade/v1.31.4";
    let new = "fixtures/records/upgrade/v1.33.13";
    let load = |dir: &str| faultline::series::load_all(&repo().join(dir)).unwrap();
    let (baseline, now) = (load(old), load(new));
    assert_eq!(baseline.len(), 2, "two experiments on each side");
    for side in [&baseline, &now] {
        for s in side.iter() {
            assert_eq!(s.runs().len(), 3, "{}: three runs", s.name());
        }
    }
    let tolerance = faultline::compare::Tolerance::from_specs(&[]).unwrap();
    let cmp = faultline::compare::compare(&baseline, &now, &tolerance, (old, new));
    let version = |side: &faultline::compare::Side| {
        assert_eq!(side.clusters.len(), 1, "one cluster per side");
        side.clusters[0].server_version.clone()
    };
    assert_eq!(version(&cmp.baseline).as_deref(), Some("v1.31.4"));
    assert_eq!(version(&cmp.now).as_deref(), Some("v1.33.13"));
    assert!(
        cmp.cluster_changes()
            .iter()
            .any(|c| c.contains("grace period 40s → 50s")),
        "{:?}",
        cmp.cluster_changes()
    );
    for e in &cmp.experiments {
        let f = e
            .figures
            .iter()
            .find(|f| f.key == "node_not_ready")
            .expect("node_not_ready compared");
        let delta = f.delta.expect("observed on both sides");
        assert!(
            (7_000.0..=13_000.0).contains(&delta),
            "{}: node NotReady moved by {delta} ms, not about +10 s",
            e.name
        );
        assert_eq!(
            f.movement,
            faultline::compare::Movement::Worse,
            "{}",
            e.name
        );
        // Every expectation held in every run on both sides: the bounds follow `grace`.
        assert!(
            e.expectations.iter().all(|x| matches!(
                x.change,
                faultline::compare::Change::Unchanged | faultline::compare::Change::Skipped
            )),
            "{}: {:?}",
            e.name,
            e.expectations
        );
    }

    // The real binary: exit 1 under a tight tolerance, the move named; exit 0 against itself.
    let out = faultline(&["compare", old, new, "--tolerance", "5%"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("node-monitor grace period 40s → 50s"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.contains("  node NotReady  ")
            && l.starts_with("  kubelet-stop-within-toleration")
            && l.ends_with("SLOWER")),
        "{text}"
    );
    for dir in [old, new] {
        let out = faultline(&["compare", dir, dir, "--tolerance", "0%"]);
        assert_eq!(out.status.code(), Some(0), "{dir} against itself");
    }
}
