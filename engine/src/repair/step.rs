//! One step: one forest over the accepted state, its quanta, its
//! selection and its one commit.
//!
//! The first branch makes the plan's opening attempt. Every branch that can
//! take another quantum is a live entry of the step's [`Frontier`] (system
//! 19): served in epochs, at most once per epoch, best of the six keys
//! first, a new entry joining the next epoch. After every quantum, system
//! 20 ([`next_expansions`]) plans what follows: the branch continues its
//! partial checkpoint (it stays live), a new branch forks (from the
//! accepted root or from that checkpoint) and joins the frontier, or both,
//! so a branch that seeded a child can still be served; a descent that is
//! no hard pass opens the next unmeasured alternative from its own seed (or,
//! with none left on a partial checkpoint's plan, from the accepted state),
//! and a probe's tied alternatives are each measured. The forest selects
//! when the frontier is empty. An exact no-good refuses a repeated attempt
//! for free: no reservation, no branch. Branch previews never decide; the
//! forest selects one candidate (Proposition 5) and commits it once
//! through the gate.
//!
//! It must never copy, measure or move the budget except through
//! [`ForestRun`], and never change the accepted state: the committed
//! branch is handed back to the [`super::state::Search`].

use std::collections::BTreeMap;
use std::time::Instant;

use crate::actor::{StopReason, TestPolicy};
use crate::correction::CorrectionPacket;
use crate::digest::Digest;
use crate::error::EngineError;
use crate::gate::GateDecision;
use crate::records;
use crate::search::{
    ActionKind, Attempt, BranchOutcome as QuantumOutcome, BranchProgress, BranchSpec, Expansion,
    ExpansionState, ForestError, Frontier, FrontierEntry, Seed, Service, Strategy, next_expansions,
};
use crate::sensor::sandbox;
use crate::snapshot::DirSource;

use super::Ctx;
use super::accepted::Accepted;
use super::effects::{ForestRun, branch_slot, realize};
use super::model;
use super::plan::{
    KeptPartial, Plan, Quantum, Realization, Track, attempt_components, dominant_cluster,
    obligations, packet_energy, proposal_digest,
};
use super::quantum::{Eligible, QuantumEnd, QuantumRun, SeedView};
use super::state::Search;
use crate::report::{BranchOutcome, BranchReport, NotUsed, StepReport};

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

/// A live branch's next quantum, admitted and waiting to be served.
struct Pending {
    quantum: Quantum,
    report: BranchReport,
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
    /// The next quantum of each live frontier entry, and its report so far.
    pending: BTreeMap<String, Pending>,
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
            pending: BTreeMap::new(),
        })
    }

    /// Admits the plan's opening attempt, then serves the frontier until it
    /// is empty (or a hard pass, the budget or a cancellation stops it),
    /// then selects and commits.
    pub(super) async fn run(mut self) -> Result<(StepEnd, StepReport), EngineError> {
        let max_branches = self.deterministic_branches;
        let plan = self.plan;
        if plan.candidates.is_empty() {
            // Nothing deterministic to try: only the model route works it.
            self.model_route().await?;
            return self.finish();
        }
        let (attempt, candidate) = plan.opening(max_branches);
        self.admit(vec![Quantum {
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
        }])?;
        loop {
            if self.search.ctx.cancel.is_cancelled() || self.run.forest().is_closed() {
                break;
            }
            let Some(service) = self.frontier.serve() else {
                break;
            };
            if !self.quantum(service).await? {
                break;
            }
        }
        if !self.plan.candidates.is_empty() {
            self.model_route().await?;
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

    /// The model route (system 20, local repair): its first branch starts
    /// from the best partial checkpoint this forest kept (a compiler
    /// branch's or its own, lowest energy first), else from the accepted
    /// state; while its branch ends in a partial checkpoint, local retries
    /// remain and the forest has room, the model continues from that
    /// checkpoint in a new branch, shown what the branch it continues tried.
    async fn model_route(&mut self) -> Result<(), EngineError> {
        let mut seed = self
            .partials
            .iter()
            .min_by(|(a, x), (b, y)| {
                let (x, y) = (x.measurement.energy(), y.measurement.energy());
                x.total_cmp(&y).then(a.cmp(b))
            })
            .map(|(digest, _)| *digest);
        for _ in 0..=self.search.ctx.config.exploration.local_retries {
            if !self.wants_model() || !self.run.forest().has_branch_room() {
                break;
            }
            seed = self.model_quantum(seed).await?;
            if seed.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// One model branch: forked from `partial` (a kept checkpoint) or the
    /// accepted state, worked by the model actor through the governed
    /// tools, then measured by every required stage and judged exactly like
    /// a compiler suggestion's branch. The checkpoint it left, if it ended
    /// in one.
    async fn model_quantum(
        &mut self,
        partial: Option<Digest>,
    ) -> Result<Option<Digest>, EngineError> {
        let ctx = self.search.ctx;
        let models = &ctx.config.models;
        let route = model::route_name(models);
        // The seed is taken out while the branch runs (its slot stays),
        // and kept again after.
        let kept = partial.and_then(|digest| self.partials.remove(&digest));
        let plan: &'s Plan = self.plan;
        let packet = kept.as_ref().map_or(&plan.packet, |k| &k.plan.packet);
        let quantum = Quantum {
            attempt: Attempt::new(
                model::operator(packet),
                if kept.is_some() {
                    Strategy::LocalRepair
                } else {
                    Strategy::ModelActor
                },
                &route,
            ),
            continues: None,
            seed: kept
                .as_ref()
                .map_or(Seed::Accepted, |k| Seed::Partial(k.checkpoint.clone())),
            candidate: None,
            why: match &kept {
                Some(k) => format!(
                    "local repair: the model route continues partial checkpoint {} of {} on `{}`",
                    k.checkpoint.digest().short(12),
                    k.branch_id,
                    packet.cluster_title
                ),
                None if self.plan.candidates.is_empty() => format!(
                    "the compiler offers nothing for `{}`: the model route opens a branch",
                    packet.cluster_title
                ),
                None => format!(
                    "the deterministic branches for `{}` reached no hard pass: the model route \
                     opens a branch",
                    packet.cluster_title
                ),
            },
        };
        let accepted = &self.search.accepted;
        let seed = match &kept {
            Some(k) => SeedView {
                snapshot: &k.snapshot,
                source: DirSource::new(ctx.root.to_path_buf(), k.overlay.clone()),
                measurement: &k.measurement,
                plan: &k.plan,
                labels: &k.labels,
            },
            None => SeedView {
                snapshot: &accepted.snapshot,
                source: DirSource::new(ctx.root.to_path_buf(), accepted.overlay.clone()),
                measurement: &accepted.measurement,
                plan: self.plan,
                labels: &[],
            },
        };
        let mut report = BranchReport::unmeasured(
            String::new(),
            format!("{route} on `{}`", packet.cluster_title),
            route.clone(),
            quantum.attempt.strategy.name().to_owned(),
            accepted.snapshot.root,
        );
        let forked = fork_branch(&mut self.run, &quantum, &seed, &mut report)?;
        let Some((branch_id, slot)) = forked else {
            self.report.branches.push(report);
            self.keep(kept);
            return Ok(None);
        };
        report.branch_id = branch_id.clone();
        self.run.start(&branch_id)?;
        ctx.progress
            .report(&format!("branch {branch_id}: {route}"), None);
        let started = Instant::now();
        let continued = kept.as_ref().map(|k| k.branch_id.as_str());
        let end = self
            .model_branch(
                &quantum,
                (packet, continued),
                &branch_id,
                &slot,
                &mut report,
            )
            .await?;
        self.run.charge_elapsed(started)?;
        self.report.branches.push(report);
        self.keep(kept);
        Ok(match end {
            QuantumEnd::Eligible(e) => {
                self.eligible.push(*e);
                None
            }
            QuantumEnd::Partial(left) => {
                let digest = left.checkpoint.digest();
                self.partials.insert(digest, *left);
                Some(digest)
            }
            QuantumEnd::Ineligible | QuantumEnd::Stop => None,
        })
    }

    /// Puts a partial checkpoint the model route seeded from back.
    fn keep(&mut self, kept: Option<KeptPartial>) {
        if let Some(k) = kept {
            self.partials.insert(k.checkpoint.digest(), k);
        }
    }

    /// Runs the actor in the forked branch on `packet` and measures what it
    /// left; `continued` is the branch whose checkpoint it continues.
    async fn model_branch(
        &mut self,
        quantum: &Quantum,
        (packet, continued): (&CorrectionPacket, Option<&str>),
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
                    report.outcome = BranchOutcome::ineligible(NotUsed::ModelUnavailable, reason);
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
        let continued = continued.map(|b| (self.run.id(), b));
        let previous =
            model::previous_hypothesis(&ctx.ledger.rows()?, &packet.cluster_id, continued);
        let limits = &ctx.config.model_turns;
        let mut inputs = model::inputs(
            (self.run.id(), &workspace),
            packet,
            previous.as_ref(),
            limits,
            ctx.prompts,
        );
        inputs.replacements = crate::prompt_policy::layered(&inputs.replacements, ctx.bundles);
        if let Err(refusal) = sandbox::admit(&ctx.config.sandbox.for_model_code()) {
            // What the model writes could not be confined: not run at all.
            let reason = refusal.to_string();
            self.run.abandon(branch_id, &reason)?;
            report.outcome = BranchOutcome::ineligible(NotUsed::ModelUnavailable, reason);
            return Ok(QuantumEnd::Ineligible);
        }
        let outcome = self
            .run
            .run_model(branch_id, slot, chain, &inputs, limits)
            .await?;
        let summary = match outcome.stop {
            StopReason::Finished { summary } => summary,
            StopReason::TurnLimit => format!("stopped at the turn limit ({} turns)", outcome.turns),
            StopReason::RouteUnavailable => {
                // Environmental: abandoned, never a no-good.
                let reason = format!("the model route {route} is unavailable for this repair");
                self.run.abandon(branch_id, &reason)?;
                report.outcome = BranchOutcome::ineligible(NotUsed::ModelUnavailable, reason);
                return Ok(QuantumEnd::Ineligible);
            }
            StopReason::Cancelled => {
                self.run.abandon(branch_id, "cancelled")?;
                report.outcome = BranchOutcome::ineligible(NotUsed::Stopped, "cancelled");
                return Ok(QuantumEnd::Stop);
            }
            StopReason::Unbuildable { endpoint, reason } => {
                let reason = format!("no request could be built for `{endpoint}`: {reason}");
                self.run.abandon(branch_id, &reason)?;
                report.outcome = BranchOutcome::ineligible(NotUsed::ModelUnavailable, reason);
                return Ok(QuantumEnd::Ineligible);
            }
            StopReason::BudgetRefused { reason } => {
                self.run.abandon(branch_id, &reason)?;
                let cause = NotUsed::BudgetExhausted { limit: None };
                report.outcome = BranchOutcome::ineligible(cause, reason);
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
                report.outcome = BranchOutcome::ineligible(NotUsed::NotMade, reason);
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
            let (start, overlay) = &self.search.start;
            let source = DirSource::new(ctx.root.to_path_buf(), overlay.clone());
            if let Some(failures) = self.run.original_tests(start, &source, slot).await?
                && !failures.is_empty()
            {
                let reason = format!(
                    "backward-compatible: the tests as they were fail against the candidate \
                     ({}); a changed test does not make a fix",
                    failures.join(", ")
                );
                self.run
                    .reject(report, NotUsed::OriginalTestsFail, reason)?;
                self.record_hypothesis(&packet.cluster_id, report)?;
                return Ok(QuantumEnd::Ineligible);
            }
        }
        let mut track = Track::new(quantum.attempt.clone(), 0);
        let mut branch_run = QuantumRun {
            run: &mut self.run,
            session: &mut *self.search.session,
            trajectory: &self.search.trajectory,
            accepted,
            plan: self.plan,
            start: &self.search.start,
            measured_roots: &mut self.search.measured_roots,
            targeted_before: self.targeted_before,
            branch_id: branch_id.to_owned(),
            slot: slot.to_path_buf(),
            report,
            seed_labels: &[],
        };
        let end = branch_run
            .measure(quantum, &candidate, &components, &mut track)
            .await?;
        self.record_hypothesis(&packet.cluster_id, report)?;
        Ok(end)
    }

    /// Ledgers what a model branch on `cluster_id` tried and how it
    /// measured: the previous hypothesis a later model attempt on the
    /// cluster, or one continuing this branch, is shown.
    fn record_hypothesis(
        &self,
        cluster_id: &str,
        report: &BranchReport,
    ) -> Result<(), EngineError> {
        self.run.append(&model::hypothesis_measured(
            self.run.id(),
            cluster_id,
            &report.label,
            report,
        ))
    }

    /// Makes each of `quanta` (and whatever expansion offers in place of a
    /// refused one) a live frontier entry: an exact no-good refuses an
    /// attempt for free (no reservation, no branch); a continuation keeps
    /// its branch live; any other forks its branch now, from a seed that
    /// may not outlive this quantum. A new entry joins the next epoch.
    fn admit(&mut self, quanta: Vec<Quantum>) -> Result<(), EngineError> {
        let ctx = self.search.ctx;
        let mut queue: std::collections::VecDeque<Quantum> = quanta.into();
        while let Some(quantum) = queue.pop_front() {
            let accepted = &self.search.accepted;
            let seed = seed_view(ctx, (accepted, self.plan), &self.partials, &quantum.seed)?;
            let plan_digest = seed.plan.digest();
            let mut report = BranchReport::unmeasured(
                quantum.continues.clone().unwrap_or_default(),
                quantum.label(seed.plan),
                quantum.route().to_owned(),
                quantum.attempt.strategy.name().to_owned(),
                proposal_digest(&quantum, seed.plan),
            );
            let components = attempt_components(
                (ctx.config, ctx.sensors),
                (accepted.snapshot.root, accepted.measurement.profile),
                quantum.attempt.strategy,
                report.proposal,
            );
            let keys = (
                obligations(seed.measurement).len() as u32,
                dominant_cluster(seed.measurement, &self.plan.packet.cluster_id)
                    .map_or(0.0, |c| c.energy),
            );
            self.tried
                .entry(plan_digest)
                .or_default()
                .push(quantum.attempt.clone());
            if let Some(key) = self.search.session.nogoods.suppresses(&components) {
                // Refused for free (erratum 21): no reservation, no branch.
                let reason = format!("refused: exact no-good {} (tried before)", key.short(12));
                self.run
                    .observe(&report.branch_id, &format!("`{}`: {reason}", report.label))?;
                report.outcome = BranchOutcome::ineligible(NotUsed::TriedBefore, reason);
                self.report.branches.push(report);
                let refused = Track::new(quantum.attempt.clone(), 0);
                let continues = quantum.continues.clone();
                queue.extend(self.next_quanta(
                    &refused,
                    (&quantum.seed, QuantumOutcome::Ineligible),
                    continues.as_deref(),
                )?);
                continue;
            }
            let branch_id = match &quantum.continues {
                Some(branch_id) => branch_id.clone(),
                None => {
                    match fork_branch(&mut self.run, &quantum, &seed, &mut report)? {
                        Some((branch_id, _)) => branch_id,
                        None => {
                            // The budget or the copy refused: nothing more forks.
                            self.report.branches.push(report);
                            return Ok(());
                        }
                    }
                }
            };
            report.branch_id = branch_id.clone();
            let branch =
                self.run.forest().branch(&branch_id).ok_or_else(|| {
                    EngineError::from(ForestError::UnknownBranch(branch_id.clone()))
                })?;
            self.frontier
                .upsert(FrontierEntry::for_branch(branch, false, keys.0, keys.1));
            self.pending.insert(branch_id, Pending { quantum, report });
        }
        Ok(())
    }

    /// Runs the quantum the frontier served, then admits what expansion
    /// plans after it. `false` when the forest should select (or stop): a
    /// hard pass, a cancellation, or a closed budget.
    async fn quantum(&mut self, service: Service) -> Result<bool, EngineError> {
        let ctx = self.search.ctx;
        let max_branches = self.deterministic_branches;
        let branch_id = service.branch_id.clone();
        let Some(Pending {
            quantum,
            mut report,
        }) = self.pending.remove(&branch_id)
        else {
            return Err(EngineError::Invariant(format!(
                "search forest {}: the frontier served branch {branch_id}, which has no quantum",
                self.run.id()
            )));
        };
        // Served: it leaves the frontier until expansion makes it live again.
        self.frontier.remove(&branch_id);
        if service.opens_epoch {
            self.run
                .append(&records::epoch_started(self.run.id(), service.epoch))?;
            self.rank = 0;
        }
        self.rank += 1;
        self.run.append(&records::entry_served(
            self.run.id(),
            &branch_id,
            service.epoch,
            self.rank,
        ))?;
        let slot = branch_slot(ctx, &branch_id);
        self.run.start(&branch_id)?;
        if quantum.continues.is_some() {
            let branch = self
                .run
                .forest()
                .branch(&branch_id)
                .ok_or_else(|| EngineError::from(ForestError::UnknownBranch(branch_id.clone())))?
                .clone();
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
        let components = attempt_components(
            (ctx.config, ctx.sensors),
            (
                self.search.accepted.snapshot.root,
                self.search.accepted.measurement.profile,
            ),
            quantum.attempt.strategy,
            report.proposal,
        );
        let track = self.tracks.entry(branch_id.clone()).or_insert_with(|| {
            Track::new(
                quantum.attempt.clone(),
                ctx.config.exploration.local_retries,
            )
        });
        if quantum.continues.is_some() {
            track.local_retries_left = track.local_retries_left.saturating_sub(1);
            track.attempt = quantum.attempt.clone();
        }
        let started = Instant::now();
        let accepted = &self.search.accepted;
        let seed = seed_view(ctx, (accepted, self.plan), &self.partials, &quantum.seed)?;
        let mut branch_run = QuantumRun {
            run: &mut self.run,
            session: &mut *self.search.session,
            trajectory: &self.search.trajectory,
            accepted,
            plan: self.plan,
            start: &self.search.start,
            measured_roots: &mut self.search.measured_roots,
            targeted_before: self.targeted_before,
            branch_id: branch_id.clone(),
            slot,
            report: &mut report,
            seed_labels: seed.labels,
        };
        let candidate = match &quantum.candidate {
            Some(candidate) => Some(candidate.clone()),
            None => {
                let tried = self
                    .tried
                    .get(&seed.plan.digest())
                    .map_or(&[][..], Vec::as_slice);
                let verdict = branch_run.probe(&seed, tried).await?;
                // This branch takes the first implicated alternative; the
                // others tied with it stay untried, for expansion to
                // measure in branches of their own, and those that built
                // worse are tried, by the probe.
                let picked = verdict.implicated.first().and_then(|&i| {
                    seed.plan
                        .candidates
                        .iter()
                        .find(|c| c.alternative == Some(i))
                });
                if let Some(candidate) = picked {
                    branch_run.report.label = candidate.label.clone();
                }
                let probed = picked
                    .and_then(|c| c.alternative)
                    .into_iter()
                    .chain(verdict.passed_over);
                let tried = self.tried.entry(seed.plan.digest()).or_default();
                tried.extend(probed.map(|i| Attempt {
                    alternative: Some(i),
                    ..quantum.attempt.clone()
                }));
                picked.cloned()
            }
        };
        let end = match &candidate {
            _ if ctx.cancel.is_cancelled() || branch_run.run.forest().is_closed() => {
                if branch_run.report.outcome == BranchOutcome::NotSelected {
                    branch_run.report.outcome = BranchOutcome::ineligible(
                        NotUsed::Stopped,
                        "the search stopped before the branch was measured",
                    );
                }
                QuantumEnd::Stop
            }
            Some(candidate) => {
                branch_run
                    .measure(&quantum, candidate, &components, track)
                    .await?
            }
            // Contained by the probe: terminal, and its outcome said why.
            None if branch_run
                .run
                .forest()
                .branch(&branch_id)
                .is_some_and(|b| b.state.is_terminal()) =>
            {
                QuantumEnd::Ineligible
            }
            None => {
                branch_run.reject(
                    NotUsed::NoBetterAlternative,
                    "the diagnostic probe implicated no alternative: none built better than \
                     the seed"
                        .into(),
                )?;
                QuantumEnd::Ineligible
            }
        };
        self.run.charge_elapsed(started)?;
        self.report.branches.push(report);
        let outcome = match end {
            QuantumEnd::Stop => return Ok(false),
            QuantumEnd::Eligible(e) => {
                let hard = e.m.hard_pass();
                self.eligible.push(*e);
                if hard {
                    // Nothing can outrank a hard pass on key 1.
                    return Ok(false);
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
        let next = self.next_quanta(&track, (&quantum.seed, outcome), Some(&branch_id))?;
        self.admit(next)?;
        Ok(true)
    }

    /// What follows a quantum that started from `seed` and ended in
    /// `outcome` ([`Step::expand`]). A branch seeded from a partial
    /// checkpoint works that checkpoint's plan; when nothing is left to
    /// attempt there, the choice made at the accepted state may still have
    /// alternatives unmeasured, so expansion is asked again from there.
    fn next_quanta(
        &mut self,
        track: &Track,
        (seed, outcome): (&Seed, QuantumOutcome),
        branch_id: Option<&str>,
    ) -> Result<Vec<Quantum>, EngineError> {
        let quanta = self.expand(track, (seed, outcome.clone()), branch_id)?;
        if quanta.is_empty()
            && matches!(seed, Seed::Partial(_))
            && !matches!(outcome, QuantumOutcome::Partial(_))
        {
            // The branch's alternative numbered the checkpoint's choice,
            // not the accepted state's.
            let on_accepted = Track {
                attempt: Attempt {
                    alternative: None,
                    ..track.attempt.clone()
                },
                ..track.clone()
            };
            return self.expand(&on_accepted, (&Seed::Accepted, outcome), branch_id);
        }
        Ok(quanta)
    }

    /// Asks system 20 what follows a quantum that started from `seed` and
    /// ended in `outcome`, and turns its answers into quanta the
    /// deterministic proposer can carry out: a continuation of the
    /// branch's partial checkpoint, and a new branch. An attempt it cannot
    /// realize (a probe, a hand edit) is observed, counted as tried, and
    /// expansion asked again; empty when nothing warrants another quantum.
    fn expand(
        &mut self,
        track: &Track,
        (seed, outcome): (&Seed, QuantumOutcome),
        branch_id: Option<&str>,
    ) -> Result<Vec<Quantum>, EngineError> {
        let partial = |p: &crate::search::PartialCheckpointRef| {
            self.partials
                .get(&p.digest())
                .ok_or_else(|| EngineError::from(ForestError::UnknownPartial(p.digest())))
        };
        let kept = match &outcome {
            QuantumOutcome::Partial(p) => Some(partial(p)?),
            _ => None,
        };
        // A new branch starts from the partial this one left, else from
        // this one's own seed, and works on that seed's plan: a sibling
        // alternative of the same choice.
        let from = match (kept, seed) {
            (Some(k), _) => Some(k),
            (None, Seed::Partial(p)) => Some(partial(p)?),
            (None, Seed::Accepted) => None,
        };
        let (seed_state, plan) = match from {
            Some(k) => (&k.snapshot, &k.plan),
            None => (&self.search.accepted.snapshot, self.plan),
        };
        let fork = ActionKind::Fork {
            files: seed_state.entries.len() as u64,
            bytes: seed_state.total_bytes(),
        };
        let tried = self.tried.entry(plan.digest()).or_default();
        let forest = self.run.forest();
        let budget = forest.budget();
        let budget_remains =
            budget.admits(&fork).is_ok() && budget.admits(&ActionKind::VerifierRun).is_ok();
        // A continuation works the partial's plan with its first candidate.
        let continuation = match (kept, branch_id) {
            (Some(_), Some(_)) => plan
                .candidates
                .first()
                .map(|c| (c, Plan::attempt_for(c, Strategy::LocalRepair))),
            _ => None,
        };
        loop {
            let state = ExpansionState {
                branches_opened: forest.branches.len(),
                max_branches: self.deterministic_branches,
                budget_remains,
                rho: self.search.ctx.config.gate.rho,
                current: BranchProgress {
                    attempt: track.attempt.clone(),
                    seed: seed.clone(),
                    outcome: outcome.clone(),
                    energies: track.energies.clone(),
                    signatures: track.signatures.clone(),
                    route_changed: false,
                    local_retries_left: track.local_retries_left,
                    correction_empty: track.correction_empty,
                },
                operators: plan.operators(),
                // One packet's candidates share one route (`propose`).
                routes: plan
                    .candidates
                    .iter()
                    .map(|c| c.proposer.clone())
                    .take(1)
                    .collect(),
                context: plan.context(tried, kept.is_some()),
                tried: tried.clone(),
                continuation: continuation.as_ref().map(|(_, a)| a.clone()),
            };
            let mut quanta = Vec::new();
            let mut unrealizable = None;
            let mut repeated = None;
            // The branch's own attempt was made on this plan unless the
            // plan is the new checkpoint's.
            let own_attempt = kept.is_none().then_some(&track.attempt);
            for expansion in next_expansions(&state) {
                match expansion {
                    Expansion::ContinuePartial { partial } => {
                        let (Some(branch_id), Some((candidate, attempt))) =
                            (branch_id, &continuation)
                        else {
                            continue;
                        };
                        quanta.push(Quantum {
                            attempt: attempt.clone(),
                            continues: Some(branch_id.to_owned()),
                            why: format!(
                                "local repair continues partial checkpoint {} on `{}` ({} local \
                                 retries left after this one)",
                                partial.digest().short(12),
                                plan.packet.cluster_title,
                                track.local_retries_left.saturating_sub(1)
                            ),
                            seed: Seed::Partial(partial),
                            candidate: Some((*candidate).clone()),
                        });
                    }
                    Expansion::Open {
                        triggers,
                        seed,
                        attempt,
                        novelty,
                    } => {
                        let fired: Vec<&str> = triggers.iter().map(|t| t.name()).collect();
                        let candidate = match plan.realize(&attempt) {
                            // The same fix under another strategy (a
                            // continuation's) is no new attempt.
                            Some(Realization::Candidate(candidate))
                                if tried.iter().chain(own_attempt).any(|made| {
                                    matches!(plan.realize(made),
                                        Some(Realization::Candidate(c)) if c == candidate)
                                }) =>
                            {
                                repeated = Some(attempt);
                                continue;
                            }
                            Some(Realization::Candidate(candidate)) => Some(candidate.clone()),
                            Some(Realization::Probe) => None,
                            None => {
                                unrealizable = Some((fired.join(", "), attempt));
                                continue;
                            }
                        };
                        quanta.push(Quantum {
                            why: format!(
                                "{}: a new {} ({attempt})",
                                fired.join(", "),
                                novelty.name()
                            ),
                            attempt,
                            continues: None,
                            seed,
                            candidate,
                        });
                    }
                }
            }
            if let Some(attempt) = repeated {
                tried.push(attempt);
                continue;
            }
            let Some((fired, attempt)) = unrealizable else {
                return Ok(quanta);
            };
            self.run.observe(
                branch_id.unwrap_or_default(),
                &format!(
                    "{fired}: expansion chose {attempt}, which the deterministic proposer cannot \
                     carry out"
                ),
            )?;
            tried.push(attempt);
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

/// The seed `seed` names: its content, its measurement and the plan its
/// evidence offers. A partial checkpoint's content is its overlay over the
/// user's disk, so it seeds a child even after its own branch moved on.
fn seed_view<'p>(
    ctx: &Ctx<'_>,
    (accepted, plan): (&'p Accepted, &'p Plan),
    partials: &'p BTreeMap<Digest, KeptPartial>,
    seed: &Seed,
) -> Result<SeedView<'p>, EngineError> {
    let (snapshot, overlay, measurement, plan, labels) = match seed {
        Seed::Accepted => (
            &accepted.snapshot,
            &accepted.overlay,
            &accepted.measurement,
            plan,
            &[][..],
        ),
        Seed::Partial(p) => {
            let kept = partials
                .get(&p.digest())
                .ok_or_else(|| EngineError::from(ForestError::UnknownPartial(p.digest())))?;
            (
                &kept.snapshot,
                &kept.overlay,
                &kept.measurement,
                &kept.plan,
                &kept.labels[..],
            )
        }
    };
    Ok(SeedView {
        snapshot,
        source: DirSource::new(ctx.root.to_path_buf(), overlay.clone()),
        measurement,
        plan,
        labels,
    })
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
        report.outcome = BranchOutcome::ineligible(
            NotUsed::BudgetExhausted { limit: None },
            "the search budget has no fork left",
        );
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
        report.outcome = BranchOutcome::ineligible(
            NotUsed::NotMade,
            format!("the branch workspace could not be made: {reason}"),
        );
        return Ok(None);
    }
    if run.forest().is_closed() {
        let _ = std::fs::remove_dir_all(&slot);
        report.outcome = BranchOutcome::ineligible(
            NotUsed::BudgetExhausted { limit: None },
            "the search budget closed the forest",
        );
        return Ok(None);
    }
    let spec = BranchSpec {
        strategy: quantum.attempt.strategy,
        route: quantum.route().to_owned(),
        prompt_program: None,
    };
    let branch = run.fork(quantum.seed.clone(), spec, copied.receipt)?;
    run.append(&records::strategy_selected(run.id(), &branch, &quantum.why))?;
    Ok(Some((branch.branch_id, slot)))
}
