//! Where snapshot content is read back from, always verified.
//!
//! A snapshot records content addresses, not content. A [`ContentSource`]
//! produces the bytes for an entry and checks that they still hash to the
//! recorded blob, so a file edited after the snapshot was taken is caught
//! rather than copied or diffed as if it were the snapshotted content.

use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use super::fsutil::confine;
use super::{Entry, Overlay, SnapshotError};
use crate::digest::{Digest, blob_digest};
use crate::statedir::{Dir, Kind};

/// The store's directory inside `.trellis/`.
pub const OBJECTS: &str = "objects";

/// Produces the content of snapshot entries.
/// `Sync` so a copy can read on several threads at once.
pub trait ContentSource: Sync {
    /// The bytes of `entry` at `path` (a symlink's target for a symlink),
    /// verified to hash to `entry.blob`.
    fn read(&self, path: &str, entry: &Entry) -> Result<Vec<u8>, SnapshotError>;
}

/// Content from a workspace directory seen through unsaved buffers: the
/// source a snapshot taken by [`super::Snapshotter`] was computed from.
#[derive(Clone, Debug)]
pub struct DirSource {
    pub root: PathBuf,
    pub overlay: Overlay,
}

impl DirSource {
    pub fn new(root: impl Into<PathBuf>, overlay: Overlay) -> DirSource {
        DirSource {
            root: root.into(),
            overlay,
        }
    }
}

impl ContentSource for DirSource {
    fn read(&self, path: &str, entry: &Entry) -> Result<Vec<u8>, SnapshotError> {
        let bytes = match self.overlay.get(path) {
            Some(buffer) => buffer.to_vec(),
            None => {
                let full = confine(&self.root, path)?;
                if entry.kind.is_symlink() {
                    fs::read_link(&full)
                        .map(|target| target.into_os_string().into_vec())
                        .map_err(SnapshotError::io(full))?
                } else {
                    // `confine` vouches for the directories; the hash check
                    // below vouches for the bytes even if the leaf was swapped.
                    fs::read(&full).map_err(SnapshotError::io(full))?
                }
            }
        };
        verify(path, entry.blob, bytes)
    }
}

/// `bytes` if they hash to `expected`, else an error naming `path`.
fn verify(path: &str, expected: Digest, bytes: Vec<u8>) -> Result<Vec<u8>, SnapshotError> {
    let found = blob_digest(&bytes);
    if found == expected {
        Ok(bytes)
    } else {
        Err(SnapshotError::ContentMismatch {
            path: path.to_owned(),
            expected,
            found,
        })
    }
}

/// A content-addressed blob store: blob `abcd…` lives at `dir/ab/cd…`.
///
/// Writes are atomic and idempotent; reads are verified, so a damaged object
/// is reported, never returned. The store and its fan-out directories are
/// opened through [`crate::statedir::Dir`], so a symlink in place of
/// `objects/` or of a fan-out directory is refused, never written through.
#[derive(Debug)]
pub struct BlobStore {
    dir: Dir,
}

impl BlobStore {
    /// Opens (creating if needed) the store rooted at `dir`, e.g.
    /// `<workspace>/.trellis/objects`. Its parent must exist, and neither it
    /// nor `dir` may be a link (so a `.trellis` swapped for a link mid-run
    /// is refused here too).
    pub fn open(dir: impl AsRef<Path>) -> Result<BlobStore, SnapshotError> {
        let dir = dir.as_ref();
        let name = dir.file_name().and_then(|n| n.to_str());
        let (Some(parent), Some(name)) = (dir.parent(), name) else {
            return Ok(BlobStore {
                dir: Dir::open_trusted(dir)?,
            });
        };
        Ok(BlobStore {
            dir: Dir::open_last(parent, false)?.child(name, true)?,
        })
    }

    /// The store in `objects/` of the checked state directory `state`.
    pub fn in_state(state: &Dir) -> Result<BlobStore, SnapshotError> {
        Ok(BlobStore {
            dir: state.child(OBJECTS, true)?,
        })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Where blob `digest` is (or would be) stored.
    pub fn object_path(&self, digest: &Digest) -> PathBuf {
        let hex = digest.to_hex();
        self.dir.path().join(&hex[..2]).join(&hex[2..])
    }

    /// Stores `bytes` and returns their address. Storing a blob that is
    /// already present does nothing.
    pub fn put(&self, bytes: &[u8]) -> Result<Digest, SnapshotError> {
        let digest = blob_digest(bytes);
        let hex = digest.to_hex();
        let fan_out = self.dir.child(&hex[..2], true)?;
        if matches!(fan_out.kind(&hex[2..])?, Some(Kind::File { .. })) {
            return Ok(digest);
        }
        fan_out.write_atomic(&hex[2..], bytes, 0o444)?;
        Ok(digest)
    }

    /// The bytes of blob `digest`, verified.
    pub fn get(&self, digest: &Digest) -> Result<Vec<u8>, SnapshotError> {
        let path = self.object_path(digest);
        let hex = digest.to_hex();
        let missing = || SnapshotError::MissingBlob {
            path: path.clone(),
            digest: *digest,
        };
        let bytes = match self.dir.child(&hex[..2], false) {
            Ok(fan_out) => fan_out.read(&hex[2..])?.ok_or_else(missing)?,
            Err(e) if e.is_not_found() => return Err(missing()),
            Err(e) => return Err(e.into()),
        };
        let found = blob_digest(&bytes);
        if found != *digest {
            return Err(SnapshotError::CorruptBlob {
                path,
                expected: *digest,
                found,
            });
        }
        Ok(bytes)
    }
}

/// A store can stand in for the workspace a snapshot was taken from, once
/// its blobs have been put there.
impl ContentSource for BlobStore {
    fn read(&self, path: &str, entry: &Entry) -> Result<Vec<u8>, SnapshotError> {
        match self.get(&entry.blob) {
            Err(SnapshotError::MissingBlob { digest, .. }) => Err(SnapshotError::MissingBlob {
                path: PathBuf::from(path),
                digest,
            }),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::EntryKind;
    use std::collections::BTreeMap;
    use std::os::unix::fs::symlink;

    fn file_entry(bytes: &[u8]) -> Entry {
        Entry {
            kind: EntryKind::File { executable: false },
            blob: blob_digest(bytes),
            size: bytes.len() as u64,
        }
    }

    #[test]
    fn dir_source_prefers_the_overlay() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.rs"), b"disk").unwrap();
        let overlay = Overlay {
            buffers: BTreeMap::from([("a.rs".to_owned(), b"buffer".to_vec())]),
        };
        let source = DirSource::new(dir.path(), overlay);
        assert_eq!(
            source.read("a.rs", &file_entry(b"buffer")).unwrap(),
            b"buffer"
        );
        let plain = DirSource::new(dir.path(), Overlay::default());
        assert_eq!(plain.read("a.rs", &file_entry(b"disk")).unwrap(), b"disk");
    }

    #[test]
    fn dir_source_reads_symlink_targets_without_following() {
        let dir = tempfile::tempdir().unwrap();
        symlink("nowhere/at/all", dir.path().join("link")).unwrap();
        let entry = Entry {
            kind: EntryKind::Symlink,
            blob: blob_digest(b"nowhere/at/all"),
            size: 14,
        };
        let source = DirSource::new(dir.path(), Overlay::default());
        assert_eq!(source.read("link", &entry).unwrap(), b"nowhere/at/all");
    }

    #[test]
    fn dir_source_detects_content_changed_since_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.rs"), b"edited").unwrap();
        let source = DirSource::new(dir.path(), Overlay::default());
        let err = source.read("a.rs", &file_entry(b"original")).unwrap_err();
        assert!(
            matches!(&err, SnapshotError::ContentMismatch { path, .. } if path == "a.rs"),
            "{err:?}"
        );
    }

    #[test]
    fn blob_store_round_trips_and_lays_out_objects_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path().join("objects")).unwrap();
        let digest = store.put(b"hello").unwrap();
        assert_eq!(digest, blob_digest(b"hello"));
        let hex = digest.to_hex();
        assert!(
            dir.path()
                .join("objects")
                .join(&hex[..2])
                .join(&hex[2..])
                .is_file()
        );
        assert_eq!(store.get(&digest).unwrap(), b"hello");
        // Idempotent.
        assert_eq!(store.put(b"hello").unwrap(), digest);
    }

    #[test]
    fn blob_store_reports_missing_and_corrupt_objects() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path()).unwrap();
        let absent = blob_digest(b"absent");
        assert!(matches!(
            store.get(&absent),
            Err(SnapshotError::MissingBlob { .. })
        ));

        let digest = store.put(b"precious").unwrap();
        let path = store.object_path(&digest);
        fs::remove_file(&path).unwrap();
        fs::write(&path, b"tampered").unwrap();
        let err = store.get(&digest).unwrap_err();
        assert!(matches!(err, SnapshotError::CorruptBlob { .. }), "{err:?}");
        assert!(err.to_string().contains(&digest.to_hex()[2..]));
    }

    #[test]
    fn blob_store_refuses_a_linked_store_or_parent() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".trellis")).unwrap();
        symlink(elsewhere.path(), dir.path().join(".trellis/objects")).unwrap();
        assert!(BlobStore::open(dir.path().join(".trellis/objects")).is_err());
        symlink(elsewhere.path(), dir.path().join("linked-state")).unwrap();
        assert!(BlobStore::open(dir.path().join("linked-state/objects")).is_err());
        assert_eq!(fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn blob_store_serves_as_a_content_source() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path()).unwrap();
        store.put(b"kept").unwrap();
        assert_eq!(store.read("a.rs", &file_entry(b"kept")).unwrap(), b"kept");
        let err = store.read("b.rs", &file_entry(b"never put")).unwrap_err();
        assert!(err.to_string().contains("b.rs"), "{err}");
    }
}
