//! Builds a slot where the user's workspace is (Linux): cargo in a slot
//! runs in a private mount namespace in which the slot is mounted over the
//! user's workspace root and the slot's target directory over the user's
//! target directory, so rustc sees the very paths of the user's own builds.
//!
//! Why: rustc's incremental state hashes the working directory and the
//! paths of the target directory (`--out-dir`, `-L`, `--extern`). A slot at
//! another path throws the user's state away and compiles every workspace
//! member from nothing, even when the user built that exact code a minute
//! ago. Seen at the user's paths, a slot whose target directory starts with
//! a copy of the user's `incremental/` ([`super::seed`]) recompiles only
//! what differs. Correctness stays rustc's: incremental reuse is checked
//! query by query against the slot's own sources, as it is in place.
//!
//! Confinement: the mounts exist only in the namespace of the one cargo
//! process tree; the user's files are shadowed there, never reachable
//! through the mounted paths, and never written (the mounts point at the
//! slot's directories). A namespace is made with an unprivileged user
//! namespace that maps the user's own uid and gid to themselves, so tests
//! run as the user, not as a pretend root. Where user namespaces are not
//! allowed (other systems, hardened kernels, some containers),
//! [`super::sandbox::mirror_available`]
//! says so once and slots build at their own paths, as before.
//!
//! The mounts are made by the run's sandbox, in the namespaces it enters
//! (`sensor/sandbox/namespace.rs`); this module plans them.
//!
//! # Architecture invariant
//!
//! A mirrored build sees the workspace's path, writes only into the slot, and
//! leaves the user's incremental state intact; a refused namespace falls back
//! (`slots_at_workspace_path.rs`:
//! `a_slot_builds_at_the_workspace_path_and_writes_only_into_the_slot`,
//! `a_slot_that_cannot_enter_its_namespace_is_built_at_its_own_path`,
//! `a_diagnostic_named_by_the_workspace_path_is_the_workspaces_file`,
//! `a_slot_rebuilding_a_changed_member_leaves_the_users_incremental_state_intact`).

use std::path::{Path, PathBuf};

/// One build's mounts: `slot` over `root`, and `slot_target` over
/// `user_target` (the cargo target directory the build is told to use).
#[derive(Clone, Debug)]
pub struct Mirror {
    pub root: PathBuf,
    pub user_target: PathBuf,
    slot: PathBuf,
    slot_target: PathBuf,
    /// Where `slot_target` is mounted, resolved before the slot covers the
    /// root: in the slot for a target directory inside the workspace.
    target_point: PathBuf,
    /// The mount point this plan made in the slot, removed by [`Self::tidy`].
    made: Option<PathBuf>,
}

impl Mirror {
    /// Plans the mounts for building `slot` as if it were `root`, with the
    /// slot's `slot_target` seen as `user_target`. `None` (build at the
    /// slot's own paths) when the slot is the workspace itself, or when the
    /// mount point of an in-workspace target directory cannot be a plain
    /// directory of the slot (a symlink or a file is there).
    pub fn plan(root: &Path, slot: &Path, user_target: &Path, slot_target: &Path) -> Option<Self> {
        let root = std::fs::canonicalize(root).ok()?;
        let slot = std::fs::canonicalize(slot).ok()?;
        // The user's target directory must exist: it is a mount point when
        // it lies outside the workspace, and nothing is reused otherwise.
        let user_target = std::fs::canonicalize(user_target).ok()?;
        if root == slot {
            return None;
        }
        // The target's mount point as the slot sees it: inside the slot when
        // the user's target directory is inside the workspace.
        let inside = user_target
            .strip_prefix(&root)
            .ok()
            .map(|rel| slot.join(rel));
        let target_point = inside.clone().unwrap_or_else(|| user_target.clone());
        let made = match &inside {
            Some(point) if std::fs::symlink_metadata(point).is_err() => {
                std::fs::create_dir_all(point).ok()?;
                Some(point.clone())
            }
            _ => None,
        };
        let plain_dir = std::fs::symlink_metadata(&target_point).is_ok_and(|m| m.is_dir());
        if !plain_dir {
            return None;
        }
        std::fs::create_dir_all(slot_target).ok()?;
        Some(Self {
            root,
            slot,
            user_target,
            slot_target: slot_target.to_path_buf(),
            target_point,
            made,
        })
    }

    /// The slot the build runs in, as the mounts see it.
    pub(super) fn slot(&self) -> &Path {
        &self.slot
    }

    /// Leaves the slot as it was found: removes the mount point the plan
    /// made, when the build left it empty (it does: the build wrote into
    /// the mount, not into the directory under it).
    pub fn tidy(&self) {
        if let Some(point) = &self.made {
            let _ = std::fs::remove_dir(point);
        }
    }

    /// The bind mounts that show the slot at the user's paths, in order:
    /// `(source, mount point, recursive)`: the target directory first (its
    /// source and mount point resolved before the workspace root is
    /// covered), then the slot over the root. Made by the run's sandbox
    /// (`sensor/sandbox/namespace.rs`), which then enters [`Mirror::root`].
    pub(super) fn binds(&self) -> [(&Path, &Path, bool); 2] {
        [
            (&self.slot_target, &self.target_point, false),
            (&self.slot, &self.root, true),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_that_is_the_workspace_builds_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::create_dir(&target).unwrap();
        assert!(Mirror::plan(dir.path(), dir.path(), &target, &target).is_none());
    }

    #[test]
    fn a_symlink_where_the_target_mounts_in_the_slot_refuses_the_mirror() {
        let dir = tempfile::tempdir().unwrap();
        let [root, slot, elsewhere] = ["root", "slot", "elsewhere"].map(|n| dir.path().join(n));
        for d in [&root, &slot, &elsewhere, &root.join("target")] {
            std::fs::create_dir(d).unwrap();
        }
        std::os::unix::fs::symlink(&elsewhere, slot.join("target")).unwrap();
        let slot_target = dir.path().join("slot-target");
        assert!(Mirror::plan(&root, &slot, &root.join("target"), &slot_target).is_none());
        std::fs::remove_file(slot.join("target")).unwrap();
        let plan = Mirror::plan(&root, &slot, &root.join("target"), &slot_target).unwrap();
        assert_eq!(plan.slot, std::fs::canonicalize(&slot).unwrap());
        assert!(
            slot.join("target").is_dir(),
            "the mount point is made in the slot"
        );
        plan.tidy();
        assert!(!slot.join("target").exists(), "and removed after the build");
    }
}
