//! `{internalIP:<target>}` in an HTTP probe's URL: the address of a node the run resolved.
//!
//! A Service's NodePort answers on every node's address, so the natural way to watch a
//! workload on kind, k3d or a real cluster is through a node the experiment does not fault.
//! Which address that node has is only known once targets are resolved, so the URL is a
//! template: validation checks its placeholders (and that the rest is a URL), the probe
//! fills them with the node's `InternalIP` from the API. One parser serves both.

/// The one placeholder kind: a target's node `InternalIP` (`status.addresses`).
pub(crate) const INTERNAL_IP: &str = "internalIP";

/// Why a URL template cannot be filled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TemplateError {
    /// A `{` with no `}` after it.
    #[error("`{{` at character {at} is never closed")]
    Unclosed {
        /// Character offset of the `{`.
        at: usize,
    },
    /// Something other than `internalIP:<target>` between braces.
    #[error("unknown placeholder `{{{text}}}`: the only one is `{{internalIP:<target>}}`")]
    Unknown {
        /// What was written between the braces.
        text: String,
    },
    /// The value for a target could not be found (told by the caller).
    #[error("{0}")]
    Value(String),
}

/// The target names the template refers to, in order (repeats kept).
pub(crate) fn targets(url: &str) -> Result<Vec<String>, TemplateError> {
    let mut names = Vec::new();
    fill(url, |t| {
        names.push(t.to_string());
        Ok("192.0.2.1".into())
    })?;
    Ok(names)
}

/// The URL with each `{internalIP:<target>}` replaced by `address(target)`; an IPv6
/// address is bracketed as URLs need it. `address` says why it has none with
/// [`TemplateError::Value`].
pub(crate) fn fill(
    url: &str,
    mut address: impl FnMut(&str) -> Result<String, TemplateError>,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    let mut offset = 0;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or(TemplateError::Unclosed {
            at: url[..offset + open].chars().count(),
        })?;
        let inner = &after[..close];
        let target = inner
            .strip_prefix(INTERNAL_IP)
            .and_then(|t| t.strip_prefix(':'))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| TemplateError::Unknown {
                text: inner.to_string(),
            })?;
        let value = address(target)?;
        if value.contains(':') {
            out.push('[');
            out.push_str(&value);
            out.push(']');
        } else {
            out.push_str(&value);
        }
        let consumed = open + 1 + close + 1;
        offset += consumed;
        rest = &rest[consumed..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(target: &str) -> Result<String, TemplateError> {
        match target {
            "entry" => Ok("172.18.0.3".into()),
            "v6" => Ok("fd00::3".into()),
            other => Err(TemplateError::Value(format!("no node for {other}"))),
        }
    }

    #[test]
    fn a_url_without_placeholders_is_unchanged() {
        assert_eq!(
            fill("http://127.0.0.1:80/x", ip).unwrap(),
            "http://127.0.0.1:80/x"
        );
        assert!(targets("https://a/b?c=d").unwrap().is_empty());
    }

    #[test]
    fn placeholders_are_filled_and_ipv6_is_bracketed() {
        assert_eq!(
            fill("http://{internalIP:entry}:30080/hostname", ip).unwrap(),
            "http://172.18.0.3:30080/hostname"
        );
        assert_eq!(
            fill("http://{internalIP: v6 }:8080/", ip).unwrap(),
            "http://[fd00::3]:8080/"
        );
        assert_eq!(
            targets("http://{internalIP:a}/{internalIP:b}").unwrap(),
            vec!["a", "b"]
        );
    }

    #[test]
    fn bad_templates_say_what_is_wrong() {
        assert_eq!(
            fill("http://{internalIP:entry:30080/", ip),
            Err(TemplateError::Unclosed { at: 7 })
        );
        let unknown = fill("http://{entry}:30080/", ip).unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "unknown placeholder `{entry}`: the only one is `{internalIP:<target>}`"
        );
        assert_eq!(
            fill("http://{internalIP:}/", ip),
            Err(TemplateError::Unknown {
                text: "internalIP:".into()
            })
        );
        assert_eq!(
            fill("http://{internalIP:gone}/", ip),
            Err(TemplateError::Value("no node for gone".into()))
        );
    }
}
