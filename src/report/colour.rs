//! Text for a terminal: outcome words in colour and long lines wrapped to 80 columns.
//!
//! The renderers stay plain; what goes to stdout passes through [`print`], which wraps
//! it (on a terminal, or to `COLUMNS` when that is set; a pipe keeps one line per
//! item for grep), styles the outcome words and writes through `anstream`'s stdout. That stream
//! strips the styles when stdout is not a terminal, when `NO_COLOR` is set or
//! `CLICOLOR=0`, and keeps them with `CLICOLOR_FORCE=1`; files never see a style.

use std::io::Write;

use anstyle::{AnsiColor, Style};

/// The width the human output is laid out for.
pub(crate) const WIDTH: usize = 80;

/// Green: a pass, an improvement, a check that is ok.
pub(crate) const GOOD: Style = AnsiColor::Green.on_default();
/// Bold red: a failure or a regression.
pub(crate) const BAD: Style = AnsiColor::Red.on_default().bold();
/// Yellow: an error, an interruption, something undecided.
pub(crate) const WARN: Style = AnsiColor::Yellow.on_default();
/// Dim: skipped.
pub(crate) const DIM: Style = Style::new().dimmed();

/// `text` in `style` (the styles only; whether they reach the terminal is decided where
/// it is printed).
pub(crate) fn paint(text: &str, style: Style) -> String {
    format!("{style}{text}{style:#}")
}

/// The style of an outcome word as the human outputs print it; `None` for other words.
fn word_style(word: &str) -> Option<Style> {
    Some(match word {
        "PASS" | "PASSED" | "IMPROVED" | "FASTER" => GOOD,
        "FAIL" | "FAILED" | "REGRESSED" | "SLOWER" | "EARLY" | "LATE" | "MISSING"
        | "UNEXPECTED" => BAD,
        "ERROR" | "INTERRUPTED" | "UNDECIDABLE" | "ASSUMED" => WARN,
        "SKIP" | "SKIPPED" => DIM,
        _ => return None,
    })
}

/// `text` with every outcome word styled; a word counts when it stands alone between
/// spaces, brackets or punctuation, so `FAILED:` and `(ASSUMED)` are styled but not
/// `FAILURES`.
pub(crate) fn outcomes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match word_style(word) {
            Some(style) => out.push_str(&paint(word, style)),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' || c == '-' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The width stdout's lines are wrapped to: [`WIDTH`] on a terminal, else `COLUMNS`
/// when it is set (at least 20); `None` (no wrapping) for a pipe or a file.
pub(crate) fn width() -> Option<usize> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        return Some(WIDTH);
    }
    let columns = std::env::var("COLUMNS")
        .ok()?
        .trim()
        .parse::<usize>()
        .ok()?;
    Some(columns.max(20))
}

/// [`fit_to`] the width of stdout, or `text` as it is when stdout is not laid out.
fn fit(text: &str) -> String {
    match width() {
        Some(width) => fit_to(text, width),
        None => text.to_string(),
    }
}

/// Each line of `text` wider than `width` broken at spaces, its continuation lines
/// indented four more than the line; a word longer than a line (a command, a path) is
/// left whole.
pub(crate) fn fit_to(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        if textwrap::core::display_width(body) <= width {
            out.push_str(line);
            continue;
        }
        let indent = &body[..body.len() - body.trim_start().len()];
        let hanging = format!("{indent}    ");
        let options = textwrap::Options::new(width)
            .initial_indent(indent)
            .subsequent_indent(&hanging)
            .break_words(false);
        let wrapped = textwrap::wrap(body.trim_start(), options);
        out.push_str(&wrapped.join("\n"));
        out.push_str(end);
    }
    out
}

/// Prints `text` to stdout fitted to its width with its outcome words styled; the
/// styles reach a terminal only (see the module's note).
pub(crate) fn print(text: &str) {
    print_styled(&outcomes(&fit(text)));
}

/// Prints `text`, which may carry styles, through the stream that strips them where
/// they do not belong.
pub(crate) fn print_styled(text: &str) {
    let mut out = anstream::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Prints a plan fitted to stdout's width, its outcome words and its verdict line styled:
/// green when nothing was found, red otherwise.
pub(crate) fn print_plan(text: &str) {
    let mut out = String::with_capacity(text.len());
    for line in outcomes(&fit(text)).split_inclusive('\n') {
        match line.strip_prefix("verdict: ") {
            Some(rest) if rest.starts_with("nothing found") => {
                out.push_str(&paint("verdict:", GOOD));
                out.push(' ');
                out.push_str(rest);
            }
            Some(rest) => {
                out.push_str(&paint("verdict:", BAD));
                out.push(' ');
                out.push_str(rest);
            }
            None => out.push_str(line),
        }
    }
    print_styled(&out);
}

/// Prints `explain`'s text fitted to stdout's width, its outcome words styled and each
/// transition's fit at the end of its line (`inside` green, `undecided` dim).
pub(crate) fn print_explain(text: &str) {
    let mut out = String::with_capacity(text.len());
    for line in outcomes(&fit(text)).split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let end = &line[body.len()..];
        let ending = [(": inside", GOOD), (": undecided", DIM)]
            .into_iter()
            .find_map(|(tail, style)| body.strip_suffix(tail).map(|head| (head, tail, style)));
        match ending {
            Some((head, tail, style)) => {
                out.push_str(head);
                out.push_str(": ");
                out.push_str(&paint(&tail[2..], style));
                out.push_str(end);
            }
            None => out.push_str(line),
        }
    }
    print_styled(&out);
}

/// `doctor`'s table with the result column styled (`ok` green, `FAIL` red, `warn`
/// yellow, `skip` dim) and the closing `FAIL` lines red.
pub(crate) fn doctor(text: &str) -> String {
    let cells = [("ok", GOOD), ("warn", WARN), ("FAIL", BAD), ("skip", DIM)];
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("FAIL ") {
            out.push_str(&paint("FAIL", BAD));
            out.push(' ');
            out.push_str(rest);
            continue;
        }
        let found = cells.iter().find_map(|(word, style)| {
            let cell = format!("  {word:<6}  ");
            line.find(&cell).map(|at| (at + 2, *word, *style))
        });
        match found {
            Some((at, word, style)) => {
                out.push_str(&line[..at]);
                out.push_str(&paint(word, style));
                out.push_str(&line[at + word.len()..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Whether stdout takes colour: a terminal without `NO_COLOR`, or `CLICOLOR_FORCE`.
pub(crate) fn stdout_takes_colour() -> bool {
    anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_words_are_styled_and_others_left() {
        let text = outcomes("  PASSED: 3 (FAILURES none) FAILED, [ASSUMED]\n");
        assert!(text.contains(&paint("PASSED", GOOD)));
        assert!(text.contains(&paint("FAILED", BAD)));
        assert!(text.contains(&paint("ASSUMED", WARN)));
        assert!(text.contains("(FAILURES none)"));
        let plain = anstream::adapter::strip_str(&text).to_string();
        assert_eq!(plain, "  PASSED: 3 (FAILURES none) FAILED, [ASSUMED]\n");
    }

    #[test]
    fn doctor_results_are_styled_in_their_column() {
        let text = doctor("w  host key  ok      fine ok\nFAIL w host key\n");
        assert!(text.starts_with(&format!(
            "w  host key  {}      fine ok\n",
            paint("ok", GOOD)
        )));
        assert!(text.ends_with(&format!("{} w host key\n", paint("FAIL", BAD))));
    }

    #[test]
    fn long_lines_wrap_with_a_hanging_indent_and_long_words_stay_whole() {
        let long = format!("  {}\n", "word ".repeat(40).trim_end());
        let fitted = fit_to(&long, WIDTH);
        assert!(fitted.lines().all(|l| l.chars().count() <= WIDTH));
        assert!(fitted.lines().skip(1).all(|l| l.starts_with("      word")));
        assert_eq!(fitted.split_whitespace().count(), 40);
        let token = "x".repeat(100);
        let kept = format!("{token}\nshort");
        assert_eq!(fit_to(&kept, WIDTH), kept);
    }
}
