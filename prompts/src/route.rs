//! Prompt routes and per-section resolution (Definition 4).
//!
//! A route is (adapter, family, optional exact model); the configured endpoint
//! id never selects a prompt. Each section resolves on its own: an active
//! exact-model override, else an active family override, else the base. The
//! base always exists (the build refuses a stage without it), so resolution
//! is total, and an unknown family simply gets the base sections.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::schema::{ActivationState, SectionSchema, SectionTemplate, TemplateTarget};

/// The model families Trellis distinguishes. Anything else is `Other`, which
/// composes from base sections like every family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelFamily {
    Anthropic,
    OpenAi,
    Google,
    Mistral,
    Qwen,
    DeepSeek,
    Llama,
    Other,
}

impl ModelFamily {
    /// The slug used in override file names (`20_x.<slug>.md`).
    pub fn as_str(self) -> &'static str {
        match self {
            ModelFamily::Anthropic => "anthropic",
            ModelFamily::OpenAi => "openai",
            ModelFamily::Google => "google",
            ModelFamily::Mistral => "mistral",
            ModelFamily::Qwen => "qwen",
            ModelFamily::DeepSeek => "deepseek",
            ModelFamily::Llama => "llama",
            ModelFamily::Other => "other",
        }
    }

    /// Never fails: an unrecognised family is `Other`.
    pub fn from_slug(slug: &str) -> ModelFamily {
        match slug.to_ascii_lowercase().as_str() {
            "anthropic" => ModelFamily::Anthropic,
            "openai" => ModelFamily::OpenAi,
            "google" => ModelFamily::Google,
            "mistral" => ModelFamily::Mistral,
            "qwen" => ModelFamily::Qwen,
            "deepseek" => ModelFamily::DeepSeek,
            "llama" => ModelFamily::Llama,
            _ => ModelFamily::Other,
        }
    }
}

impl fmt::Display for ModelFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The identity that selects prompts: adapter kind, family, exact model.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PromptRoute {
    /// Transport adapter identity (e.g. `scripted`), never an endpoint id.
    pub adapter: String,
    pub family: ModelFamily,
    pub exact_model: Option<String>,
}

impl PromptRoute {
    pub fn new(adapter: &str, family: ModelFamily, exact_model: Option<&str>) -> Self {
        PromptRoute {
            adapter: adapter.to_owned(),
            family,
            exact_model: exact_model.map(str::to_owned),
        }
    }
}

impl fmt::Display for PromptRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.adapter, self.family)?;
        if let Some(model) = &self.exact_model {
            write!(f, "/{model}")?;
        }
        Ok(())
    }
}

impl FromStr for PromptRoute {
    type Err = String;

    /// `adapter/family[/model]`; the model may itself contain `/`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.splitn(3, '/');
        let adapter = parts.next().filter(|a| !a.is_empty());
        let family = parts.next().filter(|f| !f.is_empty());
        let (Some(adapter), Some(family)) = (adapter, family) else {
            return Err(format!("route `{s}` is not `adapter/family[/model]`"));
        };
        let model = parts.next().filter(|m| !m.is_empty());
        Ok(PromptRoute::new(
            adapter,
            ModelFamily::from_slug(family),
            model,
        ))
    }
}

/// Which non-default governance a session accepted; every relaxation is
/// recorded in the provenance of the programs it affects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResolutionPolicy {
    /// `--allow-experimental-prompts`: experimental overrides may resolve.
    pub allow_experimental: bool,
    /// `--allow-core-prompt-override`: platform sections may be overridden.
    pub allow_core_override: bool,
}

/// The template a section resolved to and how it was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub template: &'static SectionTemplate,
    /// Admitted only because `allow_experimental` was set.
    pub experimental: bool,
    /// A platform section replaced under `allow_core_override`.
    pub core_override: bool,
}

/// Resolves one section for `route` under `policy`: exact model, then family,
/// then base. An override that is not admissible is skipped, never an error.
pub fn resolve(
    schema: &'static SectionSchema,
    route: &PromptRoute,
    policy: ResolutionPolicy,
) -> Resolved {
    let family = route.family.as_str();
    let exact = schema.overrides.iter().find(|t| {
        matches!(t.target, TemplateTarget::Model { family: f, model }
            if f == family && route.exact_model.as_deref() == Some(model))
    });
    let by_family = schema
        .overrides
        .iter()
        .find(|t| matches!(t.target, TemplateTarget::Family(f) if f == family));
    for candidate in [exact, by_family].into_iter().flatten() {
        let core = schema.library == "platform";
        if core && !policy.allow_core_override {
            continue;
        }
        let experimental = candidate.activation != ActivationState::Active;
        if experimental && !policy.allow_experimental {
            continue;
        }
        return Resolved {
            template: candidate,
            experimental,
            core_override: core,
        };
    }
    Resolved {
        template: &schema.base,
        experimental: false,
        core_override: false,
    }
}
