//! Faults a client can cause in the language server, through the built
//! `trellis lsp` and real cargo: a document opened through a symlinked
//! directory, the same Apply sent twice by a client whose edits carry no
//! document versions, and a client that never answers the server's
//! `window/workDoneProgress/create`.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Client, REQUEST_TIMEOUT, broken_crate, neovim_capabilities, vscode_capabilities};

const LIB: &str = "src/lib.rs";

fn message_of(notification: &Value) -> &str {
    notification["params"]["message"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn a_document_opened_through_a_symlinked_directory_is_ignored_and_the_rest_is_sensed() {
    let dir = broken_crate();
    std::os::unix::fs::symlink("src", dir.path().join("linked")).unwrap();
    let (mut client, _) = Client::start(dir.path(), vscode_capabilities(), None);

    client.open("linked/lib.rs");
    let warned = client.wait_for(0, REQUEST_TIMEOUT, "the warning", |n| {
        n["method"] == "window/logMessage" && message_of(n).contains("symlink `linked`")
    });
    assert_eq!(warned["params"]["type"], 2, "{warned}");

    // The real file is still sensed while the linked one stays open.
    client.open(LIB);
    let diagnostics = client.wait_for_diagnostics(0, LIB, true);
    assert!(
        diagnostics.iter().any(|d| d["code"] == "E0384"),
        "{diagnostics:#?}"
    );
    let failed = client
        .notifications
        .iter()
        .find(|n| message_of(n).contains("could not sense"));
    assert!(failed.is_none(), "{failed:?}");
    client.shutdown();
}

/// Starts the Repair of the missing `mut` and waits for a verified result;
/// returns the repair id.
fn verified_repair(client: &mut Client) -> String {
    client.open(LIB);
    let diagnostics = client.wait_for_diagnostics(0, LIB, true);
    let diagnostic = diagnostics
        .iter()
        .find(|d| d["code"] == "E0384")
        .unwrap_or_else(|| panic!("no E0384 among {diagnostics:#?}"))
        .clone();
    client.verified_repair(LIB, &diagnostic)
}

#[test]
fn a_verified_repair_is_applied_once_by_a_client_without_document_changes() {
    let dir = broken_crate();
    let capabilities = neovim_capabilities();
    assert!(
        capabilities["workspace"]["workspaceEdit"]
            .get("documentChanges")
            .is_none()
    );
    let (mut client, _) = Client::start(dir.path(), capabilities, None);
    let repair_id = verified_repair(&mut client);

    // Both Apply commands are on the wire before the client sees the first
    // edit, as with a double click.
    let requests_before = client.server_requests.len();
    let from = client.notifications.len();
    let apply =
        json!({ "command": "trellis.repair.apply", "arguments": [{ "repair_id": repair_id }] });
    client.send_request("workspace/executeCommand", apply.clone());
    client.send_request("workspace/executeCommand", apply);
    client.wait_for(from, REQUEST_TIMEOUT, "the promotion", |n| {
        n["method"] == "trellis/searchStatus"
            && n["params"]["status"] == "applied"
            && n["params"]["repair_id"] == repair_id.as_str()
    });
    client.pump(Duration::from_secs(2));

    let edits = client.server_requests[requests_before..]
        .iter()
        .filter(|r| r["method"] == "workspace/applyEdit")
        .count();
    assert_eq!(edits, 1, "the edit was sent {edits} times");
    let refused = client.notifications[from..]
        .iter()
        .find(|n| n["method"] == "window/showMessage" && message_of(n).contains("already applied"))
        .unwrap_or_else(|| panic!("no refusal among {:#?}", &client.notifications[from..]));
    assert!(message_of(refused).contains(&repair_id), "{refused}");
    let text = &client.docs[&client.uri(LIB)].text;
    assert_eq!(text.matches("let mut n = 0;").count(), 1, "{text}");
    assert!(!text.contains("mut mut"), "{text}");
    client.shutdown();
}

const PROGRESS_CREATE: &str = "window/workDoneProgress/create";

/// A client that advertises `window.workDoneProgress` but never answers
/// the server's request to create a progress token; it has opened the
/// broken file and started the Repair of its missing `mut`, and the
/// server has asked for the token. Returns the index of the first
/// notification after the start.
fn repair_with_progress_never_created(client: &mut Client) -> usize {
    client.never_answers.push(PROGRESS_CREATE);
    client.open(LIB);
    let diagnostics = client.wait_for_diagnostics(0, LIB, true);
    let diagnostic = diagnostics
        .iter()
        .find(|d| d["code"] == "E0384")
        .unwrap_or_else(|| panic!("no E0384 among {diagnostics:#?}"));
    let requests = client.server_requests.len();
    let from = client.start_repair_of(LIB, diagnostic);
    client.wait_for_request(requests, REQUEST_TIMEOUT, PROGRESS_CREATE);
    from
}

/// The `$/progress` notifications received at or after `from`.
fn progress_after(client: &Client, from: usize) -> Vec<Value> {
    client.notifications[from..]
        .iter()
        .filter(|n| n["method"] == "$/progress")
        .cloned()
        .collect()
}

#[test]
fn a_repair_goes_on_without_progress_when_the_client_never_creates_the_token() {
    let dir = broken_crate();
    let (mut client, _) = Client::start(dir.path(), vscode_capabilities(), None);
    let from = repair_with_progress_never_created(&mut client);
    let ended = client.search_end(from);
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
    // A token the client never confirmed is never used.
    assert_eq!(progress_after(&client, from), Vec::<Value>::new());
    let diagnostics = client.wait_for_diagnostics(0, LIB, true);
    let diagnostic = diagnostics.iter().find(|d| d["code"] == "E0384").unwrap();
    let actions = client.actions_on(LIB, diagnostic);
    assert!(
        support::repair_loop::titled(&actions, "Apply verified repair").is_some(),
        "{actions:#?}"
    );
    client.shutdown();
}

#[test]
fn a_repair_waiting_for_a_progress_token_is_cancelled_at_once() {
    let dir = broken_crate();
    let (mut client, _) = Client::start(dir.path(), vscode_capabilities(), None);
    let from = repair_with_progress_never_created(&mut client);
    client.cancel_repairs(LIB);
    let ended = client.wait_for(from, REQUEST_TIMEOUT, "the cancelled search to end", |n| {
        n["method"] == "trellis/searchStatus" && n["params"]["status"] != "running"
    });
    assert_eq!(ended["params"]["status"], "cancelled", "{ended}");
    assert_eq!(progress_after(&client, from), Vec::<Value>::new());
    client.shutdown();
}
