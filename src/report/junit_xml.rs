//! The JUnit XML plumbing every JUnit report shares (of a run, of a series, of a
//! comparison): a report written as XML, a suite's `time` set to the wall time, suite
//! properties put in. It renders nothing of its own, so no JUnit reporter imports another.

use junit_report::Report;

/// Seconds from `started` to `finished` (never negative): a run's wall time, what a CI
/// step waited for it.
pub(crate) fn wall_secs(
    started: chrono::DateTime<chrono::Utc>,
    finished: chrono::DateTime<chrono::Utc>,
) -> f64 {
    (finished - started).num_milliseconds().max(0) as f64 / 1000.0
}

/// The XML with the `time` of suite `index` set to `secs`. The `junit-report` crate
/// writes a suite's time as the sum of its cases' times: for an experiment that is the
/// sum of measured expectation times (23 s for a 2-minute run), not how long it took.
/// Its writer escapes `"` in attribute values, so ` time="` can only start the attribute.
pub(crate) fn with_suite_time(xml: String, index: usize, secs: f64) -> String {
    let Some(start) = xml.match_indices("<testsuite ").nth(index).map(|(i, _)| i) else {
        return xml;
    };
    let Some(tag_end) = xml[start..].find('>').map(|e| start + e) else {
        return xml;
    };
    const ATTRIBUTE: &str = " time=\"";
    let Some(value) = xml[start..tag_end]
        .find(ATTRIBUTE)
        .map(|i| start + i + ATTRIBUTE.len())
    else {
        return xml;
    };
    let Some(value_end) = xml[value..tag_end].find('"').map(|e| value + e) else {
        return xml;
    };
    let mut out = xml;
    out.replace_range(value..value_end, &format!("{secs:.3}"));
    out
}

/// The report as XML. Writing into memory only fails if the writer itself breaks; then
/// it is still a report CI can read, with one error case, rather than none.
pub(crate) fn xml(report: &Report, name: &str) -> String {
    let mut buf = Vec::new();
    match report.write_xml(&mut buf) {
        Ok(()) => String::from_utf8_lossy(&buf).into_owned(),
        Err(e) => format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<testsuites><testsuite name=\"{name}\" tests=\"1\" errors=\"1\" failures=\"0\"><testcase name=\"report\" classname=\"{name}\"><error type=\"error\" message=\"{msg}\"/></testcase></testsuite></testsuites>\n",
            name = crate::sanitize::html(name),
            msg = crate::sanitize::html(&format!("could not write JUnit XML: {e}")),
        ),
    }
}

/// Suite properties `(suite index, [(name, value)])`, as JUnit's `<properties>` first in
/// each suite: the `junit-report` crate writes none, so they are put in after its XML.
/// Its writer escapes `>` in attribute values, so the first `>` after `<testsuite ` ends
/// the start tag.
pub(crate) fn with_properties(xml: String, props: &[(usize, Vec<(String, String)>)]) -> String {
    let mut starts: Vec<usize> = xml.match_indices("<testsuite ").map(|(i, _)| i).collect();
    let mut out = xml;
    // From the last suite back, so earlier positions stay valid.
    starts.reverse();
    let count = starts.len();
    for (i, start) in starts.into_iter().enumerate() {
        let index = count - 1 - i;
        let Some((_, list)) = props.iter().find(|(n, _)| *n == index) else {
            continue;
        };
        let Some(end) = out[start..].find('>').map(|e| start + e) else {
            continue;
        };
        let block: String = list
            .iter()
            .map(|(n, v)| {
                format!(
                    "<property name=\"{}\" value=\"{}\"/>",
                    crate::sanitize::html(n),
                    crate::sanitize::html(v)
                )
            })
            .collect();
        let block = format!("<properties>{block}</properties>");
        if out[..end].ends_with('/') {
            // An empty suite, `<testsuite …/>`: open it to hold the properties.
            out.replace_range(end - 1..=end, &format!(">{block}</testsuite>"));
        } else {
            out.insert_str(end + 1, &block);
        }
    }
    out
}
