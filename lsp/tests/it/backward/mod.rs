//! The repair both end-to-end tests of `test_policy = "backward-compatible"`
//! drive: a prepared workspace repaired with `--commit` by a scripted model
//! (our OpenAI-compatible server on 127.0.0.1) that makes its edits and
//! finishes, and the check that it refused the model's candidate.

use serde_json::{Value, json};

use crate::support::model::models_toml;
use crate::support::workspace::{Workspace, branches};
use trellis_test_support::openai_server::{Answer, OpenAiServer};

/// A workspace's files, as `Workspace::tree` lists them.
pub type Tree = std::collections::BTreeMap<std::path::PathBuf, Vec<u8>>;

/// What the model does: `replace` (path, old, new) or `write_file` (path,
/// content).
pub enum Edit<'a> {
    Replace(&'a str, &'a str, &'a str),
    Write(&'a str, &'a str),
}

/// `ws` repaired under `backward-compatible` by a model that makes `edits`
/// and finishes. Returns the workspace, its files before the repair, the
/// exit code and the JSON report.
pub fn repair(ws: Workspace, edits: &[Edit<'_>]) -> (Workspace, Tree, i32, Value) {
    let mut script: Vec<Answer> = edits
        .iter()
        .map(|edit| match edit {
            Edit::Replace(path, old, new) => {
                Answer::tool_call("replace", json!({ "path": path, "old": old, "new": new }))
            }
            Edit::Write(path, content) => {
                Answer::tool_call("write_file", json!({ "path": path, "content": content }))
            }
        })
        .collect();
    script.push(Answer::tool_call(
        "finish",
        json!({ "summary": "the tests pass now" }),
    ));
    let server = OpenAiServer::start(script);
    ws.write_user_config(&format!(
        "{}[verification]\ntest_policy = \"backward-compatible\"\n",
        models_toml(&[&server.base_url], 60)
    ));
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    (ws, before, code, doc)
}

/// The reasons branches of a `repair` JSON document were refused under
/// `test_policy = "backward-compatible"`.
pub fn backward_compatible_refusals(doc: &Value) -> Vec<String> {
    branches(doc)
        .filter_map(|b| b["reason"].as_str().map(str::to_owned))
        .filter(|r| r.starts_with("backward-compatible"))
        .collect()
}

/// A `repair --commit` run (the workspace, its files before, the exit code
/// and the JSON report) refused the model's candidate because the original
/// `test` fails against it, and nothing of the user's changed.
pub fn assert_refused_on((ws, before, code, doc): &(Workspace, Tree, i32, Value), test: &str) {
    assert_eq!(*code, 1, "{doc:#}");
    assert!(
        backward_compatible_refusals(doc)
            .iter()
            .any(|r| r.contains(test)),
        "refused on {test}: {doc:#}"
    );
    assert_eq!(&ws.tree(), before, "nothing is written");
}
