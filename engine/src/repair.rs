//! The repair runtime: bounded search steps over the accepted trajectory.
//!
//! One step: build the correction packet of the target cluster, ask the
//! proposer for at most `max_branches` candidates, and measure them one at a
//! time, each in a branch slot synced from the accepted state. Branch
//! previews never decide; the selected candidate (Proposition 5) is
//! submitted once to [`AcceptedTrajectory`]. Steps repeat from the new
//! accepted state until hard pass, the decision bound, or no eligible
//! candidate. Nothing here writes the user's files: promotion is separate
//! and requires a hard pass.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::api::{EngineError, Progress, RepairOptions, RepairStatus, StageSummary};
use crate::cluster::ResidualClass;
use crate::config::Config;
use crate::correction::CorrectionPacket;
use crate::digest::Digest;
use crate::edit::{self, ByteEdit};
use crate::gate::{AcceptedTrajectory, GateDecision, Observation, Verdict};
use crate::ledger::Ledger;
use crate::measure::{Measurement, measure};
use crate::propose::{Candidate, Proposer, SuggestionProposer};
use crate::records;
use crate::select::{BranchMeasurement, select};
use crate::sensor::Sensor;
use crate::slots::Slots;
use crate::snapshot::{self, CopyLimits, DirSource, Overlay, Snapshot, Snapshotter};

/// How one branch ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum BranchOutcome {
    Selected,
    NotSelected,
    Ineligible { reason: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BranchReport {
    pub branch_id: String,
    pub label: String,
    pub proposer: String,
    pub proposal: Digest,
    pub root: Option<Digest>,
    pub energy: Option<f64>,
    pub hard_pass: bool,
    /// The gate's pure preview; never a decision.
    pub preview: Option<Verdict>,
    pub stages: Vec<StageSummary>,
    /// Titles of the clusters left in the branch.
    pub clusters: Vec<String>,
    #[serde(flatten)]
    pub outcome: BranchOutcome,
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

/// The accepted state x_k: its snapshot, the content that realizes it over
/// the user's disk, and its measurement.
pub(crate) struct Accepted {
    pub snapshot: Snapshot,
    pub overlay: Overlay,
    pub measurement: Measurement,
}

/// What the runtime needs from the engine for one repair.
pub(crate) struct Ctx<'a> {
    pub root: &'a Path,
    pub config: &'a Config,
    pub sensors: &'a [Box<dyn Sensor>],
    pub ledger: &'a Ledger,
    pub slots: &'a Slots,
    pub progress: &'a dyn Progress,
    pub cancel: &'a CancellationToken,
}

pub(crate) struct SearchResult {
    pub status: RepairStatus,
    pub steps: Vec<StepReport>,
    pub last: Accepted,
    pub labels: Vec<String>,
}

fn io(e: impl std::fmt::Display) -> EngineError {
    EngineError::Io(e.to_string())
}

/// Clusters worth repairing, the requested one first, warnings never.
fn repair_order<'m>(m: &'m Measurement, target: Option<&str>) -> Vec<&'m crate::cluster::Cluster> {
    let mut clusters: Vec<_> = m
        .assessment
        .clusters
        .iter()
        .filter(|c| c.class != ResidualClass::Warning)
        .collect();
    if let Some(target) = target
        && let Some(pos) = clusters.iter().position(|c| c.id == target)
    {
        let wanted = clusters.remove(pos);
        clusters.insert(0, wanted);
    }
    clusters
}

/// Applies a candidate's edits inside `slot`. Paths are confined to the slot.
fn apply_candidate(slot: &Path, candidate: &Candidate) -> Result<(), String> {
    let mut by_path: BTreeMap<&str, Vec<ByteEdit>> = BTreeMap::new();
    for e in &candidate.edits {
        by_path.entry(e.path.as_str()).or_default().push(e.clone());
    }
    for (path, edits) in by_path {
        let full = snapshot::fsutil::confine(slot, path).map_err(|e| e.to_string())?;
        let bytes = std::fs::read(&full).map_err(|e| format!("{path}: {e}"))?;
        let text = String::from_utf8(bytes).map_err(|_| format!("{path}: not valid UTF-8"))?;
        let edited = edit::apply(path, &text, &edits).map_err(|e| e.to_string())?;
        snapshot::fsutil::write_atomic(slot, path, edited.as_bytes()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Runs the search from `start` (already measured) and returns where it ended.
pub(crate) async fn search(
    ctx: &Ctx<'_>,
    repair_id: &str,
    start: Accepted,
    options: &RepairOptions,
) -> Result<SearchResult, EngineError> {
    let max_branches = options
        .max_branches
        .clamp(1, 3)
        .min(ctx.config.exploration.max_branches);
    let x0 = Observation {
        root: start.snapshot.root,
        energy: start.measurement.energy(),
        hard_pass: start.measurement.hard_pass(),
    };
    let mut trajectory = AcceptedTrajectory::new(repair_id, 0, x0, ctx.config.gate);
    let mut accepted = start;
    let mut measured_roots: BTreeSet<Digest> = BTreeSet::from([accepted.snapshot.root]);
    let mut steps: Vec<StepReport> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    let proposer = SuggestionProposer;
    let limits = CopyLimits {
        max_files: ctx.config.exploration.workspace_files,
        max_bytes: ctx.config.exploration.workspace_bytes,
    };

    let status = loop {
        if ctx.cancel.is_cancelled() {
            break RepairStatus::Cancelled;
        }
        if steps.len() >= ctx.config.exploration.max_steps {
            break RepairStatus::ResidualsRemain;
        }
        let target = if steps.is_empty() {
            options.target_cluster.as_deref()
        } else {
            None
        };
        let unavailable = accepted.measurement.unavailable();
        let planned = repair_order(&accepted.measurement, target)
            .into_iter()
            .find_map(|cluster| {
                let packet = CorrectionPacket::for_cluster(
                    &accepted.measurement.assessment,
                    cluster,
                    &ctx.config.stages.required,
                    &unavailable,
                );
                let candidates = proposer.propose(&packet, max_branches);
                (!candidates.is_empty()).then_some((packet, candidates))
            });
        let Some((packet, candidates)) = planned else {
            ctx.ledger
                .append(&records::refused_no_candidate(
                    repair_id,
                    "no cluster has a tool suggestion to try",
                ))
                .map_err(io)?;
            break if steps.is_empty() {
                RepairStatus::NoEligibleCandidate
            } else {
                RepairStatus::ResidualsRemain
            };
        };

        let forest_id = format!("{repair_id}/f{}", steps.len() + 1);
        ctx.ledger
            .append_search(&records::search_opened(
                &forest_id,
                repair_id,
                0,
                accepted.snapshot.root,
            ))
            .map_err(io)?;
        let accepted_source = DirSource::new(ctx.root.to_path_buf(), accepted.overlay.clone());
        let targeted_before = packet_energy(&accepted.measurement, &packet.cluster_id);

        let mut reports: Vec<BranchReport> = Vec::new();
        let mut eligible: Vec<(BranchMeasurement, Snapshot, Measurement)> = Vec::new();
        for (i, candidate) in candidates.iter().enumerate() {
            if ctx.cancel.is_cancelled() {
                break;
            }
            let branch_id = format!("b{}", i + 1);
            let slot = ctx.slots.branch(i);
            ctx.ledger
                .append_search(&records::search_forked(
                    &forest_id,
                    &branch_id,
                    accepted.snapshot.root,
                    candidate,
                ))
                .map_err(io)?;
            ctx.progress.report(
                &format!("branch {}/{}: {}", i + 1, candidates.len(), candidate.label),
                Some((i * 100 / candidates.len()) as u32),
            );
            let mut report = BranchReport {
                branch_id: branch_id.clone(),
                label: candidate.label.clone(),
                proposer: candidate.proposer.clone(),
                proposal: candidate.digest(),
                root: None,
                energy: None,
                hard_pass: false,
                preview: None,
                stages: Vec::new(),
                clusters: Vec::new(),
                outcome: BranchOutcome::NotSelected,
            };
            let realized =
                snapshot::materialize(&accepted.snapshot, &accepted_source, &slot, limits)
                    .map_err(|e| e.to_string())
                    .and_then(|_| apply_candidate(&slot, candidate))
                    .and_then(|()| {
                        Snapshotter::new(&slot, None)
                            .snapshot(&Overlay::default())
                            .map_err(|e| e.to_string())
                    });
            let y = match realized {
                Ok(y) => y,
                Err(reason) => {
                    ineligible(
                        ctx,
                        &forest_id,
                        &mut report,
                        format!("candidate could not be realized: {reason}"),
                    )?;
                    reports.push(report);
                    continue;
                }
            };
            report.root = Some(y.root);
            if !measured_roots.insert(y.root) {
                ineligible(
                    ctx,
                    &forest_id,
                    &mut report,
                    "duplicate of an already measured state".into(),
                )?;
                reports.push(report);
                continue;
            }
            let m = measure(
                y.root,
                &slot,
                &ctx.slots.branch_target(),
                ctx.sensors,
                ctx.config,
                &format!("branch {}", i + 1),
                ctx.progress,
                ctx.cancel,
            )
            .await;
            let observation = Observation {
                root: y.root,
                energy: m.energy(),
                hard_pass: m.hard_pass(),
            };
            let preview = trajectory.preview(&observation);
            report.energy = Some(m.energy());
            report.hard_pass = m.hard_pass();
            report.preview = Some(preview);
            report.stages = m.stage_summaries(ctx.config);
            report.clusters = m
                .assessment
                .clusters
                .iter()
                .map(|c| c.title.clone())
                .collect();
            ctx.ledger
                .append_search(&records::search_candidate_measured(
                    &forest_id,
                    &branch_id,
                    y.root,
                    m.energy(),
                    m.hard_pass(),
                ))
                .map_err(io)?;
            let why_not = if ctx.cancel.is_cancelled() {
                Some("cancelled".to_owned())
            } else if !m.required_ran(ctx.config) {
                Some(format!(
                    "a required stage could not run: {}",
                    m.unavailable().join(", ")
                ))
            } else if !preview.accepted() {
                Some(format!(
                    "no descent: energy {:.2} is not below {:.2} − ρ",
                    m.energy(),
                    trajectory.v_best()
                ))
            } else {
                None
            };
            if let Some(reason) = why_not {
                ineligible(ctx, &forest_id, &mut report, reason)?;
                reports.push(report);
                continue;
            }
            let hard = m.hard_pass();
            eligible.push((
                BranchMeasurement {
                    branch_id: branch_id.clone(),
                    hard_pass: hard,
                    energy: m.energy(),
                    targeted_improvement: targeted_before - packet_energy(&m, &packet.cluster_id),
                    cost: m.cost_ms,
                    profile: m.profile,
                },
                y,
                m,
            ));
            reports.push(report);
            if hard {
                // Nothing can outrank a hard pass on key 1; stop opening branches.
                break;
            }
        }

        let profile = accepted.measurement.profile;
        let measurements: Vec<BranchMeasurement> =
            eligible.iter().map(|(b, _, _)| b.clone()).collect();
        let chosen = select(&measurements, profile);
        for r in reports
            .iter_mut()
            .filter(|r| r.outcome == BranchOutcome::NotSelected)
        {
            let selected = chosen.is_some_and(|i| measurements[i].branch_id == r.branch_id);
            if selected {
                r.outcome = BranchOutcome::Selected;
            } else {
                ctx.ledger
                    .append_search(&records::search_not_selected(&forest_id, &r.branch_id))
                    .map_err(io)?;
            }
        }
        let mut step = StepReport {
            forest_id: forest_id.clone(),
            cluster_id: packet.cluster_id.clone(),
            cluster_title: packet.cluster_title.clone(),
            energy_before: accepted.measurement.energy(),
            branches: reports,
            decision: None,
        };
        if ctx.cancel.is_cancelled() {
            ctx.ledger
                .append_search(&records::search_closed(&forest_id, "cancelled"))
                .map_err(io)?;
            steps.push(step);
            break RepairStatus::Cancelled;
        }
        let Some(index) = chosen else {
            ctx.ledger
                .append_search(&records::search_closed(&forest_id, "no eligible candidate"))
                .map_err(io)?;
            ctx.ledger
                .append(&records::refused_no_candidate(
                    repair_id,
                    &format!("no branch of {forest_id} was eligible"),
                ))
                .map_err(io)?;
            steps.push(step);
            break if trajectory.decisions.is_empty() {
                RepairStatus::NoEligibleCandidate
            } else {
                RepairStatus::ResidualsRemain
            };
        };
        let (selected, y, m) = eligible.swap_remove(index);
        ctx.ledger
            .append_search(&records::search_selected(&forest_id, &selected.branch_id))
            .map_err(io)?;
        let observation = Observation {
            root: y.root,
            energy: m.energy(),
            hard_pass: m.hard_pass(),
        };
        let decision = match trajectory.submit(&observation) {
            Ok(decision) => decision,
            Err(refusal) => {
                ctx.ledger
                    .append(&records::refused_bound(
                        repair_id,
                        trajectory.bound(),
                        &refusal.to_string(),
                    ))
                    .map_err(io)?;
                ctx.ledger
                    .append_search(&records::search_closed(&forest_id, "decision refused"))
                    .map_err(io)?;
                steps.push(step);
                break RepairStatus::BoundReached;
            }
        };
        ctx.ledger
            .append(&records::candidate_measured(
                repair_id,
                &decision.candidate_id,
                &m,
            ))
            .map_err(io)?;
        ctx.ledger
            .append(&records::gate_decision(repair_id, &decision))
            .map_err(io)?;
        ctx.ledger
            .append_search(&records::search_committed(
                &forest_id,
                &selected.branch_id,
                &decision.candidate_id,
            ))
            .map_err(io)?;
        ctx.ledger
            .append_search(&records::search_closed(&forest_id, "committed"))
            .map_err(io)?;
        step.decision = Some(decision.clone());
        steps.push(step);
        let label = candidates
            .iter()
            .zip(1..)
            .find(|(_, n)| format!("b{n}") == selected.branch_id)
            .map(|(c, _)| c.label.clone())
            .unwrap_or_default();
        labels.push(label);

        // The accepted content lives on as an overlay over the user's disk,
        // so the slot can be reused by the next step.
        let slot = ctx.slots.branch(branch_index(&selected.branch_id));
        let mut overlay = accepted.overlay.clone();
        let changes = snapshot::diff(
            &accepted.snapshot,
            &accepted_source,
            &y,
            &DirSource::new(slot.clone(), Overlay::default()),
        )
        .map_err(io)?;
        for change in &changes {
            match change {
                crate::change::FileChange::Modify { path, new_text, .. } => {
                    overlay
                        .buffers
                        .insert(path.clone(), new_text.clone().into_bytes());
                }
                crate::change::FileChange::Create { path, text, .. } => {
                    overlay
                        .buffers
                        .insert(path.clone(), text.clone().into_bytes());
                }
                crate::change::FileChange::Delete { path, .. } => {
                    return Err(EngineError::Io(format!(
                        "{path}: a candidate deleted a file, which staging cannot hold yet"
                    )));
                }
            }
        }
        accepted = Accepted {
            snapshot: y,
            overlay,
            measurement: m,
        };
        match decision.verdict {
            Verdict::AcceptedHardPass => break RepairStatus::HardPass,
            Verdict::AcceptedDescent | Verdict::RejectedNonDescending => {}
        }
    };
    Ok(SearchResult {
        status,
        steps,
        last: accepted,
        labels,
    })
}

fn branch_index(branch_id: &str) -> usize {
    branch_id
        .trim_start_matches('b')
        .parse::<usize>()
        .map(|n| n - 1)
        .unwrap_or(0)
}

fn packet_energy(m: &Measurement, cluster_id: &str) -> f64 {
    m.assessment
        .clusters
        .iter()
        .find(|c| c.id == cluster_id)
        .map_or(0.0, |c| c.energy)
}

fn ineligible(
    ctx: &Ctx<'_>,
    forest_id: &str,
    report: &mut BranchReport,
    reason: String,
) -> Result<(), EngineError> {
    ctx.ledger
        .append_search(&records::search_ineligible(
            forest_id,
            &report.branch_id,
            &reason,
        ))
        .map_err(io)?;
    report.outcome = BranchOutcome::Ineligible { reason };
    Ok(())
}
