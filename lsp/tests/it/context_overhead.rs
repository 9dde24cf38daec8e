//! The fixed overhead scales with the window (issue 33): the shipped
//! binary, the shipped prompt library and tool catalog, and our
//! OpenAI-compatible server on 127.0.0.1 configured as a user with a small
//! local model would (`context_window_tokens = 8192`, `max_output_tokens =
//! 256`). The full instructions and tool schemas (about 8,500 tokens at a
//! token a byte) would leave no such request feasible, so the route offers
//! the compact schemas and drops the optional instruction sections; every
//! scripted turn is sent, the repair fixes the bug, the ledger and
//! `trellis context explain-turn` say which form was used, and replay
//! rebuilds every request. A large window keeps the full form, byte for
//! byte. (A 4,096-token window is still refused: the required sections
//! alone charge more than its allowance; docs/model.md.)

use crate::paging;
use crate::support;
use crate::wrong_operator;
use trellis_test_support::openai_server;

use openai_server::OpenAiServer;
use paging::{count, plans, rows, session_id};
use serde_json::{Value, json};
use support::workspace::Workspace;
use trellis_engine::actor::tools::tool_specs;
use trellis_engine::context::{ResidentPlan, ToolForm};
use trellis_engine::ledger::{DecodedRow, SearchEvent};
use wrong_operator::{finish, fix, read_lib};

/// The fixture with one `[[models]]` table of a `window`-token context
/// reserving `output` for the answer, for a 7B coder model.
fn workspace(server: &OpenAiServer, window: u64, output: u64) -> Workspace {
    let ws = Workspace::of("wrong-operator");
    let config = format!(
        "[[models]]\nname = \"local\"\nadapter = \"openai-chat\"\nbase_url = \"{}\"\n\
         model = \"qwen2.5-coder:7b\"\ntimeout_secs = 60\n\
         context_window_tokens = {window}\nmax_output_tokens = {output}\n",
        server.base_url
    );
    std::fs::write(ws.path().join("trellis.toml"), config).unwrap();
    ws
}

/// The sections each model call's programs dropped, in ledger order.
fn dropped_sections(ws: &Workspace) -> Vec<Vec<String>> {
    rows(ws)
        .into_iter()
        .filter_map(|row| match row.event {
            DecodedRow::Search {
                event: SearchEvent::ModelProgramsCompiled { request, .. },
                ..
            } => Some(
                request["programs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|p| p["dropped_sections"].as_array().unwrap().clone())
                    .map(|s| s.as_str().unwrap().to_owned())
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// What the instructions and the tool schemas of a plan's request charge.
fn overhead(plan: &ResidentPlan) -> u64 {
    plan.instruction_tokens + plan.allowance.tools
}

#[test]
fn an_8192_token_window_sends_every_turn_with_the_compact_form_and_fixes_the_bug() {
    let server = OpenAiServer::start(vec![read_lib(), fix(), finish("add adds")]);
    let ws = workspace(&server, 8192, 256);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    let plans = plans(&ws);
    for plan in &plans {
        println!(
            "window {} instructions {} tools {} ({}) input {} request {}",
            plan.allowance.window,
            plan.instruction_tokens,
            plan.allowance.tools,
            plan.allowance.tool_form.as_str(),
            plan.allowance.input,
            plan.request_tokens
        );
    }
    println!("dropped: {:?}", dropped_sections(&ws));
    assert_eq!(count(&ws, "context_infeasible"), 0, "{doc:#}");
    assert_eq!(code, 0, "the model's fix is promoted: {doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));
    assert_eq!(server.received().len(), 3, "every scripted turn is sent");
    assert_eq!(plans.len(), 3);
    let compact = tool_specs(ToolForm::Compact);
    for (plan, received) in plans.iter().zip(server.received()) {
        assert_eq!(plan.allowance.tool_form, ToolForm::Compact);
        let body: Value = serde_json::from_slice(&received.body).unwrap();
        assert_eq!(
            body["tools"],
            json!(compact),
            "the compact schemas are sent"
        );
        assert!(plan.request_tokens <= plan.allowance.input);
    }
    // Within its share or not, the overhead leaves the turns room: the
    // whole latest page of each request was sent.
    assert!(
        overhead(&plans[0]) < 8192 - 256 - 512,
        "{}",
        overhead(&plans[0])
    );
    // Which optional sections were dropped is recorded with each program.
    assert!(dropped_sections(&ws).iter().all(|d| !d.is_empty()));

    // Replay rebuilds every request, compact schemas and all.
    let (code, replay) = ws.json(&["ledger", "replay"]);
    assert_eq!(code, 0, "{replay:#}");
    let calls = replay["model_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    for (call, received) in calls.iter().zip(server.received()) {
        let body: Value = serde_json::from_slice(&received.body).unwrap();
        assert_eq!(call["request"], body, "replayed exactly");
    }

    // The explanation names the form.
    let session = session_id(&ws);
    let (code, explained) = ws.json(&["context", "explain-turn", &session, "1"]);
    assert_eq!(code, 0, "{explained:#}");
    assert_eq!(
        explained["attempts"][0]["plan"]["allowance"]["tool_form"],
        "compact"
    );
    let human = ws.trellis(&["context", "explain-turn", &session, "1"]);
    let human = String::from_utf8(human.stdout).unwrap();
    assert!(human.contains("(compact schemas)"), "{human}");
}

#[test]
fn a_large_window_keeps_the_full_form_and_every_section() {
    let server = OpenAiServer::start(vec![read_lib(), fix(), finish("add adds")]);
    let ws = workspace(&server, 32_768, 1024);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    let plans = plans(&ws);
    assert_eq!(plans.len(), 3);
    println!(
        "window 32768: instructions {} tools {}",
        plans[0].instruction_tokens, plans[0].allowance.tools
    );
    let full = tool_specs(ToolForm::Full);
    for (plan, received) in plans.iter().zip(server.received()) {
        assert_eq!(plan.allowance.tool_form, ToolForm::Full);
        let body: Value = serde_json::from_slice(&received.body).unwrap();
        assert_eq!(body["tools"], json!(full));
    }
    assert!(dropped_sections(&ws).iter().all(Vec::is_empty));
    // The full form is not recorded: its plans read as every plan before.
    let explained = ws
        .json(&["context", "explain-turn", &session_id(&ws), "1"])
        .1;
    assert!(
        explained["attempts"][0]["plan"]["allowance"]
            .get("tool_form")
            .is_none(),
        "{explained:#}"
    );
}
