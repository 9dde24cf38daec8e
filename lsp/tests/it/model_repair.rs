//! The model route end to end: the shipped binary repairs fixture crates
//! against an OpenAI-compatible server of our own on 127.0.0.1, which
//! answers from a script and records every request body. Faults (a 500,
//! a hang, a non-JSON body, bad tool calls, escaping paths) are injected
//! by the script; every test checks what reached the user's files.

use crate::support;
use crate::wrong_operator;
use trellis_test_support::openai_server;

use openai_server::{Answer, OpenAiServer};
use serde_json::{Value, json};
use support::model::{assert_replay_reproduces, models_toml};
use support::workspace::{Workspace, branches};
use trellis_engine::ledger::SearchEvent;
use wrong_operator::{finish, fix, read_lib};

fn workspace(config: &str) -> Workspace {
    let ws = Workspace::of("wrong-operator");
    std::fs::write(ws.path().join("trellis.toml"), config).unwrap();
    ws
}

const ORIGINAL: &str = include_str!("../../../tests/fixtures/wrong-operator/src/lib.rs");

/// A repair that must end with nothing written: exit 1, the tree unchanged.
fn refused(ws: &Workspace) -> Value {
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 1, "nothing is promoted: {doc:#}");
    assert_eq!(ws.tree(), before, "nothing is written");
    assert_eq!(ws.read("src/lib.rs"), ORIGINAL);
    doc
}

#[test]
fn a_failing_test_is_fixed_by_the_model_and_promoted() {
    let server = OpenAiServer::start(vec![
        read_lib(),
        fix(),
        Answer::tool_call("run_tests", json!({})),
        finish("add adds"),
    ]);
    let ws = workspace(&models_toml(&[&server.base_url], 60));
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "the model's fix is promoted: {doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));
    assert!(ws.cargo_test_passes());
    let model = branches(&doc)
        .into_iter()
        .find(|b| b["strategy"] == "model_actor")
        .expect("a model branch ran");
    assert_eq!(model["proposer"], "model:m0", "{model:#}");
    assert_eq!(model["hard_pass"], true, "{model:#}");
    assert_eq!(server.received().len(), 4);
}

#[test]
fn a_model_fix_that_compiles_but_still_fails_a_test_writes_nothing() {
    let server = OpenAiServer::start(vec![
        Answer::tool_call(
            "replace",
            json!({ "path": "src/lib.rs", "old": "a - b", "new": "a * b" }),
        ),
        finish("add adds"),
    ]);
    let ws = workspace(&models_toml(&[&server.base_url], 60));
    let doc = refused(&ws);
    let model = branches(&doc)
        .into_iter()
        .find(|b| b["strategy"] == "model_actor")
        .expect("a model branch ran");
    assert_eq!(model["hard_pass"], false, "{model:#}");
}

#[test]
fn path_escapes_and_git_writes_are_refused_and_nothing_outside_the_branch_is_written() {
    let server = OpenAiServer::start(vec![
        Answer::tool_call(
            "write_file",
            json!({ "path": "../escaped.rs", "content": "pub fn pwned() {}" }),
        ),
        Answer::tool_call(
            "write_file",
            json!({ "path": ".git/config", "content": "[core]" }),
        ),
        Answer::tool_call(
            "write_file",
            json!({ "path": "/tmp/trellis-model-escape.rs", "content": "x" }),
        ),
        finish("add adds"),
    ]);
    let ws = workspace(&models_toml(&[&server.base_url], 60));
    refused(&ws);
    // The branch lives in the private cache: nothing escaped beside it, nor
    // beside the workspace, nor to the absolute path.
    let escaped: Vec<_> = walk(ws.cache())
        .into_iter()
        .chain(
            walk(ws.path().parent().unwrap())
                .into_iter()
                .filter(|p| p.parent() == ws.path().parent()),
        )
        .filter(|p| p.file_name().is_some_and(|n| n == "escaped.rs"))
        .collect();
    assert!(escaped.is_empty(), "{escaped:?}");
    assert!(!std::path::Path::new("/tmp/trellis-model-escape.rs").exists());
    assert!(!ws.path().join(".git/config").exists());
    // Each refusal reached the model as a tool error, and is ledgered.
    // (The second cluster's model branch then finds the script used up.)
    let requests = server.received();
    assert!(requests.len() >= 4);
    let last = String::from_utf8_lossy(&requests[3].body).into_owned();
    assert_eq!(last.matches("write_file error").count(), 3, "{last}");
    let turns = ws.search_events_named("model_turn_recorded");
    assert!(turns.len() >= 4, "{}", turns.len());
}

#[test]
fn malformed_arguments_an_unknown_tool_and_a_non_json_body_fail_closed_and_the_run_goes_on() {
    let server = OpenAiServer::start(vec![
        Answer::tool_call("replace", json!({ "path": "src/lib.rs", "old": 3 })),
        Answer::tool_call("rm_rf", json!({ "path": "." })),
        Answer::Status(200, b"this is not json".to_vec()),
        fix(),
        finish("add adds"),
    ]);
    let ws = workspace(&models_toml(&[&server.base_url], 60));
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "the later fix is promoted: {doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));
    let observed = ws.search_events_named("model_turn_observed");
    assert_eq!(observed.len(), 5, "every raw attempt is ledgered");
    let raw = observed[2].to_string() + &format!("{:?}", observed[2]);
    assert!(
        raw.contains("this is not json"),
        "the raw body is kept: {raw}"
    );
}

#[test]
fn a_hanging_endpoint_is_ended_by_its_deadline_and_the_repair_ends_soon_after() {
    let server = OpenAiServer::start(vec![Answer::Hang, Answer::Hang, Answer::Hang]);
    let ws = workspace(&models_toml(&[&server.base_url], 2));
    let started = std::time::Instant::now();
    refused(&ws);
    let elapsed = started.elapsed();
    assert!(
        elapsed < std::time::Duration::from_secs(30),
        "a hung server must not hold the repair: {elapsed:?}"
    );
    let observed = ws.search_events_named("model_turn_observed");
    assert!(
        server.received().len() <= 2 && observed.len() <= 2,
        "the endpoint is retried at most once: {} received, {} ledgered",
        server.received().len(),
        observed.len()
    );
    assert_eq!(ws.search_events_named("model_route_unavailable").len(), 1);
    assert!(
        ws.search_events_named("no_good_recorded").is_empty(),
        "environmental, never a no-good"
    );
}

#[test]
fn a_500_on_the_first_endpoint_moves_to_the_second_which_fixes_it() {
    let failing = OpenAiServer::start(vec![
        Answer::Status(500, b"{\"error\":\"boom\"}".to_vec()),
        Answer::Status(500, b"{\"error\":\"boom\"}".to_vec()),
    ]);
    let second = OpenAiServer::start(vec![read_lib(), fix(), finish("add adds")]);
    let ws = workspace(&models_toml(&[&failing.base_url, &second.base_url], 60));
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));
    assert!(!failing.received().is_empty());
    assert_eq!(second.received().len(), 3);
}

#[test]
fn replay_and_explain_session_reproduce_the_exact_requests_the_server_received() {
    let server = OpenAiServer::start(vec![read_lib(), fix(), finish("add adds")]);
    let ws = workspace(&models_toml(&[&server.base_url], 60));
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    let received = server.bodies();
    assert_eq!(received.len(), 3);

    // What the ledger kept is byte for byte what the server got.
    let sent: Vec<String> = ws
        .search_events_named("model_turn_observed")
        .into_iter()
        .map(|e| match e {
            SearchEvent::ModelTurnObserved { attempt, .. } => {
                attempt["request_body"].as_str().unwrap().to_owned()
            }
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(sent, received);

    // Replay rebuilds each request without a model.
    assert_replay_reproduces(ws.path(), &received);

    // explain-session: the latest session, in the JSON shape.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(["prompts", "explain-session", "--format", "json", "--path"])
        .arg(ws.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let explained: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(explained["session"].as_str().is_some_and(|s| !s.is_empty()));
    let calls = explained["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    for (call, body) in calls.iter().zip(&received) {
        assert!(call["seq"].as_u64().is_some());
        assert_eq!(call["route"]["endpoint"], "m0");
        assert!(
            call["program_digest"]
                .as_str()
                .is_some_and(|d| !d.is_empty())
        );
        let request = &call["request"];
        assert_eq!(request, &serde_json::from_str::<Value>(body).unwrap());
        assert_eq!(request["model"], "qwen2.5-coder:7b");
        assert!(request["messages"].is_array() && request["tools"].is_array());
    }
}

#[test]
fn without_a_model_a_failing_test_ends_as_before_and_says_a_model_could_try() {
    let ws = workspace("");
    let doc = refused(&ws);
    assert_eq!(doc["model_would_help"], true, "{doc:#}");
    let out = ws.trellis(&["repair"]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("[[models]]"), "{text}");
}

/// A model that makes the tests agree with the bug instead of fixing it.
fn weaken_the_tests() -> Vec<Answer> {
    vec![
        Answer::tool_call(
            "replace",
            json!({ "path": "src/lib.rs", "old": "assert_eq!(add(2, 3), 5)", "new": "assert_eq!(add(2, 3), -1)" }),
        ),
        Answer::tool_call(
            "replace",
            json!({ "path": "tests/adds.rs", "old": "add(1, 1), 2)", "new": "add(1, 1), 0)" }),
        ),
        finish("the tests now pass"),
    ]
}

#[test]
fn a_test_weakened_by_the_model_is_refused_under_backward_compatible() {
    let server = OpenAiServer::start(weaken_the_tests());
    let config = models_toml(&[&server.base_url], 60)
        + "[verification]\ntest_policy = \"backward-compatible\"\n";
    let ws = workspace(&config);
    let doc = refused(&ws);
    let model = branches(&doc)
        .into_iter()
        .find(|b| b["strategy"] == "model_actor")
        .expect("a model branch ran");
    let reason = model["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("backward-compatible") && reason.contains("one_and_one_make_two"),
        "{model:#}"
    );

    // The same model under the default `evolving` policy has its way: the
    // refusal above is the policy's doing.
    let server = OpenAiServer::start(weaken_the_tests());
    let ws = workspace(&models_toml(&[&server.base_url], 60));
    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0, "{doc:#}");
}

/// Every file under `dir` (not following links; unreadable entries skipped).
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() && dir != std::path::Path::new("/tmp") => out.extend(walk(&path)),
            Ok(_) => out.push(path),
            Err(_) => {}
        }
    }
    out
}
