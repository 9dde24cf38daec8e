//! The resident working set end to end (Definition 6's O_t): the shipped
//! binary repairs a fixture crate against our OpenAI-compatible server
//! with a window large enough for every page, under
//! `[model_turns] working_set_turns = 1`. A page no later turn used is
//! tombstoned though it would fit, kept whole in the ledger's backing
//! record, faulted back by `context_recall` and tombstoned again after;
//! every turn ledgers one `context_working_set` before its request.

use crate::paging;
use crate::support;
use trellis_test_support::openai_server;

use openai_server::OpenAiServer;
use paging::{count, plans, rows, script, session_id, workspace};
use serde_json::Value;
use trellis_engine::context::Residency;
use trellis_engine::ledger::{DecodedRow, SearchEvent};

/// The recorded working sets, in ledger order: (turn, θ, page ids), and
/// the sequence number of each row.
fn working_sets(ws: &support::workspace::Workspace) -> Vec<(u64, u32, u32, Vec<String>)> {
    rows(ws)
        .into_iter()
        .filter_map(|row| match row.event {
            DecodedRow::Search {
                event:
                    SearchEvent::ContextWorkingSet {
                        turn,
                        working_set_turns,
                        pages,
                        ..
                    },
                ..
            } => Some((row.seq, turn, working_set_turns, pages)),
            _ => None,
        })
        .collect()
}

/// The sequence number of each turn's `model_programs_compiled` row (the
/// request as prepared, written before it is sent).
fn prepared(ws: &support::workspace::Workspace) -> Vec<(u64, u32)> {
    rows(ws)
        .into_iter()
        .filter_map(|row| match row.event {
            DecodedRow::Search {
                event: SearchEvent::ModelProgramsCompiled { turn, .. },
                ..
            } => Some((row.seq, turn)),
            _ => None,
        })
        .collect()
}

/// The messages turn `turn` added to the conversation, as the ledger's
/// `model_turn_recorded` row holds them: the backing store.
fn appended(ws: &support::workspace::Workspace, turn: u32) -> String {
    rows(ws)
        .into_iter()
        .find_map(|row| match row.event {
            DecodedRow::Search {
                event:
                    SearchEvent::ModelTurnRecorded {
                        turn: t, record, ..
                    },
                ..
            } if t == turn => Some(record["appended"].to_string()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("turn {turn} was recorded"))
}

#[test]
fn a_page_outside_the_working_set_is_tombstoned_with_room_to_spare_and_recall_faults_it_back() {
    let server = OpenAiServer::start(script());
    let ws = workspace(&server, 32_768, 20);
    let toml = ws.read("trellis.toml") + "\n[model_turns]\nworking_set_turns = 1\n";
    std::fs::write(ws.path().join("trellis.toml"), toml).unwrap();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "the model's fix is promoted: {doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));

    let received: Vec<String> = server
        .received()
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            body["messages"].to_string()
        })
        .collect();
    let plans = plans(&ws);
    assert_eq!(received.len(), 6, "one request per scripted answer");
    assert_eq!(plans.len(), 6);
    let alpha = "alpha note 001";
    let tombstone = |plan: usize, page: usize| {
        format!(
            "[trellis:context-page {} turn {} evicted]",
            &plans[plan].pages[page].id[..16],
            plans[plan].pages[page].turn
        )
    };
    // Request 2 pins turn 1's read: alpha is sent whole.
    assert!(received[1].contains(alpha));
    // Request 3: turn 1's page fits many times over but no turn since
    // used it; it is tombstoned, and the ledger keeps it whole.
    assert_eq!(plans[2].pages[0].residency, Residency::Evicted);
    assert!(
        plans[2].pages[0]
            .reason
            .starts_with("outside the working set"),
        "{}",
        plans[2].pages[0].reason
    );
    assert!(plans[2].request_tokens * 4 < plans[2].allowance.input);
    assert!(!received[2].contains(alpha), "{}", received[2]);
    assert!(received[2].contains(&tombstone(2, 0)), "{}", received[2]);
    assert!(appended(&ws, 1).contains(alpha), "the backing record");
    // Request 4, after the recall in turn 3: alpha is a candidate again
    // and resident.
    assert_eq!(plans[3].pages[0].residency, Residency::Resident);
    assert!(received[3].contains(alpha));
    // Request 5: the recall was two turns ago; alpha is tombstoned again.
    assert_eq!(plans[4].pages[0].residency, Residency::Evicted);
    assert!(received[4].contains(&tombstone(4, 0)), "{}", received[4]);
    assert!(!received[4].contains(alpha));

    // One working set per turn, ledgered before the turn's request, each
    // the candidates its plan selected within.
    let sets = working_sets(&ws);
    let prepared = prepared(&ws);
    assert_eq!(sets.len(), 6, "{sets:?}");
    assert_eq!(count(&ws, "context_working_set"), 6);
    for (n, ((seq, turn, theta, pages), plan)) in sets.iter().zip(&plans).enumerate() {
        assert_eq!(*turn, n as u32 + 1);
        assert_eq!(*theta, 1);
        let (sent, _) = prepared[n];
        assert!(
            seq < &sent,
            "turn {turn}'s set is ledgered before its request"
        );
        for page in &plan.pages {
            let candidate = pages.contains(&page.id);
            match page.residency {
                Residency::Resident => assert!(candidate, "turn {turn}: {}", page.id),
                Residency::Evicted => assert!(!candidate, "turn {turn}: {}", page.reason),
                Residency::Pinned | Residency::Stale => {}
            }
        }
    }
    assert!(sets[2].3.iter().all(|id| *id != plans[2].pages[0].id));
    assert!(sets[3].3.contains(&plans[3].pages[0].id), "recalled");

    // Replay rebuilds every request from the recorded plans, and the
    // explanation shows the recorded set.
    let replay = support::ledger_replay(ws.path());
    let calls = replay["model_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 6, "{replay:#}");
    for (call, sent) in calls.iter().zip(&received) {
        assert_eq!(call["request"]["messages"].to_string(), *sent);
    }
    let session = session_id(&ws);
    let (code, explained) = ws.json(&["context", "explain-turn", &session, "3"]);
    assert_eq!(code, 0, "{explained:#}");
    let set = &explained["attempts"][0]["working_set"];
    assert_eq!(set["turns"], 1);
    assert_eq!(set["pages"].as_array().unwrap().len(), sets[2].3.len());
    let human = ws.trellis(&["context", "explain-turn", &session, "3"]);
    let human = String::from_utf8(human.stdout).unwrap();
    assert!(
        human.contains("working set: 1 candidate page (used in the last 1 turns"),
        "{human}"
    );
    assert!(human.contains("outside the working set"), "{human}");
}
