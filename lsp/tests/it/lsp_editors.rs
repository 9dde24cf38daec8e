//! How editors get a finished repair, through the built `trellis lsp` and
//! real cargo: nothing modal (no `window/showMessageRequest` for a client
//! that renders it as a blocking prompt, or whose plugin announces the
//! search itself), and code actions answered from state the server already
//! computed, so the Apply offer follows the document without a request
//! ever waiting for the view's root.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::repair_loop::titled;
use support::{
    Client, REPAIR_TIMEOUT, REQUEST_TIMEOUT, broken_crate, helix_capabilities, neovim_capabilities,
    vscode_capabilities,
};

const LIB: &str = "src/lib.rs";

/// Opens the lib, repairs its missing-`mut` cluster through the Repair
/// action's command and waits for the verified result. Returns the
/// diagnostic, the `hard_pass` status and the index of the first
/// notification and server request after the start.
fn verified_repair(client: &mut Client) -> (Value, Value, usize, usize) {
    client.open(LIB);
    let diagnostic = client
        .wait_for_diagnostics(0, LIB, true)
        .into_iter()
        .find(|d| d["code"] == "E0384")
        .expect("the E0384 diagnostic");
    let actions = client.code_actions(LIB, &diagnostic["range"], std::slice::from_ref(&diagnostic));
    let repair = titled(&actions, "Repair: ").expect("a Repair action");
    let (from, requests) = (client.notifications.len(), client.server_requests.len());
    client.request(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.start", "arguments": repair["command"]["arguments"] }),
    );
    let ended = client.wait_for(from, REPAIR_TIMEOUT, "the search to end", |n| {
        n["method"] == "trellis/searchStatus"
            && !["running", "applied"].contains(&n["params"]["status"].as_str().unwrap_or_default())
    });
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
    (diagnostic, ended, from, requests)
}

fn requests_named<'a>(client: &'a Client, from: usize, method: &str) -> Vec<&'a Value> {
    client.server_requests[from..]
        .iter()
        .filter(|r| r["method"] == method)
        .collect()
}

fn announcements(client: &Client, from: usize) -> Vec<&Value> {
    client.notifications[from..]
        .iter()
        .filter(|n| {
            n["method"] == "window/showMessage"
                && n["params"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("verified repair")
        })
        .collect()
}

#[test]
fn a_client_named_neovim_is_told_without_a_prompt() {
    let dir = broken_crate();
    // Neovim's capabilities include `window.showMessage`, yet its default
    // `showMessageRequest` handler is a modal inputlist().
    let (mut client, _) = Client::start_as(dir.path(), Some("Neovim"), neovim_capabilities(), None);
    let (diagnostic, _, from, requests) = verified_repair(&mut client);
    client.pump(Duration::from_secs(2));

    assert!(
        requests_named(&client, requests, "window/showMessageRequest").is_empty(),
        "{:#?}",
        client.server_requests
    );
    assert_eq!(
        announcements(&client, from).len(),
        1,
        "{:#?}",
        client.notifications
    );
    let actions = client.code_actions(LIB, &diagnostic["range"], std::slice::from_ref(&diagnostic));
    assert!(
        titled(&actions, "Apply verified repair: ").is_some(),
        "{actions:#?}"
    );
    client.shutdown();
}

#[test]
fn a_plugin_that_announces_itself_gets_no_prompt_and_no_message_and_apply_at_once() {
    let dir = broken_crate();
    let mut capabilities = vscode_capabilities();
    capabilities["experimental"] = json!({ "trellis": { "announcesSearchStatus": true } });
    let (mut client, _) =
        Client::start_as(dir.path(), Some("Visual Studio Code"), capabilities, None);
    let (diagnostic, ended, from, requests) = verified_repair(&mut client);

    // The status is sent once the Apply is offerable: the very next request
    // offers it, with no wait on the client's side.
    let actions = client.code_actions(LIB, &diagnostic["range"], std::slice::from_ref(&diagnostic));
    let apply = titled(&actions, "Apply verified repair: ").expect("Apply offered at once");
    assert_eq!(apply["data"]["trellis_apply"], ended["params"]["repair_id"]);
    client.pump(Duration::from_secs(2));
    assert!(
        requests_named(&client, requests, "window/showMessageRequest").is_empty(),
        "{:#?}",
        client.server_requests
    );
    assert!(
        announcements(&client, from).is_empty(),
        "{:#?}",
        client.notifications
    );
    client.shutdown();
}

#[test]
fn the_inline_apply_edit_follows_the_document_without_waiting() {
    let dir = broken_crate();
    let (mut client, _) = Client::start_as(dir.path(), Some("helix"), helix_capabilities(), None);
    let (diagnostic, _, _, _) = verified_repair(&mut client);
    let ask = |client: &mut Client| {
        client.code_actions(LIB, &diagnostic["range"], std::slice::from_ref(&diagnostic))
    };
    let actions = ask(&mut client);
    let apply = titled(&actions, "Apply verified repair: ").expect("Apply offered");
    assert_eq!(
        apply["edit"]["documentChanges"][0]["textDocument"]["version"],
        1
    );

    // Typing makes the repair stale: from the very next request on, no Apply
    // is offered (the root of the new text is not known yet, or differs).
    let start = json!({ "line": 0, "character": 0 });
    client.edit(LIB, json!({ "start": start, "end": start }), "// typed\n");
    let actions = ask(&mut client);
    assert!(
        titled(&actions, "Apply verified repair: ").is_none(),
        "{actions:#?}"
    );

    // Deleting the text again brings the start root back; the offer returns,
    // carrying an edit built for the document's current version.
    let end = json!({ "line": 1, "character": 0 });
    client.edit(LIB, json!({ "start": start, "end": end }), "");
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let apply = loop {
        if let Some(apply) = titled(&ask(&mut client), "Apply verified repair: ").cloned() {
            break apply;
        }
        assert!(Instant::now() < deadline, "the Apply offer never came back");
        client.pump(Duration::from_millis(100));
    };
    assert_eq!(
        apply["edit"]["documentChanges"][0]["textDocument"]["version"],
        3
    );
    client.apply_workspace_edit(&apply["edit"]);
    let text = &client.docs[&client.uri(LIB)].text;
    assert!(text.contains("let mut n = 0;"), "{text}");
    client.shutdown();
}
