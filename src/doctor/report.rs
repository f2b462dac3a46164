//! `doctor`'s findings for people (a table, failures repeated at the end) and for tools
//! (`--output json`).

use serde::Serialize;

use super::{Examination, Finding, Status};
use crate::sanitize::clean;
use crate::timers::TimerSource;

/// The table: one row per check, cluster first, then node by node; the failures again at
/// the end, one line each, as `run` quotes them; then `missing_rules`, the RBAC rules that
/// grant what the API server refused, when there are any.
pub fn table(exam: &Examination, missing_rules: Option<&str>) -> String {
    let mut out = format!(
        "faultline doctor: cluster {} ({}), inventory {}\n",
        clean(&exam.cluster),
        exam.version.as_deref().unwrap_or("version unknown"),
        exam.inventory.display()
    );
    let where_width = exam
        .findings
        .iter()
        .map(|f| f.place().chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    let check_width = exam
        .findings
        .iter()
        .map(|f| f.check.title().len())
        .max()
        .unwrap_or(5)
        .max(5);
    out.push_str(&format!(
        "{:<where_width$}  {:<check_width$}  {:<6}  DETAIL\n",
        "WHERE", "CHECK", "RESULT"
    ));
    for f in &exam.findings {
        out.push_str(&format!(
            "{:<where_width$}  {:<check_width$}  {:<6}  {}\n",
            clean(f.place()),
            f.check.title(),
            f.status.word(),
            one_line(&f.detail)
        ));
    }
    let count = |s: Status| exam.findings.iter().filter(|f| f.status == s).count();
    out.push_str(&format!(
        "\n{} failed, {} warning(s), {} passed, {} skipped\n",
        count(Status::Fail),
        count(Status::Warn),
        count(Status::Pass),
        count(Status::Skip)
    ));
    for f in exam.findings.iter().filter(|f| f.status == Status::Fail) {
        out.push_str(&format!("FAIL {}\n", one_line(&f.to_string())));
    }
    if let Some(rules) = missing_rules {
        out.push_str("\nRBAC rules that grant the missing permissions, ready to paste:\n");
        out.push_str(rules);
    }
    out
}

/// Control characters out, one line: node output must not redraw the terminal.
fn one_line(text: &str) -> String {
    clean(&text.replace(['\n', '\r'], " "))
}

/// The JSON document `--output json` prints.
#[derive(Serialize)]
struct Document<'a> {
    inventory: String,
    cluster: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<&'a str>,
    failed: bool,
    summary: Summary,
    findings: &'a [Finding],
    timers: &'a [TimerSource],
    #[serde(rename = "timersNotRead")]
    timers_not_read: &'a [String],
    #[serde(rename = "missingRules", skip_serializing_if = "Option::is_none")]
    missing_rules: Option<&'a str>,
}

#[derive(Serialize)]
struct Summary {
    pass: usize,
    warn: usize,
    fail: usize,
    skip: usize,
}

/// The findings and the timers as one JSON object, with `missing_rules` (as
/// [`table`]'s) when there are any.
pub fn json(exam: &Examination, missing_rules: Option<&str>) -> String {
    let count = |s: Status| exam.findings.iter().filter(|f| f.status == s).count();
    let doc = Document {
        inventory: exam.inventory.display().to_string(),
        cluster: &exam.cluster,
        version: exam.version.as_deref(),
        failed: exam.failed(),
        summary: Summary {
            pass: count(Status::Pass),
            warn: count(Status::Warn),
            fail: count(Status::Fail),
            skip: count(Status::Skip),
        },
        findings: &exam.findings,
        timers: &exam.timers.in_force.sources,
        timers_not_read: &exam.timers.misses,
        missing_rules,
    };
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::CheckKind;
    use crate::timers::{ClusterReadings, StatedTimers, TimersInForce};

    fn exam() -> Examination {
        Examination {
            inventory: "inv.yaml".into(),
            cluster: "lab".into(),
            version: Some("v1.33.13".into()),
            findings: vec![
                Finding::cluster(CheckKind::Api, Status::Pass, "answers"),
                Finding::node(
                    "lab-worker-1",
                    CheckKind::HostKey,
                    Status::Fail,
                    "HOST KEY MISMATCH\nfor 10.0.0.1\x1b[31m",
                ),
                Finding::node("lab-worker-1", CheckKind::Auth, Status::Skip, "not checked"),
            ],
            timers: super::super::timers_in_force::Resolved {
                in_force: TimersInForce::resolve(
                    &ClusterReadings::default(),
                    &StatedTimers::default(),
                    Some("v1.33.13"),
                ),
                misses: vec!["no controller-manager".into()],
            },
            missing: Vec::new(),
        }
    }

    #[test]
    fn the_table_has_a_row_per_check_and_repeats_failures() {
        let text = table(&exam(), None);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with("WHERE"), "{text}");
        assert!(
            lines[3].starts_with("lab-worker-1  host key  FAIL    HOST KEY MISMATCH for 10.0.0.1"),
            "{text}"
        );
        assert!(
            !text.contains('\x1b'),
            "control characters removed: {text:?}"
        );
        assert!(
            text.contains("1 failed, 0 warning(s), 1 passed, 1 skipped"),
            "{text}"
        );
        assert!(
            text.contains("FAIL lab-worker-1 host key: HOST KEY MISMATCH"),
            "{text}"
        );
    }

    #[test]
    fn the_missing_rules_follow_the_table_and_sit_in_the_json() {
        let rules = "# ClusterRole rules:\nrules: []\n";
        let text = table(&exam(), Some(rules));
        assert!(
            text.ends_with(&format!("ready to paste:\n{rules}")),
            "{text}"
        );
        assert!(!table(&exam(), None).contains("ready to paste"));
        let doc: serde_json::Value =
            serde_json::from_str(&json(&exam(), Some(rules))).expect("json");
        assert_eq!(doc["missingRules"], rules);
        let doc: serde_json::Value = serde_json::from_str(&json(&exam(), None)).expect("json");
        assert!(doc.get("missingRules").is_none(), "{doc}");
    }

    #[test]
    fn json_carries_findings_timers_and_the_verdict() {
        let doc: serde_json::Value = serde_json::from_str(&json(&exam(), None)).expect("json");
        assert_eq!(doc["failed"], true);
        assert_eq!(doc["summary"]["fail"], 1);
        assert_eq!(doc["findings"][1]["node"], "lab-worker-1");
        assert_eq!(doc["findings"][1]["check"], "host-key");
        assert_eq!(doc["findings"][1]["status"], "fail");
        assert!(
            doc["findings"][0].get("node").is_none(),
            "cluster findings have no node"
        );
        assert_eq!(doc["timers"][1]["timer"], "nodeMonitorGracePeriod");
        assert_eq!(doc["timers"][1]["origin"], "assumed");
        assert_eq!(doc["timersNotRead"][0], "no controller-manager");
    }
}
