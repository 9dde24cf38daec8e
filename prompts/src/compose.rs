//! Stage composition, budget fitting, message layout and program digests.
//!
//! Compilation is a pure function of (dialect, ordered resolved sections,
//! inclusion outcomes, canonical variable values, token budget, tool surface):
//! identical inputs give identical rendered bytes, drop set and digests.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use trellis_prompt_codegen::canonical::prompt_hasher;

use crate::bounded::VarValue;
use crate::bundles::PinnedReplacement;
use crate::dialect::{DialectRef, ModelDialect, SystemSlotPolicy};
use crate::render::{RenderError, render_body, render_template};
use crate::route::{PromptRoute, ResolutionPolicy, resolve};
use crate::schema::{PromptSection, PromptStage, SectionRole, SectionSchema};

/// The sections a stage composer selected, with their values.
#[derive(Debug, Clone)]
pub struct StageComposition {
    stage: PromptStage,
    entries: Vec<ComposedSection>,
    /// Every predicate outcome, in call order: part of the program identity.
    inclusion: Vec<(&'static str, bool)>,
}

#[derive(Debug, Clone)]
struct ComposedSection {
    schema: &'static SectionSchema,
    values: Vec<VarValue>,
}

impl StageComposition {
    pub fn new(stage: PromptStage) -> Self {
        StageComposition {
            stage,
            entries: Vec::new(),
            inclusion: Vec::new(),
        }
    }

    pub fn stage(&self) -> PromptStage {
        self.stage
    }

    /// Includes a section unconditionally.
    pub fn section<S: PromptSection>(self, section: S) -> Self {
        self.section_if(true, || section)
    }

    /// Includes a section when `include` holds. The value is built only then,
    /// so a predicate can guard a value that exists only in that case.
    pub fn section_if<S: PromptSection>(mut self, include: bool, make: impl FnOnce() -> S) -> Self {
        self.inclusion.push((S::ID, include));
        if include {
            let section = make();
            self.entries.push(ComposedSection {
                schema: S::schema(),
                values: section.values(),
            });
        }
        self
    }

    /// Includes a section exactly when a value exists.
    pub fn section_opt<S: PromptSection>(mut self, section: Option<S>) -> Self {
        self.inclusion.push((S::ID, section.is_some()));
        if let Some(section) = section {
            self.entries.push(ComposedSection {
                schema: S::schema(),
                values: section.values(),
            });
        }
        self
    }

    /// Replaces the values of an included section (used by `render --vars`).
    /// Returns false when the section is not part of this composition.
    pub fn replace_values(&mut self, id: &str, values: Vec<VarValue>) -> bool {
        match self.entries.iter_mut().find(|e| e.schema.id == id) {
            Some(entry) => {
                entry.values = values;
                true
            }
            None => false,
        }
    }

    /// Untyped inclusion for tools that read values from files (`render
    /// --vars`); the values are checked against the schema when rendered.
    pub fn section_values(mut self, schema: &'static SectionSchema, values: Vec<VarValue>) -> Self {
        self.inclusion.push((schema.id, true));
        self.entries.push(ComposedSection { schema, values });
        self
    }

    /// Rebuilds a composition from recorded inputs (replay and resume).
    pub fn from_recorded(
        stage: PromptStage,
        inclusion: Vec<(&'static str, bool)>,
        entries: Vec<(&'static SectionSchema, Vec<VarValue>)>,
    ) -> Self {
        StageComposition {
            stage,
            entries: entries
                .into_iter()
                .map(|(schema, values)| ComposedSection { schema, values })
                .collect(),
            inclusion,
        }
    }

    /// Predicate outcomes in call order.
    pub fn inclusion(&self) -> &[(&'static str, bool)] {
        &self.inclusion
    }

    /// Each included section's id and values, in composition order.
    pub fn values(&self) -> Vec<(&'static str, Vec<VarValue>)> {
        self.entries
            .iter()
            .map(|e| (e.schema.id, e.values.clone()))
            .collect()
    }

    /// Section ids in composition order.
    pub fn section_ids(&self) -> Vec<&'static str> {
        self.entries.iter().map(|e| e.schema.id).collect()
    }
}

/// Everything besides the composition that a program depends on.
#[derive(Debug, Clone)]
pub struct CompileOptions<'a> {
    pub route: &'a PromptRoute,
    pub dialect: &'a ModelDialect,
    /// β_tok: the instruction budget in accountant tokens.
    pub budget_tokens: u64,
    /// Digest of the tool surface offered with this program.
    pub tool_spec_hash: String,
    pub policy: ResolutionPolicy,
    /// Validated, pinned bundle replacements of this session.
    pub replacements: &'a [PinnedReplacement],
}

/// Why compilation failed; it always fails closed, before any transport call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    #[error("section `{id}` belongs to stage `{section_stage}`, not `{stage}`")]
    WrongStage {
        id: &'static str,
        section_stage: PromptStage,
        stage: PromptStage,
    },
    #[error("section `{0}` is included twice")]
    Duplicate(&'static str),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(
        "stage `{stage}`: required sections alone need {required_tokens} tokens, over the budget of {budget} tokens"
    )]
    RequiredOverBudget {
        stage: PromptStage,
        required_tokens: u64,
        budget: u64,
    },
    #[error(
        "stage `{stage}`: compiled prompt is {bytes} bytes, over the dialect's limit of {limit} bytes"
    )]
    OverByteLimit {
        stage: PromptStage,
        bytes: u64,
        limit: u64,
    },
    #[error("invocation: {0}")]
    Invocation(String),
}

/// Where a piece of a message came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SectionProvenance {
    pub id: String,
    pub version: u32,
    pub content_hash: String,
    /// `base`, `family` or `family@model`.
    pub origin: String,
    /// Ran only under `--allow-experimental-prompts`.
    pub experimental: bool,
    /// A platform section replaced under `--allow-core-prompt-override`.
    pub core_override: bool,
}

/// One message of a compiled program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompiledPromptMessage {
    pub role: MessageRole,
    pub content: String,
    pub sections: Vec<SectionProvenance>,
    pub rendered_hash: String,
}

/// Message role at the transport boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    System,
    User,
}

impl MessageRole {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageRole::System => "system",
            MessageRole::User => "user",
        }
    }
}

impl From<SectionRole> for MessageRole {
    fn from(role: SectionRole) -> Self {
        match role {
            SectionRole::System => MessageRole::System,
            SectionRole::User => MessageRole::User,
        }
    }
}

/// A compiled instruction program for one stage and route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompiledPromptProgram {
    pub route: PromptRoute,
    pub stage: String,
    pub dialect: DialectRef,
    pub token_accountant: (String, u32),
    pub budget_tokens: u64,
    pub estimated_tokens: u64,
    /// Predicate outcomes in composition order.
    pub inclusion: Vec<(String, bool)>,
    pub messages: Vec<CompiledPromptMessage>,
    /// Sections removed by budget fitting, in drop order.
    pub dropped_sections: Vec<String>,
    pub tool_spec_hash: String,
    pub program_digest: String,
}

impl CompiledPromptProgram {
    /// The canonical digest over every field except the digest itself.
    pub fn compute_digest(&self) -> String {
        let mut h = prompt_hasher("program");
        h.str(&self.stage)
            .str(&self.route.adapter)
            .str(self.route.family.as_str())
            .opt_str(self.route.exact_model.as_deref())
            .str(&self.dialect.id)
            .u64(u64::from(self.dialect.version))
            .str(&self.token_accountant.0)
            .u64(u64::from(self.token_accountant.1))
            .u64(self.budget_tokens)
            .u64(self.estimated_tokens)
            .str(&self.tool_spec_hash)
            .u64(self.inclusion.len() as u64);
        for (id, included) in &self.inclusion {
            h.str(id).bool(*included);
        }
        h.u64(self.messages.len() as u64);
        for message in &self.messages {
            h.str(message.role.as_str())
                .str(&message.content)
                .str(&message.rendered_hash)
                .u64(message.sections.len() as u64);
            for s in &message.sections {
                h.str(&s.id)
                    .u64(u64::from(s.version))
                    .str(&s.content_hash)
                    .str(&s.origin)
                    .bool(s.experimental)
                    .bool(s.core_override);
            }
        }
        h.u64(self.dropped_sections.len() as u64);
        for id in &self.dropped_sections {
            h.str(id);
        }
        h.finish().to_prefixed()
    }

    /// All section provenance in message order.
    pub fn sections(&self) -> impl Iterator<Item = &SectionProvenance> {
        self.messages.iter().flat_map(|m| m.sections.iter())
    }
}

/// Digest of one rendered message's content.
pub fn rendered_hash(content: &str) -> String {
    let mut h = prompt_hasher("rendered");
    h.str(content);
    h.finish().to_prefixed()
}

struct RenderedPart {
    schema: &'static SectionSchema,
    text: String,
    provenance: SectionProvenance,
}

/// Compiles `composition` for `options`.
pub fn compile(
    composition: &StageComposition,
    options: &CompileOptions<'_>,
) -> Result<CompiledPromptProgram, CompileError> {
    let stage = composition.stage;
    let mut entries: Vec<&ComposedSection> = composition.entries.iter().collect();
    for (i, entry) in entries.iter().enumerate() {
        if entry.schema.stage != stage {
            return Err(CompileError::WrongStage {
                id: entry.schema.id,
                section_stage: entry.schema.stage,
                stage,
            });
        }
        if entries[..i].iter().any(|e| e.schema.id == entry.schema.id) {
            return Err(CompileError::Duplicate(entry.schema.id));
        }
    }
    // The stage's declared order, whatever order the composer used.
    entries.sort_by_key(|e| (e.schema.order, e.schema.id));

    let mut parts = Vec::with_capacity(entries.len());
    for entry in entries {
        let replacement = options
            .replacements
            .iter()
            .find(|r| r.schema.id == entry.schema.id);
        let (text, provenance) = match replacement {
            // A pinned bundle replaces the section on every route; it was
            // admitted at session start only under the experimental flags.
            Some(r) => {
                let file = r.stored.display().to_string();
                let rendered = render_body(
                    entry.schema.id,
                    &file,
                    entry.schema.vars,
                    &r.body,
                    &entry.values,
                )?;
                let provenance = SectionProvenance {
                    id: entry.schema.id.to_owned(),
                    version: r.version,
                    content_hash: r.content_hash.clone(),
                    origin: "bundle".to_owned(),
                    experimental: true,
                    core_override: entry.schema.library == "platform",
                };
                (rendered.text, provenance)
            }
            None => {
                let resolved = resolve(entry.schema, options.route, options.policy);
                let rendered = render_template(entry.schema, resolved.template, &entry.values)?;
                let provenance = SectionProvenance {
                    id: entry.schema.id.to_owned(),
                    version: resolved.template.version,
                    content_hash: resolved.template.content_hash.to_owned(),
                    origin: resolved.template.target.to_string(),
                    experimental: resolved.experimental,
                    core_override: resolved.core_override,
                };
                (rendered.text, provenance)
            }
        };
        parts.push(RenderedPart {
            schema: entry.schema,
            text,
            provenance,
        });
    }

    let (kept, dropped, estimated) = fit_budget(stage, parts, options)?;
    let messages = layout(&kept, options.dialect);
    let bytes: u64 = messages.iter().map(|m| m.content.len() as u64).sum();
    if bytes > options.dialect.max_prompt_bytes {
        return Err(CompileError::OverByteLimit {
            stage,
            bytes,
            limit: options.dialect.max_prompt_bytes,
        });
    }
    let mut program = CompiledPromptProgram {
        route: options.route.clone(),
        stage: stage.as_str().to_owned(),
        dialect: options.dialect.dialect_ref(),
        token_accountant: (
            options.dialect.token_accountant.id.to_owned(),
            options.dialect.token_accountant.version,
        ),
        budget_tokens: options.budget_tokens,
        estimated_tokens: estimated,
        inclusion: composition
            .inclusion
            .iter()
            .map(|(id, inc)| ((*id).to_owned(), *inc))
            .collect(),
        messages,
        dropped_sections: dropped,
        tool_spec_hash: options.tool_spec_hash.clone(),
        program_digest: String::new(),
    };
    program.program_digest = program.compute_digest();
    Ok(program)
}

/// Drops optional sections by increasing priority (ties by id) until the
/// accountant's estimate of the laid-out messages fits the budget. Required
/// sections never drop; if they alone do not fit, compilation fails.
fn fit_budget(
    stage: PromptStage,
    mut parts: Vec<RenderedPart>,
    options: &CompileOptions<'_>,
) -> Result<(Vec<RenderedPart>, Vec<String>, u64), CompileError> {
    let mut drop_order: Vec<(u16, &'static str)> = parts
        .iter()
        .filter(|p| !p.schema.required)
        .map(|p| (p.schema.priority, p.schema.id))
        .collect();
    drop_order.sort();
    let mut drop_order = drop_order.into_iter();
    let mut dropped = Vec::new();
    loop {
        let estimate = estimate_tokens(&parts, options.dialect);
        if estimate <= options.budget_tokens {
            return Ok((parts, dropped, estimate));
        }
        match drop_order.next() {
            Some((_, id)) => {
                parts.retain(|p| p.schema.id != id);
                dropped.push(id.to_owned());
            }
            None => {
                return Err(CompileError::RequiredOverBudget {
                    stage,
                    required_tokens: estimate,
                    budget: options.budget_tokens,
                });
            }
        }
    }
}

fn estimate_tokens(parts: &[RenderedPart], dialect: &ModelDialect) -> u64 {
    let messages = layout(parts, dialect);
    dialect
        .token_accountant
        .estimate(messages.iter().map(|m| m.content.as_str()))
}

/// Lays sections out as messages: one message per section (`Many`), or all
/// system sections in one message joined by the boundary marker followed by
/// one message per user section (`SingleConcatenated`).
fn layout(parts: &[RenderedPart], dialect: &ModelDialect) -> Vec<CompiledPromptMessage> {
    let message = |role: MessageRole, parts: &[&RenderedPart], joiner: &str| {
        let content = parts
            .iter()
            .map(|p| p.text.as_str())
            .collect::<Vec<_>>()
            .join(joiner);
        CompiledPromptMessage {
            role,
            rendered_hash: rendered_hash(&content),
            content,
            sections: parts.iter().map(|p| p.provenance.clone()).collect(),
        }
    };
    match dialect.system_slots {
        SystemSlotPolicy::Many => parts
            .iter()
            .map(|p| message(p.schema.role.into(), &[p], ""))
            .collect(),
        SystemSlotPolicy::SingleConcatenated => {
            let system: Vec<&RenderedPart> = parts
                .iter()
                .filter(|p| p.schema.role == SectionRole::System)
                .collect();
            let mut messages = Vec::new();
            if !system.is_empty() {
                messages.push(message(
                    MessageRole::System,
                    &system,
                    dialect.boundary_marker,
                ));
            }
            messages.extend(
                parts
                    .iter()
                    .filter(|p| p.schema.role == SectionRole::User)
                    .map(|p| message(MessageRole::User, &[p], "")),
            );
            messages
        }
    }
}

/// The two programs of one model call: platform envelope and domain stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompiledPromptInvocation {
    pub platform: CompiledPromptProgram,
    pub domain: CompiledPromptProgram,
    pub invocation_digest: String,
}

impl CompiledPromptInvocation {
    /// Pairs two programs compiled for the same route and dialect.
    pub fn new(
        platform: CompiledPromptProgram,
        domain: CompiledPromptProgram,
    ) -> Result<Self, CompileError> {
        let is_platform = |p: &CompiledPromptProgram| {
            p.stage
                .parse::<PromptStage>()
                .is_ok_and(PromptStage::is_platform)
        };
        if !is_platform(&platform) || is_platform(&domain) {
            return Err(CompileError::Invocation(format!(
                "expected a platform program and a domain program, got `{}` and `{}`",
                platform.stage, domain.stage
            )));
        }
        if platform.route != domain.route || platform.dialect != domain.dialect {
            return Err(CompileError::Invocation(
                "platform and domain programs were compiled for different routes or dialects"
                    .into(),
            ));
        }
        let mut h = prompt_hasher("invocation");
        h.str(&platform.program_digest).str(&domain.program_digest);
        Ok(CompiledPromptInvocation {
            invocation_digest: h.finish().to_prefixed(),
            platform,
            domain,
        })
    }

    /// The messages as sent: platform then domain, then each turn block as a
    /// separate user message. A single-slot dialect merges all system content
    /// of both programs into one message at this boundary only; the programs
    /// and their hashes stay separate.
    pub fn transport_messages(
        &self,
        dialect: &ModelDialect,
        turn_blocks: &[String],
    ) -> Vec<(MessageRole, String)> {
        let all = self.platform.messages.iter().chain(&self.domain.messages);
        let mut out: Vec<(MessageRole, String)> = match dialect.system_slots {
            SystemSlotPolicy::Many => all.map(|m| (m.role, m.content.clone())).collect(),
            SystemSlotPolicy::SingleConcatenated => {
                let (system, user): (Vec<_>, Vec<_>) =
                    all.partition(|m| m.role == MessageRole::System);
                let merged = system
                    .iter()
                    .map(|m| m.content.as_str())
                    .collect::<Vec<_>>()
                    .join(dialect.boundary_marker);
                std::iter::once((MessageRole::System, merged))
                    .chain(user.into_iter().map(|m| (m.role, m.content.clone())))
                    .collect()
            }
        };
        out.extend(turn_blocks.iter().map(|b| (MessageRole::User, b.clone())));
        out
    }
}

/// Compiles each invariant program once per dependency digest and reuses it
/// while route, manifest, values, budget, tool surface and dialect are
/// unchanged. Per-turn state goes into turn-context blocks instead.
#[derive(Debug, Default)]
pub struct ProgramCache {
    programs: HashMap<String, Arc<CompiledPromptProgram>>,
}

impl ProgramCache {
    /// The cached program for these inputs, compiling on a miss.
    pub fn get_or_compile(
        &mut self,
        composition: &StageComposition,
        options: &CompileOptions<'_>,
    ) -> Result<Arc<CompiledPromptProgram>, CompileError> {
        let key = dependency_digest(composition, options);
        if let Some(program) = self.programs.get(&key) {
            return Ok(Arc::clone(program));
        }
        let program = Arc::new(compile(composition, options)?);
        self.programs.insert(key, Arc::clone(&program));
        Ok(program)
    }

    pub fn len(&self) -> usize {
        self.programs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }
}

/// Digest of every input compilation depends on, including the manifest
/// (activation state and content hashes of the compiled library).
pub fn dependency_digest(composition: &StageComposition, options: &CompileOptions<'_>) -> String {
    let mut h = prompt_hasher("program-dependencies");
    h.str(crate::sections::MANIFEST_DIGEST)
        .str(composition.stage.as_str())
        .str(&options.route.to_string())
        .str(options.dialect.id)
        .u64(u64::from(options.dialect.version))
        .u64(options.budget_tokens)
        .str(&options.tool_spec_hash)
        .bool(options.policy.allow_experimental)
        .bool(options.policy.allow_core_override)
        .u64(options.replacements.len() as u64);
    for r in options.replacements {
        h.str(r.schema.id).str(&r.content_hash);
    }
    for (id, included) in &composition.inclusion {
        h.str(id).bool(*included);
    }
    for entry in &composition.entries {
        h.str(entry.schema.id).u64(entry.values.len() as u64);
        for value in &entry.values {
            match value {
                VarValue::Absent => h.str("absent"),
                VarValue::Text(t) => h.str("text").str(t),
                VarValue::Observation(t) => h.str("observation").str(t),
                VarValue::List(items) => {
                    h.str("list").u64(items.len() as u64);
                    for item in items {
                        h.str(item);
                    }
                    &mut h
                }
                VarValue::Integer(n) => h.str("integer").str(&n.to_string()),
                VarValue::Float(x) => h.str("float").u64(x.to_bits()),
            };
        }
    }
    h.finish().to_prefixed()
}
