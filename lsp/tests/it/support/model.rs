//! The scripted model's side of the end-to-end tests: the `[[models]]`
//! tables that point a workspace at our OpenAI-compatible servers, the
//! check that `trellis ledger replay` rebuilds what they received.
//!
//! The server itself is `trellis_test_support::openai_server`; these
//! helpers take what they need of it (its `base_url`, its received bodies)
//! as plain values. Nothing here runs `trellis`.

use std::path::Path;

use serde_json::{Value, json};
use trellis_test_support::openai_server::Answer;

/// One `[[models]]` table per server base URL (`m0`, `m1`, … in failover
/// order), each with the same model settings and `timeout_secs`.
pub fn models_toml(base_urls: &[impl AsRef<str>], timeout_secs: u64) -> String {
    base_urls
        .iter()
        .enumerate()
        .map(|(i, base_url)| {
            format!(
                "[[models]]\nname = \"m{i}\"\nadapter = \"openai-chat\"\nbase_url = \"{}\"\n\
                 model = \"qwen2.5-coder:7b\"\ntimeout_secs = {timeout_secs}\n\
                 context_window_tokens = 32768\nmax_output_tokens = 1024\n\n",
                base_url.as_ref()
            )
        })
        .collect()
}

/// `trellis ledger replay` of the workspace at `root` rebuilds, without a
/// model, exactly the request bodies the server received, in order.
pub fn assert_replay_reproduces(root: &Path, received: &[String]) {
    let replay = super::ledger_replay(root);
    let calls = replay["model_calls"].as_array().unwrap();
    assert_eq!(calls.len(), received.len(), "{replay:#}");
    for (call, body) in calls.iter().zip(received) {
        assert_eq!(call["reproduced"], true);
        assert_eq!(
            call["request"],
            serde_json::from_str::<Value>(body).unwrap()
        );
    }
}

/// The scripted model fixing the discount fixtures' logic bug: it reads
/// `src/discount.ts`, makes the moves `between`, replaces `1 + percent`
/// with `1 - percent`, runs the tests and finishes.
pub fn discount_fix(between: Vec<Answer>) -> Vec<Answer> {
    let mut answers = vec![Answer::tool_call(
        "read_file",
        json!({ "path": "src/discount.ts" }),
    )];
    answers.extend(between);
    answers.extend([
        Answer::tool_call(
            "replace",
            json!({ "path": "src/discount.ts", "old": "1 + percent", "new": "1 - percent" }),
        ),
        Answer::tool_call("run_tests", json!({})),
        Answer::tool_call("finish", json!({ "summary": "a discount subtracts" })),
    ]);
    answers
}
