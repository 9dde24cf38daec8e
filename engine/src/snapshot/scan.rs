//! Building snapshots from disk, with a stat cache like git's index.
//!
//! The walk honours `.gitignore` (with or without a `.git` directory) and
//! `.ignore`, includes hidden files, and always leaves out `.git` and
//! `node_modules` at any depth, the root's `target/` and `.trellis/`, and
//! build output: any
//! directory below the root holding a `CACHEDIR.TAG` (cargo tags its target
//! directories, Trellis its cache), and any Python virtual environment (a
//! directory holding `pyvenv.cfg`). Global git excludes and
//! `.git/info/exclude` are deliberately *not* read, nor ignore files above
//! the root: a snapshot must be a function of the tree alone, so that an
//! eager copy elsewhere (which has no `.git`) gets the same root.
//!
//! What the ignore rules hide is not left out but recorded as read-only
//! context ([`EntryKind::ContextFile`]): the user's own build and tests read
//! an ignored test file or data file, so verification must too. Everything
//! below an ignored directory is context; its own ignore files are not read.
//! Because ignored directories can be huge (`node_modules`, `.venv`, data),
//! a snapshotter can be bounded ([`Snapshotter::bound`]): the walk stops as
//! soon as the files it found exceed the bound, before hashing them, and the
//! snapshot is refused naming the directories holding most of them.
//!
//! Hashing every file on every keystroke would be slow, so each file's
//! `(size, mtime, ctime, inode, mode)` is remembered with its blob, and a file
//! whose stat is unchanged is not read again. As in git, a file whose
//! timestamps are too close to the moment its content was read is *racily
//! clean*: it could have been modified within the timestamp granularity
//! without its stat changing, so it is re-hashed until it is old enough.
//!
//! Two modes share that cache. The default lists every directory and stats
//! every file on each re-root: right for the CLI, a fresh process each run.
//! [`Snapshotter::watch`] opts a long-lived process (the language server)
//! into watched mode (`snapshot/tree.rs`), where a re-root lists again only
//! the directories inotify reported changes in.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::fsutil::check_rel_path;
use super::tree::{DirId, WatchedTree};
use super::watch::{DirWatches, RescanReason, Wd};
use super::{Entry, EntryKind, Overlay, Snapshot, SnapshotError};
use crate::digest::{Digest, blob_digest};
use crate::statedir::{Dir, StateError};

/// How long after a file's last change its cached stat is trusted. Linux
/// stamps files from a coarse clock (up to a tick behind) and some file
/// systems keep whole seconds, so a file changed less than this before the
/// cache was taken is re-hashed rather than trusted.
const RACY_WINDOW_NS: i64 = 2_000_000_000;

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

/// What a file looked like when its blob was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileStat {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    inode: u64,
    mode: u32,
}

impl FileStat {
    fn of(meta: &fs::Metadata) -> FileStat {
        FileStat {
            size: meta.len(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            inode: meta.ino(),
            mode: meta.mode(),
        }
    }
}

/// A file's entry, with the stat and time that vouch for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CachedEntry {
    stat: FileStat,
    entry: Entry,
    /// Wall-clock nanoseconds at the start of the re-root that read the
    /// content: a lower bound on when it was read.
    read_at_ns: i64,
}

impl CachedEntry {
    /// The entry, if `stat` is unchanged and the file was not racily clean
    /// when it was read.
    fn trusted(&self, stat: &FileStat) -> Option<Entry> {
        // Content changes move the mtime; as in git, that is the clock that
        // matters. (ctime is still compared for equality.)
        let settled = stat.mtime_ns + RACY_WINDOW_NS < self.read_at_ns;
        (self.stat == *stat && settled).then_some(self.entry)
    }
}

/// Cached entries by path: what a scan may trust instead of reading.
pub(super) type StatCache = HashMap<String, CachedEntry>;

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

/// One directory as a walk listed it.
pub(super) struct ListedDir {
    pub rel: String,
    pub depth: usize,
    /// The ignore rules in force for its entries: its parent's chain plus
    /// its own ignore files.
    pub rules: RuleChain,
    pub files: Vec<(String, CachedEntry)>,
    /// Workspace-relative paths of its kept subdirectories.
    pub subdirs: Vec<String>,
    /// Its watch, added before it was listed; `None` if the walk did not
    /// watch or the watch could not be added.
    pub watch: Option<Wd>,
    /// Whether a file in it has other hard links: a change made through a
    /// link elsewhere raises no event here.
    pub multiply_linked: bool,
    /// Whether the ignore rules hide it (everything in it is context).
    pub context: bool,
}

/// The result of walking the disk.
pub(super) struct Walked {
    pub dirs: Vec<ListedDir>,
    /// How many files had to be read (not trusted from the cache).
    pub hashed: usize,
}

impl Walked {
    fn file_count(&self) -> usize {
        self.dirs.iter().map(|dir| dir.files.len()).sum()
    }

    fn into_stat_cache(self) -> StatCache {
        self.dirs.into_iter().flat_map(|dir| dir.files).collect()
    }
}

/// Paths left out of every snapshot whatever the ignore files say. A
/// `node_modules` at any depth (the root's, or a monorepo package's own)
/// holds installed packages, not the project's sources: a slot links the
/// user's (`slots`), and the lock files, which are in the snapshot, say
/// what they hold.
fn always_excluded(depth: usize, name: &[u8]) -> bool {
    name == b".git"
        || name == b"node_modules"
        || (depth == 1 && (name == b"target" || name == b".trellis"))
}

/// The file that marks a directory as build output or a cache
/// (<https://bford.info/cachedir/>), and the signature it must start with.
pub(crate) const CACHEDIR_TAG: &str = "CACHEDIR.TAG";
/// The file every virtual environment (`python -m venv`, virtualenv, uv)
/// has at its root.
const PYVENV_CFG: &str = "pyvenv.cfg";
pub(crate) const CACHEDIR_SIGNATURE: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55";

/// Whether `dir` holds a valid `CACHEDIR.TAG`: it is build output (or a
/// cache, Trellis's own included), never content or context.
pub(crate) fn is_tagged_cache_dir(dir: &Path) -> bool {
    use std::io::Read;
    let Ok(file) = fs::File::open(dir.join(CACHEDIR_TAG)) else {
        return false;
    };
    let mut head = Vec::with_capacity(CACHEDIR_SIGNATURE.len());
    file.take(CACHEDIR_SIGNATURE.len() as u64)
        .read_to_end(&mut head)
        .is_ok_and(|_| head == CACHEDIR_SIGNATURE)
}

/// The most files and bytes a snapshot may hold (ignored files included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Bound {
    max_files: u64,
    max_bytes: u64,
}

impl Bound {
    pub(super) const UNBOUNDED: Bound = Bound {
        max_files: u64::MAX,
        max_bytes: u64::MAX,
    };

    /// `Ok` when `files`/`bytes` are within the bound; otherwise the refusal,
    /// naming the top-level directories that hold most of `sizes`.
    fn check<'a, I: Iterator<Item = (&'a str, u64)>>(
        self,
        files: u64,
        bytes: u64,
        sizes: impl FnOnce() -> I,
    ) -> Result<(), SnapshotError> {
        if files <= self.max_files && bytes <= self.max_bytes {
            return Ok(());
        }
        Err(SnapshotError::TooLarge {
            files,
            bytes,
            max_files: self.max_files,
            max_bytes: self.max_bytes,
            largest: largest_dirs(sizes()),
        })
    }
}

/// The three top-level directories holding the most files, with their
/// file counts and bytes, for a refusal a person can act on.
fn largest_dirs<'a>(sizes: impl Iterator<Item = (&'a str, u64)>) -> String {
    let mut by_dir: HashMap<&str, (u64, u64)> = HashMap::new();
    for (path, size) in sizes {
        let top = path.split_once('/').map_or(".", |(top, _)| top);
        let slot = by_dir.entry(top).or_default();
        slot.0 += 1;
        slot.1 += size;
    }
    let mut dirs: Vec<_> = by_dir.into_iter().collect();
    dirs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    dirs.iter()
        .take(3)
        .map(|(dir, (files, bytes))| format!("{dir}/ ({files} files, {bytes} bytes)"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A file or symlink the walk found, before its content is known.
pub(super) struct Found {
    rel: String,
    path: PathBuf,
    stat: FileStat,
    is_symlink: bool,
    /// Hidden by the ignore rules: recorded as read-only context.
    context: bool,
    links: u64,
}

impl Found {
    /// Whether the file has other hard links, through which it can change
    /// without an event in this directory.
    fn has_other_links(&self) -> bool {
        self.links > 1
    }
}

/// The ignore rules in force in a directory, as a chain from the newest
/// (deepest directory; `.ignore` before `.gitignore`) to the oldest, shared
/// by every directory below.
pub(super) struct Rules {
    matcher: Gitignore,
    parent: RuleChain,
}

pub(super) type RuleChain = Option<Arc<Rules>>;

/// A directory waiting to be listed.
pub(super) struct DirJob {
    pub path: PathBuf,
    pub rel: String,
    pub depth: usize,
    /// The rules of its parent; its own ignore files are read when it is
    /// listed.
    pub rules: RuleChain,
    /// Whether the ignore rules hide it: everything in it is context.
    pub context: bool,
}

/// The job that lists the whole workspace.
fn root_job(root: &Path) -> Vec<DirJob> {
    vec![DirJob {
        path: root.to_path_buf(),
        rel: String::new(),
        depth: 0,
        rules: None,
        context: false,
    }]
}

/// Directories still to list, shared by the walking threads.
struct WorkQueue {
    state: Mutex<QueueState>,
    changed: Condvar,
}

struct QueueState {
    jobs: Vec<DirJob>,
    /// Files and bytes found so far, against the walk's bound.
    files: u64,
    bytes: u64,
    /// Every file found so far with its size, to name the largest
    /// directories if the bound is exceeded.
    sizes: Vec<(String, u64)>,
    /// Threads currently listing a directory (and so maybe adding jobs).
    busy: usize,
    failure: Option<SnapshotError>,
}

impl WorkQueue {
    /// The next directory to list, or `None` once every directory is done
    /// (or the walk failed).
    fn next(&self) -> Option<DirJob> {
        let mut state = self.state.lock().unwrap();
        loop {
            if state.failure.is_some() {
                return None;
            }
            if let Some(job) = state.jobs.pop() {
                state.busy += 1;
                return Some(job);
            }
            if state.busy == 0 {
                return None;
            }
            state = self.changed.wait(state).unwrap();
        }
    }

    /// Counts `found` against `bound` before it is read; past the bound the
    /// walk fails, so a huge ignored directory is never hashed.
    fn admit(&self, found: &[Found], bound: Bound) -> Result<(), SnapshotError> {
        let mut state = self.state.lock().unwrap();
        state.files += found.len() as u64;
        state.bytes += found.iter().map(|item| item.stat.size).sum::<u64>();
        if bound != Bound::UNBOUNDED {
            state
                .sizes
                .extend(found.iter().map(|item| (item.rel.clone(), item.stat.size)));
        }
        let (files, bytes) = (state.files, state.bytes);
        bound.check(files, bytes, || {
            state
                .sizes
                .iter()
                .map(|(path, size)| (path.as_str(), *size))
        })
    }

    fn finish(&self, result: Result<Vec<DirJob>, SnapshotError>) {
        let mut state = self.state.lock().unwrap();
        state.busy -= 1;
        match result {
            Ok(subdirs) => state.jobs.extend(subdirs),
            Err(err) => {
                state.failure.get_or_insert(err);
            }
        }
        self.changed.notify_all();
    }
}

/// Walks the directories of `jobs` and everything under them on several
/// threads, hashing what `cache` cannot vouch for as it goes. With
/// `watches`, each directory is watched before it is listed, so no change
/// after its listing goes unreported.
///
/// Directories are listed with `std::fs`: `DirEntry::metadata` stats
/// relative to the open directory, which is markedly cheaper than stat-ing
/// full paths.
pub(super) fn walk(
    jobs: Vec<DirJob>,
    cache: &StatCache,
    watches: Option<&DirWatches>,
    now_ns: i64,
    bound: Bound,
) -> Result<Walked, SnapshotError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let queue = WorkQueue {
        state: Mutex::new(QueueState {
            jobs,
            files: 0,
            bytes: 0,
            sizes: Vec::new(),
            busy: 0,
            failure: None,
        }),
        changed: Condvar::new(),
    };
    let per_thread: Vec<Walked> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| walk_worker(&queue, cache, watches, now_ns, bound)))
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("walk threads do not panic"))
            .collect()
    });
    if let Some(err) = queue.state.into_inner().unwrap().failure {
        return Err(err);
    }
    let mut walked = Walked {
        dirs: Vec::new(),
        hashed: 0,
    };
    for part in per_thread {
        walked.dirs.extend(part.dirs);
        walked.hashed += part.hashed;
    }
    Ok(walked)
}

fn walk_worker(
    queue: &WorkQueue,
    cache: &StatCache,
    watches: Option<&DirWatches>,
    now_ns: i64,
    bound: Bound,
) -> Walked {
    let mut walked = Walked {
        dirs: Vec::new(),
        hashed: 0,
    };
    while let Some(job) = queue.next() {
        let watch = watches.and_then(|watches| watches.watch(&job.path));
        let listed = dir_rules(&job).and_then(|rules| {
            let listing = list_dir(
                &job,
                &rules,
                |rel| cache.get(rel).copied(),
                |found| queue.admit(found, bound),
                now_ns,
                &mut walked.hashed,
            )?;
            walked.dirs.push(ListedDir {
                rel: job.rel,
                depth: job.depth,
                rules,
                files: listing.files,
                subdirs: listing
                    .subdirs
                    .iter()
                    .map(|subdir| subdir.rel.clone())
                    .collect(),
                watch,
                multiply_linked: listing.multiply_linked,
                context: job.context,
            });
            Ok(listing.subdirs)
        });
        queue.finish(listed);
    }
    walked
}

/// What listing one directory found.
pub(super) struct Listing {
    /// Its kept subdirectories, as further jobs.
    pub subdirs: Vec<DirJob>,
    /// Its kept files and symlinks with their cached entries.
    pub files: Vec<(String, CachedEntry)>,
    /// Whether a file in it has other hard links.
    pub multiply_linked: bool,
}

/// The rules in force for `job`'s entries: its parent's plus its own ignore
/// files. Below an ignored directory everything is context, so its ignore
/// files are not read.
pub(super) fn dir_rules(job: &DirJob) -> Result<RuleChain, SnapshotError> {
    if job.context {
        Ok(job.rules.clone())
    } else {
        push_ignore_files(&job.path, job.rules.clone())
    }
}

/// Lists one directory under `rules` and settles its files: trusted from
/// `cached` where their stat vouches for them, read and hashed (counted in
/// `hashed`) where not; `admit` may refuse what was found before any of it
/// is read. The full walk and the watched tree's re-listing both come
/// through here.
pub(super) fn list_dir(
    job: &DirJob,
    rules: &RuleChain,
    cached: impl Fn(&str) -> Option<CachedEntry>,
    admit: impl FnOnce(&[Found]) -> Result<(), SnapshotError>,
    now_ns: i64,
    hashed: &mut usize,
) -> Result<Listing, SnapshotError> {
    let mut found = Vec::new();
    let subdirs = list_entries(job, rules, &mut found)?;
    admit(&found)?;
    let multiply_linked = found.iter().any(Found::has_other_links);
    let files = settle(&mut found, cached, now_ns, hashed)?;
    Ok(Listing {
        subdirs,
        files,
        multiply_linked,
    })
}

/// Cached entries for the files in `found` (which it empties): trusted
/// from `cached` where their stat vouches for them, read and hashed (and
/// counted in `hashed`) where not.
fn settle(
    found: &mut Vec<Found>,
    cached: impl Fn(&str) -> Option<CachedEntry>,
    now_ns: i64,
    hashed: &mut usize,
) -> Result<Vec<(String, CachedEntry)>, SnapshotError> {
    found
        .drain(..)
        .map(|item| {
            let trusted =
                cached(&item.rel).and_then(|cached| cached.trusted(&item.stat).map(|_| cached));
            let mut cached = match trusted {
                Some(cached) => cached,
                None => {
                    *hashed += 1;
                    CachedEntry {
                        stat: item.stat,
                        entry: hash_one(&item)?,
                        read_at_ns: now_ns,
                    }
                }
            };
            // Whether a file is context depends on the rules, not its stat.
            cached.entry.kind = cached.entry.kind.in_context(item.context);
            Ok((item.rel, cached))
        })
        .collect()
}

/// Lists one directory under `rules` (which include its own ignore files):
/// its kept files and symlinks go to `found`, its kept subdirectories are
/// returned as further jobs.
fn list_entries(
    job: &DirJob,
    rules: &RuleChain,
    found: &mut Vec<Found>,
) -> Result<Vec<DirJob>, SnapshotError> {
    let listing = fs::read_dir(&job.path).map_err(SnapshotError::io(&job.path))?;
    let mut subdirs = Vec::new();
    let listed_before = found.len();
    for dir_entry in listing {
        let dir_entry = dir_entry.map_err(SnapshotError::io(&job.path))?;
        let name = dir_entry.file_name();
        if always_excluded(job.depth + 1, name.as_bytes()) {
            continue;
        }
        if job.depth > 0 && name == PYVENV_CFG {
            // A Python virtual environment: the user's installed packages,
            // never content. The Python sensors run its interpreter where
            // it is (`sensor/python/interpreter.rs`), so no slot copies it.
            found.truncate(listed_before);
            return Ok(Vec::new());
        }
        if job.depth > 0 && name == CACHEDIR_TAG && is_tagged_cache_dir(&job.path) {
            // Build output or a cache: nothing in it is content. It is still
            // listed (and watched), so removing the tag brings it back.
            found.truncate(listed_before);
            return Ok(Vec::new());
        }
        let path = dir_entry.path();
        // Not following symlinks: this is the entry itself.
        let meta = match dir_entry.metadata() {
            Ok(meta) => meta,
            // Deleted since it was listed: it is not in the tree any more.
            Err(err) if err.kind() == ErrorKind::NotFound => continue,
            Err(err) => return Err(SnapshotError::io(path)(err)),
        };
        let file_type = meta.file_type();
        let is_dir = file_type.is_dir();
        if !(is_dir || file_type.is_file() || file_type.is_symlink()) {
            continue; // sockets, FIFOs, devices: not content
        }
        let context = job.context || is_ignored(rules, &path, is_dir);
        let Some(name) = name.to_str() else {
            // A name we cannot spell would be lost or mangled: fail closed.
            return Err(SnapshotError::NonUtf8Path { path });
        };
        let rel = if job.rel.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", job.rel)
        };
        if is_dir {
            subdirs.push(DirJob {
                path,
                rel,
                depth: job.depth + 1,
                rules: rules.clone(),
                context,
            });
        } else {
            found.push(Found {
                rel,
                path,
                stat: FileStat::of(&meta),
                is_symlink: file_type.is_symlink(),
                context,
                links: meta.nlink(),
            });
        }
    }
    Ok(subdirs)
}

/// `rules` extended with `dir`'s ignore files. `.ignore` goes on after
/// `.gitignore`, so it is consulted first, as in ripgrep's `ignore` crate.
fn push_ignore_files(dir: &Path, mut rules: RuleChain) -> Result<RuleChain, SnapshotError> {
    for name in [".gitignore", ".ignore"] {
        let path = dir.join(name);
        match fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                continue;
            }
            Err(err) => return Err(SnapshotError::io(path)(err)),
        }
        let mut builder = GitignoreBuilder::new(dir);
        // A broken ignore file would silently change what is in the view.
        if let Some(err) = builder.add(&path) {
            return Err(ignore_error(&path, &err));
        }
        let matcher = builder.build().map_err(|err| ignore_error(&path, &err))?;
        rules = Some(Arc::new(Rules {
            matcher,
            parent: rules,
        }));
    }
    Ok(rules)
}

fn ignore_error(path: &Path, err: &ignore::Error) -> SnapshotError {
    SnapshotError::Walk {
        path: path.to_path_buf(),
        message: err.to_string(),
    }
}

/// Git's precedence: the deepest directory's rules decide first, and the
/// first rule that matches (ignore or `!` whitelist) settles it.
fn is_ignored(rules: &RuleChain, path: &Path, is_dir: bool) -> bool {
    let mut next = rules.as_deref();
    while let Some(rules) = next {
        let matched = rules.matcher.matched(path, is_dir);
        if matched.is_ignore() {
            return true;
        }
        if matched.is_whitelist() {
            return false;
        }
        next = rules.parent.as_deref();
    }
    false
}

fn hash_one(item: &Found) -> Result<Entry, SnapshotError> {
    let path = &item.path;
    let (kind, content) = if item.is_symlink {
        let target = fs::read_link(path).map_err(SnapshotError::io(path))?;
        (EntryKind::Symlink, target.into_os_string().into_vec())
    } else {
        let executable = item.stat.mode & 0o100 != 0;
        let bytes = fs::read(path).map_err(SnapshotError::io(path))?;
        (EntryKind::File { executable }, bytes)
    };
    Ok(Entry {
        kind,
        blob: blob_digest(&content),
        size: content.len() as u64,
    })
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

/// Whether the walk would include a file at `rel` as an editable snapshot
/// file (not context, not excluded), decided by the same exclusions and
/// rules, component by component (an ignored directory hides everything in
/// it).
pub(crate) fn visible_to_walk(root: &Path, rel: &str) -> Result<bool, SnapshotError> {
    let components: Vec<&str> = rel.split('/').collect();
    let mut rules = None;
    let mut path = root.to_path_buf();
    for (depth, name) in components.iter().enumerate() {
        if always_excluded(depth + 1, name.as_bytes()) {
            return Ok(false);
        }
        if path.is_dir() {
            if depth > 0 && is_tagged_cache_dir(&path) {
                return Ok(false);
            }
            rules = push_ignore_files(&path, rules)?;
        }
        path.push(name);
        if is_ignored(&rules, &path, depth + 1 < components.len()) {
            return Ok(false);
        }
    }
    Ok(true)
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
#[path = "scan_fuzz.rs"]
mod fuzz_tests;

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
