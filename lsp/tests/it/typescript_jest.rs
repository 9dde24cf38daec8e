//! TypeScript projects tested with jest, end to end (issue 32 item 2): the
//! built `trellis` on copies of the `tests/fixtures/ts-jest-*` projects,
//! whose `test` script compiles before it tests (`tsc -p . && jest dist`),
//! with the real `tsc`, `node` and jest 29.7.0 that
//! `scripts/install-test-deps.sh` installs, each project's `node_modules`
//! laid out as links by `tests/fixtures/ts-support/link-node-modules.sh`.
//! Only the model is scripted.

use crate::support;
use trellis_test_support::openai_server;

use std::process::Command;

use openai_server::OpenAiServer;
use serde_json::{Value, json};
use support::model::discount_fix;
use support::workspace::{Workspace, stage};

const FAILING: &str = "discounted > a quarter off 200 is 150";

/// The project's own `npm test` (its build step, then jest) passes in the
/// workspace itself.
fn npm_test_passes(ws: &Workspace) -> bool {
    Command::new("npm")
        .args(["test", "--silent"])
        .current_dir(ws.path())
        .output()
        .unwrap()
        .status
        .success()
}

fn only_failure(doc: &Value) -> &Value {
    let failures = doc["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{doc:#}");
    &failures[0]
}

#[test]
fn check_names_the_failing_jest_test_by_its_source_file_line_and_message() {
    let ws = Workspace::of_node_project("ts-jest-failing-test");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(stage(&doc, "typescript.typecheck")["status"], "passed");
    let test = stage(&doc, "typescript.test");
    assert_eq!(test["status"], "failed", "{doc:#}");
    assert!(test["flaky"].is_null(), "{doc:#}");
    let failure = only_failure(&doc);
    assert_eq!(
        failure["binary"], "test/discount.test.ts",
        "the source, not dist/test/discount.test.js: {doc:#}"
    );
    assert_eq!(failure["name"], FAILING);
    assert_eq!(failure["location"]["path"], "test/discount.test.ts");
    assert_eq!(failure["location"]["line_start"], 7, "the assertion");
    let output = failure["output"].as_str().unwrap();
    assert!(output.contains("Expected: 150\nReceived: 250"), "{output}");
    assert!(
        !output.contains(ws.cache().to_str().unwrap()),
        "no slot path: {output}"
    );
    assert_eq!(
        failure["rerun"], "failed_again",
        "re-run alone by its escaped name, it fails again: {doc:#}"
    );
    let titles: Vec<&str> = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, [format!("test `{FAILING}` fails")], "{doc:#}");
    assert!(
        !ws.path().join("dist").exists(),
        "the script's build step ran in a branch copy, never in the user's tree"
    );
}

#[test]
fn a_flaky_jest_test_is_rerun_alone_by_its_escaped_name_and_reported_flaky() {
    const FLAKY: &str = "clock > ticks \"60\" times a minute — it's (once)?";
    let ws = Workspace::of_node_project("ts-jest-flaky-test");
    let (code, doc) = ws.json_with(&["check"], &[("FLAKY_TEST_MARKER", ws.flaky_marker())]);
    assert!(ws.flaky_marker().exists(), "the test ran and failed once");
    assert_eq!(code, 1, "a flaky failure still fails the check: {doc:#}");
    let test = stage(&doc, "typescript.test");
    assert_eq!(test["status"], "failed", "{doc:#}");
    assert_eq!(
        test["flaky"],
        json!([format!("test/clock.test.ts::{FLAKY}")]),
        "{doc:#}"
    );
    let failure = only_failure(&doc);
    assert_eq!(failure["name"], FLAKY);
    assert_eq!(failure["rerun"], "passed", "{doc:#}");
}

#[test]
fn a_model_fixes_the_logic_bug_a_jest_test_catches_and_npm_test_passes() {
    let server = OpenAiServer::start(discount_fix(Vec::new()));
    let ws = Workspace::of_node_project("ts-jest-failing-test");
    ws.with_models(&[&server.base_url]);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "repair --commit should succeed: {doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert_eq!(
        doc["promotion"]["files"],
        json!(["src/discount.ts"]),
        "only the source; nothing the build step wrote: {doc:#}"
    );
    assert!(
        ws.read("src/discount.ts")
            .contains("price * (1 - percent / 100)")
    );
    assert!(!ws.path().join("dist").exists());
    assert!(npm_test_passes(&ws));
}

#[test]
fn a_runner_trellis_cannot_read_is_judged_by_its_exit_code_and_the_failure_says_so() {
    // The same project, its tests run by plain `node` instead: no runner
    // whose report Trellis reads.
    let ws = Workspace::of_node_project("ts-jest-failing-test");
    let manifest = ws
        .read("package.json")
        .replace("jest dist", "node dist/test/discount.test.js");
    std::fs::write(ws.path().join("package.json"), manifest).unwrap();
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(
        stage(&doc, "typescript.test")["status"],
        "failed",
        "{doc:#}"
    );
    let failure = only_failure(&doc);
    assert_eq!(failure["binary"], "package.json", "{doc:#}");
    let output = failure["output"].as_str().unwrap();
    assert!(
        output.starts_with(
            "`sh -c \"tsc -p . && node dist/test/discount.test.js\"` wrote no report from Node's \
             test runner; its tests are judged by its exit code:"
        ),
        "{output}"
    );
}
