//! File-level changes between two snapshots, as edits a person can review.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
pub use crate::edit::TextEdit;
use crate::workspace_path::WorkspacePath;

/// One file's change from an old snapshot to a new one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum FileChange {
    /// Edits against the old text, ordered and non-overlapping.
    Modify {
        path: WorkspacePath,
        old: Digest,
        new: Digest,
        edits: Vec<TextEdit>,
        /// The full new text, so a consumer never needs a second read.
        new_text: String,
    },
    Create {
        path: WorkspacePath,
        new: Digest,
        text: String,
    },
    Delete {
        path: WorkspacePath,
        old: Digest,
    },
}

impl FileChange {
    /// The file's text after the change; `None` when the change deletes it.
    pub fn new_text(&self) -> Option<&str> {
        match self {
            FileChange::Modify { new_text, .. } => Some(new_text),
            FileChange::Create { text, .. } => Some(text),
            FileChange::Delete { .. } => None,
        }
    }

    pub fn path(&self) -> &WorkspacePath {
        match self {
            FileChange::Modify { path, .. }
            | FileChange::Create { path, .. }
            | FileChange::Delete { path, .. } => path,
        }
    }
}
