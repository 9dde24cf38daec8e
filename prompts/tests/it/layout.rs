//! Message layout per dialect, the two-program invocation, program reuse per
//! dependency digest, and the worst-case rendered bound.

use crate::common;

use trellis_prompts::composers::{BootstrapState, session_bootstrap};
use trellis_prompts::fixtures::default_composition;
use trellis_prompts::render::{render_template, worst_case_bytes};
use trellis_prompts::schema::{ListStyle, VarKind};
use trellis_prompts::sections::ALL_SECTIONS;
use trellis_prompts::{
    BoundedList, BoundedText, CompiledPromptInvocation, MessageRole, ModelDialect, ModelFamily,
    ProgramCache, PromptStage, TurnContext, VarValue, compile,
};

fn bootstrap_state() -> BootstrapState {
    BootstrapState {
        workspace_name: BoundedText::new("demo").unwrap(),
        session_id: BoundedText::new("s-1").unwrap(),
        granted_capabilities: BoundedList::new(["read workspace"]).unwrap(),
        write_ahead_note: None,
    }
}

fn invocation(dialect: &'static ModelDialect, family: ModelFamily) -> CompiledPromptInvocation {
    let route = common::route(family, None);
    let options = common::options(&route, dialect, dialect.default_budget_tokens());
    let platform = compile(&session_bootstrap(&bootstrap_state(), dialect), &options).unwrap();
    let domain = compile(
        &default_composition(PromptStage::BranchReview, dialect),
        &options,
    )
    .unwrap();
    CompiledPromptInvocation::new(platform, domain).unwrap()
}

#[test]
fn native_dialect_keeps_one_system_message_per_section() {
    let dialect = &ModelDialect::NATIVE_TOOLS_V1;
    let inv = invocation(dialect, ModelFamily::Anthropic);
    assert_eq!(
        inv.platform.messages.len(),
        4,
        "role, governance, native tool calls, lifecycle"
    );
    assert!(inv.platform.messages.iter().all(|m| m.sections.len() == 1));
    let turn = TurnContext::new()
        .fact("remaining", &BoundedText::new("3 turns").unwrap())
        .render();
    let sent = inv.transport_messages(dialect, std::slice::from_ref(&turn));
    assert_eq!(
        sent.len(),
        inv.platform.messages.len() + inv.domain.messages.len() + 1
    );
    assert_eq!(sent.last().unwrap(), &(MessageRole::User, turn));
}

#[test]
fn single_slot_dialect_concatenates_with_the_boundary_marker() {
    let dialect = &ModelDialect::JSON_SINGLE_SLOT_V1;
    let inv = invocation(dialect, ModelFamily::Other);
    assert_eq!(inv.platform.messages.len(), 1);
    assert_eq!(inv.domain.messages.len(), 1);
    assert_eq!(
        inv.platform.messages[0]
            .content
            .matches(dialect.boundary_marker)
            .count(),
        3
    );
    // At the transport boundary both programs share the one system slot,
    // while each program keeps its own hashes.
    let sent = inv.transport_messages(dialect, &[]);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].1.matches(dialect.boundary_marker).count(),
        3 + 1 + 2
    );
    assert_ne!(inv.platform.program_digest, inv.domain.program_digest);
}

#[test]
fn invariant_programs_are_compiled_once_per_dependency_digest() {
    let dialect = &ModelDialect::NATIVE_TOOLS_V1;
    let route = common::route(ModelFamily::Anthropic, None);
    let options = common::options(&route, dialect, dialect.default_budget_tokens());
    let mut cache = ProgramCache::default();
    let composition = default_composition(PromptStage::BranchReview, dialect);
    let first = cache.get_or_compile(&composition, &options).unwrap();
    let again = cache.get_or_compile(&composition, &options).unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    assert_eq!(cache.len(), 1);

    // A dependency change (here the tool surface) compiles a new program.
    let changed = trellis_prompts::CompileOptions {
        tool_spec_hash: "sha256:other-tools".into(),
        ..options.clone()
    };
    let other = cache.get_or_compile(&composition, &changed).unwrap();
    assert_ne!(other.program_digest, first.program_digest);
    assert_eq!(cache.len(), 2);
}

/// The largest value each variable admits, chosen to maximize rendering:
/// observations full of delimiter bytes (each escapes to two).
fn worst_value(kind: VarKind) -> VarValue {
    match kind {
        VarKind::Text { max } => VarValue::Text("t".repeat(max)),
        VarKind::Observation { max } => VarValue::Observation("[".repeat(max)),
        VarKind::List { count, bytes, .. } => VarValue::List(vec!["i".repeat(bytes); count]),
        VarKind::Integer(_) => VarValue::Integer(i128::from(i64::MIN)),
        VarKind::Float => VarValue::Float(-999_999_999_999_999.9),
    }
}

#[test]
fn every_section_renders_within_its_declared_worst_case() {
    for schema in ALL_SECTIONS {
        for template in schema.templates() {
            let values: Vec<VarValue> = schema
                .vars
                .iter()
                .map(|v| match (v.kind, worst_value(v.kind)) {
                    // An unsigned variable cannot hold i64::MIN.
                    (VarKind::Integer(_), _) => VarValue::Integer(i128::from(u32::MAX)),
                    (_, value) => value,
                })
                .collect();
            let rendered =
                render_template(schema, template, &values).unwrap_or_else(|e| panic!("{e}"));
            assert!(rendered.text.len() <= worst_case_bytes(schema.vars, template.body));
        }
    }
    // The list worst case is exact for a numbered list at capacity.
    let kind = VarKind::List {
        count: 10,
        bytes: 4,
        style: ListStyle::Numbered,
    };
    let mut out = String::new();
    worst_value(kind).render(kind, &mut out);
    assert!(out.len() <= kind.max_rendered_bytes());
}

#[test]
fn out_of_bound_values_fail_closed_at_render_time() {
    let schema = ALL_SECTIONS
        .iter()
        .find(|s| s.id == "branch_correct/correction")
        .unwrap();
    let error = render_template(
        schema,
        &schema.base,
        &[VarValue::Observation("x".repeat(8193))],
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("exceeds its bound of 8192 bytes"),
        "{error}"
    );
    let error =
        render_template(schema, &schema.base, &[VarValue::Text("trusted?".into())]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("a text value was given for a `ObservationText<8192>`"),
        "{error}"
    );
}
