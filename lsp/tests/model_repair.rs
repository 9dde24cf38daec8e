//! The model route end to end: the shipped binary repairs fixture crates
//! against an OpenAI-compatible server of our own on 127.0.0.1, which
//! answers from a script and records every request body. Faults (a 500,
//! a hang, a non-JSON body, bad tool calls, escaping paths) are injected
//! by the script; every test checks what reached the user's files.

mod support;
#[path = "../../engine/tests/support/openai_server.rs"]
mod openai_server;

use openai_server::{Answer, OpenAiServer};
use serde_json::{Value, json};
use support::workspace::Workspace;

/// A `[[models]]` table per server, in failover order.
fn models(servers: &[&OpenAiServer], timeout_secs: u64) -> String {
    servers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            format!(
                "[[models]]\nname = \"m{i}\"\nadapter = \"openai-chat\"\nbase_url = \"{}\"\n\
                 model = \"qwen2.5-coder:7b\"\ntimeout_secs = {timeout_secs}\n\
                 context_window_tokens = 32768\nmax_output_tokens = 1024\n\n",
                s.base_url
            )
        })
        .collect()
}

fn workspace(config: &str) -> Workspace {
    let ws = Workspace::of("wrong-operator");
    std::fs::write(ws.path().join("trellis.toml"), config).unwrap();
    ws
}

fn read_lib() -> Answer {
    Answer::tool_call("read_file", json!({ "path": "src/lib.rs" }))
}

fn fix() -> Answer {
    Answer::tool_call(
        "replace",
        json!({ "path": "src/lib.rs", "old": "a - b", "new": "a + b" }),
    )
}

fn finish() -> Answer {
    Answer::tool_call("finish", json!({ "summary": "add adds" }))
}

fn branches(doc: &Value) -> Vec<Value> {
    doc["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["branches"].as_array().cloned().unwrap_or_default())
        .collect()
}

const ORIGINAL: &str = include_str!("../../tests/fixtures/wrong-operator/src/lib.rs");

#[test]
fn a_failing_test_is_fixed_by_the_model_and_promoted() {
    let server = OpenAiServer::start(vec![
        read_lib(),
        fix(),
        Answer::tool_call("run_tests", json!({})),
        finish(),
    ]);
    let ws = workspace(&models(&[&server], 60));
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "the model's fix is promoted: {doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));
    assert!(ws.cargo_test_passes());
    let model = branches(&doc)
        .into_iter()
        .find(|b| b["strategy"] == "model_actor")
        .expect("a model branch ran");
    assert_eq!(model["proposer"], "model:m0", "{model:#}");
    assert_eq!(model["hard_pass"], true, "{model:#}");
    assert_eq!(server.received().len(), 4);
}
