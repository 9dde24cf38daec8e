//! Which versions of one bundle id a prune may remove: a pure function.
//!
//! Retained are the latest [`RETAIN_LATEST`] versions, every version kept
//! explicitly (`--keep`), the current default, and every version a ledger
//! session names (replay reads its content back). Everything else may go.
//! This module never decides to remove a version for any other reason.

use std::collections::BTreeSet;

/// How many of the newest versions of an id are always retained.
pub const RETAIN_LATEST: usize = 8;

/// One retained version, as the store holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub version: u32,
    pub kept: bool,
}

/// The versions of one id a prune removes, ascending.
pub fn removable(held: &[Held], default: u32, named: &BTreeSet<u32>, window: usize) -> Vec<u32> {
    let mut newest: Vec<u32> = held.iter().map(|h| h.version).collect();
    newest.sort_unstable_by(|a, b| b.cmp(a));
    let window: BTreeSet<u32> = newest.into_iter().take(window).collect();
    let mut out: Vec<u32> = held
        .iter()
        .filter(|h| {
            !h.kept
                && h.version != default
                && !named.contains(&h.version)
                && !window.contains(&h.version)
        })
        .map(|h| h.version)
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn held(n: u32) -> Vec<Held> {
        (1..=n)
            .map(|version| Held {
                version,
                kept: false,
            })
            .collect()
    }

    #[test]
    fn the_window_default_kept_and_named_versions_stay() {
        let mut versions = held(12);
        versions[2].kept = true; // v3
        let named = BTreeSet::from([4]);
        // Window of 8 keeps v5..v12; v1 is the default.
        assert_eq!(removable(&versions, 1, &named, 8), vec![2]);
    }

    proptest! {
        #[test]
        fn never_removes_what_must_stay(
            n in 1u32..40,
            default in 1u32..40,
            named in proptest::collection::btree_set(1u32..40, 0..10),
            kept in proptest::collection::btree_set(1u32..40, 0..10),
            window in 0usize..10,
        ) {
            let versions: Vec<Held> = (1..=n)
                .map(|version| Held { version, kept: kept.contains(&version) })
                .collect();
            let gone = removable(&versions, default, &named, window);
            for v in &gone {
                prop_assert!(*v != default && !named.contains(v) && !kept.contains(v));
                prop_assert!(*v + (window as u32) <= n, "v{} is in the window", v);
            }
            let retained = versions.len() - gone.len();
            prop_assert!(retained >= window.min(versions.len()));
        }
    }
}
