//! Slots are built where the workspace is (`[build] at_workspace_path`, on
//! by default; Linux): cargo in a slot runs in a private mount namespace
//! that shows the slot at the workspace's path and the slot's target
//! directory at the user's, so rustc can reuse the user's incremental
//! state. What a user must be able to rely on, each through the shipped
//! binary and real cargo: the build sees the workspace's path; whatever it
//! writes there lands in the slot, never in the user's files or `target/`;
//! a diagnostic named by that path is still the workspace's file; the key
//! switches it off.

use crate::support;

use std::path::Path;
use std::time::SystemTime;

use support::workspace::{Workspace, stage};

/// A crate whose test records the path it was compiled at and writes a
/// file there at run time, the way a test writing a fixture would.
const LIB: &str = r#"pub fn one() -> u32 {
    1
}

#[cfg(test)]
mod tests {
    #[test]
    fn sees_its_manifest_dir() {
        let dir = env!("CARGO_MANIFEST_DIR");
        std::fs::write(format!("{dir}/written-by-a-test"), dir).unwrap();
        assert_eq!(super::one(), 1);
    }
}
"#;

fn crate_at(ws: &Workspace, lib: &str) {
    support::write_crate(
        ws.path(),
        &[("Cargo.toml", support::CARGO_TOML), ("src/lib.rs", lib)],
    );
}

/// The user's own cargo, in place, into the workspace's `target/`.
fn user_cargo(root: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("cargo")
        .args(args)
        .current_dir(root)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap()
}

/// The user's own `cargo test` of [`LIB`], which passes; the file its test
/// writes is removed again.
fn user_tests(root: &Path) {
    let out = user_cargo(root, &["test", "--quiet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(root.join("written-by-a-test")).unwrap();
}

/// Every file of the user's `target/` with its bytes and its mtime (cargo
/// judges freshness by mtimes).
type TargetFiles = std::collections::BTreeMap<std::path::PathBuf, (Vec<u8>, SystemTime)>;

fn target_files(root: &Path) -> TargetFiles {
    let target = root.join("target");
    support::files_under(&target, &[])
        .into_iter()
        .map(|(file, bytes)| {
            let meta = std::fs::symlink_metadata(target.join(&file)).unwrap();
            (file, (bytes, meta.modified().unwrap()))
        })
        .collect()
}

/// The files the slots' tests wrote, found in the cache: each one's text
/// is the `CARGO_MANIFEST_DIR` the test was compiled with.
fn written_in_slots(cache: &Path) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                walk(&entry.path(), out);
            } else if entry.file_name() == "written-by-a-test" {
                out.push(std::fs::read_to_string(entry.path()).unwrap());
            }
        }
    }
    let mut out = Vec::new();
    walk(cache, &mut out);
    out
}

#[test]
fn a_slot_builds_at_the_workspace_path_and_writes_only_into_the_slot() {
    let ws = Workspace::empty();
    crate_at(&ws, LIB);
    user_tests(ws.path());
    let (files, target) = (ws.tree(), target_files(ws.path()));

    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(stage(&doc, "test")["status"], "passed", "{doc:#}");

    let root = std::fs::canonicalize(ws.path()).unwrap();
    assert_eq!(
        written_in_slots(ws.cache()),
        [root.display().to_string()],
        "the slot's test was not compiled at the workspace's path"
    );
    assert!(
        !ws.path().join("written-by-a-test").exists(),
        "the slot's test wrote into the user's workspace"
    );
    assert_eq!(ws.tree(), files, "the user's files changed");
    assert_eq!(
        target_files(ws.path()),
        target,
        "the user's target/ changed"
    );
}

/// How many of the user's incremental dependency graphs a slot shares (a
/// second link: rustc itself writes each graph anew, never linked).
fn shared_dep_graphs(root: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let incremental = root.join("target/debug/incremental");
    support::files_under(&incremental, &[])
        .keys()
        .filter(|file| file.ends_with("dep-graph.bin"))
        .filter(|file| std::fs::metadata(incremental.join(file)).unwrap().nlink() > 1)
        .count()
}

#[test]
fn a_slot_rebuilding_a_changed_member_leaves_the_users_incremental_state_intact() {
    let ws = Workspace::empty();
    crate_at(&ws, LIB);
    user_tests(ws.path());
    // The user changes a function body after their build: the slot's rustc
    // starts from the user's incremental sessions (linked into the slot),
    // recompiles what changed, and saves new sessions.
    std::fs::write(
        ws.path().join("src/lib.rs"),
        LIB.replace("    1\n}", "    2 - 1\n}"),
    )
    .unwrap();
    let target = target_files(ws.path());

    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(stage(&doc, "test")["status"], "passed", "{doc:#}");
    assert!(
        shared_dep_graphs(ws.path()) > 0,
        "the slot did not start from the user's incremental state"
    );
    assert_eq!(
        target_files(ws.path()),
        target,
        "the slot's rustc wrote into the user's target/"
    );
}

#[test]
fn a_diagnostic_named_by_the_workspace_path_is_the_workspaces_file() {
    let ws = Workspace::empty();
    // `include!` by absolute path: rustc names the included file by the
    // path the build saw, the workspace's.
    crate_at(
        &ws,
        "include!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/src/generated.rs\"));\n",
    );
    std::fs::write(
        ws.path().join("src/generated.rs"),
        "pub fn two() -> u32 {\n    \"two\"\n}\n",
    )
    .unwrap();
    // The user's own check, which stops at the same error.
    user_cargo(ws.path(), &["check", "--quiet", "--all-targets"]);

    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(stage(&doc, "build")["status"], "failed", "{doc:#}");
    let diagnostics = doc["diagnostics"].as_array().unwrap();
    assert!(
        diagnostics
            .iter()
            .any(|d| d["code"] == "E0308" && d["primary"]["path"] == "src/generated.rs"),
        "the mismatched type is not placed in src/generated.rs: {doc:#}"
    );
}

#[test]
fn at_workspace_path_false_builds_each_slot_at_its_own_path() {
    let ws = Workspace::empty();
    crate_at(&ws, LIB);
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[build]\nat_workspace_path = false\n",
    )
    .unwrap();
    user_tests(ws.path());

    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 0, "{doc:#}");
    let seen = written_in_slots(ws.cache());
    let root = std::fs::canonicalize(ws.path()).unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_ne!(seen[0], root.display().to_string());
    assert!(
        Path::new(&seen[0]).starts_with(std::fs::canonicalize(ws.cache()).unwrap()),
        "{seen:?}"
    );
}

#[test]
fn a_slot_that_cannot_enter_its_namespace_is_built_at_its_own_path() {
    let ws = Workspace::empty();
    crate_at(&ws, LIB);
    user_tests(ws.path());
    let files = ws.tree();

    // The fault: the test stage's cargo (the second run) is refused its
    // namespace, as a hardened kernel refuses `unshare`.
    let (code, doc) = ws.json_with(&["check"], &[("TRELLIS_FAILPOINT", "mirror-enter:2:fail")]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(stage(&doc, "test")["status"], "passed", "{doc:#}");
    let seen = written_in_slots(ws.cache());
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        Path::new(&seen[0]).starts_with(std::fs::canonicalize(ws.cache()).unwrap()),
        "the test stage did not fall back to the slot's own path: {seen:?}"
    );
    assert_eq!(ws.tree(), files, "the user's files changed");
}
