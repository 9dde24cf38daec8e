//! Resident context in the editor, through the built `trellis lsp` binary
//! against our OpenAI-compatible server: a repair on a route whose window
//! cannot hold two long file reads refits its third turn, and the editor's
//! work-done progress says so.

use crate::paging;
use crate::support;
use trellis_test_support::openai_server;

use openai_server::{Answer, OpenAiServer};
use paging::{WINDOW, long_lines, plans, read, workspace};
use serde_json::json;
use support::{Client, vscode_capabilities};
use trellis_engine::context::Residency;

const LIB: &str = "src/lib.rs";

#[test]
fn a_refitted_turn_shows_in_the_editors_progress() {
    let server = OpenAiServer::start(vec![
        read("data/alpha.txt"),
        read("data/beta.txt"),
        Answer::tool_call(
            "replace",
            json!({ "path": LIB, "old": "a - b", "new": "a + b" }),
        ),
        Answer::tool_call("finish", json!({ "summary": "add adds" })),
    ]);
    let ws = workspace(&server, WINDOW, long_lines());
    let (mut client, _) = Client::start(ws.path(), vscode_capabilities(), None);
    let from = client.start_repair(LIB);
    let ended = client.search_end(from);
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
    // The third request could not hold both reads: the ledgered plan
    // evicted the first, and the progress reported exactly that turn.
    let plans = plans(&ws);
    assert_eq!(plans[2].pages[0].residency, Residency::Evicted);
    let messages = client.progress_messages(from);
    let refitted: Vec<&String> = messages
        .iter()
        .filter(|m| m.contains("context refitted"))
        .collect();
    let turn_3 = format!(
        "turn 3: context refitted to {} of {} tokens (1 page evicted, 0 stale)",
        plans[2].request_tokens, plans[2].allowance.input
    );
    assert!(
        refitted.iter().any(|m| m.contains(&turn_3)),
        "{messages:#?}"
    );
    assert!(
        !refitted.iter().any(|m| m.contains("turn 2:")),
        "turn 2 fit whole: {messages:#?}"
    );
    client.shutdown();
}
