//! Writing a verified repair into the user's files (`trellis repair
//! --commit`): all of it or none of it, never over an edit the user made
//! meanwhile, and finished or undone after a crash.
//!
//! One promotion, in order:
//!
//! 1. Every target's current content is checked against the start snapshot
//!    and kept as a blob in `.trellis/objects`.
//! 2. The intent [`journal`] is written to `.trellis/` and fsync'd: each
//!    target, its old and new content digests, the name its new content is
//!    staged under and the name its old file is moved aside to.
//! 3. Every new content is staged (written, fsync'd) beside its target. A
//!    failure up to here (an unwritable directory, a full disk) changes
//!    nothing the user sees.
//! 4. Target by target: the old file is moved aside, so no later write can
//!    land unseen on the file being replaced; the moved file is checked
//!    against the start snapshot; the staged file is renamed into place
//!    only if nothing appeared at the path meanwhile (`RENAME_NOREPLACE`);
//!    and the result is read back. Any mismatch is [`PromoteError::Stale`]:
//!    every target already replaced is put back and the user's edit stays,
//!    and the error says which files were put back and which hold the
//!    user's edit ([`RolledBack`]).
//! 5. The caller ledgers the promotion, then [`Promoted::finish`] removes
//!    the moved-aside files and the journal.
//!
//! A crash anywhere leaves the journal; [`journal::recover`] finishes or
//! undoes the promotion on the next start. This module must never follow a
//! symlink (every path goes through [`crate::statedir::Dir`]), replace
//! content it did not check, or remove anything but its own temp files.
//!
//! # Architecture invariant
//!
//! A user edit seen on the way is a ledgered refusal that puts every file back
//! and names them (`faults_promotion.rs`:
//! `an_edit_in_the_window_before_a_rename_survives`,
//! `an_edit_to_a_later_file_during_promotion_survives`,
//! `an_edit_right_after_the_first_rename_undoes_it_and_says_what_was_put_back`).
//! A crash is rolled forward or back on the next start, and reported until then
//! (`a_crash_at_every_rename_is_rolled_forward_on_the_next_start`,
//! `a_crash_while_staging_is_rolled_back_on_the_next_start`,
//! `a_file_edited_after_a_crash_is_kept_and_the_rest_rolled_back`,
//! `the_language_server_recovers_an_interrupted_promotion_at_start`,
//! `status_after_a_kill_mid_promotion_names_the_repair_and_what_will_finish_it`,
//! `the_language_servers_status_request_reports_a_promotion_killed_while_it_runs`).
//! An unwritable target, or a promotion the ledger could not record, changes
//! nothing
//! (`an_unwritable_directory_refuses_the_promotion_and_changes_nothing`,
//! `deleting_trellis_before_the_promotion_refuses_it`,
//! `deleting_trellis_after_the_renames_puts_every_file_back`).

mod error;
pub mod journal;

use std::path::Path;

use crate::digest::{Digest, blob_digest};
use crate::failpoint;
use crate::ledger::RolledBack;
use crate::snapshot::BlobStore;
use crate::snapshot::fsutil::check_rel_path;
use crate::statedir::{self, Dir, Kind, StateError, TEMP_PREFIX};

use journal::{Journal, JournalTarget};

pub use error::PromoteError;
pub use journal::InterruptedPromotion;

/// The promotion a crash interrupted in the workspace at `root` (its
/// journal is in `ledger`'s state directory), read without recovering it:
/// what `trellis status` reports until the next engine start finishes it.
pub fn interrupted_promotion(
    root: &Path,
    ledger: &crate::ledger::Ledger,
) -> Result<Option<InterruptedPromotion>, PromoteError> {
    journal::interrupted(root, ledger.state_dir())
}

/// Mode of a file a promotion creates.
const NEW_FILE_MODE: u32 = 0o644;

/// One file a promotion writes (`new: Some`) or removes (`new: None`).
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// Workspace-relative, `/`-separated.
    pub path: &'a str,
    /// Its content in the repair's start snapshot; `None`: it did not exist.
    pub old: Option<Digest>,
    pub new: Option<&'a [u8]>,
}

/// One target, opened: its directory handle and the names used beside it.
struct Placed {
    path: String,
    parent: Dir,
    name: String,
    old: Option<Digest>,
    /// The old file's permission bits, which the new one keeps.
    mode: u32,
    new: Option<Digest>,
    staged: Option<String>,
    aside: String,
}

/// A promotion whose files are all in place; the caller ledgers it and
/// then calls [`Promoted::finish`], or [`Promoted::roll_back`] to undo it.
pub struct Promoted<'s> {
    state: &'s Dir,
    placed: Vec<Placed>,
    /// Held until the promotion is finished or undone, so a second process
    /// starting meanwhile does not "recover" it.
    _lock: journal::Lock,
}

/// Writes `targets` under the workspace `root` as one promotion, with the
/// journal in the checked state directory `state`. The caller holds the
/// start snapshot the targets' `old` digests come from.
pub fn promote<'s>(
    root: &Path,
    state: &'s Dir,
    repair_id: &str,
    targets: &[Target<'_>],
) -> Result<Promoted<'s>, PromoteError> {
    let lock = journal::lock(state)?;
    let workspace = Dir::open_trusted(root)?;
    let blobs = BlobStore::in_state(state).map_err(|e| PromoteError::Refused(e.to_string()))?;
    let stamp = statedir::unique_stamp();
    let mut placed = Vec::with_capacity(targets.len());
    for (index, target) in targets.iter().enumerate() {
        check_rel_path(target.path).map_err(|e| PromoteError::Refused(e.to_string()))?;
        let (dir, name) = match target.path.rsplit_once('/') {
            Some((dir, name)) => (Some(dir), name),
            None => (None, target.path),
        };
        let parent = match dir {
            Some(dir) => workspace.descend(dir, target.new.is_some())?,
            None => Dir::open_trusted(root)?,
        };
        let (current, mode) = read_target(&parent, name)?;
        if current.as_deref().map(blob_digest) != target.old {
            return Err(PromoteError::Stale {
                path: target.path.to_owned(),
                rolled_back: None,
            });
        }
        if let Some(bytes) = &current {
            blobs
                .put(bytes)
                .map_err(|e| PromoteError::Refused(e.to_string()))?;
        }
        placed.push(Placed {
            path: target.path.to_owned(),
            parent,
            name: name.to_owned(),
            old: target.old,
            mode,
            new: target.new.map(blob_digest),
            staged: target
                .new
                .map(|_| format!("{TEMP_PREFIX}{stamp}-{index}.new")),
            aside: format!("{TEMP_PREFIX}{stamp}-{index}.old"),
        });
    }
    let record = Journal::new(
        repair_id,
        placed
            .iter()
            .map(|p| JournalTarget {
                path: p.path.clone(),
                old: p.old,
                old_mode: p.old.map(|_| p.mode),
                new: p.new,
                staged: p.staged.clone(),
                aside: p.aside.clone(),
            })
            .collect(),
    );
    record.write(state)?;
    if let Err(e) = stage_all(&placed, targets) {
        discard_temps(&placed);
        journal::remove(state)?;
        return Err(e);
    }
    for (index, p) in placed.iter().enumerate() {
        if let Err(e) = place(p) {
            return Err(undo(state, &placed, index + 1, e));
        }
        failpoint::hit("promote-after-rename");
    }
    Ok(Promoted {
        state,
        placed,
        _lock: lock,
    })
}

impl Promoted<'_> {
    /// The promotion is recorded: drop the moved-aside old files and the journal.
    pub fn finish(self) -> Result<(), PromoteError> {
        discard_temps(&self.placed);
        for p in &self.placed {
            p.parent.sync()?;
        }
        journal::remove(self.state)?;
        Ok(())
    }

    /// The promotion cannot be recorded: put every old file back.
    pub fn roll_back(self, why: String) -> PromoteError {
        undo(
            self.state,
            &self.placed,
            self.placed.len(),
            PromoteError::Refused(why),
        )
    }
}

/// The regular file `name` in `dir` and its permission bits (`0o644` when absent).
fn read_target(dir: &Dir, name: &str) -> Result<(Option<Vec<u8>>, u32), PromoteError> {
    let mode = match dir.kind(name)? {
        Some(Kind::File { mode, .. }) => mode,
        None => NEW_FILE_MODE,
        Some(Kind::Symlink) => return Err(StateError::Symlink(dir.join(name)).into()),
        Some(_) => {
            return Err(PromoteError::Refused(format!(
                "{}: is not a regular file",
                dir.join(name).display()
            )));
        }
    };
    Ok((dir.read(name)?, mode))
}

/// Writes every new content to its staged name.
fn stage_all(placed: &[Placed], targets: &[Target<'_>]) -> Result<(), PromoteError> {
    for (p, target) in placed.iter().zip(targets) {
        if let (Some(staged), Some(bytes)) = (&p.staged, target.new) {
            p.parent.stage_as(staged, bytes, p.mode)?;
            failpoint::hit("promote-after-stage");
        }
    }
    Ok(())
}

/// Replaces one target: move the old file aside and check it, put the new
/// one in place unless something appeared there, read it back.
fn place(p: &Placed) -> Result<(), PromoteError> {
    let stale = || PromoteError::Stale {
        path: p.path.clone(),
        rolled_back: None,
    };
    if p.old.is_some() {
        match p.parent.rename(&p.name, &p.parent, &p.aside) {
            Ok(()) => {}
            Err(e) if e.is_not_found() => return Err(stale()),
            Err(e) => return Err(e.into()),
        }
        if digest_of(&p.parent, &p.aside)? != p.old {
            return Err(stale());
        }
    }
    failpoint::hit("promote-before-rename");
    // Nothing may have appeared at the path since the old file moved away.
    let in_place = match &p.staged {
        Some(staged) => p.parent.rename_noreplace(staged, &p.name)?,
        None => p.parent.kind(&p.name)?.is_none(),
    };
    if !in_place {
        return Err(stale());
    }
    // Read back: our new file, and the old one untouched (nobody wrote
    // through a descriptor opened before it was moved aside).
    if digest_of(&p.parent, &p.name)? != p.new
        || (p.old.is_some() && digest_of(&p.parent, &p.aside)? != p.old)
    {
        return Err(stale());
    }
    p.parent.sync()?;
    Ok(())
}

fn digest_of(dir: &Dir, name: &str) -> Result<Option<Digest>, StateError> {
    Ok(dir.read(name)?.as_deref().map(blob_digest))
}

/// Puts back the first `touched` targets of `placed` (the last of them
/// possibly half done), keeping whatever the user wrote, removes every
/// staged file and the journal. `cause` is returned unless undoing fails
/// too; a stale one says what the undoing left ([`rolled_back`]).
fn undo(state: &Dir, placed: &[Placed], touched: usize, cause: PromoteError) -> PromoteError {
    let mut failed = Vec::new();
    for p in placed[..touched].iter().rev() {
        if let Err(e) = put_back(p) {
            failed.push(e.to_string());
        }
    }
    if !failed.is_empty() {
        return PromoteError::Interrupted(format!(
            "{cause}; undoing it failed: {}",
            failed.join("; ")
        ));
    }
    discard_temps(placed);
    if let Err(e) = journal::remove(state) {
        return PromoteError::Interrupted(format!("{cause}; {e}"));
    }
    match cause {
        PromoteError::Stale { path, .. } => PromoteError::Stale {
            path,
            rolled_back: Some(rolled_back(placed, touched)),
        },
        other => other,
    }
}

/// What an undone promotion left, read back from the files: the first
/// `touched` targets that hold their start content again were put back;
/// every target holding anything else (or unreadable) was left as found.
fn rolled_back(placed: &[Placed], touched: usize) -> RolledBack {
    let mut found = RolledBack::default();
    for (index, p) in placed.iter().enumerate() {
        if digest_of(&p.parent, &p.name).ok() != Some(p.old) {
            found.kept.push(p.path.clone());
        } else if index < touched {
            found.put_back.push(p.path.clone());
        }
    }
    found
}

/// Restores the old file of one target if (and only if) the path holds our
/// new content or nothing; anything else there is the user's and stays.
fn put_back(p: &Placed) -> Result<(), StateError> {
    let at_target = digest_of(&p.parent, &p.name)?;
    let aside_present = p.parent.kind(&p.aside)?.is_some();
    let ours = at_target.is_some() && at_target == p.new;
    match (aside_present, ours) {
        (true, true) => p.parent.rename(&p.aside, &p.parent, &p.name)?,
        // Nothing at the path: put the old file back unless something
        // appears there this very moment (then that is the user's).
        (true, false) if at_target.is_none() => {
            p.parent.rename_noreplace(&p.aside, &p.name)?;
        }
        (false, true) => p.parent.remove(&p.name)?,
        _ => {}
    }
    p.parent.sync()
}

/// Removes the staged files and the moved-aside old files that are still
/// there. A moved-aside file whose content is no longer the old content was
/// written by someone else after it was moved: it is kept.
fn discard_temps(placed: &[Placed]) {
    for p in placed {
        if let Some(staged) = &p.staged {
            let _ = p.parent.remove(staged);
        }
        if matches!(digest_of(&p.parent, &p.aside), Ok(found) if found.is_none() || found == p.old)
        {
            let _ = p.parent.remove(&p.aside);
        }
    }
}
