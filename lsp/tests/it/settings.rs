//! Settings the validator accepts have an effect: the ones no other test
//! drives through the binary, each shown changing what `trellis` does.
//! `engine/src/config/effects.rs` names, for every key the validator
//! accepts, the test that shows its effect; several of them are here.

use crate::support;
use trellis_test_support::openai_server;

use openai_server::{Answer, OpenAiServer};
use serde_json::{Value, json};
use support::workspace::{Workspace, branches, stage};
use trellis_engine::ledger::SearchEvent;

/// A crate whose only compiler fix (importing `HashSet`) builds but leaves
/// its test failing: a descent of 2 (a missing name weighs 3, a failing
/// test 1), not a hard pass.
fn descent_crate(config: &str) -> Workspace {
    let ws = Workspace::empty();
    support::write_crate(
        ws.path(),
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"descent\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
            ),
            (
                "src/lib.rs",
                "pub fn distinct(xs: &[u32]) -> usize {\n    let seen: HashSet<u32> = \
                 xs.iter().copied().collect();\n    seen.len()\n}\n\n#[cfg(test)]\nmod tests {\n    \
                 #[test]\n    fn counts_each_value_once() {\n        \
                 assert_eq!(super::distinct(&[1, 1, 2]), 3);\n    }\n}\n",
            ),
            ("trellis.toml", config),
        ],
    );
    ws
}

#[test]
fn gate_rho_decides_whether_a_fix_that_leaves_a_failing_test_is_kept() {
    let (_, doc) = descent_crate("").json(&["repair"]);
    let step = &doc["steps"][0];
    assert_eq!(step["decision"]["verdict"], "accepted_descent", "{doc:#}");

    // Under a margin larger than the descent, the same fix is no progress.
    let (_, doc) = descent_crate("[gate]\nrho = 2.5\n").json(&["repair"]);
    let step = &doc["steps"][0];
    assert_eq!(step["decision"], Value::Null, "{doc:#}");
    let branch = branches(&doc).next().expect("a branch ran");
    assert_eq!(branch["cause"]["kind"], "no_descent", "{branch:#}");
}

#[test]
fn exploration_max_branches_bounds_the_branches_of_a_forest() {
    // Out of local retries, the partial checkpoint is continued in a
    // second branch (`cli::a_branch_out_of_local_retries_seeds_a_child_…`),
    // unless the forest may hold only one.
    let branch_ids = |config: &str| {
        let ws = Workspace::of("local-repair");
        std::fs::write(ws.path().join("trellis.toml"), config).unwrap();
        let (_, doc) = ws.json(&["repair"]);
        let ids: Vec<String> = doc["steps"][0]["branches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["branch_id"].as_str().unwrap_or_default().to_owned())
            .collect();
        ids
    };
    assert!(branch_ids("[exploration]\nlocal_retries = 0\n").contains(&"b2".to_owned()));
    let one = branch_ids("[exploration]\nlocal_retries = 0\nmax_branches = 1\n");
    assert!(one.iter().all(|id| id == "b1" || id.is_empty()), "{one:?}");
}

#[test]
fn the_stage_timeouts_bound_each_stage_by_its_role() {
    let ws = Workspace::empty();
    support::write_crate(
        ws.path(),
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"slow\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
            ),
            (
                "build.rs",
                "fn main() { std::thread::sleep(std::time::Duration::from_secs(60)); }\n",
            ),
            ("src/lib.rs", "pub fn one() -> u32 { 1 }\n"),
            (
                "trellis.toml",
                "[stages]\nbuild_timeout_secs = 2\ntest_timeout_secs = 3\n",
            ),
        ],
    );
    let started = std::time::Instant::now();
    let (_, doc) = ws.json(&["check"]);
    assert!(
        started.elapsed().as_secs() < 50,
        "neither stage waited out the build script"
    );
    let reason = |name: &str| {
        stage(&doc, name)["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(reason("build").contains("timed out after 2s"), "{doc:#}");
    assert!(reason("test").contains("timed out after 3s"), "{doc:#}");
}

#[test]
fn the_workspace_bounds_refuse_a_larger_snapshot_naming_the_keys() {
    for (config, said) in [
        ("[exploration]\nworkspace_files = 2\n", "limits of 2 files"),
        ("[exploration]\nworkspace_bytes = 64\n", "/ 64 bytes"),
    ] {
        let ws = Workspace::of("missing-import");
        std::fs::write(ws.path().join("trellis.toml"), config).unwrap();
        let out = ws.trellis(&["check"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains(said) && stderr.contains("`workspace_files`/`workspace_bytes`"),
            "{config}: {stderr}"
        );
    }
}

#[test]
fn every_exploration_limit_is_the_searchs_budget() {
    let limits = [
        ("actions", 901),
        ("model_turns", 902),
        ("tool_calls", 903),
        ("mutations", 904),
        ("verifier_runs", 905),
        ("tokens", 906_000),
        ("elapsed_secs", 907),
        ("result_bytes", 908_000),
        ("workspace_files", 909_000),
        ("workspace_bytes", 910_000_000),
    ];
    let table: String = limits
        .iter()
        .map(|(key, value)| format!("{key} = {value}\n"))
        .collect();
    let ws = Workspace::of("missing-import");
    std::fs::write(
        ws.path().join("trellis.toml"),
        format!("[exploration.limits]\n{table}"),
    )
    .unwrap();
    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0, "{doc:#}");
    let (_, status) = ws.json(&["status"]);
    let forest = &status["forests"][0];
    for (key, value) in limits {
        assert_eq!(forest["limits"][key], value, "{key}: {forest:#}");
        assert!(
            forest["remaining"][key].as_u64().unwrap() <= value,
            "{key}: {forest:#}"
        );
    }
}

#[test]
fn python_interpreter_is_the_interpreter_the_stages_run() {
    let ws = Workspace::of("py-logic-bug");
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[python]\ninterpreter = \"no/such/python\"\n",
    )
    .unwrap();
    let (_, doc) = ws.json(&["check"]);
    let test = stage(&doc, "python.test");
    assert_eq!(test["status"], "unavailable", "{doc:#}");
    assert!(
        test["reason"].as_str().unwrap().contains("no/such/python"),
        "{test:#}"
    );
}

/// One reply calling every tool of `calls` natively, in order.
fn calls(calls: &[(&str, Value)]) -> Answer {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            json!({ "id": format!("call_{i}"), "type": "function",
                    "function": { "name": name, "arguments": arguments.to_string() } })
        })
        .collect();
    let body = json!({
        "id": "chatcmpl-settings",
        "object": "chat.completion",
        "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": tool_calls } }],
        "usage": { "prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333 }
    });
    Answer::Status(200, body.to_string().into_bytes())
}

#[test]
fn model_and_turn_settings_reach_every_request_the_model_gets() {
    let server = OpenAiServer::start(vec![
        calls(&[
            ("read_file", json!({ "path": "src/lib.rs" })),
            ("list_files", json!({})),
            ("search", json!({ "pattern": "add" })),
        ]),
        calls(&[
            (
                "replace",
                json!({ "path": "src/lib.rs", "old": "a - b", "new": "a + b" }),
            ),
            (
                "write_file",
                json!({ "path": "src/extra.rs", "content": "// unused\n" }),
            ),
        ]),
        calls(&[("finish", json!({ "summary": "add adds" }))]),
    ]);
    let ws = Workspace::of("wrong-operator");
    std::fs::write(
        ws.path().join("trellis.toml"),
        format!(
            "[[models]]\nname = \"gateway\"\nadapter = \"openai-chat\"\nbase_url = \"{}\"\n\
             model = \"qwen2.5-coder:7b\"\nfamily = \"llama\"\napi_key_env = \"TRELLIS_SETTINGS_KEY\"\n\
             timeout_secs = 60\ncontext_window_tokens = 32768\nmax_output_tokens = 777\n\n\
             [model_turns]\ntool_calls_per_turn = 2\nedits_per_turn = 1\nresult_bytes = 64\n\
             tokens_per_turn = 1234\n",
            server.base_url
        ),
    )
    .unwrap();
    let (code, doc) = ws.json_with(
        &["repair", "--commit"],
        &[("TRELLIS_SETTINGS_KEY", "sk-settings")],
    );
    assert_eq!(code, 0, "the fix is written: {doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));
    assert!(
        !ws.path().join("src/extra.rs").exists(),
        "the edit over the allowance was never made"
    );

    let received = server.received();
    let first: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(first["model"], "qwen2.5-coder:7b");
    assert_eq!(first["max_tokens"], 777, "models[].max_output_tokens");
    assert_eq!(
        received[0].header("authorization"),
        Some("Bearer sk-settings"),
        "models[].api_key_env"
    );
    let second = String::from_utf8_lossy(&received[1].body);
    assert!(
        second.contains("not run: this turn's allowance of 2 tool calls is used up"),
        "model_turns.tool_calls_per_turn: {second}"
    );
    assert!(
        second.contains("(truncated: "),
        "model_turns.result_bytes: {second}"
    );
    let third = String::from_utf8_lossy(&received[2].body);
    assert!(
        third.contains("not run: this turn's allowance of 1 edits is used up"),
        "model_turns.edits_per_turn: {third}"
    );

    let model = branches(&doc)
        .find(|b| b["strategy"] == "model_actor")
        .expect("a model branch ran");
    assert_eq!(model["proposer"], "model:gateway", "models[].name");
    let events = ws.search_events();
    let route = events
        .iter()
        .find_map(|e| match e {
            SearchEvent::ModelProgramsCompiled { request, .. } => {
                request["programs"][0]["route"].as_str().map(str::to_owned)
            }
            _ => None,
        })
        .expect("programs were compiled");
    assert_eq!(
        route, "openai-chat/llama/qwen2.5-coder:7b",
        "models[].family"
    );
    let reserved = events.iter().any(|e| {
        matches!(e, SearchEvent::SearchUsageSnapshot { usage, .. } if usage.get("tokens") == Some(&1234))
    });
    assert!(reserved, "each turn reserves model_turns.tokens_per_turn");
}
