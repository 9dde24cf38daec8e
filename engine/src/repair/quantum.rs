//! One quantum of a running branch: realize a candidate in its slot (or
//! probe a choice for one), measure it, and say what it showed.
//!
//! A measured state is eligible (it awaits selection), kept as a partial
//! checkpoint when it fails only on descent and the proposer can still act
//! on a cluster whose resolution alone would make it eligible, or rejected;
//! a rejection with deterministic evidence records an exact no-good. A
//! state measured on more of the workspace than the accepted one (a
//! library's fix that lets its dependents be compiled) is not compared
//! with it ([`Coverage`]): it is kept as a partial checkpoint whenever the
//! proposer can act on anything it shows, so the repair goes on with what
//! it revealed, and is never a no-good.
//!
//! It must never copy, measure or move the budget except through
//! [`ForestRun`], and never select or commit: that is the step's, once per
//! forest.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::cluster::{EnergyModel, assess};
use crate::digest::Digest;
use crate::error::EngineError;
use crate::gate::{AcceptedTrajectory, Observation};
use crate::language::{StageRole, stage_role};
use crate::measure::Measurement;
use crate::propose::{Candidate, SuggestionProposer};
use crate::search::{
    Attempt, CandidateObservation, Coverage, Eligibility, Environmental, Evidence, Ineligibility,
    NoGoodComponents, NoGoodRefusal, Seed, Support, same_route,
};
use crate::sensor::{StageReport, StageStatus};
use crate::snapshot::{DirSource, Overlay, Snapshot};

use super::accepted::Accepted;
use super::effects::{ForestRun, Probed, realize};
use super::kept_tests;
use super::plan::{
    KeptPartial, Plan, ProbeVerdict, Quantum, Track, cluster_signature, correction_is_empty,
    dominant_cluster, evidence_digest, obligations, packet_energy,
};
use super::session::Session;
use crate::report::{BranchOutcome, BranchReport, NotUsed};

/// A measured, eligible branch awaiting selection.
pub(super) struct Eligible {
    pub(super) branch_id: String,
    pub(super) label: String,
    pub(super) y: Snapshot,
    pub(super) m: Measurement,
}

/// How one quantum ended.
pub(super) enum QuantumEnd {
    /// Measured eligible: the branch awaits selection.
    Eligible(Box<Eligible>),
    /// Ineligible but actionable: kept as a partial checkpoint.
    Partial(Box<KeptPartial>),
    /// Rejected.
    Ineligible,
    /// Cancelled, or the budget closed the forest: nothing more runs.
    Stop,
}

/// How syncing a probed slot back to its seed went.
enum Restored {
    Synced,
    /// The budget refused the copy.
    Refused,
    /// The copy went over its reservation: the branch must be contained.
    Exceeded,
}

/// The seed a quantum starts from: its content, its measurement and the
/// plan its evidence offers.
pub(super) struct SeedView<'p> {
    pub(super) snapshot: &'p Snapshot,
    pub(super) source: DirSource,
    pub(super) measurement: &'p Measurement,
    pub(super) plan: &'p Plan,
    /// The fixes the seed already holds (a partial checkpoint's labels).
    pub(super) labels: &'p [String],
}

/// One quantum of the running branch `branch_id`, borrowing what it needs
/// from its step.
pub(super) struct QuantumRun<'q, 'a> {
    pub(super) run: &'q mut ForestRun<'a>,
    pub(super) session: &'q mut Session,
    pub(super) trajectory: &'q AcceptedTrajectory,
    pub(super) accepted: &'q Accepted,
    /// The step's plan: its targeted cluster.
    pub(super) plan: &'q Plan,
    /// The repair's start and the content realizing it: the tests no
    /// candidate may remove or switch off.
    pub(super) start: &'q (Snapshot, Overlay),
    pub(super) measured_roots: &'q mut BTreeSet<Digest>,
    /// The targeted cluster's energy at the accepted state.
    pub(super) targeted_before: f64,
    pub(super) branch_id: String,
    pub(super) slot: PathBuf,
    pub(super) report: &'q mut BranchReport,
    /// The fixes the seed already holds, named with this quantum's own in
    /// what it leads to: the summary lists every change of the diff.
    pub(super) seed_labels: &'q [String],
}

impl QuantumRun<'_, '_> {
    /// A diagnostic probe over a choice. Each untried alternative is applied
    /// alone in the branch slot and measured by the build stage only (see
    /// [`ForestRun::probe_build`]), then the slot is synced back to its
    /// seed. The probe implicates every alternative that builds with the
    /// lowest energy, if that is below the seed's ([`ProbeVerdict`]): the
    /// build cannot tell them apart, so each is measured in full, this
    /// branch taking the first. Those that built worse, or could not be
    /// applied, are passed over. Nothing is implicated when the probe
    /// stopped (its branch contained, its budget refused).
    pub(super) async fn probe(
        &mut self,
        seed: &SeedView<'_>,
        tried: &[Attempt],
    ) -> Result<ProbeVerdict, EngineError> {
        let ctx = self.run.ctx;
        let branch_id = self.branch_id.clone();
        let branch_id = branch_id.as_str();
        // A check stage alone (`build`, `python.typecheck`): the narrowest
        // run that says whether a choice compiles; the one that reported
        // the cluster's diagnostics, in a mixed workspace.
        let reported = seed
            .plan
            .packet
            .diagnostics
            .first()
            .map(|d| d.stage.as_str());
        let Some(build) = ctx
            .sensors
            .iter()
            .filter(|s| stage_role(s.stage()) == StageRole::Check)
            .min_by_key(|s| Some(s.stage()) != reported)
        else {
            self.run
                .observe(branch_id, "no check stage to probe with")?;
            return Ok(ProbeVerdict::default());
        };
        let narrowed_energy =
            |reports: &[StageReport]| assess(reports, &[], &EnergyModel::V1).energy;
        let seed_reports: Vec<StageReport> = seed
            .measurement
            .reports
            .iter()
            .filter(|r| r.stage == build.stage())
            .cloned()
            .collect();
        let seed_energy = narrowed_energy(&seed_reports);
        let untried = seed.plan.candidates.iter().filter(|c| {
            c.alternative.is_some()
                && !tried
                    .iter()
                    .any(|a| same_route(&a.route, &c.proposer) && a.alternative == c.alternative)
        });
        let mut probed: Vec<(u32, f64)> = Vec::new();
        let mut not_applicable: Vec<u32> = Vec::new();
        for candidate in untried {
            if ctx.cancel.is_cancelled() || self.run.forest().is_closed() {
                break;
            }
            let probed_build = self
                .run
                .probe_build(build.as_ref(), &self.slot, candidate)
                .await?;
            if matches!(probed_build, Probed::Refused) {
                break;
            }
            // Syncing the slot back to its seed is a copy of what the probe
            // touched: reserved and settled like any other.
            match self.restore_seed(candidate, seed)? {
                Restored::Synced => {}
                Restored::Refused => {
                    // A slot that cannot be restored must not be edited further.
                    self.run.observe(
                        branch_id,
                        "probe stopped: the budget refused syncing its slot back to the seed",
                    )?;
                    return Ok(ProbeVerdict::default());
                }
                Restored::Exceeded => {
                    // Something in the slot changed beyond what the probe
                    // touched (a build writing sources): contained.
                    let reason = "contained: syncing the probed slot back to its seed copied \
                                  more than the probe touched";
                    self.run.contain(branch_id, reason)?;
                    self.report.outcome = BranchOutcome::ineligible(NotUsed::Barrier, reason);
                    return Ok(ProbeVerdict::default());
                }
            }
            let Some(index) = candidate.alternative else {
                continue;
            };
            let alternative = index + 1;
            let energy = match probed_build {
                Probed::Built(report)
                    if !matches!(report.status, StageStatus::Unavailable { .. }) =>
                {
                    narrowed_energy(std::slice::from_ref(&*report))
                }
                Probed::NotApplicable(reason) => {
                    self.run.observe(
                        branch_id,
                        &format!(
                            "probe #{alternative} `{}`: not applicable: {reason}",
                            candidate.label
                        ),
                    )?;
                    not_applicable.push(index);
                    continue;
                }
                Probed::Built(_) | Probed::Refused => {
                    self.run.observe(
                        branch_id,
                        &format!(
                            "probe #{alternative} `{}`: the build could not run",
                            candidate.label
                        ),
                    )?;
                    continue;
                }
            };
            self.run.observe(
                branch_id,
                &format!(
                    "probe #{alternative} `{}`: build energy {energy:.2} (seed {seed_energy:.2})",
                    candidate.label
                ),
            )?;
            probed.push((index, energy));
        }
        let mut verdict = ProbeVerdict::of(&probed, seed_energy);
        if verdict.implicated.len() > 1 {
            let tied: Vec<String> = verdict
                .implicated
                .iter()
                .map(|i| format!("#{}", i + 1))
                .collect();
            self.run.observe(
                branch_id,
                &format!(
                    "probe implicates {}, tied for the best build: each is measured in full",
                    tied.join(", ")
                ),
            )?;
        }
        verdict.passed_over.extend(not_applicable);
        Ok(verdict)
    }

    /// Syncs the probed slot back to its seed.
    fn restore_seed(
        &mut self,
        candidate: &Candidate,
        seed: &SeedView<'_>,
    ) -> Result<Restored, EngineError> {
        let touched: BTreeSet<&str> = candidate
            .edits
            .iter()
            .map(|(path, _)| path.as_str())
            .collect();
        let Some(copied) = self
            .run
            .sync_back(seed.snapshot, &seed.source, &self.slot, &touched)?
        else {
            return Ok(Restored::Refused);
        };
        let synced = copied.copy?;
        if synced.root != seed.snapshot.root {
            return Err(EngineError::Invariant(format!(
                "{}: the probe slot did not sync back to its seed",
                self.slot.display()
            )));
        }
        Ok(if copied.exceeded {
            Restored::Exceeded
        } else {
            Restored::Synced
        })
    }

    /// Realizes `candidate` in the slot, measures it under a verifier
    /// reservation, and records what it showed in `track` and the report.
    /// An ineligible state whose evidence the proposer can still act on is
    /// kept as a partial checkpoint; any other is rejected.
    pub(super) async fn measure(
        &mut self,
        quantum: &Quantum,
        candidate: &Candidate,
        components: &NoGoodComponents,
        track: &mut Track,
    ) -> Result<QuantumEnd, EngineError> {
        let ctx = self.run.ctx;
        let branch_id = self.branch_id.clone();
        let seed_root = match &quantum.seed {
            Seed::Accepted => self.accepted.snapshot.root,
            Seed::Partial(p) => p.state_root,
        };
        let y = match realize(&self.slot, candidate) {
            Ok(y) => y,
            Err(reason) => {
                self.reject(
                    NotUsed::NotMade,
                    format!("candidate could not be realized: {reason}"),
                )?;
                return Ok(QuantumEnd::Ineligible);
            }
        };
        self.report.root = Some(y.root);
        if y.root == seed_root {
            self.reject(NotUsed::NothingNew, "the candidate changed nothing".into())?;
            let support = Support::from_evidence(Evidence::UnchangedState { root: y.root });
            self.run
                .record_no_good(self.session, &branch_id, components, support)?;
            return Ok(QuantumEnd::Ineligible);
        }
        if self.run.forest().is_measured_root(&y.root) || self.measured_roots.contains(&y.root) {
            // Not re-measured (system 20): no verifier reservation.
            self.reject(
                NotUsed::NothingNew,
                "duplicate of an already measured state".into(),
            )?;
            return Ok(QuantumEnd::Ineligible);
        }

        let label = format!("branch {branch_id}");
        let Some((m, receipt)) = self.run.measure(&y, &self.slot, &label).await? else {
            self.run
                .abandon(&branch_id, "no verifier run left in the budget")?;
            self.report.outcome = BranchOutcome::ineligible(
                NotUsed::BudgetExhausted {
                    limit: Some("verifier_runs".into()),
                },
                "the search budget has no verifier run left",
            );
            return Ok(QuantumEnd::Stop);
        };
        if !ctx.cancel.is_cancelled() {
            // Only a finished measurement makes a root "already measured".
            self.measured_roots.insert(y.root);
        }
        let report = &mut *self.report;
        report.energy = Some(m.energy());
        report.hard_pass = m.hard_pass();
        report.preview = Some(self.trajectory.preview(&Observation {
            root: y.root,
            energy: m.energy(),
            hard_pass: m.hard_pass(),
        }));
        report.stages = m.stage_summaries(ctx.config);
        report.oracle = m.oracle.clone();
        report.clusters = m
            .assessment
            .clusters
            .iter()
            .map(|c| c.title.clone())
            .collect();
        track.energies.push(m.energy());
        track.correction_empty = false;
        if let Some(dominant) = dominant_cluster(&m, &self.plan.packet.cluster_id) {
            track.signatures.push(cluster_signature(&dominant.id));
        }
        if self.run.forest().is_closed() {
            self.report.outcome = BranchOutcome::ineligible(
                NotUsed::BudgetExhausted { limit: None },
                "the search budget closed the forest",
            );
            return Ok(QuantumEnd::Stop);
        }
        if ctx.cancel.is_cancelled() {
            self.run.abandon(&branch_id, "cancelled")?;
            self.report.outcome = BranchOutcome::ineligible(NotUsed::Stopped, "cancelled");
            return Ok(QuantumEnd::Stop);
        }
        // Under every test policy: the tests of the repair's start are to be
        // satisfied, never removed or switched off.
        let (start, overlay) = self.start;
        let source = DirSource::new(ctx.root.to_path_buf(), overlay.clone());
        let weakened = kept_tests::weakened(
            (start, &source),
            (&y, &self.slot),
            &self.accepted.measurement,
            &m,
        )?;
        if !weakened.is_empty() {
            let tests: Vec<String> = weakened.iter().take(4).map(|w| w.test.clone()).collect();
            let reason = format!(
                "it removes or switches off tests that existed when the repair started: {}; \
                 a repair satisfies the tests, it never removes them",
                crate::sensor::test_inventory::describe(&weakened)
            );
            self.reject(NotUsed::TestsWeakened { tests }, reason)?;
            return Ok(QuantumEnd::Ineligible);
        }
        let coverage = Coverage::of(
            &self.accepted.measurement.unchecked(),
            (&m.unchecked(), &m.failing()),
        );
        let observation = CandidateObservation {
            root: y.root,
            energy: m.energy(),
            hard_pass: m.hard_pass(),
            targeted_improvement: self.targeted_before
                - packet_energy(&m, &self.plan.packet.cluster_id),
            profile: m.profile,
            coverage: coverage.clone(),
            barriers_hold: true,
            required_sensors_ran: m.required_ran(ctx.config),
        };
        let reasons = match self.run.judge(
            &branch_id,
            &observation,
            m.flaky(),
            self.trajectory,
            receipt,
        )? {
            Eligibility::Eligible => {
                return Ok(QuantumEnd::Eligible(Box::new(Eligible {
                    branch_id,
                    label: self.labels_with(candidate).join("; "),
                    y,
                    m,
                })));
            }
            Eligibility::Ineligible(reasons) => reasons,
        };
        let (cause, reason) = if reasons.contains(&Ineligibility::RequiredSensorMissing) {
            let stages = m.unavailable();
            let reason = format!("a required stage could not run: {}", stages.join(", "));
            (NotUsed::StageUnavailable { stages }, reason)
        } else if let Some(not_compared) = not_compared(&coverage) {
            not_compared
        } else if reasons.contains(&Ineligibility::NotDescending) {
            let reason = format!(
                "no descent: energy {:.2} is not below {:.2} − ρ",
                m.energy(),
                self.trajectory.v_best()
            );
            (NotUsed::NoDescent, reason)
        } else {
            let reason = "an operational barrier does not hold".to_owned();
            (NotUsed::Barrier, reason)
        };
        // A state measured by every required stage and failing only on descent
        // is worth keeping when the proposer can act on a cluster whose
        // resolution alone would make the state eligible: evidence the branch
        // can still turn into a descent, not a pre-existing residual to carry.
        // One measured on less of the workspace (a library broken on the way
        // to a fix) is kept on the same terms: it is no descent either. One
        // measured on more is not compared at all: whatever it revealed is
        // the next work, and only a hard pass of the whole workspace ends it.
        let bar = self.trajectory.v_best() - ctx.config.gate.rho;
        let revealing = reasons == [Ineligibility::MeasuredOnMore];
        let keepable = revealing
            || reasons == [Ineligibility::NotDescending]
            || reasons == [Ineligibility::MeasuredOnLess];
        let actionable = keepable
            .then(|| {
                Plan::first_actionable(
                    &m,
                    None,
                    |cluster| revealing || m.energy() - cluster.energy <= bar,
                    ctx.config,
                    &SuggestionProposer,
                )
            })
            .flatten();
        if let Some(next_plan) = actionable {
            let checkpoint = self.run.checkpoint_partial(
                &branch_id,
                y.root,
                next_plan.digest(),
                obligations(&m),
                evidence_digest(&m),
                &reason,
            )?;
            self.report.outcome = BranchOutcome::Partial {
                reason: format!(
                    "{reason}; kept as partial checkpoint {} with `{}` to work on",
                    checkpoint.digest().short(12),
                    next_plan.packet.cluster_title
                ),
                revealed: match &coverage {
                    Coverage::Reveals(units) if revealing => units.clone(),
                    _ => Vec::new(),
                },
            };
            let overlay = self.accepted.overlay_toward(ctx, self.slot.clone(), &y)?;
            return Ok(QuantumEnd::Partial(Box::new(KeptPartial {
                checkpoint,
                branch_id: self.branch_id.clone(),
                overlay,
                snapshot: y,
                measurement: m,
                plan: next_plan,
                labels: self.labels_with(candidate),
            })));
        }
        track.correction_empty = correction_is_empty(&m, &self.plan.packet.cluster_id);
        self.reject(cause, reason)?;
        if reasons.contains(&Ineligibility::MeasuredOnMore) {
            // Not compared, so no evidence against the candidate.
            return Ok(QuantumEnd::Ineligible);
        }
        // Only deterministic evidence supports a no-good: a stage that could not
        // run is environmental, and a retry may succeed.
        let support = if observation.required_sensors_ran {
            dominant_cluster(&m, &self.plan.packet.cluster_id)
                .map(|cluster| {
                    Support::from_evidence(Evidence::Cluster {
                        cluster,
                        assessment: &m.assessment,
                    })
                })
                .unwrap_or(Err(NoGoodRefusal::Empty))
        } else {
            Support::from_evidence(Evidence::Environmental(Environmental::SensorUnavailable))
        };
        self.run
            .record_no_good(self.session, &branch_id, components, support)?;
        Ok(QuantumEnd::Ineligible)
    }

    /// The seed's fixes and then `candidate`'s.
    fn labels_with(&self, candidate: &Candidate) -> Vec<String> {
        let mut labels = self.seed_labels.to_vec();
        labels.push(candidate.label.clone());
        labels
    }

    /// Rejects the running branch (see [`ForestRun::reject`]).
    pub(super) fn reject(&mut self, cause: NotUsed, reason: String) -> Result<(), EngineError> {
        self.run.reject(self.report, cause, reason)
    }
}

/// Why a candidate measured on another part of the workspace than the
/// accepted state was not compared with it, and the engine's wording;
/// `None` on the same coverage.
fn not_compared(coverage: &Coverage) -> Option<(NotUsed, String)> {
    let quoted = |units: &[String]| {
        let quoted: Vec<String> = units.iter().map(|unit| format!("`{unit}`")).collect();
        quoted.join(", ")
    };
    match coverage {
        Coverage::Same => None,
        Coverage::Reveals(units) => Some((
            NotUsed::MeasuredOnMore {
                units: units.clone(),
            },
            format!(
                "reveals errors in {}, which could not be checked before: measured on more of \
                 the workspace, not compared",
                quoted(units)
            ),
        )),
        Coverage::Hides(units) => Some((
            NotUsed::MeasuredOnLess {
                units: units.clone(),
            },
            format!(
                "keeps {} from being checked, which could be before: measured on less of the \
                 workspace, not compared",
                quoted(units)
            ),
        )),
    }
}
