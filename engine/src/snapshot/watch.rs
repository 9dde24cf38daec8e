//! Directory watches for watched snapshots: the inotify descriptor and the
//! map from watch descriptor to workspace directory.
//!
//! [`DirWatches`] only records what the kernel reports; deciding what to do
//! about it is [`super::tree`]'s job. Draining is synchronous and
//! non-blocking, in the calling thread: the kernel queues an event when the
//! file-system operation happens, so a drain at the start of a re-root sees
//! every change that completed before it, and no background thread is
//! needed.
//!
//! On targets without inotify, [`DirWatches::new`] fails and watched mode is
//! simply unavailable: snapshots fall back to the stat cache.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// A watch descriptor, as the kernel numbers them.
pub(super) type Wd = i32;

/// Why a watched re-root had to list the whole workspace again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RescanReason {
    /// The kernel's event queue overflowed, so some events were lost.
    QueueOverflow,
    /// A `.gitignore` or `.ignore` file changed: any directory's contents
    /// may have become ignored or unignored.
    IgnoreRulesChanged,
    /// A directory could not be watched (e.g. the `max_user_watches` limit),
    /// or inotify is not available here.
    WatchUnavailable,
    /// The workspace root itself was moved, deleted, replaced or unmounted.
    RootReplaced,
    /// A watched file system was unmounted, or the event queue could not be
    /// read.
    WatchLost,
    /// Listing a changed directory failed; a full scan settles whether the
    /// failure is real.
    RefreshFailed,
}

/// What the events since the last drain say about the workspace.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Changes {
    /// Set when the events cannot be applied directory by directory.
    pub rescan: Option<RescanReason>,
    /// Directories to list again, with the names the events mentioned in
    /// each (a named subdirectory may have been replaced, so it is walked
    /// afresh).
    pub dirty: BTreeMap<String, Vec<Box<[u8]>>>,
}

/// One event, reduced to what the re-root needs.
#[derive(Debug)]
pub(super) struct WatchEvent {
    pub wd: Wd,
    pub kind: EventKind,
    /// The entry in the watched directory the event is about, if any.
    pub name: Option<Box<[u8]>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Without inotify only the tests make events.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(super) enum EventKind {
    /// Events were dropped (`IN_Q_OVERFLOW`).
    Overflow,
    /// The file system holding the directory was unmounted (`IN_UNMOUNT`).
    Unmount,
    /// The kernel removed the watch (`IN_IGNORED`): the directory is gone.
    WatchRemoved,
    /// The watched directory itself was deleted or moved.
    SelfGone,
    /// Something in (or about) the directory changed.
    Changed,
}

/// The names whose change changes the ignore rules.
const IGNORE_FILES: [&[u8]; 2] = [b".gitignore", b".ignore"];

impl Changes {
    /// Folds one event in. `dirs` is the watch map; a watch the kernel
    /// removed is taken out of it.
    pub fn note(&mut self, event: WatchEvent, dirs: &mut HashMap<Wd, String>) {
        if event.kind == EventKind::Overflow {
            self.rescan.get_or_insert(RescanReason::QueueOverflow);
            return;
        }
        // Events still queued for a watch this side already removed.
        let Some(dir) = dirs.get(&event.wd) else {
            return;
        };
        let is_root = dir.is_empty();
        match event.kind {
            EventKind::Overflow => {}
            EventKind::Unmount => {
                let reason = if is_root {
                    RescanReason::RootReplaced
                } else {
                    RescanReason::WatchLost
                };
                self.rescan.get_or_insert(reason);
            }
            EventKind::WatchRemoved | EventKind::SelfGone if is_root => {
                self.rescan.get_or_insert(RescanReason::RootReplaced);
            }
            EventKind::WatchRemoved => {
                // The directory is gone or no longer watched: its parent is
                // listed again and, if it is still there, it is walked
                // afresh under a new watch.
                let dir = dirs.remove(&event.wd).expect("looked up above");
                let (parent, name) = match dir.rsplit_once('/') {
                    Some((parent, name)) => (parent.to_owned(), name),
                    None => (String::new(), dir.as_str()),
                };
                self.dirty
                    .entry(parent)
                    .or_default()
                    .push(name.as_bytes().into());
            }
            EventKind::SelfGone | EventKind::Changed => {
                let names = self.dirty.entry(dir.clone()).or_default();
                if let Some(name) = event.name {
                    if IGNORE_FILES.contains(&&*name) {
                        self.rescan.get_or_insert(RescanReason::IgnoreRulesChanged);
                    }
                    names.push(name);
                }
            }
        }
    }
}

/// The inotify descriptor and which directory each watch is on.
pub(super) struct DirWatches {
    inotify: sys::Inotify,
    dirs: HashMap<Wd, String>,
    /// The first watch that could not be added. After it, [`Self::watch`]
    /// stops trying: the set is incomplete and will be rebuilt anyway.
    failure: Mutex<Option<(PathBuf, io::Error)>>,
    failed: AtomicBool,
}

impl DirWatches {
    pub fn new() -> io::Result<DirWatches> {
        Ok(DirWatches {
            inotify: sys::Inotify::new()?,
            dirs: HashMap::new(),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
        })
    }

    /// Watches the directory at `path` (not following a symlink there).
    /// Safe to call from several walking threads at once; the watch is
    /// mapped to its directory later, by [`Self::record`].
    pub fn watch(&self, path: &Path) -> Option<Wd> {
        if self.failed.load(Ordering::Relaxed) {
            return None;
        }
        match self.inotify.add(path) {
            Ok(wd) => Some(wd),
            Err(err) => {
                self.failed.store(true, Ordering::Relaxed);
                self.failure
                    .lock()
                    .expect("watch failure lock")
                    .get_or_insert((path.to_path_buf(), err));
                None
            }
        }
    }

    /// The first watch that could not be added, and why.
    pub fn failure(&self) -> Option<String> {
        let failure = self.failure.lock().expect("watch failure lock");
        failure
            .as_ref()
            .map(|(path, err)| format!("{}: {err}", path.display()))
    }

    /// Maps `wd` to `dir`. False if the watch is already another
    /// directory's: one inode at two paths (a bind mount) reports its events
    /// once, so one of the two would silently go stale.
    pub fn record(&mut self, wd: Wd, dir: &str) -> bool {
        match self.dirs.get(&wd) {
            Some(existing) => existing == dir,
            None => {
                self.dirs.insert(wd, dir.to_owned());
                true
            }
        }
    }

    /// Stops watching `dir`, if `wd` is still its watch.
    pub fn forget(&mut self, wd: Wd, dir: &str) {
        if self.dirs.get(&wd).is_some_and(|watched| watched == dir) {
            self.dirs.remove(&wd);
            // Fails only if the kernel already removed it (the directory was
            // deleted); its `IN_IGNORED` then finds no mapping.
            let _ = self.inotify.remove(wd);
        }
    }

    /// Reads every queued event without blocking.
    pub fn drain(&mut self) -> io::Result<Changes> {
        let mut changes = Changes::default();
        let dirs = &mut self.dirs;
        self.inotify.drain(&mut |event| changes.note(event, dirs))?;
        Ok(changes)
    }
}

#[cfg(target_os = "linux")]
mod sys {
    use std::io;
    use std::mem::MaybeUninit;
    use std::os::fd::OwnedFd;
    use std::path::Path;

    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

    use super::{EventKind, WatchEvent, Wd};

    pub struct Inotify(OwnedFd);

    impl Inotify {
        pub fn new() -> io::Result<Inotify> {
            let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
            Ok(Inotify(fd))
        }

        pub fn add(&self, dir: &Path) -> io::Result<Wd> {
            // Everything that can change a listing or a file's stat or
            // content; `EXCL_UNLINK` skips writes to files already unlinked.
            let events = WatchFlags::CREATE
                | WatchFlags::DELETE
                | WatchFlags::MODIFY
                | WatchFlags::ATTRIB
                | WatchFlags::MOVED_FROM
                | WatchFlags::MOVED_TO
                | WatchFlags::DELETE_SELF
                | WatchFlags::MOVE_SELF;
            let flags =
                events | WatchFlags::ONLYDIR | WatchFlags::DONT_FOLLOW | WatchFlags::EXCL_UNLINK;
            Ok(inotify::add_watch(&self.0, dir, flags)?)
        }

        pub fn remove(&self, wd: Wd) -> io::Result<()> {
            Ok(inotify::remove_watch(&self.0, wd)?)
        }

        pub fn drain(&self, sink: &mut dyn FnMut(WatchEvent)) -> io::Result<()> {
            let mut buffer = [MaybeUninit::<u8>::uninit(); 16 * 1024];
            let mut reader = inotify::Reader::new(&self.0, &mut buffer);
            loop {
                let event = match reader.next() {
                    Ok(event) => event,
                    Err(rustix::io::Errno::AGAIN) => return Ok(()),
                    Err(err) => return Err(err.into()),
                };
                let flags = event.events();
                let kind = if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                    EventKind::Overflow
                } else if flags.contains(ReadFlags::UNMOUNT) {
                    EventKind::Unmount
                } else if flags.contains(ReadFlags::IGNORED) {
                    EventKind::WatchRemoved
                } else if flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
                    EventKind::SelfGone
                } else {
                    EventKind::Changed
                };
                sink(WatchEvent {
                    wd: event.wd(),
                    kind,
                    name: event.file_name().map(|name| name.to_bytes().into()),
                });
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::convert::Infallible;
    use std::io;
    use std::path::Path;

    use super::{WatchEvent, Wd};

    /// No inotify here: cannot be created, so its methods never run.
    pub struct Inotify(Infallible);

    impl Inotify {
        pub fn new() -> io::Result<Inotify> {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "watched snapshots need inotify (Linux)",
            ))
        }

        pub fn add(&self, _dir: &Path) -> io::Result<Wd> {
            match self.0 {}
        }

        pub fn remove(&self, _wd: Wd) -> io::Result<()> {
            match self.0 {}
        }

        pub fn drain(&self, _sink: &mut dyn FnMut(WatchEvent)) -> io::Result<()> {
            match self.0 {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(wd: Wd, kind: EventKind, name: Option<&str>) -> WatchEvent {
        WatchEvent {
            wd,
            kind,
            name: name.map(|name| name.as_bytes().into()),
        }
    }

    fn watch_map() -> HashMap<Wd, String> {
        HashMap::from([
            (1, String::new()),
            (2, "src".to_owned()),
            (3, "src/bin".to_owned()),
        ])
    }

    #[test]
    fn named_events_mark_their_directory_with_the_name() {
        let mut dirs = watch_map();
        let mut changes = Changes::default();
        changes.note(event(2, EventKind::Changed, Some("lib.rs")), &mut dirs);
        changes.note(event(3, EventKind::Changed, None), &mut dirs);
        changes.note(event(99, EventKind::Changed, Some("stale")), &mut dirs);
        assert_eq!(changes.rescan, None);
        assert_eq!(
            changes.dirty,
            BTreeMap::from([
                ("src".to_owned(), vec![b"lib.rs"[..].into()]),
                ("src/bin".to_owned(), vec![]),
            ])
        );
    }

    #[test]
    fn a_removed_watch_marks_the_parent_and_is_unmapped() {
        let mut dirs = watch_map();
        let mut changes = Changes::default();
        changes.note(event(3, EventKind::WatchRemoved, None), &mut dirs);
        assert!(!dirs.contains_key(&3));
        assert_eq!(
            changes.dirty,
            BTreeMap::from([("src".to_owned(), vec![b"bin"[..].into()])])
        );
        // Its later events are for a watch no longer mapped.
        changes.note(event(3, EventKind::Changed, Some("x")), &mut dirs);
        assert_eq!(changes.dirty.len(), 1);
    }

    #[test]
    fn overflow_ignore_files_and_the_root_force_a_rescan() {
        let cases = [
            (
                event(-1, EventKind::Overflow, None),
                RescanReason::QueueOverflow,
            ),
            (
                event(3, EventKind::Changed, Some(".gitignore")),
                RescanReason::IgnoreRulesChanged,
            ),
            (
                event(1, EventKind::Changed, Some(".ignore")),
                RescanReason::IgnoreRulesChanged,
            ),
            (
                event(1, EventKind::WatchRemoved, None),
                RescanReason::RootReplaced,
            ),
            (
                event(1, EventKind::SelfGone, None),
                RescanReason::RootReplaced,
            ),
            (
                event(1, EventKind::Unmount, None),
                RescanReason::RootReplaced,
            ),
            (event(2, EventKind::Unmount, None), RescanReason::WatchLost),
        ];
        for (event, reason) in cases {
            let mut changes = Changes::default();
            changes.note(event, &mut watch_map());
            assert_eq!(changes.rescan, Some(reason));
        }
    }
}
