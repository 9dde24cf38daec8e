//! Resident context end to end (Definition 6, Gate AF): the shipped binary
//! repairs a fixture crate against our OpenAI-compatible server configured
//! with a 16,384-token window. Two long file reads cannot both stay
//! resident, so the first is evicted to a tombstone, recalled by path, and
//! restored; a read of the file the model then fixes goes stale. Every
//! request the server received is checked against the ledgered plan with
//! the accountant recomputed from the wire, and `trellis ledger replay`
//! must rebuild each one from the recorded pages.

use crate::paging;
use crate::support;
use trellis_test_support::openai_server;

use std::path::Path;

use openai_server::{Answer, OpenAiServer};
use paging::{WINDOW, count, long_lines, plans, read, rows, script, session_id, workspace};
use serde_json::{Value, json};
use support::workspace::Workspace;
use trellis_engine::context::{
    Accountant, MESSAGE_OVERHEAD, Residency, ResidentPlan, TOOL_CALL_OVERHEAD,
};
use trellis_engine::ledger::{DecodedRow, SearchEvent};

/// The current accountant, recomputed from a request as the server received it.
fn wire_tokens(body: &Value) -> u64 {
    let text = |v: &Value| v.as_str().map_or(0, |t| Accountant::CURRENT.text(t));
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let calls: u64 = m["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    text(&c["id"])
                        + text(&c["function"]["name"])
                        + text(&c["function"]["arguments"])
                        + TOOL_CALL_OVERHEAD
                })
                .sum();
            text(&m["content"]) + calls + text(&m["tool_call_id"]) + MESSAGE_OVERHEAD
        })
        .sum()
}

/// Every assistant tool call is followed by exactly its results, and no
/// result stands without its call (no split tool pair).
fn assert_pairs_whole(body: &Value) {
    let messages = body["messages"].as_array().unwrap();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        assert_ne!(
            m["role"], "tool",
            "a tool result without its call at {i}: {body:#}"
        );
        let calls = m["tool_calls"].as_array().map_or(0, Vec::len);
        for k in 1..=calls {
            assert_eq!(
                messages[i + k]["role"],
                "tool",
                "call {i} lost a result: {body:#}"
            );
        }
        i += calls + 1;
    }
}

fn contents(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn gate_af_a_small_window_evicts_recalls_refuses_stale_pages_and_replays_every_request() {
    let lines = long_lines();
    let server = OpenAiServer::start(script());
    let ws = workspace(&server, WINDOW, lines);
    let out = ws.trellis(&["repair", "--commit", "--format", "json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the model's fix is promoted: {doc:#}"
    );
    // The progress the editor shows (here on stderr, one line a report)
    // says which turn was refitted.
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(
        progress.contains("turn 3: context refitted to ")
            && progress.contains("(1 page evicted, 0 stale)"),
        "{progress}"
    );
    assert!(!progress.contains("turn 2: context refitted"), "{progress}");
    assert!(ws.read("src/lib.rs").contains("a + b"));

    let received: Vec<Value> = server
        .received()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    let plans = plans(&ws);
    assert_eq!(received.len(), 6, "one request per scripted answer");
    assert_eq!(plans.len(), 6, "one plan per request sent");
    for (n, (body, plan)) in received.iter().zip(&plans).enumerate() {
        // No request above its allowance, counted from what was sent.
        assert_eq!(plan.allowance.window, WINDOW);
        assert_eq!(plan.allowance.accountant(), Ok(Accountant::CURRENT));
        assert_eq!(wire_tokens(body), plan.request_tokens, "request {}", n + 1);
        assert!(
            plan.request_tokens <= plan.allowance.input,
            "request {}",
            n + 1
        );
        assert_pairs_whole(body);
    }
    let residency = |turn: usize, page: usize| plans[turn - 1].pages[page - 1].residency;
    let text: Vec<String> = received.iter().map(contents).collect();
    // The latest page is pinned whole: request 2 carries all of alpha.
    assert_eq!(residency(2, 1), Residency::Pinned);
    assert!(text[1].contains(&format!("alpha note {lines:03}")));
    // Request 3: alpha and beta do not fit together; alpha is tombstoned.
    assert_eq!(residency(3, 1), Residency::Evicted);
    assert_eq!(residency(3, 2), Residency::Pinned);
    assert!(!text[2].contains("alpha note 001"), "{}", text[2]);
    let tombstone = format!(
        "[trellis:context-page {} turn 1 evicted]",
        &plans[2].pages[0].id[..16]
    );
    assert!(text[2].contains(&tombstone), "{}", text[2]);
    // Request 4, after `context_recall` by path: alpha is back.
    assert_eq!(residency(4, 1), Residency::Resident);
    assert!(text[3].contains(&format!("alpha note {lines:03}")));
    // Request 6: the read of src/lib.rs predates the fix; it is stale and
    // its old text is not admitted.
    assert_eq!(residency(6, 4), Residency::Stale);
    assert!(!text[5].contains("a - b"), "{}", text[5]);
    assert!(
        text[5].contains("stale] read_file src/lib.rs"),
        "{}",
        text[5]
    );
    assert_eq!(count(&ws, "context_page_recalled"), 1);
    assert_eq!(count(&ws, "context_miss"), 0);

    // Replay rebuilds every request from the recorded pages.
    let (code, replay) = ws.json(&["ledger", "replay"]);
    assert_eq!(code, 0, "{replay:#}");
    let calls = replay["model_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 6);
    for (call, body) in calls.iter().zip(&received) {
        assert_eq!(&call["request"], body, "replayed exactly");
    }

    // Identical inputs select identically: the same script in a fresh
    // workspace gives the same pages and decisions.
    let again = OpenAiServer::start(script());
    let twin = workspace(&again, WINDOW, lines);
    assert_eq!(twin.json(&["repair", "--commit"]).0, 0);
    let decisions = |plans: &[ResidentPlan]| -> Vec<Vec<(String, Residency)>> {
        plans
            .iter()
            .map(|p| {
                p.pages
                    .iter()
                    .map(|g| (g.id.clone(), g.residency))
                    .collect()
            })
            .collect()
    };
    assert_eq!(decisions(&plans), decisions(&self::plans(&twin)));

    // The explanation and the status read the same record.
    let session = session_id(&ws);
    let (code, explained) = ws.json(&["context", "explain-turn", &session, "3"]);
    assert_eq!(code, 0, "{explained:#}");
    let attempt = &explained["attempts"][0];
    assert_eq!(attempt["outcome"], "sent");
    assert_eq!(attempt["plan"]["pages"][0]["residency"], "evicted");
    assert_eq!(
        attempt["plan"]["allowance"]["input"],
        plans[2].allowance.input
    );
    assert_eq!(
        explained["attempts"][0]["recalled"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let human = ws.trellis(&["context", "explain-turn", &session, "3"]);
    let human = String::from_utf8(human.stdout).unwrap();
    assert!(
        human.contains("allowance:") && human.contains(" evicted "),
        "{human}"
    );
    let missing = ws.trellis(&["context", "explain-turn", &session, "99"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no model turn 99"));
    let (_, status) = ws.json(&["status"]);
    let figures = status["context"].as_array().unwrap();
    assert_eq!(figures.len(), 6, "{status:#}");
    assert_eq!(figures[2]["evicted"], 1);
    assert_eq!(figures[2]["request_tokens"], plans[2].request_tokens);
    let status = String::from_utf8(ws.trellis(&["status"]).stdout).unwrap();
    assert!(status.contains("model context, per turn:"), "{status}");
    assert!(status.contains("1 evicted"), "{status}");
}

#[test]
fn a_latest_page_over_the_allowance_is_never_truncated_or_sent_and_nothing_is_written() {
    // 400 lines of notes (~14 KiB of text, no outline): more than a
    // 16,384-token request has room for beside its instructions.
    let server = OpenAiServer::start(script());
    let ws = workspace(&server, WINDOW, 400);
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 1, "no verified repair: {doc:#}");
    assert_eq!(ws.tree(), before, "nothing is written");
    assert_eq!(
        server.received().len(),
        1,
        "the request that would carry the whole read is not sent"
    );
    assert_eq!(
        count(&ws, "context_infeasible"),
        1,
        "the refusal is ledgered"
    );
    assert_eq!(
        count(&ws, "model_programs_compiled"),
        1,
        "only turn 1 was built"
    );
    assert!(doc.to_string().contains("context_infeasible"), "{doc:#}");
    assert_eq!(ws.json(&["ledger", "replay"]).0, 0);
    let (code, explained) = ws.json(&["context", "explain-turn", &session_id(&ws), "2"]);
    assert_eq!(code, 0, "{explained:#}");
    assert_eq!(explained["attempts"][0]["outcome"], "infeasible");
}

#[test]
fn a_request_the_endpoint_counts_larger_than_planned_is_ledgered_and_shrinks_the_next_plan() {
    // What the first request of this fixture is charged (its messages and
    // tool schemas), measured rather than assumed.
    let probe = OpenAiServer::start(vec![Answer::tool_call("finish", json!({ "summary": "-" }))]);
    let ws = workspace(&probe, WINDOW, 20);
    ws.trellis(&["repair"]);
    let first = &plans(&ws)[0];
    let charged = first.request_tokens + first.allowance.tools;

    // The endpoint counts that request half as large again as charged (a
    // chat template heavier than the accountant's framing), then agrees.
    let reported = charged * 3 / 2;
    let server = OpenAiServer::start(vec![
        read("data/alpha.txt").counting_prompt(reported),
        read("data/beta.txt"),
        Answer::tool_call("finish", json!({ "summary": "read" })),
    ]);
    let ws = workspace(&server, WINDOW, 20);
    let out = ws.trellis(&["repair"]);
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(
        progress.contains(&format!(
            "turn 1: the endpoint counted {reported} prompt tokens where {charged} were planned"
        )),
        "{progress}"
    );
    let underestimates: Vec<_> = rows(&ws)
        .into_iter()
        .filter_map(|row| match row.event {
            DecodedRow::Search {
                event:
                    SearchEvent::ContextUnderestimated {
                        turn,
                        planned_tokens,
                        reported_tokens,
                        calibration,
                        ..
                    },
                ..
            } => Some((turn, planned_tokens, reported_tokens, calibration)),
            _ => None,
        })
        .collect();
    assert_eq!(
        underestimates,
        [(1, charged, reported, 1500)],
        "the overrun is ledgered once, with the calibration it sets"
    );
    let plans = plans(&ws);
    assert_eq!(plans.len(), 3);
    assert_eq!(plans[0], *first, "the same first request as the probe's");
    assert_eq!(plans[1].allowance.calibration, 1500);
    assert_eq!(
        plans[2].allowance.calibration, 1500,
        "the route stays calibrated"
    );
    let room = WINDOW - plans[0].allowance.output - plans[0].allowance.guard;
    assert_eq!(
        plans[1].allowance.input,
        room * 2 / 3 - plans[1].allowance.tools,
        "the next plan's allowance is the window's room divided by 1.5"
    );
    assert!(plans[1].allowance.input < plans[0].allowance.input);
    // Replay derives the same calibration from the ledger, without a model.
    let (code, replay) = ws.json(&["ledger", "replay"]);
    assert_eq!(code, 0, "{replay:#}");
}

#[test]
fn a_ledger_whose_plans_were_made_under_ascii_thirds_still_replays() {
    // tests/ledgers/ascii-thirds-v1: the ledger of a model repair of the
    // wrong-operator fixture (read, replace, finish; a 32,768-token
    // window) recorded by the build before the byte charge (f4253d6), its
    // three plans under `trellis.ascii-thirds` v1.
    let ws = Workspace::of("wrong-operator");
    let recorded = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/ledgers/ascii-thirds-v1");
    let trellis_dir = ws.path().join(".trellis");
    std::fs::create_dir_all(&trellis_dir).unwrap();
    for file in ["ledger.db", "bundles.db", "head", "index"] {
        std::fs::copy(recorded.join(file), trellis_dir.join(file)).unwrap();
    }
    let old = plans(&ws);
    assert_eq!(old.len(), 3);
    assert!(
        old.iter()
            .all(|p| p.allowance.accountant() == Ok(Accountant::AsciiThirds)),
        "{old:?}"
    );
    let (code, replay) = ws.json(&["ledger", "replay"]);
    assert_eq!(code, 0, "{replay:#}");
    let calls = replay["model_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3, "{replay:#}");
    assert!(calls.iter().all(|c| c["reproduced"] == true), "{replay:#}");
}
