//! Property: budget fitting is deterministic, never exceeds a feasible budget,
//! fails closed exactly when the required sections alone do not fit, and drops
//! a prefix of the optional sections in (priority, id) order.

use crate::common;

use proptest::prelude::*;
use trellis_prompts::composers::{CorrectTurnState, branch_correct};
use trellis_prompts::sections::ALL_SECTIONS;
use trellis_prompts::{
    BoundedList, BoundedText, CompileError, ModelDialect, ModelFamily, ObservationText,
    OperatorKind, PlanInput, PromptStage, RemainingBudget, ResidualClass, WitnessKind, compile,
    plan,
};

fn state(sizes: [usize; 5], hints: usize, all_evidence: bool) -> CorrectTurnState {
    let text = |n: usize| "x".repeat(n);
    let input = if all_evidence {
        PlanInput {
            stage: PromptStage::BranchCorrect,
            residual: ResidualClass::Type,
            witness: Some(WitnessKind::CompilerDiagnostic),
            operator: OperatorKind::Edit,
            revise_hypothesis: true,
            remaining: RemainingBudget {
                turns: 5,
                tokens: 10_000,
            },
        }
    } else {
        PlanInput {
            stage: PromptStage::BranchCorrect,
            residual: ResidualClass::Syntax,
            witness: None,
            operator: OperatorKind::Edit,
            revise_hypothesis: false,
            remaining: RemainingBudget {
                turns: 0,
                tokens: 0,
            },
        }
    };
    let mut plan = plan(input);
    if all_evidence {
        // Exercise every optional section at once.
        plan.sections.push("branch_correct/failing_test");
    }
    CorrectTurnState {
        plan,
        tool_names: BoundedList::new(["read_span", "replace_span", "run_check"]).unwrap(),
        budget_note: Some(BoundedText::new(text(sizes[0] % 512)).unwrap()),
        packet: ObservationText::new(text(sizes[1])).unwrap(),
        diagnostic: Some((
            BoundedText::new("E0308").unwrap(),
            ObservationText::new(text(sizes[2])).unwrap(),
        )),
        failing_test: Some((
            BoundedText::new("tests::parses").unwrap(),
            ObservationText::new(text(sizes[3])).unwrap(),
        )),
        previous_hypothesis: Some((ObservationText::new(text(sizes[4] % 1024)).unwrap(), 2)),
        hints: BoundedList::new((0..hints).map(|i| format!("src/file_{i}.rs"))).unwrap(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fitting_is_deterministic_and_respects_feasible_budgets(
        sizes in [0usize..512, 0usize..8192, 0usize..4096, 0usize..4096, 0usize..1024],
        hints in 0usize..16,
        budget in 200u64..12_000,
        native in any::<bool>(),
    ) {
        let dialect = if native { &ModelDialect::NATIVE_TOOLS_V1 } else { &ModelDialect::JSON_SINGLE_SLOT_V1 };
        let route = common::route(ModelFamily::Other, None);
        let full = branch_correct(&state(sizes, hints, true));
        let required_only = branch_correct(&state(sizes, hints, false));
        let required_tokens = compile(&required_only, &common::options(&route, dialect, u64::MAX))
            .unwrap()
            .estimated_tokens;

        let first = compile(&full, &common::options(&route, dialect, budget));
        let second = compile(&full, &common::options(&route, dialect, budget));
        prop_assert_eq!(&first, &second);

        match first {
            Ok(program) => {
                prop_assert!(budget >= required_tokens);
                prop_assert!(program.estimated_tokens <= budget);
                // Dropped sections are optional, in (priority, id) order.
                let key = |id: &str| {
                    let schema = ALL_SECTIONS.iter().find(|s| s.id == id).unwrap();
                    assert!(!schema.required, "required section {id} dropped");
                    (schema.priority, schema.id)
                };
                let keys: Vec<_> = program.dropped_sections.iter().map(|id| key(id)).collect();
                let mut sorted = keys.clone();
                sorted.sort();
                prop_assert_eq!(keys, sorted);
            }
            Err(CompileError::RequiredOverBudget { .. }) => prop_assert!(budget < required_tokens),
            Err(other) => prop_assert!(false, "unexpected error: {}", other),
        }
    }
}
