//! What lies outside every slot and must stay as it was while a repair
//! runs its slots' code: the second line behind the sandbox
//! (`sensor/sandbox`), which keeps a slot's processes from writing there
//! in the first place.
//!
//! Two things are checked when a repair's search ends, before anything can
//! be promoted:
//!
//! - **The seed store**, always. Its entries are the user's own build
//!   artifacts (hard links), each named by its size and modification time
//!   when it was linked (`sensor/seed.rs`). One that differs was written
//!   in place, and so was the user's file: nothing that rebuilds an
//!   artifact writes into it. It is restored by removing the entry and the
//!   user's file of the same inode, which cargo then builds again, instead
//!   of failing on it (E0786) until `cargo clean`.
//! - **The user's environments**, where code a model wrote ran without a
//!   file sandbox (`[sandbox] require = false` on a system without one):
//!   the virtualenvs and `node_modules` the slots use in place, two levels
//!   deep. An entry that appeared while the repair ran (a planted `.pth`
//!   file, a package) is removed; a change to one that was there is
//!   reported, since what it was cannot be known.
//!
//! Either way the repair fails with [`Breach`]: it is refused in the
//! ledger, nothing is promoted, and the front ends say what changed and
//! what was put back.
//!
//! # Architecture invariant
//!
//! A shared artifact written in place, and a file unconfined model code plants
//! in the user's virtualenv, fail the repair and are put back (`sandbox.rs`:
//! `a_shared_artifact_written_in_place_fails_the_repair_and_is_restored`,
//! `unconfined_model_code_that_plants_a_file_in_the_venv_fails_the_repair_and_it_is_removed`).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// What changed outside every slot, and what of it was put back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Breach {
    /// Each path that changed, with how.
    pub changed: Vec<String>,
    /// Each path restored (removed, so its owner rebuilds or reinstalls it).
    pub restored: Vec<String>,
}

impl Breach {
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty()
    }

    /// This and `other` together.
    pub fn and(mut self, other: Breach) -> Breach {
        self.changed.extend(other.changed);
        self.restored.extend(other.restored);
        self
    }
}

/// The seed store's entries written in place since they were linked,
/// each removed with the user's file of the same inode in `user_target`.
pub fn check_seed_store(store: &Path, user_target: &Path) -> std::io::Result<Breach> {
    let mut breach = Breach::default();
    for written in crate::sensor::seed::written_in_place(store)? {
        let users = files_with_inode(user_target, written.inode);
        for user in &users {
            breach
                .changed
                .push(format!("{} (written in place)", user.display()));
            if std::fs::remove_file(user).is_ok() {
                breach.restored.push(format!(
                    "{} (removed: cargo builds it again)",
                    user.display()
                ));
            }
        }
        if users.is_empty() {
            breach.changed.push(format!(
                "{} (a build artifact the slots shared, written in place)",
                written.entry.display()
            ));
        }
        let _ = std::fs::remove_file(&written.entry);
    }
    Ok(breach)
}

/// Every file below `dir` whose device and inode are `inode`.
fn files_with_inode(dir: &Path, inode: (u64, u64)) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if (meta.dev(), meta.ino()) == inode {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    found
}

/// The directories a repair's unconfined code could have changed, listed
/// two levels deep when the repair starts.
#[derive(Debug)]
pub struct Watch {
    listed: BTreeMap<PathBuf, Stamp>,
    dirs: Vec<PathBuf>,
}

/// What an entry was: enough to tell a file changed. A directory is only
/// there or not: its own times change with what appears in it, which is
/// told apart entry by entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stamp {
    Dir,
    File {
        len: u64,
        modified: (i64, i64),
        inode: u64,
    },
}

/// How deep a watch lists: `site-packages/<package>/` and
/// `node_modules/<scope>/<package>`.
const DEPTH: usize = 2;

impl Watch {
    /// Lists `dirs` (those that exist) as they are now.
    pub fn begin(dirs: Vec<PathBuf>) -> Self {
        let dirs: Vec<PathBuf> = dirs.into_iter().filter(|d| d.is_dir()).collect();
        let listed = list(&dirs);
        Self { listed, dirs }
    }

    /// What changed since [`Watch::begin`], with every entry that appeared
    /// meanwhile removed.
    pub fn end(self) -> Breach {
        let now = list(&self.dirs);
        let mut breach = Breach::default();
        let mut removed: Vec<&Path> = Vec::new();
        for (path, stamp) in &now {
            match self.listed.get(path) {
                // Went with the directory that appeared around it.
                None if removed.iter().any(|r| path.starts_with(r)) => {}
                None => {
                    breach
                        .changed
                        .push(format!("{} (appeared)", path.display()));
                    if crate::snapshot::fsutil::remove_if_present(path).is_ok() {
                        breach
                            .restored
                            .push(format!("{} (removed)", path.display()));
                        removed.push(path);
                    }
                }
                Some(before) if before != stamp => {
                    breach.changed.push(format!("{} (changed)", path.display()));
                }
                Some(_) => {}
            }
        }
        for path in self.listed.keys().filter(|p| !now.contains_key(*p)) {
            breach.changed.push(format!("{} (removed)", path.display()));
        }
        breach
    }
}

/// Every entry of `dirs` down to [`DEPTH`], without following links.
fn list(dirs: &[PathBuf]) -> BTreeMap<PathBuf, Stamp> {
    let mut listed = BTreeMap::new();
    let mut pending: Vec<(PathBuf, usize)> = dirs.iter().map(|d| (d.clone(), 0)).collect();
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            let stamp = if meta.is_dir() {
                if depth + 1 < DEPTH {
                    pending.push((entry.path(), depth + 1));
                }
                Stamp::Dir
            } else {
                Stamp::File {
                    len: meta.len(),
                    modified: (meta.mtime(), meta.mtime_nsec()),
                    inode: meta.ino(),
                }
            };
            listed.insert(entry.path(), stamp);
        }
    }
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_that_appears_is_removed_and_a_changed_one_reported() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("site-packages");
        std::fs::create_dir_all(site.join("pkg")).unwrap();
        std::fs::write(site.join("pkg/__init__.py"), "").unwrap();
        std::fs::write(site.join("kept.pth"), "a").unwrap();

        let watch = Watch::begin(vec![site.clone(), dir.path().join("missing")]);
        std::fs::write(site.join("x.pth"), "import os").unwrap();
        std::fs::write(site.join("pkg/planted.py"), "").unwrap();
        std::fs::write(site.join("kept.pth"), "ab").unwrap();
        let breach = watch.end();

        assert!(!site.join("x.pth").exists());
        assert!(!site.join("pkg/planted.py").exists());
        assert_eq!(breach.restored.len(), 2, "{breach:?}");
        assert!(
            breach
                .changed
                .iter()
                .any(|c| c.ends_with("kept.pth (changed)")),
            "{breach:?}"
        );
        assert_eq!(std::fs::read(site.join("kept.pth")).unwrap(), b"ab");
    }

    #[test]
    fn nothing_changed_is_no_breach() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "").unwrap();
        assert!(
            Watch::begin(vec![dir.path().to_path_buf()])
                .end()
                .is_empty()
        );
    }
}
