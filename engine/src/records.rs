//! Builds ledger events from engine values, so the runtime speaks in its
//! own terms and the ledger's alphabet stays in one place.

use std::path::Path;

use crate::config::Config;
use crate::digest::{CanonicalHasher, Digest};
use crate::gate::{GateDecision, Verdict};
use crate::ledger::{
    AcceptedStateStored, CandidateMeasured, ClusterSummary, GateDecisionRecorded, GateVerdict,
    LedgerEvent, Promoted, PromotionRoute, RefusalReason, Refused, RolledBack, SearchEvent,
    SelectionKeys, SessionStarted, SnapshotTaken, StageOutcome, StoredFile,
};
use crate::measure::Measurement;
use crate::prompt_policy::{PinnedBundleSection, PromptPolicy};
use crate::report::{Promotion, RepairStatus};
use crate::search::{
    CandidateObservation, PartialCheckpointRef, SearchBranch, SearchForest, Selection,
};
use crate::sensor::{Sensor, StageStatus};
use crate::snapshot::{Overlay, Snapshot};
use crate::workspace_path::WorkspacePath;

/// A repair's id: `r` and 12 hex digits of its start root and start time.
pub fn repair_id(start_root: &Digest) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let digest = CanonicalHasher::new("trellis.repair-id.v1")
        .digest(start_root)
        .bytes(&now.to_le_bytes())
        .u64(u64::from(std::process::id()))
        .finish();
    format!("r{}", digest.short(12))
}

/// The session's start: configuration, the prompt policy and pinned bundles
/// (so an experimental or core override is never unledgered), and the sensors.
pub fn session_started(
    root: &Path,
    config: &Config,
    prompts: (PromptPolicy, &[PinnedBundleSection]),
    sensors: &[Box<dyn Sensor>],
) -> LedgerEvent {
    let session = CanonicalHasher::new("trellis.session-id.v1")
        .str(&root.display().to_string())
        .bytes(&std::process::id().to_le_bytes())
        .u64(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or_default(),
        )
        .finish();
    LedgerEvent::SessionStarted(SessionStarted {
        session_id: format!("s{}", session.short(12)),
        workspace: root.display().to_string(),
        trellis_version: env!("CARGO_PKG_VERSION").to_owned(),
        config: serde_json::json!({
            "workspace": config,
            "prompt_policy": prompts.0,
            "prompt_bundles": prompts.1,
        }),
        sensors: sensors.iter().map(|s| s.fingerprint().clone()).collect(),
        required_stages: config.stages.required.clone(),
    })
}

pub fn snapshot_taken(snapshot: &Snapshot, overlay: &Overlay) -> LedgerEvent {
    LedgerEvent::SnapshotTaken(SnapshotTaken {
        root: snapshot.root,
        files: snapshot.entries.len() as u64,
        bytes: snapshot.entries.values().map(|e| e.size).sum(),
        overlay: overlay.buffers.keys().cloned().collect(),
    })
}

fn status_name(status: &StageStatus) -> &'static str {
    match status {
        StageStatus::Passed => "passed",
        StageStatus::Failed => "failed",
        StageStatus::Unavailable { .. } => "unavailable",
    }
}

/// The node of a repair that starts at `start_root`: `n` and 12 hex digits
/// of the root. Stable across a crash, so a resumed repair finds the
/// interrupted forest it owns; attempts on one root differ by generation.
pub fn node_id(start_root: &Digest) -> String {
    format!("n{}", start_root.short(12))
}

pub fn candidate_measured(
    node: &str,
    generation: u32,
    candidate_id: &str,
    m: &Measurement,
) -> LedgerEvent {
    LedgerEvent::CandidateMeasured(CandidateMeasured {
        node: node.to_owned(),
        generation,
        candidate_id: candidate_id.to_owned(),
        root: m.root,
        energy: m.energy(),
        hard_pass: m.hard_pass(),
        clusters: m
            .assessment
            .clusters
            .iter()
            .map(|c| ClusterSummary {
                id: c.id.clone(),
                title: c.title.clone(),
                class: c.class.as_str().to_owned(),
                sites: c.sites.len() as u32,
                magnitude: c.magnitude,
            })
            .collect(),
        stages: m
            .reports
            .iter()
            .map(|r| StageOutcome {
                stage: r.stage.clone(),
                status: status_name(&r.status).to_owned(),
            })
            .collect(),
    })
}

pub fn gate_decision(node: &str, generation: u32, d: &GateDecision) -> LedgerEvent {
    LedgerEvent::GateDecisionRecorded(GateDecisionRecorded {
        node: node.to_owned(),
        generation,
        candidate_id: d.candidate_id.clone(),
        decision_index: d.index,
        verdict: match d.verdict {
            Verdict::AcceptedHardPass => GateVerdict::AcceptedHardPass,
            Verdict::AcceptedDescent => GateVerdict::AcceptedDescent,
            Verdict::RejectedNonDescending => GateVerdict::RejectedNonDescending,
        },
        observed_energy: d.observed_energy,
        best_before: d.best_before,
        root: d.root,
    })
}

/// The gate's decision as the ledger recorded it: the inverse of
/// [`gate_decision`], for replaying a recorded trajectory.
pub fn recorded_decision(d: &GateDecisionRecorded) -> GateDecision {
    GateDecision {
        candidate_id: d.candidate_id.clone(),
        index: d.decision_index,
        verdict: match d.verdict {
            GateVerdict::AcceptedHardPass => Verdict::AcceptedHardPass,
            GateVerdict::AcceptedDescent => Verdict::AcceptedDescent,
            GateVerdict::RejectedNonDescending => Verdict::RejectedNonDescending,
        },
        root: d.root,
        observed_energy: d.observed_energy,
        best_before: d.best_before,
    }
}

/// The content of accepted candidate `candidate_id` at `root`: `files` are
/// (path, blob) of every file that differs from the generation's x0.
pub fn accepted_state_stored(
    node: &str,
    generation: u32,
    candidate_id: &str,
    root: Digest,
    files: Vec<(WorkspacePath, Digest)>,
) -> LedgerEvent {
    LedgerEvent::AcceptedStateStored(AcceptedStateStored {
        node: node.to_owned(),
        generation,
        candidate_id: candidate_id.to_owned(),
        root,
        files: files
            .into_iter()
            .map(|(path, blob)| StoredFile { path, blob })
            .collect(),
    })
}

pub fn promoted(repair_id: &str, p: &Promotion, via: PromotionRoute) -> LedgerEvent {
    LedgerEvent::Promoted(Promoted {
        repair_id: repair_id.to_owned(),
        root_before: p.root_before,
        root_after: p.root_after,
        files: p.files.clone(),
        via,
    })
}

fn refused(repair_id: &str, reason: RefusalReason, detail: String) -> LedgerEvent {
    LedgerEvent::Refused(Refused {
        repair_id: repair_id.to_owned(),
        reason,
        detail,
        rolled_back: None,
    })
}

/// The user's files moved away from `expected`; when a promotion was
/// already under way, it was undone as `rolled_back` says.
pub fn refused_stale(
    repair_id: &str,
    expected: Digest,
    found: Digest,
    rolled_back: Option<RolledBack>,
) -> LedgerEvent {
    let detail = match rolled_back {
        None => "the workspace changed since the repair started",
        Some(_) => "the workspace changed while the repair was being written; it was undone",
    };
    LedgerEvent::Refused(Refused {
        repair_id: repair_id.to_owned(),
        reason: RefusalReason::StaleRoot { expected, found },
        detail: detail.to_owned(),
        rolled_back,
    })
}

pub fn refused_bound(repair_id: &str, bound: u32, detail: &str) -> LedgerEvent {
    refused(
        repair_id,
        RefusalReason::DecisionBound { bound },
        detail.to_owned(),
    )
}

pub fn refused_no_candidate(repair_id: &str, detail: &str) -> LedgerEvent {
    refused(
        repair_id,
        RefusalReason::NoEligibleCandidate,
        detail.to_owned(),
    )
}

pub fn refused_outside_changed(repair_id: &str, breach: &crate::outside::Breach) -> LedgerEvent {
    refused(
        repair_id,
        RefusalReason::OutsideChanged {
            changed: breach.changed.clone(),
            restored: breach.restored.clone(),
        },
        "the repair's branches changed something outside every branch".into(),
    )
}

pub fn refused_not_hard_pass(repair_id: &str, status: RepairStatus) -> LedgerEvent {
    refused(
        repair_id,
        RefusalReason::NotHardPass,
        format!("the repair ended as {status:?}"),
    )
}

pub fn search_opened(forest: &SearchForest) -> SearchEvent {
    SearchEvent::SearchOpened {
        forest_id: forest.forest_id.clone(),
        branch_id: String::new(),
        node: forest.node.clone(),
        generation: forest.generation,
        accepted_root: forest.accepted_root,
        limits: forest.limits().to_snapshot(),
        resumed_from: forest.resumed_from.clone(),
    }
}

/// The forest's usage (consumed plus held reservations), ledgered after
/// every reservation and settlement (erratum 14).
pub fn usage_snapshot(forest: &SearchForest) -> SearchEvent {
    SearchEvent::SearchUsageSnapshot {
        forest_id: forest.forest_id.clone(),
        branch_id: String::new(),
        usage: forest.budget().snapshot(),
    }
}

pub fn branch_forked(forest_id: &str, branch: &SearchBranch) -> SearchEvent {
    SearchEvent::BranchForked {
        forest_id: forest_id.to_owned(),
        branch_id: branch.branch_id.clone(),
        parent: branch.parent_branch.clone(),
        seed: branch.seed,
        strategy: branch.strategy.name().to_owned(),
        route: branch.route.clone(),
        prompt_program: branch.prompt_program,
    }
}

pub fn strategy_selected(forest_id: &str, branch: &SearchBranch, reason: &str) -> SearchEvent {
    SearchEvent::BranchStrategySelected {
        forest_id: forest_id.to_owned(),
        branch_id: branch.branch_id.clone(),
        strategy: branch.strategy.name().to_owned(),
        reason: reason.to_owned(),
    }
}

/// A fact worth keeping that decides nothing (`branch_id` empty for the
/// forest as a whole).
pub fn observation(forest_id: &str, branch_id: &str, text: &str) -> SearchEvent {
    SearchEvent::BranchObservation {
        forest_id: forest_id.to_owned(),
        branch_id: branch_id.to_owned(),
        observation: text.to_owned(),
    }
}

pub fn epoch_started(forest_id: &str, epoch: u64) -> SearchEvent {
    SearchEvent::FrontierEpochStarted {
        forest_id: forest_id.to_owned(),
        branch_id: String::new(),
        epoch: epoch as u32,
    }
}

pub fn entry_served(forest_id: &str, branch_id: &str, epoch: u64, rank: u32) -> SearchEvent {
    SearchEvent::FrontierEntryServed {
        forest_id: forest_id.to_owned(),
        branch_id: branch_id.to_owned(),
        epoch: epoch as u32,
        rank,
    }
}

pub fn search_abandoned(forest_id: &str, branch_id: &str, reason: &str) -> SearchEvent {
    SearchEvent::BranchAbandoned {
        forest_id: forest_id.to_owned(),
        branch_id: branch_id.to_owned(),
        reason: reason.to_owned(),
    }
}

/// A branch's measurement, under its own `candidate_id` (see
/// [`SearchForest::candidate_id`]; the gate assigns the `node/gen/cN` id
/// only to the submitted candidate), with every key selection compares.
pub fn search_candidate_measured(
    forest: &SearchForest,
    branch_id: &str,
    observation: &CandidateObservation,
    eligible: bool,
    flaky: Vec<String>,
) -> SearchEvent {
    let branch = forest.branch(branch_id);
    SearchEvent::BranchCandidateMeasured {
        forest_id: forest.forest_id.clone(),
        branch_id: branch_id.to_owned(),
        candidate_id: forest.candidate_id(branch_id).unwrap_or_default(),
        root: observation.root,
        energy: observation.energy,
        hard_pass: observation.hard_pass,
        keys: Some(SelectionKeys {
            eligible,
            targeted_improvement: observation.targeted_improvement,
            cost: branch.map_or(0, |b| b.cost),
            profile: observation.profile,
        }),
        flaky,
    }
}

/// A branch's ineligible state kept as a partial checkpoint, and why it
/// was ineligible; the `candidate_id` names the checkpoint by its content
/// address.
pub fn partial_checkpointed(
    forest_id: &str,
    branch_id: &str,
    checkpoint: &PartialCheckpointRef,
    reason: &str,
) -> SearchEvent {
    SearchEvent::PartialCheckpointed {
        forest_id: forest_id.to_owned(),
        branch_id: branch_id.to_owned(),
        candidate_id: format!(
            "{forest_id}/{branch_id}/partial/{}",
            checkpoint.digest().short(12)
        ),
        root: checkpoint.state_root,
        reason: Some(reason.to_owned()),
    }
}

pub fn search_ineligible(forest_id: &str, branch_id: &str, reason: &str) -> SearchEvent {
    SearchEvent::BranchIneligible {
        forest_id: forest_id.to_owned(),
        branch_id: branch_id.to_owned(),
        reason: reason.to_owned(),
    }
}

pub fn search_not_selected(forest_id: &str, branch_id: &str, selected: &str) -> SearchEvent {
    SearchEvent::BranchNotSelected {
        forest_id: forest_id.to_owned(),
        branch_id: branch_id.to_owned(),
        reason: format!("branch {selected} ranked higher"),
    }
}

pub fn search_selected(forest_id: &str, selection: &Selection, profile: Digest) -> SearchEvent {
    SearchEvent::BranchSelected {
        forest_id: forest_id.to_owned(),
        branch_id: selection.selected.clone(),
        candidate_id: selection.candidate_id.clone(),
        profile: Some(profile),
    }
}

pub fn search_committed(forest_id: &str, branch_id: &str, candidate_id: &str) -> SearchEvent {
    SearchEvent::BranchCommitted {
        forest_id: forest_id.to_owned(),
        branch_id: branch_id.to_owned(),
        candidate_id: candidate_id.to_owned(),
    }
}

pub fn search_closed(forest_id: &str, reason: &str) -> SearchEvent {
    SearchEvent::SearchClosed {
        forest_id: forest_id.to_owned(),
        branch_id: String::new(),
        reason: reason.to_owned(),
    }
}
