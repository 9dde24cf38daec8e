//! What the engine tells its front ends: the reports of a check and of a
//! repair, and what a promotion wrote.
//!
//! Plain data, serialized as the CLI's `--format json` and carried to the
//! editor. It must never decide anything: the values are filled in by the
//! runtime and the gate, and only rendered by the binary.

use serde::{Deserialize, Serialize};

use crate::change::FileChange;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::diagnostic::{Diagnostic, TestFailure};
use crate::digest::Digest;
use crate::gate::{GateDecision, Verdict};
use crate::measure::{Measurement, StageSummary};
use crate::workspace_path::WorkspacePath;

/// What sensing the view found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub root: Digest,
    pub stages: Vec<StageSummary>,
    pub diagnostics: Vec<Diagnostic>,
    pub failures: Vec<TestFailure>,
    /// Clusters ordered dominant first.
    pub clusters: Vec<Cluster>,
    pub energy: f64,
    pub hard_pass: bool,
}

impl CheckReport {
    pub(crate) fn of(m: &Measurement, config: &Config) -> CheckReport {
        CheckReport {
            root: m.root,
            stages: m.stage_summaries(config),
            diagnostics: m.assessment.diagnostics.clone(),
            failures: m.assessment.failures.clone(),
            clusters: m.assessment.clusters.clone(),
            energy: m.energy(),
            hard_pass: m.hard_pass(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairOptions {
    /// At most this many branches per step (1..=3).
    pub max_branches: usize,
    /// Repair this cluster first instead of the dominant one.
    pub target_cluster: Option<String>,
    /// Prompt-bundle refs (`id`, `id@N`, `id@sha256:…`) resolved at start.
    pub bundles: Vec<String>,
}

impl Default for RepairOptions {
    fn default() -> Self {
        RepairOptions {
            max_branches: 3,
            target_cluster: None,
            bundles: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairStatus {
    /// The view already hard-passes: nothing to do.
    AlreadyClean,
    /// A hard-passing state was reached; `changes` lead there.
    HardPass,
    /// Descents were accepted but residuals remain.
    ResidualsRemain,
    /// No branch produced an eligible candidate.
    NoEligibleCandidate,
    /// The decision bound N_gate was reached.
    BoundReached,
    Cancelled,
}

/// How one branch ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum BranchOutcome {
    Selected,
    NotSelected,
    /// `cause` is what a front end renders; `reason` is the engine's precise
    /// wording, as the ledger records it.
    Ineligible {
        cause: NotUsed,
        reason: String,
    },
    /// Ineligible, but kept as a partial checkpoint that a later quantum
    /// continued or forked from; never accepted itself.
    Partial {
        reason: String,
        /// The targets it let be checked that could not be before, when it
        /// was kept for that ([`NotUsed::MeasuredOnMore`]): not compared.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        revealed: Vec<String>,
    },
}

impl BranchOutcome {
    pub(crate) fn ineligible(cause: NotUsed, reason: impl Into<String>) -> BranchOutcome {
        BranchOutcome::Ineligible {
            cause,
            reason: reason.into(),
        }
    }
}

/// Why a candidate fix was not used. Serialized as `{"kind": ...}` with the
/// variant's fields: stable names a front end renders in its own words.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NotUsed {
    /// Measured: it leaves no fewer or less severe problems.
    NoDescent,
    /// Measured on more of the workspace than the state it started from:
    /// it let `units` be checked, which something they depend on kept from
    /// building before, so its problems are not compared with that
    /// state's. Rejected only when nothing it revealed can be worked on.
    MeasuredOnMore { units: Vec<String> },
    /// Measured on less of the workspace: it keeps `units`, checked
    /// before, from being checked, so its problems are not compared.
    MeasuredOnLess { units: Vec<String> },
    /// A required stage could not run on it, so it cannot be verified.
    StageUnavailable { stages: Vec<String> },
    /// The search's budget ran out first; `limit` names the
    /// `[exploration.limits]` counter when one is known.
    BudgetExhausted { limit: Option<String> },
    /// The same change on the same files failed before (an exact no-good).
    TriedBefore,
    /// The diagnostic probe: tried alone, no alternative built better.
    NoBetterAlternative,
    /// It changed nothing, or led to a state already measured.
    NothingNew,
    /// The tests as they were fail against it (`backward-compatible`): a
    /// changed test does not make a fix.
    OriginalTestsFail,
    /// It removes, renames or switches off tests that existed when the
    /// repair started (any test policy); `tests` names some of them.
    TestsWeakened { tests: Vec<String> },
    /// The configured model could not be used for it.
    ModelUnavailable,
    /// Its private copy or its edits could not be made.
    NotMade,
    /// An operational barrier does not hold on it.
    Barrier,
    /// The search stopped (cancelled, or its forest closed) before it was
    /// checked.
    Stopped,
}

/// A problem a repair ended without fixing: why, and what would help.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unfixed {
    pub cluster_id: String,
    pub cluster_title: String,
    pub reason: UnfixedReason,
    /// `None` when nothing the user can change would help (a cancelled
    /// repair, candidates that were all worse).
    pub help: Option<Help>,
}

/// Why a cluster was left as it was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum UnfixedReason {
    /// The compiler offers no fix for it and no model worked on it.
    NoSuggestion,
    /// `tried` candidate fixes were tried and none could be used, for
    /// these (distinct) reasons.
    NoneUsable { tried: usize, reasons: Vec<NotUsed> },
    /// It is a required stage that could not run.
    StageUnavailable { stages: Vec<String> },
    /// The search stopped before it reached this cluster.
    NotReached,
}

/// What would let a later repair do better.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Help {
    /// No `[[models]]` is configured; a model could try what the compiler
    /// offers no fix for.
    ConfigureModel,
    /// These required stages must be able to run.
    MakeStageRunnable { stages: Vec<String> },
    /// A search limit ran out: `max_steps` of `[exploration]`, a counter of
    /// `[exploration.limits]`, or (`None`) one of those not known which.
    RaiseLimit { limit: Option<String> },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BranchReport {
    pub branch_id: String,
    pub label: String,
    pub proposer: String,
    /// The quantum's strategy (`apply_suggestions`, `local_repair`, ...).
    pub strategy: String,
    pub proposal: Digest,
    pub root: Option<Digest>,
    pub energy: Option<f64>,
    pub hard_pass: bool,
    /// The gate's pure preview; never a decision.
    pub preview: Option<Verdict>,
    pub stages: Vec<StageSummary>,
    /// `external-oracle`'s verdict on the branch's state, when one judged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle: Option<crate::sensor::oracle::OracleVerdict>,
    /// Titles of the clusters left in the branch.
    pub clusters: Vec<String>,
    #[serde(flatten)]
    pub outcome: BranchOutcome,
}

impl BranchReport {
    /// A branch as it is before anything measured it: no root, no energy,
    /// no stages, not selected. Every branch a step reports starts here and
    /// is filled in as its sensing and the gate get to it.
    pub(crate) fn unmeasured(
        branch_id: String,
        label: String,
        proposer: String,
        strategy: String,
        proposal: Digest,
    ) -> BranchReport {
        BranchReport {
            branch_id,
            label,
            proposer,
            strategy,
            proposal,
            root: None,
            energy: None,
            hard_pass: false,
            preview: None,
            stages: Vec::new(),
            oracle: None,
            clusters: Vec::new(),
            outcome: BranchOutcome::NotSelected,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    pub forest_id: String,
    pub cluster_id: String,
    pub cluster_title: String,
    pub energy_before: f64,
    pub branches: Vec<BranchReport>,
    /// The one decision this step appended, if any.
    pub decision: Option<GateDecision>,
}

/// The result of one repair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepairOutcome {
    pub repair_id: String,
    pub status: RepairStatus,
    /// The view's root when the repair started; promotion requires it still.
    pub start_root: Digest,
    /// The last accepted state (equal to `start_root` when nothing was accepted).
    pub final_root: Digest,
    pub initial: CheckReport,
    pub steps: Vec<StepReport>,
    /// From the start view to the final accepted state. Only promotable when
    /// `status` is `HardPass`.
    pub changes: Vec<FileChange>,
    /// One line for a person: "imported `HashMap`, made `count` mutable".
    pub summary: String,
    /// No `[[models]]` is configured and the search stopped on a cluster
    /// the compiler offers nothing for: configuring a model would let one try.
    #[serde(default)]
    pub model_would_help: bool,
    /// Every problem left when the repair did not reach a hard pass,
    /// dominant first, with why and what would help; empty otherwise.
    #[serde(default)]
    pub unfixed: Vec<Unfixed>,
}

impl RepairOutcome {
    /// Whether the repair reached a hard pass: the only result that is ever
    /// offered, applied or promoted.
    pub fn is_verified(&self) -> bool {
        self.status == RepairStatus::HardPass
    }

    /// Which routes produced the accepted steps, for a person: "a compiler
    /// suggestion", "model `local`", or both in step order.
    pub fn routes(&self) -> String {
        let mut routes: Vec<String> = Vec::new();
        for branch in self.steps.iter().flat_map(|s| &s.branches) {
            if branch.outcome != BranchOutcome::Selected {
                continue;
            }
            let named: Vec<String> = match branch.proposer.strip_prefix("model:") {
                Some(model) => vec![format!("model `{model}`")],
                // A tool route names its tools (`ty-fixes+ruff-fixes`);
                // ledgers from before say `rustc-suggestions` for any.
                None => branch
                    .proposer
                    .split('+')
                    .map(|part| {
                        crate::diagnostic::Fixer::ALL
                            .iter()
                            .find(|fixer| fixer.route() == part)
                            .map_or("a compiler suggestion", |fixer| fixer.described())
                            .to_owned()
                    })
                    .collect(),
            };
            for route in named {
                if !routes.contains(&route) {
                    routes.push(route);
                }
            }
        }
        routes.join(" and ")
    }
}

/// What a promotion wrote.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Promotion {
    pub root_before: Digest,
    pub root_after: Digest,
    pub files: Vec<WorkspacePath>,
}
