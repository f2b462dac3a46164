//! The last known reduced state of one observed source, and the changes a new observation
//! makes to it.
//!
//! Watch events and relists (after a gap, or every poll) both go through here, so the rule
//! "emit only when the reduced state changed; a relist reveals deletions" lives in one place
//! and is tested without a cluster.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::Hash;

/// One change of one object: `(key, before, after)`; `before: None` = first seen,
/// `after: None` = gone.
pub(crate) type Change<K, S> = (K, Option<S>, Option<S>);

/// Last known reduced states of one source (e.g. the pods of one namespace).
///
/// Hashed, not ordered: a pod's key is an `Arc<PodId>`, and in a tree of 150,000 of them
/// each of the some 17 comparisons of a look-up follows two pointers to strings elsewhere
/// in memory; a look-up took about 2 µs per watch event at 30,000 pods, more than decoding
/// the event did. A hash look-up compares one key. Order matters only for what a relist
/// reports, which is sorted there.
#[derive(Debug, Clone)]
pub(crate) struct Known<K, S> {
    states: HashMap<K, S>,
}

impl<K, S> Default for Known<K, S> {
    fn default() -> Self {
        Known {
            states: HashMap::new(),
        }
    }
}

impl<K: Ord + Hash + Clone, S: PartialEq + Clone> Known<K, S> {
    #[cfg(test)]
    /// Nothing known yet: the first relist reports every object as first seen.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    #[cfg(test)]
    /// The last known state of `key`.
    pub(crate) fn get(&self, key: &K) -> Option<&S> {
        self.states.get(key)
    }

    #[cfg(test)]
    /// How many objects are known.
    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether no object is known.
    pub(crate) fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// An object was added or modified; a change only if its reduced state differs.
    ///
    /// The change carries the key already known, not the one given: with shared keys (a
    /// pod's `Arc<PodId>`) every entry of one object then holds one identity, not a copy
    /// per change.
    ///
    /// One look-up per event (an entry, not a look-up and then an insert).
    pub(crate) fn apply(&mut self, key: K, state: S) -> Option<Change<K, S>> {
        match self.states.entry(key) {
            Entry::Occupied(mut known) => {
                if *known.get() == state {
                    return None;
                }
                let key = known.key().clone();
                let before = known.insert(state.clone());
                Some((key, Some(before), Some(state)))
            }
            Entry::Vacant(new) => {
                let key = new.key().clone();
                new.insert(state.clone());
                Some((key, None, Some(state)))
            }
        }
    }

    /// An object was deleted; a change only if it was known (with the key known, as above).
    pub(crate) fn delete(&mut self, key: &K) -> Option<Change<K, S>> {
        self.states
            .remove_entry(key)
            .map(|(known, before)| (known, Some(before), None))
    }

    /// A complete list of the source's objects replaces what was known: changed and new
    /// objects, then objects that vanished (deleted while nobody was looking), each in key order.
    pub(crate) fn relist(&mut self, listed: impl IntoIterator<Item = (K, S)>) -> Vec<Change<K, S>> {
        // Objects already known keep the key known (see `apply`).
        let fresh: HashMap<K, S> = listed
            .into_iter()
            .map(|(key, state)| {
                let key = self
                    .states
                    .get_key_value(&key)
                    .map_or(key, |(known, _)| known.clone());
                (key, state)
            })
            .collect();
        let mut changes = Vec::new();
        for (key, state) in &fresh {
            match self.states.get(key) {
                Some(old) if old == state => {}
                old => changes.push((key.clone(), old.cloned(), Some(state.clone()))),
            }
        }
        let mut vanished: Vec<Change<K, S>> = self
            .states
            .iter()
            .filter(|(key, _)| !fresh.contains_key(*key))
            .map(|(key, old)| (key.clone(), Some(old.clone()), None))
            .collect();
        // Each group in key order, as the ordered map gave them before.
        changes.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        vanished.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        changes.extend(vanished);
        self.states = fresh;
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_of_a_known_object_carry_the_key_first_seen() {
        use std::sync::Arc;
        let mut k: Known<Arc<str>, i32> = Known::new();
        let first: Arc<str> = Arc::from("pod");
        k.apply(first.clone(), 1);
        let changed = k.apply(Arc::from("pod"), 2).expect("a change");
        assert!(Arc::ptr_eq(&changed.0, &first), "apply: the known key");
        let relisted = k.relist([(Arc::from("pod"), 3)]);
        assert!(Arc::ptr_eq(&relisted[0].0, &first), "relist: the known key");
        let gone = k.delete(&Arc::from("pod")).expect("a deletion");
        assert!(Arc::ptr_eq(&gone.0, &first), "delete: the known key");
    }

    fn known(items: &[(&str, i32)]) -> Known<String, i32> {
        let mut k = Known::new();
        k.relist(items.iter().map(|(n, s)| (n.to_string(), *s)));
        k
    }

    #[test]
    fn first_relist_reports_everything_as_first_seen() {
        let mut k: Known<String, i32> = Known::new();
        let changes = k.relist([("b".to_string(), 2), ("a".to_string(), 1)]);
        assert_eq!(
            changes,
            vec![
                ("a".to_string(), None, Some(1)),
                ("b".to_string(), None, Some(2))
            ]
        );
        assert_eq!(k.len(), 2);
    }

    #[test]
    fn apply_emits_only_on_reduced_change() {
        let mut k = known(&[("a", 1)]);
        assert_eq!(k.apply("a".to_string(), 1), None);
        assert_eq!(
            k.apply("a".to_string(), 2),
            Some(("a".to_string(), Some(1), Some(2)))
        );
        assert_eq!(k.get(&"a".to_string()), Some(&2));
    }

    #[test]
    fn delete_of_unknown_object_is_silent() {
        let mut k = known(&[("a", 1)]);
        assert_eq!(k.delete(&"x".to_string()), None);
        assert_eq!(
            k.delete(&"a".to_string()),
            Some(("a".to_string(), Some(1), None))
        );
        assert!(k.is_empty());
    }

    #[test]
    fn relist_after_gap_reports_changes_new_objects_and_deletions() {
        let mut k = known(&[("a", 1), ("b", 1), ("c", 1)]);
        // During the gap: a unchanged, b changed, c deleted, d created.
        let changes = k.relist([
            ("a".to_string(), 1),
            ("b".to_string(), 3),
            ("d".to_string(), 1),
        ]);
        assert_eq!(
            changes,
            vec![
                ("b".to_string(), Some(1), Some(3)),
                ("d".to_string(), None, Some(1)),
                ("c".to_string(), Some(1), None),
            ]
        );
        // A second identical relist changes nothing.
        assert!(
            k.relist([
                ("a".to_string(), 1),
                ("b".to_string(), 3),
                ("d".to_string(), 1)
            ])
            .is_empty()
        );
    }
}
