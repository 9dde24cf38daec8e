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
//!   [`Counters::from_snapshot`]. A settled action yields a [`Receipt`].
//! - [`forest`]: [`SearchForest`] (`open`, `reserve`, `settle`,
//!   `charge_elapsed`, `fork(seed, spec, fork_receipt)`, `start`,
//!   `measure(branch, observation, trajectory, verifier_receipt)`,
//!   `checkpoint_partial`, `reject`, `abandon`, `contain`,
//!   `select(profile)`, `commit(trajectory)`, `close(reason)`),
//!   [`SearchBranch`], [`SearchBranchState`], [`PartialCheckpointRef`],
//!   [`ForestBinding`], [`Seed`], [`BranchSpec`], [`CandidateObservation`].
//! - [`frontier`]: [`Frontier`] (`upsert`, `remove`, `serve() ->
//!   Option<Service>`), [`FrontierEntry`], [`frontier::compare`].
//! - [`expansion`]: [`next_expansion`]`(&ExpansionState) ->
//!   Option<Expansion>`, [`expansion::triggers`], [`Strategy`] (with
//!   `digest()` for the no-good key), [`Trigger`], [`Attempt`].
//! - [`nogood`]: [`NoGoodComponents`], [`NoGoodKey::of`],
//!   [`Support::from_evidence`], [`NoGoodStore`] (`record`, `suppresses`,
//!   `restore`), [`build_digest`].
//! - [`resume`]: [`ResumeClaim::fold`]`(unclosed)` then
//!   [`ResumeClaim::open`]`(binding, limits) -> ForestSeed`.

pub mod budget;
pub mod expansion;
pub mod forest;
pub mod frontier;
pub mod nogood;
pub mod resume;

pub use budget::{
    ActionKind, BudgetRefusal, Closure, Counter, Counters, Overflow, Receipt, Reservation,
    SearchBudget, SearchLimits, SearchUsage, SettleError, Settlement, SnapshotError,
};
pub use expansion::{
    Attempt, BranchOutcome, BranchProgress, Expansion, ExpansionState, Novelty, OperatorKind,
    Strategy, StrategyContext, Trigger, next_expansion,
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
