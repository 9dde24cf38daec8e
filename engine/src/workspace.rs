//! Where a workspace starts, and what it is: from the directory a command
//! was run in (or was given) up to the project root the user's own tools
//! would use, and the languages whose markers that root holds.
//!
//! Run from `src/`, `cargo check` checks the whole package, and from a
//! member of a cargo workspace, the whole workspace's lock and target: the
//! root is not the directory the user stands in. Discovery walks up to the
//! nearest directory holding any language's markers ([`Language::markers`]:
//! `Cargo.toml`, `pyproject.toml`, `package.json` with `tsconfig.json`).
//! When that is a Cargo manifest it asks cargo itself for the workspace the
//! manifest belongs to (`cargo locate-project --workspace`), so membership,
//! `exclude` and `package.workspace` follow cargo's rules rather than a copy
//! of them; when cargo cannot say (not installed, a manifest it cannot
//! parse), the nearest manifest's directory is the root, and sensing will
//! report the manifest's error there. Only where no rule is left to apply
//! does discovery answer without cargo, sparing a start of cargo on every
//! command ([`own_root`]): the manifest declares `[workspace]` itself, or
//! names no workspace and no directory above it holds a `Cargo.toml`.
//!
//! A root holding the markers of several languages (a Rust crate with a
//! `pyproject.toml` beside it) is a mixed workspace: [`languages`] names
//! them all and each one's stage set runs.
//!
//! Discovery never creates anything: a directory that is in no project is
//! an error naming it, before any `.trellis/` is made.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::language::Language;

/// The manifest that marks a Rust project root.
const CARGO_MANIFEST: &str = "Cargo.toml";

/// Every language's markers, for a person: `Cargo.toml, pyproject.toml, ...`.
fn all_markers() -> String {
    Language::ALL
        .iter()
        .map(|l| l.markers().join(" + "))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why no workspace root could be found.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("{}: not a directory: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error(
        "no project found in {} or any directory above it (looked for {}); \
         run trellis inside a project, or pass its path",
        start.display(),
        all_markers()
    )]
    NoProject { start: PathBuf },
}

/// The workspace root for a command started in `start`.
pub fn discover(start: &Path) -> Result<PathBuf, DiscoverError> {
    let start = start
        .canonicalize()
        .map_err(|source| DiscoverError::Unreadable {
            path: start.to_path_buf(),
            source,
        })?;
    if !start.is_dir() {
        return Err(DiscoverError::NotADirectory { path: start });
    }
    let package = nearest_project_dir(&start).ok_or(DiscoverError::NoProject {
        start: start.clone(),
    })?;
    let manifest = package.join(CARGO_MANIFEST);
    if !manifest.is_file() {
        return Ok(package);
    }
    let above = package
        .ancestors()
        .skip(1)
        .any(|dir| dir.join(CARGO_MANIFEST).exists());
    if std::fs::read_to_string(&manifest).is_ok_and(|text| own_root(&text, above)) {
        return Ok(package);
    }
    Ok(cargo_workspace_root(&package)
        .filter(|root| package.starts_with(root))
        .unwrap_or(package))
}

/// The languages whose markers `root` holds, in [`Language::ALL`] order;
/// empty when it holds none.
pub fn languages(root: &Path) -> Vec<Language> {
    Language::ALL
        .into_iter()
        .filter(|l| l.markers().iter().all(|m| root.join(m).is_file()))
        .collect()
}

/// The nearest directory at or above `start` holding some language's markers.
fn nearest_project_dir(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|dir| !languages(dir).is_empty())
        .map(Path::to_path_buf)
}

/// Whether the manifest `text` is certainly its own workspace's root, by
/// cargo's rules, without asking cargo: it declares `[workspace]` (and
/// names no other root), or it names no workspace and no directory above
/// it holds a manifest (`above`) that could claim it. Otherwise, and for
/// text that is no TOML, cargo decides.
fn own_root(text: &str, above: bool) -> bool {
    let Ok(manifest) = text.parse::<toml::Table>() else {
        return false;
    };
    let names_a_root = manifest
        .get("package")
        .and_then(|package| package.get("workspace"))
        .is_some();
    !names_a_root && (manifest.contains_key("workspace") || !above)
}

/// The directory of the workspace manifest cargo resolves for the package
/// in `package`; `None` when cargo cannot say.
fn cargo_workspace_root(package: &Path) -> Option<PathBuf> {
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["locate-project", "--workspace", "--message-format", "plain"])
        .current_dir(package)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let manifest = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    manifest.parent()?.canonicalize().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn package(name: &str) -> String {
        format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
    }

    #[test]
    fn only_a_manifest_no_rule_can_place_elsewhere_is_its_own_root_without_cargo() {
        let package = "[package]\nname = \"p\"\n";
        assert!(own_root(package, false), "nothing above can claim it");
        assert!(!own_root(package, true), "a manifest above may list it");
        let root = format!("{package}\n[workspace]\nmembers = [\"a\"]\n");
        assert!(own_root(&root, true), "it declares its workspace");
        assert!(
            own_root("[workspace]\nmembers = [\"a\"]\n", true),
            "virtual"
        );
        let pointed = "[package]\nname = \"p\"\nworkspace = \"../w\"\n";
        assert!(
            !own_root(pointed, false),
            "package.workspace names the root"
        );
        assert!(
            !own_root("[package", false),
            "cargo reports what it cannot read"
        );
    }

    #[test]
    fn a_standalone_package_is_its_own_root_as_cargo_says() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "Cargo.toml", &package("p"));
        write(dir.path(), "src/lib.rs", "");
        let root = dir.path().canonicalize().unwrap();
        let above = root
            .ancestors()
            .skip(1)
            .any(|d| d.join(CARGO_MANIFEST).exists());
        assert!(
            !above,
            "the test needs a temporary directory with no manifest above"
        );
        assert_eq!(discover(&root.join("src")).unwrap(), root);
        assert_eq!(cargo_workspace_root(&root), Some(root));
    }

    #[test]
    fn a_subdirectory_of_a_package_finds_the_package() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "Cargo.toml", &package("p"));
        write(dir.path(), "src/lib.rs", "");
        let found = discover(&dir.path().join("src")).unwrap();
        assert_eq!(found, dir.path().canonicalize().unwrap());
    }

    #[test]
    fn a_member_of_a_cargo_workspace_finds_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "Cargo.toml",
            "[workspace]\nmembers = [\"crates/*\"]\n",
        );
        write(dir.path(), "crates/a/Cargo.toml", &package("a"));
        write(dir.path(), "crates/a/src/lib.rs", "");
        let found = discover(&dir.path().join("crates/a/src")).unwrap();
        assert_eq!(found, dir.path().canonicalize().unwrap());
    }

    #[test]
    fn a_package_excluded_from_the_workspace_above_is_its_own_root() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "Cargo.toml",
            "[workspace]\nmembers = []\nexclude = [\"fixture\"]\n",
        );
        write(dir.path(), "fixture/Cargo.toml", &package("fixture"));
        write(dir.path(), "fixture/src/lib.rs", "");
        let found = discover(&dir.path().join("fixture/src")).unwrap();
        assert_eq!(found, dir.path().join("fixture").canonicalize().unwrap());
    }

    #[test]
    fn a_manifest_cargo_cannot_read_still_names_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "Cargo.toml", "[package\n");
        let found = discover(dir.path()).unwrap();
        assert_eq!(found, dir.path().canonicalize().unwrap());
    }

    #[test]
    fn a_directory_in_no_project_is_named_and_nothing_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        fs::create_dir(&notes).unwrap();
        let error = discover(&notes).unwrap_err();
        assert!(matches!(&error, DiscoverError::NoProject { start } if start.ends_with("notes")));
        for marker in [
            "Cargo.toml",
            "pyproject.toml",
            "package.json + tsconfig.json",
        ] {
            assert!(error.to_string().contains(marker), "{error}");
        }
        assert_eq!(fs::read_dir(&notes).unwrap().count(), 0);
    }

    #[test]
    fn a_python_package_is_found_from_its_tests_and_is_python() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "pyproject.toml", "[project]\nname = \"p\"\n");
        write(dir.path(), "tests/test_p.py", "");
        let found = discover(&dir.path().join("tests")).unwrap();
        assert_eq!(found, dir.path().canonicalize().unwrap());
        assert_eq!(languages(&found), [Language::Python]);
    }

    #[test]
    fn package_json_alone_is_no_typescript_project() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "package.json", "{}");
        assert!(languages(dir.path()).is_empty());
        write(dir.path(), "tsconfig.json", "{}");
        assert_eq!(languages(dir.path()), [Language::TypeScript]);
    }

    #[test]
    fn a_crate_with_a_pyproject_beside_it_is_mixed() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "Cargo.toml", &package("p"));
        write(dir.path(), "pyproject.toml", "[project]\nname = \"p\"\n");
        write(dir.path(), "src/lib.rs", "");
        let found = discover(&dir.path().join("src")).unwrap();
        assert_eq!(languages(&found), [Language::Rust, Language::Python]);
    }

    #[test]
    fn a_missing_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let error = discover(&dir.path().join("gone")).unwrap_err();
        assert!(error.to_string().contains("gone"), "{error}");
    }
}
