//! The search's own rules, end to end through the shipped binary on real
//! fixture crates and the real cargo: flaky tests never become no-goods
//! (PSP-10 Assumption 2), the frontier serves every live entry at most once
//! per epoch by its keys (system 19), selection cost is recorded and
//! deterministic (Proposition 5) and replay re-derives it, and triggers fire
//! only when their condition holds (system 20).

use serde_json::Value;
use trellis_engine::ledger::SearchEvent;

use crate::support;

use support::flaky::{assert_flaky_and_no_no_good, first_branch_stage, no_goods};
use support::workspace::Workspace;

const FLAKY: [&str; 2] = [
    "--lib::tests::sums_every_value",
    "--lib::tests::sums_nothing_to_zero",
];

/// Item 12: the fixture's two tests each fail on their first run and pass
/// on every later one. The failing tests of the declared nondeterministic
/// `test` stage (the default) are re-run once in the same slot, pass, and
/// are reported as flaky in the stage report, the ledger and the human
/// output. Trading the missing `mut` for them is no descent under the
/// default ρ, so the fix is rejected, but its flaky evidence supports no
/// no-good (and the refusal is ledgered), so the next repair of the same
/// state is not refused and commits the fix.
#[test]
fn a_flaky_test_is_rerun_reported_and_never_becomes_a_no_good() {
    let ws = Workspace::of("flaky-test");
    let marker = ws.flaky_marker();
    let env = [("FLAKY_TEST_MARKER", marker.as_path())];

    let (code, doc) = ws.json_with(&["repair"], &env);
    assert_ne!(code, 0, "a flaky failure blocks hard pass: {doc:#}");
    assert!(marker.exists(), "the tests ran and failed once");
    let events = assert_flaky_and_no_no_good(&ws, &doc, "test", &FLAKY);
    assert!(
        events.iter().any(|e| matches!(e,
            SearchEvent::BranchObservation { observation, .. }
                if observation.contains("no no-good recorded")
                    && FLAKY.iter().all(|name| observation.contains(name)))),
        "the refused no-good is ledgered with its reason"
    );

    // Human output names them too (fresh markers make them flaky again).
    std::fs::remove_dir_all(&marker).unwrap();
    let out = ws
        .command(&["repair"])
        .env("FLAKY_TEST_MARKER", &marker)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let flaky_line = text
        .lines()
        .find(|line| line.contains("flaky: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        FLAKY.iter().all(|name| flaky_line.contains(name))
            && flaky_line.contains("failed, then passed when re-run"),
        "{text}"
    );

    // The tests no longer fail: nothing recorded stands in the repair's way.
    let (code, doc) = ws.json_with(&["repair", "--commit"], &env);
    assert_eq!(code, 0, "the later repair is not blocked: {doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert!(ws.read("src/lib.rs").contains("let mut sum"));
    assert!(ws.cargo_test_passes());
}

/// The same failure in a stage declared deterministic is not re-run: it is
/// exact evidence, recorded as a no-good that refuses the same attempt on
/// the next repair for free. (So the test above passes because of the
/// re-run, and would fail without it.)
#[test]
fn gate_ab_a_failure_in_a_deterministic_stage_is_a_no_good_the_next_repair_honours() {
    let ws = Workspace::of("flaky-test");
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[stages]\nnondeterministic = []\n",
    )
    .unwrap();
    let marker = ws.flaky_marker();
    let env = [("FLAKY_TEST_MARKER", marker.as_path())];

    let (_, doc) = ws.json_with(&["repair"], &env);
    let test = first_branch_stage(&doc, "test");
    assert!(test.get("flaky").is_none(), "never re-run: {doc:#}");
    assert_eq!(no_goods(&ws.search_events()), 1, "{doc:#}");

    let (code, doc) = ws.json_with(&["repair", "--commit"], &env);
    assert_ne!(code, 0, "{doc:#}");
    let refused = doc["steps"][0]["branches"][0].to_string();
    assert!(refused.contains("exact no-good"), "{doc:#}");
    assert!(ws.read("src/lib.rs").contains("let sum = 0;"));
}

/// The epochs a forest's ledger shows: for each `frontier_epoch_started`,
/// the branches `frontier_entry_served` names in it, in rank order.
fn epochs(events: &[SearchEvent], forest: &str) -> Vec<Vec<String>> {
    let mut epochs: Vec<Vec<String>> = Vec::new();
    for event in events {
        match event {
            SearchEvent::FrontierEpochStarted { forest_id, .. } if forest_id == forest => {
                epochs.push(Vec::new())
            }
            SearchEvent::FrontierEntryServed {
                forest_id,
                branch_id,
                epoch,
                rank,
            } if forest_id == forest => {
                let number = epochs.len();
                let current = epochs.last_mut().expect("served before its epoch started");
                assert_eq!(*epoch as usize, number, "epochs count from 1: {events:?}");
                assert_eq!(*rank as usize, current.len() + 1, "ranks count from 1");
                current.push(branch_id.clone());
            }
            _ => {}
        }
    }
    epochs
}

/// The measured-candidate events of a forest: branch id, candidate id,
/// energy and recorded cost.
fn measured(events: &[SearchEvent], forest: &str) -> Vec<(String, String, f64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            SearchEvent::BranchCandidateMeasured {
                forest_id,
                branch_id,
                candidate_id,
                energy,
                keys: Some(keys),
                ..
            } if forest_id == forest => {
                Some((branch_id.clone(), candidate_id.clone(), *energy, keys.cost))
            }
            _ => None,
        })
        .collect()
}

fn selected(events: &[SearchEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            SearchEvent::BranchSelected {
                forest_id,
                branch_id,
                ..
            } => Some((forest_id.clone(), branch_id.clone())),
            _ => None,
        })
        .collect()
}

/// Item 13 and Gate W: importing `HashSet` (b1) is no descent but leaves a
/// choice between two trait imports, so b1 is kept as a partial checkpoint.
/// Expansion then plans both a continuation of b1 (the first import) and,
/// on b1's failed strategy assumption, a child b2 seeded from b1's
/// checkpoint (the other import): two live entries in epoch 2, each served
/// once, ordered by the six keys (b2 has the lower recorded cost), and b1,
/// which seeded b2, is still served. b2 measures eligible but loses the
/// selection to b1's hard pass; nothing reaches the user's files.
#[test]
fn the_frontier_serves_every_live_branch_once_per_epoch_in_key_order() {
    let ws = Workspace::of("two-traits");
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert_eq!(ws.tree(), before, "a dry run writes nothing");
    let branches = doc["steps"][0]["branches"].as_array().unwrap();
    let rows: Vec<(&str, &str)> = branches
        .iter()
        .map(|b| {
            (
                b["branch_id"].as_str().unwrap(),
                b["strategy"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows.len(), 3, "{doc:#}");
    assert_eq!(
        rows,
        vec![
            ("b1", "apply_suggestions"),
            ("b2", "next_alternative"),
            ("b1", "local_repair")
        ],
        "{doc:#}"
    );
    assert!(
        branches[1]["label"].as_str().unwrap().contains("rough"),
        "{doc:#}"
    );
    assert!(
        branches[2]["label"].as_str().unwrap().contains("exact"),
        "{doc:#}"
    );

    let events = ws.search_events();
    let forest = doc["steps"][0]["forest_id"].as_str().unwrap();
    assert_eq!(
        epochs(&events, forest),
        vec![
            vec!["b1".to_owned()],
            vec!["b2".to_owned(), "b1".to_owned()]
        ],
        "epoch 2 serves the child first (recorded cost 1 < 2), then its parent"
    );
    let forked_from = events.iter().find_map(|e| match e {
        SearchEvent::BranchForked {
            branch_id, parent, ..
        } if branch_id == "b2" => Some(parent.clone()),
        _ => None,
    });
    assert_eq!(forked_from, Some(Some("b1".to_owned())));
    // Item 15: each measurement has its own candidate id.
    let ids: Vec<String> = measured(&events, forest)
        .into_iter()
        .map(|(_, id, _, _)| id)
        .collect();
    assert_eq!(
        ids,
        vec![
            format!("{forest}/b1/m1"),
            format!("{forest}/b2/m1"),
            format!("{forest}/b1/m2")
        ]
    );
    assert!(
        events.iter().any(|e| e.name() == "branch_not_selected"),
        "b2 was eligible and lost the selection"
    );
}

/// Item 14: the two trait imports behave alike and one unrelated test fails
/// either way, so b2 and b1's continuation tie on energy and targeted
/// improvement; key 4, the recorded cost, picks b2 (two action units
/// against b1's three). The rough import's test sleeps when
/// `TWO_TRAITS_SLOW` is set, making b2's sensors slower by seconds: under a
/// wall-clock cost b1 would win that run. Both runs select b2, and `ledger
/// replay` re-derives both selections from the recorded keys, and fails
/// on a recorded selection that the keys contradict.
#[test]
fn selection_cost_is_recorded_work_so_timings_never_change_the_choice() {
    let ws = Workspace::of("two-traits");
    let source = ws
        .read("src/lib.rs")
        .replace(
            "            self * 2 + 1",
            "            if std::env::var_os(\"TWO_TRAITS_SLOW\").is_some() {\n                \
             std::thread::sleep(std::time::Duration::from_secs(3));\n            }\n            \
             self * 2",
        )
        .replace(
            "    #[test]\n    fn distinct_counts_once",
            "    #[test]\n    fn unrelated_and_red() {\n        assert_eq!(1 + 1, 3);\n    }\n\n    \
             #[test]\n    fn distinct_counts_once",
        );
    assert!(source.contains("TWO_TRAITS_SLOW") && source.contains("unrelated_and_red"));
    std::fs::write(ws.path().join("src/lib.rs"), source).unwrap();

    let flag = ws.cache().join("slow");
    let (_, slow) = ws.json_with(&["repair"], &[("TWO_TRAITS_SLOW", flag.as_path())]);
    let (_, fast) = ws.json(&["repair"]);
    let events = ws.search_events();
    let picks = selected(&events);
    assert_eq!(picks.len(), 2, "one selection per run: {slow:#}\n{fast:#}");
    for (forest, branch) in &picks {
        assert_eq!(branch, "b2", "the cheaper recorded work wins in {forest}");
        let m = measured(&events, forest);
        let b2 = m.iter().find(|(b, ..)| b == "b2").unwrap();
        let b1 = m.iter().rfind(|(b, ..)| b == "b1").unwrap();
        assert_eq!(b2.2, b1.2, "they tie on energy");
        assert!(b2.3 < b1.3, "b2 recorded less work: {m:?}");
    }
    // The slow run was slower where it mattered.
    let test_ms = |doc: &Value| -> u64 {
        let b2 = doc["steps"][0]["branches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["branch_id"] == "b2")
            .cloned()
            .unwrap();
        b2["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["duration_ms"].as_u64().unwrap())
            .sum()
    };
    assert!(test_ms(&slow) >= test_ms(&fast) + 2000, "{slow:#}");

    let (code, replay) = ws.json(&["ledger", "replay"]);
    assert_eq!(code, 0, "{replay:#}");
    assert_eq!(replay["selections"].as_array().unwrap().len(), 2);

    // A selection the recorded keys contradict (as one made by sensor time
    // would be) fails the replay, naming its forest.
    let (forest, _) = &picks[0];
    let ledger = trellis_engine::ledger::Ledger::open(&ws.path().join(".trellis")).unwrap();
    ledger
        .append_search(&SearchEvent::BranchSelected {
            forest_id: forest.clone(),
            branch_id: "b1".into(),
            candidate_id: format!("{forest}/b1/m2"),
            profile: events.iter().find_map(|e| match e {
                SearchEvent::BranchSelected { profile, .. } => *profile,
                _ => None,
            }),
        })
        .unwrap();
    drop(ledger);
    let out = ws.trellis(&["ledger", "replay"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(forest.as_str()) && err.contains("select branch `b2`"),
        "{err}"
    );
}
