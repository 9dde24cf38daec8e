//! [`WorkspacePath`]: a workspace-relative path that has been checked, the
//! type the engine's entry points take for a file of the user's view.
//!
//! Constructing one runs [`check_rel_path`](super::fsutil::check_rel_path),
//! the one rule for what may name a file in the workspace (no absolute
//! start, no `..`, `.` or empty component, no backslash, no NUL), so a value
//! of this type can be joined under the root without looking at it again.
//! It touches no file system: whether the path crosses a symlink is decided
//! where a file is opened (`fsutil::confine`, the snapshot's walk).

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

use super::SnapshotError;
use super::fsutil::check_rel_path;

/// A checked workspace-relative path with `/` separators (`src/lib.rs`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct WorkspacePath(String);

impl WorkspacePath {
    /// Checks `path`; the error names it and says what is wrong.
    pub fn new(path: impl Into<String>) -> Result<WorkspacePath, SnapshotError> {
        let path = path.into();
        check_rel_path(&path)?;
        Ok(WorkspacePath(path))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for WorkspacePath {
    type Error = SnapshotError;

    fn try_from(path: String) -> Result<WorkspacePath, SnapshotError> {
        WorkspacePath::new(path)
    }
}

impl TryFrom<&str> for WorkspacePath {
    type Error = SnapshotError;

    fn try_from(path: &str) -> Result<WorkspacePath, SnapshotError> {
        WorkspacePath::new(path)
    }
}

impl From<WorkspacePath> for String {
    fn from(path: WorkspacePath) -> String {
        path.0
    }
}

impl Deref for WorkspacePath {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for WorkspacePath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Lets maps keyed by it be looked up with a `&str`.
impl Borrow<str> for WorkspacePath {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkspacePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_workspace_paths() {
        assert_eq!(
            WorkspacePath::new("src/lib.rs").unwrap().as_str(),
            "src/lib.rs"
        );
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "src/../x",
            "src//x",
            "./x",
            "a\\b",
            "a\0b",
        ] {
            let err = WorkspacePath::new(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{bad:?}: {err}");
        }
    }

    #[test]
    fn deserializing_checks_the_path_too() {
        let ok: WorkspacePath = serde_json::from_str("\"src/main.rs\"").unwrap();
        assert_eq!(serde_json::to_string(&ok).unwrap(), "\"src/main.rs\"");
        assert!(serde_json::from_str::<WorkspacePath>("\"../outside\"").is_err());
    }
}
