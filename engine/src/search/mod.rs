//! The search plane's pure cores (PSP-10 systems 19–21, Definitions 2, 3 and
//! 5, Propositions 1, 3 and 5).
//!
//! Everything here is a synchronous function over values: no I/O, no clock,
//! no randomness. The runtime performs the effects (eager copies, model
//! turns, sensor runs, ledger writes) and asks these types what is allowed
//! and what comes next.
//!
//! # Public API
//!
//! - [`budget`]: [`SearchLimits`] / [`SearchUsage`] (both [`Counters`], ten
//!   named counters; [`Counters::DEFAULT_LIMITS`]), [`ActionKind`],
//!   [`SearchBudget`] with `reserve(kind) -> Result<Reservation,
//!   BudgetRefusal>`, `settle(reservation, actual) -> Result<Settlement,
//!   SettleError>`, `charge_elapsed(secs)`, `close()`, `usage()`,
//!   `snapshot() -> BTreeMap<String, u64>`, and
//!   [`Counters::from_snapshot`]. A settled action yields a [`Receipt`]
//!   bound to the forest that owns the budget.
//! - [`forest`]: [`SearchForest`] (`open`, `reserve`, `settle`,
//!   `charge_elapsed`, `fork(seed, spec, fork_receipt)`, `start`,
//!   `measure(branch, observation, trajectory, verifier_receipt)`,
//!   `checkpoint_partial`, `reject`, `abandon`, `contain`,
//!   `select(profile)`, `commit(trajectory)`, `close(reason)`),
//!   [`SearchBranch`], [`SearchBranchState`], [`PartialCheckpointRef`],
//!   [`ForestBinding`], [`Seed`], [`BranchSpec`], [`CandidateObservation`].
//! - [`coverage`]: [`Coverage::of`]`(root_unchecked, candidate_unchecked)`:
//!   whether a candidate's energy may be compared with its root's at all.
//! - [`frontier`]: [`Frontier`] (`upsert`, `remove`, `serve() ->
//!   Option<Service>`), [`FrontierEntry`], [`frontier::compare`].
//! - [`expansion`]: [`next_expansions`]`(&ExpansionState) ->
//!   Vec<Expansion>` (a continuation first, then a new branch), [`expansion::triggers`], [`Strategy`] (in [`strategy`], with
//!   `digest()` for the no-good key), [`Trigger`], [`Attempt`].
//! - [`nogood`]: [`NoGoodComponents`], [`NoGoodKey::of`],
//!   [`Support::from_evidence`], [`NoGoodStore`] (`record`, `suppresses`,
//!   `restore`), [`build_digest`].
//! - [`resume`]: [`ResumeClaim::fold`]`(unclosed)` then
//!   [`ResumeClaim::open`]`(binding, limits) -> ForestSeed`.
//!
//! # Architecture invariant
//!
//! Usage is reserved before an action and never refilled
//! (`search::budget::tests::reservation_charges_the_worst_case_before_the_action`,
//! `overflow_is_charged_to_the_limit_and_closes`); a branch over its
//! reservation is contained
//! (`search::forest::tests::a_contained_branch_is_terminal_and_frees_its_running_place`).
//! A trigger fires only when its condition holds
//! (`search::expansion::tests::out_of_local_retries_fires_only_when_retries_are_exhausted`,
//! `a_continued_partial_can_seed_a_child_and_still_be_served`,
//! `every_tool_route_is_one_route_whichever_tool_names_it`,
//! `a_descent_that_is_no_hard_pass_measures_the_next_alternative_first`). Only
//! a failure that failed again supports a no-good
//! (`search::nogood::tests::gate_ab_only_a_failure_that_failed_again_supports_a_no_good`).
//! Energies are compared only on one coverage of the workspace: a candidate
//! measured on more is never judged not descending
//! (`search::forest::tests::a_candidate_measured_on_more_of_the_workspace_is_not_compared`,
//! `a_real_non_descent_on_the_same_coverage_is_still_no_descent`).

pub mod budget;
pub mod coverage;
pub mod expansion;
pub mod forest;
pub mod frontier;
pub mod nogood;
pub mod resume;
pub mod strategy;

pub use budget::{
    ActionKind, BudgetRefusal, Closure, Counter, Counters, Overflow, Receipt, Reservation,
    SearchBudget, SearchLimits, SearchUsage, SettleError, Settlement, SnapshotError,
};
pub use coverage::Coverage;
pub use expansion::{
    Attempt, BranchOutcome, BranchProgress, Expansion, ExpansionState, Novelty, OperatorKind,
    Trigger, next_expansions, probe_attempt, probe_first, same_route,
};
pub use forest::{
    BranchSpec, CandidateObservation, Eligibility, ForestBinding, ForestError, ForestSettlement,
    Ineligibility, MAX_BRANCHES, MeasuredCandidate, PartialCheckpointRef, SearchBranch,
    SearchBranchState, SearchForest, Seed, Selection,
};
pub use frontier::{Frontier, FrontierEntry, Service};
pub use nogood::{
    BUILD_GIT_SHA, CompilerEvidence, Environmental, Evidence, NoGood, NoGoodComponents, NoGoodKey,
    NoGoodRefusal, NoGoodStore, Support, build_digest,
};
pub use resume::{ForestSeed, InterruptedForest, ResumeBypass, ResumeClaim, ResumeError};
pub use strategy::{Strategy, StrategyContext};

#[cfg(test)]
mod tests {
    //! The pure API driven the way the runtime drives it, end to end.

    use super::*;
    use crate::diagnostic::Fixer;
    use crate::digest::{Digest, blob_digest};
    use crate::gate::{AcceptedTrajectory, GateParams, Observation, Verdict};

    fn root(name: &str) -> Digest {
        blob_digest(name.as_bytes())
    }

    fn reserve_and_settle(forest: &mut SearchForest, kind: ActionKind) -> Receipt {
        let reservation = forest.reserve(kind).unwrap();
        forest.settle(reservation, kind).unwrap().settlement.receipt
    }

    fn observation(name: &str, energy: f64, hard_pass: bool) -> CandidateObservation {
        CandidateObservation {
            root: root(name),
            energy,
            hard_pass,
            targeted_improvement: 1.0,
            profile: Digest::ZERO,
            coverage: Coverage::Same,
            barriers_hold: true,
            required_sensors_ran: true,
        }
    }

    #[test]
    fn a_forest_runs_from_fork_to_commit_and_resumes_without_refill() {
        let x0 = root("x0");
        let mut trajectory = AcceptedTrajectory::new(
            "node",
            0,
            Observation {
                root: x0,
                energy: 6.0,
                hard_pass: false,
            },
            GateParams {
                rho: 0.5,
                rejection_budget: 2,
            },
        );
        let binding = ForestBinding {
            node: "node".into(),
            generation: 0,
            accepted_root: x0,
        };
        let mut claim = ResumeClaim::fold(vec![]).unwrap();
        let seed = claim.open(&binding, Counters::DEFAULT_LIMITS);
        let mut forest =
            SearchForest::open("f1".into(), binding.clone(), seed.budget, 3, None).unwrap();
        let mut frontier = Frontier::new();
        let mut nogoods = NoGoodStore::new();

        // Branch b1 applies suggestions and realizes a partial fix.
        let fork = ActionKind::Fork {
            files: 20,
            bytes: 4096,
        };
        let receipt = reserve_and_settle(&mut forest, fork);
        let spec = BranchSpec {
            strategy: Strategy::ApplySuggestions,
            route: Fixer::Rustc.route().into(),
            prompt_program: None,
        };
        let b1 = forest
            .fork(Seed::Accepted, spec.clone(), receipt)
            .unwrap()
            .clone();
        frontier.upsert(FrontierEntry::for_branch(&b1, false, 2, 1.2));
        let served = frontier.serve().unwrap();
        assert!(served.opens_epoch);
        forest.start(&served.branch_id).unwrap();
        let receipt = reserve_and_settle(&mut forest, ActionKind::VerifierRun);
        let measured = forest
            .measure("b1", &observation("y1", 5.9, false), &trajectory, receipt)
            .unwrap();
        assert_eq!(
            measured,
            Eligibility::Ineligible(vec![Ineligibility::NotDescending])
        );
        let components = NoGoodComponents {
            accepted_root: x0,
            domain_manifest: root("rust-domain"),
            strategy: Strategy::ApplySuggestions.digest(),
            prompt_program: None,
            proposal: root("proposal-1"),
            grant: root("grant"),
            tool_catalog: root("tools"),
            sensor_fingerprint: root("cargo"),
            runtime_build: build_digest(),
        };
        nogoods.record(
            components.clone(),
            Support::from_evidence(Evidence::UnchangedState { root: x0 }).unwrap(),
        );
        let partial = forest
            .checkpoint_partial("b1", root("y1"), Some(root("packet")), vec![], root("ev"))
            .unwrap();

        // The partial stagnates, so expansion forks a child from it.
        let state = ExpansionState {
            branches_opened: forest.branches.len(),
            max_branches: MAX_BRANCHES,
            budget_remains: forest.budget().admits(&fork).is_ok(),
            rho: 0.5,
            current: BranchProgress {
                attempt: Attempt::new(
                    OperatorKind::ApplySuggestions,
                    Strategy::ApplySuggestions,
                    Fixer::Rustc.route(),
                ),
                seed: Seed::Accepted,
                outcome: BranchOutcome::Partial(partial.clone()),
                energies: vec![5.9, 5.9, 5.9],
                signatures: vec![root("c1")],
                route_changed: false,
                local_retries_left: 1,
                correction_empty: false,
            },
            operators: vec![crate::correction::CorrectionOperator::ChooseAlternative {
                alternatives: 2,
            }],
            routes: vec![Fixer::Rustc.route().into()],
            context: StrategyContext {
                single_fix_suggestions: 1,
                untried_alternatives: 1,
                localized_sites: 1,
                witnessed_partial: true,
            },
            tried: vec![],
            continuation: None,
        };
        let Some(Expansion::Open { seed, attempt, .. }) = next_expansions(&state).pop() else {
            panic!("a plateaued partial must expand");
        };
        assert_eq!(attempt.strategy, Strategy::NextAlternative);
        assert!(
            nogoods.suppresses(&components).is_some(),
            "the exact repeat is suppressed"
        );
        let receipt = reserve_and_settle(&mut forest, fork);
        let child_spec = BranchSpec {
            strategy: attempt.strategy,
            ..spec
        };
        let b2 = forest.fork(seed, child_spec, receipt).unwrap().clone();
        assert_eq!(b2.parent_branch.as_deref(), Some("b1"));
        assert_eq!(b2.witness, partial.child_witness());
        frontier.upsert(FrontierEntry::for_branch(&b2, false, 1, 1.0));
        // Epoch 1 (b1 alone) is spent; epoch 2 serves b1 and b2, and b2
        // has fewer unresolved obligations.
        let served = frontier.serve().unwrap();
        assert_eq!((served.epoch, served.branch_id.as_str()), (2, "b2"));
        forest.start("b2").unwrap();
        let receipt = reserve_and_settle(&mut forest, ActionKind::VerifierRun);
        assert_eq!(
            forest
                .measure("b2", &observation("y2", 0.0, true), &trajectory, receipt)
                .unwrap(),
            Eligibility::Eligible
        );

        // Select, commit once, close.
        assert_eq!(forest.select(Digest::ZERO).unwrap().selected, "b2");
        let decision = forest.commit(&mut trajectory).unwrap();
        assert_eq!(decision.verdict, Verdict::AcceptedHardPass);
        assert_eq!(forest.close("committed"), vec!["b1"]);

        // A crash before close would have resumed with at least this usage.
        let snapshot = forest.budget().snapshot();
        let interrupted = InterruptedForest::from_snapshot(
            "f1".into(),
            binding.clone(),
            *forest.limits(),
            &snapshot,
        )
        .unwrap();
        let mut claim = ResumeClaim::fold(vec![interrupted]).unwrap();
        let seed = claim.open(&binding, Counters::DEFAULT_LIMITS);
        assert_eq!(seed.resumed_from.as_deref(), Some("f1"));
        assert!(seed.budget.usage().covers(&forest.usage()));
    }
}
