//! Gate Z, program-provenance half: every compiled program's ledger record
//! reconstructs exactly, and any change of input is reported as a mismatch.

use crate::common;

use trellis_prompts::composers::{CorrectTurnState, branch_correct};
use trellis_prompts::{
    BoundedList, BoundedText, ModelDialect, ModelFamily, ObservationText, OperatorKind, PlanInput,
    ProgramRecord, PromptStage, RemainingBudget, ResidualClass, VarValue, WitnessKind, compile,
    plan, reconstruct,
};

fn state() -> CorrectTurnState {
    CorrectTurnState {
        plan: plan(PlanInput {
            stage: PromptStage::BranchCorrect,
            residual: ResidualClass::Type,
            witness: Some(WitnessKind::CompilerDiagnostic),
            operator: OperatorKind::Edit,
            revise_hypothesis: false,
            remaining: RemainingBudget {
                turns: 3,
                tokens: 30_000,
            },
        }),
        tool_names: BoundedList::new(["read_span", "replace_span", "run_check"]).unwrap(),
        budget_note: Some(BoundedText::new("3 turns left").unwrap()),
        packet: ObservationText::new("error[E0308]: mismatched types\n --> src/lib.rs:4:5")
            .unwrap(),
        diagnostic: Some((
            BoundedText::new("E0308").unwrap(),
            ObservationText::new("Expected u32, found &str.").unwrap(),
        )),
        failing_test: None,
        previous_hypothesis: None,
        hints: BoundedList::new(["src/lib.rs :: parse_entry"]).unwrap(),
    }
}

#[test]
fn gate_z_recorded_program_reconstructs_exactly() {
    let route = common::route(ModelFamily::Qwen, Some("qwen3-coder"));
    let dialect = ModelDialect::for_route(&route);
    let composition = branch_correct(&state());
    for budget in [u64::MAX, 1_500] {
        let options = common::options(&route, dialect, budget);
        let program = compile(&composition, &options).unwrap();
        let record = ProgramRecord::new("s-1", &composition, &options, &program, None);
        // Through the ledger's serialized form, as resume would read it.
        let stored: ProgramRecord =
            serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
        let rebuilt = reconstruct(&stored, &[]).unwrap();
        assert_eq!(rebuilt, program);
    }
}

#[test]
fn gate_z_changed_inputs_are_a_mismatch_not_a_silent_recompile() {
    let route = common::route(ModelFamily::Anthropic, None);
    let dialect = ModelDialect::for_route(&route);
    let composition = branch_correct(&state());
    let unbounded = compile(&composition, &common::options(&route, dialect, u64::MAX)).unwrap();
    // One token short of the full program: at least one optional section drops.
    let options = common::options(&route, dialect, unbounded.estimated_tokens - 1);
    let program = compile(&composition, &options).unwrap();
    assert!(!program.dropped_sections.is_empty());
    let record = ProgramRecord::new("s-1", &composition, &options, &program, None);

    let mut budget = record.clone();
    budget.budget_tokens = u64::MAX;
    let error = reconstruct(&budget, &[]).unwrap_err();
    assert!(
        error.contains("differs from the recorded") && error.contains("drop set"),
        "{error}"
    );

    let mut value = record.clone();
    value.values[2].1[0] = VarValue::Observation("a different packet".into());
    assert!(
        reconstruct(&value, &[])
            .unwrap_err()
            .contains("differs from the recorded")
    );

    let mut dialect_changed = record.clone();
    dialect_changed.dialect_version = 9;
    assert!(
        reconstruct(&dialect_changed, &[])
            .unwrap_err()
            .contains("not in this build")
    );
}
