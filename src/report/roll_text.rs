//! What every reporter says of a rolling step the same way: its nodes' rows (when each was
//! issued, each recovery stage), whether each node was back within the roll's timeout,
//! and what the probes saw over the roll. The terminal's table is here too; the Markdown,
//! JUnit and HTML reports lay out the same words.

use crate::judge::{ProbeAvailability, RollFigures, RollNode};
use crate::record::RunRecord;
use crate::sanitize::clean;

/// The heads of a roll's table, in the order of [`row`]'s cells.
pub const HEADS: [&str; 6] = [
    "node",
    "issued",
    "drained",
    "NotReady",
    "Ready again",
    "workloads available",
];

/// A stage's cell: a duration after the node's own step (`21.3s`), or `-` when not
/// observed.
pub fn cell(ms: Option<i64>) -> String {
    super::text::measured_text(ms)
}

/// A node's row: node, when its step was issued (a moment from time zero, as every
/// report writes moments, or `not run`), then each stage after that issue (`-` not
/// observed).
pub fn row(record: &RunRecord, n: &RollNode) -> [String; 6] {
    let issued = match n.issued_ms {
        Some(at) => super::text::at_text(record, at),
        None => "not run".to_string(),
    };
    let ready = match (n.ready_again_ms, n.stayed_ready) {
        (None, true) => "stayed Ready".to_string(),
        (v, _) => cell(v),
    };
    [
        clean(&n.node),
        issued,
        cell(n.drained_ms),
        cell(n.not_ready_ms),
        ready,
        cell(n.workloads_available_ms),
    ]
}

/// The roll's timeout in words (`5m 00s`), or why there is none.
pub fn timeout_text(roll: &RollFigures) -> String {
    roll.timeout_ms.map_or_else(
        || "not known (a roll of one node keeps its step's timeout)".to_string(),
        super::text::duration_text,
    )
}

/// Whether node `n` was back in time, as a JUnit case says it: `Some(true)` passed,
/// `Some(false)` failed, `None` not decided (never issued, or observation ended first),
/// with the words.
pub fn node_verdict(roll: &RollFigures, n: &RollNode) -> (Option<bool>, String) {
    let timeout = timeout_text(roll);
    let verdict = n.back_in_time(roll.timeout_ms);
    let words = match (verdict, n.issued_ms) {
        (_, None) => "its step was never issued: the roll stopped before it".to_string(),
        (Some(true), _) if n.ready_again_ms.is_none() => format!(
            "never seen NotReady between its step and the next node's (quicker than the \
             grace period); Ready (timeout {timeout})"
        ),
        (Some(true), _) => format!(
            "Ready again {} after its step (timeout {timeout})",
            cell(n.ready_again_ms)
        ),
        (Some(false), _) => match n.ready_again_ms {
            Some(ms) => format!(
                "Ready again only {} after its step: later than the roll's timeout {timeout}",
                cell(Some(ms))
            ),
            None => format!(
                "not seen Ready again in the {} it was watched after its step (timeout {timeout})",
                super::text::duration_text(n.watched_ms.unwrap_or(0))
            ),
        },
        (None, Some(_)) => format!(
            "not decided: observation ended {} after its step, before the node was seen back \
             or its timeout {timeout} ran out",
            super::text::duration_text(n.watched_ms.unwrap_or(0))
        ),
    };
    (verdict, words)
}

/// A probe over the roll in words: `probe web: down 6.0s over the roll in 3 outage(s),
/// the longest 2.0s; 6 requests failed`. The failed requests are the probe's own count
/// of its failed tries (a floor for an outage still under way at the end); a record
/// written before probes counted them has none, and the line does not claim any.
pub fn probe_line(p: &ProbeAvailability) -> String {
    if p.outages == 0 {
        return format!("probe {}: never down over the roll", clean(&p.probe));
    }
    let failed = match p.failed_requests {
        Some(n) if p.down_at_end => format!("; at least {n} request(s) failed"),
        Some(n) => format!("; {n} request(s) failed"),
        None => String::new(),
    };
    format!(
        "probe {}: down {} over the roll in {} outage(s), the longest {}{}{failed}",
        clean(&p.probe),
        super::text::duration_text(p.downtime_ms),
        p.outages,
        super::text::duration_text(p.longest_ms),
        if p.down_at_end {
            " (still down when observation ended)"
        } else {
            ""
        }
    )
}

/// What the probes of an older record do not count, said once under their lines; `None`
/// when every probe counted its failed requests.
pub fn probes_note(probes: &[ProbeAvailability]) -> Option<&'static str> {
    probes
        .iter()
        .any(|p| p.failed_requests.is_none())
        .then_some("(probes of this record kept Up/Down only: failed requests not counted)")
}

/// Longest node name the terminal's table keeps in its column; a longer one goes on a
/// line of its own, so the table stays within 80 columns.
const NODE_COLUMN: usize = 22;

/// The terminal's roll tables, one per roll (empty without rolls): each node's row, the
/// nodes not back in time, the probes over the roll. Fits 80 columns.
pub fn rolls_text(record: &RunRecord) -> String {
    let mut out = String::new();
    for roll in &record.rolls {
        out.push_str(&format!(
            "roll `{}` (timeout {}), each stage from the node's own step:\n",
            clean(&roll.roll),
            timeout_text(roll)
        ));
        let drained = roll.nodes.iter().any(|n| n.drained_ms.is_some());
        let width = roll
            .nodes
            .iter()
            .map(|n| n.node.chars().count())
            .filter(|w| *w <= NODE_COLUMN)
            .max()
            .unwrap_or(4)
            .max(4);
        let line = |cells: [&str; 6]| {
            let mut l = format!("  {:<width$}  {:>8}", cells[0], cells[1]);
            if drained {
                l.push_str(&format!("  {:>8}", cells[2]));
            }
            l.push_str(&format!(
                "  {:>8}  {:>12}  {:>9}",
                cells[3], cells[4], cells[5]
            ));
            l.trim_end().to_string() + "\n"
        };
        out.push_str(&line([
            HEADS[0],
            HEADS[1],
            HEADS[2],
            HEADS[3],
            HEADS[4],
            "workloads",
        ]));
        for n in &roll.nodes {
            let cells = row(record, n);
            if cells[0].chars().count() > width {
                out.push_str(&format!("  {}\n", cells[0]));
                out.push_str(&line([
                    "", &cells[1], &cells[2], &cells[3], &cells[4], &cells[5],
                ]));
            } else {
                out.push_str(&line([
                    &cells[0], &cells[1], &cells[2], &cells[3], &cells[4], &cells[5],
                ]));
            }
        }
        for n in roll
            .nodes
            .iter()
            .filter(|n| n.back_in_time(roll.timeout_ms) == Some(false))
        {
            let seen = match n.ready_again_ms {
                Some(ms) => format!("Ready again {}", cell(Some(ms))),
                None => format!(
                    "not seen Ready again in {}",
                    super::text::duration_text(n.watched_ms.unwrap_or(0))
                ),
            };
            out.push_str(&format!(
                "  LATE: {} {seen} after its step (timeout {})\n",
                clean(&n.node),
                timeout_text(roll)
            ));
        }
        let wrap = textwrap::Options::new(80)
            .initial_indent("  ")
            .subsequent_indent("    ");
        for p in &roll.probes {
            for line in textwrap::wrap(&probe_line(p), &wrap) {
                out.push_str(&line);
                out.push('\n');
            }
        }
        if let Some(note) = probes_note(&roll.probes) {
            out.push_str(&format!("  {note}\n"));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;
