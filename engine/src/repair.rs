//! The repair runtime: bounded search steps over the accepted trajectory.
//!
//! One step is one [`SearchForest`] over (node, generation, accepted root):
//! build the correction packet of the target cluster, ask the proposer for
//! at most `max_branches` candidates, and open one branch at a time. Every
//! eager copy and every sensor run reserves against the forest's budget
//! before it runs and settles with actuals, and the usage is ledgered after
//! each (erratum 14), so a crash resumes with at least what was reserved.
//! An exact no-good refuses a repeated attempt for free. Branch previews
//! never decide; the forest selects one candidate (Proposition 5) and
//! commits it once through [`AcceptedTrajectory`]. Steps repeat from the new
//! accepted state until hard pass, the decision bound, or no eligible
//! candidate. Nothing here writes the user's files: promotion is separate
//! and requires a hard pass.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::api::{EngineError, Progress, RepairOptions, RepairStatus, StageSummary, blocking, io};
use crate::cluster::{EnergyModel, ResidualClass, assess};
use crate::config::Config;
use crate::correction::{CorrectionOperator, CorrectionPacket};
use crate::digest::CanonicalHasher;
use crate::digest::Digest;
use crate::edit::{self, ByteEdit};
use crate::gate::{AcceptedTrajectory, GateDecision, Observation, Verdict};
use crate::ledger::{self, Ledger, SearchEvent};
use crate::measure::{Measurement, measure};
use crate::propose::{Candidate, Proposer, SuggestionProposer};
use crate::records;
use crate::search::{
    ActionKind, Attempt, BranchOutcome as QuantumOutcome, BranchProgress, BranchSpec,
    CandidateObservation, Counters, Eligibility, Evidence, Expansion, ExpansionState,
    ForestBinding, ForestError, Frontier, FrontierEntry, Ineligibility, InterruptedForest,
    NoGoodComponents, NoGoodStore, OperatorKind, PartialCheckpointRef, Receipt, Reservation,
    ResumeClaim, SearchForest, Seed, Strategy, StrategyContext, Support, build_digest,
    next_expansion, probe_attempt, probe_first,
};
use crate::sensor::{Sensor, SensorRun, StageReport};
use crate::slots::Slots;
use crate::snapshot::{
    self, BlobStore, CopyLimits, DirSource, Entry, EntryKind, Overlay, Snapshot, Snapshotter,
};

/// How one branch ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum BranchOutcome {
    Selected,
    NotSelected,
    Ineligible {
        reason: String,
    },
    /// Ineligible, but kept as a partial checkpoint that a later quantum
    /// continued or forked from; never accepted itself.
    Partial {
        reason: String,
    },
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

/// The grant component of K_ng for the deterministic proposer: it may write
/// only inside its branch slot. A fixed constant until capability grants
/// exist; changing what a branch may do must change this tag.
fn grant_digest() -> Digest {
    CanonicalHasher::new("trellis.grant.v1")
        .str("branch-slot-write")
        .finish()
}

/// The tool-catalog component of K_ng: the deterministic proposer calls no
/// tools. A fixed constant until model routes with tools exist.
fn tool_catalog_digest() -> Digest {
    CanonicalHasher::new("trellis.tool-catalog.v1")
        .str("none")
        .finish()
}

/// The session's exact no-goods: those recorded by this process and those
/// folded back from the ledger, in one store that answers by equality of
/// all nine components.
#[derive(Default)]
struct NoGoods {
    store: NoGoodStore,
    /// Keys of rows written before no-goods carried their components: they
    /// are counted and shown, never matched, because there is nothing to
    /// compare an attempt's components against.
    key_only: BTreeSet<Digest>,
    /// Whether the session has said so in the ledger yet.
    key_only_noted: bool,
}

impl NoGoods {
    /// Restores the ledger's no-goods. The fold verified every exact record
    /// already; the store checks again rather than trust its caller.
    fn restore(folded: impl IntoIterator<Item = ledger::FoldedNoGood>) -> Result<NoGoods, String> {
        let mut nogoods = NoGoods::default();
        for folded in folded {
            match folded.record {
                ledger::NoGoodRecord::Exact(nogood) => {
                    nogoods.store.restore(*nogood).map_err(|e| {
                        format!("event {}: no_good_recorded is refused: {e}", folded.seq)
                    })?;
                }
                ledger::NoGoodRecord::KeyOnly { key, .. } => {
                    nogoods.key_only.insert(key);
                }
            }
        }
        Ok(nogoods)
    }

    /// The key of the no-good refusing `attempt`, if one matches exactly.
    fn suppresses(&self, attempt: &NoGoodComponents) -> Option<Digest> {
        self.store
            .suppresses(attempt)
            .map(|nogood| nogood.key.digest())
    }

    /// The observation the first forest of the session ledgers about
    /// key-only no-goods, once.
    fn key_only_notice(&mut self) -> Option<String> {
        if self.key_only.is_empty() || self.key_only_noted {
            return None;
        }
        self.key_only_noted = true;
        Some(format!(
            "{} recorded no-good(s) carry only their key (written by an older trellis): \
             counted, never matched, since an attempt can only be refused by equality of \
             every component",
            self.key_only.len()
        ))
    }
}

/// What a repair inherits from the ledger before its first forest opens:
/// its node and generation, the interrupted usage it may claim, and every
/// recorded no-good (errata 1, 25, 35).
pub(crate) struct Session {
    pub node: String,
    pub generation: u32,
    /// `node/generation/x0` is already in the accepted fold: this attempt
    /// resumes an interrupted one on the same start root.
    pub x0_recorded: bool,
    claim: ResumeClaim,
    nogoods: NoGoods,
    next_forest: usize,
    /// Interrupted forests this session closed as superseded (once each).
    superseded: BTreeSet<String>,
    /// The interrupted generation's record, when this session continues it
    /// from its last accepted state; [`search`] takes it.
    continuation: Option<Continuation>,
    /// The resumed forest, opened before the first step to re-measure the
    /// accepted state it continues from; that step runs in it.
    resumed_forest: Option<SearchForest>,
}

/// What the ledger recorded about a generation that committed accepted
/// steps and was interrupted in a later one: enough to rebuild its
/// trajectory and its last accepted state, each checked, never trusted.
struct Continuation {
    /// x₀ as measured when the generation started.
    x0: Observation,
    /// Every decision of the generation, in order.
    decisions: Vec<GateDecision>,
    /// The last accepted state's content relative to x₀...
    stored: ledger::AcceptedStateStored,
    /// ...and how it measured when it was accepted.
    measured: Observation,
}

impl Continuation {
    /// Reads the record of `node`'s `generation` from the accepted fold.
    /// `None` when the generation cannot be continued from `root` (the
    /// interrupted forest's): it accepted nothing, its last accepted state
    /// is elsewhere, or that state's content was never stored (a ledger
    /// from a trellis that did not store it); the attempt then starts a
    /// new generation. An error when the record contradicts itself.
    fn of(
        fold: &ledger::AcceptedFold,
        node: &str,
        generation: u32,
        root: Digest,
        start_root: Digest,
    ) -> Result<Option<Continuation>, String> {
        let decided: Vec<&ledger::FoldedCandidate> = fold
            .decision_order
            .iter()
            .filter(|k| k.node == node && k.generation == generation)
            .filter_map(|k| fold.candidates.get(k))
            .collect();
        let last_accepted = decided
            .iter()
            .rev()
            .find(|c| c.decision.as_ref().is_some_and(|d| d.verdict.is_accepted()));
        let Some((last, stored)) = last_accepted
            .filter(|c| c.measurement.root == root)
            .and_then(|c| Some((c, c.stored.clone()?)))
        else {
            return Ok(None);
        };
        let x0_id = format!("{node}/{generation}/x0");
        let x0 = fold
            .candidates
            .get(&ledger::CandidateKey {
                node: node.to_owned(),
                generation,
                candidate_id: x0_id.clone(),
            })
            .ok_or_else(|| format!("generation {generation} decided without a recorded {x0_id}"))?;
        if x0.measurement.root != start_root {
            return Err(format!(
                "{x0_id} was measured at {}, not at the view's root {}",
                x0.measurement.root.short(12),
                start_root.short(12)
            ));
        }
        let observed = |m: &ledger::CandidateMeasured| Observation {
            root: m.root,
            energy: m.energy,
            hard_pass: m.hard_pass,
        };
        Ok(Some(Continuation {
            x0: observed(&x0.measurement),
            decisions: decided
                .iter()
                .filter_map(|c| c.decision.as_ref())
                .map(records::recorded_decision)
                .collect(),
            stored,
            measured: observed(&last.measurement),
        }))
    }
}

impl Session {
    /// Folds the ledger for a repair starting at `start_root`. Refuses an
    /// unreadable or ambiguous ledger (two unclosed forests), or a
    /// contradictory record of the generation it would continue, rather
    /// than guessing which search to continue.
    pub(crate) fn begin(ledger: &Ledger, start_root: Digest) -> Result<Session, EngineError> {
        let refuse = |e: &dyn std::fmt::Display| {
            EngineError::Io(format!(
                "{}: cannot resume the search: {e}",
                ledger.path().display()
            ))
        };
        let rows = ledger.rows().map_err(|e| refuse(&e))?;
        let resume = ledger::fold_resume(&rows).map_err(|e| refuse(&e))?;
        let accepted = ledger::fold_accepted(&rows).map_err(|e| refuse(&e))?;
        let node = records::node_id(&start_root);

        let mut used: BTreeSet<u32> = accepted
            .candidates
            .keys()
            .filter(|k| k.node == node)
            .map(|k| k.generation)
            .collect();
        let opened: Vec<(String, u32)> = rows
            .iter()
            .filter_map(|row| match &row.event {
                ledger::DecodedRow::Search {
                    event:
                        SearchEvent::SearchOpened {
                            node, generation, ..
                        },
                    ..
                } => Some((node.clone(), *generation)),
                _ => None,
            })
            .collect();
        used.extend(opened.iter().filter(|(n, _)| *n == node).map(|(_, g)| *g));

        // The interrupted attempt is continued only when it is this node's
        // and its forest sits at the generation's last accepted state: the
        // start root when the generation decided nothing yet (its candidate
        // ids are then still free), else the root of its last accepted
        // decision, rebuilt from the content stored when it was committed.
        // Either way the resumed forest claims the interrupted usage.
        let mut continuation = None;
        let resumable = match resume.interrupted.as_ref().filter(|f| f.node == node) {
            Some(f)
                if !accepted
                    .decisions()
                    .any(|d| d.node == node && d.generation == f.generation) =>
            {
                (f.accepted_root == start_root).then_some(f)
            }
            Some(f) => {
                continuation =
                    Continuation::of(&accepted, &node, f.generation, f.accepted_root, start_root)
                        .map_err(|e| {
                        refuse(&format!(
                            "interrupted forest {} cannot be continued: {e}",
                            f.forest_id
                        ))
                    })?;
                continuation.is_some().then_some(f)
            }
            None => None,
        };
        let generation = match resumable {
            Some(f) => f.generation,
            None => used.last().map_or(0, |g| g + 1),
        };
        let x0_recorded = accepted.candidates.keys().any(|k| {
            k.node == node && k.generation == generation && k.candidate_id.ends_with("/x0")
        });
        let next_forest = 1 + opened
            .iter()
            .filter(|(n, g)| *n == node && *g == generation)
            .count();

        let interrupted = match resume.interrupted {
            Some(f) => {
                let limits = Counters::from_snapshot(&f.limits).map_err(|e| {
                    refuse(&format!(
                        "forest {} has unreadable limits: {e}",
                        f.forest_id
                    ))
                })?;
                let binding = ForestBinding {
                    node: f.node,
                    generation: f.generation,
                    accepted_root: f.accepted_root,
                };
                // Opened, then killed before its first snapshot: nothing reserved.
                let interrupted = if f.usage.is_empty() {
                    Ok(InterruptedForest {
                        forest_id: f.forest_id.clone(),
                        binding,
                        limits,
                        usage: Counters::ZERO,
                    })
                } else {
                    InterruptedForest::from_snapshot(f.forest_id.clone(), binding, limits, &f.usage)
                };
                vec![interrupted.map_err(|e| {
                    refuse(&format!(
                        "forest {} has an unreadable usage: {e}",
                        f.forest_id
                    ))
                })?]
            }
            None => Vec::new(),
        };
        let claim = ResumeClaim::fold(interrupted).map_err(|e| refuse(&e))?;
        let nogoods = NoGoods::restore(resume.no_goods.into_values()).map_err(|e| refuse(&e))?;
        Ok(Session {
            node,
            generation,
            x0_recorded,
            claim,
            nogoods,
            next_forest,
            superseded: BTreeSet::new(),
            continuation,
            resumed_forest: None,
        })
    }

    /// The `search_closed` event for an interrupted forest its owner can no
    /// longer claim, the first time this session bypasses it.
    fn close_superseded(&mut self, interrupted: &str, by: &str) -> Option<SearchEvent> {
        self.superseded.insert(interrupted.to_owned()).then(|| {
            records::search_closed(
                interrupted,
                &format!("superseded by {by}; its usage stays unclaimed"),
            )
        })
    }

    /// `node/generation/x0`: the id of the start state's measurement.
    pub fn x0_id(&self) -> String {
        format!("{}/{}/x0", self.node, self.generation)
    }
}

/// One forest and the ledger it writes to: every budget move is followed by
/// a usage snapshot, and a closed forest writes nothing more.
struct ForestRun<'a> {
    ctx: &'a Ctx<'a>,
    forest: SearchForest,
}

impl ForestRun<'_> {
    fn id(&self) -> &str {
        &self.forest.forest_id
    }

    fn append(&self, event: &SearchEvent) -> Result<(), EngineError> {
        self.ctx.ledger.append_search(event).map(|_| ()).map_err(io)
    }

    fn snapshot(&self) -> Result<(), EngineError> {
        self.append(&records::usage_snapshot(&self.forest))
    }

    fn observe(&self, branch_id: &str, text: &str) -> Result<(), EngineError> {
        self.append(&records::observation(self.id(), branch_id, text))
    }

    /// Reserves `kind`, or says why not as an observation.
    fn reserve(&mut self, kind: ActionKind) -> Result<Option<Reservation>, EngineError> {
        if let Err(refusal) = self.forest.budget().admits(&kind) {
            self.observe("", &format!("no {}: {refusal}", kind.name()))?;
            return Ok(None);
        }
        let reservation = self.forest.reserve(kind).map_err(forest_error)?;
        self.snapshot()?;
        Ok(Some(reservation))
    }

    /// Settles with actuals. An overflow closes the forest: its live
    /// branches are abandoned (and their slots removed).
    fn settle(
        &mut self,
        reservation: Reservation,
        actual: ActionKind,
    ) -> Result<(Receipt, bool), EngineError> {
        let settled = self
            .forest
            .settle(reservation, actual)
            .map_err(forest_error)?;
        self.snapshot()?;
        if let Some(overflow) = settled.settlement.overflow {
            self.observe(
                "",
                &format!(
                    "budget overflow: {} would reach {} (limit {}); the forest closes",
                    overflow.counter, overflow.attempted, overflow.limit
                ),
            )?;
            self.abandoned(&settled.abandoned, "the search budget overflowed")?;
        }
        Ok((
            settled.settlement.receipt,
            settled.settlement.exceeded_reservation,
        ))
    }

    /// Charges the wall time of a branch at its boundary.
    fn charge_elapsed(&mut self, since: Instant) -> Result<(), EngineError> {
        if self.forest.is_closed() {
            return Ok(());
        }
        let abandoned = self
            .forest
            .charge_elapsed(since.elapsed().as_secs())
            .map_err(forest_error)?;
        self.snapshot()?;
        self.abandoned(&abandoned, "the search deadline passed")
    }

    fn abandoned(&self, branch_ids: &[String], reason: &str) -> Result<(), EngineError> {
        for branch_id in branch_ids {
            remove_slot(self.ctx, branch_id);
            self.append(&records::search_abandoned(self.id(), branch_id, reason))?;
        }
        Ok(())
    }

    /// Closes the forest: abandons what is still live, then the final
    /// snapshot, then `search_closed`, last.
    fn close(mut self, reason: &str) -> Result<(), EngineError> {
        let abandoned = self.forest.close(reason);
        self.abandoned(&abandoned, reason)?;
        self.snapshot()?;
        self.append(&records::search_closed(&self.forest.forest_id, reason))
    }
}

fn forest_error(e: ForestError) -> EngineError {
    EngineError::Io(format!("search forest: {e}"))
}

/// An abandoned, rejected or unselected branch loses its workspace.
fn remove_slot(ctx: &Ctx<'_>, branch_id: &str) {
    let slot = ctx.slots.branch(branch_index(branch_id));
    // A slot that is already gone is fine; the next fork re-copies it.
    let _ = std::fs::remove_dir_all(slot);
}

/// How a step's forest ended.
enum StepEnd {
    Committed {
        decision: GateDecision,
        chosen: Box<Eligible>,
    },
    NoEligible,
    Cancelled,
    /// The gate refused the commit: its decision bound is reached.
    BoundReached {
        detail: String,
    },
}

/// A measured, eligible branch awaiting selection.
struct Eligible {
    branch_id: String,
    label: String,
    y: Snapshot,
    m: Measurement,
}

/// Runs the search from `start` (already measured).
pub(crate) async fn search(
    ctx: &Ctx<'_>,
    session: &mut Session,
    repair_id: &str,
    start: Accepted,
    options: &RepairOptions,
) -> Result<SearchResult, EngineError> {
    let max_branches = options
        .max_branches
        .clamp(1, 3)
        .min(ctx.config.exploration.max_branches);
    // Accepted states are stored relative to the generation's start x₀.
    let x0_snapshot = start.snapshot.clone();
    let (mut trajectory, mut accepted) = match session.continuation.take() {
        Some(continuation) => {
            continue_generation(ctx, session, continuation, start, max_branches).await?
        }
        None => {
            let x0 = Observation {
                root: start.snapshot.root,
                energy: start.measurement.energy(),
                hard_pass: start.measurement.hard_pass(),
            };
            let trajectory =
                AcceptedTrajectory::new(&session.node, session.generation, x0, ctx.config.gate);
            (trajectory, start)
        }
    };
    // Steps an interrupted run of this generation already took count
    // against `max_steps` as well.
    let continued_steps = trajectory.decisions.len();
    // Every state the generation accepted has been measured already.
    let mut measured_roots: BTreeSet<Digest> =
        trajectory.states.iter().map(|state| state.root).collect();
    let mut steps: Vec<StepReport> = Vec::new();
    let mut labels: Vec<String> = trajectory
        .decisions
        .iter()
        .filter(|d| d.verdict.accepted())
        .map(|d| format!("kept {} of the interrupted repair", d.candidate_id))
        .collect();
    let proposer = SuggestionProposer;
    // Clusters whose forest found nothing eligible at the current accepted
    // state; cleared when a step is accepted.
    let mut exhausted: BTreeSet<String> = BTreeSet::new();

    let status = loop {
        if ctx.cancel.is_cancelled() {
            break RepairStatus::Cancelled;
        }
        if continued_steps + steps.len() >= ctx.config.exploration.max_steps {
            break RepairStatus::ResidualsRemain;
        }
        let target = if steps.is_empty() {
            options.target_cluster.as_deref()
        } else {
            None
        };
        let Some(plan) = Plan::first_actionable(
            &accepted.measurement,
            target,
            |cluster| !exhausted.contains(&cluster.id),
            ctx.config,
            &proposer,
        ) else {
            let detail = if exhausted.is_empty() {
                "no cluster has a tool suggestion to try".to_owned()
            } else {
                format!(
                    "no branch was eligible for any cluster with a tool suggestion ({} tried)",
                    exhausted.len()
                )
            };
            ctx.ledger
                .append(&records::refused_no_candidate(repair_id, &detail))
                .map_err(io)?;
            break stopped_without_candidate(&trajectory);
        };
        let packet = &plan.packet;

        let mut step = StepReport {
            forest_id: String::new(),
            cluster_id: packet.cluster_id.clone(),
            cluster_title: packet.cluster_title.clone(),
            energy_before: accepted.measurement.energy(),
            branches: Vec::new(),
            decision: None,
        };
        let end = run_step(
            ctx,
            session,
            &mut trajectory,
            &accepted,
            &plan,
            max_branches,
            &mut measured_roots,
            &mut step,
        )
        .await?;
        let (decision, branch_id, label, y, m) = match end {
            StepEnd::Committed { decision, chosen } => {
                let Eligible {
                    branch_id,
                    label,
                    y,
                    m,
                } = *chosen;
                // Only eligible candidates are selected and a commit must equal
                // its preview, so a rejection here is a broken invariant.
                if !decision.verdict.accepted() {
                    return Err(EngineError::Io(format!(
                        "{}: the gate rejected a committed candidate whose preview it accepted",
                        decision.candidate_id
                    )));
                }
                (decision, branch_id, label, y, m)
            }
            StepEnd::Cancelled => {
                steps.push(step);
                break RepairStatus::Cancelled;
            }
            StepEnd::BoundReached { detail } => {
                ctx.ledger
                    .append(&records::refused_bound(
                        repair_id,
                        trajectory.bound(),
                        &detail,
                    ))
                    .map_err(io)?;
                steps.push(step);
                break RepairStatus::BoundReached;
            }
            StepEnd::NoEligible => {
                // This cluster is exhausted at this accepted state; the next
                // one with a suggestion gets its own forest.
                exhausted.insert(step.cluster_id.clone());
                steps.push(step);
                continue;
            }
        };
        step.decision = Some(decision.clone());
        steps.push(step);
        labels.push(label);
        exhausted.clear();

        // The accepted content lives on as an overlay over the user's disk,
        // so the slot can be reused by the next step.
        let accepted_source = DirSource::new(ctx.root.to_path_buf(), accepted.overlay.clone());
        let slot = ctx.slots.branch(branch_index(&branch_id));
        let mut overlay = accepted.overlay.clone();
        let changes = snapshot::diff(
            &accepted.snapshot,
            &accepted_source,
            &y,
            &DirSource::new(slot, Overlay::default()),
        )
        .map_err(io)?;
        for change in &changes {
            let Some(text) = change.new_text() else {
                // Accepted states are overlays of file contents over the user's disk.
                return Err(EngineError::Io(format!(
                    "{}: the selected candidate deletes this file; accepted states only hold file contents",
                    change.path()
                )));
            };
            overlay
                .buffers
                .insert(change.path().to_owned(), text.as_bytes().to_vec());
        }
        accepted = Accepted {
            snapshot: y,
            overlay,
            measurement: m,
        };
        store_accepted_state(
            ctx,
            session,
            &decision.candidate_id,
            &x0_snapshot,
            &accepted,
        )?;
        if decision.verdict == Verdict::AcceptedHardPass {
            break RepairStatus::HardPass;
        }
    };
    if let Some(forest) = session.resumed_forest.take() {
        // The loop ended before any step ran in it.
        ForestRun { ctx, forest }.close("no step ran from the resumed state")?;
    }
    Ok(SearchResult {
        status,
        steps,
        last: accepted,
        labels,
    })
}

/// Where accepted states' content is stored, under the workspace's `.trellis/`.
fn accepted_objects(ctx: &Ctx<'_>) -> std::path::PathBuf {
    ctx.root.join(".trellis").join("objects")
}

/// Stores a newly accepted state's content relative to x₀ (every file whose
/// entry differs) in the blob store and ledgers it, so a crash in a later
/// step can be continued from here. The blobs are written first: a row
/// never names content that is not on disk.
fn store_accepted_state(
    ctx: &Ctx<'_>,
    session: &Session,
    candidate_id: &str,
    x0: &Snapshot,
    accepted: &Accepted,
) -> Result<(), EngineError> {
    let files = blocking(|| -> Result<Vec<(String, Digest)>, String> {
        if let Some(path) = x0
            .entries
            .keys()
            .find(|path| !accepted.snapshot.entries.contains_key(*path))
        {
            return Err(format!(
                "`{path}`: the accepted state deletes this file; only file contents are stored"
            ));
        }
        let store = BlobStore::open(accepted_objects(ctx)).map_err(|e| e.to_string())?;
        let mut files = Vec::new();
        for (path, entry) in &accepted.snapshot.entries {
            if x0.entries.get(path) == Some(entry) {
                continue;
            }
            let content = accepted.overlay.get(path).ok_or_else(|| {
                format!("`{path}`: changed, but the accepted overlay holds no content for it")
            })?;
            let blob = store.put(content).map_err(|e| e.to_string())?;
            if blob != entry.blob {
                return Err(format!(
                    "`{path}`: the overlay's content is blob {}, the accepted snapshot's is {}",
                    blob.short(12),
                    entry.blob.short(12)
                ));
            }
            files.push((path.clone(), blob));
        }
        Ok(files)
    })
    .map_err(|e| {
        EngineError::Io(format!(
            "cannot store accepted state {candidate_id} under {}: {e}",
            accepted_objects(ctx).display()
        ))
    })?;
    ctx.ledger
        .append(&records::accepted_state_stored(
            &session.node,
            session.generation,
            candidate_id,
            accepted.snapshot.root,
            files,
        ))
        .map_err(io)?;
    Ok(())
}

/// Rebuilds a stored accepted state over the start view: x₀'s entries with
/// each stored file's blob, and that content, read back verified from the
/// blob store, in the overlay. The rebuilt root must be the recorded one.
fn rebuild_accepted(
    objects: &Path,
    start: (&Snapshot, &Overlay),
    stored: &ledger::AcceptedStateStored,
) -> Result<(Snapshot, Overlay), String> {
    let store = BlobStore::open(objects).map_err(|e| e.to_string())?;
    let mut entries = start.0.entries.clone();
    let mut overlay = start.1.clone();
    for file in &stored.files {
        snapshot::fsutil::check_rel_path(&file.path).map_err(|e| e.to_string())?;
        let content = store
            .get(&file.blob)
            .map_err(|e| format!("`{}`: {e}", file.path))?;
        let kind = entries
            .get(&file.path)
            .map_or(EntryKind::File { executable: false }, |entry| entry.kind);
        entries.insert(
            file.path.clone(),
            Entry {
                kind,
                blob: file.blob,
                size: content.len() as u64,
            },
        );
        overlay.buffers.insert(file.path.clone(), content);
    }
    let snapshot = Snapshot::from_entries(entries);
    if snapshot.root != stored.root {
        return Err(format!(
            "the stored files rebuild root {}, not the accepted root {}",
            snapshot.root.short(12),
            stored.root.short(12)
        ));
    }
    Ok((snapshot, overlay))
}

/// Continues an interrupted generation from its last accepted state
/// (errata 1, 25, 35): replays the recorded decisions through the gate,
/// rebuilds the accepted state from the stored blobs and checks its root,
/// then re-measures it in the resumed forest, which claims the interrupted
/// forest's usage and pays for the copy and the verifier run like any other
/// action. That forest stays open for the step at this state. Anything that
/// does not line up refuses the repair, naming the ledger and the reason.
async fn continue_generation(
    ctx: &Ctx<'_>,
    session: &mut Session,
    continuation: Continuation,
    start: Accepted,
    max_branches: usize,
) -> Result<(AcceptedTrajectory, Accepted), EngineError> {
    let prefix = format!(
        "{}: cannot continue the interrupted repair {}/{}",
        ctx.ledger.path().display(),
        session.node,
        session.generation
    );
    let refuse = |reason: &str| EngineError::Io(format!("{prefix}: {reason}"));
    let Continuation {
        x0,
        decisions,
        stored,
        measured,
    } = continuation;
    let trajectory = AcceptedTrajectory::replay(
        &session.node,
        session.generation,
        x0,
        ctx.config.gate,
        &decisions,
    )
    .map_err(|e| {
        refuse(&format!(
            "{e} (if `[gate]` changed since, restore it to continue; a changed workspace \
             starts a fresh attempt)"
        ))
    })?;
    if trajectory.is_terminal() {
        return Err(refuse("its trajectory already reached hard pass"));
    }
    if trajectory.current().root != stored.root {
        return Err(refuse(&format!(
            "its last accepted state is {}, but the stored state is {}",
            trajectory.current().root.short(12),
            stored.root.short(12)
        )));
    }
    let objects = accepted_objects(ctx);
    let (snapshot, overlay) =
        blocking(|| rebuild_accepted(&objects, (&start.snapshot, &start.overlay), &stored))
            .map_err(|e| {
                refuse(&format!(
                    "{e} (in {}; a changed workspace starts a fresh attempt)",
                    objects.display()
                ))
            })?;

    let mut run = open_forest(ctx, session, snapshot.root, max_branches)?;
    let measurement = match remeasure(&mut run, &snapshot, &overlay).await? {
        Ok(measurement) => measurement,
        Err(reason) => {
            run.close(&reason)?;
            return Err(refuse(&reason));
        }
    };
    if ctx.cancel.is_cancelled() {
        run.close("cancelled")?;
    } else if (measurement.energy(), measurement.hard_pass())
        != (measured.energy, measured.hard_pass)
    {
        let reason = format!(
            "accepted state {} re-measures at energy {} (hard pass: {}) but was accepted at \
             energy {} (hard pass: {}); the sensors no longer reproduce it",
            snapshot.root.short(12),
            measurement.energy(),
            measurement.hard_pass(),
            measured.energy,
            measured.hard_pass
        );
        run.close(&reason)?;
        return Err(refuse(&reason));
    } else {
        session.resumed_forest = Some(run.forest);
    }
    Ok((
        trajectory,
        Accepted {
            snapshot,
            overlay,
            measurement,
        },
    ))
}

/// Re-measures a rebuilt accepted state in branch slot 0, reserving the
/// copy and the verifier run against `run`'s budget first and settling
/// each. `Ok(Err(reason))` when the budget or the copy refuses.
async fn remeasure(
    run: &mut ForestRun<'_>,
    state: &Snapshot,
    overlay: &Overlay,
) -> Result<Result<Measurement, String>, EngineError> {
    let ctx = run.ctx;
    let files = state.entries.len() as u64;
    let bytes = state.total_bytes();
    let Some(reservation) = run.reserve(ActionKind::Fork { files, bytes })? else {
        return Ok(Err(
            "the resumed budget cannot pay for a copy of the accepted state".into(),
        ));
    };
    let slot = ctx.slots.branch(0);
    let source = DirSource::new(ctx.root.to_path_buf(), overlay.clone());
    let limits = CopyLimits {
        max_files: files.min(ctx.config.exploration.workspace_files),
        max_bytes: bytes.min(ctx.config.exploration.workspace_bytes),
    };
    let copy = blocking(|| snapshot::materialize(state, &source, &slot, limits));
    let actual = match &copy {
        Ok(r) => ActionKind::Fork {
            files: r.files,
            bytes: r.bytes,
        },
        // A failed copy is charged its whole reservation.
        Err(_) => ActionKind::Fork { files, bytes },
    };
    let (_, exceeded) = run.settle(reservation, actual)?;
    match copy {
        Err(e) => return Ok(Err(format!("the accepted state could not be copied: {e}"))),
        Ok(_) if exceeded => {
            return Ok(Err(
                "the copy of the accepted state exceeded its reservation".into(),
            ));
        }
        Ok(_) => {}
    }
    let Some(verifier) = run.reserve(ActionKind::VerifierRun)? else {
        return Ok(Err(
            "the resumed budget has no verifier run left to re-measure the accepted state".into(),
        ));
    };
    let m = measure(
        state.root,
        &slot,
        &ctx.slots.branch_target(),
        ctx.sensors,
        ctx.config,
        "the accepted state",
        ctx.progress,
        ctx.cancel,
    )
    .await;
    run.settle(verifier, ActionKind::VerifierRun)?;
    run.observe(
        "",
        &format!(
            "re-measured accepted state {} to continue the interrupted repair: energy {}",
            state.root.short(12),
            m.energy()
        ),
    )?;
    Ok(Ok(m))
}

/// The exact no-good components of trying `proposal` (see
/// [`proposal_digest`]) with `strategy` from the accepted state.
fn attempt_components(
    ctx: &Ctx<'_>,
    accepted: &Accepted,
    strategy: Strategy,
    proposal: Digest,
) -> NoGoodComponents {
    let mut required = ctx.config.stages.required.clone();
    required.sort();
    let mut manifest = CanonicalHasher::new("trellis.domain-manifest.v1");
    // The profile digests the sensor fingerprints, required stages and
    // energy model: the residual schema and verifier suite.
    manifest
        .digest(&accepted.measurement.profile)
        .u64(required.len() as u64);
    for stage in &required {
        manifest.str(stage);
    }
    // The hard-gate policy: a "no descent" verdict depends on ρ and B, which
    // may come from a layer outside the workspace (user config, editor).
    manifest
        .f64(ctx.config.gate.rho)
        .u64(u64::from(ctx.config.gate.rejection_budget));
    let mut sensors = CanonicalHasher::new("trellis.sensor-fingerprints.v1");
    sensors.u64(ctx.sensors.len() as u64);
    for s in ctx.sensors {
        let f = s.fingerprint();
        sensors.str(&f.tool).str(&f.version).str(&f.config);
    }
    NoGoodComponents {
        accepted_root: accepted.snapshot.root,
        domain_manifest: manifest.finish(),
        strategy: strategy.digest(),
        prompt_program: None,
        proposal,
        grant: grant_digest(),
        tool_catalog: tool_catalog_digest(),
        sensor_fingerprint: sensors.finish(),
        runtime_build: build_digest(),
    }
}

/// Opens the step's forest: claims an interrupted forest's usage if this
/// is its owner, ledgers `search_opened` and the first snapshot.
fn open_forest<'a>(
    ctx: &'a Ctx<'a>,
    session: &mut Session,
    accepted_root: Digest,
    max_branches: usize,
) -> Result<ForestRun<'a>, EngineError> {
    let binding = ForestBinding {
        node: session.node.clone(),
        generation: session.generation,
        accepted_root,
    };
    if let Some(forest) = session
        .resumed_forest
        .take_if(|forest| forest.accepted_root == accepted_root)
    {
        // Opened (and ledgered) by `continue_generation` already.
        return Ok(ForestRun { ctx, forest });
    }
    let forest_id = format!(
        "{}/{}/f{}",
        session.node, session.generation, session.next_forest
    );
    session.next_forest += 1;
    let seed = session.claim.open(&binding, ctx.config.exploration.limits);
    let forest = SearchForest::open(
        forest_id,
        binding,
        seed.budget,
        max_branches,
        seed.resumed_from,
    )
    .map_err(forest_error)?;
    let run = ForestRun { ctx, forest };
    run.append(&records::search_opened(&run.forest))?;
    if let Some(notice) = session.nogoods.key_only_notice() {
        run.observe("", &notice)?;
    }
    if let Some(bypass) = seed.bypass {
        // The interrupted forest can never be claimed by its owner now (its
        // attempt restarted under a new generation): close it, so the next
        // interruption is not mistaken for an ambiguous pair of searches.
        if let Some(close) =
            session.close_superseded(&bypass.interrupted_forest, &run.forest.forest_id)
        {
            run.append(&close)?;
        }
        run.observe(
            "",
            &format!(
                "interrupted forest {} belongs to {}/{} at root {}; this forest opened with a \
                 fresh budget and left that usage unclaimed",
                bypass.interrupted_forest,
                bypass.owner.node,
                bypass.owner.generation,
                bypass.owner.accepted_root.short(12)
            ),
        )?;
    }
    run.snapshot()?;
    Ok(run)
}

/// How many candidates a plan asks the proposer for: every alternative a
/// diagnostic probe may have to narrow down, far more than the branches
/// that could try them one by one.
const PLAN_CANDIDATES: usize = 16;

/// How an attempt is carried out by the deterministic proposer.
enum Realization<'p> {
    Candidate(&'p Candidate),
    /// A diagnostic probe picks the alternative in the branch.
    Probe,
}

/// A correction packet and the proposer's candidates for it: what a seed
/// (the accepted state or a partial checkpoint) offers to attempts.
pub(crate) struct Plan {
    packet: CorrectionPacket,
    candidates: Vec<Candidate>,
    /// The plan's identity (see [`Plan::digest`]), computed once: attempts
    /// are tracked and checkpoints named by it on every quantum.
    id: Digest,
}

impl Plan {
    /// The plan for the first cluster of `m` (`target` first, warnings
    /// never) that `worth` admits and the proposer has candidates for: the
    /// actionable evidence of a state.
    pub(crate) fn first_actionable(
        m: &Measurement,
        target: Option<&str>,
        worth: impl Fn(&crate::cluster::Cluster) -> bool,
        config: &Config,
        proposer: &dyn Proposer,
    ) -> Option<Plan> {
        let unavailable = m.unavailable();
        repair_order(m, target)
            .into_iter()
            .filter(|cluster| worth(cluster))
            .find_map(|cluster| {
                let packet = CorrectionPacket::for_cluster(
                    &m.assessment,
                    cluster,
                    &config.stages.required,
                    &unavailable,
                );
                let candidates = proposer.propose(&packet, PLAN_CANDIDATES);
                (!candidates.is_empty()).then(|| Plan::new(packet, candidates))
            })
    }

    /// The candidate that carries out `attempt`, if the deterministic
    /// proposer can: the single-fix suggestions, or one named alternative.
    /// A probe or a hand edit has no deterministic realization.
    fn realize(&self, attempt: &Attempt) -> Option<Realization<'_>> {
        match (attempt.operator, attempt.strategy) {
            (OperatorKind::ApplySuggestions, _) => self
                .candidates
                .iter()
                .find(|c| c.alternative.is_none())
                .map(Realization::Candidate),
            (OperatorKind::ChooseAlternative, Strategy::DiagnosticProbe) => self
                .candidates
                .iter()
                .any(|c| c.alternative.is_some())
                .then_some(Realization::Probe),
            (OperatorKind::ChooseAlternative, _) => self
                .candidates
                .iter()
                .find(|c| c.alternative.is_some() && c.alternative == attempt.alternative)
                .map(Realization::Candidate),
            (OperatorKind::Edit | OperatorKind::SatisfyCounterexample, _) => None,
        }
    }

    /// The attempt that `candidate` makes under `strategy`.
    fn attempt_for(candidate: &Candidate, strategy: Strategy) -> Attempt {
        let operator = match candidate.alternative {
            None => OperatorKind::ApplySuggestions,
            Some(_) => OperatorKind::ChooseAlternative,
        };
        Attempt {
            alternative: candidate.alternative,
            ..Attempt::new(operator, strategy, &candidate.proposer)
        }
    }

    /// The first attempt of a forest: the plan's best candidate, under the
    /// strategy that declares what it assumes; a choice with more
    /// alternatives than the forest has branches is probed instead.
    fn opening(&self, max_branches: usize) -> (Attempt, Option<&Candidate>) {
        let first = &self.candidates[0];
        if first.alternative.is_some() && probe_first(self.alternatives(), max_branches) {
            return (probe_attempt(&first.proposer), None);
        }
        let strategy = match first.alternative {
            None => Strategy::ApplySuggestions,
            Some(_) => Strategy::NextAlternative,
        };
        (Plan::attempt_for(first, strategy), Some(first))
    }

    /// The packet's operators, with a choice counted as the alternatives the
    /// proposer actually offers (it numbers one choice, at most
    /// [`PLAN_CANDIDATES`] of it), so expansion never asks for one it lacks.
    fn operators(&self) -> Vec<CorrectionOperator> {
        self.packet
            .operators
            .iter()
            .filter_map(|op| match op {
                CorrectionOperator::ChooseAlternative { .. } => {
                    let alternatives = self.alternatives();
                    (alternatives > 0)
                        .then_some(CorrectionOperator::ChooseAlternative { alternatives })
                }
                other => Some(other.clone()),
            })
            .collect()
    }

    fn alternatives(&self) -> usize {
        self.candidates
            .iter()
            .filter(|c| c.alternative.is_some())
            .count()
    }

    /// The evidence the strategy assumptions are checked against.
    fn context(&self, tried: &[Attempt], witnessed_partial: bool) -> StrategyContext {
        let taken = |c: &Candidate| {
            tried
                .iter()
                .any(|a| a.route == c.proposer && a.alternative == c.alternative)
        };
        StrategyContext {
            single_fix_suggestions: self
                .packet
                .operators
                .iter()
                .map(|op| match op {
                    CorrectionOperator::ApplySuggestions { count } => *count,
                    _ => 0,
                })
                .sum(),
            untried_alternatives: self
                .candidates
                .iter()
                .filter(|c| c.alternative.is_some() && !taken(c))
                .count(),
            localized_sites: self.packet.affected.spans.len() + self.packet.affected.tests.len(),
            witnessed_partial,
        }
    }

    fn new(packet: CorrectionPacket, candidates: Vec<Candidate>) -> Plan {
        let mut h = CanonicalHasher::new("trellis.correction-plan.v1");
        h.str(&packet.cluster_id).u64(candidates.len() as u64);
        for c in &candidates {
            h.digest(&c.digest());
        }
        Plan {
            id: h.finish(),
            packet,
            candidates,
        }
    }

    /// The plan's identity, as a partial checkpoint names its correction.
    fn digest(&self) -> Digest {
        self.id
    }
}

/// A partial checkpoint kept in its branch's slot, with the plan that
/// continuing it works from. It never enters the accepted fold.
struct KeptPartial {
    checkpoint: PartialCheckpointRef,
    branch_id: String,
    snapshot: Snapshot,
    measurement: Measurement,
    plan: Plan,
}

/// What one branch has shown so far: system 20's inputs.
struct Track {
    attempt: Attempt,
    energies: Vec<f64>,
    signatures: Vec<Digest>,
    local_retries_left: u32,
}

/// How one quantum ended.
enum QuantumEnd {
    /// Measured eligible: the branch awaits selection.
    Eligible(Box<Eligible>),
    /// Ineligible but actionable: kept as a partial checkpoint.
    Partial(Box<KeptPartial>),
    /// Rejected.
    Ineligible,
    /// Cancelled, or the budget closed the forest: nothing more runs.
    Stop,
}

/// The next quantum: an attempt, where it runs, and its candidate.
struct Quantum {
    attempt: Attempt,
    /// `Some(branch)`: that branch continues its own partial checkpoint;
    /// `None`: a new branch forks from `seed`.
    continues: Option<String>,
    seed: Seed,
    /// The candidate, or `None` while a diagnostic probe has yet to pick it.
    candidate: Option<Candidate>,
    /// Why it runs, for `branch_strategy_selected`.
    why: String,
}

impl Quantum {
    fn label(&self, plan: &Plan) -> String {
        match &self.candidate {
            Some(c) => c.label.clone(),
            None => format!(
                "diagnostic probe over {} alternatives of `{}`",
                plan.alternatives(),
                plan.packet.cluster_title
            ),
        }
    }
}

/// The no-good proposal component of a quantum: the candidate's digest (a
/// probe's is its plan's, since the probe's pick follows from it), bound to
/// the partial checkpoint it is applied on.
fn proposal_digest(quantum: &Quantum, plan: &Plan) -> Digest {
    let proposal = match &quantum.candidate {
        Some(candidate) => candidate.digest(),
        None => CanonicalHasher::new("trellis.probe.v1")
            .digest(&plan.digest())
            .finish(),
    };
    match &quantum.seed {
        Seed::Accepted => proposal,
        Seed::Partial(partial) => CanonicalHasher::new("trellis.proposal-on-partial.v1")
            .digest(&partial.digest())
            .digest(&proposal)
            .finish(),
    }
}

/// The residual signature of a cluster (system 20's recurrence test).
fn cluster_signature(cluster_id: &str) -> Digest {
    CanonicalHasher::new("trellis.residual-signature.v1")
        .str(cluster_id)
        .finish()
}

/// Signatures of a measurement's required clusters: its unresolved
/// obligations.
fn obligations(m: &Measurement) -> Vec<Digest> {
    repair_order(m, None)
        .into_iter()
        .map(|c| cluster_signature(&c.id))
        .collect()
}

/// Digest of the structured evidence measured at a state.
fn evidence_digest(m: &Measurement) -> Digest {
    let mut h = CanonicalHasher::new("trellis.partial-evidence.v1");
    h.digest(&m.profile).u64(m.assessment.clusters.len() as u64);
    for c in &m.assessment.clusters {
        h.str(&c.id).f64(c.energy);
    }
    h.finish()
}

/// One step: a forest over the accepted state. The first branch makes the
/// plan's opening attempt; after every quantum, system 20
/// ([`next_expansion`]) decides whether that branch continues its partial
/// checkpoint, a new branch opens (from the accepted root or from that
/// checkpoint), or the forest selects. Then selection and one commit.
#[allow(clippy::too_many_arguments)]
async fn run_step(
    ctx: &Ctx<'_>,
    session: &mut Session,
    trajectory: &mut AcceptedTrajectory,
    accepted: &Accepted,
    plan: &Plan,
    max_branches: usize,
    measured_roots: &mut BTreeSet<Digest>,
    step: &mut StepReport,
) -> Result<StepEnd, EngineError> {
    let mut run = open_forest(ctx, session, accepted.snapshot.root, max_branches)?;
    step.forest_id = run.id().to_owned();
    let targeted_before = packet_energy(&accepted.measurement, &plan.packet.cluster_id);
    let mut frontier = Frontier::new();
    let mut rank = 0u32;
    let mut eligible: Vec<Eligible> = Vec::new();
    // Attempts made in this forest, per plan: alternative #2 of one choice
    // is not alternative #2 of another.
    let mut tried: BTreeMap<Digest, Vec<Attempt>> = BTreeMap::new();
    let mut tracks: BTreeMap<String, Track> = BTreeMap::new();
    let mut partials: BTreeMap<Digest, KeptPartial> = BTreeMap::new();

    let (attempt, candidate) = plan.opening(max_branches);
    let mut next = Some(Quantum {
        why: match candidate {
            Some(_) => "the first branch applies the compiler's suggestion".to_owned(),
            None => format!(
                "{} alternatives and {max_branches} branches: a diagnostic probe narrows them first",
                plan.alternatives()
            ),
        },
        attempt,
        continues: None,
        seed: Seed::Accepted,
        candidate: candidate.cloned(),
    });
    while let Some(quantum) = next.take() {
        if ctx.cancel.is_cancelled() || run.forest.is_closed() {
            break;
        }
        // The seed the quantum starts from: its content, its measurement and
        // the plan its evidence offers.
        let (seed_snapshot, seed_source, seed_measurement, seed_plan) = match &quantum.seed {
            Seed::Accepted => (
                &accepted.snapshot,
                DirSource::new(ctx.root.to_path_buf(), accepted.overlay.clone()),
                &accepted.measurement,
                plan,
            ),
            Seed::Partial(p) => {
                let kept = partials
                    .get(&p.digest())
                    .ok_or_else(|| forest_error(ForestError::UnknownPartial(p.digest())))?;
                (
                    &kept.snapshot,
                    DirSource::new(
                        ctx.slots.branch(branch_index(&kept.branch_id)),
                        Overlay::default(),
                    ),
                    &kept.measurement,
                    &kept.plan,
                )
            }
        };
        let plan_tried = tried.entry(seed_plan.digest()).or_default();
        plan_tried.push(quantum.attempt.clone());
        let mut report = BranchReport {
            branch_id: quantum.continues.clone().unwrap_or_default(),
            label: quantum.label(seed_plan),
            proposer: quantum.attempt.route.clone(),
            strategy: quantum.attempt.strategy.name().to_owned(),
            proposal: proposal_digest(&quantum, seed_plan),
            root: None,
            energy: None,
            hard_pass: false,
            preview: None,
            stages: Vec::new(),
            clusters: Vec::new(),
            outcome: BranchOutcome::NotSelected,
        };
        let components =
            attempt_components(ctx, accepted, quantum.attempt.strategy, report.proposal);
        if let Some(key) = session.nogoods.suppresses(&components) {
            // Refused for free (erratum 21): no reservation, no branch.
            let reason = format!("refused: exact no-good {} (tried before)", key.short(12));
            run.observe(&report.branch_id, &format!("`{}`: {reason}", report.label))?;
            report.outcome = BranchOutcome::Ineligible { reason };
            step.branches.push(report);
            let refused = Track {
                attempt: quantum.attempt,
                energies: Vec::new(),
                signatures: Vec::new(),
                local_retries_left: 0,
            };
            next = next_quantum(
                &run,
                &refused,
                QuantumOutcome::Ineligible,
                (&accepted.snapshot, plan),
                &partials,
                quantum.continues.as_deref(),
                &mut tried,
                max_branches,
            )?;
            continue;
        }

        let (branch_id, slot) = match &quantum.continues {
            Some(branch_id) => (branch_id.clone(), ctx.slots.branch(branch_index(branch_id))),
            None => {
                match fork_branch(&mut run, &quantum, seed_snapshot, &seed_source, &mut report)? {
                    Some(forked) => forked,
                    None => {
                        step.branches.push(report);
                        break;
                    }
                }
            }
        };
        report.branch_id = branch_id.clone();
        let branch = run
            .forest
            .branch(&branch_id)
            .ok_or_else(|| forest_error(ForestError::UnknownBranch(branch_id.clone())))?
            .clone();
        let (obligations_now, residual) = match &quantum.seed {
            Seed::Partial(p) => (
                p.remaining_obligations.len() as u32,
                tracks
                    .get(&branch_id)
                    .and_then(|t| t.energies.last().copied())
                    .unwrap_or(targeted_before),
            ),
            Seed::Accepted => (
                obligations(&accepted.measurement).len() as u32,
                targeted_before,
            ),
        };
        // Only the branch about to run is live: expansion, not the frontier,
        // chose it; the frontier numbers its epochs and quanta.
        frontier.upsert(FrontierEntry::for_branch(
            &branch,
            false,
            obligations_now,
            residual,
            0,
        ));
        let Some(service) = frontier.serve() else {
            return Err(EngineError::Io(format!(
                "search forest {}: the frontier did not serve branch {branch_id}",
                run.id()
            )));
        };
        if service.opens_epoch {
            run.append(&records::epoch_started(run.id(), service.epoch))?;
            rank = 0;
        }
        rank += 1;
        run.append(&records::entry_served(
            run.id(),
            &service.branch_id,
            service.epoch,
            rank,
        ))?;
        run.forest.start(&branch_id).map_err(forest_error)?;
        if quantum.continues.is_some() {
            run.append(&records::strategy_selected(run.id(), &branch, &quantum.why))?;
        }
        ctx.progress.report(
            &format!("branch {branch_id}: {}", report.label),
            Some((100 * run.forest.branches.len() / (max_branches + 1)) as u32),
        );
        let track = tracks.entry(branch_id.clone()).or_insert_with(|| Track {
            attempt: quantum.attempt.clone(),
            energies: Vec::new(),
            signatures: Vec::new(),
            local_retries_left: ctx.config.exploration.local_retries,
        });
        if quantum.continues.is_some() {
            track.local_retries_left = track.local_retries_left.saturating_sub(1);
            track.attempt = quantum.attempt.clone();
        }
        let started = Instant::now();
        let candidate = match &quantum.candidate {
            Some(candidate) => Some(candidate.clone()),
            None => {
                let picked = probe_alternatives(
                    &mut run,
                    seed_plan,
                    seed_measurement,
                    seed_snapshot,
                    &seed_source,
                    &slot,
                    &branch_id,
                    tried
                        .get(&seed_plan.digest())
                        .map_or(&[][..], Vec::as_slice),
                )
                .await?;
                if let Some(candidate) = &picked {
                    report.label = candidate.label.clone();
                    tried.entry(seed_plan.digest()).or_default().push(Attempt {
                        alternative: candidate.alternative,
                        ..quantum.attempt.clone()
                    });
                }
                picked
            }
        };
        let end = match &candidate {
            _ if ctx.cancel.is_cancelled() || run.forest.is_closed() => {
                if report.outcome == BranchOutcome::NotSelected {
                    report.outcome = BranchOutcome::Ineligible {
                        reason: "the search stopped before the branch was measured".into(),
                    };
                }
                QuantumEnd::Stop
            }
            Some(candidate) => {
                run_quantum(
                    &mut run,
                    session,
                    trajectory,
                    accepted,
                    plan,
                    &quantum,
                    candidate,
                    &components,
                    &slot,
                    measured_roots,
                    targeted_before,
                    track,
                    &mut report,
                )
                .await?
            }
            None => {
                reject(
                    &mut run,
                    &mut report,
                    "the diagnostic probe implicated no alternative: none built better than \
                     the seed"
                        .into(),
                )?;
                QuantumEnd::Ineligible
            }
        };
        frontier.remove(&branch_id);
        run.charge_elapsed(started)?;
        step.branches.push(report);
        if quantum.continues.is_some() {
            // The slot moved on from the checkpoint it continued: that
            // checkpoint can seed nothing any more.
            partials.retain(|_, kept| kept.branch_id != branch_id);
        }
        let outcome = match end {
            QuantumEnd::Stop => break,
            QuantumEnd::Eligible(e) => {
                let hard = e.m.hard_pass();
                eligible.push(*e);
                if hard {
                    // Nothing can outrank a hard pass on key 1.
                    break;
                }
                QuantumOutcome::Eligible
            }
            QuantumEnd::Partial(kept) => {
                let checkpoint = kept.checkpoint.clone();
                partials.insert(checkpoint.digest(), *kept);
                QuantumOutcome::Partial(checkpoint)
            }
            QuantumEnd::Ineligible => QuantumOutcome::Ineligible,
        };
        next = next_quantum(
            &run,
            &tracks[&branch_id],
            outcome,
            (&accepted.snapshot, plan),
            &partials,
            Some(&branch_id),
            &mut tried,
            max_branches,
        )?;
    }
    finish_step(ctx, session, trajectory, accepted, run, eligible, step)
}

/// Asks system 20 what follows a quantum and turns its answer into one the
/// deterministic proposer can carry out. An attempt it cannot realize (a
/// probe, a hand edit) is observed, counted as tried, and expansion asked
/// again; `None` when nothing warrants another quantum.
#[allow(clippy::too_many_arguments)]
fn next_quantum(
    run: &ForestRun<'_>,
    track: &Track,
    outcome: QuantumOutcome,
    accepted: (&Snapshot, &Plan),
    partials: &BTreeMap<Digest, KeptPartial>,
    branch_id: Option<&str>,
    tried: &mut BTreeMap<Digest, Vec<Attempt>>,
    max_branches: usize,
) -> Result<Option<Quantum>, EngineError> {
    let kept = match &outcome {
        QuantumOutcome::Partial(p) => Some(
            partials
                .get(&p.digest())
                .ok_or_else(|| forest_error(ForestError::UnknownPartial(p.digest())))?,
        ),
        _ => None,
    };
    // The seed a new branch would start from, and the plan it works on.
    let (seed, plan) = match kept {
        Some(k) => (&k.snapshot, &k.plan),
        None => accepted,
    };
    let fork = ActionKind::Fork {
        files: seed.entries.len() as u64,
        bytes: seed.total_bytes(),
    };
    let tried = tried.entry(plan.digest()).or_default();
    let budget = run.forest.budget();
    let budget_remains =
        budget.admits(&fork).is_ok() && budget.admits(&ActionKind::VerifierRun).is_ok();
    loop {
        let state = ExpansionState {
            branches_opened: run.forest.branches.len(),
            max_branches,
            budget_remains,
            rho: run.ctx.config.gate.rho,
            current: BranchProgress {
                attempt: track.attempt.clone(),
                outcome: outcome.clone(),
                energies: track.energies.clone(),
                signatures: track.signatures.clone(),
                route_changed: false,
                local_retries_left: if kept.is_some() {
                    track.local_retries_left
                } else {
                    // A measured or rejected state has nothing left for the
                    // deterministic proposer to retry in place.
                    0
                },
                correction_empty: plan.packet.diagnostics.is_empty()
                    && plan.packet.counterexamples.is_empty(),
            },
            operators: plan.operators(),
            routes: vec![SuggestionProposer::ID.to_owned()],
            context: plan.context(tried, kept.is_some()),
            tried: tried.clone(),
        };
        match next_expansion(&state) {
            None => return Ok(None),
            Some(Expansion::ContinuePartial { partial }) => {
                let (Some(branch_id), Some(candidate)) = (branch_id, plan.candidates.first())
                else {
                    return Ok(None);
                };
                return Ok(Some(Quantum {
                    attempt: Plan::attempt_for(candidate, Strategy::LocalRepair),
                    continues: Some(branch_id.to_owned()),
                    why: format!(
                        "local repair continues partial checkpoint {} on `{}` ({} local \
                         retries left after this one)",
                        partial.digest().short(12),
                        plan.packet.cluster_title,
                        track.local_retries_left.saturating_sub(1)
                    ),
                    seed: Seed::Partial(partial),
                    candidate: Some(candidate.clone()),
                }));
            }
            Some(Expansion::Open {
                triggers,
                seed,
                attempt,
                novelty,
            }) => {
                let fired: Vec<&str> = triggers.iter().map(|t| t.name()).collect();
                let candidate = match plan.realize(&attempt) {
                    Some(Realization::Candidate(candidate)) => Some(Some(candidate.clone())),
                    Some(Realization::Probe) => Some(None),
                    None => None,
                };
                match candidate {
                    Some(candidate) => {
                        return Ok(Some(Quantum {
                            why: format!(
                                "{}: a new {} ({attempt})",
                                fired.join(", "),
                                novelty.name()
                            ),
                            attempt,
                            continues: None,
                            seed,
                            candidate,
                        }));
                    }
                    None => {
                        run.observe(
                            branch_id.unwrap_or_default(),
                            &format!(
                                "{}: expansion chose {attempt}, which the deterministic \
                                 proposer cannot carry out",
                                fired.join(", ")
                            ),
                        )?;
                        tried.push(attempt);
                    }
                }
            }
        }
    }
}

/// A diagnostic probe over a choice. Each untried alternative is applied
/// alone in the branch slot and measured by the build stage only (a
/// narrowed sensor run, reserved like any verifier run and never a gate
/// decision), then the slot is synced back to its seed. The probe
/// implicates the alternative that builds with the lowest energy, if that
/// is below the seed's; only that one is then edited and measured in full.
#[allow(clippy::too_many_arguments)]
async fn probe_alternatives(
    run: &mut ForestRun<'_>,
    plan: &Plan,
    seed_measurement: &Measurement,
    seed: &Snapshot,
    source: &DirSource,
    slot: &Path,
    branch_id: &str,
    tried: &[Attempt],
) -> Result<Option<Candidate>, EngineError> {
    let ctx = run.ctx;
    // The build stage alone: the narrowest run that says whether a choice
    // compiles.
    let Some(build) = ctx.sensors.iter().find(|s| s.stage() == "build") else {
        run.observe(branch_id, "no build stage to probe with")?;
        return Ok(None);
    };
    let narrowed_energy = |reports: &[StageReport]| assess(reports, &[], &EnergyModel::V1).energy;
    let seed_reports: Vec<StageReport> = seed_measurement
        .reports
        .iter()
        .filter(|r| r.stage == build.stage())
        .cloned()
        .collect();
    let seed_energy = narrowed_energy(&seed_reports);
    let untried = plan.candidates.iter().filter(|c| {
        c.alternative.is_some()
            && !tried
                .iter()
                .any(|a| a.route == c.proposer && a.alternative == c.alternative)
    });
    let mut best: Option<(f64, &Candidate)> = None;
    for candidate in untried {
        if ctx.cancel.is_cancelled() || run.forest.is_closed() {
            break;
        }
        let Some(reservation) = run.reserve(ActionKind::VerifierRun)? else {
            break;
        };
        let applied = blocking(|| apply_candidate(slot, candidate));
        let report = match &applied {
            Ok(()) => Some(
                build
                    .run(SensorRun {
                        dir: slot,
                        target_dir: &ctx.slots.branch_target(),
                        deadline: Duration::from_secs(ctx.config.stages.build_timeout_secs),
                        cancel: ctx.cancel.clone(),
                    })
                    .await,
            ),
            Err(_) => None,
        };
        run.settle(reservation, ActionKind::VerifierRun)?;
        // Syncing the slot back to its seed is a copy of what the probe
        // touched: reserved and settled like any other.
        if !restore_seed(run, candidate, seed, source, slot)? {
            // A slot that cannot be restored must not be edited further.
            run.observe(
                branch_id,
                "probe stopped: its slot could not be synced back to the seed",
            )?;
            return Ok(None);
        }
        let alternative = candidate.alternative.map_or(0, |i| i + 1);
        let energy = match (applied, report) {
            (Ok(()), Some(report))
                if !matches!(
                    report.status,
                    crate::sensor::StageStatus::Unavailable { .. }
                ) =>
            {
                narrowed_energy(std::slice::from_ref(&report))
            }
            (Err(reason), _) => {
                run.observe(
                    branch_id,
                    &format!(
                        "probe #{alternative} `{}`: not applicable: {reason}",
                        candidate.label
                    ),
                )?;
                continue;
            }
            _ => {
                run.observe(
                    branch_id,
                    &format!(
                        "probe #{alternative} `{}`: the build could not run",
                        candidate.label
                    ),
                )?;
                continue;
            }
        };
        run.observe(
            branch_id,
            &format!(
                "probe #{alternative} `{}`: build energy {energy:.2} (seed {seed_energy:.2})",
                candidate.label
            ),
        )?;
        if best.is_none_or(|(lowest, _)| energy < lowest) {
            best = Some((energy, candidate));
        }
    }
    Ok(best
        .filter(|(energy, _)| *energy < seed_energy)
        .map(|(_, candidate)| candidate.clone()))
}

/// Syncs a probed slot back to its seed under a reservation sized by the
/// files the probe's candidate touched. `false` when the budget refuses the
/// copy or it exceeded its reservation.
fn restore_seed(
    run: &mut ForestRun<'_>,
    candidate: &Candidate,
    seed: &Snapshot,
    source: &DirSource,
    slot: &Path,
) -> Result<bool, EngineError> {
    let touched: BTreeSet<&str> = candidate.edits.iter().map(|e| e.path.as_str()).collect();
    let files = touched.len() as u64;
    let bytes = touched
        .iter()
        .filter_map(|path| seed.entries.get(*path))
        .map(|entry| entry.size)
        .sum();
    let Some(reservation) = run.reserve(ActionKind::Fork { files, bytes })? else {
        return Ok(false);
    };
    let limits = CopyLimits {
        max_files: (seed.entries.len() as u64).min(run.ctx.config.exploration.workspace_files),
        max_bytes: seed
            .total_bytes()
            .min(run.ctx.config.exploration.workspace_bytes),
    };
    let synced = blocking(|| snapshot::materialize(seed, source, slot, limits));
    let actual = match &synced {
        // What the sync wrote; removing a file the build left copies nothing.
        Ok(r) => ActionKind::Fork {
            files: r.written,
            bytes,
        },
        Err(_) => ActionKind::Fork { files, bytes },
    };
    let (_, exceeded) = run.settle(reservation, actual)?;
    let synced = synced.map_err(io)?;
    if synced.root != seed.root {
        return Err(EngineError::Io(format!(
            "{}: the probe slot did not sync back to its seed",
            slot.display()
        )));
    }
    Ok(!exceeded)
}

/// Forks a new branch from a seed: reserve the seed's size, copy, settle
/// with what was copied, and check the copy's root. `None` (with the report
/// saying why) when no branch could be made; nothing more should be tried.
fn fork_branch(
    run: &mut ForestRun<'_>,
    quantum: &Quantum,
    seed: &Snapshot,
    source: &DirSource,
    report: &mut BranchReport,
) -> Result<Option<(String, std::path::PathBuf)>, EngineError> {
    let ctx = run.ctx;
    let files = seed.entries.len() as u64;
    let bytes = seed.total_bytes();
    let Some(reservation) = run.reserve(ActionKind::Fork { files, bytes })? else {
        report.outcome = BranchOutcome::Ineligible {
            reason: "the search budget has no fork left".into(),
        };
        return Ok(None);
    };
    let slot = ctx.slots.branch(run.forest.branches.len());
    let limits = CopyLimits {
        max_files: files.min(ctx.config.exploration.workspace_files),
        max_bytes: bytes.min(ctx.config.exploration.workspace_bytes),
    };
    let copy = blocking(|| snapshot::materialize(seed, source, &slot, limits));
    let actual = match &copy {
        Ok(r) => ActionKind::Fork {
            files: r.files,
            bytes: r.bytes,
        },
        // A failed copy is charged its whole reservation.
        Err(_) => ActionKind::Fork { files, bytes },
    };
    let (receipt, exceeded) = run.settle(reservation, actual)?;
    let copied = match copy {
        Err(e) => Err(e.to_string()),
        Ok(_) if exceeded => Err("the copy exceeded its reservation".to_owned()),
        Ok(r) if r.root != seed.root => Err("the copy's root differs from its seed".to_owned()),
        Ok(_) => Ok(()),
    };
    if let Err(reason) = copied {
        let _ = std::fs::remove_dir_all(&slot);
        run.observe("", &format!("`{}`: no branch: {reason}", report.label))?;
        report.outcome = BranchOutcome::Ineligible {
            reason: format!("the branch workspace could not be made: {reason}"),
        };
        return Ok(None);
    }
    if run.forest.is_closed() {
        let _ = std::fs::remove_dir_all(&slot);
        report.outcome = BranchOutcome::Ineligible {
            reason: "the search budget closed the forest".into(),
        };
        return Ok(None);
    }
    let spec = BranchSpec {
        strategy: quantum.attempt.strategy,
        route: quantum.attempt.route.clone(),
        prompt_program: None,
    };
    let branch = run
        .forest
        .fork(quantum.seed.clone(), spec, receipt)
        .map_err(forest_error)?
        .clone();
    run.append(&records::branch_forked(run.id(), &branch))?;
    run.append(&records::strategy_selected(run.id(), &branch, &quantum.why))?;
    Ok(Some((branch.branch_id, slot)))
}

/// Selects among the eligible branches and commits one (Proposition 5),
/// or closes the forest with nothing to commit.
fn finish_step(
    ctx: &Ctx<'_>,
    session: &Session,
    trajectory: &mut AcceptedTrajectory,
    accepted: &Accepted,
    mut run: ForestRun<'_>,
    mut eligible: Vec<Eligible>,
    step: &mut StepReport,
) -> Result<StepEnd, EngineError> {
    if ctx.cancel.is_cancelled() {
        run.close("cancelled")?;
        return Ok(StepEnd::Cancelled);
    }
    if eligible.is_empty() || run.forest.is_closed() {
        run.close("no eligible candidate")?;
        return Ok(StepEnd::NoEligible);
    }
    let selection = run
        .forest
        .select(accepted.measurement.profile)
        .map_err(forest_error)?;
    run.append(&records::search_selected(run.id(), &selection.selected))?;
    for loser in &selection.not_selected {
        remove_slot(ctx, loser);
        run.append(&records::search_not_selected(
            run.id(),
            loser,
            &selection.selected,
        ))?;
    }
    for r in &mut step.branches {
        if r.outcome == BranchOutcome::NotSelected && r.branch_id == selection.selected {
            r.outcome = BranchOutcome::Selected;
        }
    }
    let Some(position) = eligible
        .iter()
        .position(|e| e.branch_id == selection.selected)
    else {
        return Err(EngineError::Io(format!(
            "search forest {}: selected branch {} was never measured",
            run.id(),
            selection.selected
        )));
    };
    let chosen = eligible.swap_remove(position);
    let decision = match run.forest.commit(trajectory) {
        Ok(decision) => decision,
        Err(ForestError::Gate(refusal)) => {
            run.close("decision refused")?;
            return Ok(StepEnd::BoundReached {
                detail: refusal.to_string(),
            });
        }
        Err(e) => return Err(forest_error(e)),
    };
    ctx.ledger
        .append(&records::candidate_measured(
            &session.node,
            session.generation,
            &decision.candidate_id,
            &chosen.m,
        ))
        .map_err(io)?;
    ctx.ledger
        .append(&records::gate_decision(
            &session.node,
            session.generation,
            &decision,
        ))
        .map_err(io)?;
    run.append(&records::search_committed(
        run.id(),
        &chosen.branch_id,
        &decision.candidate_id,
    ))?;
    run.close("committed")?;
    Ok(StepEnd::Committed {
        decision,
        chosen: Box::new(chosen),
    })
}

/// How a repair ends when a step finds no eligible candidate: nothing
/// accepted at all, or residuals left after the accepted descents.
fn stopped_without_candidate(trajectory: &AcceptedTrajectory) -> RepairStatus {
    if trajectory.decisions.is_empty() {
        RepairStatus::NoEligibleCandidate
    } else {
        RepairStatus::ResidualsRemain
    }
}

/// One quantum of a running branch: realize the candidate in its slot,
/// measure it under a verifier reservation, and record what it showed. An
/// ineligible state whose evidence the proposer can still act on is kept as
/// a partial checkpoint; any other is rejected.
#[allow(clippy::too_many_arguments)]
async fn run_quantum(
    run: &mut ForestRun<'_>,
    session: &mut Session,
    trajectory: &AcceptedTrajectory,
    accepted: &Accepted,
    plan: &Plan,
    quantum: &Quantum,
    candidate: &Candidate,
    components: &NoGoodComponents,
    slot: &Path,
    measured_roots: &mut BTreeSet<Digest>,
    targeted_before: f64,
    track: &mut Track,
    report: &mut BranchReport,
) -> Result<QuantumEnd, EngineError> {
    let ctx = run.ctx;
    let branch_id = report.branch_id.clone();
    let seed_root = match &quantum.seed {
        Seed::Accepted => accepted.snapshot.root,
        Seed::Partial(p) => p.state_root,
    };
    let realized = blocking(|| {
        apply_candidate(slot, candidate).and_then(|()| {
            Snapshotter::new(slot, None)
                .snapshot(&Overlay::default())
                .map_err(|e| e.to_string())
        })
    });
    let y = match realized {
        Ok(y) => y,
        Err(reason) => {
            reject(
                run,
                report,
                format!("candidate could not be realized: {reason}"),
            )?;
            return Ok(QuantumEnd::Ineligible);
        }
    };
    report.root = Some(y.root);
    if y.root == seed_root {
        reject(run, report, "the candidate changed nothing".into())?;
        let support = Support::from_evidence(Evidence::UnchangedState { root: y.root });
        record_no_good(run, session, &branch_id, components, support)?;
        return Ok(QuantumEnd::Ineligible);
    }
    if run.forest.is_measured_root(&y.root) || measured_roots.contains(&y.root) {
        // Not re-measured (system 20): no verifier reservation.
        reject(run, report, "duplicate of an already measured state".into())?;
        return Ok(QuantumEnd::Ineligible);
    }

    let Some(verifier) = run.reserve(ActionKind::VerifierRun)? else {
        run.forest
            .abandon(&branch_id, "no verifier run left in the budget")
            .map_err(forest_error)?;
        run.abandoned(
            std::slice::from_ref(&branch_id),
            "no verifier run left in the budget",
        )?;
        report.outcome = BranchOutcome::Ineligible {
            reason: "the search budget has no verifier run left".into(),
        };
        return Ok(QuantumEnd::Stop);
    };
    let m = measure(
        y.root,
        slot,
        &ctx.slots.branch_target(),
        ctx.sensors,
        ctx.config,
        &format!("branch {branch_id}"),
        ctx.progress,
        ctx.cancel,
    )
    .await;
    let (receipt, _) = run.settle(verifier, ActionKind::VerifierRun)?;
    if !ctx.cancel.is_cancelled() {
        // Only a finished measurement makes a root "already measured".
        measured_roots.insert(y.root);
    }
    report.energy = Some(m.energy());
    report.hard_pass = m.hard_pass();
    report.preview = Some(trajectory.preview(&Observation {
        root: y.root,
        energy: m.energy(),
        hard_pass: m.hard_pass(),
    }));
    report.stages = m.stage_summaries(ctx.config);
    report.clusters = m
        .assessment
        .clusters
        .iter()
        .map(|c| c.title.clone())
        .collect();
    track.energies.push(m.energy());
    if let Some(dominant) = dominant_cluster(&m, &plan.packet.cluster_id) {
        track.signatures.push(cluster_signature(&dominant.id));
    }
    if run.forest.is_closed() {
        report.outcome = BranchOutcome::Ineligible {
            reason: "the search budget closed the forest".into(),
        };
        return Ok(QuantumEnd::Stop);
    }
    if ctx.cancel.is_cancelled() {
        run.forest
            .abandon(&branch_id, "cancelled")
            .map_err(forest_error)?;
        run.abandoned(std::slice::from_ref(&branch_id), "cancelled")?;
        report.outcome = BranchOutcome::Ineligible {
            reason: "cancelled".into(),
        };
        return Ok(QuantumEnd::Stop);
    }
    let observation = CandidateObservation {
        root: y.root,
        energy: m.energy(),
        hard_pass: m.hard_pass(),
        targeted_improvement: targeted_before - packet_energy(&m, &plan.packet.cluster_id),
        cost: m.cost_ms,
        profile: m.profile,
        barriers_hold: true,
        required_sensors_ran: m.required_ran(ctx.config),
    };
    let eligibility = run
        .forest
        .measure(&branch_id, &observation, trajectory, receipt)
        .map_err(forest_error)?;
    run.append(&records::search_candidate_measured(
        run.id(),
        &branch_id,
        y.root,
        m.energy(),
        m.hard_pass(),
    ))?;
    let reasons = match eligibility {
        Eligibility::Eligible => {
            return Ok(QuantumEnd::Eligible(Box::new(Eligible {
                branch_id,
                label: candidate.label.clone(),
                y,
                m,
            })));
        }
        Eligibility::Ineligible(reasons) => reasons,
    };
    let reason = if reasons.contains(&Ineligibility::RequiredSensorMissing) {
        format!(
            "a required stage could not run: {}",
            m.unavailable().join(", ")
        )
    } else if reasons.contains(&Ineligibility::NotDescending) {
        format!(
            "no descent: energy {:.2} is not below {:.2} − ρ",
            m.energy(),
            trajectory.v_best()
        )
    } else {
        "an operational barrier does not hold".to_owned()
    };
    // A state measured by every required stage and failing only on descent
    // is worth keeping when the proposer can act on a cluster whose
    // resolution alone would make the state eligible: evidence the branch
    // can still turn into a descent, not a pre-existing residual to carry.
    let bar = trajectory.v_best() - ctx.config.gate.rho;
    let actionable = (reasons == [Ineligibility::NotDescending])
        .then(|| {
            Plan::first_actionable(
                &m,
                None,
                |cluster| m.energy() - cluster.energy <= bar,
                ctx.config,
                &SuggestionProposer,
            )
        })
        .flatten();
    if let Some(next_plan) = actionable {
        let checkpoint = run
            .forest
            .checkpoint_partial(
                &branch_id,
                y.root,
                Some(next_plan.digest()),
                obligations(&m),
                evidence_digest(&m),
            )
            .map_err(forest_error)?;
        run.append(&records::partial_checkpointed(
            run.id(),
            &branch_id,
            &checkpoint,
        ))?;
        report.outcome = BranchOutcome::Partial {
            reason: format!(
                "{reason}; kept as partial checkpoint {} with `{}` to work on",
                checkpoint.digest().short(12),
                next_plan.packet.cluster_title
            ),
        };
        return Ok(QuantumEnd::Partial(Box::new(KeptPartial {
            checkpoint,
            branch_id,
            snapshot: y,
            measurement: m,
            plan: next_plan,
        })));
    }
    reject(run, report, reason)?;
    // Only deterministic evidence supports a no-good: a stage that could not
    // run is environmental, and a retry may succeed.
    let support = if observation.required_sensors_ran {
        dominant_cluster(&m, &plan.packet.cluster_id)
            .map(|cluster| {
                Support::from_evidence(Evidence::Cluster {
                    cluster,
                    assessment: &m.assessment,
                })
            })
            .unwrap_or(Err(crate::search::NoGoodRefusal::Empty))
    } else {
        Support::from_evidence(Evidence::Environmental(
            crate::search::Environmental::SensorUnavailable,
        ))
    };
    record_no_good(run, session, &branch_id, components, support)?;
    Ok(QuantumEnd::Ineligible)
}
/// The residual that best explains a branch's failure: the targeted
/// cluster if it survived, else the branch's first required one.
fn dominant_cluster<'m>(m: &'m Measurement, target: &str) -> Option<&'m crate::cluster::Cluster> {
    m.assessment
        .clusters
        .iter()
        .find(|c| c.id == target)
        .or_else(|| repair_order(m, None).into_iter().next())
}

/// Rejects a running branch, ledgers why, and removes its workspace.
fn reject(
    run: &mut ForestRun<'_>,
    report: &mut BranchReport,
    reason: String,
) -> Result<(), EngineError> {
    run.forest
        .reject(&report.branch_id, &reason)
        .map_err(forest_error)?;
    remove_slot(run.ctx, &report.branch_id);
    run.append(&records::search_ineligible(
        run.id(),
        &report.branch_id,
        &reason,
    ))?;
    report.outcome = BranchOutcome::Ineligible { reason };
    Ok(())
}

/// Records an exact no-good when the support is deterministic; a refused
/// support is kept only as an observation.
fn record_no_good(
    run: &ForestRun<'_>,
    session: &mut Session,
    branch_id: &str,
    components: &NoGoodComponents,
    support: Result<Support, crate::search::NoGoodRefusal>,
) -> Result<(), EngineError> {
    match support {
        Ok(support) => {
            if let Some(nogood) = session.nogoods.store.record(components.clone(), support) {
                run.append(&records::no_good_recorded(run.id(), branch_id, nogood))?;
            }
            Ok(())
        }
        Err(refusal) => run.observe(branch_id, &format!("no no-good recorded: {refusal}")),
    }
}

/// The slot of a branch: `b1` is slot 0. Branch ids come from
/// `SearchForest::fork`, so any other id is a broken invariant, never a slot
/// to guess (guessing could remove another branch's workspace).
fn branch_index(branch_id: &str) -> usize {
    branch_id
        .strip_prefix('b')
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| n.checked_sub(1))
        .unwrap_or_else(|| panic!("branch id {branch_id:?} is not one of b1, b2, ..."))
}

fn packet_energy(m: &Measurement, cluster_id: &str) -> f64 {
    m.assessment
        .clusters
        .iter()
        .find(|c| c.id == cluster_id)
        .map_or(0.0, |c| c.energy)
}

/// What the ledger says about one search forest: the `trellis status` and
/// `trellis/searchStatus` view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForestStatus {
    pub forest_id: String,
    pub node: String,
    pub generation: u32,
    pub accepted_root: Digest,
    pub resumed_from: Option<String>,
    /// The `search_closed` reason; `None` while (or if a crash left it) open.
    pub closed: Option<String>,
    pub branches: Vec<BranchStatus>,
    pub limits: BTreeMap<String, u64>,
    /// The last usage snapshot.
    pub usage: BTreeMap<String, u64>,
    /// Limits minus usage, counter by counter.
    pub remaining: BTreeMap<String, u64>,
    /// No-goods this forest recorded.
    pub no_goods: usize,
}

/// One branch's last recorded state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BranchStatus {
    pub branch_id: String,
    /// `opened`, `measured`, `partial_checkpointed`, `ineligible`,
    /// `not_selected`, `abandoned`, `selected` or `committed`.
    pub state: String,
    pub reason: Option<String>,
}

/// The search plane as the ledger records it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchStatus {
    /// The forests of the most recent repair attempt (one node and
    /// generation), in the order they opened.
    pub forests: Vec<ForestStatus>,
    /// Every exact no-good recorded in the ledger (distinct keys).
    pub no_goods: usize,
    /// Search rows of a newer envelope version: shown, never interpreted.
    pub unreadable_rows: usize,
}

impl SearchStatus {
    /// Folds the status from ledger rows (in seq order). Display only: it
    /// never decides anything, so it tolerates what replay would refuse.
    pub fn from_rows(rows: &[ledger::Row]) -> SearchStatus {
        let mut forests: Vec<ForestStatus> = Vec::new();
        let mut keys: BTreeSet<Digest> = BTreeSet::new();
        let mut unreadable_rows = 0;
        for row in rows {
            let event = match &row.event {
                ledger::DecodedRow::Search { event, .. } => event,
                ledger::DecodedRow::UnknownVersion { .. } => {
                    unreadable_rows += 1;
                    continue;
                }
                ledger::DecodedRow::Ledger(_) => continue,
            };
            if let SearchEvent::SearchOpened {
                forest_id,
                node,
                generation,
                accepted_root,
                limits,
                resumed_from,
                ..
            } = event
            {
                forests.push(ForestStatus {
                    forest_id: forest_id.clone(),
                    node: node.clone(),
                    generation: *generation,
                    accepted_root: *accepted_root,
                    resumed_from: resumed_from.clone(),
                    closed: None,
                    branches: Vec::new(),
                    remaining: limits.clone(),
                    limits: limits.clone(),
                    usage: BTreeMap::new(),
                    no_goods: 0,
                });
                continue;
            }
            if let SearchEvent::NoGoodRecorded { key, .. } = event {
                keys.insert(*key);
            }
            let Some(forest) = forests
                .iter_mut()
                .rev()
                .find(|f| f.forest_id == event.forest_id())
            else {
                continue;
            };
            forest.apply(event);
        }
        let forests = match forests.last().map(|f| (f.node.clone(), f.generation)) {
            Some((node, generation)) => forests
                .into_iter()
                .filter(|f| f.node == node && f.generation == generation)
                .collect(),
            None => Vec::new(),
        };
        SearchStatus {
            forests,
            no_goods: keys.len(),
            unreadable_rows,
        }
    }
}

impl ForestStatus {
    fn set_branch(&mut self, branch_id: &str, state: &str, reason: Option<&str>) {
        let status = BranchStatus {
            branch_id: branch_id.to_owned(),
            state: state.to_owned(),
            reason: reason.map(str::to_owned),
        };
        match self.branches.iter_mut().find(|b| b.branch_id == branch_id) {
            Some(b) => *b = status,
            None => self.branches.push(status),
        }
    }

    fn apply(&mut self, event: &SearchEvent) {
        match event {
            SearchEvent::BranchForked { branch_id, .. } => {
                self.set_branch(branch_id, "opened", None)
            }
            SearchEvent::BranchCandidateMeasured { branch_id, .. } => {
                self.set_branch(branch_id, "measured", None)
            }
            SearchEvent::PartialCheckpointed { branch_id, .. } => {
                self.set_branch(branch_id, "partial_checkpointed", None)
            }
            SearchEvent::BranchIneligible {
                branch_id, reason, ..
            } => self.set_branch(branch_id, "ineligible", Some(reason)),
            SearchEvent::BranchNotSelected {
                branch_id, reason, ..
            } => self.set_branch(branch_id, "not_selected", Some(reason)),
            SearchEvent::BranchAbandoned {
                branch_id, reason, ..
            } => self.set_branch(branch_id, "abandoned", Some(reason)),
            SearchEvent::BranchSelected { branch_id, .. } => {
                self.set_branch(branch_id, "selected", None)
            }
            SearchEvent::BranchCommitted { branch_id, .. } => {
                self.set_branch(branch_id, "committed", None)
            }
            SearchEvent::NoGoodRecorded { .. } => self.no_goods += 1,
            SearchEvent::SearchUsageSnapshot { usage, .. } => {
                self.remaining = self
                    .limits
                    .iter()
                    .map(|(k, limit)| {
                        (
                            k.clone(),
                            limit.saturating_sub(usage.get(k).copied().unwrap_or(0)),
                        )
                    })
                    .collect();
                self.usage = usage.clone();
            }
            SearchEvent::SearchClosed { reason, .. } => self.closed = Some(reason.clone()),
            _ => {}
        }
    }

    /// How many branches are in `state`.
    pub fn count(&self, state: &str) -> usize {
        self.branches.iter().filter(|b| b.state == state).count()
    }
}

#[cfg(test)]
mod tests {
    //! Resume rules at session start, over real ledgers in temp dirs.

    use super::*;
    use crate::digest::blob_digest;
    use crate::search::NoGoodKey;
    use crate::search::nogood::test_components::{components, with_component};

    fn opened(forest_id: &str, node: &str, generation: u32, root: Digest) -> SearchEvent {
        SearchEvent::SearchOpened {
            forest_id: forest_id.into(),
            branch_id: String::new(),
            node: node.into(),
            generation,
            accepted_root: root,
            limits: Counters::DEFAULT_LIMITS.to_snapshot(),
            resumed_from: None,
        }
    }

    fn usage(forest_id: &str, actions: u64) -> SearchEvent {
        let mut usage = Counters::ZERO;
        usage.actions = actions;
        usage.verifier_runs = 1;
        SearchEvent::SearchUsageSnapshot {
            forest_id: forest_id.into(),
            branch_id: String::new(),
            usage: usage.to_snapshot(),
        }
    }

    fn ledger_with(events: &[SearchEvent]) -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path()).unwrap();
        for event in events {
            ledger.append_search(event).unwrap();
        }
        (dir, ledger)
    }

    #[test]
    fn a_fresh_ledger_starts_generation_zero_of_the_roots_node() {
        let root = blob_digest(b"x0");
        let (_dir, ledger) = ledger_with(&[]);
        let session = Session::begin(&ledger, root).unwrap();
        assert_eq!(session.node, records::node_id(&root));
        assert_eq!((session.generation, session.next_forest), (0, 1));
        assert!(!session.x0_recorded);
    }

    #[test]
    fn the_owner_of_an_interrupted_forest_resumes_it_without_refill() {
        let root = blob_digest(b"x0");
        let node = records::node_id(&root);
        let (_dir, ledger) = ledger_with(&[opened("f", &node, 2, root), usage("f", 5)]);
        let mut session = Session::begin(&ledger, root).unwrap();
        assert_eq!(
            session.generation, 2,
            "the interrupted generation continues"
        );
        assert_eq!(session.next_forest, 2, "forest ids stay unique");
        let binding = ForestBinding {
            node,
            generation: 2,
            accepted_root: root,
        };
        let seed = session.claim.open(&binding, Counters::DEFAULT_LIMITS);
        assert_eq!(seed.resumed_from.as_deref(), Some("f"));
        assert_eq!(seed.budget.usage().actions, 5);
    }

    #[test]
    fn another_root_gets_a_fresh_generation_and_leaves_the_usage_unclaimed() {
        let root = blob_digest(b"x0");
        let other = blob_digest(b"edited");
        let node = records::node_id(&other);
        let (_dir, ledger) = ledger_with(&[
            opened("f", &records::node_id(&root), 0, root),
            usage("f", 5),
            opened("g", &node, 0, other),
            SearchEvent::SearchClosed {
                forest_id: "g".into(),
                branch_id: String::new(),
                reason: "committed".into(),
            },
        ]);
        let mut session = Session::begin(&ledger, other).unwrap();
        assert_eq!(session.generation, 1);
        let binding = ForestBinding {
            node,
            generation: 1,
            accepted_root: other,
        };
        let seed = session.claim.open(&binding, Counters::DEFAULT_LIMITS);
        assert_eq!(seed.resumed_from, None);
        assert!(seed.bypass.is_some(), "the bypass is recorded, not silent");
    }

    #[test]
    fn a_bypassed_forest_is_closed_once_so_a_later_crash_is_not_ambiguous() {
        let root = blob_digest(b"x0");
        let other = blob_digest(b"edited");
        let node = records::node_id(&other);
        let (_dir, ledger) = ledger_with(&[
            opened("f", &records::node_id(&root), 0, root),
            usage("f", 5),
        ]);
        let mut session = Session::begin(&ledger, other).unwrap();
        let binding = ForestBinding {
            node: node.clone(),
            generation: session.generation,
            accepted_root: other,
        };
        let bypass = session
            .claim
            .open(&binding, Counters::DEFAULT_LIMITS)
            .bypass
            .unwrap();
        let close = session
            .close_superseded(&bypass.interrupted_forest, "g")
            .expect("closed the first time");
        assert!(
            session
                .close_superseded(&bypass.interrupted_forest, "h")
                .is_none(),
            "closed once only"
        );
        ledger.append_search(&close).unwrap();
        // The new search is interrupted too: one unclosed forest, not two.
        ledger
            .append_search(&opened("g", &node, session.generation, other))
            .unwrap();
        Session::begin(&ledger, other).expect("a single interrupted search resumes");
    }

    #[test]
    fn two_unclosed_forests_refuse_the_repair_and_name_both() {
        let root = blob_digest(b"x0");
        let node = records::node_id(&root);
        let (_dir, ledger) = ledger_with(&[
            opened("f-one", &node, 0, root),
            opened("f-two", &node, 1, root),
        ]);
        let Err(err) = Session::begin(&ledger, root) else {
            panic!("an ambiguous ledger must be refused");
        };
        let message = err.to_string();
        assert!(
            message.contains("f-one") && message.contains("f-two"),
            "{message}"
        );
    }

    #[test]
    fn status_counts_branch_states_remaining_limits_and_no_goods() {
        let root = blob_digest(b"x0");
        let (_dir, ledger) = ledger_with(&[
            opened("f", "n", 0, root),
            usage("f", 5),
            records::search_ineligible("f", "b1", "no descent"),
            SearchEvent::NoGoodRecorded {
                forest_id: "f".into(),
                branch_id: "b1".into(),
                key: blob_digest(b"key"),
                support_kind: "compiler_code".into(),
                evidence_digest: blob_digest(b"evidence"),
                components: None,
                support: None,
            },
            records::search_closed("f", "no eligible candidate"),
        ]);
        let status = SearchStatus::from_rows(&ledger.rows().unwrap());
        let forest = &status.forests[0];
        assert_eq!(forest.count("ineligible"), 1);
        assert_eq!(forest.closed.as_deref(), Some("no eligible candidate"));
        assert_eq!(
            forest.remaining["actions"],
            Counters::DEFAULT_LIMITS.actions - 5
        );
        assert_eq!((forest.no_goods, status.no_goods), (1, 1));
    }

    /// A session folded from a real ledger in which forest `f` recorded an
    /// exact no-good for `recorded`.
    fn session_restoring(recorded: &NoGoodComponents) -> Session {
        let root = blob_digest(b"x0");
        let nogood = crate::search::NoGood::new(
            recorded.clone(),
            Support::UnchangedState {
                root: recorded.accepted_root,
            },
        );
        let (_dir, ledger) = ledger_with(&[
            opened("f", &records::node_id(&root), 0, root),
            records::no_good_recorded("f", "b1", &nogood),
            records::search_closed("f", "no eligible candidate"),
        ]);
        Session::begin(&ledger, root).unwrap()
    }

    #[test]
    fn gate_ab_a_restored_no_good_matches_only_when_every_component_is_equal() {
        let recorded = components(&[7; 9]);
        let session = session_restoring(&recorded);
        assert!(session.nogoods.suppresses(&recorded).is_some());
        for index in 0..9 {
            let changed = with_component(recorded.clone(), index, blob_digest(b"changed"));
            assert!(
                session.nogoods.suppresses(&changed).is_none(),
                "component {index} changed, yet the restored no-good matched"
            );
        }
        let mut no_program = recorded;
        no_program.prompt_program = None;
        assert!(session.nogoods.suppresses(&no_program).is_none());
    }

    #[test]
    fn a_key_only_no_good_is_counted_and_noted_once_but_never_matches() {
        let root = blob_digest(b"x0");
        let attempt = components(&[3; 9]);
        // An older trellis recorded exactly this attempt's key, without components.
        let (_dir, ledger) = ledger_with(&[
            opened("f", &records::node_id(&root), 0, root),
            SearchEvent::NoGoodRecorded {
                forest_id: "f".into(),
                branch_id: "b1".into(),
                key: NoGoodKey::of(&attempt).digest(),
                support_kind: "unchanged_state".into(),
                evidence_digest: blob_digest(b"evidence"),
                components: None,
                support: None,
            },
            records::search_closed("f", "no eligible candidate"),
        ]);
        let mut session = Session::begin(&ledger, root).unwrap();
        assert!(session.nogoods.suppresses(&attempt).is_none());
        assert_eq!(session.nogoods.key_only.len(), 1);
        let notice = session.nogoods.key_only_notice().expect("noted");
        assert!(notice.contains("never matched"), "{notice}");
        assert!(session.nogoods.key_only_notice().is_none(), "once");
        assert_eq!(SearchStatus::from_rows(&ledger.rows().unwrap()).no_goods, 1);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Gate AB over the ledger: a no-good written by one process and
        /// restored by the next never matches an attempt that differs from
        /// it in any one component.
        #[test]
        fn gate_ab_unequal_keys_never_match_after_a_restore(
            seed in proptest::prelude::any::<[u8; 9]>(),
            index in 0usize..9,
            replacement in proptest::prelude::any::<[u8; 32]>(),
        ) {
            let recorded = components(&seed);
            let session = session_restoring(&recorded);
            proptest::prop_assert!(session.nogoods.suppresses(&recorded).is_some());
            let probe = with_component(recorded.clone(), index, Digest(replacement));
            if probe != recorded {
                proptest::prop_assert!(session.nogoods.suppresses(&probe).is_none());
            }
        }
    }

    // -- continuing a generation after an accepted step ---------------------

    /// A ledger in which generation 0 of `x0`'s node accepted `c1` at `y1`
    /// (stored when `store` says so), then opened forest `f2` at `forest_root`.
    fn accepted_then_interrupted(
        x0: Digest,
        x0_measured_at: Digest,
        store: bool,
        forest_root: Digest,
    ) -> (tempfile::TempDir, Ledger) {
        let node = records::node_id(&x0);
        let y1 = blob_digest(b"y1");
        let measured = |id: &str, root: Digest, energy: f64| {
            ledger::LedgerEvent::CandidateMeasured(ledger::CandidateMeasured {
                node: node.clone(),
                generation: 0,
                candidate_id: format!("{node}/0/{id}"),
                root,
                energy,
                hard_pass: false,
                clusters: vec![],
                stages: vec![],
            })
        };
        let f1 = format!("{node}/0/f1");
        let (dir, ledger) = ledger_with(&[]);
        ledger.append(&measured("x0", x0_measured_at, 4.0)).unwrap();
        ledger.append_search(&opened(&f1, &node, 0, x0)).unwrap();
        ledger.append(&measured("c1", y1, 2.0)).unwrap();
        let decision = GateDecision {
            candidate_id: format!("{node}/0/c1"),
            index: 0,
            verdict: Verdict::AcceptedDescent,
            root: y1,
            observed_energy: 2.0,
            best_before: 4.0,
        };
        ledger
            .append(&records::gate_decision(&node, 0, &decision))
            .unwrap();
        ledger
            .append_search(&records::search_closed(&f1, "committed"))
            .unwrap();
        if store {
            ledger
                .append(&records::accepted_state_stored(
                    &node,
                    0,
                    &decision.candidate_id,
                    y1,
                    vec![("src/lib.rs".into(), blob_digest(b"fixed"))],
                ))
                .unwrap();
        }
        for event in [
            opened(&format!("{node}/0/f2"), &node, 0, forest_root),
            usage(&format!("{node}/0/f2"), 3),
        ] {
            ledger.append_search(&event).unwrap();
        }
        (dir, ledger)
    }

    #[test]
    fn a_forest_at_the_last_stored_accepted_state_continues_its_generation() {
        let x0 = blob_digest(b"x0");
        let y1 = blob_digest(b"y1");
        let (_dir, ledger) = accepted_then_interrupted(x0, x0, true, y1);
        let mut session = Session::begin(&ledger, x0).unwrap();
        assert_eq!((session.generation, session.next_forest), (0, 3));
        assert!(session.x0_recorded);
        let continuation = session.continuation.take().expect("continued");
        assert_eq!((continuation.x0.root, continuation.x0.energy), (x0, 4.0));
        assert_eq!(continuation.decisions.len(), 1);
        assert_eq!(continuation.decisions[0].verdict, Verdict::AcceptedDescent);
        assert_eq!(continuation.stored.root, y1);
        assert_eq!(continuation.measured.energy, 2.0);
        let binding = ForestBinding {
            node: session.node.clone(),
            generation: 0,
            accepted_root: y1,
        };
        let seed = session.claim.open(&binding, Counters::DEFAULT_LIMITS);
        assert_eq!(seed.resumed_from, Some(format!("{}/0/f2", session.node)));
        assert_eq!(seed.budget.usage().actions, 3, "no refill");
    }

    #[test]
    fn an_unstored_or_older_accepted_state_starts_a_new_generation() {
        let x0 = blob_digest(b"x0");
        let y1 = blob_digest(b"y1");
        // Written by a trellis that did not store accepted states.
        let (_dir, ledger) = accepted_then_interrupted(x0, x0, false, y1);
        let session = Session::begin(&ledger, x0).unwrap();
        assert_eq!(session.generation, 1);
        assert!(session.continuation.is_none());
        // A forest at x0 although the generation accepted y1 since.
        let (_dir, ledger) = accepted_then_interrupted(x0, x0, true, x0);
        let session = Session::begin(&ledger, x0).unwrap();
        assert_eq!(session.generation, 1);
        assert!(session.continuation.is_none());
    }

    #[test]
    fn a_generation_whose_start_was_measured_elsewhere_is_refused() {
        let x0 = blob_digest(b"x0");
        let (_dir, ledger) =
            accepted_then_interrupted(x0, blob_digest(b"elsewhere"), true, blob_digest(b"y1"));
        let Err(err) = Session::begin(&ledger, x0) else {
            panic!("a contradictory record must be refused");
        };
        let message = err.to_string();
        assert!(
            message.contains("ledger.db") && message.contains("/0/x0 was measured at"),
            "{message}"
        );
    }

    #[test]
    fn a_stored_state_is_rebuilt_over_the_start_view_and_its_root_checked() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let file = |content: &[u8]| Entry {
            kind: EntryKind::File { executable: false },
            blob: blob_digest(content),
            size: content.len() as u64,
        };
        let start = Snapshot::from_entries(BTreeMap::from([
            ("Cargo.toml".to_owned(), file(b"[package]")),
            ("src/lib.rs".to_owned(), file(b"old")),
        ]));
        let accepted = Snapshot::from_entries(BTreeMap::from([
            ("Cargo.toml".to_owned(), file(b"[package]")),
            ("src/lib.rs".to_owned(), file(b"new")),
        ]));
        let stored = |path: &str, root: Digest| ledger::AcceptedStateStored {
            node: "n".into(),
            generation: 0,
            candidate_id: "n/0/c1".into(),
            root,
            files: vec![ledger::StoredFile {
                path: path.into(),
                blob: blob_digest(b"new"),
            }],
        };
        let start_view = (&start, &Overlay::default());

        let missing = rebuild_accepted(&objects, start_view, &stored("src/lib.rs", accepted.root))
            .unwrap_err();
        assert!(
            missing.contains("`src/lib.rs`") && missing.contains("not in the store"),
            "{missing}"
        );

        BlobStore::open(&objects).unwrap().put(b"new").unwrap();
        let (rebuilt, overlay) =
            rebuild_accepted(&objects, start_view, &stored("src/lib.rs", accepted.root)).unwrap();
        assert_eq!(rebuilt, accepted);
        assert_eq!(overlay.get("src/lib.rs"), Some(&b"new"[..]));

        let moved = rebuild_accepted(&objects, start_view, &stored("src/main.rs", accepted.root))
            .unwrap_err();
        assert!(moved.contains("rebuild root"), "{moved}");
        let escaping = rebuild_accepted(&objects, start_view, &stored("../lib.rs", accepted.root))
            .unwrap_err();
        assert!(escaping.contains("../lib.rs"), "{escaping}");
    }
}
