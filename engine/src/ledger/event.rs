//! The two event alphabets the ledger records, and how a stored row decodes.
//!
//! PSP-10 system 21 keeps two layers apart, and so do we:
//!
//! * [`LedgerEvent`] — the *mechanism* events: a session started, a snapshot
//!   was taken, a candidate was measured, the gate decided, an accepted
//!   state's content was stored, something was promoted or refused. These are the only events the accepted fold reads.
//! * [`SearchEvent`] — the *runtime search* events: forests opening, branches
//!   forking, measuring, being abandoned or selected, no-goods, usage. Each is
//!   written exactly once, inside a [`SearchEnvelopeV1`] in a row of kind
//!   `search`, and never mirrored into a similar-looking mechanism event.
//!
//! A search row decodes strictly by its `schema_version` (gate AD): none means
//! the legacy bare body, `1` means the envelope and nothing else, anything else
//! is kept as raw forensic data ([`DecodedRow::UnknownVersion`]) that the
//! authoritative folds refuse.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::search::{NoGood, NoGoodComponents, Support};
use crate::sensor::SensorFingerprint;
use crate::workspace_path::WorkspacePath;

/// The `kind` column of every search row.
pub const SEARCH_KIND: &str = "search";

/// The envelope version this build writes, and the only one it folds.
pub const SEARCH_SCHEMA_VERSION: u16 = 1;

// ---------------------------------------------------------------------------
// Mechanism events
// ---------------------------------------------------------------------------

/// A mechanism event: the facts the accepted trajectory is folded from.
///
/// Serialized internally tagged (`{"kind": "candidate_measured", ...}`); the
/// tag is also the row's `kind` column. Decoding is strict: a field this
/// build does not know is an error, so replay never silently drops a fact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LedgerEvent {
    SessionStarted(SessionStarted),
    SnapshotTaken(SnapshotTaken),
    CandidateMeasured(CandidateMeasured),
    GateDecisionRecorded(GateDecisionRecorded),
    AcceptedStateStored(AcceptedStateStored),
    Promoted(Promoted),
    Refused(Refused),
    PromotionRecovered(PromotionRecovered),
    BundlesAttached(BundlesAttached),
}

/// A session opened on a workspace, with everything that shapes its measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionStarted {
    pub session_id: String,
    pub workspace: String,
    pub trellis_version: String,
    /// The effective configuration, as resolved at start.
    pub config: serde_json::Value,
    pub sensors: Vec<SensorFingerprint>,
    pub required_stages: Vec<String>,
}

/// The user's view was snapshotted to `root`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotTaken {
    pub root: Digest,
    pub files: u64,
    pub bytes: u64,
    /// Paths whose content came from unsaved editor buffers.
    pub overlay: Vec<String>,
}

/// A repair resolved its prompt-bundle refs, once, at its start: what it
/// runs with for its whole life (component-level provenance), and what
/// replay and `trellis bundles prune` read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundlesAttached {
    pub repair_id: String,
    /// The node and generation its forests run under (`{node}/{generation}/f…`).
    pub node: String,
    pub generation: u32,
    pub components: Vec<BundleComponent>,
}

/// One resolved bundle: the ref as given and what it resolved to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleComponent {
    pub reference: String,
    pub id: String,
    pub version: u32,
    pub checksum: String,
    pub origin: String,
    /// The section ids it replaces.
    pub sections: Vec<String>,
}

/// A candidate state was measured by the required stages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateMeasured {
    pub node: String,
    pub generation: u32,
    /// `{node}/{generation}/c{n}`: unique among the candidates of a generation.
    pub candidate_id: String,
    pub root: Digest,
    pub energy: f64,
    pub hard_pass: bool,
    pub clusters: Vec<ClusterSummary>,
    pub stages: Vec<StageOutcome>,
}

/// The gate's decision on a submitted candidate: the full decision record,
/// so replay never has to recover energies by correlating other events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateDecisionRecorded {
    pub node: String,
    pub generation: u32,
    pub candidate_id: String,
    /// Position of this decision in the node's decision sequence D.
    pub decision_index: u32,
    pub verdict: GateVerdict,
    pub observed_energy: f64,
    /// V_best before this decision.
    pub best_before: f64,
    pub root: Digest,
}

/// The content of an accepted state, stored so a resumed session can
/// rebuild it: every file whose content differs from the generation's start
/// state x0, by blob address in `.trellis/objects`. Written once per
/// accepted decision, right after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptedStateStored {
    pub node: String,
    pub generation: u32,
    /// The accepted candidate: `{node}/{generation}/c{n}`.
    pub candidate_id: String,
    pub root: Digest,
    /// In path order.
    pub files: Vec<StoredFile>,
}

/// One file of a stored accepted state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredFile {
    pub path: WorkspacePath,
    /// [`crate::digest::blob_digest`] of the content.
    pub blob: Digest,
}

/// A hard-passing root was written into the user's files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Promoted {
    pub repair_id: String,
    pub root_before: Digest,
    pub root_after: Digest,
    pub files: Vec<WorkspacePath>,
    pub via: PromotionRoute,
}

/// A promotion a crash interrupted was finished or undone on the next start
/// (from its journal, `.trellis/promotion.journal`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromotionRecovered {
    pub repair_id: String,
    pub direction: RecoveryDirection,
    /// Every file the promotion was writing.
    pub files: Vec<String>,
    /// Files left as someone else changed them meanwhile (never overwritten).
    pub kept: Vec<String>,
}

/// Which way an interrupted promotion was recovered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryDirection {
    /// Every file now has the verified new content.
    RolledForward,
    /// Every file has its old content again (except the ones in `kept`).
    RolledBack,
}

/// Something was asked of the engine and refused; nothing of it stays
/// written (a promotion refused after its first rename was undone, and
/// `rolled_back` says what that left).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refused {
    pub repair_id: String,
    pub reason: RefusalReason,
    pub detail: String,
    /// Absent from refusals that wrote nothing (and from older ledgers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<RolledBack>,
}

/// What undoing a promotion refused half way left in the user's files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolledBack {
    /// Files the promotion had replaced (or created), now as they were.
    pub put_back: Vec<String>,
    /// Files the user changed meanwhile, left as the user left them.
    pub kept: Vec<String>,
}

impl fmt::Display for RolledBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.put_back.as_slice() {
            [] => f.write_str("no file had been replaced yet")?,
            put_back => write!(f, "put back as they were: {}", put_back.join(", "))?,
        }
        if !self.kept.is_empty() {
            write!(f, "; kept as you edited them: {}", self.kept.join(", "))?;
        }
        Ok(())
    }
}

/// A cluster as the ledger remembers it: enough to explain, not to recompute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSummary {
    pub id: String,
    pub title: String,
    pub class: String,
    pub sites: u32,
    pub magnitude: f64,
}

/// How one sensor stage ended (`passed`, `failed`, `unavailable`, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageOutcome {
    pub stage: String,
    pub status: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    /// Every required stage passed: the terminal acceptance.
    AcceptedHardPass,
    /// Energy fell by at least ρ below the best accepted so far.
    AcceptedDescent,
    /// Not a descent: counts against the rejection budget B.
    RejectedNonDescending,
}

impl GateVerdict {
    pub fn is_accepted(self) -> bool {
        !matches!(self, GateVerdict::RejectedNonDescending)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GateVerdict::AcceptedHardPass => "accepted_hard_pass",
            GateVerdict::AcceptedDescent => "accepted_descent",
            GateVerdict::RejectedNonDescending => "rejected_non_descending",
        }
    }
}

/// Who carried a promotion into the user's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromotionRoute {
    /// `trellis repair --commit` wrote the files.
    Cli,
    /// The editor applied a versioned `WorkspaceEdit`.
    Editor,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RefusalReason {
    /// The user's view no longer has the root the search started from.
    StaleRoot {
        expected: Digest,
        found: Digest,
    },
    /// The decision bound N_gate was reached; the next submission is refused.
    DecisionBound {
        bound: u32,
    },
    NoEligibleCandidate,
    /// Asked to promote a candidate that does not hard-pass.
    NotHardPass,
    /// A proposed edit reaches outside the branch root.
    PathEscape {
        path: String,
    },
    /// Something outside every slot changed while the repair ran its
    /// slots' code (`outside.rs`); what could be was put back.
    OutsideChanged {
        changed: Vec<String>,
        restored: Vec<String>,
    },
}

impl LedgerEvent {
    /// The row `kind` this event is stored under (its serde tag).
    pub fn kind(&self) -> &'static str {
        match self {
            LedgerEvent::SessionStarted(_) => "session_started",
            LedgerEvent::SnapshotTaken(_) => "snapshot_taken",
            LedgerEvent::CandidateMeasured(_) => "candidate_measured",
            LedgerEvent::GateDecisionRecorded(_) => "gate_decision_recorded",
            LedgerEvent::AcceptedStateStored(_) => "accepted_state_stored",
            LedgerEvent::Promoted(_) => "promoted",
            LedgerEvent::Refused(_) => "refused",
            LedgerEvent::PromotionRecovered(_) => "promotion_recovered",
            LedgerEvent::BundlesAttached(_) => "bundles_attached",
        }
    }

    /// Whether losing this event to a power cut would lose a decision the
    /// user or the bound depends on; such rows are committed with a full sync.
    pub fn is_decision(&self) -> bool {
        matches!(
            self,
            LedgerEvent::GateDecisionRecorded(_)
                | LedgerEvent::Promoted(_)
                | LedgerEvent::Refused(_)
                | LedgerEvent::PromotionRecovered(_)
        )
    }
}

impl fmt::Display for LedgerEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LedgerEvent::SessionStarted(e) => write!(
                f,
                "session {} started on {} (trellis {}, required: {})",
                e.session_id,
                e.workspace,
                e.trellis_version,
                e.required_stages.join(", ")
            ),
            LedgerEvent::SnapshotTaken(e) => write!(
                f,
                "snapshot {}: {} files, {} bytes, {} overlaid",
                e.root.short(12),
                e.files,
                e.bytes,
                e.overlay.len()
            ),
            LedgerEvent::CandidateMeasured(e) => write!(
                f,
                "measured {} at {}: energy {}, {}, {} clusters",
                e.candidate_id,
                e.root.short(12),
                e.energy,
                if e.hard_pass {
                    "hard pass"
                } else {
                    "residuals"
                },
                e.clusters.len()
            ),
            LedgerEvent::GateDecisionRecorded(e) => write!(
                f,
                "decision #{} on {}: {} (energy {} vs best {})",
                e.decision_index,
                e.candidate_id,
                e.verdict.as_str(),
                e.observed_energy,
                e.best_before
            ),
            LedgerEvent::AcceptedStateStored(e) => write!(
                f,
                "stored accepted state {} at {}: {} changed file(s)",
                e.candidate_id,
                e.root.short(12),
                e.files.len()
            ),
            LedgerEvent::Promoted(e) => write!(
                f,
                "promoted {} via {}: {} -> {} ({} files)",
                e.repair_id,
                match e.via {
                    PromotionRoute::Cli => "cli",
                    PromotionRoute::Editor => "editor",
                },
                e.root_before.short(12),
                e.root_after.short(12),
                e.files.len()
            ),
            LedgerEvent::Refused(e) => {
                write!(f, "refused {}: {}", e.repair_id, e.reason)?;
                if !e.detail.is_empty() {
                    write!(f, " ({})", e.detail)?;
                }
                if let Some(rolled_back) = &e.rolled_back {
                    write!(f, "; {rolled_back}")?;
                }
                Ok(())
            }
            LedgerEvent::PromotionRecovered(e) => {
                write!(
                    f,
                    "recovered interrupted promotion {}: {} ({} files)",
                    e.repair_id,
                    match e.direction {
                        RecoveryDirection::RolledForward => "rolled forward",
                        RecoveryDirection::RolledBack => "rolled back",
                    },
                    e.files.len()
                )?;
                if !e.kept.is_empty() {
                    write!(f, ", kept as found: {}", e.kept.join(", "))?;
                }
                Ok(())
            }
            LedgerEvent::BundlesAttached(e) => write!(
                f,
                "repair {} attached bundles {}",
                e.repair_id,
                e.components
                    .iter()
                    .map(|c| format!("{}@{} ({})", c.id, c.version, c.checksum))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusalReason::StaleRoot { expected, found } => write!(
                f,
                "stale root: expected {}, found {}",
                expected.short(12),
                found.short(12)
            ),
            RefusalReason::DecisionBound { bound } => write!(f, "decision bound {bound} reached"),
            RefusalReason::NoEligibleCandidate => f.write_str("no eligible candidate"),
            RefusalReason::NotHardPass => f.write_str("candidate does not hard-pass"),
            RefusalReason::PathEscape { path } => write!(f, "path escapes the branch: {path}"),
            RefusalReason::OutsideChanged { changed, .. } => write!(
                f,
                "changed outside every branch while the repair ran: {}",
                changed.join(", ")
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// Runtime search events
// ---------------------------------------------------------------------------

/// Named non-negative counters: search limits and usage.
///
/// Open-ended on purpose: the search plane owns which counters exist
/// (actions, branches, turns, copied bytes, ...); the ledger only needs them
/// to round-trip exactly and deterministically.
pub type SearchCounters = BTreeMap<String, u64>;

/// What a measurement contributes to selection besides its energy and
/// hard pass: whether it was eligible at all, the targeted improvement, the
/// recorded cost (action units, never wall time) and its sensor profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionKeys {
    pub eligible: bool,
    pub targeted_improvement: f64,
    pub cost: u64,
    pub profile: Digest,
}

/// A runtime search fact (the PSP-10 system 21 list).
///
/// Every event names its `forest_id` and `branch_id`; forest-level events
/// carry an empty `branch_id`. Measurements also carry `candidate_id`.
/// Decoding is strict: an unknown field is an error, never ignored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SearchEvent {
    SearchOpened {
        forest_id: String,
        branch_id: String,
        node: String,
        generation: u32,
        accepted_root: Digest,
        limits: SearchCounters,
        /// The interrupted forest this one resumes, if any.
        resumed_from: Option<String>,
    },
    BranchForked {
        forest_id: String,
        branch_id: String,
        /// The branch whose witnessed state seeded this one, if any.
        parent: Option<String>,
        /// The root the branch was copied from.
        seed: Digest,
        strategy: String,
        route: String,
        /// Digest of the compiled prompt program, when a model drives the branch.
        prompt_program: Option<Digest>,
    },
    BranchStrategySelected {
        forest_id: String,
        branch_id: String,
        strategy: String,
        reason: String,
    },
    BranchObservation {
        forest_id: String,
        branch_id: String,
        observation: String,
    },
    BranchCandidateMeasured {
        forest_id: String,
        branch_id: String,
        candidate_id: String,
        root: Digest,
        energy: f64,
        hard_pass: bool,
        /// The rest of what selection compares (Proposition 5), so replay
        /// re-derives it; absent in ledgers written before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        keys: Option<SelectionKeys>,
        /// Failing tests that passed when re-run (`binary::name`): flaky,
        /// so this measurement supports no no-good.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        flaky: Vec<String>,
    },
    PartialCheckpointed {
        forest_id: String,
        branch_id: String,
        candidate_id: String,
        root: Digest,
        /// Why the state was ineligible ("no descent", "measured on more of
        /// the workspace"); absent in ledgers written before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    FrontierEpochStarted {
        forest_id: String,
        branch_id: String,
        epoch: u32,
    },
    FrontierEntryServed {
        forest_id: String,
        branch_id: String,
        epoch: u32,
        rank: u32,
    },
    BranchIneligible {
        forest_id: String,
        branch_id: String,
        reason: String,
    },
    BranchNotSelected {
        forest_id: String,
        branch_id: String,
        reason: String,
    },
    BranchAbandoned {
        forest_id: String,
        branch_id: String,
        reason: String,
    },
    BranchSelected {
        forest_id: String,
        branch_id: String,
        candidate_id: String,
        /// The sensor profile selection compared under; absent in ledgers
        /// written before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<Digest>,
    },
    BranchCommitted {
        forest_id: String,
        branch_id: String,
        candidate_id: String,
    },
    NoGoodRecorded {
        forest_id: String,
        branch_id: String,
        /// K_ng: the exact lookup key.
        key: Digest,
        /// Which deterministic evidence supports it (`compiler_code`, `failed_test`, ...).
        support_kind: String,
        evidence_digest: Digest,
        /// The nine components K_ng is computed from, so a resumed session
        /// matches by component equality and replay can recompute the key.
        /// Absent only in rows written before trellis recorded them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        components: Option<Box<NoGoodComponents>>,
        /// The supporting evidence itself; `evidence_digest` is its digest.
        /// Present exactly when `components` is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        support: Option<Support>,
    },
    SearchUsageSnapshot {
        forest_id: String,
        branch_id: String,
        usage: SearchCounters,
    },
    SearchClosed {
        forest_id: String,
        branch_id: String,
        reason: String,
    },
    /// System 27 step 2: the platform and domain programs of one model call,
    /// compiled with their digests, and everything else its request is
    /// built from (Gate Z: replay rebuilds the exact body from this row and
    /// the earlier turns' conversation deltas, without a model).
    ModelProgramsCompiled {
        forest_id: String,
        branch_id: String,
        turn: u32,
        /// The invocation digest pairing the two programs; never empty.
        invocation_digest: String,
        /// The actor's `PreparedRequest`, as recorded.
        request: serde_json::Value,
    },
    /// System 27 step 4: one raw attempt at one endpoint, recorded before
    /// its response is parsed: the exact request bytes (headers, and so the
    /// API key, excluded), the status and the body as received.
    ModelTurnObserved {
        forest_id: String,
        branch_id: String,
        turn: u32,
        invocation_digest: String,
        attempt: serde_json::Value,
    },
    /// System 27 step 7: what one turn did (reply, tool calls and results,
    /// usage) and the messages it added to the conversation.
    ModelTurnRecorded {
        forest_id: String,
        branch_id: String,
        turn: u32,
        record: serde_json::Value,
    },
    /// Every endpoint of the chain is retired for this repair: an
    /// environmental outcome, never a no-good.
    ModelRouteUnavailable {
        forest_id: String,
        branch_id: String,
        reason: String,
    },
    /// A running branch stopped by a containment certificate: a copy into
    /// its slot went over its reservation. Its workspace is removed.
    BranchContained {
        forest_id: String,
        branch_id: String,
        certificate_id: String,
        reason: String,
    },
    /// What a model branch working on `cluster_id` tried (its `finish`
    /// summary, or why it stopped) and how its state measured: the previous
    /// hypothesis a later model attempt on the cluster is shown.
    ModelHypothesisMeasured {
        forest_id: String,
        branch_id: String,
        cluster_id: String,
        hypothesis: String,
        measured: String,
    },
    /// System 21 (Definition 6): the resident plan of one attempt's
    /// request: the allowance, every page in order with its residency and
    /// digest. The same plan rides in the request's `model_programs_compiled`
    /// row, from which replay rebuilds the request without selecting again.
    ContextPagesSelected {
        forest_id: String,
        branch_id: String,
        turn: u32,
        endpoint: String,
        plan_digest: String,
        /// The `context::ResidentPlan`, as recorded.
        plan: serde_json::Value,
    },
    /// The instructions and mandatory pages exceed β_in: nothing was sent.
    ContextInfeasible {
        forest_id: String,
        branch_id: String,
        turn: u32,
        endpoint: String,
        /// The `context::Infeasible` figures.
        figures: serde_json::Value,
    },
    /// `context_recall` named an earlier page: a candidate for the next request.
    ContextPageRecalled {
        forest_id: String,
        branch_id: String,
        turn: u32,
        page_id: String,
        key: serde_json::Value,
    },
    /// `context_recall` named no page.
    ContextMiss {
        forest_id: String,
        branch_id: String,
        turn: u32,
        key: serde_json::Value,
        reason: String,
    },
    /// The endpoint counted an answered request (`usage.prompt_tokens`)
    /// larger than its plan charged: the route's later plans are made at
    /// `calibration` thousandths (`context::calibration`). Replay derives
    /// it again from the plans and the turns' usage.
    ContextUnderestimated {
        forest_id: String,
        branch_id: String,
        turn: u32,
        endpoint: String,
        planned_tokens: u64,
        reported_tokens: u64,
        calibration: u32,
    },
    /// System 21 (Definition 6's O_t): the candidate pages of one turn's
    /// request, in conversation order: those of the last
    /// `working_set_turns` turns, those the residual cluster names, those
    /// recalled. Every attempt's `context_pages_selected` plan selects
    /// within it; replay reads the plans, never computes the set again.
    ContextWorkingSet {
        forest_id: String,
        branch_id: String,
        turn: u32,
        /// θ.
        working_set_turns: u32,
        pages: Vec<String>,
        /// `context::WorkingSet::digest`.
        digest: String,
    },
}

impl SearchEvent {
    /// The `no_good_recorded` row for `nogood`: its key, and the
    /// components and support that let a later session match it exactly.
    pub fn no_good_recorded(forest_id: &str, branch_id: &str, nogood: &NoGood) -> SearchEvent {
        SearchEvent::NoGoodRecorded {
            forest_id: forest_id.to_owned(),
            branch_id: branch_id.to_owned(),
            key: nogood.key.digest(),
            support_kind: nogood.support.kind().to_owned(),
            evidence_digest: nogood.evidence_digest,
            components: Some(Box::new(nogood.components.clone())),
            support: Some(nogood.support.clone()),
        }
    }

    pub fn forest_id(&self) -> &str {
        self.ids().0
    }

    /// Empty for forest-level events.
    pub fn branch_id(&self) -> &str {
        self.ids().1
    }

    fn ids(&self) -> (&str, &str) {
        use SearchEvent::*;
        match self {
            SearchOpened {
                forest_id,
                branch_id,
                ..
            }
            | BranchForked {
                forest_id,
                branch_id,
                ..
            }
            | BranchStrategySelected {
                forest_id,
                branch_id,
                ..
            }
            | BranchObservation {
                forest_id,
                branch_id,
                ..
            }
            | BranchCandidateMeasured {
                forest_id,
                branch_id,
                ..
            }
            | PartialCheckpointed {
                forest_id,
                branch_id,
                ..
            }
            | FrontierEpochStarted {
                forest_id,
                branch_id,
                ..
            }
            | FrontierEntryServed {
                forest_id,
                branch_id,
                ..
            }
            | BranchIneligible {
                forest_id,
                branch_id,
                ..
            }
            | BranchNotSelected {
                forest_id,
                branch_id,
                ..
            }
            | BranchAbandoned {
                forest_id,
                branch_id,
                ..
            }
            | BranchSelected {
                forest_id,
                branch_id,
                ..
            }
            | BranchCommitted {
                forest_id,
                branch_id,
                ..
            }
            | NoGoodRecorded {
                forest_id,
                branch_id,
                ..
            }
            | SearchUsageSnapshot {
                forest_id,
                branch_id,
                ..
            }
            | SearchClosed {
                forest_id,
                branch_id,
                ..
            }
            | ModelProgramsCompiled {
                forest_id,
                branch_id,
                ..
            }
            | ModelTurnObserved {
                forest_id,
                branch_id,
                ..
            }
            | ModelTurnRecorded {
                forest_id,
                branch_id,
                ..
            }
            | ModelRouteUnavailable {
                forest_id,
                branch_id,
                ..
            }
            | BranchContained {
                forest_id,
                branch_id,
                ..
            }
            | ContextPagesSelected {
                forest_id,
                branch_id,
                ..
            }
            | ModelHypothesisMeasured {
                forest_id,
                branch_id,
                ..
            }
            | ContextInfeasible {
                forest_id,
                branch_id,
                ..
            }
            | ContextPageRecalled {
                forest_id,
                branch_id,
                ..
            }
            | ContextMiss {
                forest_id,
                branch_id,
                ..
            }
            | ContextUnderestimated {
                forest_id,
                branch_id,
                ..
            }
            | ContextWorkingSet {
                forest_id,
                branch_id,
                ..
            } => (forest_id, branch_id),
        }
    }

    /// The event's name in the system 21 list (its serde tag).
    pub fn name(&self) -> &'static str {
        use SearchEvent::*;
        match self {
            SearchOpened { .. } => "search_opened",
            BranchForked { .. } => "branch_forked",
            BranchStrategySelected { .. } => "branch_strategy_selected",
            BranchObservation { .. } => "branch_observation",
            BranchCandidateMeasured { .. } => "branch_candidate_measured",
            PartialCheckpointed { .. } => "partial_checkpointed",
            FrontierEpochStarted { .. } => "frontier_epoch_started",
            FrontierEntryServed { .. } => "frontier_entry_served",
            BranchIneligible { .. } => "branch_ineligible",
            BranchNotSelected { .. } => "branch_not_selected",
            BranchAbandoned { .. } => "branch_abandoned",
            BranchSelected { .. } => "branch_selected",
            BranchCommitted { .. } => "branch_committed",
            NoGoodRecorded { .. } => "no_good_recorded",
            SearchUsageSnapshot { .. } => "search_usage_snapshot",
            SearchClosed { .. } => "search_closed",
            ModelProgramsCompiled { .. } => "model_programs_compiled",
            ModelTurnObserved { .. } => "model_turn_observed",
            ModelTurnRecorded { .. } => "model_turn_recorded",
            ModelRouteUnavailable { .. } => "model_route_unavailable",
            BranchContained { .. } => "branch_contained",
            ModelHypothesisMeasured { .. } => "model_hypothesis_measured",
            ContextPagesSelected { .. } => "context_pages_selected",
            ContextInfeasible { .. } => "context_infeasible",
            ContextPageRecalled { .. } => "context_page_recalled",
            ContextMiss { .. } => "context_miss",
            ContextUnderestimated { .. } => "context_underestimated",
            ContextWorkingSet { .. } => "context_working_set",
        }
    }
}

impl fmt::Display for SearchEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SearchEvent::*;
        write!(f, "{} {}", self.name(), self.forest_id())?;
        if !self.branch_id().is_empty() {
            write!(f, "/{}", self.branch_id())?;
        }
        match self {
            SearchOpened {
                node,
                generation,
                accepted_root,
                resumed_from,
                ..
            } => {
                write!(
                    f,
                    ": {node} gen {generation} at {}",
                    accepted_root.short(12)
                )?;
                if let Some(previous) = resumed_from {
                    write!(f, ", resuming {previous}")?;
                }
                Ok(())
            }
            BranchForked {
                strategy,
                route,
                seed,
                ..
            } => {
                write!(f, ": {strategy} via {route} from {}", seed.short(12))
            }
            BranchStrategySelected {
                strategy, reason, ..
            } => write!(f, ": {strategy} ({reason})"),
            BranchObservation { observation, .. } => write!(f, ": {observation}"),
            BranchCandidateMeasured {
                candidate_id,
                energy,
                hard_pass,
                flaky,
                ..
            } => {
                write!(
                    f,
                    ": {candidate_id} energy {energy}{}",
                    if *hard_pass { ", hard pass" } else { "" }
                )?;
                if !flaky.is_empty() {
                    write!(f, ", flaky: {}", flaky.join(", "))?;
                }
                Ok(())
            }
            PartialCheckpointed {
                candidate_id,
                root,
                reason,
                ..
            } => {
                write!(f, ": {candidate_id} at {}", root.short(12))?;
                match reason {
                    Some(reason) => write!(f, ": {reason}"),
                    None => Ok(()),
                }
            }
            FrontierEpochStarted { epoch, .. } => write!(f, ": epoch {epoch}"),
            FrontierEntryServed { epoch, rank, .. } => write!(f, ": epoch {epoch} rank {rank}"),
            BranchIneligible { reason, .. }
            | BranchNotSelected { reason, .. }
            | BranchAbandoned { reason, .. }
            | SearchClosed { reason, .. }
            | ModelRouteUnavailable { reason, .. } => write!(f, ": {reason}"),
            BranchContained {
                certificate_id,
                reason,
                ..
            } => write!(f, ": {certificate_id}: {reason}"),
            ModelProgramsCompiled {
                turn,
                invocation_digest,
                ..
            } => write!(f, ": turn {turn} invocation {invocation_digest}"),
            ModelTurnObserved { turn, attempt, .. } => write!(
                f,
                ": turn {turn} at {} (status {})",
                attempt["endpoint_name"].as_str().unwrap_or("?"),
                attempt["status"]
            ),
            ModelTurnRecorded { turn, .. } => write!(f, ": turn {turn}"),
            ModelHypothesisMeasured {
                cluster_id,
                hypothesis,
                measured,
                ..
            } => write!(f, ": on {cluster_id}: {hypothesis} ({measured})"),
            ContextPagesSelected {
                turn, plan_digest, ..
            } => write!(f, ": turn {turn} plan {plan_digest}"),
            ContextInfeasible { turn, endpoint, .. } => {
                write!(f, ": turn {turn} at {endpoint}, nothing sent")
            }
            ContextPageRecalled { turn, page_id, .. } => write!(f, ": turn {turn} page {page_id}"),
            ContextMiss { turn, reason, .. } => write!(f, ": turn {turn}: {reason}"),
            ContextUnderestimated {
                turn,
                endpoint,
                planned_tokens,
                reported_tokens,
                calibration,
                ..
            } => write!(
                f,
                ": turn {turn} at {endpoint} counted {reported_tokens} tokens, {planned_tokens} \
                 planned; calibrated to {calibration}‰"
            ),
            ContextWorkingSet {
                turn,
                working_set_turns,
                pages,
                digest,
                ..
            } => write!(
                f,
                ": turn {turn}, {} candidate pages (last {working_set_turns} turns) {digest}",
                pages.len()
            ),
            BranchSelected { candidate_id, .. } | BranchCommitted { candidate_id, .. } => {
                write!(f, ": {candidate_id}")
            }
            NoGoodRecorded {
                key,
                support_kind,
                components,
                ..
            } => {
                write!(f, ": {} ({support_kind})", key.short(12))?;
                if components.is_none() {
                    f.write_str(" [key only]")?;
                }
                Ok(())
            }
            SearchUsageSnapshot { usage, .. } => {
                f.write_str(":")?;
                for (name, value) in usage {
                    write!(f, " {name}={value}")?;
                }
                Ok(())
            }
        }
    }
}

/// The one way a search event is written: `{"schema_version": 1, "body": {...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchEnvelopeV1 {
    /// Exactly [`SEARCH_SCHEMA_VERSION`].
    pub schema_version: u16,
    pub body: SearchEvent,
}

impl SearchEnvelopeV1 {
    pub fn new(body: SearchEvent) -> Self {
        SearchEnvelopeV1 {
            schema_version: SEARCH_SCHEMA_VERSION,
            body,
        }
    }
}

// ---------------------------------------------------------------------------
// Decoding stored rows
// ---------------------------------------------------------------------------

/// How a search row was encoded on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchEncoding {
    /// A bare body without `schema_version`, read by the strict legacy decoder.
    Legacy,
    /// A [`SearchEnvelopeV1`].
    EnvelopeV1,
}

/// A stored payload, decoded by the rules of its kind.
#[derive(Clone, Debug, PartialEq)]
pub enum DecodedRow {
    Ledger(LedgerEvent),
    Search {
        event: SearchEvent,
        encoding: SearchEncoding,
    },
    /// A search row from a newer envelope version: shown as raw forensic
    /// data, refused by every authoritative fold.
    UnknownVersion {
        version: u64,
        raw: serde_json::Value,
    },
}

impl DecodedRow {
    /// Decodes `payload` stored under `kind`; the error says what is wrong.
    pub fn decode(kind: &str, payload: &str) -> Result<DecodedRow, String> {
        if kind == SEARCH_KIND {
            return decode_search(payload);
        }
        let event: LedgerEvent =
            serde_json::from_str(payload).map_err(|e| format!("invalid {kind} payload: {e}"))?;
        if event.kind() != kind {
            return Err(format!(
                "stored as `{kind}` but the payload is a `{}` event",
                event.kind()
            ));
        }
        Ok(DecodedRow::Ledger(event))
    }
}

fn decode_search(payload: &str) -> Result<DecodedRow, String> {
    let raw: serde_json::Value =
        serde_json::from_str(payload).map_err(|e| format!("invalid search payload: {e}"))?;
    let Some(version) = raw.get("schema_version") else {
        let event = serde_json::from_value(raw)
            .map_err(|e| format!("legacy search payload (no schema_version) rejected: {e}"))?;
        return Ok(DecodedRow::Search {
            event,
            encoding: SearchEncoding::Legacy,
        });
    };
    let version = version
        .as_u64()
        .ok_or_else(|| format!("schema_version {version} is not a non-negative integer"))?;
    if version != u64::from(SEARCH_SCHEMA_VERSION) {
        return Ok(DecodedRow::UnknownVersion { version, raw });
    }
    // A version-1 row is the envelope or it is broken: never a legacy body.
    let envelope: SearchEnvelopeV1 = serde_json::from_value(raw)
        .map_err(|e| format!("schema_version 1 row is not a valid envelope: {e}"))?;
    Ok(DecodedRow::Search {
        event: envelope.body,
        encoding: SearchEncoding::EnvelopeV1,
    })
}

impl fmt::Display for DecodedRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodedRow::Ledger(event) => event.fmt(f),
            DecodedRow::Search { event, encoding } => {
                event.fmt(f)?;
                if *encoding == SearchEncoding::Legacy {
                    f.write_str(" [legacy]")?;
                }
                Ok(())
            }
            DecodedRow::UnknownVersion { version, raw } => {
                write!(f, "search event of unknown schema_version {version}: {raw}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::test_support::*;

    fn every_ledger_event() -> Vec<LedgerEvent> {
        vec![
            LedgerEvent::SessionStarted(SessionStarted {
                session_id: "s1".into(),
                workspace: "/tmp/ws".into(),
                trellis_version: "0.1.0".into(),
                config: serde_json::json!({"exploration": {"max_branches": 3}}),
                sensors: vec![SensorFingerprint {
                    tool: "cargo-check".into(),
                    version: "cargo 1.95.0".into(),
                    config: "--all-targets".into(),
                }],
                required_stages: vec!["build".into(), "test".into()],
            }),
            LedgerEvent::SnapshotTaken(SnapshotTaken {
                root: root("snap"),
                files: 12,
                bytes: 3400,
                overlay: vec!["src/main.rs".into()],
            }),
            measured("n", 0, "n/0/c1", 2.5),
            decided("n", 0, "n/0/c1", 0, GateVerdict::AcceptedDescent, 2.5, 4.0),
            promoted("r1"),
            stored("n", 0, "n/0/c1"),
            refused("r2"),
        ]
    }

    #[test]
    fn ledger_event_kind_is_its_serde_tag() {
        for event in every_ledger_event() {
            let json = serde_json::to_value(&event).unwrap();
            assert_eq!(json["kind"], event.kind(), "{json}");
            let back: LedgerEvent = serde_json::from_value(json).unwrap();
            assert_eq!(back, event);
        }
    }

    #[test]
    fn ordinary_events_with_unknown_fields_are_rejected() {
        let mut json = serde_json::to_value(promoted("r1")).unwrap();
        json["signed_off_by"] = "someone".into();
        let error = DecodedRow::decode("promoted", &json.to_string()).unwrap_err();
        assert!(error.contains("signed_off_by"), "{error}");
    }

    #[test]
    fn ordinary_row_whose_kind_column_disagrees_with_payload_is_rejected() {
        let payload = serde_json::to_string(&promoted("r1")).unwrap();
        let error = DecodedRow::decode("refused", &payload).unwrap_err();
        assert!(error.contains("stored as `refused`"), "{error}");
        assert!(DecodedRow::decode("promoted", &payload).is_ok());
    }

    #[test]
    fn search_events_round_trip_through_the_v1_envelope() {
        let event = opened("f1", "n", Some("f0"));
        let payload = serde_json::to_string(&SearchEnvelopeV1::new(event.clone())).unwrap();
        assert!(payload.starts_with(r#"{"schema_version":1,"body":{"kind":"search_opened""#));
        assert_eq!(
            DecodedRow::decode(SEARCH_KIND, &payload).unwrap(),
            DecodedRow::Search {
                event,
                encoding: SearchEncoding::EnvelopeV1
            }
        );
    }

    #[test]
    fn legacy_search_decoder_is_strict() {
        let body = serde_json::to_value(abandoned("f1", "b2")).unwrap();
        let decoded = DecodedRow::decode(SEARCH_KIND, &body.to_string()).unwrap();
        assert_eq!(
            decoded,
            DecodedRow::Search {
                event: abandoned("f1", "b2"),
                encoding: SearchEncoding::Legacy
            }
        );

        let mut extra = body.clone();
        extra["mood"] = "optimistic".into();
        let error = DecodedRow::decode(SEARCH_KIND, &extra.to_string()).unwrap_err();
        assert!(
            error.contains("legacy") && error.contains("mood"),
            "{error}"
        );
    }

    #[test]
    fn search_event_ids_are_always_present() {
        let event = no_good("f9", "k");
        assert_eq!((event.forest_id(), event.branch_id()), ("f9", "b1"));
        assert_eq!(usage("f9", 1).branch_id(), "");
        assert_eq!(event.name(), "no_good_recorded");
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["kind"], event.name());
    }

    #[test]
    fn display_is_one_line_per_event() {
        let mut lines: Vec<String> = every_ledger_event().iter().map(|e| e.to_string()).collect();
        lines.push(opened("f1", "n", Some("f0")).to_string());
        lines.push(usage("f1", 4).to_string());
        for line in &lines {
            assert!(!line.contains('\n') && !line.is_empty(), "{line:?}");
        }
        assert!(lines[3].contains("accepted_descent"), "{}", lines[3]);
        assert!(lines[5].contains("1 changed file"), "{}", lines[5]);
        assert!(lines[6].contains("stale root"), "{}", lines[6]);
        assert!(lines[7].contains("resuming f0"), "{}", lines[7]);
        assert_eq!(lines[8], "search_usage_snapshot f1: actions=4");
    }
}
