//! How an engine call fails, as the front ends see it.
//!
//! [`EngineError`] carries the typed leaf error of whatever refused (the
//! ledger, a snapshot or copy with the path it was about, the search forest,
//! a resume refusal), so a front end can tell them apart and the source
//! chain is kept. Every message names the file, key or event it is about.
//! It must never be used to decide: a refusal the engine ledgers is decided
//! (and ledgered) before the error is made.

use std::path::PathBuf;

use crate::digest::Digest;
use crate::ledger::{LedgerError, RolledBack};
use crate::promote::PromoteError;
use crate::report::RepairStatus;
use crate::search::ForestError;
use crate::snapshot::SnapshotError;
use crate::statedir::StateError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error(
        "the workspace changed since the repair started (expected root {expected}, found {found}); nothing was written"
    )]
    StaleRoot { expected: Digest, found: Digest },
    /// The user edited the workspace while the repair was being written:
    /// the promotion was undone, and `rolled_back` says what that left.
    #[error(
        "the workspace changed since the repair started, while it was being written (expected root {expected}, found {found}); {rolled_back}; nothing of the repair remains written"
    )]
    PromotionRolledBack {
        expected: Digest,
        found: Digest,
        rolled_back: RolledBack,
    },
    #[error("only a hard-passing repair can be promoted (status: {0:?})")]
    NotPromotable(RepairStatus),
    /// Something outside every branch changed while the repair ran its
    /// branches' code; the repair failed, and nothing was written.
    #[error(
        "something outside every branch changed while the repair ran: {}; {}; nothing was written",
        changed.join(", "),
        if restored.is_empty() {
            "nothing could be put back".to_owned()
        } else {
            format!("put back: {}", restored.join(", "))
        }
    )]
    OutsideChanged {
        changed: Vec<String>,
        restored: Vec<String>,
    },
    #[error("{0}")]
    Usage(String),
    /// The ledger could not be opened, read or appended to.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// A snapshot, copy, diff or write failed; names the path.
    #[error(transparent)]
    Workspace(#[from] SnapshotError),
    /// A prompt-bundle write, ref or attach was refused; names the bundle.
    #[error(transparent)]
    Bundle(#[from] crate::bundles::BundleError),
    /// A file or directory under `.trellis/` is a link or cannot be used; names it.
    #[error(transparent)]
    State(#[from] StateError),
    /// Writing a verified repair into the user's files failed or was undone.
    #[error(transparent)]
    Promote(#[from] PromoteError),
    /// Collecting garbage in `.trellis/objects` or the cache directory failed.
    #[error(
        "cannot collect unused state in {} or {}: {source}",
        state.display(),
        cache.display()
    )]
    Collect {
        state: PathBuf,
        cache: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The branch workspaces could not be laid out (the links that let
    /// `../` path dependencies resolve).
    #[error("{}: cannot prepare the branch workspaces: {source}", path.display())]
    SlotSetup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The process-wide lock of a slot set could not be taken.
    #[error("{}: cannot lock the branch workspaces ({name}): {source}", path.display())]
    SlotLock {
        name: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The ledger's record of an earlier search cannot be resumed.
    #[error(transparent)]
    Resume(#[from] ResumeRefusal),
    /// The search forest refused a transition: a broken runtime invariant.
    #[error("search forest: {0}")]
    Forest(#[from] ForestError),
    /// An accepted state could not be stored for a later resume.
    #[error("cannot store accepted state {candidate_id} under {}: {reason}", objects.display())]
    AcceptedState {
        candidate_id: String,
        objects: PathBuf,
        reason: String,
    },
    /// A state the runtime cannot carry or a broken runtime invariant,
    /// naming the event or file.
    #[error("{0}")]
    Invariant(String),
    /// A blocking task of the engine panicked or was cancelled.
    #[error("an engine task did not finish: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Why the ledger's record of an earlier search refuses a repair: an
/// unreadable or ambiguous ledger, or an interrupted generation that
/// cannot be continued. Names the ledger and the forest or event.
#[derive(Debug, thiserror::Error)]
#[error("{}: {what}: {reason}", ledger.display())]
pub struct ResumeRefusal {
    pub ledger: PathBuf,
    /// `cannot resume the search`, or which repair cannot be continued.
    pub what: String,
    pub reason: String,
}

/// Converts a leaf error into an [`EngineError`], for `map_err`.
pub(crate) fn io(e: impl Into<EngineError>) -> EngineError {
    e.into()
}
