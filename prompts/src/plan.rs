//! Issue-conditioned prompt plans (resolved decision 13).
//!
//! Trellis never asks a model to write its next prompt. A reviewed, exhaustive
//! rule maps typed issue state — stage, residual class, witness kind,
//! correction operator, whether the last hypothesis was refuted, remaining
//! budget — to the ordered sections to include. Residual classes and
//! operators are the engine's own vocabulary ([`trellis_core::vocabulary`]),
//! so a plan is asked about exactly what the engine observed. Every match
//! below is exhaustive on purpose: a new residual class or witness kind does
//! not compile until someone decides what it should see.

pub use trellis_core::vocabulary::{OperatorKind, ResidualClass};

use crate::schema::{PromptSection, PromptStage, StageSchema};
use crate::sections::coding::branch_correct as correct;

/// The evidence available about the residual.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WitnessKind {
    /// A compiler diagnostic: correction evidence, no completeness claim.
    CompilerDiagnostic,
    /// A named failing test: one concrete wrong behaviour.
    FailingTest,
    /// A concrete counterexample from a sound verifier: must be shown
    /// together with the hypothesis it refutes.
    VerifierCounterexample,
}

/// What is left of the branch's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemainingBudget {
    pub turns: u32,
    pub tokens: u64,
}

/// Turns below which optional orientation (repository hints) is not worth
/// its tokens: the actor should act on the evidence it already has.
pub const HINTS_MIN_TURNS: u32 = 2;

/// The typed state a plan is compiled from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlanInput {
    pub stage: PromptStage,
    /// The class of the dominant residual the branch must remove.
    pub residual: ResidualClass,
    pub witness: Option<WitnessKind>,
    /// The correction the search decided to attempt.
    pub operator: OperatorKind,
    /// The same residual recurred after the previous attempt, so the
    /// hypothesis behind that attempt is refuted and must be revised.
    pub revise_hypothesis: bool,
    pub remaining: RemainingBudget,
}

/// The sections one turn's program must contain, and the rule that chose them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuePromptPlan {
    pub rule_id: &'static str,
    pub input: PlanInput,
    /// Ordered section ids, all compiled and of `input.stage`.
    pub sections: Vec<&'static str>,
}

impl IssuePromptPlan {
    pub fn includes(&self, id: &str) -> bool {
        self.sections.contains(&id)
    }
}

/// Compiles the plan for `input`.
pub fn plan(input: PlanInput) -> IssuePromptPlan {
    match input.stage {
        PromptStage::BranchCorrect => plan_correction(input),
        PromptStage::SessionBootstrap
        | PromptStage::GraphPlan
        | PromptStage::ToolDiscovery
        | PromptStage::ConversationCompact
        | PromptStage::ExternalReconcile
        | PromptStage::RepositoryExplore
        | PromptStage::BranchStrategy
        | PromptStage::BranchPropose
        | PromptStage::BranchReview
        | PromptStage::Adjudicate
        | PromptStage::EvidenceSummarize => IssuePromptPlan {
            rule_id: "stage-default",
            input,
            sections: stage_schema(input.stage)
                .map(|s| s.sections.iter().map(|s| s.id).collect())
                .unwrap_or_default(),
        },
    }
}

fn plan_correction(input: PlanInput) -> IssuePromptPlan {
    let mut sections = vec![
        correct::Role::ID,
        correct::ToolProtocol::ID,
        correct::Correction::ID,
    ];

    // Which evidence section the witness calls for.
    let (witness_rule, evidence) = match input.witness {
        None => ("correct/no-witness", None),
        Some(WitnessKind::FailingTest) => ("correct/test-witness", Some(correct::FailingTest::ID)),
        Some(WitnessKind::VerifierCounterexample) => {
            ("correct/counterexample", Some(correct::FailingTest::ID))
        }
        Some(WitnessKind::CompilerDiagnostic) => match input.residual {
            ResidualClass::Type | ResidualClass::UnresolvedName | ResidualClass::Borrow => (
                "correct/explained-diagnostic",
                Some(correct::CompilerExplanation::ID),
            ),
            // Syntax and lint diagnostics carry their whole story in the
            // packet; so does a stage's own report of why it could not run.
            ResidualClass::Syntax
            | ResidualClass::Warning
            | ResidualClass::CompileError
            | ResidualClass::SensorUnavailable => ("correct/plain-diagnostic", None),
            ResidualClass::TestFailure => ("correct/test-without-witness", None),
        },
    };
    if let Some(id) = evidence {
        sections.push(id);
    }

    // A counterexample refutes a hypothesis, so the hypothesis must be shown
    // with it; an explicit revision needs it too, whatever the operator.
    let revise =
        input.revise_hypothesis || input.witness == Some(WitnessKind::VerifierCounterexample);
    if revise {
        sections.push(correct::HypothesisRevision::ID);
    }
    if input.remaining.turns >= HINTS_MIN_TURNS {
        sections.push(correct::RepositoryHints::ID);
    }
    sections.push(correct::OutputContract::ID);

    IssuePromptPlan {
        rule_id: if revise && input.witness != Some(WitnessKind::VerifierCounterexample) {
            "correct/revise-hypothesis"
        } else {
            witness_rule
        },
        input,
        sections,
    }
}

/// The compiled declaration of a stage.
pub fn stage_schema(stage: PromptStage) -> Option<&'static StageSchema> {
    crate::sections::ALL_STAGES
        .iter()
        .find(|s| s.stage == stage)
}
