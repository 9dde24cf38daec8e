//! Eager copies of a snapshot into a branch workspace ("slot").
//!
//! A candidate fix is measured in a real directory holding exactly the
//! snapshot's content. The copy is a plain eager copy (no reflinks, no
//! copy-on-write), so nothing a candidate does can reach the user's files.
//!
//! Slots are reused between candidates. Rewriting every file would throw
//! away cargo's incremental state in the slot's `target/`, which keys on
//! mtimes, so an existing slot is *synced*: only files whose content differs
//! are rewritten, files the snapshot lacks are removed, and `target/` is
//! never touched. Either way the copy is then snapshotted afresh and must
//! have the snapshot's root before anything runs in it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{OpenOptionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::fsutil::{check_rel_path, confine, remove_if_present};
use super::{ContentSource, Entry, Overlay, Snapshot, SnapshotError, Snapshotter};
use crate::digest::Digest;

/// The slot's own stat cache, inside the directory every walk excludes.
const SLOT_CACHE: &str = ".trellis/slot-index";

/// The most a single copy may create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyLimits {
    pub max_files: u64,
    pub max_bytes: u64,
}

/// What a copy reserved and what it proved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaterializeReport {
    /// Entries in the snapshot (files and symlinks).
    pub files: u64,
    /// Bytes of content in the snapshot.
    pub bytes: u64,
    /// The copy's content root, equal to the snapshot's.
    pub root: Digest,
    /// Entries that had to be (re)written; the rest were already right.
    pub written: u64,
    /// Stale entries removed from a reused slot.
    pub removed: u64,
}

/// Makes `dest` hold exactly `snapshot`'s content, read from `source`.
///
/// The reservation (`files`, `bytes` of the whole snapshot) is checked before
/// anything is created. A missing `dest` is created and filled; an existing
/// one is synced. Ignored files already in `dest` (such as `target/`) are
/// left alone, as they are not content.
pub fn materialize(
    snapshot: &Snapshot,
    source: &dyn ContentSource,
    dest: &Path,
    limits: CopyLimits,
) -> Result<MaterializeReport, SnapshotError> {
    check_copyable(snapshot)?;
    let files = snapshot.entries.len() as u64;
    let bytes = snapshot.total_bytes();
    if files > limits.max_files || bytes > limits.max_bytes {
        return Err(SnapshotError::OverBudget {
            files,
            bytes,
            max_files: limits.max_files,
            max_bytes: limits.max_bytes,
        });
    }

    let mut slot = Snapshotter::new(dest, Some(dest.join(SLOT_CACHE)));
    let current = match fs::symlink_metadata(dest) {
        Ok(meta) if meta.is_dir() => slot.snapshot(&Overlay::default())?.entries,
        Ok(_) => {
            return Err(SnapshotError::io(dest)(std::io::Error::new(
                ErrorKind::AlreadyExists,
                "the copy destination exists and is not a directory",
            )));
        }
        Err(err) if err.kind() == ErrorKind::NotFound => {
            fs::create_dir_all(dest).map_err(SnapshotError::io(dest))?;
            Default::default()
        }
        Err(err) => return Err(SnapshotError::io(dest)(err)),
    };

    let stale: Vec<&str> = current
        .keys()
        .filter(|path| !snapshot.entries.contains_key(*path))
        .map(String::as_str)
        .collect();
    for path in &stale {
        remove_stale(dest, path)?;
    }

    let to_write: Vec<(&str, &Entry)> = snapshot
        .entries
        .iter()
        .filter(|(path, entry)| current.get(*path) != Some(entry))
        .map(|(path, entry)| (path.as_str(), entry))
        .collect();
    create_parent_dirs(dest, to_write.iter().map(|(path, _)| *path))?;
    write_all(dest, source, &to_write)?;

    let copied = slot.snapshot(&Overlay::default())?;
    if copied.root != snapshot.root {
        return Err(SnapshotError::RootMismatch {
            expected: snapshot.root,
            found: copied.root,
        });
    }
    Ok(MaterializeReport {
        files,
        bytes,
        root: copied.root,
        written: to_write.len() as u64,
        removed: stale.len() as u64,
    })
}

/// Rewrites `entries` of an existing copy from `source`, their directories
/// created as needed: for a copy something other than a sync changed (an
/// oracle that wrote into the tree it judged), whose stat cache cannot be
/// trusted to notice.
pub fn rewrite(
    dest: &Path,
    source: &dyn ContentSource,
    entries: &[(&str, &Entry)],
) -> Result<(), SnapshotError> {
    create_parent_dirs(dest, entries.iter().map(|(path, _)| *path))?;
    write_all(dest, source, entries)
}

/// Refuses snapshots that could not have come from a walk: unsafe paths,
/// paths in the excluded directories, or a path under another entry. A
/// crafted snapshot must not be able to write through a symlink it created.
fn check_copyable(snapshot: &Snapshot) -> Result<(), SnapshotError> {
    for path in snapshot.entries.keys() {
        check_rel_path(path)?;
        let first = path.split('/').next().unwrap_or_default();
        if matches!(first, "target" | ".trellis")
            || path.split('/').any(|c| c == ".git" || c == "node_modules")
        {
            return Err(SnapshotError::InvalidPath {
                path: path.clone(),
                reason: "lies in a directory that snapshots always exclude",
            });
        }
    }
    super::check_shape(&snapshot.entries)
}

/// Removes a stale entry and any directories it leaves empty.
fn remove_stale(dest: &Path, rel: &str) -> Result<(), SnapshotError> {
    let path = confine(dest, rel)?;
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(err) if err.kind() == ErrorKind::NotFound => {}
        Err(err) => return Err(SnapshotError::io(path)(err)),
    }
    let mut dir = path.parent();
    while let Some(parent) = dir.filter(|parent| *parent != dest) {
        if fs::remove_dir(parent).is_err() {
            break; // not empty (or still needed): leave it
        }
        dir = parent.parent();
    }
    Ok(())
}

/// Creates every directory the written entries need, outermost first.
fn create_parent_dirs<'a>(
    dest: &Path,
    paths: impl Iterator<Item = &'a str>,
) -> Result<(), SnapshotError> {
    let mut dirs = BTreeSet::new();
    for path in paths {
        let mut end = path.len();
        while let Some(slash) = path[..end].rfind('/') {
            if !dirs.insert(&path[..slash]) {
                break;
            }
            end = slash;
        }
    }
    // Sorted order puts `a` before `a/b`, so parents exist first.
    for dir in dirs {
        let path = confine(dest, dir)?;
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                // A leftover file (say, ignored) where the snapshot needs a
                // directory.
                fs::remove_file(&path).map_err(SnapshotError::io(&path))?;
                fs::create_dir(&path).map_err(SnapshotError::io(&path))?;
            }
            Err(err) if err.kind() == ErrorKind::NotFound => {
                fs::create_dir(&path).map_err(SnapshotError::io(&path))?;
            }
            Err(err) => return Err(SnapshotError::io(path)(err)),
        }
    }
    Ok(())
}

/// Writes the entries on as many threads as the machine offers: per-file
/// work is mostly system calls, which overlap well.
fn write_all(
    dest: &Path,
    source: &dyn ContentSource,
    entries: &[(&str, &Entry)],
) -> Result<(), SnapshotError> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get().min(8))
        .min(entries.len().max(1));
    let next = AtomicUsize::new(0);
    let failure: Mutex<Option<SnapshotError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while let Some((path, entry)) = entries.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if let Err(err) = write_entry(dest, source, path, entry) {
                        failure.lock().unwrap().get_or_insert(err);
                        // Stop everyone: skip the remaining work.
                        next.store(entries.len(), Ordering::Relaxed);
                    }
                }
            });
        }
    });
    match failure.into_inner().unwrap() {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// Replaces whatever is at `rel` with `entry`'s verified content.
fn write_entry(
    dest: &Path,
    source: &dyn ContentSource,
    rel: &str,
    entry: &Entry,
) -> Result<(), SnapshotError> {
    let bytes = source.read(rel, entry)?;
    let path = confine(dest, rel)?;
    clear(&path)?;
    // Context entries (ignored files) are copied like any other.
    if entry.kind.is_symlink() {
        symlink(OsString::from_vec(bytes), &path).map_err(SnapshotError::io(path))
    } else {
        // `create_new` never follows a symlink that raced in after `clear`.
        fs::File::options()
            .write(true)
            .create_new(true)
            .mode(if entry.kind.is_executable() {
                0o755
            } else {
                0o644
            })
            .open(&path)
            .and_then(|mut file| file.write_all(&bytes))
            .map_err(SnapshotError::io(path))
    }
}

/// Removes what is at `path`, if anything, so a fresh entry can be created.
fn clear(path: &PathBuf) -> Result<(), SnapshotError> {
    remove_if_present(path).map_err(SnapshotError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{DirSource, EntryKind};
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, SystemTime};

    const ROOMY: CopyLimits = CopyLimits {
        max_files: 1000,
        max_bytes: 1 << 30,
    };

    fn write(root: &Path, rel: &str, bytes: &[u8]) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    /// A small workspace with a nested file, an executable and a symlink.
    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "Cargo.toml", b"[package]\nname = \"w\"\n");
        write(dir.path(), "src/lib.rs", b"pub fn f() {}\n");
        write(dir.path(), "src/deep/mod.rs", b"// deep\n");
        write(dir.path(), "run.sh", b"#!/bin/sh\n");
        fs::set_permissions(dir.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        symlink("src/lib.rs", dir.path().join("lib-link")).unwrap();
        write(dir.path(), "target/debug/junk", b"build output");
        dir
    }

    fn take(root: &Path, overlay: &Overlay) -> Snapshot {
        Snapshotter::new(root, None).snapshot(overlay).unwrap()
    }

    #[test]
    fn copies_into_a_new_directory_with_the_same_root() {
        let src = workspace();
        let snapshot = take(src.path(), &Overlay::default());
        let out = tempfile::tempdir().unwrap();
        let dest = out.path().join("slot");
        let report = materialize(
            &snapshot,
            &DirSource::new(src.path(), Overlay::default()),
            &dest,
            ROOMY,
        )
        .unwrap();
        assert_eq!(report.root, snapshot.root);
        assert_eq!(report.files, 5);
        assert_eq!(report.written, 5);
        assert_eq!(report.bytes, snapshot.total_bytes());
        assert_eq!(
            fs::read(dest.join("src/deep/mod.rs")).unwrap(),
            b"// deep\n"
        );
        let mode = fs::metadata(dest.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o100, 0, "executable bit preserved");
        assert_eq!(
            fs::read_link(dest.join("lib-link")).unwrap(),
            Path::new("src/lib.rs")
        );
        assert!(!dest.join("target").exists());
    }

    #[test]
    fn copies_overlay_content_not_disk_content() {
        let src = workspace();
        let overlay = Overlay {
            buffers: BTreeMap::from([("src/lib.rs".to_owned(), b"pub fn g() {}\n".to_vec())]),
        };
        let snapshot = take(src.path(), &overlay);
        let out = tempfile::tempdir().unwrap();
        materialize(
            &snapshot,
            &DirSource::new(src.path(), overlay),
            out.path(),
            ROOMY,
        )
        .unwrap();
        assert_eq!(
            fs::read(out.path().join("src/lib.rs")).unwrap(),
            b"pub fn g() {}\n"
        );
    }

    #[test]
    fn over_budget_copies_create_nothing() {
        let src = workspace();
        let snapshot = take(src.path(), &Overlay::default());
        let source = DirSource::new(src.path(), Overlay::default());
        let out = tempfile::tempdir().unwrap();
        let dest = out.path().join("slot");
        for limits in [
            CopyLimits {
                max_files: 4,
                max_bytes: 1 << 30,
            },
            CopyLimits {
                max_files: 1000,
                max_bytes: 10,
            },
        ] {
            let err = materialize(&snapshot, &source, &dest, limits).unwrap_err();
            assert!(matches!(err, SnapshotError::OverBudget { .. }), "{err:?}");
            assert!(!dest.exists());
        }
    }

    #[test]
    fn sync_rewrites_only_changed_files_and_spares_target() {
        let src = workspace();
        let out = tempfile::tempdir().unwrap();
        let dest = out.path().join("slot");
        let source = DirSource::new(src.path(), Overlay::default());
        materialize(
            &take(src.path(), &Overlay::default()),
            &source,
            &dest,
            ROOMY,
        )
        .unwrap();

        // Age the copy so its stat cache can vouch for it, and give the slot
        // build state and a stray file.
        let old = SystemTime::now() - Duration::from_secs(3600);
        for rel in ["Cargo.toml", "src/lib.rs", "src/deep/mod.rs", "run.sh"] {
            fs::File::options()
                .write(true)
                .open(dest.join(rel))
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        write(&dest, "target/debug/keep", b"incremental state");
        write(&dest, "stray/extra.rs", b"not in the snapshot");

        write(src.path(), "src/lib.rs", b"pub fn changed() {}\n");
        fs::remove_file(src.path().join("src/deep/mod.rs")).unwrap();
        let snapshot = take(src.path(), &Overlay::default());
        // Prime the slot cache once with the aged stats (the first scan after
        // the copy re-hashes racily clean files).
        Snapshotter::new(&dest, Some(dest.join(SLOT_CACHE)))
            .snapshot(&Overlay::default())
            .unwrap();

        let report = materialize(&snapshot, &source, &dest, ROOMY).unwrap();
        assert_eq!(report.root, snapshot.root);
        assert_eq!(report.written, 1);
        assert_eq!(report.removed, 2);
        assert_eq!(
            fs::read(dest.join("src/lib.rs")).unwrap(),
            b"pub fn changed() {}\n"
        );
        assert!(!dest.join("src/deep").exists(), "emptied directory pruned");
        assert!(!dest.join("stray").exists());
        assert_eq!(
            fs::read(dest.join("target/debug/keep")).unwrap(),
            b"incremental state"
        );
        let untouched = fs::metadata(dest.join("Cargo.toml"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(untouched, old, "unchanged files keep their mtime");
    }

    #[test]
    fn content_changed_after_the_snapshot_is_refused() {
        let src = workspace();
        let snapshot = take(src.path(), &Overlay::default());
        write(src.path(), "src/lib.rs", b"edited behind our back\n");
        let out = tempfile::tempdir().unwrap();
        let err = materialize(
            &snapshot,
            &DirSource::new(src.path(), Overlay::default()),
            out.path(),
            ROOMY,
        )
        .unwrap_err();
        assert!(
            matches!(&err, SnapshotError::ContentMismatch { path, .. } if path == "src/lib.rs"),
            "{err:?}"
        );
    }

    #[test]
    fn a_copy_whose_content_root_differs_is_refused() {
        // A doctored snapshot holds both an `.ignore` that hides `b.rs` and
        // `b.rs` itself: no walk of the copy can reproduce that root.
        let src = tempfile::tempdir().unwrap();
        write(src.path(), "a.rs", b"a");
        write(src.path(), "b.rs", b"b");
        let mut entries = take(src.path(), &Overlay::default()).entries;
        write(src.path(), ".ignore", b"b.rs\n");
        entries.insert(
            ".ignore".to_owned(),
            Entry {
                kind: EntryKind::File { executable: false },
                blob: crate::digest::blob_digest(b"b.rs\n"),
                size: 5,
            },
        );
        let out = tempfile::tempdir().unwrap();
        let doctored = Snapshot::from_entries(entries);
        let err = materialize(
            &doctored,
            &DirSource::new(src.path(), Overlay::default()),
            out.path(),
            ROOMY,
        )
        .unwrap_err();
        assert!(
            matches!(err, SnapshotError::RootMismatch { expected, .. } if expected == doctored.root),
            "{err:?}"
        );
    }

    #[test]
    fn crafted_snapshots_cannot_escape_through_their_own_symlinks() {
        let src = tempfile::tempdir().unwrap();
        let entries = BTreeMap::from([
            (
                "esc".to_owned(),
                Entry {
                    kind: EntryKind::Symlink,
                    blob: crate::digest::blob_digest(b"/tmp"),
                    size: 4,
                },
            ),
            (
                "esc/owned".to_owned(),
                Entry {
                    kind: EntryKind::File { executable: false },
                    blob: crate::digest::blob_digest(b"x"),
                    size: 1,
                },
            ),
        ]);
        let out = tempfile::tempdir().unwrap();
        let err = materialize(
            &Snapshot::from_entries(entries),
            &DirSource::new(src.path(), Overlay::default()),
            out.path(),
            ROOMY,
        )
        .unwrap_err();
        assert!(
            matches!(&err, SnapshotError::InvalidPath { path, .. } if path == "esc/owned"),
            "{err:?}"
        );
        assert_eq!(fs::read_dir(out.path()).unwrap().count(), 0);
    }
}
