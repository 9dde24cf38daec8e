//! The search loop: steps over the accepted trajectory until hard pass,
//! the decision bound, or no eligible candidate.
//!
//! [`Search`] (in [`super::state`]) holds what persists across steps: the session, the gate's
//! [`AcceptedTrajectory`], the accepted state x_k, and the roots already
//! measured. Each turn picks the first actionable plan at x_k and runs one
//! [`Step`] (one forest) on it; a committed step advances x_k and stores
//! it. A generation interrupted after accepted steps is continued here
//! first: its decisions replayed through the gate, its last accepted state
//! rebuilt and re-measured in the resumed forest.
//!
//! It must never copy, measure or move the budget itself (that is
//! [`ForestRun`]'s), never write the user's files, and ledgers only the
//! repair-level refusals (no candidate, decision bound).

use std::collections::BTreeSet;

use crate::error::{EngineError, ResumeRefusal};
use crate::gate::{AcceptedTrajectory, Observation, Verdict};
use crate::measure::Measurement;
use crate::propose::SuggestionProposer;
use crate::records;
use crate::report::{RepairOptions, RepairStatus, StepReport, Unfixed};
use crate::runtime::blocking;
use crate::snapshot::{DirSource, Overlay, Snapshot};

use super::Ctx;
use super::accepted::{Accepted, accepted_objects, rebuild_accepted, store_accepted_state};
use super::effects::{ForestRun, branch_slot};
use super::plan::Plan;
use super::quantum::Eligible;
use super::session::{Continuation, Session};
use super::state::Search;
use super::step::{Step, StepEnd};
use super::unfixed::{Ended, unfixed};

/// What a repair's search ends with.
pub(crate) struct SearchResult {
    pub status: RepairStatus,
    pub steps: Vec<StepReport>,
    pub last: Accepted,
    pub labels: Vec<String>,
    /// No model is configured, and one could have worked a cluster the
    /// compiler offers nothing for.
    pub model_would_help: bool,
    pub unfixed: Vec<Unfixed>,
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
    let x0 = start.snapshot.clone();
    let search = match session.continuation.take() {
        Some(continuation) => {
            Search::continued(ctx, session, continuation, start, max_branches).await?
        }
        None => {
            let observed = Observation {
                root: start.snapshot.root,
                energy: start.measurement.energy(),
                hard_pass: start.measurement.hard_pass(),
            };
            let trajectory = AcceptedTrajectory::new(
                &session.node,
                session.generation,
                observed,
                ctx.config.gate,
            );
            let origin = (start.snapshot.clone(), start.overlay.clone());
            Search::new(ctx, session, trajectory, start, max_branches, origin)
        }
    };
    search.run(repair_id, &x0, options).await
}

impl<'a> Search<'a> {
    fn new(
        ctx: &'a Ctx<'a>,
        session: &'a mut Session,
        trajectory: AcceptedTrajectory,
        accepted: Accepted,
        max_branches: usize,
        start: (Snapshot, Overlay),
    ) -> Search<'a> {
        // Every state the generation accepted has been measured already.
        let measured_roots = trajectory.states.iter().map(|state| state.root).collect();
        Search {
            ctx,
            session,
            trajectory,
            accepted,
            measured_roots,
            max_branches,
            model_chain: None,
            start,
        }
    }

    /// Continues an interrupted generation from its last accepted state
    /// (errata 1, 25, 35): replays the recorded decisions through the gate,
    /// rebuilds the accepted state from the stored blobs and checks its root,
    /// then re-measures it in the resumed forest, which claims the interrupted
    /// forest's usage and pays for the copy and the verifier run like any other
    /// action. That forest stays open for the step at this state. Anything that
    /// does not line up refuses the repair, naming the ledger and the reason.
    async fn continued(
        ctx: &'a Ctx<'a>,
        session: &'a mut Session,
        continuation: Continuation,
        start: Accepted,
        max_branches: usize,
    ) -> Result<Search<'a>, EngineError> {
        let what = format!(
            "cannot continue the interrupted repair {}/{}",
            session.node, session.generation
        );
        let refuse = |reason: &str| {
            EngineError::from(ResumeRefusal {
                ledger: ctx.ledger.path().to_path_buf(),
                what: what.clone(),
                reason: reason.to_owned(),
            })
        };
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

        let mut run = ForestRun::open(ctx, session, snapshot.root, max_branches)?;
        let measurement = match remeasure(&mut run, &snapshot, &overlay).await? {
            Remeasured::Measured(measurement) => measurement,
            Remeasured::Refused(reason) => {
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
            session.resumed_forest = Some(run.into_forest());
        }
        let accepted = Accepted {
            snapshot,
            overlay,
            measurement,
        };
        let origin = (start.snapshot.clone(), start.overlay.clone());
        Ok(Search::new(
            ctx,
            session,
            trajectory,
            accepted,
            max_branches,
            origin,
        ))
    }

    /// Steps until the repair ends; `x0` is the generation's start state.
    async fn run(
        mut self,
        repair_id: &str,
        x0: &Snapshot,
        options: &RepairOptions,
    ) -> Result<SearchResult, EngineError> {
        let ctx = self.ctx;
        // Steps an interrupted run of this generation already took count
        // against `max_steps` as well.
        let continued_steps = self.trajectory.decisions.len();
        let mut steps: Vec<StepReport> = Vec::new();
        let mut labels: Vec<String> = self
            .trajectory
            .decisions
            .iter()
            .filter(|d| d.verdict.accepted())
            .map(|d| format!("kept {} of the interrupted repair", d.candidate_id))
            .collect();
        let proposer = SuggestionProposer;
        // Clusters whose forest found nothing eligible at the current accepted
        // state; cleared when a step is accepted.
        let mut exhausted: BTreeSet<String> = BTreeSet::new();
        let mut model_would_help = false;
        let mut out_of_steps = false;

        let status = loop {
            if ctx.cancel.is_cancelled() {
                break RepairStatus::Cancelled;
            }
            if continued_steps + steps.len() >= ctx.config.exploration.max_steps {
                out_of_steps = true;
                break RepairStatus::ResidualsRemain;
            }
            let target = if steps.is_empty() {
                options.target_cluster.as_deref()
            } else {
                None
            };
            let worth = |cluster: &crate::cluster::Cluster| !exhausted.contains(&cluster.id);
            // The deterministic route first (system 20); a configured model
            // works a cluster the compiler offers nothing for.
            let plan = Plan::first_actionable(
                &self.accepted.measurement,
                target,
                worth,
                ctx.config,
                &proposer,
            )
            .or_else(|| {
                (!ctx.config.models.is_empty())
                    .then(|| Plan::for_model(&self.accepted.measurement, target, worth, ctx.config))
                    .flatten()
            });
            let Some(plan) = plan else {
                model_would_help = ctx.config.models.is_empty()
                    && Plan::for_model(&self.accepted.measurement, target, worth, ctx.config)
                        .is_some();
                let detail = if exhausted.is_empty() {
                    "no cluster has a tool suggestion to try".to_owned()
                } else {
                    format!(
                        "no branch was eligible for any cluster with a tool suggestion ({} tried)",
                        exhausted.len()
                    )
                };
                ctx.ledger
                    .append(&records::refused_no_candidate(repair_id, &detail))?;
                break self.stopped_without_candidate();
            };

            let (end, mut step) = Step::open(&mut self, &plan)?.run().await?;
            let (decision, chosen) = match end {
                StepEnd::Committed { decision, chosen } => {
                    // Only eligible candidates are selected and a commit must equal
                    // its preview, so a rejection here is a broken invariant.
                    if !decision.verdict.accepted() {
                        return Err(EngineError::Invariant(format!(
                            "{}: the gate rejected a committed candidate whose preview it accepted",
                            decision.candidate_id
                        )));
                    }
                    (decision, chosen)
                }
                StepEnd::Cancelled => {
                    steps.push(step);
                    break RepairStatus::Cancelled;
                }
                StepEnd::BoundReached { detail } => {
                    ctx.ledger.append(&records::refused_bound(
                        repair_id,
                        self.trajectory.bound(),
                        &detail,
                    ))?;
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
            let Eligible {
                branch_id,
                label,
                y,
                m,
            } = *chosen;
            step.decision = Some(decision.clone());
            steps.push(step);
            labels.push(label);
            exhausted.clear();

            // The accepted content lives on as an overlay over the user's disk,
            // so the slot can be reused by the next step.
            self.accepted = self
                .accepted
                .advance(ctx, branch_slot(ctx, &branch_id), y, m)?;
            store_accepted_state(
                ctx,
                self.session,
                &decision.candidate_id,
                x0,
                &self.accepted,
            )?;
            if decision.verdict == Verdict::AcceptedHardPass {
                break RepairStatus::HardPass;
            }
        };
        if let Some(forest) = self.session.resumed_forest.take() {
            // The loop ended before any step ran in it.
            ForestRun::resumed(ctx, forest).close("no step ran from the resumed state")?;
        }
        let ended = match status {
            RepairStatus::HardPass | RepairStatus::AlreadyClean => Ended::HardPass,
            RepairStatus::Cancelled => Ended::Cancelled,
            RepairStatus::BoundReached => Ended::DecisionBound,
            _ if out_of_steps => Ended::StepLimit,
            _ => Ended::NothingToTry,
        };
        let unfixed = unfixed(
            &self.accepted.measurement.assessment.clusters,
            &steps,
            ended,
            !ctx.config.models.is_empty(),
        );
        Ok(SearchResult {
            status,
            steps,
            last: self.accepted,
            labels,
            model_would_help,
            unfixed,
        })
    }

    /// How a repair ends when a step finds no eligible candidate: nothing
    /// accepted at all, or residuals left after the accepted descents.
    fn stopped_without_candidate(&self) -> RepairStatus {
        if self.trajectory.decisions.is_empty() {
            RepairStatus::NoEligibleCandidate
        } else {
            RepairStatus::ResidualsRemain
        }
    }
}

/// How re-measuring a rebuilt accepted state went.
enum Remeasured {
    Measured(Measurement),
    /// The budget or the copy refused, and why.
    Refused(String),
}

/// Re-measures a rebuilt accepted state in branch slot 0, its copy and its
/// verifier run each reserved against `run`'s budget and settled.
async fn remeasure(
    run: &mut ForestRun<'_>,
    state: &Snapshot,
    overlay: &Overlay,
) -> Result<Remeasured, EngineError> {
    let ctx = run.ctx;
    let slot = ctx.slots.branch(0);
    let source = DirSource::new(ctx.root.to_path_buf(), overlay.clone());
    let Some(copied) = run.copy_state(state, &source, &slot)? else {
        return Ok(Remeasured::Refused(
            "the resumed budget cannot pay for a copy of the accepted state".into(),
        ));
    };
    match copied.copy {
        Err(e) => {
            return Ok(Remeasured::Refused(format!(
                "the accepted state could not be copied: {e}"
            )));
        }
        Ok(_) if copied.exceeded => {
            return Ok(Remeasured::Refused(
                "the copy of the accepted state exceeded its reservation".into(),
            ));
        }
        Ok(_) => {}
    }
    let Some((m, _)) = run.measure(state, &slot, "the accepted state").await? else {
        return Ok(Remeasured::Refused(
            "the resumed budget has no verifier run left to re-measure the accepted state".into(),
        ));
    };
    run.observe(
        "",
        &format!(
            "re-measured accepted state {} to continue the interrupted repair: energy {}",
            state.root.short(12),
            m.energy()
        ),
    )?;
    Ok(Remeasured::Measured(m))
}
