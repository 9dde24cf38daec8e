//! A repair writes the files its verified change is about, and nothing the
//! build left in the branch: no `Cargo.lock` appears in a library crate
//! that had none, and a fix that removes the first line leaves no blank
//! line at the top of the file.

use crate::support;

use support::workspace::Workspace;

#[test]
fn a_committed_repair_of_a_crate_without_a_lockfile_writes_no_lockfile() {
    // Local repair continues a branch in place, in the slot cargo has just
    // built (and written a `Cargo.lock` into).
    let ws = Workspace::of("no-lockfile");
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    let changed = support::workspace::changed_paths(&doc);
    assert_eq!(changed, ["src/lib.rs"]);
    assert_eq!(doc["promotion"]["files"], serde_json::json!(["src/lib.rs"]));
    assert!(!ws.path().join("Cargo.lock").exists());
    assert!(ws.read("src/lib.rs").contains("let mut seen"));
}

#[test]
fn removing_an_unused_import_on_line_one_leaves_no_blank_first_line() {
    let ws = Workspace::of("first-line");
    let out = ws.trellis(&["repair", "--commit"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lib = ws.read("src/lib.rs");
    assert!(
        lib.starts_with("/// The only error is the unused import"),
        "{lib}"
    );
}
