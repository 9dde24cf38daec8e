//! The promotion intent journal, `.trellis/promotion.journal`, and crash
//! recovery from it.
//!
//! The journal is written (and fsync'd, file and directory) before anything
//! is staged, so a crash at any later point leaves a record of every name
//! the promotion may have created and of every target's old and new
//! content. The next engine start in the workspace (CLI or language server)
//! calls [`recover`]: when every target is new, or still old (or moved
//! aside) with its staged new content intact, the promotion is finished
//! (rolled forward: the tree becomes the verified one); otherwise it is
//! undone (rolled back), and a target the user changed meanwhile is left as
//! the user left it. Either way the outcome is ledgered, no temp file
//! survives, and only then is the journal removed; a crash during recovery
//! repeats the decision already written into the journal.
//!
//! Never: act on a journal it cannot read completely (start-up is refused,
//! naming the file), or replace content that is neither the old nor the new.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::PromoteError;
use crate::digest::{Digest, blob_digest};
use crate::ledger::event::{PromotionRecovered, RecoveryDirection};
use crate::ledger::{Ledger, LedgerEvent};
use crate::snapshot::BlobStore;
use crate::snapshot::fsutil::check_rel_path;
use crate::statedir::{Dir, StateError, TEMP_PREFIX};

/// The journal's name inside `.trellis/`.
pub const JOURNAL_FILE: &str = "promotion.journal";

/// The largest journal read: about 400 bytes a target, so room for far more
/// targets than a workspace's file limit.
const MAX_JOURNAL_BYTES: u64 = 256 << 20;

/// The journal format this build writes and reads.
const JOURNAL_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journal {
    version: u32,
    repair_id: String,
    /// Set by recovery before it acts, so an interrupted recovery goes on
    /// the same way.
    decided: Option<RecoveryDirection>,
    targets: Vec<JournalTarget>,
}

/// One target of a journalled promotion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalTarget {
    pub path: String,
    /// The content before, also kept in `.trellis/objects`; `None`: absent.
    pub old: Option<Digest>,
    pub old_mode: Option<u32>,
    /// The verified content; `None`: the file is removed.
    pub new: Option<Digest>,
    /// The temp file beside the target holding `new`.
    pub staged: Option<String>,
    /// The temp name beside the target the old file is moved to.
    pub aside: String,
}

impl Journal {
    pub fn new(repair_id: &str, targets: Vec<JournalTarget>) -> Journal {
        Journal {
            version: JOURNAL_VERSION,
            repair_id: repair_id.to_owned(),
            decided: None,
            targets,
        }
    }

    /// Writes the journal durably (temp file, fsync, rename, fsync of `.trellis/`).
    pub fn write(&self, state: &Dir) -> Result<(), StateError> {
        let bytes = serde_json::to_vec_pretty(self).expect("a journal always serializes");
        state.write_atomic(JOURNAL_FILE, &bytes, 0o644)
    }
}

pub fn remove(state: &Dir) -> Result<(), StateError> {
    state.remove(JOURNAL_FILE)?;
    state.sync()
}

/// An exclusive lock on `.trellis/` between promotion and recovery, across
/// processes; released on drop.
pub struct Lock(std::os::fd::OwnedFd);

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

pub fn lock(state: &Dir) -> Result<Lock, StateError> {
    Ok(
        lock_with(state, rustix::fs::FlockOperation::LockExclusive)?
            .expect("a blocking lock waits"),
    )
}

/// The lock if no other process holds it; `None` while one does.
fn try_lock(state: &Dir) -> Result<Option<Lock>, StateError> {
    lock_with(state, rustix::fs::FlockOperation::NonBlockingLockExclusive)
}

fn lock_with(
    state: &Dir,
    operation: rustix::fs::FlockOperation,
) -> Result<Option<Lock>, StateError> {
    let io = |e: rustix::io::Errno| StateError::Io {
        path: state.path().to_path_buf(),
        source: e.into(),
    };
    // A descriptor of its own, so the lock is this promotion's, not shared
    // with every other user of the state directory's handle.
    let fd = rustix::fs::openat(
        state,
        ".",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(io)?;
    match rustix::fs::flock(&fd, operation) {
        Ok(()) => Ok(Some(Lock(fd))),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(io(e)),
    }
}

/// What a target holds now, relative to the journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    New,
    Old,
    /// Nothing at the path (and neither old nor new is "absent").
    Absent,
    /// Content that is neither: the user's.
    Other,
}

/// A target's state as recovery sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetState {
    pub found: Found,
    /// The staged file holds the new content (always true for a removal).
    pub staged_intact: bool,
    /// The moved-aside file holds the old content.
    pub aside_intact: bool,
}

pub fn classify(content: Option<Digest>, old: Option<Digest>, new: Option<Digest>) -> Found {
    if content == new {
        Found::New
    } else if content == old {
        Found::Old
    } else if content.is_none() {
        Found::Absent
    } else {
        Found::Other
    }
}

/// Forward exactly when every target can end up new without touching
/// anything the user wrote.
pub fn decide(states: &[TargetState]) -> RecoveryDirection {
    let finishable = |s: &TargetState| match s.found {
        Found::New => true,
        Found::Old => s.staged_intact,
        Found::Absent => s.staged_intact && s.aside_intact,
        Found::Other => false,
    };
    if states.iter().all(finishable) {
        RecoveryDirection::RolledForward
    } else {
        RecoveryDirection::RolledBack
    }
}

/// Finishes or undoes a promotion a crash interrupted, ledgers which, and
/// removes the journal; `None` when there was none.
/// Reads a journal's bytes, refusing what recovery must not act on: another
/// version, a target path that is not workspace-relative, and a temp name
/// that is not one of ours (recovery removes those, so `../x` would delete a
/// file outside the target's directory).
fn parse(bytes: &[u8]) -> Result<Journal, String> {
    let journal: Journal = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if journal.version != JOURNAL_VERSION {
        return Err(format!("version {}", journal.version));
    }
    for target in &journal.targets {
        check_rel_path(&target.path).map_err(|e| e.to_string())?;
        let temp_names = [
            ("staged", target.staged.as_deref()),
            ("aside", Some(&*target.aside)),
        ];
        for (field, name) in temp_names {
            if let Some(name) = name
                && !is_temp_name(name)
            {
                return Err(format!(
                    "`{field}` of {} is `{}`, not a `{TEMP_PREFIX}*` name in its directory",
                    target.path,
                    name.escape_debug()
                ));
            }
        }
    }
    Ok(journal)
}

/// A temp name promotion gives a file beside its target.
fn is_temp_name(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX) && !name.contains(['/', '\0'])
}

/// The journal in `state`, read and checked; `None` when there is none.
fn read_journal(state: &Dir) -> Result<Option<Journal>, PromoteError> {
    let Some(bytes) = state.read_at_most(JOURNAL_FILE, MAX_JOURNAL_BYTES)? else {
        return Ok(None);
    };
    parse(&bytes).map(Some).map_err(|reason| {
        PromoteError::Interrupted(format!(
            "{}: cannot read the promotion journal ({reason}); move it away to start without recovering",
            state.join(JOURNAL_FILE).display()
        ))
    })
}

/// The directory holding the target `path` (created when `create`) and
/// the target's name in it.
fn target_dir(
    workspace: &Dir,
    root: &Path,
    path: &str,
    create: bool,
) -> Result<(Dir, String), StateError> {
    match path.rsplit_once('/') {
        Some((dir, name)) => Ok((workspace.descend(dir, create)?, name.to_owned())),
        None => Ok((Dir::open_trusted(root)?, path.to_owned())),
    }
}

/// What `target` holds now (in `at`, its directory and name; `None`: the
/// directory is gone), relative to the journal.
fn target_state(
    target: &JournalTarget,
    at: Option<(&Dir, &String)>,
) -> Result<TargetState, StateError> {
    let digest = |name: &str| -> Result<Option<Digest>, StateError> {
        match at {
            Some((dir, _)) => Ok(dir.read(name)?.as_deref().map(blob_digest)),
            None => Ok(None),
        }
    };
    let content = match at {
        Some((_, name)) => digest(name)?,
        None => None,
    };
    let staged_intact = match &target.staged {
        Some(staged) => target.new.is_some() && digest(staged)? == target.new,
        None => target.new.is_none(),
    };
    Ok(TargetState {
        found: classify(content, target.old, target.new),
        staged_intact,
        aside_intact: target.old.is_some() && digest(&target.aside)? == target.old,
    })
}

/// A promotion a crash interrupted, as `trellis status` reports it before
/// anything recovers it: read only, nothing moved or ledgered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptedPromotion {
    pub repair_id: String,
    /// Every file the promotion writes or removes.
    pub files: Vec<String>,
    /// The files already holding the verified content.
    pub written: Vec<String>,
    /// What the next engine start (`trellis check`, `trellis repair`, the
    /// language server) will do with it, as the files stand now.
    pub next_start: RecoveryDirection,
    /// Another process holds the promotion lock: the promotion is being
    /// written (or recovered) right now, not interrupted.
    pub in_progress: bool,
}

/// The promotion the journal in `state` says was interrupted, if any, with
/// how far it got; reads the workspace at `root`, changes nothing.
pub fn interrupted(root: &Path, state: &Dir) -> Result<Option<InterruptedPromotion>, PromoteError> {
    // Held while a promotion or a recovery writes; taken for the reads
    // only, so neither starts halfway through them.
    let held = try_lock(state)?;
    let Some(journal) = read_journal(state)? else {
        return Ok(None);
    };
    let workspace = Dir::open_trusted(root)?;
    let mut states = Vec::with_capacity(journal.targets.len());
    let mut written = Vec::new();
    for target in &journal.targets {
        // A directory that is gone holds none of the target's files.
        let at = match target_dir(&workspace, root, &target.path, false) {
            Ok(at) => Some(at),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e.into()),
        };
        let found = target_state(target, at.as_ref().map(|(dir, name)| (dir, name)))?;
        if found.found == Found::New {
            written.push(target.path.clone());
        }
        states.push(found);
    }
    Ok(Some(InterruptedPromotion {
        repair_id: journal.repair_id.clone(),
        files: journal.targets.iter().map(|t| t.path.clone()).collect(),
        written,
        next_start: journal.decided.unwrap_or_else(|| decide(&states)),
        in_progress: held.is_none(),
    }))
}

pub fn recover(root: &Path, ledger: &Ledger) -> Result<Option<PromotionRecovered>, PromoteError> {
    let state = ledger.state_dir();
    let _lock = lock(state)?;
    let Some(mut journal) = read_journal(state)? else {
        return Ok(None);
    };
    let workspace = Dir::open_trusted(root)?;
    let mut opened = Vec::with_capacity(journal.targets.len());
    for target in &journal.targets {
        opened.push(target_dir(&workspace, root, &target.path, true)?);
    }
    let digest = |dir: &Dir, name: &str| -> Result<Option<Digest>, StateError> {
        Ok(dir.read(name)?.as_deref().map(blob_digest))
    };
    let mut states = Vec::with_capacity(opened.len());
    for (target, (parent, name)) in journal.targets.iter().zip(&opened) {
        states.push(target_state(target, Some((parent, name)))?);
    }
    let direction = match journal.decided {
        Some(direction) => direction,
        None => {
            let direction = decide(&states);
            journal.decided = Some(direction);
            journal.write(state)?;
            direction
        }
    };
    let blobs = BlobStore::in_state(state).map_err(|e| PromoteError::Interrupted(e.to_string()))?;
    let mut kept = Vec::new();
    for (target, (parent, name)) in journal.targets.iter().zip(&opened) {
        // Looked at again: an interrupted recovery may already have moved it.
        let found = classify(digest(parent, name)?, target.old, target.new);
        let settled = match (direction, found) {
            (_, Found::Other) => false,
            (RecoveryDirection::RolledForward, _) => finish_one(parent, name, target, found)?,
            (RecoveryDirection::RolledBack, _) => {
                undo_one(parent, name, target, found, &blobs)?;
                true
            }
        };
        if !settled {
            kept.push(target.path.clone());
        }
    }
    for (target, (parent, _)) in journal.targets.iter().zip(&opened) {
        if let Some(staged) = &target.staged {
            parent.remove(staged)?;
        }
        // A moved-aside file holding anything but the old content was
        // written after it was moved: it is the user's, and stays.
        match digest(parent, &target.aside)? {
            Some(found) if Some(found) != target.old => kept.push(target.aside.clone()),
            _ => parent.remove(&target.aside)?,
        }
        parent.sync()?;
    }
    let event = PromotionRecovered {
        repair_id: journal.repair_id.clone(),
        direction,
        files: journal.targets.iter().map(|t| t.path.clone()).collect(),
        kept,
    };
    ledger
        .append(&LedgerEvent::PromotionRecovered(event.clone()))
        .map_err(|e| PromoteError::Interrupted(e.to_string()))?;
    remove(state)?;
    Ok(Some(event))
}

/// Rolls one target forward; `false` when something appeared at the path
/// meanwhile (it is the user's and stays).
fn finish_one(
    parent: &Dir,
    name: &str,
    target: &JournalTarget,
    found: Found,
) -> Result<bool, StateError> {
    if found == Found::New {
        return Ok(true);
    }
    if found == Found::Old && target.old.is_some() {
        parent.rename(name, parent, &target.aside)?;
    }
    match &target.staged {
        Some(staged) => parent.rename_noreplace(staged, name),
        None => Ok(true),
    }
}

/// Rolls one target back to its old content: from the moved-aside file
/// when it is intact, else from the blob kept in `.trellis/objects`.
fn undo_one(
    parent: &Dir,
    name: &str,
    target: &JournalTarget,
    found: Found,
    blobs: &BlobStore,
) -> Result<(), PromoteError> {
    if found == Found::Old {
        return Ok(());
    }
    let aside = parent.read(&target.aside)?.as_deref().map(blob_digest);
    match target.old {
        Some(old) if aside == Some(old) => parent.rename(&target.aside, parent, name)?,
        Some(old) => {
            let bytes = blobs
                .get(&old)
                .map_err(|e| PromoteError::Interrupted(e.to_string()))?;
            parent.write_atomic(name, &bytes, target.old_mode.unwrap_or(0o644))?;
        }
        None => parent.remove(name)?,
    }
    Ok(())
}

#[cfg(test)]
#[path = "journal_fuzz.rs"]
mod fuzz_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn state(found: Found, staged_intact: bool, aside_intact: bool) -> TargetState {
        TargetState {
            found,
            staged_intact,
            aside_intact,
        }
    }

    #[test]
    fn classify_prefers_new_then_old() {
        let (a, b) = (blob_digest(b"a"), blob_digest(b"b"));
        assert_eq!(classify(Some(b), Some(a), Some(b)), Found::New);
        assert_eq!(classify(Some(a), Some(a), Some(b)), Found::Old);
        assert_eq!(classify(None, Some(a), Some(b)), Found::Absent);
        assert_eq!(classify(None, None, Some(b)), Found::Old);
        assert_eq!(classify(None, Some(a), None), Found::New);
        assert_eq!(
            classify(Some(blob_digest(b"c")), Some(a), Some(b)),
            Found::Other
        );
    }

    #[test]
    fn every_crash_point_of_an_untouched_tree_rolls_forward() {
        // Crashed after the k-th of three renames, for every k.
        for k in 0..=3 {
            let states: Vec<_> = (0..3)
                .map(|i| match i < k {
                    true => state(Found::New, false, true),
                    false => state(Found::Old, true, false),
                })
                .collect();
            assert_eq!(decide(&states), RecoveryDirection::RolledForward, "k={k}");
        }
        // Between moving the old file aside and renaming the new one in.
        let moved = [
            state(Found::New, false, true),
            state(Found::Absent, true, true),
        ];
        assert_eq!(decide(&moved), RecoveryDirection::RolledForward);
    }

    #[test]
    fn a_user_edit_or_a_torn_staged_file_rolls_back() {
        let edited = [
            state(Found::New, false, true),
            state(Found::Other, true, false),
        ];
        assert_eq!(decide(&edited), RecoveryDirection::RolledBack);
        let torn = [
            state(Found::Old, true, false),
            state(Found::Old, false, false),
        ];
        assert_eq!(decide(&torn), RecoveryDirection::RolledBack);
        let lost = [state(Found::Absent, true, false)];
        assert_eq!(decide(&lost), RecoveryDirection::RolledBack);
    }

    #[test]
    fn the_journal_refuses_unknown_fields() {
        let journal = Journal::new("r", Vec::new());
        let mut value = serde_json::to_value(&journal).unwrap();
        assert_eq!(
            serde_json::from_value::<Journal>(value.clone()).unwrap(),
            journal
        );
        value["surprise"] = serde_json::json!(1);
        assert!(serde_json::from_value::<Journal>(value).is_err());
    }
}
