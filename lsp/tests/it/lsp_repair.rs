//! The editor's repair loop end to end, through the built `trellis lsp`
//! binary and real cargo: diagnostics → Repair → verified result → Apply →
//! the file is fixed and its tests pass; and an Apply after a later edit is
//! refused with the file untouched.

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::repair_loop::titled;
use support::{
    Client, Encoding, MISSING_MUT_LIB, REQUEST_TIMEOUT, broken_crate, cargo_test_passes,
    helix_capabilities, ledger_replay, neovim_capabilities, offset_of, vscode_capabilities,
};

const LIB: &str = "src/lib.rs";

fn title(action: &Value) -> &str {
    action["title"].as_str().unwrap_or_default()
}

fn assert_fixed(root: &Path) {
    let text = std::fs::read_to_string(root.join(LIB)).unwrap();
    assert!(text.contains("let mut n = 0;"), "{text}");
    assert!(
        cargo_test_passes(root),
        "cargo test fails in the repaired crate"
    );
}

#[test]
fn vscode_profile_repairs_previews_and_applies_through_resolve() {
    let dir = broken_crate();
    let (mut client, _) = Client::start(dir.path(), vscode_capabilities(), None);
    let diagnostic = client.open_for_diagnostic(LIB, "E0384");
    let requests_before = client.server_requests.len();
    let repair_id = client.verified_repair(LIB, &diagnostic);

    // Progress was created (the client advertises it) and ran begin → end.
    let create = client.server_requests[requests_before..]
        .iter()
        .find(|r| r["method"] == "window/workDoneProgress/create")
        .expect("a progress token was created");
    let token = create["params"]["token"].clone();
    let kinds: Vec<&str> = client
        .notifications
        .iter()
        .filter(|n| n["method"] == "$/progress" && n["params"]["token"] == token)
        .map(|n| n["params"]["value"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"begin"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"end"), "{kinds:?}");

    // The branch's version of the file, for the client's diff view.
    let branch = client.request(
        "trellis/branchFile",
        json!({ "repair_id": repair_id, "path": LIB }),
    );
    assert_eq!(branch["change"], "modify");
    assert!(branch["text"].as_str().unwrap().contains("let mut n = 0;"));

    let actions = client.actions_on(LIB, &diagnostic);
    let preview = titled(&actions, "Preview verified repair: ")
        .unwrap_or_else(|| panic!("no Preview among {actions:#?}"));
    let requests_before = client.server_requests.len();
    client.request(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.preview", "arguments": preview["command"]["arguments"] }),
    );
    let shown = client.wait_for_request(requests_before, REQUEST_TIMEOUT, "window/showDocument");
    let shown_uri = shown["params"]["uri"].as_str().unwrap();
    assert!(
        shown_uri.ends_with(&format!(".trellis/previews/{repair_id}.diff")),
        "{shown_uri}"
    );
    let diff = std::fs::read_to_string(
        dir.path()
            .join(".trellis/previews")
            .join(format!("{repair_id}.diff")),
    )
    .unwrap();
    assert!(
        diff.contains("--- a/src/lib.rs") && diff.contains("+    let mut n = 0;"),
        "{diff}"
    );

    // Apply is resolved lazily: the listed action carries data, not the edit.
    let apply = titled(&actions, "Apply verified repair: ")
        .unwrap_or_else(|| panic!("no Apply among {actions:#?}"));
    assert!(apply.get("edit").is_none(), "{apply}");
    let resolved = client.request("codeAction/resolve", apply.clone());
    let edit = &resolved["edit"];
    let doc_edit = &edit["documentChanges"][0];
    assert_eq!(doc_edit["textDocument"]["uri"], client.uri(LIB).as_str());
    assert_eq!(doc_edit["textDocument"]["version"], 1);
    let annotation = doc_edit["edits"][0]["annotationId"].as_str().unwrap();
    assert_eq!(
        edit["changeAnnotations"][annotation]["needsConfirmation"],
        true
    );

    let from = client.notifications.len();
    client.apply_workspace_edit(edit);
    client.save_until_promoted(LIB, &repair_id);
    assert_fixed(dir.path());
    // The save re-senses; the fixed file's diagnostics are cleared.
    client.wait_for_diagnostics(from, LIB, false);
    let ledger = ledger_replay(dir.path());
    let promotion = ledger["promotions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["repair_id"] == repair_id.as_str())
        .unwrap_or_else(|| panic!("the promotion is not ledgered: {ledger:#}"));
    assert_eq!(promotion["files"], json!([LIB]), "{promotion}");

    // Once applied, the repair is no longer offered.
    let after = client.actions_on(LIB, &diagnostic);
    assert!(
        titled(&after, "Apply verified repair: ").is_none(),
        "{after:#?}"
    );
    client.shutdown();
}

#[test]
fn helix_profile_gets_inline_edits_in_utf8_and_applies_through_the_command() {
    let dir = broken_crate();
    let (mut client, _) = Client::start(dir.path(), helix_capabilities(), None);
    assert_eq!(client.encoding, Encoding::Utf8);
    let diagnostic = client.open_for_diagnostic(LIB, "E0384");
    let first = client.verified_repair(LIB, &diagnostic);
    // A second search of the same cluster supersedes the first: one Apply.
    let repair_id = client.verified_repair(LIB, &diagnostic);
    assert_ne!(first, repair_id);

    // Helix applies code-action edits itself: the edit is inline, and
    // without change-annotation support it carries no annotation.
    let actions = client.actions_on(LIB, &diagnostic);
    let applies: Vec<&Value> = actions
        .iter()
        .filter(|a| title(a).starts_with("Apply verified repair: "))
        .collect();
    assert_eq!(applies.len(), 1, "{actions:#?}");
    let apply = applies[0];
    let previews: Vec<&Value> = actions
        .iter()
        .filter(|a| title(a).starts_with("Preview verified repair: "))
        .collect();
    assert_eq!(previews.len(), 1, "{actions:#?}");
    assert_eq!(
        previews[0]["command"]["arguments"][0]["repair_id"],
        repair_id.as_str()
    );
    let doc_edit = &apply["edit"]["documentChanges"][0];
    assert_eq!(doc_edit["textDocument"]["version"], 1);
    assert!(
        doc_edit["edits"][0].get("annotationId").is_none(),
        "{apply}"
    );
    assert!(apply["edit"].get("changeAnnotations").is_none(), "{apply}");

    // Without showDocument, Preview names the file in a message.
    let from = client.notifications.len();
    client.request(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.preview", "arguments": [{ "repair_id": repair_id }] }),
    );
    let message = client.wait_for(from, REQUEST_TIMEOUT, "the preview message", |n| {
        n["method"] == "window/showMessage"
            && n["params"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains(".trellis/previews/")
    });
    assert!(
        message["params"]["message"]
            .as_str()
            .unwrap()
            .contains(&repair_id)
    );

    // The command path: the server checks the view, then sends applyEdit.
    let sent = client.apply_by_command(&repair_id);
    assert!(sent["params"]["edit"].get("changeAnnotations").is_none());
    client.save_until_promoted(LIB, &repair_id);
    assert_fixed(dir.path());
    client.shutdown();
}

#[test]
fn an_apply_after_a_later_edit_is_refused_and_the_file_is_untouched() {
    let dir = broken_crate();
    let (mut client, _) = Client::start(dir.path(), vscode_capabilities(), None);
    let diagnostic = client.open_for_diagnostic(LIB, "E0384");
    let repair_id = client.verified_repair(LIB, &diagnostic);

    // The user types after the repair started (a comment at the end of line 0).
    let end_of_line = json!({ "line": 0, "character": 999 });
    client.edit(
        LIB,
        json!({ "start": end_of_line, "end": end_of_line }),
        " (edited)",
    );
    let buffer = client.docs[&client.uri(LIB)].text.clone();

    let actions = client.actions_on(LIB, &diagnostic);
    assert!(
        titled(&actions, "Apply verified repair: ").is_none(),
        "Apply is still offered: {actions:#?}"
    );

    let requests_before = client.server_requests.len();
    let from = client.notifications.len();
    client.request(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.apply", "arguments": [{ "repair_id": repair_id }] }),
    );
    let refusal = client.wait_for(from, REQUEST_TIMEOUT, "the refusal", |n| {
        n["method"] == "window/showMessage" && n["params"]["type"] == 1
    });
    let text = refusal["params"]["message"].as_str().unwrap();
    assert!(
        text.contains("refused") && text.contains(&repair_id),
        "{text}"
    );
    client.pump(std::time::Duration::from_millis(500));
    assert!(
        !client.server_requests[requests_before..]
            .iter()
            .any(|r| r["method"] == "workspace/applyEdit"),
        "an edit was sent despite the refusal"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join(LIB)).unwrap(),
        MISSING_MUT_LIB
    );
    assert_eq!(
        client.docs[&client.uri(LIB)].text,
        buffer,
        "the user's edit is kept"
    );
    let ledger = ledger_replay(dir.path());
    let refusals = ledger["refusals"].as_array().unwrap();
    assert!(
        refusals
            .iter()
            .any(|r| r["repair_id"] == repair_id.as_str()),
        "the stale refusal is not ledgered: {ledger:#}"
    );
    assert!(
        ledger["promotions"].as_array().unwrap().is_empty(),
        "{ledger:#}"
    );
    client.shutdown();
}

#[test]
fn diagnostic_positions_follow_the_negotiated_encoding() {
    let dir = broken_crate();
    let mut starts = Vec::new();
    for capabilities in [helix_capabilities(), vscode_capabilities()] {
        let (mut client, _) = Client::start(dir.path(), capabilities, None);
        let diagnostic = client.open_for_diagnostic(LIB, "E0384");
        // The site follows `𝕏é中` on its line: the columns differ by encoding,
        // yet each lands on the same bytes.
        let at = offset_of(
            MISSING_MUT_LIB,
            &diagnostic["range"]["start"],
            client.encoding,
        );
        assert!(
            MISSING_MUT_LIB[at..].starts_with("n += 1"),
            "{:?} at {at}",
            client.encoding
        );
        starts.push(diagnostic["range"]["start"]["character"].as_u64().unwrap());

        // A client that drops `data` still gets Repair, by range.
        let mut bare = diagnostic.clone();
        bare.as_object_mut().unwrap().remove("data");
        let actions = client.code_actions(LIB, &diagnostic["range"], &[bare]);
        assert!(titled(&actions, "Repair: ").is_some(), "{actions:#?}");
        client.shutdown();
    }
    assert_ne!(
        starts[0], starts[1],
        "UTF-8 and UTF-16 columns should differ here"
    );
}

/// Neovim's capabilities, but the client does not name itself: a client
/// that does gets no buttons (`lsp_editors.rs`), since Neovim's default
/// `showMessageRequest` handler is modal.
#[test]
fn an_unnamed_client_with_message_buttons_applies_from_them_without_annotations() {
    let dir = broken_crate();
    let (mut client, _) = Client::start(dir.path(), neovim_capabilities(), None);
    client.message_choice = Some("Apply".into());
    let diagnostic = client.open_for_diagnostic(LIB, "E0384");
    let requests_before = client.server_requests.len();
    let from = client.notifications.len();
    let repair_id = client.verified_repair(LIB, &diagnostic);

    // The end of the search offers Preview and Apply as buttons; the user
    // clicks Apply and the server sends the edit, checked against the view.
    let told = client.wait_for(from, REQUEST_TIMEOUT, "the end message", |n| {
        n["method"] == "window/showMessage"
            && n["params"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("verified repair")
    });
    assert!(
        told["params"]["message"]
            .as_str()
            .unwrap()
            .contains(&repair_id),
        "{told}"
    );
    let asked = client.wait_for_request(
        requests_before,
        REQUEST_TIMEOUT,
        "window/showMessageRequest",
    );
    let buttons: Vec<&str> = asked["params"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    assert_eq!(buttons, ["Preview", "Apply"]);
    let sent = client.wait_for_request(requests_before, REQUEST_TIMEOUT, "workspace/applyEdit");
    // Without `documentChanges` support the edit is a plain `changes` map.
    assert!(sent["params"]["edit"]["changes"].is_object(), "{sent}");
    assert!(
        sent["params"]["edit"].get("changeAnnotations").is_none(),
        "{sent}"
    );
    client.save_until_promoted(LIB, &repair_id);
    assert_fixed(dir.path());
    client.shutdown();
}

#[test]
fn a_running_repair_is_cancelled_through_its_progress_token() {
    let dir = broken_crate();
    let (mut client, _) = Client::start(dir.path(), vscode_capabilities(), None);
    let diagnostic = client.open_for_diagnostic(LIB, "E0384");
    let requests_before = client.server_requests.len();
    let from = client.start_repair_of(LIB, &diagnostic);
    let create = client.wait_for_request(
        requests_before,
        REQUEST_TIMEOUT,
        "window/workDoneProgress/create",
    );

    // A Cancel action replaces Repair while the search runs.
    let actions = client.actions_on(LIB, &diagnostic);
    assert!(
        titled(&actions, "Cancel repair: ").is_some(),
        "{actions:#?}"
    );
    assert!(titled(&actions, "Repair: ").is_none(), "{actions:#?}");

    client.notify(
        "window/workDoneProgress/cancel",
        json!({ "token": create["params"]["token"] }),
    );
    let ended = client.search_end(from);
    assert_eq!(ended["params"]["status"], "cancelled", "{ended}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join(LIB)).unwrap(),
        MISSING_MUT_LIB
    );
    client.shutdown();
}

#[test]
fn a_minimal_client_gets_commands_and_no_progress_tokens() {
    let dir = broken_crate();
    // No code-action literals, no progress, no documentChanges.
    let (mut client, _) = Client::start(dir.path(), json!({}), None);
    let diagnostic = client.open_for_diagnostic(LIB, "E0384");
    let actions = client.actions_on(LIB, &diagnostic);
    let repair =
        titled(&actions, "Repair: ").unwrap_or_else(|| panic!("no Repair among {actions:#?}"));
    // A bare Command: its `command` field is the command name itself.
    assert_eq!(repair["command"], "trellis.repair.start", "{repair}");

    let from = client.notifications.len();
    client.request(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.start", "arguments": repair["arguments"] }),
    );
    let ended = client.search_end(from);
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
    let repair_id = ended["params"]["repair_id"].as_str().unwrap().to_owned();
    assert!(
        !client
            .server_requests
            .iter()
            .any(|r| r["method"] == "window/workDoneProgress/create"),
        "a progress token was created for a client that did not advertise progress"
    );
    assert!(
        !client
            .notifications
            .iter()
            .any(|n| n["method"] == "$/progress")
    );

    let actions = client.actions_on(LIB, &diagnostic);
    let apply = titled(&actions, "Apply verified repair: ")
        .unwrap_or_else(|| panic!("no Apply among {actions:#?}"));
    assert_eq!(apply["command"], "trellis.repair.apply", "{apply}");
    let requests_before = client.server_requests.len();
    client.request(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.apply", "arguments": apply["arguments"] }),
    );
    let sent = client.wait_for_request(requests_before, REQUEST_TIMEOUT, "workspace/applyEdit");
    assert!(sent["params"]["edit"]["changes"].is_object(), "{sent}");
    client.save_until_promoted(LIB, &repair_id);
    assert_fixed(dir.path());
    client.shutdown();
}

#[test]
fn unsaved_buffers_are_sensed_and_fixed_files_get_an_empty_diagnostic_list() {
    let dir = broken_crate();
    let (mut client, _) = Client::start(dir.path(), vscode_capabilities(), None);
    let diagnostic = client.open_for_diagnostic(LIB, "E0384");

    // Fix the buffer without saving, then open another file: sensing runs
    // on the view (disk overlaid with the buffer), not on the disk alone.
    let at = diagnostic["range"]["start"]["line"].as_u64().unwrap();
    let line = MISSING_MUT_LIB.lines().nth(at as usize).unwrap();
    let col = line.find("let n").unwrap() + "let ".len();
    assert!(line[..col].is_ascii());
    let here = json!({ "line": at, "character": col });
    client.edit(LIB, json!({ "start": here, "end": here }), "mut ");
    let from = client.notifications.len();
    client.open("Cargo.toml");
    client.wait_for_diagnostics(from, LIB, false);
    assert_eq!(
        std::fs::read_to_string(dir.path().join(LIB)).unwrap(),
        MISSING_MUT_LIB,
        "nothing was written to disk"
    );
    client.shutdown();
}
