//! Typed stage composers: the predicates that decide which sections a program
//! contains are ordinary, tested Rust, never conditionals in prose.

use crate::bounded::{BoundedList, BoundedText, ObservationText};
use crate::compose::StageComposition;
use crate::dialect::{ModelDialect, ToolCallConvention};
use crate::plan::IssuePromptPlan;
use crate::schema::{PromptSection, PromptStage};
use crate::sections::coding::branch_correct as correct;
use crate::sections::platform::session_bootstrap as bootstrap;

/// Session facts the platform envelope needs.
#[derive(Debug, Clone, PartialEq)]
pub struct BootstrapState {
    pub workspace_name: BoundedText<128>,
    pub session_id: BoundedText<64>,
    pub granted_capabilities: BoundedList<32, 96>,
    pub write_ahead_note: Option<BoundedText<256>>,
}

/// The platform envelope. The dialect's tool-call convention selects which
/// tool-call section appears; exactly one of them always does.
pub fn session_bootstrap(state: &BootstrapState, dialect: &ModelDialect) -> StageComposition {
    StageComposition::new(PromptStage::SessionBootstrap)
        .section(bootstrap::Role {
            workspace_name: state.workspace_name.clone(),
            session_id: state.session_id.clone(),
        })
        .section(bootstrap::Governance {
            granted_capabilities: state.granted_capabilities.clone(),
        })
        .section_if(dialect.tool_calls == ToolCallConvention::Native, || {
            bootstrap::ToolCallsNative {}
        })
        .section_if(dialect.tool_calls == ToolCallConvention::JsonInText, || {
            bootstrap::ToolCallsJson {}
        })
        .section(bootstrap::Lifecycle {
            write_ahead_note: state.write_ahead_note.clone(),
        })
}

/// Evidence and context of one correction turn.
#[derive(Debug, Clone, PartialEq)]
pub struct CorrectTurnState {
    pub plan: IssuePromptPlan,
    pub tool_names: BoundedList<32, 64>,
    pub budget_note: Option<BoundedText<512>>,
    pub packet: ObservationText<8192>,
    /// Code and explanation of the dominant diagnostic, when known.
    pub diagnostic: Option<(BoundedText<16>, ObservationText<4096>)>,
    /// Name and output of the failing test or counterexample, when known.
    pub failing_test: Option<(BoundedText<256>, ObservationText<4096>)>,
    /// The hypothesis the last attempt acted on and how often it recurred.
    pub previous_hypothesis: Option<(ObservationText<1024>, u32)>,
    pub hints: BoundedList<16, 256>,
}

/// The branch-correction program: the plan decides which optional evidence
/// sections appear, and a section appears only if its evidence exists.
pub fn branch_correct(state: &CorrectTurnState) -> StageComposition {
    let wants = |id: &str| state.plan.includes(id);
    StageComposition::new(PromptStage::BranchCorrect)
        .section(correct::Role {})
        .section(correct::ToolProtocol {
            tool_names: state.tool_names.clone(),
            budget_note: state.budget_note.clone(),
        })
        .section(correct::Correction {
            packet: state.packet.clone(),
        })
        .section_opt(
            state
                .diagnostic
                .clone()
                .filter(|_| wants(correct::CompilerExplanation::ID))
                .map(
                    |(diagnostic_code, explanation)| correct::CompilerExplanation {
                        diagnostic_code,
                        explanation,
                    },
                ),
        )
        .section_opt(
            state
                .failing_test
                .clone()
                .filter(|_| wants(correct::FailingTest::ID))
                .map(|(test_name, failure)| correct::FailingTest { test_name, failure }),
        )
        .section_opt(
            state
                .previous_hypothesis
                .clone()
                .filter(|_| wants(correct::HypothesisRevision::ID))
                .map(
                    |(previous_hypothesis, recurrence_count)| correct::HypothesisRevision {
                        previous_hypothesis,
                        recurrence_count,
                    },
                ),
        )
        .section_if(
            wants(correct::RepositoryHints::ID) && !state.hints.items().is_empty(),
            || correct::RepositoryHints {
                hints: state.hints.clone(),
            },
        )
        .section(correct::OutputContract {})
}
