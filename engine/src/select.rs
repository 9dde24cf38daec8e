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
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::ledger::SearchEvent;

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

/// One forest's selection, recorded and re-derived alike.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rederived {
    pub forest_id: String,
    pub branch_id: String,
}

/// A recorded selection the events do not reproduce.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "forest {forest_id}: the ledger records branch `{recorded}` as selected, but its measurements \
     select {}",
    derived.as_deref().map_or("no candidate".to_owned(), |b| format!("branch `{b}`"))
)]
pub struct SelectionDiverges {
    pub forest_id: String,
    pub recorded: String,
    pub derived: Option<String>,
}

/// Re-derives every recorded selection from the ledger's search events, in
/// order: the eligible measurements of each forest, compared by
/// [`select`] under the profile its `branch_selected` names. A selection
/// recorded without its profile or keys (a ledger older than them) is
/// skipped, and counted in the second value.
pub fn rederive<'e>(
    events: impl IntoIterator<Item = &'e SearchEvent>,
) -> Result<(Vec<Rederived>, usize), SelectionDiverges> {
    let mut measured: BTreeMap<&str, Vec<BranchMeasurement>> = BTreeMap::new();
    let mut agreed = Vec::new();
    let mut skipped = 0;
    for event in events {
        match event {
            SearchEvent::BranchCandidateMeasured {
                forest_id,
                branch_id,
                energy,
                hard_pass,
                keys: Some(keys),
                ..
            } if keys.eligible => {
                measured
                    .entry(forest_id)
                    .or_default()
                    .push(BranchMeasurement {
                        branch_id: branch_id.clone(),
                        hard_pass: *hard_pass,
                        energy: *energy,
                        targeted_improvement: keys.targeted_improvement,
                        cost: keys.cost,
                        profile: keys.profile,
                    });
            }
            SearchEvent::BranchSelected {
                forest_id,
                branch_id,
                profile,
                ..
            } => {
                let Some(profile) = profile else {
                    skipped += 1;
                    continue;
                };
                let candidates = measured
                    .get(forest_id.as_str())
                    .map_or(&[][..], Vec::as_slice);
                let derived = select(candidates, *profile).map(|i| candidates[i].branch_id.clone());
                if derived.as_ref() != Some(branch_id) {
                    return Err(SelectionDiverges {
                        forest_id: forest_id.clone(),
                        recorded: branch_id.clone(),
                        derived,
                    });
                }
                agreed.push(Rederived {
                    forest_id: forest_id.clone(),
                    branch_id: branch_id.clone(),
                });
            }
            _ => {}
        }
    }
    Ok((agreed, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::SelectionKeys;
    use proptest::prelude::*;

    fn m(id: &str, hard: bool, energy: f64, improvement: f64, cost: u64) -> BranchMeasurement {
        BranchMeasurement {
            branch_id: id.into(),
            hard_pass: hard,
            energy,
            targeted_improvement: improvement,
            cost,
            profile: Digest::ZERO,
        }
    }

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

    fn measured(forest: &str, c: &BranchMeasurement, eligible: bool) -> SearchEvent {
        SearchEvent::BranchCandidateMeasured {
            forest_id: forest.into(),
            branch_id: c.branch_id.clone(),
            candidate_id: format!("{forest}/{}/m1", c.branch_id),
            root: Digest::ZERO,
            energy: c.energy,
            hard_pass: c.hard_pass,
            keys: Some(SelectionKeys {
                eligible,
                targeted_improvement: c.targeted_improvement,
                cost: c.cost,
                profile: c.profile,
            }),
            flaky: vec![],
        }
    }

    fn selected(forest: &str, branch: &str, profile: Option<Digest>) -> SearchEvent {
        SearchEvent::BranchSelected {
            forest_id: forest.into(),
            branch_id: branch.into(),
            candidate_id: format!("{forest}/{branch}/m1"),
            profile,
        }
    }

    /// Two candidates tie on energy and improvement; the recorded cost
    /// decides, and a recorded selection that contradicts it is caught.
    #[test]
    fn replay_rederives_each_selection_and_refuses_a_divergent_one() {
        let cheap = m("b2", false, 1.0, 1.0, 2);
        let dear = m("b1", false, 1.0, 1.0, 5);
        let ineligible = m("b3", true, 0.0, 9.0, 0);
        let events = [
            measured("f1", &dear, true),
            measured("f1", &ineligible, false),
            measured("f1", &cheap, true),
            selected("f1", "b2", Some(Digest::ZERO)),
            measured("f2", &dear, true),
            selected("f2", "b1", Some(Digest::ZERO)),
            // A selection from before profiles were recorded is skipped.
            selected("f3", "b9", None),
        ];
        let (agreed, skipped) = rederive(&events).unwrap();
        let ids: Vec<_> = agreed
            .iter()
            .map(|r| (r.forest_id.as_str(), r.branch_id.as_str()))
            .collect();
        assert_eq!(ids, vec![("f1", "b2"), ("f2", "b1")]);
        assert_eq!(skipped, 1);

        let mut forged = events.to_vec();
        forged[3] = selected("f1", "b1", Some(Digest::ZERO));
        let err = rederive(&forged).unwrap_err();
        assert_eq!(err.derived.as_deref(), Some("b2"));
        assert!(err.to_string().contains("forest f1"), "{err}");

        let nothing = [selected("f1", "b1", Some(Digest([7; 32])))];
        assert_eq!(rederive(&nothing).unwrap_err().derived, None);
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
