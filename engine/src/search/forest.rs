//! The search forest and its branches (PSP-10 Definitions 2 and 3, system 19,
//! Proposition 1).
//!
//! A [`SearchForest`] belongs to one (node, generation, accepted root). It
//! holds at most three branch identities (children of partial checkpoints
//! included), runs at most one at a time, and commits at most one candidate
//! through the ordinary [`AcceptedTrajectory::submit`]. Previews use the pure
//! gate evaluator and never touch the decision list.
//!
//! Every branch records a witness chain: the digests from the accepted root
//! to its seed. A root branch's chain is `[accepted_root]`; a child of a
//! partial checkpoint inherits the producer's chain plus the checkpoint's
//! state root, never the producer's conversation. A chain that does not
//! start at the forest's accepted root is refused.
//!
//! The forest creates a branch only with the [`Receipt`] of a settled fork
//! reservation and records a measurement only with the receipt of a settled
//! verifier run, so neither can happen without a reservation (gate AC).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::budget::{
    ActionKind, BudgetRefusal, Receipt, Reservation, SearchBudget, SearchLimits, SearchUsage,
    SettleError, Settlement,
};
use super::coverage::Coverage;
use super::strategy::Strategy;
use crate::digest::{CanonicalHasher, Digest};
use crate::gate::{AcceptedTrajectory, GateDecision, GateRefusal, Observation, Verdict};
use crate::select::{self, BranchMeasurement};

/// The release bound on branch identities per forest.
pub const MAX_BRANCHES: usize = 3;

/// Who a forest (and its budget) belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ForestBinding {
    pub node: String,
    pub generation: u32,
    pub accepted_root: Digest,
}

/// A private, content-addressed snapshot of an ineligible branch state that
/// still carries actionable structured evidence. Never an accepted state.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PartialCheckpointRef {
    pub state_root: Digest,
    pub accepted_ancestor: Digest,
    /// The producing branch's witness chain (accepted root to its seed).
    pub parent_witness: Vec<Digest>,
    /// The correction packet the next quantum should work from.
    pub correction: Option<Digest>,
    /// Digests of the required residual clusters still unresolved, sorted.
    pub remaining_obligations: Vec<Digest>,
    /// Digest of the structured evidence measured at this state.
    pub evidence_digest: Digest,
}

impl PartialCheckpointRef {
    /// The checkpoint's content address.
    pub fn digest(&self) -> Digest {
        let mut h = CanonicalHasher::new("trellis.partial-checkpoint.v1");
        h.digest(&self.state_root).digest(&self.accepted_ancestor);
        h.u64(self.parent_witness.len() as u64);
        for link in &self.parent_witness {
            h.digest(link);
        }
        match &self.correction {
            Some(c) => h.digest(c),
            None => h.bytes(&[]),
        };
        h.u64(self.remaining_obligations.len() as u64);
        for o in &self.remaining_obligations {
            h.digest(o);
        }
        h.digest(&self.evidence_digest).finish()
    }

    /// The witness chain of a branch seeded from this checkpoint.
    pub fn child_witness(&self) -> Vec<Digest> {
        let mut chain = self.parent_witness.clone();
        chain.push(self.state_root);
        chain
    }
}

/// Where a new branch starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seed {
    /// The forest's accepted root x_k.
    Accepted,
    /// A partial checkpoint made by a branch of this forest.
    Partial(PartialCheckpointRef),
}

/// How a branch proposes: its strategy, its route (a model route or a
/// deterministic proposer id), and the compiled prompt program (none for
/// deterministic proposers).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchSpec {
    pub strategy: Strategy,
    pub route: String,
    pub prompt_program: Option<Digest>,
}

/// What the required sensors observed of one realized candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateObservation {
    pub root: Digest,
    pub energy: f64,
    pub hard_pass: bool,
    pub targeted_improvement: f64,
    /// Digest of the sensor profile and energy model used.
    pub profile: Digest,
    /// What the measurement covers against its root's: energies measured
    /// on different parts of the workspace are not compared.
    #[serde(default)]
    pub coverage: Coverage,
    /// Φ: operational barriers hold.
    pub barriers_hold: bool,
    /// S_req: every required sensor ran.
    pub required_sensors_ran: bool,
}

/// Why `observation` cannot be judged by descent at all: only a candidate
/// measured on its root's coverage is, and a hard pass, which passed every
/// required stage on the whole workspace ([`Coverage`]).
fn incomparable(observation: &CandidateObservation) -> Option<Ineligibility> {
    match observation.coverage {
        Coverage::Same => None,
        Coverage::Reveals(_) if observation.hard_pass => None,
        Coverage::Reveals(_) => Some(Ineligibility::MeasuredOnMore),
        Coverage::Hides(_) => Some(Ineligibility::MeasuredOnLess),
    }
}

/// A candidate measured eligible, kept for selection and commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredCandidate {
    /// The measurement's own identity (see [`SearchForest::candidate_id`]).
    pub candidate_id: String,
    pub root: Digest,
    pub measurement: BranchMeasurement,
    /// The gate's verdict at measurement time; the commit must reproduce it.
    pub preview: Verdict,
}

/// Why E(y) = Φ ∧ S_req ∧ G ∧ W failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ineligibility {
    BarrierViolated,
    RequiredSensorMissing,
    NotDescending,
    /// Measured on more of the workspace than its root ([`Coverage`]): its
    /// energy counts errors its root could not see, so it is not compared.
    MeasuredOnMore,
    /// Measured on less of the workspace than its root: its energy misses
    /// errors its root counted, so it is not compared.
    MeasuredOnLess,
}

/// The outcome of measuring one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Eligibility {
    Eligible,
    Ineligible(Vec<Ineligibility>),
}

/// A branch's place in system 19's lifecycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SearchBranchState {
    Ready,
    Running,
    PartialCheckpointed(PartialCheckpointRef),
    CandidateMeasured,
    Selected,
    Rejected { reason: String },
    Abandoned { reason: String },
    Contained { certificate_id: String },
}

impl SearchBranchState {
    pub fn name(&self) -> &'static str {
        match self {
            SearchBranchState::Ready => "ready",
            SearchBranchState::Running => "running",
            SearchBranchState::PartialCheckpointed(_) => "partial_checkpointed",
            SearchBranchState::CandidateMeasured => "candidate_measured",
            SearchBranchState::Selected => "selected",
            SearchBranchState::Rejected { .. } => "rejected",
            SearchBranchState::Abandoned { .. } => "abandoned",
            SearchBranchState::Contained { .. } => "contained",
        }
    }

    /// Rejected, abandoned, contained and selected branches take no quantum.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            SearchBranchState::Selected
                | SearchBranchState::Rejected { .. }
                | SearchBranchState::Abandoned { .. }
                | SearchBranchState::Contained { .. }
        )
    }

    /// Whether system 19 allows moving from `self` to `next`.
    pub fn can_become(&self, next: &SearchBranchState) -> bool {
        use SearchBranchState as S;
        matches!(
            (self, next),
            (S::Ready, S::Running)
                | (S::Running, S::PartialCheckpointed(_))
                | (S::Running, S::CandidateMeasured)
                | (S::Running, S::Rejected { .. })
                | (S::PartialCheckpointed(_), S::Running)
                | (S::CandidateMeasured, S::Selected)
                | (S::CandidateMeasured, S::Rejected { .. })
                | (
                    S::Ready | S::Running | S::PartialCheckpointed(_) | S::CandidateMeasured,
                    S::Abandoned { .. }
                )
                | (
                    S::Ready | S::Running | S::PartialCheckpointed(_),
                    S::Contained { .. }
                )
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchBranch {
    pub branch_id: String,
    /// The branch whose partial checkpoint seeded this one.
    pub parent_branch: Option<String>,
    /// Always the forest's accepted root.
    pub accepted_ancestor: Digest,
    /// The accepted root or the parent's partial checkpoint root.
    pub seed: Digest,
    /// Digests from the accepted root to `seed`, both included.
    pub witness: Vec<Digest>,
    pub strategy: Strategy,
    pub route: String,
    pub prompt_program: Option<Digest>,
    pub state: SearchBranchState,
    /// The eligible candidate this branch measured, if any.
    pub measurement: Option<MeasuredCandidate>,
    /// Recorded cost: the action units settled on this branch's behalf (its
    /// fork, and every action settled while it ran). Deterministic in what
    /// the branch did, never in how long it took: selection key 4 and
    /// frontier key 4.
    pub cost: u64,
    /// Measurements taken of this branch's states so far.
    pub measurements: u32,
}

impl SearchBranch {
    /// Checkpoint depth: 0 for a branch seeded at the accepted root.
    pub fn depth(&self) -> usize {
        self.witness.len() - 1
    }
}

/// The selection of system 19 / Proposition 5.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub selected: String,
    /// The selected measurement's identity.
    pub candidate_id: String,
    /// Measured branches that lost; they are now rejected.
    pub not_selected: Vec<String>,
}

/// A forest operation that was refused; the forest is unchanged.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ForestError {
    #[error("forest `{0}` is closed")]
    Closed(String),
    #[error("a forest holds at most {max} branch identities")]
    BranchLimit { max: usize },
    #[error("max_branches must be between 1 and {MAX_BRANCHES}, got {0}")]
    InvalidMaxBranches(usize),
    #[error("no branch `{0}` in this forest")]
    UnknownBranch(String),
    #[error("branch `{branch}` cannot go from {from} to {to}")]
    IllegalTransition {
        branch: String,
        from: &'static str,
        to: &'static str,
    },
    #[error("branch `{running}` is running; one branch runs at a time")]
    AnotherRunning { running: String },
    #[error("{action} requires the receipt of a settled {expected} reservation")]
    MissingReceipt {
        action: &'static str,
        expected: &'static str,
    },
    #[error("the witness chain does not lead from the accepted root {root} to the seed: {problem}")]
    BrokenWitness { root: Digest, problem: &'static str },
    #[error("the receipt was issued by forest `{owner}`, not this one")]
    ForeignReceipt { owner: String },
    #[error("partial checkpoint {0} was not made by a branch of this forest")]
    UnknownPartial(Digest),
    #[error("candidate root {0} was already measured in this forest")]
    DuplicateRoot(Digest),
    #[error(
        "the trajectory is at {found} but the forest was opened at {expected}: stale root, refused"
    )]
    StaleRoot { expected: Digest, found: Digest },
    #[error("forest already selected branch `{0}`")]
    AlreadySelected(String),
    #[error("no eligible candidate measured under the common sensor profile")]
    NoEligibleCandidate,
    #[error("no branch is selected")]
    NothingSelected,
    #[error("this forest already made its one commit")]
    AlreadyCommitted,
    #[error("the commit would decide {committed:?} but the preview decided {previewed:?}: refused")]
    PreviewMismatch {
        previewed: Verdict,
        committed: Verdict,
    },
    #[error("the gate refused the commit: {0}")]
    Gate(GateRefusal),
    #[error(transparent)]
    Budget(#[from] BudgetRefusal),
    #[error(transparent)]
    Settle(#[from] SettleError),
}

/// A settlement, and the branches abandoned because it closed the forest.
#[derive(Debug, PartialEq, Eq)]
pub struct ForestSettlement {
    pub settlement: Settlement,
    pub abandoned: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct RecordedPartial {
    digest: Digest,
    producer: String,
}

#[derive(Clone, Debug)]
pub struct SearchForest {
    pub forest_id: String,
    pub node: String,
    pub generation: u32,
    pub accepted_root: Digest,
    pub branches: Vec<SearchBranch>,
    /// The interrupted forest whose usage this one carries.
    pub resumed_from: Option<String>,
    budget: SearchBudget,
    max_branches: usize,
    partials: Vec<RecordedPartial>,
    measured_roots: BTreeSet<Digest>,
    commit_attempted: bool,
}

impl SearchForest {
    /// Opens a forest over `binding` with `budget` (fresh, or carrying an
    /// interrupted forest's usage; see [`super::resume`]).
    pub fn open(
        forest_id: String,
        binding: ForestBinding,
        budget: SearchBudget,
        max_branches: usize,
        resumed_from: Option<String>,
    ) -> Result<Self, ForestError> {
        if !(1..=MAX_BRANCHES).contains(&max_branches) {
            return Err(ForestError::InvalidMaxBranches(max_branches));
        }
        let mut budget = budget;
        budget.bind(&forest_id);
        Ok(SearchForest {
            forest_id,
            node: binding.node,
            generation: binding.generation,
            accepted_root: binding.accepted_root,
            branches: Vec::new(),
            resumed_from,
            budget,
            max_branches,
            partials: Vec::new(),
            measured_roots: BTreeSet::new(),
            commit_attempted: false,
        })
    }

    pub fn binding(&self) -> ForestBinding {
        ForestBinding {
            node: self.node.clone(),
            generation: self.generation,
            accepted_root: self.accepted_root,
        }
    }

    pub fn budget(&self) -> &SearchBudget {
        &self.budget
    }

    pub fn limits(&self) -> &SearchLimits {
        self.budget.limits()
    }

    pub fn usage(&self) -> SearchUsage {
        self.budget.usage()
    }

    pub fn is_closed(&self) -> bool {
        self.budget.is_closed()
    }

    pub fn branch(&self, branch_id: &str) -> Option<&SearchBranch> {
        self.branches.iter().find(|b| b.branch_id == branch_id)
    }

    /// Branches that may still take a quantum.
    pub fn live_branches(&self) -> impl Iterator<Item = &SearchBranch> {
        self.branches.iter().filter(|b| !b.state.is_terminal())
    }

    /// Whether another branch identity may be opened.
    pub fn has_branch_room(&self) -> bool {
        self.branches.len() < self.max_branches
    }

    /// A realized root measured before is not measured again (system 20).
    pub fn is_measured_root(&self, root: &Digest) -> bool {
        self.measured_roots.contains(root)
    }

    fn ensure_open(&self) -> Result<(), ForestError> {
        if self.is_closed() {
            Err(ForestError::Closed(self.forest_id.clone()))
        } else {
            Ok(())
        }
    }

    /// Reserves an action against the forest's budget.
    pub fn reserve(&mut self, kind: ActionKind) -> Result<Reservation, ForestError> {
        self.ensure_open()?;
        Ok(self.budget.reserve(kind)?)
    }

    /// Settles an action; an overflow closes the forest and abandons every
    /// live branch.
    pub fn settle(
        &mut self,
        reservation: Reservation,
        actual: ActionKind,
    ) -> Result<ForestSettlement, ForestError> {
        let settlement = self.budget.settle(reservation, actual)?;
        // One action unit, paid by the branch that runs (if any).
        if let Some(running) = self
            .branches
            .iter_mut()
            .find(|b| b.state == SearchBranchState::Running)
        {
            running.cost += 1;
        }
        let abandoned = if settlement.overflow.is_some() {
            self.abandon_live("the search budget overflowed")
        } else {
            Vec::new()
        };
        Ok(ForestSettlement {
            settlement,
            abandoned,
        })
    }

    /// Charges elapsed time at a branch boundary; returns the branches
    /// abandoned if it closed the forest.
    pub fn charge_elapsed(&mut self, secs: u64) -> Result<Vec<String>, ForestError> {
        match self.budget.charge_elapsed(secs)? {
            Some(_) => Ok(self.abandon_live("the search deadline passed")),
            None => Ok(Vec::new()),
        }
    }

    /// Closes the forest for good. Every live branch is abandoned (its
    /// workspace must be removed); the ids are returned in branch order.
    pub fn close(&mut self, reason: &str) -> Vec<String> {
        self.budget.close();
        self.abandon_live(reason)
    }

    fn abandon_live(&mut self, reason: &str) -> Vec<String> {
        let mut abandoned = Vec::new();
        for branch in &mut self.branches {
            if !branch.state.is_terminal() {
                branch.state = SearchBranchState::Abandoned {
                    reason: reason.to_owned(),
                };
                abandoned.push(branch.branch_id.clone());
            }
        }
        abandoned
    }

    fn index(&self, branch_id: &str) -> Result<usize, ForestError> {
        self.branches
            .iter()
            .position(|b| b.branch_id == branch_id)
            .ok_or_else(|| ForestError::UnknownBranch(branch_id.to_owned()))
    }

    fn transition(&mut self, branch_id: &str, next: SearchBranchState) -> Result<(), ForestError> {
        self.ensure_open()?;
        let i = self.index(branch_id)?;
        let branch = &mut self.branches[i];
        if !branch.state.can_become(&next) {
            return Err(ForestError::IllegalTransition {
                branch: branch_id.to_owned(),
                from: branch.state.name(),
                to: next.name(),
            });
        }
        branch.state = next;
        Ok(())
    }

    fn expect_receipt(
        &self,
        receipt: &Receipt,
        action: &'static str,
        expected: &'static str,
    ) -> Result<(), ForestError> {
        if receipt.owner() != self.forest_id {
            return Err(ForestError::ForeignReceipt {
                owner: receipt.owner().to_owned(),
            });
        }
        if receipt.kind().name() != expected {
            return Err(ForestError::MissingReceipt { action, expected });
        }
        Ok(())
    }

    /// Creates a branch from `seed` after its eager copy was reserved,
    /// copied and settled. The new branch is `Ready`.
    pub fn fork(
        &mut self,
        seed: Seed,
        spec: BranchSpec,
        fork_receipt: Receipt,
    ) -> Result<&SearchBranch, ForestError> {
        self.ensure_open()?;
        self.expect_receipt(&fork_receipt, "a fork", "fork")?;
        if !self.has_branch_room() {
            return Err(ForestError::BranchLimit {
                max: self.max_branches,
            });
        }
        let (parent_branch, witness) = match seed {
            Seed::Accepted => (None, vec![self.accepted_root]),
            Seed::Partial(partial) => {
                if partial.accepted_ancestor != self.accepted_root {
                    return Err(ForestError::BrokenWitness {
                        root: self.accepted_root,
                        problem: "the checkpoint names another accepted ancestor",
                    });
                }
                let witness = partial.child_witness();
                verify_witness(&self.accepted_root, &witness, &partial.state_root)?;
                let digest = partial.digest();
                let producer = self
                    .partials
                    .iter()
                    .find(|p| p.digest == digest)
                    .ok_or(ForestError::UnknownPartial(digest))?;
                (Some(producer.producer.clone()), witness)
            }
        };
        let branch = SearchBranch {
            branch_id: format!("b{}", self.branches.len() + 1),
            parent_branch,
            accepted_ancestor: self.accepted_root,
            seed: *witness.last().expect("a witness chain is never empty"),
            witness,
            strategy: spec.strategy,
            route: spec.route,
            prompt_program: spec.prompt_program,
            state: SearchBranchState::Ready,
            measurement: None,
            // The fork's own action unit.
            cost: 1,
            measurements: 0,
        };
        self.branches.push(branch);
        Ok(self.branches.last().expect("just pushed"))
    }

    /// Gives `branch_id` the next quantum: `Ready` or `PartialCheckpointed`
    /// (local repair continues the partial) becomes `Running`.
    pub fn start(&mut self, branch_id: &str) -> Result<(), ForestError> {
        self.ensure_open()?;
        if let Some(running) = self
            .branches
            .iter()
            .find(|b| b.state == SearchBranchState::Running && b.branch_id != branch_id)
        {
            return Err(ForestError::AnotherRunning {
                running: running.branch_id.clone(),
            });
        }
        self.transition(branch_id, SearchBranchState::Running)
    }

    /// Records the measurement of a running branch's realized candidate
    /// (Definition 3). The gate is evaluated as a pure preview: no decision
    /// is appended. An eligible candidate makes the branch
    /// `CandidateMeasured`; an ineligible one leaves it `Running` for the
    /// runtime to checkpoint, reject or abandon.
    pub fn measure(
        &mut self,
        branch_id: &str,
        observation: &CandidateObservation,
        trajectory: &AcceptedTrajectory,
        verifier_receipt: Receipt,
    ) -> Result<Eligibility, ForestError> {
        self.ensure_open()?;
        self.expect_receipt(&verifier_receipt, "a measurement", "verifier_run")?;
        self.ensure_trajectory_at_root(trajectory)?;
        let i = self.index(branch_id)?;
        if self.branches[i].state != SearchBranchState::Running {
            return Err(ForestError::IllegalTransition {
                branch: branch_id.to_owned(),
                from: self.branches[i].state.name(),
                to: SearchBranchState::CandidateMeasured.name(),
            });
        }
        if self.measured_roots.contains(&observation.root) {
            return Err(ForestError::DuplicateRoot(observation.root));
        }
        self.branches[i].measurements += 1;
        let candidate_id = self
            .candidate_id(branch_id)
            .expect("the branch was just measured");
        let preview = trajectory.preview(&Observation {
            root: observation.root,
            energy: observation.energy,
            hard_pass: observation.hard_pass,
        });
        let mut reasons = Vec::new();
        if !observation.barriers_hold {
            reasons.push(Ineligibility::BarrierViolated);
        }
        if !observation.required_sensors_ran {
            reasons.push(Ineligibility::RequiredSensorMissing);
        }
        if let Some(incomparable) = incomparable(observation) {
            reasons.push(incomparable);
        } else if !preview.accepted() {
            reasons.push(Ineligibility::NotDescending);
        }
        self.measured_roots.insert(observation.root);
        if !reasons.is_empty() {
            return Ok(Eligibility::Ineligible(reasons));
        }
        let branch = &mut self.branches[i];
        branch.measurement = Some(MeasuredCandidate {
            candidate_id,
            root: observation.root,
            measurement: BranchMeasurement {
                branch_id: branch.branch_id.clone(),
                hard_pass: observation.hard_pass,
                energy: observation.energy,
                targeted_improvement: observation.targeted_improvement,
                cost: branch.cost,
                profile: observation.profile,
            },
            preview,
        });
        branch.state = SearchBranchState::CandidateMeasured;
        Ok(Eligibility::Eligible)
    }

    /// The identity of `branch_id`'s latest measurement,
    /// `<forest>/<branch>/m<n>`: each measurement its own, so a branch that
    /// continues its partial checkpoint names each state it measured apart.
    /// `None` before its first.
    pub fn candidate_id(&self, branch_id: &str) -> Option<String> {
        let branch = self.branch(branch_id)?;
        (branch.measurements > 0)
            .then(|| format!("{}/{branch_id}/m{}", self.forest_id, branch.measurements))
    }

    /// Keeps a running branch's ineligible state as a private partial
    /// checkpoint. Its witness extends the branch's own seed witness.
    pub fn checkpoint_partial(
        &mut self,
        branch_id: &str,
        state_root: Digest,
        correction: Option<Digest>,
        mut remaining_obligations: Vec<Digest>,
        evidence_digest: Digest,
    ) -> Result<PartialCheckpointRef, ForestError> {
        let i = self.index(branch_id)?;
        remaining_obligations.sort();
        remaining_obligations.dedup();
        let partial = PartialCheckpointRef {
            state_root,
            accepted_ancestor: self.accepted_root,
            parent_witness: self.branches[i].witness.clone(),
            correction,
            remaining_obligations,
            evidence_digest,
        };
        self.transition(
            branch_id,
            SearchBranchState::PartialCheckpointed(partial.clone()),
        )?;
        self.partials.push(RecordedPartial {
            digest: partial.digest(),
            producer: branch_id.to_owned(),
        });
        Ok(partial)
    }

    /// An ineligible or unselected branch: its workspace must be removed.
    pub fn reject(&mut self, branch_id: &str, reason: &str) -> Result<(), ForestError> {
        self.transition(
            branch_id,
            SearchBranchState::Rejected {
                reason: reason.to_owned(),
            },
        )
    }

    /// A branch given up before it produced a candidate.
    pub fn abandon(&mut self, branch_id: &str, reason: &str) -> Result<(), ForestError> {
        self.transition(
            branch_id,
            SearchBranchState::Abandoned {
                reason: reason.to_owned(),
            },
        )
    }

    /// A branch stopped by a containment certificate (a copy over its
    /// reservation, an effect outside its grant).
    pub fn contain(&mut self, branch_id: &str, certificate_id: &str) -> Result<(), ForestError> {
        self.transition(
            branch_id,
            SearchBranchState::Contained {
                certificate_id: certificate_id.to_owned(),
            },
        )
    }

    /// Selects one measured candidate by Proposition 5 among those measured
    /// under `profile`; the other measured branches are rejected. A forest
    /// selects once.
    pub fn select(&mut self, profile: Digest) -> Result<Selection, ForestError> {
        self.ensure_open()?;
        if let Some(b) = self
            .branches
            .iter()
            .find(|b| b.state == SearchBranchState::Selected)
        {
            return Err(ForestError::AlreadySelected(b.branch_id.clone()));
        }
        let measured: Vec<BranchMeasurement> = self
            .branches
            .iter()
            .filter(|b| b.state == SearchBranchState::CandidateMeasured)
            .filter_map(|b| b.measurement.as_ref().map(|m| m.measurement.clone()))
            .collect();
        let winner = select::select(&measured, profile).ok_or(ForestError::NoEligibleCandidate)?;
        let selected = measured[winner].branch_id.clone();
        let candidate_id = self
            .branch(&selected)
            .and_then(|b| b.measurement.as_ref())
            .map(|m| m.candidate_id.clone())
            .expect("a selected branch was measured");
        let mut not_selected = Vec::new();
        for branch in &mut self.branches {
            if branch.state != SearchBranchState::CandidateMeasured {
                continue;
            }
            if branch.branch_id == selected {
                branch.state = SearchBranchState::Selected;
            } else {
                branch.state = SearchBranchState::Rejected {
                    reason: format!("not selected: branch `{selected}` was preferred"),
                };
                not_selected.push(branch.branch_id.clone());
            }
        }
        Ok(Selection {
            selected,
            candidate_id,
            not_selected,
        })
    }

    fn ensure_trajectory_at_root(
        &self,
        trajectory: &AcceptedTrajectory,
    ) -> Result<(), ForestError> {
        let found = trajectory.current().root;
        if trajectory.node != self.node
            || trajectory.generation != self.generation
            || found != self.accepted_root
        {
            return Err(ForestError::StaleRoot {
                expected: self.accepted_root,
                found,
            });
        }
        Ok(())
    }

    /// Submits the selected candidate through the ordinary trajectory
    /// method, once per forest. The trajectory must still be at the root the
    /// forest opened on, and its verdict must equal the preview; otherwise
    /// the commit fails closed and nothing is appended.
    pub fn commit(
        &mut self,
        trajectory: &mut AcceptedTrajectory,
    ) -> Result<GateDecision, ForestError> {
        self.ensure_open()?;
        if self.commit_attempted {
            return Err(ForestError::AlreadyCommitted);
        }
        let candidate = self
            .branches
            .iter()
            .find(|b| b.state == SearchBranchState::Selected)
            .and_then(|b| b.measurement.clone())
            .ok_or(ForestError::NothingSelected)?;
        self.ensure_trajectory_at_root(trajectory)?;
        let observation = Observation {
            root: candidate.root,
            energy: candidate.measurement.energy,
            hard_pass: candidate.measurement.hard_pass,
        };
        let committed = trajectory.preview(&observation);
        if committed != candidate.preview {
            return Err(ForestError::PreviewMismatch {
                previewed: candidate.preview,
                committed,
            });
        }
        self.commit_attempted = true;
        trajectory.submit(&observation).map_err(ForestError::Gate)
    }
}

/// Checks that `chain` starts at `root` and ends at `seed`.
pub fn verify_witness(root: &Digest, chain: &[Digest], seed: &Digest) -> Result<(), ForestError> {
    let broken = |problem| ForestError::BrokenWitness {
        root: *root,
        problem,
    };
    match (chain.first(), chain.last()) {
        (None, _) | (_, None) => Err(broken("the chain is empty")),
        (Some(first), _) if first != root => Err(broken("the chain does not start at the root")),
        (_, Some(last)) if last != seed => Err(broken("the chain does not end at the seed")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::blob_digest;
    use crate::gate::GateParams;
    use crate::search::budget::{Counters, SearchBudget};

    fn root(name: &str) -> Digest {
        blob_digest(name.as_bytes())
    }

    fn trajectory(v0: f64) -> AcceptedTrajectory {
        AcceptedTrajectory::new(
            "n",
            0,
            Observation {
                root: root("x0"),
                energy: v0,
                hard_pass: false,
            },
            GateParams {
                rho: 0.5,
                rejection_budget: 1,
            },
        )
    }

    fn forest_at(t: &AcceptedTrajectory, id: &str) -> SearchForest {
        SearchForest::open(
            id.into(),
            ForestBinding {
                node: t.node.clone(),
                generation: t.generation,
                accepted_root: t.current().root,
            },
            SearchBudget::new(Counters::DEFAULT_LIMITS),
            3,
            None,
        )
        .unwrap()
    }

    fn spec(strategy: Strategy) -> BranchSpec {
        BranchSpec {
            strategy,
            route: crate::diagnostic::Fixer::Rustc.route().into(),
            prompt_program: None,
        }
    }

    fn fork(f: &mut SearchForest, seed: Seed) -> Result<String, ForestError> {
        let r = f.reserve(ActionKind::Fork {
            files: 10,
            bytes: 100,
        })?;
        let s = f.settle(
            r,
            ActionKind::Fork {
                files: 10,
                bytes: 100,
            },
        )?;
        f.fork(seed, spec(Strategy::ApplySuggestions), s.settlement.receipt)
            .map(|b| b.branch_id.clone())
    }

    fn verifier_receipt(f: &mut SearchForest) -> Receipt {
        let r = f.reserve(ActionKind::VerifierRun).unwrap();
        f.settle(r, ActionKind::VerifierRun)
            .unwrap()
            .settlement
            .receipt
    }

    fn obs(name: &str, energy: f64, hard_pass: bool) -> CandidateObservation {
        CandidateObservation {
            root: root(name),
            energy,
            hard_pass,
            targeted_improvement: 1.0,
            profile: Digest::ZERO,
            coverage: Coverage::Same,
            barriers_hold: true,
            required_sensors_ran: true,
        }
    }

    fn measure(
        f: &mut SearchForest,
        t: &AcceptedTrajectory,
        id: &str,
        o: &CandidateObservation,
    ) -> Eligibility {
        let receipt = verifier_receipt(f);
        f.measure(id, o, t, receipt).unwrap()
    }

    #[test]
    fn a_forest_holds_at_most_three_branch_identities() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        for expected in ["b1", "b2", "b3"] {
            assert_eq!(fork(&mut f, Seed::Accepted).unwrap(), expected);
        }
        assert_eq!(
            fork(&mut f, Seed::Accepted),
            Err(ForestError::BranchLimit { max: 3 })
        );
        assert!(matches!(
            SearchForest::open(
                "f".into(),
                f.binding(),
                SearchBudget::new(Counters::DEFAULT_LIMITS),
                4,
                None
            ),
            Err(ForestError::InvalidMaxBranches(4))
        ));
    }

    #[test]
    fn only_one_branch_runs_at_a_time() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        fork(&mut f, Seed::Accepted).unwrap();
        f.start("b1").unwrap();
        assert_eq!(
            f.start("b2"),
            Err(ForestError::AnotherRunning {
                running: "b1".into()
            })
        );
        f.abandon("b1", "no candidate").unwrap();
        f.start("b2").unwrap();
    }

    /// Item 15: `contained` is reached from a running branch (the runtime
    /// contains one whose slot sync went over its reservation), is
    /// terminal, and frees the one running place; it cannot be selected.
    #[test]
    fn a_contained_branch_is_terminal_and_frees_its_running_place() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        fork(&mut f, Seed::Accepted).unwrap();
        f.start("b1").unwrap();
        f.contain("b1", "cert-1").unwrap();
        let state = &f.branch("b1").unwrap().state;
        assert_eq!(state.name(), "contained");
        assert!(state.is_terminal());
        assert!(matches!(
            f.reject("b1", "too late"),
            Err(ForestError::IllegalTransition { .. })
        ));
        assert!(
            f.start("b1").is_err(),
            "a contained branch takes no quantum"
        );
        f.start("b2").unwrap();
        assert_eq!(
            f.select(Digest::ZERO),
            Err(ForestError::NoEligibleCandidate)
        );
    }

    #[test]
    fn illegal_transitions_are_errors_and_change_nothing() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        let err = f.reject("b1", "never ran").unwrap_err();
        assert_eq!(
            err,
            ForestError::IllegalTransition {
                branch: "b1".into(),
                from: "ready",
                to: "rejected"
            }
        );
        assert_eq!(f.branch("b1").unwrap().state, SearchBranchState::Ready);
        f.start("b1").unwrap();
        f.abandon("b1", "gave up").unwrap();
        assert!(f.start("b1").is_err(), "abandoned is terminal");
    }

    #[test]
    fn a_fork_needs_a_fork_receipt_and_a_measurement_a_verifier_receipt() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        let wrong = verifier_receipt(&mut f);
        assert_eq!(
            f.fork(Seed::Accepted, spec(Strategy::ApplySuggestions), wrong)
                .unwrap_err(),
            ForestError::MissingReceipt {
                action: "a fork",
                expected: "fork"
            }
        );
        let mut other = forest_at(&t, "f2");
        let r = other
            .reserve(ActionKind::Fork { files: 1, bytes: 1 })
            .unwrap();
        let foreign = other
            .settle(r, ActionKind::Fork { files: 1, bytes: 1 })
            .unwrap()
            .settlement
            .receipt;
        assert_eq!(
            f.fork(Seed::Accepted, spec(Strategy::ApplySuggestions), foreign)
                .unwrap_err(),
            ForestError::ForeignReceipt { owner: "f2".into() }
        );
        fork(&mut f, Seed::Accepted).unwrap();
        f.start("b1").unwrap();
        let r = f.reserve(ActionKind::Fork { files: 1, bytes: 1 }).unwrap();
        let wrong = f
            .settle(r, ActionKind::Fork { files: 1, bytes: 1 })
            .unwrap()
            .settlement
            .receipt;
        assert!(matches!(
            f.measure("b1", &obs("y", 1.0, false), &t, wrong),
            Err(ForestError::MissingReceipt { .. })
        ));
    }

    #[test]
    fn a_child_of_a_partial_inherits_the_witness_chain() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        f.start("b1").unwrap();
        let partial = f
            .checkpoint_partial(
                "b1",
                root("p1"),
                Some(root("packet")),
                vec![root("o2"), root("o1"), root("o1")],
                root("evidence"),
            )
            .unwrap();
        assert_eq!(partial.parent_witness, vec![t.current().root]);
        assert_eq!(
            partial.remaining_obligations.len(),
            2,
            "sorted and distinct"
        );
        let child = fork(&mut f, Seed::Partial(partial.clone())).unwrap();
        let child = f.branch(&child).unwrap();
        assert_eq!(child.parent_branch.as_deref(), Some("b1"));
        assert_eq!(child.seed, root("p1"));
        assert_eq!(child.witness, vec![t.current().root, root("p1")]);
        assert_eq!(child.depth(), 1);

        // Partial of a partial keeps the whole ancestry.
        f.start(&child.branch_id.clone()).unwrap();
        let grand = f
            .checkpoint_partial("b2", root("p2"), None, vec![], root("e2"))
            .unwrap();
        assert_eq!(grand.parent_witness, vec![t.current().root, root("p1")]);
        let g = fork(&mut f, Seed::Partial(grand)).unwrap();
        assert_eq!(
            f.branch(&g).unwrap().witness,
            vec![t.current().root, root("p1"), root("p2")]
        );
        assert_eq!(f.branch(&g).unwrap().parent_branch.as_deref(), Some("b2"));
    }

    #[test]
    fn a_witness_that_misses_the_accepted_root_is_refused() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        f.start("b1").unwrap();
        let genuine = f
            .checkpoint_partial("b1", root("p1"), None, vec![], root("e"))
            .unwrap();
        let mut forged = genuine.clone();
        forged.parent_witness = vec![root("elsewhere")];
        assert!(matches!(
            fork(&mut f, Seed::Partial(forged)),
            Err(ForestError::BrokenWitness { .. })
        ));
        let mut foreign = genuine.clone();
        foreign.accepted_ancestor = root("other-root");
        assert!(matches!(
            fork(&mut f, Seed::Partial(foreign)),
            Err(ForestError::BrokenWitness { .. })
        ));
        let mut unknown = genuine;
        unknown.evidence_digest = root("never recorded");
        assert!(matches!(
            fork(&mut f, Seed::Partial(unknown)),
            Err(ForestError::UnknownPartial(_))
        ));
        assert_eq!(f.branches.len(), 1, "no refused fork created a branch");
    }

    #[test]
    fn a_measured_root_is_not_measured_again() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        fork(&mut f, Seed::Accepted).unwrap();
        f.start("b1").unwrap();
        measure(&mut f, &t, "b1", &obs("same", 1.0, false));
        f.start("b2").unwrap();
        assert!(f.is_measured_root(&root("same")));
        let receipt = verifier_receipt(&mut f);
        assert_eq!(
            f.measure("b2", &obs("same", 1.0, false), &t, receipt),
            Err(ForestError::DuplicateRoot(root("same")))
        );
    }

    #[test]
    fn ineligible_measurements_name_every_failed_conjunct() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        f.start("b1").unwrap();
        let mut o = obs("y", 3.9, false);
        o.required_sensors_ran = false;
        o.barriers_hold = false;
        assert_eq!(
            measure(&mut f, &t, "b1", &o),
            Eligibility::Ineligible(vec![
                Ineligibility::BarrierViolated,
                Ineligibility::RequiredSensorMissing,
                Ineligibility::NotDescending
            ])
        );
        assert_eq!(f.branch("b1").unwrap().state, SearchBranchState::Running);
    }

    /// Issue 37: the library's fix reveals two errors in its dependents
    /// for the one it fixed. Measured on more of the workspace, it is not
    /// compared, so not "no descent"; a hard pass on it would be.
    #[test]
    fn a_candidate_measured_on_more_of_the_workspace_is_not_compared() {
        let t = trajectory(1.5);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        fork(&mut f, Seed::Accepted).unwrap();
        fork(&mut f, Seed::Accepted).unwrap();
        let revealed = Coverage::Reveals(vec!["hd-a".into(), "hd-b".into()]);
        f.start("b1").unwrap();
        let mut o = obs("revealed", 3.0, false);
        o.coverage = revealed.clone();
        assert_eq!(
            measure(&mut f, &t, "b1", &o),
            Eligibility::Ineligible(vec![Ineligibility::MeasuredOnMore])
        );
        f.abandon("b1", "done").unwrap();
        f.start("b2").unwrap();
        let mut o = obs("hidden", 0.5, false);
        o.coverage = Coverage::Hides(vec!["hd-a".into()]);
        assert_eq!(
            measure(&mut f, &t, "b2", &o),
            Eligibility::Ineligible(vec![Ineligibility::MeasuredOnLess]),
            "a descent that hides a dependent is no descent of like with like"
        );
        f.abandon("b2", "done").unwrap();
        f.start("b3").unwrap();
        let mut o = obs("passed", 0.0, true);
        o.coverage = revealed;
        assert_eq!(measure(&mut f, &t, "b3", &o), Eligibility::Eligible);
    }

    /// The control: on the same coverage, an energy not below v_best − ρ is
    /// still no descent.
    #[test]
    fn a_real_non_descent_on_the_same_coverage_is_still_no_descent() {
        let t = trajectory(1.5);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        f.start("b1").unwrap();
        assert_eq!(
            measure(&mut f, &t, "b1", &obs("worse", 3.0, false)),
            Eligibility::Ineligible(vec![Ineligibility::NotDescending])
        );
    }

    #[test]
    fn selection_follows_proposition_5_and_rejects_the_rest() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        for (id, name, energy, hard) in [("b1", "y1", 1.0, false), ("b2", "y2", 2.0, true)] {
            fork(&mut f, Seed::Accepted).unwrap();
            f.start(id).unwrap();
            assert_eq!(
                measure(&mut f, &t, id, &obs(name, energy, hard)),
                Eligibility::Eligible
            );
        }
        let s = f.select(Digest::ZERO).unwrap();
        assert_eq!(s.selected, "b2", "hard pass before lower energy");
        assert_eq!(s.not_selected, vec!["b1".to_owned()]);
        assert!(matches!(
            f.branch("b1").unwrap().state,
            SearchBranchState::Rejected { .. }
        ));
        assert_eq!(
            f.select(Digest::ZERO),
            Err(ForestError::AlreadySelected("b2".into()))
        );
    }

    /// Item 14: the cost a measurement carries is the action units settled
    /// while its branch ran (its fork included), so it is the same however
    /// long any action took; and each measurement has its own identity.
    #[test]
    fn recorded_cost_counts_the_branch_s_own_actions() {
        let t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        // An action settled while no branch runs is nobody's.
        verifier_receipt(&mut f);
        assert_eq!(f.branch("b1").unwrap().cost, 1, "the fork alone");
        f.start("b1").unwrap();
        verifier_receipt(&mut f); // a probe
        f.charge_elapsed(30).unwrap(); // wall time is no action unit
        assert_eq!(f.candidate_id("b1"), None);
        assert_eq!(
            measure(&mut f, &t, "b1", &obs("y1", 1.0, false)),
            Eligibility::Eligible
        );
        let measured = f.branch("b1").unwrap().measurement.clone().unwrap();
        assert_eq!(measured.measurement.cost, 3, "fork, probe, verifier run");
        assert_eq!(measured.candidate_id, "f1/b1/m1");
        assert_eq!(f.select(Digest::ZERO).unwrap().candidate_id, "f1/b1/m1");
    }

    /// Gate AC at the forest: after `close`, no operation is admitted, so
    /// nothing can be ledgered after `search_closed`, and usage and branch
    /// states stay exactly as closed.
    #[test]
    fn gate_ac_nothing_after_close() {
        let mut t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        for _ in 0..3 {
            fork(&mut f, Seed::Accepted).unwrap();
        }
        f.start("b1").unwrap();
        measure(&mut f, &t, "b1", &obs("y1", 1.0, false));
        f.start("b2").unwrap();
        let in_flight = f.reserve(ActionKind::VerifierRun).unwrap();
        assert_eq!(f.close("triggers exhausted"), vec!["b1", "b2", "b3"]);
        assert!(f.is_closed());
        let usage = f.usage();
        let branches = f.branches.clone();

        let closed = |r: Result<(), ForestError>| {
            assert!(matches!(r, Err(ForestError::Closed(_))), "{r:?}");
        };
        closed(f.reserve(ActionKind::VerifierRun).map(drop));
        closed(f.start("b3"));
        closed(f.reject("b1", "late"));
        closed(f.abandon("b2", "late"));
        closed(f.contain("b3", "cert"));
        closed(
            f.checkpoint_partial("b2", root("p"), None, vec![], root("e"))
                .map(drop),
        );
        closed(f.select(Digest::ZERO).map(drop));
        closed(f.commit(&mut t).map(drop));
        assert!(matches!(
            f.settle(in_flight, ActionKind::VerifierRun),
            Err(ForestError::Settle(SettleError::Closed))
        ));
        assert!(matches!(
            f.charge_elapsed(1),
            Err(ForestError::Budget(BudgetRefusal::Closed))
        ));
        assert_eq!(f.close("again"), Vec::<String>::new());
        assert_eq!(f.usage(), usage, "usage moved after close");
        assert_eq!(f.branches, branches, "a branch moved after close");
        assert!(t.decisions.is_empty());
    }

    #[test]
    fn a_stale_root_refuses_the_commit() {
        let mut t = trajectory(4.0);
        let mut f = forest_at(&t, "f1");
        fork(&mut f, Seed::Accepted).unwrap();
        f.start("b1").unwrap();
        measure(&mut f, &t, "b1", &obs("y", 1.0, false));
        f.select(Digest::ZERO).unwrap();
        // Someone else moved the trajectory meanwhile.
        t.submit(&Observation {
            root: root("elsewhere"),
            energy: 2.0,
            hard_pass: false,
        })
        .unwrap();
        let before = t.decisions.len();
        assert!(matches!(
            f.commit(&mut t),
            Err(ForestError::StaleRoot { .. })
        ));
        assert_eq!(t.decisions.len(), before);
    }

    /// Gate X: previews never change the decision count, a forest commits at
    /// most one candidate, each commit changes |D| by exactly one, and the
    /// commit after N_gate is refused.
    #[test]
    fn gate_x_decision_conservation() {
        let mut t = trajectory(2.0);
        let bound = t.bound() as usize;
        let mut energy = 2.0;
        let mut forest_number = 0;
        loop {
            forest_number += 1;
            let mut f = forest_at(&t, &format!("f{forest_number}"));
            for _ in 0..3 {
                let id = fork(&mut f, Seed::Accepted).unwrap();
                f.start(&id).unwrap();
                energy -= 0.5;
                let before = t.decisions.len();
                measure(
                    &mut f,
                    &t,
                    &id,
                    &obs(&format!("{forest_number}-{id}"), energy, false),
                );
                assert_eq!(t.decisions.len(), before, "a preview appended a decision");
            }
            f.select(Digest::ZERO).unwrap();
            let before = t.decisions.len();
            match f.commit(&mut t) {
                Ok(_) => assert_eq!(t.decisions.len(), before + 1),
                Err(refusal) => {
                    // Energies keep descending, so only the bound can refuse.
                    assert_eq!(
                        refusal,
                        ForestError::Gate(GateRefusal::BoundReached {
                            bound: bound as u32
                        })
                    );
                    assert_eq!(
                        t.decisions.len(),
                        bound,
                        "the refused commit appended nothing"
                    );
                    break;
                }
            }
            assert_eq!(f.commit(&mut t), Err(ForestError::AlreadyCommitted));
            assert_eq!(
                t.decisions.len(),
                before + 1,
                "a forest commits at most one"
            );
        }
    }
}
