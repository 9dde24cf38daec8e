//! System 20's conditions end to end, through the shipped binary on real
//! fixture crates and the real cargo, each with the fault that makes it
//! hold injected and a control run without it: a branch whose slot a build
//! rewrote beyond what its probe touched is contained (`branch_contained`),
//! and a branch whose required stage could not run leaves an empty
//! correction packet, which fires the `EmptyCorrection` trigger for the
//! branch opened after it.

use serde_json::Value;
use trellis_engine::ledger::SearchEvent;

use crate::support;

use support::workspace::Workspace;

/// A build script that rewrites a tracked file of its package on every
/// build, as a code generator writing into the source tree does.
const REWRITING_BUILD_SCRIPT: &str = r#"fn main() {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").unwrap();
    let generated = std::path::Path::new(&manifest).join("generated.txt");
    std::fs::write(generated, "written by build.rs\n").unwrap();
}
"#;

/// `(branch_id, reason)` of every `branch_contained` event.
fn contained(events: &[SearchEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            SearchEvent::BranchContained {
                branch_id,
                certificate_id,
                reason,
                ..
            } => {
                assert!(!certificate_id.is_empty(), "a certificate names it");
                Some((branch_id.clone(), reason.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Branch slot `n` of the workspace in its private cache:
/// `<cache>/ws-<id>/slots/branch-<n>/<the workspace's path>`.
fn branch_slot(ws: &Workspace, n: usize) -> std::path::PathBuf {
    let sets: Vec<_> = std::fs::read_dir(ws.cache())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("ws-"))
        .collect();
    assert_eq!(sets.len(), 1, "one slot set: {sets:?}");
    let workspace = ws.path().canonicalize().unwrap();
    sets[0]
        .join("slots")
        .join(format!("branch-{n}"))
        .join(workspace.strip_prefix("/").unwrap())
}

/// The first forest of `trellis status --format json`.
fn first_forest(ws: &Workspace) -> Value {
    let (code, status) = ws.json(&["status"]);
    assert_eq!(code, 0, "{status:#}");
    status["forests"][0].clone()
}

/// The many-alternatives crate is narrowed by a diagnostic probe: each
/// alternative is applied alone in branch b1's slot, built, and the slot is
/// synced back to its seed under a reservation of the files the probe
/// touched. With a build script that rewrites `generated.txt`, the sync
/// must also rewrite that file: more than was reserved, so b1 is contained
/// (its slot removed, its certificate ledgered, `status` showing why), and
/// nothing reaches the user's files. Without the build script (the
/// control), the same probe syncs within its reservation and b1 is selected.
#[test]
fn a_branch_whose_build_rewrote_its_sources_is_contained_and_only_then() {
    let ws = Workspace::of("many-alternatives");
    std::fs::write(ws.path().join("build.rs"), REWRITING_BUILD_SCRIPT).unwrap();
    std::fs::write(ws.path().join("generated.txt"), "committed\n").unwrap();
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_ne!(code, 0, "a contained probe verifies nothing: {doc:#}");
    assert!(doc["promotion"].is_null(), "{doc:#}");
    assert_eq!(ws.tree(), before, "the user's files are untouched");
    let branches = doc["steps"][0]["branches"].as_array().unwrap();
    assert_eq!(branches[0]["branch_id"], "b1", "{doc:#}");
    assert_eq!(branches[0]["strategy"], "diagnostic_probe", "{doc:#}");
    assert!(
        branches[0]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("contained:")),
        "{doc:#}"
    );

    let events = ws.search_events();
    let fired = contained(&events);
    assert_eq!(
        fired.first().map(|(branch, _)| branch.as_str()),
        Some("b1"),
        "{events:#?}"
    );
    assert!(
        fired[0].1.contains("more than the probe touched"),
        "{fired:?}"
    );
    assert!(
        !events.iter().any(|e| matches!(e,
            SearchEvent::BranchObservation { branch_id, observation, .. }
                if branch_id == "b1" && observation.starts_with("probe #2 "))),
        "b1 was stopped at its first probe"
    );
    let forest = first_forest(&ws);
    let b1 = forest["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["branch_id"] == "b1")
        .cloned()
        .unwrap_or_else(|| panic!("{forest:#}"));
    assert_eq!(b1["state"], "abandoned", "{forest:#}");
    assert_eq!(b1["reason"], fired[0].1.as_str(), "{forest:#}");
    assert!(
        !branch_slot(&ws, 1).exists(),
        "the contained branch's workspace is removed"
    );

    // The control: the same probe without the rewriting build script.
    let control = Workspace::of("many-alternatives");
    let (code, doc) = control.json(&["repair"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["steps"][0]["branches"][0]["outcome"], "selected");
    assert_eq!(contained(&control.search_events()), vec![]);
    assert_eq!(first_forest(&control)["branches"][0]["state"], "committed");
}

/// The `reason` of each `branch_strategy_selected` event, by branch id.
fn strategy_reasons(events: &[SearchEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            SearchEvent::BranchStrategySelected {
                branch_id, reason, ..
            } => Some((branch_id.clone(), reason.clone())),
            _ => None,
        })
        .collect()
}

/// Why branch `b2` was opened.
fn why_b2(ws: &Workspace) -> String {
    strategy_reasons(&ws.search_events())
        .into_iter()
        .find_map(|(branch, reason)| (branch == "b2").then_some(reason))
        .unwrap_or_else(|| panic!("no b2 was opened: {:#?}", ws.search_events()))
}

/// The ambiguous import: b1 imports `approx::scale` and b2, opened because
/// b1 is ineligible, imports `exact::scale`. Here `approx::scale` hangs, so
/// b1's test stage is stopped at its deadline: a required stage that could
/// not run, whose residual carries neither a diagnostic nor a failing
/// test. b2 is opened on `ineligible measurement` and `empty correction
/// packet`, and verifies. In the control (the fixture as it is), b1's test
/// fails with an assertion: a descent that is no hard pass, with a
/// counterexample, so b2 is opened because the other import is unmeasured,
/// and never on an empty correction.
#[test]
fn an_unmeasurable_branch_fires_the_empty_correction_trigger_and_a_failing_one_does_not() {
    let ws = Workspace::of("ambiguous-import");
    let source = ws.read("src/lib.rs").replace(
        "        x * 2 + 1\n",
        "        loop {\n            std::thread::sleep(std::time::Duration::from_secs(1));\n        }\n",
    );
    assert!(source.contains("loop {"), "the fixture changed: {source}");
    std::fs::write(ws.path().join("src/lib.rs"), source).unwrap();
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[stages]\ntest_timeout_secs = 30\n",
    )
    .unwrap();

    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    let branches = doc["steps"][0]["branches"].as_array().unwrap();
    assert!(
        branches[0]["label"].as_str().unwrap().contains("approx"),
        "{doc:#}"
    );
    let test = branches[0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "test")
        .cloned()
        .unwrap();
    assert_eq!(test["status"], "unavailable", "{doc:#}");
    let why = why_b2(&ws);
    assert!(
        why.starts_with("ineligible measurement, empty correction packet"),
        "{why}"
    );

    let control = Workspace::of("ambiguous-import");
    let (code, doc) = control.json(&["repair"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    let why = why_b2(&control);
    assert!(why.starts_with("a descent, not a hard pass"), "{why}");
    assert!(!why.contains("empty correction packet"), "{why}");
}
