//! TypeScript workspaces end to end: the built `trellis` on copies of the
//! `tests/fixtures/ts-*` projects with the real `tsc`, `tsserver` and
//! `node` (pinned by `scripts/install-test-deps.sh`), through `trellis
//! check`, `trellis repair` and the language server. Each project's
//! `node_modules` is laid out as `npm install` would, as links
//! (`tests/fixtures/ts-support/link-node-modules.sh`); only the model is
//! scripted.

use crate::support;
use trellis_test_support::openai_server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use openai_server::{Answer, OpenAiServer};
use serde_json::{Value, json};
use support::model::discount_fix;
use support::repair_loop::ApplyBy;
use support::workspace::{Workspace, branches, stage};
use support::{Client, files_under, neovim_capabilities};
use trellis_engine::ledger::{DecodedRow, Ledger, LedgerEvent};

/// Every file of the workspace but `.trellis/`'s, links by their targets:
/// the `node_modules` links included.
fn tree(ws: &Workspace) -> BTreeMap<PathBuf, Vec<u8>> {
    files_under(ws.path(), &[".trellis"])
}

/// The project's own checks, run in the workspace itself, pass: its `tsc`
/// and its `npm test`.
fn project_checks_pass(root: &Path) -> bool {
    let tsc = Command::new(root.join("node_modules/.bin/tsc"))
        .args(["--noEmit", "--pretty", "false"])
        .current_dir(root)
        .status()
        .unwrap();
    let tests = Command::new("npm")
        .args(["test", "--silent"])
        .current_dir(root)
        .output()
        .unwrap();
    tsc.success() && tests.status.success()
}

/// The sensor fingerprints the workspace's first session recorded.
fn fingerprints(ws: &Workspace) -> Vec<(String, String)> {
    let ledger = Ledger::open(&ws.path().join(".trellis")).unwrap();
    ledger
        .rows()
        .unwrap()
        .into_iter()
        .find_map(|row| match row.event {
            DecodedRow::Ledger(LedgerEvent::SessionStarted(session)) => Some(session.sensors),
            _ => None,
        })
        .expect("a session was ledgered")
        .into_iter()
        .map(|f| (f.tool, f.version))
        .collect()
}

fn committed(ws: &Workspace) -> Value {
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "repair --commit should succeed: {doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    doc
}

/// A repair that ends with nothing written: exit 1 and every file, the
/// `node_modules` links included, as it was.
fn refused(ws: &Workspace) -> Value {
    let before = tree(ws);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 1, "nothing is promoted: {doc:#}");
    assert!(doc["promotion"].is_null(), "{doc:#}");
    assert_eq!(tree(ws), before, "the user's tree must stay byte-identical");
    doc
}

#[test]
fn check_finds_a_missing_import_as_one_cluster_with_the_language_services_fix() {
    let ws = Workspace::of_node_project("ts-missing-import");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(
        stage(&doc, "typescript.typecheck")["status"],
        "failed",
        "{doc:#}"
    );
    assert_eq!(
        stage(&doc, "typescript.test")["status"],
        "failed",
        "{doc:#}"
    );
    let diagnostic = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "TS2304")
        .unwrap_or_else(|| panic!("no TS2304 in {doc:#}"));
    assert_eq!(diagnostic["message"], "Cannot find name 'mean'.");
    assert_eq!(diagnostic["primary"]["path"], "src/report.ts");
    assert_eq!(diagnostic["primary"]["line_start"], 3);
    let fixes: Vec<&str> = diagnostic["suggestions"][0]["alternatives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["message"].as_str().unwrap())
        .collect();
    assert_eq!(fixes[0], "Add import from \"./stats.js\"", "{fixes:?}");
    let titles: Vec<&str> = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "`mean` is not imported",
            "test `summary names the series and its mean` fails"
        ],
        "{doc:#}"
    );
    let sensors = fingerprints(&ws);
    let tsc = &sensors.iter().find(|(tool, _)| tool == "tsc").unwrap().1;
    assert!(
        tsc.starts_with("tsc 5.9.3 (node_modules/.bin); node v"),
        "{tsc}"
    );
    let test = &sensors
        .iter()
        .find(|(tool, _)| tool == "node-test")
        .unwrap()
        .1;
    assert!(test.starts_with("node v"), "{test}");
}

#[test]
fn repair_commits_the_language_services_import_and_the_projects_checks_pass() {
    let ws = Workspace::of_node_project("ts-missing-import");
    let before = tree(&ws);
    let doc = committed(&ws);
    assert!(
        branches(&doc).any(|b| b["outcome"] == "selected" && b["proposer"] == "tsserver-fixes"),
        "the verified route names tsserver: {doc:#}"
    );
    assert_eq!(
        doc["promotion"]["files"],
        json!(["src/report.ts"]),
        "{doc:#}"
    );
    let report = ws.read("src/report.ts");
    assert!(
        report.starts_with("import { mean } from \"./stats.js\";\n"),
        "{report}"
    );
    let mut after = tree(&ws);
    after.remove(Path::new("src/report.ts"));
    let mut unchanged = before;
    unchanged.remove(Path::new("src/report.ts"));
    assert_eq!(
        after, unchanged,
        "only the repaired file changed; node_modules is as it was"
    );
    assert!(project_checks_pass(ws.path()));
}

#[test]
fn repair_takes_the_spelling_fix_for_a_typo() {
    let ws = Workspace::of_node_project("ts-typo");
    committed(&ws);
    assert!(ws.read("src/total.ts").contains("  return sum;\n"));
    assert!(project_checks_pass(ws.path()));
}

#[test]
fn a_failing_test_is_a_counterexample_and_without_a_model_nothing_is_written() {
    let ws = Workspace::of_node_project("ts-failing-test");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(
        stage(&doc, "typescript.typecheck")["status"],
        "passed",
        "{doc:#}"
    );
    assert_eq!(
        stage(&doc, "typescript.test")["status"],
        "failed",
        "{doc:#}"
    );
    let failures = doc["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{doc:#}");
    assert_eq!(failures[0]["binary"], "test/discount.test.ts");
    assert_eq!(failures[0]["name"], "a quarter off 200 is 150");
    let output = failures[0]["output"].as_str().unwrap();
    assert!(output.contains("250 !== 150"), "{output}");
    assert!(
        !output.contains(ws.cache().to_str().unwrap()),
        "no slot path: {output}"
    );
    assert_eq!(failures[0]["location"]["path"], "test/discount.test.ts");
    assert_eq!(
        doc["clusters"][0]["title"],
        "test `a quarter off 200 is 150` fails"
    );
    refused(&ws);
}

#[test]
fn a_model_fixes_the_failing_test_in_its_branch_and_cannot_write_into_node_modules() {
    let server = OpenAiServer::start(discount_fix(vec![Answer::tool_call(
        "write_file",
        json!({ "path": "node_modules/planted.js", "content": "pwned" }),
    )]));
    let ws = Workspace::of_node_project("ts-failing-test");
    ws.with_models(&[&server.base_url]);
    let doc = committed(&ws);
    assert_eq!(
        doc["promotion"]["files"],
        json!(["src/discount.ts"]),
        "{doc:#}"
    );
    assert!(
        ws.read("src/discount.ts")
            .contains("price * (1 - percent / 100)")
    );
    assert!(!ws.path().join("node_modules/planted.js").exists());
    assert!(project_checks_pass(ws.path()));
    // The planted write was answered as a tool error, never performed.
    let requests = server.received();
    let answered = String::from_utf8_lossy(&requests[2].body);
    assert!(answered.contains("node_modules/planted.js"), "{answered}");
}

#[test]
fn a_clean_project_without_node_modules_passes_with_the_tools_on_path() {
    let ws = Workspace::of("ts-clean");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["hard_pass"], true, "{doc:#}");
    assert_eq!(stage(&doc, "typescript.typecheck")["status"], "passed");
    assert_eq!(stage(&doc, "typescript.test")["status"], "passed");
    let sensors = fingerprints(&ws);
    let tsc = &sensors.iter().find(|(tool, _)| tool == "tsc").unwrap().1;
    assert!(tsc.starts_with("tsc 5.9.3 (PATH)"), "{tsc}");
}

#[test]
fn the_language_server_publishes_tsc_errors_and_applies_the_verified_import() {
    const FILE: &str = "src/report.ts";
    let ws = Workspace::of_node_project("ts-missing-import");
    let (mut client, _) = Client::start(ws.path(), neovim_capabilities(), None);
    let diagnostic = client.open_for_diagnostic(FILE, "TS2304");
    assert_eq!(
        diagnostic["range"]["start"],
        json!({ "line": 2, "character": 51 })
    );
    // The client applies the edit the server sends, as an editor does.
    client.repair_and_apply(FILE, &diagnostic, ApplyBy::Command);
    assert!(
        ws.read(FILE)
            .starts_with("import { mean } from \"./stats.js\";\n")
    );
    assert!(project_checks_pass(ws.path()));
    client.shutdown();
}
