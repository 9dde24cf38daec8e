//! Watched mode: the last scan kept per directory and brought up to date by
//! inotify events instead of a stat of every file.
//!
//! The stat cache makes a re-root cost one `stat` per file. A long-lived
//! process (the language server re-roots on every save) can do better: it
//! watches every directory it lists and, on a re-root, lists again only the
//! directories the kernel reported changes in. The result is the snapshot a
//! full scan would produce, entry for entry. These rules make it so:
//!
//! - **Watch, then list.** A directory is watched *before* it is listed, so
//!   a change after its listing always raises an event.
//! - **Drain first, in the calling thread.** A re-root begins by reading
//!   every queued event, without blocking. The kernel queues an event when
//!   the operation happens, so every change completed before the re-root is
//!   seen; no background thread is involved.
//! - **Only changed directories are touched.** A directory without events
//!   is reused as it was, with no system call. One with events is listed
//!   again, its files checked against the stat cache (racily clean files are
//!   re-read as usual). A subdirectory that appears, or whose name any event
//!   mentions (it may have been replaced by another directory of that name),
//!   is walked and watched afresh; one that disappears is dropped with
//!   everything under it, and its watches removed.
//! - **Hard links are re-checked every time.** A write through another link
//!   raises no event in this directory, so a directory holding a file with
//!   several links is listed again on every re-root.
//! - **Anything else is a full scan** (with new watches): a queue overflow,
//!   any change to a `.gitignore` or `.ignore` (what is ignored may change
//!   anywhere below), a directory that could not be watched (for example
//!   the `fs.inotify.max_user_watches` limit) or that is watched under two
//!   paths (a bind mount), an unmount, the root moved, deleted or replaced,
//!   or an error while listing a changed directory.
//!
//! What inotify does not see, and why this mode is opt-in: writes through a
//! shared `mmap`, changes made by other machines on network file systems
//! (NFS, SMB, some FUSE file systems), and file systems mounted inside the
//! workspace after it was watched. The language server opts in (its
//! re-roots are frequent and the workspace is local); the CLI, a fresh
//! process each run, keeps the stat cache, which sees all of these.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::SnapshotError;
use super::scan::{
    Bound, CachedEntry, DirJob, ListedDir, Listing, RuleChain, StatCache, list_dir, walk,
};
use super::watch::{DirWatches, RescanReason, Wd};

/// A directory's identity, to notice the workspace root being replaced by
/// another directory at the same path (which raises no event on the old
/// one's watch if, say, a parent directory was renamed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DirId {
    device: u64,
    inode: u64,
}

impl DirId {
    pub fn of(path: &Path) -> Option<DirId> {
        let meta = std::fs::metadata(path).ok()?;
        Some(DirId {
            device: meta.dev(),
            inode: meta.ino(),
        })
    }
}

/// The workspace as last seen, directory by directory, with the watches
/// that keep it current.
pub(super) struct WatchedTree {
    root: PathBuf,
    root_id: Option<DirId>,
    watches: DirWatches,
    /// False once some directory is not reliably watched: the tree then
    /// only serves as the stat cache of the next full scan.
    complete: bool,
    dirs: HashMap<String, DirRecord>,
}

/// One listed directory.
struct DirRecord {
    depth: usize,
    /// The ignore rules in force for its entries.
    rules: RuleChain,
    files: Vec<(String, CachedEntry)>,
    subdirs: Vec<String>,
    watch: Option<Wd>,
    multiply_linked: bool,
    /// Whether the ignore rules hide it: its files are context.
    context: bool,
}

/// What a successful watched re-root did.
pub(super) struct Refreshed {
    /// Directories listed again because of events.
    pub relisted: usize,
    /// New (or replaced) directories walked.
    pub walked: usize,
    /// Whether any file is new, gone or was re-read.
    pub changed: bool,
}

/// Work collected while listing changed directories, done after all of
/// them are listed: a directory moved within the workspace is dropped at
/// its old place before it is watched at its new one.
#[derive(Default)]
struct Pending {
    /// New directories to walk.
    walk: Vec<DirJob>,
    /// Entries of dropped directories: the stat cache for walking a
    /// directory that was replaced or renamed back.
    dropped: StatCache,
    hashed: usize,
}

impl WatchedTree {
    /// The tree of a full scan made with `watches` (taken when the root's
    /// identity was `root_id`, before the scan).
    pub fn new(
        root: &Path,
        root_id: Option<DirId>,
        watches: DirWatches,
        listed: Vec<ListedDir>,
    ) -> WatchedTree {
        let mut tree = WatchedTree {
            root: root.to_path_buf(),
            root_id,
            watches,
            complete: true,
            dirs: HashMap::with_capacity(listed.len()),
        };
        tree.insert(listed);
        tree
    }

    /// Why some directory is not watched, if one is not.
    pub fn unwatched_reason(&self) -> Option<String> {
        (!self.complete).then(|| {
            self.watches.failure().unwrap_or_else(|| {
                "a directory is reachable under two paths (a bind mount?)".to_owned()
            })
        })
    }

    /// Every file, with its cached entry.
    pub fn files(&self) -> impl Iterator<Item = (&String, &CachedEntry)> {
        self.dirs
            .values()
            .flat_map(|dir| dir.files.iter().map(|(path, cached)| (path, cached)))
    }

    /// Gives up the watches, keeping what was seen as a stat cache.
    pub fn into_stat_cache(self) -> StatCache {
        self.dirs.into_values().flat_map(|dir| dir.files).collect()
    }

    /// Applies the events queued since the last re-root. On `Err`, the tree
    /// may be partly updated and must be replaced by a full scan (it remains
    /// a sound stat cache: every entry is still checked against its stat).
    pub fn refresh(&mut self, now_ns: i64) -> Result<Refreshed, RescanReason> {
        if !self.complete {
            return Err(RescanReason::WatchUnavailable);
        }
        if self.root_id.is_none() || DirId::of(&self.root) != self.root_id {
            return Err(RescanReason::RootReplaced);
        }
        let mut changes = self.watches.drain().map_err(|err| {
            tracing::warn!(%err, "cannot read the workspace's inotify events");
            RescanReason::WatchLost
        })?;
        if let Some(reason) = changes.rescan {
            return Err(reason);
        }
        for (rel, dir) in &self.dirs {
            if dir.multiply_linked {
                changes.dirty.entry(rel.clone()).or_default();
            }
        }
        if changes.dirty.is_empty() {
            return Ok(Refreshed {
                relisted: 0,
                walked: 0,
                changed: false,
            });
        }

        let files_before = self.file_count();
        let failed = |err: SnapshotError| {
            tracing::debug!(%err, "listing a changed directory failed");
            RescanReason::RefreshFailed
        };
        let mut pending = Pending::default();
        let mut relisted = 0;
        // Path order puts a parent before its children, so a directory
        // dropped with its parent is not listed.
        for (rel, names) in &changes.dirty {
            if self.dirs.contains_key(rel) {
                self.relist(rel, names, now_ns, &mut pending)
                    .map_err(failed)?;
                relisted += 1;
            }
        }
        let mut walked = 0;
        if !pending.walk.is_empty() {
            // Unbounded here: the snapshot checks its total after the re-root.
            let listed = walk(
                pending.walk,
                &pending.dropped,
                Some(&self.watches),
                now_ns,
                Bound::UNBOUNDED,
            )
            .map_err(failed)?;
            pending.hashed += listed.hashed;
            walked = listed.dirs.len();
            if !self.insert(listed.dirs) {
                return Err(RescanReason::WatchUnavailable);
            }
        }
        Ok(Refreshed {
            relisted,
            walked,
            changed: pending.hashed > 0 || self.file_count() != files_before,
        })
    }

    fn file_count(&self) -> usize {
        self.dirs.values().map(|dir| dir.files.len()).sum()
    }

    /// Adds walked directories and maps their watches. False (and the tree
    /// marked incomplete) if any of them is not reliably watched.
    fn insert(&mut self, listed: Vec<ListedDir>) -> bool {
        for dir in listed {
            let watched = dir
                .watch
                .is_some_and(|wd| self.watches.record(wd, &dir.rel));
            self.complete &= watched;
            self.dirs.insert(
                dir.rel,
                DirRecord {
                    depth: dir.depth,
                    rules: dir.rules,
                    files: dir.files,
                    subdirs: dir.subdirs,
                    watch: dir.watch,
                    multiply_linked: dir.multiply_linked,
                    context: dir.context,
                },
            );
        }
        self.complete
    }

    /// Lists the directory `rel` again. `names` are the entries its events
    /// mentioned: a subdirectory among them is dropped and walked afresh.
    fn relist(
        &mut self,
        rel: &str,
        names: &[Box<[u8]>],
        now_ns: i64,
        pending: &mut Pending,
    ) -> Result<(), SnapshotError> {
        let record = &self.dirs[rel];
        let job = DirJob {
            path: if rel.is_empty() {
                self.root.clone()
            } else {
                self.root.join(rel)
            },
            rel: rel.to_owned(),
            depth: record.depth,
            rules: record.rules.clone(),
            context: record.context,
        };
        let previous: HashMap<&str, CachedEntry> = record
            .files
            .iter()
            .map(|(path, cached)| (path.as_str(), *cached))
            .collect();
        // The ignore files did not change (that forces a full scan), so the
        // rules recorded for this directory still hold.
        let Listing {
            subdirs,
            files,
            multiply_linked,
        } = list_dir(
            &job,
            &record.rules,
            |path| previous.get(path).copied(),
            |_| Ok(()),
            now_ns,
            &mut pending.hashed,
        )?;

        let named = |dir: &str| {
            let name = dir.rsplit('/').next().unwrap_or(dir);
            names.iter().any(|named| **named == *name.as_bytes())
        };
        let record = self.dirs.get_mut(rel).expect("listed above");
        let listed_subdirs: Vec<String> = subdirs.iter().map(|job| job.rel.clone()).collect();
        let old_subdirs = std::mem::replace(&mut record.subdirs, listed_subdirs);
        record.files = files;
        record.multiply_linked = multiply_linked;

        let still_there: HashSet<&str> = subdirs.iter().map(|job| job.rel.as_str()).collect();
        for gone in &old_subdirs {
            if named(gone) || !still_there.contains(gone.as_str()) {
                self.drop_subtree(gone, &mut pending.dropped);
            }
        }
        let known: HashSet<&str> = old_subdirs.iter().map(String::as_str).collect();
        pending.walk.extend(
            subdirs
                .into_iter()
                .filter(|job| named(&job.rel) || !known.contains(job.rel.as_str())),
        );
        Ok(())
    }

    /// Forgets `rel` and everything under it, removing their watches; their
    /// files go to `dropped`.
    fn drop_subtree(&mut self, rel: &str, dropped: &mut StatCache) {
        let Some(record) = self.dirs.remove(rel) else {
            return;
        };
        if let Some(wd) = record.watch {
            self.watches.forget(wd, rel);
        }
        dropped.extend(record.files);
        for subdir in &record.subdirs {
            self.drop_subtree(subdir, dropped);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::fs;
    use std::io::Write;
    use std::os::unix::fs::{FileExt, PermissionsExt, symlink};

    use proptest::prelude::*;

    use super::super::{Overlay, Snapshot};
    use super::super::{ReRoot, Snapshotter};
    use super::*;

    fn write(root: &Path, rel: &str, bytes: &[u8]) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    fn full_scan(root: &Path) -> Snapshot {
        Snapshotter::new(root, None)
            .snapshot(&Overlay::default())
            .unwrap()
    }

    fn watched(root: &Path) -> Snapshotter {
        let mut snapshotter = Snapshotter::new(root, None);
        snapshotter.watch();
        snapshotter.snapshot(&Overlay::default()).unwrap();
        assert_eq!(snapshotter.last_reroot(), ReRoot::FullScan);
        snapshotter
    }

    /// Re-roots `watched` and checks it against a fresh full scan; returns
    /// how the re-root went.
    fn reroot_matches_full_scan(watched: &mut Snapshotter, step: &str) -> ReRoot {
        let got = watched.snapshot(&Overlay::default()).unwrap();
        assert_eq!(got, full_scan(watched.root()), "after: {step}");
        watched.last_reroot()
    }

    fn sample_tree(root: &Path) {
        write(root, ".gitignore", b"*.log\n");
        write(root, "Cargo.toml", b"[package]\n");
        write(root, "src/lib.rs", b"pub mod a;\n");
        write(root, "src/a.rs", b"pub fn a() {}\n");
        write(root, "src/deep/er/x.rs", b"// x\n");
        write(root, "docs/guide.md", b"# guide\n");
        write(root, "tests/t.rs", b"#[test] fn t() {}\n");
    }

    #[test]
    fn unchanged_tree_lists_nothing_again() {
        let dir = tempfile::tempdir().unwrap();
        sample_tree(dir.path());
        let mut snapshotter = watched(dir.path());
        let reroot = reroot_matches_full_scan(&mut snapshotter, "nothing");
        assert_eq!(
            reroot,
            ReRoot::Incremental {
                relisted: 0,
                walked: 0
            }
        );
    }

    #[test]
    fn watched_reroot_equals_a_full_scan_after_each_mutation() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path();
        sample_tree(root);
        let mut snapshotter = watched(root);
        type Mutation = Box<dyn Fn(&Path)>;
        let steps: Vec<(&str, Mutation)> = vec![
            (
                "edit in place keeping the size",
                Box::new(|root| {
                    let file = fs::OpenOptions::new()
                        .write(true)
                        .open(root.join("src/a.rs"))
                        .unwrap();
                    file.write_all_at(b"PUB", 0).unwrap();
                }),
            ),
            (
                "append",
                Box::new(|root| {
                    let mut file = fs::OpenOptions::new()
                        .append(true)
                        .open(root.join("src/lib.rs"))
                        .unwrap();
                    file.write_all(b"pub mod b;\n").unwrap();
                }),
            ),
            (
                "create a file in an existing directory",
                Box::new(|root| write(root, "src/b.rs", b"pub fn b() {}\n")),
            ),
            (
                "create nested new directories with files",
                Box::new(|root| {
                    write(root, "new/one/two/three.rs", b"3");
                    write(root, "new/one/uno.rs", b"1");
                }),
            ),
            (
                "delete a file",
                Box::new(|root| fs::remove_file(root.join("docs/guide.md")).unwrap()),
            ),
            (
                "delete a directory tree",
                Box::new(|root| fs::remove_dir_all(root.join("src/deep")).unwrap()),
            ),
            (
                "rename a file across directories",
                Box::new(|root| {
                    fs::rename(root.join("src/b.rs"), root.join("new/one/b.rs")).unwrap()
                }),
            ),
            (
                "rename a directory",
                Box::new(|root| fs::rename(root.join("new/one"), root.join("moved")).unwrap()),
            ),
            (
                "chmod +x",
                Box::new(|root| {
                    let path = root.join("moved/uno.rs");
                    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
                }),
            ),
            (
                "replace a file with a symlink",
                Box::new(|root| {
                    fs::remove_file(root.join("tests/t.rs")).unwrap();
                    symlink("../src/lib.rs", root.join("tests/t.rs")).unwrap();
                }),
            ),
            (
                "replace a directory with another of the same name",
                Box::new(|root| {
                    fs::remove_dir_all(root.join("moved")).unwrap();
                    write(root, "moved/other.rs", b"other");
                }),
            ),
            (
                "edit in the replacing directory (watched afresh)",
                Box::new(|root| write(root, "moved/other.rs", b"changed")),
            ),
            (
                "replace a file with a directory",
                Box::new(|root| {
                    fs::remove_file(root.join("Cargo.toml")).unwrap();
                    write(root, "Cargo.toml/inner", b"odd but legal");
                }),
            ),
            (
                "an ignored file appears (as context)",
                Box::new(|root| write(root, "src/build.log", b"noise")),
            ),
            (
                "an ignored file changes",
                Box::new(|root| write(root, "src/build.log", b"more noise")),
            ),
            (
                "a directory is tagged as build output",
                Box::new(|root| {
                    write(
                        root,
                        "moved/CACHEDIR.TAG",
                        b"Signature: 8a477f597d28d172789f06886806bc55",
                    )
                }),
            ),
            (
                "its tag is removed",
                Box::new(|root| fs::remove_file(root.join("moved/CACHEDIR.TAG")).unwrap()),
            ),
        ];
        for (step, mutate) in &steps {
            mutate(root);
            let reroot = reroot_matches_full_scan(&mut snapshotter, step);
            assert!(
                matches!(reroot, ReRoot::Incremental { .. }),
                "{step}: {reroot:?}"
            );
        }

        // A directory moved out of the workspace and back.
        fs::rename(root.join("src"), outside.path().join("src")).unwrap();
        reroot_matches_full_scan(&mut snapshotter, "move a directory out");
        write(
            outside.path(),
            "src/while_away.rs",
            b"unseen until it returns",
        );
        fs::rename(outside.path().join("src"), root.join("src")).unwrap();
        let reroot = reroot_matches_full_scan(&mut snapshotter, "move it back in");
        assert!(matches!(reroot, ReRoot::Incremental { .. }), "{reroot:?}");

        // Ignore rules changing make files disappear and reappear.
        write(root, ".gitignore", b"*.log\n*.rs\n");
        let reroot = reroot_matches_full_scan(&mut snapshotter, "ignore every .rs");
        assert_eq!(reroot, ReRoot::Rescan(RescanReason::IgnoreRulesChanged));
        write(root, "src/.ignore", b"!a.rs\n");
        reroot_matches_full_scan(&mut snapshotter, "unignore src/a.rs");
        fs::remove_file(root.join(".gitignore")).unwrap();
        let reroot = reroot_matches_full_scan(&mut snapshotter, "drop the .gitignore");
        assert_eq!(reroot, ReRoot::Rescan(RescanReason::IgnoreRulesChanged));
        // Back to incremental once the rules are settled.
        write(root, "src/c.rs", b"c");
        let reroot = reroot_matches_full_scan(&mut snapshotter, "after the rescan");
        assert!(matches!(reroot, ReRoot::Incremental { .. }), "{reroot:?}");
    }

    #[test]
    fn hard_linked_files_are_rechecked_without_an_event() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "src/lib.rs", b"one");
        // A second link outside any watched directory: writing through it
        // raises no event in the workspace.
        let other = root.join("target");
        fs::create_dir(&other).unwrap();
        fs::hard_link(root.join("src/lib.rs"), other.join("alias")).unwrap();
        let mut snapshotter = watched(root);
        fs::write(other.join("alias"), b"two, through the other link").unwrap();
        let reroot = reroot_matches_full_scan(&mut snapshotter, "write through the link");
        assert_eq!(
            reroot,
            ReRoot::Incremental {
                relisted: 1,
                walked: 0
            }
        );
    }

    #[test]
    fn queue_overflow_falls_back_to_a_full_scan() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        sample_tree(root);
        let mut snapshotter = watched(root);
        let limit: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .map_or(16_384, |text| text.trim().parse().unwrap());
        // Alternating files, so the kernel cannot merge repeated events.
        let a = fs::File::create(root.join("a.txt")).unwrap();
        let b = fs::File::create(root.join("b.txt")).unwrap();
        for i in 0..limit {
            let file = if i % 2 == 0 { &a } else { &b };
            file.write_all_at(b"x", i as u64).unwrap();
        }
        let reroot = reroot_matches_full_scan(&mut snapshotter, "a flood of events");
        assert_eq!(reroot, ReRoot::Rescan(RescanReason::QueueOverflow));
        let reroot = reroot_matches_full_scan(&mut snapshotter, "quiet again");
        assert_eq!(
            reroot,
            ReRoot::Incremental {
                relisted: 0,
                walked: 0
            }
        );
    }

    #[test]
    fn a_replaced_root_falls_back_to_a_full_scan() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        write(&root, "a.rs", b"old");
        let mut snapshotter = watched(&root);
        fs::rename(&root, dir.path().join("old-ws")).unwrap();
        write(&root, "b.rs", b"new workspace at the same path");
        let reroot = reroot_matches_full_scan(&mut snapshotter, "root replaced");
        assert_eq!(reroot, ReRoot::Rescan(RescanReason::RootReplaced));
    }

    #[test]
    fn an_unwatched_directory_makes_every_reroot_a_full_scan() {
        let dir = tempfile::tempdir().unwrap();
        sample_tree(dir.path());
        // A scan without watches stands for one whose watches ran out.
        let listed = walk(
            vec![DirJob {
                path: dir.path().to_path_buf(),
                rel: String::new(),
                depth: 0,
                rules: None,
                context: false,
            }],
            &StatCache::new(),
            None,
            0,
            Bound::UNBOUNDED,
        )
        .unwrap();
        let watches = DirWatches::new().unwrap();
        let mut tree = WatchedTree::new(dir.path(), DirId::of(dir.path()), watches, listed.dirs);
        for _ in 0..2 {
            assert!(matches!(
                tree.refresh(0),
                Err(RescanReason::WatchUnavailable)
            ));
        }
        assert!(tree.unwatched_reason().is_some());
    }

    /// One step of a random workload, over a small set of names so that
    /// steps collide: they overwrite, move onto and delete each other.
    #[derive(Clone, Debug)]
    enum Op {
        Write {
            path: String,
            content: u8,
        },
        Append {
            path: String,
        },
        Remove {
            path: String,
        },
        RemoveDir {
            dir: String,
        },
        Rename {
            from: String,
            to: String,
        },
        Chmod {
            path: String,
            executable: bool,
        },
        Symlink {
            path: String,
        },
        Ignore {
            rules: &'static str,
        },
        /// Marks (or unmarks) a directory as build output.
        CacheTag {
            dir: String,
            tagged: bool,
        },
    }

    const DIRS: [&str; 5] = ["", "a", "a/b", "c", "a/b/d"];
    const NAMES: [&str; 3] = ["x.rs", "y.log", "z"];

    fn any_path() -> impl Strategy<Value = String> {
        (0..DIRS.len(), 0..NAMES.len()).prop_map(|(dir, name)| {
            if DIRS[dir].is_empty() {
                NAMES[name].to_owned()
            } else {
                format!("{}/{}", DIRS[dir], NAMES[name])
            }
        })
    }

    fn any_dir() -> impl Strategy<Value = String> {
        (1..DIRS.len()).prop_map(|dir| DIRS[dir].to_owned())
    }

    fn any_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any_path(), any::<u8>()).prop_map(|(path, content)| Op::Write { path, content }),
            2 => any_path().prop_map(|path| Op::Append { path }),
            2 => any_path().prop_map(|path| Op::Remove { path }),
            1 => any_dir().prop_map(|dir| Op::RemoveDir { dir }),
            2 => (any_path(), any_path()).prop_map(|(from, to)| Op::Rename { from, to }),
            2 => (any_dir(), any_dir()).prop_map(|(from, to)| Op::Rename { from, to }),
            1 => (any_path(), any::<bool>())
                .prop_map(|(path, executable)| Op::Chmod { path, executable }),
            1 => any_path().prop_map(|path| Op::Symlink { path }),
            1 => prop::sample::select(vec!["", "*.log\n", "b/\n", "*.rs\n!a/*.rs\n"])
                .prop_map(|rules| Op::Ignore { rules }),
            1 => (any_dir(), any::<bool>()).prop_map(|(dir, tagged)| Op::CacheTag { dir, tagged }),
        ]
    }

    /// Applies `op`; steps that make no sense in the current tree (moving a
    /// directory into itself, writing under a file) just fail and change
    /// nothing, as they would for a user.
    fn apply(root: &Path, op: &Op) {
        let _ = match op {
            Op::Write { path, content } => {
                let path = root.join(path);
                let _ = fs::create_dir_all(path.parent().unwrap());
                fs::write(path, [*content; 3])
            }
            Op::Append { path } => fs::OpenOptions::new()
                .append(true)
                .open(root.join(path))
                .and_then(|mut file| file.write_all(b"+")),
            Op::Remove { path } => fs::remove_file(root.join(path)),
            Op::RemoveDir { dir } => fs::remove_dir_all(root.join(dir)),
            Op::Rename { from, to } => fs::rename(root.join(from), root.join(to)),
            Op::Chmod { path, executable } => {
                let mode = if *executable { 0o755 } else { 0o644 };
                fs::set_permissions(root.join(path), fs::Permissions::from_mode(mode))
            }
            Op::Symlink { path } => {
                let path = root.join(path);
                let _ = fs::remove_file(&path);
                symlink("x.rs", path)
            }
            Op::Ignore { rules } => fs::write(root.join(".gitignore"), rules),
            Op::CacheTag { dir, tagged: true } => fs::write(
                root.join(dir).join("CACHEDIR.TAG"),
                "Signature: 8a477f597d28d172789f06886806bc55\n",
            ),
            Op::CacheTag { dir, tagged: false } => {
                fs::remove_file(root.join(dir).join("CACHEDIR.TAG"))
            }
        };
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn watched_reroots_equal_full_scans(
            batches in prop::collection::vec(prop::collection::vec(any_op(), 1..4), 1..10)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            for rel in ["x.rs", "a/x.rs", "a/b/x.rs", "c/z"] {
                write(root, rel, b"start");
            }
            let mut snapshotter = watched(root);
            for (i, batch) in batches.iter().enumerate() {
                for op in batch {
                    apply(root, op);
                }
                reroot_matches_full_scan(&mut snapshotter, &format!("batch {i}: {batch:?}"));
            }
        }
    }
}
