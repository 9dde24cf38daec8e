//! Whether a candidate and its root were measured on the same part of the
//! workspace (PSP-10 §22: candidates compared by energy must share one
//! immutable energy and sensor profile; a mismatch makes the comparison
//! ineligible, never normalized after the fact).
//!
//! A sensor profile fixes which tools measure, but not everything they
//! reach: cargo compiles no crate whose dependency failed to build, so
//! while a library does not build, its dependents' own errors are not in
//! the measurement. A candidate that fixes the library and finds errors in
//! what it let be checked is measured on more of the workspace than its
//! root was, and its energy, which counts the errors it revealed, says
//! nothing about descent (a dependent that builds cleanly once checked
//! adds nothing, and leaves the comparison as it was): it is neither a
//! descent nor "no descent", and no evidence against the fix. The runtime keeps it
//! as a partial checkpoint and repairs what it revealed
//! (`repair::quantum`). A candidate measured on less (one that breaks a
//! library its dependents were checked against) hides errors rather than
//! fixing them, and is not compared either: never a descent, it is kept or
//! rejected as one that did not descend would be. A hard pass passes every
//! required stage on the whole workspace, so it is compared as usual.
//!
//! # Architecture invariant
//!
//! A candidate that reveals what its root could not check is never judged
//! not descending, and one measured on the same coverage is judged as
//! before (`coverage::tests`,
//! `search::forest::tests::a_candidate_measured_on_more_of_the_workspace_is_not_compared`,
//! `a_real_non_descent_on_the_same_coverage_is_still_no_descent`,
//! `workspace_members::a_library_fix_that_reveals_its_dependents_errors_is_continued_and_all_three_are_written`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// What a candidate's measurement covers, against its root's, by the units
/// each could not check (see `StageReport::unchecked`) and those the
/// candidate found errors in (`StageReport::failing`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "coverage", content = "units", rename_all = "snake_case")]
pub enum Coverage {
    /// Both checked the same units: their energies are comparable.
    #[default]
    Same,
    /// The candidate's measurement found errors in these units, which its
    /// root's could not check.
    Reveals(Vec<String>),
    /// The candidate's measurement could not check these units, which its
    /// root's did (or which it added).
    Hides(Vec<String>),
}

impl Coverage {
    /// The candidate's coverage against its root's, from the units each
    /// left unchecked and the units the candidate found errors in. A unit
    /// the candidate let be checked is revealed when it has errors: a
    /// clean one adds nothing the root's energy missed. Hiding any unit
    /// outweighs revealing others: what a candidate hides may hold the
    /// errors its energy no longer counts.
    pub fn of(
        root_unchecked: &BTreeSet<String>,
        (candidate_unchecked, candidate_failing): (&BTreeSet<String>, &BTreeSet<String>),
    ) -> Self {
        let hidden: Vec<String> = candidate_unchecked
            .difference(root_unchecked)
            .cloned()
            .collect();
        if !hidden.is_empty() {
            return Coverage::Hides(hidden);
        }
        let revealed: Vec<String> = root_unchecked
            .difference(candidate_unchecked)
            .filter(|unit| candidate_failing.contains(*unit))
            .cloned()
            .collect();
        if revealed.is_empty() {
            Coverage::Same
        } else {
            Coverage::Reveals(revealed)
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn units(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|&name| name.to_owned()).collect()
    }

    /// The library fixed: its dependents, which the root could not check,
    /// are checked now and have errors of their own.
    #[test]
    fn a_candidate_that_finds_errors_where_its_root_could_not_check_reveals_them() {
        let dependents = units(&["hd-a", "hd-b"]);
        assert_eq!(
            Coverage::of(&dependents, (&units(&[]), &dependents)),
            Coverage::Reveals(vec!["hd-a".into(), "hd-b".into()])
        );
        assert_eq!(
            Coverage::of(&dependents, (&units(&["hd-b"]), &units(&["hd-a"]))),
            Coverage::Reveals(vec!["hd-a".into()])
        );
    }

    /// A target the library's fix let be checked that builds cleanly adds
    /// nothing the root's energy missed: compared as before.
    #[test]
    fn a_unit_checked_now_without_errors_reveals_nothing() {
        assert_eq!(
            Coverage::of(&units(&["demo test it"]), (&units(&[]), &units(&[]))),
            Coverage::Same
        );
    }

    /// The library broken: a dependent the root checked is not checked now,
    /// and that outweighs another it reveals.
    #[test]
    fn a_candidate_that_leaves_unchecked_what_its_root_checked_hides_it() {
        assert_eq!(
            Coverage::of(&units(&[]), (&units(&["hd-a"]), &units(&["hd-core"]))),
            Coverage::Hides(vec!["hd-a".into()])
        );
        assert_eq!(
            Coverage::of(&units(&["hd-b"]), (&units(&["hd-a"]), &units(&["hd-b"]))),
            Coverage::Hides(vec!["hd-a".into()])
        );
    }

    proptest! {
        /// Equal coverage is `Same` whatever it holds; a candidate that
        /// leaves more unchecked hides exactly those units, and one that
        /// leaves fewer reveals exactly those of them it found errors in.
        #[test]
        fn coverage_names_exactly_the_units_that_make_it_differ(
            root in proptest::collection::btree_set("[a-d]", 0..4),
            candidate in proptest::collection::btree_set("[a-d]", 0..4),
            failing in proptest::collection::btree_set("[a-d]", 0..4),
        ) {
            prop_assert_eq!(Coverage::of(&root, (&root, &failing)), Coverage::Same);
            let named = match Coverage::of(&root, (&candidate, &failing)) {
                Coverage::Same => BTreeSet::new(),
                Coverage::Reveals(units) | Coverage::Hides(units) => {
                    units.into_iter().collect()
                }
            };
            let expected: BTreeSet<String> = if candidate.is_subset(&root) {
                root.difference(&candidate)
                    .filter(|unit| failing.contains(*unit))
                    .cloned()
                    .collect()
            } else {
                candidate.difference(&root).cloned().collect()
            };
            prop_assert_eq!(named, expected);
        }
    }
}
