//! Directory handles that never follow a symlink: how Trellis writes its own
//! state (`.trellis/` and everything in it) and stages promoted files.
//!
//! A [`Dir`] is an open directory descriptor whose every component below a
//! trusted start (the canonical workspace root) was opened with
//! `O_NOFOLLOW | O_DIRECTORY`, so it is a real directory inside the root. Every
//! file operation is an `*at` call relative to it with `O_NOFOLLOW`, so a
//! symlink planted in the workspace (a committed `.trellis -> .git`, a
//! `.trellis/ledger.db` pointing at another application's database) is
//! refused with [`StateError::Symlink`] naming it, never written through.
//!
//! This module must never resolve a path by string and then open it: that is
//! exactly the check-then-use gap it exists to close. Paths kept here are for
//! messages (and for SQLite, which can only open by name: every state
//! database is opened through [`Dir::open_database`], which closes that gap
//! as far as SQLite allows).
//!
//! # Architecture invariant
//!
//! A link as `.trellis` or in place of anything in it is refused naming it, and
//! nothing is written through it (`faults_state.rs`:
//! `a_trellis_link_to_git_is_refused_and_git_is_untouched`,
//! `a_linked_ledger_database_is_refused_and_the_other_file_is_unchanged`,
//! `a_linked_stat_cache_is_neither_read_nor_written`,
//! `a_linked_object_store_is_refused_and_nothing_lands_in_it`,
//! `a_linked_head_witness_is_refused_and_nothing_is_written_through_it`;
//! `statedir::tests::files_are_neither_read_nor_written_through_symlinks`,
//! `a_database_opens_in_wal_mode_and_a_linked_journal_file_is_refused_by_name`).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

/// The workspace's state directory.
pub const STATE_DIR: &str = ".trellis";

/// What `.trellis/.gitignore` holds: the state directory ignores itself.
const GITIGNORE: &[u8] = b"*\n";

/// Prefix of every temp file Trellis creates beside a file it replaces.
pub const TEMP_PREFIX: &str = ".trellis-tmp";

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(
        "{}: is a symbolic link; Trellis never writes its state or your files through a link (replace it with a real directory or file, or remove it)",
        .0.display()
    )]
    Symlink(PathBuf),
    #[error("{}: is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl StateError {
    fn from_errno(path: PathBuf, errno: Errno) -> StateError {
        match errno {
            // `O_NOFOLLOW` on a symlink; with `O_DIRECTORY` Linux says ENOTDIR.
            Errno::LOOP => StateError::Symlink(path),
            other => StateError::Io {
                path,
                source: other.into(),
            },
        }
    }

    /// Whether the error is "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        matches!(self, StateError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

type Result<T> = std::result::Result<T, StateError>;

/// How long a writer to a state database waits for another process that
/// holds its write lock.
const DATABASE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why [`Dir::open_database`] could not open a state database. Every
/// message names the file; a store carries this whole in one variant of its
/// own error (adding what the store is), so the mapping exists only here.
#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    /// The database or one of its journal files is a link, or not a file.
    #[error(transparent)]
    State(#[from] StateError),
    #[error("{}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// SQLite would not journal in WAL mode; `mode` is the mode it reported.
    #[error("{}: cannot use WAL journaling (journal_mode is {mode})", path.display())]
    NoWal { path: PathBuf, mode: String },
    /// A newer trellis wrote the database: `found` is its schema version,
    /// `reads` the one this build creates and reads.
    #[error("{}: schema version {found} is newer than this trellis reads (version {reads})", path.display())]
    NewerSchema {
        path: PathBuf,
        found: i64,
        reads: i64,
    },
}

/// A state database's tables: `sql` creates them (and is a no-op where they
/// exist), `version` is the `PRAGMA user_version` this build creates and reads.
pub struct Schema {
    pub version: i64,
    pub sql: &'static str,
}

/// A file's identity: device and inode, as `lstat` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// What sits at a name in a directory, without following it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File { id: FileId, mode: u32 },
    Dir,
    Symlink,
    Other,
}

/// An open directory, checked to be real, with `O_NOFOLLOW` file operations.
#[derive(Debug)]
pub struct Dir {
    path: PathBuf,
    fd: OwnedFd,
}

impl Dir {
    /// Opens `path` as the trusted start of a chain (the canonical workspace
    /// root): its own components are not checked, only that it is a directory.
    pub fn open_trusted(path: &Path) -> Result<Dir> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| StateError::from_errno(path.to_path_buf(), e))?;
        Ok(Dir {
            path: path.to_path_buf(),
            fd,
        })
    }

    /// Opens directory `path` whose parent is trusted and whose last
    /// component must be a real directory (created when `create`).
    pub fn open_last(path: &Path, create: bool) -> Result<Dir> {
        let (parent, name) = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => (parent, name),
            _ => return Dir::open_trusted(path),
        };
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let name = name.to_str().ok_or_else(|| StateError::Io {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "not valid UTF-8"),
        })?;
        Dir::open_trusted(parent)?.child(name, create)
    }

    /// The path this handle was opened at, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The subdirectory `name` (one component), created when `create`;
    /// a symlink or a file there is refused.
    pub fn child(&self, name: &str, create: bool) -> Result<Dir> {
        let path = self.join(name);
        if create {
            match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(StateError::from_errno(path, e)),
            }
        }
        match rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Dir { path, fd }),
            // ENOTDIR: a symlink (O_NOFOLLOW + O_DIRECTORY) or a plain file.
            Err(Errno::NOTDIR | Errno::LOOP) => match self.kind(name)? {
                Some(Kind::Symlink) => Err(StateError::Symlink(path)),
                _ => Err(StateError::NotADirectory(path)),
            },
            Err(e) => Err(StateError::from_errno(path, e)),
        }
    }

    /// The directory `rel` (`/`-separated, already checked to be a plain
    /// relative path) below this one, each component checked, created when
    /// `create`.
    pub fn descend(&self, rel: &str, create: bool) -> Result<Dir> {
        let mut components = rel.split('/');
        let first = components.next().expect("split yields one item");
        let mut dir = self.child(first, create)?;
        for component in components {
            dir = dir.child(component, create)?;
        }
        Ok(dir)
    }

    /// What is at `name`, not following a symlink; `None` when nothing is.
    // The `stat` field widths differ between targets.
    #[allow(clippy::unnecessary_cast)]
    pub fn kind(&self, name: &str) -> Result<Option<Kind>> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(
                match FileType::from_raw_mode(stat.st_mode as rustix::fs::RawMode) {
                    FileType::RegularFile => Kind::File {
                        id: FileId {
                            dev: stat.st_dev as u64,
                            ino: stat.st_ino as u64,
                        },
                        mode: stat.st_mode as u32 & 0o7777,
                    },
                    FileType::Directory => Kind::Dir,
                    FileType::Symlink => Kind::Symlink,
                    _ => Kind::Other,
                },
            )),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(StateError::from_errno(self.join(name), e)),
        }
    }

    /// Refuses a symlink (or anything but a regular file) at `name`; nothing there is fine.
    pub fn refuse_link(&self, name: &str) -> Result<()> {
        match self.kind(name)? {
            None | Some(Kind::File { .. }) => Ok(()),
            Some(Kind::Symlink) => Err(StateError::Symlink(self.join(name))),
            Some(Kind::Dir | Kind::Other) => Err(StateError::Io {
                path: self.join(name),
                source: io::Error::other("is not a regular file"),
            }),
        }
    }

    /// Opens (creating if needed) the SQLite database `name` in this
    /// directory for reading and writing, in WAL mode, its writers waiting
    /// for one another: how every state database (the ledger, the bundle
    /// store) is opened. SQLite opens by name and creates its `-wal` and
    /// `-shm` files beside the database, so all three are checked not to be
    /// links right before, and the open itself refuses one
    /// (`SQLITE_OPEN_NOFOLLOW`). Its tables are then made `schema`'s in one
    /// immediate transaction, refusing a database a newer trellis wrote.
    pub fn open_database(
        &self,
        name: &str,
        schema: &Schema,
    ) -> std::result::Result<Connection, DatabaseError> {
        for file in [
            name.to_owned(),
            format!("{name}-wal"),
            format!("{name}-shm"),
        ] {
            self.refuse_link(&file)?;
        }
        let path = self.join(name);
        let sqlite = |source| DatabaseError::Sqlite {
            path: path.clone(),
            source,
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let mut conn = Connection::open_with_flags(&path, flags).map_err(sqlite)?;
        conn.busy_timeout(DATABASE_BUSY_TIMEOUT).map_err(sqlite)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(sqlite)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(DatabaseError::NoWal { path, mode });
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite)?;
        let found: i64 = tx
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(sqlite)?;
        if found > schema.version {
            return Err(DatabaseError::NewerSchema {
                path,
                found,
                reads: schema.version,
            });
        }
        tx.execute_batch(schema.sql).map_err(sqlite)?;
        tx.pragma_update(None, "user_version", schema.version)
            .map_err(sqlite)?;
        tx.commit().map_err(sqlite)?;
        Ok(conn)
    }

    /// The bytes of the regular file `name`; `None` when it does not exist.
    pub fn read(&self, name: &str) -> Result<Option<Vec<u8>>> {
        self.read_at_most(name, u64::MAX)
    }

    /// [`Dir::read`], refusing a file larger than `cap` bytes without
    /// reading past the cap: for state files whose size is known to be
    /// small, so a damaged or planted one cannot exhaust memory.
    pub fn read_at_most(&self, name: &str, cap: u64) -> Result<Option<Vec<u8>>> {
        let path = self.join(name);
        let fd = match rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(StateError::from_errno(path, e)),
        };
        let mut file = File::from(fd);
        let metadata = file.metadata().map_err(|source| StateError::Io {
            path: path.clone(),
            source,
        })?;
        if !metadata.is_file() {
            return Err(StateError::Io {
                path,
                source: io::Error::other("is not a regular file"),
            });
        }
        let too_large = || StateError::Io {
            path: path.clone(),
            source: io::Error::other(format!("is larger than {cap} bytes")),
        };
        // Refused by its size before reading; the cap on the read itself
        // catches a file that grows meanwhile.
        if metadata.len() > cap {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        (&mut file)
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|source| StateError::Io {
                path: path.clone(),
                source,
            })?;
        if bytes.len() as u64 > cap {
            return Err(too_large());
        }
        Ok(Some(bytes))
    }

    /// Creates `name` with `bytes` unless something is already there (a
    /// symlink there is refused).
    pub fn create_if_missing(&self, name: &str, bytes: &[u8]) -> Result<()> {
        match self.create_exclusive(name, 0o644) {
            Ok(mut file) => self.fill(name, &mut file, bytes),
            Err(StateError::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => {
                self.refuse_link(name)
            }
            Err(e) => Err(e),
        }
    }

    /// A new file `name` (`O_CREAT | O_EXCL | O_NOFOLLOW`) with `mode`.
    fn create_exclusive(&self, name: &str, mode: u32) -> Result<File> {
        rustix::fs::openat(
            &self.fd,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode as rustix::fs::RawMode),
        )
        .map(File::from)
        .map_err(|e| StateError::from_errno(self.join(name), e))
    }

    fn fill(&self, name: &str, file: &mut File, bytes: &[u8]) -> Result<()> {
        self.fill_with(name, file, bytes, Durability::Synced)
    }

    fn fill_with(
        &self,
        name: &str,
        file: &mut File,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<()> {
        file.write_all(bytes)
            .and_then(|()| match durability {
                Durability::Synced => file.sync_all(),
                Durability::Lagging => Ok(()),
            })
            .map_err(|source| StateError::Io {
                path: self.join(name),
                source,
            })
    }

    /// Writes `bytes` with `mode` to a new temp file in this directory,
    /// fsync'd, and returns its name. The caller renames or removes it.
    pub fn stage(&self, bytes: &[u8], mode: u32) -> Result<String> {
        for attempt in 0u32.. {
            let name = format!("{TEMP_PREFIX}{}-{attempt}", unique_stamp());
            match self.stage_as(&name, bytes, mode) {
                Ok(()) => return Ok(name),
                Err(StateError::Io { source, .. })
                    if source.kind() == io::ErrorKind::AlreadyExists && attempt < 64 => {}
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns within 64 attempts")
    }

    /// Writes `bytes` with `mode` to the new file `name`, fsync'd; an
    /// existing file there is an error.
    pub fn stage_as(&self, name: &str, bytes: &[u8], mode: u32) -> Result<()> {
        let mut file = self.create_exclusive(name, 0o600)?;
        let staged = self.fill(name, &mut file, bytes).and_then(|()| {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode as rustix::fs::RawMode))
                .map_err(|e| StateError::from_errno(self.join(name), e))
        });
        if staged.is_err() {
            let _ = self.remove(name);
        }
        staged
    }

    /// Replaces `name` with `bytes` atomically (temp file, fsync, rename,
    /// fsync of this directory). A symlink at `name` is refused: a planted
    /// link is the user's to look at, not Trellis's to replace.
    pub fn write_atomic(&self, name: &str, bytes: &[u8], mode: u32) -> Result<()> {
        self.refuse_link(name)?;
        let temp = self.stage(bytes, mode)?;
        if let Err(e) = self.rename(&temp, self, name) {
            let _ = self.remove(&temp);
            return Err(e);
        }
        self.sync()
    }

    /// Replaces `name` with `bytes` atomically but without any fsync: for
    /// state that may lag behind after a crash but must never be torn (the
    /// ledger's head witness, rewritten on every append). A symlink at
    /// `name` is refused.
    pub fn write_atomic_lagging(&self, name: &str, bytes: &[u8]) -> Result<()> {
        self.refuse_link(name)?;
        let temp = format!("{TEMP_PREFIX}{}", unique_stamp());
        let mut file = self.create_exclusive(&temp, 0o644)?;
        let written = self
            .fill_with(&temp, &mut file, bytes, Durability::Lagging)
            .and_then(|()| self.rename(&temp, self, name));
        if written.is_err() {
            let _ = self.remove(&temp);
        }
        written
    }

    /// Renames `from` here to `to` in `target` (both in one file system).
    pub fn rename(&self, from: &str, target: &Dir, to: &str) -> Result<()> {
        rustix::fs::renameat(&self.fd, from, &target.fd, to)
            .map_err(|e| StateError::from_errno(target.join(to), e))
    }

    /// Renames `from` to `to` in this directory unless `to` exists: `Ok(false)` then.
    pub fn rename_noreplace(&self, from: &str, to: &str) -> Result<bool> {
        match rustix::fs::renameat_with(&self.fd, from, &self.fd, to, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            Err(e) => Err(StateError::from_errno(self.join(to), e)),
        }
    }

    /// Removes the file (or symlink) `name`; a missing one is fine.
    pub fn remove(&self, name: &str) -> Result<()> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(StateError::from_errno(self.join(name), e)),
        }
    }

    /// Removes the empty directory `name`; a missing one is fine.
    pub fn remove_dir(&self, name: &str) -> Result<()> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(StateError::from_errno(self.join(name), e)),
        }
    }

    /// The names in this directory (not `.` or `..`), read through the
    /// handle; names that are not UTF-8 are left out (Trellis never makes one).
    pub fn names(&self) -> Result<Vec<String>> {
        let io = |e: Errno| StateError::from_errno(self.path.clone(), e);
        let fd = rustix::fs::openat(
            &self.fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(io)?;
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::new(fd).map_err(io)? {
            let entry = entry.map_err(io)?;
            if let Ok(name) = entry.file_name().to_str()
                && name != "."
                && name != ".."
            {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    /// Makes renames and creations in this directory durable.
    pub fn sync(&self) -> Result<()> {
        rustix::fs::fsync(&self.fd).map_err(|e| StateError::Io {
            path: self.path.clone(),
            source: e.into(),
        })
    }

    /// Whether this handle is still the directory at its path (same device
    /// and inode), i.e. it was not deleted or replaced since it was opened.
    pub fn still_at_path(&self) -> bool {
        let Ok(held) = rustix::fs::fstat(&self.fd) else {
            return false;
        };
        match rustix::fs::lstat(&self.path) {
            Ok(now) => now.st_dev == held.st_dev && now.st_ino == held.st_ino,
            Err(_) => false,
        }
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A stamp for temp names no other process or moment shares: the process
/// id and the time in nanoseconds.
/// Whether a write reaches the disk before it returns.
#[derive(Clone, Copy)]
enum Durability {
    Synced,
    Lagging,
}

pub fn unique_stamp() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos:x}", std::process::id())
}

/// Opens the workspace's `.trellis/` (creating it and its `.gitignore`) under
/// the canonical workspace `root`; a symlink there is refused before
/// anything is written.
pub fn open_state(root: &Path) -> Result<Dir> {
    let state = Dir::open_trusted(root)?.child(STATE_DIR, true)?;
    state.create_if_missing(".gitignore", GITIGNORE)?;
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    const ONE_TABLE: Schema = Schema {
        version: 1,
        sql: "CREATE TABLE IF NOT EXISTS t (x INTEGER);",
    };

    #[test]
    fn a_symlinked_state_dir_is_refused_and_nothing_is_written_through_it() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        symlink(elsewhere.path(), root.path().join(STATE_DIR)).unwrap();
        let err = open_state(root.path()).unwrap_err();
        assert!(
            matches!(&err, StateError::Symlink(p) if p.ends_with(STATE_DIR)),
            "{err:?}"
        );
        assert!(err.to_string().contains(".trellis"), "{err}");
        assert_eq!(fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_database_opens_in_wal_mode_and_a_linked_journal_file_is_refused_by_name() {
        let root = tempfile::tempdir().unwrap();
        let state = open_state(root.path()).unwrap();
        let conn = state.open_database("fresh.db", &ONE_TABLE).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");

        let victim = root.path().join("other-app.sqlite");
        fs::write(&victim, b"another application's data").unwrap();
        symlink(&victim, state.join("linked.db-wal")).unwrap();
        let err = state.open_database("linked.db", &ONE_TABLE).unwrap_err();
        assert!(
            matches!(&err, DatabaseError::State(StateError::Symlink(p)) if *p == state.join("linked.db-wal")),
            "{err:?}"
        );
        let DatabaseError::State(err) = err else {
            unreachable!("matched above")
        };
        assert!(err.to_string().contains("linked.db-wal"), "{err}");
        assert_eq!(fs::read(&victim).unwrap(), b"another application's data");
        assert_eq!(
            state.kind("linked.db").unwrap(),
            None,
            "nothing was created beside the link"
        );
    }

    #[test]
    fn files_are_neither_read_nor_written_through_symlinks() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        let state = open_state(root.path()).unwrap();
        symlink(&victim, state.join("index")).unwrap();
        assert!(matches!(state.read("index"), Err(StateError::Symlink(_))));
        assert!(matches!(
            state.refuse_link("index"),
            Err(StateError::Symlink(_))
        ));
        assert!(matches!(
            state.create_if_missing("index", b"x"),
            Err(StateError::Symlink(_))
        ));
        assert!(matches!(
            state.write_atomic("index", b"new", 0o644),
            Err(StateError::Symlink(_))
        ));
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        let names: Vec<_> = fs::read_dir(state.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "only .gitignore and the link: {names:?}");
        fs::remove_file(state.join("index")).unwrap();
        state.write_atomic("index", b"new", 0o644).unwrap();
        assert_eq!(state.read("index").unwrap().unwrap(), b"new");
    }

    #[test]
    fn descend_refuses_a_symlinked_component_and_creates_missing_ones() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), root.path().join("escape")).unwrap();
        let top = Dir::open_trusted(root.path()).unwrap();
        assert!(matches!(
            top.descend("escape/inner", true),
            Err(StateError::Symlink(_))
        ));
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
        let made = top.descend("a/b", true).unwrap();
        assert!(made.still_at_path());
        fs::remove_dir(root.path().join("a/b")).unwrap();
        assert!(!made.still_at_path());
    }

    #[test]
    fn rename_noreplace_never_replaces() {
        let root = tempfile::tempdir().unwrap();
        let dir = Dir::open_trusted(root.path()).unwrap();
        let staged = dir.stage(b"new", 0o640).unwrap();
        fs::write(root.path().join("t"), b"user").unwrap();
        assert!(!dir.rename_noreplace(&staged, "t").unwrap());
        assert_eq!(fs::read(root.path().join("t")).unwrap(), b"user");
        fs::remove_file(root.path().join("t")).unwrap();
        assert!(dir.rename_noreplace(&staged, "t").unwrap());
        assert!(matches!(
            dir.kind("t").unwrap(),
            Some(Kind::File { mode: 0o640, .. })
        ));
    }
}
