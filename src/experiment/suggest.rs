//! "Did you mean" suggestions for misspelled states, actions and names.
//!
//! A state written `notready` or an action `kubelet_stop` is a one-character fix; naming the
//! intended word turns a puzzling error into a trivial edit.

/// The candidate closest to `word` (case-insensitive edit distance ≤ 2, or equal ignoring
/// case and `-`/`_`), if any is close enough to be a plausible typo.
pub(super) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '-' && *c != '_')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let w = norm(word);
    candidates
        .iter()
        .map(|c| (distance(&w, &norm(c)), *c))
        .filter(|(d, c)| *d <= allowed_typos(c.len()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// How many edits a word of this length may be off and still be a plausible typo.
fn allowed_typos(len: usize) -> usize {
    match len {
        0..=3 => 0,
        4 => 1,
        _ => 2,
    }
}

/// Levenshtein distance between two strings, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_case_and_typo_fixes_but_not_unrelated_words() {
        let states = ["Ready", "NotReady", "Unknown", "Gone"];
        assert_eq!(closest("notready", &states), Some("NotReady"));
        assert_eq!(closest("Unknwon", &states), Some("Unknown"));
        assert_eq!(
            closest("kubelet_stop", &["kubelet-stop", "reboot"]),
            Some("kubelet-stop")
        );
        assert_eq!(closest("Exploded", &states), None);
    }
}
