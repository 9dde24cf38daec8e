//! `test_policy = "backward-compatible"` end to end, for the test code that
//! is not an in-file test item: an example's and a bench's tests (with
//! `test = true`, `cargo test` runs them), and a helper in an out-of-line
//! test module (`#[cfg(test)] mod tests;` in `src/tests.rs`). The shipped
//! binary repairs a copy of `wrong-operator` (`add` subtracts) against a
//! scripted OpenAI-compatible server of our own on 127.0.0.1; a model that
//! makes the test agree with the bug is refused, and the user's files stay
//! as they were.

use crate::backward;
use crate::support;

use backward::{Edit, Tree, assert_refused_on};
use serde_json::Value;
use support::workspace::Workspace;

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

/// The test helper every fixture below asserts through; the model weakens
/// it (`{ 5 }` → `{ -1 }`) instead of fixing `add`.
const HELPER: &str = "fn expected() -> i32 {\n    5\n}\n";

/// `wrong-operator` whose only tests are `files` (its `tests/adds.rs` and
/// in-file test module gone, `manifest` appended to its `Cargo.toml`),
/// repaired by a model that makes the `edits` (path, old, new).
fn repair(
    files: &[(&str, &str)],
    manifest: &str,
    edits: &[(&str, &str, &str)],
) -> (Workspace, Tree, i32, Value) {
    let ws = Workspace::of("wrong-operator");
    std::fs::remove_file(ws.path().join("tests/adds.rs")).unwrap();
    let cargo = ws.read("Cargo.toml") + manifest;
    support::write_crate(ws.path(), &[("src/lib.rs", LIB), ("Cargo.toml", &cargo)]);
    support::write_crate(ws.path(), files);
    let edits: Vec<Edit<'_>> = edits
        .iter()
        .map(|(path, old, new)| Edit::Replace(path, old, new))
        .collect();
    backward::repair(ws, &edits)
}

#[test]
fn a_weakened_helper_of_an_example_test_is_measured_as_it_was() {
    let demo = format!(
        "fn main() {{\n    println!(\"{{}}\", wrong_operator::add(2, 3));\n}}\n\n{HELPER}\n\
         #[test]\nfn the_demo_sum_is_five() {{\n    assert_eq!(wrong_operator::add(2, 3), expected());\n}}\n"
    );
    let run = repair(
        &[("examples/demo.rs", &demo)],
        "\n[[example]]\nname = \"demo\"\ntest = true\n",
        &[("examples/demo.rs", "    5\n", "    -1\n")],
    );
    assert_refused_on(&run, "the_demo_sum_is_five");
}

#[test]
fn a_weakened_bench_test_is_measured_as_it_was() {
    let speed = format!(
        "{HELPER}\n#[test]\nfn adding_stays_right() {{\n    assert_eq!(wrong_operator::add(2, 3), expected());\n}}\n"
    );
    let run = repair(
        &[("benches/speed.rs", &speed)],
        "\n[[bench]]\nname = \"speed\"\ntest = true\n",
        &[("benches/speed.rs", "    5\n", "    -1\n")],
    );
    assert_refused_on(&run, "adding_stays_right");
}

/// `src/lib.rs` declaring `#[cfg(test)] mod tests;`, its tests in
/// `src/tests.rs` behind a helper.
fn out_of_line() -> [(&'static str, String); 2] {
    [
        ("src/lib.rs", format!("{LIB}\n#[cfg(test)]\nmod tests;\n")),
        (
            "src/tests.rs",
            format!(
                "use super::add;\n\n{HELPER}\n#[test]\nfn adds_two_numbers() {{\n    \
                 assert_eq!(add(2, 3), expected());\n}}\n"
            ),
        ),
    ]
}

#[test]
fn a_weakened_helper_in_an_out_of_line_test_module_is_measured_as_it_was_and_a_fix_beside_a_harmless_edit_is_kept()
 {
    let files = out_of_line();
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let run = repair(&files, "", &[("src/tests.rs", "    5\n", "    -1\n")]);
    assert_refused_on(&run, "tests::adds_two_numbers");

    // A real fix, beside an edit of the helper that keeps what it says, is
    // measured against the helper as it was and promoted.
    let (ws, _, code, doc) = repair(
        &files,
        "",
        &[
            ("src/lib.rs", "a - b", "a + b"),
            ("src/tests.rs", "    5\n", "    2 + 3\n"),
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"), "the fix is kept");
}
