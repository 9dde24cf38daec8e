//! The evidence is satisfied, not removed: with default settings (test
//! policy `evolving`), a scripted model that deletes the failing tests, or
//! switches them off (`#[ignore]`, `#[cfg(any())]`, `@pytest.mark.skip`,
//! `test.skip`), never gets its write through, and the refusal says why,
//! in Rust, Python and TypeScript. Each control shows the same model
//! making the real fix is written, so what is refused is the removal.

use crate::support;
use trellis_test_support::openai_server;

use openai_server::{Answer, OpenAiServer};
use serde_json::{Value, json};
use support::workspace::{Workspace, branches};

fn finish() -> Answer {
    Answer::tool_call("finish", json!({ "summary": "the tests pass now" }))
}

fn write(path: &str, content: &str) -> Answer {
    Answer::tool_call("write_file", json!({ "path": path, "content": content }))
}

fn replace(path: &str, old: &str, new: &str) -> Answer {
    Answer::tool_call("replace", json!({ "path": path, "old": old, "new": new }))
}

/// A private copy of `fixture` whose only configuration is the scripted
/// model at `server` (no test policy: the default).
fn with_model(fixture: &str, server: &OpenAiServer) -> Workspace {
    let ws = if fixture.starts_with("ts-") {
        Workspace::of_node_project(fixture)
    } else {
        Workspace::of(fixture)
    };
    ws.with_models(&[&server.base_url]);
    ws
}

/// Runs `repair --commit` where the model's only move is `script`: nothing
/// may be written, and the model's branch must be refused for the tests it
/// took away, naming `test` in the JSON and the human output, and `how`
/// in the JSON's reason.
fn assert_refused(fixture: &str, script: Vec<Answer>, test: &str, how: &str) {
    let server = OpenAiServer::start(script.clone());
    let ws = with_model(fixture, &server);
    let before = ws.tree();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 1, "{fixture}: nothing is promoted: {doc:#}");
    assert_eq!(ws.tree(), before, "{fixture}: nothing is written");
    assert_eq!(doc["promotion"], Value::Null, "{fixture}: {doc:#}");
    let model = branches(&doc)
        .find(|b| b["strategy"] == "model_actor")
        .unwrap_or_else(|| panic!("{fixture}: no model branch ran: {doc:#}"));
    assert_eq!(model["outcome"], "ineligible", "{fixture}: {model:#}");
    assert_eq!(
        model["cause"]["kind"], "tests_weakened",
        "{fixture}: {model:#}"
    );
    let reason = model["reason"].as_str().unwrap();
    assert!(
        reason.contains("removes or switches off tests that existed when the repair started")
            && reason.contains(test)
            && reason.contains(how),
        "{fixture}: {reason}"
    );

    // The same move, as a person reads it.
    let server = OpenAiServer::start(script);
    let ws = with_model(fixture, &server);
    let before = ws.tree();
    let out = ws.trellis(&["repair"]);
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(
        human.contains("not used: it removes or switches off tests the repair must satisfy")
            && human.contains(test),
        "{fixture}: {human}"
    );
    assert_eq!(ws.tree(), before, "{fixture}: nothing is written");
}

const RUST_LIB: &str = include_str!("../../../tests/fixtures/wrong-operator/src/lib.rs");

#[test]
fn a_model_that_deletes_the_failing_rust_tests_is_refused() {
    let without_tests = RUST_LIB.split("#[cfg(test)]").next().unwrap().to_owned();
    assert_refused(
        "wrong-operator",
        vec![
            write("src/lib.rs", &without_tests),
            write("tests/adds.rs", ""),
            finish(),
        ],
        "src/lib.rs: tests::adds_two_numbers",
        "removed or renamed",
    );
}

#[test]
fn a_model_that_ignores_or_compiles_out_the_failing_rust_tests_is_refused() {
    assert_refused(
        "wrong-operator",
        vec![
            replace(
                "src/lib.rs",
                "    #[test]\n    fn adds_two_numbers",
                "    #[test]\n    #[ignore]\n    fn adds_two_numbers",
            ),
            replace("tests/adds.rs", "#[test]", "#[test]\n#[ignore]"),
            finish(),
        ],
        "src/lib.rs: tests::adds_two_numbers",
        "switched off by `#[ignore]`",
    );
    assert_refused(
        "wrong-operator",
        vec![
            replace("src/lib.rs", "#[cfg(test)]", "#[cfg(any())]"),
            replace("tests/adds.rs", "#[test]", "#[cfg(FALSE)]\n#[test]"),
            finish(),
        ],
        "tests/adds.rs: one_and_one_make_two",
        "switched off by `#[cfg(FALSE)]`",
    );
}

#[test]
fn the_same_model_fixing_the_rust_code_instead_is_written() {
    let server = OpenAiServer::start(vec![replace("src/lib.rs", "a - b", "a + b"), finish()]);
    let ws = with_model("wrong-operator", &server);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));
    assert!(ws.read("src/lib.rs").contains("fn adds_two_numbers"));
}

const PY_TESTS: &str = include_str!("../../../tests/fixtures/py-logic-bug/tests/test_calc.py");

#[test]
fn a_model_that_deletes_or_skips_the_failing_pytest_tests_is_refused() {
    let only_the_passing_one =
        "from calc import add\n\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n";
    assert_refused(
        "py-logic-bug",
        vec![write("tests/test_calc.py", only_the_passing_one), finish()],
        "tests/test_calc.py: test_add_small_numbers",
        "removed or renamed",
    );
    let skipped = format!(
        "import pytest\n{}",
        PY_TESTS
            .replace(
                "def test_add_small_numbers",
                "@pytest.mark.skip(reason=\"later\")\ndef test_add_small_numbers"
            )
            .replace(
                "def test_add_negative_numbers",
                "@pytest.mark.xfail\ndef test_add_negative_numbers"
            )
    );
    assert_refused(
        "py-logic-bug",
        vec![write("tests/test_calc.py", &skipped), finish()],
        "tests/test_calc.py: test_add_small_numbers",
        "switched off by `@pytest.mark.skip(reason=\"later\")`",
    );
}

const TS_TESTS: &str =
    include_str!("../../../tests/fixtures/ts-failing-test/test/discount.test.ts");

#[test]
fn a_model_that_deletes_or_skips_the_failing_node_test_is_refused() {
    let without = TS_TESTS
        .split("test(\"a quarter off 200 is 150\"")
        .next()
        .unwrap()
        .to_owned()
        + "test(\"nothing off is the price\", () => {\n  assert.equal(discounted(80, 0), 80);\n});\n";
    assert_refused(
        "ts-failing-test",
        vec![write("test/discount.test.ts", &without), finish()],
        "test/discount.test.ts: a quarter off 200 is 150",
        "removed or renamed",
    );
    assert_refused(
        "ts-failing-test",
        vec![
            replace(
                "test/discount.test.ts",
                "test(\"a quarter off",
                "test.skip(\"a quarter off",
            ),
            finish(),
        ],
        "test/discount.test.ts: a quarter off 200 is 150",
        "switched off by `.skip`",
    );
}
