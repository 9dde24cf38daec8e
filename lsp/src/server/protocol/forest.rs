//! The `forest` of `trellis/searchStatus`: the repair's steps and branches
//! as the wire shows them.
//!
//! These are the server's own types, converted field by field from the
//! engine's reports, so a change to an engine type cannot change the wire
//! unnoticed: it either fails to compile here or fails the test below that
//! pins the JSON. Never serialize an engine type onto the wire directly.

use serde::{Deserialize, Serialize};
use trellis_engine::gate::{GateDecision, Verdict};
use trellis_engine::sensor::StageStatus;
use trellis_engine::sensor::oracle::OracleVerdict;
use trellis_engine::{BranchOutcome, BranchReport, StageSummary, StepReport};

/// One step of the repair: one forest over one cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForestStep {
    pub forest_id: String,
    pub cluster_id: String,
    pub cluster_title: String,
    pub energy_before: f64,
    pub branches: Vec<ForestBranch>,
    /// The one gate decision the step appended, if any.
    pub decision: Option<ForestDecision>,
}

/// One branch of a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForestBranch {
    pub branch_id: String,
    pub label: String,
    pub proposer: String,
    pub strategy: String,
    /// Hex digests.
    pub proposal: String,
    pub root: Option<String>,
    pub energy: Option<f64>,
    pub hard_pass: bool,
    /// The gate's pure preview; never a decision.
    pub preview: Option<GateVerdict>,
    pub stages: Vec<ForestStage>,
    pub clusters: Vec<String>,
    #[serde(flatten)]
    pub outcome: ForestBranchOutcome,
}

/// How a branch ended: `{"outcome": "selected"}`, or with a `reason`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ForestBranchOutcome {
    Selected,
    NotSelected,
    Ineligible { reason: String },
    Partial { reason: String },
}

/// The gate's verdict on a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    AcceptedHardPass,
    AcceptedDescent,
    RejectedNonDescending,
}

/// One stage's result in a branch: `{"status": "passed"}`, or
/// `unavailable` with a `reason`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForestStage {
    pub stage: String,
    pub required: bool,
    #[serde(flatten)]
    pub status: ForestStageStatus,
    pub duration_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ForestStageStatus {
    Passed,
    Failed,
    Unavailable { reason: String },
}

/// The gate decision a step appended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForestDecision {
    pub candidate_id: String,
    pub index: u32,
    pub verdict: GateVerdict,
    pub root: String,
    pub observed_energy: f64,
    pub best_before: f64,
}

/// The forest of a repair's steps.
pub fn forest(steps: &[StepReport]) -> Vec<ForestStep> {
    steps.iter().map(ForestStep::from).collect()
}

impl From<&StepReport> for ForestStep {
    fn from(step: &StepReport) -> ForestStep {
        ForestStep {
            forest_id: step.forest_id.clone(),
            cluster_id: step.cluster_id.clone(),
            cluster_title: step.cluster_title.clone(),
            energy_before: step.energy_before,
            branches: step.branches.iter().map(ForestBranch::from).collect(),
            decision: step.decision.as_ref().map(ForestDecision::from),
        }
    }
}

impl From<&BranchReport> for ForestBranch {
    fn from(branch: &BranchReport) -> ForestBranch {
        ForestBranch {
            branch_id: branch.branch_id.clone(),
            label: branch.label.clone(),
            proposer: branch.proposer.clone(),
            strategy: branch.strategy.clone(),
            proposal: branch.proposal.to_hex(),
            root: branch.root.map(|r| r.to_hex()),
            energy: branch.energy,
            hard_pass: branch.hard_pass,
            preview: branch.preview.map(GateVerdict::from),
            stages: branch
                .stages
                .iter()
                .map(ForestStage::from)
                .chain(branch.oracle.as_ref().and_then(oracle_stage))
                .collect(),
            clusters: branch.clusters.clone(),
            outcome: ForestBranchOutcome::from(&branch.outcome),
        }
    }
}

impl From<&BranchOutcome> for ForestBranchOutcome {
    fn from(outcome: &BranchOutcome) -> ForestBranchOutcome {
        match outcome {
            BranchOutcome::Selected => ForestBranchOutcome::Selected,
            BranchOutcome::NotSelected => ForestBranchOutcome::NotSelected,
            BranchOutcome::Ineligible { reason, .. } => ForestBranchOutcome::Ineligible {
                reason: reason.clone(),
            },
            BranchOutcome::Partial { reason, .. } => ForestBranchOutcome::Partial {
                reason: reason.clone(),
            },
        }
    }
}

impl From<Verdict> for GateVerdict {
    fn from(verdict: Verdict) -> GateVerdict {
        match verdict {
            Verdict::AcceptedHardPass => GateVerdict::AcceptedHardPass,
            Verdict::AcceptedDescent => GateVerdict::AcceptedDescent,
            Verdict::RejectedNonDescending => GateVerdict::RejectedNonDescending,
        }
    }
}

impl From<&StageSummary> for ForestStage {
    fn from(stage: &StageSummary) -> ForestStage {
        ForestStage {
            stage: stage.stage.clone(),
            required: stage.required,
            status: match &stage.status {
                StageStatus::Passed => ForestStageStatus::Passed,
                StageStatus::Failed => ForestStageStatus::Failed,
                StageStatus::Unavailable { reason } => ForestStageStatus::Unavailable {
                    reason: reason.clone(),
                },
            },
            duration_ms: stage.duration_ms,
        }
    }
}

/// `external-oracle`'s verdict as one more required stage, `oracle`; one
/// that did not run (the branch's own stages fail) is left out.
fn oracle_stage(verdict: &OracleVerdict) -> Option<ForestStage> {
    let (status, duration_ms) = match verdict {
        OracleVerdict::Passed { duration_ms } => (ForestStageStatus::Passed, *duration_ms),
        OracleVerdict::Failed { duration_ms, .. } => (ForestStageStatus::Failed, *duration_ms),
        OracleVerdict::NotRun { .. } => return None,
    };
    Some(ForestStage {
        stage: "oracle".into(),
        required: true,
        status,
        duration_ms,
    })
}

impl From<&GateDecision> for ForestDecision {
    fn from(decision: &GateDecision) -> ForestDecision {
        ForestDecision {
            candidate_id: decision.candidate_id.clone(),
            index: decision.index,
            verdict: GateVerdict::from(decision.verdict),
            root: decision.root.to_hex(),
            observed_energy: decision.observed_energy,
            best_before: decision.best_before,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use trellis_engine::digest::Digest;

    fn branch(outcome: BranchOutcome, status: StageStatus) -> BranchReport {
        BranchReport {
            branch_id: "b-1".into(),
            label: "import `HashMap`".into(),
            proposer: "suggestion".into(),
            strategy: "apply_suggestions".into(),
            proposal: Digest([1; 32]),
            root: Some(Digest([2; 32])),
            energy: Some(0.5),
            hard_pass: false,
            preview: Some(Verdict::AcceptedDescent),
            stages: vec![StageSummary {
                stage: "check".into(),
                required: true,
                status,
                duration_ms: 12,
                flaky: Vec::new(),
                not_run: None,
            }],
            oracle: None,
            clusters: vec!["unused import".into()],
            outcome,
        }
    }

    /// The wire keeps the shape clients saw when the engine's reports were
    /// serialized as they were: every field, name and tag below is pinned.
    #[test]
    fn the_forest_on_the_wire_has_the_documented_shape() {
        let step = StepReport {
            forest_id: "n/0/f".into(),
            cluster_id: "c-1".into(),
            cluster_title: "cannot find `HashMap`".into(),
            energy_before: 2.0,
            branches: vec![
                branch(BranchOutcome::Selected, StageStatus::Passed),
                branch(
                    BranchOutcome::Partial {
                        reason: "tests fail".into(),
                        revealed: Vec::new(),
                    },
                    StageStatus::Unavailable {
                        reason: "timeout".into(),
                    },
                ),
            ],
            decision: Some(GateDecision {
                candidate_id: "n/0/c0".into(),
                index: 0,
                verdict: Verdict::AcceptedHardPass,
                root: Digest([3; 32]),
                observed_energy: 0.0,
                best_before: 2.0,
            }),
        };
        let wire = serde_json::to_value(forest(std::slice::from_ref(&step))).unwrap();
        let hex = |b: u8| Digest([b; 32]).to_hex();
        let expected = json!([{
            "forest_id": "n/0/f",
            "cluster_id": "c-1",
            "cluster_title": "cannot find `HashMap`",
            "energy_before": 2.0,
            "branches": [
                {
                    "branch_id": "b-1", "label": "import `HashMap`", "proposer": "suggestion",
                    "strategy": "apply_suggestions", "proposal": hex(1), "root": hex(2),
                    "energy": 0.5, "hard_pass": false, "preview": "accepted_descent",
                    "stages": [{ "stage": "check", "required": true, "status": "passed", "duration_ms": 12 }],
                    "clusters": ["unused import"], "outcome": "selected"
                },
                {
                    "branch_id": "b-1", "label": "import `HashMap`", "proposer": "suggestion",
                    "strategy": "apply_suggestions", "proposal": hex(1), "root": hex(2),
                    "energy": 0.5, "hard_pass": false, "preview": "accepted_descent",
                    "stages": [{ "stage": "check", "required": true, "status": "unavailable",
                                 "reason": "timeout", "duration_ms": 12 }],
                    "clusters": ["unused import"], "outcome": "partial", "reason": "tests fail"
                }
            ],
            "decision": {
                "candidate_id": "n/0/c0", "index": 0, "verdict": "accepted_hard_pass",
                "root": hex(3), "observed_energy": 0.0, "best_before": 2.0
            }
        }]);
        assert_eq!(wire, expected);
    }
}
