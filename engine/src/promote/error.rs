//! Why a promotion did not happen, or did not finish: the one error both
//! the write ([`super::promote`]) and the journal's recovery
//! ([`super::journal`]) report.

use crate::ledger::RolledBack;
use crate::statedir::StateError;

#[derive(Debug, thiserror::Error)]
pub enum PromoteError {
    /// A target is not what the repair started from (or no longer what was
    /// just written): the user edited it. Everything was put back, as
    /// `rolled_back` says (`None`: nothing had been replaced yet).
    #[error("`{path}` changed while the repair was being written")]
    Stale {
        path: String,
        rolled_back: Option<RolledBack>,
    },
    /// A failure before the first rename (or one that was fully undone).
    #[error("{0}; nothing was changed")]
    Refused(String),
    /// Putting things back failed too: the journal stays for the next start.
    #[error("{0}; the promotion journal in .trellis/ will finish or undo it on the next start")]
    Interrupted(String),
}

impl From<StateError> for PromoteError {
    fn from(e: StateError) -> PromoteError {
        PromoteError::Refused(e.to_string())
    }
}
