//! `.trellis/` is confined: a link planted in the workspace (a committed
//! `.trellis -> .git`, a `.trellis/ledger.db` pointing at another
//! application's database, a linked `objects/`, `index` or `head`) is refused with an
//! error naming it, and nothing is written through it. Each test plants the
//! link and drives the shipped binary (CLI and language server).

use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;
use support::workspace::Workspace;
use support::{Client, files_under, vscode_capabilities};

fn git(root: &Path, args: &[&str]) -> Output {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(root)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Asserts a run failed with exit 2 and an error naming `path` as a link.
fn assert_refused_link(out: &Output, path: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains(path) && stderr.contains("symbolic link"),
        "the error names {path} as a link: {stderr}"
    );
}

#[test]
fn a_trellis_link_to_git_is_refused_and_git_is_untouched() {
    let ws = Workspace::of("missing-mut");
    git(ws.path(), &["init", "--quiet"]);
    git(ws.path(), &["add", "-A"]);
    git(ws.path(), &["commit", "--quiet", "-m", "fixture"]);
    std::os::unix::fs::symlink(".git", ws.path().join(".trellis")).unwrap();
    let git_before = files_under(&ws.path().join(".git"), &[]);

    assert_refused_link(&ws.trellis(&["check"]), ".trellis");
    assert_eq!(files_under(&ws.path().join(".git"), &[]), git_before);

    let (mut client, response) = Client::start(ws.path(), vscode_capabilities(), None);
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(".trellis") && message.contains("symbolic link"),
        "initialize is refused naming the link: {response}"
    );
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": {
            "uri": client.uri("src/lib.rs"),
            "languageId": "rust",
            "version": 1,
            "text": std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap(),
        }}),
    );
    client.pump(std::time::Duration::from_secs(2));
    drop(client);

    assert_eq!(files_under(&ws.path().join(".git"), &[]), git_before);
    let status = git(ws.path(), &["status", "--porcelain"]);
    assert_eq!(String::from_utf8_lossy(&status.stdout), "?? .trellis\n");
}

#[test]
fn a_linked_ledger_database_is_refused_and_the_other_file_is_unchanged() {
    let ws = Workspace::of("missing-mut");
    let other = ws.cache().join("other-app.sqlite");
    {
        let db = rusqlite::Connection::open(&other).unwrap();
        db.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');")
            .unwrap();
    }
    let before = std::fs::read(&other).unwrap();
    std::fs::create_dir(ws.path().join(".trellis")).unwrap();
    std::os::unix::fs::symlink(&other, ws.path().join(".trellis/ledger.db")).unwrap();

    assert_refused_link(&ws.trellis(&["check"]), "ledger.db");
    assert_eq!(std::fs::read(&other).unwrap(), before);
    assert!(!ws.cache().join("other-app.sqlite-wal").exists());
}

#[test]
fn a_linked_stat_cache_is_neither_read_nor_written() {
    let ws = Workspace::of("missing-mut");
    let victim = ws.cache().join("victim-index");
    std::fs::write(&victim, b"someone else's file").unwrap();
    std::fs::create_dir(ws.path().join(".trellis")).unwrap();
    std::os::unix::fs::symlink(&victim, ws.path().join(".trellis/index")).unwrap();

    assert_refused_link(&ws.trellis(&["check"]), "index");
    assert_eq!(std::fs::read(&victim).unwrap(), b"someone else's file");
}

#[test]
fn a_linked_object_store_is_refused_and_nothing_lands_in_it() {
    let ws = Workspace::of("missing-mut");
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".trellis")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), ws.path().join(".trellis/objects")).unwrap();
    let before = ws.tree();

    let out = ws.trellis(&["repair", "--commit"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        format!("{stdout}{stderr}").contains("objects"),
        "the error names the object store: {stdout}\n{stderr}"
    );
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    assert_eq!(ws.tree(), before, "the user's files are unchanged");
}

#[test]
fn a_linked_head_witness_is_refused_and_nothing_is_written_through_it() {
    let ws = Workspace::of("missing-mut");
    // A ledger with events, whose witness is then replaced by a link.
    assert_eq!(ws.trellis(&["check"]).status.code(), Some(1));
    let victim = ws.cache().join("victim-head");
    std::fs::write(&victim, b"someone else's file").unwrap();
    std::fs::remove_file(ws.path().join(".trellis/head")).unwrap();
    std::os::unix::fs::symlink(&victim, ws.path().join(".trellis/head")).unwrap();

    assert_refused_link(&ws.trellis(&["check"]), ".trellis/head");
    assert_refused_link(&ws.trellis(&["repair", "--commit"]), ".trellis/head");
    // Refused as a link, not reported as a broken chain.
    let verify = ws.trellis(&["ledger", "verify"]);
    assert_refused_link(&verify, ".trellis/head");
    assert!(
        !String::from_utf8_lossy(&verify.stderr).contains("broken"),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"someone else's file");

    // Once the link is gone, the ledger records and verifies as before.
    std::fs::remove_file(ws.path().join(".trellis/head")).unwrap();
    assert_eq!(ws.trellis(&["check"]).status.code(), Some(1));
    let verify = ws.trellis(&["ledger", "verify"]);
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
}
