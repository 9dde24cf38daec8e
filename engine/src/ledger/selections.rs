//! Replay of selection (PSP-10 Proposition 5): every recorded
//! `branch_selected`, repeated from the keys the forest's
//! `branch_candidate_measured` rows carry.
//!
//! A pure fold over search events; it must never read anything else (no
//! clock, no sensor, no workspace), so a ledger alone says whether its
//! selections follow from its measurements.

use std::collections::BTreeMap;

use serde::Serialize;

use super::SearchEvent;
use crate::select::{BranchMeasurement, select};

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
/// [`select`](crate::select::select) under the profile its `branch_selected` names. A selection
/// recorded without its profile or keys (a ledger older than them) is
/// skipped, and counted in the second value.
pub fn rederive_selections<'e>(
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
    use crate::digest::Digest;
    use crate::ledger::SelectionKeys;
    use crate::select::measurement as m;

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
        let (agreed, skipped) = rederive_selections(&events).unwrap();
        let ids: Vec<_> = agreed
            .iter()
            .map(|r| (r.forest_id.as_str(), r.branch_id.as_str()))
            .collect();
        assert_eq!(ids, vec![("f1", "b2"), ("f2", "b1")]);
        assert_eq!(skipped, 1);

        let mut forged = events.to_vec();
        forged[3] = selected("f1", "b1", Some(Digest::ZERO));
        let err = rederive_selections(&forged).unwrap_err();
        assert_eq!(err.derived.as_deref(), Some("b2"));
        assert!(err.to_string().contains("forest f1"), "{err}");

        let nothing = [selected("f1", "b1", Some(Digest([7; 32])))];
        assert_eq!(rederive_selections(&nothing).unwrap_err().derived, None);
    }
}
