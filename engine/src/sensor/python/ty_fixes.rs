//! ty's own fixes for unresolved names, from `ty server`'s code actions.
//!
//! `ty check` reports an `unresolved-reference` without a fix, but ty's
//! language server offers one quick fix per module that exports the name
//! (`import os`, `from datetime import datetime`), the way rustc suggests
//! imports. After a check that found unresolved names, the measured tree is
//! opened in `ty server` over stdio, each such site is asked for its quick
//! fixes, and the import fixes become the diagnostic's suggestion group:
//! one alternative per module, each a candidate the sensors verify. ty's
//! "ignore this line" suppressions are never taken: they hide a diagnostic,
//! they do not fix it.
//!
//! The exchange is bounded by the stage's remaining deadline and its
//! cancellation, the server runs in its own process group and is killed
//! when the exchange ends however it ends. A failure only loses the fixes:
//! the diagnostics stand, and the reason becomes a note of the stage.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use super::lsp_position::{Encoding, span_of};
use super::tool::ENVIRONMENT;
use crate::diagnostic::{
    Applicability, Diagnostic, Fixer, Replacement, Suggestion, SuggestionGroup,
};
use crate::sensor::SensorRun;
use crate::sensor::process::Confinement;
use crate::sensor::process::Interactive;
use crate::workspace_path::WorkspacePath;

/// The rule whose sites ty's server can fix by adding an import.
const UNRESOLVED_REFERENCE: &str = "unresolved-reference";

/// The most time the fixes may take, whatever the stage's deadline.
const MAX_EXCHANGE: Duration = Duration::from_secs(60);
/// The largest message read from the server.
const MAX_MESSAGE: usize = 8 << 20;
/// How often a request the server cancelled while it was still loading the
/// project ("content modified") is asked again.
const RETRIES: u32 = 20;
const CONTENT_MODIFIED: i64 = -32801;

/// Adds ty's import fixes to every `unresolved-reference` in `diagnostics`.
pub async fn attach(
    program: &OsStr,
    virtual_env: Option<&OsStr>,
    run: &SensorRun<'_>,
    deadline: Duration,
    diagnostics: &mut [Diagnostic],
) -> Result<(), String> {
    let sites: Vec<usize> = diagnostics
        .iter()
        .enumerate()
        .filter(|(_, d)| d.code.as_deref() == Some(UNRESOLVED_REFERENCE) && d.primary.is_some())
        .map(|(i, _)| i)
        .collect();
    if sites.is_empty() {
        return Ok(());
    }
    let mut cmd = Command::new(program);
    cmd.arg("server")
        .current_dir(run.dir)
        .envs(ENVIRONMENT.iter().copied());
    if let Some(env) = virtual_env {
        cmd.env("VIRTUAL_ENV", env);
    }
    let sandbox = run.sandbox();
    let server = Interactive::spawn(cmd, Confinement::Slot(&sandbox, None))
        .map_err(|e| format!("no import fixes from ty: {e}"))?;
    let exchange = exchange(server, run.dir, &sites, diagnostics);
    tokio::select! {
        biased;
        () = run.cancel.cancelled() => Err("no import fixes from ty: cancelled".to_owned()),
        result = tokio::time::timeout(deadline.min(MAX_EXCHANGE), exchange) => match result {
            Ok(result) => result.map_err(|e| format!("no import fixes from ty: {e}")),
            Err(_) => Err("no import fixes from ty: `ty server` did not answer in time".to_owned()),
        },
    }
}

/// The whole conversation: initialize, ask every site, shut down.
async fn exchange(
    mut server: Interactive,
    dir: &Path,
    sites: &[usize],
    diagnostics: &mut [Diagnostic],
) -> Result<(), String> {
    let root_uri = file_uri(dir);
    let mut stdout = BufReader::new(&mut server.stdout);
    let mut next_id = 0_i64;
    let init = request(
        &mut server.stdin,
        &mut stdout,
        &mut next_id,
        "initialize",
        json!({
            "processId": std::process::id(),
            "rootUri": root_uri,
            "workspaceFolders": [{"uri": root_uri, "name": "trellis"}],
            "capabilities": {
                "general": {"positionEncodings": ["utf-8", "utf-16"]},
                "textDocument": {"codeAction": {"codeActionLiteralSupport": {
                    "codeActionKind": {"valueSet": ["quickfix"]}
                }}},
            },
        }),
    )
    .await?;
    let encoding = Encoding::of(&init);
    notify(&mut server.stdin, "initialized", json!({})).await?;
    let mut texts: BTreeMap<WorkspacePath, String> = BTreeMap::new();
    for &i in sites {
        let span = diagnostics[i].primary.clone().expect("sites have spans");
        if !texts.contains_key(&span.path) {
            let text = std::fs::read_to_string(dir.join(&span.path))
                .map_err(|e| format!("{}: {e}", span.path))?;
            notify(
                &mut server.stdin,
                "textDocument/didOpen",
                json!({"textDocument": {
                    "uri": file_uri(&dir.join(&span.path)),
                    "languageId": "python",
                    "version": 1,
                    "text": text,
                }}),
            )
            .await?;
            texts.insert(span.path.clone(), text);
        }
        let text = &texts[&span.path];
        let range = json!({
            "start": encoding.position(text, span.byte_start),
            "end": encoding.position(text, span.byte_end),
        });
        let uri = file_uri(&dir.join(&span.path));
        let params = json!({
            "textDocument": {"uri": uri},
            "range": range,
            "context": {
                "diagnostics": [{
                    "range": range,
                    "code": UNRESOLVED_REFERENCE,
                    "source": "ty",
                    "severity": 1,
                    "message": diagnostics[i].message,
                }],
                "only": ["quickfix"],
            },
        });
        let actions = request(
            &mut server.stdin,
            &mut stdout,
            &mut next_id,
            "textDocument/codeAction",
            params,
        )
        .await?;
        let alternatives = import_fixes(&actions, &uri, &span.path, text, encoding);
        if !alternatives.is_empty() {
            diagnostics[i]
                .suggestions
                .push(SuggestionGroup { alternatives });
        }
    }
    // A polite end; the group is killed when `server` drops either way.
    let _ = request(
        &mut server.stdin,
        &mut stdout,
        &mut next_id,
        "shutdown",
        Value::Null,
    )
    .await;
    let _ = notify(&mut server.stdin, "exit", Value::Null).await;
    drop(stdout);
    server.finish(Duration::from_secs(2)).await;
    Ok(())
}

fn file_uri(path: &Path) -> String {
    // Paths in a slot are plain (the snapshot refuses anything else), so
    // only the characters a URI reserves need escaping.
    let mut uri = String::from("file://");
    for byte in path.as_os_str().as_encoded_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                uri.push(char::from(*byte));
            }
            _ => uri.push_str(&format!("%{byte:02X}")),
        }
    }
    uri
}

async fn write_message(
    stdin: &mut tokio::process::ChildStdin,
    message: &Value,
) -> Result<(), String> {
    let body = serde_json::to_vec(message).map_err(|e| e.to_string())?;
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend(body);
    stdin
        .write_all(&frame)
        .await
        .map_err(|e| format!("`ty server` closed its input: {e}"))?;
    stdin.flush().await.map_err(|e| e.to_string())
}

async fn notify(
    stdin: &mut tokio::process::ChildStdin,
    method: &str,
    params: Value,
) -> Result<(), String> {
    write_message(
        stdin,
        &json!({"jsonrpc": "2.0", "method": method, "params": params}),
    )
    .await
}

/// Sends a request and waits for its response, answering what the server
/// asks meanwhile; a "content modified" error is asked again.
async fn request<R: tokio::io::AsyncRead + Unpin>(
    stdin: &mut tokio::process::ChildStdin,
    stdout: &mut BufReader<R>,
    next_id: &mut i64,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    for attempt in 0..=RETRIES {
        *next_id += 1;
        let id = *next_id;
        write_message(
            stdin,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .await?;
        loop {
            let message = read_message(stdout).await?;
            if message.get("method").is_some() {
                if let Some(server_id) = message.get("id") {
                    write_message(stdin, &reply_to(server_id, &message)).await?;
                }
                continue;
            }
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            match message.get("error") {
                None => return Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                Some(error)
                    if error["code"].as_i64() == Some(CONTENT_MODIFIED) && attempt < RETRIES =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    break;
                }
                Some(error) => return Err(format!("`{method}` failed: {error}")),
            }
        }
    }
    Err(format!("`{method}` was cancelled {RETRIES} times"))
}

/// What a client without settings answers a server's request: nothing for
/// each configuration item asked, `null` otherwise.
fn reply_to(id: &Value, message: &Value) -> Value {
    let result = match message["method"].as_str() {
        Some("workspace/configuration") => {
            let items = message["params"]["items"].as_array().map_or(0, Vec::len);
            Value::Array(vec![Value::Null; items])
        }
        _ => Value::Null,
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// One framed message from the server.
async fn read_message<R: tokio::io::AsyncRead + Unpin>(
    stdout: &mut BufReader<R>,
) -> Result<Value, String> {
    let mut length: Option<usize> = None;
    loop {
        let mut line = String::new();
        let read = stdout
            .read_line(&mut line)
            .await
            .map_err(|e| e.to_string())?;
        if read == 0 {
            return Err("`ty server` exited mid-conversation".to_owned());
        }
        if line.len() > 1024 {
            return Err("`ty server` sent a malformed header".to_owned());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok();
        }
    }
    let length = length
        .filter(|&n| n <= MAX_MESSAGE)
        .ok_or("`ty server` sent a message without a usable Content-Length")?;
    let mut body = vec![0; length];
    stdout
        .read_exact(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&body).map_err(|e| format!("`ty server` sent malformed JSON: {e}"))
}

/// The import fixes among a `textDocument/codeAction` result: quick fixes
/// whose every edit is in the file `uri` and none of which is a `ty:
/// ignore` suppression, each as one suggestion.
pub(super) fn import_fixes(
    actions: &Value,
    uri: &str,
    path: &WorkspacePath,
    text: &str,
    encoding: Encoding,
) -> Vec<Suggestion> {
    let Some(actions) = actions.as_array() else {
        return Vec::new();
    };
    actions
        .iter()
        .filter_map(|action| {
            if action["kind"].as_str() != Some("quickfix") {
                return None;
            }
            let title = action["title"].as_str()?;
            let changes = action["edit"]["changes"].as_object()?;
            if changes.keys().any(|k| k != uri) {
                return None; // an edit elsewhere is not one we can apply
            }
            let edits = changes.get(uri)?.as_array()?;
            let mut replacements = Vec::with_capacity(edits.len());
            for edit in edits {
                let new_text = edit["newText"].as_str()?;
                if new_text.contains("ty: ignore") {
                    return None;
                }
                let start = encoding.byte(text, &edit["range"]["start"])?;
                let end = encoding.byte(text, &edit["range"]["end"])?;
                if start > end {
                    return None;
                }
                replacements.push(Replacement {
                    span: span_of(path, text, start, end),
                    text: new_text.to_owned(),
                });
            }
            (!replacements.is_empty()).then(|| Suggestion {
                message: title.to_owned(),
                applicability: Applicability::MaybeIncorrect,
                fixer: Fixer::Ty,
                replacements,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const URI: &str = "file:///ws/src/pkg/__init__.py";

    /// ty 0.0.108's `textDocument/codeAction` answer for `datetime` in
    /// `return datetime.now().isoformat()` (trimmed to three actions).
    fn recorded() -> Value {
        json!([
            {"kind": "quickfix", "isPreferred": true, "title": "import datetime",
             "edit": {"changes": {URI: [{"newText": "import datetime\n",
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}}]}}},
            {"kind": "quickfix", "isPreferred": true, "title": "import datetime.datetime",
             "edit": {"changes": {URI: [{"newText": "from datetime import datetime\n",
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}}]}}},
            {"kind": "quickfix", "isPreferred": false, "title": "Ignore 'unresolved-reference' for this line",
             "edit": {"changes": {URI: [{"newText": "  # ty: ignore[unresolved-reference]",
                "range": {"start": {"line": 1, "character": 36}, "end": {"line": 1, "character": 36}}}]}}}
        ])
    }

    #[test]
    fn import_fixes_are_alternatives_and_suppressions_are_not_fixes() {
        let text = "def when() -> str:\n    return datetime.now().isoformat()\n";
        let fixes = import_fixes(
            &recorded(),
            URI,
            &WorkspacePath::new("src/pkg/__init__.py").unwrap(),
            text,
            Encoding::Utf8,
        );
        let titles: Vec<&str> = fixes.iter().map(|s| s.message.as_str()).collect();
        assert_eq!(titles, ["import datetime", "import datetime.datetime"]);
        let edit = &fixes[1].replacements[0];
        assert_eq!(edit.text, "from datetime import datetime\n");
        assert_eq!((edit.span.byte_start, edit.span.byte_end), (0, 0));
        assert_eq!((edit.span.line_start, edit.span.col_start), (1, 1));
    }

    #[test]
    fn an_action_editing_another_file_is_left_out() {
        let mut actions = recorded();
        actions[0]["edit"]["changes"] = json!({"file:///ws/other.py": []});
        let fixes = import_fixes(
            &actions,
            URI,
            &WorkspacePath::new("p.py").unwrap(),
            "x\n",
            Encoding::Utf8,
        );
        assert_eq!(fixes.len(), 1);
    }

    #[test]
    fn a_file_uri_escapes_what_a_uri_reserves() {
        assert_eq!(file_uri(Path::new("/a b/c#d.py")), "file:///a%20b/c%23d.py");
    }
}
