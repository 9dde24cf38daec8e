//! Taking snapshots of one workspace: the [`Snapshotter`] walks it
//! (`snapshot/scan.rs`) and keeps the stat cache between re-roots,
//! persisted like git's index.
//!
//! Two modes share that cache. The default lists every directory and stats
//! every file on each re-root: right for the CLI, a fresh process each run.
//! [`Snapshotter::watch`] opts a long-lived process (the language server)
//! into watched mode (`snapshot/tree.rs`), where a re-root lists again only
//! the directories inotify reported changes in.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::fsutil::check_rel_path;
use super::scan::{Bound, CachedEntry, FileStat, StatCache, root_job, visible_to_walk, walk};
use super::tree::{DirId, WatchedTree};
use super::watch::{DirWatches, RescanReason};
use super::{Entry, EntryKind, Overlay, Snapshot, SnapshotError};
use crate::digest::{Digest, blob_digest};
use crate::statedir::{Dir, StateError};

/// First bytes of a persisted cache; bump the digit to change the format.
const CACHE_MAGIC: &[u8; 8] = b"TRLSIDX2";

/// Takes snapshots of one workspace, remembering file stats between them.
pub struct Snapshotter {
    root: PathBuf,
    cache_file: Option<PathBuf>,
    /// The most files and bytes a snapshot may hold.
    bound: Bound,
    /// Whether re-roots use directory watches ([`Snapshotter::watch`]).
    watched: bool,
    /// When watching failed, how long to wait before trying again.
    backoff: WatchBackoff,
    state: State,
    last_reroot: ReRoot,
    /// Workspace-relative paths left out of every snapshot with everything
    /// below them ([`Snapshotter::withhold`]).
    withheld: Vec<String>,
}

/// Re-roots to wait before trying to watch again after watching failed
/// (watches ran out, a directory reachable twice): 1, 2, 4, ... up to 64.
/// Each attempt costs a watch per directory before it fails, more than the
/// stat cache it falls back to, so a workspace that cannot be watched
/// mostly uses the stat cache without giving up for good.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct WatchBackoff {
    wait: u32,
    remaining: u32,
}

impl WatchBackoff {
    const MAX_WAIT: u32 = 64;

    /// Whether this re-root may try to watch; counts down otherwise.
    fn ready(&mut self) -> bool {
        if self.remaining == 0 {
            return true;
        }
        self.remaining -= 1;
        false
    }

    fn failed(&mut self) {
        self.wait = (self.wait * 2).clamp(1, Self::MAX_WAIT);
        self.remaining = self.wait;
    }

    fn succeeded(&mut self) {
        *self = WatchBackoff::default();
    }
}

/// What the snapshotter remembers from its last scan.
enum State {
    /// Nothing yet: the persisted cache is loaded at the first re-root (so
    /// `new` cannot fail).
    Unloaded,
    /// The stats of the last full scan.
    Cached(StatCache),
    /// Watched mode: the last scan per directory, kept current by inotify.
    Watched(WatchedTree),
}

/// How the last re-root learned the state of the disk. Tests, benchmarks
/// and logs use it; the snapshot is the same whichever way was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReRoot {
    /// No re-root yet.
    NotYet,
    /// Every directory listed and every file stat-ed: the stat-cache mode,
    /// or the first scan in watched mode.
    FullScan,
    /// Watched mode listed everything again, for this reason.
    Rescan(RescanReason),
    /// Watched mode listed again only the `relisted` directories that had
    /// events, and walked `walked` new ones.
    Incremental { relisted: usize, walked: usize },
}

impl Snapshotter {
    /// A snapshotter for the workspace at `workspace_root`. With
    /// `cache_file` (e.g. `.trellis/index`), the stat cache is loaded from
    /// and saved to that file, so it survives the process.
    pub fn new(workspace_root: &Path, cache_file: Option<PathBuf>) -> Snapshotter {
        Snapshotter {
            root: workspace_root.to_path_buf(),
            cache_file,
            bound: Bound::UNBOUNDED,
            watched: false,
            backoff: WatchBackoff::default(),
            state: State::Unloaded,
            last_reroot: ReRoot::NotYet,
            withheld: Vec::new(),
        }
    }

    /// Leaves `rel` (a file or a directory, workspace-relative) and
    /// everything below it out of every snapshot, whatever the ignore rules
    /// say and whatever a buffer holds: an `external-oracle` overlay, which
    /// no slot, diff or promotion may carry. The walk still reads it, so the
    /// stat cache and watches stay those of the whole tree.
    pub fn withhold(&mut self, rel: &str) {
        self.withheld.push(rel.to_owned());
    }

    /// Switches to watched mode, for a long-lived process: from the next
    /// re-root on, directories are watched with inotify and only those with
    /// events are listed again; the snapshot is the one a full scan would
    /// give. Anything the events cannot describe directory by directory
    /// (a queue overflow, a changed ignore file, a directory that cannot be
    /// watched) costs one full scan, and where inotify is unavailable every
    /// re-root uses the stat cache. The persisted cache is kept up to date
    /// in both modes.
    ///
    /// Opt-in because inotify does not see writes through a shared `mmap`,
    /// changes made by other machines on network file systems, or file
    /// systems mounted inside the workspace later.
    pub fn watch(&mut self) {
        self.watched = true;
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Refuses snapshots of more than `max_files` entries or `max_bytes`
    /// bytes, ignored files included ([`SnapshotError::TooLarge`]); a full
    /// walk stops at the bound before reading further content.
    pub fn bound(&mut self, max_files: u64, max_bytes: u64) {
        self.bound = Bound {
            max_files,
            max_bytes,
        };
    }

    /// How the last re-root found the disk's state.
    pub fn last_reroot(&self) -> ReRoot {
        self.last_reroot
    }

    /// Snapshots the workspace as seen through `overlay`.
    ///
    /// Overlay paths that the ignore rules would leave out (or that lie in
    /// `target/`, `.trellis/` or `.git`) are not part of the view and are
    /// skipped; an overlay path that is not a safe relative path, or that
    /// collides with a directory, is an error.
    pub fn snapshot(&mut self, overlay: &Overlay) -> Result<Snapshot, SnapshotError> {
        let changed = self.refresh_disk_state(now_ns())?;
        let files = self.state.files();
        if changed {
            // Only a new file or a re-read one changes the cache: every
            // trusted entry is kept as it was.
            self.save_cache(&files)?;
        }
        let withheld = |path: &str| self.withheld.iter().any(|w| super::withholds(w, path));
        let mut entries: BTreeMap<String, Entry> = files
            .into_iter()
            .filter(|(path, _)| !withheld(path))
            .map(|(path, cached)| (path.clone(), cached.entry))
            .collect();
        let mut overlay = std::borrow::Cow::Borrowed(overlay);
        if overlay.buffers.keys().any(|path| withheld(path)) {
            overlay.to_mut().buffers.retain(|path, _| !withheld(path));
        }
        apply_overlay(&self.root, &mut entries, &overlay)?;
        super::check_shape(&entries)?;
        // Watched re-roots list only what changed, so the total is checked
        // here too, not only by the walk.
        self.bound.check(
            entries.len() as u64,
            entries.values().map(|entry| entry.size).sum(),
            || {
                entries
                    .iter()
                    .map(|(path, entry)| (path.as_str(), entry.size))
            },
        )?;
        Ok(Snapshot::from_entries(entries))
    }

    /// Brings the remembered state up to date with the disk, the cheapest
    /// way the mode allows. Returns whether any file is new or was re-read
    /// (and so whether the persisted cache is out of date).
    fn refresh_disk_state(&mut self, now_ns: i64) -> Result<bool, SnapshotError> {
        let previous = match std::mem::replace(&mut self.state, State::Unloaded) {
            State::Watched(mut tree) => match tree.refresh(now_ns) {
                Ok(refreshed) => {
                    self.last_reroot = ReRoot::Incremental {
                        relisted: refreshed.relisted,
                        walked: refreshed.walked,
                    };
                    self.state = State::Watched(tree);
                    return Ok(refreshed.changed);
                }
                Err(reason) => {
                    tracing::debug!(?reason, "watched re-root falls back to a full scan");
                    self.last_reroot = ReRoot::Rescan(reason);
                    tree.into_stat_cache()
                }
            },
            State::Cached(cache) => {
                self.last_reroot = if self.watched {
                    ReRoot::Rescan(RescanReason::WatchUnavailable)
                } else {
                    ReRoot::FullScan
                };
                cache
            }
            State::Unloaded => {
                self.last_reroot = ReRoot::FullScan;
                self.load_cache()
            }
        };

        // Said once, not on every re-root while it lasts.
        let newly_unwatched = self.last_reroot != ReRoot::Rescan(RescanReason::WatchUnavailable);
        let watches = if self.watched && self.backoff.ready() {
            let opened = DirWatches::new()
                .inspect_err(|err| {
                    if newly_unwatched {
                        tracing::warn!(%err, "cannot watch the workspace; re-roots stat every file");
                    }
                })
                .ok();
            if opened.is_none() {
                self.backoff.failed();
            }
            opened
        } else {
            None
        };
        let root_id = DirId::of(&self.root);
        let walked = walk(
            root_job(&self.root),
            &previous,
            watches.as_ref(),
            now_ns,
            self.bound,
        )?;
        let changed = walked.hashed > 0 || walked.file_count() != previous.len();
        self.state = match watches {
            Some(watches) => {
                let tree = WatchedTree::new(&self.root, root_id, watches, walked.dirs);
                match tree.unwatched_reason() {
                    None => {
                        self.backoff.succeeded();
                        State::Watched(tree)
                    }
                    Some(why) => {
                        if newly_unwatched {
                            tracing::warn!(
                                "workspace not fully watched; re-roots stat every file: {why}"
                            );
                        }
                        self.backoff.failed();
                        State::Cached(tree.into_stat_cache())
                    }
                }
            }
            None => State::Cached(walked.into_stat_cache()),
        };
        Ok(changed)
    }

    fn load_cache(&self) -> StatCache {
        let Some(file) = &self.cache_file else {
            return StatCache::default();
        };
        let read =
            cache_dir(file, false).and_then(|(dir, name)| dir.read_at_most(name, MAX_CACHE_BYTES));
        match read {
            Ok(Some(bytes)) => decode_cache(&bytes).unwrap_or_else(|| {
                // The cache only saves work: a damaged one costs a cold scan.
                tracing::warn!(path = %file.display(), "ignoring unreadable stat cache");
                StatCache::default()
            }),
            Ok(None) => StatCache::default(),
            Err(err) => {
                if !err.is_not_found() {
                    tracing::warn!(path = %file.display(), %err, "ignoring unreadable stat cache");
                }
                StatCache::default()
            }
        }
    }

    fn save_cache(&self, files: &[(&String, &CachedEntry)]) -> Result<(), SnapshotError> {
        let Some(file) = &self.cache_file else {
            return Ok(());
        };
        let (dir, name) = cache_dir(file, true)?;
        Ok(dir.write_atomic(name, &encode_cache(files), 0o644)?)
    }
}

/// The directory holding the stat cache `file` (its last component checked
/// not to be a link, created when `create`) and the file's name in it: the
/// cache is read and written without following a link (`.trellis -> .git`
/// would otherwise overwrite git's own index).
fn cache_dir(file: &Path, create: bool) -> Result<(Dir, &str), StateError> {
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .expect("the stat cache is a named file");
    let parent = file.parent().expect("the stat cache has a directory");
    Ok((Dir::open_last(parent, create)?, name))
}

impl State {
    /// Every file the last scan kept, with its cached entry.
    fn files(&self) -> Vec<(&String, &CachedEntry)> {
        match self {
            State::Unloaded => Vec::new(),
            State::Cached(cache) => cache.iter().collect(),
            State::Watched(tree) => tree.files().collect(),
        }
    }
}

fn now_ns() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX)
}

/// Lays unsaved buffers over the disk entries.
fn apply_overlay(
    root: &Path,
    entries: &mut BTreeMap<String, Entry>,
    overlay: &Overlay,
) -> Result<(), SnapshotError> {
    for (path, bytes) in &overlay.buffers {
        check_rel_path(path)?;
        let executable = match entries.get(path).map(|entry| entry.kind) {
            // Context is what the user's tools read: the file on disk.
            Some(kind) if kind.is_context() => continue,
            Some(kind) => kind.is_executable(),
            // Neither walked nor on disk as a plain file: the buffer is in
            // the view only if the ignore rules would have let a file there.
            None if !visible_to_walk(root, path)? => continue,
            None => false,
        };
        entries.insert(
            path.clone(),
            Entry {
                kind: EntryKind::File { executable },
                blob: blob_digest(bytes),
                size: bytes.len() as u64,
            },
        );
    }
    Ok(())
}

/// Serializes the cache: magic, count, entries, then a digest of everything
/// before it so a torn or damaged file is detected.
fn encode_cache(files: &[(&String, &CachedEntry)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + files.len() * 128);
    out.extend_from_slice(CACHE_MAGIC);
    out.extend_from_slice(&(files.len() as u64).to_le_bytes());
    for (path, cached) in files {
        out.extend_from_slice(&(path.len() as u32).to_le_bytes());
        out.extend_from_slice(path.as_bytes());
        let stat = &cached.stat;
        out.extend_from_slice(&stat.size.to_le_bytes());
        out.extend_from_slice(&stat.mtime_ns.to_le_bytes());
        out.extend_from_slice(&stat.ctime_ns.to_le_bytes());
        out.extend_from_slice(&stat.inode.to_le_bytes());
        out.extend_from_slice(&stat.mode.to_le_bytes());
        out.push(match cached.entry.kind {
            EntryKind::File { executable: false } => 0,
            EntryKind::File { executable: true } => 1,
            EntryKind::Symlink => 2,
            EntryKind::ContextFile { executable: false } => 3,
            EntryKind::ContextFile { executable: true } => 4,
            EntryKind::ContextSymlink => 5,
        });
        out.extend_from_slice(&cached.entry.blob.0);
        out.extend_from_slice(&cached.entry.size.to_le_bytes());
        out.extend_from_slice(&cached.read_at_ns.to_le_bytes());
    }
    let check = blob_digest(&out);
    out.extend_from_slice(&check.0);
    out
}

/// The largest stat cache read: over 2 million entries, more than any
/// workspace's file limit; a larger file is ignored (a cold scan).
const MAX_CACHE_BYTES: u64 = 256 << 20;

/// The smallest encoded entry: an empty path and every fixed-width field.
const MIN_ENTRY_BYTES: usize = 4 + 8 + 8 + 8 + 8 + 4 + 1 + 32 + 8 + 8;

/// The inverse of [`encode_cache`]; `None` for anything malformed.
fn decode_cache(bytes: &[u8]) -> Option<StatCache> {
    let body_len = bytes.len().checked_sub(32)?;
    let (body, check) = bytes.split_at(body_len);
    if blob_digest(body).0 != check {
        return None;
    }
    let mut reader = Reader(body);
    if reader.take(8)? != CACHE_MAGIC {
        return None;
    }
    let count = usize::try_from(reader.u64()?).ok()?;
    // The count is read from the file: reserve only what its bytes can hold.
    let mut entries = HashMap::with_capacity(count.min(reader.0.len() / MIN_ENTRY_BYTES));
    for _ in 0..count {
        let len = reader.u32()? as usize;
        let path = std::str::from_utf8(reader.take(len)?).ok()?.to_owned();
        let stat = FileStat {
            size: reader.u64()?,
            mtime_ns: reader.i64()?,
            ctime_ns: reader.i64()?,
            inode: reader.u64()?,
            mode: reader.u32()?,
        };
        let kind = match reader.take(1)?[0] {
            0 => EntryKind::File { executable: false },
            1 => EntryKind::File { executable: true },
            2 => EntryKind::Symlink,
            3 => EntryKind::ContextFile { executable: false },
            4 => EntryKind::ContextFile { executable: true },
            5 => EntryKind::ContextSymlink,
            _ => return None,
        };
        let blob = Digest(reader.take(32)?.try_into().ok()?);
        let size = reader.u64()?;
        let read_at_ns = reader.i64()?;
        entries.insert(
            path,
            CachedEntry {
                stat,
                entry: Entry { kind, blob, size },
                read_at_ns,
            },
        );
    }
    reader.0.is_empty().then_some(entries)
}

/// A cursor over little-endian fields.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
#[path = "snapshotter_fuzz.rs"]
mod fuzz_tests;

#[cfg(test)]
#[path = "snapshotter_tests.rs"]
mod tests;
