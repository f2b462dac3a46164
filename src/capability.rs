//! What a cluster must offer for an experiment (or one expectation) to mean anything: one
//! table below everything that reads it (the experiment's validation, the inventory, the
//! judge, the run, `plan`), so a capability has one name, one sentence and one default.
//!
//! An experiment says `requires: [graceful-node-shutdown]`; the inventory says what the
//! cluster `offers:` or `lacks:`; what neither says takes the capability's default, which
//! is what an upstream cluster has out of the box. A run on a cluster without a required
//! capability is skipped with the reason (a skipped JUnit suite), not failed.

/// One capability a cluster may or may not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    /// Its name in `requires:`, `offers:` and `lacks:`.
    pub name: &'static str,
    /// What it is, in a reader's words.
    pub means: &'static str,
    /// Whether a cluster has it when its inventory says nothing: upstream's default.
    pub offered_by_default: bool,
    /// Why a cluster without it has none, short, for a verdict's line.
    pub lacking: &'static str,
    /// How a person finds out and says so, shown when it is missing.
    pub how_to_offer: &'static str,
}

/// Every capability faultline knows. A name outside this table is a mistake in the file
/// (validation says so and suggests the closest).
pub const CAPABILITIES: &[Capability] = &[
    Capability {
        name: "containers",
        means: "the pods run real containers (restart counts, exec, logs, traffic)",
        offered_by_default: true,
        lacking: "kwok runs no containers",
        how_to_offer: "a cluster of real kubelets has it; kwok's nodes (the lab) do not",
    },
    Capability {
        name: "graceful-node-shutdown",
        means: "the kubelets hear of an operating-system shutdown through logind and end \
                their pods first (kubelet shutdownGracePeriod > 0; off upstream)",
        offered_by_default: false,
        lacking: "its kubelets do not hold off an OS shutdown (shutdownGracePeriod unset)",
        how_to_offer: "set shutdownGracePeriod in the kubelets' configuration, then add it to \
                       the inventory's cluster.offers (`faultline inventory kind` finds it)",
    },
];

/// The capability of that name.
pub fn find(name: &str) -> Option<&'static Capability> {
    CAPABILITIES.iter().find(|c| c.name == name)
}

/// Every known name, for suggestions and messages.
pub fn names() -> Vec<&'static str> {
    CAPABILITIES.iter().map(|c| c.name).collect()
}

/// The capabilities a cluster has: every known one it offers, or has by default and does
/// not lack. `offers` wins over the default, `lacks` over both.
pub fn resolve(offers: &[String], lacks: &[String]) -> Vec<String> {
    CAPABILITIES
        .iter()
        .filter(|c| !lacks.iter().any(|l| l == c.name))
        .filter(|c| c.offered_by_default || offers.iter().any(|o| o == c.name))
        .map(|c| c.name.to_string())
        .collect()
}

/// The first of `requires` the cluster does not have, with why, in one sentence: what the
/// capability is and how a cluster gets it.
pub fn missing(requires: &[String], capabilities: &[String]) -> Option<Missing> {
    requires
        .iter()
        .find(|r| !capabilities.contains(r))
        .map(|name| Missing { name: name.clone() })
}

/// A required capability the cluster does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// Its name.
    pub name: String,
}

impl Missing {
    /// The sentence with what the capability is and how a cluster gets it, for a whole
    /// experiment skipped (the one place a reader learns what to change).
    pub fn explained(&self) -> String {
        match find(&self.name) {
            Some(c) => format!("{self}. `{}`: {}; {}", c.name, c.means, c.how_to_offer),
            None => self.to_string(),
        }
    }
}

/// `needs `X`, which this cluster lacks: why`: short, for a verdict's line.
impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match find(&self.name) {
            Some(c) => write!(
                f,
                "needs `{}`, which this cluster lacks: {}",
                c.name, c.lacking
            ),
            None => write!(f, "needs `{}`, which this cluster lacks", self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn a_cluster_that_says_nothing_has_what_upstream_has() {
        assert_eq!(resolve(&[], &[]), v(&["containers"]));
    }

    #[test]
    fn offers_add_and_lacks_remove_and_lacks_win() {
        assert_eq!(
            resolve(&v(&["graceful-node-shutdown"]), &v(&["containers"])),
            v(&["graceful-node-shutdown"])
        );
        assert_eq!(
            resolve(
                &v(&["graceful-node-shutdown"]),
                &v(&["graceful-node-shutdown"])
            ),
            v(&["containers"])
        );
    }

    #[test]
    fn the_missing_one_says_what_it_is_and_how_to_offer_it() {
        let m = missing(
            &v(&["containers", "graceful-node-shutdown"]),
            &v(&["containers"]),
        )
        .expect("one is missing");
        assert_eq!(
            m.to_string(),
            "needs `graceful-node-shutdown`, which this cluster lacks: its kubelets do not \
             hold off an OS shutdown (shutdownGracePeriod unset)"
        );
        let text = m.explained();
        assert!(text.contains("logind"), "{text}");
        assert!(text.contains("cluster.offers"), "{text}");
        assert_eq!(missing(&v(&["containers"]), &v(&["containers"])), None);
    }

    #[test]
    fn every_capability_has_a_sentence_and_a_way_to_offer_it() {
        for c in CAPABILITIES {
            assert!(
                !c.means.is_empty() && !c.lacking.is_empty() && !c.how_to_offer.is_empty(),
                "{}",
                c.name
            );
            assert!(
                c.name
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch == '-')
            );
        }
    }
}
