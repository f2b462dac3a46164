//! The HTML timeline read at a glance, checked on the real lab records in
//! `fixtures/records/` by parsing the picture: each expectation's window and verdict on its
//! subject's lane, the faults shaded on the nodes they hit, the node named on pod lanes, a
//! picture that scales to its page, and backticks as code.

use crate::records_support::{fixture, repo};
use faultline::judge::Outcome;
use faultline::record::{RunOutcome, RunRecord};
use faultline::report::html;

/// The recorded runs.
const RECORDS: [&str; 4] = [
    "kubelet-stop-past-toleration",
    "kubelet-stop-within-toleration",
    "local-persistent-volume",
    "node-deleted",
];

/// The page's (first) timeline picture, parsed.
fn picture(page: &str) -> roxmltree::Document<'_> {
    let start = page.find("<svg ").expect("a picture");
    let end = page[start..].find("</svg>").expect("its end") + start + "</svg>".len();
    roxmltree::Document::parse(&page[start..end]).expect("the picture is well-formed XML")
}

fn class_is(n: &roxmltree::Node<'_, '_>, class: &str) -> bool {
    n.attribute("class") == Some(class)
}

fn num(n: &roxmltree::Node<'_, '_>, attr: &str) -> f64 {
    n.attribute(attr)
        .unwrap_or_else(|| panic!("no {attr} on <{}>", n.tag_name().name()))
        .parse()
        .unwrap_or_else(|e| panic!("{attr}: {e}"))
}

/// The text of `n`'s own `<title>`.
fn title(n: &roxmltree::Node<'_, '_>) -> String {
    n.children()
        .find(|c| c.has_tag_name("title"))
        .and_then(|t| t.text())
        .unwrap_or_default()
        .to_string()
}

/// Every lane group, by its label.
fn lanes<'a, 'i>(doc: &'a roxmltree::Document<'i>) -> Vec<(String, roxmltree::Node<'a, 'i>)> {
    doc.descendants()
        .filter(|n| n.has_tag_name("g") && class_is(n, "lane"))
        .map(|g| {
            let label = g
                .children()
                .find(|c| c.has_tag_name("text"))
                .and_then(|t| t.text())
                .unwrap_or_default()
                .to_string();
            (label, g)
        })
        .collect()
}

fn lane<'a, 'i>(doc: &'a roxmltree::Document<'i>, label: &str) -> roxmltree::Node<'a, 'i> {
    lanes(doc)
        .into_iter()
        .find(|(l, _)| l == label)
        .unwrap_or_else(|| panic!("no lane {label}"))
        .1
}

/// The expectation rows of a lane, by expectation name (from the row's tooltip).
fn expectations<'a, 'i>(lane: roxmltree::Node<'a, 'i>) -> Vec<(String, roxmltree::Node<'a, 'i>)> {
    lane.children()
        .filter(|n| n.has_tag_name("g") && class_is(n, "expectation"))
        .map(|g| {
            let name = g
                .children()
                .find(|c| class_is(c, "expectation-name"))
                .map(|t| title(&t))
                .unwrap_or_default();
            (name, g)
        })
        .collect()
}

fn expectation<'a, 'i>(lane: roxmltree::Node<'a, 'i>, name: &str) -> roxmltree::Node<'a, 'i> {
    expectations(lane)
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no expectation {name} on the lane"))
        .1
}

/// The x of step `step`'s line.
fn step_x(doc: &roxmltree::Document<'_>, step: &str) -> f64 {
    let group = doc
        .descendants()
        .find(|n| {
            class_is(n, "step")
                && n.children().any(|t| {
                    t.has_tag_name("text")
                        && t.text()
                            .is_some_and(|s| s.starts_with(&format!("{step} +")))
                })
        })
        .unwrap_or_else(|| panic!("no step {step}"));
    let line = group.children().find(|c| c.has_tag_name("line")).unwrap();
    num(&line, "x1")
}

/// The picture's time scale, from two steps' lines and their offsets: x of an offset.
fn scale(doc: &roxmltree::Document<'_>, record: &RunRecord) -> impl Fn(i64) -> f64 {
    let at = |s: &str| record.timeline.step_issued_ms(s).expect("issued");
    let (a, b) = (at("stop kubelet"), at("start kubelet"));
    let (xa, xb) = (step_x(doc, "stop kubelet"), step_x(doc, "start kubelet"));
    let per_ms = (xb - xa) / (b - a) as f64;
    move |ms| xa + (ms - a) as f64 * per_ms
}

/// The window band and the verdict marker of an expectation row.
fn band_and_marker<'a, 'i>(
    row: roxmltree::Node<'a, 'i>,
) -> (roxmltree::Node<'a, 'i>, roxmltree::Node<'a, 'i>) {
    let band = row
        .children()
        .find(|c| class_is(c, "window"))
        .expect("a window band");
    let marker = row
        .children()
        .find(|c| class_is(c, "verdict"))
        .expect("a verdict marker");
    (band, marker)
}

/// The x where a verdict marker is centred.
fn marker_x(marker: &roxmltree::Node<'_, '_>) -> f64 {
    let shape = marker.first_element_child().expect("its shape");
    match shape.tag_name().name() {
        "circle" => num(&shape, "cx"),
        "polygon" => {
            let xs: Vec<f64> = shape
                .attribute("points")
                .unwrap()
                .split_whitespace()
                .map(|p| p.split(',').next().unwrap().parse().unwrap())
                .collect();
            (xs.iter().cloned().fold(f64::MAX, f64::min)
                + xs.iter().cloned().fold(f64::MIN, f64::max))
                / 2.0
        }
        _ => num(&shape, "x") + 5.0,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.6
}

/// The recorded kubelet-stop-within-toleration run judged against the stricter belief in
/// `docs/examples/` (the run's observations, other expectations): the failed run of the
/// screenshots. Every committed record passed.
fn failed_run() -> RunRecord {
    let mut run = fixture("kubelet-stop-within-toleration");
    let exp = faultline::experiment::load(
        &repo().join("docs/examples/kubelet-stop-believed-faster.yaml"),
    )
    .expect("the stricter experiment");
    assert!(run.observed_until_ms.is_some(), "observed until");
    run.judged_against(exp);
    run
}

#[test]
fn a_node_expectation_is_a_band_from_its_step_to_its_bound_with_its_verdict_inside() {
    let record = fixture("kubelet-stop-within-toleration");
    let page = html::render(&record);
    let doc = picture(&page);
    let x = scale(&doc, &record);
    let t0 = record.timeline.step_issued_ms("stop kubelet").unwrap();
    let node = lane(&doc, "node lab-worker-1");
    let row = expectation(node, "node goes Unknown within the grace period");
    assert_eq!(row.attribute("data-outcome"), Some("Passed"));
    let (band, marker) = band_and_marker(row);
    // grace + 10s on the lab: 20 s + 10 s.
    assert!(close(num(&band, "x"), x(t0)), "the band starts at the step");
    assert!(
        close(num(&band, "x") + num(&band, "width"), x(t0 + 30_000)),
        "and ends at its bound, +30 s"
    );
    assert!(title(&band).contains("within grace + 10s = 30s of `stop kubelet`"));
    assert!(
        close(marker_x(&marker), x(t0 + 19_755)),
        "observed at +19.8s"
    );
    assert_eq!(
        marker.first_element_child().unwrap().tag_name().name(),
        "circle"
    );
    let said = title(&marker);
    assert!(said.starts_with("node goes Unknown within the grace period: PASS"));
    assert!(
        said.contains("became Unknown at +19.8s (bound 30.0s)"),
        "{said}"
    );
    // The expectation measured from the later step has its band from that step.
    let back = expectation(node, "node is Ready again after the kubelet returns");
    let (band, _) = band_and_marker(back);
    let t1 = record.timeline.step_issued_ms("start kubelet").unwrap();
    assert!(close(num(&band, "x"), x(t1)));
    assert!(close(num(&band, "x") + num(&band, "width"), x(t1 + 20_000)));
}

#[test]
fn a_failed_expectation_is_marked_failed_where_it_was_observed_outside_its_window() {
    let record = failed_run();
    assert_eq!(record.outcome, RunOutcome::Failed);
    let page = html::render(&record);
    let doc = picture(&page);
    let x = scale(&doc, &record);
    let t0 = record.timeline.step_issued_ms("stop kubelet").unwrap();
    let row = expectation(
        lane(&doc, "node lab-worker-1"),
        "node goes Unknown within 10s",
    );
    assert_eq!(row.attribute("data-outcome"), Some("Failed"));
    let (band, marker) = band_and_marker(row);
    assert!(close(num(&band, "x") + num(&band, "width"), x(t0 + 10_000)));
    assert!(
        close(marker_x(&marker), x(t0 + 19_755)),
        "the marker is where the node went Unknown, after the band"
    );
    assert_eq!(
        marker.first_element_child().unwrap().tag_name().name(),
        "polygon",
        "a failure is a diamond, not only a colour"
    );
    assert!(title(&marker).contains("FAIL"), "{}", title(&marker));
    // A hold that broke: marked on the pod's lane when it broke.
    let pod = lanes(&doc)
        .into_iter()
        .find(|(l, _)| l.starts_with("pod web-7f95d99b4-hf6tq"))
        .expect("the web pod's lane")
        .1;
    let (_, marker) = band_and_marker(expectation(
        pod,
        "web pods stay Ready while the kubelet is away",
    ));
    assert!(close(marker_x(&marker), x(t0 + 19_769)));
    // The message counts from time zero (the experiment's start), the picture from `since`.
    let left = faultline::timeline::format_offset_ms(t0 + 19_769 - record.zero_ms());
    assert!(
        title(&marker).contains(&format!("left Ready at {left}")),
        "{}",
        title(&marker)
    );
}

#[test]
fn every_judged_expectation_of_every_record_is_on_its_subjects_lanes() {
    use faultline::experiment::model::Subject;
    for name in RECORDS {
        let record = fixture(name);
        let page = html::render(&record);
        let doc = picture(&page);
        let lanes = lanes(&doc);
        for v in &record.verdicts {
            let e = record
                .experiment
                .expectations
                .iter()
                .find(|e| e.name == v.name)
                .unwrap();
            let on: Vec<&String> = lanes
                .iter()
                .filter(|(_, g)| expectations(*g).iter().any(|(n, _)| *n == v.name))
                .map(|(l, _)| l)
                .collect();
            if v.outcome == Outcome::Skipped {
                assert!(on.is_empty(), "{name}: skipped `{}` is not drawn", v.name);
                continue;
            }
            assert!(!on.is_empty(), "{name}: `{}` on no lane", v.name);
            for label in &on {
                let fits = match &e.subject {
                    Subject::Node { .. } => v
                        .members
                        .iter()
                        .any(|m| **label == format!("node {}", m.member)),
                    // With no pod to show (none was ever a replacement), on its workload's.
                    Subject::Pods(p) if v.members.is_empty() => **label == p.workload.to_string(),
                    Subject::Pods(_) => v
                        .members
                        .iter()
                        .any(|m| label.starts_with(&format!("pod {} (", m.member))),
                    Subject::Workload(w) => **label == w.to_string(),
                    Subject::Probe { name } => **label == format!("probe {name}"),
                };
                assert!(fits, "{name}: `{}` drawn on {label}", v.name);
            }
        }
    }
}

#[test]
fn a_fault_is_shaded_on_its_nodes_lane_from_its_step_to_its_undo() {
    let record = fixture("kubelet-stop-past-toleration");
    let page = html::render(&record);
    let doc = picture(&page);
    let faults: Vec<(String, roxmltree::Node<'_, '_>)> = lanes(&doc)
        .into_iter()
        .flat_map(|(label, g)| {
            g.children()
                .filter(|c| class_is(c, "fault"))
                .map(move |f| (label.clone(), f))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(faults.len(), 1, "one fault, on one node");
    let (label, fault) = &faults[0];
    assert_eq!(label, "node lab-worker-2");
    assert_eq!(fault.attribute("data-step"), Some("stop kubelet"));
    let shade = fault.first_element_child().unwrap();
    let (x0, x1) = (num(&shade, "x"), num(&shade, "x") + num(&shade, "width"));
    assert!(close(x0, step_x(&doc, "stop kubelet")));
    assert!(close(x1, step_x(&doc, "start kubelet")));
    assert!(title(fault).contains("undone by `start kubelet`"));

    // A deleted Node is a fault of its own on the same lane, over when it was done.
    let doc_page = html::render(&fixture("node-deleted"));
    let doc = picture(&doc_page);
    let steps: Vec<String> = lane(&doc, "node lab-worker-1")
        .children()
        .filter(|c| class_is(c, "fault"))
        .map(|f| f.attribute("data-step").unwrap().to_string())
        .collect();
    assert_eq!(steps, ["stop kubelet", "delete node"]);
}

#[test]
fn pod_lanes_name_the_node_each_pod_ran_on() {
    let record = fixture("kubelet-stop-past-toleration");
    let page = html::render(&record);
    let doc = picture(&page);
    let mut named = 0;
    for (label, g) in lanes(&doc) {
        let Some(pod) = label.strip_prefix("pod ") else {
            continue;
        };
        let pod = pod.split(' ').next().unwrap();
        let nodes: Vec<&str> = record
            .timeline
            .entries
            .iter()
            .filter_map(|e| match &e.event {
                faultline::timeline::Event::Pod {
                    pod: id,
                    after: Some(s),
                    ..
                } if id.name == pod => s.node.as_deref(),
                _ => None,
            })
            .collect();
        let written: Vec<&str> = g
            .children()
            .filter(|c| class_is(c, "pod-node"))
            .filter_map(|t| t.text())
            .collect();
        for w in &written {
            assert!(nodes.contains(w), "{label}: {w} is not a node it ran on");
        }
        named += usize::from(!written.is_empty());
    }
    assert!(named >= 9, "the pods on lanes long enough: {named}");
    let replacement = lanes(&doc)
        .into_iter()
        .filter(|(l, _)| l.starts_with("pod web-"))
        .flat_map(|(_, g)| {
            g.children()
                .filter(|c| class_is(c, "pod-node"))
                .filter_map(|t| t.text().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect::<std::collections::BTreeSet<_>>();
    assert!(
        replacement.len() >= 2,
        "web pods on the stopped node and their replacements elsewhere: {replacement:?}"
    );
}

#[test]
fn the_picture_scales_to_its_page() {
    for name in RECORDS {
        let page = html::render(&fixture(name));
        let doc = picture(&page);
        let svg = doc.root_element();
        assert_eq!(svg.attribute("width"), Some("100%"), "{name}");
        assert_eq!(
            svg.attribute("height"),
            None,
            "{name}: its height follows its width"
        );
        let view: Vec<f64> = svg
            .attribute("viewBox")
            .unwrap()
            .split(' ')
            .map(|v| v.parse().unwrap())
            .collect();
        assert!(view[2] > 1000.0 && view[3] > 100.0, "{name}: {view:?}");
        assert!(
            page.contains("<div class=\"timeline-wrap\"><svg "),
            "{name}"
        );
    }
}

#[test]
fn backticks_are_code_and_the_rest_stays_escaped() {
    let mut record = failed_run();
    let page = html::render(&record);
    let table_start = page.find("<table class=\"verdicts\">").unwrap();
    let table = &page[table_start..table_start + page[table_start..].find("</table>").unwrap()];
    assert!(table.contains("after <code>stop kubelet</code>"), "{table}");
    assert!(
        !table.contains('`'),
        "no backtick left in the verdicts: {table}"
    );
    record.verdicts[0].message = "`<img src=x onerror=alert(1)>` and `a & b`".into();
    record.errors = vec!["undo of `stop kubelet` failed".into()];
    let page = html::render(&record);
    assert!(
        page.contains("<code>&lt;img src=x onerror=alert(1)&gt;</code> and <code>a &amp; b</code>")
    );
    assert!(page.contains("<li class=\"Error\">undo of <code>stop kubelet</code> failed</li>"));
    assert!(!page.contains("<img"));
}

#[test]
fn a_series_page_writes_backticks_as_code_too() {
    let mut run = fixture("kubelet-stop-within-toleration");
    run.experiment.description = "start again after `grace + 5s` <b>".into();
    let series = crate::records_support::series(vec![run.clone(), run]);
    let page = faultline::report::series::html::render(&series);
    assert!(page.contains("start again after <code>grace + 5s</code> &lt;b&gt;"));
}

/// Issue 47, item 6, on the one failed record (two kubelets stopped at once, an early
/// stop, a `count: all` expectation one of whose pods went Terminating in its window).
#[test]
fn the_failed_zone_run_reads_without_cut_labels_doubled_labels_or_an_unlabelled_stop() {
    let record = fixture("zones/one-zone");
    assert_eq!(record.outcome, RunOutcome::Failed);
    let page = html::render(&record);
    let doc = picture(&page);
    // The step issued on both nodes: a line for each, one label.
    let step_lines = doc.descendants().filter(|n| class_is(n, "step")).count();
    let labels = doc
        .descendants()
        .filter(|n| {
            n.has_tag_name("text") && n.text().is_some_and(|t| t.starts_with("stop kubelets +"))
        })
        .count();
    assert!(step_lines >= 2, "{step_lines}");
    assert_eq!(labels, 1, "one label for the step on two nodes");
    // The early stop says so on the picture, not only on hover.
    let stop = doc
        .descendants()
        .find(|n| class_is(n, "early-stop"))
        .expect("the early stop is labelled");
    assert!(
        stop.text()
            .unwrap_or_default()
            .starts_with("stopped early +")
    );
    // A long name wraps over two lines, every word kept, and the rows below make room.
    let long = "web pods on both are evicted, neither waiting a queue turn";
    for (_, lane) in lanes(&doc) {
        let mut next_free = f64::MIN;
        for (name, row) in expectations(lane) {
            let text = row
                .children()
                .find(|c| class_is(c, "expectation-name"))
                .expect("its name");
            let y = num(&text, "y");
            assert!(y >= next_free, "{name}: rows overlap");
            let lines: Vec<String> = text
                .children()
                .filter(|c| c.has_tag_name("tspan"))
                .map(|t| t.text().unwrap_or_default().chars().skip(2).collect())
                .collect();
            assert_eq!(lines.join(" "), name, "every word written");
            if name == long {
                assert_eq!(lines.len(), 2, "{lines:?}");
            }
            next_free = y + 16.0 * lines.len() as f64 - 0.5;
        }
    }
    // `count: all` failed on one pod: the other pod's marker, inside its window, is not red.
    let mut seen = Vec::new();
    for (label, lane) in lanes(&doc)
        .into_iter()
        .filter(|(l, _)| l.starts_with("pod "))
    {
        let Some((_, row)) = expectations(lane).into_iter().find(|(n, _)| n == long) else {
            continue;
        };
        let (band, marker) = band_and_marker(row);
        let inside =
            (num(&band, "x")..=num(&band, "x") + num(&band, "width")).contains(&marker_x(&marker));
        let member = marker.attribute("data-member-outcome").unwrap_or_default();
        if member == "Passed" {
            assert!(inside, "{label}: {}", title(&marker));
            assert!(
                title(&marker).contains("this one held"),
                "{}",
                title(&marker)
            );
        }
        seen.push(member.to_string());
    }
    assert!(seen.contains(&"Failed".to_string()), "{seen:?}");
    assert!(seen.contains(&"Passed".to_string()), "{seen:?}");
}
