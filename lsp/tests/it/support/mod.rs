//! A small, real LSP client for end-to-end tests of `trellis lsp`.
//!
//! It spawns the built binary, speaks JSON-RPC with `Content-Length`
//! framing over its stdio, answers the server's own requests the way an
//! editor does (`workspace/applyEdit` really edits the client's documents
//! and is followed by `didChange`, like an editor), and keeps every message
//! it received so tests can assert on them afterwards.
//!
//! Position handling here is deliberately independent of the server's
//! (`encoding.rs`): a test that converts the server's positions with this
//! code and lands on the right bytes checks both.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trellis_test_support::lsp_framing as framing;

pub mod flaky;
pub mod kill;
pub mod model;
pub mod repair_loop;
pub mod workspace;

/// How long a repair may take on a busy two-core machine.
pub const REPAIR_TIMEOUT: Duration = Duration::from_secs(900);
/// How long sensing a tiny crate may take (cold `cargo check` and `cargo test`).
pub const SENSING_TIMEOUT: Duration = Duration::from_secs(600);
/// How long an ordinary request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
}

/// A client's open document.
#[derive(Clone, Debug)]
pub struct Doc {
    pub text: String,
    pub version: i32,
}

pub struct Client {
    child: Child,
    stdin: ChildStdin,
    incoming: Receiver<Value>,
    next_id: i64,
    pub root: PathBuf,
    pub encoding: Encoding,
    /// Open documents by URI.
    pub docs: HashMap<String, Doc>,
    /// Every notification from the server, in arrival order.
    pub notifications: Vec<Value>,
    /// Every request the server sent us, in arrival order.
    pub server_requests: Vec<Value>,
    /// Every response the server sent, in arrival order (raw).
    pub responses: Vec<Value>,
    /// Whether to apply `workspace/applyEdit` (an editor that refuses says `applied: false`).
    pub accept_edits: bool,
    /// The button the user clicks when the server sends `window/showMessageRequest`.
    pub message_choice: Option<String>,
    /// Server requests this client receives but never answers (a hung client).
    pub never_answers: Vec<&'static str>,
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `file://` URI of an absolute path (percent-encoding what LSP clients do).
pub fn file_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for byte in path.to_str().expect("test paths are UTF-8").bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

impl Client {
    /// Starts `trellis lsp` for the workspace at `root` and performs the
    /// handshake with `capabilities`. Returns the client and the
    /// `initialize` response (which may be an error response).
    pub fn start(root: &Path, capabilities: Value, options: Option<Value>) -> (Client, Value) {
        Client::start_as(root, None, capabilities, options)
    }

    /// [`Client::start`] for a client that names itself (`clientInfo.name`).
    pub fn start_as(
        root: &Path,
        name: Option<&str>,
        capabilities: Value,
        options: Option<Value>,
    ) -> (Client, Value) {
        Client::start_with_env(root, name, &[], capabilities, options)
    }

    /// [`Client::start_as`] with extra environment for the server process
    /// (a private cache directory, a failpoint).
    pub fn start_with_env(
        root: &Path,
        name: Option<&str>,
        env: &[(&str, &std::ffi::OsStr)],
        capabilities: Value,
        options: Option<Value>,
    ) -> (Client, Value) {
        let mut command = Client::command();
        command.envs(env.iter().copied());
        Client::start_with(root, command, name, capabilities, options)
    }

    /// `trellis lsp`, for a test that adds flags or environment before
    /// [`Client::start_with`].
    pub fn command() -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_trellis"));
        command.arg("lsp");
        command
    }

    /// [`Client::start_as`] with the server launched by `command`.
    pub fn start_with(
        root: &Path,
        mut command: Command,
        name: Option<&str>,
        capabilities: Value,
        options: Option<Value>,
    ) -> (Client, Value) {
        let mut child = command
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn trellis lsp");
        let stdin = child.stdin.take().unwrap();
        let incoming = framing::spawn_reader(child.stdout.take().unwrap());
        let encoding = match capabilities["general"]["positionEncodings"]
            .as_array()
            .is_some_and(|offers| offers.iter().any(|o| o == "utf-8"))
        {
            true => Encoding::Utf8,
            false => Encoding::Utf16,
        };
        let mut client = Client {
            child,
            stdin,
            incoming,
            next_id: 1,
            root: root.to_path_buf(),
            encoding,
            docs: HashMap::new(),
            notifications: Vec::new(),
            server_requests: Vec::new(),
            responses: Vec::new(),
            accept_edits: true,
            message_choice: None,
            never_answers: Vec::new(),
        };
        let uri = file_uri(root);
        let mut params = json!({
            "processId": std::process::id(),
            "rootUri": uri,
            "workspaceFolders": [{ "uri": uri, "name": "fixture" }],
            "capabilities": capabilities,
        });
        if let Some(options) = options {
            params["initializationOptions"] = options;
        }
        if let Some(name) = name {
            params["clientInfo"] = json!({ "name": name });
        }
        let response = client.request_raw("initialize", params);
        if let Some(negotiated) = response["result"]["capabilities"]["positionEncoding"].as_str() {
            client.encoding = if negotiated == "utf-8" {
                Encoding::Utf8
            } else {
                Encoding::Utf16
            };
            client.notify("initialized", json!({}));
        }
        (client, response)
    }

    pub fn uri(&self, rel: &str) -> String {
        file_uri(&self.root.join(rel))
    }

    fn send(&mut self, message: &Value) {
        framing::write_message(&mut self.stdin, message).unwrap();
    }

    /// Writes raw bytes to the server's stdin (malformed frames included).
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request without waiting for its response; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How the server process ended, once it has.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Sends a request and returns the whole response message.
    pub fn request_raw(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        loop {
            let message = self
                .next_message(deadline)
                .unwrap_or_else(|| panic!("no response to {method} within {REQUEST_TIMEOUT:?}"));
            if message.get("method").is_none() && message["id"] == json!(id) {
                return message;
            }
        }
    }

    /// Sends a request and returns its `result`, failing on an error response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.request_raw(method, params);
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    /// Reads one message, handling it; `None` when the deadline passed.
    fn next_message(&mut self, deadline: Instant) -> Option<Value> {
        let wait = deadline.saturating_duration_since(Instant::now());
        let message = match self.incoming.recv_timeout(wait) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => return None,
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed its stdout"),
        };
        match (message.get("method"), message.get("id")) {
            (Some(method), Some(_)) => {
                self.server_requests.push(message.clone());
                if !self
                    .never_answers
                    .contains(&method.as_str().unwrap_or_default())
                {
                    let result = self.answer(&message);
                    self.send(&json!({ "jsonrpc": "2.0", "id": message["id"], "result": result }));
                }
            }
            (Some(_), None) => self.notifications.push(message.clone()),
            (None, _) => self.responses.push(message.clone()),
        }
        Some(message)
    }

    /// Answers a server→client request as an editor would.
    fn answer(&mut self, request: &Value) -> Value {
        match request["method"].as_str().unwrap() {
            "workspace/applyEdit" => {
                if !self.accept_edits {
                    return json!({ "applied": false, "failureReason": "refused by the test" });
                }
                self.apply_workspace_edit(&request["params"]["edit"]);
                json!({ "applied": true })
            }
            "window/showDocument" => json!({ "success": true }),
            "window/showMessageRequest" => match &self.message_choice {
                Some(title) => json!({ "title": title }),
                None => Value::Null,
            },
            _ => Value::Null,
        }
    }

    /// Reads messages until a notification satisfying `matches` arrives
    /// (or has already arrived after index `from`); returns it.
    pub fn wait_for(
        &mut self,
        from: usize,
        timeout: Duration,
        what: &str,
        matches: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        let mut seen = from;
        loop {
            if let Some(found) = self.notifications[seen..].iter().find(|n| matches(n)) {
                return found.clone();
            }
            seen = self.notifications.len();
            if self.next_message(deadline).is_none() {
                panic!(
                    "timed out after {timeout:?} waiting for {what}; notifications: {:#?}",
                    self.notifications
                );
            }
        }
    }

    /// Reads messages until the server has sent a request for `method`
    /// (after index `from` of `server_requests`); returns it.
    pub fn wait_for_request(&mut self, from: usize, timeout: Duration, method: &str) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(found) = self.server_requests[from..]
                .iter()
                .find(|r| r["method"] == method)
            {
                return found.clone();
            }
            if self.next_message(deadline).is_none() {
                panic!("timed out after {timeout:?} waiting for the server to send {method}");
            }
        }
    }

    /// Reads whatever arrives during `duration` (answering server requests).
    pub fn pump(&mut self, duration: Duration) {
        let deadline = Instant::now() + duration;
        while self.next_message(deadline).is_some() {}
    }

    /// Reads messages (answering the server's requests) until `done`
    /// holds, for at most [`SENSING_TIMEOUT`].
    pub fn pump_until(&mut self, what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(
                start.elapsed() < SENSING_TIMEOUT,
                "timed out waiting for {what}"
            );
            self.pump(Duration::from_millis(50));
        }
    }

    /// `trellis.repair.cancel` of every running repair, returning once the
    /// server has carried it out: the command only queues the cancel for
    /// the server's actor, which answers requests in order, so a code
    /// action request on `rel` answered after it proves it done.
    pub fn cancel_repairs(&mut self, rel: &str) {
        let cancelled = self.request(
            "workspace/executeCommand",
            json!({ "command": "trellis.repair.cancel", "arguments": [] }),
        );
        assert_eq!(cancelled, Value::Null);
        let origin = json!({ "line": 0, "character": 0 });
        self.code_actions(rel, &json!({ "start": origin, "end": origin }), &[]);
    }

    pub fn open(&mut self, rel: &str) {
        let uri = self.uri(rel);
        let text = std::fs::read_to_string(self.root.join(rel)).unwrap();
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "rust", "version": 1, "text": text } }),
        );
        self.docs.insert(uri, Doc { text, version: 1 });
    }

    /// Replaces `range` (in the negotiated encoding) of an open document and
    /// tells the server incrementally.
    pub fn edit(&mut self, rel: &str, range: Value, new_text: &str) {
        let uri = self.uri(rel);
        let changes =
            self.apply_text_edits(&uri, &[json!({ "range": range, "newText": new_text })]);
        let version = self.docs[&uri].version;
        self.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": changes }),
        );
    }

    /// Writes an open document to disk and says so, like `:w`.
    pub fn save(&mut self, rel: &str) {
        let uri = self.uri(rel);
        std::fs::write(self.root.join(rel), &self.docs[&uri].text).unwrap();
        self.notify(
            "textDocument/didSave",
            json!({ "textDocument": { "uri": uri } }),
        );
    }

    /// Applies a `WorkspaceEdit` the way an editor does: open documents are
    /// edited and the server hears `didChange`; other files are edited on disk.
    pub fn apply_workspace_edit(&mut self, edit: &Value) {
        let mut document_edits: Vec<(String, Option<i64>, Vec<Value>)> = Vec::new();
        if let Some(changes) = edit["documentChanges"].as_array() {
            for change in changes {
                match change["kind"].as_str() {
                    Some("create") => {
                        let path = uri_path(change["uri"].as_str().unwrap());
                        std::fs::write(path, "").unwrap();
                    }
                    Some("delete") => {
                        let path = uri_path(change["uri"].as_str().unwrap());
                        std::fs::remove_file(path).unwrap();
                    }
                    Some(other) => panic!("unexpected resource operation {other}"),
                    None => document_edits.push((
                        change["textDocument"]["uri"].as_str().unwrap().to_owned(),
                        change["textDocument"]["version"].as_i64(),
                        change["edits"].as_array().unwrap().clone(),
                    )),
                }
            }
        } else if let Some(changes) = edit["changes"].as_object() {
            for (uri, edits) in changes {
                document_edits.push((uri.clone(), None, edits.as_array().unwrap().clone()));
            }
        }
        for (uri, version, edits) in document_edits {
            if self.docs.contains_key(&uri) {
                if let Some(version) = version {
                    assert_eq!(
                        i64::from(self.docs[&uri].version),
                        version,
                        "the edit targets another version of {uri}"
                    );
                }
                let changes = self.apply_text_edits(&uri, &edits);
                let version = self.docs[&uri].version;
                self.notify(
                    "textDocument/didChange",
                    json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": changes }),
                );
            } else {
                let path = uri_path(&uri);
                let mut text = std::fs::read_to_string(&path).unwrap_or_default();
                apply_edits_to_text(&mut text, &edits, self.encoding);
                std::fs::write(path, text).unwrap();
            }
        }
    }

    /// Applies LSP text edits (all against the current text) to an open
    /// document, bumps its version, and returns them as incremental change
    /// events (last edit first, so each event's positions stay valid).
    fn apply_text_edits(&mut self, uri: &str, edits: &[Value]) -> Vec<Value> {
        let encoding = self.encoding;
        let doc = self.docs.get_mut(uri).expect("document is open");
        let mut ordered: Vec<&Value> = edits.iter().collect();
        ordered.sort_by_key(|e| {
            let start = &e["range"]["start"];
            std::cmp::Reverse((start["line"].as_u64(), start["character"].as_u64()))
        });
        let mut events = Vec::new();
        for edit in ordered {
            let start = offset_of(&doc.text, &edit["range"]["start"], encoding);
            let end = offset_of(&doc.text, &edit["range"]["end"], encoding);
            let new_text = edit["newText"].as_str().unwrap();
            doc.text.replace_range(start..end, new_text);
            events.push(json!({ "range": edit["range"], "text": new_text }));
        }
        doc.version += 1;
        events
    }

    pub fn shutdown(mut self) {
        let result = self.request_raw("shutdown", Value::Null);
        assert_eq!(result.get("result"), Some(&Value::Null), "{result}");
        self.notify("exit", Value::Null);
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "trellis lsp exited with {status}");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "trellis lsp did not exit after `exit`"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The newest `publishDiagnostics` for `rel` at or after index `from`.
    pub fn wait_for_diagnostics(&mut self, from: usize, rel: &str, non_empty: bool) -> Vec<Value> {
        let uri = self.uri(rel);
        let found = self.wait_for(from, SENSING_TIMEOUT, "diagnostics", |n| {
            n["method"] == "textDocument/publishDiagnostics"
                && n["params"]["uri"] == uri.as_str()
                && n["params"]["diagnostics"].as_array().unwrap().is_empty() != non_empty
        });
        found["params"]["diagnostics"].as_array().unwrap().clone()
    }

    /// Opens `rel` and waits for its Trellis diagnostics; the cluster of
    /// the first one.
    pub fn open_for_cluster(&mut self, rel: &str) -> String {
        self.open(rel);
        let diagnostics = self.wait_for_diagnostics(0, rel, true);
        diagnostics
            .iter()
            .find_map(|d| d["data"]["cluster"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("no Trellis cluster among {diagnostics:#?}"))
    }

    /// Opens `rel`, waits for its Trellis diagnostics and starts the
    /// Repair of the first one's cluster; returns the index of the first
    /// notification after the start.
    pub fn start_repair(&mut self, rel: &str) -> usize {
        let cluster = self.open_for_cluster(rel);
        self.start_repair_of_cluster(&json!(cluster))
    }

    /// Runs `trellis.repair.start` on `cluster`, as the Repair action's
    /// command does; the request returns at once, with `null`. Returns the
    /// index of the first notification after it.
    pub fn start_repair_of_cluster(&mut self, cluster: &Value) -> usize {
        let from = self.notifications.len();
        let answered = self.request(
            "workspace/executeCommand",
            json!({ "command": "trellis.repair.start", "arguments": [{ "cluster": cluster }] }),
        );
        assert_eq!(answered, Value::Null, "the request returns at once");
        from
    }

    /// The `trellis/searchStatus` that ends the search started at `from`.
    pub fn search_end(&mut self, from: usize) -> Value {
        self.wait_for(from, REPAIR_TIMEOUT, "the search to end", |n| {
            n["method"] == "trellis/searchStatus"
                && !["running", "applied"]
                    .contains(&n["params"]["status"].as_str().unwrap_or_default())
        })
    }

    /// The messages of every `$/progress` received at or after `from`.
    pub fn progress_messages(&self, from: usize) -> Vec<String> {
        self.notifications[from..]
            .iter()
            .filter(|n| n["method"] == "$/progress")
            .filter_map(|n| n["params"]["value"]["message"].as_str().map(str::to_owned))
            .collect()
    }

    /// The code actions for `diagnostics` of `rel` at `range`.
    pub fn code_actions(&mut self, rel: &str, range: &Value, diagnostics: &[Value]) -> Vec<Value> {
        let uri = self.uri(rel);
        let result = self.request(
            "textDocument/codeAction",
            json!({
                "textDocument": { "uri": uri },
                "range": range,
                "context": { "diagnostics": diagnostics },
            }),
        );
        result.as_array().cloned().unwrap_or_default()
    }
}

/// The byte offset of an LSP position in `text`, counted independently of
/// the server: lines split at `\n` (a preceding `\r` belongs to the break).
pub fn offset_of(text: &str, position: &Value, encoding: Encoding) -> usize {
    let line = position["line"].as_u64().unwrap() as usize;
    let character = position["character"].as_u64().unwrap() as usize;
    let mut line_start = 0;
    for _ in 0..line {
        match text[line_start..].find('\n') {
            Some(at) => line_start += at + 1,
            None => return text.len(),
        }
    }
    let line_text = text[line_start..].split('\n').next().unwrap();
    let line_text = line_text.strip_suffix('\r').unwrap_or(line_text);
    let mut units = 0;
    for (offset, ch) in line_text.char_indices() {
        if units >= character {
            return line_start + offset;
        }
        units += match encoding {
            Encoding::Utf8 => ch.len_utf8(),
            Encoding::Utf16 => ch.len_utf16(),
        };
    }
    line_start + line_text.len()
}

/// Applies LSP text edits, all against the original `text`.
pub fn apply_edits_to_text(text: &mut String, edits: &[Value], encoding: Encoding) {
    let mut spans: Vec<(usize, usize, &str)> = edits
        .iter()
        .map(|e| {
            (
                offset_of(text, &e["range"]["start"], encoding),
                offset_of(text, &e["range"]["end"], encoding),
                e["newText"].as_str().unwrap(),
            )
        })
        .collect();
    spans.sort_by_key(|(start, _, _)| std::cmp::Reverse(*start));
    for (start, end, new_text) in spans {
        text.replace_range(start..end, new_text);
    }
}

fn uri_path(uri: &str) -> PathBuf {
    let encoded = uri.strip_prefix("file://").expect("a file URI");
    let mut bytes = Vec::new();
    let raw = encoded.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            bytes.push(u8::from_str_radix(&encoded[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            bytes.push(raw[i]);
            i += 1;
        }
    }
    PathBuf::from(String::from_utf8(bytes).unwrap())
}

/// Capabilities as VS Code sends them (the parts that matter here).
pub fn vscode_capabilities() -> Value {
    json!({
        "general": { "positionEncodings": ["utf-16"] },
        "window": {
            "workDoneProgress": true,
            "showDocument": { "support": true },
            "showMessage": { "messageActionItem": { "additionalPropertiesSupport": true } }
        },
        "textDocument": {
            "synchronization": { "didSave": true, "dynamicRegistration": true },
            "codeAction": {
                "codeActionLiteralSupport": { "codeActionKind": { "valueSet": ["", "quickfix", "refactor", "source"] } },
                "dataSupport": true,
                "isPreferredSupport": true,
                "disabledSupport": true,
                "resolveSupport": { "properties": ["edit"] }
            },
            "publishDiagnostics": { "relatedInformation": true, "versionSupport": false, "codeDescriptionSupport": true, "dataSupport": true }
        },
        "workspace": {
            "applyEdit": true,
            "workspaceEdit": {
                "documentChanges": true,
                "resourceOperations": ["create", "rename", "delete"],
                "failureHandling": "textOnlyTransactional",
                "normalizesLineEndings": true,
                "changeAnnotationSupport": { "groupsOnLabel": true }
            },
            "executeCommand": { "dynamicRegistration": true }
        }
    })
}

/// Capabilities as Neovim 0.7–0.11 sends them (the parts that matter
/// here): `showMessageRequest` buttons, no `showDocument`, no change
/// annotations, resolve of `edit`.
pub fn neovim_capabilities() -> Value {
    json!({
        "window": {
            "workDoneProgress": true,
            "showMessage": { "messageActionItem": { "additionalPropertiesSupport": false } },
            "showDocument": { "support": false }
        },
        "textDocument": {
            "codeAction": {
                "dynamicRegistration": false,
                "codeActionLiteralSupport": { "codeActionKind": { "valueSet": ["", "quickfix", "refactor", "source"] } },
                "isPreferredSupport": true,
                "dataSupport": true,
                "resolveSupport": { "properties": ["edit"] }
            },
            "publishDiagnostics": { "relatedInformation": true, "tagSupport": { "valueSet": [1, 2] } }
        },
        "workspace": {
            "applyEdit": true,
            "workspaceEdit": { "resourceOperations": ["rename", "create", "delete"] }
        }
    })
}

/// Capabilities as Helix sends them: UTF-8 offered, no change annotations,
/// no `showDocument`, no resolve of edits.
pub fn helix_capabilities() -> Value {
    json!({
        "general": { "positionEncodings": ["utf-8", "utf-32", "utf-16"] },
        "window": { "workDoneProgress": true },
        "textDocument": {
            "codeAction": {
                "codeActionLiteralSupport": { "codeActionKind": { "valueSet": ["", "quickfix", "refactor", "source"] } },
                "dataSupport": true,
                "isPreferredSupport": true,
                "disabledSupport": true
            },
            "publishDiagnostics": { "versionSupport": true, "tagSupport": { "valueSet": [1, 2] } }
        },
        "workspace": {
            "applyEdit": true,
            "workspaceEdit": {
                "documentChanges": true,
                "resourceOperations": ["create", "rename", "delete"],
                "failureHandling": "abort",
                "normalizesLineEndings": false
            },
            "executeCommand": { "dynamicRegistration": false }
        }
    })
}

/// The lock of a crate `app` depending on `itoa`, as pinned by Trellis's
/// own lock file: cached wherever Trellis was built, so cargo needs no
/// network.
pub const ITOA_LOCK: &str = r#"version = 4

[[package]]
name = "app"
version = "0.1.0"
dependencies = ["itoa"]

[[package]]
name = "itoa"
version = "1.0.19"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "3bd1574e617a9a6c1f8f8181bd7e841e1f20e4277607ef28945765188d6284d4"
"#;

/// Writes a one-crate workspace: `files` are (relative path, contents).
pub fn write_crate(root: &Path, files: &[(&str, &str)]) {
    for (rel, contents) in files {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
}

pub const CARGO_TOML: &str =
    "[package]\nname = \"fixture\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n";

/// A crate whose only error is a missing `mut`, on a line with non-ASCII
/// text before the error site (so UTF-8 and UTF-16 columns differ there).
pub const MISSING_MUT_LIB: &str = r#"//! Counts words. Σ 𝕏 é 中
pub fn count(words: &[&str]) -> usize {
    let n = 0; let _label = "𝕏é中"; for _ in words { n += 1; }
    n
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_three_words() {
        assert_eq!(super::count(&["a", "b", "c"]), 3);
    }
}
"#;

/// A one-crate workspace in a temporary directory whose `src/lib.rs` is
/// [`MISSING_MUT_LIB`].
pub fn broken_crate() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_crate(
        dir.path(),
        &[("Cargo.toml", CARGO_TOML), ("src/lib.rs", MISSING_MUT_LIB)],
    );
    dir
}

/// Runs `cargo test` in `root` with its own target directory; true when it passes.
pub fn cargo_test_passes(root: &Path) -> bool {
    Command::new("cargo")
        .args(["test", "--quiet"])
        .current_dir(root)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run cargo test")
        .success()
}

/// The workspace ledger folded by `trellis ledger replay --format json`
/// (decisions, promotions, refusals), after `trellis ledger verify` passed.
pub fn ledger_replay(root: &Path) -> Value {
    let trellis = env!("CARGO_BIN_EXE_trellis");
    let verify = Command::new(trellis)
        .args(["ledger", "verify"])
        .arg(root)
        .output()
        .expect("run trellis ledger verify");
    assert!(
        verify.status.success(),
        "ledger verify failed: {}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let replay = Command::new(trellis)
        .args(["ledger", "replay"])
        .arg(root)
        .args(["--format", "json"])
        .output()
        .expect("run trellis ledger replay");
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    serde_json::from_slice(&replay.stdout).expect("replay prints JSON")
}

/// Every file below `root` (not entering directories named in `skip`), by
/// path relative to `root`, with its bytes; symlinks are listed by target.
pub fn files_under(root: &Path, skip: &[&str]) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    fn walk(
        root: &Path,
        dir: &Path,
        skip: &[&str],
        out: &mut std::collections::BTreeMap<PathBuf, Vec<u8>>,
    ) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            let rel = entry.path().strip_prefix(root).unwrap().to_path_buf();
            if kind.is_dir() {
                if !skip.iter().any(|s| entry.file_name() == *s) {
                    walk(root, &entry.path(), skip, out);
                }
            } else if kind.is_symlink() {
                let target = std::fs::read_link(entry.path()).unwrap();
                out.insert(rel, target.into_os_string().into_encoded_bytes());
            } else {
                out.insert(rel, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(root, root, skip, &mut out);
    out
}
