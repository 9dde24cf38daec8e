//! One canonical encoder: `trellis_core::digest` is the only code in the
//! workspace that feeds SHA-256, and the only crate that depends on `sha2`,
//! so the engine's and the prompt plane's identities cannot drift apart.

use std::fs;
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Workspace files with the given extension or name, outside build output
/// and the fixture crates (separate workspaces, never part of Trellis).
fn files(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if !matches!(
                name.as_ref(),
                "target" | "fixtures" | "node_modules" | "examples"
            ) && !name.starts_with('.')
            {
                files(&path, keep, out);
            }
        } else if keep(&path) {
            out.push(path);
        }
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn only_the_core_digest_module_feeds_sha256() {
    let mut sources = Vec::new();
    files(
        &workspace_root(),
        &|p| p.extension().is_some_and(|e| e == "rs"),
        &mut sources,
    );
    let this_test = Path::new(file!()).to_string_lossy().into_owned();
    let offenders: Vec<String> = sources
        .iter()
        .map(|p| relative(p))
        .filter(|rel| rel != "core/src/digest.rs" && *rel != this_test)
        .filter(|rel| {
            let text = fs::read_to_string(workspace_root().join(rel)).unwrap();
            text.contains("sha2::") || text.contains("Sha256")
        })
        .collect();
    assert!(
        sources.len() > 50,
        "the walk found the workspace sources: {}",
        sources.len()
    );
    assert!(
        offenders.is_empty(),
        "a second SHA-256 encoder: {offenders:?}; use trellis_core::digest::CanonicalHasher"
    );
}

#[test]
fn only_the_core_crate_depends_on_sha2() {
    let mut manifests = Vec::new();
    files(
        &workspace_root(),
        &|p| p.file_name().is_some_and(|n| n == "Cargo.toml"),
        &mut manifests,
    );
    let dependents: Vec<String> = manifests
        .iter()
        .map(|p| relative(p))
        .filter(|rel| rel != "Cargo.toml")
        .filter(|rel| {
            let text = fs::read_to_string(workspace_root().join(rel)).unwrap();
            text.lines().any(|l| l.trim_start().starts_with("sha2"))
        })
        .collect();
    assert_eq!(dependents, ["core/Cargo.toml"]);
}
