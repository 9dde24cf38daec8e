//! Gate Y: prompt composition determinism.

use crate::common;

use trellis_prompts::fixtures::default_composition;
use trellis_prompts::schema::{ActivationState, PromptSection, TemplateTarget};
use trellis_prompts::sections::coding::branch_correct as correct;
use trellis_prompts::{
    CompileError, ModelDialect, ModelFamily, PromptStage, ResolutionPolicy, compile, resolve,
};

#[test]
fn gate_y_identical_inputs_compile_to_identical_programs() {
    let dialect = &ModelDialect::JSON_SINGLE_SLOT_V1;
    let route = common::route(ModelFamily::Qwen, Some("qwen3-coder"));
    // A budget tight enough to force drops, so the drop set is exercised.
    for budget in [dialect.default_budget_tokens(), 1_600] {
        let a = compile(
            &default_composition(PromptStage::BranchCorrect, dialect),
            &common::options(&route, dialect, budget),
        )
        .unwrap();
        let b = compile(
            &default_composition(PromptStage::BranchCorrect, dialect),
            &common::options(&route, dialect, budget),
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.program_digest, b.program_digest);
        assert_eq!(a.dropped_sections, b.dropped_sections);
        let hashes = |p: &trellis_prompts::CompiledPromptProgram| {
            p.messages
                .iter()
                .map(|m| m.rendered_hash.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(hashes(&a), hashes(&b));
        assert_eq!(a.program_digest, a.compute_digest());
    }
}

#[test]
fn gate_y_missing_base_section_fails_library_validation() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stages.toml"),
        "[coding]\nbranch_correct = [\"role\"]\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("coding/branch_correct")).unwrap();
    let errors =
        trellis_prompt_codegen::load_library(dir.path()).expect_err("missing base must fail");
    assert!(
        errors.0[0].message.contains("has no base section file"),
        "{errors}"
    );
}

#[test]
fn gate_y_inactive_override_never_resolves() {
    let schema = correct::ToolProtocol::schema();
    let qwen = schema
        .overrides
        .iter()
        .find(|t| t.target == TemplateTarget::Family("qwen"))
        .expect("the library ships an experimental qwen override");
    assert_eq!(qwen.activation, ActivationState::Experimental);

    let route = common::route(ModelFamily::Qwen, Some("qwen3-coder"));
    let resolved = resolve(schema, &route, ResolutionPolicy::default());
    assert_eq!(resolved.template.target, TemplateTarget::Base);

    let dialect = ModelDialect::for_route(&route);
    let program = compile(
        &default_composition(PromptStage::BranchCorrect, dialect),
        &common::options(&route, dialect, dialect.default_budget_tokens()),
    )
    .unwrap();
    assert!(
        program
            .sections()
            .all(|s| s.origin == "base" && !s.experimental)
    );

    // Only the explicit experimental flag admits it, and provenance says so.
    let experimental = ResolutionPolicy {
        allow_experimental: true,
        allow_core_override: false,
    };
    let resolved = resolve(schema, &route, experimental);
    assert_eq!(resolved.template.target, TemplateTarget::Family("qwen"));
    assert!(resolved.experimental);
}

#[test]
fn gate_y_resolution_prefers_exact_model_then_family_then_base() {
    let schema = common::synthetic_schema(
        "coding",
        vec![
            common::template(
                TemplateTarget::Family("qwen"),
                ActivationState::Active,
                "family body",
            ),
            common::template(
                TemplateTarget::Model {
                    family: "qwen",
                    model: "qwen3-coder",
                },
                ActivationState::Active,
                "model body",
            ),
            common::template(
                TemplateTarget::Model {
                    family: "qwen",
                    model: "qwen-dark",
                },
                ActivationState::Experimental,
                "inactive model body",
            ),
        ],
    );
    let policy = ResolutionPolicy::default();
    let body = |family, model| {
        resolve(schema, &common::route(family, model), policy)
            .template
            .body
    };
    assert_eq!(body(ModelFamily::Qwen, Some("qwen3-coder")), "model body");
    assert_eq!(body(ModelFamily::Qwen, Some("qwen2")), "family body");
    // An inactive exact-model override falls through to the active family one.
    assert_eq!(body(ModelFamily::Qwen, Some("qwen-dark")), "family body");
    assert_eq!(
        body(ModelFamily::Anthropic, Some("qwen3-coder")),
        "base body"
    );
    // `Other` is never a route error: it composes from the base.
    assert_eq!(body(ModelFamily::Other, None), "base body");
}

#[test]
fn gate_y_platform_override_needs_the_core_override_flag() {
    let schema = common::synthetic_schema(
        "platform",
        vec![common::template(
            TemplateTarget::Family("qwen"),
            ActivationState::Active,
            "family body",
        )],
    );
    let route = common::route(ModelFamily::Qwen, None);
    assert_eq!(
        resolve(schema, &route, ResolutionPolicy::default())
            .template
            .body,
        "base body"
    );
    let core = ResolutionPolicy {
        allow_experimental: false,
        allow_core_override: true,
    };
    let resolved = resolve(schema, &route, core);
    assert_eq!(resolved.template.body, "family body");
    assert!(resolved.core_override);
}

#[test]
fn gate_y_required_section_is_never_dropped() {
    let dialect = &ModelDialect::NATIVE_TOOLS_V1;
    let route = common::route(ModelFamily::Anthropic, None);
    let composition = default_composition(PromptStage::BranchCorrect, dialect);
    let full = compile(&composition, &common::options(&route, dialect, u64::MAX)).unwrap();
    assert!(full.dropped_sections.is_empty());

    // Shrink the budget one token at a time below the full size: optional
    // sections go in (priority, id) order and required ones always stay.
    let required: Vec<&str> = full
        .sections()
        .filter(|s| {
            trellis_prompts::sections::ALL_SECTIONS
                .iter()
                .any(|schema| schema.id == s.id && schema.required)
        })
        .map(|s| s.id.as_str())
        .collect();
    let mut budget = full.estimated_tokens;
    let mut last_drops = 0;
    loop {
        match compile(&composition, &common::options(&route, dialect, budget)) {
            Ok(program) => {
                assert!(program.estimated_tokens <= budget);
                for id in &required {
                    assert!(
                        program.sections().any(|s| s.id == *id),
                        "{id} dropped at {budget}"
                    );
                }
                assert!(program.dropped_sections.len() >= last_drops);
                last_drops = program.dropped_sections.len();
            }
            Err(CompileError::RequiredOverBudget {
                required_tokens,
                budget: b,
                ..
            }) => {
                assert_eq!(b, budget);
                assert!(required_tokens > budget);
                break;
            }
            Err(other) => panic!("unexpected error {other}"),
        }
        budget -= 1;
    }
    assert_eq!(
        last_drops, 4,
        "all four optional branch_correct sections dropped before failing closed"
    );
}

#[test]
fn gate_y_drop_order_is_priority_then_id() {
    let dialect = &ModelDialect::NATIVE_TOOLS_V1;
    let route = common::route(ModelFamily::Anthropic, None);
    let composition = default_composition(PromptStage::BranchCorrect, dialect);
    let full = compile(&composition, &common::options(&route, dialect, u64::MAX)).unwrap();
    let required_only = {
        let mut budget = full.estimated_tokens;
        loop {
            let program = compile(&composition, &common::options(&route, dialect, budget)).unwrap();
            if program.dropped_sections.len() == 4 {
                break program;
            }
            budget -= 50;
        }
    };
    assert_eq!(
        required_only.dropped_sections,
        [
            "branch_correct/repository_hints",
            "branch_correct/hypothesis_revision",
            "branch_correct/compiler_explanation",
            "branch_correct/failing_test",
        ]
    );
}
