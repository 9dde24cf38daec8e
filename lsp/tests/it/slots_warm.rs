//! Slots start warm, and warmth never costs correctness or the user's files:
//! a slot's target directory is seeded with the registry dependencies the
//! user compiled, but workspace members are always built from the slot's own
//! sources; a seeded slot never writes into the user's `target/`, even when
//! cargo rebuilds a seeded dependency over its hard link; a path dependency
//! outside the workspace resolves to the real directory, read-only; a
//! configured `RUSTC_WRAPPER` sees every slot compilation; members are
//! built without debug information, seeded dependencies as the user built
//! them; a seeding killed half-way is finished by the next run; a repair
//! seeds its first branch's slot while the view is measured, and a
//! cancelled one stops that seeding before its next entry. Each test
//! drives the shipped binary and real cargo on a crate written here.

use crate::support;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

use serde_json::{Value, json};
use support::{Client, vscode_capabilities};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A crate `app` at `root` depending on `itoa`, whose test passes only
/// while `value()` returns 1.
fn itoa_crate(root: &Path, value: u32) {
    write(
        &root.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nitoa = \"1\"\n",
    );
    write(&root.join("Cargo.lock"), support::ITOA_LOCK);
    set_value(root, value);
}

fn set_value(root: &Path, value: u32) {
    write(
        &root.join("src/lib.rs"),
        &format!(
            "pub fn value() -> u32 {{ {value} }}\n\n\
             pub fn shown() -> String {{ itoa::Buffer::new().format(value()).to_owned() }}\n"
        ),
    );
    // An integration test links the member's library: a stale library
    // taken for fresh would be measured here.
    write(
        &root.join("tests/value.rs"),
        "#[test]\nfn value_is_one() {\n    assert_eq!(app::shown(), \"1\");\n}\n",
    );
}

/// The user's own cargo in the crate, building into its `target/`.
fn user_cargo(root: &Path, args: &[&str]) -> Output {
    Command::new("cargo")
        .args(args)
        .args(["--offline", "--quiet"])
        .current_dir(root)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("cargo runs")
}

/// The shipped binary on `root`, with the private cache `cache`, no user
/// configuration, no `RUSTC_WRAPPER` and no `CARGO_TARGET_DIR` (the user's
/// target is `target/`).
fn trellis_command(root: &Path, cache: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_trellis"));
    command
        .args(args)
        .arg(root)
        .env("TRELLIS_CACHE_DIR", cache)
        .env("XDG_CONFIG_HOME", cache.join("config"))
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTC_WRAPPER");
    command
}

fn trellis(root: &Path, cache: &Path, args: &[&str]) -> Output {
    trellis_command(root, cache, args)
        .output()
        .expect("the trellis binary runs")
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or_else(|| {
        panic!(
            "killed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn shown(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `out` is a run that exited 0.
fn assert_passed(out: &Output) {
    assert_eq!(code(out), 0, "{}", shown(out));
}

/// A scratch directory: the crate `app/`, the private cache `cache/` and
/// `wrapper.log`, which a logging wrapper appends to.
struct Scratch {
    dir: tempfile::TempDir,
    root: PathBuf,
    cache: PathBuf,
    log: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        Scratch {
            root: dir.path().join("app"),
            cache: dir.path().join("cache"),
            log: dir.path().join("logs/wrapper.log"),
            dir,
        }
    }

    /// A wrapper that logs each compilation to `log`, then runs it. A
    /// slot's processes write only the slot, so the workspace's
    /// configuration names the log's directory in `[sandbox] writable`, as
    /// a user of such a wrapper does.
    fn logging_wrapper(&self) -> PathBuf {
        std::fs::create_dir_all(self.log.parent().unwrap()).unwrap();
        let wrapper = self.dir.path().join("wrap.sh");
        write(
            &wrapper,
            &format!(
                "#!/bin/sh\necho \"$@\" >> '{}'\nexec \"$@\"\n",
                self.log.display()
            ),
        );
        std::fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        wrapper
    }

    /// The logging wrapper as the crate's `[build] rustc_wrapper`.
    fn configure_logging_wrapper(&self) {
        let wrapper = self.logging_wrapper();
        write(
            &self.root.join("trellis.toml"),
            &format!(
                "[build]\nrustc_wrapper = \"{}\"\n\n{}",
                wrapper.display(),
                self.log_writable()
            ),
        );
    }

    /// The `[sandbox]` table that lets a slot's builds write the log.
    fn log_writable(&self) -> String {
        format!(
            "[sandbox]\nwritable = [\"{}\"]\n",
            self.log.parent().unwrap().display()
        )
    }

    /// What the wrapper logged (nothing if it never ran).
    fn logged(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The user's own `cargo check --all-targets` and `cargo test` build the
/// crate into its `target/` (and pass).
fn user_builds_everything(root: &Path) {
    assert!(
        user_cargo(root, &["check", "--all-targets"])
            .status
            .success()
    );
    assert!(user_cargo(root, &["test"]).status.success());
}

/// Every file below `dir` (symlinks not followed).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            out.extend(files(&entry.path()));
        } else {
            out.push(entry.path());
        }
    }
    out
}

/// What a file of the user's target directory looks like from outside.
#[derive(Debug, PartialEq)]
struct Seen {
    size: u64,
    modified: SystemTime,
    links: u64,
    inode: u64,
    bytes: Vec<u8>,
}

fn survey(dir: &Path) -> BTreeMap<PathBuf, Seen> {
    files(dir)
        .into_iter()
        .map(|path| {
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let seen = Seen {
                size: meta.len(),
                modified: meta.modified().unwrap(),
                links: meta.nlink(),
                inode: meta.ino(),
                bytes: if meta.is_file() {
                    std::fs::read(&path).unwrap()
                } else {
                    Vec::new()
                },
            };
            (path.strip_prefix(dir).unwrap().to_path_buf(), seen)
        })
        .collect()
}

/// The one workspace's slot set in `cache`.
fn slot_set(cache: &Path) -> PathBuf {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.join("targets").is_dir())
        .expect("a slot set with target directories")
}

/// The target directories of the view's slot and of the first branch's,
/// when those are all there are: the view's holds the member it built, the
/// branch's nothing but what was seeded.
fn view_and_first_branch_targets(cache: &Path) -> (PathBuf, PathBuf) {
    let targets: Vec<PathBuf> = std::fs::read_dir(slot_set(cache).join("targets"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("tree-")
        })
        .collect();
    assert_eq!(
        targets.len(),
        2,
        "the view's and the first branch's: {targets:?}"
    );
    let built_app = |target: &Path| {
        files(&target.join("debug/deps"))
            .iter()
            .any(|p| p.file_name().unwrap().to_string_lossy().contains("app-"))
    };
    let (view, branch): (Vec<PathBuf>, Vec<PathBuf>) =
        targets.into_iter().partition(|target| built_app(target));
    let [view] = <[PathBuf; 1]>::try_from(view).expect("one target the member was built in");
    let [branch] = <[PathBuf; 1]>::try_from(branch).expect("one target nothing was built in");
    (view, branch)
}

/// Files in the cache's slot target directories whose name starts with
/// `prefix`.
fn slot_files(cache: &Path, prefix: &str) -> Vec<PathBuf> {
    files(cache)
        .into_iter()
        .filter(|path| path.components().any(|c| c.as_os_str() == "targets"))
        .filter(|path| {
            path.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect()
}

#[test]
fn a_member_is_built_from_the_slots_sources_even_when_the_users_target_seeds_the_slot() {
    let Scratch { root, cache, .. } = &Scratch::new();
    itoa_crate(root, 1);
    assert!(user_cargo(root, &["test"]).status.success());
    assert_passed(&trellis(root, cache, &["check"]));

    // The user tries `value() = 2` and builds it: their target now holds the
    // member built from sources the view no longer has, newer than the
    // slot's unchanged copy of `src/lib.rs`.
    set_value(root, 2);
    assert!(!user_cargo(root, &["test"]).status.success());
    set_value(root, 1);
    // The slot's copy is kept; its target directory is gone (a collected
    // cache), so the next check seeds it from the user's target again.
    for workspace in std::fs::read_dir(cache).unwrap() {
        let targets = workspace.unwrap().path().join("targets");
        if targets.is_dir() {
            std::fs::remove_dir_all(targets).unwrap();
        }
    }

    let again = trellis(root, cache, &["check"]);
    assert_eq!(
        code(&again),
        0,
        "the slot measured the user's stale build of `value() = 2`:\n{}",
        shown(&again)
    );
    // And the slot was seeded from the user's tree.
    assert!(
        itoa_seeded_from_user(root, cache),
        "the slot's itoa was not seeded from the user's target/"
    );
}

/// Whether a slot's `itoa` library below `slots` (the cache, or one slot's
/// target directory) is the user's own file, seeded by link.
fn itoa_seeded_from_user(root: &Path, slots: &Path) -> bool {
    let users: Vec<u64> = files(&root.join("target/debug/deps"))
        .iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("libitoa-")
        })
        .map(|p| std::fs::metadata(p).unwrap().ino())
        .collect();
    slot_files(slots, "libitoa-")
        .iter()
        .any(|p| users.contains(&std::fs::metadata(p).unwrap().ino()))
}

/// The files below `dir` inside a seeding's staging
/// (`.<name>.trellis-seeding`, a file or a directory).
fn stagings(dir: &Path) -> Vec<PathBuf> {
    files(dir)
        .into_iter()
        .filter(|path| {
            path.components().any(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .ends_with(".trellis-seeding")
            })
        })
        .collect()
}

#[test]
fn a_seeding_killed_half_way_is_finished_by_the_next_run() {
    let Scratch { root, cache, .. } = &Scratch::new();
    itoa_crate(root, 1);
    user_builds_everything(root);

    // The fault: the process dies with its second entry staged, not yet
    // renamed into place, as an editor closed during the first check.
    let killed = trellis_command(root, cache, &["check"])
        .env("TRELLIS_FAILPOINT", "seed-entry:2:abort")
        .output()
        .unwrap();
    assert!(killed.status.code().is_none(), "{}", shown(&killed));
    assert!(!stagings(cache).is_empty(), "the kill left no staging");

    assert_passed(&trellis(root, cache, &["check"]));
    assert_eq!(stagings(cache), Vec::<PathBuf>::new(), "a staging was left");
    // The next run finished the seeding.
    assert!(
        itoa_seeded_from_user(root, cache),
        "the slot's itoa was not seeded from the user's target/"
    );
}

#[test]
fn a_repair_seeds_its_first_branchs_slot_while_the_view_is_measured() {
    let Scratch { root, cache, .. } = &Scratch::new();
    itoa_crate(root, 1);
    user_builds_everything(root);

    // Nothing to repair: no branch is ever made, so whatever the first
    // branch's slot holds was seeded while the view was measured.
    let out = trellis(root, cache, &["repair"]);
    assert_passed(&out);
    assert!(shown(&out).contains("nothing to repair"), "{}", shown(&out));
    assert!(
        !slot_set(cache).join("slots/branch-1").exists(),
        "a branch slot was made for a clean view"
    );

    let (view, branch) = view_and_first_branch_targets(cache);
    assert!(
        itoa_seeded_from_user(root, &branch),
        "the branch's slot holds no seeded itoa"
    );
    // Seeded for its test, a build that generates code, not only a check,
    // with the user's incremental state wherever the view's slot got it
    // (slots built at the workspace's paths): though the branch's slot did
    // not exist yet, a later run finding it seeded adds nothing.
    assert!(
        branch.join(".trellis-seeded-code-2").exists(),
        "the branch's slot was seeded for a check only"
    );
    assert_eq!(
        branch.join("debug/incremental").is_dir(),
        view.join("debug/incremental").is_dir(),
        "the branch's slot and the view's differ in incremental state"
    );
}

/// The entries a seeding of `target` made: what it stages and renames
/// into place whole (a file of `deps/`, a unit's directory under
/// `.fingerprint/` or `build/`, an incremental session or its lock,
/// cargo's rustc cache).
fn seeded_entries(target: &Path) -> Vec<PathBuf> {
    let debug = target.join("debug");
    let children = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|entries| entries.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default()
    };
    let mut entries: Vec<PathBuf> = ["deps", ".fingerprint", "build"]
        .iter()
        .flat_map(|dir| children(&debug.join(dir)))
        .collect();
    for krate in children(&debug.join("incremental")) {
        entries.extend(children(&krate));
    }
    entries.extend(Some(target.join(".rustc_info.json")).filter(|p| p.exists()));
    entries
}

/// Pins `command`'s process, and every process it starts, to one of the
/// CPUs this test may use: a seeding there runs on one thread.
fn on_one_cpu(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between `fork` and `exec` the closure only makes two
    // system calls on a set on its own stack, and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            let size = std::mem::size_of::<libc::cpu_set_t>();
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size, &mut set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let first = (0..libc::CPU_SETSIZE as usize)
                .find(|&cpu| libc::CPU_ISSET(cpu, &set))
                .unwrap_or(0);
            libc::CPU_ZERO(&mut set);
            libc::CPU_SET(first, &mut set);
            if libc::sched_setaffinity(0, size, &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The fault: a repair cancelled while the seeding of its first branch's
/// slot, done ahead while the view is measured, is inside an entry (the
/// `seed-entry` failpoint holds it there, on one CPU, so on one seeding
/// thread). Let go, the seeding finishes that entry and begins no other,
/// and is not marked done; the next repair's seeding finishes it.
#[test]
fn a_cancelled_repair_stops_seeding_its_first_branchs_slot_before_the_next_entry() {
    let Scratch {
        dir, root, cache, ..
    } = &Scratch::new();
    itoa_crate(root, 1);
    user_builds_everything(root);
    // The CLI's check of the crate seeds the view's slot for a check and
    // for a test: the server's own runs then seed nothing before the
    // repair's seeding ahead.
    assert_passed(&trellis(root, cache, &["check"]));
    // A saved edit with a compiler-suggested fix.
    write(
        &root.join("src/lib.rs"),
        "pub fn value() -> u32 {\n    let v = 0;\n    v += 1;\n    v\n}\n\n\
         pub fn shown() -> String { itoa::Buffer::new().format(value()).to_owned() }\n",
    );

    let marker = dir.path().join("seeding-held");
    let mut command = Client::command();
    command
        .env("TRELLIS_CACHE_DIR", cache)
        .env("XDG_CONFIG_HOME", cache.join("config"))
        .env("TRELLIS_FAILPOINT", "seed-entry:1:pause")
        .env("TRELLIS_FAILPOINT_MARKER", &marker)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTC_WRAPPER");
    on_one_cpu(&mut command);
    let (mut client, _) = Client::start_with(root, command, None, vscode_capabilities(), None);
    let lib = "src/lib.rs";
    let cluster = client.open_for_cluster(lib);
    // Unsaved: the repair measures this view itself, seeding ahead.
    let at = json!({ "line": 5, "character": 0 });
    client.edit(lib, json!({ "start": at, "end": at }), "// a note\n");

    let from = client.notifications.len();
    let started = client.request(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.start", "arguments": [{ "cluster": cluster }] }),
    );
    assert_eq!(started, Value::Null);
    client.pump_until("the seeding to reach an entry", || marker.exists());
    // Cancelled inside the entry, then let go on.
    client.cancel_repairs(lib);
    std::fs::remove_file(&marker).unwrap();

    let ended = client.search_end(from);
    assert_eq!(ended["params"]["status"], "cancelled", "{ended}");
    let (_, branch) = view_and_first_branch_targets(cache);
    let entries = seeded_entries(&branch);
    assert_eq!(
        entries.len(),
        1,
        "the held entry and no other: {entries:#?}"
    );
    assert!(
        !branch.join(".trellis-seeded-2").exists(),
        "a seeding cancelled half-way was marked done"
    );

    // Nothing of the cancelled seeding stands in for one: the next repair
    // seeds the rest and verifies.
    let again = client.notifications.len();
    client.request(
        "workspace/executeCommand",
        json!({ "command": "trellis.repair.start", "arguments": [{ "cluster": cluster }] }),
    );
    let ended = client.search_end(again);
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
    assert!(branch.join(".trellis-seeded-code-2").exists());
    assert!(seeded_entries(&branch).len() > 1);
    client.shutdown();
}

#[test]
fn a_seeded_slot_never_writes_into_the_users_target_even_when_it_rebuilds_a_seeded_dependency() {
    let Scratch { root, cache, .. } = &Scratch::new();
    itoa_crate(root, 1);
    user_builds_everything(root);
    let user_target = root.join("target");
    let before = survey(&user_target);

    assert_passed(&trellis(root, cache, &["check"]));
    // The fault: the slot's copied fingerprints of `itoa` no longer match,
    // so cargo rebuilds it in the slot, writing over the `.rlib`/`.rmeta`
    // paths that are links to the seed store's links to the user's files.
    let fingerprints = slot_files(cache, "lib-itoa");
    assert!(!fingerprints.is_empty(), "no seeded itoa fingerprint");
    for fingerprint in &fingerprints {
        std::fs::write(fingerprint, "0000000000000000").unwrap();
    }
    write(&root.join("src/extra.rs"), "// a new file: a new view\n");
    assert_passed(&trellis(root, cache, &["check"]));

    let after = survey(&user_target);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "files appeared in or vanished from the user's target/"
    );
    // Each file's inode where the cache holds it: the seed store's links,
    // and every other file of the cache (a slot's own) apart.
    let store = slot_set(cache).join("targets/seeds");
    let (stored, elsewhere): (Vec<PathBuf>, Vec<PathBuf>) = files(cache)
        .into_iter()
        .partition(|p| p.starts_with(&store));
    let inodes = |paths: &[PathBuf]| -> Vec<u64> {
        paths
            .iter()
            .map(|p| std::fs::symlink_metadata(p).unwrap().ino())
            .collect()
    };
    let (stored, elsewhere) = (inodes(&stored), inodes(&elsewhere));
    for (path, old) in &before {
        let new = &after[path];
        assert_eq!(
            (old.size, old.modified, old.inode, &old.bytes),
            (new.size, new.modified, new.inode, &new.bytes),
            "{} changed",
            path.display()
        );
        assert!(
            !elsewhere.contains(&new.inode),
            "{}: a slot holds the user's file itself, writable through it",
            path.display()
        );
        let in_store = stored.iter().filter(|&&i| i == new.inode).count() as u64;
        assert_eq!(
            new.links,
            old.links + in_store,
            "{}: every extra link is the seed store's",
            path.display()
        );
    }
    // The rebuilt `itoa` is the slot's own file, in place of its link.
    for rebuilt in slot_files(cache, "libitoa-") {
        let meta = std::fs::symlink_metadata(&rebuilt).unwrap();
        assert!(
            meta.is_file() && !stored.contains(&meta.ino()),
            "{}: the rebuild did not replace the link",
            rebuilt.display()
        );
    }
}

#[test]
fn a_path_dependency_outside_the_workspace_resolves_to_the_real_directory_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("a/b/app");
    let (near, far) = (dir.path().join("a/b/dep"), dir.path().join("a/x"));
    write(
        &near.join("Cargo.toml"),
        "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(&near.join("src/lib.rs"), "pub fn near() -> usize { 1 }\n");
    write(
        &far.join("Cargo.toml"),
        "[package]\nname = \"x\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(&far.join("src/lib.rs"), "pub fn far() -> usize { 2 }\n");
    write(
        &root.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\ndep = { path = \"../dep\" }\nx = { path = \"../../x\" }\n",
    );
    // The missing `use std::collections::HashMap;` is the repair.
    write(
        &root.join("src/lib.rs"),
        "pub fn total() -> HashMap<&'static str, usize> {\n    \
         let mut m = HashMap::new();\n    m.insert(\"sum\", dep::near() + x::far());\n    m\n}\n\n\
         #[test]\nfn sums_both() {\n    assert_eq!(total()[\"sum\"], 3);\n}\n",
    );
    let deps_before = [survey(&near), survey(&far)];
    let cache = dir.path().join("cache");

    let check = trellis(&root, &cache, &["check"]);
    assert_eq!(code(&check), 1, "{}", shown(&check));
    assert_passed(&trellis(&root, &cache, &["repair", "--commit"]));
    let fixed = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    assert!(fixed.contains("use std::collections::HashMap;"), "{fixed}");
    assert_eq!(
        [survey(&near), survey(&far)],
        deps_before,
        "a dependency outside the workspace was written"
    );
}

fn plain_crate(root: &Path) {
    write(
        &root.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(&root.join("src/lib.rs"), "pub fn one() -> u8 { 1 }\n");
}

#[test]
fn a_configured_rustc_wrapper_runs_every_slot_compilation() {
    let scratch = Scratch::new();
    plain_crate(&scratch.root);
    scratch.configure_logging_wrapper();
    assert_passed(&trellis(&scratch.root, &scratch.cache, &["check"]));
    let logged = scratch.logged();
    // cargo check and cargo test each compile the crate through it.
    assert!(
        logged
            .lines()
            .filter(|l| l.contains("--crate-name app"))
            .count()
            >= 2,
        "{logged}"
    );
}

#[test]
fn rustc_wrapper_from_the_environment_reaches_slot_builds() {
    let scratch = Scratch::new();
    plain_crate(&scratch.root);
    write(&scratch.root.join("trellis.toml"), &scratch.log_writable());
    let out = trellis_command(&scratch.root, &scratch.cache, &["check"])
        .env("RUSTC_WRAPPER", scratch.logging_wrapper())
        .output()
        .unwrap();
    assert_passed(&out);
    let logged = scratch.logged();
    assert!(logged.contains("--crate-name app"), "{logged}");
}

#[test]
fn members_build_without_debuginfo_while_the_seeded_dependencies_are_reused_as_built() {
    let scratch = Scratch::new();
    itoa_crate(&scratch.root, 1);
    user_builds_everything(&scratch.root);
    scratch.configure_logging_wrapper();
    assert_passed(&trellis(&scratch.root, &scratch.cache, &["check"]));
    let logged = scratch.logged();
    let member: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("--crate-name app"))
        .collect();
    // The library and its unit tests, each checked and built.
    assert!(member.len() >= 4, "{logged}");
    for line in &member {
        assert!(
            !line.contains("debuginfo=") || line.contains("debuginfo=0"),
            "a member compiled with debug information: {line}"
        );
        assert!(
            !line.contains(" --test ") || line.contains("-C strip=debuginfo"),
            "a test executable linked with debug information: {line}"
        );
    }
    assert!(
        !logged.contains("--crate-name itoa"),
        "the seeded dependency was compiled again: {logged}"
    );
}

/// `anyhow`, which has a build script that asks to be rerun when a file
/// or a variable changes, as pinned by Trellis's own lock file; with
/// `itoa`'s entry from [`support::ITOA_LOCK`], the lock of `app` depending on both.
const ANYHOW_PACKAGE: &str = r#"
[[package]]
name = "anyhow"
version = "1.0.105"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "2cb931c189b85683d69a5cfad41d4d418671e1ac413dd209f3f2fc31e3cfd902"
"#;

#[test]
fn a_seeded_slot_checks_and_tests_without_rebuilding_any_registry_dependency() {
    let Scratch { root, cache, .. } = &Scratch::new();
    itoa_crate(root, 1);
    write(
        &root.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nanyhow = \"1\"\nitoa = \"1\"\n",
    );
    let lock = support::ITOA_LOCK.replace(
        "dependencies = [\"itoa\"]",
        "dependencies = [\"anyhow\", \"itoa\"]",
    );
    write(&root.join("Cargo.lock"), &format!("{lock}{ANYHOW_PACKAGE}"));
    user_builds_everything(root);

    // `trellis check` runs the view's `cargo check` and `cargo test`.
    assert_passed(&trellis(root, cache, &["check"]));

    // A slot's registry fingerprints are seeded without their JSON and
    // `invoked.timestamp`, which cargo writes whenever it builds a unit:
    // their absence says cargo found every seeded unit fresh (the
    // libraries, anyhow's build script and its run) and rebuilt none.
    let fingerprints: Vec<PathBuf> = files(cache)
        .into_iter()
        .filter(|path| path.components().any(|c| c.as_os_str() == ".fingerprint"))
        .filter(|path| {
            path.parent()
                .and_then(Path::file_name)
                .is_some_and(|unit| !unit.to_string_lossy().starts_with("app-"))
        })
        .collect();
    let units = |name: &str| {
        fingerprints
            .iter()
            .filter(|path| {
                let unit = path
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy();
                unit.starts_with(&format!("{name}-"))
            })
            .count()
    };
    assert!(
        units("itoa") > 0 && units("anyhow") > 0,
        "{fingerprints:#?}"
    );
    let rebuilt: Vec<&PathBuf> = fingerprints
        .iter()
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.ends_with(".json") || name == "invoked.timestamp"
        })
        .collect();
    assert_eq!(
        rebuilt,
        Vec::<&PathBuf>::new(),
        "cargo rebuilt a seeded unit"
    );
}
