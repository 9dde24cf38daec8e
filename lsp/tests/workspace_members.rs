//! A workspace of several packages measured through the shipped binary with
//! the real cargo: a state's evidence does not depend on how cargo
//! scheduled its packages (issue 36, item 8). Cargo stops at the first
//! package that fails unless it is told to keep going, so without
//! `--keep-going` one run of the same state reported one broken dependent
//! and the next both.

use serde_json::Value;

mod support;

use support::workspace::Workspace;

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
/// compile, and counts as a descent with both of their errors in its
/// measurement; the repair goes on to fix each dependent and writes a
/// workspace whose tests pass.
#[test]
fn a_library_and_the_dependents_it_hid_are_repaired_step_by_step() {
    let ws = Workspace::of("three-members");
    let (code, doc) = ws.json_with(&["repair", "--commit"], &[("CARGO_BUILD_JOBS", "1")]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    let first = &doc["steps"][0]["branches"][0];
    assert_eq!(first["energy"].as_f64(), Some(3.0), "{doc:#}");
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
    assert_eq!(doc["steps"].as_array().unwrap().len(), 3, "{doc:#}");
    assert!(ws.cargo_test_passes());
}
