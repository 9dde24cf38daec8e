//! Which workspace code may use what, checked over the sources and manifests:
//! `trellis_core::digest` is the only code that feeds SHA-256 and
//! `trellis-core` the only crate that depends on `sha2`, so the engine's and
//! the prompt plane's identities cannot drift apart; and only the binary
//! depends on clap, so the libraries take values, not command lines. And no
//! circle of imports between core's own files.

use std::fs;
use std::path::{Path, PathBuf};

use trellis_test_support::source_graph::{circles, file_graph};

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

/// The workspace manifests (other than the root's) with a direct dependency
/// on `dependency`. The workspace crates depend on each other only through
/// these manifests, so a crate absent here cannot pull `dependency` in
/// through another workspace crate that is also absent.
fn dependents(dependency: &str) -> Vec<String> {
    let mut manifests = Vec::new();
    files(
        &workspace_root(),
        &|p| p.file_name().is_some_and(|n| n == "Cargo.toml"),
        &mut manifests,
    );
    let mut found: Vec<String> = manifests
        .iter()
        .map(|p| relative(p))
        .filter(|rel| rel != "Cargo.toml")
        .filter(|rel| {
            let text = fs::read_to_string(workspace_root().join(rel)).unwrap();
            text.lines().any(|l| {
                l.trim_start()
                    .strip_prefix(dependency)
                    .is_some_and(|rest| rest.trim_start().starts_with(['.', '=']))
            })
        })
        .collect();
    found.sort();
    found
}

#[test]
fn only_the_core_crate_depends_on_sha2() {
    assert_eq!(dependents("sha2"), ["core/Cargo.toml"]);
}

#[test]
fn only_the_binary_depends_on_clap() {
    assert_eq!(dependents("clap"), ["lsp/Cargo.toml"]);
}

/// No circle of imports between the files of `core/src/`
/// (`trellis_test_support::source_graph`).
#[test]
fn the_core_files_import_each_other_without_a_cycle() {
    let graph = file_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph.contains_key("crate") && graph.contains_key("digest"));
    let cycles: Vec<String> = circles(&graph).iter().map(|c| c.join(" -> ")).collect();
    assert!(
        cycles.is_empty(),
        "import cycles between core files: {cycles:#?}"
    );
}
