//! `[[models]]` and `[verification]` loaded through the layered
//! configuration: the actor's tables seen from the config that owns loading.

use super::{Config, ConfigError, WORKSPACE_FILE};
use trellis_prompts::ModelFamily;

use super::models::*;

fn load_with(text: &str) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(WORKSPACE_FILE), text).unwrap();
    Config::load(dir.path(), None, None)
}

const ISSUE_EXAMPLE: &str = r#"
[[models]]
name = "local"
adapter = "openai-chat"
base_url = "http://127.0.0.1:11434/v1"
model = "qwen2.5-coder:7b"
family = "qwen"
api_key_env = "OPENAI_API_KEY"
timeout_secs = 120
context_window_tokens = 32768
max_output_tokens = 4096

[[models]]
name = "second"
adapter = "openai-chat"
base_url = "https://models.example.invalid/v1"
model = "SmolLM2-135M-Instruct"

[verification]
test_policy = "backward-compatible"
"#;

#[test]
fn the_documented_shape_loads_in_chain_order_with_defaults() {
    let c = load_with(ISSUE_EXAMPLE).unwrap();
    assert_eq!(c.models.len(), 2);
    assert_eq!(c.models[0].name, "local");
    assert_eq!(c.models[0].family(), ModelFamily::Qwen);
    assert_eq!(c.models[0].api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(c.models[1].family(), ModelFamily::Other);
    assert_eq!(c.models[1].timeout_secs, DEFAULT_TIMEOUT_SECS);
    assert_eq!(c.verification.test_policy, TestPolicy::BackwardCompatible);
    assert_eq!(Config::default().models, vec![]);
    assert_eq!(
        Config::default().verification.test_policy,
        TestPolicy::Evolving
    );
}

#[test]
fn an_unknown_model_key_fails_naming_it() {
    let err =
        load_with(&ISSUE_EXAMPLE.replace("timeout_secs = 120", "api_key = \"sk-x\"")).unwrap_err();
    assert!(err.source_name.ends_with(WORKSPACE_FILE), "{err}");
    assert!(err.message.contains("api_key"), "{err}");
    let err = load_with(&ISSUE_EXAMPLE.replace(
        "\"openai-chat\"\nbase_url = \"http://",
        "\"anthropic\"\nbase_url = \"http://",
    ))
    .unwrap_err();
    assert!(err.message.contains("openai-chat"), "{err}");
    let err = load_with("[verification]\ntest_policy = \"frozen\"\n").unwrap_err();
    assert!(err.message.contains("backward-compatible"), "{err}");
}

#[test]
fn a_bad_model_value_names_its_indexed_key() {
    for (from, to, key) in [
        (
            "https://models.example.invalid/v1",
            "models.example.invalid",
            "models[1].base_url",
        ),
        ("family = \"qwen\"", "family = \"qwn\"", "models[0].family"),
        (
            "timeout_secs = 120",
            "timeout_secs = 0",
            "models[0].timeout_secs",
        ),
        (
            "max_output_tokens = 4096",
            "max_output_tokens = 40960",
            "models[0].max_output_tokens",
        ),
        ("name = \"second\"", "name = \"local\"", "models[1].name"),
        (
            "api_key_env = \"OPENAI_API_KEY\"",
            "api_key_env = \"\"",
            "models[0].api_key_env",
        ),
    ] {
        let err = load_with(&ISSUE_EXAMPLE.replace(from, to)).unwrap_err();
        assert!(err.message.contains(key), "{key}: {err}");
    }
}

#[test]
fn a_later_layer_replaces_the_whole_chain() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(WORKSPACE_FILE), ISSUE_EXAMPLE).unwrap();
    let init = serde_json::json!({
        "models": [{ "name": "editor", "adapter": "openai-chat",
                     "base_url": "http://127.0.0.1:8080/v1", "model": "llama3" }],
        "verification": { "test_policy": "evolving" }
    });
    let c = Config::load(dir.path(), None, Some(&init)).unwrap();
    assert_eq!(c.models.len(), 1);
    assert_eq!(c.models[0].name, "editor");
    assert_eq!(c.models[0].family(), ModelFamily::Llama);
    assert_eq!(c.verification.test_policy, TestPolicy::Evolving);
}

#[test]
fn model_turns_default_to_the_documented_allowances_and_layer_per_key() {
    assert_eq!(Config::default().model_turns, TurnLimits::DEFAULT);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(WORKSPACE_FILE),
        "[model_turns]\nmax_turns = 3\nedits_per_turn = 1\nworking_set_turns = 2\n",
    )
    .unwrap();
    let init = serde_json::json!({ "model_turns": { "tokens_per_turn": 2048 } });
    let c = Config::load(dir.path(), None, Some(&init)).unwrap();
    assert_eq!(
        c.model_turns,
        TurnLimits {
            max_turns: 3,
            mutations_per_turn: 1,
            tokens_per_turn: 2048,
            working_set_turns: 2,
            ..TurnLimits::DEFAULT
        }
    );
}

#[test]
fn a_bad_model_turns_value_names_its_key() {
    for (table, key) in [
        ("max_turns = 0", "model_turns.max_turns"),
        ("max_turns = 65", "model_turns.max_turns"),
        ("tool_calls_per_turn = 0", "model_turns.tool_calls_per_turn"),
        ("edits_per_turn = 0", "model_turns.edits_per_turn"),
        ("result_bytes = 0", "model_turns.result_bytes"),
        ("tokens_per_turn = 0", "model_turns.tokens_per_turn"),
        ("working_set_turns = 0", "model_turns.working_set_turns"),
        ("working_set_turns = 65", "model_turns.working_set_turns"),
    ] {
        let err = load_with(&format!("[model_turns]\n{table}\n")).unwrap_err();
        assert!(err.message.contains(key), "{key}: {err}");
    }
    let err = load_with("[model_turns]\nturns = 3\n").unwrap_err();
    assert!(err.message.contains("turns"), "{err}");
}
