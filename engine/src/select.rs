//! Deterministic selection among measured branches (PSP-10 Proposition 5).
//!
//! Keys, in order: hard pass before measured descent; lower normalized
//! energy; greater improvement in the targeted residual cluster; lower
//! recorded cost; lexicographically smaller branch id. No vote and no model
//! confidence enters. Candidates measured under a different sensor profile
//! than the accepted root are not comparable and are never selected.
//!
//! The recorded cost is the action units the forest settled on the
//! branch's behalf, carried in its `branch_candidate_measured` event; never
//! wall-clock sensor time, so the same evidence selects the same candidate
//! however long the sensors took, and [`rederive`] repeats every recorded
//! selection from the events alone.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

/// What selection may look at for one eligible branch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BranchMeasurement {
    pub branch_id: String,
    pub hard_pass: bool,
    pub energy: f64,
    /// Reduction of the targeted cluster's magnitude (before − after).
    pub targeted_improvement: f64,
    /// Recorded cost: action units settled for the branch.
    pub cost: u64,
    /// Digest of the sensor profile the branch was measured under.
    pub profile: Digest,
}

/// Orders `a` before `b` when `a` is preferred.
pub fn compare(a: &BranchMeasurement, b: &BranchMeasurement) -> Ordering {
    b.hard_pass
        .cmp(&a.hard_pass)
        .then_with(|| a.energy.total_cmp(&b.energy))
        .then_with(|| b.targeted_improvement.total_cmp(&a.targeted_improvement))
        .then_with(|| a.cost.cmp(&b.cost))
        .then_with(|| a.branch_id.cmp(&b.branch_id))
}

/// Index of the selected candidate among those measured under `profile`.
pub fn select(candidates: &[BranchMeasurement], profile: Digest) -> Option<usize> {
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.profile == profile)
        .min_by(|(_, a), (_, b)| compare(a, b))
        .map(|(i, _)| i)
}

/// A measurement under the zero profile with the other keys as given: the
/// candidates of the tests of selection here and of its replay from the
/// ledger (`ledger::selections`).
#[cfg(test)]
pub(crate) fn measurement(
    id: &str,
    hard: bool,
    energy: f64,
    improvement: f64,
    cost: u64,
) -> BranchMeasurement {
    BranchMeasurement {
        branch_id: id.into(),
        hard_pass: hard,
        energy,
        targeted_improvement: improvement,
        cost,
        profile: Digest::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::measurement as m;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_apply_in_order() {
        // Hard pass beats lower energy.
        let c = [m("b1", false, 0.1, 9.0, 1), m("b2", true, 3.0, 0.0, 9)];
        assert_eq!(select(&c, Digest::ZERO), Some(1));
        // Lower energy beats improvement.
        let c = [m("b1", false, 2.0, 9.0, 1), m("b2", false, 1.0, 0.0, 9)];
        assert_eq!(select(&c, Digest::ZERO), Some(1));
        // Improvement beats cost.
        let c = [m("b1", false, 1.0, 1.0, 1), m("b2", false, 1.0, 2.0, 9)];
        assert_eq!(select(&c, Digest::ZERO), Some(1));
        // Cost beats branch id.
        let c = [m("b1", false, 1.0, 1.0, 5), m("b2", false, 1.0, 1.0, 4)];
        assert_eq!(select(&c, Digest::ZERO), Some(1));
        // Branch id breaks the last tie.
        let c = [m("b2", false, 1.0, 1.0, 4), m("b1", false, 1.0, 1.0, 4)];
        assert_eq!(select(&c, Digest::ZERO), Some(1));
    }

    #[test]
    fn other_profiles_are_never_selected() {
        let mut foreign = m("b1", true, 0.0, 0.0, 0);
        foreign.profile = Digest([1; 32]);
        let c = [foreign, m("b2", false, 5.0, 0.0, 0)];
        assert_eq!(select(&c, Digest::ZERO), Some(1));
        assert_eq!(select(&c[..1], Digest::ZERO), None);
    }

    proptest! {
        /// The choice depends on the candidates, not on the order they arrive in.
        #[test]
        fn selection_is_order_independent(
            raw in proptest::collection::vec((any::<bool>(), 0u8..4, 0u8..3, 0u64..3), 1..8),
            rotate in 0usize..8,
        ) {
            let cands: Vec<_> = raw.iter().enumerate()
                .map(|(i, (h, e, imp, c))| m(&format!("b{i}"), *h, f64::from(*e), f64::from(*imp), *c))
                .collect();
            let chosen = &cands[select(&cands, Digest::ZERO).unwrap()].branch_id;
            let mut rotated = cands.clone();
            rotated.rotate_left(rotate % cands.len());
            rotated.reverse();
            let chosen_again = &rotated[select(&rotated, Digest::ZERO).unwrap()].branch_id;
            prop_assert_eq!(chosen, chosen_again);
        }
    }
}
