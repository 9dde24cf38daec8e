//! Issue-conditioned prompt plans and the typed composers that apply them.

use trellis_prompts::composers::{
    BootstrapState, CorrectTurnState, branch_correct, session_bootstrap,
};
use trellis_prompts::{
    BoundedList, BoundedText, ModelDialect, ObservationText, OperatorKind, PlanInput, PromptStage,
    RemainingBudget, ResidualClass, WitnessKind, plan,
};

fn input(
    residual: ResidualClass,
    witness: Option<WitnessKind>,
    operator: OperatorKind,
    turns: u32,
) -> PlanInput {
    PlanInput {
        stage: PromptStage::BranchCorrect,
        residual,
        witness,
        operator,
        revise_hypothesis: false,
        remaining: RemainingBudget {
            turns,
            tokens: 20_000,
        },
    }
}

#[test]
fn type_diagnostic_gets_the_compiler_explanation() {
    let p = plan(input(
        ResidualClass::Type,
        Some(WitnessKind::CompilerDiagnostic),
        OperatorKind::Edit,
        4,
    ));
    assert_eq!(p.rule_id, "correct/explained-diagnostic");
    assert_eq!(
        p.sections,
        [
            "branch_correct/role",
            "branch_correct/tool_protocol",
            "branch_correct/correction",
            "branch_correct/compiler_explanation",
            "branch_correct/repository_hints",
            "branch_correct/output_contract",
        ]
    );
}

#[test]
fn syntax_diagnostic_needs_no_explanation() {
    let p = plan(input(
        ResidualClass::Syntax,
        Some(WitnessKind::CompilerDiagnostic),
        OperatorKind::ApplySuggestions,
        4,
    ));
    assert_eq!(p.rule_id, "correct/plain-diagnostic");
    assert!(!p.includes("branch_correct/compiler_explanation"));
}

#[test]
fn failing_test_witness_gets_the_failing_test_section() {
    let p = plan(input(
        ResidualClass::TestFailure,
        Some(WitnessKind::FailingTest),
        OperatorKind::Edit,
        4,
    ));
    assert_eq!(p.rule_id, "correct/test-witness");
    assert!(p.includes("branch_correct/failing_test"));
    assert!(!p.includes("branch_correct/hypothesis_revision"));
}

#[test]
fn counterexample_always_brings_the_previous_hypothesis() {
    for (operator, revise_hypothesis) in [
        (OperatorKind::ApplySuggestions, false),
        (OperatorKind::ChooseAlternative, false),
        (OperatorKind::Edit, false),
        (OperatorKind::SatisfyCounterexample, false),
        (OperatorKind::Edit, true),
    ] {
        let p = plan(PlanInput {
            revise_hypothesis,
            ..input(
                ResidualClass::CompileError,
                Some(WitnessKind::VerifierCounterexample),
                operator,
                4,
            )
        });
        assert_eq!(p.rule_id, "correct/counterexample");
        assert!(p.includes("branch_correct/failing_test"));
        assert!(p.includes("branch_correct/hypothesis_revision"));
    }
}

#[test]
fn refuted_hypothesis_selects_hypothesis_revision() {
    let p = plan(PlanInput {
        revise_hypothesis: true,
        ..input(ResidualClass::Borrow, None, OperatorKind::Edit, 4)
    });
    assert_eq!(p.rule_id, "correct/revise-hypothesis");
    assert!(p.includes("branch_correct/hypothesis_revision"));
}

#[test]
fn low_remaining_budget_skips_repository_hints() {
    let p = plan(input(ResidualClass::Type, None, OperatorKind::Edit, 1));
    assert!(!p.includes("branch_correct/repository_hints"));
    let p = plan(input(ResidualClass::Type, None, OperatorKind::Edit, 2));
    assert!(p.includes("branch_correct/repository_hints"));
}

#[test]
fn other_stages_use_their_declared_sections() {
    let p = plan(PlanInput {
        stage: PromptStage::BranchReview,
        ..input(ResidualClass::CompileError, None, OperatorKind::Edit, 3)
    });
    assert_eq!(p.rule_id, "stage-default");
    assert_eq!(
        p.sections,
        [
            "branch_review/role",
            "branch_review/review_checklist",
            "branch_review/output_contract"
        ]
    );
}

fn correct_state(p: trellis_prompts::IssuePromptPlan, with_evidence: bool) -> CorrectTurnState {
    CorrectTurnState {
        plan: p,
        tool_names: BoundedList::new(["read_span", "run_check"]).unwrap(),
        budget_note: None,
        packet: ObservationText::new("E0308 mismatched types").unwrap(),
        diagnostic: with_evidence.then(|| {
            (
                BoundedText::new("E0308").unwrap(),
                ObservationText::new("expected u32").unwrap(),
            )
        }),
        failing_test: None,
        previous_hypothesis: None,
        hints: BoundedList::new(["src/lib.rs"]).unwrap(),
    }
}

#[test]
fn composer_includes_planned_sections_only_when_evidence_exists() {
    let p = plan(input(
        ResidualClass::Type,
        Some(WitnessKind::CompilerDiagnostic),
        OperatorKind::Edit,
        1,
    ));
    let with = branch_correct(&correct_state(p.clone(), true));
    assert!(
        with.section_ids()
            .contains(&"branch_correct/compiler_explanation")
    );
    let without = branch_correct(&correct_state(p, false));
    assert!(
        !without
            .section_ids()
            .contains(&"branch_correct/compiler_explanation")
    );
}

#[test]
fn bootstrap_selects_the_tool_call_section_of_the_dialect() {
    let state = BootstrapState {
        workspace_name: BoundedText::new("demo").unwrap(),
        session_id: BoundedText::new("s1").unwrap(),
        granted_capabilities: BoundedList::new(["read"]).unwrap(),
        write_ahead_note: None,
    };
    let native = session_bootstrap(&state, &ModelDialect::NATIVE_TOOLS_V1).section_ids();
    assert!(native.contains(&"session_bootstrap/tool_calls_native"));
    assert!(!native.contains(&"session_bootstrap/tool_calls_json"));
    let json = session_bootstrap(&state, &ModelDialect::JSON_SINGLE_SLOT_V1).section_ids();
    assert!(json.contains(&"session_bootstrap/tool_calls_json"));
    assert!(!json.contains(&"session_bootstrap/tool_calls_native"));
}

#[test]
fn every_residual_class_under_a_compiler_diagnostic_has_its_rule() {
    for class in ResidualClass::ALL {
        let p = plan(input(
            class,
            Some(WitnessKind::CompilerDiagnostic),
            OperatorKind::Edit,
            4,
        ));
        let expected = match class {
            ResidualClass::Type | ResidualClass::UnresolvedName | ResidualClass::Borrow => {
                "correct/explained-diagnostic"
            }
            ResidualClass::Syntax
            | ResidualClass::Warning
            | ResidualClass::CompileError
            | ResidualClass::SensorUnavailable => "correct/plain-diagnostic",
            ResidualClass::TestFailure => "correct/test-without-witness",
        };
        assert_eq!(p.rule_id, expected, "{class:?}");
        assert_eq!(
            p.includes("branch_correct/compiler_explanation"),
            expected == "correct/explained-diagnostic",
            "{class:?}"
        );
    }
}
