//! A stage another stage already decides is reported without running.
//! `cargo test` on a crate whose `cargo check` found an error in code every
//! test build compiles would stop at that error, so Trellis says so instead
//! of compiling it again; and a branch's `cargo check` is decided by its
//! `cargo test`, whose build compiled every target the check would. Driven
//! through the shipped binary with real cargo; the controls prove each stage
//! still runs where the other cannot decide it (a bench target, which
//! `cargo test` does not build).

use crate::support;

use serde_json::Value;
use support::workspace::{Workspace, branches, stage};
use support::{CARGO_TOML, write_crate};

/// A unit test that fails on purpose: seen in the report only if it ran.
const FAILING_TEST: &str = "\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn fails_when_run() {\n        assert_eq!(super::one(), 2);\n    }\n}\n";

/// A private crate of `files` (the `missing-mut` fixture's files replaced:
/// its manifest and library, and its lock file, which has no dependencies).
fn crate_of(files: &[(&str, &str)]) -> Workspace {
    let ws = Workspace::of("missing-mut");
    write_crate(ws.path(), files);
    ws
}

#[test]
fn a_test_stage_that_a_library_error_decides_is_reported_failed_without_running() {
    let lib = format!("pub fn one() -> u32 {{\n    undefined_value\n}}\n{FAILING_TEST}");
    let ws = crate_of(&[("Cargo.toml", CARGO_TOML), ("src/lib.rs", &lib)]);

    let (code, report) = ws.json(&["check"]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(stage(&report, "build")["status"], "failed", "{report}");
    let test = stage(&report, "test");
    assert_eq!(
        test["status"], "failed",
        "a required stage that cannot build fails: {report}"
    );
    let why = test["not_run"].as_str().expect("says it was not run");
    assert!(why.contains("lib target `fixture`"), "{why}");
    assert_eq!(report["failures"].as_array().unwrap().len(), 0, "{report}");
    assert_eq!(report["hard_pass"], false);

    let human = ws.trellis(&["check"]);
    let stdout = String::from_utf8_lossy(&human.stdout);
    assert!(
        stdout.contains("test failed (not run: the lib target `fixture` does not build)"),
        "{stdout}"
    );
}

#[test]
fn a_bench_error_leaves_the_test_stage_to_run() {
    let manifest = format!("{CARGO_TOML}\n[[bench]]\nname = \"speed\"\nharness = false\n");
    let lib = format!("pub fn one() -> u32 {{\n    1\n}}\n{FAILING_TEST}");
    let ws = crate_of(&[
        ("Cargo.toml", &manifest),
        ("src/lib.rs", &lib),
        (
            "benches/speed.rs",
            "fn main() {\n    let _n: u32 = \"not a number\";\n}\n",
        ),
    ]);

    let (code, report) = ws.json(&["check"]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(stage(&report, "build")["status"], "failed", "{report}");
    let test = stage(&report, "test");
    assert!(test.get("not_run").is_none(), "{report}");
    let failures = report["failures"].as_array().unwrap();
    assert!(
        failures.iter().any(|f| f["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("fails_when_run"))),
        "the unit test ran and failed: {report}"
    );
}

/// The missing-`mut` library (one suggestion fixes it) with a function
/// nothing calls: its warning is the one problem the fix leaves.
const MISSING_MUT_AND_DEAD_CODE: &str = "pub fn total(values: &[i32]) -> i32 {
    let sum = 0;
    for v in values {
        sum += v;
    }
    sum
}

fn never_called() {}

#[cfg(test)]
mod tests {
    #[test]
    fn sums_every_value() {
        assert_eq!(super::total(&[1, 2, 3]), 6);
    }
}
";

#[test]
fn a_branchs_build_stage_is_decided_by_its_test_build_and_the_written_repair_checks_as_measured() {
    let ws = crate_of(&[
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", MISSING_MUT_AND_DEAD_CODE),
    ]);

    let (code, report) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{report}");
    let branch = branches(&report).next().expect("a branch");
    let build = stage(branch, "build");
    assert_eq!(build["status"], "passed", "{report}");
    let why = build["not_run"].as_str().expect("the check did not run");
    assert!(why.contains("decided by the test stage's build"), "{why}");
    assert_eq!(stage(branch, "test")["status"], "passed", "{report}");

    // A real `cargo check` of the written repair finds what the branch's
    // test build reported for it: the same tree, problems and energy.
    let (_, check) = ws.json(&["check"]);
    assert!(stage(&check, "build").get("not_run").is_none(), "{check}");
    assert_eq!(check["root"], branch["root"], "{check}");
    let titles: Vec<&Value> = check["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["title"])
        .collect();
    assert_eq!(
        titles,
        branch["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>(),
        "{check}"
    );
    assert!(
        titles[0].as_str().unwrap().contains("never_called"),
        "{check}"
    );
    assert_eq!(check["energy"], branch["energy"], "{check}");
}

#[test]
fn a_bench_the_tests_never_build_keeps_the_branchs_check_running() {
    let manifest = format!("{CARGO_TOML}\n[[bench]]\nname = \"speed\"\nharness = false\n");
    let ws = crate_of(&[
        ("Cargo.toml", &manifest),
        ("src/lib.rs", MISSING_MUT_AND_DEAD_CODE),
        (
            "benches/speed.rs",
            "fn main() {\n    let _n: u32 = \"not a number\";\n}\n",
        ),
    ]);

    let (_, report) = ws.json(&["repair"]);
    let branch = branches(&report).next().expect("a branch");
    // The branch's `cargo test` builds and passes, but never compiles the
    // bench, so only a check of its own can see the bench's error.
    assert_eq!(stage(branch, "test")["status"], "passed", "{report}");
    let build = stage(branch, "build");
    assert!(build.get("not_run").is_none(), "{report}");
    assert_eq!(build["status"], "failed", "{report}");
    assert_eq!(branch["hard_pass"], false, "{report}");
    assert!(report["promotion"].is_null(), "{report}");
}
