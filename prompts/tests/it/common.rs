//! Helpers shared by the integration tests.

use trellis_prompts::schema::{
    ActivationState, SectionRole, SectionSchema, SectionTemplate, TemplateTarget,
};
use trellis_prompts::{
    CompileOptions, CompiledPromptProgram, ModelDialect, ModelFamily, PromptRoute, PromptStage,
    ResolutionPolicy,
};

pub fn route(family: ModelFamily, model: Option<&str>) -> PromptRoute {
    PromptRoute::new("scripted", family, model)
}

pub fn options<'a>(
    route: &'a PromptRoute,
    dialect: &'a ModelDialect,
    budget: u64,
) -> CompileOptions<'a> {
    CompileOptions {
        route,
        dialect,
        budget_tokens: budget,
        tool_spec_hash: "sha256:tools".to_owned(),
        policy: ResolutionPolicy::default(),
        replacements: &[],
    }
}

/// A human-readable view of a program for snapshots (no digests, which are
/// pinned separately by the golden test).
pub fn describe(program: &CompiledPromptProgram) -> String {
    let mut out = format!(
        "stage: {}\nroute: {}\ndialect: {} v{}\nestimated_tokens: {} / {}\ndropped: {:?}\n",
        program.stage,
        program.route,
        program.dialect.id,
        program.dialect.version,
        program.estimated_tokens,
        program.budget_tokens,
        program.dropped_sections
    );
    for (i, message) in program.messages.iter().enumerate() {
        let ids: Vec<String> = message
            .sections
            .iter()
            .map(|s| format!("{}@{} ({})", s.id, s.version, s.origin))
            .collect();
        out.push_str(&format!(
            "\n=== message {} [{}] {} ===\n{}\n",
            i + 1,
            message.role.as_str(),
            ids.join(", "),
            message.content
        ));
    }
    out
}

/// A leaked schema for resolution tests that need override shapes the real
/// library does not ship (exact-model overrides, active overrides).
pub fn synthetic_schema(
    library: &'static str,
    overrides: Vec<SectionTemplate>,
) -> &'static SectionSchema {
    Box::leak(Box::new(SectionSchema {
        id: "synthetic/section",
        library,
        stage: PromptStage::BranchCorrect,
        order: 10,
        role: SectionRole::System,
        required: true,
        priority: 1,
        owner: "test",
        vars: &[],
        base: template(TemplateTarget::Base, ActivationState::Active, "base body"),
        overrides: Box::leak(overrides.into_boxed_slice()),
    }))
}

pub fn template(
    target: TemplateTarget,
    activation: ActivationState,
    body: &'static str,
) -> SectionTemplate {
    SectionTemplate {
        file: "synthetic.md",
        target,
        version: 1,
        content_hash: "sha256:synthetic",
        max_bytes: 100,
        activation,
        change_record: None,
        body,
    }
}
