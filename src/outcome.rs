//! What became of one expectation, below both the judge (which decides it) and the
//! timeline (which records each decision as it is made), so that neither the run nor a
//! reporter has to spell it as text to pass it on.

use serde::{Deserialize, Serialize};

/// What became of one expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The expectation held.
    Passed,
    /// The expectation was violated.
    Failed,
    /// An observation gap hides the deciding moment; neither pass nor fail can be claimed.
    Undecidable,
    /// The cluster lacks a capability the expectation needs.
    Skipped,
    /// The expectation could not be evaluated (its `since` step never ran, a bound has no value).
    Error,
    /// Not decided yet: the run is still going.
    Pending,
}

impl Outcome {
    /// Every outcome, for parsing the report word back.
    const ALL: [Outcome; 6] = [
        Outcome::Passed,
        Outcome::Failed,
        Outcome::Undecidable,
        Outcome::Skipped,
        Outcome::Error,
        Outcome::Pending,
    ];

    /// The word every report shows for it (`PASS`, `FAIL`, `UNDECIDABLE`, `SKIP`, `ERROR`,
    /// `PENDING`); the timeline's verdict entries are written with it too.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Passed => "PASS",
            Outcome::Failed => "FAIL",
            Outcome::Undecidable => "UNDECIDABLE",
            Outcome::Skipped => "SKIP",
            Outcome::Error => "ERROR",
            Outcome::Pending => "PENDING",
        }
    }

    /// The outcome a report word stands for.
    pub fn from_word(word: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.word() == word)
    }
}

/// Serde for an [`Outcome`] written as its report word, as timeline verdict entries have
/// always been written (records and events files keep reading the same).
pub(crate) mod as_word {
    use super::Outcome;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the word.
    pub(crate) fn serialize<S: Serializer>(o: &Outcome, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(o.word())
    }

    /// Reads the word back.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Outcome, D::Error> {
        let word = String::deserialize(d)?;
        Outcome::from_word(&word).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{word}` is not an outcome (PASS, FAIL, UNDECIDABLE, SKIP, ERROR, PENDING)"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_its_outcome() {
        for o in Outcome::ALL {
            assert_eq!(Outcome::from_word(o.word()), Some(o));
        }
        assert_eq!(Outcome::from_word("pass"), None);
    }
}
