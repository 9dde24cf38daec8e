//! Path confinement and atomic writes.
//!
//! Everything in Trellis that writes into a branch slot goes through here, so
//! a relative path that came from a snapshot, a model or an editor can never
//! escape the root: not with `..`, not with an absolute path, and not through
//! a symlink that already sits inside the root. The user's workspace and
//! `.trellis/` are written through [`crate::statedir`] handles instead (see
//! [`crate::promote`]).

use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::SnapshotError;
pub use crate::workspace_path::check_rel_path;

/// Mode of a file `write_atomic` creates where none existed.
const NEW_FILE_MODE: u32 = 0o644;

/// Resolves `rel` under `root`, refusing anything that could land outside it.
///
/// Beyond [`check_rel_path`], every *directory* component that already exists
/// must be a real directory, not a symlink, so no later operation can be
/// redirected out of `root`. The final component may be a symlink: the
/// operations done on it here (rename over it, unlink it, read the link)
/// never follow it.
pub fn confine(root: &Path, rel: &str) -> Result<PathBuf, SnapshotError> {
    check_rel_path(rel)?;
    let mut path = root.to_path_buf();
    let mut components = rel.split('/').peekable();
    while let Some(component) = components.next() {
        path.push(component);
        if components.peek().is_none() {
            break;
        }
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(SnapshotError::SymlinkInPath {
                    path: rel.to_owned(),
                    symlink: path,
                });
            }
            Ok(_) => {}
            // Nothing exists from here down, so nothing can redirect us.
            Err(err) if err.kind() == ErrorKind::NotFound => {
                path.extend(components);
                break;
            }
            Err(err) => return Err(SnapshotError::io(path)(err)),
        }
    }
    Ok(path)
}

/// Replaces the file at `rel` under `root` with `bytes`, atomically: readers
/// see the old content or the new, never a mix, even after a crash.
///
/// Missing parent directories are created. A file that is replaced keeps its
/// permission bits (notably the executable bit); a new file gets `0o644`.
///
/// This is how an edit reaches a branch, so it writes only the snapshot's
/// own files: a path the root's ignore rules hide (read-only context) or
/// that snapshots exclude is refused ([`SnapshotError::ReadOnlyContext`]).
pub fn write_atomic(root: &Path, rel: &str, bytes: &[u8]) -> Result<(), SnapshotError> {
    let path = confine(root, rel)?;
    if !super::scan::visible_to_walk(root, rel)? {
        return Err(SnapshotError::ReadOnlyContext {
            path: rel.to_owned(),
        });
    }
    let parent = path.parent().expect("a confined path has a parent");
    fs::create_dir_all(parent).map_err(SnapshotError::io(parent))?;
    let mode = match fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() => meta.permissions().mode() & 0o7777,
        Ok(_) => NEW_FILE_MODE,
        Err(err) if err.kind() == ErrorKind::NotFound => NEW_FILE_MODE,
        Err(err) => return Err(SnapshotError::io(&path)(err)),
    };
    write_file_atomic_unconfined(&path, bytes, mode)?;
    // Make the rename itself durable.
    fs::File::open(parent)
        .and_then(|dir| dir.sync_all())
        .map_err(SnapshotError::io(parent))
}

/// A temp file beside `path` holding `bytes` with `mode`, fsync'd, not yet renamed.
fn staged_temp(
    path: &Path,
    bytes: &[u8],
    mode: u32,
) -> Result<tempfile::NamedTempFile, SnapshotError> {
    let parent = path.parent().expect("an absolute target has a parent");
    let mut temp = tempfile::Builder::new()
        .prefix(".trellis-tmp")
        .tempfile_in(parent)
        .map_err(SnapshotError::io(parent))?;
    temp.write_all(bytes)
        .and_then(|()| {
            temp.as_file()
                .set_permissions(fs::Permissions::from_mode(mode))
        })
        .and_then(|()| temp.as_file().sync_all())
        .map_err(SnapshotError::io(temp.path()))?;
    Ok(temp)
}

/// Temp file in the same directory, write, fsync, chmod, rename over `path`.
/// The caller has confined `path` and created its parent.
pub(crate) fn write_file_atomic_unconfined(
    path: &Path,
    bytes: &[u8],
    mode: u32,
) -> Result<(), SnapshotError> {
    let temp = staged_temp(path, bytes, mode)?;
    temp.persist(path)
        .map_err(|err| SnapshotError::io(path)(err.error))?;
    Ok(())
}

/// Removes the file, symlink or directory tree at `path`, if there is one
/// (a symlink itself, never what it points to).
pub(crate) fn remove_if_present(path: &Path) -> std::io::Result<()> {
    let removed = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(err) => Err(err),
    };
    match removed {
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn refuses_a_symlink_inside_the_root() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), root.path().join("escape")).unwrap();
        let err = confine(root.path(), "escape/file").unwrap_err();
        assert!(
            matches!(&err, SnapshotError::SymlinkInPath { symlink, .. } if symlink.ends_with("escape")),
            "{err:?}"
        );
        assert!(write_atomic(root.path(), "escape/file", b"x").is_err());
        assert!(!outside.path().join("file").exists());
    }

    #[test]
    fn confine_accepts_paths_that_do_not_exist_yet() {
        let root = tempfile::tempdir().unwrap();
        let path = confine(root.path(), "a/b/c.rs").unwrap();
        assert_eq!(path, root.path().join("a/b/c.rs"));
    }

    #[test]
    fn write_atomic_creates_parents_and_preserves_the_executable_bit() {
        let root = tempfile::tempdir().unwrap();
        write_atomic(root.path(), "scripts/run.sh", b"#!/bin/sh\n").unwrap();
        let path = root.path().join("scripts/run.sh");
        assert_eq!(fs::read(&path).unwrap(), b"#!/bin/sh\n");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );

        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        write_atomic(root.path(), "scripts/run.sh", b"#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"#!/bin/sh\necho hi\n");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o755
        );
        // No temp file is left behind.
        assert_eq!(
            fs::read_dir(root.path().join("scripts")).unwrap().count(),
            1
        );
    }

    #[test]
    fn write_atomic_replaces_a_final_symlink_without_following_it() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        symlink(&victim, root.path().join("link")).unwrap();
        write_atomic(root.path(), "link", b"new").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        assert!(
            fs::symlink_metadata(root.path().join("link"))
                .unwrap()
                .is_file()
        );
    }

    #[test]
    fn an_edit_to_an_ignored_file_is_refused() {
        let root = tempfile::tempdir().unwrap();
        fs::write(root.path().join(".gitignore"), "/tests/local.rs\ndata/\n").unwrap();
        fs::create_dir_all(root.path().join("tests")).unwrap();
        fs::write(root.path().join("tests/local.rs"), "kept").unwrap();
        for rel in [
            "tests/local.rs",
            "data/new.csv",
            "target/x",
            ".trellis/index",
        ] {
            let err = write_atomic(root.path(), rel, b"edited").unwrap_err();
            assert!(
                matches!(&err, SnapshotError::ReadOnlyContext { path } if path == rel),
                "{rel}: {err:?}"
            );
        }
        assert_eq!(
            fs::read(root.path().join("tests/local.rs")).unwrap(),
            b"kept"
        );
        assert!(!root.path().join("data").exists());
        // The snapshot's own files stay writable.
        write_atomic(root.path(), "tests/other.rs", b"ok").unwrap();
    }
}
