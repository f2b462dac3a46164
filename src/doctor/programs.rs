//! Which programs a node's commands start, and whether the node has them: one `command -v`
//! script over the node's transport names every one it lacks, with the commands using it.

use std::collections::BTreeMap;

use super::{CheckKind, Finding, Status};

/// The line the check script ends with, so its output is known to be its own.
const SCRIPT_DONE: &str = "faultline-doctor-done";
/// The prefix of a line naming a program the node does not have.
const MISSING: &str = "faultline-missing:";

/// Shell words that start a compound command or change how the next word runs, skipped
/// to find the program a command starts.
const NOT_PROGRAMS: &[&str] = &[
    "while", "until", "if", "then", "do", "else", "elif", "!", "{", "(", "exec", "command",
    "nohup", "setsid", "env", "time", "sudo",
];

/// The program a shell command starts first: its first word that is neither a variable
/// assignment nor a keyword or wrapper (`while iptables -D …` starts `iptables`).
pub(crate) fn first_program(text: &str) -> Option<String> {
    let words =
        shlex::split(text).unwrap_or_else(|| text.split_whitespace().map(str::to_string).collect());
    words
        .into_iter()
        .map(|w| w.trim_start_matches(['(', '{']).to_string())
        .filter(|w| !w.is_empty())
        .find(|w| {
            let assignment = w.contains('=') && !w.starts_with(['/', '.']);
            !(NOT_PROGRAMS.contains(&w.as_str()) || w.starts_with('-') || assignment)
        })
        .map(|w| w.trim_end_matches([';', '&', '|']).to_string())
        .filter(|w| !w.is_empty() && !w.starts_with(':'))
}

/// `command -v` for each program, a line per missing one, then the done marker.
pub(super) fn program_script<'a>(programs: impl Iterator<Item = &'a String>) -> String {
    let quoted: Vec<String> = programs
        .filter_map(|p| shlex::try_quote(p).ok().map(|q| q.into_owned()))
        .collect();
    if quoted.is_empty() {
        return format!("echo {SCRIPT_DONE}");
    }
    format!(
        "for p in {}; do command -v \"$p\" >/dev/null 2>&1 || echo \"{MISSING} $p\"; done; echo {SCRIPT_DONE}",
        quoted.join(" ")
    )
}

/// Which programs are missing, and commands the experiments need that are not configured.
pub(super) fn commands_finding(
    name: &str,
    output: &str,
    programs: &BTreeMap<String, Vec<String>>,
    not_configured: &[String],
) -> Finding {
    let mut problems: Vec<String> = not_configured
        .iter()
        .map(|key| format!("no `{key}` configured, and the experiments use it"))
        .collect();
    if !output.contains(SCRIPT_DONE) {
        problems.push(format!(
            "the check of {} program(s) printed something else: {}",
            programs.len(),
            output.trim()
        ));
    }
    for line in output.lines() {
        if let Some(program) = line.trim().strip_prefix(MISSING) {
            let program = program.trim();
            let users = programs
                .get(program)
                .map(|u| u.join("; "))
                .unwrap_or_default();
            problems.push(format!(
                "`{program}` is not found on the node (used by {users})"
            ));
        }
    }
    if problems.is_empty() {
        let names: Vec<&str> = programs.keys().map(String::as_str).collect();
        Finding::node(
            name,
            CheckKind::Commands,
            Status::Pass,
            if names.is_empty() {
                "none needed".to_string()
            } else {
                format!("found: {}", names.join(", "))
            },
        )
    } else {
        Finding::node(name, CheckKind::Commands, Status::Fail, problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_program_of_a_command() {
        let p = |t: &str| first_program(t);
        assert_eq!(p("systemctl stop kubelet").as_deref(), Some("systemctl"));
        assert_eq!(
            p("/abs/ci/lab/node-ctl kubelet stop").as_deref(),
            Some("/abs/ci/lab/node-ctl")
        );
        assert_eq!(
            p("while iptables -D OUTPUT -j DROP 2>/dev/null; do :; done").as_deref(),
            Some("iptables")
        );
        assert_eq!(p("FOO=bar LANG=C sh -c 'x'").as_deref(), Some("sh"));
        assert_eq!(
            p("sudo -n systemctl stop k3s").as_deref(),
            Some("systemctl")
        );
        assert_eq!(
            p("systemd-run --unit=x --on-active=5 sh -c {undo}").as_deref(),
            Some("systemd-run")
        );
        assert_eq!(p("").as_deref(), None);
    }

    #[test]
    fn the_program_script_names_what_is_missing() {
        let progs = ["iptables".to_string(), "/opt/it's".to_string()];
        let script = program_script(progs.iter());
        assert!(
            script.contains("'/opt/it'\"'\"'s'") || script.contains("\"/opt/it's\""),
            "{script}"
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(program_script(
                ["sh".to_string(), "no-such-program-xyz".to_string()].iter(),
            ))
            .output()
            .expect("sh");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("faultline-missing: no-such-program-xyz"),
            "{text}"
        );
        assert!(!text.contains("faultline-missing: sh"), "{text}");
        assert!(text.contains(SCRIPT_DONE));
    }
}
