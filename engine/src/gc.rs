//! Storage collection (`trellis gc`, and automatically after a repair):
//! removes what no live ledger fact or workspace needs from the
//! workspace's `.trellis/objects` and from the slot sets in the cache
//! directory.
//!
//! What is live is decided by two plain functions over what the edges
//! read: [`live_blobs`] over the ledger's rows, [`plan_slot_sets`] over
//! the cache directory's listing. The I/O around them ([`collect`]) must
//! never remove:
//!
//! - a blob an *unclosed* search forest may read back: the accepted states
//!   (`accepted_state_stored`) of that forest's node and generation, which
//!   a resumed repair rebuilds from (closed forests are never resumed, and
//!   replay reads only the ledger);
//! - any blob while a promotion journal is present (recovery reads the
//!   backups it names), or while a promotion or a repair of the workspace
//!   runs (its promotion lock, its `branches.lock`): a blob is written
//!   before the row that names it;
//! - a slot set another process holds (`view.lock` or `branches.lock`), or
//!   the current workspace's own;
//! - anything in the cache directory that is not a slot set Trellis marked
//!   as its own ([`crate::slots::is_slot_set`]: its `CACHEDIR.TAG`), however
//!   it is named (`ws-notes`), and never through a link;
//! - pinned prompt bundles (`.trellis/prompt-bundles/`): never touched;
//! - a seed-store entry the user's `target/` still has, or any while a
//!   process of the workspace's holds its slots (the store keeps the user's
//!   build artifacts the slots link to; one whose file the user removed or
//!   rebuilt is the store's alone, and goes: a slot linking it builds it).
//!
//! # Architecture invariant
//!
//! Collection never takes what resume reads or another process holds
//! (`gc::tests`; `lsp/tests/it/gc.rs`:
//! `a_killed_repairs_accepted_step_survives_gc_and_the_repair_continues`,
//! `gc_removes_the_slots_of_a_deleted_workspace_but_never_held_ones`,
//! `gc_removes_only_the_slot_sets_trellis_marked_as_its_own`,
//! `a_repair_collects_the_slots_of_a_deleted_workspace_when_it_ends`,
//! `a_cache_directory_inside_the_workspace_is_left_out_of_its_snapshots`,
//! `gc_frees_the_seeded_artifacts_the_users_target_no_longer_has`). It runs
//! after every repair, so a set's files are walked for its size only when the
//! size rule could remove a set
//! (`gc::tests::sizes_are_measured_only_when_the_size_rule_could_remove_a_set`).

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::digest::Digest;
use crate::ledger::{DecodedRow, LedgerEvent, Row, SearchEvent};
use crate::slots::{OWNER_FILE, Slots, is_slot_set};
use crate::statedir::{Dir, Kind};

/// Past this many bytes in the cache directory, idle slot sets of other
/// workspaces are removed too, least recently used first.
pub const CACHE_LIMIT_BYTES: u64 = 8 << 30;

/// A slot set without an owner record (being created right now, or whose
/// creation was cut short) is removed only once it has been idle this long.
pub const UNOWNED_GRACE: Duration = Duration::from_secs(60 * 60);

/// A live workspace's slot set is removed for space only once it has been
/// idle this long: it is a warm build cache worth keeping.
pub const LIVE_GRACE: Duration = Duration::from_secs(24 * 60 * 60);

/// The blobs a resumed repair may still read: every file of every stored
/// accepted state whose node and generation have a forest the ledger never
/// closed.
pub fn live_blobs(rows: &[Row]) -> BTreeSet<Digest> {
    let mut open: BTreeSet<(&str, u32)> = BTreeSet::new();
    let mut forests: std::collections::BTreeMap<&str, (&str, u32)> = Default::default();
    let mut closed: BTreeSet<&str> = BTreeSet::new();
    for row in rows {
        if let DecodedRow::Search { event, .. } = &row.event {
            match event {
                SearchEvent::SearchOpened {
                    forest_id,
                    node,
                    generation,
                    ..
                } => {
                    forests.insert(forest_id.as_str(), (node.as_str(), *generation));
                }
                SearchEvent::SearchClosed { forest_id, .. } => {
                    closed.insert(forest_id.as_str());
                }
                _ => {}
            }
        }
    }
    for (forest, key) in &forests {
        if !closed.contains(forest) {
            open.insert(*key);
        }
    }
    rows.iter()
        .filter_map(|row| match &row.event {
            DecodedRow::Ledger(LedgerEvent::AcceptedStateStored(stored))
                if open.contains(&(stored.node.as_str(), stored.generation)) =>
            {
                Some(stored.files.iter().map(|file| file.blob))
            }
            _ => None,
        })
        .flatten()
        .collect()
}

/// One slot set in the cache directory, as [`collect`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotSet {
    pub dir: PathBuf,
    /// The workspace its owner record names, if it has one.
    pub owner: Option<PathBuf>,
    /// Whether that workspace still exists.
    pub owner_exists: bool,
    /// Whether it is the slot set of the workspace being collected.
    pub current: bool,
    /// Whether another process holds one of its locks.
    pub busy: bool,
    /// How long since it was last used.
    pub idle: Duration,
    /// Its size, measured only when the size rule could remove a set
    /// ([`sizes_matter`]); 0 otherwise.
    pub bytes: u64,
}

/// Why a slot set is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoveReason {
    /// The workspace its owner record names no longer exists.
    WorkspaceGone,
    /// No owner record, and idle past [`UNOWNED_GRACE`].
    NoOwner,
    /// The cache is over [`CACHE_LIMIT_BYTES`] and this set, of another
    /// workspace, was idle past [`LIVE_GRACE`] (least recently used first).
    OverLimit,
}

/// Which slot sets of `sets` to remove, and why: sets of workspaces that
/// are gone or unowned (and idle), then, while the rest exceeds `limit`
/// bytes, the least recently used idle sets of other workspaces. Busy sets
/// and the current workspace's are never chosen.
pub fn plan_slot_sets(sets: &[SlotSet], limit: u64) -> Vec<(usize, RemoveReason)> {
    let mut plan = unused_sets(sets);
    let chosen: BTreeSet<usize> = plan.iter().map(|(index, _)| *index).collect();
    let mut remaining: u64 = sets
        .iter()
        .enumerate()
        .filter(|(index, _)| !chosen.contains(index))
        .map(|(_, set)| set.bytes)
        .sum();
    for index in size_candidates(sets, &chosen) {
        if remaining <= limit {
            break;
        }
        remaining -= sets[index].bytes;
        plan.push((index, RemoveReason::OverLimit));
    }
    plan
}

/// Whether the size rule of [`plan_slot_sets`] could remove any of `sets`:
/// only then are their sizes needed, and measuring one costs a walk of
/// all its files (tens of thousands in a real project's target directory),
/// after every repair.
pub fn sizes_matter(sets: &[SlotSet]) -> bool {
    let chosen = unused_sets(sets)
        .into_iter()
        .map(|(index, _)| index)
        .collect();
    !size_candidates(sets, &chosen).is_empty()
}

/// Whether a set may be removed at all: no other process holds it, and it
/// is not the current workspace's.
fn removable(set: &SlotSet) -> bool {
    !set.busy && !set.current
}

/// The sets removed whatever their size: their workspace is gone, or they
/// name none and were idle past [`UNOWNED_GRACE`].
fn unused_sets(sets: &[SlotSet]) -> Vec<(usize, RemoveReason)> {
    sets.iter()
        .enumerate()
        .filter(|(_, set)| removable(set))
        .filter_map(|(index, set)| match &set.owner {
            Some(_) if !set.owner_exists => Some((index, RemoveReason::WorkspaceGone)),
            None if set.idle >= UNOWNED_GRACE => Some((index, RemoveReason::NoOwner)),
            _ => None,
        })
        .collect()
}

/// The sets the size rule may remove, besides those `chosen` already:
/// idle past [`LIVE_GRACE`], longest idle first (the path settles ties, so
/// the plan is a function of the listing).
fn size_candidates(sets: &[SlotSet], chosen: &BTreeSet<usize>) -> Vec<usize> {
    let mut idle: Vec<usize> = (0..sets.len())
        .filter(|index| !chosen.contains(index))
        .filter(|&index| removable(&sets[index]) && sets[index].idle >= LIVE_GRACE)
        .collect();
    idle.sort_by(|&a, &b| {
        sets[b]
            .idle
            .cmp(&sets[a].idle)
            .then(sets[a].dir.cmp(&sets[b].dir))
    });
    idle
}

/// What a collection removed (or, in a dry run, would remove).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    pub objects: ObjectsReport,
    /// The seed store's entries no user file has any more.
    pub seeds: ObjectsReport,
    pub slot_sets: Vec<SlotSetRemoval>,
    /// Total bytes freed (or that would be).
    pub bytes_freed: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ObjectsReport {
    /// Blobs removed.
    pub removed: u64,
    pub bytes: u64,
    /// Blobs kept because a resumable repair may read them.
    pub kept: u64,
    /// Why the object store was left alone, when it was.
    pub skipped: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlotSetRemoval {
    pub path: PathBuf,
    pub workspace: Option<PathBuf>,
    pub bytes: u64,
    pub reason: RemoveReason,
}

/// Collects the workspace's object store (`state`, its `.trellis/`, whose
/// ledger holds `rows`) and the cache directory holding `slots`. With
/// `dry_run`, removes nothing and reports what it would remove.
pub fn collect(
    state: &Dir,
    rows: &[Row],
    slots: &Slots,
    dry_run: bool,
) -> std::io::Result<GcReport> {
    crate::failpoint::hit("gc-collect");
    let mut report = GcReport {
        dry_run,
        objects: collect_objects(state, rows, slots, dry_run)?,
        seeds: collect_seeds(slots, dry_run)?,
        ..GcReport::default()
    };
    if let Some(cache) = slots.dir().parent() {
        report.slot_sets = collect_slot_sets(cache, slots.dir(), dry_run)?;
    }
    report.bytes_freed = report.objects.bytes
        + report.seeds.bytes
        + report.slot_sets.iter().map(|s| s.bytes).sum::<u64>();
    Ok(report)
}

/// Removes the entries of the workspace's seed store that are the store's
/// alone (one link: the user's `target/` no longer has the file), while no
/// process of the workspace uses its slots.
fn collect_seeds(slots: &Slots, dry_run: bool) -> std::io::Result<ObjectsReport> {
    use std::os::unix::fs::MetadataExt as _;
    let skipped = |why: &str| ObjectsReport {
        skipped: Some(why.to_owned()),
        ..ObjectsReport::default()
    };
    let store = crate::sensor::cargo::seed_store(&slots.branch_target());
    let Ok(entries) = std::fs::read_dir(&store) else {
        return Ok(ObjectsReport::default());
    };
    let mut held = Vec::new();
    for lock in ["view.lock", "branches.lock"] {
        match try_lock(&slots.dir().join(lock))? {
            Some(lock) => held.push(lock),
            None => return Ok(skipped("a process of this workspace is using its slots")),
        }
    }
    let mut report = ObjectsReport::default();
    for entry in entries {
        let entry = entry?;
        let meta = entry.metadata()?;
        if !meta.is_file() || meta.nlink() > 1 {
            report.kept += u64::from(meta.is_file());
            continue;
        }
        if !dry_run {
            std::fs::remove_file(entry.path())?;
        }
        report.removed += 1;
        report.bytes += meta.len();
    }
    Ok(report)
}

fn collect_objects(
    state: &Dir,
    rows: &[Row],
    slots: &Slots,
    dry_run: bool,
) -> std::io::Result<ObjectsReport> {
    let skipped = |why: &str| ObjectsReport {
        skipped: Some(why.to_owned()),
        ..ObjectsReport::default()
    };
    // No promotion may start (or be recovered) while blobs go.
    let _promotion = crate::promote::journal::lock(state).map_err(std::io::Error::other)?;
    if state
        .kind(crate::promote::journal::JOURNAL_FILE)
        .map_err(std::io::Error::other)?
        .is_some()
    {
        return Ok(skipped(
            "an interrupted promotion's journal is present; the next trellis start recovers it",
        ));
    }
    let Some(_repair) = try_lock(&slots.dir().join("branches.lock"))? else {
        return Ok(skipped("a repair of this workspace is running"));
    };
    let objects = match state.kind("objects").map_err(std::io::Error::other)? {
        Some(Kind::Dir) => state
            .child("objects", false)
            .map_err(std::io::Error::other)?,
        _ => return Ok(ObjectsReport::default()),
    };
    let live = live_blobs(rows);
    let mut report = ObjectsReport::default();
    for fan_out_name in objects.names().map_err(std::io::Error::other)? {
        if fan_out_name.len() != 2 {
            continue; // not the store's: left alone
        }
        let fan_out = objects
            .child(&fan_out_name, false)
            .map_err(std::io::Error::other)?;
        let mut left = 0;
        for name in fan_out.names().map_err(std::io::Error::other)? {
            let Ok(digest) = format!("{fan_out_name}{name}").parse::<Digest>() else {
                left += 1;
                continue;
            };
            if live.contains(&digest) {
                report.kept += 1;
                left += 1;
                continue;
            }
            let Ok(Some(Kind::File { .. })) = fan_out.kind(&name) else {
                left += 1;
                continue;
            };
            let bytes = std::fs::symlink_metadata(fan_out.join(&name)).map_or(0, |m| m.len());
            if !dry_run {
                fan_out.remove(&name).map_err(std::io::Error::other)?;
            }
            report.removed += 1;
            report.bytes += bytes;
        }
        if left == 0 && !dry_run {
            objects
                .remove_dir(&fan_out_name)
                .map_err(std::io::Error::other)?;
        }
    }
    Ok(report)
}

/// Takes the lock file at `path` without waiting: `None` when another
/// process holds it; a missing lock file is taken as free.
fn try_lock(path: &Path) -> std::io::Result<Option<Option<File>>> {
    let file = match File::options().write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(None)),
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => Ok(Some(Some(file))),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

fn collect_slot_sets(
    cache: &Path,
    current: &Path,
    dry_run: bool,
) -> std::io::Result<Vec<SlotSetRemoval>> {
    let mut sets = Vec::new();
    let mut locks = Vec::new();
    let listing = match std::fs::read_dir(cache) {
        Ok(listing) => listing,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    for entry in listing {
        let entry = entry?;
        let name = entry.file_name();
        let named_as_set = name.to_str().is_some_and(|n| n.starts_with("ws-"));
        // `file_type` does not follow a link: a linked set is never ours.
        if !named_as_set || !entry.file_type()?.is_dir() || !is_slot_set(&entry.path()) {
            continue;
        }
        let dir = entry.path();
        // Held for the whole collection, so no process starts using a set
        // between the decision and its removal.
        let mut held = Vec::new();
        let mut busy = false;
        for lock in ["view.lock", "branches.lock"] {
            match try_lock(&dir.join(lock))? {
                Some(file) => held.extend(file),
                None => busy = true,
            }
        }
        let owner_file = dir.join(OWNER_FILE);
        let owner = std::fs::read(&owner_file)
            .ok()
            .map(|bytes| PathBuf::from(String::from_utf8_lossy(&bytes).into_owned()));
        let last_used = std::fs::metadata(&owner_file)
            .or_else(|_| std::fs::metadata(&dir))
            .and_then(|m| m.modified())
            .unwrap_or_else(|_| SystemTime::now());
        sets.push(SlotSet {
            owner_exists: owner.as_ref().is_some_and(|o| o.is_dir()),
            owner,
            current: dir == current,
            busy,
            idle: SystemTime::now()
                .duration_since(last_used)
                .unwrap_or_default(),
            bytes: 0,
            dir,
        });
        locks.push(held);
    }
    let measured = sizes_matter(&sets);
    if measured {
        for set in &mut sets {
            set.bytes = tree_bytes(&set.dir);
        }
    }
    let plan = plan_slot_sets(&sets, CACHE_LIMIT_BYTES);
    let mut removed = Vec::new();
    for (index, reason) in plan {
        let set = &sets[index];
        // Measured before it goes, for the report, when it was not already.
        let bytes = if measured {
            set.bytes
        } else {
            tree_bytes(&set.dir)
        };
        if !dry_run {
            // Out of the way first (one rename), so nothing ever sees half a set.
            let trash = cache.join(format!(".gc-{}", crate::statedir::unique_stamp()));
            std::fs::rename(&set.dir, &trash)?;
            std::fs::remove_dir_all(&trash)?;
        }
        removed.push(SlotSetRemoval {
            path: set.dir.clone(),
            workspace: set.owner.clone(),
            bytes,
            reason,
        });
    }
    drop(locks);
    Ok(removed)
}

/// Bytes of every file under `dir`, not following symlinks.
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(listing) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in listing.flatten() {
            match entry.metadata() {
                Ok(meta) if meta.is_dir() => stack.push(entry.path()),
                Ok(meta) => total += meta.len(),
                Err(_) => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::test_support;

    fn set(name: &str, owner: Option<bool>, idle_hours: u64, bytes: u64) -> SlotSet {
        SlotSet {
            dir: PathBuf::from(format!("/cache/{name}")),
            owner: owner.map(|_| PathBuf::from(format!("/ws/{name}"))),
            owner_exists: owner.unwrap_or(false),
            current: false,
            busy: false,
            idle: Duration::from_secs(idle_hours * 3600),
            bytes,
        }
    }

    #[test]
    fn slot_sets_of_gone_workspaces_go_and_live_or_held_ones_stay() {
        let mut held = set("held", Some(false), 100, 1);
        held.busy = true;
        let mut current = set("current", None, 100, 1);
        current.current = true;
        let sets = [
            set("gone", Some(false), 0, 10),
            set("live", Some(true), 100, 10),
            set("unowned-fresh", None, 0, 10),
            set("unowned-old", None, 2, 10),
            held,
            current,
        ];
        assert_eq!(
            plan_slot_sets(&sets, u64::MAX),
            [(0, RemoveReason::WorkspaceGone), (3, RemoveReason::NoOwner)]
        );
    }

    #[test]
    fn over_the_limit_the_longest_idle_sets_of_other_workspaces_go_first() {
        let mut current = set("current", Some(true), 500, 100);
        current.current = true;
        let sets = [
            set("recent", Some(true), 1, 100),
            set("older", Some(true), 48, 100),
            set("oldest", Some(true), 72, 100),
            current,
        ];
        // 400 bytes against a limit of 250: the two idle-longest go, never
        // the current one or one used within a day.
        assert_eq!(
            plan_slot_sets(&sets, 250),
            [(2, RemoveReason::OverLimit), (1, RemoveReason::OverLimit)]
        );
        assert_eq!(plan_slot_sets(&sets, 400), []);
    }

    #[test]
    fn sizes_are_measured_only_when_the_size_rule_could_remove_a_set() {
        let mut current = set("current", Some(true), 500, 0);
        current.current = true;
        let mut held = set("held", Some(true), 500, 0);
        held.busy = true;
        // Recently used, held, current, gone, unowned: none is the size
        // rule's to remove, so no set's files are walked.
        let quiet = [
            set("recent", Some(true), 1, 0),
            set("gone", Some(false), 500, 0),
            set("unowned-old", None, 500, 0),
            held,
            current,
        ];
        assert!(!sizes_matter(&quiet));
        // Another workspace's set idle past a day: the size rule may
        // remove it, and needs every set's size to decide.
        let mut idle = quiet.to_vec();
        idle.push(set("idle", Some(true), 48, 0));
        assert!(sizes_matter(&idle));
    }

    #[test]
    fn only_unclosed_forests_keep_their_accepted_states() {
        use test_support::{closed, opened, stored, temp_ledger};
        let (_dir, ledger) = temp_ledger();
        ledger.append_search(&opened("f1", "n", None)).unwrap();
        ledger.append(&stored("n", 0, "n/0/c1")).unwrap();
        ledger.append_search(&closed("f1")).unwrap();
        ledger.append_search(&opened("f2", "m", None)).unwrap();
        ledger.append(&stored("m", 0, "m/0/c1")).unwrap();
        ledger.append(&stored("m", 0, "m/0/c2")).unwrap();
        let live = live_blobs(&ledger.rows().unwrap());
        let blob = |candidate: &str| crate::digest::blob_digest(candidate.as_bytes());
        assert_eq!(
            live,
            BTreeSet::from([blob("m/0/c1"), blob("m/0/c2")]),
            "the open forest's states, never the closed one's"
        );
    }
}
