//! The bound syntax: `90s`, `1m30s`, `2 * grace`, `grace + toleration - 5s`.
//!
//! Bounds are written relative to the cluster's own timers so one experiment file holds on
//! clusters configured differently; this module only parses them, resolution happens at
//! judge time against the cluster profile (see `model::Bound::resolve`).

use std::time::Duration;

use thiserror::Error;

use super::model::{Bound, BoundSymbol, BoundTerm};

/// Longest bound faultline accepts: anything longer is almost surely a typo (`90m` for `90s`)
/// and would keep a node down for a day.
pub(crate) const MAX_BOUND: Duration = Duration::from_secs(24 * 3600);

/// Largest multiplier accepted (`100 * monitor`); larger ones are typos and could overflow
/// when the bound is resolved.
pub(crate) const MAX_FACTOR: f64 = 100.0;

/// Why a bound could not be parsed, with a fix when one is obvious; said as the message
/// and, when there is one, the hint in parentheses after it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}{}", hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
pub struct BoundIssue {
    /// What is wrong.
    pub message: String,
    /// What to write instead.
    pub hint: Option<String>,
}

impl BoundIssue {
    fn new(message: impl Into<String>) -> Self {
        BoundIssue {
            message: message.into(),
            hint: None,
        }
    }

    fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// Parses a bound such as `grace + toleration + 30s` or `2 * grace`.
///
/// Rules: terms are durations (`500ms`, `90s`, `5m`, `1m30s`, `2h`) or the symbols `grace`,
/// `monitor`, `toleration`, each optionally multiplied by a number (`2 * grace`,
/// `grace * 1.5`), joined by `+` and `-`. A number without a unit is an error. A bound whose
/// fixed part exceeds 24h is rejected, and so is a bound that can never be positive (no
/// symbol with a positive factor and a negative fixed part, e.g. `-5s`); `toleration - 5s`
/// is accepted because its value depends on the cluster.
pub fn parse_bound(text: &str) -> Result<Bound, BoundIssue> {
    parse_bound_detailed(text)
}

/// Parses a plain duration (`timeout`, `waitTimeout`): the bound syntax without symbols.
/// The error says what is wrong without the hint, which speaks of experiment files.
pub fn parse_duration(text: &str) -> Result<Duration, BoundIssue> {
    parse_duration_detailed(text).map_err(|issue| BoundIssue {
        hint: None,
        ..issue
    })
}

/// [`parse_duration`] with a separate hint, for diagnostics.
pub(crate) fn parse_duration_detailed(text: &str) -> Result<Duration, BoundIssue> {
    let bound = parse_bound_detailed(text)?;
    let mut total = 0.0f64;
    for term in &bound.terms {
        match term.symbol {
            BoundSymbol::Fixed(d) => total += term.factor * d.as_secs_f64(),
            _ => {
                return Err(BoundIssue::new(format!(
                    "`{}` must be a plain duration, not relative to the cluster's timers",
                    text.trim()
                ))
                .hint("write a fixed duration such as 2m"));
            }
        }
    }
    Ok(Duration::from_secs_f64(total.max(0.0)))
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Plus,
    Minus,
    Star,
}

fn tokenize(text: &str) -> Result<Vec<Token>, BoundIssue> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            tokens.push(Token::Word(std::mem::take(&mut word)));
        }
        match c {
            '+' => tokens.push(Token::Plus),
            '-' => tokens.push(Token::Minus),
            '*' => tokens.push(Token::Star),
            c if c.is_whitespace() => {}
            other => {
                return Err(
                    BoundIssue::new(format!("unexpected character `{other}` in bound")).hint(
                        "a bound is terms joined by + and -, e.g. `grace + toleration + 30s`",
                    ),
                );
            }
        }
    }
    if !word.is_empty() {
        tokens.push(Token::Word(word));
    }
    Ok(join_spaced_durations(tokens))
}

/// Joins the words of a duration written with spaces (`5 mins`, `10 s`, `1m 30s`,
/// `1 hour 30 minutes`) into one word, kept as written. A word joins the one before it when
/// that one starts with a digit and either ends with a digit (the word is its unit) or the
/// word starts with a digit (the next part of the duration); symbols never join, so
/// `2 grace` stays two words and gets its own message.
fn join_spaced_durations(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    for token in tokens {
        if let (Some(Token::Word(before)), Token::Word(word)) = (out.last_mut(), &token) {
            let starts_with_digit = |w: &str| w.starts_with(|c: char| c.is_ascii_digit());
            let joins = starts_with_digit(before)
                && symbol(word).is_none()
                && (before.ends_with(|c: char| c.is_ascii_digit()) || starts_with_digit(word));
            if joins {
                before.push(' ');
                before.push_str(word);
                continue;
            }
        }
        out.push(token);
    }
    out
}

fn is_number(word: &str) -> bool {
    !word.is_empty()
        && word.chars().all(|c| c.is_ascii_digit() || c == '.')
        && word.chars().filter(|c| *c == '.').count() <= 1
        && word != "."
}

fn symbol(word: &str) -> Option<BoundSymbol> {
    match word {
        "grace" => Some(BoundSymbol::Grace),
        "monitor" => Some(BoundSymbol::MonitorPeriod),
        "toleration" => Some(BoundSymbol::Toleration),
        _ => None,
    }
}

/// The unit words a duration accepts, each with its length in seconds: the short forms
/// Kubernetes and Go write (`ms`, `s`, `m`, `h`) and the words people write (`5 mins`,
/// `2 hours`). Matched without regard to case, except `M` (see [`unit_seconds`]).
const UNITS: &[(&[&str], f64)] = &[
    (
        &["ms", "msec", "msecs", "millisecond", "milliseconds"],
        0.001,
    ),
    (&["s", "sec", "secs", "second", "seconds"], 1.0),
    (&["m", "min", "mins", "minute", "minutes"], 60.0),
    (&["h", "hr", "hrs", "hour", "hours"], 3600.0),
];

/// Seconds in one `unit`, or why the unit is refused.
fn unit_seconds(unit: &str, word: &str) -> Result<f64, BoundIssue> {
    // `M` is months in some tools and mega in others: never guess that it means minutes.
    if unit == "M" {
        return Err(
            BoundIssue::new(format!("`M` in `{word}` is not a unit here"))
                .hint("write minutes as `m` or `min` (e.g. 5m); the units are ms, s, m, h"),
        );
    }
    let lower = unit.to_ascii_lowercase();
    if let Some((_, seconds)) = UNITS
        .iter()
        .find(|(names, _)| names.contains(&lower.as_str()))
    {
        return Ok(*seconds);
    }
    let all: Vec<&str> = UNITS
        .iter()
        .flat_map(|(names, _)| names.iter().copied())
        .collect();
    Err(match super::suggest::closest(&lower, &all) {
        Some(s) if unit.len() > 2 => BoundIssue::new(format!("unknown unit `{unit}` in `{word}`"))
            .hint(format!(
                "did you mean `{s}`? the units are ms, s, m, h (or sec, min, hours)"
            )),
        _ => bad_duration(word),
    })
}

/// Parses `1m30s`, `500ms`, `2h`, `1.5s`, `5 mins`, `1 hour 30 minutes`; `None` when
/// `word` is not shaped like a duration.
fn duration(word: &str) -> Option<Result<Duration, BoundIssue>> {
    let mut rest = word.trim_start();
    let mut total = 0.0f64;
    let mut any = false;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return if any {
                Some(Err(bad_duration(word)))
            } else {
                None
            };
        }
        let number: f64 = match rest[..digits].parse() {
            Ok(n) => n,
            Err(_) => return Some(Err(bad_duration(word))),
        };
        rest = rest[digits..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Some(Err(bad_duration(word)));
        }
        let seconds = match unit_seconds(&rest[..unit_len], word) {
            Ok(s) => s,
            Err(issue) => return Some(Err(issue)),
        };
        rest = rest[unit_len..].trim_start();
        total += number * seconds;
        any = true;
    }
    if !any {
        return None;
    }
    if total > MAX_BOUND.as_secs_f64() {
        return Some(Err(BoundIssue::new(format!("`{word}` is longer than 24h"))
            .hint("bounds are capped at 24h; check the unit (s, m, h)")));
    }
    Some(Ok(Duration::from_secs_f64(total)))
}

fn bad_duration(word: &str) -> BoundIssue {
    BoundIssue::new(format!("invalid duration `{word}`")).hint(
        "a duration is numbers each followed by its unit (ms, s, m, h), e.g. 500ms, 90s, 5m, 1m30s, 2h",
    )
}

/// [`parse_bound`] with a separate hint, for diagnostics.
pub(crate) fn parse_bound_detailed(text: &str) -> Result<Bound, BoundIssue> {
    let tokens = tokenize(text)?;
    if tokens.is_empty() {
        return Err(BoundIssue::new("empty bound").hint("write a duration such as 30s"));
    }
    let mut terms = Vec::new();
    let mut i = 0;
    let mut sign = 1.0;
    if tokens.first() == Some(&Token::Minus) {
        sign = -1.0;
        i = 1;
    }
    loop {
        let (term, next) = parse_term(&tokens, i, sign)?;
        terms.push(term);
        i = next;
        match tokens.get(i) {
            None => break,
            Some(Token::Plus) => sign = 1.0,
            Some(Token::Minus) => sign = -1.0,
            Some(other) => {
                return Err(BoundIssue::new(format!(
                    "expected `+` or `-` in bound, found {}",
                    describe(other)
                ))
                .hint("a bound is terms joined by + and -, e.g. `grace + toleration + 30s`"));
            }
        }
        i += 1;
    }
    let bound = Bound { terms };
    check_range(&bound, text)?;
    Ok(bound)
}

fn describe(token: &Token) -> String {
    match token {
        Token::Word(w) => format!("`{w}`"),
        Token::Plus => "`+`".into(),
        Token::Minus => "`-`".into(),
        Token::Star => "`*`".into(),
    }
}

fn word_at(tokens: &[Token], i: usize) -> Result<&str, BoundIssue> {
    match tokens.get(i) {
        Some(Token::Word(w)) => Ok(w),
        Some(other) => Err(BoundIssue::new(format!(
            "expected a duration or a symbol in bound, found {}",
            describe(other)
        ))
        .hint("a term is a duration like 30s, or one of grace, monitor, toleration")),
        None => Err(BoundIssue::new("bound ends where a term was expected")
            .hint("a term is a duration like 30s, or one of grace, monitor, toleration")),
    }
}

fn parse_factor(word: &str) -> Result<f64, BoundIssue> {
    if !is_number(word) {
        return Err(BoundIssue::new(format!(
            "a multiplier must be a plain number, found `{word}`"
        ))
        .hint("write e.g. `2 * grace`"));
    }
    let factor = word
        .parse::<f64>()
        .map_err(|_| BoundIssue::new(format!("invalid number `{word}`")))?;
    if !(factor.is_finite() && factor <= MAX_FACTOR) {
        return Err(
            BoundIssue::new(format!("multiplier `{word}` is absurd")).hint(format!(
                "multipliers are at most {MAX_FACTOR}; write the duration itself instead"
            )),
        );
    }
    Ok(factor)
}

/// One term starting at `i`: `[n *] atom [* n]`. Returns the term and the next index.
fn parse_term(tokens: &[Token], i: usize, sign: f64) -> Result<(BoundTerm, usize), BoundIssue> {
    let first = word_at(tokens, i)?;
    let mut factor = sign;
    let mut i = i;
    let atom_word;
    if is_number(first) && tokens.get(i + 1) == Some(&Token::Star) {
        factor *= parse_factor(first)?;
        atom_word = word_at(tokens, i + 2)?;
        i += 3;
    } else if let (true, Some(Token::Word(next))) = (is_number(first), tokens.get(i + 1))
        && symbol(next).is_some()
    {
        return Err(BoundIssue::new(format!("`{first}` has no unit"))
            .hint(format!("to multiply a timer, write `{first} * {next}`")));
    } else {
        atom_word = first;
        i += 1;
    }
    let symbol = atom(atom_word)?;
    if tokens.get(i) == Some(&Token::Star) {
        factor *= parse_factor(word_at(tokens, i + 1)?)?;
        i += 2;
    }
    Ok((BoundTerm { factor, symbol }, i))
}

fn atom(word: &str) -> Result<BoundSymbol, BoundIssue> {
    if let Some(s) = symbol(word) {
        return Ok(s);
    }
    if is_number(word) {
        return Err(unitless(word));
    }
    match duration(word) {
        Some(Ok(d)) => Ok(BoundSymbol::Fixed(d)),
        Some(Err(issue)) => Err(issue),
        None => {
            let issue = BoundIssue::new(format!("unknown term `{word}` in bound"));
            Err(
                match super::suggest::closest(word, &["grace", "monitor", "toleration"]) {
                    Some(s) => issue.hint(format!("did you mean `{s}`?")),
                    None => issue.hint(
                        "a term is a duration like 30s, or one of grace, monitor, toleration",
                    ),
                },
            )
        }
    }
}

/// A number written without its unit: every unit is offered, none is chosen, because
/// guessing seconds would turn `5` meant as minutes into five seconds.
fn unitless(number: &str) -> BoundIssue {
    BoundIssue::new(format!("`{number}` has no unit")).hint(format!(
        "write the unit after the number: `{number}s` for seconds, `{number}m` for minutes, `{number}h` for hours or `{number}ms`"
    ))
}

fn check_range(bound: &Bound, text: &str) -> Result<(), BoundIssue> {
    let mut fixed = 0.0f64;
    let mut grows_with_cluster = false;
    for term in &bound.terms {
        match term.symbol {
            BoundSymbol::Fixed(d) => fixed += term.factor * d.as_secs_f64(),
            _ if term.factor > 0.0 => grows_with_cluster = true,
            _ => {}
        }
    }
    if fixed > MAX_BOUND.as_secs_f64() {
        return Err(
            BoundIssue::new(format!("`{}` is longer than 24h", text.trim()))
                .hint("bounds are capped at 24h; check the unit (s, m, h)"),
        );
    }
    if fixed < 0.0 && !grows_with_cluster {
        return Err(BoundIssue::new(format!("`{}` is negative", text.trim()))
            .hint("bounds are offsets after `since`; write a positive duration"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(secs: f64) -> BoundTerm {
        BoundTerm {
            factor: 1.0,
            symbol: BoundSymbol::Fixed(Duration::from_secs_f64(secs)),
        }
    }

    fn sym(factor: f64, symbol: BoundSymbol) -> BoundTerm {
        BoundTerm { factor, symbol }
    }

    #[test]
    fn durations_in_every_unit() {
        for (text, secs) in [
            ("90s", 90.0),
            ("5m", 300.0),
            ("1m30s", 90.0),
            ("500ms", 0.5),
            ("2h", 7200.0),
            ("1.5s", 1.5),
            ("0s", 0.0),
        ] {
            assert_eq!(
                parse_bound(text),
                Ok(Bound {
                    terms: vec![fixed(secs)]
                }),
                "{text}"
            );
        }
    }

    #[test]
    fn sums_differences_and_multipliers() {
        assert_eq!(
            parse_bound("grace + toleration + 30s").map(|b| b.terms),
            Ok(vec![
                sym(1.0, BoundSymbol::Grace),
                sym(1.0, BoundSymbol::Toleration),
                fixed(30.0)
            ])
        );
        assert_eq!(
            parse_bound("2 * grace").map(|b| b.terms),
            Ok(vec![sym(2.0, BoundSymbol::Grace)])
        );
        assert_eq!(
            parse_bound("monitor*3 - 5s + 1m").map(|b| b.terms),
            Ok(vec![
                sym(3.0, BoundSymbol::MonitorPeriod),
                BoundTerm {
                    factor: -1.0,
                    symbol: BoundSymbol::Fixed(Duration::from_secs(5))
                },
                fixed(60.0)
            ])
        );
        assert_eq!(parse_bound("toleration - 5s").map(|b| b.terms.len()), Ok(2));
    }

    #[test]
    fn bare_number_is_rejected_with_every_unit_offered() {
        let issue = parse_bound_detailed("30").unwrap_err();
        assert_eq!(issue.message, "`30` has no unit");
        let hint = issue.hint.unwrap_or_default();
        for unit in ["`30s`", "`30m`", "`30h`", "`30ms`"] {
            assert!(hint.contains(unit), "{hint}");
        }
    }

    #[test]
    fn durations_as_people_write_them() {
        for (text, secs) in [
            ("5 mins", 300.0),
            ("5 min", 300.0),
            ("5m", 300.0),
            ("5 Minutes", 300.0),
            ("10 s", 10.0),
            ("10 sec", 10.0),
            ("1m30s", 90.0),
            ("1m 30s", 90.0),
            ("1 min 30 s", 90.0),
            ("1 hour 30 minutes", 5400.0),
            ("90s", 90.0),
            ("90 seconds", 90.0),
            ("1h", 3600.0),
            ("2 hours", 7200.0),
            ("2 hrs", 7200.0),
            ("1.5 minutes", 90.0),
            ("500 ms", 0.5),
            ("250 milliseconds", 0.25),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs_f64(secs)),
                "{text}"
            );
        }
    }

    #[test]
    fn spaced_durations_inside_bounds() {
        assert_eq!(
            parse_bound("grace + 10 s").map(|b| b.terms),
            Ok(vec![sym(1.0, BoundSymbol::Grace), fixed(10.0)])
        );
        assert_eq!(
            parse_bound("2 * 5 mins").map(|b| b.terms),
            Ok(vec![BoundTerm {
                factor: 2.0,
                symbol: BoundSymbol::Fixed(Duration::from_secs(300))
            }])
        );
        assert_eq!(
            parse_bound("toleration - 1 min + 30 seconds").map(|b| b.terms.len()),
            Ok(3)
        );
        assert_eq!(
            parse_bound("5 min + 90s").map(|b| b.to_string()),
            Ok("300s + 90s".to_owned())
        );
    }

    #[test]
    fn refused_spellings_say_what_to_write_without_changing_the_meaning() {
        for (text, message, hint) in [
            ("5", "`5` has no unit", "`5m` for minutes"),
            ("grace + 10", "`10` has no unit", "`10s` for seconds"),
            ("2 grace", "`2` has no unit", "write `2 * grace`"),
            ("5M", "`M` in `5M` is not a unit here", "`m` or `min`"),
            ("5 M", "`M` in `5 M` is not a unit here", "`m` or `min`"),
            (
                "5 minuts",
                "unknown unit `minuts` in `5 minuts`",
                "did you mean `minute",
            ),
            ("5 x", "invalid duration `5 x`", "(ms, s, m, h)"),
            ("5 days", "invalid duration `5 days`", "(ms, s, m, h)"),
            ("1m30", "invalid duration `1m30`", "(ms, s, m, h)"),
            (
                "25 hours",
                "`25 hours` is longer than 24h",
                "check the unit",
            ),
        ] {
            let issue = parse_bound_detailed(text).unwrap_err();
            assert_eq!(issue.message, message, "{text}");
            let got = issue.hint.unwrap_or_default();
            assert!(got.contains(hint), "{text}: {got}");
            assert!(
                !got.contains(&format!("write {text}s")),
                "{text}: never a seconds-only hint: {got}"
            );
        }
    }

    #[test]
    fn a_misspelled_symbol_next_to_a_duration_is_still_named() {
        let issue = parse_bound_detailed("grcae 5s").unwrap_err();
        assert_eq!(issue.message, "unknown term `grcae` in bound");
        let issue = parse_bound_detailed("5s grcae").unwrap_err();
        assert_eq!(issue.message, "expected `+` or `-` in bound, found `grcae`");
    }

    #[test]
    fn absurd_negative_and_malformed_bounds_are_rejected() {
        assert!(
            parse_bound("25h")
                .unwrap_err()
                .to_string()
                .contains("longer than 24h")
        );
        assert!(
            parse_bound("23h + 2h")
                .unwrap_err()
                .to_string()
                .contains("longer than 24h")
        );
        assert!(
            parse_bound("-5s")
                .unwrap_err()
                .to_string()
                .contains("negative")
        );
        assert!(
            parse_bound("10s - 20s")
                .unwrap_err()
                .to_string()
                .contains("negative")
        );
        assert!(parse_bound("").unwrap_err().to_string().contains("empty"));
        assert!(
            parse_bound("grace +")
                .unwrap_err()
                .to_string()
                .contains("ends")
        );
        assert!(
            parse_bound("grace grace")
                .unwrap_err()
                .to_string()
                .contains("expected `+`")
        );
        assert!(
            parse_bound("5x")
                .unwrap_err()
                .to_string()
                .contains("invalid duration")
        );
        assert!(
            parse_bound("1m30")
                .unwrap_err()
                .to_string()
                .contains("invalid duration")
        );
        assert!(
            parse_bound("grace / 2")
                .unwrap_err()
                .to_string()
                .contains("`/`")
        );
        assert!(
            parse_bound("1000 * grace")
                .unwrap_err()
                .to_string()
                .contains("absurd")
        );
        assert!(parse_bound(&format!("{} * grace", "9".repeat(400))).is_err());
        assert!(parse_bound(&format!("{}s", "9".repeat(400))).is_err());
        assert!(
            parse_bound("grace * s")
                .unwrap_err()
                .to_string()
                .contains("multiplier")
        );
    }

    #[test]
    fn misspelled_symbol_gets_a_suggestion() {
        let issue = parse_bound_detailed("grcae + 5s").unwrap_err();
        assert_eq!(issue.message, "unknown term `grcae` in bound");
        assert_eq!(issue.hint.as_deref(), Some("did you mean `grace`?"));
    }

    #[test]
    fn plain_durations_reject_symbols() {
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m - 30s"), Ok(Duration::from_secs(30)));
        assert!(
            parse_duration("grace")
                .unwrap_err()
                .to_string()
                .contains("plain duration")
        );
    }

    #[test]
    fn bounds_display_as_they_are_written() {
        for text in [
            "grace + toleration - 10s",
            "2 * grace",
            "toleration + 30s",
            "1m30s",
        ] {
            let shown = parse_bound(text).map(|b| b.to_string());
            assert_eq!(
                shown.as_deref(),
                Ok(if text == "1m30s" { "90s" } else { text })
            );
        }
    }
}
