//! More TypeScript workspaces end to end (issue 12's leftovers): the built
//! `trellis` on copies of the `tests/fixtures/ts-*` projects with the real
//! `tsc`, `tsserver` and `node` that `scripts/install-test-deps.sh` pins,
//! each project's `node_modules` laid out as links by
//! `tests/fixtures/ts-support/link-node-modules.sh`, as in
//! `tests/typescript.rs`.

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::files_under;
use support::workspace::{Workspace, branches, stage};

/// `trellis <args> --format json` with `FLAKY_TEST_MARKER` naming a file in
/// the private cache: the flaky fixture's test fails until it exists.
fn json_with_marker(ws: &Workspace, args: &[&str]) -> (i32, Value) {
    ws.json_with(args, &[("FLAKY_TEST_MARKER", ws.flaky_marker())])
}

/// Item 1: `typescript.test` is declared nondeterministic by default, so
/// the test that fails on its first run is re-run once, alone, by its
/// escaped name, passes, and is reported flaky: still failing the stage.
#[test]
fn a_flaky_node_test_is_rerun_by_name_and_reported_flaky() {
    const FLAKY: &str = "clock > ticks (60 times) per minute?";
    let ws = Workspace::of_node_project("ts-flaky-test");
    let (code, doc) = json_with_marker(&ws, &["check"]);
    assert!(ws.flaky_marker().exists(), "the test ran and failed once");
    assert_eq!(code, 1, "a flaky failure still fails the check: {doc:#}");
    let test = stage(&doc, "typescript.test");
    assert_eq!(test["status"], "failed", "{doc:#}");
    assert_eq!(
        test["flaky"],
        json!([format!("test/clock.test.ts::{FLAKY}")]),
        "{doc:#}"
    );
    let failures = doc["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{doc:#}");
    assert_eq!(failures[0]["name"], FLAKY);
    assert_eq!(failures[0]["rerun"], "passed", "{doc:#}");
}

/// Item 1, the other side: a test that fails every time fails again when
/// re-run, so it is evidence, not flaky.
#[test]
fn a_deterministic_node_test_failure_fails_again_and_is_not_flaky() {
    let ws = Workspace::of_node_project("ts-failing-test");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    let test = stage(&doc, "typescript.test");
    assert_eq!(test["status"], "failed", "{doc:#}");
    assert!(test["flaky"].is_null(), "{doc:#}");
    let failures = doc["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{doc:#}");
    assert_eq!(failures[0]["name"], "a quarter off 200 is 150");
    assert_eq!(failures[0]["rerun"], "failed_again", "{doc:#}");
}

/// What a user's `npm install` put in the monorepo fixture's package
/// `packages/report`: its own `node_modules/units`, which its code imports
/// and its test needs.
fn install_package_dependency(ws: &Workspace) {
    let units = ws.path().join("packages/report/node_modules/units");
    std::fs::create_dir_all(&units).unwrap();
    for (file, text) in [
        (
            "package.json",
            r#"{"name": "units", "version": "1.0.0", "type": "module", "exports": {"types": "./index.d.ts", "default": "./index.js"}}"#,
        ),
        (
            "index.js",
            "export function unit(short) { return { ms: \"milliseconds\" }[short] ?? short; }\n",
        ),
        (
            "index.d.ts",
            "export declare function unit(short: string): string;\n",
        ),
    ] {
        std::fs::write(units.join(file), text).unwrap();
    }
}

/// Item 2: a monorepo package's own `node_modules` is no content of a
/// snapshot; every slot links the user's at the same place, so the repair
/// is verified against the package the user installed there, without a copy
/// per slot, and only the fixed file is written.
#[test]
fn a_packages_own_node_modules_is_linked_into_every_slot_never_copied() {
    const NESTED: &str = "packages/report/node_modules";
    let ws = Workspace::of_node_project("ts-monorepo");
    install_package_dependency(&ws);
    let before = files_under(ws.path(), &[".trellis"]);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert_eq!(
        doc["promotion"]["files"],
        json!(["packages/report/src/report.ts"]),
        "{doc:#}"
    );
    assert!(
        ws.read("packages/report/src/report.ts")
            .contains("import { mean } from \"./stats.js\";"),
        "the language service's import"
    );

    let user = ws.path().canonicalize().unwrap().join(NESTED);
    let cached = files_under(ws.cache(), &[]);
    let links: Vec<&Path> = cached
        .keys()
        .filter(|path| path.ends_with(NESTED))
        .map(|path| path.as_path())
        .collect();
    assert!(
        links.len() >= 2,
        "the view and the branch that verified the fix link it: {links:?}"
    );
    for link in &links {
        let target = std::fs::read_link(ws.cache().join(link))
            .unwrap_or_else(|e| panic!("{} is no symlink: {e}", link.display()));
        assert_eq!(target, user, "{}", link.display());
    }
    let copied: Vec<&Path> = cached
        .keys()
        .filter(|path| path.to_string_lossy().contains(&format!("{NESTED}/")))
        .map(|path| path.as_path())
        .collect();
    assert!(copied.is_empty(), "nothing below it is copied: {copied:?}");

    let mut after = files_under(ws.path(), &[".trellis"]);
    after.remove(Path::new("packages/report/src/report.ts"));
    let mut unchanged = before;
    unchanged.remove(Path::new("packages/report/src/report.ts"));
    assert_eq!(
        after, unchanged,
        "only the repaired file changed; both node_modules are as they were"
    );
}

/// Item 3, the trap: the language service's fix declares the property the
/// base class assigns at run time; it type checks, but the declared field
/// is reset after `super()`, so the test that passed fails. Under the
/// default ρ trading the type error for that failure is a descent, but no
/// hard pass, so the other fix (an index signature) is measured too before
/// the descent is kept: it does not type check. The descent is accepted,
/// never promotable, and nothing is written.
#[test]
fn the_trap_declaration_type_checks_but_fails_its_test_and_is_never_written() {
    let ws = Workspace::of_node_project("ts-trap");
    let before = files_under(ws.path(), &[".trellis"]);
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 1, "nothing is promoted: {doc:#}");
    assert_eq!(doc["status"], "residuals_remain", "{doc:#}");
    assert!(doc["promotion"].is_null(), "{doc:#}");
    let branches: Vec<&Value> = branches(&doc).collect();
    let labelled = |prefix: &str| {
        branches
            .iter()
            .find(|b| b["label"].as_str().unwrap_or_default().starts_with(prefix))
            .copied()
            .unwrap_or_else(|| panic!("`{prefix}` was never tried: {doc:#}"))
    };
    let trap = labelled("Declare property 'total'");
    assert_eq!(trap["hard_pass"], false, "{trap:#}");
    assert_eq!(trap["energy"].as_f64(), Some(1.0), "{trap:#}");
    let index = labelled("Add index signature");
    assert_eq!(index["cause"]["kind"], "no_descent", "{index:#}");
    assert_eq!(
        stage(trap, "typescript.typecheck")["status"],
        "passed",
        "{trap:#}"
    );
    assert_eq!(
        stage(trap, "typescript.test")["status"],
        "failed",
        "{trap:#}"
    );
    assert_eq!(
        trap["clusters"],
        json!(["test `an invoice of 100 is 120 with tax` fails"]),
        "the failing test is what is left: {trap:#}"
    );
    assert_eq!(
        files_under(ws.path(), &[".trellis"]),
        before,
        "the user's tree must stay byte-identical"
    );
}

/// A project that keeps tsc's build information in `node_modules` (its
/// own `tsBuildInfoFile`), which a slot's sandbox keeps read-only, is
/// checked all the same, and its `node_modules` is left as it was: tsc
/// keeps a slot's build information in the slot's own directory.
#[test]
fn an_incremental_project_whose_build_info_is_in_node_modules_is_checked_and_node_modules_untouched()
 {
    let ws = Workspace::of_node_project("ts-clean");
    std::fs::write(
        ws.path().join("tsconfig.json"),
        r#"{
  "compilerOptions": {
    "target": "es2022",
    "module": "nodenext",
    "strict": true,
    "noEmit": true,
    "incremental": true,
    "tsBuildInfoFile": "node_modules/.cache/tsbuildinfo"
  },
  "include": ["src"]
}
"#,
    )
    .unwrap();
    let modules = support::files_under(&ws.path().join("node_modules"), &[]);
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        support::files_under(&ws.path().join("node_modules"), &[]),
        modules,
        "tsc wrote into the user's node_modules"
    );
}
