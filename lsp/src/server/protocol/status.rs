//! `trellis/status`: what `trellis status` says about the workspace's
//! writes, for a client to show: the last search's forests and whether
//! what they verified reached the user's files, and a promotion a crash
//! cut off, which the next engine start finishes. Read-only. Engine values
//! are converted here, field by field, so the wire changes only with this
//! file.

use serde::{Deserialize, Serialize};
use trellis_engine::ledger::event::RecoveryDirection;
use trellis_engine::{InterruptedPromotion, SearchStatus};

/// `trellis/status`, a request from the client.
pub enum Status {}

impl tower_lsp_server::ls_types::request::Request for Status {
    type Params = StatusParams;
    type Result = StatusResult;
    const METHOD: &'static str = "trellis/status";
}

/// No fields today: `{}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusParams {}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusResult {
    /// The forests of the last repair, in the order they opened.
    pub searches: Vec<SearchRow>,
    /// A promotion a crash cut off; `null` when there is none.
    pub interrupted_promotion: Option<InterruptedWrite>,
}

/// One forest and where what it verified stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchRow {
    pub forest_id: String,
    pub state: WriteState,
    /// The `search_closed` reason, `null` while open.
    pub closed: Option<String>,
}

/// Where a forest's verified state stands relative to the user's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteState {
    /// Not closed (still running, or a crash left it open).
    Open,
    /// Closed without a commit: nothing to write.
    Closed,
    /// Committed; the user's files were not written (a dry run, or an
    /// editor Preview not applied).
    VerifiedNotWritten,
    VerifiedAndWritten,
    /// Committed, and its promotion was cut off: the files are neither the
    /// old tree nor the verified one until the next start finishes it.
    WriteInterrupted,
}

impl WriteState {
    #[cfg(test)]
    pub const ALL: [WriteState; 5] = [
        WriteState::Open,
        WriteState::Closed,
        WriteState::VerifiedNotWritten,
        WriteState::VerifiedAndWritten,
        WriteState::WriteInterrupted,
    ];
}

/// `trellis status`'s interrupted write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptedWrite {
    pub repair_id: String,
    /// Every file the promotion writes or removes.
    pub files: Vec<String>,
    /// Those already holding the verified content.
    pub written: Vec<String>,
    /// What the next `trellis check`, `trellis repair` or server start will
    /// do, as the files stand now.
    pub next_start: NextStart,
    /// Another process is writing it right now: not interrupted (yet).
    pub in_progress: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NextStart {
    /// Every file gets the verified content.
    RollForward,
    /// Every file gets its content from before the repair (a file the user
    /// changed since stays).
    RollBack,
}

impl NextStart {
    #[cfg(test)]
    pub const ALL: [NextStart; 2] = [NextStart::RollForward, NextStart::RollBack];
}

impl From<&InterruptedPromotion> for InterruptedWrite {
    fn from(p: &InterruptedPromotion) -> InterruptedWrite {
        InterruptedWrite {
            repair_id: p.repair_id.clone(),
            files: p.files.clone(),
            written: p.written.clone(),
            next_start: match p.next_start {
                RecoveryDirection::RolledForward => NextStart::RollForward,
                RecoveryDirection::RolledBack => NextStart::RollBack,
            },
            in_progress: p.in_progress,
        }
    }
}

impl From<&SearchStatus> for StatusResult {
    fn from(status: &SearchStatus) -> StatusResult {
        let committed = |f: &trellis_engine::ForestStatus| f.closed.as_deref() == Some("committed");
        StatusResult {
            searches: status
                .forests
                .iter()
                .map(|f| SearchRow {
                    forest_id: f.forest_id.clone(),
                    state: match (&f.closed, committed(f)) {
                        (None, _) => WriteState::Open,
                        (Some(_), false) => WriteState::Closed,
                        _ if status.interrupted_promotion.is_some() => WriteState::WriteInterrupted,
                        _ if status.written => WriteState::VerifiedAndWritten,
                        _ => WriteState::VerifiedNotWritten,
                    },
                    closed: f.closed.clone(),
                })
                .collect(),
            interrupted_promotion: status.interrupted_promotion.as_ref().map(Into::into),
        }
    }
}
