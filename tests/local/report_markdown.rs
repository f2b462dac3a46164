//! The Markdown summary, parsed back with a CommonMark parser with GitHub's tables, so a
//! broken table or smuggled markup shows up as the reader would see it.

use std::process::Command;

use crate::judge_support::*;
use faultline::judge::Outcome;
use faultline::record::RunOutcome;
use faultline::report::markdown;
use faultline::timeline::{Entry, Event as TimelineEvent};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// What a reader sees of a Markdown document.
#[derive(Debug, Default)]
struct Doc {
    /// (level, text) of every heading.
    headings: Vec<(u8, String)>,
    /// Every table: rows of cell texts, the header row first.
    tables: Vec<Vec<Vec<String>>>,
    /// Text of every list item.
    items: Vec<String>,
    /// Raw HTML, block and inline.
    html: Vec<String>,
    /// Inline code spans.
    code_spans: Vec<String>,
    /// Contents of fenced code blocks.
    code_blocks: Vec<String>,
    /// Text of everything emphasised strongly.
    strong: Vec<String>,
    /// Every piece of text, in order.
    text: String,
}

fn parse(markdown: &str) -> Doc {
    let mut doc = Doc::default();
    let mut heading: Option<(u8, String)> = None;
    let mut cell: Option<String> = None;
    let mut item: Option<String> = None;
    let mut block: Option<String> = None;
    let mut strong: Option<String> = None;
    for event in Parser::new_ext(markdown, Options::ENABLE_TABLES) {
        let text = match &event {
            Event::Text(t) => Some(t.to_string()),
            Event::Code(t) => {
                doc.code_spans.push(t.to_string());
                Some(t.to_string())
            }
            Event::InlineHtml(h) if h.as_ref() == "<br>" => Some("\n".to_string()),
            Event::Html(h) | Event::InlineHtml(h) => {
                doc.html.push(h.to_string());
                None
            }
            Event::SoftBreak | Event::HardBreak => Some("\n".to_string()),
            _ => None,
        };
        if let Some(t) = text {
            if let Some((_, h)) = heading.as_mut() {
                h.push_str(&t);
            }
            for open in [&mut cell, &mut item, &mut block, &mut strong]
                .into_iter()
                .flatten()
            {
                open.push_str(&t);
            }
            doc.text.push_str(&t);
            continue;
        }
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                heading = Some((level as u8, String::new()))
            }
            Event::End(TagEnd::Heading(_)) => doc.headings.extend(heading.take()),
            Event::Start(Tag::Table(_)) => doc.tables.push(Vec::new()),
            Event::Start(Tag::TableHead | Tag::TableRow) => {
                if let Some(t) = doc.tables.last_mut() {
                    t.push(Vec::new());
                }
            }
            Event::Start(Tag::TableCell) => cell = Some(String::new()),
            Event::End(TagEnd::TableCell) => {
                if let (Some(c), Some(row)) = (
                    cell.take(),
                    doc.tables.last_mut().and_then(|t| t.last_mut()),
                ) {
                    row.push(c);
                }
            }
            Event::Start(Tag::Item) => item = Some(String::new()),
            Event::End(TagEnd::Item) => doc.items.extend(item.take()),
            Event::Start(Tag::CodeBlock(_)) => block = Some(String::new()),
            Event::End(TagEnd::CodeBlock) => doc.code_blocks.extend(block.take()),
            Event::Start(Tag::Strong) => strong = Some(String::new()),
            Event::End(TagEnd::Strong) => doc.strong.extend(strong.take()),
            _ => {}
        }
    }
    doc
}

/// The row of `table` whose first cell is `name`.
fn row<'a>(table: &'a [Vec<String>], name: &str) -> &'a [String] {
    table
        .iter()
        .find(|r| r.first().is_some_and(|c| c == name))
        .unwrap_or_else(|| panic!("no row {name:?} in {table:#?}"))
}

#[test]
fn the_recorded_run_reads_at_a_glance() {
    let rec = record();
    let text = markdown::render(&rec);
    let doc = parse(&text);
    assert_eq!(
        doc.headings,
        vec![(2, "FAILED kubelet-stop-past-toleration".to_string())],
        "{text}"
    );
    assert!(doc.strong.contains(&"FAILED".to_string()), "{text}");
    for meta in [
        "cluster lab",
        "context kind-lab",
        "Kubernetes v1.33.1",
        "3m 00s from 2026-11-22 09:59:00 UTC",
        "1 passed, 1 failed, 0 undecidable, 1 skipped, 1 errors",
        "score 33.3",
        "Targets: down = lab-worker-2; healthy = lab-worker-1",
    ] {
        assert!(doc.text.contains(meta), "{meta:?} in {text}");
    }

    assert_eq!(doc.tables.len(), 2, "expectations and figures: {text}");
    let verdicts = &doc.tables[0];
    assert_eq!(
        verdicts[0],
        ["Expectation", "Verdict", "Measured", "Expected", "Reason"]
    );
    assert_eq!(verdicts.len(), 1 + rec.verdicts.len());
    assert!(verdicts.iter().all(|r| r.len() == 5), "{verdicts:#?}");
    let unknown = row(verdicts, "node unknown within 30s");
    assert_eq!(unknown[1], "PASS");
    assert_eq!(unknown[2], "21.3s", "a duration after its step");
    assert_eq!(unknown[3], "Unknown within 30.0s after stop kubelet");
    assert_eq!(unknown[4], "", "no reason on a pass");
    let evicted = row(verdicts, "web evicted between 30s and 40s");
    assert_eq!(evicted[1], "FAIL");
    assert!(doc.strong.contains(&"FAIL".to_string()));
    assert_eq!(
        evicted[3],
        "Terminating between 30.0s and 40.0s after stop kubelet"
    );
    // What the message quotes (the step) shows as code, not as backticks.
    assert_eq!(evicted[4], rec.verdicts[1].message.replace('`', ""));
    let restarts = row(verdicts, "agent restarts");
    assert_eq!(restarts[1], "SKIP");
    assert!(
        restarts[4].contains("kwok runs no containers"),
        "{restarts:?}"
    );
    let reboot = row(verdicts, "node ready after reboot");
    assert_eq!(reboot[1], "ERROR");
    assert_eq!(reboot[2], "-");
    assert_eq!(reboot[4], "step reboot never ran", "the step as code");

    let figures = &doc.tables[1];
    assert_eq!(figures[0], ["Stage", "After the fault"]);
    assert_eq!(figures.len(), 1 + rec.figures.rows().len());
    assert_eq!(row(figures, "node NotReady")[1], "21.3s");
    let eviction = rec.figures.first_eviction_ms.expect("an eviction");
    assert_eq!(
        row(figures, "first eviction")[1],
        faultline::report::text::figure_text(Some(eviction))
    );
    assert!(
        doc.text
            .contains("Recovery figures after step stop kubelet")
    );

    assert_eq!(doc.code_blocks.len(), 1, "the folded timeline");
    assert!(
        doc.code_blocks[0].contains("+21.3s node lab-worker-2 Ready True→Unknown"),
        "{}",
        doc.code_blocks[0]
    );
    assert!(doc.html.iter().any(|h| h.contains("<details>")));
    // The failed belief beside what the node failure model predicted for its pods.
    assert!(
        doc.items.iter().any(|i| i.starts_with(
            "web evicted between 30s and 40s: the node failure model: \
             faultline-lab/web-5d9c-aaaaa Terminating (evicted): predicted +45.0s … +61.3s"
        )),
        "{:?}",
        doc.items
    );
    // Only what faultline's own messages quote (the experiment's key time zero is, a
    // step, a capability) is code.
    assert_eq!(
        doc.code_spans,
        ["at: 0s", "stop kubelet", "containers", "reboot"]
    );
}

#[test]
fn a_passing_run_has_no_reasons_and_a_gap_stays_in_the_timeline() {
    let mut rec = record();
    rec.timeline = timeline("kubelet-stop-gap");
    rec.verdicts.retain(|v| v.outcome == Outcome::Passed);
    rec.outcome = RunOutcome::Passed;
    rec.experiment.description =
        "Stops the kubelet\nfor a while.\n\nNothing is\n  evicted.\n".into();
    let text = markdown::render(&rec);
    let doc = parse(&text);
    assert_eq!(doc.headings[0].1, "PASSED kubelet-stop-past-toleration");
    assert!(doc.tables[0][1..].iter().all(|r| r[4].is_empty()));
    assert!(
        text.contains("\n\nStops the kubelet for a while.\n\nNothing is evicted.\n\n"),
        "wrapped description lines joined, paragraphs kept: {text}"
    );
    assert!(
        doc.code_blocks[0].contains("lost sight of pods: watch error: connection reset by peer")
    );
}

#[test]
fn errors_and_a_run_that_could_not_start_are_named() {
    let mut rec = record();
    rec.errors = vec![
        "step `stop kubelet`: ssh: connection refused".into(),
        "undo of `stop kubelet` failed".into(),
    ];
    rec.outcome = RunOutcome::Error {
        message: rec.errors[0].clone(),
    };
    let text = markdown::render(&rec);
    let doc = parse(&text);
    assert_eq!(
        doc.headings[0].1,
        "COULD NOT RUN kubelet-stop-past-toleration"
    );
    assert!(
        doc.text.contains(
            "The run could not be carried out: step stop kubelet: ssh: connection refused"
        ),
        "{text}"
    );
    let shown: Vec<String> = rec.errors.iter().map(|e| e.replace('`', "")).collect();
    let items: Vec<&String> = doc
        .items
        .iter()
        .filter(|i| !i.contains("the node failure model"))
        .collect();
    assert_eq!(items, shown.iter().collect::<Vec<_>>());
    assert!(
        doc.code_spans
            .iter()
            .filter(|c| *c == "stop kubelet")
            .count()
            >= 3,
        "both errors and the outcome quote the step: {:?}",
        doc.code_spans
    );
    assert!(doc.text.contains("3 errors"), "tally counts them: {text}");
}

#[test]
fn hostile_text_stays_in_its_cell_and_shows_as_written() {
    let mut rec = record();
    let hostile = "a|b\n## not a heading\n| x | y |\n`code` <script>alert(1)</script> *em* [l](http://x) \u{1b}[31mred\u{1b}[0m &amp; done";
    let shown = "a|b\n## not a heading\n| x | y |\n`code` <script>alert(1)</script> *em* [l](http://x) red &amp; done";
    rec.experiment.name = format!("exp {hostile}");
    rec.experiment.description = hostile.to_string();
    rec.cluster.name = hostile.to_string();
    rec.verdicts[0].name = hostile.to_string();
    rec.experiment.expectations[0].name = hostile.to_string();
    rec.verdicts[1].message = hostile.to_string();
    rec.errors = vec![format!("setup failed: {hostile}")];
    rec.figures.fault_step = Some(hostile.to_string());
    let wall = rec.timeline.entries[0].wall;
    rec.timeline.entries.push(Entry {
        offset_ms: 130_000,
        wall,
        event: TimelineEvent::Note {
            message: format!("```\n</details>\n# {hostile}"),
        },
    });
    let text = markdown::render(&rec);
    assert!(!text.contains('\u{1b}'));
    let doc = parse(&text);

    assert_eq!(doc.headings.len(), 1, "one heading: {text}");
    assert_eq!(doc.headings[0].1, format!("FAILED exp {shown}"));
    assert_eq!(doc.tables.len(), 2, "{text}");
    let verdicts = &doc.tables[0];
    assert_eq!(verdicts.len(), 1 + rec.verdicts.len(), "{verdicts:#?}");
    assert!(verdicts.iter().all(|r| r.len() == 5), "{verdicts:#?}");
    assert_eq!(verdicts[1][0], shown);
    assert_eq!(verdicts[1][1], "PASS", "the name kept to its cell");
    // A reason and an error are faultline's own text: what they quote between backticks
    // shows as code, still in its cell and with no markup of its own.
    let quoted = shown.replace('`', "");
    assert_eq!(verdicts[2][4], quoted);
    assert!(doc.items.contains(&format!("setup failed: {quoted}")));
    assert!(doc.text.contains(&format!("cluster {shown}")));
    assert!(
        doc.text
            .contains(&format!("Recovery figures after step {shown}"))
    );
    assert_eq!(
        doc.code_spans.iter().filter(|c| *c == "code").count(),
        2,
        "{:?}",
        doc.code_spans
    );
    assert!(
        doc.code_spans.iter().all(|c| !c.contains('<')),
        "{:?}",
        doc.code_spans
    );
    assert!(
        doc.html.iter().all(|h| !h.contains("script")),
        "{:?}",
        doc.html
    );
    assert_eq!(doc.code_blocks.len(), 1, "the fence held: {text}");
    assert!(doc.code_blocks[0].contains("</details>"));
    assert_eq!(
        doc.html.iter().filter(|h| h.contains("</details>")).count(),
        1
    );
}

#[test]
fn appending_keeps_one_section_per_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("summary.md");
    std::fs::write(&path, "# CI summary\nan earlier step wrote this").expect("write");
    let mut first = record();
    first.experiment.name = "first".into();
    let mut second = record();
    second.experiment.name = "second".into();
    second.outcome = RunOutcome::Passed;
    markdown::append(&first, &path).expect("append");
    markdown::append(&second, &path).expect("append");
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.starts_with("# CI summary\nan earlier step wrote this\n"));
    let doc = parse(&text);
    let headings: Vec<&str> = doc.headings.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(headings, ["CI summary", "FAILED first", "PASSED second"]);
    assert_eq!(doc.tables.len(), 4);
}

#[test]
fn the_report_command_renders_a_saved_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let out = dir.path().join("run.md");
    let rec = record();
    rec.save(&json).expect("save");
    let status = Command::new(env!("CARGO_BIN_EXE_faultline"))
        .arg("report")
        .arg(&json)
        .args(["--format", "markdown", "--out"])
        .arg(&out)
        .status()
        .expect("faultline runs");
    assert!(status.success());
    assert_eq!(
        std::fs::read_to_string(&out).expect("written"),
        markdown::render(&rec)
    );
}

#[test]
fn a_comparison_reads_as_tables_with_regressions_in_bold() {
    use crate::records_support::*;
    use faultline::compare::{Tolerance, compare};
    use faultline::series::Series;
    let r = fixture("kubelet-stop-within-toleration");
    let baseline = series(vec![
        with_node_not_ready(r.clone(), 18_100),
        r.clone(),
        with_node_not_ready(r.clone(), 20_600),
    ]);
    let now = upgraded(r.clone(), "v1.34.1", 10_000);
    let c = compare(
        &[baseline, Series::single(fixture("node-deleted"))],
        &[Series::single(now)],
        &Tolerance::default(),
        ("before | upgrade", "after"),
    );
    let text = faultline::report::compare::markdown::render(&c);
    let doc = parse(&text);
    assert_eq!(
        doc.headings,
        vec![
            (2, "REGRESSED before | upgrade → after".to_string()),
            (3, "kubelet-stop-within-toleration".to_string()),
            (3, "node-deleted".to_string()),
        ],
        "{text}"
    );
    assert_eq!(
        doc.tables.len(),
        4,
        "regressions, sides, expectations, figures: {text}"
    );
    let regressions = &doc.tables[0];
    assert_eq!(
        row(regressions, "kubelet-stop-within-toleration"),
        [
            "kubelet-stop-within-toleration",
            "node NotReady",
            "19.8s",
            "29.8s",
            "+10.0s (+50.6%) SLOWER"
        ]
    );
    let sides = &doc.tables[1];
    assert_eq!(row(sides, "baseline")[3], "v1.33.13");
    assert_eq!(row(sides, "now")[3], "v1.34.1");
    assert_eq!(row(sides, "now")[5], "30s", "the grace period column");
    let figures = &doc.tables[3];
    assert_eq!(
        row(figures, "node NotReady"),
        [
            "node NotReady",
            "18.1s / 19.8s / 20.6s",
            "29.8s",
            "+10.0s",
            "+50.6%",
            "SLOWER"
        ]
    );
    assert!(doc.strong.contains(&"SLOWER".to_string()), "{text}");
    assert_eq!(
        row(figures, "workloads available again")[5],
        "within spread"
    );
    assert_eq!(row(figures, "score")[1], "100");
    assert!(
        doc.text
            .contains("Only in the baseline (1 run(s)): not compared."),
        "{text}"
    );
    assert!(
        doc.text.contains(
            "Changed: Kubernetes v1.33.13 → v1.34.1; node-monitor grace period 20s → 30s"
        ),
        "{text}"
    );
    assert!(doc.html.is_empty(), "no raw HTML: {:?}", doc.html);
}

#[test]
fn a_series_shows_each_run_and_calls_flaky_flaky() {
    use crate::records_support::*;
    use faultline::judge::Outcome;
    let r = fixture("kubelet-stop-within-toleration");
    let s = series(vec![
        r.clone(),
        with_outcome(r.clone(), "nothing on the node is evicted", Outcome::Failed),
    ]);
    let text = faultline::report::series::markdown::render(&s);
    let doc = parse(&text);
    assert_eq!(
        doc.headings,
        vec![(
            2,
            "FLAKY kubelet-stop-within-toleration (2 runs)".to_string()
        )],
        "{text}"
    );
    let verdicts = &doc.tables[0];
    assert_eq!(
        row(verdicts, "nothing on the node is evicted"),
        [
            "nothing on the node is evicted",
            "PASS FAIL",
            "flaky: held in 1 of 2 runs",
            "-"
        ]
    );
    assert_eq!(
        row(verdicts, "node goes Unknown within the grace period")[2],
        "held in 2 of 2 runs"
    );
    assert!(
        doc.strong
            .contains(&"flaky: held in 1 of 2 runs".to_string())
    );
    assert_eq!(row(&doc.tables[1], "node NotReady")[1], "19.8s");
    assert!(
        doc.text
            .contains("score 85.7 / 92.9 / 100 (each run: 100, 85.7)"),
        "{text}"
    );
}

#[test]
fn several_experiments_have_an_overview_table_on_top_of_their_sections() {
    use crate::records_support::fixture;
    use faultline::events::FinishedSeries;
    use faultline::events::RunEvent;
    use faultline::report::subscribe::{Reporter, Summary};
    use faultline::series::Series;
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("summary.md");
    std::fs::write(&path, "# CI summary\nan earlier step wrote this\n").expect("write");
    let mut summary = Summary::new(path.clone());
    let mut failed = fixture("node-deleted");
    failed.experiment.name = "a failed one".into();
    failed.outcome = RunOutcome::Failed;
    failed.verdicts[0].outcome = Outcome::Failed;
    let runs = [
        fixture("kubelet-stop-past-toleration"),
        failed,
        fixture("local-persistent-volume"),
    ];
    for (i, run) in runs.iter().enumerate() {
        let series = Arc::new(FinishedSeries::of(Series::single(run.clone())));
        summary
            .handle(&RunEvent::SeriesFinished(series))
            .expect("written");
        let doc = parse(&std::fs::read_to_string(&path).expect("read"));
        let headings: Vec<&str> = doc.headings.iter().map(|(_, t)| t.as_str()).collect();
        // One experiment: its section alone; from the second on, the overview above them.
        let expected_overview = usize::from(i > 0);
        assert_eq!(
            headings.len(),
            1 + expected_overview + i + 1,
            "{headings:?}"
        );
        assert_eq!(headings[0], "CI summary");
        if i > 0 {
            assert_eq!(headings[1], "Overview");
        }
    }
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.starts_with("# CI summary\nan earlier step wrote this\n"));
    let doc = parse(&text);
    let overview = &doc.tables[0];
    assert_eq!(
        overview[0],
        [
            "Experiment",
            "Outcome",
            "Passed",
            "Failed",
            "Errors",
            "Duration",
            "Slowest figure"
        ]
    );
    assert_eq!(overview.len(), 4, "{overview:#?}");
    let past = row(overview, "kubelet-stop-past-toleration");
    assert_eq!(past[1..6], ["PASSED", "10", "0", "0", "2m 23s"]);
    assert!(past[6].ends_with('s') && past[6] != "-", "{past:?}");
    let failed = row(overview, "a failed one");
    assert_eq!(failed[1], "FAILED");
    assert_eq!(failed[3], "1");
    assert!(doc.strong.iter().any(|s| s == "FAILED"), "{:?}", doc.strong);
    assert!(
        doc.text.contains("3 experiments: 2 passed, 1 did not"),
        "{}",
        doc.text
    );
}

#[test]
fn what_a_message_quotes_shows_as_code_not_as_backticks() {
    let rec = record();
    let text = markdown::render(&rec);
    let doc = parse(&text);
    let verdicts = &doc.tables[0];
    let never_ran = verdicts
        .iter()
        .find(|r| r[4].contains("never ran"))
        .unwrap_or_else(|| panic!("{verdicts:#?}"));
    assert_eq!(never_ran[4], "step reboot never ran");
    assert!(
        doc.code_spans.iter().any(|c| c == "reboot"),
        "{:?}",
        doc.code_spans
    );
    for table in &doc.tables {
        for row in table {
            assert!(row.iter().all(|c| !c.contains('`')), "{row:?}\n{text}");
        }
    }
}

#[test]
fn the_summary_shows_the_models_comparison_it_was_given_not_one_of_its_own() {
    use crate::records_support::fixture;
    use faultline::events::{FinishedSeries, RunEvent};
    use faultline::report::subscribe::{Reporter, Summary};
    use faultline::series::Series;
    use std::sync::Arc;
    let record = fixture("kubelet-stop-past-toleration");
    let heading = "Against the node failure model";
    assert!(
        faultline::report::markdown::render(&record).contains(heading),
        "the record's own comparison has transitions to show"
    );
    // The run computes the comparison once, when the series ends; the summary shows that
    // one. An emptied comparison must therefore leave the section out.
    let mut finished = FinishedSeries::of(Series::single(record));
    assert!(!finished.explanation.items.is_empty());
    finished.explanation.items.clear();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("summary.md");
    let mut summary = Summary::new(path.clone());
    summary
        .handle(&RunEvent::SeriesFinished(Arc::new(finished)))
        .expect("written");
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.contains("kubelet"), "{text}");
    assert!(!text.contains(heading), "{text}");
}
