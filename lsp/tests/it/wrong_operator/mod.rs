//! The scripted model's side of the `wrong-operator` fixture (whose `add`
//! subtracts), shared by the model tests (`model_search.rs`,
//! `model_repair.rs`): the steps of a model that fixes it, and the branches
//! of the repair report it ends in. It only builds values; the tests run.

use serde_json::json;

use trellis_test_support::openai_server::Answer;

/// Reads the crate's lib.
pub fn read_lib() -> Answer {
    Answer::tool_call("read_file", json!({ "path": "src/lib.rs" }))
}

/// The fix: `a - b` becomes `a + b`.
pub fn fix() -> Answer {
    Answer::tool_call(
        "replace",
        json!({ "path": "src/lib.rs", "old": "a - b", "new": "a + b" }),
    )
}

/// Ends the turn with `summary`.
pub fn finish(summary: &str) -> Answer {
    Answer::tool_call("finish", json!({ "summary": summary }))
}
