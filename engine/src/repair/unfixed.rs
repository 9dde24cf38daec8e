//! Why a repair left each problem it did not fix, and what would help.
//!
//! Pure: a function over the clusters the repair ended with, the steps it
//! took (each branch's typed [`NotUsed`]) and how its loop ended. It never
//! decides anything the search acts on; it only explains what the search
//! already did, so a front end can say it per cluster instead of "no
//! eligible candidate".

use crate::cluster::{Cluster, ResidualClass};
use crate::report::{BranchOutcome, Help, NotUsed, StepReport, Unfixed, UnfixedReason};

/// Why the loop over steps stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// Every required check passes: nothing is left unfixed.
    HardPass,
    /// No cluster had a candidate left to try.
    NothingToTry,
    /// `max_steps` was reached.
    StepLimit,
    /// The decision bound was reached.
    DecisionBound,
    Cancelled,
}

/// The problems left in `clusters` (warnings aside, which never block a
/// hard pass), dominant first as given, each with why and what would help.
pub(super) fn unfixed(
    clusters: &[Cluster],
    steps: &[StepReport],
    ended: Ended,
    models_configured: bool,
) -> Vec<Unfixed> {
    if ended == Ended::HardPass {
        return Vec::new();
    }
    clusters
        .iter()
        .filter(|c| c.class != ResidualClass::Warning)
        .map(|cluster| {
            let (reason, help) = explain(cluster, steps, ended, models_configured);
            Unfixed {
                cluster_id: cluster.id.clone(),
                cluster_title: cluster.title.clone(),
                reason,
                help,
            }
        })
        .collect()
}

fn explain(
    cluster: &Cluster,
    steps: &[StepReport],
    ended: Ended,
    models_configured: bool,
) -> (UnfixedReason, Option<Help>) {
    let model = (!models_configured).then_some(Help::ConfigureModel);
    if cluster.class == ResidualClass::SensorUnavailable {
        let stages = vec![cluster.stage.clone()];
        return (
            UnfixedReason::StageUnavailable {
                stages: stages.clone(),
            },
            Some(Help::MakeStageRunnable { stages }),
        );
    }
    // The last forest that worked on this cluster and committed nothing.
    if let Some(step) = steps
        .iter()
        .rev()
        .find(|s| s.cluster_id == cluster.id && s.decision.is_none())
    {
        let mut reasons: Vec<NotUsed> = Vec::new();
        for branch in &step.branches {
            if let BranchOutcome::Ineligible { cause, .. } = &branch.outcome
                && !reasons.contains(cause)
            {
                reasons.push(cause.clone());
            }
        }
        let help = reasons
            .iter()
            .find_map(|r| match r {
                NotUsed::StageUnavailable { stages } => Some(Help::MakeStageRunnable {
                    stages: stages.clone(),
                }),
                _ => None,
            })
            .or_else(|| {
                reasons.iter().find_map(|r| match r {
                    NotUsed::BudgetExhausted { limit } => Some(Help::RaiseLimit {
                        limit: limit.clone(),
                    }),
                    _ => None,
                })
            })
            .or(model);
        let tried = step.branches.len();
        return (UnfixedReason::NoneUsable { tried, reasons }, help);
    }
    match ended {
        Ended::NothingToTry | Ended::HardPass => (UnfixedReason::NoSuggestion, model),
        Ended::StepLimit => (
            UnfixedReason::NotReached,
            Some(Help::RaiseLimit {
                limit: Some("max_steps".to_owned()),
            }),
        ),
        Ended::DecisionBound | Ended::Cancelled => (UnfixedReason::NotReached, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::report::BranchReport;

    fn cluster(id: &str, class: ResidualClass) -> Cluster {
        Cluster {
            id: id.to_owned(),
            key: format!("key:{id}"),
            class,
            stage: "test".to_owned(),
            title: format!("title of {id}"),
            sites: Vec::new(),
            diagnostics: Vec::new(),
            failures: Vec::new(),
            magnitude: 1.0,
            energy: 1.0,
            digest: Digest::ZERO,
        }
    }

    fn step(cluster_id: &str, causes: &[NotUsed]) -> StepReport {
        StepReport {
            forest_id: "f1".to_owned(),
            cluster_id: cluster_id.to_owned(),
            cluster_title: String::new(),
            energy_before: 1.0,
            branches: causes
                .iter()
                .map(|cause| BranchReport {
                    outcome: BranchOutcome::ineligible(cause.clone(), "precise"),
                    ..BranchReport::unmeasured(
                        "b1".to_owned(),
                        String::new(),
                        "suggestion".to_owned(),
                        "apply_suggestions".to_owned(),
                        Digest::ZERO,
                    )
                })
                .collect(),
            decision: None,
        }
    }

    #[test]
    fn a_hard_pass_leaves_nothing_unfixed() {
        let clusters = [cluster("c1", ResidualClass::TestFailure)];
        assert!(unfixed(&clusters, &[], Ended::HardPass, false).is_empty());
    }

    #[test]
    fn a_cluster_with_no_suggestion_asks_for_a_model_only_when_none_is_configured() {
        let clusters = [
            cluster("c1", ResidualClass::TestFailure),
            cluster("w", ResidualClass::Warning),
        ];
        let without = unfixed(&clusters, &[], Ended::NothingToTry, false);
        assert_eq!(without.len(), 1, "warnings never block a hard pass");
        assert_eq!(without[0].reason, UnfixedReason::NoSuggestion);
        assert_eq!(without[0].help, Some(Help::ConfigureModel));
        let with = unfixed(&clusters, &[], Ended::NothingToTry, true);
        assert_eq!(with[0].help, None);
    }

    #[test]
    fn tried_candidates_give_their_distinct_reasons_and_the_most_useful_help() {
        let clusters = [
            cluster("c1", ResidualClass::Type),
            cluster("c2", ResidualClass::Type),
        ];
        let stages = vec!["test".to_owned()];
        let steps = [
            step("c1", &[NotUsed::NoDescent, NotUsed::NoDescent]),
            step(
                "c2",
                &[
                    NotUsed::BudgetExhausted {
                        limit: Some("verifier_runs".into()),
                    },
                    NotUsed::StageUnavailable {
                        stages: stages.clone(),
                    },
                ],
            ),
        ];
        let got = unfixed(&clusters, &steps, Ended::NothingToTry, false);
        assert_eq!(
            got[0].reason,
            UnfixedReason::NoneUsable {
                tried: 2,
                reasons: vec![NotUsed::NoDescent]
            }
        );
        assert_eq!(got[0].help, Some(Help::ConfigureModel));
        assert_eq!(got[1].help, Some(Help::MakeStageRunnable { stages }));
    }

    #[test]
    fn a_stage_that_could_not_run_and_a_search_that_stopped_early_say_so() {
        let clusters = [
            cluster("c1", ResidualClass::SensorUnavailable),
            cluster("c2", ResidualClass::Type),
        ];
        let got = unfixed(&clusters, &[], Ended::StepLimit, false);
        assert_eq!(
            got[0].help,
            Some(Help::MakeStageRunnable {
                stages: vec!["test".into()]
            })
        );
        assert_eq!(got[1].reason, UnfixedReason::NotReached);
        assert_eq!(
            got[1].help,
            Some(Help::RaiseLimit {
                limit: Some("max_steps".into())
            })
        );
        let cancelled = unfixed(&clusters[1..], &[], Ended::Cancelled, false);
        assert_eq!(cancelled[0].help, None);
    }
}
