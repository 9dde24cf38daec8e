//! More TypeScript workspaces end to end (issue 12's leftovers): the built
//! `trellis` on copies of the `tests/fixtures/ts-*` projects with the real
//! `tsc`, `tsserver` and `node` that `scripts/install-test-deps.sh` pins,
//! each project's `node_modules` laid out as links by
//! `tests/fixtures/ts-support/link-node-modules.sh`, as in
//! `tests/typescript.rs`.

mod support;

use std::process::Command;

use serde_json::{Value, json};
use support::workspace::{Workspace, fixture};

/// A copy of the fixture `name` with its `node_modules` linked in.
fn project(name: &str) -> Workspace {
    let ws = Workspace::of(name);
    let linked = Command::new("bash")
        .arg(fixture("ts-support/link-node-modules.sh"))
        .arg(ws.path())
        .status()
        .expect("bash runs");
    assert!(linked.success(), "linking node_modules into {name} failed");
    ws
}

/// `trellis <args> --format json` with `FLAKY_TEST_MARKER` naming a file in
/// the private cache: the flaky fixture's test fails until it exists.
fn json_with_marker(ws: &Workspace, args: &[&str]) -> (i32, Value) {
    let out = ws
        .command(args)
        .args(["--format", "json"])
        .env("FLAKY_TEST_MARKER", ws.cache().join("flaky-marker"))
        .output()
        .expect("the trellis binary runs");
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    (out.status.code().unwrap(), doc)
}

fn stage<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == name)
        .unwrap_or_else(|| panic!("no stage {name} in {doc:#}"))
}

/// Item 1: `typescript.test` is declared nondeterministic by default, so
/// the test that fails on its first run is re-run once, alone, by its
/// escaped name, passes, and is reported flaky: still failing the stage.
#[test]
fn a_flaky_node_test_is_rerun_by_name_and_reported_flaky() {
    const FLAKY: &str = "clock > ticks (60 times) per minute?";
    let ws = project("ts-flaky-test");
    let (code, doc) = json_with_marker(&ws, &["check"]);
    assert!(
        ws.cache().join("flaky-marker").exists(),
        "the test ran and failed once"
    );
    assert_eq!(code, 1, "a flaky failure still fails the check: {doc:#}");
    let test = stage(&doc, "typescript.test");
    assert_eq!(test["status"], "failed", "{doc:#}");
    assert_eq!(
        test["flaky"],
        json!([format!("test/clock.test.ts::{FLAKY}")]),
        "{doc:#}"
    );
    let failures = doc["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{doc:#}");
    assert_eq!(failures[0]["name"], FLAKY);
    assert_eq!(failures[0]["rerun"], "passed", "{doc:#}");
}

/// Item 1, the other side: a test that fails every time fails again when
/// re-run, so it is evidence, not flaky.
#[test]
fn a_deterministic_node_test_failure_fails_again_and_is_not_flaky() {
    let ws = project("ts-failing-test");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    let test = stage(&doc, "typescript.test");
    assert_eq!(test["status"], "failed", "{doc:#}");
    assert!(test["flaky"].is_null(), "{doc:#}");
    let failures = doc["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{doc:#}");
    assert_eq!(failures[0]["name"], "a quarter off 200 is 150");
    assert_eq!(failures[0]["rerun"], "failed_again", "{doc:#}");
}
