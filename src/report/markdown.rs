//! Markdown: one section per run, for a CI job summary (`$GITHUB_STEP_SUMMARY`) or a pull
//! request comment. Readable at a glance: the verdict in the heading, one table row per
//! expectation, the recovery figures, the errors; the timeline folded away below.
//!
//! Every text that comes from an experiment, the cluster or a node goes through
//! `sanitize::markdown`, so it cannot end a table cell or row,
//! open a code span or inject HTML.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use super::files::ReportError;
use super::text::{duration_text, figure_text, measured_text, outcome_word, tally, timeline_text};
use crate::judge::{Outcome, describe_check};
use crate::record::{RunOutcome, RunRecord};
use crate::sanitize::markdown as md;

/// Timeline lines shown at most; a longer timeline is in the JSON and HTML reports.
const TIMELINE_LINES: usize = 200;

/// The run's verdict as the plain marker the heading carries.
fn run_marker(outcome: &RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Passed => "PASSED",
        RunOutcome::Failed => "FAILED",
        RunOutcome::Error { .. } => "COULD NOT RUN",
        RunOutcome::Interrupted => "INTERRUPTED",
        RunOutcome::Skipped { .. } => "SKIPPED",
    }
}

/// A fenced code block around `body`, its fence longer than any backtick run inside, so
/// nothing in the body can close it.
fn fenced(body: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}text\n{body}{fence}\n")
}

/// Text of faultline's own making (a verdict's reason, what was expected, an error, a
/// safety line) for one line of Markdown: what it quotes between backticks (a step, a
/// bound, a command) is shown as code, not as backticks; everything else is escaped as
/// [`md`] does. A code span holds no markup, so a quote cannot inject any; in a table cell
/// (`in_cell`) its `|` is escaped, as tables require even in code. A backtick without its
/// pair is shown as itself.
pub(crate) fn prose(text: &str, in_cell: bool) -> String {
    let text = crate::sanitize::clean(text);
    let parts: Vec<&str> = text.split('`').collect();
    let mut out = String::with_capacity(text.len());
    for (i, part) in parts.iter().enumerate() {
        let between = i % 2 == 1;
        let closed = i + 1 < parts.len();
        if !between {
            out.push_str(&md(part));
        } else if closed && !part.trim().is_empty() {
            let code: String = part
                .chars()
                .map(|c| if c.is_whitespace() { ' ' } else { c })
                .collect();
            let code = if in_cell {
                code.replace('|', "\\|")
            } else {
                code
            };
            let _ = write!(out, "`{code}`");
        } else {
            out.push_str(&md(&format!("`{part}{}", if closed { "`" } else { "" })));
        }
    }
    out
}

/// Renders one run as a Markdown section starting with a level-2 heading.
pub fn render(record: &RunRecord) -> String {
    render_explained(record, &crate::explain::explain(record))
}

/// [`render`] with the node failure model's comparison of the run already made (a run's
/// reporters share the one made when its series ended).
pub fn render_explained(record: &RunRecord, explanation: &crate::explain::Explanation) -> String {
    let exp = &record.experiment;
    let cluster = &record.cluster;
    let mut m = String::new();
    let marker = run_marker(&record.outcome);
    let _ = writeln!(m, "## **{marker}** {}\n", md(&exp.name));

    let mut meta = vec![format!("cluster {}", md(&cluster.name))];
    if let Some(context) = &cluster.context {
        meta.push(format!("context {}", md(context)));
    }
    if let Some(version) = &cluster.server_version {
        meta.push(format!("Kubernetes {}", md(version)));
    }
    let length = (record.finished_at - record.started_at).num_milliseconds();
    meta.push(format!(
        "{} from {}",
        duration_text(length),
        record.started_at.format("%Y-%m-%d %H:%M:%S UTC")
    ));
    meta.push(tally(record));
    if let Some(zero) = record.zero_wall() {
        meta.push(format!(
            "time zero +0.0s = {} (`at: 0s`)",
            zero.format("%H:%M:%S%.3f UTC")
        ));
    }
    let score = record.score();
    meta.push(format!("score **{}**", score.value_text()));
    let _ = writeln!(m, "{}\n", meta.join(" · "));
    match &record.outcome {
        RunOutcome::Error { message } => {
            let _ = writeln!(
                m,
                "The run could not be carried out: {}\n",
                prose(message, false)
            );
        }
        RunOutcome::Interrupted => {
            m.push_str("The run was interrupted before observation finished.\n\n");
        }
        RunOutcome::Skipped { reason } => {
            let _ = writeln!(m, "Not run on this cluster: {}\n", prose(reason, false));
        }
        RunOutcome::Passed | RunOutcome::Failed => {}
    }
    // The description is prose wrapped in YAML: its line breaks are not the author's, its
    // blank lines are.
    for paragraph in exp.description.split("\n\n") {
        let words: Vec<&str> = paragraph.split_whitespace().collect();
        if !words.is_empty() {
            let _ = writeln!(m, "{}\n", md(&words.join(" ")));
        }
    }
    if !record.targets.is_empty() {
        let targets: Vec<String> = record
            .targets
            .iter()
            .map(|(t, nodes)| format!("{} = {}", md(t), md(&nodes.join(", "))))
            .collect();
        let _ = writeln!(m, "Targets: {}\n", targets.join("; "));
    }

    let timers = super::text::timer_lines(record);
    if !timers.is_empty() {
        let _ = writeln!(m, "Timers: {}\n", md(&timers.join("; ")));
    }
    expectations(&mut m, record);
    model(&mut m, record, explanation);
    figures(&mut m, record);
    rolls(&mut m, record);
    let safety = super::text::safety_lines(record);
    if !safety.is_empty() {
        m.push_str("**Safety**\n\n");
        for line in safety {
            let _ = writeln!(m, "- {}", prose(&line, false));
        }
        m.push('\n');
    }
    if !record.errors.is_empty() {
        m.push_str("**Errors**\n\n");
        for e in &record.errors {
            let _ = writeln!(m, "- {}", prose(e, false));
        }
        m.push('\n');
    }
    timeline(&mut m, record);
    let _ = writeln!(
        m,
        "<sub>faultline {} · run {}</sub>",
        md(&record.faultline_version),
        md(&record.run_id)
    );
    m
}

/// The expectations table: what was expected next to what was measured, and why an
/// expectation did not pass.
fn expectations(m: &mut String, record: &RunRecord) {
    if record.verdicts.is_empty() {
        m.push_str("No expectations were judged.\n\n");
        return;
    }
    m.push_str("| Expectation | Verdict | Measured | Expected | Reason |\n");
    m.push_str("| --- | --- | --- | --- | --- |\n");
    for v in &record.verdicts {
        let expected = record
            .expectation_of(v)
            .map(|e| {
                format!(
                    "{} after {}{}",
                    describe_check(&e.check, &record.cluster.timers),
                    e.since,
                    record.assumed_mark(&e.name)
                )
            })
            .unwrap_or_default();
        let reason = if v.outcome == Outcome::Passed {
            String::new()
        } else {
            prose(&v.message, true)
        };
        let word = outcome_word(v.outcome);
        let verdict = if v.outcome == Outcome::Passed {
            word.to_string()
        } else {
            format!("**{word}**")
        };
        let _ = writeln!(
            m,
            "| {} | {verdict} | {} | {} | {reason} |",
            md(&v.name),
            measured_text(v.measured_ms),
            prose(&expected, true),
        );
    }
    m.push('\n');
}

/// What the node failure model predicted against what was seen: how many transitions
/// fell inside their windows, each deviation with its cause, and for each failed
/// expectation the predictions it is about (a belief the model and the cluster both
/// contradict is the belief's fault). Nothing when no step silenced a node.
fn model(m: &mut String, record: &RunRecord, explanation: &crate::explain::Explanation) {
    if explanation.items.is_empty() {
        return;
    }
    let decided = explanation
        .items
        .iter()
        .filter(|i| i.fit != crate::explain::Fit::Undecided)
        .count();
    let deviations: Vec<_> = explanation
        .items
        .iter()
        .filter(|i| i.fit.deviates())
        .collect();
    let _ = writeln!(
        m,
        "**Against the node failure model** (as faultline explain shows it): {} of {decided} decided \
         transition(s) inside their predicted window.\n",
        decided - deviations.len()
    );
    for i in &deviations {
        let _ = writeln!(m, "- {}", prose(&i.line(), false));
    }
    for v in record
        .verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Failed)
    {
        for line in super::text::model_lines(record, explanation, v) {
            let _ = writeln!(m, "- {}: {}", md(&v.name), prose(&line, false));
        }
    }
    m.push('\n');
}

/// The recovery figures table, measured from the first fault step.
fn figures(m: &mut String, record: &RunRecord) {
    let Some(step) = &record.figures.fault_step else {
        m.push_str("Recovery figures: no fault step ran.\n\n");
        return;
    };
    let _ = writeln!(m, "**Recovery figures** after step {}:\n", md(step));
    m.push_str("| Stage | After the fault |\n| --- | --- |\n");
    for (stage, value) in record.figures.rows() {
        let _ = writeln!(m, "| {stage} | {} |", figure_text(value));
    }
    m.push('\n');
}

/// Each roll's table: a row per node in roll order, each stage from the node's own step,
/// then whether each node was back within the roll's timeout and what the probes saw.
fn rolls(m: &mut String, record: &RunRecord) {
    use super::roll_text::{HEADS, node_verdict, probe_line, probes_note, row, timeout_text};
    for roll in &record.rolls {
        let _ = writeln!(
            m,
            "**Roll** {} (timeout {}), each stage from the node's own step:\n",
            md(&roll.roll),
            timeout_text(roll)
        );
        let _ = writeln!(m, "| {} | back in time |", HEADS.join(" | "));
        let _ = writeln!(m, "|{}", " --- |".repeat(HEADS.len() + 1));
        for n in &roll.nodes {
            let cells: Vec<String> = row(record, n).iter().map(|c| md(c)).collect();
            let (verdict, words) = node_verdict(roll, n);
            let mark = match verdict {
                Some(true) => "yes",
                Some(false) => "**NO**",
                None => "not decided",
            };
            let _ = writeln!(m, "| {} | {mark}: {} |", cells.join(" | "), md(&words));
        }
        m.push('\n');
        for p in &roll.probes {
            let _ = writeln!(m, "- {}", md(&probe_line(p)));
        }
        if let Some(note) = probes_note(&roll.probes) {
            let _ = writeln!(m, "- {note}");
        }
        m.push('\n');
    }
}

/// The timeline, folded, as the terminal shows it; cut after [`TIMELINE_LINES`] lines.
fn timeline(m: &mut String, record: &RunRecord) {
    let entries = record.timeline.entries.len();
    if entries == 0 {
        return;
    }
    let text = timeline_text(record);
    let mut body: String = text
        .lines()
        .take(TIMELINE_LINES)
        .map(|l| format!("{l}\n"))
        .collect();
    if entries > TIMELINE_LINES {
        let _ = writeln!(
            body,
            "… {} more entries in the JSON and HTML reports",
            entries - TIMELINE_LINES
        );
    }
    let _ = write!(
        m,
        "<details><summary>Timeline ({entries} entries)</summary>\n\n{}\n</details>\n\n",
        fenced(&body)
    );
}

/// Appends the run's section to `path` (created if missing), so several runs, or several
/// steps of a CI job, can share one summary file.
pub fn append(record: &RunRecord, path: &Path) -> Result<(), ReportError> {
    append_section(&render(record), path)
}

/// Appends one rendered Markdown section to `path` (created if missing), a blank line
/// before it when the file already holds something.
pub fn append_section(section: &str, path: &Path) -> Result<(), ReportError> {
    let io = |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    let separator = if file.metadata().map_err(io)?.len() > 0 {
        "\n"
    } else {
        ""
    };
    file.write_all(format!("{separator}{section}").as_bytes())
        .map_err(io)
}

/// Writes `text` as this run's part of `path`, which starts at offset `from` (`None` the
/// first time: the file's end, after whatever other runs or CI steps wrote), replacing what
/// this run wrote there before; returns where the part starts. A run of several
/// experiments rewrites its part as each one ends, so the overview stays on top of it.
pub fn write_own_part(text: &str, path: &Path, from: Option<u64>) -> Result<u64, ReportError> {
    use std::io::{Seek, SeekFrom};
    let io = |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io)?;
    let start = match from {
        Some(start) => start,
        None => file.metadata().map_err(io)?.len(),
    };
    file.set_len(start).map_err(io)?;
    file.seek(SeekFrom::Start(start)).map_err(io)?;
    let separator = if start > 0 { "\n" } else { "" };
    file.write_all(format!("{separator}{text}").as_bytes())
        .map_err(io)?;
    Ok(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roll_is_a_table_of_its_nodes_with_each_one_back_or_not() {
        let record = crate::report::roll_text::tests::rolled_record([40, 360, 42]);
        let summary = render(&record);
        assert!(
            summary.contains("**Roll** roll reboots (timeout 5m 00s)"),
            "{summary}"
        );
        assert!(
            summary.contains("| node | issued | drained | NotReady | Ready again | workloads available | back in time |"),
            "{summary}"
        );
        let row = |node: &str| {
            summary
                .lines()
                .find(|l| l.starts_with(&format!("| {node} |")))
                .unwrap_or_else(|| panic!("no row of {node}: {summary}"))
                .to_string()
        };
        assert!(row("w1").contains("| 40.0s |") && row("w1").contains("| yes: "));
        assert!(
            row("w2").contains("| 360.0s |") && row("w2").contains("| **NO**: "),
            "{}",
            row("w2")
        );
        assert!(summary.contains("- probe web: down 6.0s over the roll in 3 outage(s)"));
    }

    #[test]
    fn quotes_become_code_and_a_lone_backtick_stays_one() {
        assert_eq!(
            prose("step `stop kubelet` never ran", false),
            "step `stop kubelet` never ran"
        );
        assert_eq!(prose("a `x|y` b", true), "a `x\\|y` b");
        assert_eq!(
            prose("run `faultline\nrestore`", false),
            "run `faultline restore`"
        );
        assert_eq!(prose("a ` b", false), "a \\` b");
        assert_eq!(prose("a `` b `<b>`", false), "a \\`\\` b `<b>`");
        assert_eq!(prose("*x* <i>", false), "\\*x\\* &lt;i&gt;");
    }

    #[test]
    fn the_fence_outgrows_any_backtick_run_in_the_body() {
        assert_eq!(fenced("plain\n"), "```text\nplain\n```\n");
        let body = "a ```` b\n";
        let block = fenced(body);
        assert!(block.starts_with("`````text\n"), "{block}");
        assert!(block.ends_with("\n`````\n"), "{block}");
    }
}
