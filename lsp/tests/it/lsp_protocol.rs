//! Protocol behaviour of `trellis lsp` that needs no sensing: the handshake,
//! position-encoding negotiation, error codes, and a clean exit.

use crate::support;

use serde_json::{Value, json};
use support::{
    CARGO_TOML, Client, REQUEST_TIMEOUT, helix_capabilities, vscode_capabilities, write_crate,
};

fn clean_crate() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_crate(
        dir.path(),
        &[
            ("Cargo.toml", CARGO_TOML),
            ("src/lib.rs", "pub fn one() -> u8 {\n    1\n}\n"),
        ],
    );
    dir
}

#[test]
fn every_response_carries_a_result_and_unknown_methods_are_not_found() {
    let dir = clean_crate();
    let (mut client, init) = Client::start(dir.path(), vscode_capabilities(), None);
    assert!(init.get("result").is_some(), "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "trellis");

    // A code action with nothing to offer answers `"result": null`.
    let uri = client.uri("src/lib.rs");
    let empty = client.request_raw(
        "textDocument/codeAction",
        json!({
            "textDocument": { "uri": uri },
            "range": { "start": { "line": 0, "character": 0 }, "end": { "line": 0, "character": 0 } },
            "context": { "diagnostics": [] },
        }),
    );
    assert_eq!(empty.get("result"), Some(&Value::Null), "{empty}");

    // Commands answer at once with a null result.
    let cancel = client.request_raw(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.cancel", "arguments": [] }),
    );
    assert_eq!(cancel.get("result"), Some(&Value::Null), "{cancel}");

    let bad = client.request_raw(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.start", "arguments": [{ "clutser": "c" }] }),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cluster"),
        "{bad}"
    );

    let unknown = client.request_raw("trellis/noSuchThing", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    let no_repair = client.request_raw(
        "trellis/branchFile",
        json!({ "repair_id": "r-missing", "path": "src/lib.rs" }),
    );
    assert_eq!(no_repair["error"]["code"], -32602, "{no_repair}");
    assert!(
        no_repair["error"]["message"]
            .as_str()
            .unwrap()
            .contains("r-missing")
    );

    for response in &client.responses {
        assert!(
            response.get("result").is_some() || response.get("error").is_some(),
            "a response with neither result nor error: {response}"
        );
    }
    client.shutdown();
}

#[test]
fn position_encoding_is_utf8_only_when_the_client_offers_it() {
    let dir = clean_crate();
    for (capabilities, expected) in [
        (helix_capabilities(), "utf-8"),
        (vscode_capabilities(), "utf-16"),
        (json!({}), "utf-16"),
    ] {
        let (client, init) = Client::start(dir.path(), capabilities, None);
        assert_eq!(
            init["result"]["capabilities"]["positionEncoding"], expected,
            "{init}"
        );
        client.shutdown();
    }
}

#[test]
fn initialize_announces_incremental_sync_resolve_and_every_command() {
    let dir = clean_crate();
    let (client, init) = Client::start(dir.path(), vscode_capabilities(), None);
    let caps = &init["result"]["capabilities"];
    assert_eq!(caps["textDocumentSync"]["change"], 2);
    assert_eq!(caps["textDocumentSync"]["openClose"], true);
    assert_eq!(caps["codeActionProvider"]["resolveProvider"], true);
    assert_eq!(
        caps["executeCommandProvider"]["commands"],
        json!([
            "trellis.repair.start",
            "trellis.repair.cancel",
            "trellis.repair.preview",
            "trellis.repair.apply"
        ])
    );
    client.shutdown();
}

#[test]
fn a_configuration_error_fails_initialize_and_names_the_key() {
    let dir = clean_crate();
    let options = json!({ "exploration": { "max_branches": 7 } });
    let (mut client, init) = Client::start(dir.path(), vscode_capabilities(), Some(options));
    let message = init["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("initialize should fail: {init}"));
    assert!(message.contains("exploration.max_branches"), "{message}");
    // The notification and the error response travel on separate queues
    // inside the server, so either may arrive first.
    let shown = client.wait_for(0, REQUEST_TIMEOUT, "showMessage", |n| {
        n["method"] == "window/showMessage"
    });
    assert_eq!(shown["params"]["type"], 1);
    assert!(
        shown["params"]["message"]
            .as_str()
            .unwrap()
            .contains("exploration.max_branches"),
        "{shown}"
    );
}
