//! The plan: what a step may attempt, as pure values.
//!
//! A [`Plan`] is a correction packet and the deterministic proposer's
//! candidates for it; a [`Quantum`] is one attempt of it, in a new branch
//! or continuing a partial checkpoint. This file also owns the identities
//! attempts are known by: the nine no-good components of an attempt
//! ([`attempt_components`]), the proposal digest, residual signatures and
//! the evidence digest of a partial checkpoint.
//!
//! It must never do I/O: no slot, no sensor, no ledger. Everything here is
//! a function of its arguments, so the same evidence always yields the
//! same plan and the same identities, which is what makes an exact no-good
//! recorded by one process match the same attempt in the next.

use crate::cluster::{Cluster, ResidualClass};
use crate::config::Config;
use crate::correction::{CorrectionOperator, CorrectionPacket};
use crate::digest::{CanonicalHasher, Digest};
use crate::measure::Measurement;
use crate::propose::{Candidate, Proposer};
use crate::search::{
    Attempt, NoGoodComponents, OperatorKind, PartialCheckpointRef, Seed, Strategy, StrategyContext,
    build_digest, probe_attempt, probe_first, same_route,
};
use crate::sensor::Sensor;
use crate::snapshot::{Overlay, Snapshot};

/// Clusters worth repairing, the requested one first, warnings never.
fn repair_order<'m>(m: &'m Measurement, target: Option<&str>) -> Vec<&'m Cluster> {
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

/// The exact no-good components of trying `proposal` (see
/// [`proposal_digest`]) with `strategy` from the accepted state at
/// `accepted_root`, measured under sensor `profile`.
pub(super) fn attempt_components(
    (config, sensors): (&Config, &[Box<dyn Sensor>]),
    (accepted_root, profile): (Digest, Digest),
    strategy: Strategy,
    proposal: Digest,
) -> NoGoodComponents {
    let mut required = config.stages.required.clone();
    required.sort();
    let mut manifest = CanonicalHasher::new("trellis.domain-manifest.v1");
    // The profile digests the sensor fingerprints, required stages and
    // energy model: the residual schema and verifier suite.
    manifest.digest(&profile).u64(required.len() as u64);
    for stage in &required {
        manifest.str(stage);
    }
    // The hard-gate policy: a "no descent" verdict depends on ρ and B, which
    // may come from a layer outside the workspace (user config, editor).
    manifest
        .f64(config.gate.rho)
        .u64(u64::from(config.gate.rejection_budget));
    let mut fingerprints = CanonicalHasher::new("trellis.sensor-fingerprints.v1");
    fingerprints.u64(sensors.len() as u64);
    for s in sensors {
        let f = s.fingerprint();
        fingerprints.str(&f.tool).str(&f.version).str(&f.config);
    }
    NoGoodComponents {
        accepted_root,
        domain_manifest: manifest.finish(),
        strategy: strategy.digest(),
        prompt_program: None,
        proposal,
        grant: grant_digest(),
        tool_catalog: tool_catalog_digest(),
        sensor_fingerprint: fingerprints.finish(),
        runtime_build: build_digest(),
    }
}

/// How many candidates a plan asks the proposer for: every alternative a
/// diagnostic probe may have to narrow down, far more than the branches
/// that could try them one by one.
pub(super) const PLAN_CANDIDATES: usize = 16;

/// How an attempt is carried out by the deterministic proposer.
pub(super) enum Realization<'p> {
    Candidate(&'p Candidate),
    /// A diagnostic probe picks the alternative in the branch.
    Probe,
}

/// A correction packet and the proposer's candidates for it: what a seed
/// (the accepted state or a partial checkpoint) offers to attempts.
pub(super) struct Plan {
    pub(super) packet: CorrectionPacket,
    pub(super) candidates: Vec<Candidate>,
    /// The plan's identity (see [`Plan::digest`]), computed once: attempts
    /// are tracked and checkpoints named by it on every quantum.
    id: Digest,
}

impl Plan {
    /// The plan for the first cluster of `m` (`target` first, warnings
    /// never) that `worth` admits and the proposer has candidates for: the
    /// actionable evidence of a state.
    pub(super) fn first_actionable(
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

    /// The plan for the first cluster of `m` (`target` first, warnings
    /// never) that `worth` admits, with no deterministic candidate: what a
    /// model route works on when the compiler offers nothing.
    pub(super) fn for_model(
        m: &Measurement,
        target: Option<&str>,
        worth: impl Fn(&crate::cluster::Cluster) -> bool,
        config: &Config,
    ) -> Option<Plan> {
        let unavailable = m.unavailable();
        repair_order(m, target)
            .into_iter()
            .find(|cluster| worth(cluster))
            .map(|cluster| {
                let packet = CorrectionPacket::for_cluster(
                    &m.assessment,
                    cluster,
                    &config.stages.required,
                    &unavailable,
                );
                Plan::new(packet, Vec::new())
            })
    }

    /// The candidate that carries out `attempt`, if the deterministic
    /// proposer can: the single-fix suggestions, or one named alternative.
    /// A probe or a hand edit has no deterministic realization.
    pub(super) fn realize(&self, attempt: &Attempt) -> Option<Realization<'_>> {
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
    pub(super) fn attempt_for(candidate: &Candidate, strategy: Strategy) -> Attempt {
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
    pub(super) fn opening(&self, max_branches: usize) -> (Attempt, Option<&Candidate>) {
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
    /// [`PLAN_CANDIDATES`] of it, a fix its tool does not vouch for among
    /// them), so expansion never asks for one it lacks nor misses one it has.
    pub(super) fn operators(&self) -> Vec<CorrectionOperator> {
        let mut operators: Vec<CorrectionOperator> = self
            .packet
            .operators
            .iter()
            .filter(|op| !matches!(op, CorrectionOperator::ChooseAlternative { .. }))
            .cloned()
            .collect();
        let alternatives = self.alternatives();
        if alternatives > 0 {
            // Where the packet puts a choice: after the single fixes.
            let at = usize::from(matches!(
                operators.first(),
                Some(CorrectionOperator::ApplySuggestions { .. })
            ));
            operators.insert(at, CorrectionOperator::ChooseAlternative { alternatives });
        }
        operators
    }

    pub(super) fn alternatives(&self) -> usize {
        self.candidates
            .iter()
            .filter(|c| c.alternative.is_some())
            .count()
    }

    /// The evidence the strategy assumptions are checked against.
    pub(super) fn context(&self, tried: &[Attempt], witnessed_partial: bool) -> StrategyContext {
        let taken = |c: &Candidate| {
            tried
                .iter()
                .any(|a| same_route(&a.route, &c.proposer) && a.alternative == c.alternative)
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
    pub(super) fn digest(&self) -> Digest {
        self.id
    }
}

/// What a diagnostic probe found, from the build energy of each
/// alternative it measured alone (`(alternative, energy)`, in probe order)
/// and the seed's.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ProbeVerdict {
    /// The alternatives that build best, below the seed, in probe order:
    /// the probe cannot tell them apart, so each is measured in full.
    pub(super) implicated: Vec<u32>,
    /// The alternatives that built worse: tried, by the probe.
    pub(super) passed_over: Vec<u32>,
}

impl ProbeVerdict {
    pub(super) fn of(probed: &[(u32, f64)], seed_energy: f64) -> ProbeVerdict {
        let best = probed
            .iter()
            .map(|&(_, energy)| energy)
            .fold(f64::INFINITY, f64::min);
        let (implicated, passed_over) = probed
            .iter()
            .partition::<Vec<_>, _>(|&&(_, energy)| energy == best && energy < seed_energy);
        let ids = |v: Vec<&(u32, f64)>| v.into_iter().map(|&(i, _)| i).collect();
        ProbeVerdict {
            implicated: ids(implicated),
            passed_over: ids(passed_over),
        }
    }
}

/// A partial checkpoint, with the plan that continuing it works from. It
/// never enters the accepted fold.
pub(super) struct KeptPartial {
    pub(super) checkpoint: PartialCheckpointRef,
    /// The branch that reached it.
    pub(super) branch_id: String,
    pub(super) snapshot: Snapshot,
    /// The checkpoint's content as an overlay over the user's disk (the
    /// accepted overlay and what the branch changed): a child copies it
    /// from here, whatever its branch's slot holds since.
    pub(super) overlay: Overlay,
    pub(super) measurement: Measurement,
    pub(super) plan: Plan,
    /// The labels of every fix its state holds, oldest first, so the fix
    /// that continues it names them all.
    pub(super) labels: Vec<String>,
}

/// What one branch has shown so far: system 20's inputs.
#[derive(Clone)]
pub(super) struct Track {
    pub(super) attempt: Attempt,
    pub(super) energies: Vec<f64>,
    pub(super) signatures: Vec<Digest>,
    pub(super) local_retries_left: u32,
    /// The latest ineligible measurement's dominant residual carries no
    /// diagnostic and no counterexample (see [`correction_is_empty`]).
    pub(super) correction_empty: bool,
}

impl Track {
    /// A branch about to make `attempt`, nothing measured yet.
    pub(super) fn new(attempt: Attempt, local_retries_left: u32) -> Track {
        Track {
            attempt,
            energies: Vec::new(),
            signatures: Vec::new(),
            local_retries_left,
            correction_empty: false,
        }
    }
}

/// Whether the correction packet the dominant residual of `m` offers is
/// empty: no residual to explain the failure, or one with neither a
/// diagnostic nor a counterexample (a required stage that could not run).
pub(super) fn correction_is_empty(m: &Measurement, target: &str) -> bool {
    dominant_cluster(m, target).is_none_or(|c| c.diagnostics.is_empty() && c.failures.is_empty())
}

/// The next quantum: an attempt, where it runs, and its candidate.
pub(super) struct Quantum {
    pub(super) attempt: Attempt,
    /// `Some(branch)`: that branch continues its own partial checkpoint;
    /// `None`: a new branch forks from `seed`.
    pub(super) continues: Option<String>,
    pub(super) seed: Seed,
    /// The candidate, or `None` while a diagnostic probe has yet to pick it.
    pub(super) candidate: Option<Candidate>,
    /// Why it runs, for `branch_strategy_selected`.
    pub(super) why: String,
}

impl Quantum {
    pub(super) fn label(&self, plan: &Plan) -> String {
        match &self.candidate {
            Some(c) => c.label.clone(),
            None => format!(
                "diagnostic probe over {} alternatives of `{}`",
                plan.alternatives(),
                plan.packet.cluster_title
            ),
        }
    }

    /// The route the ledger and the report name: the one whose fixes the
    /// branch applies (its candidate's, which after a partial checkpoint
    /// may be another tool's than the attempt it continues), else the
    /// attempt's.
    pub(super) fn route(&self) -> &str {
        self.candidate
            .as_ref()
            .map_or(&self.attempt.route, |c| &c.proposer)
    }
}

/// The no-good proposal component of a quantum: the candidate's digest (a
/// probe's is its plan's, since the probe's pick follows from it), bound to
/// the partial checkpoint it is applied on.
pub(super) fn proposal_digest(quantum: &Quantum, plan: &Plan) -> Digest {
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
pub(super) fn cluster_signature(cluster_id: &str) -> Digest {
    CanonicalHasher::new("trellis.residual-signature.v1")
        .str(cluster_id)
        .finish()
}

/// Signatures of a measurement's required clusters: its unresolved
/// obligations.
pub(super) fn obligations(m: &Measurement) -> Vec<Digest> {
    repair_order(m, None)
        .into_iter()
        .map(|c| cluster_signature(&c.id))
        .collect()
}

/// Digest of the structured evidence measured at a state.
pub(super) fn evidence_digest(m: &Measurement) -> Digest {
    let mut h = CanonicalHasher::new("trellis.partial-evidence.v1");
    h.digest(&m.profile).u64(m.assessment.clusters.len() as u64);
    for c in &m.assessment.clusters {
        h.str(&c.id).f64(c.energy);
    }
    h.finish()
}

/// The residual that best explains a branch's failure: the targeted
/// cluster if it survived, else the branch's first required one.
pub(super) fn dominant_cluster<'m>(m: &'m Measurement, target: &str) -> Option<&'m Cluster> {
    m.assessment
        .clusters
        .iter()
        .find(|c| c.id == target)
        .or_else(|| repair_order(m, None).into_iter().next())
}

pub(super) fn packet_energy(m: &Measurement, cluster_id: &str) -> f64 {
    m.assessment
        .clusters
        .iter()
        .find(|c| c.id == cluster_id)
        .map_or(0.0, |c| c.energy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{EnergyModel, assess};
    use crate::sensor::{StageStatus, test_report};

    fn measured(reports: Vec<crate::sensor::StageReport>) -> Measurement {
        let assessment = assess(&reports, &["build".into(), "test".into()], &EnergyModel::V1);
        Measurement {
            root: Digest::ZERO,
            reports,
            assessment,
            profile: Digest::ZERO,
            oracle: None,
        }
    }

    /// Issue 36: the alternatives that tie for the lowest build energy,
    /// below the seed's, are all implicated (each is measured in full);
    /// the rest are passed over, and none is implicated when none builds
    /// better than the seed.
    #[test]
    fn a_probe_implicates_every_alternative_tied_for_the_best_build() {
        let probed = [(0, 0.0), (1, 2.0), (2, 3.0), (3, 0.0), (4, 0.5)];
        assert_eq!(
            ProbeVerdict::of(&probed, 3.63),
            ProbeVerdict {
                implicated: vec![0, 3],
                passed_over: vec![1, 2, 4],
            }
        );
        assert_eq!(
            ProbeVerdict::of(&[(0, 3.0), (1, 4.0)], 3.0).implicated,
            Vec::<u32>::new()
        );
        assert_eq!(ProbeVerdict::of(&[], 3.0), ProbeVerdict::default());
    }

    /// Item 15: `EmptyCorrection` is reachable. A state whose dominant
    /// residual is a required stage that could not run offers a packet
    /// with no diagnostic and no counterexample; a failing test does not.
    #[test]
    fn a_stage_that_could_not_run_leaves_an_empty_correction() {
        let unavailable = measured(vec![
            test_report("build", StageStatus::Passed, vec![], vec![]),
            test_report(
                "test",
                StageStatus::Unavailable {
                    reason: "timed out after 2s".into(),
                },
                vec![],
                vec![],
            ),
        ]);
        assert!(correction_is_empty(&unavailable, "no-such-cluster"));
        let failing = measured(vec![
            test_report("build", StageStatus::Passed, vec![], vec![]),
            test_report(
                "test",
                StageStatus::Failed,
                vec![],
                vec![crate::diagnostic::TestFailure {
                    binary: "--lib".into(),
                    name: "tests::adds".into(),
                    output: "assertion failed".into(),
                    location: None,
                    calls: vec![],
                    rerun: None,
                }],
            ),
        ]);
        assert!(!correction_is_empty(&failing, "no-such-cluster"));
    }
}
