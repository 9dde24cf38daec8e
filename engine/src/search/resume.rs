//! Resuming a search after a crash (PSP-10 errata 1, 14, 25, 35).
//!
//! The ledger fold hands over every forest that opened and never closed,
//! each with its owner binding (node, generation, accepted root), its limits
//! and its last usage snapshot. Nothing is resurrected mid-epoch: instead the
//! owner's next forest opens as a new forest linked by `resumed_from` and
//! starts with at least the recorded usage, so a crash can over-charge a
//! budget but never refill it. Only the same owner may claim that usage,
//! exactly once; a forest of any other owner gets a fresh budget and the
//! bypass is recorded as an observation. Two unclosed forests are ambiguous
//! and refuse the fold instead of choosing one.
//!
//! No-goods are not claimed: the session's [`super::NoGoodStore`] holds
//! every folded record for every forest of the resumed session.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::budget::{Counters, SearchBudget, SearchLimits, SearchUsage, SnapshotError};
use super::forest::ForestBinding;

/// A forest the ledger shows opened and never closed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptedForest {
    pub forest_id: String,
    pub binding: ForestBinding,
    pub limits: SearchLimits,
    /// Its last `search_usage_snapshot`: a reserved worst case or settled
    /// actuals, never less than what was consumed.
    pub usage: SearchUsage,
}

impl InterruptedForest {
    /// Builds the record from the `search_opened` facts and the last usage
    /// snapshot's payload.
    pub fn from_snapshot(
        forest_id: String,
        binding: ForestBinding,
        limits: SearchLimits,
        snapshot: &BTreeMap<String, u64>,
    ) -> Result<Self, SnapshotError> {
        Ok(InterruptedForest {
            forest_id,
            binding,
            limits,
            usage: Counters::from_snapshot(snapshot)?,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error(
        "the ledger has {} unclosed search forests ({}); refusing to guess which one to resume",
        forest_ids.len(),
        forest_ids.join(", ")
    )]
    Ambiguous { forest_ids: Vec<String> },
}

/// A forest opened while an interrupted forest's usage was unclaimed by it:
/// ledgered as an observation, never silently.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeBypass {
    pub interrupted_forest: String,
    pub owner: ForestBinding,
    pub opened_for: ForestBinding,
}

/// How to open the next forest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForestSeed {
    pub budget: SearchBudget,
    /// The interrupted forest this one continues (`SearchOpened.resumed_from`).
    pub resumed_from: Option<String>,
    pub bypass: Option<ResumeBypass>,
}

/// The interrupted forest's usage, waiting for its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResumeClaim {
    pending: Option<InterruptedForest>,
}

impl ResumeClaim {
    /// Folds the unclosed forests of a ledger. None: a fresh session. One:
    /// its usage waits for its owner. More: ambiguous, refused.
    pub fn fold(mut unclosed: Vec<InterruptedForest>) -> Result<Self, ResumeError> {
        if unclosed.len() > 1 {
            let mut forest_ids: Vec<String> = unclosed.into_iter().map(|f| f.forest_id).collect();
            forest_ids.sort();
            return Err(ResumeError::Ambiguous { forest_ids });
        }
        Ok(ResumeClaim {
            pending: unclosed.pop(),
        })
    }

    /// The interrupted forest whose usage is still unclaimed.
    pub fn pending(&self) -> Option<&InterruptedForest> {
        self.pending.as_ref()
    }

    /// Seeds the budget of a forest about to open for `binding` with
    /// `configured` limits. The owner of the interrupted forest claims its
    /// usage and its limits (never refilled), once; anyone else gets a fresh
    /// budget, and while the usage stays unclaimed that is a bypass.
    pub fn open(&mut self, binding: &ForestBinding, configured: SearchLimits) -> ForestSeed {
        match self.pending.take() {
            Some(interrupted) if interrupted.binding == *binding => ForestSeed {
                budget: SearchBudget::with_consumed(interrupted.limits, interrupted.usage),
                resumed_from: Some(interrupted.forest_id),
                bypass: None,
            },
            Some(interrupted) => {
                let bypass = ResumeBypass {
                    interrupted_forest: interrupted.forest_id.clone(),
                    owner: interrupted.binding.clone(),
                    opened_for: binding.clone(),
                };
                self.pending = Some(interrupted);
                ForestSeed {
                    budget: SearchBudget::new(configured),
                    resumed_from: None,
                    bypass: Some(bypass),
                }
            }
            None => ForestSeed {
                budget: SearchBudget::new(configured),
                resumed_from: None,
                bypass: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::blob_digest;

    fn binding(node: &str, generation: u32, root: &str) -> ForestBinding {
        ForestBinding {
            node: node.into(),
            generation,
            accepted_root: blob_digest(root.as_bytes()),
        }
    }

    fn interrupted() -> InterruptedForest {
        let mut usage = Counters::ZERO;
        usage.actions = 7;
        usage.tokens = 1234;
        usage.workspace_files = 50;
        InterruptedForest {
            forest_id: "f-1".into(),
            binding: binding("n", 2, "x3"),
            limits: Counters::DEFAULT_LIMITS,
            usage,
        }
    }

    #[test]
    fn the_owner_resumes_with_the_recorded_usage_never_refilled() {
        let mut claim = ResumeClaim::fold(vec![interrupted()]).unwrap();
        let seed = claim.open(&binding("n", 2, "x3"), Counters::DEFAULT_LIMITS);
        assert_eq!(seed.resumed_from.as_deref(), Some("f-1"));
        assert!(seed.budget.usage().covers(&interrupted().usage));
        assert_eq!(seed.budget.usage(), interrupted().usage);
        assert_eq!(seed.bypass, None);
        assert_eq!(claim.pending(), None);
    }

    #[test]
    fn the_owner_keeps_the_recorded_limits_even_if_configuration_grew() {
        let mut claim = ResumeClaim::fold(vec![interrupted()]).unwrap();
        let mut generous = Counters::DEFAULT_LIMITS;
        generous.actions *= 10;
        let seed = claim.open(&binding("n", 2, "x3"), generous);
        assert_eq!(*seed.budget.limits(), Counters::DEFAULT_LIMITS);
    }

    #[test]
    fn the_usage_is_claimed_exactly_once() {
        let mut claim = ResumeClaim::fold(vec![interrupted()]).unwrap();
        let first = claim.open(&binding("n", 2, "x3"), Counters::DEFAULT_LIMITS);
        assert!(first.resumed_from.is_some());
        let second = claim.open(&binding("n", 2, "x3"), Counters::DEFAULT_LIMITS);
        assert_eq!(second.resumed_from, None);
        assert_eq!(second.budget.usage(), Counters::ZERO);
        assert_eq!(second.bypass, None);
    }

    #[test]
    fn another_owner_gets_a_fresh_budget_and_the_bypass_is_recorded() {
        let mut claim = ResumeClaim::fold(vec![interrupted()]).unwrap();
        for other in [
            binding("m", 2, "x3"),
            binding("n", 3, "x3"),
            binding("n", 2, "x4"),
        ] {
            let seed = claim.open(&other, Counters::DEFAULT_LIMITS);
            assert_eq!(seed.resumed_from, None);
            assert_eq!(seed.budget.usage(), Counters::ZERO);
            assert_eq!(
                seed.bypass,
                Some(ResumeBypass {
                    interrupted_forest: "f-1".into(),
                    owner: binding("n", 2, "x3"),
                    opened_for: other,
                })
            );
        }
        // The owner can still claim afterwards.
        let seed = claim.open(&binding("n", 2, "x3"), Counters::DEFAULT_LIMITS);
        assert_eq!(seed.resumed_from.as_deref(), Some("f-1"));
    }

    #[test]
    fn two_unclosed_forests_are_ambiguous() {
        let mut second = interrupted();
        second.forest_id = "f-0".into();
        let err = ResumeClaim::fold(vec![interrupted(), second]).unwrap_err();
        assert_eq!(
            err,
            ResumeError::Ambiguous {
                forest_ids: vec!["f-0".into(), "f-1".into()]
            }
        );
        assert!(err.to_string().contains("f-0, f-1"));
    }

    #[test]
    fn no_unclosed_forest_opens_fresh() {
        let mut claim = ResumeClaim::fold(vec![]).unwrap();
        let seed = claim.open(&binding("n", 0, "x0"), Counters::DEFAULT_LIMITS);
        assert_eq!(
            seed,
            ForestSeed {
                budget: SearchBudget::new(Counters::DEFAULT_LIMITS),
                resumed_from: None,
                bypass: None
            }
        );
    }

    #[test]
    fn the_record_reads_the_snapshot_payload_strictly() {
        let snapshot = interrupted().usage.to_snapshot();
        let i = InterruptedForest::from_snapshot(
            "f-1".into(),
            binding("n", 2, "x3"),
            Counters::DEFAULT_LIMITS,
            &snapshot,
        )
        .unwrap();
        assert_eq!(i, interrupted());
        let mut partial = snapshot;
        partial.remove("tokens");
        assert!(
            InterruptedForest::from_snapshot(
                "f-1".into(),
                binding("n", 2, "x3"),
                Counters::DEFAULT_LIMITS,
                &partial
            )
            .is_err()
        );
    }
}
