//! [`WorkspacePath`]: a workspace-relative path that has been checked, the
//! type the engine takes and returns for a file of the user's workspace
//! (a view's buffers, a diagnostic's span, a change, a promotion).
//!
//! Constructing one runs [`check_rel_path`], the one rule for what may name
//! a file in the workspace (no absolute start, no `..`, `.` or empty
//! component, no backslash, no NUL), so a value of this type can be joined
//! under the root without looking at it again. It serializes as the plain
//! string, so JSON output and ledger events keep their shape, and
//! deserializing checks it again.
//!
//! This module must never touch the file system: whether a path crosses a
//! symlink is decided where a file is opened (`snapshot::fsutil::confine`,
//! the snapshot's walk). It imports nothing from the rest of the engine, so
//! every module (the snapshot, the sensors, the change types) can name it.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

/// A path refused by [`check_rel_path`]: it names the path and says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{path}`: not a safe workspace-relative path: {reason}")]
pub struct InvalidPath {
    pub path: String,
    pub reason: &'static str,
}

/// Checks that `rel` is a plain workspace-relative path: non-empty, `/`
/// separated, no absolute start, no `.`/`..`/empty component, no backslash
/// and no NUL. Touches no file system.
pub fn check_rel_path(rel: &str) -> Result<(), InvalidPath> {
    let refuse = |reason| {
        Err(InvalidPath {
            path: rel.to_owned(),
            reason,
        })
    };
    if rel.is_empty() {
        return refuse("the path is empty");
    }
    if rel.starts_with('/') {
        return refuse("absolute paths are not workspace-relative");
    }
    if rel.contains('\\') {
        return refuse("backslashes are not path separators here");
    }
    if rel.contains('\0') {
        return refuse("NUL bytes cannot appear in a path");
    }
    for component in rel.split('/') {
        match component {
            "" => return refuse("empty path component"),
            "." => return refuse("`.` components are not allowed"),
            ".." => return refuse("`..` would leave the workspace"),
            _ => {}
        }
    }
    Ok(())
}

/// A checked workspace-relative path with `/` separators (`src/lib.rs`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct WorkspacePath(String);

impl WorkspacePath {
    /// Checks `path`; the error names it and says what is wrong.
    pub fn new(path: impl Into<String>) -> Result<WorkspacePath, InvalidPath> {
        let path = path.into();
        check_rel_path(&path)?;
        Ok(WorkspacePath(path))
    }

    /// The workspace path of a relative OS path (`src/lib.rs`,
    /// `./src/lib.rs`), its components joined with `/`. `None` when it is
    /// absolute, climbs out with `..`, is not UTF-8 or names nothing.
    pub fn from_relative(path: &Path) -> Option<WorkspacePath> {
        let mut parts = Vec::new();
        for component in path.components() {
            match component {
                Component::Normal(part) => parts.push(part.to_str()?),
                Component::CurDir => {}
                _ => return None,
            }
        }
        WorkspacePath::new(parts.join("/")).ok()
    }

    /// The workspace path of `path` under `root`, as a tool reports a file:
    /// absolute (`/work/crate/src/lib.rs`) or relative to the root
    /// (`src/lib.rs`). `None` when it lies outside `root` or is not a plain
    /// path there. Purely lexical: resolve symlinks before calling when
    /// they matter.
    pub fn under(root: &Path, path: &Path) -> Option<WorkspacePath> {
        if path.is_absolute() {
            WorkspacePath::from_relative(path.strip_prefix(root).ok()?)
        } else {
            WorkspacePath::from_relative(path)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Comparisons with plain strings, so `span.path == "src/lib.rs"` reads as
/// it did when paths were strings.
impl PartialEq<str> for WorkspacePath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for WorkspacePath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for WorkspacePath {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl TryFrom<String> for WorkspacePath {
    type Error = InvalidPath;

    fn try_from(path: String) -> Result<WorkspacePath, InvalidPath> {
        WorkspacePath::new(path)
    }
}

impl TryFrom<&str> for WorkspacePath {
    type Error = InvalidPath;

    fn try_from(path: &str) -> Result<WorkspacePath, InvalidPath> {
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

/// So `root.join(&path)` reads as it did with a `String`.
impl AsRef<Path> for WorkspacePath {
    fn as_ref(&self) -> &Path {
        Path::new(&self.0)
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

    fn refused_reason(rel: &str) -> &'static str {
        match check_rel_path(rel) {
            Err(InvalidPath { reason, path }) => {
                assert_eq!(path, rel);
                reason
            }
            other => panic!("`{rel}` was not refused: {other:?}"),
        }
    }

    #[test]
    fn refuses_absolute_paths() {
        assert!(refused_reason("/etc/passwd").contains("absolute"));
    }

    #[test]
    fn refuses_parent_components() {
        assert!(refused_reason("../outside").contains(".."));
        assert!(refused_reason("src/../../outside").contains(".."));
    }

    #[test]
    fn refuses_empty_and_dot_components() {
        assert!(refused_reason("").contains("empty"));
        assert!(refused_reason("src//lib.rs").contains("empty"));
        assert!(refused_reason("src/").contains("empty"));
        assert!(refused_reason("./src").contains('.'));
    }

    #[test]
    fn refuses_backslashes() {
        assert!(refused_reason("src\\lib.rs").contains("backslash"));
    }

    #[test]
    fn refuses_nul() {
        assert!(refused_reason("src/lib\0.rs").contains("NUL"));
    }

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
    fn os_paths_become_workspace_paths_only_inside_the_root() {
        let root = Path::new("/work/my crate");
        for (given, expected) in [
            ("/work/my crate/src/lib.rs", Some("src/lib.rs")),
            ("src/lib.rs", Some("src/lib.rs")),
            ("./src/./lib.rs", Some("src/lib.rs")),
            ("/work/other/src/lib.rs", None),
            ("/work/my crate", None),
            ("../my crate/src/lib.rs", None),
            ("src/../lib.rs", None),
            ("a\\b.rs", None),
        ] {
            let got = WorkspacePath::under(root, Path::new(given));
            assert_eq!(got.as_deref(), expected, "{given:?}");
        }
    }

    #[test]
    fn deserializing_checks_the_path_too() {
        let ok: WorkspacePath = serde_json::from_str("\"src/main.rs\"").unwrap();
        assert_eq!(serde_json::to_string(&ok).unwrap(), "\"src/main.rs\"");
        assert!(serde_json::from_str::<WorkspacePath>("\"../outside\"").is_err());
    }
}
