//! Where branch workspaces live: reusable slots in the user's cache directory.
//!
//! A slot that still exists is synced, not recreated, for the next branch,
//! so the files a candidate does not touch keep their mtimes and cargo's
//! incremental state stays warm: measuring a branch costs about an
//! incremental check. A branch that is not selected or is abandoned loses
//! its slot (PSP-10 system 19); the shared target directory keeps the
//! dependencies built either way.

use std::path::{Path, PathBuf};

use crate::digest::CanonicalHasher;

/// The slot directories of one workspace.
#[derive(Clone, Debug)]
pub struct Slots {
    base: PathBuf,
    /// The workspace's canonical path, recorded in [`OWNER_FILE`].
    workspace: PathBuf,
}

/// The file in a slot set naming the workspace it belongs to (its canonical
/// path), rewritten whenever a lock is taken, so its mtime says when the
/// set was last used: `trellis gc` removes sets whose workspace is gone.
pub const OWNER_FILE: &str = "workspace";

/// Marks a slot set as a cache, so backup tools and Trellis's own
/// snapshots (a cache directory inside the workspace) leave it out.
const CACHEDIR_TAG: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55\n\
# This directory holds Trellis branch workspaces; see `trellis gc`.\n";

/// Overrides the cache directory (tests, CI, read-only homes).
pub const CACHE_ENV: &str = "TRELLIS_CACHE_DIR";

impl Slots {
    /// `$TRELLIS_CACHE_DIR` or the platform cache dir, then `trellis/ws-<id>`
    /// where the id is derived from the workspace's canonical path.
    pub fn for_workspace(workspace: &Path) -> Slots {
        let cache = std::env::var_os(CACHE_ENV)
            .map(PathBuf::from)
            .or_else(|| dirs::cache_dir().map(|d| d.join("trellis")))
            .unwrap_or_else(|| workspace.join(".trellis").join("cache"));
        let canonical = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.to_path_buf());
        let id = CanonicalHasher::new("trellis.workspace-id.v1")
            .bytes(canonical.as_os_str().as_encoded_bytes())
            .finish()
            .short(16);
        Slots {
            base: cache.join(format!("ws-{id}")),
            workspace: canonical,
        }
    }

    /// The slot set's directory (`<cache>/trellis/ws-<id>`).
    pub fn dir(&self) -> &std::path::Path {
        &self.base
    }

    /// The slot where the user's view is measured by `check`.
    pub fn view(&self) -> PathBuf {
        self.base.join("view")
    }

    /// Branch slot `index` (0-based; at most three are used).
    pub fn branch(&self, index: usize) -> PathBuf {
        self.base.join(format!("branch-{}", index + 1))
    }

    /// The cargo target directory shared by the branch slots. Slots have
    /// distinct paths, so their own crates never collide, while registry
    /// dependencies are built once.
    pub fn branch_target(&self) -> PathBuf {
        self.base.join("target")
    }

    /// The file `lock(name)` locks.
    pub fn lock_path(&self, name: &str) -> std::path::PathBuf {
        self.base.join(format!("{name}.lock"))
    }

    /// Takes the process-wide lock named `name` (`view`, `branches`) on these
    /// slots, waiting while another `trellis` process (a CLI run beside the
    /// editor's server) holds it. Released when the returned file drops.
    pub fn lock(&self, name: &str) -> std::io::Result<std::fs::File> {
        std::fs::create_dir_all(&self.base)?;
        self.mark()?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.lock_path(name))?;
        file.lock()?;
        Ok(file)
    }

    /// Records the owner (and the cache tag) in the slot set's directory.
    fn mark(&self) -> std::io::Result<()> {
        let tag = self.base.join("CACHEDIR.TAG");
        if !tag.exists() {
            std::fs::write(tag, CACHEDIR_TAG)?;
        }
        crate::snapshot::fsutil::write_file_atomic_unconfined(
            &self.base.join(OWNER_FILE),
            self.workspace.as_os_str().as_encoded_bytes(),
            0o644,
        )
        .map_err(std::io::Error::other)
    }

    /// The view slot's own target directory, so sensing the user's view is
    /// never blocked behind a running repair's cargo lock.
    pub fn view_target(&self) -> PathBuf {
        self.base.join("view-target")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_lock_excludes_another_holder_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let slots = Slots {
            base: dir.path().join("ws"),
            workspace: dir.path().to_path_buf(),
        };
        let held = slots.lock("branches").unwrap();
        let other = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("ws/branches.lock"))
            .unwrap();
        assert!(matches!(
            other.try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        drop(held);
        other.try_lock().expect("free once the holder is gone");
    }
}
