//! `test_policy = "backward-compatible"` end to end, for what decides which
//! tests run rather than what they say: a model that switches the failing
//! test off in `Cargo.toml` (`[lib] test = false`, `autotests = false`, a
//! `[features]` default that no longer enables the test's feature) or in
//! cargo's configuration (a `.cargo/config.toml` whose `--cfg` hides it)
//! is refused, and the user's files stay as they were; a fix that needs a
//! new dependency keeps it in the run of the original tests and is
//! promoted. The shipped binary repairs a copy of `wrong-operator` (`add`
//! subtracts) against a scripted OpenAI-compatible server of our own on
//! 127.0.0.1.

use crate::backward;
use crate::support;

use backward::{Edit, Tree, assert_refused_on};
use serde_json::Value;
use support::workspace::Workspace;

/// `add` without its in-file tests: the tests that fail are in `tests/`.
const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

/// `wrong-operator` with `files` written over it, repaired by a model
/// that makes the `edits`.
fn repair(files: &[(&str, &str)], edits: &[Edit<'_>]) -> (Workspace, Tree, i32, Value) {
    let ws = Workspace::of("wrong-operator");
    support::write_crate(ws.path(), files);
    backward::repair(ws, edits)
}

/// The last line of the fixture's `[package]` table, where the model adds
/// its keys and tables.
const PACKAGE_END: &str = "edition = \"2021\"\n";

/// A file of the `wrong-operator` fixture as it ships.
fn fixture_file(path: &str) -> String {
    std::fs::read_to_string(support::workspace::fixture("wrong-operator").join(path)).unwrap()
}

/// The fixture's `tests/adds.rs` (its `one_and_one_make_two` fails) behind
/// the inner attribute `gate`.
fn gated_adds(gate: &str) -> String {
    format!("{gate}\n\n{}", fixture_file("tests/adds.rs"))
}

#[test]
fn a_lib_whose_tests_are_switched_off_is_measured_with_them() {
    // The in-file `tests::adds_two_numbers` is the only failing test.
    let holds = "#[test]\nfn adding_zero_changes_nothing() {\n    \
                 assert_eq!(wrong_operator::add(2, 0), 2);\n}\n";
    let run = repair(
        &[("tests/adds.rs", holds)],
        &[Edit::Replace(
            "Cargo.toml",
            PACKAGE_END,
            "edition = \"2021\"\n\n[lib]\ntest = false\n",
        )],
    );
    assert_refused_on(&run, "adds_two_numbers");
}

#[test]
fn integration_tests_no_longer_discovered_are_measured_as_they_were() {
    let run = repair(
        &[("src/lib.rs", LIB)],
        &[Edit::Replace(
            "Cargo.toml",
            PACKAGE_END,
            "edition = \"2021\"\nautotests = false\n",
        )],
    );
    assert_refused_on(&run, "one_and_one_make_two");
}

#[test]
fn a_default_feature_dropped_from_under_a_test_is_put_back() {
    let gated = gated_adds("#![cfg(feature = \"checks\")]");
    let cargo = fixture_file("Cargo.toml") + "\n[features]\ndefault = [\"checks\"]\nchecks = []\n";
    let run = repair(
        &[
            ("src/lib.rs", LIB),
            ("tests/adds.rs", &gated),
            ("Cargo.toml", &cargo),
        ],
        &[Edit::Replace(
            "Cargo.toml",
            "default = [\"checks\"]",
            "default = []",
        )],
    );
    assert_refused_on(&run, "one_and_one_make_two");
}

#[test]
fn a_cargo_config_that_cfgs_a_test_away_is_absent_for_the_original_tests() {
    let gated = gated_adds("#![cfg(not(quick))]");
    let run = repair(
        &[("src/lib.rs", LIB), ("tests/adds.rs", &gated)],
        &[Edit::Write(
            ".cargo/config.toml",
            "[build]\nrustflags = [\"--cfg\", \"quick\"]\n",
        )],
    );
    assert_refused_on(&run, "one_and_one_make_two");
}

#[test]
fn a_build_script_that_cfgs_a_test_away_is_absent_for_the_original_tests() {
    let gated = gated_adds("#![cfg(not(quick))]");
    let run = repair(
        &[("src/lib.rs", LIB), ("tests/adds.rs", &gated)],
        &[Edit::Write(
            "build.rs",
            "fn main() {\n    println!(\"cargo::rustc-check-cfg=cfg(quick)\");\n    \
             println!(\"cargo::rustc-cfg=quick\");\n}\n",
        )],
    );
    assert_refused_on(&run, "one_and_one_make_two");
}

#[test]
fn a_fix_through_a_new_dependency_keeps_it_for_the_original_tests_and_is_promoted() {
    // A sibling crate the fix calls into: a path dependency, no network.
    let helper = [
        (
            "helper/Cargo.toml",
            "[package]\nname = \"helper\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "helper/src/lib.rs",
            "pub fn plus(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
        ),
    ];
    // The manifest edit also turns doc tests off, which the run of the
    // original tests undoes around the dependency: a run that dropped the
    // dependency would not build, and the candidate would be refused.
    let (ws, _, code, doc) = repair(
        &helper,
        &[
            Edit::Replace("src/lib.rs", "a - b", "helper::plus(a, b)"),
            Edit::Replace(
                "Cargo.toml",
                PACKAGE_END,
                "edition = \"2021\"\n\n[lib]\ndoctest = false\n\n\
                 [dependencies]\nhelper = { path = \"helper\" }\n",
            ),
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert!(
        ws.read("src/lib.rs").contains("helper::plus(a, b)"),
        "the fix is written"
    );
    let cargo = ws.read("Cargo.toml");
    assert!(
        cargo.contains("helper = { path = \"helper\" }") && cargo.contains("doctest = false"),
        "the candidate's manifest is written as the model left it: {cargo}"
    );
    assert!(ws.cargo_test_passes());
}
