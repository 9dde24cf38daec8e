//! The accepted trajectory and its gate (PSP-10 Definition 1, Proposition 1).
//!
//! [`AcceptedTrajectory`] is the sole owner of accepted state. A candidate is
//! judged by G(y; x_k) = hard(y) ∨ V(y) ≤ V_best − ρ. [`AcceptedTrajectory::preview`]
//! evaluates the gate as a pure function and never appends a decision;
//! [`AcceptedTrajectory::submit`] appends exactly one. The decision bound
//! N_gate = ⌊V₀/ρ⌋ + B + 1 is enforced: the submission after it is refused.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

/// Gate margin ρ and rejection budget B for one node generation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateParams {
    pub rho: f64,
    pub rejection_budget: u32,
}

/// What the sensors said about a realized candidate state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    pub root: Digest,
    pub energy: f64,
    pub hard_pass: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    AcceptedHardPass,
    AcceptedDescent,
    RejectedNonDescending,
}

impl Verdict {
    pub fn accepted(self) -> bool {
        !matches!(self, Verdict::RejectedNonDescending)
    }
}

/// One entry of D, with everything replay needs recorded rather than recovered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateDecision {
    /// `node/gen/cN`.
    pub candidate_id: String,
    /// Position in D, from 0.
    pub index: u32,
    pub verdict: Verdict,
    pub root: Digest,
    pub observed_energy: f64,
    pub best_before: f64,
}

/// Why a submission was refused without appending a decision.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GateRefusal {
    #[error("the decision bound N_gate = {bound} is reached; no further decision is allowed")]
    BoundReached { bound: u32 },
    #[error("this node generation already reached hard pass; it takes no further decisions")]
    Terminal,
    #[error(
        "the rejection budget B = {budget} is spent; a non-descending candidate cannot be submitted"
    )]
    RejectionBudgetSpent { budget: u32 },
}

/// Why a recorded decision sequence cannot be replayed through the gate.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReplayError {
    #[error("recorded decision #{index} ({candidate_id}) is refused by the gate: {refusal}")]
    Refused {
        index: usize,
        candidate_id: String,
        refusal: GateRefusal,
    },
    #[error(
        "recorded decision #{index} does not replay: recorded {recorded:?}, the gate decides {replayed:?}"
    )]
    Diverged {
        index: usize,
        recorded: Box<GateDecision>,
        replayed: Box<GateDecision>,
    },
}

/// An accepted state x_i of the trajectory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcceptedState {
    pub root: Digest,
    pub energy: f64,
    /// `None` for x₀.
    pub candidate_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcceptedTrajectory {
    pub node: String,
    pub generation: u32,
    pub params: GateParams,
    pub states: Vec<AcceptedState>,
    pub decisions: Vec<GateDecision>,
    submissions: u32,
    rejections: u32,
    terminal: bool,
}

impl AcceptedTrajectory {
    /// Starts a trajectory at x₀ with baseline energy V₀.
    pub fn new(node: &str, generation: u32, x0: Observation, params: GateParams) -> Self {
        assert!(params.rho > 0.0, "gate margin must be positive");
        AcceptedTrajectory {
            node: node.to_owned(),
            generation,
            params,
            states: vec![AcceptedState {
                root: x0.root,
                energy: x0.energy,
                candidate_id: None,
            }],
            decisions: Vec::new(),
            submissions: 0,
            rejections: 0,
            terminal: x0.hard_pass,
        }
    }

    pub fn v0(&self) -> f64 {
        self.states[0].energy
    }

    /// V_best = min over accepted states.
    pub fn v_best(&self) -> f64 {
        self.states
            .iter()
            .map(|s| s.energy)
            .fold(f64::INFINITY, f64::min)
    }

    pub fn current(&self) -> &AcceptedState {
        self.states.last().expect("a trajectory always has x0")
    }

    /// N_gate = ⌊V₀/ρ⌋ + B + 1.
    pub fn bound(&self) -> u32 {
        let descents = (self.v0() / self.params.rho).floor();
        let descents = if descents.is_finite() && descents > 0.0 {
            descents as u32
        } else {
            0
        };
        descents
            .saturating_add(self.params.rejection_budget)
            .saturating_add(1)
    }

    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// The id the next submission will carry: `node/gen/cN`.
    pub fn next_candidate_id(&self) -> String {
        format!(
            "{}/{}/c{}",
            self.node,
            self.generation,
            self.submissions + 1
        )
    }

    /// The gate as a pure function of the observation and the accepted state.
    pub fn preview(&self, y: &Observation) -> Verdict {
        if y.hard_pass {
            Verdict::AcceptedHardPass
        } else if y.energy <= self.v_best() - self.params.rho {
            Verdict::AcceptedDescent
        } else {
            Verdict::RejectedNonDescending
        }
    }

    /// Why a submission would be refused now, if it would.
    pub fn refusal(&self, y: &Observation) -> Option<GateRefusal> {
        if self.terminal {
            return Some(GateRefusal::Terminal);
        }
        if self.decisions.len() as u32 >= self.bound() {
            return Some(GateRefusal::BoundReached {
                bound: self.bound(),
            });
        }
        if !self.preview(y).accepted() && self.rejections >= self.params.rejection_budget {
            return Some(GateRefusal::RejectionBudgetSpent {
                budget: self.params.rejection_budget,
            });
        }
        None
    }

    /// Commits one candidate: appends exactly one decision, or refuses and
    /// appends nothing.
    pub fn submit(&mut self, y: &Observation) -> Result<GateDecision, GateRefusal> {
        if let Some(refusal) = self.refusal(y) {
            return Err(refusal);
        }
        let candidate_id = self.next_candidate_id();
        let verdict = self.preview(y);
        let decision = GateDecision {
            candidate_id: candidate_id.clone(),
            index: self.decisions.len() as u32,
            verdict,
            root: y.root,
            observed_energy: y.energy,
            best_before: self.v_best(),
        };
        self.submissions += 1;
        match verdict {
            Verdict::RejectedNonDescending => self.rejections += 1,
            Verdict::AcceptedDescent | Verdict::AcceptedHardPass => {
                self.states.push(AcceptedState {
                    root: y.root,
                    energy: y.energy,
                    candidate_id: Some(candidate_id),
                });
                self.terminal = verdict == Verdict::AcceptedHardPass;
            }
        }
        self.decisions.push(decision.clone());
        Ok(decision)
    }

    /// Rebuilds a trajectory from x₀ and its recorded decisions by submitting
    /// each recorded observation again: the gate re-checks every decision
    /// (bound, rejection budget, terminal state, verdict) and the decision it
    /// makes must equal the recorded one, id, index and energies included.
    /// V_best, the rejection count and the accepted states then follow from
    /// the replay rather than being trusted from the record.
    pub fn replay(
        node: &str,
        generation: u32,
        x0: Observation,
        params: GateParams,
        recorded: &[GateDecision],
    ) -> Result<AcceptedTrajectory, ReplayError> {
        let mut trajectory = AcceptedTrajectory::new(node, generation, x0, params);
        for (index, decision) in recorded.iter().enumerate() {
            let y = Observation {
                root: decision.root,
                energy: decision.observed_energy,
                hard_pass: decision.verdict == Verdict::AcceptedHardPass,
            };
            let replayed = trajectory
                .submit(&y)
                .map_err(|refusal| ReplayError::Refused {
                    index,
                    candidate_id: decision.candidate_id.clone(),
                    refusal,
                })?;
            if replayed != *decision {
                return Err(ReplayError::Diverged {
                    index,
                    recorded: Box::new(decision.clone()),
                    replayed: Box::new(replayed),
                });
            }
        }
        Ok(trajectory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::blob_digest;
    use proptest::prelude::*;

    fn obs(energy: f64, hard_pass: bool) -> Observation {
        Observation {
            root: blob_digest(energy.to_string().as_bytes()),
            energy,
            hard_pass,
        }
    }

    fn params() -> GateParams {
        GateParams {
            rho: 0.5,
            rejection_budget: 2,
        }
    }

    #[test]
    fn descent_by_at_least_rho_is_accepted() {
        let t = AcceptedTrajectory::new("n", 0, obs(4.0, false), params());
        assert_eq!(t.preview(&obs(3.5, false)), Verdict::AcceptedDescent);
        assert_eq!(t.preview(&obs(3.6, false)), Verdict::RejectedNonDescending);
        assert_eq!(t.preview(&obs(9.0, true)), Verdict::AcceptedHardPass);
    }

    #[test]
    fn hard_pass_is_terminal() {
        let mut t = AcceptedTrajectory::new("n", 0, obs(4.0, false), params());
        t.submit(&obs(0.0, true)).unwrap();
        assert_eq!(t.submit(&obs(0.0, true)), Err(GateRefusal::Terminal));
        assert_eq!(t.decisions.len(), 1);
    }

    #[test]
    fn candidate_ids_and_best_before_are_recorded() {
        let mut t = AcceptedTrajectory::new("r1", 0, obs(4.0, false), params());
        let d1 = t.submit(&obs(2.5, false)).unwrap();
        let d2 = t.submit(&obs(2.4, false)).unwrap();
        assert_eq!(d1.candidate_id, "r1/0/c1");
        assert_eq!(d2.candidate_id, "r1/0/c2");
        assert_eq!(d1.best_before, 4.0);
        assert_eq!(d2.best_before, 2.5);
        assert_eq!(d2.verdict, Verdict::RejectedNonDescending);
        assert_eq!(t.current().energy, 2.5);
    }

    #[test]
    fn rejection_budget_refuses_without_a_decision() {
        let mut t = AcceptedTrajectory::new(
            "n",
            0,
            obs(1.0, false),
            GateParams {
                rho: 0.5,
                rejection_budget: 1,
            },
        );
        t.submit(&obs(1.0, false)).unwrap();
        assert_eq!(
            t.submit(&obs(1.0, false)),
            Err(GateRefusal::RejectionBudgetSpent { budget: 1 })
        );
        assert_eq!(t.decisions.len(), 1);
    }

    #[test]
    fn bound_formula_matches_the_seed() {
        let t = AcceptedTrajectory::new("n", 0, obs(3.2, false), params());
        assert_eq!(t.bound(), 6 + 2 + 1);
        let t = AcceptedTrajectory::new("n", 0, obs(0.0, false), params());
        assert_eq!(t.bound(), 3);
    }

    proptest! {
        /// Proposition 1: whatever is submitted, |D| never exceeds N_gate and
        /// every submission changes |D| by exactly zero (refused) or one.
        #[test]
        fn decisions_never_exceed_the_bound(
            v0 in 0.0f64..10.0,
            seq in proptest::collection::vec((0.0f64..12.0, any::<bool>()), 0..60),
            budget in 0u32..4,
        ) {
            let mut t = AcceptedTrajectory::new("n", 0, obs(v0, false), GateParams { rho: 0.5, rejection_budget: budget });
            let bound = t.bound();
            for (e, hard) in seq {
                let before = t.decisions.len();
                let result = t.submit(&obs(e, hard));
                let after = t.decisions.len();
                prop_assert_eq!(after - before, usize::from(result.is_ok()));
                prop_assert!(after as u32 <= bound);
            }
        }
    }

    #[test]
    fn replaying_recorded_decisions_rebuilds_the_trajectory() {
        let x0 = obs(3.0, false);
        let mut original = AcceptedTrajectory::new("n", 1, x0, params());
        let rejected = original.submit(&obs(3.2, false)).unwrap();
        assert_eq!(rejected.verdict, Verdict::RejectedNonDescending);
        original.submit(&obs(2.0, false)).unwrap();
        original.submit(&obs(1.0, false)).unwrap();

        let replayed =
            AcceptedTrajectory::replay("n", 1, x0, params(), &original.decisions).unwrap();
        assert_eq!(replayed, original);
        assert_eq!(replayed.next_candidate_id(), "n/1/c4");
        assert_eq!(replayed.v_best(), 1.0);
    }

    #[test]
    fn a_decision_the_gate_would_not_make_does_not_replay() {
        let x0 = obs(3.0, false);
        let mut original = AcceptedTrajectory::new("n", 0, x0, params());
        original.submit(&obs(2.0, false)).unwrap();
        let recorded = original.decisions.clone();

        // A recorded descent that is not one under the gate it is replayed with.
        let stricter = GateParams {
            rho: 1.5,
            rejection_budget: 2,
        };
        let error = AcceptedTrajectory::replay("n", 0, x0, stricter, &recorded).unwrap_err();
        assert!(
            matches!(error, ReplayError::Diverged { index: 0, .. }),
            "{error}"
        );

        // A recorded best-before that the start state does not give.
        let error =
            AcceptedTrajectory::replay("n", 0, obs(4.0, false), params(), &recorded).unwrap_err();
        assert!(
            matches!(error, ReplayError::Diverged { index: 0, .. }),
            "{error}"
        );

        // A decision after hard pass is refused outright.
        let mut terminal = recorded.clone();
        terminal[0].verdict = Verdict::AcceptedHardPass;
        let mut after = terminal[0].clone();
        after.candidate_id = "n/0/c2".into();
        after.index = 1;
        terminal.push(after);
        let error = AcceptedTrajectory::replay("n", 0, x0, params(), &terminal).unwrap_err();
        assert!(
            matches!(
                error,
                ReplayError::Refused {
                    index: 1,
                    refusal: GateRefusal::Terminal,
                    ..
                }
            ),
            "{error}"
        );
    }
}
