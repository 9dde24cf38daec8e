//! Digest stability: a golden digest for a fixed program catches any
//! accidental change of the canonical encoding.

use trellis_prompts::{
    CompiledPromptInvocation, CompiledPromptMessage, CompiledPromptProgram, DialectRef,
    MessageRole, ModelFamily, PromptRoute, SectionProvenance,
};

fn program(stage: &str, content: &str) -> CompiledPromptProgram {
    let mut program = CompiledPromptProgram {
        route: PromptRoute::new("scripted", ModelFamily::Qwen, Some("qwen3-coder")),
        stage: stage.to_owned(),
        dialect: DialectRef {
            id: "json_single_slot_v1".to_owned(),
            version: 1,
        },
        token_accountant: ("utf8_bytes_upper_bound".to_owned(), 1),
        budget_tokens: 1_800,
        estimated_tokens: 120,
        inclusion: vec![("x/role".to_owned(), true), ("x/hints".to_owned(), false)],
        messages: vec![CompiledPromptMessage {
            role: MessageRole::System,
            content: content.to_owned(),
            sections: vec![SectionProvenance {
                id: "x/role".to_owned(),
                version: 2,
                content_hash: "sha256:00".to_owned(),
                origin: "base".to_owned(),
                experimental: false,
                core_override: false,
            }],
            rendered_hash: trellis_prompts::compose::rendered_hash(content),
        }],
        dropped_sections: vec!["x/style".to_owned()],
        tool_spec_hash: "sha256:tools".to_owned(),
        program_digest: String::new(),
    };
    program.program_digest = program.compute_digest();
    program
}

#[test]
fn golden_program_digest() {
    assert_eq!(
        program("branch_correct", "You repair Rust code.").program_digest,
        "sha256:2f262a26a2479b1dc83708a3c926119ccf39ab9aa93037aab554af2972028c0f"
    );
}

#[test]
fn golden_invocation_digest() {
    let invocation = CompiledPromptInvocation::new(
        program("session_bootstrap", "Platform."),
        program("branch_correct", "Domain."),
    )
    .unwrap();
    assert_eq!(
        invocation.invocation_digest,
        "sha256:ab35821fc8fdcc544fd05f10ccfcf4b95a96dc77e0d95c48404b2a3f79104dd8"
    );
}

#[test]
fn every_field_reaches_the_digest() {
    let base = program("branch_correct", "You repair Rust code.");
    let mut changed = base.clone();
    changed.dropped_sections.clear();
    assert_ne!(base.compute_digest(), changed.compute_digest());
    let mut changed = base.clone();
    changed.inclusion[1].1 = true;
    assert_ne!(base.compute_digest(), changed.compute_digest());
    let mut changed = base.clone();
    changed.dialect.version = 2;
    assert_ne!(base.compute_digest(), changed.compute_digest());
    let mut changed = base.clone();
    changed.messages[0].sections[0].experimental = true;
    assert_ne!(base.compute_digest(), changed.compute_digest());
}

#[test]
fn invocation_refuses_two_domain_programs() {
    let error = CompiledPromptInvocation::new(
        program("branch_correct", "a"),
        program("branch_correct", "b"),
    )
    .expect_err("two domain programs");
    assert!(error.to_string().contains("expected a platform program"));
}
