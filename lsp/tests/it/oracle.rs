//! `[verification] test_policy = "external-oracle"` through the shipped
//! binary (erratum 37): the oracle's hidden tests judge every candidate
//! whose own checks pass, a failing oracle blocks the write and is shown,
//! a missing or unrunnable oracle refuses the repair naming the key, and
//! no branch, diff or model tool ever sees the oracle's files.

use crate::support;
use crate::wrong_operator;
use trellis_test_support::openai_server;

use openai_server::{Answer, OpenAiServer};
use serde_json::{Value, json};
use support::model::models_toml;
use support::workspace::{Workspace, branches};
use wrong_operator::{finish, fix};

/// The withheld test file: an integration test of the crate, which the
/// crate's own `cargo test` never sees in a branch.
const ORACLE: &str = "tests/oracle.rs";
/// A line of the oracle no branch, diff, output or model request may hold.
const SECRET: &str = "oracle-only: three words, each counted";

fn oracle_toml(path: &str, command: &[&str]) -> String {
    let command: Vec<String> = command.iter().map(|w| format!("\"{w}\"")).collect();
    format!(
        "[verification]\ntest_policy = \"external-oracle\"\noracle_path = \"{path}\"\n\
         oracle_command = [{}]\n",
        command.join(", ")
    )
}

/// `missing-import` (whose only fix is importing `HashMap`) with a hidden
/// test asserting `expected` for the count of `"a"` in `["a", "b", "a"]`.
fn missing_import_with_oracle(expected: usize) -> Workspace {
    let ws = Workspace::of("missing-import");
    std::fs::create_dir_all(ws.path().join("tests")).unwrap();
    std::fs::write(
        ws.path().join(ORACLE),
        format!(
            "// {SECRET}\n#[test]\nfn counts_as_the_task_says() {{\n    \
             let counts = missing_import::frequencies(&[\"a\", \"b\", \"a\"]);\n    \
             assert_eq!(counts[\"a\"], {expected});\n}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        ws.path().join("trellis.toml"),
        oracle_toml(ORACLE, &["cargo", "test", "--test", "oracle"]),
    )
    .unwrap();
    ws
}

/// Makes `script` (one line of `sh`) the oracle of `ws`, at `tests/oracle.sh`.
fn with_oracle_script(ws: &Workspace, script: &str) {
    std::fs::create_dir_all(ws.path().join("tests")).unwrap();
    std::fs::write(
        ws.path().join("tests/oracle.sh"),
        format!("# {SECRET}\n{script}\n"),
    )
    .unwrap();
    std::fs::write(
        ws.path().join("trellis.toml"),
        oracle_toml("tests/oracle.sh", &["sh", "tests/oracle.sh"]),
    )
    .unwrap();
}

/// Every file under `dir` whose text holds `needle`.
fn files_holding(dir: &std::path::Path, needle: &str) -> Vec<std::path::PathBuf> {
    support::files_under(dir, &[])
        .into_iter()
        .filter(|(_, bytes)| String::from_utf8_lossy(bytes).contains(needle))
        .map(|(path, _)| path)
        .collect()
}

#[test]
fn an_oracle_that_passes_lets_the_verified_fix_be_written() {
    let ws = missing_import_with_oracle(2);
    let oracle_before = ws.read(ORACLE);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert!(
        ws.read("src/lib.rs")
            .contains("use std::collections::HashMap;")
    );
    let chosen = branches(&doc)
        .find(|b| b["outcome"] == "selected")
        .expect("a branch was chosen");
    assert_eq!(chosen["oracle"]["status"], "passed", "{chosen:#}");
    let changed = support::workspace::changed_paths(&doc);
    assert_eq!(changed, ["src/lib.rs"], "the oracle is never in a diff");
    assert_eq!(ws.read(ORACLE), oracle_before, "the oracle is untouched");
    assert_eq!(
        files_holding(ws.cache(), SECRET),
        Vec::<std::path::PathBuf>::new(),
        "no slot keeps the oracle once it has run"
    );
}

#[test]
fn an_oracle_that_fails_blocks_the_write_and_is_shown() {
    let ws = missing_import_with_oracle(3);
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_ne!(code, 0, "{doc:#}");
    assert_ne!(doc["status"], "hard_pass", "{doc:#}");
    assert_eq!(doc["promotion"], Value::Null, "{doc:#}");
    assert_eq!(ws.tree(), before, "nothing is written");
    let judged: Vec<&Value> = branches(&doc)
        .filter(|b| b["oracle"]["status"] == "failed")
        .collect();
    assert!(!judged.is_empty(), "{doc:#}");
    for branch in &judged {
        assert_eq!(branch["hard_pass"], false, "{branch:#}");
        let stages: Vec<&str> = branch["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["status"].as_str().unwrap())
            .collect();
        assert!(
            stages.iter().all(|s| *s == "passed"),
            "only the oracle failed: {branch:#}"
        );
        let reason = branch["oracle"]["reason"].as_str().unwrap();
        assert!(
            reason.contains("`verification.oracle_command` exited with status 101"),
            "{reason}"
        );
    }
    assert!(
        !doc.to_string().contains(SECRET),
        "the report names the oracle, never its text"
    );

    let out = ws.trellis(&["repair"]);
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(
        human.contains("oracle: failed, so this is no verified fix"),
        "{human}"
    );
    assert!(!human.contains("verified repair:"), "{human}");
}

#[test]
fn the_oracle_runs_confined_to_its_slot_and_cannot_write_the_users_files() {
    let ws = Workspace::of("missing-import");
    let escape = ws.path().join("written-by-the-oracle");
    // The oracle tries to write into the user's workspace by its absolute
    // path, and passes only if that write succeeded.
    with_oracle_script(&ws, &format!("touch '{}' || exit 7", escape.display()));
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_ne!(code, 0, "{doc:#}");
    assert!(!escape.exists(), "the oracle wrote outside its slot");
    assert_eq!(ws.tree(), before, "nothing is written");
    let reasons: Vec<&str> = branches(&doc)
        .filter_map(|b| b["oracle"]["reason"].as_str())
        .collect();
    assert!(
        !reasons.is_empty() && reasons.iter().all(|r| r.contains("status 7")),
        "the refused write failed the oracle: {doc:#}"
    );
}

#[test]
fn an_oracle_that_changes_the_candidates_files_is_a_failed_oracle() {
    let ws = Workspace::of("missing-import");
    // The oracle "passes" by editing the candidate it is to judge: appends
    // to the verified tree's src/lib.rs inside its slot, then exits 0.
    with_oracle_script(&ws, "echo '// rewritten by the oracle' >> src/lib.rs");
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(doc["promotion"], Value::Null, "{doc:#}");
    assert_eq!(ws.tree(), before, "nothing is written");
    let reasons: Vec<&str> = branches(&doc)
        .filter(|b| b["oracle"]["status"] == "failed")
        .filter_map(|b| b["oracle"]["reason"].as_str())
        .collect();
    assert!(
        !reasons.is_empty()
            && reasons
                .iter()
                .all(|r| r.contains("the oracle changed the candidate's src/lib.rs")),
        "an oracle's exit 0 after rewriting the candidate is no pass: {doc:#}"
    );
    assert_eq!(
        files_holding(ws.cache(), "rewritten by the oracle"),
        Vec::<std::path::PathBuf>::new(),
        "the candidate's own src/lib.rs is put back in its slot"
    );
}

#[test]
fn a_missing_or_unrunnable_oracle_refuses_the_repair_naming_the_key() {
    for (config, key) in [
        (
            oracle_toml("tests/absent.rs", &["cargo", "test"]),
            "`verification.oracle_path` names `tests/absent.rs`",
        ),
        (
            oracle_toml(ORACLE, &["no-such-oracle-runner", "--all"]),
            "`verification.oracle_command` runs `no-such-oracle-runner`",
        ),
    ] {
        let ws = missing_import_with_oracle(2);
        std::fs::write(ws.path().join("trellis.toml"), &config).unwrap();
        let before = ws.tree();
        let out = ws.trellis(&["repair", "--commit"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains(key), "{key}: {stderr}");
        assert_eq!(ws.tree(), before, "{key}: nothing is written");
        assert!(
            ws.search_events().is_empty(),
            "{key}: no search ran or spent anything"
        );
    }
}

#[test]
fn a_model_that_tries_to_read_the_oracle_is_refused_and_told_why() {
    let server = OpenAiServer::start(vec![
        Answer::tool_call("read_file", json!({ "path": ORACLE })),
        Answer::tool_call("list_files", json!({ "path": "tests" })),
        Answer::tool_call("search", json!({ "pattern": "oracle-only" })),
        fix(),
        finish("add adds"),
    ]);
    let ws = Workspace::of("wrong-operator");
    std::fs::write(
        ws.path().join(ORACLE),
        format!(
            "// {SECRET}\n#[test]\nfn adds_negatives() {{\n    \
             assert_eq!(wrong_operator::add(-2, 2), 0);\n}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        ws.path().join("trellis.toml"),
        models_toml(&[&server.base_url], 60)
            + &oracle_toml(ORACLE, &["cargo", "test", "--test", "oracle"]),
    )
    .unwrap();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "the model's fix passes the oracle: {doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));

    let bodies = server.bodies();
    assert!(bodies.len() >= 4, "{}", bodies.len());
    // The second request carries the answer to the first call: a refusal.
    assert!(
        bodies[1].contains("read_file error")
            && bodies[1].contains("is withheld: it is the verification oracle's")
            && bodies[1].contains("verification.oracle_path"),
        "{}",
        bodies[1]
    );
    assert!(
        !bodies[2].contains("oracle.rs\\n") && bodies[2].contains("list_files ok"),
        "the listing leaves the oracle out: {}",
        bodies[2]
    );
    assert!(
        bodies.iter().all(|b| !b.contains(SECRET)),
        "no request holds the oracle's text"
    );
    let model = branches(&doc)
        .find(|b| b["strategy"] == "model_actor")
        .expect("a model branch ran");
    assert_eq!(model["oracle"]["status"], "passed", "{model:#}");
}
