//! One step: one forest over the accepted state, its quanta, its
//! selection and its one commit.
//!
//! The first branch makes the plan's opening attempt; after every quantum,
//! system 20 ([`next_expansion`]) decides whether that branch continues its
//! partial checkpoint, a new branch opens (from the accepted root or from
//! that checkpoint), or the forest selects. An exact no-good refuses a
//! repeated attempt for free: no reservation, no branch. Branch previews
//! never decide; the forest selects one candidate (Proposition 5) and
//! commits it once through the gate.
//!
//! It must never copy, measure or move the budget except through
//! [`ForestRun`], and never change the accepted state: the committed
//! branch is handed back to the [`super::search::Search`].

use std::collections::BTreeMap;
use std::time::Instant;

use crate::actor::{StopReason, TestPolicy};
use crate::digest::Digest;
use crate::error::EngineError;
use crate::gate::GateDecision;
use crate::measure::Measurement;
use crate::propose::SuggestionProposer;
use crate::records;
use crate::search::{
    ActionKind, Attempt, BranchOutcome as QuantumOutcome, BranchProgress, BranchSpec, Expansion,
    ExpansionState, ForestError, Frontier, FrontierEntry, Seed, Strategy, next_expansion,
};
use crate::snapshot::{DirSource, Overlay, Snapshot};

use super::effects::{ForestRun, branch_slot, realize};
use super::model;
use super::plan::{
    KeptPartial, Plan, Quantum, Realization, Track, attempt_components, obligations, packet_energy,
    proposal_digest,
};
use super::quantum::{QuantumEnd, QuantumRun, SeedView};
use super::search::Search;
use crate::report::{BranchOutcome, BranchReport, StepReport};

/// How a step's forest ended.
pub(super) enum StepEnd {
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
pub(super) struct Eligible {
    pub(super) branch_id: String,
    pub(super) label: String,
    pub(super) y: Snapshot,
    pub(super) m: Measurement,
}

/// One step's forest and what its quanta have shown so far.
pub(super) struct Step<'s, 'a> {
    search: &'s mut Search<'a>,
    plan: &'s Plan,
    run: ForestRun<'a>,
    report: StepReport,
    /// How many of the forest's branches the deterministic route may open.
    deterministic_branches: usize,
    /// The targeted cluster's energy at the accepted state.
    targeted_before: f64,
    frontier: Frontier,
    /// The rank of the last entry served in the current epoch.
    rank: u32,
    eligible: Vec<Eligible>,
    /// Attempts made in this forest, per plan: alternative #2 of one choice
    /// is not alternative #2 of another.
    tried: BTreeMap<Digest, Vec<Attempt>>,
    tracks: BTreeMap<String, Track>,
    partials: BTreeMap<Digest, KeptPartial>,
}

impl<'s, 'a> Step<'s, 'a> {
    /// Opens the step's forest over the accepted state, to work on `plan`.
    pub(super) fn open(search: &'s mut Search<'a>, plan: &'s Plan) -> Result<Self, EngineError> {
        let packet = &plan.packet;
        let report = StepReport {
            forest_id: String::new(),
            cluster_id: packet.cluster_id.clone(),
            cluster_title: packet.cluster_title.clone(),
            energy_before: search.accepted.measurement.energy(),
            branches: Vec::new(),
            decision: None,
        };
        // The model route's branch comes on top of the deterministic ones,
        // within the forest's three; a forest of three leaves the
        // deterministic route two.
        let model_room = usize::from(!search.ctx.config.models.is_empty());
        let forest_branches = (search.max_branches + model_room).min(3);
        let deterministic_branches = (forest_branches - model_room).max(1);
        let run = ForestRun::open(
            search.ctx,
            search.session,
            search.accepted.snapshot.root,
            forest_branches,
        )?;
        let targeted_before = packet_energy(&search.accepted.measurement, &packet.cluster_id);
        Ok(Step {
            report: StepReport {
                forest_id: run.id().to_owned(),
                ..report
            },
            search,
            plan,
            run,
            deterministic_branches,
            targeted_before,
            frontier: Frontier::new(),
            rank: 0,
            eligible: Vec::new(),
            tried: BTreeMap::new(),
            tracks: BTreeMap::new(),
            partials: BTreeMap::new(),
        })
    }

    /// Runs quanta until expansion stops, then selects and commits.
    pub(super) async fn run(mut self) -> Result<(StepEnd, StepReport), EngineError> {
        let max_branches = self.deterministic_branches;
        let plan = self.plan;
        if plan.candidates.is_empty() {
            // Nothing deterministic to try: only the model route works it.
            if self.wants_model() {
                self.model_quantum().await?;
            }
            return self.finish();
        }
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
            if self.search.ctx.cancel.is_cancelled() || self.run.forest().is_closed() {
                break;
            }
            next = self.quantum(quantum).await?;
        }
        if self.wants_model() && !self.plan.candidates.is_empty() {
            self.model_quantum().await?;
        }
        self.finish()
    }

    /// System 20's preference order: the model route follows the
    /// deterministic one, so it opens a branch only when a model is
    /// configured and no branch of this forest reached a hard pass (the
    /// compiler offered nothing, a failing test is the residual, or the
    /// deterministic branches are exhausted).
    fn wants_model(&self) -> bool {
        let ctx = self.search.ctx;
        !ctx.config.models.is_empty()
            && !ctx.cancel.is_cancelled()
            && !self.run.forest().is_closed()
            && !self.eligible.iter().any(|e| e.m.hard_pass())
            // A route retired earlier in this repair stays unavailable.
            && !self
                .search
                .model_chain
                .as_ref()
                .is_some_and(|chain| chain.exhausted())
    }

    /// One model branch: forked from the accepted state, worked by the model
    /// actor through the governed tools, then measured by every required
    /// stage and judged exactly like a compiler suggestion's branch.
    async fn model_quantum(&mut self) -> Result<(), EngineError> {
        let ctx = self.search.ctx;
        let models = &ctx.config.models;
        let route = model::route_name(models);
        let packet = &self.plan.packet;
        let quantum = Quantum {
            attempt: Attempt::new(model::operator(packet), Strategy::ModelActor, &route),
            continues: None,
            seed: Seed::Accepted,
            candidate: None,
            why: if self.plan.candidates.is_empty() {
                format!(
                    "the compiler offers nothing for `{}`: the model route opens a branch",
                    packet.cluster_title
                )
            } else {
                format!(
                    "the deterministic branches for `{}` reached no hard pass: the model route \
                     opens a branch",
                    packet.cluster_title
                )
            },
        };
        let accepted = &self.search.accepted;
        let seed = SeedView {
            snapshot: &accepted.snapshot,
            source: DirSource::new(ctx.root.to_path_buf(), accepted.overlay.clone()),
            measurement: &accepted.measurement,
            plan: self.plan,
        };
        let mut report = BranchReport {
            branch_id: String::new(),
            label: format!("{route} on `{}`", packet.cluster_title),
            proposer: route.clone(),
            strategy: Strategy::ModelActor.name().to_owned(),
            proposal: accepted.snapshot.root,
            root: None,
            energy: None,
            hard_pass: false,
            preview: None,
            stages: Vec::new(),
            clusters: Vec::new(),
            outcome: BranchOutcome::NotSelected,
        };
        let Some((branch_id, slot)) = fork_branch(&mut self.run, &quantum, &seed, &mut report)?
        else {
            self.report.branches.push(report);
            return Ok(());
        };
        report.branch_id = branch_id.clone();
        self.run.start(&branch_id)?;
        ctx.progress
            .report(&format!("branch {branch_id}: {route}"), None);
        let started = Instant::now();
        let end = self
            .model_branch(&quantum, &branch_id, &slot, &mut report)
            .await?;
        self.run.charge_elapsed(started)?;
        self.report.branches.push(report);
        if let QuantumEnd::Eligible(e) = end {
            self.eligible.push(*e);
        }
        Ok(())
    }

    /// Runs the actor in the forked branch and measures what it left.
    async fn model_branch(
        &mut self,
        quantum: &Quantum,
        branch_id: &str,
        slot: &std::path::Path,
        report: &mut BranchReport,
    ) -> Result<QuantumEnd, EngineError> {
        let ctx = self.search.ctx;
        let route = &quantum.attempt.route;
        if self.search.model_chain.is_none() {
            match model::chain(&ctx.config.models) {
                Ok(chain) => self.search.model_chain = Some(chain),
                Err(reason) => {
                    self.run.abandon(branch_id, &reason)?;
                    report.outcome = BranchOutcome::Ineligible { reason };
                    return Ok(QuantumEnd::Ineligible);
                }
            }
        }
        let chain = self
            .search
            .model_chain
            .as_mut()
            .expect("the chain was just built");
        let workspace = ctx
            .root
            .file_name()
            .map_or_else(|| "workspace".into(), |n| n.to_string_lossy().into_owned());
        let mut inputs = model::inputs(self.run.id(), &workspace, &self.plan.packet, None);
        inputs.replacements = ctx.bundles.to_vec();
        let outcome = self
            .run
            .run_model(branch_id, slot, chain, &inputs, &model::LIMITS)
            .await?;
        let summary = match outcome.stop {
            StopReason::Finished { summary } => summary,
            StopReason::TurnLimit => format!("stopped at the turn limit ({} turns)", outcome.turns),
            StopReason::RouteUnavailable => {
                // Environmental: abandoned, never a no-good.
                let reason = format!("the model route {route} is unavailable for this repair");
                self.run.abandon(branch_id, &reason)?;
                report.outcome = BranchOutcome::Ineligible { reason };
                return Ok(QuantumEnd::Ineligible);
            }
            StopReason::Cancelled => {
                self.run.abandon(branch_id, "cancelled")?;
                report.outcome = BranchOutcome::Ineligible {
                    reason: "cancelled".into(),
                };
                return Ok(QuantumEnd::Stop);
            }
            StopReason::Unbuildable { endpoint, reason } => {
                let reason = format!("no request could be built for `{endpoint}`: {reason}");
                self.run.abandon(branch_id, &reason)?;
                report.outcome = BranchOutcome::Ineligible { reason };
                return Ok(QuantumEnd::Ineligible);
            }
            StopReason::BudgetRefused { reason } => {
                self.run.abandon(branch_id, &reason)?;
                report.outcome = BranchOutcome::Ineligible { reason };
                return Ok(QuantumEnd::Ineligible);
            }
        };
        let summary: String = summary.chars().take(120).collect();
        let candidate = crate::propose::Candidate {
            label: format!("{route}: {summary}"),
            proposer: route.clone(),
            edits: Vec::new(),
            alternative: None,
        };
        report.label = candidate.label.clone();
        let accepted = &self.search.accepted;
        // The model's proposal is the state it left: its identity is that
        // state's root under the route.
        let proposal = match realize(slot, &candidate) {
            Ok(y) => model::proposal_digest(route, &y.root),
            Err(reason) => {
                self.run.abandon(branch_id, &reason)?;
                report.outcome = BranchOutcome::Ineligible { reason };
                return Ok(QuantumEnd::Ineligible);
            }
        };
        report.proposal = proposal;
        let components = attempt_components(
            (ctx.config, ctx.sensors),
            (accepted.snapshot.root, accepted.measurement.profile),
            Strategy::ModelActor,
            proposal,
        );
        if ctx.config.verification.test_policy == TestPolicy::BackwardCompatible {
            let source = DirSource::new(ctx.root.to_path_buf(), accepted.overlay.clone());
            if let Some(failures) = self
                .run
                .original_tests(&accepted.snapshot, &source, slot)
                .await?
                && !failures.is_empty()
            {
                let reason = format!(
                    "backward-compatible: the tests as they were fail against the candidate \
                     ({}); a changed test does not make a fix",
                    failures.join(", ")
                );
                self.run.reject(report, reason)?;
                return Ok(QuantumEnd::Ineligible);
            }
        }
        let mut track = Track {
            attempt: quantum.attempt.clone(),
            energies: Vec::new(),
            signatures: Vec::new(),
            local_retries_left: 0,
        };
        let mut branch_run = QuantumRun {
            run: &mut self.run,
            session: &mut *self.search.session,
            trajectory: &self.search.trajectory,
            accepted,
            plan: self.plan,
            measured_roots: &mut self.search.measured_roots,
            targeted_before: self.targeted_before,
            branch_id: branch_id.to_owned(),
            slot: slot.to_path_buf(),
            report,
        };
        let end = branch_run
            .measure(quantum, &candidate, &components, &mut track)
            .await?;
        Ok(match end {
            // A partial checkpoint of the model's branch is not continued by
            // the deterministic proposer; it stays a measured, unselected state.
            QuantumEnd::Partial(_) => QuantumEnd::Ineligible,
            end => end,
        })
    }

    /// Runs one quantum; the next one, or `None` when the forest should
    /// select (or stop).
    async fn quantum(&mut self, quantum: Quantum) -> Result<Option<Quantum>, EngineError> {
        let ctx = self.search.ctx;
        let max_branches = self.deterministic_branches;
        let accepted = &self.search.accepted;
        // The seed the quantum starts from: its content, its measurement and
        // the plan its evidence offers.
        let seed = match &quantum.seed {
            Seed::Accepted => SeedView {
                snapshot: &accepted.snapshot,
                source: DirSource::new(ctx.root.to_path_buf(), accepted.overlay.clone()),
                measurement: &accepted.measurement,
                plan: self.plan,
            },
            Seed::Partial(p) => {
                let kept = self
                    .partials
                    .get(&p.digest())
                    .ok_or_else(|| EngineError::from(ForestError::UnknownPartial(p.digest())))?;
                SeedView {
                    snapshot: &kept.snapshot,
                    source: DirSource::new(branch_slot(ctx, &kept.branch_id), Overlay::default()),
                    measurement: &kept.measurement,
                    plan: &kept.plan,
                }
            }
        };
        let plan_tried = self.tried.entry(seed.plan.digest()).or_default();
        plan_tried.push(quantum.attempt.clone());
        let mut report = BranchReport {
            branch_id: quantum.continues.clone().unwrap_or_default(),
            label: quantum.label(seed.plan),
            proposer: quantum.attempt.route.clone(),
            strategy: quantum.attempt.strategy.name().to_owned(),
            proposal: proposal_digest(&quantum, seed.plan),
            root: None,
            energy: None,
            hard_pass: false,
            preview: None,
            stages: Vec::new(),
            clusters: Vec::new(),
            outcome: BranchOutcome::NotSelected,
        };
        let components = attempt_components(
            (ctx.config, ctx.sensors),
            (accepted.snapshot.root, accepted.measurement.profile),
            quantum.attempt.strategy,
            report.proposal,
        );
        if let Some(key) = self.search.session.nogoods.suppresses(&components) {
            // Refused for free (erratum 21): no reservation, no branch.
            let reason = format!("refused: exact no-good {} (tried before)", key.short(12));
            self.run
                .observe(&report.branch_id, &format!("`{}`: {reason}", report.label))?;
            report.outcome = BranchOutcome::Ineligible { reason };
            self.report.branches.push(report);
            let refused = Track {
                attempt: quantum.attempt,
                energies: Vec::new(),
                signatures: Vec::new(),
                local_retries_left: 0,
            };
            return self.next_quantum(
                &refused,
                QuantumOutcome::Ineligible,
                quantum.continues.as_deref(),
            );
        }

        let (branch_id, slot) = match &quantum.continues {
            Some(branch_id) => (branch_id.clone(), branch_slot(ctx, branch_id)),
            None => match fork_branch(&mut self.run, &quantum, &seed, &mut report)? {
                Some(forked) => forked,
                None => {
                    self.report.branches.push(report);
                    return Ok(None);
                }
            },
        };
        report.branch_id = branch_id.clone();
        let branch = self
            .run
            .forest()
            .branch(&branch_id)
            .ok_or_else(|| EngineError::from(ForestError::UnknownBranch(branch_id.clone())))?
            .clone();
        let (obligations_now, residual) = match &quantum.seed {
            Seed::Partial(p) => (
                p.remaining_obligations.len() as u32,
                self.tracks
                    .get(&branch_id)
                    .and_then(|t| t.energies.last().copied())
                    .unwrap_or(self.targeted_before),
            ),
            Seed::Accepted => (
                obligations(&accepted.measurement).len() as u32,
                self.targeted_before,
            ),
        };
        // Only the branch about to run is live: expansion, not the frontier,
        // chose it; the frontier numbers its epochs and quanta.
        self.frontier.upsert(FrontierEntry::for_branch(
            &branch,
            false,
            obligations_now,
            residual,
            0,
        ));
        let Some(service) = self.frontier.serve() else {
            return Err(EngineError::Invariant(format!(
                "search forest {}: the frontier did not serve branch {branch_id}",
                self.run.id()
            )));
        };
        if service.opens_epoch {
            self.run
                .append(&records::epoch_started(self.run.id(), service.epoch))?;
            self.rank = 0;
        }
        self.rank += 1;
        self.run.append(&records::entry_served(
            self.run.id(),
            &service.branch_id,
            service.epoch,
            self.rank,
        ))?;
        self.run.start(&branch_id)?;
        if quantum.continues.is_some() {
            self.run.append(&records::strategy_selected(
                self.run.id(),
                &branch,
                &quantum.why,
            ))?;
        }
        ctx.progress.report(
            &format!("branch {branch_id}: {}", report.label),
            Some((100 * self.run.forest().branches.len() / (max_branches + 1)) as u32),
        );
        let track = self
            .tracks
            .entry(branch_id.clone())
            .or_insert_with(|| Track {
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
        let mut branch_run = QuantumRun {
            run: &mut self.run,
            session: &mut *self.search.session,
            trajectory: &self.search.trajectory,
            accepted,
            plan: self.plan,
            measured_roots: &mut self.search.measured_roots,
            targeted_before: self.targeted_before,
            branch_id: branch_id.clone(),
            slot,
            report: &mut report,
        };
        let candidate = match &quantum.candidate {
            Some(candidate) => Some(candidate.clone()),
            None => {
                let tried = self
                    .tried
                    .get(&seed.plan.digest())
                    .map_or(&[][..], Vec::as_slice);
                let picked = branch_run.probe(&seed, tried).await?;
                if let Some(candidate) = &picked {
                    branch_run.report.label = candidate.label.clone();
                    self.tried
                        .entry(seed.plan.digest())
                        .or_default()
                        .push(Attempt {
                            alternative: candidate.alternative,
                            ..quantum.attempt.clone()
                        });
                }
                picked
            }
        };
        let end = match &candidate {
            _ if ctx.cancel.is_cancelled() || branch_run.run.forest().is_closed() => {
                if branch_run.report.outcome == BranchOutcome::NotSelected {
                    branch_run.report.outcome = BranchOutcome::Ineligible {
                        reason: "the search stopped before the branch was measured".into(),
                    };
                }
                QuantumEnd::Stop
            }
            Some(candidate) => {
                branch_run
                    .measure(&quantum, candidate, &components, track)
                    .await?
            }
            None => {
                branch_run.reject(
                    "the diagnostic probe implicated no alternative: none built better than \
                     the seed"
                        .into(),
                )?;
                QuantumEnd::Ineligible
            }
        };
        self.frontier.remove(&branch_id);
        self.run.charge_elapsed(started)?;
        self.report.branches.push(report);
        if quantum.continues.is_some() {
            // The slot moved on from the checkpoint it continued: that
            // checkpoint can seed nothing any more.
            self.partials.retain(|_, kept| kept.branch_id != branch_id);
        }
        let outcome = match end {
            QuantumEnd::Stop => return Ok(None),
            QuantumEnd::Eligible(e) => {
                let hard = e.m.hard_pass();
                self.eligible.push(*e);
                if hard {
                    // Nothing can outrank a hard pass on key 1.
                    return Ok(None);
                }
                QuantumOutcome::Eligible
            }
            QuantumEnd::Partial(kept) => {
                let checkpoint = kept.checkpoint.clone();
                self.partials.insert(checkpoint.digest(), *kept);
                QuantumOutcome::Partial(checkpoint)
            }
            QuantumEnd::Ineligible => QuantumOutcome::Ineligible,
        };
        let track = self.tracks[&branch_id].clone();
        self.next_quantum(&track, outcome, Some(&branch_id))
    }

    /// Asks system 20 what follows a quantum and turns its answer into one the
    /// deterministic proposer can carry out. An attempt it cannot realize (a
    /// probe, a hand edit) is observed, counted as tried, and expansion asked
    /// again; `None` when nothing warrants another quantum.
    fn next_quantum(
        &mut self,
        track: &Track,
        outcome: QuantumOutcome,
        branch_id: Option<&str>,
    ) -> Result<Option<Quantum>, EngineError> {
        let kept = match &outcome {
            QuantumOutcome::Partial(p) => Some(
                self.partials
                    .get(&p.digest())
                    .ok_or_else(|| EngineError::from(ForestError::UnknownPartial(p.digest())))?,
            ),
            _ => None,
        };
        // The seed a new branch would start from, and the plan it works on.
        let (seed, plan) = match kept {
            Some(k) => (&k.snapshot, &k.plan),
            None => (&self.search.accepted.snapshot, self.plan),
        };
        let fork = ActionKind::Fork {
            files: seed.entries.len() as u64,
            bytes: seed.total_bytes(),
        };
        let tried = self.tried.entry(plan.digest()).or_default();
        let forest = self.run.forest();
        let budget = forest.budget();
        let budget_remains =
            budget.admits(&fork).is_ok() && budget.admits(&ActionKind::VerifierRun).is_ok();
        loop {
            let state = ExpansionState {
                branches_opened: forest.branches.len(),
                max_branches: self.deterministic_branches,
                budget_remains,
                rho: self.search.ctx.config.gate.rho,
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
                            self.run.observe(
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

    /// Selects among the eligible branches and commits one (Proposition 5),
    /// or closes the forest with nothing to commit.
    fn finish(self) -> Result<(StepEnd, StepReport), EngineError> {
        let Step {
            search,
            mut run,
            mut eligible,
            mut report,
            ..
        } = self;
        let ctx = search.ctx;
        if ctx.cancel.is_cancelled() {
            run.close("cancelled")?;
            return Ok((StepEnd::Cancelled, report));
        }
        if eligible.is_empty() || run.forest().is_closed() {
            run.close("no eligible candidate")?;
            return Ok((StepEnd::NoEligible, report));
        }
        let selection = run.select(search.accepted.measurement.profile)?;
        for r in &mut report.branches {
            if r.outcome == BranchOutcome::NotSelected && r.branch_id == selection.selected {
                r.outcome = BranchOutcome::Selected;
            }
        }
        let Some(position) = eligible
            .iter()
            .position(|e| e.branch_id == selection.selected)
        else {
            return Err(EngineError::Invariant(format!(
                "search forest {}: selected branch {} was never measured",
                run.id(),
                selection.selected
            )));
        };
        let chosen = eligible.swap_remove(position);
        let decision = match run.commit(&mut search.trajectory) {
            Ok(decision) => decision,
            Err(ForestError::Gate(refusal)) => {
                run.close("decision refused")?;
                let detail = refusal.to_string();
                return Ok((StepEnd::BoundReached { detail }, report));
            }
            Err(e) => return Err(e.into()),
        };
        let session = &search.session;
        ctx.ledger.append(&records::candidate_measured(
            &session.node,
            session.generation,
            &decision.candidate_id,
            &chosen.m,
        ))?;
        ctx.ledger.append(&records::gate_decision(
            &session.node,
            session.generation,
            &decision,
        ))?;
        run.append(&records::search_committed(
            run.id(),
            &chosen.branch_id,
            &decision.candidate_id,
        ))?;
        run.close("committed")?;
        let chosen = Box::new(chosen);
        Ok((StepEnd::Committed { decision, chosen }, report))
    }
}

/// Forks a new branch from a seed: a metered copy of the seed, whose root
/// must be the seed's. `None` (with the report saying why) when no branch
/// could be made; nothing more should be tried.
fn fork_branch(
    run: &mut ForestRun<'_>,
    quantum: &Quantum,
    seed: &SeedView<'_>,
    report: &mut BranchReport,
) -> Result<Option<(String, std::path::PathBuf)>, EngineError> {
    let slot = run.ctx.slots.branch(run.forest().branches.len());
    let Some(copied) = run.copy_state(seed.snapshot, &seed.source, &slot)? else {
        report.outcome = BranchOutcome::Ineligible {
            reason: "the search budget has no fork left".into(),
        };
        return Ok(None);
    };
    let made = match copied.copy {
        Err(e) => Err(e.to_string()),
        Ok(_) if copied.exceeded => Err("the copy exceeded its reservation".to_owned()),
        Ok(r) if r.root != seed.snapshot.root => {
            Err("the copy's root differs from its seed".to_owned())
        }
        Ok(_) => Ok(()),
    };
    if let Err(reason) = made {
        let _ = std::fs::remove_dir_all(&slot);
        run.observe("", &format!("`{}`: no branch: {reason}", report.label))?;
        report.outcome = BranchOutcome::Ineligible {
            reason: format!("the branch workspace could not be made: {reason}"),
        };
        return Ok(None);
    }
    if run.forest().is_closed() {
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
    let branch = run.fork(quantum.seed.clone(), spec, copied.receipt)?;
    run.append(&records::strategy_selected(run.id(), &branch, &quantum.why))?;
    Ok(Some((branch.branch_id, slot)))
}
