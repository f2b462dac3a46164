//! File names made from names users choose (experiments, clusters): one rule, so a report
//! and a snapshot never disagree about what a name becomes on disk.

/// `name` with every character other than ASCII letters, digits, `-`, `_` and `.` replaced
/// by `_`: safe as one path component on every filesystem faultline writes to.
pub(crate) fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::safe;

    #[test]
    fn separators_and_spaces_become_underscores_and_the_rest_is_kept() {
        assert_eq!(safe("kind-ci/us east:1"), "kind-ci_us_east_1");
        assert_eq!(safe("web_v1.2"), "web_v1.2");
        assert_eq!(safe("ünïcode"), "_n_code");
    }
}
