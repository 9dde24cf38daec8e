//! The metered effects: the only code in the runtime that copies into a
//! branch slot, runs a sensor, or moves a forest's budget.
//!
//! [`ForestRun`] is one open forest and the ledger it writes to. Each
//! action is one method that reserves against the forest's budget, acts,
//! settles with actuals and ledgers the usage snapshot after each budget
//! move (erratum 14), so "every action is reserved first" holds by
//! construction: `reserve` and `settle` are private to this file, and so
//! is every call of `materialize`, `measure` and `Sensor::run`. A crash
//! therefore resumes with at least what was reserved. A refused
//! reservation is ledgered as an observation and returned as `None`; the
//! step decides what follows.
//!
//! It must never decide: which branch to open, whether a state is
//! eligible, what to select or commit is the step's. It writes no user
//! file, and a closed forest writes nothing more.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::actor::ContextEvent;
use crate::actor::{
    ActorContext, ActorOutcome, Attempt, BoxFuture, BranchVerifier, FailoverChain, PreparedRequest,
    PromptInputs, StopReason, TurnLedger, TurnLimits, TurnRecord, TurnUsage, VerifierReport,
    run_actor,
};
use crate::context::Residency;
use crate::digest::Digest;
use crate::edit;
use crate::error::EngineError;
use crate::gate::{AcceptedTrajectory, GateDecision};
use crate::language::{StageRole, stage_role};
use crate::ledger::SearchEvent;
use crate::measure::{Measurement, Run, measure};
use crate::propose::Candidate;
use crate::records;
use crate::runtime::blocking;
use crate::search::{
    ActionKind, BranchSpec, CandidateObservation, Eligibility, ForestBinding, ForestError,
    NoGoodComponents, NoGoodRefusal, PartialCheckpointRef, Receipt, Reservation, SearchBranch,
    SearchForest, Seed, Selection, Support,
};
use crate::sensor::oracle::OracleVerdict;
use crate::sensor::original_tests::{self, Plan};
use crate::sensor::{Sensor, SensorRun, StageReport};
use crate::snapshot::{
    self, CopyLimits, DirSource, MaterializeReport, Overlay, Snapshot, SnapshotError, Snapshotter,
};

use super::Ctx;
use super::session::Session;
use crate::report::{BranchOutcome, BranchReport, NotUsed};

/// One forest and the ledger it writes to: every budget move is followed by
/// a usage snapshot, and a closed forest writes nothing more.
pub(super) struct ForestRun<'a> {
    pub(super) ctx: &'a Ctx<'a>,
    forest: SearchForest,
}

/// What a probe's narrowed build showed.
pub(super) enum Probed {
    /// The budget refused the reservation.
    Refused,
    /// The candidate does not apply to the slot, and why.
    NotApplicable(String),
    Built(Box<StageReport>),
}

/// What a metered copy did: its settled receipt, whether it copied more
/// than it reserved, and the copy itself.
pub(super) struct Copied {
    pub(super) receipt: Receipt,
    pub(super) exceeded: bool,
    pub(super) copy: Result<MaterializeReport, SnapshotError>,
}

impl<'a> ForestRun<'a> {
    /// Opens the step's forest: claims an interrupted forest's usage if this
    /// is its owner, ledgers `search_opened` and the first snapshot.
    pub(super) fn open(
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
            // Opened (and ledgered) when the generation was continued.
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
        )?;
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

    /// The forest a continued generation opened and no step ran in.
    pub(super) fn resumed(ctx: &'a Ctx<'a>, forest: SearchForest) -> ForestRun<'a> {
        ForestRun { ctx, forest }
    }

    /// Keeps the forest open for the session's next step.
    pub(super) fn into_forest(self) -> SearchForest {
        self.forest
    }
}

impl ForestRun<'_> {
    pub(super) fn forest(&self) -> &SearchForest {
        &self.forest
    }

    pub(super) fn id(&self) -> &str {
        &self.forest.forest_id
    }

    pub(super) fn append(&self, event: &SearchEvent) -> Result<(), EngineError> {
        self.ctx
            .ledger
            .append_search(event)
            .map(|_| ())
            .map_err(crate::error::io)
    }

    fn snapshot(&self) -> Result<(), EngineError> {
        self.append(&records::usage_snapshot(&self.forest))
    }

    pub(super) fn observe(&self, branch_id: &str, text: &str) -> Result<(), EngineError> {
        self.append(&records::observation(self.id(), branch_id, text))
    }

    /// Reserves `kind`, or says why not as an observation.
    fn reserve(&mut self, kind: ActionKind) -> Result<Option<Reservation>, EngineError> {
        if let Err(refusal) = self.forest.budget().admits(&kind) {
            self.observe("", &format!("no {}: {refusal}", kind.name()))?;
            return Ok(None);
        }
        let reservation = self.forest.reserve(kind)?;
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
        let settled = self.forest.settle(reservation, actual)?;
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

    /// Copies all of `state` into `slot` (a fork, or a rebuilt state's
    /// copy) under a reservation of its whole size, settled with what was
    /// copied. `None` when the budget refuses the reservation.
    pub(super) fn copy_state(
        &mut self,
        state: &Snapshot,
        source: &DirSource,
        slot: &Path,
    ) -> Result<Option<Copied>, EngineError> {
        let files = state.entries.len() as u64;
        let bytes = state.total_bytes();
        let exploration = &self.ctx.config.exploration;
        let limits = CopyLimits {
            max_files: files.min(exploration.workspace_files),
            max_bytes: bytes.min(exploration.workspace_bytes),
        };
        self.copy(state, source, slot, (files, bytes), limits, |r| {
            ActionKind::Fork {
                files: r.files,
                bytes: r.bytes,
            }
        })
    }

    /// Syncs a probed slot back to its seed under a reservation sized by
    /// the files the probe touched, settled with what the sync wrote
    /// (removing a file the build left copies nothing). `None` when the
    /// budget refuses the reservation.
    pub(super) fn sync_back(
        &mut self,
        seed: &Snapshot,
        source: &DirSource,
        slot: &Path,
        touched: &BTreeSet<&str>,
    ) -> Result<Option<Copied>, EngineError> {
        let files = touched.len() as u64;
        let bytes = touched
            .iter()
            .filter_map(|path| seed.entries.get(*path))
            .map(|entry| entry.size)
            .sum();
        let exploration = &self.ctx.config.exploration;
        let limits = CopyLimits {
            max_files: (seed.entries.len() as u64).min(exploration.workspace_files),
            max_bytes: seed.total_bytes().min(exploration.workspace_bytes),
        };
        self.copy(seed, source, slot, (files, bytes), limits, |r| {
            ActionKind::Fork {
                files: r.written,
                bytes,
            }
        })
    }

    /// Reserve a fork of `(files, bytes)`, materialize, settle with
    /// `actual` of what was copied; a failed copy is charged its whole
    /// reservation.
    fn copy(
        &mut self,
        state: &Snapshot,
        source: &DirSource,
        slot: &Path,
        (files, bytes): (u64, u64),
        limits: CopyLimits,
        actual: impl FnOnce(&MaterializeReport) -> ActionKind,
    ) -> Result<Option<Copied>, EngineError> {
        let Some(reservation) = self.reserve(ActionKind::Fork { files, bytes })? else {
            return Ok(None);
        };
        let copy = blocking(|| snapshot::materialize(state, source, slot, limits));
        let charged = match &copy {
            Ok(r) => actual(r),
            Err(_) => ActionKind::Fork { files, bytes },
        };
        let (receipt, exceeded) = self.settle(reservation, charged)?;
        Ok(Some(Copied {
            receipt,
            exceeded,
            copy,
        }))
    }

    /// Measures `slot` (holding `state`) by every configured stage under a
    /// verifier-run reservation, settled after; under `external-oracle`,
    /// the oracle judges it in the same run when its stages pass (a state
    /// they fail is no hard pass whatever the oracle says). `None` when the
    /// budget refuses the reservation.
    pub(super) async fn measure(
        &mut self,
        state: &Snapshot,
        slot: &Path,
        label: &str,
    ) -> Result<Option<(Measurement, Receipt)>, EngineError> {
        let Some(verifier) = self.reserve(ActionKind::VerifierRun)? else {
            return Ok(None);
        };
        let ctx = self.ctx;
        let target_dir = ctx.slots.branch_target();
        let run = Run {
            dir: slot,
            target_dir: &target_dir,
            config: ctx.config,
            label,
            progress: ctx.progress,
            cancel: ctx.cancel,
            policy: ctx.sandbox_policy(),
        };
        let mut m = measure(state.root, ctx.sensors, run).await;
        if let Some(oracle) = ctx.config.verification.oracle(ctx.root) {
            m.oracle = Some(if !m.assessment.hard_pass {
                OracleVerdict::NotRun {
                    reason: "the candidate's own checks do not pass".into(),
                }
            } else {
                ctx.progress.report(&format!("{label}: oracle"), None);
                let run = SensorRun {
                    dir: slot,
                    target_dir: &target_dir,
                    deadline: Duration::from_secs(ctx.config.stages.test_timeout_secs),
                    cancel: ctx.cancel.clone(),
                    policy: ctx.sandbox_policy(),
                };
                oracle.run(&run, state).await
            });
        }
        let (receipt, _) = self.settle(verifier, ActionKind::VerifierRun)?;
        Ok(Some((m, receipt)))
    }

    /// A diagnostic probe of one alternative: applies `candidate` in `slot`
    /// and runs the `build` stage alone on it, a narrowed sensor run that
    /// is reserved like any verifier run (and never a gate decision).
    pub(super) async fn probe_build(
        &mut self,
        build: &dyn Sensor,
        slot: &Path,
        candidate: &Candidate,
    ) -> Result<Probed, EngineError> {
        let Some(reservation) = self.reserve(ActionKind::VerifierRun)? else {
            return Ok(Probed::Refused);
        };
        let ctx = self.ctx;
        let probed = match blocking(|| apply_candidate(slot, candidate)) {
            Ok(()) => Probed::Built(Box::new(
                build
                    .run(SensorRun {
                        dir: slot,
                        target_dir: &ctx.slots.branch_target(),
                        deadline: Duration::from_secs(ctx.config.stages.build_timeout_secs),
                        cancel: ctx.cancel.clone(),
                        policy: ctx.sandbox_policy(),
                    })
                    .await,
            )),
            Err(reason) => Probed::NotApplicable(reason),
        };
        self.settle(reservation, ActionKind::VerifierRun)?;
        Ok(probed)
    }

    /// Charges the wall time of a branch at its boundary.
    pub(super) fn charge_elapsed(&mut self, since: Instant) -> Result<(), EngineError> {
        if self.forest.is_closed() {
            return Ok(());
        }
        let abandoned = self.forest.charge_elapsed(since.elapsed().as_secs())?;
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
    pub(super) fn close(mut self, reason: &str) -> Result<(), EngineError> {
        let abandoned = self.forest.close(reason);
        self.abandoned(&abandoned, reason)?;
        self.snapshot()?;
        self.append(&records::search_closed(&self.forest.forest_id, reason))
    }

    // -- branch transitions: the forest's, ledgered here -------------------

    /// A new branch from `seed`, paid for by the settled copy `receipt`.
    pub(super) fn fork(
        &mut self,
        seed: Seed,
        spec: BranchSpec,
        receipt: Receipt,
    ) -> Result<SearchBranch, EngineError> {
        let branch = self.forest.fork(seed, spec, receipt)?.clone();
        self.append(&records::branch_forked(self.id(), &branch))?;
        Ok(branch)
    }

    pub(super) fn start(&mut self, branch_id: &str) -> Result<(), EngineError> {
        self.forest.start(branch_id).map_err(EngineError::from)
    }

    /// Stops a running branch by a containment certificate (a copy into its
    /// slot went over its reservation), removes its workspace and ledgers
    /// the certificate, named by the digest of what it certifies.
    pub(super) fn contain(&mut self, branch_id: &str, reason: &str) -> Result<(), EngineError> {
        let certificate_id = crate::digest::CanonicalHasher::new("trellis.containment.v1")
            .str(self.id())
            .str(branch_id)
            .str(reason)
            .finish()
            .short(12);
        self.forest.contain(branch_id, &certificate_id)?;
        remove_slot(self.ctx, branch_id);
        self.append(&SearchEvent::BranchContained {
            forest_id: self.id().to_owned(),
            branch_id: branch_id.to_owned(),
            certificate_id,
            reason: reason.to_owned(),
        })
    }

    /// Abandons a running branch and removes its workspace.
    pub(super) fn abandon(&mut self, branch_id: &str, reason: &str) -> Result<(), EngineError> {
        self.forest.abandon(branch_id, reason)?;
        self.abandoned(&[branch_id.to_owned()], reason)
    }

    /// Rejects a running branch, ledgers why, and removes its workspace.
    pub(super) fn reject(
        &mut self,
        report: &mut BranchReport,
        cause: NotUsed,
        reason: String,
    ) -> Result<(), EngineError> {
        self.forest.reject(&report.branch_id, &reason)?;
        remove_slot(self.ctx, &report.branch_id);
        self.append(&records::search_ineligible(
            self.id(),
            &report.branch_id,
            &reason,
        ))?;
        report.outcome = BranchOutcome::ineligible(cause, reason);
        Ok(())
    }

    /// The forest's eligibility verdict on a measured branch, paid for by
    /// the settled verifier `receipt`; ledgers the measurement.
    pub(super) fn judge(
        &mut self,
        branch_id: &str,
        observation: &CandidateObservation,
        flaky: Vec<String>,
        trajectory: &AcceptedTrajectory,
        receipt: Receipt,
    ) -> Result<Eligibility, EngineError> {
        let eligibility = self
            .forest
            .measure(branch_id, observation, trajectory, receipt)?;
        self.append(&records::search_candidate_measured(
            &self.forest,
            branch_id,
            observation,
            eligibility == Eligibility::Eligible,
            flaky,
        ))?;
        Ok(eligibility)
    }

    pub(super) fn checkpoint_partial(
        &mut self,
        branch_id: &str,
        root: Digest,
        plan: Digest,
        obligations: Vec<Digest>,
        evidence: Digest,
        reason: &str,
    ) -> Result<PartialCheckpointRef, EngineError> {
        let checkpoint =
            self.forest
                .checkpoint_partial(branch_id, root, Some(plan), obligations, evidence)?;
        self.append(&records::partial_checkpointed(
            self.id(),
            branch_id,
            &checkpoint,
            reason,
        ))?;
        Ok(checkpoint)
    }

    /// Selects among the measured branches; the losers lose their slots.
    pub(super) fn select(&mut self, profile: Digest) -> Result<Selection, EngineError> {
        let selection = self.forest.select(profile)?;
        self.append(&records::search_selected(self.id(), &selection, profile))?;
        for loser in &selection.not_selected {
            remove_slot(self.ctx, loser);
            self.append(&records::search_not_selected(
                self.id(),
                loser,
                &selection.selected,
            ))?;
        }
        Ok(selection)
    }

    /// The forest's one commit through the gate; a gate refusal is the
    /// step's to handle.
    pub(super) fn commit(
        &mut self,
        trajectory: &mut AcceptedTrajectory,
    ) -> Result<GateDecision, ForestError> {
        self.forest.commit(trajectory)
    }

    /// Records an exact no-good when the support is deterministic; a refused
    /// support is kept only as an observation.
    pub(super) fn record_no_good(
        &self,
        session: &mut Session,
        branch_id: &str,
        components: &NoGoodComponents,
        support: Result<Support, NoGoodRefusal>,
    ) -> Result<(), EngineError> {
        match support {
            Ok(support) => {
                if let Some(nogood) = session.nogoods.store.record(components.clone(), support) {
                    self.append(&SearchEvent::no_good_recorded(self.id(), branch_id, nogood))?;
                }
                Ok(())
            }
            Err(refusal) => self.observe(branch_id, &format!("no no-good recorded: {refusal}")),
        }
    }
}

/// The model actor's view of one forest while it works in one branch: its
/// turns and its verifier runs are reserved and settled here, and each
/// model call is ledgered (programs, raw attempts, turn records) as the
/// actor makes it. The runner calls the ledger and the verifier one at a
/// time, so the lock is never contended; it only lets both hold the forest.
struct ModelMeter<'r, 'a> {
    run: &'r mut ForestRun<'a>,
    branch_id: String,
    limits: TurnLimits,
    /// The running turn's reservation, settled when the turn completes.
    turn: Option<Reservation>,
    /// The first ledger failure: the repair fails with it after the actor
    /// stops (a ledger that cannot be written must not be written past).
    error: Option<EngineError>,
}

impl ModelMeter<'_, '_> {
    fn append(&mut self, event: SearchEvent) {
        if self.error.is_none()
            && let Err(e) = self.run.append(&event)
        {
            self.error = Some(e);
        }
    }

    fn turn_kind(&self, tokens: u64, usage: Option<&TurnUsage>) -> ActionKind {
        match usage {
            None => ActionKind::ModelTurn {
                tokens,
                tool_calls: u64::from(self.limits.tool_calls_per_turn),
                mutations: u64::from(self.limits.mutations_per_turn),
                result_bytes: self.limits.result_bytes as u64,
            },
            Some(u) => ActionKind::ModelTurn {
                tokens: u.tokens.total(),
                tool_calls: u.tool_calls,
                mutations: u.mutations,
                result_bytes: u.result_bytes,
            },
        }
    }
}

struct MeterLedger<'m, 'r, 'a>(&'m tokio::sync::Mutex<ModelMeter<'r, 'a>>);
struct MeterVerifier<'m, 'r, 'a>(&'m tokio::sync::Mutex<ModelMeter<'r, 'a>>);

impl TurnLedger for MeterLedger<'_, '_, '_> {
    fn reserve_turn(&mut self, turn: u32) -> Result<(), String> {
        let Ok(mut meter) = self.0.try_lock() else {
            return Err("the model meter is busy".into());
        };
        let kind = meter.turn_kind(meter.limits.tokens_per_turn, None);
        match meter.run.reserve(kind) {
            Ok(Some(reservation)) => {
                meter.turn = Some(reservation);
                Ok(())
            }
            Ok(None) => Err(format!("the search budget refused model turn {turn}")),
            Err(e) => {
                let reason = e.to_string();
                meter.error.get_or_insert(e);
                Err(reason)
            }
        }
    }

    fn request_prepared(&mut self, request: &PreparedRequest) {
        let Ok(mut meter) = self.0.try_lock() else {
            return;
        };
        let event = SearchEvent::ModelProgramsCompiled {
            forest_id: meter.run.id().to_owned(),
            branch_id: meter.branch_id.clone(),
            turn: request.turn,
            invocation_digest: request.invocation_digest.clone(),
            request: serde_json::to_value(request).unwrap_or_default(),
        };
        meter.append(event);
    }

    fn observed(&mut self, turn: u32, invocation_digest: &str, attempt: &Attempt) {
        let Ok(mut meter) = self.0.try_lock() else {
            return;
        };
        let event = SearchEvent::ModelTurnObserved {
            forest_id: meter.run.id().to_owned(),
            branch_id: meter.branch_id.clone(),
            turn,
            invocation_digest: invocation_digest.to_owned(),
            attempt: serde_json::to_value(attempt).unwrap_or_default(),
        };
        meter.append(event);
    }

    fn turn_completed(&mut self, record: &TurnRecord) {
        let Ok(mut meter) = self.0.try_lock() else {
            return;
        };
        if let Some(reservation) = meter.turn.take() {
            let actual = meter.turn_kind(0, Some(&record.usage));
            if let Err(e) = meter.run.settle(reservation, actual) {
                meter.error.get_or_insert(e);
            }
        }
        meter.run.ctx.progress.milestone(&turn_progress(record));
        let event = SearchEvent::ModelTurnRecorded {
            forest_id: meter.run.id().to_owned(),
            branch_id: meter.branch_id.clone(),
            turn: record.turn,
            record: serde_json::to_value(record).unwrap_or_default(),
        };
        meter.append(event);
    }

    fn context(&mut self, event: &ContextEvent) {
        let Ok(mut meter) = self.0.try_lock() else {
            return;
        };
        if let Some(message) = context_progress(event) {
            meter.run.ctx.progress.milestone(&message);
        }
        let (forest_id, branch_id) = (meter.run.id().to_owned(), meter.branch_id.clone());
        let event = match event {
            ContextEvent::PagesSelected {
                turn,
                endpoint,
                plan_digest,
                plan,
            } => SearchEvent::ContextPagesSelected {
                forest_id,
                branch_id,
                turn: *turn,
                endpoint: endpoint.clone(),
                plan_digest: plan_digest.clone(),
                plan: serde_json::to_value(plan).unwrap_or_default(),
            },
            ContextEvent::Infeasible {
                turn,
                endpoint,
                infeasible,
            } => SearchEvent::ContextInfeasible {
                forest_id,
                branch_id,
                turn: *turn,
                endpoint: endpoint.clone(),
                figures: serde_json::to_value(infeasible).unwrap_or_default(),
            },
            ContextEvent::PageRecalled { turn, page_id, key } => SearchEvent::ContextPageRecalled {
                forest_id,
                branch_id,
                turn: *turn,
                page_id: page_id.clone(),
                key: serde_json::to_value(key).unwrap_or_default(),
            },
            ContextEvent::Miss { turn, key, reason } => SearchEvent::ContextMiss {
                forest_id,
                branch_id,
                turn: *turn,
                key: serde_json::to_value(key).unwrap_or_default(),
                reason: reason.clone(),
            },
            ContextEvent::Underestimated {
                turn,
                endpoint,
                underestimate,
            } => SearchEvent::ContextUnderestimated {
                forest_id,
                branch_id,
                turn: *turn,
                endpoint: endpoint.clone(),
                planned_tokens: underestimate.planned,
                reported_tokens: underestimate.reported,
                calibration: underestimate.calibration,
            },
            ContextEvent::WorkingSet {
                working_set,
                digest,
            } => SearchEvent::ContextWorkingSet {
                forest_id,
                branch_id,
                turn: working_set.turn,
                working_set_turns: working_set.turns,
                pages: working_set.pages.clone(),
                digest: digest.clone(),
            },
        };
        meter.append(event);
    }
}

/// A refitted or underestimated request as work-done progress, so the
/// editor shows when a turn's context was paged to fit the route's window.
fn context_progress(event: &ContextEvent) -> Option<String> {
    match event {
        ContextEvent::PagesSelected { turn, plan, .. } if plan.refitted() => {
            let evicted = plan.count(Residency::Evicted);
            Some(format!(
                "turn {turn}: context refitted to {} of {} tokens ({evicted} {} evicted, {} stale)",
                plan.request_tokens,
                plan.allowance.input,
                if evicted == 1 { "page" } else { "pages" },
                plan.count(Residency::Stale)
            ))
        }
        ContextEvent::Infeasible { turn, .. } => Some(format!(
            "turn {turn}: the context does not fit, nothing sent"
        )),
        ContextEvent::Underestimated {
            turn,
            underestimate: u,
            ..
        } => Some(format!(
            "turn {turn}: the endpoint counted {} prompt tokens where {} were planned; later \
             requests are planned {}.{:03}× larger",
            u.reported,
            u.planned,
            u.calibration / 1000,
            u.calibration % 1000
        )),
        _ => None,
    }
}

/// A model turn as work-done progress: "turn 2: replace src/lib.rs".
fn turn_progress(record: &TurnRecord) -> String {
    let calls: Vec<String> = record
        .tools
        .iter()
        .map(|t| {
            let path = serde_json::from_str::<serde_json::Value>(&t.call.arguments)
                .ok()
                .and_then(|args| args["path"].as_str().map(str::to_owned));
            match path {
                Some(path) => format!("{} {path}", t.call.name),
                None => t.call.name.clone(),
            }
        })
        .collect();
    let what = if calls.is_empty() {
        match &record.reply {
            crate::actor::TurnReply::Parsed { .. } => "no tool call".to_owned(),
            crate::actor::TurnReply::Malformed { .. } => "an unreadable reply".to_owned(),
            crate::actor::TurnReply::Refused => "the endpoint refused".to_owned(),
            // Nothing answered, or nothing was sent (a request that did not
            // fit, already reported as such): either way, no reply.
            crate::actor::TurnReply::None => "no reply".to_owned(),
        }
    } else {
        calls.join(", ")
    };
    format!("turn {}: {what}", record.turn)
}

impl BranchVerifier for MeterVerifier<'_, '_, '_> {
    fn run_build<'f>(
        &'f mut self,
        branch: &'f Path,
    ) -> BoxFuture<'f, Result<VerifierReport, String>> {
        Box::pin(async move { self.stages(StageRole::Check, branch, None).await })
    }

    fn run_tests<'f>(
        &'f mut self,
        branch: &'f Path,
        filter: Option<&'f str>,
    ) -> BoxFuture<'f, Result<VerifierReport, String>> {
        Box::pin(async move { self.stages(StageRole::Test, branch, filter).await })
    }
}

impl MeterVerifier<'_, '_, '_> {
    /// One verifier run of every stage with `role` in the branch (a mixed
    /// workspace's Rust build and Python type check), each reserved and
    /// settled; passed when every one passed.
    async fn stages(
        &mut self,
        role: StageRole,
        branch: &Path,
        filter: Option<&str>,
    ) -> Result<VerifierReport, String> {
        let mut meter = self.0.lock().await;
        let ctx = meter.run.ctx;
        let sensors: Vec<&dyn Sensor> = ctx
            .sensors
            .iter()
            .filter(|s| stage_role(s.stage()) == role)
            .map(|s| s.as_ref())
            .collect();
        if sensors.is_empty() {
            return Err(format!("no {} stage is configured", role.name()));
        }
        let mut combined: Option<VerifierReport> = None;
        for sensor in sensors {
            let reservation = match meter.run.reserve(ActionKind::VerifierRun) {
                Ok(Some(r)) => r,
                Ok(None) => return Err("the search budget has no verifier run left".into()),
                Err(e) => {
                    let reason = e.to_string();
                    meter.error.get_or_insert(e);
                    return Err(reason);
                }
            };
            let report = sensor
                .run(SensorRun {
                    dir: branch,
                    target_dir: &ctx.slots.branch_target(),
                    deadline: Duration::from_secs(ctx.config.stages.timeout_secs(sensor.stage())),
                    cancel: ctx.cancel.clone(),
                    policy: ctx.sandbox_policy(),
                })
                .await;
            if let Err(e) = meter.run.settle(reservation, ActionKind::VerifierRun) {
                meter.error.get_or_insert(e);
            }
            let report = verifier_report(&report, filter);
            combined = Some(match combined {
                None => report,
                Some(before) => VerifierReport {
                    passed: before.passed && report.passed,
                    output: format!("{}\n{}", before.output, report.output),
                },
            });
        }
        Ok(combined.expect("at least one sensor ran"))
    }
}

/// What a build or test run tells the model: whether it passed, each
/// diagnostic with its site, each failing test with its output. The test
/// stage always runs whole (a filtered run would measure less than the
/// gate does); a filter only narrows which failures are shown.
fn verifier_report(report: &StageReport, filter: Option<&str>) -> VerifierReport {
    use std::fmt::Write as _;
    let mut output = String::new();
    if let crate::sensor::StageStatus::Unavailable { reason } = &report.status {
        let _ = writeln!(output, "the stage could not run: {reason}");
    }
    for d in &report.diagnostics {
        let site = d
            .primary
            .as_ref()
            .map(|s| format!("{}:{}:{}: ", s.path, s.line_start, s.col_start))
            .unwrap_or_default();
        let code = d
            .code
            .as_deref()
            .map(|c| format!("[{c}]"))
            .unwrap_or_default();
        let _ = writeln!(output, "{site}{:?}{code}: {}", d.level, d.message);
    }
    let shown = report
        .failures
        .iter()
        .filter(|f| filter.is_none_or(|filter| f.name.contains(filter)));
    for f in shown {
        let _ = writeln!(output, "test {} FAILED:\n{}", f.name, f.output);
    }
    let passed = report
        .diagnostics
        .iter()
        .all(|d| d.level != crate::diagnostic::Level::Error)
        && report.failures.is_empty()
        && !matches!(
            report.status,
            crate::sensor::StageStatus::Unavailable { .. }
        );
    let _ = write!(
        output,
        "{}: {} ({} tests passed, {} failed)",
        report.stage,
        if passed { "passed" } else { "failed" },
        report.tests_passed,
        report.failures.len()
    );
    VerifierReport { passed, output }
}

impl ForestRun<'_> {
    /// `test_policy = "backward-compatible"`: the tests as they were at the
    /// repair's start (`start`, realized by `source`) run against the
    /// candidate in `slot`. Rust's own policy ([`original_tests::plan`])
    /// says which files go back and how; they are put in place for one
    /// reserved run of the Rust test stage, then the candidate's versions
    /// restored, so the measured candidate is exactly what the model left.
    /// `Ok(None)` when the candidate's test code and test-deciding
    /// configuration are the original's (its own measurement runs them);
    /// `Some(failures)` otherwise, empty when the original tests hold.
    pub(super) async fn original_tests(
        &mut self,
        start: &Snapshot,
        source: &DirSource,
        slot: &Path,
    ) -> Result<Option<Vec<String>>, EngineError> {
        let changed =
            match original_tests::plan(start, source, slot).map_err(EngineError::Invariant)? {
                Plan::Unchanged => return Ok(None),
                Plan::Refused(reason) => return Ok(Some(vec![reason])),
                Plan::Swap(swaps) => swaps,
            };
        let Some(test) = self
            .ctx
            .sensors
            .iter()
            .find(|s| original_tests::rust_test_stage(s.stage()))
        else {
            return Ok(Some(vec!["no Rust test stage is configured".into()]));
        };
        let put = |path: &str, bytes: Option<&[u8]>| -> Result<(), EngineError> {
            match bytes {
                Some(bytes) => snapshot::fsutil::write_atomic(slot, path, bytes)
                    .map_err(|e| EngineError::Invariant(format!("{path}: {e}"))),
                None => {
                    let full = snapshot::fsutil::confine(slot, path)
                        .map_err(|e| EngineError::Invariant(format!("{path}: {e}")))?;
                    let _ = std::fs::remove_file(full);
                    Ok(())
                }
            }
        };
        for swap in &changed {
            put(&swap.path, swap.original.as_deref())?;
        }
        let ran = match self.reserve(ActionKind::VerifierRun)? {
            None => None,
            Some(reservation) => {
                let ctx = self.ctx;
                let report = test
                    .run(SensorRun {
                        dir: slot,
                        target_dir: &ctx.slots.branch_target(),
                        deadline: Duration::from_secs(ctx.config.stages.test_timeout_secs),
                        cancel: ctx.cancel.clone(),
                        policy: ctx.sandbox_policy(),
                    })
                    .await;
                self.settle(reservation, ActionKind::VerifierRun)?;
                Some(report)
            }
        };
        for swap in &changed {
            put(&swap.path, swap.candidate.as_deref())?;
        }
        Ok(Some(match ran {
            None => {
                vec!["the search budget has no verifier run left for the original tests".into()]
            }
            Some(report) => {
                let mut failures: Vec<String> =
                    report.failures.iter().map(|f| f.name.clone()).collect();
                if let crate::sensor::StageStatus::Unavailable { reason } = &report.status {
                    failures.push(format!("the test stage could not run: {reason}"));
                } else if failures.is_empty()
                    && report
                        .diagnostics
                        .iter()
                        .any(|d| d.level == crate::diagnostic::Level::Error)
                {
                    failures.push("the original tests do not build against the candidate".into());
                }
                failures
            }
        }))
    }

    /// Runs the model actor in `slot` (branch `branch_id`): every turn is
    /// reserved and settled against this forest, every verifier run the
    /// model asks for too, and every call is ledgered before its reply is
    /// parsed. A route with no endpoint left is ledgered as
    /// `model_route_unavailable` (environmental, never a no-good).
    pub(super) async fn run_model(
        &mut self,
        branch_id: &str,
        slot: &Path,
        chain: &mut FailoverChain,
        inputs: &PromptInputs,
        limits: &TurnLimits,
    ) -> Result<ActorOutcome, EngineError> {
        // From the first turn on, the slots may hold what the model wrote.
        self.ctx
            .model_code
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let cancel = self.ctx.cancel;
        let withheld: Vec<String> = self
            .ctx
            .config
            .verification
            .oracle(self.ctx.root)
            .map(|oracle| oracle.path().to_owned())
            .into_iter()
            .collect();
        let meter = tokio::sync::Mutex::new(ModelMeter {
            run: self,
            branch_id: branch_id.to_owned(),
            limits: *limits,
            turn: None,
            error: None,
        });
        let mut ledger = MeterLedger(&meter);
        let mut verifier = MeterVerifier(&meter);
        let outcome = run_actor(
            chain,
            inputs,
            limits,
            ActorContext {
                branch: slot,
                withheld: &withheld,
                verifier: &mut verifier,
                ledger: &mut ledger,
                cancel,
            },
        )
        .await;
        let mut meter = meter.into_inner();
        if let Some(e) = meter.error.take() {
            return Err(e);
        }
        if let Some(reservation) = meter.turn.take() {
            // A turn whose call never completed settles as reserved.
            let kind = meter.turn_kind(meter.limits.tokens_per_turn, None);
            meter.run.settle(reservation, kind)?;
        }
        if outcome.stop == StopReason::RouteUnavailable {
            self.append(&SearchEvent::ModelRouteUnavailable {
                forest_id: self.id().to_owned(),
                branch_id: branch_id.to_owned(),
                reason: "every endpoint of the chain failed or timed out".into(),
            })?;
        }
        Ok(outcome)
    }
}

/// Realizes a candidate in its slot and snapshots the result. An edit is
/// not a budget action of its own: the verifier run that measures it pays.
pub(super) fn realize(slot: &Path, candidate: &Candidate) -> Result<Snapshot, String> {
    blocking(|| {
        apply_candidate(slot, candidate).and_then(|()| {
            Snapshotter::new(slot, None)
                .snapshot(&Overlay::default())
                .map_err(|e| e.to_string())
        })
    })
}

/// Applies a candidate's edits inside `slot`. Paths are confined to the slot.
fn apply_candidate(slot: &Path, candidate: &Candidate) -> Result<(), String> {
    let mut by_path: std::collections::BTreeMap<&str, Vec<edit::TextEdit>> =
        std::collections::BTreeMap::new();
    for (path, e) in &candidate.edits {
        by_path.entry(path.as_str()).or_default().push(e.clone());
    }
    for (path, edits) in by_path {
        let full = snapshot::fsutil::confine(slot, path).map_err(|e| e.to_string())?;
        let bytes = std::fs::read(&full).map_err(|e| format!("{path}: {e}"))?;
        let text = String::from_utf8(bytes).map_err(|_| format!("{path}: not valid UTF-8"))?;
        let edits = edit::tidy_suggestion(&text, &edits);
        let edited = edit::apply(path, &text, &edits).map_err(|e| e.to_string())?;
        snapshot::fsutil::write_atomic(slot, path, edited.as_bytes()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// An abandoned, rejected or unselected branch loses its workspace.
pub(super) fn remove_slot(ctx: &Ctx<'_>, branch_id: &str) {
    let slot = ctx.slots.branch(branch_index(branch_id));
    // A slot that is already gone is fine; the next fork re-copies it.
    let _ = std::fs::remove_dir_all(slot);
}

/// The slot of a branch, by its id.
pub(super) fn branch_slot(ctx: &Ctx<'_>, branch_id: &str) -> PathBuf {
    ctx.slots.branch(branch_index(branch_id))
}

/// The slot index of a branch: `b1` is slot 0. Branch ids come from
/// `SearchForest::fork`, so any other id is a broken invariant, never a slot
/// to guess (guessing could remove another branch's workspace).
fn branch_index(branch_id: &str) -> usize {
    branch_id
        .strip_prefix('b')
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| n.checked_sub(1))
        .unwrap_or_else(|| panic!("branch id {branch_id:?} is not one of b1, b2, ..."))
}
