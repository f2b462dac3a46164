//! Filling `{name}` placeholders in command templates, with every substituted VALUE made safe.
//!
//! Templates in the inventory are trusted text written by the cluster's owner; the values
//! put into them (node names, addresses, tokens, whole undo commands) are not, so in shell
//! text each value is quoted as one word, and in argv lists it becomes exactly one argument.
//! NUL can be represented in neither and is refused.

use std::borrow::Cow;

use thiserror::Error;

/// A value that cannot be placed into a command.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RenderError {
    /// NUL bytes cannot travel in an argument or in shell text.
    #[error("value for {{{name}}} contains a NUL byte")]
    Nul {
        /// Placeholder name.
        name: String,
    },
    /// An argv template with no program.
    #[error("empty argv template")]
    EmptyArgv,
}

/// Quote one value as a single POSIX shell word.
pub(crate) fn quote(value: &str) -> Result<Cow<'_, str>, RenderError> {
    if value.contains('\0') {
        return Err(RenderError::Nul {
            name: "value".into(),
        });
    }
    // An empty value must still be one (empty) word.
    if value.is_empty() {
        return Ok(Cow::Borrowed("''"));
    }
    shlex::try_quote(value).map_err(|_| RenderError::Nul {
        name: "value".into(),
    })
}

/// Replace known placeholders in one pass; unknown `{...}` text (e.g. Go templates) stays.
fn substitute(
    template: &str,
    vars: &[(&str, &str)],
    mut encode: impl FnMut(&str, &str) -> Result<String, RenderError>,
) -> Result<String, RenderError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let hit = after.find('}').and_then(|close| {
            let name = &after[..close];
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(n, v)| (close, *n, *v))
        });
        match hit {
            Some((close, name, value)) => {
                out.push_str(&encode(name, value)?);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Render shell text: each substituted value is quoted as one word.
pub(crate) fn shell(template: &str, vars: &[(&str, &str)]) -> Result<String, RenderError> {
    substitute(template, vars, |name, value| {
        quote(value)
            .map(Cow::into_owned)
            .map_err(|_| RenderError::Nul { name: name.into() })
    })
}

/// Render an argv list (no shell): each substituted value is inserted verbatim.
pub(crate) fn argv(template: &[String], vars: &[(&str, &str)]) -> Result<Vec<String>, RenderError> {
    if template.is_empty() {
        return Err(RenderError::EmptyArgv);
    }
    template
        .iter()
        .map(|arg| {
            substitute(arg, vars, |name, value| {
                if value.contains('\0') {
                    Err(RenderError::Nul { name: name.into() })
                } else {
                    Ok(value.to_string())
                }
            })
        })
        .collect()
}

/// Show an argv as a shell-ready line, for `describe` and messages.
pub(crate) fn show_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| quote(a).map_or_else(|_| "<NUL>".to_string(), Cow::into_owned))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &[&str] = &[
        "plain",
        "with space",
        "it's",
        "\"double\"",
        "$(touch /tmp/faultline-pwned)",
        "`id`",
        "a; rm -rf /",
        "line\nbreak",
        "back\\slash",
        "$HOME",
        "*",
        "",
        "{node}",
        "-n",
    ];

    /// Each quoted value must come back byte-for-byte from a real shell.
    #[test]
    fn quoted_values_survive_a_real_shell() {
        for v in HOSTILE {
            let text = shell("printf %s {v}", &[("v", v)]).expect("quotable");
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(&text)
                .output()
                .expect("sh runs");
            assert_eq!(String::from_utf8_lossy(&out.stdout), *v, "via `{text}`");
        }
    }

    #[test]
    fn nul_is_refused_everywhere() {
        assert_eq!(
            shell("echo {node}", &[("node", "a\0b")]),
            Err(RenderError::Nul {
                name: "node".into()
            })
        );
        assert!(argv(&["x".into(), "{node}".into()], &[("node", "a\0b")]).is_err());
        assert!(quote("\0").is_err());
    }

    #[test]
    fn argv_values_stay_one_argument_and_are_not_resubstituted() {
        let t: Vec<String> = ["docker", "exec", "{node}", "sh", "-c", "{command}"]
            .map(String::from)
            .to_vec();
        let got = argv(&t, &[("node", "n1"), ("command", "echo {node}; $(id)")]).expect("ok");
        assert_eq!(
            got,
            ["docker", "exec", "n1", "sh", "-c", "echo {node}; $(id)"]
        );
    }

    #[test]
    fn unknown_braces_are_left_alone() {
        let t = vec![
            "--format".to_string(),
            "{{.State.Status}} {node}".to_string(),
        ];
        assert_eq!(
            argv(&t, &[("node", "n1")]).expect("ok"),
            ["--format", "{{.State.Status}} n1"]
        );
        assert_eq!(argv(&[], &[]), Err(RenderError::EmptyArgv));
    }
}
