//! The typed prompt plane of Trellis.
//!
//! Prompt text is authored as small markdown sections (`prompts/platform`,
//! `prompts/coding`) and compiled at build time into typed structs
//! ([`sections`]). At run time a stage composer selects sections with typed
//! predicates, each section resolves for the model route (exact model, then
//! family, then base), the dialect lays the sections out as messages, budget
//! fitting drops optional sections deterministically, and the result is a
//! [`CompiledPromptProgram`] with a canonical digest that the ledger records.
//! Override activation is gated by paired evaluation evidence ([`activation`]).

pub mod bounded;
pub mod render;
pub mod schema;

/// The compiled section library: one typed struct and static schema per section.
#[allow(clippy::all)]
pub mod sections {
    include!(concat!(env!("OUT_DIR"), "/prompt_sections.rs"));
}

pub use bounded::{BoundError, BoundedList, BoundedText, IntoVarValue, ObservationText, VarValue};
pub use render::{RenderError, RenderedSection};
pub use schema::{
    PromptSection, PromptStage, SectionSchema, SectionTemplate, StageSchema, TemplateTarget,
};
pub mod compose;
pub mod dialect;
pub mod route;

pub use compose::{
    CompileError, CompileOptions, CompiledPromptInvocation, CompiledPromptMessage,
    CompiledPromptProgram, MessageRole, ProgramCache, SectionProvenance, StageComposition, compile,
};
pub use dialect::{
    DialectRef, ModelDialect, ReasoningTracePolicy, SystemSlotPolicy, TokenAccountant,
    ToolCallConvention,
};
pub use route::{ModelFamily, PromptRoute, ResolutionPolicy, Resolved, resolve};
pub mod composers;
pub mod fixtures;
pub mod plan;
pub mod turn;

pub use plan::{
    IssuePromptPlan, OperatorKind, PlanInput, RemainingBudget, ResidualClass, WitnessKind, plan,
};
pub use turn::TurnContext;
pub mod activation;
pub mod bundles;
pub mod commands;
pub mod files;
pub mod provenance;
pub mod stats;

pub use commands::PromptsError;
pub use provenance::{ProgramRecord, explain_session, reconstruct};
