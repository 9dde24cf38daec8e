//! End-to-end tests of the headless CLI: the built `trellis` binary on copies
//! of the fixture crates in `tests/fixtures/`, with the real cargo.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support;

use support::kill::{count_rows, in_its_second_step, kill_repair_when};
use support::workspace::Workspace;

fn committed(ws: &Workspace) -> Value {
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "repair --commit should succeed: {doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    doc
}

#[test]
fn repair_adds_a_missing_mut() {
    let ws = Workspace::of("missing-mut");
    committed(&ws);
    assert!(ws.read("src/lib.rs").contains("let mut sum = 0;"));
    assert!(ws.cargo_test_passes());
}

#[test]
fn repair_adds_a_missing_std_import() {
    let ws = Workspace::of("missing-import");
    let doc = committed(&ws);
    assert!(
        ws.read("src/lib.rs")
            .starts_with("use std::collections::HashMap;")
    );
    assert_eq!(doc["promotion"]["files"], serde_json::json!(["src/lib.rs"]));
    assert!(ws.cargo_test_passes());
}

#[test]
fn an_ambiguous_import_is_decided_by_the_crates_own_test() {
    let ws = Workspace::of("ambiguous-import");
    let doc = committed(&ws);
    let source = ws.read("src/lib.rs");
    assert!(source.contains("use crate::exact::scale;"), "{source}");
    assert!(!source.contains("use crate::approx::scale;"));
    let branches = doc["steps"][0]["branches"].as_array().unwrap();
    assert_eq!(branches.len(), 2, "one branch per alternative: {doc:#}");
    let approx = branches
        .iter()
        .find(|b| b["label"].as_str().unwrap().contains("approx"))
        .unwrap();
    assert_eq!(approx["hard_pass"], false);
    assert_ne!(approx["outcome"], "selected");
    assert!(ws.cargo_test_passes());
}

#[test]
fn a_candidate_that_compiles_but_fails_a_test_is_never_promoted() {
    let ws = Workspace::of("trap");
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_ne!(doc["status"], "hard_pass");
    assert!(doc["promotion"].is_null());
    assert_eq!(
        ws.tree(),
        before,
        "the user's tree must stay byte-identical"
    );
}

#[test]
fn a_cascade_of_hundreds_of_errors_is_one_cluster() {
    let ws = Workspace::of("cascade");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1);
    let clusters = doc["clusters"].as_array().unwrap();
    let errors: Vec<&Value> = clusters
        .iter()
        .filter(|c| c["class"] != "warning")
        .collect();
    assert_eq!(errors.len(), 1, "{clusters:#?}");
    let sites = errors[0]["sites"].as_array().unwrap().len();
    assert!(sites >= 100, "expected a cascade, got {sites} sites");
    assert_eq!(
        errors[0]["title"],
        format!("`Point` is not imported ({sites} sites)")
    );
    committed(&ws);
    assert!(ws.cargo_test_passes());
}

#[test]
fn a_repair_can_take_two_accepted_steps() {
    let ws = Workspace::of("two-steps");
    let doc = committed(&ws);
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{doc:#}");
    assert_eq!(steps[0]["decision"]["verdict"], "accepted_descent");
    assert_eq!(steps[1]["decision"]["verdict"], "accepted_hard_pass");
    let source = ws.read("src/lib.rs");
    assert!(source.contains("use std::collections::HashMap;") && source.contains("let mut counts"));
    assert!(ws.cargo_test_passes());
}

#[test]
fn an_ineligible_branch_is_kept_as_a_partial_checkpoint_and_local_repair_continues_it() {
    let ws = Workspace::of("local-repair");
    let doc = committed(&ws);
    let steps = doc["steps"].as_array().unwrap();
    let first = steps[0]["branches"].as_array().unwrap();
    // b1 imports `HashSet`; the two borrow errors it reveals weigh as much as
    // the import did, so it does not descend but is kept ...
    assert_eq!(first[0]["outcome"], "partial", "{doc:#}");
    assert_eq!(first[0]["strategy"], "apply_suggestions");
    // ... and the same branch's next quantum repairs one of them locally.
    assert_eq!(first[1]["branch_id"], first[0]["branch_id"]);
    assert_eq!(first[1]["strategy"], "local_repair");
    assert_eq!(first[1]["outcome"], "selected");
    assert_eq!(steps[0]["decision"]["verdict"], "accepted_descent");
    assert_eq!(
        steps.last().unwrap()["decision"]["verdict"],
        "accepted_hard_pass"
    );
    let source = ws.read("src/lib.rs");
    assert!(
        source.contains("use std::collections::HashSet;")
            && source.contains("let mut seen")
            && source.contains("let mut total"),
        "{source}"
    );
    assert!(ws.cargo_test_passes());

    // The ledger says so: the checkpoint, and a strategy event for the
    // continuation, inside the step's forest; never in the accepted fold.
    let (code, rows) = ws.json(&["ledger", "replay"]);
    assert_eq!(code, 0, "{rows:#}");
    let text = rows.to_string();
    assert!(
        !text.contains("/partial/"),
        "a partial is never accepted: {text}"
    );
    let events = search_events(&ledger_rows(&ws));
    let names: Vec<&str> = events.iter().map(|e| e.name()).collect();
    let checkpoint = names
        .iter()
        .position(|n| *n == "partial_checkpointed")
        .unwrap_or_else(|| panic!("no checkpoint: {names:?}"));
    assert!(
        names[checkpoint..].contains(&"branch_strategy_selected"),
        "the continuation is a recorded strategy choice: {names:?}"
    );
}

#[test]
fn a_branch_out_of_local_retries_seeds_a_child_from_its_partial_checkpoint() {
    let ws = Workspace::of("local-repair");
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[exploration]\nlocal_retries = 0\n",
    )
    .unwrap();
    let doc = committed(&ws);
    let first = doc["steps"][0]["branches"].as_array().unwrap();
    assert_eq!(first[0]["outcome"], "partial", "{doc:#}");
    // No retry in place: a second branch continues the checkpoint instead.
    assert_eq!(first[1]["branch_id"], "b2", "{doc:#}");
    assert_eq!(first[1]["strategy"], "local_repair");
    assert_eq!(first[1]["outcome"], "selected");

    let events = search_events(&ledger_rows(&ws));
    let checkpoint_root = events
        .iter()
        .find_map(|e| match e {
            SearchEvent::PartialCheckpointed {
                branch_id, root, ..
            } if branch_id == "b1" => Some(*root),
            _ => None,
        })
        .expect("b1 was checkpointed");
    let (parent, seed) = events
        .iter()
        .find_map(|e| match e {
            SearchEvent::BranchForked {
                branch_id,
                parent,
                seed,
                ..
            } if branch_id == "b2" => Some((parent.clone(), *seed)),
            _ => None,
        })
        .expect("b2 was forked");
    assert_eq!(
        parent.as_deref(),
        Some("b1"),
        "its lineage is the checkpoint's"
    );
    assert_eq!(seed, checkpoint_root, "it was copied from the checkpoint");
    assert!(ws.read("src/lib.rs").contains("let mut total"));
    assert!(ws.cargo_test_passes());
}

#[test]
fn a_cluster_with_no_eligible_branch_gives_way_to_the_next_cluster() {
    let ws = Workspace::of("next-cluster");
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 1, "residuals remain: {doc:#}");
    let steps = doc["steps"].as_array().unwrap();
    // The import makes things worse and nothing it reveals is worth keeping
    // ...
    assert!(
        steps[0]["cluster_title"]
            .as_str()
            .unwrap()
            .contains("`Reading` is not imported"),
        "{doc:#}"
    );
    assert!(steps[0]["decision"].is_null());
    // ... so the missing `mut` gets its own forest and is accepted.
    assert!(
        steps[1]["cluster_title"]
            .as_str()
            .unwrap()
            .contains("`acc`"),
        "{doc:#}"
    );
    assert_eq!(steps[1]["decision"]["verdict"], "accepted_descent");
    assert_eq!(doc["status"], "residuals_remain");
    assert_eq!(ws.tree(), before, "no hard pass, nothing written");
}

#[test]
fn a_choice_with_more_alternatives_than_branches_is_narrowed_by_a_diagnostic_probe() {
    // rustc offers fifteen `Iter`s; `std::slice::Iter` is far down the list,
    // beyond what three branches could try one by one.
    let ws = Workspace::of("many-alternatives");
    let doc = committed(&ws);
    let branches = doc["steps"][0]["branches"].as_array().unwrap();
    assert_eq!(branches.len(), 1, "one branch, probed: {doc:#}");
    assert_eq!(branches[0]["strategy"], "diagnostic_probe");
    assert_eq!(branches[0]["outcome"], "selected");
    assert!(ws.read("src/lib.rs").contains("use std::slice::Iter;"));
    assert!(ws.cargo_test_passes());

    // Each alternative was probed by a narrowed, reserved build run, recorded
    // as an observation and never as a decision.
    let events = search_events(&ledger_rows(&ws));
    let probes = events
        .iter()
        .filter(|e| {
            matches!(e, SearchEvent::BranchObservation { observation, .. }
                if observation.starts_with("probe #") && observation.contains("build energy"))
        })
        .count();
    assert_eq!(probes, 15, "every one of rustc's fifteen `Iter`s is probed");
    let usage = events
        .iter()
        .rev()
        .find_map(|e| match e {
            SearchEvent::SearchUsageSnapshot { usage, .. } => Some(usage.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        usage["verifier_runs"],
        probes as u64 + 1,
        "the probes and the final measurement are each one reserved verifier run"
    );
    let (_, replay) = ws.json(&["ledger", "replay"]);
    assert_eq!(
        replay["decisions"].as_array().map(Vec::len),
        Some(1),
        "{replay:#}"
    );
}

#[test]
fn a_two_member_workspace_is_repaired_in_the_right_member() {
    let ws = Workspace::of("two-members");
    let doc = committed(&ws);
    assert_eq!(
        doc["promotion"]["files"],
        serde_json::json!(["app/src/lib.rs"])
    );
    assert!(ws.read("app/src/lib.rs").contains("let mut acc = 0;"));
    assert!(ws.cargo_test_passes());
}

#[test]
fn warnings_alone_are_nothing_to_repair() {
    let ws = Workspace::of("warnings-only");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["hard_pass"], true);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0);
    assert_eq!(doc["status"], "already_clean");
}

#[test]
fn without_commit_nothing_is_written() {
    let ws = Workspace::of("missing-mut");
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0);
    assert_eq!(doc["status"], "hard_pass");
    assert_eq!(doc["changes"].as_array().unwrap().len(), 1);
    assert_eq!(ws.tree(), before);
}

#[test]
fn human_output_shows_clusters_branches_and_the_diff() {
    let ws = Workspace::of("missing-mut");
    let out = ws.trellis(&["repair"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("cannot borrow `sum` as mutable"), "{text}");
    assert!(text.contains("b1"), "{text}");
    assert!(text.contains("+    let mut sum = 0;"), "{text}");
    assert!(text.contains("not written: run with --commit"), "{text}");
}

#[test]
fn an_invalid_configuration_names_the_file_and_key() {
    let ws = Workspace::of("missing-mut");
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[exploration]\nmax_branches = 9\n",
    )
    .unwrap();
    let out = ws.trellis(&["check"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("trellis.toml") && err.contains("exploration.max_branches"),
        "{err}"
    );
}

#[test]
fn ledger_verify_accepts_an_intact_chain_and_names_a_tampered_event() {
    let ws = Workspace::of("missing-mut");
    committed(&ws);
    let out = ws.trellis(&["ledger", "verify"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let db = rusqlite::Connection::open(ws.path().join(".trellis/ledger.db")).unwrap();
    let seq: i64 = db
        .query_row(
            "SELECT seq FROM events WHERE kind = 'gate_decision_recorded' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    // A tamperer with the file can drop the append-only trigger; the chain still tells.
    db.execute_batch("DROP TRIGGER events_are_never_updated")
        .unwrap();
    db.execute(
        "UPDATE events SET payload = replace(payload, 'accepted', 'rejected') WHERE seq = ?1",
        [seq],
    )
    .unwrap();
    drop(db);
    let out = ws.trellis(&["ledger", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(&format!("event {seq}")), "{err}");
}

#[test]
fn ledger_replay_folds_the_accepted_trajectory_without_running_anything() {
    let ws = Workspace::of("two-steps");
    committed(&ws);
    // With no toolchain on PATH and the sources gone, replay can only read the ledger.
    std::fs::remove_dir_all(ws.path().join("src")).unwrap();
    let empty_path = tempfile::tempdir().unwrap();
    let out = ws
        .command(&["ledger", "replay", "--format", "json"])
        .env("PATH", empty_path.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let decisions = doc["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 2, "{doc:#}");
    assert!(
        decisions[0]["candidate_id"]
            .as_str()
            .unwrap()
            .ends_with("/0/c1")
    );
    assert_eq!(doc["promotions"].as_array().unwrap().len(), 1);
}

// ---------------------------------------------------------------------------
// The search plane at runtime: status, gates W and AC, crash and resume
// ---------------------------------------------------------------------------

use trellis_engine::ledger::{
    DecodedRow, InterruptedForest, Ledger, LedgerEvent, NoGoodRecord, Row, SearchEvent, fold_resume,
};

/// The ambiguous import, with the wrong alternative also mistyped: trying it
/// trades the unresolved name (energy 3) for a wrong-arity call and a
/// mismatched type (energy 4) the compiler offers no fix for, which is no
/// descent under the default ρ, with deterministic evidence, so the search
/// records an exact no-good before it tries the right one.
fn ambiguous_with_a_mistyped_alternative() -> Workspace {
    let ws = Workspace::of("ambiguous-import");
    let source = ws.read("src/lib.rs").replace(
        "pub fn scale(x: u32) -> u32 {\n        x * 2 + 1",
        "pub fn scale(x: u32, y: u32) -> String {\n        format!(\"{}\", x * 2 + y)",
    );
    assert!(source.contains("y: u32"), "the fixture changed: {source}");
    std::fs::write(ws.path().join("src/lib.rs"), source).unwrap();
    ws
}

fn ledger_rows(ws: &Workspace) -> Vec<Row> {
    Ledger::open(&ws.path().join(".trellis"))
        .unwrap()
        .rows()
        .unwrap()
}

fn search_events(rows: &[Row]) -> Vec<SearchEvent> {
    rows.iter()
        .filter_map(|row| match &row.event {
            DecodedRow::Search { event, .. } => Some(event.clone()),
            _ => None,
        })
        .collect()
}

fn counters_cover(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> bool {
    b.iter().all(|(k, v)| a.get(k).copied().unwrap_or(0) >= *v)
}

/// Gate AC's predicate over a real ledger: per forest, every fork and
/// every measurement follows a usage snapshot that already charges it,
/// snapshots never decrease and never exceed the limits, and nothing
/// follows `search_closed`.
fn assert_gate_ac(rows: &[Row]) {
    struct Forest {
        limits: BTreeMap<String, u64>,
        usage: BTreeMap<String, u64>,
        forks: u64,
        measured: u64,
        closed: bool,
    }
    let mut forests: BTreeMap<String, Forest> = BTreeMap::new();
    for event in search_events(rows) {
        let id = event.forest_id().to_owned();
        if let SearchEvent::SearchOpened { limits, .. } = &event {
            forests.insert(
                id,
                Forest {
                    limits: limits.clone(),
                    usage: BTreeMap::new(),
                    forks: 0,
                    measured: 0,
                    closed: false,
                },
            );
            continue;
        }
        let f = forests.get_mut(&id).expect("event for an opened forest");
        assert!(!f.closed, "{} after search_closed of {id}", event.name());
        let charged = |f: &Forest, key: &str| f.usage.get(key).copied().unwrap_or(0);
        match &event {
            SearchEvent::SearchUsageSnapshot { usage, .. } => {
                assert!(counters_cover(usage, &f.usage), "usage decreased in {id}");
                assert!(
                    counters_cover(&f.limits, usage),
                    "usage above a limit in {id}: {usage:?}"
                );
                f.usage = usage.clone();
            }
            SearchEvent::BranchForked { .. } => {
                f.forks += 1;
                assert!(
                    charged(f, "actions") >= f.forks + f.measured
                        && charged(f, "workspace_files") >= f.forks,
                    "fork in {id} without a reservation snapshot"
                );
            }
            SearchEvent::BranchCandidateMeasured { .. } => {
                f.measured += 1;
                assert!(
                    charged(f, "verifier_runs") >= f.measured,
                    "verifier run in {id} without a reservation snapshot"
                );
            }
            SearchEvent::SearchClosed { .. } => f.closed = true,
            _ => {}
        }
    }
    assert!(!forests.is_empty(), "the repair opened no forest");
}

#[test]
fn status_shows_the_last_forest_its_branches_limits_and_no_goods() {
    let ws = ambiguous_with_a_mistyped_alternative();
    let (code, _) = ws.json(&["repair"]);
    assert_eq!(code, 0);
    let (code, doc) = ws.json(&["status"]);
    assert_eq!(code, 0, "{doc:#}");
    let forest = &doc["forests"][0];
    assert_eq!(forest["closed"], "committed", "{doc:#}");
    let states: Vec<&str> = forest["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["ineligible", "committed"], "{doc:#}");
    assert_eq!(forest["no_goods"], 1, "{doc:#}");
    assert_eq!(doc["no_goods"], 1, "{doc:#}");
    assert!(forest["remaining"]["verifier_runs"].as_u64().unwrap() < 24);

    let out = ws.trellis(&["status", "--verbose"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("1 ineligible") && text.contains("1 committed"),
        "{text}"
    );
    assert!(text.contains("no-goods in the ledger: 1"), "{text}");
}

#[test]
fn a_repeated_repair_refuses_a_recorded_no_good_for_free() {
    let ws = ambiguous_with_a_mistyped_alternative();
    assert_eq!(ws.json(&["repair"]).0, 0);
    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0, "{doc:#}");
    let branches = doc["steps"][0]["branches"].as_array().unwrap();
    assert!(
        branches[0]["reason"]
            .as_str()
            .unwrap()
            .contains("exact no-good"),
        "{doc:#}"
    );
    let (_, status) = ws.json(&["status"]);
    let forest = &status["forests"][0];
    assert_eq!(
        forest["branches"].as_array().unwrap().len(),
        1,
        "{status:#}"
    );
    assert_eq!(forest["usage"]["verifier_runs"], 1, "{status:#}");
}

#[test]
fn gate_w_abandoned_and_unselected_branches_leave_the_user_tree_byte_identical() {
    // The trap's only candidate is never promoted; the rough trait's import
    // is eligible but loses the selection to the exact one; the mistyped
    // alternative is rejected as ineligible. None of them may touch the
    // user's files.
    let cases: [(Workspace, &[&str], Option<&str>); 3] = [
        (Workspace::of("trap"), &["repair", "--commit"], None),
        (
            Workspace::of("two-traits"),
            &["repair"],
            Some("branch_not_selected"),
        ),
        (
            ambiguous_with_a_mistyped_alternative(),
            &["repair"],
            Some("branch_ineligible"),
        ),
    ];
    for (ws, args, loser) in cases {
        let before = ws.tree();
        let (_, doc) = ws.json(args);
        assert_eq!(
            ws.tree(),
            before,
            "the user's tree must stay byte-identical"
        );
        if let Some(kind) = loser {
            let events = search_events(&ledger_rows(&ws));
            assert!(events.iter().any(|e| e.name() == kind), "{kind}: {doc:#}");
        }
    }
}

#[test]
fn gate_ac_every_action_in_a_real_ledger_is_reserved_first_and_nothing_follows_close() {
    let ws = ambiguous_with_a_mistyped_alternative();
    assert_eq!(ws.json(&["repair"]).0, 0);
    let ws2 = Workspace::of("two-steps");
    committed(&ws2);
    for ws in [&ws, &ws2] {
        let rows = ledger_rows(ws);
        assert_gate_ac(&rows);
        let events = search_events(&rows);
        let opened = events
            .iter()
            .filter(|e| e.name() == "search_opened")
            .count();
        let closed = events
            .iter()
            .filter(|e| e.name() == "search_closed")
            .count();
        assert_eq!(opened, closed, "every forest closes");
    }
}

#[test]
fn gate_x_a_forest_commits_at_most_once_and_previews_add_no_decisions() {
    let ws = Workspace::of("two-steps");
    committed(&ws);
    let rows = ledger_rows(&ws);
    let mut commits: BTreeMap<String, usize> = BTreeMap::new();
    let mut measured = 0;
    for event in search_events(&rows) {
        match event {
            SearchEvent::BranchCommitted { forest_id, .. } => {
                *commits.entry(forest_id).or_default() += 1
            }
            SearchEvent::BranchCandidateMeasured { .. } => measured += 1,
            _ => {}
        }
    }
    assert!(commits.values().all(|n| *n == 1), "{commits:?}");
    let decisions = rows
        .iter()
        .filter(|r| r.kind == "gate_decision_recorded")
        .count();
    assert_eq!(
        decisions,
        commits.len(),
        "one decision per committed forest"
    );
    assert!(
        measured >= decisions,
        "every branch measured was only previewed"
    );
}

#[test]
fn two_interrupted_searches_are_refused_naming_both_and_nothing_is_written() {
    let ws = Workspace::of("missing-mut");
    let before = ws.tree();
    let ledger = Ledger::open(&ws.path().join(".trellis")).unwrap();
    for (forest, generation) in [("n0/0/f1", 0), ("n0/1/f1", 1)] {
        ledger
            .append_search(&SearchEvent::SearchOpened {
                forest_id: forest.into(),
                branch_id: String::new(),
                node: "n0".into(),
                generation,
                accepted_root: trellis_engine::digest::blob_digest(b"elsewhere"),
                limits: trellis_engine::search::Counters::DEFAULT_LIMITS.to_snapshot(),
                resumed_from: None,
            })
            .unwrap();
    }
    drop(ledger);
    let out = ws.trellis(&["repair", "--commit"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("n0/0/f1") && err.contains("n0/1/f1") && err.contains("ambiguous"),
        "{err}"
    );
    assert_eq!(ws.tree(), before);
}

#[test]
fn a_search_killed_mid_flight_resumes_without_refill_and_keeps_its_no_goods() {
    let ws = ambiguous_with_a_mistyped_alternative();
    let before = ws.tree();
    // Killed once the first branch has recorded its no-good: the second
    // branch is then being copied or measured.
    kill_repair_when(&ws, "mid-search", |db| {
        count_rows(db, "payload LIKE '%\"kind\":\"no_good_recorded\"%'") > 0
    });

    let rows = ledger_rows(&ws);
    let interrupted = fold_resume(&rows).unwrap();
    let forest = interrupted
        .interrupted
        .expect("the killed forest is unclosed");
    let keys: Vec<_> = interrupted.no_goods.keys().copied().collect();
    assert_eq!(keys.len(), 1);
    assert!(
        interrupted
            .no_goods
            .values()
            .all(|n| matches!(n.record, NoGoodRecord::Exact(_))),
        "the killed process recorded the no-good with its components"
    );

    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0, "the resumed repair still finds the fix: {doc:#}");
    assert_eq!(ws.tree(), before, "without --commit nothing is written");
    let rows = ledger_rows(&ws);
    let events = search_events(&rows);
    assert_resumes(&events, &forest);
    let after = fold_resume(&rows).unwrap();
    assert!(after.interrupted.is_none(), "the killed forest is claimed");
    assert!(keys.iter().all(|k| after.no_goods.contains_key(k)));
    assert!(
        doc["steps"][0]["branches"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("exact no-good")),
        "the resumed search refuses the recorded no-good: {doc:#}"
    );
    assert_gate_ac(&rows);
}

/// The gate decisions of a ledger: (candidate id, verdict), in order.
fn decisions(rows: &[Row]) -> Vec<(String, String)> {
    rows.iter()
        .filter_map(|row| match &row.event {
            DecodedRow::Ledger(LedgerEvent::GateDecisionRecorded(d)) => {
                Some((d.candidate_id.clone(), d.verdict.as_str().to_owned()))
            }
            _ => None,
        })
        .collect()
}

/// Checks that a forest in `events` resumed `killed`: same generation, the
/// same limits (never refilled), and a first usage snapshot covering what
/// the killed forest had reserved.
fn assert_resumes(events: &[SearchEvent], killed: &InterruptedForest) {
    let (resumed, generation, limits) = events
        .iter()
        .find_map(|e| match e {
            SearchEvent::SearchOpened {
                forest_id,
                generation,
                limits,
                resumed_from: Some(from),
                ..
            } if *from == killed.forest_id => {
                Some((forest_id.clone(), *generation, limits.clone()))
            }
            _ => None,
        })
        .expect("a forest resumes the killed one");
    assert_eq!(
        generation, killed.generation,
        "the same generation continues"
    );
    assert_eq!(limits, killed.limits, "limits are never refilled");
    let first_usage = events
        .iter()
        .find_map(|e| match e {
            SearchEvent::SearchUsageSnapshot {
                forest_id, usage, ..
            } if *forest_id == resumed => Some(usage.clone()),
            _ => None,
        })
        .expect("the resumed forest snapshots its usage");
    assert!(
        counters_cover(&first_usage, &killed.usage),
        "the resumed forest starts with at least the reserved usage: {first_usage:?} vs {:?}",
        killed.usage
    );
}

/// Runs `trellis repair` on the two-steps fixture and SIGKILLs it once
/// step 1 is decided and step 2's forest has reserved its first fork (step
/// 2 then still has a copy, a build and a test to run). Returns the forest
/// left open and the start root.
fn killed_in_its_second_step(
    ws: &Workspace,
) -> (InterruptedForest, trellis_engine::digest::Digest) {
    kill_repair_when(ws, "in its second step", in_its_second_step);

    let rows = ledger_rows(ws);
    let first = decisions(&rows);
    assert_eq!(
        first.len(),
        1,
        "killed after exactly one decision: {first:?}"
    );
    assert_eq!(first[0].1, "accepted_descent");
    let killed = fold_resume(&rows)
        .unwrap()
        .interrupted
        .expect("the second step's forest is left open");
    let start_root = rows
        .iter()
        .find_map(|row| match &row.event {
            DecodedRow::Ledger(LedgerEvent::SnapshotTaken(s)) => Some(s.root),
            _ => None,
        })
        .unwrap();
    assert_ne!(
        killed.accepted_root, start_root,
        "the killed forest searches from the first accepted state"
    );
    (killed, start_root)
}

#[test]
fn a_repair_killed_after_an_accepted_step_continues_from_it() {
    let ws = Workspace::of("two-steps");
    let (killed, start_root) = killed_in_its_second_step(&ws);
    let first = decisions(&ledger_rows(&ws));

    let doc = committed(&ws);
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(
        steps.len(),
        1,
        "only the interrupted step runs again: {doc:#}"
    );
    assert_eq!(
        steps[0]["decision"]["verdict"], "accepted_hard_pass",
        "{doc:#}"
    );
    assert_eq!(doc["start_root"], serde_json::to_value(start_root).unwrap());

    let rows = ledger_rows(&ws);
    let events = search_events(&rows);
    assert_resumes(&events, &killed);
    let all = decisions(&rows);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0], first[0], "the first decision stands");
    assert!(
        all[1].0.ends_with("/c2") && all[1].1 == "accepted_hard_pass",
        "the continued generation's next candidate: {all:?}"
    );
    assert!(fold_resume(&rows).unwrap().interrupted.is_none());
    assert_gate_ac(&rows);

    let source = ws.read("src/lib.rs");
    assert_eq!(
        source.matches("use std::collections::HashMap;").count(),
        1,
        "{source}"
    );
    assert_eq!(source.matches("let mut counts").count(), 1, "{source}");
    assert!(ws.cargo_test_passes());
    let verify = ws.trellis(&["ledger", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{verify:?}");
}

#[test]
fn an_interrupted_repair_whose_accepted_state_cannot_be_rebuilt_is_refused() {
    let ws = Workspace::of("two-steps");
    let (killed, _) = killed_in_its_second_step(&ws);
    let before = ws.tree();
    let refused = |what: &str, says: &str| {
        let out = ws.trellis(&["repair", "--commit"]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(
            err.contains("ledger.db") && err.contains("cannot continue") && err.contains(says),
            "{what}: {err}"
        );
        assert_eq!(ws.tree(), before, "{what}: nothing is written");
        let rows = ledger_rows(&ws);
        assert_eq!(
            fold_resume(&rows).unwrap().interrupted.map(|f| f.forest_id),
            Some(killed.forest_id.clone()),
            "{what}: the interrupted forest is left for a later resume"
        );
    };

    // The stored content is gone.
    let objects = ws.path().join(".trellis/objects");
    let aside = ws.path().join(".trellis/objects-aside");
    std::fs::rename(&objects, &aside).unwrap();
    refused("missing blobs", "not in the store");
    std::fs::rename(&aside, &objects).unwrap();

    // A gate under which the recorded descent is not one.
    let user_config = ws.cache().join("config/trellis/config.toml");
    std::fs::create_dir_all(user_config.parent().unwrap()).unwrap();
    std::fs::write(&user_config, "[gate]\nrho = 1000.0\n").unwrap();
    refused("a stricter gate", "does not replay");
    std::fs::remove_file(&user_config).unwrap();

    // With everything back in place it continues.
    committed(&ws);
}

#[test]
fn a_continued_repair_counts_its_earlier_steps_against_max_steps() {
    let ws = Workspace::of("two-steps");
    killed_in_its_second_step(&ws);
    let before = ws.tree();
    let user_config = ws.cache().join("config/trellis/config.toml");
    std::fs::create_dir_all(user_config.parent().unwrap()).unwrap();
    std::fs::write(&user_config, "[exploration]\nmax_steps = 1\n").unwrap();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["status"], "residuals_remain");
    assert_eq!(
        doc["steps"].as_array().map(Vec::len),
        Some(0),
        "the killed run's accepted step used the only one: {doc:#}"
    );
    assert_eq!(ws.tree(), before, "no hard pass, nothing written");
}

/// A bundle section replacing `branch_correct/role`, in the section format.
fn write_bundle_section(dir: &Path, id: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("role.md"),
        format!(
            "---\nid: {id}\nversion: 2\nrole: system\nrequired: true\npriority: 100\nmax_bytes: 1024\n\
             owner: team\nrationale: a shorter role\nreview: 2026-11-30\nvars: {{}}\n---\nYou repair Rust code.\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.parent().unwrap().join("trellis.toml"),
        "[prompts]\nbundles = [\"bundle\"]\n",
    )
    .unwrap();
}

#[test]
fn a_prompt_bundle_is_validated_and_pinned_when_a_session_starts() {
    let ws = Workspace::of("missing-mut");
    write_bundle_section(&ws.path().join("bundle"), "branch_correct/role");

    // Bundles are experimental: without the flag the session refuses to start.
    let out = ws.trellis(&["check"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("role.md"), "{err}");

    let out = ws.trellis(&["check", "--allow-experimental-prompts"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pinned = std::fs::read_dir(ws.path().join(".trellis/prompt-bundles"))
        .unwrap()
        .count();
    assert!(
        pinned >= 1,
        "the bundle is copied into the content-addressed store"
    );
}

#[test]
fn a_bundle_replacing_an_unknown_section_refuses_start_naming_the_file() {
    let ws = Workspace::of("missing-mut");
    write_bundle_section(&ws.path().join("bundle"), "branch_correct/no_such_section");
    let out = ws.trellis(&["check", "--allow-experimental-prompts"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("role.md") && err.contains("no_such_section"),
        "{err}"
    );
}

#[test]
fn a_missing_toolchain_is_an_infrastructure_error() {
    let ws = Workspace::of("missing-mut");
    let empty_path = tempfile::tempdir().unwrap();
    let out = ws
        .command(&["check"])
        .env("PATH", empty_path.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("could not run"), "{text}");
}

#[test]
fn repairing_an_unknown_cluster_is_a_usage_error_listing_the_real_ones() {
    let ws = Workspace::of("missing-mut");
    let before = ws.tree();
    let out = ws.trellis(&["repair", "--commit", "--cluster", "c00000000"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no repairable cluster `c00000000`") && err.contains("clusters: c"),
        "{err}"
    );
    assert_eq!(ws.tree(), before);
}

#[test]
fn status_of_a_path_that_is_not_a_directory_is_an_error() {
    let ws = Workspace::of("missing-mut");
    let out = Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(["status"])
        .arg(ws.path().join("no-such-dir"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
}

#[test]
fn prompt_activation_floors_are_checked_when_a_session_starts() {
    let ws = Workspace::of("missing-mut");
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[prompts]\nactivation_min_tasks = 5\n",
    )
    .unwrap();
    let out = ws.trellis(&["check"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("trellis.toml") && err.contains("activation_min_tasks"),
        "{err}"
    );
}
