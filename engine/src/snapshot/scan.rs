//! Building snapshots from disk, with a stat cache like git's index.
//!
//! The walk honours `.gitignore` (with or without a `.git` directory) and
//! `.ignore`, includes hidden files, and always leaves out `.git` at any
//! depth plus the root's `target/` and `.trellis/`. Global git excludes and
//! `.git/info/exclude` are deliberately *not* read, nor ignore files above
//! the root: a snapshot must be a function of the tree alone, so that an
//! eager copy elsewhere (which has no `.git`) gets the same root.
//!
//! Hashing every file on every keystroke would be slow, so each file's
//! `(size, mtime, ctime, inode, mode)` is remembered with its blob, and a file
//! whose stat is unchanged is not read again. As in git, a file whose
//! timestamps are too close to the moment its stat was cached is *racily
//! clean*: it could have been modified within the timestamp granularity
//! without its stat changing, so it is re-hashed until it is old enough.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{DirEntry, WalkBuilder, WalkState};

use super::fsutil::check_rel_path;
use super::{Entry, EntryKind, Overlay, Snapshot, SnapshotError};
use crate::diagnostic::RelPath;
use crate::digest::{Digest, blob_digest};

/// How long after a file's last change its cached stat is trusted. Linux
/// stamps files from a coarse clock (up to a tick behind) and some file
/// systems keep whole seconds, so a file changed less than this before the
/// cache was taken is re-hashed rather than trusted.
const RACY_WINDOW_NS: i64 = 2_000_000_000;

/// First bytes of a persisted cache; bump the digit to change the format.
const CACHE_MAGIC: &[u8; 8] = b"TRLSIDX1";

/// Takes snapshots of one workspace, remembering file stats between them.
pub struct Snapshotter {
    root: PathBuf,
    cache_file: Option<PathBuf>,
    /// `None` until the persisted cache has been loaded (lazily, so `new`
    /// cannot fail).
    cache: Option<StatCache>,
}

/// What a file looked like when its blob was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStat {
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

#[derive(Clone, Copy, Debug)]
struct CachedEntry {
    stat: FileStat,
    entry: Entry,
}

/// Stats and blobs from one scan, and when that scan began.
#[derive(Debug, Default)]
struct StatCache {
    /// Wall-clock nanoseconds at the start of the scan that recorded these.
    taken_at_ns: i64,
    entries: HashMap<RelPath, CachedEntry>,
}

impl StatCache {
    /// The cached entry for `path` if its stat is unchanged and it was not
    /// racily clean when cached.
    fn trusted(&self, path: &str, stat: &FileStat) -> Option<Entry> {
        let cached = self.entries.get(path)?;
        // Content changes move the mtime; as in git, that is the clock that
        // matters. (ctime is still compared for equality above.)
        let settled = stat.mtime_ns + RACY_WINDOW_NS < self.taken_at_ns;
        (cached.stat == *stat && settled).then_some(cached.entry)
    }
}

impl Snapshotter {
    /// A snapshotter for the workspace at `workspace_root`. With
    /// `cache_file` (e.g. `.trellis/index`), the stat cache is loaded from
    /// and saved to that file, so it survives the process.
    pub fn new(workspace_root: &Path, cache_file: Option<PathBuf>) -> Snapshotter {
        Snapshotter {
            root: workspace_root.to_path_buf(),
            cache_file,
            cache: None,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Snapshots the workspace as seen through `overlay`.
    ///
    /// Overlay paths that the ignore rules would leave out (or that lie in
    /// `target/`, `.trellis/` or `.git`) are not part of the view and are
    /// skipped; an overlay path that is not a safe relative path, or that
    /// collides with a directory, is an error.
    pub fn snapshot(&mut self, overlay: &Overlay) -> Result<Snapshot, SnapshotError> {
        let taken_at_ns = now_ns();
        let previous = match self.cache.take() {
            Some(cache) => cache,
            None => self.load_cache(),
        };
        let scan = walk(&self.root, &previous)?;
        let changed = scan.hashed > 0 || scan.files.len() != previous.entries.len();

        let mut entries: BTreeMap<RelPath, Entry> = BTreeMap::new();
        let mut cache = StatCache {
            taken_at_ns,
            entries: HashMap::with_capacity(scan.files.len()),
        };
        for (path, cached) in scan.files {
            entries.insert(path.clone(), cached.entry);
            cache.entries.insert(path, cached);
        }
        apply_overlay(&self.root, &mut entries, overlay)?;
        super::check_shape(&entries)?;

        if changed {
            self.save_cache(&cache)?;
            self.cache = Some(cache);
        } else {
            // Nothing was re-hashed, so every entry was trusted under the old
            // timestamp; keeping it avoids rewriting an identical index.
            self.cache = Some(previous);
        }
        Ok(Snapshot::from_entries(entries))
    }

    fn load_cache(&self) -> StatCache {
        let Some(file) = &self.cache_file else {
            return StatCache::default();
        };
        match fs::read(file) {
            Ok(bytes) => decode_cache(&bytes).unwrap_or_else(|| {
                // The cache only saves work: a damaged one costs a cold scan.
                tracing::warn!(path = %file.display(), "ignoring unreadable stat cache");
                StatCache::default()
            }),
            Err(err) => {
                if err.kind() != ErrorKind::NotFound {
                    tracing::warn!(path = %file.display(), %err, "ignoring unreadable stat cache");
                }
                StatCache::default()
            }
        }
    }

    fn save_cache(&self, cache: &StatCache) -> Result<(), SnapshotError> {
        let Some(file) = &self.cache_file else {
            return Ok(());
        };
        if let Some(parent) = file.parent() {
            fs::create_dir_all(parent).map_err(SnapshotError::io(parent))?;
        }
        super::fsutil::write_file_atomic_unconfined(file, &encode_cache(cache), 0o644)
    }
}

fn now_ns() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX)
}

/// The result of walking the disk.
struct Scan {
    files: Vec<(RelPath, CachedEntry)>,
    /// How many files had to be read (not trusted from the cache).
    hashed: usize,
}

/// Paths left out of every snapshot whatever the ignore files say.
fn always_excluded(depth: usize, name: &[u8]) -> bool {
    name == b".git" || (depth == 1 && (name == b"target" || name == b".trellis"))
}

/// Walks `root` in parallel, hashing what the cache cannot vouch for.
fn walk(root: &Path, cache: &StatCache) -> Result<Scan, SnapshotError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let walker = WalkBuilder::new(root)
        .hidden(false)
        .parents(false)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .follow_links(false)
        .threads(threads)
        .filter_entry(|entry| !always_excluded(entry.depth(), entry.file_name().as_bytes()))
        .build_parallel();

    let files = Mutex::new(Vec::new());
    let hashed = Mutex::new(0usize);
    let failure: Mutex<Option<SnapshotError>> = Mutex::new(None);
    walker.run(|| {
        Box::new(|result| {
            let outcome = result
                .map_err(|err| walk_error(root, &err))
                .and_then(|entry| visit(root, entry, cache));
            match outcome {
                Ok(None) => WalkState::Continue,
                Ok(Some((path, cached, was_hashed))) => {
                    if was_hashed {
                        *hashed.lock().unwrap() += 1;
                    }
                    files.lock().unwrap().push((path, cached));
                    WalkState::Continue
                }
                Err(err) => {
                    failure.lock().unwrap().get_or_insert(err);
                    WalkState::Quit
                }
            }
        })
    });
    if let Some(err) = failure.into_inner().unwrap() {
        return Err(err);
    }
    Ok(Scan {
        files: files.into_inner().unwrap(),
        hashed: hashed.into_inner().unwrap(),
    })
}

fn walk_error(root: &Path, err: &ignore::Error) -> SnapshotError {
    SnapshotError::Walk {
        path: root.to_path_buf(),
        message: err.to_string(),
    }
}

/// One walked entry: `None` for directories and special files, otherwise
/// its path, stat and entry, and whether it had to be read.
fn visit(
    root: &Path,
    entry: DirEntry,
    cache: &StatCache,
) -> Result<Option<(RelPath, CachedEntry, bool)>, SnapshotError> {
    if let Some(err) = entry.error() {
        // A broken ignore file would silently change what is in the view.
        return Err(walk_error(root, err));
    }
    let Some(file_type) = entry.file_type() else {
        return Ok(None);
    };
    let is_symlink = file_type.is_symlink();
    if !(is_symlink || file_type.is_file()) {
        return Ok(None);
    }
    let path = entry.path();
    let rel = relative_path(root, path)?;
    let meta = fs::symlink_metadata(path).map_err(SnapshotError::io(path))?;
    let stat = FileStat::of(&meta);
    if let Some(entry) = cache.trusted(&rel, &stat) {
        return Ok(Some((rel, CachedEntry { stat, entry }, false)));
    }
    let (kind, content) = if is_symlink {
        let target = fs::read_link(path).map_err(SnapshotError::io(path))?;
        (EntryKind::Symlink, target.into_os_string().into_vec())
    } else {
        let executable = stat.mode & 0o100 != 0;
        let bytes = fs::read(path).map_err(SnapshotError::io(path))?;
        (EntryKind::File { executable }, bytes)
    };
    let entry = Entry {
        kind,
        blob: blob_digest(&content),
        size: content.len() as u64,
    };
    Ok(Some((rel, CachedEntry { stat, entry }, true)))
}

/// `path` relative to `root` as a `/`-separated UTF-8 string, or an error
/// naming the path (a name we cannot spell would be lost or mangled).
fn relative_path(root: &Path, path: &Path) -> Result<RelPath, SnapshotError> {
    let rel = path.strip_prefix(root).map_err(|_| SnapshotError::Walk {
        path: path.to_path_buf(),
        message: format!("walked outside the root {}", root.display()),
    })?;
    let rel = rel.to_str().ok_or_else(|| SnapshotError::NonUtf8Path {
        path: path.to_path_buf(),
    })?;
    Ok(rel.to_owned())
}

/// Lays unsaved buffers over the disk entries.
fn apply_overlay(
    root: &Path,
    entries: &mut BTreeMap<RelPath, Entry>,
    overlay: &Overlay,
) -> Result<(), SnapshotError> {
    for (path, bytes) in &overlay.buffers {
        check_rel_path(path)?;
        let executable = match entries.get(path) {
            Some(Entry {
                kind: EntryKind::File { executable },
                ..
            }) => *executable,
            Some(Entry {
                kind: EntryKind::Symlink,
                ..
            }) => false,
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

/// Whether the walk would include a file at `rel`: the same exclusions and
/// the same `.ignore`/`.gitignore` precedence (deepest directory first,
/// `.ignore` over `.gitignore`; an ignored directory hides everything in it).
fn visible_to_walk(root: &Path, rel: &str) -> Result<bool, SnapshotError> {
    let components: Vec<&str> = rel.split('/').collect();
    let mut rules: Vec<Gitignore> = Vec::new();
    let mut dir = root.to_path_buf();
    for (depth, name) in components.iter().enumerate() {
        if always_excluded(depth + 1, name.as_bytes()) {
            return Ok(false);
        }
        // `.ignore` is pushed after `.gitignore` so the reversed scan below
        // consults it first.
        for file in [".gitignore", ".ignore"] {
            if let Some(matcher) = load_ignore_file(&dir, file)? {
                rules.push(matcher);
            }
        }
        dir.push(name);
        let is_dir = depth + 1 < components.len();
        for matcher in rules.iter().rev() {
            let matched = matcher.matched(&dir, is_dir);
            if matched.is_ignore() {
                return Ok(false);
            }
            if matched.is_whitelist() {
                break;
            }
        }
    }
    Ok(true)
}

fn load_ignore_file(dir: &Path, name: &str) -> Result<Option<Gitignore>, SnapshotError> {
    let path = dir.join(name);
    match fs::symlink_metadata(&path) {
        Ok(_) => {}
        Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(None);
        }
        Err(err) => return Err(SnapshotError::io(path)(err)),
    }
    let mut builder = GitignoreBuilder::new(dir);
    if let Some(err) = builder.add(&path) {
        return Err(walk_error(dir, &err));
    }
    builder
        .build()
        .map(Some)
        .map_err(|err| walk_error(dir, &err))
}

/// Serializes the cache: magic, timestamp, count, entries, then a digest of
/// everything before it so a torn or damaged file is detected.
fn encode_cache(cache: &StatCache) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + cache.entries.len() * 120);
    out.extend_from_slice(CACHE_MAGIC);
    out.extend_from_slice(&cache.taken_at_ns.to_le_bytes());
    out.extend_from_slice(&(cache.entries.len() as u64).to_le_bytes());
    for (path, cached) in &cache.entries {
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
        });
        out.extend_from_slice(&cached.entry.blob.0);
        out.extend_from_slice(&cached.entry.size.to_le_bytes());
    }
    let check = blob_digest(&out);
    out.extend_from_slice(&check.0);
    out
}

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
    let taken_at_ns = reader.i64()?;
    let count = usize::try_from(reader.u64()?).ok()?;
    let mut entries = HashMap::with_capacity(count.min(1 << 20));
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
            _ => return None,
        };
        let blob = Digest(reader.take(32)?.try_into().ok()?);
        let size = reader.u64()?;
        entries.insert(
            path,
            CachedEntry {
                stat,
                entry: Entry { kind, blob, size },
            },
        );
    }
    reader.0.is_empty().then_some(StatCache {
        taken_at_ns,
        entries,
    })
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
mod tests {
    use super::*;
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

        let snapshot = Snapshotter::new(root, None)
            .snapshot(&Overlay::default())
            .unwrap();
        assert_eq!(
            paths(&snapshot),
            [
                ".env.example",
                ".gitignore",
                "src/target/mod.rs",
                "sub/.ignore",
                "sub/kept.txt"
            ]
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
        assert_eq!(cache.entries.len(), 2);
        let scan = walk(dir.path(), &cache).unwrap();
        assert_eq!(scan.hashed, 0);

        // ...and produces the same root.
        let second = Snapshotter::new(dir.path(), Some(cache_file))
            .snapshot(&Overlay::default())
            .unwrap();
        assert_eq!(first, second);
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
        let cache_taken_at = |taken_at_ns| StatCache {
            taken_at_ns,
            entries: HashMap::from([("a.rs".to_owned(), CachedEntry { stat, entry })]),
        };
        // Cached in the same instant the file was written: a later write in
        // that timestamp granule would leave the stat unchanged, so re-read.
        let racy = cache_taken_at(stat.mtime_ns.max(stat.ctime_ns));
        assert_eq!(racy.trusted("a.rs", &stat), None);
        assert_eq!(walk(dir.path(), &racy).unwrap().hashed, 1);
        // Cached well after the last change: trusted.
        let settled = cache_taken_at(stat.mtime_ns + 2 * RACY_WINDOW_NS);
        assert_eq!(settled.trusted("a.rs", &stat), Some(entry));
        assert_eq!(walk(dir.path(), &settled).unwrap().hashed, 0);
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
        let mut cache = StatCache {
            taken_at_ns: 1234,
            entries: HashMap::new(),
        };
        cache.entries.insert(
            "x/y.rs".to_owned(),
            CachedEntry {
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
            },
        );
        let decoded = decode_cache(&encode_cache(&cache)).unwrap();
        assert_eq!(decoded.taken_at_ns, 1234);
        let got = decoded.entries["x/y.rs"];
        assert_eq!(got.stat, cache.entries["x/y.rs"].stat);
        assert_eq!(got.entry, cache.entries["x/y.rs"].entry);
        assert!(decode_cache(b"short").is_none());
    }
}
