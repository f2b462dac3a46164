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

/// Edit distance between two strings, by characters, where swapping two neighbours
/// (`nmae` for `name`, the most common slip of the fingers) is one edit, not two
/// (optimal string alignment distance).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // rows[i][j]: distance between the first i characters of a and the first j of b.
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j - 1] + cost)
                .min(rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
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
        assert_eq!(closest("nmae", &["name", "namespace"]), Some("name"));
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(distance("ab", "ba"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
