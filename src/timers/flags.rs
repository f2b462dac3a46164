//! Reading flags out of a recorded command line: a static pod's `command`, or the k3s
//! server's argv with its `--kube-controller-manager-arg key=value` pass-throughs.
//!
//! Go's flag package accepts `--flag=value` and `--flag value` and the last occurrence
//! wins; so does this. Values are Go durations (`40s`, `1m30s`) or whole seconds.

use std::time::Duration;

use thiserror::Error;

/// The value of `flag` (written with its dashes, e.g. `--node-monitor-period`) in `argv`,
/// as Go's flag package would see it: the last occurrence wins.
pub(crate) fn flag_value(argv: &[String], flag: &str) -> Option<String> {
    let mut found = None;
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if let Some(rest) = arg.strip_prefix(flag) {
            if let Some(value) = rest.strip_prefix('=') {
                found = Some(value.to_string());
            } else if rest.is_empty() {
                found = args.next().cloned();
            }
        }
    }
    found
}

/// Every value of a repeatable flag (k3s's `--kube-controller-manager-arg`), in order.
pub(crate) fn flag_values(argv: &[String], flag: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if let Some(rest) = arg.strip_prefix(flag) {
            if let Some(value) = rest.strip_prefix('=') {
                found.push(value.to_string());
            } else if rest.is_empty()
                && let Some(value) = args.next()
            {
                found.push(value.clone());
            }
        }
    }
    found
}

/// The component argv k3s builds from its pass-through flag: each
/// `--kube-controller-manager-arg node-monitor-grace-period=20s` becomes
/// `--node-monitor-grace-period=20s` (k3s also accepts the inner dashes written out).
pub(crate) fn k3s_component_args(argv: &[String], pass_through: &str) -> Vec<String> {
    flag_values(argv, pass_through)
        .into_iter()
        .map(|kv| format!("--{}", kv.trim_start_matches('-')))
        .collect()
}

/// Why a timer flag's value could not be read; the message quotes the value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FlagValueError {
    /// Not written as a Go `time.Duration`.
    #[error("`{0}` is not a Go duration (e.g. 40s, 1m30s, 500ms)")]
    NotGoDuration(String),
    /// A Go duration too long for a [`Duration`].
    #[error("`{0}` is longer than a duration can hold")]
    TooLong(String),
    /// Not a whole number of seconds.
    #[error("`{0}` is not a whole number of seconds")]
    NotSeconds(String),
}

/// A Go `time.Duration` string (`40s`, `1m0s`, `500ms`, `1.5s`, `1h`), as the components
/// print and parse them.
pub(crate) fn parse_go_duration(text: &str) -> Result<Duration, FlagValueError> {
    let bad = || FlagValueError::NotGoDuration(text.to_string());
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..number_len].parse().map_err(|_| bad())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        total += number * seconds;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| FlagValueError::TooLong(text.to_string()))
}

/// Whole seconds, as `--default-unreachable-toleration-seconds` takes them.
pub(crate) fn parse_seconds(text: &str) -> Result<u64, FlagValueError> {
    text.parse()
        .map_err(|_| FlagValueError::NotSeconds(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_go_duration_too_long_to_hold_is_an_error_not_a_panic() {
        let err = parse_go_duration("99999999999999999999h").unwrap_err();
        assert_eq!(err, FlagValueError::TooLong("99999999999999999999h".into()));
        assert!(
            err.to_string().contains("longer than a duration can hold"),
            "{err}"
        );
        assert_eq!(parse_go_duration("1h30m"), Ok(Duration::from_secs(5400)));
    }

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn both_flag_forms_and_the_last_occurrence_wins() {
        let a = argv("kcm --node-monitor-period=5s --node-monitor-grace-period 20s --x");
        assert_eq!(
            flag_value(&a, "--node-monitor-period").as_deref(),
            Some("5s")
        );
        assert_eq!(
            flag_value(&a, "--node-monitor-grace-period").as_deref(),
            Some("20s")
        );
        let a = argv("kcm --node-monitor-period=5s --node-monitor-period=2s");
        assert_eq!(
            flag_value(&a, "--node-monitor-period").as_deref(),
            Some("2s")
        );
        // A longer flag sharing the prefix is not the flag.
        let a = argv("kcm --node-monitor-period-extra=9s");
        assert_eq!(flag_value(&a, "--node-monitor-period"), None);
    }

    #[test]
    fn k3s_pass_through_args_become_component_flags() {
        let a = argv(
            "/bin/k3s server --kube-controller-manager-arg=node-monitor-grace-period=20s \
             --kube-controller-manager-arg --node-monitor-period=2s \
             --kube-apiserver-arg=default-unreachable-toleration-seconds=30",
        );
        let kcm = k3s_component_args(&a, "--kube-controller-manager-arg");
        assert_eq!(
            kcm,
            [
                "--node-monitor-grace-period=20s",
                "--node-monitor-period=2s"
            ]
        );
        assert_eq!(
            flag_value(&kcm, "--node-monitor-grace-period").as_deref(),
            Some("20s")
        );
        let api = k3s_component_args(&a, "--kube-apiserver-arg");
        assert_eq!(api, ["--default-unreachable-toleration-seconds=30"]);
    }

    #[test]
    fn go_durations() {
        let s = Duration::from_secs;
        assert_eq!(parse_go_duration("40s"), Ok(s(40)));
        assert_eq!(parse_go_duration("1m0s"), Ok(s(60)));
        assert_eq!(parse_go_duration("1m30s"), Ok(s(90)));
        assert_eq!(parse_go_duration("1h"), Ok(s(3600)));
        assert_eq!(parse_go_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "40", "s", "4x", "1m30", "-5s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_seconds("300"), Ok(300));
        assert!(parse_seconds("5m").is_err());
    }
}
