//! What a repair that met a flaky test shows, for the flaky-test tests of
//! every language (`search_rules.rs` for cargo, `python.rs` for pytest): the
//! stage report of the first branch, the no-goods of the ledger, and the
//! check that a flaky failure was reported and supports no no-good. It only
//! reads reports and the ledger.

use serde_json::Value;
use trellis_engine::ledger::SearchEvent;

use super::workspace::Workspace;

/// The report of `stage` in the first branch of the first step of a
/// `repair --format json` report.
pub fn first_branch_stage(doc: &Value, stage: &str) -> Value {
    doc["steps"][0]["branches"][0]["stages"]
        .as_array()
        .and_then(|stages| stages.iter().find(|s| s["stage"] == stage))
        .cloned()
        .unwrap_or_else(|| panic!("no {stage} stage in the first branch: {doc:#}"))
}

/// How many no-goods `events` record.
pub fn no_goods(events: &[SearchEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, SearchEvent::NoGoodRecorded { .. }))
        .count()
}

/// The first branch's `stage` failed with exactly the tests `flaky` as its
/// flaky tests (in any order: tests finish in no fixed one), the ledger
/// records them with the measurement, and no no-good was recorded: a flaky
/// failure is no evidence. Returns the workspace's search events for
/// further checks.
pub fn assert_flaky_and_no_no_good(
    ws: &Workspace,
    doc: &Value,
    stage: &str,
    flaky: &[&str],
) -> Vec<SearchEvent> {
    let mut expected: Vec<String> = flaky.iter().map(|&name| name.to_owned()).collect();
    expected.sort();
    let sorted = |names: Vec<String>| {
        let mut names = names;
        names.sort();
        names
    };
    let report = first_branch_stage(doc, stage);
    assert_eq!(report["status"], "failed", "{doc:#}");
    let reported: Vec<String> = serde_json::from_value(report["flaky"].clone()).unwrap_or_default();
    assert_eq!(sorted(reported), expected, "{doc:#}");
    let events = ws.search_events();
    assert_eq!(no_goods(&events), 0, "a flaky failure is no evidence");
    assert!(
        events.iter().any(|e| matches!(e,
            SearchEvent::BranchCandidateMeasured { flaky: measured, .. } if sorted(measured.clone()) == expected)),
        "the ledger records the flaky tests with the measurement"
    );
    events
}
