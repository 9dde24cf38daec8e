//! Snapshots of the user's view of a workspace.
//!
//! A [`Snapshot`] is the content of a workspace as the user sees it: the
//! files on disk that the ignore rules keep, overlaid with unsaved editor
//! buffers ([`Overlay`]). Each file is recorded by kind and content address;
//! the [`state_root`] is one digest over all of them, so "is this the tree I
//! measured?" is a single comparison.
//!
//! - [`scan`]: builds snapshots from disk, reusing a git-index-like stat cache.
//! - `tree`, `watch`: watched mode for long-lived processes, where inotify
//!   events say which directories a re-root must list again. It is opt-in:
//!   inotify misses writes through a shared `mmap` and network file systems.
//! - [`store`]: where snapshot content can be read back, verified.
//! - [`fsutil`]: path confinement and atomic writes for anything that writes.
//! - [`materialize`](mod@materialize): eager copies of a snapshot into branch workspaces.
//! - [`diff`](mod@diff): per-file text edits between two snapshots.
//!
//! # Architecture invariant
//!
//! A snapshot does not depend on how it was taken
//! (`tree::tests::watched_reroots_equal_full_scans`,
//! `watched_reroot_equals_a_full_scan_after_each_mutation`). Ignored files are
//! context: measured, another root when changed, never edited
//! (`snapshotter::tests::a_changed_ignored_file_is_another_root_and_stays_context`,
//! `a_bounded_walk_refuses_a_huge_ignored_directory_naming_it`,
//! `fsutil::tests::an_edit_to_an_ignored_file_is_refused`;
//! `ignored_files::a_repair_that_fails_an_ignored_test_is_never_promoted`,
//! `an_ignored_test_chooses_the_repair_and_is_never_written`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::digest::{CanonicalHasher, Digest};

pub mod diff;
pub mod fsutil;
pub mod materialize;
pub mod scan;
mod snapshotter;
pub mod store;
mod tree;
mod watch;

pub use crate::workspace_path::WorkspacePath;
pub use diff::diff;
pub use fsutil::{confine, write_atomic};
pub use materialize::{CopyLimits, MaterializeReport, materialize, rewrite};
pub use snapshotter::{ReRoot, Snapshotter};
pub use store::{BlobStore, ContentSource, DirSource};
pub use watch::RescanReason;

/// The domain tag of [`state_root`]; a change of encoding is a change of tag.
pub const STATE_ROOT_DOMAIN: &str = "trellis.state-root.v1";

/// Whether the withheld path `withheld` ([`Snapshotter::withhold`]) is
/// `rel` or a directory above it.
pub fn withholds(withheld: &str, rel: &str) -> bool {
    rel.strip_prefix(withheld)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The content of a workspace view at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// [`state_root`] of `entries`.
    pub root: Digest,
    /// Workspace-relative, `/`-separated paths to what is there.
    pub entries: BTreeMap<String, Entry>,
}

impl Snapshot {
    /// A snapshot of `entries`, with its root computed.
    pub fn from_entries(entries: BTreeMap<String, Entry>) -> Snapshot {
        Snapshot {
            root: state_root(&entries),
            entries,
        }
    }

    /// Total bytes of content (file sizes plus symlink target lengths).
    pub fn total_bytes(&self) -> u64 {
        self.entries.values().map(|entry| entry.size).sum()
    }

    /// The entries a repair may edit: every entry but read-only context.
    pub fn editable(&self) -> impl Iterator<Item = (&String, &Entry)> {
        self.entries
            .iter()
            .filter(|(_, entry)| !entry.kind.is_context())
    }
}

/// One path in a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    /// [`crate::digest::blob_digest`] of the content: a file's bytes, or a
    /// symlink's target bytes.
    pub blob: Digest,
    /// Length of that content in bytes.
    pub size: u64,
}

/// What a path is. Directories are implied by the paths under them.
///
/// The `Context*` kinds are *read-only context*: files the ignore rules hide
/// (an ignored test, a local data file, an untracked `Cargo.lock`) that are
/// present on disk, so the user's own `cargo build`/`cargo test` reads them.
/// They count in the state root (a changed ignored file is another root),
/// are copied into every slot so verification sees what the user's tools
/// see, and are never edited ([`fsutil::write_atomic`] refuses them), never
/// in a [`diff`] and so never promoted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    File {
        executable: bool,
    },
    /// Recorded with its target as content, never followed.
    Symlink,
    /// A file hidden by the ignore rules: read-only context.
    ContextFile {
        executable: bool,
    },
    /// A symlink hidden by the ignore rules: read-only context.
    ContextSymlink,
}

impl EntryKind {
    /// The tag this kind contributes to the state root. Stable forever.
    fn root_tag(self) -> &'static str {
        match self {
            EntryKind::File { executable: false } => "file",
            EntryKind::File { executable: true } => "exec",
            EntryKind::Symlink => "symlink",
            EntryKind::ContextFile { executable: false } => "context-file",
            EntryKind::ContextFile { executable: true } => "context-exec",
            EntryKind::ContextSymlink => "context-symlink",
        }
    }

    /// Whether this is read-only context (hidden by the ignore rules).
    pub fn is_context(self) -> bool {
        matches!(
            self,
            EntryKind::ContextFile { .. } | EntryKind::ContextSymlink
        )
    }

    /// Whether the content is a symlink's target rather than file bytes.
    pub fn is_symlink(self) -> bool {
        matches!(self, EntryKind::Symlink | EntryKind::ContextSymlink)
    }

    /// Whether the file is executable (never for a symlink).
    pub fn is_executable(self) -> bool {
        matches!(
            self,
            EntryKind::File { executable: true } | EntryKind::ContextFile { executable: true }
        )
    }

    /// The same kind of content, as context (`true`) or as an editable
    /// snapshot file (`false`).
    pub(crate) fn in_context(self, context: bool) -> EntryKind {
        match (self.is_symlink(), context) {
            (true, false) => EntryKind::Symlink,
            (true, true) => EntryKind::ContextSymlink,
            (false, false) => EntryKind::File {
                executable: self.is_executable(),
            },
            (false, true) => EntryKind::ContextFile {
                executable: self.is_executable(),
            },
        }
    }
}

/// The state root of a set of entries: a [`CanonicalHasher`] digest over the
/// entry count and then each (path, kind tag, blob) in path order.
///
/// Every field is length-prefixed by the hasher, so no two different entry
/// sets share an encoding.
pub fn state_root(entries: &BTreeMap<String, Entry>) -> Digest {
    let mut hasher = CanonicalHasher::new(STATE_ROOT_DOMAIN);
    hasher.u64(entries.len() as u64);
    for (path, entry) in entries {
        hasher
            .str(path)
            .str(entry.kind.root_tag())
            .digest(&entry.blob);
    }
    hasher.finish()
}

/// Refuses entry sets that no directory tree can hold: a path that is both
/// an entry and the parent directory of another entry.
pub(crate) fn check_shape(entries: &BTreeMap<String, Entry>) -> Result<(), SnapshotError> {
    // Whether a path is refused depends only on its directory, and paths in
    // one directory mostly sort together: check each directory once per run.
    let mut checked_dir = "";
    for path in entries.keys() {
        let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
        if dir == checked_dir {
            continue;
        }
        checked_dir = dir;
        for (slash, _) in path.match_indices('/') {
            if entries.contains_key(&path[..slash]) {
                return Err(SnapshotError::InvalidPath {
                    path: path.clone(),
                    reason: "its parent is itself a file or symlink in the snapshot",
                });
            }
        }
    }
    Ok(())
}

/// Unsaved editor buffers, by workspace-relative path. They take the place
/// of the file on disk; a path only here is a new file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overlay {
    pub buffers: BTreeMap<String, Vec<u8>>,
}

impl Overlay {
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.buffers.get(path).map(Vec::as_slice)
    }

    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
    }
}

/// The user's current view: files on disk overlaid with unsaved buffers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// Workspace-relative path to the buffer's full text. The paths are
    /// checked when the front end builds them, so a view cannot name a file
    /// outside the workspace.
    pub overlay: BTreeMap<WorkspacePath, String>,
}

impl From<&View> for Overlay {
    fn from(view: &View) -> Overlay {
        Overlay {
            buffers: view
                .overlay
                .iter()
                .map(|(path, text)| (path.to_string(), text.clone().into_bytes()))
                .collect(),
        }
    }
}

/// Everything that can go wrong taking, storing, copying or diffing a
/// snapshot. Every message names the path it is about.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: walking the workspace failed: {message}", path.display())]
    Walk { path: PathBuf, message: String },
    #[error("{}: file name is not valid UTF-8; Trellis refuses to guess its name", path.display())]
    NonUtf8Path { path: PathBuf },
    #[error("`{path}`: not a safe workspace-relative path: {reason}")]
    InvalidPath { path: String, reason: &'static str },
    #[error(transparent)]
    State(#[from] crate::statedir::StateError),
    #[error("`{path}`: refusing to go through the symlink at {}", symlink.display())]
    SymlinkInPath { path: String, symlink: PathBuf },
    #[error("`{path}`: content changed: expected blob {expected}, found {found}")]
    ContentMismatch {
        path: String,
        expected: Digest,
        found: Digest,
    },
    #[error("`{path}`: content is not valid UTF-8, so it cannot be diffed as text")]
    NonUtf8Content { path: String },
    #[error("`{path}`: {reason}")]
    UnrepresentableChange { path: String, reason: &'static str },
    #[error("{}: stored blob is corrupt (expected {expected}, found {found})", path.display())]
    CorruptBlob {
        path: PathBuf,
        expected: Digest,
        found: Digest,
    },
    #[error("{}: blob {digest} is not in the store", path.display())]
    MissingBlob { path: PathBuf, digest: Digest },
    #[error(
        "copy refused before anything was written: {files} files / {bytes} bytes exceed the \
         reservation of {max_files} files / {max_bytes} bytes"
    )]
    OverBudget {
        files: u64,
        bytes: u64,
        max_files: u64,
        max_bytes: u64,
    },
    #[error(
        "`{path}`: hidden by the workspace's ignore rules (or in a directory snapshots \
         exclude), so it is read-only context: a repair edits only the snapshot's files"
    )]
    ReadOnlyContext { path: String },
    #[error(
        "the workspace holds at least {files} files / {bytes} bytes to snapshot, over the \
         [exploration] limits of {max_files} files / {max_bytes} bytes; ignored files count, \
         since builds and tests may read them (most files under: {largest}). Raise \
         `workspace_files`/`workspace_bytes` in trellis.toml, or put a CACHEDIR.TAG in a \
         directory no build or test reads"
    )]
    TooLarge {
        files: u64,
        bytes: u64,
        max_files: u64,
        max_bytes: u64,
        largest: String,
    },
    #[error("copy's content root {found} differs from the snapshot root {expected}")]
    RootMismatch { expected: Digest, found: Digest },
}

impl SnapshotError {
    /// An I/O error at `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SnapshotError {
        let path = path.into();
        move |source| SnapshotError::Io { path, source }
    }
}

impl From<crate::workspace_path::InvalidPath> for SnapshotError {
    fn from(refused: crate::workspace_path::InvalidPath) -> SnapshotError {
        SnapshotError::InvalidPath {
            path: refused.path,
            reason: refused.reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_withheld_path_covers_itself_and_what_is_below_it_only() {
        assert!(withholds("oracle", "oracle"));
        assert!(withholds("oracle", "oracle/test_hidden.py"));
        assert!(withholds("tests/hidden.rs", "tests/hidden.rs"));
        assert!(!withholds("oracle", "oracles/x"));
        assert!(!withholds("oracle", "src/oracle"));
        assert!(!withholds("tests/hidden.rs", "tests/hidden.rs.bak"));
    }
    use crate::digest::blob_digest;

    fn file(content: &[u8], executable: bool) -> Entry {
        Entry {
            kind: EntryKind::File { executable },
            blob: blob_digest(content),
            size: content.len() as u64,
        }
    }

    fn tiny_entries() -> BTreeMap<String, Entry> {
        BTreeMap::from([
            ("Cargo.toml".to_owned(), file(b"[package]\n", false)),
            ("run.sh".to_owned(), file(b"#!/bin/sh\n", true)),
            (
                "src/lib.rs".to_owned(),
                file(b"pub fn answer() -> u32 { 42 }\n", false),
            ),
            (
                "link".to_owned(),
                Entry {
                    kind: EntryKind::Symlink,
                    blob: blob_digest(b"src/lib.rs"),
                    size: 10,
                },
            ),
        ])
    }

    #[test]
    fn golden_state_root_is_stable() {
        // Guards the encoding: an accidental change would orphan every
        // recorded root in every ledger. Change the domain tag instead.
        assert_eq!(
            state_root(&tiny_entries()).to_hex(),
            "c726e82353e3a4c198ef430d969ac2d3a29e8f86dc9cbba47f37c20bd47d0938"
        );
    }

    #[test]
    fn empty_state_root_is_stable() {
        assert_eq!(
            state_root(&BTreeMap::new()),
            CanonicalHasher::new(STATE_ROOT_DOMAIN).u64(0).finish()
        );
    }

    #[test]
    fn root_depends_on_kind_path_and_content() {
        let base = state_root(&tiny_entries());

        let mut exec_flipped = tiny_entries();
        exec_flipped.get_mut("run.sh").unwrap().kind = EntryKind::File { executable: false };
        assert_ne!(state_root(&exec_flipped), base);

        let mut renamed = tiny_entries();
        let entry = renamed.remove("Cargo.toml").unwrap();
        renamed.insert("Cargo.tom".to_owned(), entry);
        assert_ne!(state_root(&renamed), base);

        let mut edited = tiny_entries();
        *edited.get_mut("src/lib.rs").unwrap() = file(b"pub fn answer() -> u32 { 41 }\n", false);
        assert_ne!(state_root(&edited), base);
    }

    #[test]
    fn shape_check_finds_a_file_parent_past_siblings_that_sort_between() {
        let entry = file(b"x", false);
        // `a.rs` and `a-b` sort between `a` and `a/b`, in the same directory
        // as `a`; `d/x` shares a directory with the refused `d/x/y`'s parent.
        for (paths, refused) in [
            (&["a", "a-b", "a.rs", "a/b"][..], Some("a/b")),
            (&["d/x", "d/x.rs", "d/x/y"][..], Some("d/x/y")),
            (&["a.rs", "a/b", "a/c/d", "b"][..], None),
        ] {
            let entries = paths.iter().map(|p| (p.to_string(), entry)).collect();
            match (check_shape(&entries), refused) {
                (Ok(()), None) => {}
                (Err(SnapshotError::InvalidPath { path, .. }), Some(refused)) => {
                    assert_eq!(path, refused)
                }
                (got, want) => panic!("{paths:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn overlay_from_view_keeps_every_buffer() {
        let view = View {
            overlay: BTreeMap::from([(
                WorkspacePath::new("src/new.rs").unwrap(),
                "fn x() {}".to_owned(),
            )]),
        };
        let overlay = Overlay::from(&view);
        assert_eq!(overlay.get("src/new.rs"), Some(&b"fn x() {}"[..]));
        assert_eq!(overlay.buffers.len(), 1);
    }
}
