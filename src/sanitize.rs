//! Text cleaning for reports: what a node's command printed or an API error said must not
//! break the XML or HTML it is embedded in, nor smuggle terminal escape codes into CI logs.

/// Removes ANSI escape sequences and control characters other than `\n` and `\t`, and
/// replaces characters XML 1.0 cannot carry (non-characters such as U+FFFE).
pub(crate) fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            '\n' | '\t' => out.push(c),
            '\r' => {}
            c if c.is_control() => {}
            '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Skips the rest of an escape sequence that started with ESC: CSI (`ESC [ … final`),
/// OSC (`ESC ] … BEL` or `ESC \`), or a two-character escape.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.peek() {
        Some('[') => {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
        Some(']') => {
            chars.next();
            while let Some(c) = chars.next() {
                if c == '\u{7}' {
                    break;
                }
                if c == '\u{1b}' {
                    chars.next();
                    break;
                }
            }
        }
        Some(_) => {
            chars.next();
        }
        None => {}
    }
}

/// Cleans text for a CDATA section: as [`clean`], and `]]>` is broken up so the section
/// cannot be closed early.
pub(crate) fn cdata(text: &str) -> String {
    clean(text).replace("]]>", "]] >")
}

/// Cleans `text`, then writes each character as `replace` says, or as itself.
fn escape(text: &str, replace: impl Fn(char) -> Option<&'static str>) -> String {
    let mut out = String::with_capacity(text.len());
    for c in clean(text).chars() {
        match replace(c) {
            Some(r) => out.push_str(r),
            None => out.push(c),
        }
    }
    out
}

/// Cleans and escapes text for HTML element content and attribute values.
pub(crate) fn html(text: &str) -> String {
    escape(text, |c| match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '"' => Some("&quot;"),
        '\'' => Some("&#39;"),
        _ => None,
    })
}

/// Cleans and escapes text for one line of Markdown, table cells included: `|` cannot end
/// a cell, a newline cannot end a row (it becomes `<br>`), backticks cannot open code spans,
/// `<` and `&` cannot start HTML or entities, and emphasis, link and heading characters are
/// shown as themselves.
pub(crate) fn markdown(text: &str) -> String {
    escape(text, |c| match c {
        '\n' => Some("<br>"),
        '\t' => Some(" "),
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '|' => Some("\\|"),
        '`' => Some("\\`"),
        '\\' => Some("\\\\"),
        '*' => Some("\\*"),
        '_' => Some("\\_"),
        '[' => Some("\\["),
        ']' => Some("\\]"),
        '#' => Some("\\#"),
        '~' => Some("\\~"),
        '!' => Some("\\!"),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_colour_codes_and_controls() {
        assert_eq!(
            clean("\u{1b}[31mred\u{1b}[0m\0 ok\u{7}\n\tx"),
            "red ok\n\tx"
        );
        assert_eq!(clean("a\u{1b}]0;title\u{7}b"), "ab");
    }

    #[test]
    fn breaks_cdata_terminator() {
        assert!(!cdata("x]]>y").contains("]]>"));
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(html("<script>&'\""), "&lt;script&gt;&amp;&#39;&quot;");
    }

    #[test]
    fn markdown_text_stays_on_one_line_and_in_its_cell() {
        assert_eq!(
            markdown("a|b\nc `x` <b>&amp; *e* [l](u) #"),
            "a\\|b<br>c \\`x\\` &lt;b&gt;&amp;amp; \\*e\\* \\[l\\](u) \\#"
        );
        assert_eq!(markdown("\u{1b}[1mbold\u{1b}[0m\r\n"), "bold<br>");
    }
}
