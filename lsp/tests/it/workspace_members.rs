//! A workspace of several packages measured through the shipped binary with
//! the real cargo: a state's evidence does not depend on how cargo
//! scheduled its packages (issue 36, item 8). Cargo stops at the first
//! package that fails unless it is told to keep going, so without
//! `--keep-going` one run of the same state reported one broken dependent
//! and the next both. A library's fix that lets its dependents be compiled
//! is measured on more of the workspace than the state it started from, so
//! it is continued, never compared or held against (issue 37, item 0).

use serde_json::Value;

use crate::support;

use support::kill::{count_rows, kill_repair_when};
use support::workspace::Workspace;
use trellis_engine::ledger::SearchEvent;

/// What a `check` or a branch says about a state: its energy, and each
/// diagnostic's file and line and each cluster's title, in order.
fn evidence(doc: &Value) -> (String, Vec<String>, Vec<String>) {
    let energy = format!("{:.2}", doc["energy"].as_f64().unwrap());
    let diagnostics = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| format!("{}:{}", d["primary"]["path"], d["primary"]["line_start"]))
        .collect();
    let titles = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap().to_owned())
        .collect();
    (energy, diagnostics, titles)
}

/// The library fixed and both dependents broken, checked three times with
/// one job and three times with two: every run reports both dependents'
/// errors, in the same order, at the same energy. With one job and no
/// `--keep-going`, cargo reports only the dependent it compiled first.
#[test]
fn a_fixed_library_with_two_broken_dependents_measures_the_same_every_time() {
    let ws = Workspace::of("three-members");
    let library = ws.read("words/src/lib.rs").replacen(
        "\n/// How often",
        "\nuse std::collections::HashMap;\n\n/// How often",
        1,
    );
    assert!(library.contains("use std::collections::HashMap;"));
    std::fs::write(ws.path().join("words/src/lib.rs"), library).unwrap();

    let mut seen = Vec::new();
    for jobs in ["1", "1", "1", "2", "2", "2"] {
        let (code, doc) = ws.json_with(&["check"], &[("CARGO_BUILD_JOBS", jobs)]);
        assert_eq!(code, 1, "{doc:#}");
        seen.push((jobs, evidence(&doc)));
    }
    let (_, first) = &seen[0];
    assert_eq!(first.0, "3.00", "two borrow errors of 1.5: {seen:#?}");
    assert!(
        first.1.iter().any(|d| d.contains("report/src/lib.rs"))
            && first.1.iter().any(|d| d.contains("tally/src/lib.rs")),
        "both dependents: {seen:#?}"
    );
    for (jobs, evidence) in &seen {
        assert_eq!(
            evidence, first,
            "-j{jobs} measured another state: {seen:#?}"
        );
    }
}

/// The broken library's import is a fix that makes both dependents
/// compile, with both of their errors in its measurement: measured on more
/// of the workspace than the state it started from, it is not compared
/// with it but kept, and the repair goes on from it to fix each dependent
/// in the same step and writes a workspace whose tests pass.
#[test]
fn a_library_and_the_dependents_it_hid_are_repaired_in_one_step() {
    let ws = Workspace::of("three-members");
    let (code, doc) = ws.json_with(&["repair", "--commit"], &[("CARGO_BUILD_JOBS", "1")]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    let first = &doc["steps"][0]["branches"][0];
    assert_eq!(first["energy"].as_f64(), Some(3.0), "{doc:#}");
    assert_eq!(first["outcome"], "partial", "{doc:#}");
    let clusters: Vec<&str> = first["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        clusters.iter().any(|c| c.contains("report/src/lib.rs"))
            && clusters.iter().any(|c| c.contains("tally/src/lib.rs")),
        "{clusters:?}"
    );
    assert_eq!(doc["steps"].as_array().unwrap().len(), 1, "{doc:#}");
    assert!(ws.cargo_test_passes());
}

/// `trellis repair --commit` on `hidden-dependents` hard-passes and writes
/// the three fixes: the library's missing `mut`, the first dependent's
/// missing borrow and the second's missing `mut`. Returns the JSON report.
fn repair_writes_all_three(ws: &Workspace) -> serde_json::Value {
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    for (file, fixed) in [
        ("core/src/lib.rs", "let mut words"),
        ("a/src/lib.rs", "distinct(&text)"),
        ("b/src/lib.rs", "let mut best"),
    ] {
        assert!(ws.read(file).contains(fixed), "{file}: {doc:#}");
    }
    doc
}

/// A library missing a `mut` and two dependents with bugs of their own (a
/// missing borrow, a missing `mut`), repaired with the default settings.
/// While the library does not build, cargo compiles neither dependent, so
/// the library's fix is measured on more of the workspace than the state it
/// started from: it reveals two errors for the one it fixed. That is no
/// comparison of like with like, so it is neither "no descent" nor a
/// no-good: the repair continues from it, fixes what it revealed, and
/// writes the three fixes once the whole workspace passes.
#[test]
fn a_library_fix_that_reveals_its_dependents_errors_is_continued_and_all_three_are_written() {
    let ws = Workspace::of("hidden-dependents");
    let doc = repair_writes_all_three(&ws);
    let library_fix = support::workspace::branches(&doc).next().expect("a branch");
    assert_eq!(library_fix["outcome"], "partial", "{doc:#}");
    assert_eq!(
        library_fix["revealed"],
        serde_json::json!(["hd-a", "hd-b"]),
        "{doc:#}"
    );
    let reason = library_fix["reason"].as_str().unwrap();
    assert!(
        reason.contains("reveals errors in `hd-a`, `hd-b`, which could not be checked before"),
        "{reason}"
    );
    let kept_reasons: Vec<String> = ws
        .search_events_named("partial_checkpointed")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        kept_reasons[0].contains("measured on more of the workspace, not compared"),
        "the ledger says why the fix was kept: {kept_reasons:#?}"
    );
    assert!(
        ws.search_events_named("no_good_recorded").is_empty(),
        "{:#?}",
        ws.search_events_named("no_good_recorded")
    );
    assert!(ws.cargo_test_passes());

    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 0, "the written workspace checks clean: {doc:#}");
    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0, "nothing is left to repair: {doc:#}");
}

/// Killed once the library's fix was kept for what it revealed, the next
/// repair resumes the search (its budget carried over, never refilled):
/// nothing was held against the fix, so it is measured again and the three
/// fixes are written, and the ledger still replays.
#[test]
fn a_repair_killed_after_the_library_fix_was_kept_resumes_and_writes_all_three() {
    let ws = Workspace::of("hidden-dependents");
    kill_repair_when(&ws, "after the library's fix was kept", |db| {
        count_rows(db, "payload LIKE '%\"kind\":\"partial_checkpointed\"%'") > 0
    });
    let killed = ws
        .search_events_named("search_opened")
        .into_iter()
        .find_map(|e| match e {
            SearchEvent::SearchOpened { forest_id, .. } => Some(forest_id),
            _ => None,
        })
        .expect("the killed repair opened a forest");

    repair_writes_all_three(&ws);
    assert!(
        ws.search_events().iter().any(|e| matches!(e,
            SearchEvent::SearchOpened { resumed_from: Some(from), .. } if *from == killed)),
        "the search was resumed"
    );
    assert!(ws.search_events_named("no_good_recorded").is_empty());
    let replay = ws.trellis(&["ledger", "replay"]);
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
}
