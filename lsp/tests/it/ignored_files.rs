//! Verification sees what the user's own tools see: a test file the
//! project's `.gitignore` hides is still compiled and run by the user's
//! `cargo test`, so `trellis repair` must judge candidates with it present,
//! while never editing or writing it (the built binary, real cargo).

use crate::support;

use support::workspace::Workspace;

/// The developer's own test, kept out of git by the fixture's `.gitignore`.
const LOCAL_TEST: &str = "//! Local only: ignored by git, run by `cargo test`.\n\
#[test]\n\
fn run_doubles() {\n    assert_eq!(ignored_fixture(21), 42);\n}\n";

fn with_local_test(fixture: &str, krate: &str) -> Workspace {
    let ws = Workspace::of(fixture);
    assert!(
        ws.read(".gitignore").contains("/tests/local.rs"),
        "the fixture must ignore the local test"
    );
    let test = LOCAL_TEST.replace("ignored_fixture", &format!("{krate}::run"));
    std::fs::create_dir_all(ws.path().join("tests")).unwrap();
    std::fs::write(ws.path().join("tests/local.rs"), test).unwrap();
    ws
}

#[test]
fn a_repair_that_fails_an_ignored_test_is_never_promoted() {
    let ws = with_local_test("ignored-trap", "ignored_trap");
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_ne!(doc["status"], "hard_pass", "{doc:#}");
    assert!(doc["promotion"].is_null(), "{doc:#}");
    assert_eq!(ws.tree(), before, "nothing unverified is written");
    let branch = &doc["steps"][0]["branches"][0];
    assert_eq!(branch["hard_pass"], false, "{doc:#}");
    assert!(
        doc.to_string().contains("run_doubles"),
        "the ignored test's failure is what blocks it: {doc:#}"
    );

    // The same crate without the local test: the same candidate passes, so
    // it was the ignored file, present in the branch, that refused it.
    std::fs::remove_file(ws.path().join("tests/local.rs")).unwrap();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert!(ws.read("src/lib.rs").contains("use crate::approx::scale;"));
}

#[test]
fn an_ignored_test_chooses_the_repair_and_is_never_written() {
    let ws = with_local_test("ignored-test", "ignored_test");
    let local = ws.read("tests/local.rs");
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    let source = ws.read("src/lib.rs");
    assert!(source.contains("use crate::exact::scale;"), "{source}");
    assert_eq!(
        doc["promotion"]["files"],
        serde_json::json!(["src/lib.rs"]),
        "the ignored file is context, never promoted: {doc:#}"
    );
    let changed = support::workspace::changed_paths(&doc);
    assert_eq!(changed, ["src/lib.rs"], "{doc:#}");
    assert_eq!(ws.read("tests/local.rs"), local);
    assert!(
        ws.cargo_test_passes(),
        "the user's own cargo test, ignored test included, passes after the repair"
    );
}
