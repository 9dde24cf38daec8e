//! `trellis gc` and the collection at the end of a repair, through the
//! built binary: what resume still reads survives, what no live workspace
//! needs goes, a slot set another process holds is never touched, nor is
//! anything in the cache directory Trellis did not mark as its own, and a
//! cache directory inside the workspace stays out of its snapshots.

use std::path::{Path, PathBuf};

use serde_json::Value;
use trellis_engine::ledger::{DecodedRow, Ledger, LedgerEvent, fold_resume};

use crate::support;

use support::kill::{in_its_second_step, kill_repair_when};
use support::workspace::Workspace;

/// `trellis <args> <root>` with the cache directory `cache`, as JSON.
fn json_in(root: &Path, cache: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(args)
        .arg(root)
        .args(["--format", "json"])
        .env("TRELLIS_CACHE_DIR", cache)
        .env("XDG_CONFIG_HOME", cache.join("config"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"));
    (out.status.code().unwrap(), doc, stderr)
}

/// The slot-set directories (`ws-*`) in `cache`.
fn slot_sets(cache: &Path) -> Vec<PathBuf> {
    let mut sets: Vec<PathBuf> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("ws-"))
        .collect();
    sets.sort();
    sets
}

/// A second project, checked once with `cache` (so it has a real slot set
/// there) and then deleted. Returns its slot set.
fn deleted_workspace_slots(cache: &Path) -> PathBuf {
    let other = Workspace::of("missing-mut");
    let before = slot_sets(cache);
    let (code, _, stderr) = json_in(other.path(), cache, &["check"]);
    assert_eq!(code, 1, "{stderr}");
    let set = slot_sets(cache)
        .into_iter()
        .find(|set| !before.contains(set))
        .expect("checking a project makes its slot set");
    let owner = std::fs::read_to_string(set.join("workspace")).unwrap();
    assert_eq!(
        Path::new(&owner),
        other.path().canonicalize().unwrap(),
        "a slot set records the workspace it belongs to"
    );
    drop(other); // the project is deleted
    set
}

#[test]
fn a_killed_repairs_accepted_step_survives_gc_and_the_repair_continues() {
    let ws = Workspace::of("two-steps");
    kill_repair_when(&ws, "in its second step", in_its_second_step);
    let rows = Ledger::open(&ws.path().join(".trellis"))
        .unwrap()
        .rows()
        .unwrap();
    assert!(fold_resume(&rows).unwrap().interrupted.is_some());
    let stored: Vec<PathBuf> = rows
        .iter()
        .filter_map(|row| match &row.event {
            DecodedRow::Ledger(LedgerEvent::AcceptedStateStored(s)) => Some(s.files.clone()),
            _ => None,
        })
        .flatten()
        .map(|file| {
            let hex = file.blob.to_hex();
            ws.path()
                .join(".trellis/objects")
                .join(&hex[..2])
                .join(&hex[2..])
        })
        .collect();
    assert!(!stored.is_empty(), "the first step's state is stored");
    // A blob nothing names, as a finished repair leaves behind.
    let stray = ws.path().join(".trellis/objects/ab").join("cd".repeat(31));
    std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
    std::fs::write(&stray, b"left over").unwrap();

    let (code, doc) = ws.json(&["gc"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["objects"]["removed"], 1, "{doc:#}");
    assert_eq!(doc["objects"]["kept"], stored.len(), "{doc:#}");
    assert!(!stray.exists(), "the unnamed blob is collected");
    for blob in &stored {
        assert!(blob.exists(), "{} is what resume reads", blob.display());
    }

    // The repair continues from its accepted step after the collection.
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert_eq!(
        doc["steps"].as_array().unwrap().len(),
        1,
        "only the interrupted step runs again: {doc:#}"
    );
    assert!(ws.cargo_test_passes());
}

#[test]
fn gc_removes_the_slots_of_a_deleted_workspace_but_never_held_ones() {
    let ws = Workspace::of("missing-mut");
    let gone = deleted_workspace_slots(ws.cache());
    // A slot set whose workspace is gone too, but which another process holds.
    let held = ws.cache().join("ws-0123456789abcdef");
    std::fs::create_dir_all(&held).unwrap();
    std::fs::copy(gone.join("CACHEDIR.TAG"), held.join("CACHEDIR.TAG")).unwrap();
    std::fs::write(held.join("workspace"), "/nonexistent/trellis-test").unwrap();
    let lock = std::fs::File::create(held.join("branches.lock")).unwrap();
    lock.lock().unwrap();

    let (code, doc) = ws.json(&["gc", "--dry-run"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["dry_run"], true);
    let planned = doc["slot_sets"].as_array().unwrap();
    assert_eq!(planned.len(), 1, "{doc:#}");
    assert_eq!(planned[0]["path"], gone.to_str().unwrap());
    assert_eq!(planned[0]["reason"], "workspace_gone");
    assert!(planned[0]["bytes"].as_u64().unwrap() > 0, "{doc:#}");
    assert!(gone.exists(), "a dry run removes nothing");

    let (code, doc) = ws.json(&["gc"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(!gone.exists(), "{doc:#}");
    assert!(
        held.join("workspace").exists(),
        "a held slot set is left alone"
    );
    assert!(
        doc["bytes_freed"].as_u64().unwrap() >= planned[0]["bytes"].as_u64().unwrap(),
        "{doc:#}"
    );
}

#[test]
fn a_repair_collects_the_slots_of_a_deleted_workspace_when_it_ends() {
    let ws = Workspace::of("missing-mut");
    let gone = deleted_workspace_slots(ws.cache());
    let (code, doc, stderr) = json_in(ws.path(), ws.cache(), &["repair"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(!gone.exists(), "{stderr}");
    assert!(
        stderr.contains("no longer exists"),
        "the repair says what it collected: {stderr}"
    );
    let own = slot_sets(ws.cache());
    assert_eq!(
        own.len(),
        1,
        "the repaired workspace keeps its own: {own:?}"
    );
}

#[test]
fn a_cache_directory_inside_the_workspace_is_left_out_of_its_snapshots() {
    let ws = Workspace::of("missing-mut");
    let cache = ws.path().join("trellis-cache");
    let (_, first, stderr) = json_in(ws.path(), &cache, &["check"]);
    let sets = slot_sets(&cache);
    assert_eq!(sets.len(), 1, "{stderr}");
    // A slot sits at the end of a copy of the workspace's own path.
    let view = sets[0]
        .join("slots/view")
        .join(ws.path().canonicalize().unwrap().strip_prefix("/").unwrap());
    assert!(
        view.join("src/lib.rs").exists(),
        "the copy lives in the workspace"
    );
    let (_, second, stderr) = json_in(ws.path(), &cache, &["check"]);
    assert_eq!(
        second["root"], first["root"],
        "the copies inside the workspace are not part of it: {stderr}"
    );
}

/// Sets the modification time of `path` (a file or a directory) to `ago` in the past.
fn age(path: &Path, ago: std::time::Duration) {
    let when = std::time::SystemTime::now() - ago;
    std::fs::File::open(path)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

#[test]
fn gc_removes_only_the_slot_sets_trellis_marked_as_its_own() {
    let ws = Workspace::of("missing-mut");
    let cache = ws.cache();
    let gone = deleted_workspace_slots(cache);
    let trellis_tag = std::fs::read(gone.join("CACHEDIR.TAG")).unwrap();
    let foreign_tag = "Signature: 8a477f597d28d172789f06886806bc55\n# made by another tool\n";
    // Directories named like slot sets that Trellis never made, each idle
    // well past every grace period.
    let notes = cache.join("ws-notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::write(notes.join("todo.txt"), "mine").unwrap();
    let tagged = cache.join("ws-tagged");
    std::fs::create_dir(&tagged).unwrap();
    std::fs::write(tagged.join("CACHEDIR.TAG"), foreign_tag).unwrap();
    let claims = cache.join("ws-claims");
    std::fs::create_dir(&claims).unwrap();
    std::fs::write(claims.join("CACHEDIR.TAG"), foreign_tag).unwrap();
    std::fs::write(claims.join("workspace"), "/nonexistent/trellis-test").unwrap();
    // A link named like a set, to a directory that looks like a stale one.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("CACHEDIR.TAG"), &trellis_tag).unwrap();
    std::fs::write(
        elsewhere.path().join("workspace"),
        "/nonexistent/trellis-test",
    )
    .unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), cache.join("ws-x")).unwrap();
    // An own set that never got its owner record (a crash while it was
    // made), idle past the grace for those.
    let unowned = cache.join("ws-fedcba9876543210");
    std::fs::create_dir(&unowned).unwrap();
    std::fs::write(unowned.join("CACHEDIR.TAG"), &trellis_tag).unwrap();
    let idle = std::time::Duration::from_secs(48 * 3600);
    for dir in [&notes, &tagged, &claims, &unowned] {
        for entry in std::fs::read_dir(dir).unwrap() {
            age(&entry.unwrap().path(), idle);
        }
        age(dir, idle);
    }
    let foreign = |dir: &Path| support::files_under(dir, &[]);
    let before = [&notes, &tagged, &claims].map(|dir| foreign(dir));
    let linked = foreign(elsewhere.path());
    let (code, doc) = ws.json(&["gc"]);
    assert_eq!(code, 0, "{doc:#}");
    let mut removed: Vec<&str> = doc["slot_sets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    removed.sort();
    let mut own = [gone.to_str().unwrap(), unowned.to_str().unwrap()];
    own.sort();
    assert_eq!(removed, own, "only Trellis's own stale sets go: {doc:#}");
    assert!(!gone.exists() && !unowned.exists());
    assert_eq!(
        [&notes, &tagged, &claims].map(|dir| foreign(dir)),
        before,
        "directories Trellis did not mark are untouched"
    );
    assert!(cache.join("ws-x").is_symlink(), "the link stays");
    assert_eq!(foreign(elsewhere.path()), linked, "and what it points to");
}

/// The seed store keeps the user's build artifacts the slots link to;
/// once the user's `cargo clean` removed them, only the store holds their
/// bytes, and `trellis gc` frees them (a dry run only says so), while an
/// artifact the user still has stays.
#[test]
fn gc_frees_the_seeded_artifacts_the_users_target_no_longer_has() {
    let ws = Workspace::empty();
    support::write_crate(
        ws.path(),
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [dependencies]\nitoa = \"1\"\n\n[workspace]\n",
            ),
            ("Cargo.lock", support::ITOA_LOCK),
            (
                "src/lib.rs",
                "pub fn shown() -> String { itoa::Buffer::new().format(1u8).to_owned() }\n",
            ),
        ],
    );
    let cargo = |args: &[&str]| {
        let ok = std::process::Command::new("cargo")
            .args(args)
            .args(["--offline", "--quiet"])
            .current_dir(ws.path())
            .env_remove("CARGO_TARGET_DIR")
            .status()
            .unwrap()
            .success();
        assert!(ok, "cargo {args:?}");
    };
    cargo(&["test", "--no-run"]);
    let (code, _) = ws.json(&["check"]);
    assert_eq!(code, 0);
    let store: Vec<PathBuf> = slot_sets(ws.cache())
        .iter()
        .map(|set| set.join("targets/seeds"))
        .filter(|store| store.is_dir())
        .collect();
    let entries = |store: &[PathBuf]| -> usize {
        store
            .iter()
            .map(|s| std::fs::read_dir(s).unwrap().count())
            .sum()
    };
    if !trellis_engine::sensor::sandbox::support().confines_files() {
        assert!(store.is_empty(), "nothing is shared without a sandbox");
        return;
    }
    let seeded = entries(&store);
    assert!(seeded >= 2, "the itoa rlib and rmeta are in the store");

    let (_, kept) = ws.json(&["gc"]);
    assert_eq!(kept["seeds"]["removed"], 0, "{kept:#}");
    assert_eq!(entries(&store), seeded, "the user still has them");

    cargo(&["clean"]);
    let (_, dry) = ws.json(&["gc", "--dry-run"]);
    assert_eq!(
        dry["seeds"]["removed"].as_u64(),
        Some(seeded as u64),
        "{dry:#}"
    );
    assert_eq!(entries(&store), seeded, "a dry run removes nothing");
    let (code, freed) = ws.json(&["gc"]);
    assert_eq!(code, 0);
    assert!(freed["seeds"]["bytes"].as_u64().unwrap() > 0, "{freed:#}");
    assert_eq!(entries(&store), 0);
    let (code, _) = ws.json(&["check"]);
    assert_eq!(code, 0, "a slot that linked them builds them again");
}
