//! Model dialects: every structural difference between model families lives
//! in one typed value per route, never in forked prose.

use serde::{Deserialize, Serialize};

use crate::route::{ModelFamily, PromptRoute};

/// How system content reaches the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SystemSlotPolicy {
    /// Each section is its own system message.
    Many,
    /// All system content is one message, sections joined by the boundary marker.
    SingleConcatenated,
}

/// How the model emits tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ToolCallConvention {
    Native,
    JsonInText,
}

/// What happens to reasoning traces in model output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReasoningTracePolicy {
    None,
    Requested,
    Stripped,
}

/// A versioned token accountant. The only accountant so far is a
/// conservative **upper bound**: byte-level BPE and byte-fallback tokenizers
/// emit at most one token per UTF-8 byte, so `bytes + per-message overhead`
/// never underestimates. It overestimates English prose roughly fourfold,
/// which makes budget fitting cautious, never unsafe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TokenAccountant {
    pub id: &'static str,
    pub version: u32,
    /// Tokens charged per message for role and framing special tokens.
    pub per_message_overhead: u64,
}

impl TokenAccountant {
    pub const UTF8_BYTES_UPPER_BOUND_V1: TokenAccountant = TokenAccountant {
        id: "utf8_bytes_upper_bound",
        version: 1,
        per_message_overhead: 16,
    };

    /// Upper bound on the tokens of `messages`.
    pub fn estimate<'a>(&self, messages: impl IntoIterator<Item = &'a str>) -> u64 {
        messages
            .into_iter()
            .map(|m| m.len() as u64 + self.per_message_overhead)
            .sum()
    }
}

/// Identity of a dialect inside programs and digests.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DialectRef {
    pub id: String,
    pub version: u32,
}

/// The structural contract of one route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDialect {
    pub id: &'static str,
    pub version: u32,
    pub system_slots: SystemSlotPolicy,
    pub tool_calls: ToolCallConvention,
    pub reasoning: ReasoningTracePolicy,
    /// Delimiter between concatenated system sections; empty for `Many`.
    pub boundary_marker: &'static str,
    pub context_window_tokens: u64,
    pub max_output_tokens: u64,
    pub token_accountant: TokenAccountant,
    /// Independent transport bound on the bytes of the compiled prompt.
    pub max_prompt_bytes: u64,
}

impl ModelDialect {
    /// Native tool calls, one system message per section.
    pub const NATIVE_TOOLS_V1: ModelDialect = ModelDialect {
        id: "native_tools_v1",
        version: 1,
        system_slots: SystemSlotPolicy::Many,
        tool_calls: ToolCallConvention::Native,
        reasoning: ReasoningTracePolicy::Stripped,
        boundary_marker: "",
        context_window_tokens: 131_072,
        max_output_tokens: 16_384,
        token_accountant: TokenAccountant::UTF8_BYTES_UPPER_BOUND_V1,
        max_prompt_bytes: 262_144,
    };

    /// JSON tool calls in text, one concatenated system message.
    pub const JSON_SINGLE_SLOT_V1: ModelDialect = ModelDialect {
        id: "json_single_slot_v1",
        version: 1,
        system_slots: SystemSlotPolicy::SingleConcatenated,
        tool_calls: ToolCallConvention::JsonInText,
        reasoning: ReasoningTracePolicy::None,
        boundary_marker: "\n===== trellis:boundary =====\n",
        context_window_tokens: 65_536,
        max_output_tokens: 8_192,
        token_accountant: TokenAccountant::UTF8_BYTES_UPPER_BOUND_V1,
        max_prompt_bytes: 131_072,
    };

    /// Every dialect, for listing and for the `--dialect` lookups of tools.
    pub const ALL: &'static [&'static ModelDialect] = &[
        &ModelDialect::NATIVE_TOOLS_V1,
        &ModelDialect::JSON_SINGLE_SLOT_V1,
    ];

    /// The dialect of a route. Families known to serve native tool calls get
    /// the native dialect; everything else, including `Other`, gets the
    /// conservative JSON-in-text dialect, which any chat endpoint can follow.
    pub fn for_route(route: &PromptRoute) -> &'static ModelDialect {
        match route.family {
            ModelFamily::Anthropic
            | ModelFamily::OpenAi
            | ModelFamily::Google
            | ModelFamily::Mistral => &ModelDialect::NATIVE_TOOLS_V1,
            ModelFamily::Qwen | ModelFamily::DeepSeek | ModelFamily::Llama | ModelFamily::Other => {
                &ModelDialect::JSON_SINGLE_SLOT_V1
            }
        }
    }

    pub fn dialect_ref(&self) -> DialectRef {
        DialectRef {
            id: self.id.to_owned(),
            version: self.version,
        }
    }

    /// The default instruction budget: the window minus the reserved output.
    pub fn default_budget_tokens(&self) -> u64 {
        self.context_window_tokens - self.max_output_tokens
    }
}
