//! Text from the run (verdict messages, names, errors) as HTML: what the terminal writes
//! between backticks (`` `start kubelet` ``) becomes `<code>`, and everything is escaped,
//! since the text comes from the cluster and may hold anything.

use crate::sanitize::html as esc;

/// `text` escaped for HTML, each pair of backticks turned into a `<code>` element; a
/// backtick without its pair stays a backtick.
pub(crate) fn html_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('`') else {
            break;
        };
        out.push_str(&esc(&rest[..open]));
        out.push_str("<code>");
        out.push_str(&esc(&after[..close]));
        out.push_str("</code>");
        rest = &after[close + 1..];
    }
    out.push_str(&esc(rest));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backticks_become_code_and_the_rest_is_escaped() {
        assert_eq!(
            html_text("step `start kubelet` never ran"),
            "step <code>start kubelet</code> never ran"
        );
        assert_eq!(
            html_text("`<b>` & `a`b"),
            "<code>&lt;b&gt;</code> &amp; <code>a</code>b"
        );
        assert_eq!(html_text("one ` alone <i>"), "one ` alone &lt;i&gt;");
        assert_eq!(html_text("``"), "<code></code>");
        assert_eq!(html_text("no code"), "no code");
    }
}
