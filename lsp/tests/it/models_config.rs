//! `[[models]]`, `[model_turns]` and `[verification]` through the shipped binary: a valid
//! chain starts, a bad table stops start-up naming the file and the key.

use crate::support;

use support::workspace::Workspace;

const CHAIN: &str = r#"
[[models]]
name = "local"
adapter = "openai-chat"
base_url = "http://127.0.0.1:9/v1"
model = "qwen2.5-coder:7b"
api_key_env = "TRELLIS_NO_SUCH_KEY"

[verification]
test_policy = "backward-compatible"
"#;

fn check_with(config: &str) -> (Option<i32>, String) {
    let ws = Workspace::of("missing-mut");
    std::fs::write(ws.path().join("trellis.toml"), config).unwrap();
    let out = ws.trellis(&["check"]);
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn a_model_chain_is_accepted_and_bad_tables_name_their_key() {
    let (code, err) = check_with(CHAIN);
    assert_ne!(
        code,
        Some(2),
        "a valid chain is not a configuration error: {err}"
    );

    for (bad, key) in [
        (CHAIN.replace("api_key_env", "api_key"), "api_key"),
        (
            CHAIN.replace("http://127.0.0.1:9/v1", "127.0.0.1:9"),
            "models[0].base_url",
        ),
        (
            CHAIN.replace("\"backward-compatible\"", "\"frozen\""),
            "test_policy",
        ),
        (
            CHAIN.replace("\"backward-compatible\"", "\"external-oracle\""),
            "verification.oracle_path",
        ),
        (
            format!("{CHAIN}\n[model_turns]\nmax_turns = 0\n"),
            "model_turns.max_turns",
        ),
        (format!("{CHAIN}\n[model_turns]\nedits = 2\n"), "edits"),
    ] {
        let (code, err) = check_with(&bad);
        assert_eq!(code, Some(2), "{key}: {err}");
        assert!(
            err.contains("trellis.toml") && err.contains(key),
            "{key}: {err}"
        );
    }
}
