//! Where branch workspaces live: reusable slots in the user's cache directory.
//!
//! A slot that still exists is synced, not recreated, for the next branch,
//! so the files a candidate does not touch keep their mtimes and cargo's
//! incremental state stays warm: measuring a branch costs about an
//! incremental check. A branch that is not selected or is abandoned loses
//! its slot (PSP-10 system 19).
//!
//! Each slot sits at the end of a copy of the workspace's own ancestry
//! (`slots/view/home/me/src/app` for `/home/me/src/app`), so a path dependency
//! outside the workspace (`path = "../dep"`, `"../../x"`) resolves through
//! a symlink at the same relative place to the real directory, read-only:
//! it is never copied or edited. Cargo runs with one target directory per
//! slot below [`Slots::view_target`], seeded with the dependencies the
//! user or another slot already compiled (`sensor::cargo`). Every
//! `node_modules` of the workspace (the root's, and each package's own in a
//! monorepo) is no content of a snapshot: each slot links the user's at the
//! same place, read where it is (tools never write through a link,
//! `fsutil::confine`), and a link whose directory is gone is dropped.
//!
//! This module never writes outside the cache directory.
//!
//! # Architecture invariant
//!
//! No target directory is shared between two slots
//! (`engine/tests/it/slot_targets.rs`), members are built from the slot's sources
//! (`slots_warm::a_member_is_built_from_the_slots_sources_even_when_the_users_target_seeds_the_slot`),
//! a path dependency outside the workspace is read where it is
//! (`a_path_dependency_outside_the_workspace_resolves_to_the_real_directory_read_only`),
//! and every `node_modules` is linked, never copied or written through
//! (`slots::tests::every_slot_links_the_users_node_modules_and_drops_the_link_once_it_is_gone`,
//! `a_packages_own_node_modules_is_linked_and_its_link_dropped_with_the_package`,
//! `typescript_more::a_packages_own_node_modules_is_linked_into_every_slot_never_copied`,
//! `typescript::repair_commits_the_language_services_import_and_the_projects_checks_pass`,
//! `a_model_fixes_the_failing_test_in_its_branch_and_cannot_write_into_node_modules`).
//! The locks keep two processes out of one slot
//! (`slots::tests::a_slot_lock_excludes_another_holder_until_dropped`).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::digest::CanonicalHasher;
use crate::snapshot::{ContentSource, Snapshot};

/// The slot directories of one workspace.
#[derive(Clone, Debug)]
pub struct Slots {
    base: PathBuf,
    /// The workspace's canonical path, recorded in [`OWNER_FILE`].
    root: PathBuf,
}

/// The file in a slot set naming the workspace it belongs to (its canonical
/// path), rewritten whenever a lock is taken, so its mtime says when the
/// set was last used: `trellis gc` removes sets whose workspace is gone.
pub const OWNER_FILE: &str = "workspace";

/// Marks a slot set as a cache, so backup tools and Trellis's own
/// snapshots (a cache directory inside the workspace) leave it out, and as
/// Trellis's own: `trellis gc` removes only a directory holding exactly
/// this tag ([`is_slot_set`]), which every Trellis that collects has written.
const CACHEDIR_TAG: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55\n\
# This directory holds Trellis branch workspaces; see `trellis gc`.\n";

/// Whether `dir` is a slot set Trellis made: it holds, as a regular file
/// (not a link), exactly the `CACHEDIR.TAG` Trellis writes. A directory
/// merely named like one (`ws-notes`), or tagged by another tool, is not.
pub fn is_slot_set(dir: &Path) -> bool {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    // Never a link, and never blocking on a FIFO planted as the tag.
    let Ok(file) = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(dir.join("CACHEDIR.TAG"))
    else {
        return false;
    };
    if !file.metadata().is_ok_and(|meta| meta.is_file()) {
        return false;
    }
    let mut tag = Vec::new();
    file.take(CACHEDIR_TAG.len() as u64 + 1)
        .read_to_end(&mut tag)
        .is_ok_and(|_| tag == CACHEDIR_TAG)
}

/// Overrides the cache directory (tests, CI, read-only homes).
pub const CACHE_ENV: &str = "TRELLIS_CACHE_DIR";

/// Where every workspace's slot sets live: `$TRELLIS_CACHE_DIR`, or the
/// platform cache directory's `trellis/`, or, without one, the workspace's
/// own `.trellis/cache`.
pub fn cache_root(workspace: &Path) -> PathBuf {
    std::env::var_os(CACHE_ENV)
        .map(PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|d| d.join("trellis")))
        .unwrap_or_else(|| workspace.join(".trellis").join("cache"))
}

/// Branch slots used at most (`exploration.max_branches` is at most 3).
const MAX_BRANCH_SLOTS: usize = 3;

impl Slots {
    /// `$TRELLIS_CACHE_DIR` or the platform cache dir, then `trellis/ws-<id>`
    /// where the id is derived from the workspace's canonical path.
    pub fn for_workspace(workspace: &Path) -> Slots {
        let cache = cache_root(workspace);
        let canonical = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.to_path_buf());
        let id = CanonicalHasher::new("trellis.workspace-id.v1")
            .bytes(canonical.as_os_str().as_encoded_bytes())
            .finish()
            .short(16);
        Slots {
            base: cache.join(format!("ws-{id}")),
            root: canonical,
        }
    }

    /// The slot set's directory (`<cache>/trellis/ws-<id>`).
    pub fn dir(&self) -> &std::path::Path {
        &self.base
    }

    /// `<base>/slots/<name>/<the workspace's path, without its leading />`.
    /// (Not `<base>/<name>`, where an older Trellis kept a slot's copy: its
    /// `Cargo.toml` would sit above the new slot, and cargo reads manifests
    /// above a package.)
    fn slot(&self, name: &str) -> PathBuf {
        let mut slot = self.base.join("slots").join(name);
        slot.extend(
            self.root
                .components()
                .filter(|c| matches!(c, Component::Normal(_))),
        );
        slot
    }

    /// The slot where the user's view is measured by `check`.
    pub fn view(&self) -> PathBuf {
        self.slot("view")
    }

    /// Branch slot `index` (0-based; at most three are used).
    pub fn branch(&self, index: usize) -> PathBuf {
        self.slot(&format!("branch-{}", index + 1))
    }

    /// The base of the branch slots' target directories: the same as the
    /// view's, since cargo runs with one target directory per slot below it
    /// (`sensor::cargo::tree_target`), so a branch never waits on the view's
    /// cargo lock, and slots share dependencies through seeding.
    pub fn branch_target(&self) -> PathBuf {
        self.view_target()
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
        if !is_slot_set(&self.base) {
            crate::snapshot::fsutil::write_file_atomic_unconfined(
                &self.base.join("CACHEDIR.TAG"),
                CACHEDIR_TAG,
                0o644,
            )
            .map_err(std::io::Error::other)?;
        }
        crate::snapshot::fsutil::write_file_atomic_unconfined(
            &self.base.join(OWNER_FILE),
            self.root.as_os_str().as_encoded_bytes(),
            0o644,
        )
        .map_err(std::io::Error::other)
    }

    /// The base of every slot's own target directory.
    pub fn view_target(&self) -> PathBuf {
        self.base.join("targets")
    }

    /// Links, beside every slot's ancestry, each directory outside the
    /// workspace that a manifest of `snapshot` names as a path dependency,
    /// so `../dep` in a slot is the user's `../dep`, and, in every slot,
    /// each `node_modules` to the workspace's own at the same place (the
    /// root's, and every one in a directory of `snapshot`), so a branch
    /// measures the packages the user installed without a copy per branch.
    /// Existing links are refreshed, and those linked last time whose
    /// directory is gone are removed. Nothing outside the cache directory
    /// is written.
    pub fn link_outside_paths(
        &self,
        snapshot: &Snapshot,
        source: &dyn ContentSource,
    ) -> io::Result<()> {
        let mut manifests = Vec::new();
        for (rel, entry) in &snapshot.entries {
            if rel == "Cargo.toml" || rel.ends_with("/Cargo.toml") {
                let bytes = source.read(rel, entry).map_err(io::Error::other)?;
                manifests.push((rel.clone(), String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
        let links = outside_links(&self.root, &manifests);
        let record = self.base.join(NODE_MODULES_RECORD);
        let before = read_record(&record)?;
        let linked: BTreeSet<String> = snapshot_dirs(snapshot)
            .into_iter()
            .filter(|dir| self.root.join(dir).join(NODE_MODULES).is_dir())
            .collect();
        let slots = std::iter::once(self.view())
            .chain((0..MAX_BRANCH_SLOTS).map(|index| self.branch(index)));
        for slot in slots {
            for link in &links {
                let Some(parent) = slot.ancestors().nth(link.up) else {
                    continue;
                };
                std::fs::create_dir_all(parent)?;
                refresh_link(&parent.join(&link.name), Some(&link.real))?;
            }
            for dir in before.union(&linked) {
                let real = self.root.join(dir).join(NODE_MODULES);
                let wanted = linked.contains(dir).then_some(real.as_path());
                link_node_modules(&slot, dir, wanted)?;
            }
        }
        std::fs::create_dir_all(&self.base)?;
        let text: String = linked.iter().map(|dir| format!("{dir}\n")).collect();
        crate::snapshot::fsutil::write_file_atomic_unconfined(&record, text.as_bytes(), 0o644)
            .map_err(io::Error::other)
    }
}

impl Slots {
    /// The user's `node_modules` directories every slot links to (as
    /// recorded when they were last linked).
    pub fn linked_node_modules(&self) -> Vec<PathBuf> {
        read_record(&self.base.join(NODE_MODULES_RECORD))
            .unwrap_or_default()
            .into_iter()
            .map(|dir| self.root.join(dir).join(NODE_MODULES))
            .collect()
    }
}

/// The workspace's installed Node.js packages, at any depth: never in a
/// snapshot, and in every slot a link to the user's own directory, read
/// where it is.
const NODE_MODULES: &str = "node_modules";

/// The file in a slot set listing the directories (workspace-relative, the
/// root as empty) whose `node_modules` the slots link, so a link whose
/// directory left the workspace is still found and removed.
const NODE_MODULES_RECORD: &str = "node-modules-links";

/// The directories linked last time; none when nothing was recorded. A
/// line that is no safe relative path is skipped: the record is ours, and
/// nothing it says may reach outside a slot.
fn read_record(path: &Path) -> io::Result<BTreeSet<String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(err) => return Err(err),
    };
    Ok(text
        .lines()
        .filter(|dir| dir.is_empty() || crate::workspace_path::check_rel_path(dir).is_ok())
        .map(str::to_owned)
        .collect())
}

/// The workspace's root (as empty) and every directory holding an entry of
/// `snapshot`: where a `node_modules` of the user's can sit beside content.
fn snapshot_dirs(snapshot: &Snapshot) -> BTreeSet<String> {
    let mut dirs = BTreeSet::from([String::new()]);
    for rel in snapshot.entries.keys() {
        dirs.extend(rel.match_indices('/').map(|(at, _)| rel[..at].to_owned()));
    }
    dirs
}

/// Makes `dir/node_modules` in `slot` a link to `real`, or removes our link
/// there when `real` is `None`. A path through a link in the slot (the slot
/// still holds an older tree) is left: nothing is created or removed
/// through a link, and the next sync makes the directory real.
fn link_node_modules(slot: &Path, dir: &str, real: Option<&Path>) -> io::Result<()> {
    let rel = if dir.is_empty() {
        NODE_MODULES.to_owned()
    } else {
        format!("{dir}/{NODE_MODULES}")
    };
    let at = match crate::snapshot::fsutil::confine(slot, &rel) {
        Ok(at) => at,
        Err(crate::snapshot::SnapshotError::SymlinkInPath { .. }) => return Ok(()),
        Err(err) => return Err(io::Error::other(err)),
    };
    if real.is_some()
        && let Some(parent) = at.parent()
    {
        std::fs::create_dir_all(parent)?;
    }
    refresh_link(&at, real)
}

/// Makes `at` a link to `real`, or removes a link there when `real` is
/// `None`. Something at `at` that is not a link is nothing of ours: it is
/// left, and the tool will say what it cannot read.
fn refresh_link(at: &Path, real: Option<&Path>) -> io::Result<()> {
    match std::fs::read_link(at) {
        Ok(current) if Some(current.as_path()) == real => return Ok(()),
        Ok(_) => std::fs::remove_file(at)?,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) if err.kind() == io::ErrorKind::InvalidInput => return Ok(()),
        Err(err) => return Err(err),
    }
    match real {
        Some(real) => std::os::unix::fs::symlink(real, at),
        None => Ok(()),
    }
}

/// A link beside a slot's ancestry: at the slot's `up`-th ancestor, `name`
/// points at `real`, the directory of the same name beside the workspace's
/// `up`-th ancestor.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct OutsideLink {
    up: usize,
    name: OsString,
    real: PathBuf,
}

/// The links that make every path dependency of `manifests` (workspace-
/// relative path, text) that leaves `root` resolve in a slot. A dependency
/// inside the workspace needs none; an unreadable manifest gives none (cargo
/// reports it).
fn outside_links(root: &Path, manifests: &[(String, String)]) -> BTreeSet<OutsideLink> {
    let root_parts: Vec<Component> = root.components().collect();
    let mut links = BTreeSet::new();
    for (rel, text) in manifests {
        let Ok(manifest) = text.parse::<toml::Table>() else {
            continue;
        };
        let dir = root.join(rel);
        let dir = dir.parent().unwrap_or(root);
        let mut paths = Vec::new();
        dependency_paths(&manifest, &mut paths);
        for path in paths {
            let target = normalize(&dir.join(path));
            let parts: Vec<Component> = target.components().collect();
            let common = root_parts
                .iter()
                .zip(&parts)
                .take_while(|(a, b)| a == b)
                .count();
            if common == root_parts.len() {
                continue; // inside the workspace
            }
            let Some(Component::Normal(name)) = parts.get(common) else {
                continue; // an ancestor of the workspace itself
            };
            let real: PathBuf = parts[..=common].iter().collect();
            links.insert(OutsideLink {
                up: root_parts.len() - common,
                name: name.to_os_string(),
                real,
            });
        }
    }
    links
}

/// Every `path` of a dependency in a manifest: in `[*dependencies]` tables
/// at any depth (`[target.'cfg(..)'.dependencies]`, `[workspace.dependencies]`)
/// and in `[patch.<source>]`.
fn dependency_paths<'a>(table: &'a toml::Table, out: &mut Vec<&'a str>) {
    for (key, value) in table {
        let Some(child) = value.as_table() else {
            continue;
        };
        if key.ends_with("dependencies") {
            deps_table_paths(child, out);
        } else if key == "patch" {
            for source in child.values().filter_map(toml::Value::as_table) {
                deps_table_paths(source, out);
            }
        } else {
            dependency_paths(child, out);
        }
    }
}

fn deps_table_paths<'a>(deps: &'a toml::Table, out: &mut Vec<&'a str>) {
    for spec in deps.values().filter_map(toml::Value::as_table) {
        if let Some(path) = spec.get("path").and_then(toml::Value::as_str) {
            out.push(path);
        }
    }
}

/// `a/b/../c` → `a/c`, lexically, as cargo resolves a dependency's path.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_lock_excludes_another_holder_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let slots = Slots {
            base: dir.path().join("ws"),
            root: dir.path().to_path_buf(),
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

    #[test]
    fn only_path_dependencies_leaving_the_workspace_are_linked() {
        let root = Path::new("/home/me/src/app");
        let manifests = vec![
            (
                "Cargo.toml".to_owned(),
                r#"
                [dependencies]
                dep = { path = "../dep" }
                inner = { path = "crates/inner" }
                serde = "1"
                [target.'cfg(unix)'.dev-dependencies]
                far = { path = "../../x/far" }
                [patch.crates-io]
                regex = { path = "../forks/regex" }
                [lib]
                path = "../../../elsewhere/lib.rs"
                "#
                .to_owned(),
            ),
            (
                "crates/inner/Cargo.toml".to_owned(),
                "[dependencies]\nup = { path = \"../../../dep\" }\nback = { path = \"../../../app/crates/b\" }\n".to_owned(),
            ),
            ("broken/Cargo.toml".to_owned(), "[dependencies".to_owned()),
        ];
        let links: Vec<(usize, String, String)> = outside_links(root, &manifests)
            .into_iter()
            .map(|l| {
                (
                    l.up,
                    l.name.to_string_lossy().into_owned(),
                    l.real.display().to_string(),
                )
            })
            .collect();
        assert_eq!(
            links,
            [
                (1, "dep".to_owned(), "/home/me/src/dep".to_owned()),
                (1, "forks".to_owned(), "/home/me/src/forks".to_owned()),
                (2, "x".to_owned(), "/home/me/x".to_owned()),
            ]
        );
    }

    #[test]
    fn every_slot_links_the_users_node_modules_and_drops_the_link_once_it_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("app");
        std::fs::create_dir_all(root.join("node_modules/left-pad")).unwrap();
        std::fs::write(root.join("package.json"), "{}").unwrap();
        let slots = Slots {
            base: dir.path().join("cache"),
            root: root.clone(),
        };
        let snapshot = crate::snapshot::Snapshotter::new(&root, None)
            .snapshot(&crate::snapshot::Overlay::default())
            .unwrap();
        let source = crate::snapshot::DirSource::new(root.clone(), Default::default());
        slots.link_outside_paths(&snapshot, &source).unwrap();
        for slot in [slots.view(), slots.branch(0), slots.branch(2)] {
            let link = slot.join(NODE_MODULES);
            assert_eq!(std::fs::read_link(&link).unwrap(), root.join(NODE_MODULES));
            assert!(link.join("left-pad").is_dir());
        }
        std::fs::remove_dir_all(root.join(NODE_MODULES)).unwrap();
        slots.link_outside_paths(&snapshot, &source).unwrap();
        assert!(std::fs::symlink_metadata(slots.view().join(NODE_MODULES)).is_err());
    }

    #[test]
    fn a_packages_own_node_modules_is_linked_and_its_link_dropped_with_the_package() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("app");
        std::fs::create_dir_all(root.join("packages/a/node_modules/greet")).unwrap();
        std::fs::create_dir_all(root.join("packages/b/node_modules")).unwrap();
        std::fs::write(root.join("package.json"), "{}").unwrap();
        std::fs::write(root.join("packages/a/package.json"), "{}").unwrap();
        std::fs::write(root.join("packages/b/package.json"), "{}").unwrap();
        let slots = Slots {
            base: dir.path().join("cache"),
            root: root.clone(),
        };
        let link = |root: &Path| -> io::Result<()> {
            let snapshot = crate::snapshot::Snapshotter::new(root, None)
                .snapshot(&crate::snapshot::Overlay::default())
                .unwrap();
            let source = crate::snapshot::DirSource::new(root.to_path_buf(), Default::default());
            slots.link_outside_paths(&snapshot, &source)
        };
        link(&root).unwrap();
        for slot in [slots.view(), slots.branch(1)] {
            for package in ["packages/a", "packages/b"] {
                let at = slot.join(package).join(NODE_MODULES);
                assert_eq!(
                    std::fs::read_link(&at).unwrap(),
                    root.join(package).join(NODE_MODULES)
                );
            }
            assert!(
                std::fs::symlink_metadata(slot.join(NODE_MODULES)).is_err(),
                "the root has none"
            );
        }
        // One package's install removed, the other package gone with it.
        std::fs::remove_dir_all(root.join("packages/a/node_modules")).unwrap();
        std::fs::remove_dir_all(root.join("packages/b")).unwrap();
        link(&root).unwrap();
        for slot in [slots.view(), slots.branch(1)] {
            for package in ["packages/a", "packages/b"] {
                let at = slot.join(package).join(NODE_MODULES);
                assert!(std::fs::symlink_metadata(&at).is_err(), "{}", at.display());
            }
        }
        assert!(root.join("packages/a/package.json").is_file());
    }

    #[test]
    fn a_slot_ends_in_the_workspaces_own_ancestry() {
        let slots = Slots {
            base: PathBuf::from("/cache/ws-1"),
            root: PathBuf::from("/home/me/app"),
        };
        assert_eq!(
            slots.view(),
            Path::new("/cache/ws-1/slots/view/home/me/app")
        );
        assert_eq!(
            slots.branch(1),
            Path::new("/cache/ws-1/slots/branch-2/home/me/app")
        );
        assert_eq!(slots.branch_target(), slots.view_target());
    }
}
