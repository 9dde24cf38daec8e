//! The model route in the editor, through the built `trellis lsp` binary
//! against our own OpenAI-compatible server: model turns show as work-done
//! progress, the Preview names the model that produced the fix, and
//! cancelling the repair aborts a request the model never answers.

use crate::support;
use trellis_test_support::openai_server;

use std::time::{Duration, Instant};

use openai_server::{Answer, OpenAiServer};
use serde_json::json;
use support::{Client, REPAIR_TIMEOUT, REQUEST_TIMEOUT, vscode_capabilities, write_crate};

const LIB: &str = "src/lib.rs";
const FIXTURE: &str = "../tests/fixtures/wrong-operator";

fn model_crate(server: &OpenAiServer, timeout_secs: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let read = |rel: &str| std::fs::read_to_string(fixture.join(rel)).unwrap();
    let config = format!(
        "[[models]]\nname = \"local\"\nadapter = \"openai-chat\"\nbase_url = \"{}\"\n\
         model = \"qwen2.5-coder:7b\"\ntimeout_secs = {timeout_secs}\n",
        server.base_url
    );
    write_crate(
        dir.path(),
        &[
            ("Cargo.toml", &read("Cargo.toml")),
            (LIB, &read(LIB)),
            ("tests/adds.rs", &read("tests/adds.rs")),
            ("trellis.toml", &config),
        ],
    );
    dir
}

#[test]
fn model_turns_show_as_progress_and_the_preview_names_the_model() {
    let server = OpenAiServer::start(vec![
        Answer::tool_call("read_file", json!({ "path": LIB })),
        Answer::tool_call(
            "replace",
            json!({ "path": LIB, "old": "a - b", "new": "a + b" }),
        ),
        Answer::tool_call("finish", json!({ "summary": "add adds" })),
    ]);
    let dir = model_crate(&server, 60);
    let (mut client, _) = Client::start(dir.path(), vscode_capabilities(), None);
    let from = client.start_repair(LIB);
    let ended = client.search_end(from);
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
    let messages = client.progress_messages(from);
    for turn in [
        "turn 1: read_file src/lib.rs",
        "turn 2: replace src/lib.rs",
        "turn 3: finish",
    ] {
        assert!(
            messages.iter().any(|m| m.contains(turn)),
            "{turn}: {messages:#?}"
        );
    }

    let repair_id = ended["params"]["repair_id"].as_str().unwrap().to_owned();
    let requests_before = client.server_requests.len();
    client.request(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.preview", "arguments": [{ "repair_id": repair_id }] }),
    );
    client.wait_for_request(requests_before, REQUEST_TIMEOUT, "window/showDocument");
    let diff = std::fs::read_to_string(
        dir.path()
            .join(".trellis/previews")
            .join(format!("{repair_id}.diff")),
    )
    .unwrap();
    assert!(diff.contains("(by model `local`)"), "{diff}");
    assert!(diff.contains("+    a + b"), "{diff}");
    client.shutdown();
}

#[test]
fn cancelling_a_repair_aborts_the_request_the_model_never_answers() {
    let server = OpenAiServer::start(vec![Answer::Hang, Answer::Hang]);
    let dir = model_crate(&server, 120);
    let (mut client, _) = Client::start(dir.path(), vscode_capabilities(), None);
    let requests_before = client.server_requests.len();
    let from = client.start_repair(LIB);
    let create = client.wait_for_request(
        requests_before,
        REQUEST_TIMEOUT,
        "window/workDoneProgress/create",
    );
    let waiting = Instant::now();
    while server.received().is_empty() {
        assert!(
            waiting.elapsed() < REPAIR_TIMEOUT,
            "the model was never called"
        );
        client.pump(Duration::from_millis(200));
    }
    let cancelled = Instant::now();
    client.notify(
        "window/workDoneProgress/cancel",
        json!({ "token": create["params"]["token"] }),
    );
    let ended = client.search_end(from);
    assert_eq!(ended["params"]["status"], "cancelled", "{ended}");
    assert!(
        cancelled.elapsed() < Duration::from_secs(60),
        "the hanging request (timeout 120 s) was aborted, not waited out: {:?}",
        cancelled.elapsed()
    );
    assert_eq!(
        server.received().len(),
        1,
        "nothing was retried after the cancel"
    );
    client.shutdown();
}
