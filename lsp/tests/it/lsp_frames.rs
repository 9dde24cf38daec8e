//! Malformed input on `trellis lsp`'s stdin, injected byte for byte: every
//! bad frame is answered with a JSON-RPC error (`id: null`) and the server
//! keeps serving; an oversized message is refused without being buffered.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{CARGO_TOML, Client, REQUEST_TIMEOUT, vscode_capabilities, write_crate};

fn started() -> (tempfile::TempDir, Client) {
    let dir = tempfile::tempdir().unwrap();
    write_crate(
        dir.path(),
        &[
            ("Cargo.toml", CARGO_TOML),
            ("src/lib.rs", "pub fn one() -> u8 {\n    1\n}\n"),
        ],
    );
    let (client, init) = Client::start(dir.path(), vscode_capabilities(), None);
    assert!(init.get("result").is_some(), "{init}");
    (dir, client)
}

/// Reads until the server has answered with a null-id error after index
/// `from` of the responses; returns its code.
fn null_id_error(client: &mut Client, from: usize, what: &str) -> i64 {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    loop {
        if let Some(error) = client.responses[from..]
            .iter()
            .find(|r| r["id"] == Value::Null && r.get("error").is_some())
        {
            return error["error"]["code"].as_i64().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "no error answered {what}; responses: {:#?}",
            client.responses
        );
        client.pump(Duration::from_millis(50));
    }
}

/// A request that must still be answered: a code action with nothing to offer.
fn still_serves(client: &mut Client) {
    let uri = client.uri("src/lib.rs");
    let response = client.request_raw(
        "textDocument/codeAction",
        json!({
            "textDocument": { "uri": uri },
            "range": { "start": { "line": 0, "character": 0 }, "end": { "line": 0, "character": 0 } },
            "context": { "diagnostics": [] },
        }),
    );
    assert_eq!(response.get("result"), Some(&Value::Null), "{response}");
}

/// Bytes that look like nothing: a fixed pseudo-random sequence.
fn noise(len: usize) -> Vec<u8> {
    let mut state: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect()
}

#[test]
fn each_malformed_frame_is_answered_and_the_server_keeps_serving() {
    let (_dir, mut client) = started();
    let body = |text: &str| format!("Content-Length: {}\r\n\r\n{text}", text.len()).into_bytes();
    let cases: Vec<(&str, Vec<u8>, i64)> = vec![
        (
            "a body that is not JSON",
            body("{\"jsonrpc\": \"2.0\", oops"),
            -32700,
        ),
        (
            "a non-numeric Content-Length",
            b"Content-Length: abc\r\n\r\n{}".to_vec(),
            -32700,
        ),
        ("an empty batch", body("[]"), -32600),
        (
            "JSON that is no JSON-RPC message",
            body("{\"id\": 3}"),
            -32600,
        ),
        ("random bytes", noise(4096), -32700),
    ];
    for (what, bytes, code) in cases {
        let from = client.responses.len();
        client.send_bytes(&bytes);
        assert_eq!(null_id_error(&mut client, from, what), code, "{what}");
        still_serves(&mut client);
        assert_eq!(client.exit_status(), None, "the server exited after {what}");
    }
    client.shutdown();
}

/// The server's resident memory in KiB (`VmRSS` of `/proc/PID/status`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

#[test]
fn a_huge_content_length_is_refused_without_buffering_its_body() {
    let (_dir, mut client) = started();
    still_serves(&mut client);
    let before = rss_kib(client.pid());

    // Three times the 64 MiB cap, all of it sent.
    let size: usize = 192 << 20;
    let from = client.responses.len();
    client.send_bytes(format!("Content-Length: {size}\r\n\r\n").as_bytes());
    // Refused as soon as the header is read, before any of the body arrived.
    assert_eq!(
        null_id_error(&mut client, from, "the oversized header"),
        -32600
    );
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..(size / chunk.len()) {
        client.send_bytes(&chunk);
    }
    still_serves(&mut client);
    let after = rss_kib(client.pid());
    assert!(
        after < before + 32 * 1024,
        "resident memory grew from {before} KiB to {after} KiB while a refused body was discarded"
    );
    client.shutdown();
}

/// The responses after index `from` answering `id`.
fn answers_to(client: &Client, from: usize, id: i64) -> Vec<Value> {
    client.responses[from..]
        .iter()
        .filter(|r| r["id"] == json!(id))
        .cloned()
        .collect()
}

#[test]
fn a_request_whose_method_starts_with_dollar_is_answered_method_not_found() {
    let (_dir, mut client) = started();
    let frame = |text: &str| format!("Content-Length: {}\r\n\r\n{text}", text.len()).into_bytes();
    let from = client.responses.len();
    // A `$/` notification may be ignored (LSP 3.17, "$ Notifications and
    // Requests"); a `$/` request must still be answered.
    client.send_bytes(&frame(
        r#"{"jsonrpc":"2.0","method":"$/trellis/unknown","params":{}}"#,
    ));
    client.send_bytes(&frame(
        r#"{"jsonrpc":"2.0","id":9001,"method":"$/trellis/unknown","params":{}}"#,
    ));
    client.send_bytes(&frame(
        r#"{"jsonrpc":"2.0","id":9002,"method":"$/unknown"}"#,
    ));
    // Served in order after them: once this is answered, so are they.
    still_serves(&mut client);
    client.pump(Duration::from_millis(200));
    for id in [9001, 9002] {
        let answers = answers_to(&client, from, id);
        assert_eq!(
            answers.len(),
            1,
            "request {id} is answered once: {answers:?}"
        );
        assert_eq!(answers[0]["error"]["code"], -32601, "{answers:?}");
    }
    assert!(
        client.responses[from..]
            .iter()
            .all(|r| r.get("error").is_none() || r["id"] != Value::Null),
        "the notification is not answered: {:?}",
        &client.responses[from..]
    );
    client.shutdown();
}
