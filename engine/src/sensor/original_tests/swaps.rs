//! What `backward-compatible` puts back into a branch slot for one run of
//! the Rust test stage: the files whose test code, or whose say in which
//! tests run, the candidate changed, each as the original tests need it.
//!
//! It reads the repair's start (from its source) and the slot, and writes
//! nothing: `repair/effects.rs` puts the swaps in place, runs the test
//! stage under the search's budget, and restores the candidate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::files::{is_test_target, test_module_files};
use super::manifest::{
    ROOT_BUILD_CONFIGS, build_script_manifest, is_build_config, is_manifest, with_original_targets,
};
use super::with_original_tests;
use crate::language::{Language, StageRole};
use crate::snapshot::{self, ContentSource, DirSource, Snapshot};

/// One file put in place for the original tests' run.
#[derive(Debug)]
pub(crate) struct Swap {
    pub path: String,
    /// The original tests' version; `None` where the file was absent.
    pub original: Option<Vec<u8>>,
    /// The candidate's version, put back after the run.
    pub candidate: Option<Vec<u8>>,
}

/// What the original tests need around a candidate.
#[derive(Debug)]
pub(crate) enum Plan {
    /// The candidate's test code and test-deciding configuration are the
    /// original's: its own measurement runs the original tests.
    Unchanged,
    /// A file whose original tests cannot be put back, with why: the
    /// candidate fails the policy.
    Refused(String),
    /// Put these in place, run the test stage, put the candidate back.
    Swap(Vec<Swap>),
}

/// The plan for the candidate in `slot`, against the repair's `start`
/// realized by `source`. `Err` is an invariant broken (a start file that
/// cannot be read back), naming the file.
pub(crate) fn plan(start: &Snapshot, source: &DirSource, slot: &Path) -> Result<Plan, String> {
    let mut swaps = Vec::new();
    // Read at the first changed Rust file that could be one.
    let mut test_modules: Option<BTreeSet<String>> = None;
    let read_now = |path: &str| {
        snapshot::fsutil::confine(slot, path)
            .ok()
            .and_then(|full| std::fs::read(full).ok())
    };
    let is_build_script = |path: &str| {
        build_script_manifest(path).is_some_and(|manifest| start.entries.contains_key(&manifest))
    };
    for (path, entry) in &start.entries {
        let now = read_now(path);
        if now
            .as_ref()
            .is_some_and(|bytes| crate::digest::blob_digest(bytes) == entry.blob)
        {
            continue;
        }
        // What decides which tests run goes back whole too: cargo's
        // configuration, a package's build script, and a manifest the
        // candidate removed.
        let manifest = is_manifest(path);
        let whole = is_test_target(path)
            || is_build_config(path)
            || is_build_script(path)
            || (manifest && now.is_none())
            || (path.ends_with(".rs") && {
                if test_modules.is_none() {
                    test_modules = Some(start_test_modules(start, source)?);
                }
                test_modules.as_ref().is_some_and(|m| m.contains(path))
            });
        if !whole && (!(path.ends_with(".rs") || manifest) || now.is_none()) {
            // Not test-deciding, or a Rust file the candidate removed: its
            // own build says whether the crate still holds together.
            continue;
        }
        let original = read_start(source, path, entry)?;
        let put = if whole {
            original
        } else {
            let (Ok(was), Some(Ok(candidate))) = (
                std::str::from_utf8(&original),
                now.as_deref().map(std::str::from_utf8),
            ) else {
                continue;
            };
            // A manifest keeps the candidate's dependencies and gets the
            // original's targets, `auto*` keys, features, profiles and
            // members.
            let hybrid = if manifest {
                Ok(with_original_targets(was, candidate))
            } else {
                with_original_tests(was, candidate)
            };
            match hybrid {
                Ok(None) => continue,
                Ok(Some(hybrid)) => hybrid.into_bytes(),
                Err(reason) => return Ok(Plan::Refused(format!("{path}: {reason}"))),
            }
        };
        swaps.push(Swap {
            path: path.clone(),
            original: Some(put),
            candidate: now,
        });
    }
    // A configuration the candidate added where the test stage reads it, or
    // a build script it gave a package, is absent for the run, as it was.
    let build_scripts = start
        .entries
        .keys()
        .filter(|path| is_manifest(path))
        .map(|manifest| match manifest.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/build.rs"),
            None => "build.rs".to_owned(),
        })
        .filter(|script| !start.entries.contains_key(script));
    let added = ROOT_BUILD_CONFIGS
        .iter()
        .map(|path| (*path).to_owned())
        .filter(|path| !start.entries.contains_key(path))
        .chain(build_scripts);
    for path in added {
        if let Some(now) = read_now(&path) {
            swaps.push(Swap {
                path,
                original: None,
                candidate: Some(now),
            });
        }
    }
    Ok(if swaps.is_empty() {
        Plan::Unchanged
    } else {
        Plan::Swap(swaps)
    })
}

/// Whether `stage` is Rust's test stage, the one the original tests run in.
pub(crate) fn rust_test_stage(stage: &str) -> bool {
    Language::Rust
        .stages()
        .iter()
        .any(|def| def.id == stage && def.role == StageRole::Test)
}

fn read_start(source: &DirSource, path: &str, entry: &snapshot::Entry) -> Result<Vec<u8>, String> {
    ContentSource::read(source, path, entry).map_err(|e| format!("{path}: {e}"))
}

/// The out-of-line test module files of the repair's start: every Rust
/// file of `start` handed to the pure [`test_module_files`] (a file that is
/// not UTF-8 declares no module).
fn start_test_modules(start: &Snapshot, source: &DirSource) -> Result<BTreeSet<String>, String> {
    let mut sources = BTreeMap::new();
    for (path, entry) in start.entries.iter().filter(|(p, _)| p.ends_with(".rs")) {
        if let Ok(text) = String::from_utf8(read_start(source, path, entry)?) {
            sources.insert(path.clone(), text);
        }
    }
    Ok(test_module_files(&sources))
}
