//! The model route inside the search, end to end: the shipped binary
//! repairs fixture crates against OpenAI-compatible servers of our own on
//! 127.0.0.1 (scripted answers, every request recorded). Each test checks
//! one fact about how the search drives the model — its `[model_turns]`,
//! its pinned prompt bundles, what it is told about the last attempt, and
//! Gate Z when a killed repair resumes — in what the server received, the
//! ledger and the user's files. Faults are injected: a killed process, a
//! tampered ledger row.

use crate::support;
use crate::wrong_operator;
use trellis_test_support::openai_server;

use std::collections::BTreeMap;

use openai_server::{Answer, OpenAiServer};
use serde_json::{Value, json};
use support::kill::{count_rows, kill_repair_when};
use support::model::{assert_replay_reproduces, models_toml};
use support::workspace::{Workspace, branches};
use trellis_engine::ledger::{DecodedRow, Ledger, LedgerEvent, SearchEvent};
use wrong_operator::{finish, fix, read_lib};

/// `[[models]]` pointing at `server`, plus `extra` tables, as the user
/// configuration: the workspace (and so the state root a resume needs)
/// stays the same when a later run talks to another server.
fn configure(ws: &Workspace, server: &OpenAiServer, extra: &str) {
    ws.write_user_config(&(models_toml(&[&server.base_url], 60) + extra));
}

/// The system messages of a request body, concatenated.
fn system_text(body: &str) -> String {
    let body: Value = serde_json::from_str(body).unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn model_turns_from_the_config_bound_each_model_branch_and_replay_rebuilds_them() {
    // A model that never finishes: only the turn limit stops it.
    let server = OpenAiServer::start(
        (0..12)
            .map(|_| Answer::tool_call("list_files", json!({})))
            .collect(),
    );
    let ws = Workspace::of("wrong-operator");
    configure(&ws, &server, "[model_turns]\nmax_turns = 2\n");
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(ws.tree(), before, "nothing is written");

    let mut per_branch: BTreeMap<(String, String), u32> = BTreeMap::new();
    for event in ws.search_events_named("model_turn_recorded") {
        let key = (event.forest_id().to_owned(), event.branch_id().to_owned());
        *per_branch.entry(key).or_default() += 1;
    }
    assert!(!per_branch.is_empty());
    assert!(
        per_branch.values().all(|turns| *turns == 2),
        "each model branch stops at `model_turns.max_turns`: {per_branch:?}"
    );
    let received = server.bodies();
    assert_eq!(received.len(), 2 * per_branch.len());
    assert!(
        received[0].contains("1 of 2"),
        "the turn block states the configured limit: {}",
        received[0]
    );
    // The limits are ledgered with the session, and replay rebuilds each
    // turn block from them.
    let ledger = Ledger::open(&ws.path().join(".trellis")).unwrap();
    let started = ledger
        .rows()
        .unwrap()
        .into_iter()
        .find_map(|row| match row.event {
            DecodedRow::Ledger(LedgerEvent::SessionStarted(s)) => Some(s),
            _ => None,
        })
        .unwrap();
    assert_eq!(started.config["workspace"]["model_turns"]["max_turns"], 2);
    assert_replay_reproduces(ws.path(), &received);
}

#[test]
fn pinned_bundles_and_the_allow_flag_shape_the_model_prompts_and_replay_reproduces_them() {
    const MARKER: &str = "Bundle marker 7f3a: you repair Rust code in a branch.";
    let server = OpenAiServer::start(vec![read_lib(), fix(), finish("add adds")]);
    let ws = Workspace::of("wrong-operator");
    let bundle = ws.path().join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(
        bundle.join("role.md"),
        format!(
            "---\nid: branch_correct/role\nversion: 2\nrole: system\nrequired: true\n\
             priority: 100\nmax_bytes: 1024\nowner: team\nrationale: a marked role\n\
             review: 2026-11-30\nvars: {{}}\n---\n{MARKER}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[prompts]\nbundles = [\"bundle\"]\n",
    )
    .unwrap();
    configure(&ws, &server, "");
    let (code, doc) = ws.json(&["repair", "--allow-experimental-prompts"]);
    assert_eq!(code, 0, "{doc:#}");

    let received = server.bodies();
    assert_eq!(received.len(), 3);
    for body in &received {
        assert!(
            system_text(body).contains(MARKER),
            "the pinned bundle replaces the built-in role: {body}"
        );
    }
    // The ledgered programs name the substitution: the pinned content hash,
    // and the policy the flag set.
    let pinned: Vec<String> = std::fs::read_dir(ws.path().join(".trellis/prompt-bundles"))
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            format!("sha256:{}", name.trim_end_matches(".md"))
        })
        .collect();
    assert_eq!(pinned.len(), 1);
    for event in ws.search_events_named("model_programs_compiled") {
        let SearchEvent::ModelProgramsCompiled { request, .. } = event else {
            unreachable!()
        };
        let domain = &request["programs"][1];
        let role = domain["sections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "branch_correct/role")
            .unwrap();
        assert_eq!(role["content_hash"], pinned[0], "{domain:#}");
        assert_eq!(role["experimental"], true);
        assert_eq!(domain["policy"]["allow_experimental"], true);
    }
    assert_replay_reproduces(ws.path(), &received);
}

#[test]
fn a_second_repair_shows_the_model_what_the_last_attempt_tried_and_how_it_measured() {
    let wrong = OpenAiServer::start(vec![
        Answer::tool_call(
            "replace",
            json!({ "path": "src/lib.rs", "old": "a - b", "new": "a * b" }),
        ),
        finish("multiply instead of subtracting"),
    ]);
    let ws = Workspace::of("wrong-operator");
    configure(&ws, &wrong, "");
    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 1, "{doc:#}");
    let first = wrong.bodies();
    assert!(
        !first[0].contains("multiply instead"),
        "nothing was tried before the first attempt"
    );
    assert!(
        !ws.search_events_named("model_hypothesis_measured")
            .is_empty()
    );

    let second = OpenAiServer::start(vec![read_lib(), fix(), finish("add adds")]);
    configure(&ws, &second, "");
    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0, "{doc:#}");
    let shown = system_text(&second.bodies()[0]);
    assert!(
        shown.contains("multiply instead of subtracting") && shown.contains("not a hard pass"),
        "the correction packet carries the last hypothesis and its measurement: {shown}"
    );
}

/// Whether the repair has ledgered the programs of a model call.
fn programs_ledgered(db: &std::path::Path) -> bool {
    count_rows(
        db,
        "kind = 'search' AND payload LIKE '%\"kind\":\"model_programs_compiled\"%'",
    ) > 0
}

#[test]
fn gate_z_a_resume_past_a_program_digest_that_no_longer_reconstructs_fails_closed() {
    // The first call hangs until the process is killed; the resumed repair
    // then gets a fix.
    let server = OpenAiServer::start(vec![Answer::Hang, read_lib(), fix(), finish("add adds")]);
    let ws = Workspace::of("wrong-operator");
    configure(&ws, &server, "");
    // Killed once the hanging request is in flight (its programs are
    // ledgered before it is sent).
    kill_repair_when(&ws, "during a model call", |db| {
        programs_ledgered(db) && !server.received().is_empty()
    });

    // Tamper the interrupted forest's ledgered programs: their recorded
    // budget no longer compiles to the recorded digest.
    let db = rusqlite::Connection::open(ws.path().join(".trellis/ledger.db")).unwrap();
    let (seq, original): (i64, String) = db
        .query_row(
            "SELECT seq, payload FROM events WHERE kind = 'search' \
             AND payload LIKE '%\"kind\":\"model_programs_compiled\"%' ORDER BY seq LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let tampered = original.replacen("\"budget_tokens\":", "\"budget_tokens\":1", 1);
    assert_ne!(tampered, original);
    // A tamperer with the file drops the append-only trigger (trellis
    // recreates it at every open).
    let set = |payload: &str| {
        db.execute_batch("DROP TRIGGER IF EXISTS events_are_never_updated")
            .unwrap();
        db.execute(
            "UPDATE events SET payload = ?1 WHERE seq = ?2",
            rusqlite::params![payload, seq],
        )
        .unwrap();
    };
    set(&tampered);

    let before = ws.tree();
    let sent = server.received().len();
    let out = ws.trellis(&["repair", "--commit"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("Gate Z") && err.contains("cannot be resumed") && err.contains("ledger.db"),
        "{err}"
    );
    assert_eq!(ws.tree(), before, "nothing is written");
    assert_eq!(server.received().len(), sent, "no model is called past it");

    // The same resume with the row as it was goes on and repairs.
    set(&original);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));
}

/// `wrong-operator` with one test left (its in-file `#[cfg(test)]` test,
/// or the doc test `lib` carries), and a model that makes that test agree
/// with the bug (`old` → `new`) instead of fixing `add`.
fn weakened_test(
    policy: &str,
    lib: Option<&str>,
    (old, new): (&str, &str),
) -> (Workspace, i32, Value) {
    let server = OpenAiServer::start(vec![
        Answer::tool_call(
            "replace",
            json!({ "path": "src/lib.rs", "old": old, "new": new }),
        ),
        finish("the test now passes"),
    ]);
    let ws = Workspace::of("wrong-operator");
    std::fs::remove_file(ws.path().join("tests/adds.rs")).unwrap();
    if let Some(lib) = lib {
        std::fs::write(ws.path().join("src/lib.rs"), lib).unwrap();
    }
    configure(
        &ws,
        &server,
        &format!("[verification]\ntest_policy = \"{policy}\"\n"),
    );
    let (code, doc) = ws.json(&["repair", "--commit"]);
    (ws, code, doc)
}

/// Why the model's branch was refused.
fn model_reason(doc: &Value) -> String {
    let model = branches(doc)
        .into_iter()
        .find(|b| b["strategy"] == "model_actor")
        .expect("a model branch ran");
    model["reason"].as_str().unwrap_or_default().to_owned()
}

const IN_FILE: (&str, &str) = ("assert_eq!(add(2, 3), 5)", "assert_eq!(add(2, 3), -1)");

#[test]
fn backward_compatible_runs_the_in_file_tests_as_they_were_and_refuses_a_weakened_assertion() {
    let (ws, code, doc) = weakened_test("backward-compatible", None, IN_FILE);
    assert_eq!(code, 1, "{doc:#}");
    let original =
        std::fs::read_to_string(support::workspace::fixture("wrong-operator").join("src/lib.rs"))
            .unwrap();
    assert_eq!(ws.read("src/lib.rs"), original, "nothing is written");
    let reason = model_reason(&doc);
    assert!(
        reason.contains("backward-compatible") && reason.contains("adds_two_numbers"),
        "{reason}"
    );

    // The same model under `evolving` has its way: the refusal above is
    // the policy's doing.
    let (ws, code, doc) = weakened_test("evolving", None, IN_FILE);
    assert_eq!(code, 0, "{doc:#}");
    assert!(ws.read("src/lib.rs").contains("-1"));
}

#[test]
fn backward_compatible_runs_the_doc_tests_as_they_were() {
    const LIB: &str = "/// Adds.\n///\n/// ```\n/// assert_eq!(wrong_operator::add(2, 2), 4);\n/// ```\n\
                       pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
    let weaken = ("add(2, 2), 4)", "add(2, 2), 0)");
    let (ws, code, doc) = weakened_test("backward-compatible", Some(LIB), weaken);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(ws.read("src/lib.rs"), LIB, "nothing is written");
    let reason = model_reason(&doc);
    assert!(
        reason.contains("backward-compatible") && reason.contains("src/lib.rs - add"),
        "{reason}"
    );
    let (_, code, doc) = weakened_test("evolving", Some(LIB), weaken);
    assert_eq!(code, 0, "{doc:#}");
}

#[test]
fn the_model_continues_its_own_partial_checkpoint_in_a_new_branch_and_the_fix_is_promoted() {
    let server = OpenAiServer::start(vec![
        // The first branch fixes the logic but leaves an unresolved name:
        // no descent, kept as a partial checkpoint (the compiler knows the
        // import).
        Answer::tool_call(
            "replace",
            json!({ "path": "src/lib.rs", "old": "a - b",
                    "new": "VecDeque::from([a, b]).iter().sum()" }),
        ),
        finish("sum them in a deque"),
        // Its continuation, forked from that checkpoint, adds the import.
        Answer::tool_call(
            "replace",
            json!({ "path": "src/lib.rs", "old": "pub fn add",
                    "new": "use std::collections::VecDeque;\n\npub fn add" }),
        ),
        finish("import VecDeque"),
    ]);
    let ws = Workspace::of("wrong-operator");
    configure(&ws, &server, "");
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    let lib = ws.read("src/lib.rs");
    assert!(lib.contains("use std::collections::VecDeque;") && lib.contains("VecDeque::from"));
    assert!(ws.cargo_test_passes());

    let branches: Vec<Value> = doc["steps"][0]["branches"].as_array().cloned().unwrap();
    let first = branches
        .iter()
        .find(|b| b["strategy"] == "model_actor")
        .unwrap();
    assert!(
        first["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("partial checkpoint"),
        "{first:#}"
    );
    let continued = branches
        .iter()
        .find(|b| b["strategy"] == "local_repair")
        .unwrap();
    assert_eq!(continued["proposer"], "model:m0");
    assert_eq!(continued["hard_pass"], true, "{continued:#}");
    assert_ne!(continued["branch_id"], first["branch_id"], "its own branch");
    // The continuation was told what the branch it continues tried.
    let received = server.bodies();
    assert_eq!(received.len(), 4);
    assert!(!received[0].contains("sum them in a deque"));
    assert!(
        received[2].contains("sum them in a deque"),
        "{}",
        received[2]
    );
    let forked = ws.search_events_named("branch_forked");
    let SearchEvent::BranchForked { parent, .. } = forked
        .iter()
        .find(|e| e.branch_id() == continued["branch_id"].as_str().unwrap())
        .unwrap()
    else {
        unreachable!()
    };
    assert_eq!(parent.as_deref(), first["branch_id"].as_str());
    assert_replay_reproduces(ws.path(), &received);
}

#[test]
fn the_model_continues_a_compiler_branch_partial_checkpoint_the_compiler_left() {
    // With one deterministic branch and no local retries, the import the
    // compiler suggests leaves a partial checkpoint (two borrow errors)
    // nothing deterministic continues; the model works on from it.
    let server = OpenAiServer::start(vec![
        Answer::tool_call(
            "replace",
            json!({ "path": "src/lib.rs", "old": "let seen", "new": "let mut seen" }),
        ),
        Answer::tool_call(
            "replace",
            json!({ "path": "src/lib.rs", "old": "let total", "new": "let mut total" }),
        ),
        finish("both bindings are mutated"),
    ]);
    let ws = Workspace::of("local-repair");
    configure(
        &ws,
        &server,
        "[exploration]\nmax_branches = 1\nlocal_retries = 0\n",
    );
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    let lib = ws.read("src/lib.rs");
    assert!(
        lib.contains("HashSet;") && lib.contains("let mut seen") && lib.contains("let mut total"),
        "{lib}"
    );
    let branches: Vec<Value> = doc["steps"][0]["branches"].as_array().cloned().unwrap();
    let compiler = &branches[0];
    assert!(
        compiler["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("partial checkpoint"),
        "{compiler:#}"
    );
    let model = branches
        .iter()
        .find(|b| b["proposer"] == "model:m0")
        .unwrap();
    assert_eq!(model["strategy"], "local_repair", "{model:#}");
    assert_eq!(model["hard_pass"], true, "{model:#}");
    let forked = ws.search_events_named("branch_forked");
    let SearchEvent::BranchForked { parent, .. } = forked
        .iter()
        .find(|e| e.branch_id() == model["branch_id"].as_str().unwrap())
        .unwrap()
    else {
        unreachable!()
    };
    assert_eq!(parent.as_deref(), compiler["branch_id"].as_str());
}
