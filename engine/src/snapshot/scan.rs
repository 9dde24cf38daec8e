//! Walking the workspace: the files and directories a snapshot is built
//! from, read in parallel.
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
//! a walk can be bounded (`Bound`): it stops as soon as the files it
//! found exceed the bound, before hashing them, and the snapshot is refused
//! naming the directories holding most of them.
//!
//! Hashing every file on every keystroke would be slow, so each file's
//! `(size, mtime, ctime, inode, mode)` is remembered with its blob
//! (`CachedEntry`), and a file whose stat is unchanged is not read again.
//! As in git, a file whose timestamps are too close to the moment its
//! content was read is *racily clean*: it could have been modified within
//! the timestamp granularity without its stat changing, so it is re-hashed
//! until it is old enough. The snapshotter (`snapshot/snapshotter.rs`) keeps
//! that cache between walks.

use std::collections::HashMap;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::watch::{DirWatches, Wd};
use super::{Entry, EntryKind, SnapshotError};
use crate::digest::blob_digest;

/// How long after a file's last change its cached stat is trusted. Linux
/// stamps files from a coarse clock (up to a tick behind) and some file
/// systems keep whole seconds, so a file changed less than this before the
/// cache was taken is re-hashed rather than trusted.
pub(super) const RACY_WINDOW_NS: i64 = 2_000_000_000;

/// What a file looked like when its blob was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileStat {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
    pub mode: u32,
}

impl FileStat {
    pub(super) fn of(meta: &fs::Metadata) -> FileStat {
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
    pub stat: FileStat,
    pub entry: Entry,
    /// Wall-clock nanoseconds at the start of the re-root that read the
    /// content: a lower bound on when it was read.
    pub read_at_ns: i64,
}

impl CachedEntry {
    /// The entry, if `stat` is unchanged and the file was not racily clean
    /// when it was read.
    pub(super) fn trusted(&self, stat: &FileStat) -> Option<Entry> {
        // Content changes move the mtime; as in git, that is the clock that
        // matters. (ctime is still compared for equality.)
        let settled = stat.mtime_ns + RACY_WINDOW_NS < self.read_at_ns;
        (self.stat == *stat && settled).then_some(self.entry)
    }
}

/// Cached entries by path: what a scan may trust instead of reading.
pub(super) type StatCache = HashMap<String, CachedEntry>;

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
    pub(super) fn file_count(&self) -> usize {
        self.dirs.iter().map(|dir| dir.files.len()).sum()
    }

    pub(super) fn into_stat_cache(self) -> StatCache {
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
    pub max_files: u64,
    pub max_bytes: u64,
}

impl Bound {
    pub(super) const UNBOUNDED: Bound = Bound {
        max_files: u64::MAX,
        max_bytes: u64::MAX,
    };

    /// `Ok` when `files`/`bytes` are within the bound; otherwise the refusal,
    /// naming the top-level directories that hold most of `sizes`.
    pub(super) fn check<'a, I: Iterator<Item = (&'a str, u64)>>(
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
pub(super) fn root_job(root: &Path) -> Vec<DirJob> {
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
