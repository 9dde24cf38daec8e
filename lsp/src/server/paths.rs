//! Document URIs ↔ the engine's workspace-relative paths.
//!
//! Every path this module hands the engine is a [`WorkspacePath`], checked
//! by the engine's one rule for what may name a workspace file, so a URI
//! that would not be one (a `..` left in it, a NUL) is no file of the
//! workspace rather than a path the engine has to distrust.

use std::path::{Path, PathBuf};

use tower_lsp_server::ls_types::Uri;
use trellis_engine::WorkspacePath;

/// The workspace root and the conversions anchored at it.
#[derive(Clone, Debug)]
pub struct WorkspacePaths {
    root: PathBuf,
}

impl WorkspacePaths {
    pub fn new(root: PathBuf) -> WorkspacePaths {
        WorkspacePaths { root }
    }

    /// The workspace-relative path of a `file:` URI inside the root, with
    /// `/` separators; `None` for other schemes and for files outside.
    pub fn rel_of_uri(&self, uri: &Uri) -> Option<WorkspacePath> {
        if !uri.scheme().as_str().eq_ignore_ascii_case("file") {
            return None;
        }
        self.rel_of_path(&uri.to_file_path()?)
    }

    /// The workspace-relative form of an absolute path inside the root.
    pub fn rel_of_path(&self, path: &Path) -> Option<WorkspacePath> {
        WorkspacePath::from_relative(path.strip_prefix(&self.root).ok()?)
    }

    /// Accepts what a person or client may send for a file: a workspace-relative
    /// path, an absolute path inside the root, or a `file:` URI.
    pub fn rel_of_any(&self, given: &str) -> Option<WorkspacePath> {
        if given.starts_with("file:") {
            return self.rel_of_uri(&given.parse().ok()?);
        }
        let path = Path::new(given);
        if path.is_absolute() {
            self.rel_of_path(path)
        } else {
            self.rel_of_path(&self.root.join(path))
        }
    }

    /// The first part of `rel` (a directory on the way, or the file itself)
    /// that is a symlink on disk, if any.
    pub fn symlink_on_path(&self, rel: &str) -> Option<String> {
        let mut path = self.root.clone();
        let mut end = 0;
        for part in rel.split('/') {
            path.push(part);
            end += part.len();
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Some(rel[..end].to_owned());
            }
            end += 1;
        }
        None
    }

    pub fn absolute(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn uri_of(&self, rel: &str) -> Option<Uri> {
        Uri::from_file_path(self.absolute(rel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> WorkspacePaths {
        WorkspacePaths::new(PathBuf::from("/work/my crate"))
    }

    #[test]
    fn uris_inside_the_root_become_slash_separated_relative_paths() {
        let p = paths();
        let uri = p.uri_of("src/héllo.rs").unwrap();
        assert_eq!(uri.as_str(), "file:///work/my%20crate/src/h%C3%A9llo.rs");
        assert_eq!(p.rel_of_uri(&uri).as_deref(), Some("src/héllo.rs"));
    }

    #[test]
    fn uris_outside_the_root_or_not_files_have_no_relative_path() {
        let p = paths();
        let outside: Uri = "file:///work/other/src/lib.rs".parse().unwrap();
        assert_eq!(p.rel_of_uri(&outside), None);
        let escape: Uri = "file:///work/my%20crate/../other/x.rs".parse().unwrap();
        assert_eq!(p.rel_of_uri(&escape), None);
        let untitled: Uri = "untitled:Untitled-1".parse().unwrap();
        assert_eq!(p.rel_of_uri(&untitled), None);
        assert_eq!(p.rel_of_path(Path::new("/work/my crate")), None);
    }

    /// The engine's path rule is applied at the boundary: a name the engine
    /// would refuse is no workspace file here either.
    #[test]
    fn a_name_the_engine_refuses_is_no_workspace_path() {
        let p = paths();
        assert_eq!(p.rel_of_path(Path::new("/work/my crate/src/a\\b.rs")), None);
        let backslash: Uri = "file:///work/my%20crate/src/a%5Cb.rs".parse().unwrap();
        assert_eq!(p.rel_of_uri(&backslash), None);
    }

    #[test]
    fn any_spelling_of_a_workspace_file_resolves_to_the_same_path() {
        let p = paths();
        for given in [
            "src/lib.rs",
            "./src/lib.rs",
            "/work/my crate/src/lib.rs",
            "file:///work/my%20crate/src/lib.rs",
        ] {
            assert_eq!(
                p.rel_of_any(given).as_deref(),
                Some("src/lib.rs"),
                "{given}"
            );
        }
        assert_eq!(p.rel_of_any("../x.rs"), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_directory_or_file_on_the_way_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        std::fs::write(dir.path().join("src/deep/a.rs"), "").unwrap();
        std::os::unix::fs::symlink("src", dir.path().join("linked")).unwrap();
        std::os::unix::fs::symlink("deep/a.rs", dir.path().join("src/b.rs")).unwrap();
        let p = WorkspacePaths::new(dir.path().to_path_buf());
        assert_eq!(p.symlink_on_path("src/deep/a.rs"), None);
        assert_eq!(p.symlink_on_path("src/new.rs"), None);
        assert_eq!(
            p.symlink_on_path("linked/deep/a.rs").as_deref(),
            Some("linked")
        );
        assert_eq!(p.symlink_on_path("src/b.rs").as_deref(), Some("src/b.rs"));
    }
}
