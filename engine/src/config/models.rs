//! `[[models]]`, `[model_turns]` and `[verification]`: which endpoints a
//! model actor may call, in failover order, how long and how much it may
//! act in one branch, and which test evidence its candidates answer to.
//!
//! This module owns the shape and validation of those tables; `config`
//! layers them like every other table. It never holds an API key: an
//! endpoint names the *environment variable* the key lives in
//! (`api_key_env`), and the transport reads it at call time, so no value
//! here can leak a key through `Debug`, serde or the ledger.

use std::path::Path;

use serde::{Deserialize, Serialize};
use trellis_prompts::ModelFamily;

use crate::sensor::oracle::Oracle;
use crate::snapshot::fsutil::check_rel_path;

/// Per-request deadline when `timeout_secs` is not given.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Longest per-request deadline accepted: a hung endpoint must not hold a
/// repair for more than a small multiple of this.
pub const MAX_TIMEOUT_SECS: u64 = 3600;
pub const DEFAULT_CONTEXT_WINDOW_TOKENS: u64 = 32_768;
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 4096;

/// The transport adapter an endpoint speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AdapterKind {
    /// `POST {base_url}/chat/completions`, OpenAI's chat format with
    /// function calling (ollama, llama.cpp's server, vLLM, hosted APIs).
    #[serde(rename = "openai-chat")]
    OpenAiChat,
}

impl AdapterKind {
    /// The adapter identity prompt routes are resolved with.
    pub fn as_str(self) -> &'static str {
        match self {
            AdapterKind::OpenAiChat => "openai-chat",
        }
    }
}

/// One `[[models]]` table: an endpoint of the failover chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEndpoint {
    /// Names a location and its credentials in messages and the ledger;
    /// never selects a prompt.
    pub name: String,
    pub adapter: AdapterKind,
    pub base_url: String,
    /// The exact model the endpoint is asked for.
    pub model: String,
    /// The prompt family; derived from `model` by [`family_of_model`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// The environment variable holding the API key, read per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    #[serde(default = "default_context_window_tokens")]
    pub context_window_tokens: u64,
    #[serde(default = "default_max_output_tokens")]
    pub max_output_tokens: u64,
}

fn default_timeout_secs() -> u64 {
    DEFAULT_TIMEOUT_SECS
}
fn default_context_window_tokens() -> u64 {
    DEFAULT_CONTEXT_WINDOW_TOKENS
}
fn default_max_output_tokens() -> u64 {
    DEFAULT_MAX_OUTPUT_TOKENS
}

impl ModelEndpoint {
    /// The family prompts are resolved for: the configured one, else the
    /// one the model name implies, else `other`.
    pub fn family(&self) -> ModelFamily {
        match &self.family {
            Some(slug) => ModelFamily::from_slug(slug),
            None => family_of_model(&self.model),
        }
    }
}

/// Model-name prefixes and the family they imply, matched in order against
/// the lowercased last `/`-separated segment of the model name (so
/// `qwen2.5-coder:7b`, `Qwen/Qwen2.5-Coder-7B-Instruct` and
/// `meta-llama/Llama-3.1-8B` all resolve). A name matching none is `other`,
/// which composes from the base sections like every family.
pub const FAMILY_PREFIXES: &[(&str, ModelFamily)] = &[
    ("qwen", ModelFamily::Qwen),
    ("qwq", ModelFamily::Qwen),
    ("codellama", ModelFamily::Llama),
    ("llama", ModelFamily::Llama),
    ("mistral", ModelFamily::Mistral),
    ("mixtral", ModelFamily::Mistral),
    ("codestral", ModelFamily::Mistral),
    ("devstral", ModelFamily::Mistral),
    ("ministral", ModelFamily::Mistral),
    ("deepseek", ModelFamily::DeepSeek),
    ("gpt-", ModelFamily::OpenAi),
    ("chatgpt", ModelFamily::OpenAi),
    ("o1", ModelFamily::OpenAi),
    ("o3", ModelFamily::OpenAi),
    ("o4", ModelFamily::OpenAi),
    ("claude", ModelFamily::Anthropic),
    ("gemini", ModelFamily::Google),
    ("gemma", ModelFamily::Google),
];

/// The family a model name implies under [`FAMILY_PREFIXES`].
pub fn family_of_model(model: &str) -> ModelFamily {
    let segment = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    FAMILY_PREFIXES
        .iter()
        .find(|(prefix, _)| segment.starts_with(prefix))
        .map_or(ModelFamily::Other, |(_, family)| *family)
}

/// Checks the merged chain; an error names the dotted key (`models[1].base_url`).
pub fn validate_models(models: &[ModelEndpoint]) -> Result<(), String> {
    for (i, m) in models.iter().enumerate() {
        let key = |field: &str| format!("`models[{i}].{field}`");
        if m.name.trim().is_empty() {
            return Err(format!("{} must not be empty", key("name")));
        }
        if let Some(j) = models[..i].iter().position(|o| o.name == m.name) {
            return Err(format!(
                "{} repeats the name `{}` of `models[{j}]`: each endpoint needs its own name",
                key("name"),
                m.name
            ));
        }
        let rest = m
            .base_url
            .strip_prefix("http://")
            .or_else(|| m.base_url.strip_prefix("https://"));
        if rest.is_none_or(|host| host.is_empty() || host.starts_with('/')) {
            return Err(format!(
                "{} must be an http:// or https:// URL with a host, got `{}`",
                key("base_url"),
                m.base_url
            ));
        }
        if m.model.trim().is_empty() {
            return Err(format!("{} must not be empty", key("model")));
        }
        if let Some(family) = &m.family {
            let known = ModelFamily::from_slug(family) != ModelFamily::Other
                || family.eq_ignore_ascii_case("other");
            if !known {
                let slugs: Vec<&str> = FAMILIES.iter().map(|f| f.as_str()).collect();
                return Err(format!(
                    "{} is `{family}`, not a known family (known: {}); leave it out to derive it from `model`",
                    key("family"),
                    slugs.join(", ")
                ));
            }
        }
        if let Some(var) = &m.api_key_env
            && (var.is_empty() || var.contains(['=', '\0']))
        {
            return Err(format!(
                "{} must name an environment variable, got `{var}`",
                key("api_key_env")
            ));
        }
        if !(1..=MAX_TIMEOUT_SECS).contains(&m.timeout_secs) {
            return Err(format!(
                "{} must be between 1 and {MAX_TIMEOUT_SECS}, got {}",
                key("timeout_secs"),
                m.timeout_secs
            ));
        }
        if m.max_output_tokens == 0 || m.max_output_tokens >= m.context_window_tokens {
            return Err(format!(
                "{} must be at least 1 and below {} ({}), got {}",
                key("max_output_tokens"),
                key("context_window_tokens"),
                m.context_window_tokens,
                m.max_output_tokens
            ));
        }
    }
    Ok(())
}

/// Every family, for messages.
const FAMILIES: &[ModelFamily] = &[
    ModelFamily::Anthropic,
    ModelFamily::OpenAi,
    ModelFamily::Google,
    ModelFamily::Mistral,
    ModelFamily::Qwen,
    ModelFamily::DeepSeek,
    ModelFamily::Llama,
    ModelFamily::Other,
];

/// `[model_turns]`: the allowances of one model branch (erratum 2: per
/// turn, tool calls, edits and result bytes are bounded). Ledgered with the
/// session's configuration, so replay rebuilds each turn's block from the
/// limits the session ran under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnLimits {
    /// Model calls per branch; a model that never calls `finish` stops here.
    pub max_turns: u32,
    pub tool_calls_per_turn: u32,
    /// Edits (`replace`, `write_file`) per turn.
    #[serde(rename = "edits_per_turn")]
    pub mutations_per_turn: u32,
    /// Bound on the data one tool call returns (`result_bytes`).
    pub result_bytes: usize,
    /// The tokens each turn reserves from the forest's budget before it is
    /// sent; settled to the reply's `usage` after.
    pub tokens_per_turn: u64,
    /// θ of the resident working set (PSP-10 Definition 6): how many recent
    /// turns' pages stay candidates for a request. A session recorded
    /// before the key existed made every page a candidate, as θ at the
    /// turn ceiling does, so its record reads back that way.
    #[serde(default = "every_turn")]
    pub working_set_turns: u32,
}

fn every_turn() -> u32 {
    MAX_TURNS as u32
}

impl TurnLimits {
    pub const DEFAULT: TurnLimits = TurnLimits {
        max_turns: 8,
        tool_calls_per_turn: 8,
        mutations_per_turn: 4,
        result_bytes: 16 * 1024,
        tokens_per_turn: 8192,
        working_set_turns: 6,
    };

    /// Each limit is at least 1 and at most its ceiling; an error names the key.
    pub fn validate(&self) -> Result<(), String> {
        let checks: [(&str, u64, u64); 6] = [
            ("max_turns", u64::from(self.max_turns), MAX_TURNS),
            (
                "tool_calls_per_turn",
                u64::from(self.tool_calls_per_turn),
                64,
            ),
            ("edits_per_turn", u64::from(self.mutations_per_turn), 64),
            ("result_bytes", self.result_bytes as u64, 1 << 20),
            ("tokens_per_turn", self.tokens_per_turn, 1 << 20),
            (
                "working_set_turns",
                u64::from(self.working_set_turns),
                MAX_TURNS,
            ),
        ];
        for (key, value, max) in checks {
            if !(1..=max).contains(&value) {
                return Err(format!(
                    "`model_turns.{key}` must be between 1 and {max}, got {value}"
                ));
            }
        }
        Ok(())
    }
}

impl Default for TurnLimits {
    fn default() -> Self {
        TurnLimits::DEFAULT
    }
}

/// A model branch running longer than this is better spent elsewhere.
const MAX_TURNS: u64 = 64;

/// `[model_turns]` as one layer wrote it: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TurnLimitsLayer {
    max_turns: Option<u32>,
    tool_calls_per_turn: Option<u32>,
    edits_per_turn: Option<u32>,
    result_bytes: Option<usize>,
    tokens_per_turn: Option<u64>,
    working_set_turns: Option<u32>,
}

impl TurnLimitsLayer {
    pub(crate) fn apply(self, limits: &mut TurnLimits) {
        limits.max_turns = self.max_turns.unwrap_or(limits.max_turns);
        limits.tool_calls_per_turn = self
            .tool_calls_per_turn
            .unwrap_or(limits.tool_calls_per_turn);
        limits.mutations_per_turn = self.edits_per_turn.unwrap_or(limits.mutations_per_turn);
        limits.result_bytes = self.result_bytes.unwrap_or(limits.result_bytes);
        limits.tokens_per_turn = self.tokens_per_turn.unwrap_or(limits.tokens_per_turn);
        limits.working_set_turns = self.working_set_turns.unwrap_or(limits.working_set_turns);
    }
}

/// Which tests a candidate is measured against (erratum 37).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestPolicy {
    /// The candidate's own implementation, tests and configuration.
    #[default]
    Evolving,
    /// Also the tests as they were when the repair started, so weakening a
    /// test instead of fixing the code is refused.
    BackwardCompatible,
    /// Also a protected overlay (`oracle_path`) run by `oracle_command` in a
    /// private verification tree, as a blocking test-stage verdict.
    ExternalOracle,
}

/// `[verification]`, merged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VerificationConfig {
    pub test_policy: TestPolicy,
    /// Workspace-relative overlay of oracle tests (`external-oracle` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oracle_path: Option<String>,
    /// Program and arguments that run the oracle (`external-oracle` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oracle_command: Option<Vec<String>>,
}

/// `[verification]` as one layer wrote it: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct VerificationLayer {
    test_policy: Option<TestPolicy>,
    oracle_path: Option<String>,
    oracle_command: Option<Vec<String>>,
}

impl VerificationLayer {
    pub(crate) fn apply(self, config: &mut VerificationConfig) {
        config.test_policy = self.test_policy.unwrap_or(config.test_policy);
        if self.oracle_path.is_some() {
            config.oracle_path = self.oracle_path;
        }
        if self.oracle_command.is_some() {
            config.oracle_command = self.oracle_command;
        }
    }
}

impl VerificationConfig {
    /// The oracle this configures for the workspace at `root`; `None`
    /// under any other test policy.
    pub fn oracle(&self, root: &Path) -> Option<Oracle> {
        if self.test_policy != TestPolicy::ExternalOracle {
            return None;
        }
        Some(Oracle::new(
            root,
            self.oracle_path.clone()?,
            self.oracle_command.clone()?,
        ))
    }

    /// A mispaired policy and oracle fails start-up (erratum 37).
    pub fn validate(&self) -> Result<(), String> {
        let oracle_keys = self.oracle_path.is_some() || self.oracle_command.is_some();
        match self.test_policy {
            TestPolicy::ExternalOracle => {
                let path = self.oracle_path.as_deref().unwrap_or("");
                if path.is_empty() {
                    return Err("`verification.test_policy = \"external-oracle\"` needs `verification.oracle_path`".into());
                }
                check_rel_path(path).map_err(|e| format!("`verification.oracle_path`: {e}"))?;
                let command = self.oracle_command.as_deref().unwrap_or(&[]);
                if command.first().is_none_or(|program| program.is_empty()) {
                    return Err("`verification.test_policy = \"external-oracle\"` needs a non-empty `verification.oracle_command`".into());
                }
                Ok(())
            }
            TestPolicy::Evolving | TestPolicy::BackwardCompatible if oracle_keys => Err(
                "`verification.oracle_path` and `verification.oracle_command` apply only with `test_policy = \"external-oracle\"`".into(),
            ),
            TestPolicy::Evolving | TestPolicy::BackwardCompatible => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_family_table_derives_families_from_model_names() {
        for (model, family) in [
            ("qwen2.5-coder:7b", ModelFamily::Qwen),
            ("Qwen/Qwen2.5-Coder-7B-Instruct", ModelFamily::Qwen),
            ("meta-llama/Llama-3.1-8B-Instruct", ModelFamily::Llama),
            ("codellama:13b", ModelFamily::Llama),
            ("devstral-small", ModelFamily::Mistral),
            ("deepseek-coder-v2", ModelFamily::DeepSeek),
            ("gpt-4o-mini", ModelFamily::OpenAi),
            ("gemma3:4b", ModelFamily::Google),
            ("SmolLM2-135M-Instruct", ModelFamily::Other),
            ("", ModelFamily::Other),
        ] {
            assert_eq!(family_of_model(model), family, "{model}");
        }
    }

    #[test]
    fn an_explicit_family_wins_over_the_model_name() {
        let endpoint = ModelEndpoint {
            name: "gw".into(),
            adapter: AdapterKind::OpenAiChat,
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "qwen2.5-coder".into(),
            family: Some("llama".into()),
            api_key_env: None,
            timeout_secs: 1,
            context_window_tokens: 10,
            max_output_tokens: 5,
        };
        assert_eq!(endpoint.family(), ModelFamily::Llama);
    }

    #[test]
    fn a_mispaired_oracle_fails() {
        let mut v = VerificationConfig {
            test_policy: TestPolicy::ExternalOracle,
            ..Default::default()
        };
        assert!(v.validate().unwrap_err().contains("oracle_path"));
        v.oracle_path = Some("oracle".into());
        assert!(v.validate().unwrap_err().contains("oracle_command"));
        v.oracle_command = Some(vec!["cargo".into(), "test".into()]);
        v.validate().unwrap();
        v.oracle_path = Some("../outside".into());
        assert!(
            v.validate()
                .unwrap_err()
                .contains("verification.oracle_path")
        );
        v.test_policy = TestPolicy::Evolving;
        assert!(v.validate().unwrap_err().contains("only with"));
    }
}
