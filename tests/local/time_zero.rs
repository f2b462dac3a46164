//! One time zero (issue 47, item 3): the judge's messages (re-judged by `rehearse`),
//! `explain`, the HTML picture and the report's head count a moment from the same zero,
//! the experiment's `at: 0s`, and say when it was. Through the built binary, on a
//! recorded run.

use std::path::Path;
use std::process::Command;

fn faultline(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(args)
        .env_remove("KUBECONFIG")
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("faultline runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `+12.3s` right after `marker` in `text`.
fn moment_after<'a>(text: &'a str, marker: &str) -> &'a str {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in\n{text}"))
        + marker.len();
    let rest = &text[at..];
    let end = rest.find('s').expect("a moment ends in s") + 1;
    &rest[..end]
}

#[test]
fn the_judge_explain_and_the_picture_put_the_node_going_unknown_at_one_moment() {
    const RECORD: &str = "fixtures/records/kubelet-stop-past-toleration.json";
    let rehearsal = faultline(&[
        "rehearse",
        "experiments/kubelet-stop-past-toleration.yaml",
        "--record",
        RECORD,
    ]);
    let explained = faultline(&["explain", RECORD]);
    let page = faultline(&["report", "-o", "html", RECORD]);
    let judged = moment_after(&rehearsal, "lab-worker-2 became Unknown at ");
    let modelled = moment_after(&explained, "lab-worker-2 Unknown: predicted ");
    let observed = moment_after(
        &explained[explained
            .find("lab-worker-2 Unknown:")
            .expect("the node's line")..],
        "observed ",
    );
    assert!(judged.starts_with('+'), "{judged}");
    assert_eq!(judged, observed, "the judge and explain: one zero");
    assert!(modelled.starts_with('+'), "{modelled}");
    assert!(
        page.contains(&format!("<title>Ready Unknown from {judged}</title>")),
        "the picture's lane says the same moment"
    );
    // The measured time is a duration after the step, not a moment: no `+`.
    let text = faultline(&["report", RECORD]);
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("time zero +0.0s = 2026-11-23 ")
                && l.ends_with("the experiment's `at: 0s`")),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.contains("node goes Unknown within the grace period"))
        .expect("the row");
    assert!(row.contains(" 19.2s  lab-worker-2 became"), "{row}");
}
