//! Runtime descriptions of compiled sections and stages.
//!
//! The generated code (see `trellis-prompt-codegen`) builds one `static`
//! [`SectionSchema`] per section; everything else in this crate works from
//! those schemas, never from the source files.

use std::fmt;
use std::str::FromStr;

pub use trellis_prompt_codegen::manifest::ActivationState;
pub use trellis_prompt_codegen::schema::{IntKind, ListStyle, VarKind, VarSchema};
pub use trellis_prompt_codegen::section::SectionRole;

use crate::bounded::VarValue;
use crate::render::{RenderError, RenderedSection, render_template};

/// Everything generated code needs in scope.
pub mod prelude {
    pub use super::{
        ActivationState, IntKind, ListStyle, PromptSection, PromptStage, SectionRole,
        SectionSchema, SectionTemplate, StageSchema, TemplateTarget, VarKind, VarSchema,
    };
    pub use crate::bounded::{BoundedList, BoundedText, IntoVarValue, ObservationText, VarValue};
}

macro_rules! stages {
    ($($variant:ident => $name:literal, $library:literal;)*) => {
        /// Every stage a prompt program can be compiled for.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum PromptStage { $($variant),* }

        impl PromptStage {
            pub const ALL: &'static [PromptStage] = &[$(PromptStage::$variant),*];

            /// The stage's directory and id prefix, e.g. `branch_correct`.
            pub fn as_str(self) -> &'static str {
                match self { $(PromptStage::$variant => $name),* }
            }

            /// `platform` or a domain library such as `coding`.
            pub fn library(self) -> &'static str {
                match self { $(PromptStage::$variant => $library),* }
            }
        }
    };
}

stages! {
    SessionBootstrap => "session_bootstrap", "platform";
    GraphPlan => "graph_plan", "platform";
    ToolDiscovery => "tool_discovery", "platform";
    ConversationCompact => "conversation_compact", "platform";
    ExternalReconcile => "external_reconcile", "platform";
    RepositoryExplore => "repository_explore", "coding";
    BranchStrategy => "branch_strategy", "coding";
    BranchPropose => "branch_propose", "coding";
    BranchCorrect => "branch_correct", "coding";
    BranchReview => "branch_review", "coding";
    Adjudicate => "adjudicate", "coding";
    EvidenceSummarize => "evidence_summarize", "coding";
}

impl PromptStage {
    pub fn is_platform(self) -> bool {
        self.library() == "platform"
    }
}

impl fmt::Display for PromptStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PromptStage {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.replace('-', "_");
        PromptStage::ALL
            .iter()
            .copied()
            .find(|stage| stage.as_str() == wanted)
            .ok_or_else(|| {
                let names: Vec<&str> = PromptStage::ALL.iter().map(|s| s.as_str()).collect();
                format!("unknown stage `{s}`; expected one of: {}", names.join(", "))
            })
    }
}

/// Which routes a template serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TemplateTarget {
    Base,
    Family(&'static str),
    Model {
        family: &'static str,
        model: &'static str,
    },
}

impl fmt::Display for TemplateTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateTarget::Base => f.write_str("base"),
            TemplateTarget::Family(family) => write!(f, "{family}"),
            TemplateTarget::Model { family, model } => write!(f, "{family}@{model}"),
        }
    }
}

/// One body of a section: the base or an override.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionTemplate {
    /// Path relative to the library root.
    pub file: &'static str,
    pub target: TemplateTarget,
    pub version: u32,
    pub content_hash: &'static str,
    pub max_bytes: usize,
    /// Always `Active` for a base; an override is `Active` only with a bound
    /// change record.
    pub activation: ActivationState,
    pub change_record: Option<&'static str>,
    pub body: &'static str,
}

/// The compiled description of one section id.
#[derive(Debug, PartialEq, Eq)]
pub struct SectionSchema {
    pub id: &'static str,
    pub library: &'static str,
    pub stage: PromptStage,
    /// Position within the stage (the file-name prefix).
    pub order: u32,
    pub role: SectionRole,
    pub required: bool,
    pub priority: u16,
    pub owner: &'static str,
    pub vars: &'static [VarSchema],
    pub base: SectionTemplate,
    pub overrides: &'static [SectionTemplate],
}

impl SectionSchema {
    /// The short name after the stage, e.g. `tool_protocol`.
    pub fn name(&self) -> &'static str {
        self.id.split_once('/').map_or(self.id, |(_, name)| name)
    }

    /// Every template of this id: the base first, then overrides.
    pub fn templates(&self) -> impl Iterator<Item = &SectionTemplate> {
        std::iter::once(&self.base).chain(self.overrides.iter())
    }
}

/// A declared stage and its ordered base sections.
#[derive(Debug)]
pub struct StageSchema {
    pub stage: PromptStage,
    pub library: &'static str,
    pub sections: &'static [&'static SectionSchema],
}

/// Implemented by every generated section struct.
pub trait PromptSection {
    const ID: &'static str;
    const VERSION: u32;
    const CONTENT_HASH: &'static str;
    const REQUIRED: bool;
    const PRIORITY: u16;

    fn schema() -> &'static SectionSchema;

    /// The variable values, in declaration order.
    fn values(&self) -> Vec<VarValue>;

    /// Renders the base template. Route-specific resolution happens in
    /// composition; this is the route-neutral form.
    fn render(&self) -> Result<RenderedSection, RenderError> {
        let schema = Self::schema();
        render_template(schema, &schema.base, &self.values())
    }
}
