//! The versioned prompt-bundle store through the shipped binary:
//! `trellis bundles` (compile-on-write, versions across processes, checksum
//! pins, stale bases, settings a bundle cannot touch, prune and ledgered
//! repairs), `trellis repair --bundle`, and the LSP projection
//! (`trellis/bundles`, `trellis/bundleVersions`, `trellis.repair.start`
//! with `bundles`) with a CLI write landing while an editor repair runs.

use crate::support;
use trellis_test_support::openai_server;

use std::path::Path;
use std::time::{Duration, Instant};

use openai_server::{Answer, OpenAiServer};
use serde_json::{Value, json};
use support::workspace::Workspace;
use support::{Client, REPAIR_TIMEOUT, REQUEST_TIMEOUT, vscode_capabilities};

/// A replacement of `branch_correct/role` saying `line`.
fn role_section(line: &str) -> String {
    format!(
        "---\nid: branch_correct/role\nversion: 1\nrole: system\nrequired: true\n\
         priority: 100\nmax_bytes: 1024\nowner: coding\nrationale: \"test\"\n\
         review: 2026-11-30\nvars: {{}}\n---\n{line}\n"
    )
}

/// A bundle directory: `bundle.toml` with `manifest` and the sections given.
fn bundle_dir(manifest: &str, sections: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bundle.toml"), manifest).unwrap();
    for (name, text) in sections {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

fn terse(line: &str) -> tempfile::TempDir {
    bundle_dir("id = \"terse\"\n", &[("10_role.md", &role_section(line))])
}

/// `trellis bundles ARGS --workspace WS` (the harness appends the path).
fn bundles(ws: &Workspace, args: &[&str]) -> std::process::Output {
    let mut all = vec!["bundles"];
    all.extend(args);
    all.push("--workspace");
    ws.trellis(&all)
}

/// [`bundles`] with `--format json`: the exit code and the document.
fn bundles_json(ws: &Workspace, args: &[&str]) -> (i32, Value) {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let out = bundles(ws, &all);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap(), doc)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Writes `dir` as `id`, expecting success; returns the write's JSON.
fn write_ok(ws: &Workspace, id: &str, dir: &Path, extra: &[&str]) -> Value {
    let dir = dir.to_str().unwrap();
    let mut args = vec!["write", id, dir];
    args.extend(extra);
    let (code, doc) = bundles_json(ws, &args);
    assert_eq!(code, 0, "write {id} {extra:?}: {doc}");
    doc
}

fn listed(ws: &Workspace) -> Vec<Value> {
    let (code, doc) = bundles_json(ws, &["list"]);
    assert_eq!(code, 0, "{doc}");
    doc["bundles"].as_array().unwrap().clone()
}

#[test]
fn a_failed_compile_or_bound_stores_nothing() {
    let ws = Workspace::of("missing-mut");
    let broken = bundle_dir(
        "id = \"terse\"\n",
        &[
            ("10_role.md", &role_section("uses {{no_such_var}}")),
            (
                "20_other.md",
                &role_section("x").replace("branch_correct/role", "branch_correct/nope"),
            ),
        ],
    );
    let out = bundles(&ws, &["write", "terse", broken.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let message = stderr(&out);
    assert!(
        message.contains("does not compile; nothing was stored")
            && message.contains("10_role.md")
            && message.contains("branch_correct/nope"),
        "every problem is named: {message}"
    );
    // A bound: more sections than a bundle may hold, each valid.
    let many: Vec<(String, String)> = (0..65)
        .map(|i| (format!("{i:02}_role.md"), role_section("x")))
        .collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let big = bundle_dir("id = \"terse\"\n", &many);
    let out = bundles(&ws, &["write", "terse", big.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("over the bound of 64"),
        "{}",
        stderr(&out)
    );
    // Content that declares another id.
    let other = bundle_dir("id = \"other\"\n", &[("10_role.md", &role_section("x"))]);
    let out = bundles(&ws, &["write", "terse", other.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("declares id `other`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(listed(&ws), Vec::<Value>::new());
    // The next good write is the first version: nothing was consumed.
    assert_eq!(
        write_ok(&ws, "terse", terse("ok").path(), &[])["version"],
        1
    );
}

#[test]
fn versions_are_monotonic_across_restarts_and_prunes() {
    let ws = Workspace::of("missing-mut");
    for n in 1..=11u32 {
        // Each write is a new `trellis` process.
        let base = (n - 1).to_string();
        let extra: &[&str] = if n == 1 { &[] } else { &["--base", &base] };
        let written = write_ok(&ws, "terse", terse(&format!("v{n}")).path(), extra);
        assert_eq!(written["version"], n, "{written}");
        assert_eq!(
            written["default_version"], 1,
            "a write never moves the default"
        );
    }
    let row = &listed(&ws)[0];
    // The default (v1) and the latest eight (v4..v11); v2 and v3 were pruned.
    assert_eq!(
        (
            row["latest_version"].as_u64(),
            row["versions_count"].as_u64()
        ),
        (Some(11), Some(9))
    );
    let out = bundles(&ws, &["show", "terse@2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no version v2"), "{}", stderr(&out));
    let written = write_ok(&ws, "terse", terse("v12").path(), &["--base", "11"]);
    assert_eq!(written["version"], 12, "a pruned number is never reused");
}

#[test]
fn a_checksum_pin_catches_changed_content() {
    let ws = Workspace::of("missing-mut");
    let one = write_ok(&ws, "terse", terse("one").path(), &[]);
    write_ok(&ws, "terse", terse("two").path(), &["--base", "1"]);
    let checksum = one["checksum"].as_str().unwrap();
    let pin = format!("terse@{checksum}");
    let (code, shown) = bundles_json(&ws, &["show", &pin]);
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["version"]["version"], 1);
    assert!(
        shown["sections"][0]["text"]
            .as_str()
            .unwrap()
            .contains("one")
    );
    let unknown = format!("terse@sha256:{}", "0".repeat(64));
    let out = bundles(&ws, &["show", &unknown]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no version has content"),
        "{}",
        stderr(&out)
    );
    // The stored content of v1 is changed outside trellis.
    let db = rusqlite::Connection::open(ws.path().join(".trellis/bundles.db")).unwrap();
    let body: Vec<u8> = db
        .query_row(
            "SELECT body FROM contents WHERE checksum = ?1",
            [checksum],
            |r| r.get(0),
        )
        .unwrap();
    let tampered = String::from_utf8(body).unwrap().replace("one", "ONE");
    db.execute(
        "UPDATE contents SET body = ?1 WHERE checksum = ?2",
        rusqlite::params![tampered.as_bytes(), checksum],
    )
    .unwrap();
    drop(db);
    let out = bundles(&ws, &["show", &pin]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("changed outside trellis"),
        "{}",
        stderr(&out)
    );
    let out = ws.trellis(&["--allow-experimental-prompts", "repair", "--bundle", &pin]);
    assert_eq!(out.status.code(), Some(2), "a repair never runs with it");
    assert!(
        stderr(&out).contains("changed outside trellis"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_stale_base_is_refused_naming_both_versions() {
    let ws = Workspace::of("missing-mut");
    write_ok(&ws, "terse", terse("one").path(), &[]);
    write_ok(&ws, "terse", terse("two").path(), &["--base", "1"]);
    let three = terse("three");
    let dir = three.path().to_str().unwrap();
    for stale in [vec!["--base", "1"], vec![]] {
        let mut args = vec!["write", "terse", dir];
        args.extend(&stale);
        let out = bundles(&ws, &args);
        assert_eq!(out.status.code(), Some(2), "{stale:?}");
        let message = stderr(&out);
        assert!(message.contains("latest version is v2"), "{message}");
        if !stale.is_empty() {
            assert!(message.contains("based on v1"), "{message}");
        }
    }
    assert_eq!(listed(&ws)[0]["latest_version"], 2, "nothing was stored");
    let forced = write_ok(&ws, "terse", three.path(), &["--base", "1", "--force"]);
    assert_eq!(
        (forced["version"].as_u64(), forced["parent"].as_u64()),
        (Some(3), Some(1))
    );
}

#[test]
fn a_bundle_section_cannot_change_its_max_bytes() {
    let ws = Workspace::of("missing-mut");
    // Raised to admit a static body four times the compiled budget, and
    // lowered: either way the bundle would be changing a budget.
    let long = "Be terse. ".repeat(400);
    for (max_bytes, body) in [("65536", long.as_str()), ("512", "x")] {
        let section =
            role_section(body).replace("max_bytes: 1024", &format!("max_bytes: {max_bytes}"));
        let dir = bundle_dir("id = \"terse\"\n", &[("10_role.md", &section)]);
        let out = bundles(&ws, &["write", "terse", dir.path().to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "max_bytes {max_bytes}");
        let message = stderr(&out);
        assert!(
            message.contains("10_role.md")
                && message.contains(&format!("`max_bytes: {max_bytes}`"))
                && message.contains("1024")
                && message.contains("budget"),
            "the refusal names the file, the key and the compiled value: {message}"
        );
    }
    assert_eq!(listed(&ws), Vec::<Value>::new(), "nothing was stored");
}

#[test]
fn a_bundle_cannot_change_a_gate_or_stage_setting() {
    let ws = Workspace::of("missing-mut");
    let section = role_section("x");
    for (manifest, key) in [
        (
            "id = \"terse\"\n[stages]\nrequired = [\"build\"]\n",
            "stages",
        ),
        ("id = \"terse\"\n[gate]\nrho = 0.0\n", "gate"),
        ("id = \"terse\"\ntools = [\"write_file\"]\n", "tools"),
    ] {
        let dir = bundle_dir(manifest, &[("10_role.md", &section)]);
        let out = bundles(&ws, &["write", "terse", dir.path().to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{manifest}");
        assert!(
            stderr(&out).contains(&format!("`{key}` is a workspace setting")),
            "{}",
            stderr(&out)
        );
    }
    // A section cannot move to another stage's owner either.
    let foreign = bundle_dir(
        "id = \"terse\"\n",
        &[(
            "10_role.md",
            &section.replace("owner: coding", "owner: platform"),
        )],
    );
    let out = bundles(&ws, &["write", "terse", foreign.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is owned by `coding`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(listed(&ws), Vec::<Value>::new());

    // A requirement the run cannot meet is refused when a repair attaches it.
    let needs = bundle_dir(
        "id = \"needs\"\n[requires]\ntools = [\"run_tests\"]\n",
        &[("10_role.md", &section)],
    );
    write_ok(&ws, "needs", needs.path(), &[]);
    let before = ws.tree();
    let out = ws.trellis(&[
        "--allow-experimental-prompts",
        "repair",
        "--bundle",
        "needs",
        "--commit",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("requires the tool `run_tests`, and this repair has no model actor"),
        "{}",
        stderr(&out)
    );
    assert_eq!(ws.tree(), before, "nothing ran and nothing was written");
}

/// The `bundles_attached` rows of the workspace's ledger, oldest first.
fn attached_rows(root: &Path) -> Vec<Value> {
    let db = rusqlite::Connection::open(root.join(".trellis/ledger.db")).unwrap();
    let mut stmt = db
        .prepare("SELECT payload FROM events WHERE kind = 'bundles_attached' ORDER BY seq")
        .unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|p| serde_json::from_str(&p.unwrap()).unwrap())
        .collect()
}

#[test]
fn prune_keeps_the_versions_a_ledgered_repair_attached() {
    let ws = Workspace::of("missing-mut");
    let one = write_ok(&ws, "terse", terse("v1").path(), &[]);
    write_ok(&ws, "terse", terse("v2").path(), &["--base", "1"]);
    let (code, doc) = bundles_json(&ws, &["default", "terse", "2", "--reason", "better"]);
    assert_eq!((code, doc["previous"].as_u64()), (0, Some(1)), "{doc}");
    let out = ws.trellis(&[
        "--allow-experimental-prompts",
        "repair",
        "--bundle",
        "terse@1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows = attached_rows(ws.path());
    assert_eq!(rows.len(), 1);
    let component = &rows[0]["components"][0];
    assert_eq!(
        (component["id"].as_str(), component["version"].as_u64()),
        (Some("terse"), Some(1))
    );
    assert_eq!(component["checksum"], one["checksum"]);
    assert!(component["origin"].as_str().unwrap().starts_with("file:"));
    // Eight more versions push v1 (named by the repair) and v3 out of the window.
    for n in 3..=11u32 {
        let base = (n - 1).to_string();
        write_ok(
            &ws,
            "terse",
            terse(&format!("v{n}")).path(),
            &["--base", &base],
        );
    }
    assert_eq!(
        bundles(&ws, &["show", "terse@1"]).status.code(),
        Some(0),
        "named: kept"
    );
    assert_eq!(
        bundles(&ws, &["show", "terse@3"]).status.code(),
        Some(2),
        "unnamed: pruned"
    );
    let (code, report) = bundles_json(&ws, &["prune", "--dry-run"]);
    assert_eq!(code, 0);
    assert_eq!(report["kept_for_sessions"], 1, "{report}");
    assert_eq!(report["removed"], json!([]));
    // The history shows the first version and the explicit change.
    let (_, history) = bundles_json(&ws, &["history", "terse"]);
    let versions: Vec<u64> = history["defaults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, [1, 2]);
    // Replay rebuilds from the ledger with the recorded bundle.
    let out = ws.trellis(&["ledger", "replay"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Reads the server's messages until the paused repair's marker appears;
/// a search that ends first (or a timeout) fails, showing what was sent.
fn wait_for_pause(client: &mut Client, marker: &Path, from: usize) {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    while !marker.exists() {
        client.pump(Duration::from_millis(50));
        let ended = client.notifications[from..]
            .iter()
            .find(|n| n["method"] == "trellis/searchStatus" && n["params"]["status"] != "running");
        assert!(
            ended.is_none(),
            "the search ended before it paused: {ended:#?}"
        );
        assert!(
            Instant::now() < deadline,
            "the repair never paused; notifications: {:#?}",
            client.notifications
        );
    }
}

#[test]
fn the_lsp_projection_lists_what_the_cli_wrote() {
    let ws = Workspace::of("missing-mut");
    let root = ws.path().to_path_buf();
    write_ok(&ws, "terse", terse("one").path(), &[]);
    write_ok(
        &ws,
        "terse",
        terse("two").path(),
        &["--base", "1", "--reason", "shorter"],
    );
    let verbose = bundle_dir(
        "id = \"verbose\"\ndescription = \"says more\"\n",
        &[("10_role.md", &role_section("Explain."))],
    );
    write_ok(&ws, "verbose", verbose.path(), &[]);
    let cli = listed(&ws);

    let (mut client, init) = Client::start(&root, vscode_capabilities(), None);
    assert!(init["result"].is_object(), "{init}");
    let listed_lsp = client.request("trellis/bundles", json!({}));
    let rows = listed_lsp["bundles"].as_array().unwrap();
    assert_eq!(rows.len(), cli.len());
    for (lsp, cli) in rows.iter().zip(&cli) {
        for field in [
            "id",
            "default_version",
            "latest_version",
            "versions_count",
            "checksum",
            "description",
            "sections",
        ] {
            assert_eq!(lsp[field], cli[field], "{field}: {lsp} vs {cli}");
        }
    }
    let versions = client.request("trellis/bundleVersions", json!({ "id": "terse" }));
    let v: Vec<(u64, bool)> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_u64().unwrap(),
                v["is_default"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(v, [(1, true), (2, false)]);
    assert_eq!(versions["versions"][1]["reason"], "shorter");
    assert_eq!(versions["defaults"][0]["version"], 1);
    let unknown = client.request_raw("trellis/bundleVersions", json!({ "id": "nope" }));
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no bundle `nope`"),
        "{unknown}"
    );
    client.shutdown();
}

#[test]
fn a_running_lsp_repair_is_unaffected_by_a_cli_write_made_during_it() {
    let ws = Workspace::of("missing-mut");
    let root = ws.path().to_path_buf();
    let one = write_ok(&ws, "terse", terse("one").path(), &[]);
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("paused");
    let mut command = Client::command();
    command
        .arg("--allow-experimental-prompts")
        .env("TRELLIS_FAILPOINT", "bundles-attached:1:pause")
        .env("TRELLIS_FAILPOINT_MARKER", &marker)
        .env("TRELLIS_CACHE_DIR", ws.cache());
    let (mut client, init) = Client::start_with(&root, command, None, vscode_capabilities(), None);
    assert!(init["result"].is_object(), "{init}");
    client.open("src/lib.rs");
    let diagnostics = client.wait_for_diagnostics(0, "src/lib.rs", true);
    let cluster = diagnostics[0]["data"]["cluster"].clone();

    let from = client.notifications.len();
    let started = client.request(
        "workspace/executeCommand",
        json!({
            "command": "trellis.repair.start",
            "arguments": [{ "cluster": cluster, "bundles": ["terse"] }],
        }),
    );
    assert_eq!(started, Value::Null);
    // The repair has resolved `terse` (v1, the default) and is held there.
    wait_for_pause(&mut client, &marker, from);
    let two = write_ok(&ws, "terse", terse("two").path(), &["--base", "1"]);
    let (code, _) = bundles_json(&ws, &["default", "terse", "2"]);
    assert_eq!(code, 0);
    let now = client.request("trellis/bundles", json!({}));
    assert_eq!(
        now["bundles"][0]["default_version"], 2,
        "the store moved on: {now}"
    );
    std::fs::remove_file(&marker).unwrap();

    let ended = client.wait_for(from, REPAIR_TIMEOUT, "the search to end", |n| {
        n["method"] == "trellis/searchStatus"
            && !["running", "applied"].contains(&n["params"]["status"].as_str().unwrap_or_default())
    });
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
    client.shutdown();
    // Recorded after the write, yet what the repair resolved at its start.
    let rows = attached_rows(&root);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let component = &rows[0]["components"][0];
    assert_eq!(component["version"], 1, "{component}");
    assert_eq!(component["checksum"], one["checksum"]);
    assert_ne!(component["checksum"], two["checksum"]);
    assert_eq!(rows[0]["repair_id"], ended["params"]["repair_id"]);
}

#[test]
fn an_attached_bundle_reaches_the_model_and_replay_rebuilds_it_after_the_store_moved_on() {
    let server = OpenAiServer::start(vec![
        Answer::tool_call("read_file", json!({ "path": "src/lib.rs" })),
        Answer::tool_call(
            "replace",
            json!({ "path": "src/lib.rs", "old": "a - b", "new": "a + b" }),
        ),
        Answer::tool_call("finish", json!({ "summary": "add adds" })),
    ]);
    let ws = Workspace::of("wrong-operator");
    let config = format!(
        "[[models]]\nname = \"m0\"\nadapter = \"openai-chat\"\nbase_url = \"{}\"\n\
         model = \"qwen2.5-coder:7b\"\ntimeout_secs = 60\ncontext_window_tokens = 32768\n\
         max_output_tokens = 1024\n",
        server.base_url
    );
    std::fs::write(ws.path().join("trellis.toml"), config).unwrap();
    write_ok(
        &ws,
        "terse",
        terse("Marker-one: fix the evidence.").path(),
        &[],
    );
    let out = ws.trellis(&[
        "--allow-experimental-prompts",
        "repair",
        "--commit",
        "--bundle",
        "terse",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let received: Vec<String> = server
        .received()
        .iter()
        .map(|r| String::from_utf8(r.body.clone()).unwrap())
        .collect();
    assert!(!received.is_empty());
    for body in &received {
        assert!(
            body.contains("Marker-one"),
            "the bundle's text reached the model: {body}"
        );
    }
    // The store moves on; replay still rebuilds every request with v1.
    write_ok(&ws, "terse", terse("Marker-two").path(), &["--base", "1"]);
    assert_eq!(bundles_json(&ws, &["default", "terse", "2"]).0, 0);
    let replay = support::ledger_replay(ws.path());
    let calls = replay["model_calls"].as_array().unwrap();
    assert_eq!(calls.len(), received.len());
    for (call, body) in calls.iter().zip(&received) {
        assert_eq!(call["reproduced"], true);
        assert_eq!(
            call["request"],
            serde_json::from_str::<Value>(body).unwrap()
        );
    }
    // explain-session reads the session the same way.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(["prompts", "explain-session", "--format", "json", "--path"])
        .arg(ws.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let explained: Value = serde_json::from_slice(&out.stdout).unwrap();
    let explained = explained["calls"].as_array().unwrap();
    assert_eq!(explained.len(), received.len());
    for (call, body) in explained.iter().zip(&received) {
        assert_eq!(
            call["request"],
            serde_json::from_str::<Value>(body).unwrap()
        );
    }
}
