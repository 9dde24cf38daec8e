//! A stage the earlier stages already decide is reported without running:
//! `cargo test` on a crate whose `cargo check` found an error in code every
//! test build compiles would stop at that error, so Trellis says so instead
//! of compiling it again. Driven through the shipped binary with real cargo;
//! the control proves the test stage still runs where the build's errors
//! cannot stop it (a bench target, which `cargo test` does not build).

mod support;

use support::workspace::{Workspace, stage};
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
