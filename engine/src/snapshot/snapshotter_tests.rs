//! Tests of snapshots over the full walk and of the stat cache
//! (`snapshotter.rs`, `scan.rs`).

#[test]
fn watch_retries_back_off_doubling_up_to_a_cap_and_reset_on_success() {
    let mut backoff = WatchBackoff::default();
    assert!(backoff.ready(), "the first re-root tries");
    let mut waits = Vec::new();
    for _ in 0..9 {
        backoff.failed();
        let mut skipped = 0;
        while !backoff.ready() {
            skipped += 1;
        }
        waits.push(skipped);
    }
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 64, 64]);
    backoff.succeeded();
    assert!(backoff.ready());
    backoff.failed();
    assert!(!backoff.ready(), "a new failure starts over at one");
    assert!(backoff.ready());
}

use super::super::scan::{CACHEDIR_SIGNATURE, RACY_WINDOW_NS};
use super::*;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::time::Duration;

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

fn paths(snapshot: &Snapshot) -> Vec<&str> {
    snapshot.entries.keys().map(String::as_str).collect()
}

/// Backdates a file beyond the racy window so the cache may trust it.
fn age(path: &Path) {
    let old = SystemTime::now() - Duration::from_secs(60);
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(old)
        .unwrap();
}

#[test]
fn honours_ignore_files_without_git_and_keeps_hidden_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", b"*.log\nbuild/\n");
    write(root, "sub/.ignore", b"secret.txt\n");
    write(root, "sub/secret.txt", b"s");
    write(root, "sub/kept.txt", b"k");
    write(root, "app.log", b"l");
    write(root, "build/out.o", b"o");
    write(root, ".env.example", b"e");
    write(root, "target/debug/x", b"t");
    write(root, ".trellis/index", b"i");
    write(root, ".git/HEAD", b"h");
    write(root, "nested/.git/HEAD", b"h");
    write(
        root,
        "src/target/mod.rs",
        b"a module named target is content",
    );

    write(root, "cache/CACHEDIR.TAG", CACHEDIR_SIGNATURE);
    write(root, "cache/blob", b"c");
    write(root, "build/out/CACHEDIR.TAG", CACHEDIR_SIGNATURE);
    write(root, "build/out/x.o", b"o");
    write(root, "fake/CACHEDIR.TAG", b"no signature");
    write(root, "fake/kept.rs", b"f");

    let snapshot = Snapshotter::new(root, None)
        .snapshot(&Overlay::default())
        .unwrap();
    assert_eq!(
        editable(&snapshot),
        [
            ".env.example",
            ".gitignore",
            "fake/CACHEDIR.TAG",
            "fake/kept.rs",
            "src/target/mod.rs",
            "sub/.ignore",
            "sub/kept.txt"
        ]
    );
    // What the ignore rules hide is read-only context; build output
    // (tagged directories, the root's target/) and state are not there.
    assert_eq!(
        context(&snapshot),
        ["app.log", "build/out.o", "sub/secret.txt"]
    );
}

#[test]
fn a_virtual_environment_is_never_content_nor_context() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", b".venv/\n");
    write(root, "pkg/mod.py", b"x = 1\n");
    write(root, ".venv/pyvenv.cfg", b"home = /usr/bin\n");
    write(root, ".venv/lib/python3.11/site-packages/big.py", b"b");
    write(root, "env2/pyvenv.cfg", b"home = /usr/bin\n");
    write(root, "env2/bin/python", b"p");
    let snapshot = Snapshotter::new(root, None)
        .snapshot(&Overlay::default())
        .unwrap();
    assert_eq!(editable(&snapshot), [".gitignore", "pkg/mod.py"]);
    assert!(context(&snapshot).is_empty(), "{:?}", context(&snapshot));
}

fn editable(snapshot: &Snapshot) -> Vec<&str> {
    snapshot.editable().map(|(path, _)| path.as_str()).collect()
}

fn context(snapshot: &Snapshot) -> Vec<&str> {
    let editable = editable(snapshot);
    paths(snapshot)
        .into_iter()
        .filter(|path| !editable.contains(path))
        .collect()
}

#[test]
fn a_changed_ignored_file_is_another_root_and_stays_context() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", b"/tests/local.rs\n");
    write(root, "tests/local.rs", b"#[test] fn t() {}");
    let mut snapshotter = Snapshotter::new(root, None);
    let first = snapshotter.snapshot(&Overlay::default()).unwrap();
    assert_eq!(
        first.entries["tests/local.rs"].kind,
        EntryKind::ContextFile { executable: false }
    );
    write(root, "tests/local.rs", b"#[test] fn t() { panic!() }");
    age(&root.join("tests/local.rs"));
    let second = snapshotter.snapshot(&Overlay::default()).unwrap();
    assert_ne!(first.root, second.root);
    // An unsaved buffer never stands in for context: the tools read disk.
    let overlay = Overlay {
        buffers: BTreeMap::from([("tests/local.rs".to_owned(), b"unsaved".to_vec())]),
    };
    assert_eq!(snapshotter.snapshot(&overlay).unwrap(), second);
    // Unignoring it makes it an editable file, trusted from the cache or not.
    write(root, ".gitignore", b"");
    let third = snapshotter.snapshot(&Overlay::default()).unwrap();
    assert_eq!(
        third.entries["tests/local.rs"].kind,
        EntryKind::File { executable: false }
    );
}

#[test]
fn a_bounded_walk_refuses_a_huge_ignored_directory_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", b"vendor/\n");
    write(root, "src/lib.rs", b"fn f() {}");
    for i in 0..20 {
        write(root, &format!("vendor/p{i}/index.js"), b"x");
    }
    let mut snapshotter = Snapshotter::new(root, None);
    snapshotter.bound(10, u64::MAX);
    let err = snapshotter.snapshot(&Overlay::default()).unwrap_err();
    assert!(
        matches!(err, SnapshotError::TooLarge { max_files: 10, .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.contains("vendor/ ("), "{message}");
    assert!(message.contains("CACHEDIR.TAG"), "{message}");
    // Tagging it as a cache takes it out, and the bound is met.
    write(root, "vendor/CACHEDIR.TAG", CACHEDIR_SIGNATURE);
    let snapshot = snapshotter.snapshot(&Overlay::default()).unwrap();
    assert_eq!(paths(&snapshot), [".gitignore", "src/lib.rs"]);
}

#[test]
fn no_node_modules_is_ever_in_a_snapshot_however_large() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "package.json", b"{}");
    write(root, "packages/a/package.json", b"{}");
    for i in 0..20 {
        write(root, &format!("node_modules/p{i}/index.js"), b"x");
        write(
            root,
            &format!("packages/a/node_modules/p{i}/index.js"),
            b"x",
        );
    }
    let mut snapshotter = Snapshotter::new(root, None);
    snapshotter.bound(10, u64::MAX);
    let snapshot = snapshotter.snapshot(&Overlay::default()).unwrap();
    // The root's and a package's own: a slot links each (`slots`).
    assert_eq!(
        paths(&snapshot),
        ["package.json", "packages/a/package.json"]
    );
}

#[test]
fn records_symlinks_without_following_them() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "big/file", b"outside content");
    symlink(outside.path().join("big"), dir.path().join("link")).unwrap();
    symlink("missing", dir.path().join("dangling")).unwrap();

    let snapshot = Snapshotter::new(dir.path(), None)
        .snapshot(&Overlay::default())
        .unwrap();
    assert_eq!(paths(&snapshot), ["dangling", "link"]);
    let link = &snapshot.entries["link"];
    assert_eq!(link.kind, EntryKind::Symlink);
    let target = outside.path().join("big");
    assert_eq!(link.blob, blob_digest(target.as_os_str().as_bytes()));
    assert_eq!(snapshot.entries["dangling"].blob, blob_digest(b"missing"));
}

#[test]
fn records_the_executable_bit() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "run.sh", b"#!/bin/sh\n");
    let path = dir.path().join("run.sh");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    let snapshot = Snapshotter::new(dir.path(), None)
        .snapshot(&Overlay::default())
        .unwrap();
    assert_eq!(
        snapshot.entries["run.sh"].kind,
        EntryKind::File { executable: true }
    );
}

#[test]
fn overlay_replaces_disk_content_and_adds_new_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/lib.rs", b"on disk");
    write(dir.path(), ".gitignore", b"*.tmp\n");
    let overlay = Overlay {
        buffers: BTreeMap::from([
            ("src/lib.rs".to_owned(), b"unsaved".to_vec()),
            ("src/new.rs".to_owned(), b"brand new".to_vec()),
            ("scratch.tmp".to_owned(), b"ignored".to_vec()),
            ("target/gen.rs".to_owned(), b"excluded".to_vec()),
        ]),
    };
    let snapshot = Snapshotter::new(dir.path(), None)
        .snapshot(&overlay)
        .unwrap();
    assert_eq!(paths(&snapshot), [".gitignore", "src/lib.rs", "src/new.rs"]);
    assert_eq!(snapshot.entries["src/lib.rs"].blob, blob_digest(b"unsaved"));
    assert_eq!(snapshot.entries["src/new.rs"].size, 9);
}

#[test]
fn overlay_honours_whitelists_and_ignored_directories() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), ".gitignore", b"gen/\n*.txt\n");
    write(dir.path(), "docs/.gitignore", b"!keep.txt\n");
    assert!(!visible_to_walk(dir.path(), "gen/a.rs").unwrap());
    assert!(!visible_to_walk(dir.path(), "notes.txt").unwrap());
    assert!(visible_to_walk(dir.path(), "docs/keep.txt").unwrap());
    assert!(!visible_to_walk(dir.path(), "docs/other.txt").unwrap());
    assert!(visible_to_walk(dir.path(), "new/dir/file.rs").unwrap());
}

#[test]
fn walk_and_overlay_visibility_agree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let files = [
        ".gitignore",
        "docs/.gitignore",
        "docs/keep.txt",
        "docs/other.txt",
        "gen/a.rs",
        "notes.txt",
        "src/a.rs",
    ];
    for rel in files {
        write(root, rel, b"x");
    }
    write(root, ".gitignore", b"gen/\n*.txt\n");
    write(root, "docs/.gitignore", b"!keep.txt\n");
    let snapshot = Snapshotter::new(root, None)
        .snapshot(&Overlay::default())
        .unwrap();
    assert_eq!(
        editable(&snapshot),
        [".gitignore", "docs/.gitignore", "docs/keep.txt", "src/a.rs"]
    );
    for rel in files {
        assert_eq!(
            visible_to_walk(root, rel).unwrap(),
            snapshot.editable().any(|(path, _)| path == rel),
            "{rel}"
        );
    }
}

#[test]
fn overlay_path_must_be_safe() {
    let dir = tempfile::tempdir().unwrap();
    let overlay = Overlay {
        buffers: BTreeMap::from([("../escape.rs".to_owned(), b"x".to_vec())]),
    };
    let err = Snapshotter::new(dir.path(), None)
        .snapshot(&overlay)
        .unwrap_err();
    assert!(err.to_string().contains("../escape.rs"), "{err}");
}

#[test]
fn non_utf8_file_name_fails_closed_naming_the_path() {
    use std::ffi::OsStr;
    let dir = tempfile::tempdir().unwrap();
    let name = OsStr::from_bytes(b"bad\xffname.rs");
    fs::write(dir.path().join(name), b"x").unwrap();
    let err = Snapshotter::new(dir.path(), None)
        .snapshot(&Overlay::default())
        .unwrap_err();
    assert!(matches!(&err, SnapshotError::NonUtf8Path { path } if path.ends_with(name)));
    assert!(err.to_string().contains("bad"), "{err}");
}

#[test]
fn unchanged_tree_is_served_from_the_persisted_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache_file = cache_dir.path().join("index");
    write(dir.path(), "a.rs", b"fn a() {}");
    write(dir.path(), "b/c.rs", b"fn c() {}");
    age(&dir.path().join("a.rs"));
    age(&dir.path().join("b/c.rs"));

    let first = Snapshotter::new(dir.path(), Some(cache_file.clone()))
        .snapshot(&Overlay::default())
        .unwrap();
    assert!(cache_file.exists());

    // A fresh snapshotter (a new process) trusts the persisted stats...
    let cache = Snapshotter::new(dir.path(), Some(cache_file.clone())).load_cache();
    assert_eq!(cache.len(), 2);
    let scan = walk(
        root_job(dir.path()),
        &cache,
        None,
        now_ns(),
        Bound::UNBOUNDED,
    )
    .unwrap();
    assert_eq!(scan.hashed, 0);

    // ...and produces the same root.
    let second = Snapshotter::new(dir.path(), Some(cache_file))
        .snapshot(&Overlay::default())
        .unwrap();
    assert_eq!(first, second);
}

#[test]
fn watched_mode_keeps_the_persisted_cache_current() {
    let dir = tempfile::tempdir().unwrap();
    let cache_file = dir.path().join(".trellis/index");
    write(dir.path(), "src/a.rs", b"one");
    let mut watched = Snapshotter::new(dir.path(), Some(cache_file.clone()));
    watched.watch();
    watched.snapshot(&Overlay::default()).unwrap();
    write(dir.path(), "src/a.rs", b"two");
    write(dir.path(), "src/b.rs", b"new");
    let snapshot = watched.snapshot(&Overlay::default()).unwrap();
    assert!(matches!(watched.last_reroot(), ReRoot::Incremental { .. }));

    // What the next process starts from.
    let cache = Snapshotter::new(dir.path(), Some(cache_file)).load_cache();
    let cached: BTreeMap<&str, Entry> = cache
        .iter()
        .map(|(path, cached)| (path.as_str(), cached.entry))
        .collect();
    let seen: BTreeMap<&str, Entry> = snapshot
        .entries
        .iter()
        .map(|(path, entry)| (path.as_str(), *entry))
        .collect();
    assert_eq!(cached, seen);
}

#[test]
fn racily_clean_files_are_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.rs", b"one");
    let stat = FileStat::of(&fs::symlink_metadata(dir.path().join("a.rs")).unwrap());
    let entry = Entry {
        kind: EntryKind::File { executable: false },
        blob: blob_digest(b"one"),
        size: 3,
    };
    let read_at = |read_at_ns| CachedEntry {
        stat,
        entry,
        read_at_ns,
    };
    let hashed_with = |cached: CachedEntry| {
        let cache = StatCache::from([("a.rs".to_owned(), cached)]);
        walk(
            root_job(dir.path()),
            &cache,
            None,
            now_ns(),
            Bound::UNBOUNDED,
        )
        .unwrap()
        .hashed
    };
    // Read in the same instant the file was written: a later write in
    // that timestamp granule would leave the stat unchanged, so re-read.
    let racy = read_at(stat.mtime_ns.max(stat.ctime_ns));
    assert_eq!(racy.trusted(&stat), None);
    assert_eq!(hashed_with(racy), 1);
    // Read well after the last change: trusted.
    let settled = read_at(stat.mtime_ns + 2 * RACY_WINDOW_NS);
    assert_eq!(settled.trusted(&stat), Some(entry));
    assert_eq!(hashed_with(settled), 0);
}

#[test]
fn changed_files_are_rehashed_even_when_cached() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.rs", b"one");
    age(&dir.path().join("a.rs"));
    let mut snapshotter = Snapshotter::new(dir.path(), None);
    snapshotter.snapshot(&Overlay::default()).unwrap();
    fs::write(dir.path().join("a.rs"), b"three").unwrap();
    let second = snapshotter.snapshot(&Overlay::default()).unwrap();
    assert_eq!(second.entries["a.rs"].blob, blob_digest(b"three"));
}

#[test]
fn damaged_cache_file_costs_a_cold_scan_not_a_wrong_answer() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.rs", b"one");
    let cache_file = dir.path().join(".trellis/index");
    let first = Snapshotter::new(dir.path(), Some(cache_file.clone()))
        .snapshot(&Overlay::default())
        .unwrap();
    let mut bytes = fs::read(&cache_file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs::write(&cache_file, bytes).unwrap();
    let again = Snapshotter::new(dir.path(), Some(cache_file))
        .snapshot(&Overlay::default())
        .unwrap();
    assert_eq!(first, again);
}

#[test]
fn cache_encoding_round_trips() {
    let path = "x/y.rs".to_owned();
    let cached = CachedEntry {
        stat: FileStat {
            size: 3,
            mtime_ns: -5,
            ctime_ns: 7,
            inode: 9,
            mode: 0o100755,
        },
        entry: Entry {
            kind: EntryKind::File { executable: true },
            blob: blob_digest(b"abc"),
            size: 3,
        },
        read_at_ns: 1234,
    };
    let decoded = decode_cache(&encode_cache(&[(&path, &cached)])).unwrap();
    assert_eq!(decoded, StatCache::from([(path, cached)]));
    assert!(decode_cache(b"short").is_none());
}
