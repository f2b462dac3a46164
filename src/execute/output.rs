//! What one command produced, bounded so a chatty command cannot flood reports.

/// Output kept per command: the TAIL, where errors usually are.
pub const MAX_OUTPUT: usize = 4096;

/// Join stdout and stderr and keep at most [`MAX_OUTPUT`] bytes from the end.
pub(super) fn bounded(stdout: &[u8], stderr: &[u8]) -> String {
    let mut all = String::from_utf8_lossy(stdout).into_owned();
    all.push_str(&String::from_utf8_lossy(stderr));
    if all.len() <= MAX_OUTPUT {
        return all;
    }
    let mut cut = all.len() - MAX_OUTPUT;
    while !all.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[{cut} bytes cut]\n{}", &all[cut..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_tail_of_long_output() {
        let long = "x".repeat(10_000) + "END";
        let out = bounded(long.as_bytes(), b"");
        assert!(out.ends_with("END"));
        assert!(out.starts_with("[5907 bytes cut]"), "{}", &out[..30]);
        assert_eq!(bounded(b"out\n", b"err\n"), "out\nerr\n");
    }

    #[test]
    fn never_splits_a_character() {
        let long = "é".repeat(5000);
        let out = bounded(long.as_bytes(), b"");
        assert!(out.len() <= MAX_OUTPUT + 32);
    }
}
