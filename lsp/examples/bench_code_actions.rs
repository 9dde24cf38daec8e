//! Code-action latency while the user types and a repair runs.
//!
//! Drives a real `trellis lsp` over stdio as Helix does (code actions on
//! every cursor move, edits inline in the actions): on a tiny broken crate,
//! one repair is verified and left unapplied (so every change makes the
//! server track the view's root and rebuild the Apply edit), a second
//! repair of the same cluster is started, and while it runs the client
//! sends 200 `didChange` notifications, each followed by a
//! `textDocument/codeAction` request. Prints p50/p99/max of the code-action
//! round trips, and whether the second repair was still running when the
//! last answer came (the crate's test sleeps 8 s so that it is). Goal: p99
//! under 20 ms.
//!
//!   bench_code_actions <path to trellis> [--changes N] [--pace-ms N]

use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The wire format, the same as the test client's.
use trellis_test_support::lsp_framing as framing;

const CARGO_TOML: &str =
    "[package]\nname = \"bench\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n";
/// A missing `mut`, and a test that takes a while, so that every `cargo
/// test` of the search (and so the second repair) outlasts the typing.
const LIB: &str = "pub fn count(words: &[&str]) -> usize {\n    let n = 0;\n    for _ in words {\n        n += 1;\n    }\n    n\n}\n\n#[test]\nfn takes_a_while() {\n    std::thread::sleep(std::time::Duration::from_secs(8));\n}\n// notes:\n";
/// Sensing a cold crate and a whole repair search on a busy machine.
const SLOW_STEP: Duration = Duration::from_secs(900);

struct Server {
    stdin: ChildStdin,
    incoming: Receiver<Value>,
    next_id: i64,
    notifications: Vec<Value>,
}

impl Server {
    fn send(&mut self, message: &Value) {
        framing::write_message(&mut self.stdin, message).unwrap();
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Reads one message, answering server requests; None on timeout.
    fn pump(&mut self, deadline: Instant) -> Option<Value> {
        let message = self
            .incoming
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .ok()?;
        match (message.get("method"), message.get("id")) {
            (Some(method), Some(id)) => {
                // Nobody clicks: applyEdit is declined, everything else null.
                let result = if method == "workspace/applyEdit" {
                    json!({ "applied": false })
                } else {
                    Value::Null
                };
                let reply = json!({ "jsonrpc": "2.0", "id": id, "result": result });
                self.send(&reply);
            }
            (Some(_), None) => self.notifications.push(message.clone()),
            _ => {}
        }
        Some(message)
    }

    /// Sends a request and returns its result and the round-trip time.
    fn request(&mut self, method: &str, params: Value) -> (Value, Duration) {
        let id = self.next_id;
        self.next_id += 1;
        let sent = Instant::now();
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        let deadline = sent + Duration::from_secs(30);
        loop {
            let message = self
                .pump(deadline)
                .unwrap_or_else(|| panic!("no answer to {method} within 30 s"));
            if message.get("method").is_none() && message["id"] == json!(id) {
                let elapsed = sent.elapsed();
                assert!(message.get("error").is_none(), "{method}: {message}");
                return (message["result"].clone(), elapsed);
            }
        }
    }

    /// Waits for a notification matching `matches` (after index `from`).
    fn wait_for(&mut self, from: usize, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + SLOW_STEP;
        let mut seen = from;
        loop {
            if let Some(found) = self.notifications[seen..].iter().find(|n| matches(n)) {
                return found.clone();
            }
            seen = self.notifications.len();
            if self.pump(deadline).is_none() {
                panic!("timed out waiting for {what}");
            }
        }
    }
}

fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn is_status(n: &Value, status: &str) -> bool {
    n["method"] == "trellis/searchStatus" && n["params"]["status"] == status
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let trellis = args
        .next()
        .expect("usage: bench_code_actions <trellis> [--changes N] [--pace-ms N]");
    let (mut changes, mut pace_ms) = (200usize, 20u64);
    while let Some(flag) = args.next() {
        let value = args.next().expect("a flag needs a value");
        match flag.as_str() {
            "--changes" => changes = value.parse().expect("--changes N"),
            "--pace-ms" => pace_ms = value.parse().expect("--pace-ms N"),
            other => panic!("unknown flag {other}"),
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("Cargo.toml"), CARGO_TOML).unwrap();
    std::fs::write(root.join("src/lib.rs"), LIB).unwrap();

    let mut child = Command::new(&trellis)
        .arg("lsp")
        .current_dir(&root)
        .env_remove("CARGO_TARGET_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {trellis}: {e}"));
    let mut server = Server {
        stdin: child.stdin.take().unwrap(),
        incoming: framing::spawn_reader(child.stdout.take().unwrap()),
        next_id: 1,
        notifications: Vec::new(),
    };

    let uri = file_uri(&root);
    // Helix: UTF-8, code-action literals, no resolve (edits come inline).
    let capabilities = json!({
        "general": { "positionEncodings": ["utf-8", "utf-32", "utf-16"] },
        "window": { "workDoneProgress": true },
        "textDocument": { "codeAction": {
            "codeActionLiteralSupport": { "codeActionKind": { "valueSet": ["", "quickfix"] } },
            "dataSupport": true
        } },
        "workspace": { "applyEdit": true, "workspaceEdit": { "documentChanges": true } }
    });
    server.request(
        "initialize",
        json!({
            "processId": std::process::id(),
            "rootUri": uri,
            "workspaceFolders": [{ "uri": uri, "name": "bench" }],
            "clientInfo": { "name": "helix" },
            "capabilities": capabilities,
        }),
    );
    server.notify("initialized", json!({}));
    let lib = file_uri(&root.join("src/lib.rs"));
    server.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": lib, "languageId": "rust", "version": 1, "text": LIB } }),
    );
    let published = server.wait_for(0, "the diagnostics", |n| {
        n["method"] == "textDocument/publishDiagnostics"
            && n["params"]["diagnostics"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
    });
    let diagnostic = published["params"]["diagnostics"][0].clone();
    let cluster = diagnostic["data"]["cluster"].clone();
    let start = |server: &mut Server| {
        let from = server.notifications.len();
        server.request(
            "workspace/executeCommand",
            json!({ "command": "trellis.repair.start", "arguments": [{ "cluster": cluster }] }),
        );
        from
    };

    eprintln!("verifying a first repair (left unapplied) ...");
    let from = start(&mut server);
    let ended = server.wait_for(from, "the first repair", |n| {
        n["method"] == "trellis/searchStatus"
            && !["running", "applied"].contains(&n["params"]["status"].as_str().unwrap_or(""))
    });
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");

    let second = start(&mut server);
    server.wait_for(second, "the second repair to start", |n| {
        is_status(n, "running")
    });

    // Type after `// notes:` and delete again, alternately: every other
    // change brings the start root back, so Apply edits are rebuilt too.
    let notes = LIB.lines().count() - 1;
    let mut latencies = Vec::with_capacity(changes);
    let mut offered = 0;
    for change in 0..changes {
        let at = json!({ "line": notes, "character": 9 });
        let (range, text) = if change % 2 == 0 {
            (json!({ "start": at, "end": at }), "x")
        } else {
            let end = json!({ "line": notes, "character": 10 });
            (json!({ "start": at, "end": end }), "")
        };
        server.notify(
            "textDocument/didChange",
            json!({
                "textDocument": { "uri": lib, "version": change + 2 },
                "contentChanges": [{ "range": range, "text": text }],
            }),
        );
        let (actions, took) = server.request(
            "textDocument/codeAction",
            json!({
                "textDocument": { "uri": lib },
                "range": diagnostic["range"],
                "context": { "diagnostics": [diagnostic] },
            }),
        );
        latencies.push(took);
        let apply = actions.as_array().is_some_and(|a| {
            a.iter().any(|a| {
                a["title"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("Apply verified repair"))
            })
        });
        offered += usize::from(apply);
        std::thread::sleep(Duration::from_millis(pace_ms));
    }
    let still_running = !server.notifications[second..].iter().any(|n| {
        n["method"] == "trellis/searchStatus"
            && !["running", "applied"].contains(&n["params"]["status"].as_str().unwrap_or(""))
    });

    latencies.sort();
    println!(
        "code actions while a repair runs ({changes} didChange, one codeAction after each, {pace_ms} ms apart)"
    );
    println!(
        "  p50 {}  p99 {}  max {}  (goal: p99 < 20 ms)",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0)),
        ms(*latencies.last().unwrap())
    );
    println!(
        "  Apply offered in {offered} of {changes} answers; the second repair was {} running at the end",
        if still_running { "still" } else { "no longer" }
    );
    server.request(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.cancel", "arguments": [] }),
    );
    server.request("shutdown", Value::Null);
    server.notify("exit", Value::Null);
    let _ = child.wait();
}
