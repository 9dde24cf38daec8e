//! Python workspaces end to end, through the shipped binary and the real
//! tools (ty, pyright, pytest, ruff from `scripts/install-test-deps.sh`) on
//! the `py-*` fixture projects: `trellis check` senses them with the Python
//! stage set, `trellis repair` fixes what ty's or ruff's own fixes fix and
//! nothing else, and the editor's Repair → Apply loop works on a `.py` file.

use crate::support;
use trellis_test_support::openai_server;

use std::path::{Path, PathBuf};
use std::process::Command;

use openai_server::{Answer, OpenAiServer};
use serde_json::{Value, json};
use support::repair_loop::ApplyBy;
use support::workspace::{Workspace, branches};
use support::{Client, files_under, vscode_capabilities};

/// The stages of a check report as `(stage, required, status)`.
fn stages(doc: &Value) -> Vec<(String, bool, String)> {
    doc["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["stage"].as_str().unwrap().to_owned(),
                s["required"].as_bool().unwrap(),
                s["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn clusters_of<'d>(doc: &'d Value, class: &str) -> Vec<&'d Value> {
    doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["class"] == class)
        .collect()
}

/// The interpreter the tests run with, as it names itself.
fn python() -> PathBuf {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn pytest_passes(root: &Path) -> bool {
    Command::new(python())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .current_dir(root)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("pytest runs")
        .status
        .success()
}

/// The sensors the first session of the workspace's ledger started with.
fn session_sensors(root: &Path) -> Vec<Value> {
    let db = rusqlite::Connection::open(root.join(".trellis/ledger.db")).unwrap();
    let payload: String = db
        .query_row(
            "SELECT payload FROM events WHERE kind = 'session_started' ORDER BY seq LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let event: Value = serde_json::from_str(&payload).unwrap();
    event["sensors"].as_array().unwrap().clone()
}

fn assert_untouched(ws: &Workspace, before: &std::collections::BTreeMap<PathBuf, Vec<u8>>) {
    let after = files_under(ws.path(), &[".trellis"]);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    assert!(before == &after, "a file changed");
}

#[test]
fn check_senses_a_python_project_with_its_stages_and_one_cluster_per_missing_name() {
    let ws = Workspace::of("py-missing-import");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(
        stages(&doc),
        [
            ("python.typecheck".into(), true, "failed".into()),
            ("python.test".into(), true, "failed".into()),
            ("python.lint".into(), false, "passed".into()),
        ]
    );
    // Both uses of `os` are one cluster, whose fix is ty's own import.
    let unresolved = clusters_of(&doc, "unresolved_name");
    assert_eq!(unresolved.len(), 1, "{doc:#}");
    assert_eq!(unresolved[0]["key"], "unresolved:os");
    assert_eq!(unresolved[0]["stage"], "python.typecheck");
    assert_eq!(unresolved[0]["sites"].as_array().unwrap().len(), 2);
    assert_eq!(unresolved[0]["title"], "`os` is not imported (2 sites)");
    let suggested: Vec<&str> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "unresolved-reference")
        .flat_map(|d| d["suggestions"][0]["alternatives"].as_array().unwrap())
        .map(|s| s["replacements"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(suggested, ["import os\n", "import os\n"]);
    // ty measured, and the fingerprint names the interpreter it was given.
    let sensors = session_sensors(ws.path());
    let ty = sensors.iter().find(|s| s["tool"] == "ty-check").unwrap();
    let interpreter = python().display().to_string();
    assert!(
        ty["version"].as_str().unwrap().contains(&interpreter),
        "{ty}"
    );
}

#[test]
fn repair_commits_tys_import_fix_and_writes_nothing_else() {
    let ws = Workspace::of("py-missing-import");
    let before = files_under(ws.path(), &[".trellis"]);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert!(
        branches(&doc).any(|b| b["outcome"] == "selected" && b["proposer"] == "ty-fixes"),
        "the verified route names ty: {doc:#}"
    );
    assert_eq!(
        doc["promotion"]["files"],
        json!(["clock/__init__.py"]),
        "{doc:#}"
    );
    let text = ws.read("clock/__init__.py");
    assert_eq!(text.matches("import os\n").count(), 1, "{text}");
    // No bytecode, pytest cache or ruff cache reached the user's tree.
    let after = files_under(ws.path(), &[".trellis"]);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    assert!(pytest_passes(ws.path()));
}

#[test]
fn the_verified_line_names_ty_as_the_fixs_source() {
    let ws = Workspace::of("py-missing-import");
    let out = ws.trellis(&["repair"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let verified = stdout
        .lines()
        .find(|l| l.starts_with("verified repair:"))
        .unwrap_or_else(|| panic!("no verified line: {stdout}"));
    assert!(verified.ends_with("(by a fix from ty)"), "{verified}");
}

#[test]
fn a_typo_no_tool_can_fix_is_one_cluster_and_nothing_is_written() {
    let ws = Workspace::of("py-typo");
    let before = files_under(ws.path(), &[".trellis"]);
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    let unresolved = clusters_of(&doc, "unresolved_name");
    assert_eq!(unresolved.len(), 1, "{doc:#}");
    assert_eq!(unresolved[0]["key"], "unresolved:xss");
    assert_eq!(unresolved[0]["title"], "`xss` cannot be found");
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_ne!(code, 0, "{doc:#}");
    assert_ne!(doc["status"], "hard_pass", "{doc:#}");
    assert_eq!(doc["model_would_help"], true, "{doc:#}");
    assert_untouched(&ws, &before);
}

#[test]
fn failing_pytest_tests_are_counterexamples_keyed_by_node_id_in_one_cluster() {
    let ws = Workspace::of("py-logic-bug");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(
        stages(&doc)[..2],
        [
            ("python.typecheck".into(), true, "passed".into()),
            ("python.test".into(), true, "failed".into()),
        ]
    );
    let names: Vec<&str> = doc["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "tests/test_calc.py::test_add_negative_numbers",
            "tests/test_calc.py::test_add_small_numbers",
        ]
    );
    let output = doc["failures"][1]["output"].as_str().unwrap();
    assert!(output.contains("assert -1 == 5"), "{output}");
    // One bug, two failing tests: one cluster, by the function they call.
    let failing = clusters_of(&doc, "test_failure");
    assert_eq!(failing.len(), 1, "{doc:#}");
    assert_eq!(failing[0]["key"], "test-calls:add");
    assert_eq!(failing[0]["stage"], "python.test");
    // Found through the tests' `from calc import add`.
    assert_eq!(
        failing[0]["title"],
        "2 tests fail calling `add`, defined at calc/__init__.py:4"
    );
    // No tool has a fix for a logic bug: a model case.
    let before = files_under(ws.path(), &[".trellis"]);
    let (_, doc) = ws.json(&["repair", "--commit"]);
    assert_ne!(doc["status"], "hard_pass", "{doc:#}");
    assert_eq!(doc["model_would_help"], true, "{doc:#}");
    assert_untouched(&ws, &before);
}

#[test]
fn the_trap_import_type_checks_but_fails_its_test_and_is_never_written() {
    let ws = Workspace::of("py-trap");
    let before = files_under(ws.path(), &[".trellis"]);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_ne!(code, 0, "{doc:#}");
    assert_ne!(doc["status"], "hard_pass", "{doc:#}");
    // ty's fix was tried in a branch: it cleared the type check ...
    let tried: Vec<&str> = branches(&doc)
        .map(|b| b["label"].as_str().unwrap_or_default())
        .collect();
    assert!(
        tried
            .iter()
            .any(|l| l.contains("from scaler.approx import scale")),
        "{doc:#}"
    );
    // ... but the test proves it wrong, so nothing reached the user's files.
    assert_untouched(&ws, &before);
}

#[test]
fn warnings_alone_pass_and_a_repair_leaves_them_alone() {
    let ws = Workspace::of("py-warnings-only");
    let before = files_under(ws.path(), &[".trellis"]);
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["hard_pass"], true);
    let warnings = clusters_of(&doc, "warning");
    assert_eq!(warnings.len(), 1, "{doc:#}");
    assert_eq!(warnings[0]["stage"], "python.lint");
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "already_clean", "{doc:#}");
    assert_untouched(&ws, &before);
}

#[test]
fn a_test_module_that_does_not_import_is_a_diagnostic_at_its_import_not_a_failure() {
    let ws = Workspace::of("py-warnings-only");
    std::fs::write(
        ws.path().join("tests/test_broken.py"),
        "import not_a_module\n\n\ndef test_never():\n    pass\n",
    )
    .unwrap();
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    let collection: Vec<&Value> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "collection-error")
        .collect();
    assert_eq!(collection.len(), 1, "{doc:#}");
    let message = collection[0]["message"].as_str().unwrap();
    assert!(
        message.contains("No module named 'not_a_module'"),
        "{message}"
    );
    assert_eq!(collection[0]["primary"]["path"], "tests/test_broken.py");
    assert_eq!(collection[0]["primary"]["line_start"], 1);
    assert!(doc["failures"].as_array().unwrap().is_empty(), "{doc:#}");
}

#[test]
fn a_project_without_tests_passes_its_test_stage() {
    let ws = Workspace::of("py-warnings-only");
    std::fs::remove_dir_all(ws.path().join("tests")).unwrap();
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 0, "pytest's exit 5 is no failure: {doc:#}");
    assert_eq!(
        stages(&doc)[1],
        ("python.test".into(), true, "passed".into())
    );
}

#[test]
fn a_required_lint_stage_blocks_and_ruffs_safe_fix_repairs_it() {
    let ws = Workspace::of("py-warnings-only");
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[stages]\nrequired = [\"python.typecheck\", \"python.test\", \"python.lint\"]\n",
    )
    .unwrap();
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(
        stages(&doc)[2],
        ("python.lint".into(), true, "failed".into())
    );
    let fix = &doc["diagnostics"][0]["suggestions"][0]["alternatives"][0];
    assert_eq!(fix["applicability"], "machine-applicable", "{doc:#}");
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(
        branches(&doc).any(|b| b["outcome"] == "selected" && b["proposer"] == "ruff-fixes"),
        "the verified route names ruff: {doc:#}"
    );
    assert!(!ws.read("greet.py").contains("import sys"));
    assert!(pytest_passes(ws.path()));
}

#[test]
fn a_required_stage_of_a_language_the_workspace_lacks_is_refused_by_key() {
    let ws = Workspace::of("py-warnings-only");
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[stages]\nrequired = [\"build\", \"python.test\"]\n",
    )
    .unwrap();
    let out = ws.trellis(&["check"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("trellis.toml"), "{stderr}");
    assert!(
        stderr.contains("`stages.required` names `build`"),
        "{stderr}"
    );
    assert!(stderr.contains("Cargo.toml"), "{stderr}");
}

#[test]
fn a_virtualenv_in_the_workspace_measures_and_no_slot_holds_a_copy() {
    let ws = Workspace::of("py-logic-bug");
    ws.make_venv();
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(
        stages(&doc)[1],
        ("python.test".into(), true, "failed".into())
    );
    let sensors = session_sensors(ws.path());
    let pytest = sensors.iter().find(|s| s["tool"] == "pytest").unwrap();
    assert!(
        pytest["version"].as_str().unwrap().contains("from .venv"),
        "{pytest}"
    );
    let copies: Vec<PathBuf> = files_under(ws.cache(), &[])
        .into_keys()
        .filter(|p| p.ends_with("pyvenv.cfg"))
        .collect();
    assert!(copies.is_empty(), "{copies:?}");
}

#[test]
fn pyright_measures_under_its_own_fingerprint_where_ty_is_not_installed() {
    let ws = Workspace::of("py-typo");
    // A PATH with the interpreter and pyright (and node) but without ty.
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(python(), bin.path().join("python3")).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.path().display());
    let out = ws
        .command(&["check", "--format", "json"])
        .env("PATH", path)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        stages(&doc)[0],
        ("python.typecheck".into(), true, "failed".into())
    );
    let unresolved = clusters_of(&doc, "unresolved_name");
    assert_eq!(unresolved.len(), 1, "{doc:#}");
    assert_eq!(unresolved[0]["key"], "unresolved:xss");
    assert_eq!(doc["diagnostics"][0]["code"], "reportUndefinedVariable");
    let tools: Vec<String> = session_sensors(ws.path())
        .iter()
        .map(|s| s["tool"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        tools.iter().any(|t| t == "pyright") && !tools.iter().any(|t| t == "ty-check"),
        "{tools:?}"
    );
}

#[test]
fn a_crate_with_a_python_package_beside_it_runs_both_stage_sets() {
    let ws = Workspace::of("py-warnings-only");
    std::fs::write(
        ws.path().join("Cargo.toml"),
        "[package]\nname = \"mixed\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::create_dir(ws.path().join("src")).unwrap();
    std::fs::write(
        ws.path().join("src/lib.rs"),
        "pub fn two() -> u32 { 2 }\n#[test]\nfn two_is_two() { assert_eq!(two(), 2); }\n",
    )
    .unwrap();
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 0, "{doc:#}");
    let names: Vec<(String, bool, String)> = stages(&doc);
    assert_eq!(
        names,
        [
            ("build".into(), true, "passed".into()),
            ("test".into(), true, "passed".into()),
            ("python.typecheck".into(), true, "passed".into()),
            ("python.test".into(), true, "passed".into()),
            ("python.lint".into(), false, "passed".into()),
        ]
    );
}

#[test]
fn a_logic_bug_pytest_reveals_is_fixed_by_the_model_in_a_verified_branch() {
    let server = OpenAiServer::start(vec![
        Answer::tool_call("read_file", json!({ "path": "calc/__init__.py" })),
        Answer::tool_call(
            "replace",
            json!({ "path": "calc/__init__.py", "old": "a - b", "new": "a + b" }),
        ),
        Answer::tool_call("run_tests", json!({})),
        Answer::tool_call("finish", json!({ "summary": "add adds" })),
    ]);
    let ws = Workspace::of("py-logic-bug");
    ws.with_models(&[&server.base_url]);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "the model's fix is promoted: {doc:#}");
    assert!(ws.read("calc/__init__.py").contains("a + b"));
    assert!(pytest_passes(ws.path()));
    let model = branches(&doc)
        .find(|b| b["strategy"] == "model_actor")
        .unwrap_or_else(|| panic!("no model branch ran: {doc:#}"));
    assert_eq!(model["proposer"], "model:m0", "{model:#}");
    assert_eq!(model["hard_pass"], true, "{model:#}");
    // The model saw pytest's counterexamples, by node id; its run_tests ran
    // the Python test stage.
    let requests = server.received();
    let first = String::from_utf8_lossy(&requests[0].body);
    assert!(
        first.contains("tests/test_calc.py::test_add_small_numbers"),
        "{first}"
    );
    let after_tests = String::from_utf8_lossy(&requests[3].body);
    assert!(after_tests.contains("python.test: passed"), "{after_tests}");
}

const CLOCK: &str = "clock/__init__.py";

#[test]
fn the_editor_repairs_a_python_file_and_applies_the_verified_import() {
    let ws = Workspace::of("py-missing-import");
    let (mut client, _) = Client::start(ws.path(), vscode_capabilities(), None);
    let diagnostic = client.open_for_diagnostic(CLOCK, "unresolved-reference");
    client.repair_and_apply(CLOCK, &diagnostic, ApplyBy::Resolve);
    assert!(ws.read(CLOCK).contains("import os\n"));
    assert!(pytest_passes(ws.path()));
    client.shutdown();
}

/// Issue 9 item 12 for pytest: `python.test` is declared nondeterministic
/// by default, so the test that fails on its first run once the import is
/// fixed is re-run once by its node id in the same slot, passes, and is
/// reported as flaky: it blocks hard pass but supports no no-good, so the
/// next repair of the same state is not refused and commits the fix.
#[test]
fn a_flaky_pytest_test_is_rerun_by_node_id_and_never_becomes_a_no_good() {
    const FLAKY: &str = "tests/test_clock.py::test_here_is_the_working_directory";
    let ws = Workspace::of("py-flaky-test");
    let marker = ws.flaky_marker();
    let repair = |args: &[&str]| ws.json_with(args, &[("FLAKY_TEST_MARKER", &marker)]);

    let (code, doc) = repair(&["repair"]);
    assert_ne!(code, 0, "a flaky failure blocks hard pass: {doc:#}");
    assert!(marker.exists(), "the fixed test ran and failed once");
    support::flaky::assert_flaky_and_no_no_good(&ws, &doc, "python.test", &[FLAKY]);

    // The test no longer fails: nothing recorded stands in the repair's way.
    let (code, doc) = repair(&["repair", "--commit"]);
    assert_eq!(code, 0, "the later repair is not blocked: {doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert!(ws.read("clock/__init__.py").contains("import os\n"));
    assert!(pytest_passes(ws.path()));
}

/// Issue 12: ruff's unsafe fix (removing an unused local) never joins the
/// combined candidate of safe fixes; it is an alternative of its own,
/// verified like any candidate before it is written.
#[test]
fn ruffs_unsafe_fix_is_its_own_alternative_and_verified_before_it_is_written() {
    let ws = Workspace::of("py-unsafe-fix");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    let unsafe_fix = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "F841")
        .map(|d| &d["suggestions"][0]["alternatives"][0])
        .unwrap_or_else(|| panic!("no F841: {doc:#}"));
    assert_eq!(unsafe_fix["applicability"], "maybe-incorrect", "{doc:#}");

    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    let branches: Vec<&Value> = branches(&doc).collect();
    let removed_local = branches
        .iter()
        .find(|b| {
            b["label"]
                .as_str()
                .unwrap_or_default()
                .contains("unused variable")
        })
        .unwrap_or_else(|| panic!("no branch removes the unused local: {doc:#}"));
    assert_ne!(
        removed_local["strategy"], "apply_suggestions",
        "the unsafe fix is an alternative, not part of the combined candidate: {doc:#}"
    );
    let text = ws.read("greet.py");
    assert!(
        !text.contains("import sys") && !text.contains("unused ="),
        "{text}"
    );
    assert!(pytest_passes(ws.path()));
}
